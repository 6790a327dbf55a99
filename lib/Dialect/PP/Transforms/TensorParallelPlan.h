//===- TensorParallelPlan.h - Pipeline x tensor x data planning -*- C++ -*-===//
//
// --pp-partition with tp= other than 1: every stage of a pipeline runs on a
// tensor-parallel group of t GPUs of one kind on one node, the Megatron
// groups of --pp-tensor-parallel split over them
// (pp::onnx::findTensorParallelGroups). Internal to --pp-partition.
//
// Cost of a node v on a stage of degree t (one micro-batch; `dev` one GPU of
// the group, link = the group's slowest intra-node link):
//   forward(v)  = F(v, dev) / t      if a group splits v, else F(v, dev)
//               + ring(bytes(row result), t)          if v is a group's row
//   backward(v) = B(v, dev) / t      if a group splits v, else B(v, dev)
//               + sum ring(bytes(column input), t)    if v is a group's row
//   ring(b, t)  = 2 (t - 1) / t * b / bandwidth(link) + 2 (t - 1) latency(link)
//                 (pp::cluster::ringAllReduceSeconds)
// so ops the groups do not split (embeddings, norms, the LM head) are
// replicated whole on every GPU of the group. Memory per GPU: the weights,
// gradients and optimizer state of split weights / t, the activations of the
// split ops but the row / t (the row's output is whole after its
// all-reduce), everything else whole (Partitioner.h's splitWeightBytes and
// splitActivationBytes). A group's ops share a stage (colocated). When
// stages of one pipeline have different degrees (t1 < t2 ...), memory counts
// as split only what every degree in use splits; times are exact per degree.
//
// The partitioner minimises the bottleneck per candidate; the event-driven
// simulator (pp::schedule::simulate) then runs the schedule with each
// stage's forward and backward (their halves as input and weight gradient
// for split-backward schedules) and the links between the groups' first
// GPUs, which gives the predicted iteration time and peak memory per GPU.
// With dp replicas, each stage ends with a ring all-reduce of its gradients
// per GPU (1/t of the split ones) over dp, on the slowest link between its
// worker and the others (as --pp-plan-report models data parallelism); the
// slowest worker's iteration is the plan's.
// tp=auto enumerates, per virtual worker, a degree for each run of GPUs of
// one kind on one node (the divisors of its size up to 8), or, beyond 64
// combinations, one degree for the whole worker; it keeps the candidate of
// the least predicted iteration time among those that fit memory.
//
//===----------------------------------------------------------------------===//

#ifndef PP_LIB_DIALECT_PP_TRANSFORMS_TENSORPARALLELPLAN_H
#define PP_LIB_DIALECT_PP_TRANSFORMS_TENSORPARALLELPLAN_H

#include "pp/Analysis/CostModel.h"
#include "pp/Cluster/Cluster.h"
#include "pp/Dialect/PP/Transforms/Passes.h"
#include "pp/Partition/Partitioner.h"
#include "pp/Schedule/Schedule.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

#include <optional>
#include <string>
#include <vector>

namespace pp::pipeline {

/// A parsed tp= option.
struct TensorParallelRequest {
  bool automatic = false;
  /// One degree: every stage; several: one per stage.
  std::vector<unsigned> degrees;
  /// Whether it asks for anything but tp=1.
  bool active() const {
    return automatic || degrees.size() != 1 || degrees.front() != 1;
  }
};

/// Parses "1", "4", "4,2,2" or "auto"; nullopt when malformed.
std::optional<TensorParallelRequest> parseTensorParallel(llvm::StringRef text);

/// What --pp-partition has built when it hands over to the planner.
struct TensorParallelPlanInput {
  mlir::ModuleOp module;
  mlir::func::FuncOp func;
  const PartitionPassOptions *options = nullptr;
  const cluster::Cluster *cluster = nullptr;
  /// Device indices of each virtual worker (data-parallel replica).
  std::vector<std::vector<int>> workers;
  /// Nodes, edges, weights and activations (no timeFn).
  partition::PartitionGraph graph;
  std::vector<mlir::Operation *> nodeOps;
  partition::PartitionOptions searchOptions;
  const CostModel *costModel = nullptr;
  schedule::ScheduleKind kind = schedule::ScheduleKind::OneFOneB;
  double stateFactor = 0;
  int64_t updateEvery = 0;
  /// Lines for the report before the plan (policy notes).
  std::vector<std::string> notes;
};

/// Plans, annotates the module (stages, #pp.plan with the largest degree,
/// `pp.tensor_parallel_stages`) and writes the report and plan-json.
mlir::LogicalResult planTensorParallel(TensorParallelPlanInput &input,
                                       const TensorParallelRequest &request);

} // namespace pp::pipeline

#endif // PP_LIB_DIALECT_PP_TRANSFORMS_TENSORPARALLELPLAN_H
