//===- Passes.td - Pipeline planning passes ----------------*- tablegen -*-===//
#ifndef PP_DIALECT_PP_TRANSFORMS_PASSES_TD
#define PP_DIALECT_PP_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def PartitionPass : Pass<"pp-partition", "mlir::ModuleOp"> {
  let summary = "Assign every forward op to a pipeline stage on a (heterogeneous) cluster";
  let description = [{
    Builds the op DAG of the forward function with the cost model (roofline
    per device kind, or a measured profile), the activation bytes each op
    leaves for its backward, and the weights, gradients and optimizer state
    of its parameters, and runs the exact partitioner
    (`pp/Partition/Partitioner.h`): the monotone assignment that minimises
    the slowest stage, communication included, subject to each device's
    memory with the schedule's in-flight micro-batches. Tied parameters form
    groups whose gradients are summed across the stages that hold them. Ops
    get `pp.stage`; the module gets its `#pp.plan` (schedule, micro-batches,
    chunks, stages and the device of each stage). An infeasible model
    fails with the per-device shortfall in bytes.
  }];
  let options = [
    Option<"funcName", "func", "std::string", "\"main\"", "Forward function">,
    Option<"clusterSpec", "cluster", "std::string", "\"\"",
           "Cluster: a spec like 4xH100 or 2xA100-80,2xV100, or a .json file "
           "(set on the module as pp.cluster for the passes after this one; "
           "unset: the module's pp.cluster)">,
    Option<"schedule", "schedule", "::pp::kinds::ScheduleKind",
           "::pp::kinds::ScheduleKind::OneFOneB",
           "Schedule whose in-flight micro-batches bound memory: gpipe, 1f1b, "
           "interleaved or zb-h1 (the last two hold as many as 1f1b), zb-h2 "
           "(2p-1 on every stage), zb-v or dualpipev (two chunks per device "
           "in a V: chunks=2); or a "
           "weight-versioned one: pipedream, pipedream-2bw, nf1b, "
           "v-timeprest, i-timeprest, hetpipe (their older weight versions "
           "count too)">,
    Option<"updateEvery", "update-every", "unsigned", "0",
           "Weight-versioned schedules: micro-batches per update (a "
           "divisor of microbatches; pipedream: 1). 0: pipedream 1, "
           "pipedream-2bw the smallest divisor >= the stages, the TiMePReSt "
           "family the smallest divisor >= the stages - 1">,
    Option<"verticalSync", "vertical-sync", "bool", "false",
           "pipedream: every stage's forward of a mini-batch reads the "
           "weight version stage 0's read">,
    Option<"chunks", "chunks", "unsigned", "1",
           "Model chunks per device (interleaved): chunks x devices stages, "
           "stage c on device c mod devices">,
    Option<"microBatches", "microbatches", "unsigned",
           "::pp::pipeline::kDefaultMicroBatches",
           "Micro-batches per mini-batch">,
    Option<"inflight", "inflight", "std::string", "\"\"",
           "schedule=hetpipe: Nm, the mini-batches each virtual worker "
           "keeps in flight (a step is a wave of Nm): N (microbatches=N), "
           "or auto: the largest Nm up to 2 x the stages that fits every "
           "device's memory (with staleness=auto, before the bound); "
           "empty: microbatches">,
    Option<"optimizer", "optimizer", "::pp::OptimizerState",
           "::pp::OptimizerState::SGD",
           "Optimizer state per weight: sgd (none), momentum (1x), adam (2x)">,
    Option<"profileFile", "profile", "std::string", "\"\"",
           "Measured per-op times (JSON) overriding the roofline estimates">,
    Option<"recompute", "recompute", "::pp::RecomputePolicy",
           "::pp::RecomputePolicy::None",
           "none, or full / selective / auto: a model that does not fit with "
           "every activation kept is partitioned as if stages kept only "
           "their inputs (--pp-recompute then decides)">,
    Option<"pins", "pin", "std::string", "\"\"",
           "Pins: PATTERN=STAGE,... (ops whose ONNX node name matches the "
           "regex go to that stage)">,
    Option<"splitAfter", "split-after", "std::string", "\"\"",
           "Explicit split points: NODE,... (a new stage starts after each "
           "named op, in op order)">,
    Option<"tryDeviceOrders", "try-device-orders", "bool", "true",
           "Also search other orders of the devices (HetPipe)">,
    Option<"dataParallel", "data-parallel", "int", "-1",
           "Replicas of the pipeline trained in synchronous data parallel: "
           "the devices split into that many equal groups in order (or the "
           "cluster's virtual_workers, whose count it must then equal); "
           "each replica takes 1/N of the mini-batch. Not given (-1): the "
           "number of workers a virtual-workers policy forms, else 1">,
    Option<"virtualWorkers", "virtual-workers", "std::string", "\"\"",
           "Virtual workers by a HetPipe allocation policy: np (a node "
           "each), ed (one device of every kind each), hd (hybrid: a fast "
           "and a slow kind each), auto (the one whose slowest worker is "
           "fastest); the cluster file's virtual_workers win">,
    Option<"staleness", "staleness", "std::string", "\"-1\"",
           "Data parallel under Wave Synchronous Parallel (HetPipe): each "
           "replica pushes the summed update of every wave and may run at "
           "most this many waves ahead of the slowest (0: they meet every "
           "wave); -1: synchronous data parallel (gradients all-reduced "
           "every step); auto: the bound with the best predicted throughput "
           "whose push buffers fit memory (the smallest within 1%)">,
    Option<"wave", "wave", "std::string", "\"1\"",
           "With a staleness bound: steps per wave (a push and a clock "
           "tick every this many steps; HetPipe's Nm mini-batches); auto: "
           "chosen with the bound">,
    Option<"reportFile", "report", "std::string", "\"\"",
           "Write a text summary of the plan here ('-' for stdout)">,
    Option<"tensorParallel", "tp", "std::string", "\"1\"",
           "Tensor-parallel degree of each stage: N (every stage a group of "
           "N GPUs of one kind on one node, the Megatron groups of "
           "--pp-tensor-parallel split over them), a per-stage list "
           "(tp=4,2,2), or auto (per node of a virtual worker the degree of "
           "the least predicted iteration time that fits memory; a "
           "candidate whose iteration has a lower bound no better than the "
           "best plan found is skipped, and the report says so); 1: no "
           "tensor parallelism. Records each stage's degree "
           "(pp.tensor_parallel_stages) for --pp-tensor-parallel">,
    Option<"planJson", "plan-json", "std::string", "\"\"",
           "With tp other than 1: write the three-dimensional plan (pp, "
           "tp, dp, per-stage times and memory, the candidates of "
           "tp=auto) as JSON here">,
    Option<"timeline", "timeline", "std::string", "\"\"",
           "With tp other than 1: write the chosen plan's simulated "
           "iteration (its first virtual worker) here as a Chrome trace "
           "(Perfetto), and beside it the same as an SVG (the path with "
           ".svg for its extension)">,
    Option<"regroupWorkers", "regroup-workers", "bool", "false",
           "With tp=auto: also plan fewer, larger virtual workers, each the "
           "union of g consecutive ones (g a divisor of their count; its "
           "GPUs by kind, in the order the worker first lists them, then "
           "node), and keep the grouping of the least predicted iteration "
           "time that fits; the report lists each grouping's result">,
  ];
  let dependentDialects = ["pp::onnx::ONNXDialect", "pp::train::TrainDialect",
                           "pp::pipeline::PPDialect"];
}

def RecomputePass : Pass<"pp-recompute", "mlir::ModuleOp"> {
  let summary = "Recompute chosen forward ops in the backward (activation checkpointing)";
  let description = [{
    Runs on a training step after --pp-autodiff (and --pp-optimizer). For a
    set R of forward ops, each op of R is cloned (with its `pp.stage` and a
    unit `pp.recompute`) just before the first backward op of its stage that
    needs it, and the backward ops of that stage use the clone instead of the
    forward result. The forward is unchanged; what the backward keeps per
    micro-batch becomes the inputs of the recomputed segments. Dropout, ops
    with memory effects or non-float results, constants and global reads are
    never recomputed.

    Policies: `none`; `full` (R = every recomputable op: a stage keeps only
    its inputs); `selective` (memory-bound ops: softmax, unary activations,
    layout ops, broadcasting elementwise ops, where they lower the stage's
    kept bytes); `auto` (per stage, if kept bytes x in-flight micro-batches
    exceed the device's memory left after weights, gradients and optimizer
    state, greedily recompute the ops with the best bytes saved per added
    forward second until it fits; fails with the shortfall otherwise).

    For `auto`, stage s runs on the plan's device of stage s (else the cluster's
    s-th device; stages sharing a device split its memory). Its budget is
    the device memory minus weights, gradients and optimizer state of the
    trainable globals its ops read (state factor 0 for SGD, 1 with momentum,
    2 for Adam), or `activation-budget`. It must hold kept bytes x in-flight
    micro-batches (GPipe m; 1F1B, ZB-H1 and interleaved min(p - s, m)).
    Stages that fit are left alone. Step inputs, constants and global reads
    are never counted as kept (split-stages re-reads them); training-mode
    BatchNorm may be recomputed, its running statistics stay the forward's.
    `report` prints per stage the kept bytes per micro-batch before and
    after, the ops recomputed and the added forward time.

    ```
    pipeline-opt m.onnx --pp-add-loss --pp-partition="cluster=4xH100" \
      --pp-autodiff --pp-optimizer --pp-recompute="policy=auto cluster=4xH100"
    ```
  }];
  let options = [
    Option<"funcName", "func", "std::string", "\"main\"", "Training step function">,
    Option<"policy", "policy", "::pp::RecomputePolicy",
           "::pp::RecomputePolicy::None",
           "none, full, selective or auto">,
    Option<"clusterSpec", "cluster", "std::string", "\"\"",
           "Cluster (preset spec or .json) for auto and the report's times; "
           "unset: the module's pp.cluster (from --pp-partition)">,
    Option<"schedule", "schedule",
           "std::optional<::pp::kinds::ScheduleKind>", "",
           "gpipe, 1f1b, interleaved, zb-h1, zb-h2, zb-v or dualpipev "
           "(default: the plan's, else 1f1b)">,
    ListOption<"microBatches", "microbatches", "int64_t",
               "Micro-batches per step, one value in 1..65536 (unset: the "
               "plan's, else 8)">,
    ListOption<"activationBudget", "activation-budget", "int64_t",
               "Activation bytes per device for auto, one value >= 0 (unset: "
               "device memory minus weights, gradients and optimizer state)">,
    Option<"reportFile", "report", "std::string", "\"\"",
           "Write a per-stage summary here ('-' for stdout)">,
  ];
  let dependentDialects = ["pp::onnx::ONNXDialect", "pp::train::TrainDialect"];
}

def SplitStagesPass : Pass<"pp-split-stages", "mlir::ModuleOp"> {
  let summary = "Outline each stage's forward, backward and update, with send/recv between stages";
  let description = [{
    Takes a partitioned training step (forward ops carry `pp.stage`, their
    backward ops inherit it from --pp-autodiff) and replaces it by stage
    functions `@stage<s>_forward(%mb)`, `@stage<s>_backward(%mb)` (or
    `_backward_input` and `_backward_weight` with `split-backward`, for
    zero-bubble schedules) and `@stage<s>_update()`. The step's function
    runs on one micro-batch; a pipelined step runs `micro-batches` of them:
    inputs come from `pp.input`, values a later stage needs travel by
    `pp.send`/`pp.recv` (activations forward, gradients backward), forward
    values the backward needs are kept with `pp.stash`/`pp.unstash`, and
    gradients sum over micro-batches with `pp.accumulate`/`pp.accumulated`
    (the loss gradient is scaled by 1/m for a mean loss). Every stage holds
    its own copy of the globals it reads; a weight used by several stages
    (tied) is updated by the stage that sums its gradient, which then sends
    the new value to the others.
  }];
  let options = [
    Option<"funcName", "func", "std::string", "\"main\"", "Training step function">,
    ListOption<"microBatches", "microbatches", "int64_t",
               "Micro-batches per step, one value in 1..65536 (unset: the "
               "plan's, else 8)">,
    Option<"splitBackward", "split-backward", "bool", "false",
           "Split each backward into input and weight gradients (zero bubble)">,
  ];
  let dependentDialects = ["pp::onnx::ONNXDialect", "pp::train::TrainDialect",
                           "pp::pipeline::PPDialect"];
}

def MaterializeSchedulePass : Pass<"pp-schedule", "mlir::ModuleOp"> {
  let summary = "Materialise the pipeline schedule as per-device action lists";
  let description = [{
    Builds the schedule of a split module (pp/Schedule/Schedule.h: GPipe,
    1F1B, interleaved 1F1B with `chunks` stages per device, ZB-H1) and
    writes it as a `pp.schedule` op: per device, the ordered forward,
    backward (or backward_input / backward_weight), gradient-reduction and
    optimizer-step actions, each with its stage function, micro-batch and
    weight version. Per-step actions of one device are ordered so that a
    stage whose update sends another stage's update a message (a weight
    both read, from the stage that updates it) runs first; the result is
    checked as `--pp-verify-schedule` does, and a schedule that would
    deadlock on its messages fails with the stuck actions.
  }];
  let options = [
    Option<"kind", "kind", "std::optional<::pp::kinds::ScheduleKind>", "",
           "gpipe, 1f1b, interleaved, zb-h1, zb-h2, zb-v or dualpipev; or a "
           "weight-versioned one (default: the plan's)">,
    ListOption<"chunks", "chunks", "int64_t",
               "Stages (model chunks) per device, one value >= 1; interleaved "
               "needs >= 2, zb-v and dualpipev 2 (unset: the plan's)">,
    Option<"blendLambda", "lambda", "double", "1.0",
           "i-timeprest: a backward whose forward read a version d updates "
           "old reads W_l + exp(-lambda d) (W_s - W_l) (W_l the latest, W_s "
           "the older version kept)">,
  ];
  let dependentDialects = ["pp::pipeline::PPDialect"];
}

def ChooseSchedulePass : Pass<"pp-choose-schedule", "mlir::ModuleOp"> {
  let summary = "Compile with each allowed schedule and keep the fastest that fits (schedule=auto)";
  let description = [{
    Runs `pp-compile{COMPILE schedule=S}` on a copy of the module for each
    candidate S, keeping its diagnostics; a schedule whose plan does not fit
    the devices' memory fails in `--pp-partition` and drops out. Of those
    that compile, the one with the most predicted samples per second
    (`pp.predicted_samples_per_second`, the plan report's simulation; a
    weight-versioned schedule's steady step in a stream, the drained step
    of the others) wins
    (the first of equals); its pipeline then runs on the module itself,
    with the report, program and plan directory asked for. The report says
    which schedule won, each one's prediction, and why the others dropped
    out. `--pp-compile schedule=auto` adds this pass with its own options.
  }];
  let options = [
    Option<"compileOptions", "compile", "std::string", "\"\"",
           "--pp-compile options other than schedule, report, emit-dir and "
           "plan-dir">,
    ListOption<"candidates", "candidates", "::pp::kinds::ScheduleKind",
               "The schedules to try, in order of preference for equals">,
    Option<"reportFile", "report", "std::string", "\"-\"",
           "The choice and the chosen run's summaries ('-' for stdout, '' "
           "for none)">,
    Option<"emitDir", "emit-dir", "std::string", "\"\"",
           "The chosen run's emit-dir">,
    Option<"planDir", "plan-dir", "std::string", "\"\"",
           "The chosen run's plan-dir">,
  ];
}

def VerifySchedulePass : Pass<"pp-verify-schedule", "mlir::ModuleOp"> {
  let summary = "Check that a scheduled pipeline's message order cannot deadlock";
  let description = [{
    Runs the `pp.schedule` of a split module by the pipelined
    interpreter's rule, without its kernels: each device takes its actions
    in order and each action the `pp.send`, `pp.recv`, `pp.stash`,
    `pp.unstash`, `pp.accumulate` and `pp.accumulated` ops of its stage
    function in program order; a send never waits, a recv waits for its
    message (sender stage, receiver stage, tag, micro-batch) from any
    device, and an unstash or a gradient sum must find what an earlier
    action of its device kept. Fails when every device left waits, with
    one note per stuck device: its action (kind, stage, micro-batch), the
    recv it waits in and where the matching send is (later on the same
    device, on another stuck device, or nowhere); also when an unstash or
    sum comes first or a message is never received. `--pp-schedule` ends
    with this check, so `--pp-compile` never emits a schedule that its
    interpreter or generated program would deadlock on.
  }];
}

def FuseElementwisePass : Pass<"pp-fuse-elementwise", "mlir::func::FuncOp"> {
  let summary = "Fuse trees of elementwise ops into pp.fused kernels";
  let description = [{
    Groups elementwise ops that one generated kernel can compute (the ops
    `pp.fused` accepts: Add, Sub, Mul, Div, Relu, Sigmoid, Tanh, Erf, Sqrt,
    Exp, Log, Neg, Abs, Reciprocal and the Relu / Sigmoid / Tanh unary
    gradients) into trees: an op joins the group of an operand when that
    operand is used once and has the op's type; its other operands are the
    kernel's inputs, each of the result's element type (f32 or f64) and of
    its shape, a scalar or a suffix of it (a bias). A group never spans a
    `train.global_write` (a deferred read of the global would see the new
    value). Each group of two ops or more becomes one `pp.fused` op at the
    place of its last op, holding the group; code generation runs it as one
    kernel, the interpreter runs its body. Runs before --pp-memory-plan,
    which then plans no buffer for the values inside a kernel.

    Before grouping, a Relu whose input is the first result of an
    `onnx.Conv`, `onnx.BatchNormalization` or `onnx.Gemm` that nothing else
    reads is fused into that op: the op gets `pp.activation = "Relu"` and its
    kernel applies it as it writes (oneDNN's eltwise post-op, batch norm's
    affine loop; a Gemm's on oneDNN's matmul where that runs it, else a pass
    after the GEMM), one pass over the tensor instead of two. The Relu's gradient reads
    its output only, so the value before the activation is needed by no op.
    `activations=false` leaves the Relus to the elementwise groups.
  }];
  let options = [
    Option<"activations", "activations", "bool", "true",
           "Fuse Relus into the Conv / BatchNormalization / Gemm they follow">,
  ];
  let dependentDialects = ["pp::pipeline::PPDialect"];
}

def FoldTransposesPass : Pass<"pp-fold-transposes", "mlir::func::FuncOp"> {
  let summary = "Fold transposes into the GEMMs that read or write them";
  let description = [{
    torch exports a Linear of a 3-D input as `MatMul(x, Transpose(W))`, and
    the gradients of a product transpose again, so every step copied each
    such weight three times. A GEMM reads either operand transposed at no
    cost, so: a `MatMul` of an activation `[..., K]` and a 2-D `Transpose`
    becomes a `Gemm` of the activation's rows with `transB` (between
    Reshapes, which the memory plan makes views), as does a 2-D `MatMul` of
    a transposed operand; a `Gemm` operand made by a 2-D `Transpose` is read
    through `transA` / `transB` instead; and a 2-D `Transpose` of a `Gemm`
    without C that nothing else reads becomes the swapped product
    (`(A B)^T = B^T A^T`). Transposes left unread are erased. The new ops
    keep the replaced op's location and attributes (its stage). Runs on the
    training step after --pp-optimizer, before --pp-split-stages: the
    backward then reads the weight itself, which every stage function
    re-reads, rather than a transposed copy stashed per micro-batch.

    Batched products get the same: a `MatMul` whose operands (rank >= 2)
    come through Transposes of their last two dims (attention's `q @ k^T`,
    and the backward's `dy @ B^T` and `A^T @ dy`) becomes `train.matmul`
    reading the Transposes' inputs with `trans_a` / `trans_b` (an
    `onnx.MatMul` where two swaps cancel), and a Transpose of the last two
    dims of a product (rank >= 3) that nothing else reads becomes the
    swapped product.
  }];
  let dependentDialects = ["pp::train::TrainDialect"];
}

def MemoryPlanPass : Pass<"pp-memory-plan", "mlir::ModuleOp"> {
  let summary = "Plan the buffers of a scheduled pipeline, per device";
  let description = [{
    Computes, per device of the `pp.schedule`, the memory generated code
    allocates: the globals its stages use and the gradient accumulators
    (persistent), the stashed activations times the most micro-batches in
    flight in the schedule's order, and one arena for the temporaries of
    its stage functions, each value placed at an offset chosen from live
    ranges (pp/Analysis/MemoryPlan.h; the values inside a `pp.fused`
    kernel get none, nor do pp.unstash and pp.accumulated, which read the
    held buffers in place, nor pp.recv, whose message the driver receives
    into a buffer of its own, ahead of the function: per size, twice the
    most one function receives, the `messages` of the report). An
    optimizer step whose new value goes back to
    the global it read, with no reader of the old value in between, is
    computed in the global's storage: offset -2, and its
    `train.global_write` gets `pp.in_place` (nothing to copy).
    Functions get `pp.arena_bytes`, the ops of their
    bodies `pp.offsets`, the module `pp.planned_peak_bytes`; `report`
    prints the breakdown. Code generation allocates exactly this plan.
  }];
  let options = [
    Option<"reportFile", "report", "std::string", "\"\"",
           "Write the per-device plan here ('-' for stdout)">,
  ];
}

def PlanReportPass : Pass<"pp-plan-report", "mlir::ModuleOp"> {
  let summary = "Simulate the scheduled pipeline and report the plan";
  let description = [{
    Costs each stage of a scheduled module on its device (cost model
    forward and backward times of its ops, recomputed ops, bytes sent and
    stashed per micro-batch, weights, gradients and optimizer state), runs
    the event-driven simulator (pp/Schedule/Simulator.h) on the
    `pp.schedule`, and reports iteration time, bubble fraction, per-device
    busy time and peak memory. Writes a text summary (`summary`, '-' for
    stdout) and, with `dir`, plan.json (stages, devices, ops per stage,
    predicted times and memory, cut tensors and bytes), timeline.json
    (Chrome trace / Perfetto) and timeline.svg. A schedule that deadlocks
    fails with the stuck actions.
  }];
  let options = [
    Option<"clusterSpec", "cluster", "std::string", "\"\"",
           "Cluster the schedule's devices belong to (spec or .json); unset: "
           "the module's pp.cluster (from --pp-partition)">,
    Option<"profileFile", "profile", "std::string", "\"\"",
           "Measured per-op times (JSON) overriding the roofline estimates">,
    Option<"summaryFile", "summary", "std::string", "\"-\"",
           "Write the text summary here ('-' for stdout, '' for none)">,
    Option<"outputDir", "dir", "std::string", "\"\"",
           "Write plan.json, timeline.json and timeline.svg here">,
    Option<"measuredLog", "measured-log", "std::string", "\"\"",
           "The --log of a run of this program (JSON lines): the summary "
           "and plan.json set the measured step time and per-device busy "
           "time (medians over the steps after the first) against the "
           "prediction">,
  ];
}

#endif // PP_DIALECT_PP_TRANSFORMS_PASSES_TD
