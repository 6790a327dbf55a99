//===- Interpreter.cpp - Reference interpreter on the CPU kernels -*- C++ -*-=//
//
// Tensor buffers, globals, the op dispatch loop and the func dialect's ops.
// The onnx dialect's handlers live in ONNXHandlers.cpp.
//
//===----------------------------------------------------------------------===//

#include "pp/Interpreter/Interpreter.h"
#include "FusedHandler.h"

#include "pp/Dialect/ONNX/IR/ONNXOps.h"
#include "pp/Runtime/Half.h"
#include "pp/Support/InputLimits.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/CheckedArithmetic.h"
#include "llvm/Support/FormatVariadic.h"

#include <chrono>
#include <cstring>
#include <unordered_map>

using namespace mlir;
using namespace pp::interp;
namespace rt = pp::rt;

//===----------------------------------------------------------------------===//
// Tensor
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

Tensor::Tensor(rt::DType dtype, ArrayRef<int64_t> shape) {
  view_.dtype = dtype;
  view_.shape.assign(shape.begin(), shape.end());
  // Whole 8-byte words keep every dtype aligned; zero-filled by `()`.
  size_t words = (static_cast<size_t>(view_.bytes()) + 7) / 8;
  storage_ =
      std::shared_ptr<uint64_t[]>(new uint64_t[std::max<size_t>(words, 1)]());
  view_.data = storage_.get();
}

Tensor Tensor::fromBytes(rt::DType dtype, ArrayRef<int64_t> shape,
                         const void *bytes) {
  Tensor t(dtype, shape);
  if (t.bytes() > 0)
    std::memcpy(t.data(), bytes, t.bytes());
  return t;
}

Tensor Tensor::clone() const {
  if (!storage_)
    return *this;
  return fromBytes(dtype(), shape(), data());
}

Tensor Tensor::reshaped(ArrayRef<int64_t> shape) const {
  Tensor t = *this;
  t.view_.shape.assign(shape.begin(), shape.end());
  assert(t.numel() == numel() && "reshape changes the element count");
  return t;
}

void Tensor::detach() {
  if (isShared())
    *this = clone();
}

double Tensor::getDouble(int64_t i) const {
  switch (dtype()) {
  case rt::DType::F32:
    return as<float>()[i];
  case rt::DType::F64:
    return as<double>()[i];
  case rt::DType::F16:
    return rt::halfToFloat(as<uint16_t>()[i]);
  case rt::DType::BF16:
    return rt::bfloat16ToFloat(as<uint16_t>()[i]);
  case rt::DType::U64:
    return static_cast<double>(as<uint64_t>()[i]);
  default:
    return static_cast<double>(getInt(i));
  }
}

int64_t Tensor::getInt(int64_t i) const {
  switch (dtype()) {
  case rt::DType::F32:
    return static_cast<int64_t>(as<float>()[i]);
  case rt::DType::F64:
    return static_cast<int64_t>(as<double>()[i]);
  case rt::DType::I64:
    return as<int64_t>()[i];
  case rt::DType::I32:
    return as<int32_t>()[i];
  case rt::DType::I8:
    return as<int8_t>()[i];
  case rt::DType::U8:
    return as<uint8_t>()[i];
  case rt::DType::Bool:
    return as<uint8_t>()[i] != 0;
  case rt::DType::U32:
    return as<uint32_t>()[i];
  case rt::DType::U64:
    // Wraps beyond INT64_MAX.
    return static_cast<int64_t>(as<uint64_t>()[i]);
  case rt::DType::F16:
  case rt::DType::BF16:
    return static_cast<int64_t>(getDouble(i));
  }
  return 0;
}

std::vector<int64_t> Tensor::toInts() const {
  std::vector<int64_t> values;
  values.reserve(numel());
  for (int64_t i = 0, e = numel(); i < e; ++i)
    values.push_back(getInt(i));
  return values;
}

std::optional<rt::DType> pp::interp::getDType(Type elementType) {
  if (elementType.isF32())
    return rt::DType::F32;
  if (elementType.isF64())
    return rt::DType::F64;
  if (elementType.isF16())
    return rt::DType::F16;
  if (elementType.isBF16())
    return rt::DType::BF16;
  auto integer = dyn_cast<IntegerType>(elementType);
  if (!integer)
    return std::nullopt;
  switch (integer.getWidth()) {
  case 1:
    return rt::DType::Bool;
  case 8:
    return integer.isUnsigned() ? rt::DType::U8 : rt::DType::I8;
  case 32:
    return integer.isUnsigned() ? rt::DType::U32 : rt::DType::I32;
  case 64:
    return integer.isUnsigned() ? rt::DType::U64 : rt::DType::I64;
  default:
    return std::nullopt;
  }
}

std::string pp::interp::describe(const Tensor &tensor) {
  std::string s = "tensor<";
  for (int64_t d : tensor.shape())
    s += std::to_string(d) + "x";
  return s + rt::dtypeName(tensor.dtype()) + ">";
}

FailureOr<Tensor> pp::interp::decodeElements(Location loc, ElementsAttr value) {
  auto type = cast<ShapedType>(value.getType());
  std::optional<rt::DType> dtype = getDType(type.getElementType());
  if (!dtype || !type.hasStaticShape())
    return emitError(loc) << "the interpreter does not support constants of "
                             "type "
                          << type,
           failure();
  Tensor tensor(*dtype, type.getShape());
  size_t bytes = tensor.bytes();
  auto *out = static_cast<char *>(tensor.data());

  if (auto dense = dyn_cast<DenseElementsAttr>(value)) {
    // Bools are bit-packed in MLIR's storage: go through the element values.
    if (*dtype == rt::DType::Bool) {
      int64_t i = 0;
      for (bool b : dense.getValues<bool>())
        out[i++] = b;
      return tensor;
    }
    ArrayRef<char> raw = dense.getRawData();
    size_t width = rt::dtypeSize(*dtype);
    if (dense.isSplat()) {
      if (raw.size() < width)
        return emitError(loc) << "malformed splat constant", failure();
      for (size_t offset = 0; offset < bytes; offset += width)
        std::memcpy(out + offset, raw.data(), width);
      return tensor;
    }
    if (raw.size() != bytes)
      return emitError(loc) << "constant holds " << raw.size()
                            << " bytes, expected " << bytes << " for " << type,
             failure();
    std::memcpy(out, raw.data(), bytes);
    return tensor;
  }

  if (auto resource = dyn_cast<DenseResourceElementsAttr>(value)) {
    const AsmResourceBlob *blob = resource.getRawHandle().getBlob();
    if (!blob)
      return emitError(loc)
                 << "the data of resource '" << resource.getRawHandle().getKey()
                 << "' is not available (elided from the IR?)",
             failure();
    ArrayRef<char> data = blob->getData();
    if (data.size() != bytes)
      return emitError(loc) << "resource '" << resource.getRawHandle().getKey()
                            << "' holds " << data.size() << " bytes, expected "
                            << bytes << " for " << type,
             failure();
    std::memcpy(out, data.data(), bytes);
    if (*dtype == rt::DType::Bool)
      for (size_t i = 0; i < bytes; ++i)
        out[i] = out[i] != 0;
    return tensor;
  }
  return emitError(loc) << "the interpreter cannot read constant " << value,
         failure();
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
  setSeed(options.seed);
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
      auto decoded = decodeElements(global.getLoc(), init);
      if (failed(decoded))
        return failure();
      value = std::move(*decoded);
    } else {
      std::optional<rt::DType> dtype = getDType(type.getElementType());
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

void Interpreter::setSeed(uint64_t seed) {
  seed_ = seed;
  seedCounter_ = 0;
}

uint64_t Interpreter::nextSeed() {
  // splitmix64 of (seed, counter): successive ops get unrelated streams.
  uint64_t z = seed_ + 0x9e3779b97f4a7c15ULL * ++seedCounter_;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
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
  std::optional<rt::DType> d = getDType(ranked.getElementType());
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
  auto decoded = decodeElements(op->getLoc(), elements);
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
  OpProfile &entry = profile_[op->getName().getStringRef()];
  ++entry.calls;
  entry.milliseconds += std::chrono::duration<double, std::milli>(
                            std::chrono::steady_clock::now() - start)
                            .count();
  return result;
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
