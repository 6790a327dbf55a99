//===- PPDialect.td - The pp (pipeline parallelism) dialect -*- tablegen -*-===//
#ifndef PP_DIALECT_PP_IR_PPDIALECT_TD
#define PP_DIALECT_PP_IR_PPDIALECT_TD

include "mlir/IR/OpBase.td"

def PP_Dialect : Dialect {
  let name = "pp";
  let summary = "Pipeline stages and the communication between them";
  let description = [{
    Point-to-point transfers between pipeline stages (`pp.send`, `pp.recv`),
    addressed by peer stage, tag and micro-batch. A module that holds a
    split pipeline carries `pp.num_stages`; the dialect then verifies that
    every send has exactly one matching recv (same tag, peers that point at
    each other, same type) across the module's stage functions, which are
    marked with `pp.stage`.
  }];
  let cppNamespace = "::pp::pipeline";
  let hasOperationAttrVerify = 1;
}

#endif // PP_DIALECT_PP_IR_PPDIALECT_TD
