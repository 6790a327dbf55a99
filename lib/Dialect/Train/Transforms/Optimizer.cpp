//===- Optimizer.cpp - Gradient results to optimizer updates ----*- C++ -*-===//

#include "pp/Dialect/ONNX/IR/ONNXOps.h"
#include "pp/Dialect/Train/IR/TrainOps.h"
#include "pp/Support/OptionChecks.h"
#include "pp/Dialect/Train/Transforms/Transforms.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/BitVector.h"

using namespace mlir;
namespace onnx = pp::onnx;
namespace train = pp::train;

namespace {

/// A zero-initialised state global named `name` (created once).
FlatSymbolRefAttr stateGlobal(ModuleOp module, OpBuilder &moduleBuilder,
                              StringRef name, RankedTensorType type,
                              Location loc) {
  if (!module.lookupSymbol(name)) {
    Type element = type.getElementType();
    Attribute zero = isa<FloatType>(element)
                         ? Attribute(moduleBuilder.getFloatAttr(element, 0))
                         : Attribute(moduleBuilder.getIntegerAttr(element, 0));
    onnx::GlobalOp::create(moduleBuilder, loc, name, onnx::kState, type,
                           DenseElementsAttr::get(type, zero));
  }
  return FlatSymbolRefAttr::get(module.getContext(), name);
}

} // namespace

LogicalResult
pp::train::applyOptimizer(ModuleOp module,
                          const pp::OptimizerPassOptions &options) {
  auto func = pp::pipeline::lookupFunction(module, options.funcName, "");
  if (!func)
    return failure();
  if (options.kind != "sgd" && options.kind != "adam" &&
      options.kind != "adamw") {
    func.emitError() << "unknown optimizer '" << options.kind
                     << "' (expected sgd, adam or adamw)";
    return failure();
  }
  // PyTorch's ranges (lr > 0 as before); NaN and infinity never.
  using pp::OptionRange;
  std::pair<StringRef, std::pair<float, OptionRange>> checks[] = {
      {"lr", {options.lr, OptionRange::positive()}},
      {"momentum", {options.momentum, OptionRange::nonNegative()}},
      {"dampening", {options.dampening, OptionRange::unit()}},
      {"weight-decay", {options.weightDecay, OptionRange::nonNegative()}},
      {"beta1", {options.beta1, OptionRange::unitOpen()}},
      {"beta2", {options.beta2, OptionRange::unitOpen()}},
      {"epsilon", {options.epsilon, OptionRange::nonNegative()}}};
  for (const auto &[name, check] : checks)
    if (std::optional<std::string> error =
            pp::checkOptionValue(name, check.first, check.second)) {
      func.emitError() << "invalid optimizer option " << *error;
      return failure();
    }
  if (options.nesterov && (options.momentum == 0 || options.dampening != 0)) {
    func.emitError() << "invalid optimizer options: nesterov needs "
                        "momentum > 0 and dampening=0";
    return failure();
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
      return failure();
    }
    auto type = cast<RankedTensorType>(global.getType());
    Value grad = ret.getOperand(i);
    Value param = onnx::GlobalReadOp::create(b, loc, type, sym);
    StringRef name = global.getSymName();
    Value newParam;
    if (options.kind == "sgd") {
      Value buffer;
      FlatSymbolRefAttr bufferSym;
      if (options.momentum != 0) {
        bufferSym = stateGlobal(module, moduleBuilder,
                                (name + ".momentum").str(), type, loc);
        buffer = onnx::GlobalReadOp::create(b, loc, type, bufferSym);
      }
      auto sgd = train::SGDOp::create(
          b, loc, type, buffer ? Type(type) : Type(), param, grad, step, buffer,
          b.getF64FloatAttr(options.lr), b.getF64FloatAttr(options.momentum),
          b.getF64FloatAttr(options.dampening),
          b.getF64FloatAttr(options.weightDecay),
          b.getBoolAttr(options.nesterov));
      newParam = sgd.getNewParam();
      if (buffer)
        train::GlobalWriteOp::create(b, loc, bufferSym,
                                     sgd.getNewMomentumBuffer());
    } else {
      FlatSymbolRefAttr mSym = stateGlobal(module, moduleBuilder,
                                           (name + ".adam_m").str(), type, loc);
      FlatSymbolRefAttr vSym = stateGlobal(module, moduleBuilder,
                                           (name + ".adam_v").str(), type, loc);
      Value m = onnx::GlobalReadOp::create(b, loc, type, mSym);
      Value v = onnx::GlobalReadOp::create(b, loc, type, vSym);
      auto adam = train::AdamOp::create(
          b, loc, type, type, type, param, grad, m, v, step,
          b.getF64FloatAttr(options.lr), b.getF64FloatAttr(options.beta1),
          b.getF64FloatAttr(options.beta2), b.getF64FloatAttr(options.epsilon),
          b.getF64FloatAttr(options.weightDecay),
          b.getBoolAttr(options.kind == "adamw"));
      newParam = adam.getNewParam();
      train::GlobalWriteOp::create(b, loc, mSym, adam.getNewM());
      train::GlobalWriteOp::create(b, loc, vSym, adam.getNewV());
    }
    train::GlobalWriteOp::create(b, loc, sym, newParam);
  }
  if (gradResults.none()) {
    func.emitError() << "no result is marked pp.grad_of: run --pp-autodiff "
                        "first";
    return failure();
  }
  SmallVector<Value> kept;
  for (unsigned i = 0; i < ret.getNumOperands(); ++i)
    if (!gradResults.test(i))
      kept.push_back(ret.getOperand(i));
  ret->setOperands(kept);
  if (failed(func.eraseResults(gradResults)))
    return failure();
  return success();
}
