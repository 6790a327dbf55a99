//===- Program.h - The program table of a generated program -----*- C++ -*-===//
//
// What the generated program's table (pp::rt::ProgramInfo, Program.h of the
// runtime) says about a pipeline module, read from the module before its
// stage functions are converted, and how it becomes EmitC once they are.
//
//===----------------------------------------------------------------------===//
#ifndef LIB_CONVERSION_PPTOEMITC_PROGRAM_H
#define LIB_CONVERSION_PPTOEMITC_PROGRAM_H

#include "pp/Conversion/PPToEmitC/PPToEmitC.h"
#include "pp/Runtime/Kernels.h"
#include "pp/Runtime/ScheduleKinds.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringMap.h"

#include <string>
#include <vector>

namespace pp::emitc_lowering {

struct GlobalEntry {
  std::string name;
  rt::DType dtype;
  std::vector<int64_t> shape;
  bool trainable;
  int64_t dataOffset;
  /// The first stage that writes it, else the first that reads it.
  int64_t ownerStage = -1;
};

struct ConstantEntry {
  rt::DType dtype;
  std::vector<int64_t> shape;
  int64_t dataOffset;
};

/// A step input of the generated program (the whole mini-batch).
struct InputEntry {
  std::string name;
  rt::DType dtype = rt::DType::F32;
  std::vector<int64_t> shape;
  /// Exclusive bound of random integer inputs (the size of the dim they
  /// index).
  int64_t randomBound = 10;
};

/// A step output, per micro-batch.
struct OutputEntry {
  std::string name;
  std::string combine;
  rt::DType dtype = rt::DType::F32;
  std::vector<int64_t> shape;
  /// pp.output's class_axis (a classifier's logits), else -1.
  int64_t classAxis = -1;
};

/// A pp.recv of a stage function, for receive prefetch.
struct ReceiveEntry {
  int64_t peerStage, tag;
  /// kFunctionMicroBatch: the function's; else the constant micro-batch.
  int64_t microBatch;
  rt::DType dtype = rt::DType::F32;
  std::vector<int64_t> shape;
};

struct FunctionEntry {
  std::string name;
  int64_t stage;
  kinds::Phase phase;
  /// The arena of --pp-memory-plan (pp.arena_bytes).
  int64_t arenaBytes;
  /// Its pp.recv ops in program order.
  std::vector<ReceiveEntry> receives;
};

struct ActionEntry {
  kinds::ActionKind kind;
  /// Index into ProgramTable::functions; -1 for an action with no code.
  int function;
  int64_t stage;
  int64_t microBatch;
  /// Weight-versioned schedules: the version of the stage's weights read,
  /// and I-TiMePReSt's blend with a newer one (-1: none).
  int64_t weightVersion = 0;
  int64_t blendVersion = -1;
  double blendFactor = 0;
};

/// The table of a generated program, and its data file: the initial values
/// of the globals (in module order) and of the constants (in the order the
/// converted functions use them), each 256-byte aligned.
struct ProgramTable {
  std::string modelName;
  /// The module's pp.lr_schedule (--pp-optimizer's), or empty.
  std::string lrSchedule;
  kinds::ScheduleKind scheduleKind;
  int64_t numStages = 0;
  int64_t microBatches = 0;
  /// Data-parallel replicas of the pipeline (the plan's data_parallel).
  int64_t dataParallel = 1;
  /// Devices of each stage's tensor-parallel group (the shard.grid), and
  /// per stage in a stage-wise mix (1 or tensorParallel; empty: all
  /// tensorParallel).
  int64_t tensorParallel = 1;
  std::vector<int64_t> stageTensorParallel;
  /// The plan's staleness and wave (Wave Synchronous Parallel).
  int64_t staleness = -1;
  int64_t wave = 1;
  /// Micro-batches per update of a weight-versioned schedule; 0: one
  /// update a step.
  int64_t updateEvery = 0;
  std::vector<std::string> deviceNames;
  /// The devices of replicas 1 .. dataParallel-1 (pp.replica_devices).
  std::vector<std::string> replicaDeviceNames;
  std::vector<int64_t> plannedPeakBytes;
  std::vector<GlobalEntry> globals;
  llvm::StringMap<int> globalIds;
  std::vector<ConstantEntry> constants;
  std::vector<InputEntry> inputs;
  std::vector<OutputEntry> outputs;
  std::vector<FunctionEntry> functions;
  /// The globals each stage reads or writes, by id.
  std::vector<std::vector<int>> stageGlobals;
  /// Each device's actions, in order.
  std::vector<std::vector<ActionEntry>> schedule;
  /// The schedules of replicas 1 .. dataParallel-1 when the plan places
  /// each replica's stages on its own (heterogeneous virtual workers).
  std::vector<std::vector<std::vector<ActionEntry>>> replicaSchedules;
  /// Weight-versioned schedules: each device's pp.stream split into the
  /// warm-up, the steady step and the cool-down (empty: none).
  struct StreamEntry {
    std::vector<ActionEntry> prologue, body, epilogue;
    int64_t minSteps = 2;
  };
  std::vector<StreamEntry> stream;
  /// (sender stage, receiver stage) of every pp.send, once each.
  std::vector<std::pair<int64_t, int64_t>> stageLinks;
  /// Whether every device pair's messages arrive in the order they are
  /// sent, in every replica (findMessageOutOfOrder): then a transport
  /// without tags (NCCL) needs no message headers.
  bool messagesInSendOrder = false;
  std::string dataBytes;

  /// Appends `bytes` to the data file; returns their offset.
  int64_t appendData(const void *bytes, int64_t size);
};

/// Reads the table of a scheduled, memory-planned pipeline module (before
/// its stage functions are converted); the globals' initial values go to
/// its data. Fails after a diagnostic naming the pass a missing piece
/// comes from.
mlir::FailureOr<ProgramTable> collectProgramTable(mlir::ModuleOp module);

/// Completes `module`, whose stage functions are converted, into the
/// program: numbers the globals and constants that the converted functions
/// name by symbol and by value (appending the constants to the table's
/// data), replaces everything that is not EmitC by the includes, the
/// function filling the table and main().
mlir::LogicalResult buildProgram(mlir::ModuleOp module, ProgramTable &table,
                                 const EmitProgramOptions &options);

} // namespace pp::emitc_lowering

#endif // LIB_CONVERSION_PPTOEMITC_PROGRAM_H
