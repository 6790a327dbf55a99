//===- LinalgPatterns.cpp - Contractions, pooling, reductions ---*- C++ -*-===//
//
// MatMul, Gemm and Conv become calls of the runtime's contraction kernels,
// pooling ops of the window kernels (window geometry from
// pp/Dialect/ONNX/Utils/KernelParams.h, as the interpreter computes it), global
// pools and ReduceMean / ReduceSum of `reduce`.
//
//===----------------------------------------------------------------------===//

#include "PPToEmitCCommon.h"

#include "pp/Dialect/ONNX/IR/ONNXOps.h"
#include "pp/Dialect/ONNX/Utils/KernelParams.h"

#include <numeric>

using namespace mlir;
using namespace pp::emitc_lowering;
namespace onnx = pp::onnx;
namespace rt = pp::rt;

namespace {

/// y = reduce(kind, x, axes).
LogicalResult emitReduce(OpEmitter &emit, Value x, rt::ReduceKind kind,
                         ArrayRef<int64_t> axes) {
  auto y = emit.result();
  if (failed(y))
    return failure();
  CallArgs a = emit.args();
  a.lit(enumLiteral("ReduceKind", static_cast<int>(kind)))
      .value(x)
      .lit(intVector(axes))
      .value(*y);
  emit.kernel("pp::rt::reduce", a);
  return success();
}

class GemmLowering : public StageOpLowering<onnx::GemmOp> {
public:
  using StageOpLowering::StageOpLowering;
  LogicalResult lower(onnx::GemmOp op, Adaptor adaptor,
                      OpEmitter &emit) const override {
    auto out = emit.result();
    if (failed(out))
      return failure();
    CallArgs a = emit.args();
    a.value(adaptor.getA()).value(adaptor.getB());
    emit.optionalPointer(a, adaptor.getC());
    a.f32(op.getAlpha().convertToDouble())
        .f32(op.getBeta().convertToDouble())
        .flag(op.getTransA() != 0)
        .flag(op.getTransB() != 0)
        .value(*out);
    appendActivation(a, op);
    emit.kernel("pp::rt::gemm", a);
    return success();
  }
};

class ConvLowering : public StageOpLowering<onnx::ConvOp> {
public:
  using StageOpLowering::StageOpLowering;
  LogicalResult lower(onnx::ConvOp op, Adaptor adaptor,
                      OpEmitter &emit) const override {
    ArrayRef<int64_t> w = shapeOf(op.getW());
    if (w.size() < 3)
      return op.emitError() << "Conv weights must have rank >= 3";
    auto params = pp::onnx::windowParams(
        op, shapeOf(op.getX()), shapeOf(op.getY()), w.drop_front(2),
        op.getAutoPad(), op.getPads(), op.getStrides(), op.getDilations());
    if (failed(params))
      return failure();
    auto out = emit.result();
    if (failed(out))
      return failure();
    params->group = static_cast<int64_t>(op.getGroup());
    CallArgs a = emit.args();
    a.value(adaptor.getX()).value(adaptor.getW());
    emit.optionalPointer(a, adaptor.getB());
    a.lit(windowLiteral(*params)).value(*out);
    appendActivation(a, op);
    emit.kernel("pp::rt::conv", a);
    return success();
  }
};

class ConvTransposeLowering : public StageOpLowering<onnx::ConvTransposeOp> {
public:
  using StageOpLowering::StageOpLowering;
  LogicalResult lower(onnx::ConvTransposeOp op, Adaptor adaptor,
                      OpEmitter &emit) const override {
    auto out = emit.result();
    if (failed(out))
      return failure();
    CallArgs a = emit.args();
    a.value(adaptor.getX()).value(adaptor.getW());
    emit.optionalPointer(a, adaptor.getB());
    a.lit(windowLiteral(pp::onnx::convTransposeParams(op))).value(*out);
    emit.kernel("pp::rt::convTranspose", a);
    return success();
  }
};

class MaxPoolLowering : public StageOpLowering<onnx::MaxPoolOp> {
public:
  using StageOpLowering::StageOpLowering;
  LogicalResult lower(onnx::MaxPoolOp op, Adaptor adaptor,
                      OpEmitter &emit) const override {
    auto dtype = dtypeOf(op, op.getX().getType());
    if (failed(dtype))
      return failure();
    // The 16-bit floats too: the pool kernels compute them through float.
    if (*dtype != rt::DType::F32 && *dtype != rt::DType::F64 &&
        *dtype != rt::DType::F16 && *dtype != rt::DType::BF16)
      return op.emitError() << "code generation pools float tensors only";
    if (op.getStorageOrder() != 0)
      return op.emitError() << "code generation supports storage_order 0 only";
    auto params = pp::onnx::windowParams(
        op, shapeOf(op.getX()), shapeOf(op.getY()), op.getKernelShape(),
        op.getAutoPad(), op.getPads(), op.getStrides(), op.getDilations());
    SmallVector<Value> out;
    if (failed(params) || failed(emit.results(out)))
      return failure();
    Value indices = emit.mutablePointer(out[1]);
    CallArgs a = emit.args();
    a.value(adaptor.getX())
        .lit(windowLiteral(*params))
        .value(out[0])
        .value(indices);
    emit.kernel("pp::rt::maxPool", a);
    return success();
  }
};

class AveragePoolLowering : public StageOpLowering<onnx::AveragePoolOp> {
public:
  using StageOpLowering::StageOpLowering;
  LogicalResult lower(onnx::AveragePoolOp op, Adaptor adaptor,
                      OpEmitter &emit) const override {
    auto params = pp::onnx::windowParams(
        op, shapeOf(op.getX()), shapeOf(op.getY()), op.getKernelShape(),
        op.getAutoPad(), op.getPads(), op.getStrides(), std::nullopt);
    if (failed(params))
      return failure();
    auto out = emit.result();
    if (failed(out))
      return failure();
    CallArgs a = emit.args();
    a.value(adaptor.getX())
        .lit(windowLiteral(*params))
        .flag(op.getCountIncludePad() != 0)
        .value(*out);
    emit.kernel("pp::rt::avgPool", a);
    return success();
  }
};

/// GlobalAveragePool / GlobalMaxPool: a mean / max over the spatial dims.
template <typename OpTy, rt::ReduceKind Kind>
class GlobalPoolLowering : public StageOpLowering<OpTy> {
public:
  using StageOpLowering<OpTy>::StageOpLowering;
  using Adaptor = typename OpTy::Adaptor;
  LogicalResult lower(OpTy op, Adaptor adaptor,
                      OpEmitter &emit) const override {
    std::vector<int64_t> axes(
        std::max<int64_t>(shapeOf(op->getOperand(0)).size() - 2, 0));
    std::iota(axes.begin(), axes.end(), 2);
    return emitReduce(emit, adaptor.getOperands()[0], Kind, axes);
  }
};

/// ReduceMean, ReduceMax, ReduceMin: axes an attribute, none meaning all.
template <typename OpTy, rt::ReduceKind Kind>
class AttributeAxesReduceLowering : public StageOpLowering<OpTy> {
public:
  using StageOpLowering<OpTy>::StageOpLowering;
  using Adaptor = typename OpTy::Adaptor;
  LogicalResult lower(OpTy op, Adaptor adaptor,
                      OpEmitter &emit) const override {
    int64_t rank = shapeOf(op.getData()).size();
    std::vector<int64_t> all(rank);
    std::iota(all.begin(), all.end(), 0);
    ArrayRef<int64_t> requested = all;
    if (auto axes = op.getAxes(); axes && !axes->empty())
      requested = *axes;
    auto axes = pp::onnx::normalizeAxes(op, requested, rank);
    if (failed(axes))
      return failure();
    return emitReduce(emit, adaptor.getData(), Kind, *axes);
  }
};

class ReduceSumLowering : public StageOpLowering<onnx::ReduceSumOp> {
public:
  using StageOpLowering::StageOpLowering;
  LogicalResult lower(onnx::ReduceSumOp op, Adaptor adaptor,
                      OpEmitter &emit) const override {
    int64_t rank = shapeOf(op.getData()).size();
    std::vector<int64_t> requested;
    if (Value axesValue = op.getAxes()) {
      auto v = emit.constantInts(axesValue);
      if (failed(v))
        return failure();
      requested = *v;
    }
    if (requested.empty()) {
      if (op.getNoopWithEmptyAxes() != 0)
        return emitReshapeCopy(emit, adaptor.getData());
      requested.resize(rank);
      std::iota(requested.begin(), requested.end(), 0);
    }
    auto axes = pp::onnx::normalizeAxes(op, requested, rank);
    if (failed(axes))
      return failure();
    return emitReduce(emit, adaptor.getData(), rt::ReduceKind::Sum, *axes);
  }
};

} // namespace

void pp::emitc_lowering::populateLinalgPatterns(
    const TypeConverter &typeConverter, RewritePatternSet &patterns) {
  patterns.add<KernelCallLowering<onnx::MatMulOp>>(
      typeConverter, patterns.getContext(), "pp::rt::matmul", 2);
  patterns.add<
      GemmLowering, ConvLowering, ConvTransposeLowering, MaxPoolLowering,
      AveragePoolLowering,
      GlobalPoolLowering<onnx::GlobalAveragePoolOp, rt::ReduceKind::Mean>,
      GlobalPoolLowering<onnx::GlobalMaxPoolOp, rt::ReduceKind::Max>,
      AttributeAxesReduceLowering<onnx::ReduceMeanOp, rt::ReduceKind::Mean>,
      AttributeAxesReduceLowering<onnx::ReduceMaxOp, rt::ReduceKind::Max>,
      AttributeAxesReduceLowering<onnx::ReduceMinOp, rt::ReduceKind::Min>,
      ReduceSumLowering>(typeConverter, patterns.getContext());
}
