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
      "double", "getForwardFlops", (ins), [{}], [{
        if ($_op->getNumResults() == 0)
          return 0;
        auto type = ::llvm::dyn_cast<::mlir::ShapedType>($_op->getResult(0).getType());
        return type && type.hasStaticShape() ? static_cast<double>(type.getNumElements()) : 0.0;
      }]>,
  ];
}

//===----------------------------------------------------------------------===//
// Kernel facts
//===----------------------------------------------------------------------===//

// Marker traits of the facts below (C++ in ONNXOps.h).
class ONNX_OpTrait<string name, code extraDeclaration = [{}]>
    : NativeOpTrait<name, [], extraDeclaration> {
  let cppNamespace = "::pp::onnx::OpTrait";
}
// A contraction (Conv, Gemm, MatMul): its backward computes an input and a
// weight gradient of the forward's size each.
def ONNX_Contraction : ONNX_OpTrait<"Contraction">;
// Cheap, with an output as large as its input: what selective
// recomputation recomputes.
def ONNX_MemoryBound : ONNX_OpTrait<"MemoryBound">;
// Runs the runtime's unary kernel `kind` (pp/Runtime/UnaryKinds.def).
class ONNX_UnaryKernel<string kind>
    : ONNX_OpTrait<"UnaryKernel", "static constexpr ::pp::rt::UnaryKind "
                   "kUnaryKind = ::pp::rt::UnaryKind::" # kind # ";">;
// Runs a unary kernel chosen by its attributes (it defines getUnaryKind).
def ONNX_AttributeUnaryKernel : ONNX_OpTrait<"UnaryKernel">;
// A binary op that a pp.fused kernel computes with the element function
// `fn` of pp/Runtime/Fused.h.
class ONNX_FusibleBinary<string fn>
    : ONNX_OpTrait<"FusibleBinary", "static constexpr const char "
                   "*kFusedFunction = \"" # fn # "\";">;

def ONNX_KernelFactsOpInterface : OpInterface<"KernelFactsOpInterface"> {
  let description = [{
    What the interpreter, the code generator, the recompute pass and the
    cost model need to know of an op, declared once with its ODS definition
    through the traits above and upstream's `Elementwise`.
  }];
  let cppNamespace = "::pp::onnx";
  let methods = [
    InterfaceMethod<"The runtime unary kernel the op runs, if it is one.",
      "std::optional<::pp::rt::UnaryKind>", "getUnaryKind", (ins), [{}], [{
        return ::pp::onnx::detail::staticUnaryKind<ConcreteOp>();
      }]>,
    InterfaceMethod<"The unary kernel's alpha (LeakyRelu's slope, "
                    "HardSigmoid's; else 0).",
      "float", "getUnaryAlpha", (ins), [{}], [{ return 0.f; }]>,
    InterfaceMethod<"The unary kernel's beta (HardSigmoid's offset; else 0).",
      "float", "getUnaryBeta", (ins), [{}], [{ return 0.f; }]>,
    InterfaceMethod<"Whether the backward computes an input and a weight "
                    "gradient of the forward's size each.",
      "bool", "isContraction", (ins), [{}], [{
        return ConcreteOp::template hasTrait<::pp::onnx::OpTrait::Contraction>();
      }]>,
    InterfaceMethod<"Whether the op is cheap with an output as large as its "
                    "input (a selective recomputation candidate).",
      "bool", "isMemoryBound", (ins), [{}], [{
        return ConcreteOp::template hasTrait<::pp::onnx::OpTrait::MemoryBound>();
      }]>,
    InterfaceMethod<"Whether each output element depends on the same "
                    "element of the operands only.",
      "bool", "isElementwise", (ins), [{}], [{
        return ConcreteOp::template hasTrait<::mlir::OpTrait::Elementwise>();
      }]>,
    InterfaceMethod<"The element function of pp/Runtime/Fused.h that "
                    "computes the op inside a pp.fused kernel; empty if "
                    "the op cannot be fused.",
      "::llvm::StringRef", "getFusedElementFunction", (ins), [{}], [{
        if constexpr (ConcreteOp::template hasTrait<
                          ::pp::onnx::OpTrait::FusibleBinary>())
          return ConcreteOp::kFusedFunction;
        std::optional<::pp::rt::UnaryKind> kind = $_op.getUnaryKind();
        return kind ? ::pp::rt::fusedFunction(*kind) : "";
      }]>,
  ];
}

#endif // PP_DIALECT_ONNX_IR_ONNXINTERFACES_TD
