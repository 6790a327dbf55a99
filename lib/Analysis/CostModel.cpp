//===- CostModel.cpp - Time and memory of ops on devices --------*- C++ -*-===//

#include "pp/Analysis/CostModel.h"
#include "pp/Dialect/ONNX/IR/ONNXOps.h"
#include "pp/Dialect/PP/IR/PPOps.h"
#include "pp/Dialect/Train/IR/TrainOps.h"
#include "pp/Support/InputLimits.h"
#include "llvm/Support/CheckedArithmetic.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/Support/JSON.h"

using namespace mlir;

namespace pp {

std::optional<int64_t> getCheckedTensorBytes(Type type) {
  auto shaped = dyn_cast<ShapedType>(type);
  if (!shaped || !shaped.hasStaticShape())
    return 0;
  int64_t bits = shaped.getElementType().isIntOrFloat()
                     ? shaped.getElementType().getIntOrFloatBitWidth()
                     : 64;
  std::optional<int64_t> bytes = std::max<int64_t>(1, bits / 8);
  for (int64_t d : shaped.getShape())
    if (bytes)
      bytes = llvm::checkedMul(*bytes, d);
  if (!bytes || *bytes > limits::kMaxTensorBytes)
    return std::nullopt;
  return bytes;
}

int64_t getTensorBytes(Type type) {
  std::optional<int64_t> bytes = getCheckedTensorBytes(type);
  assert(bytes && "tensor too large: run verifyPlannableSizes first");
  return bytes.value_or(limits::kMaxTensorBytes);
}

LogicalResult verifyPlannableSizes(Operation *root, StringRef pass) {
  auto check = [&](Operation *op, Type type) {
    if (getCheckedTensorBytes(type))
      return success();
    return op->emitError() << pass << ": a value of type " << type
                           << " has more than the limit of "
                           << limits::kMaxTensorBytes
                           << " bytes: too large to plan",
           failure();
  };
  // The sum of every value's bytes, so that the planners' sums of them
  // cannot overflow (pp/Support/InputLimits.h).
  int64_t total = 0;
  auto add = [&](Operation *op, Type type) {
    if (failed(check(op, type)))
      return failure();
    std::optional<int64_t> sum =
        llvm::checkedAdd(total, getCheckedTensorBytes(type).value_or(0));
    if (sum && *sum <= limits::kMaxPlannedBytes) {
      total = *sum;
      return success();
    }
    return op->emitError() << pass << ": the module's values and globals "
                           << "exceed " << limits::kMaxPlannedBytes
                           << " bytes in all: too large to plan",
           failure();
  };
  WalkResult result = root->walk([&](Operation *op) {
    for (Type type : op->getResultTypes())
      if (failed(add(op, type)))
        return WalkResult::interrupt();
    for (Region &region : op->getRegions())
      for (Block &block : region)
        for (BlockArgument arg : block.getArguments())
          if (failed(add(op, arg.getType())))
            return WalkResult::interrupt();
    if (auto global = dyn_cast<onnx::GlobalOp>(op))
      if (failed(add(op, global.getType())))
        return WalkResult::interrupt();
    return WalkResult::advance();
  });
  return failure(result.wasInterrupted());
}

std::string getOpName(Operation *op) {
  if (auto name = dyn_cast<NameLoc>(op->getLoc()))
    return name.getName().str();
  return "";
}

DenseSet<Value> findValuesSavedForBackward(Block &forward) {
  DenseSet<Value> saved;
  Operation *terminator = forward.getTerminator();
  SmallVector<Operation *> ops;
  for (Operation &op : forward.without_terminator())
    ops.push_back(&op);
  OpBuilder b(terminator);
  for (Operation *op : ops) {
    auto grad = dyn_cast<train::GradientOpInterface>(op);
    if (!grad)
      continue;
    // Stand-in adjoints for every float result; the rule reads the rest of
    // what it needs from the forward.
    SmallVector<Value> dys;
    SmallVector<Operation *> scratch;
    for (Value result : op->getResults()) {
      auto type = dyn_cast<RankedTensorType>(result.getType());
      if (!type || !isa<FloatType>(type.getElementType())) {
        dys.push_back(nullptr);
        continue;
      }
      auto zero = onnx::ConstantOp::create(
          b, op->getLoc(),
          DenseElementsAttr::get(type,
                                 b.getFloatAttr(type.getElementType(), 0.0)));
      dys.push_back(zero);
      scratch.push_back(zero);
    }
    // No float result (integer index arithmetic): no adjoint flows through
    // the op, so it saves nothing.
    if (scratch.empty())
      continue;
    Operation *firstNew = scratch.front();
    SmallVector<Value> dxs;
    // A rule that fails (e.g. inference-mode BatchNorm) saves nothing.
    (void)grad.buildGradient(b, dys, dxs);
    // Everything between the stand-ins and the terminator is scratch.
    DenseSet<Operation *> isScratch;
    for (Operation *it = firstNew; it != terminator; it = it->getNextNode())
      isScratch.insert(it);
    for (Operation *it : isScratch)
      for (Value operand : it->getOperands()) {
        Operation *def = operand.getDefiningOp();
        if (def && isScratch.contains(def))
          continue;
        if (def && isa<onnx::GlobalReadOp, onnx::ConstantOp>(def))
          continue;
        saved.insert(operand);
      }
    // Erase the scratch ops, users first.
    SmallVector<Operation *> toErase;
    for (Operation *it = firstNew; it != terminator; it = it->getNextNode())
      toErase.push_back(it);
    for (Operation *it : llvm::reverse(toErase)) {
      it->dropAllUses();
      it->erase();
    }
  }
  return saved;
}

CostModel::~CostModel() = default;

/// Trainable reads feed weights; their bytes belong to the op that uses them.
static int64_t parameterBytesOf(Operation *op,
                                SymbolTableCollection &symbolTables) {
  int64_t bytes = 0;
  for (Value operand : op->getOperands())
    if (auto read = operand.getDefiningOp<onnx::GlobalReadOp>()) {
      auto global = symbolTables.lookupNearestSymbolFrom<onnx::GlobalOp>(
          read, read.getGlobalAttr());
      if (global && global.getKind() == onnx::kTrainable)
        bytes += getTensorBytes(read.getType());
    }
  return bytes;
}

OpWork CostModel::getWork(Operation *op) const {
  OpWork work;
  if (auto cost = dyn_cast<onnx::CostOpInterface>(op))
    work.forwardFlops = static_cast<double>(cost.getForwardFlops());
  // A fused activation: one more operation per element, no more bytes (the
  // point of fusing it).
  if (pipeline::getActivation(op) != rt::UnaryKind::Identity)
    if (auto type = dyn_cast<RankedTensorType>(op->getResult(0).getType());
        type && type.hasStaticShape())
      work.forwardFlops += static_cast<double>(type.getNumElements());
  for (Value operand : op->getOperands())
    work.forwardBytes += getTensorBytes(operand.getType());
  for (Value result : op->getResults()) {
    work.forwardBytes += getTensorBytes(result.getType());
    bool floatResult = isa<FloatType>(getElementTypeOrSelf(result.getType()));
    if (haveSavedValues ? savedValues.contains(result) : floatResult)
      work.activationBytes += getTensorBytes(result.getType());
  }
  work.parameterBytes = parameterBytesOf(op, symbolTables);
  // Contractions compute an input and a weight gradient of the forward's
  // size each; other ops one adjoint of similar cost.
  auto facts = dyn_cast<onnx::KernelFactsOpInterface>(op);
  bool hasWeightGradient = facts && facts.isContraction();
  work.backwardFlops = work.forwardFlops * (hasWeightGradient ? 2.0 : 1.0);
  work.backwardBytes = work.forwardBytes * 2.0;
  return work;
}

/// Peak FLOP/s for the op's element type.
static double peakFor(Operation *op, const cluster::Device &device) {
  Type element = op->getNumResults()
                     ? getElementTypeOrSelf(op->getResult(0).getType())
                     : Type();
  if (element && (element.isF16() || element.isBF16()))
    return device.peakFlopsF16;
  if (element && element.isF64())
    return device.peakFlopsF64;
  return device.peakFlopsF32;
}

static double roofline(double flops, double bytes, double peak,
                       double bandwidth) {
  double compute = peak > 0 ? flops / peak : 0;
  double memory = bandwidth > 0 ? bytes / bandwidth : 0;
  return std::max(compute, memory);
}

double CostModel::getForwardTime(Operation *op,
                                 const cluster::Device &device) const {
  OpWork work = getWork(op);
  return roofline(work.forwardFlops, work.forwardBytes, peakFor(op, device),
                  device.memoryBandwidth);
}

double CostModel::getBackwardTime(Operation *op,
                                  const cluster::Device &device) const {
  OpWork work = getWork(op);
  return roofline(work.backwardFlops, work.backwardBytes, peakFor(op, device),
                  device.memoryBandwidth);
}

double CostModel::getUpdateTime(int64_t parameterBytes, double stateFactor,
                                const cluster::Device &device) const {
  double bytes =
      static_cast<double>(parameterBytes) * (3.0 + 2.0 * stateFactor);
  return roofline(0, bytes, device.peakFlopsF32, device.memoryBandwidth);
}

llvm::Expected<std::unique_ptr<ProfiledCostModel>>
ProfiledCostModel::fromJSON(StringRef text, StringRef fileName) {
  auto error = [&](const Twine &message) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   fileName + ": " + message);
  };
  llvm::Expected<llvm::json::Value> parsed = pp::limits::parseBoundedJSON(text);
  if (!parsed)
    return error("invalid JSON: " + llvm::toString(parsed.takeError()));
  const llvm::json::Object *kinds = parsed->getAsObject();
  if (!kinds)
    return error("expected an object of device kinds");
  auto model = std::make_unique<ProfiledCostModel>();
  for (const auto &[kind, opsValue] : *kinds) {
    const llvm::json::Object *ops = opsValue.getAsObject();
    if (!ops)
      return error(kind.str() + ": expected an object of ops");
    for (const auto &[opName, timesValue] : *ops) {
      const llvm::json::Object *fields = timesValue.getAsObject();
      std::string path = kind.str() + "." + opName.str();
      if (!fields)
        return error(path +
                     ": expected {\"forward_ms\": .., \"backward_ms\": ..}");
      Times times;
      for (auto [key, slot] :
           {std::pair<StringRef, double *>{"forward_ms", &times.forward},
            {"backward_ms", &times.backward}}) {
        if (const llvm::json::Value *v = fields->get(key)) {
          std::optional<double> ms = v->getAsNumber();
          // Bounded: the planners sum these over every op and micro-batch.
          if (!ms || !(*ms >= 0 && *ms <= pp::limits::kMaxMeasuredMs))
            return error(
                path + "." + key + ": expected a number >= 0 and <= " +
                llvm::formatv("{0}",
                              llvm::format("%g", pp::limits::kMaxMeasuredMs)) +
                " (ms)" +
                (ms ? llvm::formatv(", got {0}", llvm::format("%g", *ms)).str()
                    : ""));
          *slot = *ms / 1e3;
        }
      }
      if (times.forward < 0 && times.backward < 0)
        return error(path + ": needs forward_ms or backward_ms");
      if (const llvm::json::Value *v = fields->get("parameter_bytes_per_ms")) {
        std::optional<double> rate = v->getAsNumber();
        if (!rate || !(*rate > 0 && *rate <= 1e15))
          return error(path +
                       ".parameter_bytes_per_ms: expected a number > 0 and "
                       "<= 1e15 (bytes of weights updated per ms)");
        times.parameterBytesPerSecond = *rate * 1e3;
        model->updateRates_[kind] = times.parameterBytesPerSecond;
      }
      model->times_[kind][opName] = times;
    }
  }
  return model;
}

const ProfiledCostModel::Times *
ProfiledCostModel::lookup(Operation *op, const cluster::Device &device) const {
  auto kind = times_.find(device.kind);
  if (kind == times_.end())
    return nullptr;
  auto it = kind->second.find(getOpName(op));
  return it == kind->second.end() ? nullptr : &it->second;
}

double ProfiledCostModel::getForwardTime(Operation *op,
                                         const cluster::Device &device) const {
  const Times *t = lookup(op, device);
  // An update op: the time its weights (its first result) take at the
  // measured rate.
  if (t && t->parameterBytesPerSecond > 0 && op->getNumResults() > 0) {
    ++hits;
    return static_cast<double>(getTensorBytes(op->getResult(0).getType())) /
           t->parameterBytesPerSecond;
  }
  if (t && t->forward >= 0) {
    ++hits;
    return t->forward;
  }
  ++misses;
  return CostModel::getForwardTime(op, device);
}

double ProfiledCostModel::getUpdateTime(int64_t parameterBytes,
                                        double stateFactor,
                                        const cluster::Device &device) const {
  auto rate = updateRates_.find(device.kind);
  if (rate == updateRates_.end())
    return CostModel::getUpdateTime(parameterBytes, stateFactor, device);
  return static_cast<double>(parameterBytes) / rate->second;
}

double ProfiledCostModel::getBackwardTime(Operation *op,
                                          const cluster::Device &device) const {
  const Times *t = lookup(op, device);
  if (t && t->backward >= 0) {
    ++hits;
    return t->backward;
  }
  ++misses;
  return CostModel::getBackwardTime(op, device);
}

} // namespace pp

llvm::Expected<std::unique_ptr<pp::CostModel>>
pp::createCostModel(llvm::StringRef profileFile) {
  if (profileFile.empty())
    return std::make_unique<pp::AnalyticCostModel>();
  auto buffer = pp::limits::readRegularFile(
      profileFile, pp::limits::kMaxProfileFileBytes, "profile",
      /*isText=*/true);
  if (!buffer)
    return buffer.takeError();
  auto profiled =
      pp::ProfiledCostModel::fromJSON((*buffer)->getBuffer(), profileFile);
  if (!profiled)
    return profiled.takeError();
  return std::unique_ptr<pp::CostModel>(std::move(*profiled));
}

std::string pp::formatMegabytes(uint64_t bytes) {
  return llvm::formatv("{0:f1} MB", bytes / 1e6).str();
}
