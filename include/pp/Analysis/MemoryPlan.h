//===- MemoryPlan.h - Static buffer plan of a stage function ----*- C++ -*-===//
//
// Every tensor a straight-line stage function computes gets an offset in one
// arena, chosen at compile time from the values' live ranges (definition to
// last use): values that are never live at the same time share bytes.
// Placement is greedy by decreasing size at the lowest free offset (the
// arena planners of TFLite and XLA do the same), aligned for GPU access.
// Reads of globals and constants are not in the arena (they live in the
// model's state), nor are stashed values and gradient sums (pp.unstash and
// pp.accumulated read the runtime's held buffers in place; the stash is
// counted per micro-batch by the schedule). Nor are the results of
// optimizer steps that update their global in place (inPlaceGlobalUpdate):
// the step writes the global's storage, as PyTorch's optimizers do, instead
// of copying the old value in and the new one back. A reshape (Reshape,
// Flatten, Squeeze, Unsqueeze, Identity) of a planned value is a view: it
// shares that value's offset, whose live range grows to the view's last
// use, so its copy has nothing to do (neither side may be computed in a
// held buffer, a stash's or a gradient sum's).
//
//===----------------------------------------------------------------------===//
#ifndef PP_ANALYSIS_MEMORYPLAN_H
#define PP_ANALYSIS_MEMORYPLAN_H

#include "mlir/IR/Block.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

#include <cstdint>

namespace pp {

struct MemoryPlan {
  /// Byte offset of every planned value in the arena.
  llvm::DenseMap<mlir::Value, int64_t> offsets;
  /// Size of the arena the offsets need.
  int64_t arenaBytes = 0;
  /// The most bytes live at one moment: no plan can do with less.
  int64_t peakLiveBytes = 0;
  /// Bytes the values would take without reuse.
  int64_t totalBytes = 0;
  /// Results computed in the storage of the global they update.
  llvm::DenseSet<mlir::Value> inPlace;
  /// Reshapes that share the bytes of a planned value: view -> the value
  /// whose interval holds them (both have the same offset).
  llvm::DenseMap<mlir::Value, mlir::Value> views;
};

/// Alignment of every buffer in the arena.
constexpr int64_t kArenaAlignment = 256;

/// Plans the buffers of the values `block`'s ops define (op results, in
/// order). Values defined inside an op's regions (the body of a pp.fused
/// kernel) get none; a value used inside a region lives until the op that
/// holds the region.
MemoryPlan planMemory(mlir::Block &block);

/// The train.global_write that stores `result` of an optimizer step
/// (train.sgd's new parameter or momentum buffer, train.adam's new
/// parameter, m or v) when the step may compute it in the storage of that
/// global: the operand it updates is an onnx.global_read of the global in
/// the same block, the write (in the same block) is the result's only use,
/// and no value read from the global is used after the step before the
/// write, nor is the global read or written in between. Null otherwise.
mlir::Operation *inPlaceGlobalUpdate(mlir::OpResult result);

} // namespace pp

#endif // PP_ANALYSIS_MEMORYPLAN_H
