//===- PPOps.td - Operations of the pp dialect -------------*- tablegen -*-===//
#ifndef PP_DIALECT_PP_IR_PPOPS_TD
#define PP_DIALECT_PP_IR_PPOPS_TD

include "pp/Dialect/PP/IR/PPDialect.td"
include "pp/Dialect/PP/IR/PPAttrs.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

// The micro-batch index: a scalar i64 (built implicitly by the parser).
def PP_MicroBatch : 0DTensorOf<[I64]> {
  let builderCall = "::mlir::RankedTensorType::get({}, $_builder.getI64Type())";
}

class PP_Op<string mnemonic, list<Trait> traits = []>
    : Op<PP_Dialect, mnemonic, traits>;

def PP_SendOp : PP_Op<"send", [MemoryEffects<[MemWrite]>]> {
  let summary = "Sends a tensor to another stage";
  let description = [{
    Sends `value` of micro-batch `micro_batch` to stage `peer`; the matching
    `pp.recv` on that stage has the same `tag` and names this stage as peer.

    ```mlir
    pp.send %act, %mb {peer = 1 : i64, tag = 0 : i64} : tensor<8x128xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$value, PP_MicroBatch:$micro_batch,
                       I64Attr:$peer, I64Attr:$tag);
  let assemblyFormat = "$value `,` $micro_batch attr-dict `:` type($value)";
  let hasVerifier = 1;
}

def PP_RecvOp : PP_Op<"recv", [MemoryEffects<[MemRead]>]> {
  let summary = "Receives a tensor from another stage";
  let description = [{
    ```mlir
    %act = pp.recv %mb {peer = 0 : i64, tag = 0 : i64} : tensor<8x128xf32>
    ```
  }];
  let arguments = (ins PP_MicroBatch:$micro_batch, I64Attr:$peer,
                       I64Attr:$tag);
  let results = (outs AnyRankedTensor:$value);
  let assemblyFormat = "$micro_batch attr-dict `:` type($value)";
  let hasVerifier = 1;
}


//===----------------------------------------------------------------------===//
// Stage programs: data in and out, state kept across micro-batches
//===----------------------------------------------------------------------===//

def PP_InputOp : PP_Op<"input", [MemoryEffects<[MemRead]>]> {
  let summary = "Micro-batch `micro_batch` of the step's input `index`";
  let description = [{
    The step's input `index` (a function argument of the unsplit training
    step) split along its first dimension into the plan's micro-batches equal
    parts; this op yields part `micro_batch`. Every stage that needs an input
    reads it itself (the data loader runs on every rank).

    ```mlir
    %x = pp.input %mb {index = 0 : i64} : tensor<4x784xf32>
    ```
  }];
  let arguments = (ins PP_MicroBatch:$micro_batch, I64Attr:$index);
  let results = (outs AnyRankedTensor:$value);
  let assemblyFormat = "$micro_batch attr-dict `:` type($value)";
}

def PP_OutputOp : PP_Op<"output", [MemoryEffects<[MemWrite]>]> {
  let summary = "A micro-batch's share of the step's output `index`";
  let description = [{
    The step's output `index` combines the values of all micro-batches:
    `mean` or `sum` for a scalar loss (as the loss reduces over the batch),
    `concat` along the first dimension for per-sample outputs.
    `class_axis` marks a classifier's logits (the loss's scores, set by
    `--pp-add-loss`): the runtime counts the samples whose arg max along that
    dim equals the `labels` input (top-1 accuracy); `ignore_index`, the
    label the loss skips, is left out of that count.

    ```mlir
    pp.output %loss, %mb {index = 0 : i64, combine = "mean"} : tensor<f32>
    pp.output %logits, %mb {index = 1 : i64, combine = "concat",
                            class_axis = 1 : i64} : tensor<4x10xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$value, PP_MicroBatch:$micro_batch,
                       I64Attr:$index, StrAttr:$combine,
                       OptionalAttr<I64Attr>:$class_axis,
                       OptionalAttr<I64Attr>:$ignore_index);
  let assemblyFormat = "$value `,` $micro_batch attr-dict `:` type($value)";
  let hasVerifier = 1;
}

def PP_StashOp : PP_Op<"stash", [MemoryEffects<[MemWrite]>]> {
  let summary = "Keeps a forward value of a micro-batch for its backward";
  let description = [{
    Stores `value` under (`slot`, `micro_batch`) on this stage until the
    matching `pp.unstash` takes it. The stashed bytes per micro-batch are
    the stage's activation memory.

    ```mlir
    pp.stash %act, %mb {slot = 0 : i64} : tensor<4x128xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$value, PP_MicroBatch:$micro_batch,
                       I64Attr:$slot);
  let assemblyFormat = "$value `,` $micro_batch attr-dict `:` type($value)";
}

def PP_UnstashOp : PP_Op<"unstash", [MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "Takes back a value stashed by the forward";
  let arguments = (ins PP_MicroBatch:$micro_batch, I64Attr:$slot);
  let results = (outs AnyRankedTensor:$value);
  let assemblyFormat = "$micro_batch attr-dict `:` type($value)";
}

def PP_AccumulateOp : PP_Op<"accumulate", [MemoryEffects<[MemWrite]>]> {
  let summary = "Adds a micro-batch's gradient to the step's sum";
  let description = [{
    Sums `value` over the micro-batches of a step under `slot`;
    `pp.accumulated` in the stage's update reads the sum and resets it.

    ```mlir
    pp.accumulate %dw {slot = 0 : i64} : tensor<128x784xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$value, I64Attr:$slot);
  let assemblyFormat = "$value attr-dict `:` type($value)";
}

def PP_AccumulatedOp : PP_Op<"accumulated",
                             [MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "The step's sum of a gradient (and resets it)";
  let arguments = (ins I64Attr:$slot);
  let results = (outs AnyRankedTensor:$value);
  let assemblyFormat = "attr-dict `:` type($value)";
}

//===----------------------------------------------------------------------===//
// Fused elementwise kernels
//===----------------------------------------------------------------------===//

def PP_FusedOp : PP_Op<"fused", [IsolatedFromAbove, SingleBlock,
                                 RecursiveMemoryEffects]> {
  let summary = "A tree of elementwise ops that runs as one generated kernel";
  let description = [{
    Computes its result element by element with the ops of its body, as
    one generated kernel (--pp-fuse-elementwise builds it, the code
    generator turns it into a per-element function run by
    `pp::rt::fused::forEach`, the interpreter runs the body). The body's
    arguments are the inputs in order; every op of the body is one the
    runtime's `pp/Runtime/Fused.h` computes per element
    (`getElementFunction`) and has the result's type; an input has the
    result's element type (f32 or f64) and either its shape, a scalar or a
    suffix of its shape (read at i mod its element count: a bias).

    ```mlir
    %r = pp.fused %y, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32> {
    ^bb0(%y0: tensor<4x8xf32>, %b0: tensor<8xf32>):
      %a = onnx.Add %y0, %b0 : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
      %r0 = onnx.Relu %a : (tensor<4x8xf32>) -> tensor<4x8xf32>
      pp.yield %r0 : tensor<4x8xf32>
    }
    ```
  }];
  let arguments = (ins Variadic<AnyRankedTensor>:$inputs);
  let results = (outs AnyRankedTensor:$result);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat =
      "$inputs attr-dict `:` functional-type($inputs, $result) $body";
  let hasRegionVerifier = 1;
  let extraClassDeclaration = [{
    /// The scalar function of pp/Runtime/Fused.h (`pp::rt::fused::<name>`)
    /// that computes `op` inside a fused kernel; empty when `op` cannot be
    /// fused: what its KernelFactsOpInterface says (UnaryKinds.def and the
    /// onnx ops' ODS).
    static ::llvm::StringRef getElementFunction(::mlir::Operation *op);
    /// The value the body yields.
    ::mlir::Value getYieldedValue();
  }];
}

def PP_YieldOp : PP_Op<"yield", [Pure, Terminator,
                                 HasParent<"FusedOp">]> {
  let summary = "The value a pp.fused body computes";
  let arguments = (ins AnyRankedTensor:$value);
  let assemblyFormat = "$value attr-dict `:` type($value)";
}

//===----------------------------------------------------------------------===//
// Schedules
//===----------------------------------------------------------------------===//

def PP_ScheduleOp : PP_Op<"schedule", [NoTerminator, SingleBlock,
                                       NoRegionArguments]> {
  let summary = "The order of actions on every device for one step";
  let description = [{
    One `pp.device` per device, each holding that device's actions in
    execution order. The schedule kind, micro-batches and chunks are the
    module's `pp.plan`'s: stage c runs on device c mod num_devices. When
    the plan has `placements` (virtual workers whose partitions differ),
    the module holds one schedule per replica, marked `replica`, each with
    that replica's devices and placement.

    ```mlir
    pp.schedule {
      pp.device 0 {name = "node0/gpu0"} {
        pp.action forward @stage0_forward {stage = 0 : i64, micro_batch = 0 : i64, weight_version = 0 : i64}
        ...
      }
    }
    ```
  }];
  let arguments = (ins OptionalAttr<I64Attr>:$replica);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "attr-dict-with-keyword $body";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The plan of the enclosing module (verified to exist).
    PlanAttr getPlan();
    /// The replica this schedule is for; 0 for one shared by all.
    int64_t getReplicaIndex() {
      return getReplica() ? static_cast<int64_t>(*getReplica()) : 0;
    }
  }];
}

def PP_StreamOp : PP_Op<"stream", [NoTerminator, SingleBlock,
                                     NoRegionArguments]> {
  let summary = "The steps of a weight-versioned schedule as one stream";
  let description = [{
    How a weight-versioned schedule runs when the pipeline does not drain
    between steps (pp/Schedule/Schedule.h, StreamSchedule): one `pp.device`
    per device holding the actions of a window of `min_steps` + 1 steps
    (versions counted from the window's start), split by the device's
    `prologue_length` and `body_length` into the warm-up and first steps,
    one steady-state step, and the last steps with the cool-down. A window
    of K >= min_steps steps runs the prologue, the body K - min_steps times
    (the r-th moved r steps later: r m added to micro-batches, r U to
    weight versions, U the updates per step) and the epilogue moved
    K - min_steps - 1 steps. A shorter window runs `pp.schedule` step by
    step (min_steps exceeds 2 only when the warm-up is longer than a step).
    Replicas with placements of their own (`pp.schedule {replica = r}`)
    have a stream each, `replica` naming it.

    ```mlir
    pp.stream attributes {min_steps = 2 : i64} {
      pp.device 0 {name = "node0/gpu0", prologue_length = 5 : i64, body_length = 12 : i64} {
        pp.action forward @stage0_forward {stage = 0 : i64, micro_batch = 0 : i64, weight_version = 0 : i64}
        ...
      }
    }
    ```
  }];
  let arguments = (ins I64Attr:$min_steps,
                       DefaultValuedAttr<I64Attr, "0">:$replica);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "attr-dict-with-keyword $body";
  let hasVerifier = 1;
}

def PP_DeviceOp : PP_Op<"device", [NoTerminator, SingleBlock,
                                   NoRegionArguments,
                                   ParentOneOf<["ScheduleOp", "StreamOp"]>]> {
  let summary = "The actions of one device, in order";
  let description = [{
    Inside `pp.stream`, `prologue_length` and `body_length` split the
    actions into the stream's warm-up, steady step and cool-down.
  }];
  let arguments = (ins I64Attr:$index, StrAttr:$name,
                       OptionalAttr<I64Attr>:$prologue_length,
                       OptionalAttr<I64Attr>:$body_length);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$index attr-dict-with-keyword $body";
}

def PP_ActionOp : PP_Op<"action", [HasParent<"DeviceOp">]> {
  let summary = "Runs one stage function for one micro-batch";
  let description = [{
    `kind` is forward, backward, backward_input, backward_weight (the two
    halves of a zero-bubble backward), grad_reduce or optimizer_step;
    `callee` the stage function it runs; `micro_batch` is -1 for per-step
    actions. `weight_version` says which version of the stage's weights the
    action reads: version k is the one after the stage's first k
    optimizer_step actions of the step (0: the step's start, the only one
    of synchronous schedules; weight-versioned schedules update several
    times a step and keep the older versions their actions still read).
    `blend_version` and `blend_factor` (I-TiMePReSt's backward): the action
    reads W_b + blend_factor (W_v - W_b), W_v the weight_version and W_b
    the blend_version (the latest). `overlaps_next` (DualPipeV): this
    action and the device's next one belong to one overlapped
    forward-backward unit, which waits for the inputs of all its members
    before it starts; they still run one after the other.
  }];
  let arguments = (ins PP_ActionKindAttr:$kind,
                       OptionalAttr<FlatSymbolRefAttr>:$callee,
                       I64Attr:$stage, I64Attr:$micro_batch,
                       I64Attr:$weight_version,
                       OptionalAttr<I64Attr>:$blend_version,
                       OptionalAttr<F64Attr>:$blend_factor,
                       UnitAttr:$overlaps_next);
  let assemblyFormat = "custom<ActionKind>($kind) ($callee^)? attr-dict";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::pp::kinds::ActionKind getKindValue() { return getKind().getValue(); }
  }];
}

#endif // PP_DIALECT_PP_IR_PPOPS_TD
