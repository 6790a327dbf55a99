//===- TrainOps.td - Operations of the train dialect -------*- tablegen -*-===//
#ifndef PP_DIALECT_TRAIN_IR_TRAINOPS_TD
#define PP_DIALECT_TRAIN_IR_TRAINOPS_TD

include "pp/Dialect/Train/IR/TrainAttrs.td"
include "pp/Dialect/Train/IR/TrainDialect.td"
include "pp/Dialect/ONNX/IR/ONNXInterfaces.td"
include "pp/Dialect/Train/IR/TrainInterfaces.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Train_FloatTensor : RankedTensorOf<[F16, BF16, F32, F64]>;
def Train_IndexTensor : RankedTensorOf<[I32, I64]>;
def Train_BoolTensor : RankedTensorOf<[I1]>;
def Train_Tensor : RankedTensorOf<[AnyType]>;

class Train_Op<string mnemonic, list<Trait> traits = []>
    : Op<Train_Dialect, mnemonic, traits>;

// A backward op: pure, with its result types written out (they are the
// forward operand types, which the op cannot infer from its own operands).
class Train_GradOp<string mnemonic, list<Trait> traits = []>
    : Train_Op<mnemonic, !listconcat(traits, [Pure])>;

def Train_GlobalWriteOp : Train_Op<"global_write",
    [DeclareOpInterfaceMethods<SymbolUserOpInterface>,
     MemoryEffects<[MemWrite]>]> {
  let summary = "Stores a new value into an onnx.global";
  let description = [{
    Later reads (in this call or the next) see the stored value.

    ```mlir
    train.global_write @"fc.weight", %new : tensor<10x64xf32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$global, Train_Tensor:$value);
  let assemblyFormat = "$global `,` $value attr-dict `:` type($value)";
}

def Train_UnaryGradOp : Train_GradOp<"unary_grad",
    [AllTypesMatch<["x", "y", "dy", "dx"]>, Elementwise,
     DeclareOpInterfaceMethods<ONNX_KernelFactsOpInterface,
                               ["getFusedElementFunction"]>]> {
  let summary = "dx = dy * f'(x) for an elementwise unary op f";
  let description = [{
    `kind` names f as the kernel library does (pp/Runtime/UnaryKinds.def):
    Relu, LeakyRelu (with `alpha`), Sigmoid, HardSigmoid (with `alpha` and
    `beta`), HardSwish, Tanh, Erf, GeluErf, GeluTanh, Sqrt, Exp, Log, Abs,
    Reciprocal. `y` is f(x).

    ```mlir
    %dx = train.unary_grad <Relu> %x, %y, %dy : tensor<4xf32>
    ```
  }];
  let arguments = (ins Train_UnaryKindAttr:$kind, Train_FloatTensor:$x, Train_FloatTensor:$y,
                       Train_FloatTensor:$dy, DefaultValuedAttr<F32Attr, "0.0">:$alpha,
                       DefaultValuedAttr<F32Attr, "0.0">:$beta);
  let results = (outs Train_FloatTensor:$dx);
  let assemblyFormat = "$kind $x `,` $y `,` $dy attr-dict `:` type($dx)";
  let hasVerifier = 1;
}

def Train_ReduceSumToOp : Train_GradOp<"reduce_sum_to"> {
  let summary = "Sums the dims that broadcasting added or stretched (adjoint of broadcast)";
  let description = [{
    ```mlir
    %db = train.reduce_sum_to %dc : tensor<8x10xf32> to tensor<10xf32>
    ```
  }];
  let arguments = (ins Train_Tensor:$x);
  let results = (outs Train_Tensor:$y);
  let assemblyFormat = "$x attr-dict `:` type($x) `to` type($y)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Train_SoftmaxGradOp : Train_GradOp<"softmax_grad",
    [AllTypesMatch<["y", "dy", "dx"]>]> {
  let summary = "Adjoint of Softmax (or LogSoftmax when `log`) from its output";
  let description = [{
    ```mlir
    %dx = train.softmax_grad %y, %dy {axis = -1 : i64} : tensor<2x8xf32>
    ```
  }];
  let arguments = (ins Train_FloatTensor:$y, Train_FloatTensor:$dy, I64Attr:$axis,
                       DefaultValuedAttr<BoolAttr, "false">:$log);
  let results = (outs Train_FloatTensor:$dx);
  let assemblyFormat = "$y `,` $dy attr-dict `:` type($dx)";
}

def Train_LayerNormGradOp : Train_GradOp<"layer_norm_grad"> {
  let summary = "Adjoint of LayerNormalization: dx, dscale, dbias";
  let description = [{
    ```mlir
    %dx, %ds, %db = train.layer_norm_grad %dy, %x, %scale, %mean, %inv {axis = -1 : i64} : (tensor<4x32xf32>, tensor<4x32xf32>, tensor<32xf32>, tensor<4x1xf32>, tensor<4x1xf32>) -> (tensor<4x32xf32>, tensor<32xf32>, tensor<32xf32>)
    ```
  }];
  let arguments = (ins Train_FloatTensor:$dy, Train_FloatTensor:$x, Train_FloatTensor:$scale,
                       Train_FloatTensor:$mean, Train_FloatTensor:$inv_std_dev, I64Attr:$axis);
  let results = (outs Train_FloatTensor:$dx, Train_FloatTensor:$dscale, Train_FloatTensor:$dbias);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
}

def Train_BatchNormGradOp : Train_GradOp<"batch_norm_grad"> {
  let summary = "Adjoint of training-mode BatchNormalization (batch statistics)";
  let description = [{
    Recomputes the batch mean and variance of `x` (they are not ONNX outputs).

    ```mlir
    %dx, %ds, %db = train.batch_norm_grad %dy, %x, %scale {epsilon = 1.0e-05 : f32} : (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>, tensor<4xf32>) -> (tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>)
    ```
  }];
  let arguments = (ins Train_FloatTensor:$dy, Train_FloatTensor:$x, Train_FloatTensor:$scale,
                       F32Attr:$epsilon);
  let results = (outs Train_FloatTensor:$dx, Train_FloatTensor:$dscale, Train_FloatTensor:$dbias);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
}

def Train_MatMulOp : Train_Op<"matmul",
    [Pure, ONNX_Contraction,
     DeclareOpInterfaceMethods<ONNX_CostOpInterface, ["getForwardFlops"]>,
     DeclareOpInterfaceMethods<ONNX_KernelFactsOpInterface>]> {
  let summary = "numpy matmul of op(A) and op(B), op swapping the last two dims";
  let description = [{
    `onnx.MatMul` of operands read transposed where `trans_a` / `trans_b`
    (operands of rank >= 2): the last two dims of that operand swapped,
    batch dims broadcast as numpy does. --pp-fold-transposes makes it from
    a MatMul of a Transpose that swaps the last two dims (attention's
    `q @ k^T` and the gradients of batched products), so that the GEMMs
    read the operand in place instead of a transposed copy.

    ```mlir
    %s = train.matmul %q, %k {trans_b} : (tensor<2x4x7x8xf32>, tensor<2x4x7x8xf32>) -> tensor<2x4x7x7xf32>
    ```
  }];
  let arguments = (ins Train_FloatTensor:$A, Train_FloatTensor:$B,
                       UnitAttr:$trans_a, UnitAttr:$trans_b);
  let results = (outs Train_FloatTensor:$Y);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

class Train_WindowGradOp<string mnemonic> : Train_GradOp<mnemonic> {
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
}

def Train_ConvGradInputOp : Train_WindowGradOp<"conv_grad_input"> {
  let summary = "Adjoint of Conv with respect to its input (transposed convolution)";
  let description = [{
    Window attributes are explicit (auto_pad resolved to pads).

    ```mlir
    %dx = train.conv_grad_input %dy, %w {dilations = array<i64: 1, 1>, group = 1 : i64, kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<1x4x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x3x8x8xf32>
    ```
  }];
  let arguments = (ins Train_FloatTensor:$dy, Train_FloatTensor:$W,
                       DenseI64ArrayAttr:$dilations, I64Attr:$group, DenseI64ArrayAttr:$kernel_shape,
                       DenseI64ArrayAttr:$pads, DenseI64ArrayAttr:$strides);
  let results = (outs Train_FloatTensor:$dx);
}

def Train_ConvGradWeightOp : Train_WindowGradOp<"conv_grad_weight"> {
  let summary = "Adjoint of Conv with respect to its weight";
  let description = [{
    ```mlir
    %dw = train.conv_grad_weight %dy, %x {dilations = array<i64: 1, 1>, group = 1 : i64, kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<1x4x8x8xf32>, tensor<1x3x8x8xf32>) -> tensor<4x3x3x3xf32>
    ```
  }];
  let arguments = (ins Train_FloatTensor:$dy, Train_FloatTensor:$X,
                       DenseI64ArrayAttr:$dilations, I64Attr:$group, DenseI64ArrayAttr:$kernel_shape,
                       DenseI64ArrayAttr:$pads, DenseI64ArrayAttr:$strides);
  let results = (outs Train_FloatTensor:$dW);
}

def Train_MaxPoolGradOp : Train_WindowGradOp<"max_pool_grad"> {
  let summary = "Adjoint of MaxPool: scatters dy to the argmax indices";
  let description = [{
    ```mlir
    %dx = train.max_pool_grad %dy, %indices : (tensor<1x4x4x4xf32>, tensor<1x4x4x4xi64>) -> tensor<1x4x8x8xf32>
    ```
  }];
  let arguments = (ins Train_FloatTensor:$dy, RankedTensorOf<[I64]>:$indices);
  let results = (outs Train_FloatTensor:$dx);
}

def Train_AvgPoolGradOp : Train_WindowGradOp<"avg_pool_grad"> {
  let summary = "Adjoint of AveragePool";
  let description = [{
    ```mlir
    %dx = train.avg_pool_grad %dy {count_include_pad = 0 : i64, kernel_shape = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : (tensor<1x4x4x4xf32>) -> tensor<1x4x8x8xf32>
    ```
  }];
  let arguments = (ins Train_FloatTensor:$dy, DenseI64ArrayAttr:$kernel_shape,
                       DenseI64ArrayAttr:$pads, DenseI64ArrayAttr:$strides, I64Attr:$count_include_pad);
  let results = (outs Train_FloatTensor:$dx);
}

def Train_SliceGradOp : Train_WindowGradOp<"slice_grad"> {
  let summary = "Adjoint of Slice: dy placed at starts + i * steps in zeros";
  let description = [{
    ```mlir
    %dx = train.slice_grad %dy {starts = array<i64: 0, 1>, steps = array<i64: 1, 1>} : (tensor<2x2xf32>) -> tensor<2x3xf32>
    ```
  }];
  let arguments = (ins Train_Tensor:$dy, DenseI64ArrayAttr:$starts, DenseI64ArrayAttr:$steps);
  let results = (outs Train_Tensor:$dx);
  let hasVerifier = 1;
}

def Train_PadGradOp : Train_WindowGradOp<"pad_grad"> {
  let summary = "Adjoint of Pad: scatter-adds dy into zeros where the pad read x";
  let description = [{
    Each element of `dy` is added to the element of `dx` that the forward
    pad read for it (`pads`: begin counts then end counts of every dim;
    `mode`: `constant`, `reflect` or `edge`, as onnx.Pad).

    ```mlir
    %dx = train.pad_grad %dy {mode = "reflect", pads = array<i64: 0, 0, 1, 1, 0, 0, 1, 1>} : (tensor<1x2x6x6xf32>) -> tensor<1x2x4x4xf32>
    ```
  }];
  let arguments = (ins Train_FloatTensor:$dy, DenseI64ArrayAttr:$pads, StrAttr:$mode);
  let results = (outs Train_FloatTensor:$dx);
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The runtime mode (fails for an unknown `mode`).
    ::mlir::FailureOr<::pp::rt::PadMode> getPadMode();
  }];
}

def Train_GatherGradOp : Train_WindowGradOp<"gather_grad"> {
  let summary = "Adjoint of Gather: scatter-adds dy into zeros at the indices";
  let description = [{
    ```mlir
    %dw = train.gather_grad %dy, %tokens {axis = 0 : i64} : (tensor<4x16x32xf32>, tensor<4x16xi64>) -> tensor<64x32xf32>
    ```
  }];
  let arguments = (ins Train_FloatTensor:$dy, Train_IndexTensor:$indices, I64Attr:$axis);
  let results = (outs Train_FloatTensor:$ddata);
}

def Train_DropoutGradOp : Train_GradOp<"dropout_grad", [AllTypesMatch<["dy", "dx"]>]> {
  let summary = "Adjoint of Dropout: dy * mask / (1 - ratio)";
  let description = [{
    ```mlir
    %dx = train.dropout_grad %dy, %mask {ratio = 1.000000e-01 : f32} : tensor<4x8xf32>, tensor<4x8xi1>
    ```
  }];
  let arguments = (ins Train_FloatTensor:$dy, Train_BoolTensor:$mask, F32Attr:$ratio);
  let results = (outs Train_FloatTensor:$dx);
  let assemblyFormat = "$dy `,` $mask attr-dict `:` type($dy) `,` type($mask)";
}

def Train_SoftmaxCrossEntropyGradOp : Train_GradOp<"softmax_cross_entropy_grad"> {
  let summary = "Adjoint of SoftmaxCrossEntropyLoss with respect to the scores";
  let description = [{
    ```mlir
    %ds = train.softmax_cross_entropy_grad %dloss, %logp, %labels {reduction = "mean"} : (tensor<f32>, tensor<8x10xf32>, tensor<8xi64>) -> tensor<8x10xf32>
    ```
  }];
  let arguments = (ins Train_FloatTensor:$dloss, Train_FloatTensor:$log_prob,
                       Train_IndexTensor:$labels, Optional<Train_FloatTensor>:$weights,
                       OptionalAttr<I64Attr>:$ignore_index, StrAttr:$reduction);
  let results = (outs Train_FloatTensor:$dscores);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
}

//===----------------------------------------------------------------------===//
// Optimizer steps (functional: they return the new values).
//===----------------------------------------------------------------------===//

def Train_SGDOp : Train_Op<"sgd", [Pure, AllTypesMatch<["param", "grad", "new_param"]>]> {
  let summary = "One torch.optim.SGD step (momentum, dampening, Nesterov, weight decay)";
  let description = [{
    `step` is the 1-based step number (the momentum buffer is initialised
    with the first gradient). Without momentum there is no buffer.

    ```mlir
    %p1, %buf1 = train.sgd %p, %g, %step momentum_buffer %buf {lr = 1.0e-01 : f64, momentum = 9.0e-01 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<i64>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
    ```
  }];
  let arguments = (ins Train_FloatTensor:$param, Train_FloatTensor:$grad,
                       RankedTensorOf<[I64]>:$step, Optional<Train_FloatTensor>:$momentum_buffer,
                       F64Attr:$lr, DefaultValuedAttr<F64Attr, "0.0">:$momentum,
                       DefaultValuedAttr<F64Attr, "0.0">:$dampening,
                       DefaultValuedAttr<F64Attr, "0.0">:$weight_decay,
                       DefaultValuedAttr<BoolAttr, "false">:$nesterov);
  let results = (outs Train_FloatTensor:$new_param, Optional<Train_FloatTensor>:$new_momentum_buffer);
  let assemblyFormat = [{
    $param `,` $grad `,` $step (`momentum_buffer` $momentum_buffer^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Train_AdamOp : Train_Op<"adam", [Pure, AllTypesMatch<["param", "grad", "m", "v", "new_param", "new_m", "new_v"]>]> {
  let summary = "One torch.optim.Adam / AdamW step";
  let description = [{
    ```mlir
    %p1, %m1, %v1 = train.adam %p, %g, %m, %v, %step {lr = 1.0e-03 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<i64>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
    ```
  }];
  let arguments = (ins Train_FloatTensor:$param, Train_FloatTensor:$grad, Train_FloatTensor:$m,
                       Train_FloatTensor:$v, RankedTensorOf<[I64]>:$step, F64Attr:$lr,
                       DefaultValuedAttr<F64Attr, "0.9">:$beta1,
                       DefaultValuedAttr<F64Attr, "0.999">:$beta2,
                       DefaultValuedAttr<F64Attr, "1.0e-08">:$epsilon,
                       DefaultValuedAttr<F64Attr, "0.0">:$weight_decay,
                       DefaultValuedAttr<BoolAttr, "false">:$decoupled);
  let results = (outs Train_FloatTensor:$new_param, Train_FloatTensor:$new_m, Train_FloatTensor:$new_v);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
}

#endif // PP_DIALECT_TRAIN_IR_TRAINOPS_TD
