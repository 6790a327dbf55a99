//===- Passes.td - Passes over imported onnx models --------*- tablegen -*-===//
#ifndef PP_DIALECT_ONNX_TRANSFORMS_PASSES_TD
#define PP_DIALECT_ONNX_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def ModelSummaryPass : Pass<"pp-model-summary", "mlir::ModuleOp"> {
  let summary = "Print ops, parameters and forward FLOPs of an imported model";
  let description = [{
    Counts ops by name, the elements and bytes of trainable parameters, state
    and constants (`onnx.global`s), and the forward FLOPs of every op that
    implements `CostOpInterface`. Prints a table to stdout; the IR is
    unchanged.
  }];
  let options = [
    Option<"outputFile", "output", "std::string", "\"-\"",
           "Where to write the summary ('-' for stdout)">,
  ];
  let dependentDialects = ["pp::onnx::ONNXDialect"];
}

def VerifyStaticShapesPass : Pass<"pp-verify-static-shapes", "mlir::ModuleOp"> {
  let summary = "Fail unless every tensor type in the module is static";
  let description = [{
    Later passes (cost model, memory planning, code generation) need static
    shapes; this pass reports the first op or argument with a dynamic or
    unranked tensor type at its location.
  }];
}

def TensorParallelPass : Pass<"pp-tensor-parallel", "mlir::ModuleOp"> {
  let summary = "Annotate Megatron tensor-parallel shardings (shard dialect)";
  let description = [{
    Declares `shard.grid @<grid>(shape = tp)` and splits Megatron's groups
    of contractions over it: a Gemm or MatMul of a 2-D weight (row) whose
    input is computed from other such contractions (columns) only through
    ops that carry a split (elementwise ops and masking, the Reshape and
    Transpose between [B, S, H*D] and [B, H, S, D], Softmax, the batched
    MatMuls of two split values), with nothing on the way used elsewhere:
    an MLP's Linear, activation, Linear, or attention's Q, K, V projections
    and its output projection (split by heads). The columns become
    column-parallel (weights split along the output features, with their
    biases), the row row-parallel (its weight split along the input
    features). Each split is a `shard.shard ... annotate_for_users` on the
    weight. Unless `partition=false`, the pass then runs upstream's
    `--sharding-propagation`, which spreads them to the ops between, checks
    that every op is fully annotated (an op the models cannot carry a
    split through is an error that names it), and runs `--shard-partition`
    (with the onnx ops' ShardingInterface models), which writes the
    per-device program: the weights sliced (`shard.all_slice`), reshapes
    given their per-device shapes, the row-parallel contraction summing its
    partial products with one `shard.all_reduce` before its bias. A group
    whose split dimension tp does not divide is left whole, with a remark.
    `pin=` chooses the split of named ops instead (column: output
    features, row: input features); a function whose result stays split (a
    column-parallel op pinned without a row-parallel one after it) returns
    each device's part. A MatMul's bias Add (torch's Linear of a 3-D
    input) splits with its weight. For training, an op that makes a split
    result from a whole activation (a column-parallel input) is marked
    `train.grad_all_reduce`: each device's gradient of that input is only
    its part's share, and --pp-autodiff sums the shares over the group
    (Megatron's f; the row-parallel all-reduce is its g). After
    --pp-partition, the ops partitioning makes join their activation
    operands' stage (a weight's slice its users'), and a stage the plan
    gives one device (pp.tensor_parallel_stages: a stage-wise mix of 1 and
    tp) stays whole: no group with an op in it splits, so the values it
    exchanges with split stages are whole.
    pp-interpret runs the result on one interpreter per device, and
    generated programs on a rank per device (docs/cli.md). A training-mode
    Dropout of a split tensor is an error (every device would draw the same
    mask). Not built yet: a fused QKV projection split into Q, K and V (a
    Split of the split features), vocabulary-parallel embedding and
    cross-entropy, convolutions, sequence parallelism, ops with several
    used results between sharded ops, weights kept split on their devices
    (each device holds the whole weight and gathers its gradient), and
    stages of different degrees above 1.
  }];
  let options = [
    Option<"tp", "tp", "int64_t", "2",
           "Devices of the tensor-parallel group (>= 1; 1 leaves the module "
           "unchanged)">,
    Option<"gridName", "grid", "std::string", "\"tp\"",
           "Symbol of the shard.grid the annotations use">,
    Option<"pins", "pin", "std::string", "\"\"",
           "Splits chosen by node name: PATTERN=column or PATTERN=row, "
           "comma-separated (a regex on the ONNX node name of a Gemm or "
           "MatMul); pinned ops split so and join no pair">,
    Option<"partition", "partition", "bool", "true",
           "Then run upstream's sharding propagation and partition on each "
           "annotated function (false: annotations only)">,
  ];
  let dependentDialects = ["mlir::shard::ShardDialect"];
}

#endif // PP_DIALECT_ONNX_TRANSFORMS_PASSES_TD
