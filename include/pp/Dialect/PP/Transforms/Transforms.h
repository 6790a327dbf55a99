//===- Transforms.h - Pipeline planning as functions ------------*- C++ -*-===//
//
// What each planning pass does, as a function over a module that tests and
// tools can call without a pass manager. The passes of Passes.td are thin
// adapters over these; the options are the passes' own (Passes.h.inc).
// Each reports its errors on the module and returns failure.
//
//===----------------------------------------------------------------------===//

#ifndef PP_DIALECT_PP_TRANSFORMS_TRANSFORMS_H
#define PP_DIALECT_PP_TRANSFORMS_TRANSFORMS_H

#include "pp/Dialect/PP/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace pp::pipeline {

/// --pp-partition: a stage for every forward op of the training step.
mlir::LogicalResult partitionStages(mlir::ModuleOp module,
                                    const PartitionPassOptions &options);

/// --pp-recompute: forward ops cloned into the backward, by policy.
mlir::LogicalResult planRecomputation(mlir::ModuleOp module,
                                      const RecomputePassOptions &options);

/// --pp-split-stages: one function per stage and phase, with send/recv.
mlir::LogicalResult splitStages(mlir::ModuleOp module,
                                const SplitStagesPassOptions &options);

/// --pp-materialize-schedule: the per-device action lists as a pp.schedule.
mlir::LogicalResult
materializeSchedule(mlir::ModuleOp module,
                    const MaterializeSchedulePassOptions &options);

/// --pp-verify-schedule (and the end of --pp-schedule): runs every device's
/// actions by the pipelined interpreter's rule for messages, stashes and
/// gradient sums, without kernels; fails with the stuck actions (device,
/// action, the recv and where its send is) when the order would deadlock.
mlir::LogicalResult verifyScheduleMessageOrder(mlir::ModuleOp module);

/// --pp-choose-schedule: the pp-compile pipeline of `schedule` with
/// `options`' compile options (`final`: with its report, emit-dir and
/// plan-dir; else with no output). Errors go to `errors`.
mlir::LogicalResult
buildCandidatePipeline(const pp::ChooseSchedulePassOptions &options,
                       pp::kinds::ScheduleKind schedule, bool final,
                       mlir::OpPassManager &pm, llvm::raw_ostream &errors);

/// --pp-choose-schedule: runs each candidate's pipeline on a copy of
/// `module`, then the fastest that compiles on `module` itself through
/// `runPipeline` (the pass's).
mlir::LogicalResult
chooseSchedule(mlir::ModuleOp module,
               const pp::ChooseSchedulePassOptions &options,
               llvm::function_ref<mlir::LogicalResult(mlir::OpPassManager &,
                                                      mlir::ModuleOp)>
                   runPipeline);

/// The first message of the schedule (of any replica) that its receiver
/// takes at another position among the messages of its device pair than its
/// sender gives it; none when every pair's messages arrive in the order
/// they are sent, so a transport without tags (NCCL) matches them by order.
/// Failure (with a diagnostic) when the schedule does not verify.
mlir::FailureOr<std::optional<std::string>>
findMessageOutOfOrder(mlir::ModuleOp module);

/// --pp-fuse-elementwise: Relus into the convolution or batch norm that
/// writes their only input (pp.activation), then trees of elementwise ops
/// into pp.fused kernels.
void fuseElementwise(mlir::func::FuncOp func, bool activations = true);

/// --pp-fold-transposes: 2-D Transposes into the transA / transB of the
/// GEMMs that read or write them (a MatMul of a transposed weight becomes a
/// Gemm).
void foldTransposes(mlir::func::FuncOp func);

/// --pp-memory-plan: arena offsets and the planned peak of each device.
mlir::LogicalResult planStageMemory(mlir::ModuleOp module,
                                    const MemoryPlanPassOptions &options);

/// The cluster a pass plans for: the module's pp.cluster (--pp-partition
/// sets it), else the pass's own cluster= option `spec` parsed; nullopt
/// when neither is given. Fails with an error from `emitError` when `spec`
/// does not parse, or names another cluster than the module's (the error
/// starts with `passName` and names both).
mlir::FailureOr<std::optional<cluster::Cluster>>
resolveCluster(mlir::ModuleOp module, llvm::StringRef spec,
               llvm::StringRef passName,
               llvm::function_ref<mlir::InFlightDiagnostic()> emitError);

/// --pp-plan-report: the simulated plan as text, plan.json and timelines.
mlir::LogicalResult writePlanReport(mlir::ModuleOp module,
                                    const PlanReportPassOptions &options);

} // namespace pp::pipeline

#endif // PP_DIALECT_PP_TRANSFORMS_TRANSFORMS_H
