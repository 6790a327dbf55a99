//===- PipelinePatterns.cpp - Stage functions, pp ops to EmitC --*- C++ -*-===//
//
// A stage function (func.func with pp.stage) becomes
//   void <name>(pp::rt::StageContext &ctx, int64_t microBatch)
// starting with `gen::kernels(ctx)`, the kernels' context its ops use; the
// pp dialect's ops become the StageContext calls of pp/Runtime/Generated.h
// (data in and out, transfers, stashes, gradient sums).
//
//===----------------------------------------------------------------------===//

#include "PPToEmitCCommon.h"

#include "pp/Dialect/PP/IR/PPOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"

using namespace mlir;
using namespace pp::emitc_lowering;
namespace pipeline = pp::pipeline;

namespace {

class StageFunctionLowering : public OpConversionPattern<func::FuncOp> {
public:
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(func::FuncOp func, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    if (!pipeline::getStage(func) || func.isExternal())
      return failure();
    if (func.getNumArguments() > 1 || func.getNumResults() != 0)
      return func.emitError() << "a stage function takes at most the "
                                 "micro-batch and returns nothing";
    if (!func.getBody().hasOneBlock())
      return func.emitError() << "code generation supports single-block "
                                 "stage functions only";
    MLIRContext *context = func.getContext();
    Type ctxType = opaqueType(context, kStageContextType);
    Type i64 = rewriter.getI64Type();
    auto emitted =
        emitc::FuncOp::create(rewriter, func.getLoc(), func.getSymName(),
                              rewriter.getFunctionType({ctxType, i64}, {}));
    rewriter.inlineRegionBefore(func.getBody(), emitted.getBody(),
                                emitted.end());
    // (StageContext&, micro-batch): the micro-batch argument, if any, maps
    // to the second.
    TypeConverter::SignatureConversion signature(func.getNumArguments());
    signature.addInputs(ctxType);
    if (func.getNumArguments() == 1)
      signature.addInputs(0, i64);
    else
      signature.addInputs(i64);
    Block *entry = rewriter.applySignatureConversion(&emitted.getBody().front(),
                                                     signature);
    rewriter.setInsertionPointToStart(entry);
    emitc::CallOpaqueOp::create(
        rewriter, func.getLoc(),
        TypeRange{opaqueType(context, kKernelContextType)}, kKernelsCallee,
        ValueRange{entry->getArgument(0)});
    rewriter.eraseOp(func);
    return success();
  }
};

class ReturnLowering : public OpConversionPattern<func::ReturnOp> {
public:
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(func::ReturnOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    if (!isa<emitc::FuncOp>(op->getParentOp()) || op.getNumOperands() != 0)
      return failure();
    rewriter.replaceOpWithNewOp<emitc::ReturnOp>(op, Value());
    return success();
  }
};

/// `callee(ctx, attrs..., microBatch, value)`: the StageContext call of a
/// pp op. A null `value` is the view of the op's result (asked for first);
/// a null `microBatch` (original operand) leaves the micro-batch out.
LogicalResult emitStageCall(OpEmitter &emit, StringRef callee,
                            ArrayRef<int64_t> attrs, Value microBatch,
                            Value value = Value()) {
  if (!value) {
    auto dst = emit.result();
    if (failed(dst))
      return failure();
    value = *dst;
  }
  CallArgs a = emit.ctxArgs();
  for (int64_t attr : attrs)
    a.integer(attr);
  if (microBatch) {
    auto mb = emit.microBatch(microBatch);
    if (failed(mb))
      return failure();
    a.value(*mb);
  }
  a.value(value);
  emit.call(callee, a);
  return success();
}

/// pp.unstash / pp.accumulated: the held buffer itself, lent to the
/// function (`callee(ctx, slot[, microBatch])`), so no arena copy.
template <typename OpTy> class HeldViewLowering : public StageOpLowering<OpTy> {
public:
  using Adaptor = typename OpTy::Adaptor;
  HeldViewLowering(const TypeConverter &typeConverter, MLIRContext *context,
                   StringRef callee)
      : StageOpLowering<OpTy>(typeConverter, context), callee(callee) {}

  LogicalResult lower(OpTy op, Adaptor adaptor,
                      OpEmitter &emit) const override {
    CallArgs a = emit.ctxArgs();
    a.integer(static_cast<int64_t>(op.getSlot()));
    if constexpr (std::is_same_v<OpTy, pipeline::UnstashOp>) {
      auto mb = emit.microBatch(op.getMicroBatch());
      if (failed(mb))
        return failure();
      a.value(*mb);
    }
    emit.define(
        0, emit.call(callee, a, opaqueType(emit.getContext(), kTensorType)));
    return success();
  }

private:
  std::string callee;
};

/// pp.recv: the driver's buffer holding the message, lent to the function
/// (`recvView(ctx, peer, tag, microBatch, dtype, shape)`), so the driver can
/// receive it before the function runs and nothing is copied.
class RecvLowering : public StageOpLowering<pipeline::RecvOp> {
public:
  using StageOpLowering<pipeline::RecvOp>::StageOpLowering;

  LogicalResult lower(pipeline::RecvOp op, pipeline::RecvOp::Adaptor adaptor,
                      OpEmitter &emit) const override {
    auto dtype = dtypeOf(op, op.getType());
    if (failed(dtype))
      return failure();
    auto mb = emit.microBatch(op.getMicroBatch());
    if (failed(mb))
      return failure();
    CallArgs a = emit.ctxArgs();
    a.integer(static_cast<int64_t>(op.getPeer()))
        .integer(static_cast<int64_t>(op.getTag()))
        .value(*mb)
        .lit(dtypeLiteral(*dtype))
        .lit(intList(shapeOf(op.getResult())));
    emit.define(0, emit.call("pp::rt::gen::recvView", a,
                             opaqueType(emit.getContext(), kTensorType)));
    return success();
  }
};

template <typename OpTy>
using MicroBatchOperand = decltype(std::declval<OpTy>().getMicroBatch());
template <typename AdaptorTy>
using ValueOperand = decltype(std::declval<AdaptorTy>().getValue());

/// A pp op lowered to one StageContext call (emitStageCall): its integer
/// attributes (`attrs`), its micro-batch when it has one, and its `value`
/// operand, or else the view of its result.
template <typename OpTy>
class StageCallLowering : public StageOpLowering<OpTy> {
public:
  using Adaptor = typename OpTy::Adaptor;
  using AttrsFn = SmallVector<int64_t> (*)(OpTy);
  StageCallLowering(const TypeConverter &typeConverter, MLIRContext *context,
                    StringRef callee, AttrsFn attrs)
      : StageOpLowering<OpTy>(typeConverter, context), callee(callee),
        attrs(attrs) {}

  LogicalResult lower(OpTy op, Adaptor adaptor,
                      OpEmitter &emit) const override {
    Value microBatch, value;
    if constexpr (llvm::is_detected<MicroBatchOperand, OpTy>::value)
      microBatch = op.getMicroBatch();
    if constexpr (llvm::is_detected<ValueOperand, Adaptor>::value)
      value = adaptor.getValue();
    return emitStageCall(emit, callee, attrs(op), microBatch, value);
  }

private:
  std::string callee;
  AttrsFn attrs;
};

/// Adds the StageCallLowering of OpTy.
template <typename OpTy>
void addStageCall(const TypeConverter &typeConverter,
                  RewritePatternSet &patterns, StringRef callee,
                  typename StageCallLowering<OpTy>::AttrsFn attrs) {
  patterns.add<StageCallLowering<OpTy>>(typeConverter, patterns.getContext(),
                                        callee, attrs);
}

/// A collective of the shard dialect (tensor parallelism) over the whole
/// one-dimensional grid: `callee(ctx, axis, src, dst)`, or without the axis
/// for an all-reduce (the StageContext's tensor-parallel group).
template <typename OpTy>
class CollectiveLowering : public StageOpLowering<OpTy> {
public:
  using Adaptor = typename OpTy::Adaptor;
  CollectiveLowering(const TypeConverter &typeConverter, MLIRContext *context,
                     StringRef callee)
      : StageOpLowering<OpTy>(typeConverter, context), callee(callee) {}

  LogicalResult lower(OpTy op, Adaptor adaptor,
                      OpEmitter &emit) const override {
    auto grid = SymbolTable::lookupNearestSymbolFrom<shard::GridOp>(
        op, op.getGridAttr());
    if (!grid || grid.getShape().size() != 1 ||
        op.getGridAxes() != ArrayRef<shard::GridAxis>{0})
      return op.emitError() << "code generation runs collectives over a "
                               "one-dimensional shard.grid only";
    std::optional<int64_t> axis;
    if constexpr (std::is_same_v<OpTy, shard::AllReduceOp>) {
      if (op.getReduction() != shard::ReductionKind::Sum ||
          op.getInput().getType() != op.getType())
        return op.emitError() << "code generation sums only, into the "
                                 "operand's type";
    } else if constexpr (std::is_same_v<OpTy, shard::AllGatherOp>) {
      axis = op.getGatherAxis().getSExtValue();
    } else {
      axis = op.getSliceAxis().getSExtValue();
    }
    auto dst = emit.result();
    if (failed(dst))
      return failure();
    CallArgs a = emit.ctxArgs();
    if (axis)
      a.integer(*axis);
    a.value(adaptor.getInput()).value(*dst);
    emit.call(callee, a);
    return success();
  }

private:
  std::string callee;
};

} // namespace

void pp::emitc_lowering::populatePipelinePatterns(
    const TypeConverter &typeConverter, RewritePatternSet &patterns) {
  patterns.add<StageFunctionLowering, ReturnLowering>(typeConverter,
                                                      patterns.getContext());
  auto index = [](auto op) {
    return SmallVector<int64_t>{static_cast<int64_t>(op.getIndex())};
  };
  auto peerAndTag = [](auto op) {
    return SmallVector<int64_t>{static_cast<int64_t>(op.getPeer()),
                                static_cast<int64_t>(op.getTag())};
  };
  auto slot = [](auto op) {
    return SmallVector<int64_t>{static_cast<int64_t>(op.getSlot())};
  };
  addStageCall<pipeline::InputOp>(typeConverter, patterns, "pp::rt::gen::input",
                                  index);
  addStageCall<pipeline::OutputOp>(typeConverter, patterns,
                                   "pp::rt::gen::output", index);
  addStageCall<pipeline::SendOp>(typeConverter, patterns, "pp::rt::gen::send",
                                 peerAndTag);
  patterns.add<RecvLowering>(typeConverter, patterns.getContext());
  addStageCall<pipeline::StashOp>(typeConverter, patterns, "pp::rt::gen::stash",
                                  slot);
  patterns.add<HeldViewLowering<pipeline::UnstashOp>>(
      typeConverter, patterns.getContext(), "pp::rt::gen::unstashView");
  addStageCall<pipeline::AccumulateOp>(typeConverter, patterns,
                                       "pp::rt::gen::accumulate", slot);
  patterns.add<HeldViewLowering<pipeline::AccumulatedOp>>(
      typeConverter, patterns.getContext(), "pp::rt::gen::accumulatedView");
  patterns.add<CollectiveLowering<shard::AllReduceOp>>(
      typeConverter, patterns.getContext(), "pp::rt::gen::tpAllReduce");
  patterns.add<CollectiveLowering<shard::AllGatherOp>>(
      typeConverter, patterns.getContext(), "pp::rt::gen::tpAllGather");
  patterns.add<CollectiveLowering<shard::AllSliceOp>>(
      typeConverter, patterns.getContext(), "pp::rt::gen::tpAllSlice");
}
