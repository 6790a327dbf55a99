//===- PPDialect.td - The pp (pipeline parallelism) dialect -*- tablegen -*-===//
#ifndef PP_DIALECT_PP_IR_PPDIALECT_TD
#define PP_DIALECT_PP_IR_PPDIALECT_TD

include "mlir/IR/OpBase.td"

def PP_Dialect : Dialect {
  let name = "pp";
  let summary = "Pipeline stages and the communication between them";
  let description = [{
    The pipeline plan (`#pp.plan`), the cluster it is planned for
    (`#pp.cluster`) and the split program: point-to-point transfers between
    pipeline stages (`pp.send`, `pp.recv`), addressed by peer stage, tag and
    micro-batch. A module with a `pp.plan`
    has the dialect verify that every send has exactly one matching recv
    (same tag, peers that point at each other, same type) across the
    module's stage functions, which are marked with `pp.stage`.
  }];
  let cppNamespace = "::pp::pipeline";
  let hasOperationAttrVerify = 1;
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
  let useDefaultAttributePrinterParser = 1;

  // Every pp.* attribute the passes put on ops, functions, arguments,
  // results and the module: declared here once, read and written through
  // the accessors of PPAttrs.h, checked by the dialect's verifiers.
  let discardableAttrs = (ins
    // Ops: the stage of a forward op (--pp-partition) or backward op
    // (--pp-autodiff); stage functions: their stage (--pp-split-stages).
    "::mlir::IntegerAttr":$stage,
    // The op that seeds the loss gradient (--pp-autodiff).
    "::mlir::UnitAttr":$loss_seed,
    // A forward op cloned into the backward (--pp-recompute).
    "::mlir::UnitAttr":$recompute,
    // An optimizer-phase op that every stage runs on its own copy of the
    // state it writes (--pp-optimizer's loss-scale update).
    "::mlir::UnitAttr":$every_stage,
    // Stage functions: which part of the step they hold.
    "::pp::pipeline::PhaseAttr":$phase,
    // --pp-memory-plan: arena offsets of an op's results, arena size of a
    // stage function, planned peak bytes per device on the module.
    // An offset of -2: the result of an optimizer step computed in the
    // storage of the global it updates, whose train.global_write is then
    // `in_place` (nothing left to copy).
    "::mlir::DenseI64ArrayAttr":$offsets,
    "::mlir::UnitAttr":$in_place,
    // --pp-fuse-elementwise: the Relu an onnx.Conv or
    // onnx.BatchNormalization applies to its output as it writes it (the
    // graph's Relu of that output, fused into it): a pp::rt::UnaryKind name.
    "::mlir::StringAttr":$activation,
    "::mlir::IntegerAttr":$arena_bytes,
    "::mlir::DenseI64ArrayAttr":$planned_peak_bytes,
    // --pp-plan-report: each device's simulated compute time in a drained
    // step, in nanoseconds (replica 0's devices), which train sets against
    // the busy times it measures.
    "::mlir::DenseI64ArrayAttr":$planned_busy_ns,
    // --pp-plan-report: the simulated samples per second of the step (of
    // every replica; under WSP of the waves; for a weight-versioned
    // schedule of its steady step in a stream, as train runs it by
    // default), which schedule=auto compares.
    "::mlir::FloatAttr":$predicted_samples_per_second,
    // The module: the pipeline plan, and the names of the step's inputs and
    // outputs (--pp-split-stages).
    "::pp::pipeline::PlanAttr":$plan,
    // The module: the cluster= option parsed once (--pp-partition), which
    // the later passes read instead of parsing their own.
    "::pp::pipeline::ClusterAttr":$cluster,
    // Data parallelism (--pp-partition): the device names of replicas 1 ..
    // N-1, D per replica in the order of the plan's devices.
    "::mlir::ArrayAttr":$replica_devices,
    // Tensor parallelism (--pp-partition tp=, planned only): the degree of
    // each stage (the plan's tensor_parallel is the largest).
    "::mlir::DenseI64ArrayAttr":$tensor_parallel_stages,
    // --pp-optimizer lr-schedule=...: the learning-rate schedule the
    // generated program runs by default, as train's flags without dashes.
    "::mlir::StringAttr":$lr_schedule,
    "::mlir::ArrayAttr":$input_names,
    "::mlir::ArrayAttr":$output_names,
    // Argument and result attributes: the micro-batch index of a stage
    // function, the loss result, the gradient of a global.
    "::mlir::UnitAttr":$micro_batch,
    "::mlir::UnitAttr":$loss,
    // The class dim of a classifier's logits result (--pp-add-loss).
    "::mlir::IntegerAttr":$class_axis,
    // The label the loss skips (--pp-add-loss ignore-index), on the logits.
    "::mlir::IntegerAttr":$ignore_index,
    "::mlir::FlatSymbolRefAttr":$grad_of
  );
}

#endif // PP_DIALECT_PP_IR_PPDIALECT_TD
