//===- ONNXInterfaces.td - Interfaces of onnx ops ----------*- tablegen -*-===//
#ifndef PP_DIALECT_ONNX_IR_ONNXINTERFACES_TD
#define PP_DIALECT_ONNX_IR_ONNXINTERFACES_TD

include "mlir/IR/OpBase.td"

def ONNX_CostOpInterface : OpInterface<"CostOpInterface"> {
  let description = [{
    Analytic work of one forward evaluation of the op on its static shapes.
    The default counts one FLOP per element of the first result; ops with
    more (contractions, pools, normalisations) or no arithmetic (data
    movement) define `getForwardFlops` themselves.
  }];
  let cppNamespace = "::pp::onnx";
  let methods = [
    InterfaceMethod<"Floating-point operations of one forward evaluation.",
      "int64_t", "getForwardFlops", (ins), [{}], [{
        if ($_op->getNumResults() == 0)
          return 0;
        auto type = ::llvm::dyn_cast<::mlir::ShapedType>($_op->getResult(0).getType());
        return type && type.hasStaticShape() ? type.getNumElements() : 0;
      }]>,
  ];
}

#endif // PP_DIALECT_ONNX_IR_ONNXINTERFACES_TD
