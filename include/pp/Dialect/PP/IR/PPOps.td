//===- PPOps.td - Operations of the pp dialect -------------*- tablegen -*-===//
#ifndef PP_DIALECT_PP_IR_PPOPS_TD
#define PP_DIALECT_PP_IR_PPOPS_TD

include "pp/Dialect/PP/IR/PPDialect.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

// The micro-batch index: a scalar i64 (built implicitly by the parser).
def PP_MicroBatch : 0DTensorOf<[I64]> {
  let builderCall = "::mlir::RankedTensorType::get({}, $_builder.getI64Type())";
}

class PP_Op<string mnemonic, list<Trait> traits = []>
    : Op<PP_Dialect, mnemonic, traits>;

def PP_SendOp : PP_Op<"send", [MemoryEffects<[MemWrite]>]> {
  let summary = "Sends a tensor to another stage";
  let description = [{
    Sends `value` of micro-batch `micro_batch` to stage `peer`; the matching
    `pp.recv` on that stage has the same `tag` and names this stage as peer.

    ```mlir
    pp.send %act, %mb {peer = 1 : i64, tag = 0 : i64} : tensor<8x128xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$value, PP_MicroBatch:$micro_batch,
                       I64Attr:$peer, I64Attr:$tag);
  let assemblyFormat = "$value `,` $micro_batch attr-dict `:` type($value)";
  let hasVerifier = 1;
}

def PP_RecvOp : PP_Op<"recv", [MemoryEffects<[MemRead]>]> {
  let summary = "Receives a tensor from another stage";
  let description = [{
    ```mlir
    %act = pp.recv %mb {peer = 0 : i64, tag = 0 : i64} : tensor<8x128xf32>
    ```
  }];
  let arguments = (ins PP_MicroBatch:$micro_batch, I64Attr:$peer,
                       I64Attr:$tag);
  let results = (outs AnyRankedTensor:$value);
  let assemblyFormat = "$micro_batch attr-dict `:` type($value)";
  let hasVerifier = 1;
}

#endif // PP_DIALECT_PP_IR_PPOPS_TD
