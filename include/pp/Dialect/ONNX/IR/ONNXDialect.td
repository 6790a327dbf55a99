//===- ONNXDialect.td - The onnx dialect -------------------*- tablegen -*-===//
#ifndef PP_DIALECT_ONNX_IR_ONNXDIALECT_TD
#define PP_DIALECT_ONNX_IR_ONNXDIALECT_TD

include "mlir/IR/OpBase.td"

def ONNX_Dialect : Dialect {
  let name = "onnx";
  let summary = "ONNX operators on static, ranked tensors with value semantics";
  let description = [{
    Op names and attribute names mirror the ONNX operator set (opsets 13-17).
    Every attribute is explicit after import (ONNX defaults are applied by the
    importer for the model's opset). Trained state lives in `onnx.global`
    symbols that functions read with `onnx.global_read`.
  }];
  let cppNamespace = "::pp::onnx";
  let hasConstantMaterializer = 1;
}

#endif // PP_DIALECT_ONNX_IR_ONNXDIALECT_TD
