//===- Optimizer.cpp - Gradient results to optimizer updates ----*- C++ -*-===//

#include "pp/Dialect/ONNX/IR/ONNXOps.h"
#include "pp/Dialect/Train/IR/TrainOps.h"
#include "pp/Dialect/Train/Transforms/Passes.h"
#include "pp/Support/OptionChecks.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/BitVector.h"

namespace pp {
#define GEN_PASS_DEF_OPTIMIZERPASS
#include "pp/Dialect/Train/Transforms/Passes.h.inc"
} // namespace pp

using namespace mlir;
namespace onnx = pp::onnx;
namespace train = pp::train;

namespace {

struct OptimizerPass : public pp::impl::OptimizerPassBase<OptimizerPass> {
  using Base::Base;

  /// A zero-initialised state global named `name` (created once).
  FlatSymbolRefAttr stateGlobal(ModuleOp module, OpBuilder &moduleBuilder,
                                StringRef name, RankedTensorType type,
                                Location loc) {
    if (!module.lookupSymbol(name)) {
      Type element = type.getElementType();
      Attribute zero =
          isa<FloatType>(element)
              ? Attribute(moduleBuilder.getFloatAttr(element, 0))
              : Attribute(moduleBuilder.getIntegerAttr(element, 0));
      onnx::GlobalOp::create(moduleBuilder, loc, name, onnx::kState, type,
                             DenseElementsAttr::get(type, zero));
    }
    return FlatSymbolRefAttr::get(module.getContext(), name);
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto func = module.lookupSymbol<func::FuncOp>(funcName);
    if (!func) {
      module.emitError() << "no function @" << funcName;
      return signalPassFailure();
    }
    if (kind != "sgd" && kind != "adam" && kind != "adamw") {
      func.emitError() << "unknown optimizer '" << kind
                       << "' (expected sgd, adam or adamw)";
      return signalPassFailure();
    }
    // PyTorch's ranges (lr > 0 as before); NaN and infinity never.
    using pp::OptionRange;
    std::pair<StringRef, std::pair<float, OptionRange>> checks[] = {
        {"lr", {lr, OptionRange::positive()}},
        {"momentum", {momentum, OptionRange::nonNegative()}},
        {"dampening", {dampening, OptionRange::unit()}},
        {"weight-decay", {weightDecay, OptionRange::nonNegative()}},
        {"beta1", {beta1, OptionRange::unitOpen()}},
        {"beta2", {beta2, OptionRange::unitOpen()}},
        {"epsilon", {epsilon, OptionRange::nonNegative()}}};
    for (const auto &[name, check] : checks)
      if (std::optional<std::string> error =
              pp::checkOptionValue(name, check.first, check.second)) {
        func.emitError() << "invalid optimizer option " << *error;
        return signalPassFailure();
      }
    if (nesterov && (momentum == 0 || dampening != 0)) {
      func.emitError() << "invalid optimizer options: nesterov needs "
                          "momentum > 0 and dampening=0";
      return signalPassFailure();
    }
    auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
    OpBuilder b(ret);
    OpBuilder moduleBuilder = OpBuilder::atBlockEnd(module.getBody());
    Location loc = NameLoc::get(b.getStringAttr("optimizer"), func.getLoc());

    // The 1-based step number, kept across calls in @pp.step.
    auto stepType = RankedTensorType::get({}, b.getI64Type());
    FlatSymbolRefAttr stepSym = stateGlobal(
        module, moduleBuilder, pp::pipeline::kStepCounterGlobal, stepType, loc);
    Value step = onnx::AddOp::create(
        b, loc, onnx::GlobalReadOp::create(b, loc, stepType, stepSym),
        onnx::ConstantOp::create(
            b, loc, DenseElementsAttr::get(stepType, b.getI64IntegerAttr(1))));
    train::GlobalWriteOp::create(b, loc, stepSym, step);

    llvm::BitVector gradResults(func.getNumResults());
    for (unsigned i = 0; i < func.getNumResults(); ++i) {
      auto sym = pp::pipeline::getGradOf(func, i);
      if (!sym)
        continue;
      gradResults.set(i);
      auto global = module.lookupSymbol<onnx::GlobalOp>(sym.getAttr());
      if (!global) {
        func.emitError() << "gradient of unknown global " << sym;
        return signalPassFailure();
      }
      auto type = cast<RankedTensorType>(global.getType());
      Value grad = ret.getOperand(i);
      Value param = onnx::GlobalReadOp::create(b, loc, type, sym);
      StringRef name = global.getSymName();
      Value newParam;
      if (kind == "sgd") {
        Value buffer;
        FlatSymbolRefAttr bufferSym;
        if (momentum != 0) {
          bufferSym = stateGlobal(module, moduleBuilder,
                                  (name + ".momentum").str(), type, loc);
          buffer = onnx::GlobalReadOp::create(b, loc, type, bufferSym);
        }
        auto sgd = train::SGDOp::create(
            b, loc, type, buffer ? Type(type) : Type(), param, grad, step,
            buffer, b.getF32FloatAttr(lr), b.getF32FloatAttr(momentum),
            b.getF32FloatAttr(dampening), b.getF32FloatAttr(weightDecay),
            b.getBoolAttr(nesterov));
        newParam = sgd.getNewParam();
        if (buffer)
          train::GlobalWriteOp::create(b, loc, bufferSym,
                                       sgd.getNewMomentumBuffer());
      } else {
        FlatSymbolRefAttr mSym = stateGlobal(
            module, moduleBuilder, (name + ".adam_m").str(), type, loc);
        FlatSymbolRefAttr vSym = stateGlobal(
            module, moduleBuilder, (name + ".adam_v").str(), type, loc);
        Value m = onnx::GlobalReadOp::create(b, loc, type, mSym);
        Value v = onnx::GlobalReadOp::create(b, loc, type, vSym);
        auto adam = train::AdamOp::create(
            b, loc, type, type, type, param, grad, m, v, step,
            b.getF32FloatAttr(lr), b.getF32FloatAttr(beta1),
            b.getF32FloatAttr(beta2), b.getF32FloatAttr(epsilon),
            b.getF32FloatAttr(weightDecay), b.getBoolAttr(kind == "adamw"));
        newParam = adam.getNewParam();
        train::GlobalWriteOp::create(b, loc, mSym, adam.getNewM());
        train::GlobalWriteOp::create(b, loc, vSym, adam.getNewV());
      }
      train::GlobalWriteOp::create(b, loc, sym, newParam);
    }
    if (gradResults.none()) {
      func.emitError() << "no result is marked pp.grad_of: run --pp-autodiff "
                          "first";
      return signalPassFailure();
    }
    SmallVector<Value> kept;
    for (unsigned i = 0; i < ret.getNumOperands(); ++i)
      if (!gradResults.test(i))
        kept.push_back(ret.getOperand(i));
    ret->setOperands(kept);
    if (failed(func.eraseResults(gradResults)))
      return signalPassFailure();
  }
};

} // namespace
