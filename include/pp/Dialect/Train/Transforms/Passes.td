//===- Passes.td - Training-step passes (loss, autodiff, optimizer) ---*- tablegen -*-===//
#ifndef PP_DIALECT_TRAIN_TRANSFORMS_PASSES_TD
#define PP_DIALECT_TRAIN_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def AddLossPass : Pass<"pp-add-loss", "mlir::ModuleOp"> {
  let summary = "Append a loss to the model's output (or mark the model's own)";
  let description = [{
    When the function already returns the result of an
    `onnx.SoftmaxCrossEntropyLoss`, that result is marked as the loss.
    Otherwise the first result (the logits) gets a loss with mean reduction
    over the mini-batch and a new `labels` argument:
    `softmax-cross-entropy` takes integer class labels: the class dim is
    `class-axis` (negative: counted from the end). By default (0) it is
    dim 1 of logits of rank 4 or more, the [N, C, H, W, ...] per-pixel
    classes of segmentation models as PyTorch and ONNX lay them out, and
    else the last dim, so [N, C] classifiers and [N, S, V] language models
    work too. Labels equal to `ignore-index` (default -100, as PyTorch's
    `CrossEntropyLoss`; e.g. 255 for the borders of VOC's masks) add no
    loss and no gradient, the mean is over the other labels, and the
    runtime leaves them out of the accuracy. `label-smoothing` = eps > 0
    adds PyTorch's label smoothing: the loss is (1 - eps) times the
    cross-entropy plus eps times the mean, over the labels not ignored, of
    -(1/C) sum_c log softmax(logits)_c. `class-weights` (one per class, as
    PyTorch's `weight=`) weighs each label's loss by its class's weight
    and divides the sum by the labels' weights; with label smoothing the
    smoothing term weighs each class too, as PyTorch's. `mse` takes float
    targets of the output's shape. The loss becomes result 0, marked `pp.loss`; under
    `softmax-cross-entropy` the logits (result 1) get `pp.class_axis`, which
    `--pp-split-stages` puts on their `pp.output` so that generated programs
    report top-1 accuracy.
  }];
  let options = [
    Option<"funcName", "func", "std::string", "\"main\"", "Function to train">,
    Option<"kind", "kind", "::pp::LossKind",
           "::pp::LossKind::SoftmaxCrossEntropy",
           "Loss: softmax-cross-entropy or mse">,
    Option<"classAxis", "class-axis", "int64_t", "0",
           "Class dim of the logits for softmax-cross-entropy (negative: "
           "from the end); 0: dim 1 of logits of rank >= 4, else the last">,
    Option<"ignoreIndex", "ignore-index", "int64_t", "-100",
           "Label softmax-cross-entropy skips (no loss, no gradient, not "
           "counted in the mean or the accuracy); PyTorch's default">,
    ListOption<"classWeights", "class-weights", "double",
               "Per-class weights of softmax-cross-entropy (PyTorch's "
               "weight=): one per class, the mean over labels divides by "
               "their classes' weights">,
    Option<"labelSmoothing", "label-smoothing", "double", "0.0",
           "Label smoothing eps in [0, 1] of softmax-cross-entropy, as "
           "PyTorch's: (1 - eps) x the cross-entropy + eps x the mean over "
           "classes of -log softmax">,
  ];
  let dependentDialects = ["pp::onnx::ONNXDialect"];
}

def MixedPrecisionPass : Pass<"pp-mixed-precision", "mlir::ModuleOp"> {
  let summary = "Compute the forward (and so the backward) pass in bf16 or fp16, with fp32 master weights";
  let description = [{
    Runs after `--pp-add-loss` and before `--pp-autodiff`. Every op of the
    model function that reads a float tensor computes in the low precision
    (`precision=bf16` or `fp16`): its float operands are cast with
    `onnx.Cast` (one cast per value), and its results take the type its
    type inference gives. The weights stay fp32 globals (the master copy the
    optimizer updates); their reads are cast, so autodiff turns each cast's
    gradient back into fp32 for the optimizer. Kept in fp32: the loss ops
    (`onnx.SoftmaxCrossEntropyLoss`, `onnx.NegativeLogLikelihoodLoss` and
    the ops `--pp-add-loss` named `loss`), BatchNormalization's running
    statistics, the model's own `onnx.Cast`s and the function's results.
    Kernels accumulate in fp32 (GEMMs, reductions, normalisations), and
    activations, stashes and transfers are stored in the low precision, so
    the planner's memory and communication figures halve. `precision=fp32`
    changes nothing.
  }];
  let options = [
    Option<"funcName", "func", "std::string", "\"main\"", "Function to convert">,
    Option<"precision", "precision", "::pp::Precision",
           "::pp::Precision::BF16",
           "bf16, fp16 or fp32">,
  ];
  let dependentDialects = ["pp::onnx::ONNXDialect"];
}

def AutodiffPass : Pass<"pp-autodiff", "mlir::ModuleOp"> {
  let summary = "Derive the backward pass: gradients of the loss for every trainable global";
  let description = [{
    Reverse-mode differentiation of the function's `pp.loss` result through
    `GradientOpInterface`. Adjoints of values with several uses are summed;
    several reads of one global (tied weights) sum into one gradient. The
    gradients become extra results marked `pp.grad_of = @global`. Training
    BatchNorm's running statistics are written back to their state globals.
    Backward ops carry `loc(fused<"backward">[<forward op's location>])`.
    Dropouts without a `stream` get the next free ones (their masks follow
    the op, not the stage it lands on). A tensor-parallel program
    (--pp-tensor-parallel) differentiates per device: a `shard.all_reduce`
    sum passes its gradient through, a `shard.all_slice` gathers it
    (`shard.all_gather`, and back), and the gradient parts of operands
    marked `train.grad_all_reduce` are added and summed over the group
    once all uses have contributed.
  }];
  let options = [
    Option<"funcName", "func", "std::string", "\"main\"", "Function to differentiate">,
  ];
  let dependentDialects = ["pp::onnx::ONNXDialect", "pp::train::TrainDialect"];
}

def OptimizerPass : Pass<"pp-optimizer", "mlir::ModuleOp"> {
  let summary = "Turn gradient results into optimizer updates of the globals";
  let description = [{
    Each result marked `pp.grad_of` is replaced by an optimizer step
    (`train.sgd` or `train.adam`) whose new parameter and state are written
    back with `train.global_write`. Optimizer state (momentum, Adam moments)
    and the step counter `@pp.step` become `state` globals.
    `weight-decay-min-rank=2` decays only weights of rank 2 or more
    (matrices, convolution kernels, embeddings), not biases and
    normalisation scales: the two parameter groups of nanoGPT and timm.

    Loss scaling (for fp16 gradients, as PyTorch's GradScaler): the loss
    gradient's seed is multiplied by the scale `@pp.loss_scale` and every
    gradient by its reciprocal. When any updated weight is not finite (a
    gradient overflowed), the step is skipped: no weight, optimizer state
    or step counter changes. `static` keeps the scale; `dynamic` halves it
    on a skipped step and doubles it after `loss-scale-interval` steps in a
    row without one (`@pp.loss_scale_good_steps` counts them). Under a
    pipeline every stage skips together: the stages' overflow flags meet on
    stage 0, which sends the verdict back, and every stage updates its own
    copy of the scale.
  }];
  let options = [
    Option<"funcName", "func", "std::string", "\"main\"", "Training-step function">,
    Option<"kind", "kind", "::pp::OptimizerKind", "::pp::OptimizerKind::SGD",
           "sgd, adam or adamw">,
    Option<"lr", "lr", "double", "0.01", "Learning rate">,
    Option<"momentum", "momentum", "double", "0.0", "SGD momentum">,
    Option<"dampening", "dampening", "double", "0.0", "SGD dampening">,
    Option<"nesterov", "nesterov", "bool", "false", "SGD Nesterov momentum">,
    Option<"weightDecay", "weight-decay", "double", "0.0", "Weight decay">,
    Option<"weightDecayMinRank", "weight-decay-min-rank", "int64_t", "0",
           "Decay only weights of at least this rank: 2 leaves biases and "
           "normalisation scales undecayed (nanoGPT's and timm's rule)">,
    Option<"beta1", "beta1", "double", "0.9", "Adam beta1">,
    Option<"beta2", "beta2", "double", "0.999", "Adam beta2">,
    Option<"epsilon", "epsilon", "double", "1e-8", "Adam epsilon">,
    Option<"lossScale", "loss-scale", "::pp::LossScale",
           "::pp::LossScale::None",
           "Loss scaling: none, static or dynamic">,
    Option<"lossScaleValue", "loss-scale-value", "double", "65536.0",
           "The static scale, or the dynamic scale's initial value">,
    Option<"lossScaleInterval", "loss-scale-interval", "int64_t", "2000",
           "Dynamic scaling: steps without overflow before the scale doubles">,
    Option<"lrSchedule", "lr-schedule", "::pp::LRSchedule",
           "::pp::LRSchedule::Constant",
           "The learning-rate schedule the program runs unless train's "
           "command line gives one: constant, step, multistep, "
           "exponential, cosine, linear or poly (train --lr-schedule; the "
           "module's pp.lr_schedule)">,
    Option<"warmupSteps", "warmup-steps", "int64_t", "0",
           "lr-schedule: linear warm-up steps (train --warmup-steps)">,
    Option<"minLr", "min-lr", "double", "0.0",
           "lr-schedule cosine, linear or poly: the rate the decay ends at "
           "(train --min-lr)">,
    Option<"stepSize", "step-size", "int64_t", "0",
           "lr-schedule step: steps between decays (train --step-size)">,
    ListOption<"milestones", "milestones", "int64_t",
               "lr-schedule multistep: the steps after the warm-up at which "
               "the rate is multiplied by gamma (train --milestones)">,
    Option<"gamma", "gamma", "double", "0.1",
           "lr-schedule step, multistep or exponential: the factor of each "
           "decay (train --gamma)">,
    Option<"power", "power", "double", "1.0",
           "lr-schedule poly: the exponent of the decay (train --power)">,
    Option<"decaySteps", "decay-steps", "int64_t", "0",
           "lr-schedule cosine, linear or poly: the step the decay ends at "
           "(0: the run's last, train --decay-steps)">,
  ];
  let dependentDialects = ["pp::onnx::ONNXDialect", "pp::train::TrainDialect"];
}

#endif // PP_DIALECT_TRAIN_TRANSFORMS_PASSES_TD
