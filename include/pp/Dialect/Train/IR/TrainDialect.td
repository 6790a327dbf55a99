//===- TrainDialect.td - The train dialect -----------------*- tablegen -*-===//
#ifndef PP_DIALECT_TRAIN_IR_TRAINDIALECT_TD
#define PP_DIALECT_TRAIN_IR_TRAINDIALECT_TD

include "mlir/IR/OpBase.td"

def Train_Dialect : Dialect {
  let name = "train";
  let summary = "Backward (vector-Jacobian) ops, optimizer steps and state updates";
  let description = [{
    The ops that autodiff and the optimizer passes add to an onnx-dialect
    model to turn its forward function into a training step. Backward ops
    compute the adjoint of one forward op; optimizer ops compute updated
    parameters and optimizer state; `train.global_write` stores new values
    of `onnx.global`s.
  }];
  let cppNamespace = "::pp::train";
  let dependentDialects = ["::pp::onnx::ONNXDialect"];
  let useDefaultAttributePrinterParser = 1;
}

#endif // PP_DIALECT_TRAIN_IR_TRAINDIALECT_TD
