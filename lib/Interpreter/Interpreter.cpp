//===- Interpreter.cpp - Reference interpreter on the CPU kernels -*- C++ -*-=//
//
// Tensor buffers, globals, the op dispatch loop and the func dialect's ops.
// The onnx dialect's handlers live in ONNXHandlers.cpp.
//
//===----------------------------------------------------------------------===//

#include "pp/Interpreter/Interpreter.h"
#include "FusedHandler.h"

#include "pp/Dialect/ONNX/IR/ONNXOps.h"
#include "pp/Dialect/ONNX/Utils/KernelParams.h"
#include "pp/Runtime/DropoutHash.h"
#include "pp/Support/InputLimits.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/CheckedArithmetic.h"
#include "llvm/Support/FormatVariadic.h"

#include <chrono>
#include <unordered_map>

using namespace mlir;
using namespace pp::interp;
namespace rt = pp::rt;

//===----------------------------------------------------------------------===//
// Tensor limits and descriptions
//===----------------------------------------------------------------------===//

std::optional<std::string>
pp::interp::checkAllocation(rt::DType dtype, ArrayRef<int64_t> shape) {
  std::optional<int64_t> bytes = rt::dtypeSize(dtype);
  for (int64_t d : shape)
    if (bytes)
      bytes = d < 0 ? std::nullopt : llvm::checkedMul(*bytes, d);
  if (bytes && *bytes <= pp::limits::kMaxInterpreterTensorBytes)
    return std::nullopt;
  return "a tensor of " +
         (bytes ? std::to_string(*bytes) + " bytes" : "more than 2^63 bytes") +
         " exceeds the interpreter's limit of " +
         std::to_string(pp::limits::kMaxInterpreterTensorBytes) + " bytes";
}

std::string pp::interp::describe(const Tensor &tensor) {
  std::string s = "tensor<";
  for (int64_t d : tensor.shape())
    s += std::to_string(d) + "x";
  return s + rt::dtypeName(tensor.dtype()) + ">";
}

//===----------------------------------------------------------------------===//
// Interpreter
//===----------------------------------------------------------------------===//

namespace {
struct ValueHash {
  size_t operator()(Value value) const { return hash_value(value); }
};
} // namespace

/// The live values of one function invocation and, once it returned, its
/// results. Node-based, so the reference `lookup` returns stays valid while
/// a handler defines its results (a DenseMap would move it on growth).
struct Interpreter::Frame {
  std::unordered_map<Value, Tensor, ValueHash> values;
  std::vector<Tensor> results;
  bool returned = false;
};

static void registerFuncHandlers(Interpreter &interp) {
  interp.registerHandler(
      func::CallOp::getOperationName(),
      [](Interpreter &in, Operation *op) -> LogicalResult {
        auto call = cast<func::CallOp>(op);
        std::vector<Tensor> inputs;
        for (Value operand : call.getOperands())
          inputs.push_back(in.lookup(operand));
        auto outputs = in.call(op, call.getCallee(), inputs);
        if (failed(outputs))
          return failure();
        if (outputs->size() != op->getNumResults())
          return op->emitError() << "callee returned " << outputs->size()
                                 << " values, expected " << op->getNumResults();
        for (auto [result, tensor] : llvm::zip(op->getResults(), *outputs))
          if (failed(in.setResult(op, result, std::move(tensor))))
            return failure();
        return success();
      });
}

Interpreter::Interpreter(ModuleOp module, InterpreterOptions options)
    : module_(module), options_(options) {
  kernelContext_.numThreads = std::max(1, options.numThreads);
  registerFuncHandlers(*this);
  registerONNXHandlers(*this);
  registerFusedHandlers(*this,
                        [this](Block &b) { return runBlock(b, *frame_); });
}

Interpreter::~Interpreter() = default;

LogicalResult Interpreter::initialize() {
  if (initialized_)
    return success();
  for (auto global : module_.getOps<pp::onnx::GlobalOp>()) {
    auto type = cast<RankedTensorType>(global.getType());
    Tensor value;
    if (auto init = global.getInitialValueAttr()) {
      auto decoded = pp::onnx::decodeElements(global.getLoc(), init);
      if (failed(decoded))
        return failure();
      value = std::move(*decoded);
    } else {
      std::optional<rt::DType> dtype =
          pp::onnx::getDType(type.getElementType());
      if (!dtype)
        return global.emitError()
               << "the interpreter does not support globals of type " << type;
      value = Tensor(*dtype, type.getShape());
    }
    globalNames_.push_back(global.getSymName().str());
    globals_[global.getSymName()] = std::move(value);
  }
  initialized_ = true;
  return success();
}

const Tensor *Interpreter::getGlobal(StringRef name) const {
  auto it = globals_.find(name);
  return it == globals_.end() ? nullptr : &it->second;
}

Tensor *Interpreter::getGlobalForUpdate(StringRef name) {
  auto it = globals_.find(name);
  if (it == globals_.end())
    return nullptr;
  it->second.detach();
  return &it->second;
}

LogicalResult Interpreter::setGlobal(StringRef name, Tensor value,
                                     std::string *error) {
  auto fail = [&](const std::string &message) {
    if (error)
      *error = message;
    return failure();
  };
  auto it = globals_.find(name);
  if (it == globals_.end())
    return fail("no global named '" + name.str() + "'");
  if (value.dtype() != it->second.dtype() ||
      value.shape() != it->second.shape())
    return fail("global '" + name.str() + "' is " + describe(it->second) +
                ", got " + describe(value));
  it->second = std::move(value);
  return success();
}

void Interpreter::registerHandler(StringRef opName, OpHandler handler) {
  handlers_[opName] = std::move(handler);
  handlerCache_.clear();
}

bool Interpreter::hasHandler(StringRef opName) const {
  return handlers_.count(opName);
}

void Interpreter::setRandomPosition(int64_t step, int64_t microBatch) {
  randomStep_ = std::max<int64_t>(step, 0);
  randomMicroBatch_ = std::max<int64_t>(microBatch, 0);
}

uint64_t Interpreter::dropoutSeed(uint64_t stream) const {
  // The runtime's StageState::dropoutSeed computes the same.
  return rt::dropouthash::streamSeed(options_.seed, stream,
                                     static_cast<uint64_t>(randomStep_));
}

const Tensor &Interpreter::lookup(Value value) const {
  assert(frame_ && "lookup outside of a function");
  auto it = frame_->values.find(value);
  assert(it != frame_->values.end() && "value used before its definition");
  if (it == frame_->values.end()) {
    // Unreachable for valid IR; an unbacked tensor makes kernels fail cleanly.
    static const Tensor undefined;
    return undefined;
  }
  return it->second;
}

/// The dtype and shape a value of `type` must have, or failure.
static LogicalResult expectedLayout(Type type, rt::DType &dtype,
                                    ArrayRef<int64_t> &shape) {
  auto ranked = dyn_cast<RankedTensorType>(type);
  if (!ranked || !ranked.hasStaticShape())
    return failure();
  std::optional<rt::DType> d = pp::onnx::getDType(ranked.getElementType());
  if (!d)
    return failure();
  dtype = *d;
  shape = ranked.getShape();
  return success();
}

LogicalResult Interpreter::setResult(Operation *op, Value value,
                                     Tensor tensor) {
  rt::DType dtype;
  ArrayRef<int64_t> shape;
  if (failed(expectedLayout(value.getType(), dtype, shape)))
    return op->emitError() << "the interpreter does not support values of "
                              "type "
                           << value.getType();
  if (tensor.dtype() != dtype || tensor.shape() != shape)
    return op->emitError() << "computed " << describe(tensor) << " for a "
                           << value.getType();
  frame_->values[value] = std::move(tensor);
  return success();
}

FailureOr<Tensor> Interpreter::allocate(Operation *op, Type type) {
  rt::DType dtype;
  ArrayRef<int64_t> shape;
  if (failed(expectedLayout(type, dtype, shape)))
    return op->emitError() << "the interpreter does not support values of "
                              "type "
                           << type;
  if (std::optional<std::string> error = checkAllocation(dtype, shape))
    return op->emitError() << "cannot allocate " << type << ": " << *error;
  return Tensor(dtype, shape);
}

FailureOr<Tensor> Interpreter::allocResult(Operation *op, Value result) {
  auto tensor = allocate(op, result.getType());
  if (failed(tensor))
    return failure();
  frame_->values[result] = *tensor;
  return tensor;
}

LogicalResult Interpreter::check(Operation *op, const rt::Status &status,
                                 StringRef kernel) {
  if (status.ok())
    return success();
  return op->emitError() << "kernel '" << kernel
                         << "' failed: " << status.message;
}

FailureOr<const Tensor *> Interpreter::getConstant(Operation *op,
                                                   Attribute value) {
  auto it = constants_.find(value);
  if (it != constants_.end())
    return &it->second;
  auto elements = dyn_cast<ElementsAttr>(value);
  if (!elements)
    return op->emitError() << "expected an elements attribute, got " << value;
  auto decoded = pp::onnx::decodeElements(op->getLoc(), elements);
  if (failed(decoded))
    return failure();
  return &constants_.try_emplace(value, std::move(*decoded)).first->second;
}

LogicalResult Interpreter::execute(Operation *op) {
  const OpHandler *handler = nullptr;
  auto cached = handlerCache_.find(op->getName());
  if (cached != handlerCache_.end()) {
    handler = cached->second;
  } else {
    auto it = handlers_.find(op->getName().getStringRef());
    handler = it == handlers_.end() ? nullptr : &it->second;
    handlerCache_[op->getName()] = handler;
  }
  if (!handler)
    return op->emitError() << "the interpreter has no handler for '"
                           << op->getName() << "'";
  if (!options_.profile)
    return (*handler)(*this, op);
  auto start = std::chrono::steady_clock::now();
  LogicalResult result = (*handler)(*this, op);
  double ms = std::chrono::duration<double, std::milli>(
                  std::chrono::steady_clock::now() - start)
                  .count();
  OpProfile &entry = profile_[op->getName().getStringRef()];
  ++entry.calls;
  entry.milliseconds += ms;
  // The node: a forward op's name, or the forward op's name inside a
  // backward op's fused<"backward"> location.
  Location loc = op->getLoc();
  bool backward = false;
  if (auto fused = dyn_cast<FusedLoc>(loc)) {
    auto tag = dyn_cast_or_null<StringAttr>(fused.getMetadata());
    if (!tag || tag.getValue() != "backward" ||
        fused.getLocations().size() != 1)
      return result;
    loc = fused.getLocations().front();
    backward = true;
  }
  if (auto name = dyn_cast<NameLoc>(loc)) {
    auto [it, inserted] =
        nodeIndex_.try_emplace(name.getName(), nodeProfile_.size());
    if (inserted)
      nodeProfile_.push_back({name.getName().str()});
    NodeProfile &node = nodeProfile_[it->second];
    (backward ? node.backwardMs : node.forwardMs) += ms;
  }
  return result;
}

std::vector<NodeProfile> Interpreter::getNodeProfile() const {
  return nodeProfile_;
}

void Interpreter::clearProfile() {
  profile_.clear();
  nodeProfile_.clear();
  nodeIndex_.clear();
}

std::vector<OpProfile> Interpreter::getProfile() const {
  std::vector<OpProfile> result;
  for (const auto &entry : profile_) {
    result.push_back(entry.second);
    result.back().opName = entry.first().str();
  }
  llvm::sort(result, [](const OpProfile &a, const OpProfile &b) {
    return a.milliseconds > b.milliseconds;
  });
  return result;
}

LogicalResult Interpreter::runBlock(Block &block, Frame &frame) {
  // Last user of every value in this block, so buffers die early (training
  // graphs keep many activations alive otherwise).
  llvm::DenseMap<Value, Operation *> lastUse;
  for (Operation &op : block)
    op.walk([&](Operation *nested) {
      for (Value operand : nested->getOperands())
        lastUse[operand] = &op;
    });

  for (Operation &op : block) {
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      for (Value operand : ret.getOperands())
        frame.results.push_back(lookup(operand));
      frame.returned = true;
      return success();
    }
    if (failed(execute(&op)))
      return failure();
    for (Value result : op.getResults())
      if (!frame.values.count(result))
        return op.emitError() << "the interpreter's handler did not define "
                                 "result #"
                              << cast<OpResult>(result).getResultNumber();
    for (Value operand : op.getOperands())
      if (lastUse.lookup(operand) == &op)
        frame.values.erase(operand);
    for (Value result : op.getResults())
      if (result.use_empty())
        frame.values.erase(result);
  }
  return success();
}

FailureOr<std::vector<Tensor>> Interpreter::call(Operation *caller,
                                                 StringRef funcName,
                                                 ArrayRef<Tensor> inputs) {
  Location loc = caller ? caller->getLoc() : module_.getLoc();
  // Deep recursion would overflow the native stack.
  constexpr int kMaxCallDepth = 256;
  if (callDepth_ >= kMaxCallDepth)
    return emitError(loc) << "call depth exceeds " << kMaxCallDepth, failure();
  auto func = SymbolTable::lookupSymbolIn(module_, funcName);
  auto funcOp = dyn_cast_or_null<func::FuncOp>(func);
  if (!funcOp || funcOp.isExternal())
    return emitError(loc) << "no function with a body named '" << funcName
                          << "'",
           failure();
  Block &entry = funcOp.getBody().front();
  if (!funcOp.getBody().hasOneBlock())
    return funcOp.emitError()
               << "the interpreter supports single-block functions only",
           failure();
  if (inputs.size() != entry.getNumArguments())
    return emitError(loc) << "'" << funcName << "' takes "
                          << entry.getNumArguments() << " inputs, got "
                          << inputs.size(),
           failure();

  Frame frame;
  for (auto [i, arg, input] : llvm::enumerate(entry.getArguments(), inputs)) {
    rt::DType dtype;
    ArrayRef<int64_t> shape;
    if (failed(expectedLayout(arg.getType(), dtype, shape)))
      return emitError(loc) << "the interpreter does not support input #" << i
                            << " of type " << arg.getType(),
             failure();
    if (input.dtype() != dtype || input.shape() != shape || !input.hasStorage())
      return emitError(loc)
                 << "input #" << i << " of '" << funcName << "' must be "
                 << arg.getType() << ", got " << describe(input),
             failure();
    frame.values[arg] = input;
  }

  Frame *outer = frame_;
  frame_ = &frame;
  ++callDepth_;
  LogicalResult result = runBlock(entry, frame);
  --callDepth_;
  frame_ = outer;
  if (failed(result))
    return failure();
  if (!frame.returned)
    return funcOp.emitError() << "function body does not end in func.return",
           failure();
  return std::move(frame.results);
}

FailureOr<std::vector<Tensor>> Interpreter::run(StringRef funcName,
                                                ArrayRef<Tensor> inputs) {
  if (failed(initialize()))
    return failure();
  return call(nullptr, funcName, inputs);
}

std::vector<OpProfile>
pp::interp::mergeProfiles(ArrayRef<std::vector<OpProfile>> profiles) {
  llvm::StringMap<OpProfile> merged;
  for (const std::vector<OpProfile> &profile : profiles)
    for (const OpProfile &entry : profile) {
      OpProfile &total = merged[entry.opName];
      total.opName = entry.opName;
      total.calls += entry.calls;
      total.milliseconds += entry.milliseconds;
    }
  std::vector<OpProfile> result;
  for (auto &entry : merged)
    result.push_back(entry.second);
  llvm::sort(result, [](const OpProfile &a, const OpProfile &b) {
    return a.milliseconds > b.milliseconds;
  });
  return result;
}
