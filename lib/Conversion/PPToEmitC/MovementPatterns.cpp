//===- MovementPatterns.cpp - Globals, constants, data movement -*- C++ -*-===//
//
// Global reads and constants become StageContext calls (named by symbol and
// by value until the program numbers them); reshape-like ops copy into
// their own buffer; Transpose, Expand, Concat, Split, Slice, Pad, Gather and
// ConstantOfShape become one call each of their runtime kernels.
//
//===----------------------------------------------------------------------===//

#include "PPToEmitCCommon.h"

#include "pp/Dialect/ONNX/IR/ONNXOps.h"
#include "pp/Dialect/ONNX/Utils/HostTensor.h"
#include "pp/Dialect/ONNX/Utils/KernelParams.h"

#include <numeric>

using namespace mlir;
using namespace pp::emitc_lowering;
namespace onnx = pp::onnx;
namespace rt = pp::rt;

LogicalResult pp::emitc_lowering::emitReshapeCopy(OpEmitter &emit,
                                                  Value input) {
  auto y = emit.result();
  if (failed(y))
    return failure();
  CallArgs r = emit.args();
  r.value(input).lit(intList(shapeOf(emit.getOp()->getResult(0))));
  Value source = emit.call("pp::rt::gen::reshaped", r,
                           opaqueType(emit.getContext(), kTensorType));
  emitCopy(emit, source, *y);
  return success();
}

namespace {

/// `gen::constant(ctx, value)`: the program numbers the value and puts it
/// in the data file.
void emitConstant(OpEmitter &emit, ElementsAttr value) {
  CallArgs a = emit.ctxArgs();
  a.attr(value);
  emit.define(0, emit.call(kConstantCallee, a,
                           opaqueType(emit.getContext(), kTensorType)));
}

class GlobalReadLowering : public StageOpLowering<onnx::GlobalReadOp> {
public:
  using StageOpLowering::StageOpLowering;
  LogicalResult lower(onnx::GlobalReadOp op, Adaptor adaptor,
                      OpEmitter &emit) const override {
    CallArgs a = emit.ctxArgs();
    a.attr(op.getGlobalAttr());
    emit.define(0, emit.call(kGlobalCallee, a,
                             opaqueType(emit.getContext(), kTensorType)));
    return success();
  }
};

class ConstantLowering : public StageOpLowering<onnx::ConstantOp> {
public:
  using StageOpLowering::StageOpLowering;
  LogicalResult lower(onnx::ConstantOp op, Adaptor adaptor,
                      OpEmitter &emit) const override {
    auto value = dyn_cast<ElementsAttr>(op.getValue());
    if (!value)
      return op.emitError() << "code generation needs an elements constant";
    emitConstant(emit, value);
    return success();
  }
};

/// Static shapes: the result is a constant.
class ShapeLowering : public StageOpLowering<onnx::ShapeOp> {
public:
  using StageOpLowering::StageOpLowering;
  LogicalResult lower(onnx::ShapeOp op, Adaptor adaptor,
                      OpEmitter &emit) const override {
    ArrayRef<int64_t> dims = shapeOf(op.getData());
    int64_t rank = dims.size();
    auto clampDim = [&](int64_t v) {
      return std::clamp<int64_t>(v < 0 ? v + rank : v, 0, rank);
    };
    int64_t start = clampDim(static_cast<int64_t>(op.getStart()));
    int64_t end =
        op.getEnd() ? clampDim(static_cast<int64_t>(*op.getEnd())) : rank;
    SmallVector<int64_t> values(dims.begin() + start,
                                dims.begin() + std::max(start, end));
    auto type = RankedTensorType::get({static_cast<int64_t>(values.size())},
                                      IntegerType::get(op.getContext(), 64));
    emitConstant(emit, DenseElementsAttr::get(type, ArrayRef<int64_t>(values)));
    return success();
  }
};

class ConstantOfShapeLowering
    : public StageOpLowering<onnx::ConstantOfShapeOp> {
public:
  using StageOpLowering::StageOpLowering;
  LogicalResult lower(onnx::ConstantOfShapeOp op, Adaptor adaptor,
                      OpEmitter &emit) const override {
    auto out = emit.result();
    if (failed(out))
      return failure();
    std::string fill = "0.0";
    if (op.getValueAttr()) {
      auto value = pp::onnx::decodeElements(
          op.getLoc(), cast<ElementsAttr>(op.getValueAttr()));
      if (failed(value))
        return failure();
      if (value->numel() != 1)
        return op.emitError() << "ConstantOfShape value must have one element";
      fill = floatLiteral(value->getDouble(0), /*isDouble=*/true);
    }
    CallArgs a = emit.args();
    a.value(*out).lit(fill);
    emit.kernel("pp::rt::fill", a);
    return success();
  }
};

/// Identity, Flatten, Reshape, Squeeze, Unsqueeze: the same bytes in the
/// result's buffer.
template <typename OpTy> class ReshapeLowering : public StageOpLowering<OpTy> {
public:
  using StageOpLowering<OpTy>::StageOpLowering;
  using Adaptor = typename OpTy::Adaptor;
  LogicalResult lower(OpTy op, Adaptor adaptor,
                      OpEmitter &emit) const override {
    return emitReshapeCopy(emit, adaptor.getOperands()[0]);
  }
};

class TransposeLowering : public StageOpLowering<onnx::TransposeOp> {
public:
  using StageOpLowering::StageOpLowering;
  LogicalResult lower(onnx::TransposeOp op, Adaptor adaptor,
                      OpEmitter &emit) const override {
    int64_t rank = shapeOf(op.getData()).size();
    std::vector<int64_t> perm(rank);
    if (auto attr = op.getPerm(); attr && !attr->empty())
      perm.assign(attr->begin(), attr->end());
    else
      std::iota(perm.rbegin(), perm.rend(), 0);
    auto out = emit.result();
    if (failed(out))
      return failure();
    CallArgs a = emit.args();
    a.value(adaptor.getData()).lit(intVector(perm)).value(*out);
    emit.kernel("pp::rt::transpose", a);
    return success();
  }
};

class ConcatLowering : public StageOpLowering<onnx::ConcatOp> {
public:
  using StageOpLowering::StageOpLowering;
  LogicalResult lower(onnx::ConcatOp op, Adaptor adaptor,
                      OpEmitter &emit) const override {
    auto axisOut = axisAndResult(emit, static_cast<int64_t>(op.getAxis()),
                                 shapeOf(op.getResult()).size());
    if (failed(axisOut))
      return failure();
    auto [axis, out] = *axisOut;
    CallArgs list = emit.args();
    for (Value v : adaptor.getInputs())
      list.value(v);
    Value inputs = emit.call(
        "pp::rt::gen::pointers", list,
        opaqueType(emit.getContext(), "std::vector<const pp::rt::Tensor*>"));
    CallArgs a = emit.args();
    a.value(inputs).integer(axis).value(out);
    emit.kernel("pp::rt::concat", a);
    return success();
  }
};

class SplitLowering : public StageOpLowering<onnx::SplitOp> {
public:
  using StageOpLowering::StageOpLowering;
  LogicalResult lower(onnx::SplitOp op, Adaptor adaptor,
                      OpEmitter &emit) const override {
    auto axis = pp::onnx::normalizeAxis(op, static_cast<int64_t>(op.getAxis()),
                                        shapeOf(op.getInput()).size());
    SmallVector<Value> out;
    if (failed(axis) || failed(emit.results(out)))
      return failure();
    // Result types carry the sizes (the importer checked them).
    CallArgs list = emit.args();
    for (Value v : out)
      list.value(v);
    Value outputs = emit.call(
        "pp::rt::gen::mutablePointers", list,
        opaqueType(emit.getContext(), "std::vector<pp::rt::Tensor*>"));
    CallArgs a = emit.args();
    a.value(adaptor.getInput()).integer(*axis).value(outputs);
    emit.kernel("pp::rt::split", a);
    return success();
  }
};

class SliceLowering : public StageOpLowering<onnx::SliceOp> {
public:
  using StageOpLowering::StageOpLowering;
  LogicalResult lower(onnx::SliceOp op, Adaptor adaptor,
                      OpEmitter &emit) const override {
    ArrayRef<int64_t> x = shapeOf(op.getData());
    auto starts = emit.constantInts(op.getStarts());
    if (failed(starts))
      return failure();
    auto ends = emit.constantInts(op.getEnds());
    if (failed(ends))
      return failure();
    std::vector<int64_t> axes, steps;
    if (Value v = op.getAxes()) {
      auto values = emit.constantInts(v);
      if (failed(values))
        return failure();
      axes = *values;
    } else {
      axes.resize(starts->size());
      std::iota(axes.begin(), axes.end(), 0);
    }
    if (Value v = op.getSteps()) {
      auto values = emit.constantInts(v);
      if (failed(values))
        return failure();
      steps = *values;
    } else {
      steps.assign(starts->size(), 1);
    }
    std::vector<int64_t> first, step, shape;
    if (failed(pp::onnx::sliceParams(op, x, *starts, *ends, axes, steps, first,
                                     step, shape)))
      return failure();
    if (ArrayRef<int64_t>(shape) != shapeOf(op.getResult()))
      return op.emitError() << "Slice parameters do not give the result "
                               "type's shape";
    auto out = emit.result();
    if (failed(out))
      return failure();
    CallArgs a = emit.args();
    a.value(adaptor.getData())
        .lit(intVector(first))
        .lit(intVector(step))
        .value(*out);
    emit.kernel("pp::rt::slice", a);
    return success();
  }
};

/// The C++ enumerator of a pad mode.
std::string padModeLiteral(rt::PadMode mode) {
  switch (mode) {
  case rt::PadMode::Constant:
    return "pp::rt::PadMode::Constant";
  case rt::PadMode::Reflect:
    return "pp::rt::PadMode::Reflect";
  case rt::PadMode::Edge:
    return "pp::rt::PadMode::Edge";
  }
  return "";
}

class PadLowering : public StageOpLowering<onnx::PadOp> {
public:
  using StageOpLowering::StageOpLowering;
  LogicalResult lower(onnx::PadOp op, Adaptor adaptor,
                      OpEmitter &emit) const override {
    auto pads = op.getResolvedPads();
    auto mode = op.getPadMode();
    if (failed(pads) || failed(mode))
      return failure();
    auto out = emit.result();
    if (failed(out))
      return failure();
    CallArgs a = emit.args();
    a.value(adaptor.getData())
        .lit(intVector(*pads))
        .lit(padModeLiteral(*mode))
        .lit(floatLiteral(op.getPadValue(), /*isDouble=*/true))
        .value(*out);
    emit.kernel("pp::rt::pad", a);
    return success();
  }
};

class GatherLowering : public StageOpLowering<onnx::GatherOp> {
public:
  using StageOpLowering::StageOpLowering;
  LogicalResult lower(onnx::GatherOp op, Adaptor adaptor,
                      OpEmitter &emit) const override {
    auto axisOut = axisAndResult(emit, static_cast<int64_t>(op.getAxis()),
                                 shapeOf(op.getData()).size());
    if (failed(axisOut))
      return failure();
    auto [axis, out] = *axisOut;
    CallArgs a = emit.args();
    a.value(adaptor.getData())
        .value(adaptor.getIndices())
        .integer(axis)
        .value(out);
    emit.kernel("pp::rt::gather", a);
    return success();
  }
};

class ScatterNDLowering : public StageOpLowering<onnx::ScatterNDOp> {
public:
  using StageOpLowering::StageOpLowering;
  LogicalResult lower(onnx::ScatterNDOp op, Adaptor adaptor,
                      OpEmitter &emit) const override {
    FailureOr<rt::ScatterReduction> reduction = op.getScatterReduction();
    auto out = emit.result();
    if (failed(reduction) || failed(out))
      return failure();
    CallArgs a = emit.args();
    a.value(adaptor.getData())
        .value(adaptor.getIndices())
        .value(adaptor.getUpdates())
        .lit(enumLiteral("ScatterReduction", static_cast<int>(*reduction)))
        .value(*out);
    emit.kernel("pp::rt::scatterND", a);
    return success();
  }
};

} // namespace

void pp::emitc_lowering::populateMovementPatterns(
    const TypeConverter &typeConverter, RewritePatternSet &patterns) {
  patterns
      .add<GlobalReadLowering, ConstantLowering, ShapeLowering,
           ConstantOfShapeLowering, ReshapeLowering<onnx::IdentityOp>,
           ReshapeLowering<onnx::FlattenOp>, ReshapeLowering<onnx::ReshapeOp>,
           ReshapeLowering<onnx::SqueezeOp>, ReshapeLowering<onnx::UnsqueezeOp>,
           TransposeLowering, ConcatLowering, SplitLowering, SliceLowering,
           PadLowering, GatherLowering, ScatterNDLowering>(
          typeConverter, patterns.getContext());
  patterns.add<KernelCallLowering<onnx::ExpandOp>>(
      typeConverter, patterns.getContext(), "pp::rt::expand", 1);
}
