//===- TrainAttrs.td - Attributes of the train dialect -----*- tablegen -*-===//
#ifndef PP_DIALECT_TRAIN_IR_TRAINATTRS_TD
#define PP_DIALECT_TRAIN_IR_TRAINATTRS_TD

include "pp/Dialect/Train/IR/TrainDialect.td"
include "mlir/IR/AttrTypeBase.td"

// A kind of pp/Runtime/UnaryKinds.def (the one list the runtime's kernels,
// the onnx ops' kernel facts and this dialect share), by its name.
def Train_UnaryKindAttr : AttrDef<Train_Dialect, "UnaryKind"> {
  let mnemonic = "unary_kind";
  let summary = "A unary kernel kind of the runtime (Relu, Sigmoid, ...)";
  let parameters = (ins AttrParameter<"::pp::rt::UnaryKind", "a UnaryKind">:$value);
  let assemblyFormat = "`<` $value `>`";
  // Ops read and build the kind itself.
  let returnType = "::pp::rt::UnaryKind";
  let convertFromStorage = "$_self.getValue()";
  let constBuilderCall = "::pp::train::UnaryKindAttr::get($_builder.getContext(), $0)";
}

#endif // PP_DIALECT_TRAIN_IR_TRAINATTRS_TD
