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

class InputLowering : public StageOpLowering<pipeline::InputOp> {
public:
  using StageOpLowering::StageOpLowering;
  LogicalResult lower(pipeline::InputOp op, Adaptor adaptor,
                      OpEmitter &emit) const override {
    auto dst = emit.result();
    if (failed(dst))
      return failure();
    auto mb = emit.microBatch(op.getMicroBatch());
    if (failed(mb))
      return failure();
    CallArgs a = emit.ctxArgs();
    a.integer(op.getIndex()).value(*mb).value(*dst);
    emit.call("pp::rt::gen::input", a);
    return success();
  }
};

class OutputLowering : public StageOpLowering<pipeline::OutputOp> {
public:
  using StageOpLowering::StageOpLowering;
  LogicalResult lower(pipeline::OutputOp op, Adaptor adaptor,
                      OpEmitter &emit) const override {
    auto mb = emit.microBatch(op.getMicroBatch());
    if (failed(mb))
      return failure();
    CallArgs a = emit.ctxArgs();
    a.integer(op.getIndex()).value(*mb).value(adaptor.getValue());
    emit.call("pp::rt::gen::output", a);
    return success();
  }
};

class SendLowering : public StageOpLowering<pipeline::SendOp> {
public:
  using StageOpLowering::StageOpLowering;
  LogicalResult lower(pipeline::SendOp op, Adaptor adaptor,
                      OpEmitter &emit) const override {
    auto mb = emit.microBatch(op.getMicroBatch());
    if (failed(mb))
      return failure();
    CallArgs a = emit.ctxArgs();
    a.integer(op.getPeer())
        .integer(op.getTag())
        .value(*mb)
        .value(adaptor.getValue());
    emit.call("pp::rt::gen::send", a);
    return success();
  }
};

class RecvLowering : public StageOpLowering<pipeline::RecvOp> {
public:
  using StageOpLowering::StageOpLowering;
  LogicalResult lower(pipeline::RecvOp op, Adaptor adaptor,
                      OpEmitter &emit) const override {
    auto dst = emit.result();
    if (failed(dst))
      return failure();
    auto mb = emit.microBatch(op.getMicroBatch());
    if (failed(mb))
      return failure();
    CallArgs a = emit.ctxArgs();
    a.integer(op.getPeer()).integer(op.getTag()).value(*mb).value(*dst);
    emit.call("pp::rt::gen::recv", a);
    return success();
  }
};

class StashLowering : public StageOpLowering<pipeline::StashOp> {
public:
  using StageOpLowering::StageOpLowering;
  LogicalResult lower(pipeline::StashOp op, Adaptor adaptor,
                      OpEmitter &emit) const override {
    auto mb = emit.microBatch(op.getMicroBatch());
    if (failed(mb))
      return failure();
    CallArgs a = emit.ctxArgs();
    a.integer(op.getSlot()).value(*mb).value(adaptor.getValue());
    emit.call("pp::rt::gen::stash", a);
    return success();
  }
};

class UnstashLowering : public StageOpLowering<pipeline::UnstashOp> {
public:
  using StageOpLowering::StageOpLowering;
  LogicalResult lower(pipeline::UnstashOp op, Adaptor adaptor,
                      OpEmitter &emit) const override {
    auto dst = emit.result();
    if (failed(dst))
      return failure();
    auto mb = emit.microBatch(op.getMicroBatch());
    if (failed(mb))
      return failure();
    CallArgs a = emit.ctxArgs();
    a.integer(op.getSlot()).value(*mb).value(*dst);
    emit.call("pp::rt::gen::unstash", a);
    return success();
  }
};

class AccumulateLowering : public StageOpLowering<pipeline::AccumulateOp> {
public:
  using StageOpLowering::StageOpLowering;
  LogicalResult lower(pipeline::AccumulateOp op, Adaptor adaptor,
                      OpEmitter &emit) const override {
    CallArgs a = emit.ctxArgs();
    a.integer(op.getSlot()).value(adaptor.getValue());
    emit.call("pp::rt::gen::accumulate", a);
    return success();
  }
};

class AccumulatedLowering : public StageOpLowering<pipeline::AccumulatedOp> {
public:
  using StageOpLowering::StageOpLowering;
  LogicalResult lower(pipeline::AccumulatedOp op, Adaptor adaptor,
                      OpEmitter &emit) const override {
    auto dst = emit.result();
    if (failed(dst))
      return failure();
    CallArgs a = emit.ctxArgs();
    a.integer(op.getSlot()).value(*dst);
    emit.call("pp::rt::gen::accumulated", a);
    return success();
  }
};

} // namespace

void pp::emitc_lowering::populatePipelinePatterns(
    const TypeConverter &typeConverter, RewritePatternSet &patterns) {
  patterns.add<StageFunctionLowering, ReturnLowering, InputLowering,
               OutputLowering, SendLowering, RecvLowering, StashLowering,
               UnstashLowering, AccumulateLowering, AccumulatedLowering>(
      typeConverter, patterns.getContext());
}
