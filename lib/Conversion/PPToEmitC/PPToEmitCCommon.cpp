//===- PPToEmitCCommon.cpp - Shared by the PPToEmitC patterns ---*- C++ -*-===//
//
// The literal printers, the call builder and OpEmitter of
// PPToEmitCCommon.h.
//
//===----------------------------------------------------------------------===//

#include "PPToEmitCCommon.h"

#include "pp/Dialect/ONNX/IR/ONNXOps.h"
#include "pp/Dialect/ONNX/Utils/HostTensor.h"
#include "pp/Dialect/ONNX/Utils/KernelParams.h"
#include "pp/Dialect/PP/IR/PPOps.h"

#include "mlir/IR/BuiltinOps.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>

using namespace mlir;
using namespace pp::emitc_lowering;
namespace rt = pp::rt;

//===----------------------------------------------------------------------===//
// C++ literals
//===----------------------------------------------------------------------===//

const char *pp::emitc_lowering::dtypeLiteral(rt::DType dtype) {
  switch (dtype) {
  case rt::DType::F32:
    return "pp::rt::DType::F32";
  case rt::DType::F64:
    return "pp::rt::DType::F64";
  case rt::DType::I64:
    return "pp::rt::DType::I64";
  case rt::DType::I32:
    return "pp::rt::DType::I32";
  case rt::DType::I8:
    return "pp::rt::DType::I8";
  case rt::DType::U8:
    return "pp::rt::DType::U8";
  case rt::DType::Bool:
    return "pp::rt::DType::Bool";
  case rt::DType::F16:
    return "pp::rt::DType::F16";
  case rt::DType::BF16:
    return "pp::rt::DType::BF16";
  case rt::DType::U32:
    return "pp::rt::DType::U32";
  case rt::DType::U64:
    return "pp::rt::DType::U64";
  case rt::DType::I16:
    return "pp::rt::DType::I16";
  case rt::DType::U16:
    return "pp::rt::DType::U16";
  }
  return "pp::rt::DType::F32";
}

std::string pp::emitc_lowering::quote(StringRef text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\')
      out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

std::string pp::emitc_lowering::floatLiteral(double value, bool isDouble) {
  if (std::isnan(value))
    return isDouble ? "std::numeric_limits<double>::quiet_NaN()"
                    : "std::numeric_limits<float>::quiet_NaN()";
  if (std::isinf(value))
    return std::string(value < 0 ? "-" : "") +
           (isDouble ? "std::numeric_limits<double>::infinity()"
                     : "std::numeric_limits<float>::infinity()");
  std::string text = llvm::formatv(isDouble ? "{0:e16}" : "{0:e9}", value);
  return isDouble ? text : text + "f";
}

std::string pp::emitc_lowering::intList(ArrayRef<int64_t> values) {
  std::string text = "{";
  llvm::raw_string_ostream os(text);
  llvm::interleaveComma(values, os);
  os << "}";
  return text;
}

std::string pp::emitc_lowering::intVector(ArrayRef<int64_t> values) {
  return "std::vector<int64_t>" + intList(values);
}

void pp::emitc_lowering::appendActivation(CallArgs &args, Operation *op) {
  rt::UnaryKind kind = pp::pipeline::getActivation(op);
  if (kind != rt::UnaryKind::Identity)
    args.lit(enumLiteral("UnaryKind", static_cast<int>(kind)));
}

std::string pp::emitc_lowering::enumLiteral(StringRef enumType, int value) {
  return llvm::formatv("pp::rt::{0}({1})", enumType, value).str();
}

std::string pp::emitc_lowering::windowLiteral(const rt::WindowParams &p) {
  return llvm::formatv("pp::rt::WindowParams{{{0}, {1}, {2}, {3}, {4}}",
                       intVector(p.kernel), intVector(p.strides),
                       intVector(p.pads), intVector(p.dilations), p.group)
      .str();
}

std::string pp::emitc_lowering::describeOp(Operation *op) {
  std::string text = op->getName().getStringRef().str();
  std::string node;
  op->getLoc()->walk([&](Location loc) {
    if (auto name = dyn_cast<NameLoc>(loc)) {
      node = name.getName().str();
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  if (!node.empty())
    text += " '" + node + "'";
  return text;
}

ArrayRef<int64_t> pp::emitc_lowering::shapeOf(Value value) {
  return cast<RankedTensorType>(value.getType()).getShape();
}

FailureOr<rt::DType> pp::emitc_lowering::dtypeOf(Operation *op, Type type) {
  Type element = getElementTypeOrSelf(type);
  std::optional<rt::DType> dtype = pp::onnx::getDType(element);
  if (!dtype)
    return op->emitError() << "code generation does not support element type "
                           << element;
  return *dtype;
}

Type pp::emitc_lowering::opaqueType(MLIRContext *context, StringRef text) {
  return emitc::OpaqueType::get(context, text);
}

//===----------------------------------------------------------------------===//
// Calls
//===----------------------------------------------------------------------===//

CallArgs &CallArgs::value(Value v) {
  args.push_back(IntegerAttr::get(IndexType::get(context), operands.size()));
  operands.push_back(v);
  return *this;
}

CallArgs &CallArgs::lit(StringRef text) {
  args.push_back(emitc::OpaqueAttr::get(context, text));
  return *this;
}

CallArgs &CallArgs::attr(Attribute attr) {
  args.push_back(attr);
  return *this;
}

OpEmitter::OpEmitter(Operation *op, ConversionPatternRewriter &rewriter,
                     emitc::FuncOp function, Value ctx, Value microBatch,
                     Value kernels)
    : op(op), rewriter(rewriter), function(function), ctx(ctx), mb(microBatch),
      kernels(kernels), replacements(op->getNumResults(), Value()) {}

FailureOr<OpEmitter> OpEmitter::create(Operation *op,
                                       ConversionPatternRewriter &rewriter) {
  // The stage function pattern made the function and, at its start (after
  // the casts the conversion may put there), the kernels' context.
  auto function = op->getParentOfType<emitc::FuncOp>();
  if (!function || function.getBody().empty() ||
      function.getNumArguments() != 2)
    return failure();
  Block &entry = function.getBody().front();
  for (Operation &first : entry) {
    if (isa<UnrealizedConversionCastOp>(first))
      continue;
    auto kernels = dyn_cast<emitc::CallOpaqueOp>(first);
    if (!kernels || kernels.getCallee() != kKernelsCallee)
      return failure();
    return OpEmitter(op, rewriter, function, entry.getArgument(0),
                     entry.getArgument(1), kernels.getResult(0));
  }
  return failure();
}

Value OpEmitter::call(StringRef callee, CallArgs &args, Type result) {
  SmallVector<Type> results;
  if (result)
    results.push_back(result);
  auto call = emitc::CallOpaqueOp::create(rewriter, getLoc(), results, callee,
                                          args.operands,
                                          rewriter.getArrayAttr(args.args));
  return result ? call.getResult(0) : Value();
}

CallArgs OpEmitter::ctxArgs() const {
  CallArgs a = args();
  a.value(ctx);
  return a;
}

void OpEmitter::kernel(StringRef callee, const CallArgs &rest) {
  CallArgs all = args();
  all.value(kernels);
  for (Attribute attr : rest.args) {
    if (auto index = dyn_cast<IntegerAttr>(attr);
        index && isa<IndexType>(index.getType()))
      all.value(rest.operands[index.getInt()]);
    else
      all.args.push_back(attr);
  }
  Value status = call(callee, all, opaqueType(getContext(), kStatusType));
  check(status, describeOp(op));
}

void OpEmitter::check(Value status, StringRef label) {
  CallArgs a = ctxArgs();
  a.value(status).lit(quote(label));
  call("pp::rt::gen::check", a);
}

/// Whether `original` is the stage function's micro-batch argument (which
/// the conversion of the signature may have wrapped in a cast).
static bool isFunctionMicroBatch(Value original) {
  if (auto cast = original.getDefiningOp<UnrealizedConversionCastOp>();
      cast && cast->getNumOperands() == 1)
    original = cast->getOperand(0);
  return isa<BlockArgument>(original);
}

FailureOr<Value> OpEmitter::result(unsigned index) {
  DenseI64ArrayAttr offsets = pipeline::getOffsets(op);
  if (!offsets || index >= offsets.size() || offsets[index] < 0)
    return op->emitError() << "result " << index
                           << " has no planned buffer (run --pp-memory-plan)";
  Value value = op->getResult(index);
  auto dtype = dtypeOf(op, value.getType());
  if (failed(dtype))
    return failure();
  CallArgs a = ctxArgs();
  a.integer(offsets[index])
      .lit(dtypeLiteral(*dtype))
      .lit(intList(shapeOf(value)));
  Value view =
      call("pp::rt::gen::view", a, opaqueType(getContext(), kTensorType));
  // A value that goes to pp.stash is computed in the stash's own buffer, and
  // a gradient that goes to pp.accumulate in the slot's sum when it is the
  // step's first: stash and accumulate then have nothing to copy.
  Operation *holder = nullptr;
  int holders = 0;
  for (Operation *user : value.getUsers())
    if (isa<pipeline::StashOp, pipeline::AccumulateOp>(user)) {
      holder = user;
      ++holders;
    }
  if (holders == 1 && holder->getBlock() == op->getBlock()) {
    CallArgs t = ctxArgs();
    if (auto accumulate = dyn_cast<pipeline::AccumulateOp>(holder)) {
      t.integer(static_cast<int64_t>(accumulate.getSlot())).value(view);
      view = call("pp::rt::gen::accumulateTarget", t,
                  opaqueType(getContext(), kTensorType));
    } else if (auto stash = dyn_cast<pipeline::StashOp>(holder);
               isFunctionMicroBatch(stash.getMicroBatch())) {
      t.integer(static_cast<int64_t>(stash.getSlot())).value(mb).value(view);
      view = call("pp::rt::gen::stashTarget", t,
                  opaqueType(getContext(), kTensorType));
    }
  }
  replacements[index] = view;
  return view;
}

LogicalResult OpEmitter::results(SmallVectorImpl<Value> &views) {
  for (unsigned i = 0, e = op->getNumResults(); i < e; ++i) {
    auto view = result(i);
    if (failed(view))
      return failure();
    views.push_back(*view);
  }
  return success();
}

void OpEmitter::define(unsigned index, Value value) {
  replacements[index] = value;
}

void OpEmitter::optionalPointer(CallArgs &a, Value converted) {
  if (!converted) {
    a.lit("nullptr");
    return;
  }
  CallArgs p = args();
  p.value(converted);
  a.value(call("pp::rt::gen::addr", p,
               opaqueType(getContext(), "const pp::rt::Tensor*")));
}

Value OpEmitter::mutablePointer(Value tensor) {
  CallArgs p = args();
  p.value(tensor);
  return call("pp::rt::gen::addrMut", p,
              opaqueType(getContext(), "pp::rt::Tensor*"));
}

Value OpEmitter::scratch(rt::DType dtype, ArrayRef<int64_t> shape,
                         int64_t part) {
  CallArgs a = ctxArgs();
  a.lit(dtypeLiteral(dtype)).lit(intList(shape)).integer(part);
  return call("pp::rt::gen::scratch", a, opaqueType(getContext(), kTensorType));
}

Value OpEmitter::learningRate(double compiled) {
  CallArgs a = ctxArgs();
  a.f64(compiled);
  return call("pp::rt::gen::learningRate", a, rewriter.getF64Type());
}

void OpEmitter::trainingFlag(CallArgs &args, bool compiled) {
  if (!compiled) {
    args.flag(false);
    return;
  }
  CallArgs a = ctxArgs();
  args.value(call("pp::rt::gen::training", a, rewriter.getI1Type()));
}

Value OpEmitter::i64(int64_t value) {
  return emitc::ConstantOp::create(rewriter, getLoc(), rewriter.getI64Type(),
                                   rewriter.getI64IntegerAttr(value));
}

FailureOr<Value> OpEmitter::microBatch(Value original) {
  if (isFunctionMicroBatch(original))
    return mb;
  if (original.getDefiningOp<onnx::ConstantOp>()) {
    auto ints = constantInts(original);
    if (failed(ints))
      return failure();
    if (ints->size() != 1)
      return op->emitError() << "a micro-batch must be one integer";
    return i64(ints->front());
  }
  return op->emitError() << "code generation needs the micro-batch as the "
                            "stage function's argument or a constant";
}

/// The elements of `original`'s onnx.Constant; an error at `op` when it is
/// computed at run time.
static FailureOr<pp::onnx::HostTensor> decodeConstant(Operation *op,
                                                      Value original) {
  auto constant = original.getDefiningOp<pp::onnx::ConstantOp>();
  if (!constant)
    return op->emitError()
           << "code generation needs a constant operand here (static "
              "shapes); it is computed at run time";
  return pp::onnx::decodeElements(constant.getLoc(),
                                  cast<ElementsAttr>(constant.getValue()));
}

FailureOr<std::vector<double>> OpEmitter::constantValues(Value original) {
  auto decoded = decodeConstant(op, original);
  if (failed(decoded))
    return failure();
  std::vector<double> result;
  for (int64_t i = 0, e = decoded->numel(); i < e; ++i)
    result.push_back(decoded->getDouble(i));
  return result;
}

FailureOr<std::vector<int64_t>> OpEmitter::constantInts(Value original) {
  // Read as integers: through double, torch's "to the end" (INT64_MAX)
  // would round to 2^63, which no int64 holds.
  auto decoded = decodeConstant(op, original);
  if (failed(decoded))
    return failure();
  std::vector<int64_t> result;
  for (int64_t i = 0, e = decoded->numel(); i < e; ++i)
    result.push_back(decoded->getInt(i));
  return result;
}

LogicalResult OpEmitter::finish() {
  if (op->getNumResults() == 0) {
    rewriter.eraseOp(op);
    return success();
  }
  for (auto [i, value] : llvm::enumerate(replacements))
    if (!value)
      return op->emitError() << "code generation produced no value for "
                                "result "
                             << i;
  rewriter.replaceOp(op, replacements);
  return success();
}

LogicalResult
TableOpLowering::matchAndRewrite(Operation *op, ArrayRef<Value> operands,
                                 ConversionPatternRewriter &rewriter) const {
  if (!handles(op))
    return failure();
  auto emitter = OpEmitter::create(op, rewriter);
  if (failed(emitter) || failed(lower(op, operands, *emitter)))
    return failure();
  return emitter->finish();
}

//===----------------------------------------------------------------------===//
// Shared lowerings
//===----------------------------------------------------------------------===//

void pp::emitc_lowering::emitCopy(OpEmitter &emit, Value from, Value to) {
  CallArgs a = emit.args();
  a.value(from).value(to);
  emit.kernel("pp::rt::copy", a);
}

FailureOr<std::pair<int64_t, Value>>
pp::emitc_lowering::axisAndResult(OpEmitter &emit, int64_t axis, int64_t rank) {
  auto normalized = pp::onnx::normalizeAxis(emit.getOp(), axis, rank);
  if (failed(normalized))
    return failure();
  auto out = emit.result();
  if (failed(out))
    return failure();
  return std::pair(*normalized, *out);
}
