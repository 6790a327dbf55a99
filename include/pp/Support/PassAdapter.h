//===- PassAdapter.h - A pass that calls one function -----------*- C++ -*-===//
//
// The project's passes do their work in functions that tests can call
// (each dialect's Transforms.h). A pass derives from
// PassAdapter<ItsPass, pp::impl::ItsPassBase> and defines
// `LogicalResult run(ModuleOp)`, which hands its options to that function;
// failure fails the pass.
//
//===----------------------------------------------------------------------===//

#ifndef PP_SUPPORT_PASSADAPTER_H
#define PP_SUPPORT_PASSADAPTER_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace pp {

template <typename DerivedT, template <typename> class GeneratedBaseT>
struct PassAdapter : GeneratedBaseT<DerivedT> {
  using GeneratedBaseT<DerivedT>::GeneratedBaseT;

  void runOnOperation() override {
    if (mlir::failed(static_cast<DerivedT *>(this)->run(this->getOperation())))
      this->signalPassFailure();
  }
};

} // namespace pp

#endif // PP_SUPPORT_PASSADAPTER_H
