//===- InputLimits.h - Limits on what the tools read ------------*- C++ -*-===//
//
// Every bound the tools put on their inputs (file sizes, JSON nesting,
// tensor sizes), in one place, and the helpers that enforce them: reading a
// file that must be a regular file of bounded size (a FIFO or a device such
// as /dev/zero is never read), and parsing JSON of bounded nesting depth
// (llvm::json's parser is recursive).
//
//===----------------------------------------------------------------------===//

#ifndef PP_SUPPORT_INPUTLIMITS_H
#define PP_SUPPORT_INPUTLIMITS_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cstdint>
#include <memory>

namespace pp::limits {

constexpr uint64_t kMiB = uint64_t(1) << 20;
constexpr uint64_t kGiB = uint64_t(1) << 30;

/// An .onnx model: protobuf parses at most 2 GiB - 1 (larger models keep
/// their weights as external data).
constexpr uint64_t kMaxModelFileBytes = 2 * kGiB - 1;
/// An .mlir or MLIR bytecode input.
constexpr uint64_t kMaxMLIRFileBytes = 16 * kGiB;
/// One external-data file of an ONNX model.
constexpr uint64_t kMaxExternalDataFileBytes = 256 * kGiB;
/// A cluster description (.json).
constexpr uint64_t kMaxClusterFileBytes = 16 * kMiB;
/// A measured per-op profile (.json).
constexpr uint64_t kMaxProfileFileBytes = 256 * kMiB;
/// A .npy input of pp-interpret.
constexpr uint64_t kMaxNpyFileBytes = 64 * kGiB;
/// A measured time in ms that a profile or a measured log gives (an op's
/// forward or backward, a step, a stage's busy time): about 11.6 days. With
/// it, the sums the planners form over every op, micro-batch and stage stay
/// finite (1.7e308 ms, or 1e400 read as infinity, would make an infinite
/// plan).
constexpr double kMaxMeasuredMs = 1e9;
/// Nesting depth of arrays and objects in a JSON input.
constexpr unsigned kMaxJSONNesting = 64;

/// Rank of one tensor the importer accepts: also the longest shape operand
/// (of Expand, Reshape, Tile, ConstantOfShape) whose values are not known
/// before ONNX's shape inference makes a tensor of that rank.
constexpr int64_t kMaxRank = 64;
/// A dim of a value an upgraded (older opset) model declares: ONNX's shape
/// inference, which the upgrade runs, walks a SAME-padded conv's or pool's
/// input dims one stride at a time (2^31 - 1).
constexpr int64_t kMaxUpgradedDim = (int64_t(1) << 31) - 1;
/// Elements of one tensor the importer accepts (2^40).
constexpr int64_t kMaxTensorElements = int64_t(1) << 40;
/// Bytes of one tensor the importer accepts (1 TiB).
constexpr int64_t kMaxTensorBytes = int64_t(1) << 40;
/// Elements of one constant the importer builds to decompose an op (an
/// interpolation or prefix-sum matrix, a mask, an index range): 2^26.
constexpr int64_t kMaxBuiltConstantElements = int64_t(1) << 26;
/// Bytes of one tensor the reference interpreter allocates (64 GiB).
constexpr int64_t kMaxInterpreterTensorBytes = int64_t(64) << 30;
/// Bytes of all values and globals of a module the planners size (16 TiB),
/// and micro-batches per step (2^16): with these, every byte count the cost
/// model, partitioner, recompute and memory plan form (sums over values,
/// times micro-batches in flight, times 64 stages) stays below 2^63.
constexpr int64_t kMaxPlannedBytes = int64_t(1) << 44;
constexpr int64_t kMaxMicroBatches = int64_t(1) << 16;

/// Reads `path`, which must be a regular file (after symlinks) of at most
/// `maxBytes` bytes. `what` names the file in errors ("cluster file").
llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>>
readRegularFile(llvm::StringRef path, uint64_t maxBytes, llvm::StringRef what,
                bool isText = false);

/// Parses JSON whose arrays and objects nest at most `maxDepth` deep; the
/// depth is checked before llvm::json's recursive parser runs.
llvm::Expected<llvm::json::Value>
parseBoundedJSON(llvm::StringRef text, unsigned maxDepth = kMaxJSONNesting);

} // namespace pp::limits

#endif // PP_SUPPORT_INPUTLIMITS_H
