//===- ElementwisePatterns.cpp - Elementwise ops to EmitC -------*- C++ -*-===//
//
// Unary and binary ops become one call of the runtime's `unary` / `binary`
// kernel (kinds from the two tables below), Where, Clip, Cast and Dropout
// one call of theirs, and a pp.fused op (--pp-fuse-elementwise) one
// generated per-element function run by `pp::rt::fused::forEach`.
//
//===----------------------------------------------------------------------===//

#include "PPToEmitCCommon.h"

#include "pp/Dialect/ONNX/IR/ONNXOps.h"
#include "pp/Dialect/PP/IR/PPOps.h"

#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace pp::emitc_lowering;
namespace onnx = pp::onnx;
namespace pipeline = pp::pipeline;
namespace rt = pp::rt;

namespace {

//===----------------------------------------------------------------------===//
// The op -> kernel kind tables
//===----------------------------------------------------------------------===//

struct UnaryKernel {
  rt::UnaryKind kind;
  /// LeakyRelu's slope, HardSigmoid's alpha and beta; 0 otherwise.
  float alpha = 0.f;
  float beta = 0.f;
};

/// The runtime unary kernel of each onnx op that runs one.
std::optional<UnaryKernel> getUnaryKernel(Operation *op) {
  // The op's ODS definition says (KernelFactsOpInterface).
  auto facts = dyn_cast<onnx::KernelFactsOpInterface>(op);
  if (!facts)
    return std::nullopt;
  std::optional<rt::UnaryKind> kind = facts.getUnaryKind();
  if (!kind)
    return std::nullopt;
  return UnaryKernel{*kind, facts.getUnaryAlpha(), facts.getUnaryBeta()};
}

/// The runtime binary kernel of each onnx op that runs one.
std::optional<rt::BinaryKind> getBinaryKernel(Operation *op) {
  using B = rt::BinaryKind;
  return TypeSwitch<Operation *, std::optional<rt::BinaryKind>>(op)
      .Case([](onnx::AddOp) { return B::Add; })
      .Case([](onnx::SubOp) { return B::Sub; })
      .Case([](onnx::MulOp) { return B::Mul; })
      .Case([](onnx::DivOp) { return B::Div; })
      .Case([](onnx::MaxOp) { return B::Max; })
      .Case([](onnx::MinOp) { return B::Min; })
      .Case([](onnx::PowOp) { return B::Pow; })
      .Case([](onnx::ModOp op) { return op.getFmod() ? B::FMod : B::Mod; })
      .Case([](onnx::EqualOp) { return B::Equal; })
      .Case([](onnx::LessOp) { return B::Less; })
      .Case([](onnx::GreaterOp) { return B::Greater; })
      .Case([](onnx::AndOp) { return B::And; })
      .Case([](onnx::OrOp) { return B::Or; })
      .Default([](Operation *) { return std::nullopt; });
}

//===----------------------------------------------------------------------===//
// Kernel calls
//===----------------------------------------------------------------------===//

/// y = unary(kind, x).
class UnaryLowering : public TableOpLowering {
public:
  using TableOpLowering::TableOpLowering;

  bool handles(Operation *op) const override {
    return getUnaryKernel(op).has_value();
  }

  LogicalResult lower(Operation *op, ArrayRef<Value> operands,
                      OpEmitter &emit) const override {
    UnaryKernel kernel = *getUnaryKernel(op);
    auto y = emit.result();
    if (failed(y))
      return failure();
    CallArgs a = emit.args();
    a.lit(enumLiteral("UnaryKind", static_cast<int>(kernel.kind)))
        .value(operands[0])
        .value(*y);
    if (kernel.alpha != 0.f || kernel.beta != 0.f)
      a.f32(kernel.alpha);
    if (kernel.beta != 0.f)
      a.f32(kernel.beta);
    emit.kernel("pp::rt::unary", a);
    return success();
  }
};

/// c = binary(kind, a, b), broadcasting.
class BinaryLowering : public TableOpLowering {
public:
  using TableOpLowering::TableOpLowering;

  bool handles(Operation *op) const override {
    return getBinaryKernel(op).has_value();
  }

  LogicalResult lower(Operation *op, ArrayRef<Value> operands,
                      OpEmitter &emit) const override {
    if (getElementTypeOrSelf(op->getOperand(0).getType()) !=
        getElementTypeOrSelf(op->getOperand(1).getType()))
      return op->emitError() << "code generation supports operands of one "
                                "element type only";
    auto c = emit.result();
    if (failed(c))
      return failure();
    CallArgs a = emit.args();
    a.lit(enumLiteral("BinaryKind", static_cast<int>(*getBinaryKernel(op))))
        .value(operands[0])
        .value(operands[1])
        .value(*c);
    emit.kernel("pp::rt::binary", a);
    return success();
  }
};

class ClipLowering : public StageOpLowering<onnx::ClipOp> {
public:
  using StageOpLowering::StageOpLowering;
  LogicalResult lower(onnx::ClipOp op, Adaptor adaptor,
                      OpEmitter &emit) const override {
    auto out = emit.result();
    if (failed(out))
      return failure();
    CallArgs a = emit.args();
    a.value(adaptor.getInput());
    emit.optionalPointer(a, adaptor.getMin());
    emit.optionalPointer(a, adaptor.getMax());
    a.value(*out);
    emit.kernel("pp::rt::clip", a);
    return success();
  }
};

class DropoutLowering : public StageOpLowering<onnx::DropoutOp> {
public:
  using StageOpLowering::StageOpLowering;
  LogicalResult lower(onnx::DropoutOp op, Adaptor adaptor,
                      OpEmitter &emit) const override {
    float ratio = 0.5f;
    bool training = false;
    if (Value r = op.getRatio()) {
      auto v = emit.constantValues(r);
      if (failed(v))
        return failure();
      ratio = static_cast<float>(v->front());
    }
    if (Value t = op.getTrainingMode()) {
      auto v = emit.constantValues(t);
      if (failed(v))
        return failure();
      training = v->front() != 0;
    }
    // The interpreter's seed and offset: (run seed, stream, step) unless
    // the op fixes its seed, and the micro-batch's place in the mini-batch.
    Type u64 = opaqueType(emit.getContext(), "uint64_t");
    Value seed;
    if (!op.getSeed()) {
      CallArgs s = emit.ctxArgs();
      s.lit(std::to_string(static_cast<uint64_t>(op.getStream().value_or(0))) +
            "ull");
      seed = emit.call("pp::rt::gen::dropoutSeed", s, u64);
    }
    CallArgs o = emit.args();
    o.value(emit.getMicroBatch())
        .integer(pp::onnx::getNumElements(op.getData().getType()));
    Value offset = emit.call("pp::rt::gen::dropoutOffset", o, u64);
    SmallVector<Value> out;
    if (failed(emit.results(out)))
      return failure();
    CallArgs a = emit.args();
    a.value(adaptor.getData()).f32(ratio);
    emit.trainingFlag(a, training);
    if (op.getSeed())
      a.lit(std::to_string(static_cast<uint64_t>(*op.getSeed())) + "ull");
    else
      a.value(seed);
    a.value(offset).value(out[0]).value(out[1]);
    emit.kernel("pp::rt::dropout", a);
    return success();
  }
};

//===----------------------------------------------------------------------===//
// Fused kernels
//===----------------------------------------------------------------------===//

/// A pp.fused op becomes a per-element function, placed before its stage
/// function,
///   PP_FUSED_INLINE void <stage>_fused<N>(int64_t i, T *out,
///                                         T *in0, int64_t m0, ...)
/// computing out[i] from in0[i mod m0], ... with the scalar functions of
/// pp/Runtime/Fused.h, and its launch over the result's elements,
/// `pp::rt::fused::forEach<<stage>_fused<N>>(kernels, n, out, in0, m0, ...)`,
/// whose status names the ops it computes.
class FusedLowering : public StageOpLowering<pipeline::FusedOp> {
public:
  using StageOpLowering::StageOpLowering;
  LogicalResult lower(pipeline::FusedOp op, Adaptor adaptor,
                      OpEmitter &emit) const override {
    ConversionPatternRewriter &rewriter = emit.getRewriter();
    MLIRContext *context = emit.getContext();
    Location loc = op.getLoc();
    auto type = cast<RankedTensorType>(op.getType());
    Type element = type.getElementType();
    auto y = emit.result();
    if (failed(y))
      return failure();

    // A name no other function has.
    emitc::FuncOp stageFunction = emit.getFunction();
    auto module = stageFunction->getParentOfType<ModuleOp>();
    std::string name;
    for (int n = 0;; ++n) {
      name = (stageFunction.getSymName() + "_fused" + Twine(n)).str();
      if (!SymbolTable::lookupSymbolIn(module, name))
        break;
    }

    // The per-element function.
    Block &body = op.getBody().front();
    auto pointer = emitc::PointerType::get(element);
    SmallVector<Type> argTypes = {rewriter.getI64Type(), pointer};
    for (size_t i = 0, e = op.getInputs().size(); i < e; ++i)
      argTypes.append({pointer, rewriter.getI64Type()});
    {
      OpBuilder::InsertionGuard guard(rewriter);
      rewriter.setInsertionPoint(stageFunction);
      auto kernelFn = emitc::FuncOp::create(
          rewriter, loc, name, rewriter.getFunctionType(argTypes, {}));
      kernelFn.setSpecifiersAttr(rewriter.getStrArrayAttr({"PP_FUSED_INLINE"}));
      Block *entry =
          rewriter.createBlock(&kernelFn.getBody(), {}, argTypes,
                               SmallVector<Location>(argTypes.size(), loc));
      Value index = entry->getArgument(0);
      DenseMap<Value, Value> scalar;
      for (auto [j, arg] : llvm::enumerate(body.getArguments())) {
        auto ptr =
            cast<TypedValue<emitc::PointerType>>(entry->getArgument(2 + 2 * j));
        Value wrapped =
            emitc::RemOp::create(rewriter, loc, rewriter.getI64Type(), index,
                                 entry->getArgument(3 + 2 * j));
        Value slot = emitc::SubscriptOp::create(rewriter, loc, ptr, wrapped);
        scalar[arg] = emitc::LoadOp::create(rewriter, loc, element, slot);
      }
      for (Operation &inner : body.without_terminator()) {
        SmallVector<Value> operands;
        for (Value operand : inner.getOperands())
          operands.push_back(scalar.lookup(operand));
        std::string callee =
            ("pp::rt::fused::" + pipeline::FusedOp::getElementFunction(&inner))
                .str();
        scalar[inner.getResult(0)] =
            emitc::CallOpaqueOp::create(rewriter, loc, TypeRange{element},
                                        callee, operands)
                .getResult(0);
      }
      auto outPtr = cast<TypedValue<emitc::PointerType>>(entry->getArgument(1));
      emitc::AssignOp::create(
          rewriter, loc,
          emitc::SubscriptOp::create(rewriter, loc, outPtr, index),
          scalar.lookup(op.getYieldedValue()));
      emitc::ReturnOp::create(rewriter, loc, Value());
    }

    // Its launch over every element of the result.
    ArrayAttr elementType = rewriter.getArrayAttr({emitc::OpaqueAttr::get(
        context, element.isF64() ? "double" : "float")});
    auto dataOf = [&](Value tensor) -> Value {
      return emitc::CallOpaqueOp::create(
                 rewriter, loc, TypeRange{pointer}, "pp::rt::fused::data",
                 ValueRange{tensor}, ArrayAttr(), elementType)
          .getResult(0);
    };
    SmallVector<Value> operands = {emit.getKernels(),
                                   emit.i64(type.getNumElements()), dataOf(*y)};
    for (auto [original, converted] :
         llvm::zip(op.getInputs(), adaptor.getInputs())) {
      operands.push_back(dataOf(converted));
      operands.push_back(emit.i64(
          cast<RankedTensorType>(original.getType()).getNumElements()));
    }
    Value status =
        emitc::CallOpaqueOp::create(
            rewriter, loc, TypeRange{opaqueType(context, kStatusType)},
            "pp::rt::fused::forEach", operands, ArrayAttr(),
            rewriter.getArrayAttr({emitc::OpaqueAttr::get(context, name)}))
            .getResult(0);
    Operation *root = op.getYieldedValue().getDefiningOp();
    std::string label = describeOp(root ? root : op.getOperation());
    // "<root> fused with <op 'node'>, <op 'node'>, ...": the nodes of the
    // other ops (train --write-profile counts them at 0 s: the time is the
    // root's).
    label += " fused with";
    bool first = true;
    for (Operation &inner : body.without_terminator())
      if (&inner != root) {
        label += (first ? " " : ", ") + describeOp(&inner);
        first = false;
      }
    emit.check(status, label);
    return success();
  }
};

} // namespace

void pp::emitc_lowering::populateElementwisePatterns(
    const TypeConverter &typeConverter, RewritePatternSet &patterns) {
  MLIRContext *context = patterns.getContext();
  patterns.add<UnaryLowering, BinaryLowering, ClipLowering, DropoutLowering,
               FusedLowering>(typeConverter, context);
  patterns.add<KernelCallLowering<onnx::WhereOp>>(typeConverter, context,
                                                  "pp::rt::where", 3);
  patterns.add<KernelCallLowering<onnx::CastOp>>(typeConverter, context,
                                                 "pp::rt::cast", 1);
}
