//===- LowerToEmitC.cpp - Stage functions to EmitC and C++ ----------------===//
//
// Lowers a scheduled pipeline (after --pp-memory-plan) to the EmitC dialect:
// every stage function becomes an emitc.func taking the runtime's
// StageContext and the micro-batch; every tensor is a view into the planned
// arena (pp.offsets); every op becomes calls of the runtime kernels
// (Kernels.h) and status checks; pp ops become StageContext calls. Globals
// and constants go to a data file; the program table (globals, inputs,
// outputs, functions, the schedule of every device) and main() are
// emitted after the functions. The C++ text comes from the upstream EmitC
// emitter (mlir::emitc::translateToCpp), and the same source builds against
// the CPU and the CUDA runtime (pp/Runtime/Generated.h).
//
//===----------------------------------------------------------------------===//

#include "pp/Conversion/PPToEmitC/PPToEmitC.h"

#include "pp/Analysis/MemoryPlan.h"

#include "pp/Dialect/ONNX/IR/ONNXOps.h"
#include "pp/Dialect/PP/IR/PPOps.h"
#include "pp/Dialect/Train/IR/TrainOps.h"
#include "pp/Interpreter/Interpreter.h"
#include "pp/Interpreter/OpParams.h"

#include "mlir/Dialect/EmitC/IR/EmitC.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <limits>
#include <numeric>

using namespace mlir;
namespace onnx = pp::onnx;
namespace train = pp::train;
namespace pipeline = pp::pipeline;
namespace rt = pp::rt;

namespace {

const char *dtypeLiteral(rt::DType dtype) {
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
  }
  return "pp::rt::DType::F32";
}

/// A C++ string literal of `text`.
std::string quote(StringRef text) {
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

/// A float literal that reads back to the same float (or double).
std::string floatLiteral(double value, bool isDouble = false) {
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

std::string intList(ArrayRef<int64_t> values) {
  std::string text = "{";
  llvm::raw_string_ostream os(text);
  llvm::interleaveComma(values, os);
  os << "}";
  return text;
}

std::string intVector(ArrayRef<int64_t> values) {
  return "std::vector<int64_t>" + intList(values);
}

std::string windowLiteral(const rt::WindowParams &p) {
  return llvm::formatv("pp::rt::WindowParams{{{0}, {1}, {2}, {3}, {4}}",
                       intVector(p.kernel), intVector(p.strides),
                       intVector(p.pads), intVector(p.dilations), p.group)
      .str();
}

/// The op's name and, where the importer recorded one, its ONNX node name.
std::string describeOp(Operation *op) {
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

ArrayRef<int64_t> shapeOf(Value value) {
  return cast<RankedTensorType>(value.getType()).getShape();
}

/// Builds one emitc.call_opaque: operands are referenced by index, other
/// arguments are C++ literals.
struct CallArgs {
  MLIRContext *context;
  SmallVector<Value> operands;
  SmallVector<Attribute> args;

  explicit CallArgs(MLIRContext *context) : context(context) {}
  CallArgs &value(Value v) {
    args.push_back(IntegerAttr::get(IndexType::get(context), operands.size()));
    operands.push_back(v);
    return *this;
  }
  CallArgs &lit(StringRef text) {
    args.push_back(emitc::OpaqueAttr::get(context, text));
    return *this;
  }
  CallArgs &integer(int64_t v) { return lit(std::to_string(v)); }
  CallArgs &flag(bool v) { return lit(v ? "true" : "false"); }
  CallArgs &f32(double v) { return lit(floatLiteral(v)); }
};

} // namespace

//===----------------------------------------------------------------------===//
// Program data: globals, constants and the data file
//===----------------------------------------------------------------------===//

namespace {

struct GlobalEntry {
  std::string name;
  rt::DType dtype;
  SmallVector<int64_t> shape;
  bool trainable;
  int64_t dataOffset;
  int64_t ownerStage = -1;
};

struct ConstantEntry {
  rt::DType dtype;
  SmallVector<int64_t> shape;
  int64_t dataOffset;
};

struct ProgramData {
  std::vector<GlobalEntry> globals;
  llvm::StringMap<int> globalIds;
  std::vector<ConstantEntry> constants;
  llvm::DenseMap<Attribute, int> constantIds;
  /// Arena bytes of each stage function (the plan code generation uses).
  llvm::StringMap<int64_t> arenaBytes;
  std::string bytes;

  int64_t append(const pp::interp::Tensor &value) {
    // 256-byte aligned, as the runtime's buffers.
    bytes.resize((bytes.size() + 255) / 256 * 256, '\0');
    int64_t offset = bytes.size();
    bytes.append(static_cast<const char *>(value.data()), value.bytes());
    return offset;
  }
};

FailureOr<rt::DType> dtypeOf(Operation *op, Type type) {
  Type element = getElementTypeOrSelf(type);
  std::optional<rt::DType> dtype = pp::interp::getDType(element);
  if (!dtype)
    return op->emitError() << "code generation does not support element type "
                           << element;
  return *dtype;
}

} // namespace

//===----------------------------------------------------------------------===//
// Stage functions
//===----------------------------------------------------------------------===//

//===----------------------------------------------------------------------===//
// Elementwise fusion
//===----------------------------------------------------------------------===//

namespace {

/// The scalar function of pp/Runtime/Fused.h that computes `op` inside a
/// fused kernel; empty when `op` is not fusible.
StringRef fusedFunction(Operation *op) {
  return TypeSwitch<Operation *, StringRef>(op)
      .Case([](onnx::AddOp) { return "add"; })
      .Case([](onnx::SubOp) { return "sub"; })
      .Case([](onnx::MulOp) { return "mul"; })
      .Case([](onnx::DivOp) { return "div"; })
      .Case([](onnx::ReluOp) { return "relu"; })
      .Case([](onnx::SigmoidOp) { return "sigmoid"; })
      .Case([](onnx::TanhOp) { return "tanh"; })
      .Case([](onnx::ErfOp) { return "erf"; })
      .Case([](onnx::SqrtOp) { return "sqrt"; })
      .Case([](onnx::ExpOp) { return "exp"; })
      .Case([](onnx::LogOp) { return "log"; })
      .Case([](onnx::NegOp) { return "neg"; })
      .Case([](onnx::AbsOp) { return "abs"; })
      .Case([](onnx::ReciprocalOp) { return "reciprocal"; })
      .Case([](train::UnaryGradOp g) -> StringRef {
        return llvm::StringSwitch<StringRef>(g.getKind())
            .Case("Relu", "reluGrad")
            .Case("Sigmoid", "sigmoidGrad")
            .Case("Tanh", "tanhGrad")
            .Default("");
      })
      .Default([](Operation *) { return ""; });
}

/// Whether a fused kernel producing `result` can read `operand` at
/// i mod numel(operand): the same shape, a scalar, or a suffix of the
/// result's shape (a bias), leading 1s aside.
bool readsBySuffix(ArrayRef<int64_t> operand, ArrayRef<int64_t> result) {
  while (!operand.empty() && operand.front() == 1)
    operand = operand.drop_front();
  return operand.size() <= result.size() &&
         operand == result.take_back(operand.size());
}

/// Groups of elementwise ops that one generated kernel computes: trees of
/// single-use values of one shape and one float type. The last op of a
/// group (its root) is where the kernel runs; the others map to it.
struct Fusion {
  llvm::DenseMap<Operation *, Operation *> fusedInto;
  llvm::DenseMap<Operation *, SmallVector<Operation *>> groups;
};

Fusion findFusion(Block &block) {
  llvm::DenseMap<Operation *, SmallVector<Operation *>> open;
  // Groups that may not grow past a global write.
  llvm::DenseSet<Operation *> closed;
  for (Operation &op : block) {
    // A global write may change what a deferred read of it sees.
    if (isa<train::GlobalWriteOp>(op)) {
      for (auto &entry : open)
        closed.insert(entry.first);
      continue;
    }
    if (fusedFunction(&op).empty() || op.getNumResults() != 1)
      continue;
    auto type = dyn_cast<RankedTensorType>(op.getResult(0).getType());
    if (!type || !type.hasStaticShape() ||
        !(type.getElementType().isF32() || type.getElementType().isF64()))
      continue;
    bool fusible = true;
    SmallVector<Operation *> absorbed;
    for (Value operand : op.getOperands()) {
      auto operandType = dyn_cast<RankedTensorType>(operand.getType());
      if (!operandType ||
          operandType.getElementType() != type.getElementType()) {
        fusible = false;
        break;
      }
      Operation *def = operand.getDefiningOp();
      auto it = def ? open.find(def) : open.end();
      if (it != open.end() && !closed.contains(def) && operand.hasOneUse() &&
          operandType == type && !llvm::is_contained(absorbed, def)) {
        absorbed.push_back(def);
        continue;
      }
      if (!readsBySuffix(operandType.getShape(), type.getShape())) {
        fusible = false;
        break;
      }
    }
    if (!fusible)
      continue;
    SmallVector<Operation *> members;
    for (Operation *root : absorbed) {
      members.append(open[root]);
      open.erase(root);
    }
    members.push_back(&op);
    llvm::sort(members, [](Operation *a, Operation *b) {
      return a->isBeforeInBlock(b);
    });
    open[&op] = std::move(members);
  }
  Fusion fusion;
  for (auto &[root, members] : open) {
    if (members.size() < 2)
      continue;
    for (Operation *member : members)
      if (member != root)
        fusion.fusedInto[member] = root;
    fusion.groups[root] = members;
  }
  return fusion;
}

} // namespace

namespace {

using pp::MemoryPlan;

class StageLowering {
public:
  StageLowering(OpBuilder &builder, ProgramData &data, func::FuncOp func,
                bool fuse)
      : b(builder), data(data), func(func), context(builder.getContext()),
        loc(func.getLoc()), fuse(fuse) {
    tensorType = emitc::OpaqueType::get(context, "pp::rt::Tensor");
    statusType = emitc::OpaqueType::get(context, "pp::rt::Status");
    contextRefType = emitc::OpaqueType::get(context, "pp::rt::Context&");
  }

  FailureOr<emitc::FuncOp> lower();

private:
  Value call(StringRef callee, CallArgs &args, Type result = Type()) {
    SmallVector<Type> results;
    if (result)
      results.push_back(result);
    auto op = emitc::CallOpaqueOp::create(
        b, loc, results, callee, args.operands, b.getArrayAttr(args.args));
    return result ? op.getResult(0) : Value();
  }
  CallArgs args() { return CallArgs(context); }
  CallArgs ctxArgs() { return std::move(args().value(ctx)); }

  /// A kernel call `callee(kernels, ...)` and the check of its status.
  void kernel(Operation *op, StringRef callee, CallArgs &rest) {
    CallArgs all = args();
    all.value(kernels);
    for (auto [i, attr] : llvm::enumerate(rest.args)) {
      if (auto index = dyn_cast<IntegerAttr>(attr);
          index && isa<IndexType>(index.getType()))
        all.value(rest.operands[index.getInt()]);
      else
        all.args.push_back(attr);
    }
    Value status = call(callee, all, statusType);
    CallArgs check = ctxArgs();
    check.value(status).lit(quote(describeOp(op)));
    call("pp::rt::gen::check", check);
  }

  /// The emitted Tensor of an MLIR value computed earlier.
  Value get(Value value) {
    auto it = values.find(value);
    assert(it != values.end() && "operand lowered before its user");
    return it->second;
  }
  FailureOr<Value> getOptional(Value value) {
    if (!value)
      return Value();
    return get(value);
  }
  /// `const pp::rt::Tensor *` of an optional operand (nullptr when absent).
  void optionalPointer(CallArgs &a, Value value) {
    if (!value) {
      a.lit("nullptr");
      return;
    }
    CallArgs p = args();
    p.value(get(value));
    a.value(call("pp::rt::gen::addr", p,
                 emitc::OpaqueType::get(context, "const pp::rt::Tensor*")));
  }
  Value mutablePointer(Value tensor) {
    CallArgs p = args();
    p.value(tensor);
    return call("pp::rt::gen::addrMut", p,
                emitc::OpaqueType::get(context, "pp::rt::Tensor*"));
  }

  /// A view of the planned arena slot of `result`.
  FailureOr<Value> result(Operation *op, unsigned index = 0) {
    auto found = plan.offsets.find(op->getResult(index));
    if (found == plan.offsets.end())
      return op->emitError() << "result " << index << " has no planned buffer";
    int64_t offset = found->second;
    Value resultValue = op->getResult(index);
    auto dtype = dtypeOf(op, resultValue.getType());
    if (failed(dtype))
      return failure();
    CallArgs a = ctxArgs();
    a.integer(offset)
        .lit(dtypeLiteral(*dtype))
        .lit(intList(shapeOf(resultValue)));
    Value view = call("pp::rt::gen::view", a, tensorType);
    values[resultValue] = view;
    return view;
  }

  /// Scratch of `count` elements of `dtype` (kernel temporaries that are not
  /// op results), valid until the next op asks.
  Value scratch(rt::DType dtype, ArrayRef<int64_t> shape, int64_t part) {
    CallArgs a = ctxArgs();
    a.lit(dtypeLiteral(dtype)).lit(intList(shape)).integer(part);
    return call("pp::rt::gen::scratch", a, tensorType);
  }

  /// Values of a constant operand (shape operands, axes, ratios).
  FailureOr<std::vector<double>> constantValues(Operation *user, Value value) {
    auto constant = value.getDefiningOp<onnx::ConstantOp>();
    if (!constant)
      return user->emitError()
             << "code generation needs a constant operand here (static "
                "shapes); it is computed at run time";
    auto decoded = pp::interp::decodeElements(
        constant.getLoc(), cast<ElementsAttr>(constant.getValue()));
    if (failed(decoded))
      return failure();
    std::vector<double> result;
    for (int64_t i = 0, e = decoded->numel(); i < e; ++i)
      result.push_back(decoded->getDouble(i));
    return result;
  }
  FailureOr<std::vector<int64_t>> constantInts(Operation *user, Value value) {
    auto values = constantValues(user, value);
    if (failed(values))
      return failure();
    return std::vector<int64_t>(values->begin(), values->end());
  }

  /// The compiled learning rate, or the run's --lr.
  Value learningRate(double compiled) {
    CallArgs a = ctxArgs();
    a.f32(compiled);
    return call("pp::rt::gen::learningRate", a, b.getF32Type());
  }

  LogicalResult lowerOp(Operation *op);
  LogicalResult lowerFused(ArrayRef<Operation *> ops);
  LogicalResult lowerUnary(Operation *op, rt::UnaryKind kind,
                           float alpha = 0.f);
  LogicalResult lowerBinary(Operation *op, rt::BinaryKind kind);
  LogicalResult lowerCopy(Operation *op, Value input);
  LogicalResult lowerReduce(Operation *op, Value x, rt::ReduceKind kind,
                            std::vector<int64_t> axes);
  LogicalResult lowerConstant(Operation *op, ElementsAttr value);
  LogicalResult lowerGlobalRead(onnx::GlobalReadOp op);
  LogicalResult lowerGlobalWrite(train::GlobalWriteOp op);
  LogicalResult lowerSGD(train::SGDOp op);
  LogicalResult lowerAdam(train::AdamOp op);
  LogicalResult lowerPipelineOp(Operation *op);

  OpBuilder &b;
  ProgramData &data;
  func::FuncOp func;
  MLIRContext *context;
  Location loc;
  Type tensorType, statusType, contextRefType;
  Value ctx, microBatch, kernels;
  DenseMap<Value, Value> values;
  int64_t stage = 0;
  bool fuse;
  Fusion fusion;
  MemoryPlan plan;
  emitc::FuncOp emitted;
  int fusedKernels = 0;
};

FailureOr<emitc::FuncOp> StageLowering::lower() {
  stage = *pipeline::getStage(func);
  bool hasMicroBatch = func.getNumArguments() == 1;
  if (func.getNumArguments() > 1 || func.getNumResults() != 0)
    return func.emitError() << "a stage function takes at most the "
                               "micro-batch and returns nothing";
  SmallVector<Type> inputs = {
      emitc::OpaqueType::get(context, "pp::rt::StageContext&"), b.getI64Type()};
  auto type = b.getFunctionType(inputs, {});
  emitted = emitc::FuncOp::create(b, loc, func.getSymName(), type);
  Block *entry = emitted.addEntryBlock();
  // The arena plan of --pp-memory-plan, redone with the fused groups: their
  // inner values need no buffer, their inputs live until the kernel runs.
  Block &body = func.getBody().front();
  if (fuse)
    fusion = findFusion(body);
  plan = pp::planMemory(body, &fusion.fusedInto);
  data.arenaBytes[func.getSymName()] = plan.arenaBytes;
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(entry);
  ctx = entry->getArgument(0);
  microBatch = entry->getArgument(1);
  CallArgs k = ctxArgs();
  kernels = call("pp::rt::gen::kernels", k, contextRefType);
  if (hasMicroBatch)
    values[func.getArgument(0)] = microBatch;

  for (Operation &op : func.getBody().front()) {
    if (isa<func::ReturnOp>(op))
      continue;
    if (op.getNumRegions() != 0)
      return op.emitError() << "code generation does not support ops with "
                               "regions";
    if (fusion.fusedInto.count(&op))
      continue; // computed by its group's kernel
    auto group = fusion.groups.find(&op);
    if (failed(group != fusion.groups.end() ? lowerFused(group->second)
                                            : lowerOp(&op)))
      return failure();
  }
  emitc::ReturnOp::create(b, loc, Value());
  return emitted;
}

LogicalResult StageLowering::lowerFused(ArrayRef<Operation *> ops) {
  Operation *root = ops.back();
  Value out = root->getResult(0);
  auto type = cast<RankedTensorType>(out.getType());
  Type element = type.getElementType();
  StringRef cType = element.isF64() ? "double" : "float";
  auto y = result(root);
  if (failed(y))
    return failure();
  // Inputs of the group, in order of first use.
  llvm::DenseSet<Value> inner;
  for (Operation *op : ops)
    inner.insert(op->getResult(0));
  SmallVector<Value> inputs;
  for (Operation *op : ops)
    for (Value operand : op->getOperands())
      if (!inner.contains(operand) && !llvm::is_contained(inputs, operand))
        inputs.push_back(operand);

  // The per-element function: out[i] = f(in0[i mod m0], in1[i mod m1], ...).
  std::string name =
      (func.getSymName() + "_fused" + Twine(fusedKernels++)).str();
  auto pointer = emitc::PointerType::get(element);
  SmallVector<Type> argTypes = {b.getI64Type(), pointer};
  for (size_t i = 0; i < inputs.size(); ++i)
    argTypes.append({pointer, b.getI64Type()});
  OpBuilder kb(context);
  kb.setInsertionPoint(emitted);
  auto kernelFn = emitc::FuncOp::create(kb, root->getLoc(), name,
                                        kb.getFunctionType(argTypes, {}));
  kernelFn.setSpecifiersAttr(kb.getStrArrayAttr({"PP_FUSED_INLINE"}));
  Block *entry = kernelFn.addEntryBlock();
  kb.setInsertionPointToStart(entry);
  Value index = entry->getArgument(0);
  DenseMap<Value, Value> scalar;
  for (auto [j, input] : llvm::enumerate(inputs)) {
    auto ptr =
        cast<TypedValue<emitc::PointerType>>(entry->getArgument(2 + 2 * j));
    Value wrapped = emitc::RemOp::create(kb, loc, kb.getI64Type(), index,
                                         entry->getArgument(3 + 2 * j));
    Value slot = emitc::SubscriptOp::create(kb, loc, ptr, wrapped);
    scalar[input] = emitc::LoadOp::create(kb, loc, element, slot);
  }
  for (Operation *op : ops) {
    SmallVector<Value> operands;
    for (Value operand : op->getOperands())
      operands.push_back(scalar[operand]);
    scalar[op->getResult(0)] =
        emitc::CallOpaqueOp::create(
            kb, loc, TypeRange{element},
            ("pp::rt::fused::" + fusedFunction(op)).str(), operands)
            .getResult(0);
  }
  auto outPtr = cast<TypedValue<emitc::PointerType>>(entry->getArgument(1));
  emitc::AssignOp::create(
      kb, loc, emitc::SubscriptOp::create(kb, loc, outPtr, index), scalar[out]);
  emitc::ReturnOp::create(kb, loc, Value());

  // Its launch over every element of the result.
  ArrayAttr elementType =
      b.getArrayAttr({emitc::OpaqueAttr::get(context, cType)});
  auto dataOf = [&](Value tensor) {
    return emitc::CallOpaqueOp::create(
               b, loc, TypeRange{pointer}, "pp::rt::fused::data",
               ValueRange{tensor}, ArrayAttr(), elementType)
        .getResult(0);
  };
  auto constant = [&](int64_t v) -> Value {
    return emitc::ConstantOp::create(b, loc, b.getI64Type(),
                                     b.getI64IntegerAttr(v));
  };
  SmallVector<Value> operands = {kernels, constant(type.getNumElements()),
                                 dataOf(*y)};
  for (Value input : inputs) {
    operands.push_back(dataOf(get(input)));
    operands.push_back(
        constant(cast<RankedTensorType>(input.getType()).getNumElements()));
  }
  Value status =
      emitc::CallOpaqueOp::create(
          b, loc, TypeRange{statusType}, "pp::rt::fused::forEach", operands,
          ArrayAttr(), b.getArrayAttr({emitc::OpaqueAttr::get(context, name)}))
          .getResult(0);
  std::string label = describeOp(root) + " fused with";
  for (Operation *op : ops.drop_back())
    label += " " + op->getName().getStringRef().str();
  CallArgs check = ctxArgs();
  check.value(status).lit(quote(label));
  call("pp::rt::gen::check", check);
  values[out] = *y;
  return success();
}

LogicalResult StageLowering::lowerUnary(Operation *op, rt::UnaryKind kind,
                                        float alpha) {
  auto y = result(op);
  if (failed(y))
    return failure();
  CallArgs a = args();
  a.lit(llvm::formatv("pp::rt::UnaryKind({0})", static_cast<int>(kind)).str())
      .value(get(op->getOperand(0)))
      .value(*y);
  if (alpha != 0.f)
    a.f32(alpha);
  kernel(op, "pp::rt::unary", a);
  return success();
}

LogicalResult StageLowering::lowerBinary(Operation *op, rt::BinaryKind kind) {
  if (getElementTypeOrSelf(op->getOperand(0).getType()) !=
      getElementTypeOrSelf(op->getOperand(1).getType()))
    return op->emitError() << "code generation supports operands of one "
                              "element type only";
  auto c = result(op);
  if (failed(c))
    return failure();
  CallArgs a = args();
  a.lit(llvm::formatv("pp::rt::BinaryKind({0})", static_cast<int>(kind)).str())
      .value(get(op->getOperand(0)))
      .value(get(op->getOperand(1)))
      .value(*c);
  kernel(op, "pp::rt::binary", a);
  return success();
}

LogicalResult StageLowering::lowerCopy(Operation *op, Value input) {
  // Reshape-like ops: the same bytes in the result's own buffer (the memory
  // plan gave it one; aliasing would outlive the input's slot).
  auto y = result(op);
  if (failed(y))
    return failure();
  CallArgs r = args();
  r.value(get(input)).lit(intList(shapeOf(op->getResult(0))));
  Value source = call("pp::rt::gen::reshaped", r, tensorType);
  CallArgs a = args();
  a.value(source).value(*y);
  kernel(op, "pp::rt::copy", a);
  return success();
}

LogicalResult StageLowering::lowerReduce(Operation *op, Value x,
                                         rt::ReduceKind kind,
                                         std::vector<int64_t> axes) {
  auto y = result(op);
  if (failed(y))
    return failure();
  CallArgs a = args();
  a.lit(llvm::formatv("pp::rt::ReduceKind({0})", static_cast<int>(kind)).str())
      .value(get(x))
      .lit(intVector(axes))
      .value(*y);
  kernel(op, "pp::rt::reduce", a);
  return success();
}

LogicalResult StageLowering::lowerConstant(Operation *op, ElementsAttr value) {
  auto [it, inserted] = data.constantIds.try_emplace(value, 0);
  if (inserted) {
    auto decoded = pp::interp::decodeElements(op->getLoc(), value);
    if (failed(decoded))
      return failure();
    ConstantEntry entry;
    entry.dtype = decoded->dtype();
    entry.shape.assign(decoded->shape().begin(), decoded->shape().end());
    entry.dataOffset = data.append(*decoded);
    it->second = data.constants.size();
    data.constants.push_back(entry);
  }
  CallArgs a = ctxArgs();
  a.integer(it->second);
  values[op->getResult(0)] = call("pp::rt::gen::constant", a, tensorType);
  return success();
}

LogicalResult StageLowering::lowerGlobalRead(onnx::GlobalReadOp op) {
  auto it = data.globalIds.find(op.getGlobal());
  if (it == data.globalIds.end())
    return op.emitError() << "no global named '" << op.getGlobal() << "'";
  CallArgs a = ctxArgs();
  a.integer(it->second);
  values[op.getValue()] = call("pp::rt::gen::global", a, tensorType);
  return success();
}

LogicalResult StageLowering::lowerGlobalWrite(train::GlobalWriteOp op) {
  auto it = data.globalIds.find(op.getGlobal());
  if (it == data.globalIds.end())
    return op.emitError() << "no global named '" << op.getGlobal() << "'";
  CallArgs a = ctxArgs();
  a.integer(it->second).value(get(op->getOperand(0)));
  call("pp::rt::gen::writeGlobal", a);
  return success();
}

LogicalResult StageLowering::lowerSGD(train::SGDOp op) {
  // The IR is functional: update copies (the new values' own buffers).
  auto param = result(op, 0);
  if (failed(param))
    return failure();
  CallArgs copyParam = args();
  copyParam.value(get(op.getParam())).value(*param);
  kernel(op, "pp::rt::copy", copyParam);
  Value buffer;
  if (op.getMomentumBuffer()) {
    auto newBuffer = result(op, 1);
    if (failed(newBuffer))
      return failure();
    CallArgs copyBuffer = args();
    copyBuffer.value(get(op.getMomentumBuffer())).value(*newBuffer);
    kernel(op, "pp::rt::copy", copyBuffer);
    buffer = mutablePointer(*newBuffer);
  }
  CallArgs s = args();
  s.value(get(op.getStep()));
  Value step = call("pp::rt::gen::readInt", s, b.getI64Type());
  CallArgs a = args();
  a.value(*param).value(get(op.getGrad()));
  if (buffer)
    a.value(buffer);
  else
    a.lit("nullptr");
  a.value(step)
      .value(learningRate(op.getLr().convertToDouble()))
      .f32(op.getMomentum().convertToDouble())
      .f32(op.getDampening().convertToDouble())
      .f32(op.getWeightDecay().convertToDouble())
      .flag(op.getNesterov());
  kernel(op, "pp::rt::sgdStep", a);
  return success();
}

LogicalResult StageLowering::lowerAdam(train::AdamOp op) {
  auto param = result(op, 0), m = result(op, 1), v = result(op, 2);
  if (failed(param) || failed(m) || failed(v))
    return failure();
  for (auto [from, to] : {std::pair(op.getParam(), *param),
                          std::pair(op.getM(), *m), std::pair(op.getV(), *v)}) {
    CallArgs c = args();
    c.value(get(from)).value(to);
    kernel(op, "pp::rt::copy", c);
  }
  CallArgs s = args();
  s.value(get(op.getStep()));
  Value step = call("pp::rt::gen::readInt", s, b.getI64Type());
  CallArgs a = args();
  a.value(*param)
      .value(get(op.getGrad()))
      .value(*m)
      .value(*v)
      .value(step)
      .value(learningRate(op.getLr().convertToDouble()))
      .f32(op.getBeta1().convertToDouble())
      .f32(op.getBeta2().convertToDouble())
      .f32(op.getEpsilon().convertToDouble())
      .f32(op.getWeightDecay().convertToDouble())
      .flag(op.getDecoupled());
  kernel(op, "pp::rt::adamStep", a);
  return success();
}

LogicalResult StageLowering::lowerPipelineOp(Operation *op) {
  // The micro-batch: the function's argument, or a constant (per-step
  // functions send with a fixed one).
  LogicalResult mbStatus = success();
  auto mb = [&](Value v) -> Value {
    if (!v.getDefiningOp<onnx::ConstantOp>())
      return get(v);
    auto ints = constantInts(op, v);
    if (failed(ints) || ints->size() != 1) {
      mbStatus = failure();
      return microBatch;
    }
    return emitc::ConstantOp::create(b, loc, b.getI64Type(),
                                     b.getI64IntegerAttr(ints->front()));
  };
  LogicalResult lowered =
      TypeSwitch<Operation *, LogicalResult>(op)
          .Case([&](pipeline::InputOp input) -> LogicalResult {
            auto dst = result(op);
            if (failed(dst))
              return failure();
            CallArgs a = ctxArgs();
            a.integer(input.getIndex())
                .value(mb(input.getMicroBatch()))
                .value(*dst);
            call("pp::rt::gen::input", a);
            return success();
          })
          .Case([&](pipeline::OutputOp output) -> LogicalResult {
            CallArgs a = ctxArgs();
            a.integer(output.getIndex())
                .value(mb(output.getMicroBatch()))
                .value(get(output.getValue()));
            call("pp::rt::gen::output", a);
            return success();
          })
          .Case([&](pipeline::SendOp send) -> LogicalResult {
            CallArgs a = ctxArgs();
            a.integer(send.getPeer())
                .integer(send.getTag())
                .value(mb(send.getMicroBatch()))
                .value(get(send.getValue()));
            call("pp::rt::gen::send", a);
            return success();
          })
          .Case([&](pipeline::RecvOp recv) -> LogicalResult {
            auto dst = result(op);
            if (failed(dst))
              return failure();
            CallArgs a = ctxArgs();
            a.integer(recv.getPeer())
                .integer(recv.getTag())
                .value(mb(recv.getMicroBatch()))
                .value(*dst);
            call("pp::rt::gen::recv", a);
            return success();
          })
          .Case([&](pipeline::StashOp stash) -> LogicalResult {
            CallArgs a = ctxArgs();
            a.integer(stash.getSlot())
                .value(mb(stash.getMicroBatch()))
                .value(get(stash.getValue()));
            call("pp::rt::gen::stash", a);
            return success();
          })
          .Case([&](pipeline::UnstashOp unstash) -> LogicalResult {
            auto dst = result(op);
            if (failed(dst))
              return failure();
            CallArgs a = ctxArgs();
            a.integer(unstash.getSlot())
                .value(mb(unstash.getMicroBatch()))
                .value(*dst);
            call("pp::rt::gen::unstash", a);
            return success();
          })
          .Case([&](pipeline::AccumulateOp acc) -> LogicalResult {
            CallArgs a = ctxArgs();
            a.integer(acc.getSlot()).value(get(acc.getValue()));
            call("pp::rt::gen::accumulate", a);
            return success();
          })
          .Case([&](pipeline::AccumulatedOp acc) -> LogicalResult {
            auto dst = result(op);
            if (failed(dst))
              return failure();
            CallArgs a = ctxArgs();
            a.integer(acc.getSlot()).value(*dst);
            call("pp::rt::gen::accumulated", a);
            return success();
          })
          .Default([&](Operation *) {
            return op->emitError()
                   << "code generation does not support this op";
          });
  return success(succeeded(lowered) && succeeded(mbStatus));
}

LogicalResult StageLowering::lowerOp(Operation *op) {
  using U = rt::UnaryKind;
  using B = rt::BinaryKind;
  if (op->getDialect() && op->getDialect()->getNamespace() == "pp")
    return lowerPipelineOp(op);
  // One kernel call writing the op's results, in operand order.
  auto simple = [&](StringRef callee, CallArgs a) -> LogicalResult {
    kernel(op, callee, a);
    return success();
  };
  auto withResults = [&](SmallVector<Value> &views) -> LogicalResult {
    for (unsigned i = 0; i < op->getNumResults(); ++i) {
      auto view = result(op, i);
      if (failed(view))
        return failure();
      views.push_back(*view);
    }
    return success();
  };
  SmallVector<Value> out;

  return TypeSwitch<Operation *, LogicalResult>(op)
      // Elementwise.
      .Case([&](onnx::ReluOp) { return lowerUnary(op, U::Relu); })
      .Case([&](onnx::SigmoidOp) { return lowerUnary(op, U::Sigmoid); })
      .Case([&](onnx::TanhOp) { return lowerUnary(op, U::Tanh); })
      .Case([&](onnx::ErfOp) { return lowerUnary(op, U::Erf); })
      .Case([&](onnx::SqrtOp) { return lowerUnary(op, U::Sqrt); })
      .Case([&](onnx::ExpOp) { return lowerUnary(op, U::Exp); })
      .Case([&](onnx::LogOp) { return lowerUnary(op, U::Log); })
      .Case([&](onnx::ReciprocalOp) { return lowerUnary(op, U::Reciprocal); })
      .Case([&](onnx::FloorOp) { return lowerUnary(op, U::Floor); })
      .Case([&](onnx::CeilOp) { return lowerUnary(op, U::Ceil); })
      .Case([&](onnx::NegOp) { return lowerUnary(op, U::Neg); })
      .Case([&](onnx::AbsOp) { return lowerUnary(op, U::Abs); })
      .Case([&](onnx::NotOp) { return lowerUnary(op, U::Not); })
      .Case([&](onnx::LeakyReluOp l) {
        return lowerUnary(op, U::LeakyRelu, l.getAlpha().convertToFloat());
      })
      .Case([&](onnx::GeluOp g) {
        return lowerUnary(op, g.getApproximate() == "tanh" ? U::GeluTanh
                                                           : U::GeluErf);
      })
      .Case([&](onnx::IdentityOp i) { return lowerCopy(op, i.getX()); })
      .Case([&](onnx::AddOp) { return lowerBinary(op, B::Add); })
      .Case([&](onnx::SubOp) { return lowerBinary(op, B::Sub); })
      .Case([&](onnx::MulOp) { return lowerBinary(op, B::Mul); })
      .Case([&](onnx::DivOp) { return lowerBinary(op, B::Div); })
      .Case([&](onnx::PowOp) { return lowerBinary(op, B::Pow); })
      .Case([&](onnx::EqualOp) { return lowerBinary(op, B::Equal); })
      .Case([&](onnx::LessOp) { return lowerBinary(op, B::Less); })
      .Case([&](onnx::GreaterOp) { return lowerBinary(op, B::Greater); })
      .Case([&](onnx::AndOp) { return lowerBinary(op, B::And); })
      .Case([&](onnx::OrOp) { return lowerBinary(op, B::Or); })
      .Case([&](onnx::WhereOp w) -> LogicalResult {
        if (failed(withResults(out)))
          return failure();
        return simple("pp::rt::where",
                      std::move(args()
                                    .value(get(w.getCondition()))
                                    .value(get(w.getX()))
                                    .value(get(w.getY()))
                                    .value(out[0])));
      })
      .Case([&](onnx::ClipOp c) -> LogicalResult {
        if (failed(withResults(out)))
          return failure();
        CallArgs a = args();
        a.value(get(c.getInput()));
        optionalPointer(a, c.getMin());
        optionalPointer(a, c.getMax());
        a.value(out[0]);
        return simple("pp::rt::clip", std::move(a));
      })
      .Case([&](onnx::CastOp c) -> LogicalResult {
        if (failed(withResults(out)))
          return failure();
        return simple("pp::rt::cast",
                      std::move(args().value(get(c.getInput())).value(out[0])));
      })
      .Case([&](onnx::DropoutOp d) -> LogicalResult {
        float ratio = 0.5f;
        bool training = false;
        if (Value r = d.getRatio()) {
          auto v = constantValues(op, r);
          if (failed(v))
            return failure();
          ratio = static_cast<float>(v->front());
        }
        if (Value t = d.getTrainingMode()) {
          auto v = constantValues(op, t);
          if (failed(v))
            return failure();
          training = v->front() != 0;
        }
        // Every execution draws a seed, as the interpreter does.
        CallArgs s = ctxArgs();
        Value drawn = call("pp::rt::gen::nextSeed", s,
                           emitc::OpaqueType::get(context, "uint64_t"));
        if (failed(withResults(out)))
          return failure();
        CallArgs a = args();
        a.value(get(d.getData())).f32(ratio).flag(training);
        if (d.getSeed())
          a.lit(std::to_string(static_cast<uint64_t>(*d.getSeed())) + "ull");
        else
          a.value(drawn);
        a.value(out[0]).value(out[1]);
        return simple("pp::rt::dropout", std::move(a));
      })
      // Contractions, convolution, pooling, normalisation.
      .Case([&](onnx::MatMulOp m) -> LogicalResult {
        if (failed(withResults(out)))
          return failure();
        return simple("pp::rt::matmul", std::move(args()
                                                      .value(get(m.getA()))
                                                      .value(get(m.getB()))
                                                      .value(out[0])));
      })
      .Case([&](onnx::GemmOp g) -> LogicalResult {
        if (failed(withResults(out)))
          return failure();
        CallArgs a = args();
        a.value(get(g.getA())).value(get(g.getB()));
        optionalPointer(a, g.getC());
        a.f32(g.getAlpha().convertToDouble())
            .f32(g.getBeta().convertToDouble())
            .flag(g.getTransA() != 0)
            .flag(g.getTransB() != 0)
            .value(out[0]);
        return simple("pp::rt::gemm", std::move(a));
      })
      .Case([&](onnx::ConvOp c) -> LogicalResult {
        ArrayRef<int64_t> w = shapeOf(c.getW());
        if (w.size() < 3)
          return c.emitError() << "Conv weights must have rank >= 3";
        auto params = pp::interp::windowParams(
            op, shapeOf(c.getX()), shapeOf(c.getY()), w.drop_front(2),
            c.getAutoPad(), c.getPads(), c.getStrides(), c.getDilations());
        if (failed(params) || failed(withResults(out)))
          return failure();
        params->group = static_cast<int64_t>(c.getGroup());
        CallArgs a = args();
        a.value(get(c.getX())).value(get(c.getW()));
        optionalPointer(a, c.getB());
        a.lit(windowLiteral(*params)).value(out[0]);
        return simple("pp::rt::conv", std::move(a));
      })
      .Case([&](onnx::MaxPoolOp m) -> LogicalResult {
        auto dtype = dtypeOf(op, m.getX().getType());
        if (failed(dtype))
          return failure();
        if (*dtype != rt::DType::F32 && *dtype != rt::DType::F64)
          return m.emitError() << "code generation pools float tensors only";
        if (m.getStorageOrder() != 0)
          return m.emitError()
                 << "code generation supports storage_order 0 only";
        auto params = pp::interp::windowParams(
            op, shapeOf(m.getX()), shapeOf(m.getY()), m.getKernelShape(),
            m.getAutoPad(), m.getPads(), m.getStrides(), m.getDilations());
        if (failed(params) || failed(withResults(out)))
          return failure();
        Value indices = mutablePointer(out[1]);
        return simple("pp::rt::maxPool",
                      std::move(args()
                                    .value(get(m.getX()))
                                    .lit(windowLiteral(*params))
                                    .value(out[0])
                                    .value(indices)));
      })
      .Case([&](onnx::AveragePoolOp p) -> LogicalResult {
        auto params = pp::interp::windowParams(
            op, shapeOf(p.getX()), shapeOf(p.getY()), p.getKernelShape(),
            p.getAutoPad(), p.getPads(), p.getStrides(), std::nullopt);
        if (failed(params) || failed(withResults(out)))
          return failure();
        return simple("pp::rt::avgPool",
                      std::move(args()
                                    .value(get(p.getX()))
                                    .lit(windowLiteral(*params))
                                    .flag(p.getCountIncludePad() != 0)
                                    .value(out[0])));
      })
      .Case<onnx::GlobalAveragePoolOp, onnx::GlobalMaxPoolOp>(
          [&](Operation *) -> LogicalResult {
            Value x = op->getOperand(0);
            std::vector<int64_t> axes(
                std::max<int64_t>(shapeOf(x).size() - 2, 0));
            std::iota(axes.begin(), axes.end(), 2);
            return lowerReduce(op, x,
                               isa<onnx::GlobalAveragePoolOp>(op)
                                   ? rt::ReduceKind::Mean
                                   : rt::ReduceKind::Max,
                               axes);
          })
      .Case([&](onnx::BatchNormalizationOp n) -> LogicalResult {
        bool training = n.getTrainingMode() != 0;
        auto dtype = dtypeOf(op, n.getX().getType());
        if (failed(dtype) || failed(withResults(out)))
          return failure();
        ArrayRef<int64_t> x = shapeOf(n.getX());
        int64_t channels = x.size() > 1 ? x[1] : 0;
        CallArgs a = args();
        a.value(get(n.getX()))
            .value(get(n.getScale()))
            .value(get(n.getB()))
            .value(get(n.getInputMean()))
            .value(get(n.getInputVar()))
            .f32(n.getEpsilon().convertToDouble())
            .f32(n.getMomentum().convertToDouble())
            .flag(training)
            .value(out[0])
            .value(out[1])
            .value(out[2]);
        if (training) {
          // The batch statistics only feed the gradient, which recomputes
          // them: scratch here.
          a.value(mutablePointer(scratch(*dtype, {channels}, 0)))
              .value(mutablePointer(scratch(*dtype, {channels}, 1)));
        } else {
          a.lit("nullptr").lit("nullptr");
        }
        a.flag(n.getUnbiasedRunningVar());
        return simple("pp::rt::batchNorm", std::move(a));
      })
      .Case([&](onnx::LayerNormalizationOp n) -> LogicalResult {
        if (getElementTypeOrSelf(n.getMean().getType()) !=
            getElementTypeOrSelf(n.getX().getType()))
          return n.emitError() << "code generation keeps LayerNormalization "
                                  "statistics in the input's type";
        auto axis = pp::interp::normalizeAxis(
            op, static_cast<int64_t>(n.getAxis()), shapeOf(n.getX()).size());
        if (failed(axis) || failed(withResults(out)))
          return failure();
        CallArgs a = args();
        a.value(get(n.getX())).value(get(n.getScale()));
        optionalPointer(a, n.getB());
        a.integer(*axis)
            .f32(n.getEpsilon().convertToDouble())
            .value(out[0])
            .value(out[1])
            .value(out[2]);
        return simple("pp::rt::layerNorm", std::move(a));
      })
      .Case<onnx::SoftmaxOp, onnx::LogSoftmaxOp>(
          [&](Operation *) -> LogicalResult {
            Value x = op->getOperand(0);
            int64_t axisAttr =
                op->getAttrOfType<IntegerAttr>("axis")
                    ? op->getAttrOfType<IntegerAttr>("axis").getInt()
                    : -1;
            auto axis =
                pp::interp::normalizeAxis(op, axisAttr, shapeOf(x).size());
            if (failed(axis) || failed(withResults(out)))
              return failure();
            return simple("pp::rt::softmax",
                          std::move(args()
                                        .value(get(x))
                                        .integer(*axis)
                                        .flag(isa<onnx::LogSoftmaxOp>(op))
                                        .value(out[0])));
          })
      .Case([&](onnx::SoftmaxCrossEntropyLossOp l) -> LogicalResult {
        if (failed(withResults(out)))
          return failure();
        std::optional<uint64_t> ignore = l.getIgnoreIndex();
        CallArgs a = args();
        a.value(get(l.getScores())).value(get(l.getLabels()));
        optionalPointer(a, l.getWeights());
        a.flag(ignore.has_value())
            .integer(ignore ? static_cast<int64_t>(*ignore) : 0)
            .lit(quote(l.getReduction()))
            .value(out[0])
            .value(out[1]);
        return simple("pp::rt::softmaxCrossEntropy", std::move(a));
      })
      .Case([&](onnx::ReduceMeanOp r) -> LogicalResult {
        int64_t rank = shapeOf(r.getData()).size();
        std::vector<int64_t> all(rank);
        std::iota(all.begin(), all.end(), 0);
        ArrayRef<int64_t> requested = all;
        if (auto axes = r.getAxes(); axes && !axes->empty())
          requested = *axes;
        auto axes = pp::interp::normalizeAxes(op, requested, rank);
        if (failed(axes))
          return failure();
        return lowerReduce(op, r.getData(), rt::ReduceKind::Mean, *axes);
      })
      .Case([&](onnx::ReduceSumOp r) -> LogicalResult {
        int64_t rank = shapeOf(r.getData()).size();
        std::vector<int64_t> requested;
        if (Value axesValue = r.getAxes()) {
          auto v = constantInts(op, axesValue);
          if (failed(v))
            return failure();
          requested = *v;
        }
        if (requested.empty()) {
          if (r.getNoopWithEmptyAxes() != 0)
            return lowerCopy(op, r.getData());
          requested.resize(rank);
          std::iota(requested.begin(), requested.end(), 0);
        }
        auto axes = pp::interp::normalizeAxes(op, requested, rank);
        if (failed(axes))
          return failure();
        return lowerReduce(op, r.getData(), rt::ReduceKind::Sum, *axes);
      })
      // Globals, constants and data movement.
      .Case([&](onnx::GlobalReadOp g) { return lowerGlobalRead(g); })
      .Case([&](onnx::ConstantOp c) {
        return lowerConstant(op, cast<ElementsAttr>(c.getValue()));
      })
      .Case([&](onnx::ConstantOfShapeOp c) -> LogicalResult {
        if (failed(withResults(out)))
          return failure();
        if (!c.getValueAttr())
          return simple("pp::rt::fill",
                        std::move(args().value(out[0]).lit("0.0")));
        auto value = pp::interp::decodeElements(
            op->getLoc(), cast<ElementsAttr>(c.getValueAttr()));
        if (failed(value))
          return failure();
        if (value->numel() != 1)
          return c.emitError() << "ConstantOfShape value must have one element";
        return simple("pp::rt::fill",
                      std::move(args().value(out[0]).lit(
                          floatLiteral(value->getDouble(0), true))));
      })
      .Case([&](onnx::ShapeOp s) -> LogicalResult {
        // Static shapes: the result is a constant.
        ArrayRef<int64_t> dims = shapeOf(s.getData());
        int64_t rank = dims.size();
        auto clampDim = [&](int64_t v) {
          return std::clamp<int64_t>(v < 0 ? v + rank : v, 0, rank);
        };
        int64_t start = clampDim(static_cast<int64_t>(s.getStart()));
        int64_t end =
            s.getEnd() ? clampDim(static_cast<int64_t>(*s.getEnd())) : rank;
        SmallVector<int64_t> values(dims.begin() + start,
                                    dims.begin() + std::max(start, end));
        auto type = RankedTensorType::get({static_cast<int64_t>(values.size())},
                                          b.getI64Type());
        return lowerConstant(
            op, DenseElementsAttr::get(type, ArrayRef<int64_t>(values)));
      })
      .Case([&](onnx::FlattenOp f) { return lowerCopy(op, f.getInput()); })
      .Case([&](onnx::ReshapeOp r) { return lowerCopy(op, r.getData()); })
      .Case([&](onnx::SqueezeOp s) { return lowerCopy(op, s.getData()); })
      .Case([&](onnx::UnsqueezeOp u) { return lowerCopy(op, u.getData()); })
      .Case([&](onnx::TransposeOp t) -> LogicalResult {
        int64_t rank = shapeOf(t.getData()).size();
        std::vector<int64_t> perm(rank);
        if (auto attr = t.getPerm(); attr && !attr->empty())
          perm.assign(attr->begin(), attr->end());
        else
          std::iota(perm.rbegin(), perm.rend(), 0);
        if (failed(withResults(out)))
          return failure();
        return simple("pp::rt::transpose",
                      std::move(args()
                                    .value(get(t.getData()))
                                    .lit(intVector(perm))
                                    .value(out[0])));
      })
      .Case([&](onnx::ExpandOp e) -> LogicalResult {
        if (failed(withResults(out)))
          return failure();
        return simple("pp::rt::expand",
                      std::move(args().value(get(e.getInput())).value(out[0])));
      })
      .Case([&](onnx::ConcatOp c) -> LogicalResult {
        auto axis =
            pp::interp::normalizeAxis(op, static_cast<int64_t>(c.getAxis()),
                                      shapeOf(c.getResult()).size());
        if (failed(axis) || failed(withResults(out)))
          return failure();
        CallArgs list = args();
        for (Value v : c.getInputs())
          list.value(get(v));
        Value inputs = call("pp::rt::gen::pointers", list,
                            emitc::OpaqueType::get(
                                context, "std::vector<const pp::rt::Tensor*>"));
        return simple(
            "pp::rt::concat",
            std::move(args().value(inputs).integer(*axis).value(out[0])));
      })
      .Case([&](onnx::SplitOp s) -> LogicalResult {
        ArrayRef<int64_t> x = shapeOf(s.getInput());
        auto axis = pp::interp::normalizeAxis(
            op, static_cast<int64_t>(s.getAxis()), x.size());
        if (failed(axis) || failed(withResults(out)))
          return failure();
        // Result types carry the sizes (the importer checked them).
        CallArgs list = args();
        for (Value v : out)
          list.value(v);
        Value outputs = call(
            "pp::rt::gen::mutablePointers", list,
            emitc::OpaqueType::get(context, "std::vector<pp::rt::Tensor*>"));
        return simple(
            "pp::rt::split",
            std::move(
                args().value(get(s.getInput())).integer(*axis).value(outputs)));
      })
      .Case([&](onnx::SliceOp s) -> LogicalResult {
        ArrayRef<int64_t> x = shapeOf(s.getData());
        auto starts = constantInts(op, s.getStarts());
        auto ends = constantInts(op, s.getEnds());
        if (failed(starts) || failed(ends))
          return failure();
        std::vector<int64_t> axes, steps;
        if (Value v = s.getAxes()) {
          auto values = constantInts(op, v);
          if (failed(values))
            return failure();
          axes = *values;
        } else {
          axes.resize(starts->size());
          std::iota(axes.begin(), axes.end(), 0);
        }
        if (Value v = s.getSteps()) {
          auto values = constantInts(op, v);
          if (failed(values))
            return failure();
          steps = *values;
        } else {
          steps.assign(starts->size(), 1);
        }
        std::vector<int64_t> first, step, shape;
        if (failed(pp::interp::sliceParams(op, x, *starts, *ends, axes, steps,
                                           first, step, shape)))
          return failure();
        if (ArrayRef<int64_t>(shape) != shapeOf(s.getResult()))
          return s.emitError() << "Slice parameters do not give the result "
                                  "type's shape";
        if (failed(withResults(out)))
          return failure();
        return simple("pp::rt::slice", std::move(args()
                                                     .value(get(s.getData()))
                                                     .lit(intVector(first))
                                                     .lit(intVector(step))
                                                     .value(out[0])));
      })
      .Case([&](onnx::GatherOp g) -> LogicalResult {
        auto axis = pp::interp::normalizeAxis(
            op, static_cast<int64_t>(g.getAxis()), shapeOf(g.getData()).size());
        if (failed(axis) || failed(withResults(out)))
          return failure();
        return simple("pp::rt::gather",
                      std::move(args()
                                    .value(get(g.getData()))
                                    .value(get(g.getIndices()))
                                    .integer(*axis)
                                    .value(out[0])));
      })
      // The train dialect.
      .Case([&](train::GlobalWriteOp w) { return lowerGlobalWrite(w); })
      .Case([&](train::SGDOp s) { return lowerSGD(s); })
      .Case([&](train::AdamOp a) { return lowerAdam(a); })
      .Case([&](train::UnaryGradOp g) -> LogicalResult {
        static const llvm::StringMap<rt::UnaryKind> kinds = {
            {"Relu", U::Relu},         {"LeakyRelu", U::LeakyRelu},
            {"Sigmoid", U::Sigmoid},   {"Tanh", U::Tanh},
            {"Erf", U::Erf},           {"GeluErf", U::GeluErf},
            {"GeluTanh", U::GeluTanh}, {"Sqrt", U::Sqrt},
            {"Exp", U::Exp},           {"Log", U::Log},
            {"Abs", U::Abs},           {"Reciprocal", U::Reciprocal}};
        auto kind = kinds.find(g.getKind());
        if (kind == kinds.end())
          return g.emitError() << "unknown unary kind '" << g.getKind() << "'";
        if (failed(withResults(out)))
          return failure();
        return simple(
            "pp::rt::unaryGrad",
            std::move(args()
                          .lit(llvm::formatv("pp::rt::UnaryKind({0})",
                                             static_cast<int>(kind->second))
                                   .str())
                          .value(get(op->getOperand(0)))
                          .value(get(op->getOperand(1)))
                          .value(get(op->getOperand(2)))
                          .value(out[0])
                          .f32(g.getAlpha().convertToDouble())));
      })
      .Case([&](train::ReduceSumToOp) -> LogicalResult {
        if (failed(withResults(out)))
          return failure();
        return simple(
            "pp::rt::reduceSumTo",
            std::move(args().value(get(op->getOperand(0))).value(out[0])));
      })
      .Case([&](train::SoftmaxGradOp g) -> LogicalResult {
        int64_t rank = shapeOf(op->getOperand(0)).size();
        int64_t axis = static_cast<int64_t>(g.getAxis());
        axis = axis < 0 ? axis + rank : axis;
        if (failed(withResults(out)))
          return failure();
        return simple("pp::rt::softmaxGrad",
                      std::move(args()
                                    .value(get(op->getOperand(0)))
                                    .value(get(op->getOperand(1)))
                                    .integer(axis)
                                    .flag(g.getLog())
                                    .value(out[0])));
      })
      .Case([&](train::LayerNormGradOp g) -> LogicalResult {
        int64_t rank = shapeOf(op->getOperand(1)).size();
        int64_t axis = static_cast<int64_t>(g.getAxis());
        axis = axis < 0 ? axis + rank : axis;
        if (failed(withResults(out)))
          return failure();
        Value dbias = mutablePointer(out[2]);
        return simple("pp::rt::layerNormGrad",
                      std::move(args()
                                    .value(get(op->getOperand(0)))
                                    .value(get(op->getOperand(1)))
                                    .value(get(op->getOperand(2)))
                                    .value(get(op->getOperand(3)))
                                    .value(get(op->getOperand(4)))
                                    .integer(axis)
                                    .value(out[0])
                                    .value(out[1])
                                    .value(dbias)));
      })
      .Case([&](train::BatchNormGradOp g) -> LogicalResult {
        Value x = op->getOperand(1);
        ArrayRef<int64_t> shape = shapeOf(x);
        if (shape.size() < 2)
          return g.emitError() << "batch_norm_grad needs an input of rank >= 2";
        auto dtype = dtypeOf(op, x.getType());
        if (failed(dtype) || failed(withResults(out)))
          return failure();
        Value mean = scratch(*dtype, {shape[1]}, 0);
        Value invStd = scratch(*dtype, {shape[1]}, 1);
        kernel(op, "pp::rt::batchNormStatistics",
               args()
                   .value(get(x))
                   .lit(floatLiteral(g.getEpsilon().convertToDouble(), true))
                   .value(mean)
                   .value(invStd));
        return simple("pp::rt::batchNormGrad",
                      std::move(args()
                                    .value(get(op->getOperand(0)))
                                    .value(get(x))
                                    .value(get(op->getOperand(2)))
                                    .value(mean)
                                    .value(invStd)
                                    .value(out[0])
                                    .value(out[1])
                                    .value(out[2])));
      })
      .Case<train::ConvGradInputOp, train::ConvGradWeightOp>(
          [&](Operation *) -> LogicalResult {
            rt::WindowParams params;
            auto ints = [&](StringRef name) {
              std::vector<int64_t> v;
              if (auto attr = op->getAttrOfType<DenseI64ArrayAttr>(name))
                v.assign(attr.asArrayRef().begin(), attr.asArrayRef().end());
              return v;
            };
            params.kernel = ints("kernel_shape");
            params.strides = ints("strides");
            params.pads = ints("pads");
            params.dilations = ints("dilations");
            if (auto group = op->getAttrOfType<IntegerAttr>("group"))
              params.group = group.getInt();
            if (failed(withResults(out)))
              return failure();
            return simple(isa<train::ConvGradInputOp>(op)
                              ? "pp::rt::convGradInput"
                              : "pp::rt::convGradWeight",
                          std::move(args()
                                        .value(get(op->getOperand(0)))
                                        .value(get(op->getOperand(1)))
                                        .lit(windowLiteral(params))
                                        .value(out[0])));
          })
      .Case([&](train::MaxPoolGradOp) -> LogicalResult {
        if (failed(withResults(out)))
          return failure();
        return simple("pp::rt::maxPoolGrad",
                      std::move(args()
                                    .value(get(op->getOperand(0)))
                                    .value(get(op->getOperand(1)))
                                    .value(out[0])));
      })
      .Case([&](train::AvgPoolGradOp g) -> LogicalResult {
        rt::WindowParams params;
        params.kernel.assign(g.getKernelShape().begin(),
                             g.getKernelShape().end());
        params.strides.assign(g.getStrides().begin(), g.getStrides().end());
        params.pads.assign(g.getPads().begin(), g.getPads().end());
        params.dilations.assign(params.kernel.size(), 1);
        if (failed(withResults(out)))
          return failure();
        return simple("pp::rt::avgPoolGrad",
                      std::move(args()
                                    .value(get(op->getOperand(0)))
                                    .lit(windowLiteral(params))
                                    .flag(g.getCountIncludePad() != 0)
                                    .value(out[0])));
      })
      .Case([&](train::SliceGradOp g) -> LogicalResult {
        if (failed(withResults(out)))
          return failure();
        return simple("pp::rt::sliceGrad",
                      std::move(args()
                                    .value(get(op->getOperand(0)))
                                    .lit(intVector(g.getStarts()))
                                    .lit(intVector(g.getSteps()))
                                    .value(out[0])));
      })
      .Case([&](train::GatherGradOp g) -> LogicalResult {
        int64_t rank = shapeOf(g.getDdata()).size();
        int64_t axis = static_cast<int64_t>(g.getAxis());
        axis = axis < 0 ? axis + rank : axis;
        if (failed(withResults(out)))
          return failure();
        return simple("pp::rt::gatherGrad",
                      std::move(args()
                                    .value(get(op->getOperand(0)))
                                    .value(get(op->getOperand(1)))
                                    .integer(axis)
                                    .value(out[0])));
      })
      .Case([&](train::DropoutGradOp g) -> LogicalResult {
        if (failed(withResults(out)))
          return failure();
        return simple("pp::rt::dropoutGrad",
                      std::move(args()
                                    .value(get(op->getOperand(0)))
                                    .value(get(op->getOperand(1)))
                                    .f32(g.getRatio().convertToDouble())
                                    .value(out[0])));
      })
      .Case([&](train::SoftmaxCrossEntropyGradOp g) -> LogicalResult {
        if (failed(withResults(out)))
          return failure();
        std::optional<uint64_t> ignore = g.getIgnoreIndex();
        CallArgs a = args();
        a.value(get(g.getDloss()))
            .value(get(g.getLogProb()))
            .value(get(g.getLabels()));
        optionalPointer(a, g.getWeights());
        a.flag(ignore.has_value())
            .integer(ignore ? static_cast<int64_t>(*ignore) : 0)
            .lit(quote(g.getReduction()))
            .value(out[0]);
        return simple("pp::rt::softmaxCrossEntropyGrad", std::move(a));
      })
      .Default([&](Operation *) {
        return op->emitError()
               << "code generation does not support this op yet";
      });
}

} // namespace

//===----------------------------------------------------------------------===//
// The program: functions, table and main
//===----------------------------------------------------------------------===//

namespace {

std::string shapeText(ArrayRef<int64_t> shape) { return intList(shape); }

/// The ProgramInfo table and main(), as C++ text.
std::string programTable(ModuleOp module, pipeline::ScheduleOp schedule,
                         const ProgramData &data,
                         ArrayRef<func::FuncOp> functions,
                         const pp::EmitProgramOptions &options,
                         ArrayRef<pp::ProgramInput> inputs,
                         ArrayRef<pp::ProgramOutput> outputs) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "\nstatic pp::rt::ProgramInfo makeProgram() {\n"
     << "  pp::rt::ProgramInfo p;\n";
  auto name = module->getAttrOfType<StringAttr>("onnx.graph_name");
  os << "  p.modelName = " << quote(name ? name.getValue() : "model") << ";\n";
  pipeline::PlanAttr plan = schedule.getPlan();
  os << "  p.scheduleKind = " << pp::kinds::enumeratorName(plan.getSchedule())
     << ";\n";
  os << "  p.numStages = " << plan.getNumStages() << ";\n";
  os << "  p.microBatches = " << plan.getMicroBatches() << ";\n";
  os << "  p.dataFile = " << quote(options.dataFileName) << ";\n";
  os << "  p.onnxFile = " << quote(options.onnxFileName) << ";\n";
  SmallVector<pipeline::DeviceOp> devices(
      schedule.getBody().front().getOps<pipeline::DeviceOp>());
  auto peaks = pipeline::getPlannedPeakBytes(module);
  for (auto [d, device] : llvm::enumerate(devices)) {
    os << "  p.deviceNames.push_back(" << quote(device.getName()) << ");\n";
    os << "  p.plannedPeakBytes.push_back("
       << (peaks && static_cast<int64_t>(d) < peaks.size() ? peaks[d] : 0)
       << ");\n";
  }
  for (const GlobalEntry &g : data.globals)
    os << "  p.globals.push_back({" << quote(g.name) << ", "
       << dtypeLiteral(g.dtype) << ", " << shapeText(g.shape) << ", "
       << (g.trainable ? "true" : "false") << ", " << g.dataOffset << ", "
       << g.ownerStage << "});\n";
  for (const ConstantEntry &c : data.constants)
    os << "  p.constants.push_back({" << dtypeLiteral(c.dtype) << ", "
       << shapeText(c.shape) << ", " << c.dataOffset << "});\n";
  for (const pp::ProgramInput &in : inputs)
    os << "  p.inputs.push_back({" << quote(in.name) << ", "
       << dtypeLiteral(in.dtype) << ", " << shapeText(in.shape) << ", "
       << in.randomBound << "});\n";
  for (const pp::ProgramOutput &out : outputs)
    os << "  p.outputs.push_back({" << quote(out.name) << ", "
       << quote(out.combine) << ", " << dtypeLiteral(out.dtype) << ", "
       << shapeText(out.shape) << "});\n";
  llvm::StringMap<int> functionIndex;
  for (size_t i = 0; i < functions.size(); ++i) {
    func::FuncOp f = functions[i];
    functionIndex[f.getSymName()] = i;
    int64_t arena = data.arenaBytes.lookup(f.getSymName());
    os << "  p.functions.push_back({" << quote(f.getSymName()) << ", &"
       << f.getSymName() << ", " << *pipeline::getStage(f) << ", "
       << pp::kinds::enumeratorName(
              pipeline::getPhase(f).value_or(pp::kinds::Phase::None))
       << ", " << arena << "});\n";
  }
  int64_t stages = plan.getNumStages();
  os << "  p.stageGlobals.resize(" << stages << ");\n";
  for (int64_t s = 0; s < stages; ++s) {
    SmallVector<int> used;
    for (func::FuncOp f : functions) {
      if (pipeline::getStage(f) != s)
        continue;
      f.walk([&](Operation *op) {
        StringRef global;
        if (auto read = dyn_cast<onnx::GlobalReadOp>(op))
          global = read.getGlobal();
        else if (auto write = dyn_cast<train::GlobalWriteOp>(op))
          global = write.getGlobal();
        else
          return;
        int id = data.globalIds.lookup(global);
        if (!llvm::is_contained(used, id))
          used.push_back(id);
      });
    }
    llvm::sort(used);
    os << "  p.stageGlobals[" << s << "] = {";
    llvm::interleaveComma(used, os);
    os << "};\n";
  }
  os << "  p.schedule.resize(" << devices.size() << ");\n";
  for (auto [d, device] : llvm::enumerate(devices))
    for (auto action : device.getBody().front().getOps<pipeline::ActionOp>()) {
      int function = -1;
      if (auto callee = action.getCallee())
        function = functionIndex.lookup(*callee);
      os << "  p.schedule[" << d << "].push_back({"
         << pp::kinds::enumeratorName(action.getKindValue())
         << ", " << function << ", " << action.getStage() << ", "
         << action.getMicroBatchAttr().getInt() << "});\n";
    }
  os << "  return p;\n}\n\n"
     << "int main(int argc, char **argv) {\n"
     << "  static const pp::rt::ProgramInfo program = makeProgram();\n"
     << "  return pp::rt::trainMain(program, argc, argv);\n}\n";
  return text;
}

/// Exclusive upper bound for random integers of input `index`: the size of
/// the dim it indexes, as pp-interpret --random-inputs draws them.
int64_t randomBound(ModuleOp module, int64_t index) {
  int64_t bound = 0;
  module.walk([&](pipeline::InputOp input) {
    if (static_cast<int64_t>(input.getIndex()) != index)
      return;
    int64_t dim = pp::interp::indexBound(input.getValue());
    if (dim > 0)
      bound = bound ? std::min(bound, dim) : dim;
  });
  return bound ? bound : 10;
}

} // namespace

FailureOr<OwningOpRef<ModuleOp>>
pp::lowerPipelineToEmitC(ModuleOp module, const EmitProgramOptions &options,
                         std::string &dataBytes) {
  pipeline::ScheduleOp schedule =
      pipeline::lookupSchedule(module, "code generation");
  if (!schedule)
    return failure();
  MLIRContext *context = module.getContext();
  context->getOrLoadDialect<emitc::EmitCDialect>();

  ProgramData data;
  // Globals, in module order, with their initial values.
  for (auto global : module.getOps<onnx::GlobalOp>()) {
    auto dtype = dtypeOf(global, global.getType());
    if (failed(dtype))
      return failure();
    auto type = cast<RankedTensorType>(global.getType());
    pp::interp::Tensor value(*dtype, type.getShape());
    if (auto init = global.getInitialValueAttr()) {
      auto decoded = pp::interp::decodeElements(global.getLoc(), init);
      if (failed(decoded))
        return failure();
      value = std::move(*decoded);
    }
    GlobalEntry entry{global.getSymName().str(), *dtype,
                      SmallVector<int64_t>(type.getShape()),
                      global.getKind() == "trainable", data.append(value)};
    data.globalIds[entry.name] = data.globals.size();
    data.globals.push_back(entry);
  }

  // Stage functions, in module order.
  SmallVector<func::FuncOp> functions;
  for (auto f : module.getOps<func::FuncOp>())
    if (pipeline::getStage(f))
      functions.push_back(f);
  if (functions.empty())
    return module.emitError() << "code generation needs stage functions: run "
                                 "--pp-split-stages";
  // Owner stage of each global: the first writer, else the first reader.
  for (func::FuncOp f : functions) {
    int64_t s = *pipeline::getStage(f);
    f.walk([&](train::GlobalWriteOp w) {
      GlobalEntry &g = data.globals[data.globalIds.lookup(w.getGlobal())];
      if (g.ownerStage < 0)
        g.ownerStage = s;
    });
  }
  for (func::FuncOp f : functions) {
    int64_t s = *pipeline::getStage(f);
    f.walk([&](onnx::GlobalReadOp r) {
      auto it = data.globalIds.find(r.getGlobal());
      if (it != data.globalIds.end() && data.globals[it->second].ownerStage < 0)
        data.globals[it->second].ownerStage = s;
    });
  }
  for (GlobalEntry &g : data.globals)
    if (g.ownerStage < 0)
      g.ownerStage = 0;

  // Inputs and outputs of the step.
  std::vector<ProgramInput> inputs;
  std::vector<ProgramOutput> outputs;
  ArrayAttr inputNames = pipeline::getInputNames(module);
  ArrayAttr outputNames = pipeline::getOutputNames(module);
  if (!inputNames || !outputNames)
    return module.emitError() << "not a split module (no pp.input_names): run "
                                 "--pp-split-stages";
  int64_t microBatches = schedule.getPlan().getMicroBatches();
  inputs.resize(inputNames.size());
  for (auto [i, name] : llvm::enumerate(inputNames)) {
    inputs[i].name = cast<StringAttr>(name).str();
    inputs[i].randomBound = randomBound(module, i);
  }
  outputs.resize(outputNames.size());
  for (auto [i, name] : llvm::enumerate(outputNames))
    outputs[i].name = cast<StringAttr>(name).str();
  LogicalResult shapes = success();
  module.walk([&](Operation *op) {
    if (auto input = dyn_cast<pipeline::InputOp>(op)) {
      uint64_t index = input.getIndex();
      if (index >= inputs.size()) {
        shapes = input.emitError()
                 << "reads input " << index << " of " << inputs.size();
        return;
      }
      auto dtype = dtypeOf(op, input.getValue().getType());
      if (failed(dtype)) {
        shapes = failure();
        return;
      }
      SmallVector<int64_t> shape(shapeOf(input.getValue()));
      if (!shape.empty())
        shape[0] *= microBatches;
      inputs[index].dtype = *dtype;
      inputs[index].shape.assign(shape.begin(), shape.end());
    } else if (auto output = dyn_cast<pipeline::OutputOp>(op)) {
      uint64_t index = output.getIndex();
      if (index >= outputs.size()) {
        shapes = output.emitError()
                 << "writes output " << index << " of " << outputs.size();
        return;
      }
      auto dtype = dtypeOf(op, output.getValue().getType());
      if (failed(dtype)) {
        shapes = failure();
        return;
      }
      outputs[index].dtype = *dtype;
      outputs[index].combine = output.getCombine().str();
      ArrayRef<int64_t> shape = shapeOf(output.getValue());
      outputs[index].shape.assign(shape.begin(), shape.end());
    }
  });
  if (failed(shapes))
    return failure();

  // The EmitC module.
  OwningOpRef<ModuleOp> result = ModuleOp::create(module.getLoc());
  OpBuilder b(context);
  b.setInsertionPointToEnd(result->getBody());
  emitc::VerbatimOp::create(
      b, module.getLoc(),
      b.getStringAttr("// Generated by pipeline-opt: the stage functions of "
                      "a pipelined training step and its schedule."));
  emitc::IncludeOp::create(b, module.getLoc(), "pp/Runtime/Generated.h",
                           /*isStandardInclude=*/false);
  emitc::IncludeOp::create(b, module.getLoc(), "limits",
                           /*isStandardInclude=*/true);
  for (func::FuncOp f : functions) {
    StageLowering lowering(b, data, f, options.fuseElementwise);
    if (failed(lowering.lower()))
      return failure();
  }
  std::string table =
      programTable(module, schedule, data, functions, options, inputs, outputs);
  emitc::VerbatimOp::create(b, module.getLoc(), b.getStringAttr(table));
  dataBytes = std::move(data.bytes);
  return result;
}

LogicalResult pp::writeFileBytes(Operation *anchor, StringRef path,
                                 StringRef bytes) {
  std::error_code error;
  llvm::raw_fd_ostream os(path, error, llvm::sys::fs::OF_None);
  if (error)
    return anchor->emitError()
           << "cannot write '" << path << "': " << error.message();
  os << bytes;
  os.close();
  if (os.has_error())
    return anchor->emitError()
           << "cannot write '" << path << "': " << os.error().message();
  return success();
}
