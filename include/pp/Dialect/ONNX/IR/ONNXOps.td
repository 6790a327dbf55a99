//===- ONNXOps.td - Operations of the onnx dialect ---------*- tablegen -*-===//
#ifndef PP_DIALECT_ONNX_IR_ONNXOPS_TD
#define PP_DIALECT_ONNX_IR_ONNXOPS_TD

include "pp/Dialect/ONNX/IR/ONNXDialect.td"
include "pp/Dialect/ONNX/IR/ONNXInterfaces.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

//===----------------------------------------------------------------------===//
// Type constraints (ONNX tensor element types on ranked tensors).
//===----------------------------------------------------------------------===//

def ONNX_FloatTensor : RankedTensorOf<[F16, BF16, F32, F64]>;
def ONNX_IndexTensor : RankedTensorOf<[I32, I64]>;
def ONNX_I64Tensor : RankedTensorOf<[I64]>;
def ONNX_BoolTensor : RankedTensorOf<[I1]>;
def ONNX_NumericTensor : RankedTensorOf<[AnyFloat, AnySignlessInteger, AnyUnsignedInteger]>;
def ONNX_Tensor : RankedTensorOf<[AnyType]>;

//===----------------------------------------------------------------------===//
// Op classes.
//===----------------------------------------------------------------------===//

// Structural ops of the dialect that are not ONNX nodes (globals).
class ONNX_StructuralOp<string mnemonic, list<Trait> traits = []>
    : Op<ONNX_Dialect, mnemonic, traits>;

// An ONNX node. Result types are inferred from operands and attributes
// (InferTypeOpInterface); `inferBody`, when set, is the body of
// `inferReturnTypes`, otherwise ONNXOps.cpp defines it.
class ONNX_Op<string mnemonic, list<Trait> traits = []>
    : Op<ONNX_Dialect, mnemonic,
         !listconcat(traits, [InferTypeOpAdaptorWithIsCompatible,
                              ONNX_CostOpInterface,
                              ONNX_KernelFactsOpInterface])> {
  code inferBody = "";
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let extraClassDefinition = !strconcat([{
    bool $cppClass::isCompatibleReturnTypes(::mlir::TypeRange lhs,
                                            ::mlir::TypeRange rhs) {
      return ::pp::onnx::areCompatibleResultTypes(lhs, rhs);
    }
  }], !if(!empty(inferBody), "", !strconcat([{
    ::llvm::LogicalResult $cppClass::inferReturnTypes(
        ::mlir::MLIRContext *context, std::optional<::mlir::Location> location,
        Adaptor adaptor, ::llvm::SmallVectorImpl<::mlir::Type> &inferred) {
  }], inferBody, "}")));
}

// Elementwise op whose single result has the type of operand 0.
class ONNX_SameTypeOp<string mnemonic, Type operandType, list<Trait> traits = []>
    : ONNX_Op<mnemonic, !listconcat(traits, [Pure])> {
  let summary = "ONNX " # mnemonic # " (elementwise, result type of the input)";
  let description = "Mirrors ONNX `" # mnemonic # "`.\n\n```mlir\n%y = onnx."
      # mnemonic # " %x : (tensor<2x3xf32>) -> tensor<2x3xf32>\n```";
  let arguments = (ins operandType:$X);
  let results = (outs operandType:$Y);
  let inferBody = "return ::pp::onnx::inferSameAsOperand(location, adaptor.getOperands(), 0, inferred);";
}

// Elementwise op running the runtime's unary kernel `kind`.
class ONNX_UnaryKernelOp<string mnemonic, Type operandType, string kind,
                         list<Trait> traits = []>
    : ONNX_SameTypeOp<mnemonic, operandType,
                      !listconcat(traits, [Elementwise,
                                           ONNX_UnaryKernel<kind>])>;

// Binary op with multidirectional (numpy) broadcasting.
class ONNX_BroadcastOp<string mnemonic, Type operandType, Type resultType,
                       string resultElement = "nullptr", list<Trait> traits = []>
    : ONNX_Op<mnemonic, !listconcat(traits, [Pure, AllElementTypesMatch<["A", "B"]>])> {
  let summary = "ONNX " # mnemonic # " with numpy-style broadcasting";
  let description = "Mirrors ONNX `" # mnemonic # "`.\n\n```mlir\n%c = onnx."
      # mnemonic # " %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>\n```";
  let arguments = (ins operandType:$A, operandType:$B);
  let results = (outs resultType:$C);
  let inferBody = "return ::pp::onnx::inferBroadcast(location, adaptor.getOperands(), "
      # resultElement # ", inferred);";
}

//===----------------------------------------------------------------------===//
// Globals: trained parameters, state and large constants of a model.
//===----------------------------------------------------------------------===//

def ONNX_GlobalOp : ONNX_StructuralOp<"global", [Symbol]> {
  let summary = "A named tensor of the model: trainable, state or constant";
  let description = [{
    Holds an ONNX initializer. `kind` is `trainable` (float parameters the
    training step updates), `state` (updated without gradients, e.g.
    BatchNorm running statistics) or `constant`.

    ```mlir
    onnx.global trainable @"fc.weight" : tensor<10x64xf32> = dense_resource<fc.weight>
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, StrAttr:$kind,
                       TypeAttrOf<ONNX_Tensor>:$type,
                       OptionalAttr<ElementsAttr>:$initial_value);
  let assemblyFormat = "$kind $sym_name `:` $type (`=` $initial_value^)? attr-dict";
  let hasVerifier = 1;
}

def ONNX_GlobalReadOp : ONNX_StructuralOp<"global_read",
    [Pure, DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Reads the current value of an `onnx.global`";
  let description = [{
    ```mlir
    %w = onnx.global_read @"fc.weight" : tensor<10x64xf32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$global);
  let results = (outs ONNX_Tensor:$value);
  let assemblyFormat = "$global attr-dict `:` type($value)";
}

//===----------------------------------------------------------------------===//
// Elementwise unary ops.
//===----------------------------------------------------------------------===//

def ONNX_ReluOp : ONNX_UnaryKernelOp<"Relu", ONNX_FloatTensor, "Relu", [ONNX_MemoryBound]>;
def ONNX_SigmoidOp : ONNX_UnaryKernelOp<"Sigmoid", ONNX_FloatTensor, "Sigmoid", [ONNX_MemoryBound]>;
def ONNX_TanhOp : ONNX_UnaryKernelOp<"Tanh", ONNX_FloatTensor, "Tanh", [ONNX_MemoryBound]>;
def ONNX_ErfOp : ONNX_UnaryKernelOp<"Erf", ONNX_FloatTensor, "Erf", [ONNX_MemoryBound]>;
def ONNX_SqrtOp : ONNX_UnaryKernelOp<"Sqrt", ONNX_FloatTensor, "Sqrt", [ONNX_MemoryBound]>;
def ONNX_ExpOp : ONNX_UnaryKernelOp<"Exp", ONNX_FloatTensor, "Exp", [ONNX_MemoryBound]>;
def ONNX_LogOp : ONNX_UnaryKernelOp<"Log", ONNX_FloatTensor, "Log", [ONNX_MemoryBound]>;
def ONNX_ReciprocalOp : ONNX_UnaryKernelOp<"Reciprocal", ONNX_FloatTensor, "Reciprocal", [ONNX_MemoryBound]>;
def ONNX_FloorOp : ONNX_UnaryKernelOp<"Floor", ONNX_FloatTensor, "Floor">;
def ONNX_CeilOp : ONNX_UnaryKernelOp<"Ceil", ONNX_FloatTensor, "Ceil">;
def ONNX_NegOp : ONNX_UnaryKernelOp<"Neg", ONNX_NumericTensor, "Neg", [ONNX_MemoryBound]> {
  // ONNX's expanded functions negate shape data (LayerNormalization's
  // reduced-axes count).
  let hasFolder = 1;
}
def ONNX_AbsOp : ONNX_UnaryKernelOp<"Abs", ONNX_NumericTensor, "Abs", [ONNX_MemoryBound]>;
def ONNX_NotOp : ONNX_UnaryKernelOp<"Not", ONNX_BoolTensor, "Not">;
def ONNX_IdentityOp : ONNX_SameTypeOp<"Identity", ONNX_Tensor,
                                      [Elementwise, ONNX_MemoryBound]> {
  let hasFolder = 1;
  let extraClassDeclaration = [{ double getForwardFlops() { return 0; } }];
}

def ONNX_LeakyReluOp : ONNX_UnaryKernelOp<"LeakyRelu", ONNX_FloatTensor, "LeakyRelu",
                                          [ONNX_MemoryBound]> {
  let arguments = (ins ONNX_FloatTensor:$X, DefaultValuedAttr<F32Attr, "0.01">:$alpha);
  let extraClassDeclaration = [{
    float getUnaryAlpha() { return getAlpha().convertToFloat(); }
  }];
}
// max(0, min(1, alpha * x + beta)); torch's hardsigmoid exports as
// alpha = 1/6, beta = 0.5.
def ONNX_HardSigmoidOp : ONNX_UnaryKernelOp<"HardSigmoid", ONNX_FloatTensor,
                                            "HardSigmoid", [ONNX_MemoryBound]> {
  let arguments = (ins ONNX_FloatTensor:$X,
                       DefaultValuedAttr<F32Attr, "0.2">:$alpha,
                       DefaultValuedAttr<F32Attr, "0.5">:$beta);
  let extraClassDeclaration = [{
    float getUnaryAlpha() { return getAlpha().convertToFloat(); }
    float getUnaryBeta() { return getBeta().convertToFloat(); }
  }];
}
// x > 0 ? x : alpha * (e^x - 1).
def ONNX_EluOp : ONNX_UnaryKernelOp<"Elu", ONNX_FloatTensor, "Elu",
                                    [ONNX_MemoryBound]> {
  let arguments = (ins ONNX_FloatTensor:$X, DefaultValuedAttr<F32Attr, "1.0">:$alpha);
  let extraClassDeclaration = [{
    float getUnaryAlpha() { return getAlpha().convertToFloat(); }
  }];
}
// gamma * (x > 0 ? x : alpha * (e^x - 1)); the kernel's beta is gamma.
def ONNX_SeluOp : ONNX_UnaryKernelOp<"Selu", ONNX_FloatTensor, "Selu",
                                     [ONNX_MemoryBound]> {
  let arguments = (ins ONNX_FloatTensor:$X,
                       DefaultValuedAttr<F32Attr, "1.67326319217681884765625">:$alpha,
                       DefaultValuedAttr<F32Attr, "1.05070102214813232421875">:$gamma);
  let extraClassDeclaration = [{
    float getUnaryAlpha() { return getAlpha().convertToFloat(); }
    float getUnaryBeta() { return getGamma().convertToFloat(); }
  }];
}
// max(0, x) + min(0, alpha * (e^(x / alpha) - 1)); alpha must not be 0.
def ONNX_CeluOp : ONNX_UnaryKernelOp<"Celu", ONNX_FloatTensor, "Celu",
                                     [ONNX_MemoryBound]> {
  let arguments = (ins ONNX_FloatTensor:$X, DefaultValuedAttr<F32Attr, "1.0">:$alpha);
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    float getUnaryAlpha() { return getAlpha().convertToFloat(); }
  }];
}
// x > alpha ? x : 0.
def ONNX_ThresholdedReluOp : ONNX_UnaryKernelOp<"ThresholdedRelu", ONNX_FloatTensor,
                                                "ThresholdedRelu", [ONNX_MemoryBound]> {
  let arguments = (ins ONNX_FloatTensor:$X, DefaultValuedAttr<F32Attr, "1.0">:$alpha);
  let extraClassDeclaration = [{
    float getUnaryAlpha() { return getAlpha().convertToFloat(); }
  }];
}
// log(1 + e^x), computed without overflow.
def ONNX_SoftplusOp : ONNX_UnaryKernelOp<"Softplus", ONNX_FloatTensor, "Softplus",
                                         [ONNX_MemoryBound]>;
def ONNX_SoftsignOp : ONNX_UnaryKernelOp<"Softsign", ONNX_FloatTensor, "Softsign",
                                         [ONNX_MemoryBound]>;
def ONNX_SinOp : ONNX_UnaryKernelOp<"Sin", ONNX_FloatTensor, "Sin", [ONNX_MemoryBound]>;
def ONNX_CosOp : ONNX_UnaryKernelOp<"Cos", ONNX_FloatTensor, "Cos", [ONNX_MemoryBound]>;
// Halves round to even.
def ONNX_RoundOp : ONNX_UnaryKernelOp<"Round", ONNX_FloatTensor, "Round">;
// x * max(0, min(1, x / 6 + 1 / 2)), computed as torch's hardswish.
def ONNX_HardSwishOp : ONNX_UnaryKernelOp<"HardSwish", ONNX_FloatTensor,
                                          "HardSwish", [ONNX_MemoryBound]>;
def ONNX_GeluOp : ONNX_SameTypeOp<"Gelu", ONNX_FloatTensor,
                                  [Elementwise, ONNX_AttributeUnaryKernel,
                                   ONNX_MemoryBound]> {
  let arguments = (ins ONNX_FloatTensor:$X,
                       DefaultValuedAttr<StrAttr, "\"none\"">:$approximate);
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    std::optional<::pp::rt::UnaryKind> getUnaryKind() {
      return getApproximate() == "tanh" ? ::pp::rt::UnaryKind::GeluTanh
                                        : ::pp::rt::UnaryKind::GeluErf;
    }
  }];
}
def ONNX_SoftmaxOp : ONNX_SameTypeOp<"Softmax", ONNX_FloatTensor, [ONNX_MemoryBound]> {
  let arguments = (ins ONNX_FloatTensor:$input, DefaultValuedAttr<I64Attr, "-1">:$axis);
  let results = (outs ONNX_FloatTensor:$output);
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    double getForwardFlops() { return 5.0 * ::pp::onnx::getNumElements(getOutput().getType()); }
  }];
}
def ONNX_LogSoftmaxOp : ONNX_SameTypeOp<"LogSoftmax", ONNX_FloatTensor, [ONNX_MemoryBound]> {
  let arguments = (ins ONNX_FloatTensor:$input, DefaultValuedAttr<I64Attr, "-1">:$axis);
  let results = (outs ONNX_FloatTensor:$output);
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    double getForwardFlops() { return 5.0 * ::pp::onnx::getNumElements(getOutput().getType()); }
  }];
}
def ONNX_ClipOp : ONNX_SameTypeOp<"Clip", ONNX_NumericTensor,
                                  [AttrSizedOperandSegments, ONNX_MemoryBound]> {
  let arguments = (ins ONNX_NumericTensor:$input, Optional<ONNX_NumericTensor>:$min,
                       Optional<ONNX_NumericTensor>:$max);
  let results = (outs ONNX_NumericTensor:$output);
  let assemblyFormat = [{
    $input (`min` $min^)? (`max` $max^)? attr-dict `:` functional-type(operands, results)
  }];
}
def ONNX_CastOp : ONNX_Op<"Cast", [Pure, ONNX_MemoryBound]> {
  let summary = "ONNX Cast: converts elements to the ONNX data type `to`";
  let description = [{
    ```mlir
    %y = onnx.Cast %x {to = 1 : i64} : (tensor<4xi64>) -> tensor<4xf32>
    ```
  }];
  let arguments = (ins ONNX_Tensor:$input, I64Attr:$to);
  let results = (outs ONNX_Tensor:$output);
  let hasFolder = 1;
}
def ONNX_DropoutOp : ONNX_Op<"Dropout", [AttrSizedOperandSegments]> {
  let summary = "ONNX Dropout; the mask result is always present";
  let description = [{
    In training mode zeroes elements with probability `ratio` and scales the
    rest by 1/(1-ratio). The mask seed is the ONNX `seed` when given (the
    same mask every step), else a mix of the run's seed, the op's `stream`
    (its identity, numbered by the importer and --pp-autodiff; absent
    means 0) and the step. Element i of micro-batch m of a micro-batch of
    n elements draws position m * n + i of the whole mini-batch's mask, so
    masks do not depend on stages, schedules or micro-batch counts.

    ```mlir
    %y, %mask = onnx.Dropout %x ratio %r training_mode %t {stream = 0 : i64} : (tensor<4xf32>, tensor<f32>, tensor<i1>) -> (tensor<4xf32>, tensor<4xi1>)
    ```
  }];
  let arguments = (ins ONNX_FloatTensor:$data, Optional<ONNX_FloatTensor>:$ratio,
                       Optional<ONNX_BoolTensor>:$training_mode, OptionalAttr<I64Attr>:$seed,
                       OptionalAttr<I64Attr>:$stream);
  let results = (outs ONNX_FloatTensor:$output, ONNX_BoolTensor:$mask);
  let assemblyFormat = [{
    $data (`ratio` $ratio^)? (`training_mode` $training_mode^)? attr-dict `:` functional-type(operands, results)
  }];
}

//===----------------------------------------------------------------------===//
// Broadcasting binary ops and Where.
//===----------------------------------------------------------------------===//

def ONNX_AddOp : ONNX_BroadcastOp<"Add", ONNX_NumericTensor, ONNX_NumericTensor,
    "nullptr", [ONNX_FusibleBinary<"add">]> {
  let hasFolder = 1;
}
def ONNX_SubOp : ONNX_BroadcastOp<"Sub", ONNX_NumericTensor, ONNX_NumericTensor,
    "nullptr", [ONNX_FusibleBinary<"sub">]> {
  let hasFolder = 1;
}
def ONNX_MulOp : ONNX_BroadcastOp<"Mul", ONNX_NumericTensor, ONNX_NumericTensor,
    "nullptr", [ONNX_FusibleBinary<"mul">]> {
  let hasFolder = 1;
}
def ONNX_DivOp : ONNX_BroadcastOp<"Div", ONNX_NumericTensor, ONNX_NumericTensor,
    "nullptr", [ONNX_FusibleBinary<"div">]> {
  let hasFolder = 1;
}
// ONNX's Max and Min take one or more inputs; the importer chains them as
// these binary ops. A NaN operand gives NaN.
def ONNX_MaxOp : ONNX_BroadcastOp<"Max", ONNX_NumericTensor, ONNX_NumericTensor>;
def ONNX_MinOp : ONNX_BroadcastOp<"Min", ONNX_NumericTensor, ONNX_NumericTensor>;
def ONNX_PowOp : ONNX_Op<"Pow", [Pure]> {
  let summary = "ONNX Pow: X raised to Y, broadcasting; result has X's element type";
  let description = [{
    ```mlir
    %z = onnx.Pow %x, %y : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
    ```
  }];
  let arguments = (ins ONNX_NumericTensor:$X, ONNX_NumericTensor:$Y);
  let results = (outs ONNX_NumericTensor:$Z);
  let inferBody = [{
    return ::pp::onnx::inferBroadcast(location, adaptor.getOperands(),
        ::mlir::getElementTypeOrSelf(adaptor.getX().getType()), inferred);
  }];
}
def ONNX_ModOp : ONNX_Op<"Mod", [Pure, AllElementTypesMatch<["A", "B", "C"]>]> {
  let summary = "ONNX Mod: the remainder of A / B, broadcasting";
  let description = [{
    With `fmod = 0` (integers only) the remainder has the divisor's sign
    (Python's `%`); with `fmod = 1` the dividend's (C's `fmod`).

    ```mlir
    %c = onnx.Mod %a, %b {fmod = 1 : i64} : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
    ```
  }];
  let arguments = (ins ONNX_NumericTensor:$A, ONNX_NumericTensor:$B,
                       DefaultValuedAttr<I64Attr, "0">:$fmod);
  let results = (outs ONNX_NumericTensor:$C);
  let inferBody = [{
    return ::pp::onnx::inferBroadcast(location, adaptor.getOperands(), nullptr,
                                      inferred);
  }];
  let hasVerifier = 1;
  let hasFolder = 1;
}
def ONNX_EqualOp : ONNX_BroadcastOp<"Equal", ONNX_Tensor, ONNX_BoolTensor,
    "::mlir::IntegerType::get(context, 1)"> {
  let hasFolder = 1;
}
def ONNX_LessOp : ONNX_BroadcastOp<"Less", ONNX_NumericTensor, ONNX_BoolTensor,
    "::mlir::IntegerType::get(context, 1)">;
def ONNX_GreaterOp : ONNX_BroadcastOp<"Greater", ONNX_NumericTensor, ONNX_BoolTensor,
    "::mlir::IntegerType::get(context, 1)">;
def ONNX_AndOp : ONNX_BroadcastOp<"And", ONNX_BoolTensor, ONNX_BoolTensor>;
def ONNX_OrOp : ONNX_BroadcastOp<"Or", ONNX_BoolTensor, ONNX_BoolTensor>;

def ONNX_WhereOp : ONNX_Op<"Where", [Pure, AllElementTypesMatch<["X", "Y", "output"]>]> {
  let summary = "ONNX Where: elementwise select with broadcasting";
  let description = [{
    ```mlir
    %z = onnx.Where %c, %x, %y : (tensor<4x4xi1>, tensor<f32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    ```
  }];
  let arguments = (ins ONNX_BoolTensor:$condition, ONNX_Tensor:$X, ONNX_Tensor:$Y);
  let results = (outs ONNX_Tensor:$output);
  let inferBody = [{
    return ::pp::onnx::inferBroadcast(location, adaptor.getOperands(),
        ::mlir::getElementTypeOrSelf(adaptor.getX().getType()), inferred);
  }];
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Contractions, convolution, normalisation, pooling.
//===----------------------------------------------------------------------===//

def ONNX_MatMulOp : ONNX_Op<"MatMul", [Pure, ONNX_Contraction]> {
  let summary = "ONNX MatMul (numpy matmul semantics, batch dims broadcast)";
  let description = [{
    ```mlir
    %y = onnx.MatMul %a, %b : (tensor<2x3x4xf32>, tensor<4x5xf32>) -> tensor<2x3x5xf32>
    ```
  }];
  let arguments = (ins ONNX_NumericTensor:$A, ONNX_NumericTensor:$B);
  let results = (outs ONNX_NumericTensor:$Y);
  let extraClassDeclaration = [{ double getForwardFlops(); }];
}
def ONNX_GemmOp : ONNX_Op<"Gemm", [Pure, ONNX_Contraction]> {
  let summary = "ONNX Gemm: alpha * op(A) * op(B) + beta * C";
  let description = [{
    ```mlir
    %y = onnx.Gemm %a, %b, %c {transB = 1 : i64} : (tensor<8x64xf32>, tensor<10x64xf32>, tensor<10xf32>) -> tensor<8x10xf32>
    ```
  }];
  let arguments = (ins ONNX_NumericTensor:$A, ONNX_NumericTensor:$B, Optional<ONNX_NumericTensor>:$C,
                       DefaultValuedAttr<F32Attr, "1.0">:$alpha, DefaultValuedAttr<F32Attr, "1.0">:$beta,
                       DefaultValuedAttr<I64Attr, "0">:$transA, DefaultValuedAttr<I64Attr, "0">:$transB);
  let results = (outs ONNX_NumericTensor:$Y);
  let extraClassDeclaration = [{ double getForwardFlops(); }];
}
def ONNX_ConvOp : ONNX_Op<"Conv", [Pure, ONNX_Contraction]> {
  let summary = "ONNX Conv (N-d, grouped, dilated, padded)";
  let description = [{
    ```mlir
    %y = onnx.Conv %x, %w {kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x8x8xf32>
    ```
  }];
  let arguments = (ins ONNX_FloatTensor:$X, ONNX_FloatTensor:$W, Optional<ONNX_FloatTensor>:$B,
                       DefaultValuedAttr<StrAttr, "\"NOTSET\"">:$auto_pad,
                       OptionalAttr<DenseI64ArrayAttr>:$dilations,
                       DefaultValuedAttr<I64Attr, "1">:$group,
                       OptionalAttr<DenseI64ArrayAttr>:$kernel_shape,
                       OptionalAttr<DenseI64ArrayAttr>:$pads,
                       OptionalAttr<DenseI64ArrayAttr>:$strides);
  let results = (outs ONNX_FloatTensor:$Y);
  let extraClassDeclaration = [{ double getForwardFlops(); }];
}
def ONNX_ConvTransposeOp : ONNX_Op<"ConvTranspose", [Pure, ONNX_Contraction]> {
  let summary = "ONNX ConvTranspose (N-d, grouped, dilated, padded)";
  let description = [{
    The adjoint of Conv: X [N, C, in...] and W [C, M / group, k...] give
    Y [N, M, out...] with out = stride (in - 1) + output_padding +
    dilation (k - 1) + 1 - pads (explicit, or from auto_pad or output_shape,
    which must not need negative pads). output_padding must be less than
    the stride.

    ```mlir
    %y = onnx.ConvTranspose %x, %w {strides = array<i64: 2, 2>} : (tensor<1x4x4x4xf32>, tensor<4x2x3x3xf32>) -> tensor<1x2x9x9xf32>
    ```
  }];
  let arguments = (ins ONNX_FloatTensor:$X, ONNX_FloatTensor:$W, Optional<ONNX_FloatTensor>:$B,
                       DefaultValuedAttr<StrAttr, "\"NOTSET\"">:$auto_pad,
                       OptionalAttr<DenseI64ArrayAttr>:$dilations,
                       DefaultValuedAttr<I64Attr, "1">:$group,
                       OptionalAttr<DenseI64ArrayAttr>:$kernel_shape,
                       OptionalAttr<DenseI64ArrayAttr>:$output_padding,
                       OptionalAttr<DenseI64ArrayAttr>:$output_shape,
                       OptionalAttr<DenseI64ArrayAttr>:$pads,
                       OptionalAttr<DenseI64ArrayAttr>:$strides);
  let results = (outs ONNX_FloatTensor:$Y);
  let extraClassDeclaration = [{
    double getForwardFlops();
    /// The explicit window (the op verified: it succeeds).
    ::pp::onnx::ConvTransposeGeometry getGeometry();
  }];
}
def ONNX_BatchNormalizationOp : ONNX_Op<"BatchNormalization", [Pure]> {
  let summary = "ONNX BatchNormalization; running statistics results are always present";
  let description = [{
    With `training_mode = 1` normalises with the batch statistics and returns
    the updated running mean and variance. The running variance is updated
    with the biased batch variance (ONNX's reference) unless
    `unbiased_running_var` is set (not an ONNX attribute: the importer sets it
    for models produced by PyTorch, whose BatchNorm uses the unbiased one).

    ```mlir
    %y, %m, %v = onnx.BatchNormalization %x, %s, %b, %mean, %var {training_mode = 1 : i64} : (tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>)
    ```
  }];
  let arguments = (ins ONNX_FloatTensor:$X, ONNX_FloatTensor:$scale, ONNX_FloatTensor:$B,
                       ONNX_FloatTensor:$input_mean, ONNX_FloatTensor:$input_var,
                       DefaultValuedAttr<F32Attr, "1e-05">:$epsilon,
                       DefaultValuedAttr<F32Attr, "0.9">:$momentum,
                       DefaultValuedAttr<I64Attr, "0">:$training_mode,
                       UnitAttr:$unbiased_running_var);
  let results = (outs ONNX_FloatTensor:$Y, ONNX_FloatTensor:$running_mean,
                      ONNX_FloatTensor:$running_var);
  let extraClassDeclaration = [{
    double getForwardFlops() { return 4.0 * ::pp::onnx::getNumElements(getY().getType()); }
  }];
}
def ONNX_LayerNormalizationOp : ONNX_Op<"LayerNormalization", [Pure]> {
  let summary = "ONNX LayerNormalization; Mean and InvStdDev results are always present";
  let description = [{
    ```mlir
    %y, %mean, %inv = onnx.LayerNormalization %x, %s, %b {axis = -1 : i64} : (tensor<4x16x32xf32>, tensor<32xf32>, tensor<32xf32>) -> (tensor<4x16x32xf32>, tensor<4x16x1xf32>, tensor<4x16x1xf32>)
    ```
  }];
  let arguments = (ins ONNX_FloatTensor:$X, ONNX_FloatTensor:$Scale, Optional<ONNX_FloatTensor>:$B,
                       DefaultValuedAttr<I64Attr, "-1">:$axis,
                       DefaultValuedAttr<F32Attr, "1e-05">:$epsilon,
                       DefaultValuedAttr<I64Attr, "1">:$stash_type);
  let results = (outs ONNX_FloatTensor:$Y, ONNX_FloatTensor:$Mean, ONNX_FloatTensor:$InvStdDev);
  let extraClassDeclaration = [{
    double getForwardFlops() { return 8.0 * ::pp::onnx::getNumElements(getY().getType()); }
  }];
}

class ONNX_PoolOp<string mnemonic> : ONNX_Op<mnemonic, [Pure]> {
  let summary = "ONNX " # mnemonic;
  let description = [{
    ```mlir
    %y = onnx.MaxPool %x {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>} : (tensor<1x4x8x8xf32>) -> tensor<1x4x4x4xf32>
    ```
  }];
  let results = (outs ONNX_FloatTensor:$Y);
  let extraClassDeclaration = [{ double getForwardFlops(); }];
}
def ONNX_MaxPoolOp : ONNX_PoolOp<"MaxPool"> {
  let summary = "ONNX MaxPool; the Indices result (flat argmax) is always present";
  let results = (outs ONNX_NumericTensor:$Y, ONNX_I64Tensor:$Indices);
  let arguments = (ins ONNX_NumericTensor:$X,
                       DefaultValuedAttr<StrAttr, "\"NOTSET\"">:$auto_pad,
                       DefaultValuedAttr<I64Attr, "0">:$ceil_mode,
                       OptionalAttr<DenseI64ArrayAttr>:$dilations,
                       DenseI64ArrayAttr:$kernel_shape,
                       OptionalAttr<DenseI64ArrayAttr>:$pads,
                       DefaultValuedAttr<I64Attr, "0">:$storage_order,
                       OptionalAttr<DenseI64ArrayAttr>:$strides);
}
def ONNX_AveragePoolOp : ONNX_PoolOp<"AveragePool"> {
  let arguments = (ins ONNX_FloatTensor:$X,
                       DefaultValuedAttr<StrAttr, "\"NOTSET\"">:$auto_pad,
                       DefaultValuedAttr<I64Attr, "0">:$ceil_mode,
                       DefaultValuedAttr<I64Attr, "0">:$count_include_pad,
                       DenseI64ArrayAttr:$kernel_shape,
                       OptionalAttr<DenseI64ArrayAttr>:$pads,
                       OptionalAttr<DenseI64ArrayAttr>:$strides);
}
def ONNX_GlobalAveragePoolOp : ONNX_PoolOp<"GlobalAveragePool"> {
  let arguments = (ins ONNX_FloatTensor:$X);
}
def ONNX_GlobalMaxPoolOp : ONNX_PoolOp<"GlobalMaxPool"> {
  let arguments = (ins ONNX_FloatTensor:$X);
}

def ONNX_SoftmaxCrossEntropyLossOp : ONNX_Op<"SoftmaxCrossEntropyLoss", [Pure]> {
  let summary = "ONNX SoftmaxCrossEntropyLoss; log_prob result is always present";
  let description = [{
    ```mlir
    %loss, %logp = onnx.SoftmaxCrossEntropyLoss %scores, %labels {reduction = "mean"} : (tensor<8x10xf32>, tensor<8xi64>) -> (tensor<f32>, tensor<8x10xf32>)
    ```
  }];
  let arguments = (ins ONNX_FloatTensor:$scores, ONNX_IndexTensor:$labels,
                       Optional<ONNX_FloatTensor>:$weights,
                       OptionalAttr<I64Attr>:$ignore_index,
                       DefaultValuedAttr<StrAttr, "\"mean\"">:$reduction);
  let results = (outs ONNX_FloatTensor:$output, ONNX_FloatTensor:$log_prob);
  let extraClassDeclaration = [{
    double getForwardFlops() { return 6.0 * ::pp::onnx::getNumElements(getScores().getType()); }
  }];
}

//===----------------------------------------------------------------------===//
// Reductions.
//===----------------------------------------------------------------------===//

def ONNX_ReduceMeanOp : ONNX_Op<"ReduceMean", [Pure]> {
  let summary = "ONNX ReduceMean (opset 13-17: axes is an attribute)";
  let description = [{
    ```mlir
    %y = onnx.ReduceMean %x {axes = array<i64: 1>, keepdims = 0 : i64} : (tensor<4x8x32xf32>) -> tensor<4x32xf32>
    ```
  }];
  let arguments = (ins ONNX_NumericTensor:$data, OptionalAttr<DenseI64ArrayAttr>:$axes,
                       DefaultValuedAttr<I64Attr, "1">:$keepdims);
  let results = (outs ONNX_NumericTensor:$reduced);
  let extraClassDeclaration = [{
    double getForwardFlops() { return static_cast<double>(::pp::onnx::getNumElements(getData().getType())); }
  }];
}
// ReduceMax and ReduceMin as ReduceMean (opset 13-17: axes is an
// attribute). The extremum of an empty set is -inf / +inf (or the type's
// lowest / highest); a NaN wins.
class ONNX_ReduceExtremumOp<string mnemonic> : ONNX_Op<mnemonic, [Pure]> {
  let summary = "ONNX " # mnemonic # " (opset 13-17: axes is an attribute)";
  let description = "```mlir\n%y = onnx." # mnemonic
      # " %x {axes = array<i64: 1>, keepdims = 0 : i64} : (tensor<4x8xf32>) -> tensor<4xf32>\n```";
  let arguments = (ins ONNX_NumericTensor:$data, OptionalAttr<DenseI64ArrayAttr>:$axes,
                       DefaultValuedAttr<I64Attr, "1">:$keepdims);
  let results = (outs ONNX_NumericTensor:$reduced);
  let extraClassDeclaration = [{
    double getForwardFlops() { return static_cast<double>(::pp::onnx::getNumElements(getData().getType())); }
  }];
}
def ONNX_ReduceMaxOp : ONNX_ReduceExtremumOp<"ReduceMax">;
def ONNX_ReduceMinOp : ONNX_ReduceExtremumOp<"ReduceMin">;
def ONNX_ReduceSumOp : ONNX_Op<"ReduceSum", [Pure]> {
  let summary = "ONNX ReduceSum (axes is an optional constant input)";
  let description = [{
    ```mlir
    %y = onnx.ReduceSum %x, %axes {keepdims = 0 : i64} : (tensor<4x8xf32>, tensor<1xi64>) -> tensor<4xf32>
    ```
  }];
  let arguments = (ins ONNX_NumericTensor:$data, Optional<ONNX_I64Tensor>:$axes,
                       DefaultValuedAttr<I64Attr, "1">:$keepdims,
                       DefaultValuedAttr<I64Attr, "0">:$noop_with_empty_axes);
  let results = (outs ONNX_NumericTensor:$reduced);
  let extraClassDeclaration = [{
    double getForwardFlops() { return static_cast<double>(::pp::onnx::getNumElements(getData().getType())); }
  }];
}

//===----------------------------------------------------------------------===//
// Data movement and shape ops (no arithmetic; shape inputs must be constant).
//===----------------------------------------------------------------------===//

class ONNX_MoveOp<string mnemonic, list<Trait> traits = []>
    : ONNX_Op<mnemonic, !listconcat(traits, [Pure])> {
  let summary = "ONNX " # mnemonic;
  let extraClassDeclaration = [{ double getForwardFlops() { return 0; } }];
}

def ONNX_ConstantOp : ONNX_MoveOp<"Constant", [ConstantLike]> {
  let description = [{
    All ONNX value forms (value, value_float(s), value_int(s)) are imported as
    `value`.

    ```mlir
    %c = onnx.Constant dense<[2, 3]> : tensor<2xi64>
    ```
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs ONNX_Tensor:$output);
  let assemblyFormat = "$value attr-dict";
  let hasFolder = 1;
  let inferBody = [{
    inferred.push_back(adaptor.getValue().getType());
    return ::mlir::success();
  }];
}
def ONNX_ConstantOfShapeOp : ONNX_MoveOp<"ConstantOfShape"> {
  let description = "Tensor of the given (constant) shape filled with `value`.";
  let arguments = (ins ONNX_I64Tensor:$input, OptionalAttr<ElementsAttr>:$value);
  let results = (outs ONNX_Tensor:$output);
  let hasFolder = 1;
}
def ONNX_ShapeOp : ONNX_MoveOp<"Shape"> {
  let description = "The static shape as a 1-D i64 tensor; folds to a constant.";
  let arguments = (ins ONNX_Tensor:$data, DefaultValuedAttr<I64Attr, "0">:$start,
                       OptionalAttr<I64Attr>:$end);
  let results = (outs ONNX_I64Tensor:$shape);
  let hasFolder = 1;
}
def ONNX_SizeOp : ONNX_MoveOp<"Size"> {
  let description = "The static element count as an i64 scalar; folds to a constant.";
  let arguments = (ins ONNX_Tensor:$data);
  let results = (outs ONNX_I64Tensor:$size);
  let hasFolder = 1;
  let inferBody = [{
    inferred.push_back(::mlir::RankedTensorType::get({}, ::mlir::IntegerType::get(context, 64)));
    return ::mlir::success();
  }];
}
def ONNX_RangeOp : ONNX_MoveOp<"Range"> {
  let description = [{
    `start`, `start + delta`, ... below `limit` (above it for a negative
    delta). The scalar operands must be constants (the count is the result
    shape); it folds to a constant.
  }];
  let arguments = (ins ONNX_NumericTensor:$start, ONNX_NumericTensor:$limit,
                       ONNX_NumericTensor:$delta);
  let results = (outs ONNX_NumericTensor:$output);
  let hasFolder = 1;
}
def ONNX_FlattenOp : ONNX_MoveOp<"Flatten", [ONNX_MemoryBound]> {
  let description = "Reshapes to 2-D, splitting the dims at `axis`.";
  let arguments = (ins ONNX_Tensor:$input, DefaultValuedAttr<I64Attr, "1">:$axis);
  let results = (outs ONNX_Tensor:$output);
}
def ONNX_TransposeOp : ONNX_MoveOp<"Transpose", [ONNX_MemoryBound]> {
  let description = "Permutes dims by `perm` (default: reversed).";
  let arguments = (ins ONNX_Tensor:$data, OptionalAttr<DenseI64ArrayAttr>:$perm);
  let results = (outs ONNX_Tensor:$transposed);
  let hasFolder = 1;
}
def ONNX_ReshapeOp : ONNX_MoveOp<"Reshape", [ONNX_MemoryBound]> {
  let description = "Reshape to a constant target shape (0 copies, -1 infers).";
  let arguments = (ins ONNX_Tensor:$data, ONNX_I64Tensor:$shape,
                       DefaultValuedAttr<I64Attr, "0">:$allowzero);
  let results = (outs ONNX_Tensor:$reshaped);
  let hasFolder = 1;
}
def ONNX_SqueezeOp : ONNX_MoveOp<"Squeeze", [ONNX_MemoryBound]> {
  let description = "Removes size-1 dims named by the constant `axes` (all when absent).";
  let arguments = (ins ONNX_Tensor:$data, Optional<ONNX_I64Tensor>:$axes);
  let results = (outs ONNX_Tensor:$squeezed);
  let hasFolder = 1;
}
def ONNX_UnsqueezeOp : ONNX_MoveOp<"Unsqueeze", [ONNX_MemoryBound]> {
  let description = "Inserts size-1 dims at the constant `axes`.";
  let arguments = (ins ONNX_Tensor:$data, ONNX_I64Tensor:$axes);
  let results = (outs ONNX_Tensor:$expanded);
  let hasFolder = 1;
}
def ONNX_ExpandOp : ONNX_MoveOp<"Expand"> {
  let description = "Broadcasts to a constant shape.";
  let arguments = (ins ONNX_Tensor:$input, ONNX_I64Tensor:$shape);
  let results = (outs ONNX_Tensor:$output);
  let hasFolder = 1;
}
def ONNX_PadOp : ONNX_MoveOp<"Pad", [AttrSizedOperandSegments, ONNX_MemoryBound]> {
  let summary = "ONNX Pad (opset 11+ form: pads, constant_value and axes are inputs)";
  let description = [{
    Pads (or, with negative pads, crops) every dim by the constant `pads`
    (begin counts, then end counts, of each dim in `axes`, default all);
    `mode` is `constant` (with the scalar `constant_value`, default 0),
    `reflect` or `edge`. The operands other than `data` must be constants.

    ```mlir
    %y = onnx.Pad %x, %pads {mode = "reflect"} : (tensor<1x2x4x4xf32>, tensor<8xi64>) -> tensor<1x2x6x6xf32>
    ```
  }];
  let arguments = (ins ONNX_Tensor:$data, ONNX_I64Tensor:$pads,
                       Optional<ONNX_Tensor>:$constant_value,
                       Optional<ONNX_IndexTensor>:$axes,
                       DefaultValuedAttr<StrAttr, "\"constant\"">:$mode);
  let results = (outs ONNX_Tensor:$output);
  let assemblyFormat = [{
    $data `,` $pads (`value` $constant_value^)? (`axes` $axes^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasFolder = 1;
  let extraClassDeclaration = [{
    int64_t getForwardFlops() { return 0; }
    /// Begin counts then end counts of every dim (fails, with an error at
    /// the op, when an operand is not constant or out of range).
    ::mlir::FailureOr<::llvm::SmallVector<int64_t>> getResolvedPads();
    /// The runtime mode (fails for an unknown `mode`).
    ::mlir::FailureOr<::pp::rt::PadMode> getPadMode();
    /// The constant a `constant` pad writes (0 when absent).
    double getPadValue();
  }];
}
def ONNX_ConcatOp : ONNX_MoveOp<"Concat"> {
  let description = "Concatenates along `axis`.";
  let arguments = (ins Variadic<ONNX_Tensor>:$inputs, I64Attr:$axis);
  let results = (outs ONNX_Tensor:$concat_result);
  let hasFolder = 1;
}
def ONNX_SplitOp : ONNX_MoveOp<"Split"> {
  let description = [{
    Splits along `axis` by the constant `split` sizes, or into `num_outputs`
    equal parts (the importer records the node's output count there).
  }];
  let arguments = (ins ONNX_Tensor:$input, Optional<ONNX_I64Tensor>:$split,
                       DefaultValuedAttr<I64Attr, "0">:$axis, OptionalAttr<I64Attr>:$num_outputs);
  let results = (outs Variadic<ONNX_Tensor>:$outputs);
}
def ONNX_SliceOp : ONNX_MoveOp<"Slice", [AttrSizedOperandSegments]> {
  let description = "Strided slice with constant starts/ends/axes/steps.";
  let arguments = (ins ONNX_Tensor:$data, ONNX_IndexTensor:$starts, ONNX_IndexTensor:$ends,
                       Optional<ONNX_IndexTensor>:$axes, Optional<ONNX_IndexTensor>:$steps);
  let results = (outs ONNX_Tensor:$output);
  let assemblyFormat = [{
    $data `,` $starts `,` $ends (`axes` $axes^)? (`steps` $steps^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasFolder = 1;
  let extraClassDeclaration = [{
    double getForwardFlops() { return 0; }
    /// The resolved slice per dim (fails when an operand is not constant).
    ::mlir::FailureOr<::pp::onnx::SliceBounds> getBounds();
  }];
}
def ONNX_GatherOp : ONNX_MoveOp<"Gather"> {
  let description = "Gathers slices of `data` along `axis` at `indices`.";
  let arguments = (ins ONNX_Tensor:$data, ONNX_IndexTensor:$indices,
                       DefaultValuedAttr<I64Attr, "0">:$axis);
  let results = (outs ONNX_Tensor:$output);
  let hasFolder = 1;
}
def ONNX_ScatterNDOp : ONNX_MoveOp<"ScatterND",
    [AllElementTypesMatch<["data", "updates", "output"]>]> {
  let description = [{
    `data` with slices replaced (or combined by `reduction`: `add`, `mul`,
    `max`, `min`) by `updates`. The last dim k of `indices` addresses
    data's first k dims (negative values count from the end); updates has
    the shape indices.shape[:-1] + data.shape[k:]. Index tuples apply in
    order (a repeated one: the last wins without a reduction).

    ```mlir
    %y = onnx.ScatterND %data, %indices, %updates : (tensor<4x3xf32>, tensor<2x1xi64>, tensor<2x3xf32>) -> tensor<4x3xf32>
    ```
  }];
  let arguments = (ins ONNX_Tensor:$data, ONNX_IndexTensor:$indices,
                       ONNX_Tensor:$updates,
                       DefaultValuedAttr<StrAttr, "\"none\"">:$reduction);
  let results = (outs ONNX_Tensor:$output);
  let hasFolder = 1;
  let extraClassDeclaration = [{
    double getForwardFlops() { return 0; }
    /// The runtime reduction (fails, with an error at the op, for an
    /// unknown `reduction`).
    ::mlir::FailureOr<::pp::rt::ScatterReduction> getScatterReduction();
    /// Per index tuple, the row of data flattened over its first k dims
    /// that it addresses (negative indices counted from the end); none
    /// unless the indices are constant and in range.
    std::optional<::llvm::SmallVector<int64_t>> getConstantRows();
  }];
}

#endif // PP_DIALECT_ONNX_IR_ONNXOPS_TD
