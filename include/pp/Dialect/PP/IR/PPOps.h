//===- PPOps.h - The pp dialect and its operations ------------*- C++ -*-===//
#ifndef PP_DIALECT_PP_IR_PPOPS_H
#define PP_DIALECT_PP_IR_PPOPS_H

#include "pp/Cluster/Cluster.h"
#include "pp/Runtime/Kernels.h"
#include "pp/Runtime/ScheduleKinds.h"
#include "pp/Schedule/Schedule.h"

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include <map>

#define GET_ATTRDEF_CLASSES
#include "pp/Dialect/PP/IR/PPAttrs.h.inc"

#include "pp/Dialect/PP/IR/PPOpsDialect.h.inc"

#define GET_OP_CLASSES
#include "pp/Dialect/PP/IR/PPOps.h.inc"

namespace pp::pipeline {

/// The pp.schedule of `replica` in `module`: the one schedule, or with
/// per-replica placements the one marked `replica`; otherwise null after an
/// error at the module that says `user` needs one.
ScheduleOp lookupSchedule(mlir::ModuleOp module, llvm::StringRef user,
                          int64_t replica = 0);
/// The schedule of `replica` (marked with it), else the one shared by all
/// replicas; null when there is neither.
ScheduleOp getSchedule(mlir::ModuleOp module, int64_t replica);

/// The function `name` of `module` that a pass works on; otherwise null
/// after an error at the module ("no function @name " + `purpose`).
mlir::func::FuncOp lookupFunction(mlir::ModuleOp module, llvm::StringRef name,
                                  llvm::StringRef purpose);

/// `op` in the schedule library's form (pp/Schedule/Schedule.h), for the
/// simulator and the memory plan.
schedule::Schedule toLibrarySchedule(ScheduleOp op);
/// The window of min_steps + 1 steps of `op` (a stream of `plan`'s
/// schedule), its versions counted from the window's start.
schedule::Schedule toLibrarySchedule(StreamOp op, PlanAttr plan);
/// `op` as the library's stream (prologue, body and epilogue per device).
schedule::StreamSchedule toStreamSchedule(StreamOp op, PlanAttr plan);

/// The stage functions the actions of `op` run, by stage and phase.
std::map<std::pair<int64_t, kinds::Phase>, mlir::Operation *>
getStageFunctions(ScheduleOp op);

//===----------------------------------------------------------------------===//
// The pp.* attributes the passes read and write (declared by the dialect's
// discardableAttrs, checked by its verifiers).
//===----------------------------------------------------------------------===//

/// The module's pipeline plan (pp.plan), or null before one is set.
PlanAttr getPlan(mlir::ModuleOp module);
void setPlan(mlir::ModuleOp module, PlanAttr plan);

/// The cluster the module is planned for (pp.cluster), or null before
/// --pp-partition sets it.
ClusterAttr getCluster(mlir::ModuleOp module);
void setCluster(mlir::ModuleOp module, ClusterAttr cluster);

/// Micro-batches per step when neither an option nor a plan says.
constexpr int64_t kDefaultMicroBatches = 8;
/// A pass's `microbatches` option: unset (empty) means the plan's
/// micro-batches, else the default; a set value must be one count in
/// 1..kMaxMicroBatches. Fails with an error on `module` naming `passName`.
mlir::FailureOr<int64_t> resolveMicroBatches(mlir::ModuleOp module,
                                             llvm::ArrayRef<int64_t> option,
                                             llvm::StringRef passName);

/// The pipeline stage of an op or stage function (pp.stage).
std::optional<int64_t> getStage(mlir::Operation *op);
void setStage(mlir::Operation *op, int64_t stage);
void removeStage(mlir::Operation *op);

/// The op that seeds the loss gradient (pp.loss_seed).
bool isLossSeed(mlir::Operation *op);
void setLossSeed(mlir::Operation *op);
void removeLossSeed(mlir::Operation *op);

/// A forward op cloned into the backward by --pp-recompute (pp.recompute).
bool isRecomputed(mlir::Operation *op);
void setRecomputed(mlir::Operation *op);

/// An update op that every stage runs on its own copy of the state it
/// writes (pp.every_stage).
bool isEveryStage(mlir::Operation *op);
void setEveryStage(mlir::Operation *op);

/// The part of a stage's step a stage function holds (pp.phase).
std::optional<kinds::Phase> getPhase(mlir::Operation *func);
void setPhase(mlir::Operation *func, kinds::Phase phase);

/// --pp-memory-plan: arena offsets of an op's results (pp.offsets), the
/// arena of a stage function (pp.arena_bytes) and the planned peak bytes per
/// device of the module (pp.planned_peak_bytes).
mlir::DenseI64ArrayAttr getOffsets(mlir::Operation *op);
void setOffsets(mlir::Operation *op, llvm::ArrayRef<int64_t> offsets);
/// The offset of an optimizer step's result computed in place, in the
/// storage of the global it updates (pp::inPlaceGlobalUpdate).
constexpr int64_t kInPlaceOffset = -2;
/// A train.global_write of a value computed in its global's storage
/// (pp.in_place): code generation emits nothing for it.
bool isInPlaceWrite(mlir::Operation *op);
void setInPlaceWrite(mlir::Operation *op);
/// The activation fused into an op's first result (pp.activation,
/// --pp-fuse-elementwise): Identity when there is none.
pp::rt::UnaryKind getActivation(mlir::Operation *op);
void setActivation(mlir::Operation *op, pp::rt::UnaryKind kind);
/// Whether the kernel of `op` can apply `kind` to its first result: Relu
/// on onnx.Conv and onnx.BatchNormalization.
bool canFuseActivation(mlir::Operation *op, pp::rt::UnaryKind kind);
std::optional<int64_t> getArenaBytes(mlir::Operation *func);
void setArenaBytes(mlir::Operation *func, int64_t bytes);
mlir::DenseI64ArrayAttr getPlannedPeakBytes(mlir::ModuleOp module);
/// pp.tensor_parallel_stages: the tensor-parallel degree of each stage
/// (--pp-partition tp=; planned, not executed).
mlir::DenseI64ArrayAttr getTensorParallelStages(mlir::ModuleOp module);
void setTensorParallelStages(mlir::ModuleOp module,
                             llvm::ArrayRef<int64_t> degrees);
/// pp.replica_devices: device names of data-parallel replicas 1 .. N-1
/// (replica 0's are the plan's stage_devices), D per replica.
mlir::ArrayAttr getReplicaDevices(mlir::ModuleOp module);
void setReplicaDevices(mlir::ModuleOp module,
                       llvm::ArrayRef<std::string> names);
void setPlannedPeakBytes(mlir::ModuleOp module, llvm::ArrayRef<int64_t> bytes);
/// pp.planned_busy_ns: each device's simulated compute time in a drained
/// step (--pp-plan-report), or null.
mlir::DenseI64ArrayAttr getPlannedBusyNanos(mlir::ModuleOp module);
void setPlannedBusyNanos(mlir::ModuleOp module, llvm::ArrayRef<int64_t> nanos);

/// The names of the step's inputs and outputs (pp.input_names,
/// pp.output_names), set by --pp-split-stages.
mlir::ArrayAttr getInputNames(mlir::ModuleOp module);
mlir::ArrayAttr getOutputNames(mlir::ModuleOp module);
void setInputOutputNames(mlir::ModuleOp module,
                         llvm::ArrayRef<mlir::Attribute> inputs,
                         llvm::ArrayRef<mlir::Attribute> outputs);

/// Argument and result attributes of functions: the micro-batch index of a
/// stage function (pp.micro_batch), the loss result (pp.loss) and the
/// gradient of a global (pp.grad_of).
void setMicroBatchArg(mlir::FunctionOpInterface func, unsigned index);
bool isLossResult(mlir::FunctionOpInterface func, unsigned index);
void setLossResult(mlir::FunctionOpInterface func, unsigned index);
/// The pp.loss entry of a result attribute dictionary.
mlir::NamedAttribute getLossResultAttr(mlir::MLIRContext *context);
/// The class dim of a classifier's logits result (pp.class_axis, set by
/// --pp-add-loss), or null.
mlir::IntegerAttr getClassAxis(mlir::FunctionOpInterface func, unsigned index);
mlir::NamedAttribute getClassAxisResultAttr(mlir::MLIRContext *context,
                                            int64_t axis);
/// The label a classifier's loss skips (pp.ignore_index on its logits
/// result, set by --pp-add-loss), or null.
mlir::IntegerAttr getIgnoreIndex(mlir::FunctionOpInterface func,
                                 unsigned index);
mlir::NamedAttribute getIgnoreIndexResultAttr(mlir::MLIRContext *context,
                                              int64_t label);
mlir::FlatSymbolRefAttr getGradOf(mlir::FunctionOpInterface func,
                                  unsigned index);
/// The pp.grad_of entry of a result attribute dictionary.
mlir::NamedAttribute getGradOfResultAttr(mlir::FlatSymbolRefAttr global);

/// The step counter global --pp-optimizer creates.
constexpr llvm::StringLiteral kStepCounterGlobal = "pp.step";

} // namespace pp::pipeline

#endif // PP_DIALECT_PP_IR_PPOPS_H
