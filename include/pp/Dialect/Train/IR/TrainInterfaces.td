//===- TrainInterfaces.td - Interfaces of the train dialect -*- tablegen -*-===//
#ifndef PP_DIALECT_TRAIN_IR_TRAININTERFACES_TD
#define PP_DIALECT_TRAIN_IR_TRAININTERFACES_TD

include "mlir/IR/OpBase.td"

def Train_GradientOpInterface : OpInterface<"GradientOpInterface"> {
  let description = [{
    Vector-Jacobian product of an op: given the adjoints of its results (null
    for results that do not reach the loss), builds ops that compute the
    adjoints of its operands (null for operands without a gradient, such as
    integer inputs or shape operands). Attached to onnx ops as external
    models, so the onnx dialect does not depend on training.
  }];
  let cppNamespace = "::pp::train";
  let methods = [
    InterfaceMethod<"Builds the operand adjoints from the result adjoints.",
      "::llvm::LogicalResult", "buildGradient",
      (ins "::mlir::OpBuilder &":$builder,
           "::llvm::ArrayRef<::mlir::Value>":$resultGrads,
           "::llvm::SmallVectorImpl<::mlir::Value> &":$operandGrads)>,
  ];
}

#endif // PP_DIALECT_TRAIN_IR_TRAININTERFACES_TD
