//===- PPOps.cpp - The pp dialect and its operations ------------*- C++ -*-===//

#include "pp/Dialect/PP/IR/PPOps.h"
#include "pp/Dialect/ONNX/IR/ONNXOps.h"
#include "pp/Support/InputLimits.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace pp::pipeline;

#include "pp/Dialect/PP/IR/PPOpsDialect.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "pp/Dialect/PP/IR/PPAttrs.cpp.inc"

void PPDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "pp/Dialect/PP/IR/PPOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "pp/Dialect/PP/IR/PPAttrs.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// Attribute accessors
//===----------------------------------------------------------------------===//

namespace {
using Names = PPDialect;
template <typename AttrT> AttrT get(Operation *op, StringRef name) {
  return op->getAttrOfType<AttrT>(name);
}
} // namespace

PlanAttr pp::pipeline::getPlan(ModuleOp module) {
  return get<PlanAttr>(module, Names::PlanAttrHelper::getNameStr());
}
void pp::pipeline::setPlan(ModuleOp module, PlanAttr plan) {
  module->setAttr(Names::PlanAttrHelper::getNameStr(), plan);
}
ClusterAttr pp::pipeline::getCluster(ModuleOp module) {
  return get<ClusterAttr>(module, Names::ClusterAttrHelper::getNameStr());
}
void pp::pipeline::setCluster(ModuleOp module, ClusterAttr cluster) {
  module->setAttr(Names::ClusterAttrHelper::getNameStr(), cluster);
}
FailureOr<int64_t> pp::pipeline::resolveMicroBatches(ModuleOp module,
                                                     ArrayRef<int64_t> option,
                                                     StringRef passName) {
  if (option.size() > 1) {
    module.emitError() << passName << ": microbatches takes one value, got "
                       << option.size();
    return failure();
  }
  if (option.empty()) {
    if (PlanAttr plan = getPlan(module))
      return plan.getMicroBatches();
    return kDefaultMicroBatches;
  }
  if (option[0] < 1 || option[0] > pp::limits::kMaxMicroBatches) {
    module.emitError() << passName << ": microbatches must be in 1.."
                       << pp::limits::kMaxMicroBatches << ", got " << option[0];
    return failure();
  }
  return option[0];
}

std::optional<int64_t> pp::pipeline::getStage(Operation *op) {
  if (auto stage = get<IntegerAttr>(op, Names::StageAttrHelper::getNameStr()))
    return stage.getInt();
  return std::nullopt;
}
void pp::pipeline::setStage(Operation *op, int64_t stage) {
  op->setAttr(Names::StageAttrHelper::getNameStr(),
              Builder(op->getContext()).getI64IntegerAttr(stage));
}
void pp::pipeline::removeStage(Operation *op) {
  op->removeAttr(Names::StageAttrHelper::getNameStr());
}

bool pp::pipeline::isLossSeed(Operation *op) {
  return op->hasAttr(Names::LossSeedAttrHelper::getNameStr());
}
void pp::pipeline::setLossSeed(Operation *op) {
  op->setAttr(Names::LossSeedAttrHelper::getNameStr(),
              UnitAttr::get(op->getContext()));
}
void pp::pipeline::removeLossSeed(Operation *op) {
  op->removeAttr(Names::LossSeedAttrHelper::getNameStr());
}

bool pp::pipeline::isEveryStage(Operation *op) {
  return op->hasAttr(Names::EveryStageAttrHelper::getNameStr());
}
void pp::pipeline::setEveryStage(Operation *op) {
  op->setAttr(Names::EveryStageAttrHelper::getNameStr(),
              UnitAttr::get(op->getContext()));
}

bool pp::pipeline::isRecomputed(Operation *op) {
  return op->hasAttr(Names::RecomputeAttrHelper::getNameStr());
}
void pp::pipeline::setRecomputed(Operation *op) {
  op->setAttr(Names::RecomputeAttrHelper::getNameStr(),
              UnitAttr::get(op->getContext()));
}

std::optional<pp::kinds::Phase> pp::pipeline::getPhase(Operation *func) {
  if (auto phase = get<PhaseAttr>(func, Names::PhaseAttrHelper::getNameStr()))
    return phase.getValue();
  return std::nullopt;
}
void pp::pipeline::setPhase(Operation *func, pp::kinds::Phase phase) {
  func->setAttr(Names::PhaseAttrHelper::getNameStr(),
                PhaseAttr::get(func->getContext(), phase));
}

DenseI64ArrayAttr pp::pipeline::getOffsets(Operation *op) {
  return get<DenseI64ArrayAttr>(op, Names::OffsetsAttrHelper::getNameStr());
}
void pp::pipeline::setOffsets(Operation *op, ArrayRef<int64_t> offsets) {
  op->setAttr(Names::OffsetsAttrHelper::getNameStr(),
              DenseI64ArrayAttr::get(op->getContext(), offsets));
}
bool pp::pipeline::isInPlaceWrite(Operation *op) {
  return op->hasAttr(Names::InPlaceAttrHelper::getNameStr());
}
void pp::pipeline::setInPlaceWrite(Operation *op) {
  op->setAttr(Names::InPlaceAttrHelper::getNameStr(),
              UnitAttr::get(op->getContext()));
}
pp::rt::UnaryKind pp::pipeline::getActivation(Operation *op) {
  auto name = get<StringAttr>(op, Names::ActivationAttrHelper::getNameStr());
  std::optional<rt::UnaryKind> kind =
      name ? rt::parseUnaryKind(name.getValue()) : std::nullopt;
  return kind.value_or(rt::UnaryKind::Identity);
}
void pp::pipeline::setActivation(Operation *op, pp::rt::UnaryKind kind) {
  op->setAttr(Names::ActivationAttrHelper::getNameStr(),
              StringAttr::get(op->getContext(), rt::toString(kind)));
}
bool pp::pipeline::canFuseActivation(Operation *op, pp::rt::UnaryKind kind) {
  StringRef name = op->getName().getStringRef();
  return kind == rt::UnaryKind::Relu &&
         (name == "onnx.Conv" || name == "onnx.BatchNormalization" ||
          name == "onnx.Gemm");
}
std::optional<int64_t> pp::pipeline::getArenaBytes(Operation *func) {
  if (auto bytes =
          get<IntegerAttr>(func, Names::ArenaBytesAttrHelper::getNameStr()))
    return bytes.getInt();
  return std::nullopt;
}
void pp::pipeline::setArenaBytes(Operation *func, int64_t bytes) {
  func->setAttr(Names::ArenaBytesAttrHelper::getNameStr(),
                Builder(func->getContext()).getI64IntegerAttr(bytes));
}
DenseI64ArrayAttr pp::pipeline::getPlannedPeakBytes(ModuleOp module) {
  return get<DenseI64ArrayAttr>(
      module, Names::PlannedPeakBytesAttrHelper::getNameStr());
}
DenseI64ArrayAttr pp::pipeline::getPlannedBusyNanos(ModuleOp module) {
  return get<DenseI64ArrayAttr>(module,
                                Names::PlannedBusyNsAttrHelper::getNameStr());
}
void pp::pipeline::setPlannedBusyNanos(ModuleOp module,
                                       ArrayRef<int64_t> nanos) {
  module->setAttr(Names::PlannedBusyNsAttrHelper::getNameStr(),
                  DenseI64ArrayAttr::get(module.getContext(), nanos));
}
void pp::pipeline::setPlannedPeakBytes(ModuleOp module,
                                       ArrayRef<int64_t> bytes) {
  module->setAttr(Names::PlannedPeakBytesAttrHelper::getNameStr(),
                  DenseI64ArrayAttr::get(module.getContext(), bytes));
}

DenseI64ArrayAttr pp::pipeline::getTensorParallelStages(ModuleOp module) {
  return get<DenseI64ArrayAttr>(
      module, Names::TensorParallelStagesAttrHelper::getNameStr());
}
void pp::pipeline::setTensorParallelStages(ModuleOp module,
                                           ArrayRef<int64_t> degrees) {
  module->setAttr(Names::TensorParallelStagesAttrHelper::getNameStr(),
                  DenseI64ArrayAttr::get(module.getContext(), degrees));
}

ArrayAttr pp::pipeline::getReplicaDevices(ModuleOp module) {
  return get<ArrayAttr>(module, Names::ReplicaDevicesAttrHelper::getNameStr());
}
void pp::pipeline::setReplicaDevices(ModuleOp module,
                                     ArrayRef<std::string> names) {
  Builder b(module.getContext());
  SmallVector<Attribute> attrs;
  for (const std::string &name : names)
    attrs.push_back(b.getStringAttr(name));
  module->setAttr(Names::ReplicaDevicesAttrHelper::getNameStr(),
                  b.getArrayAttr(attrs));
}

ArrayAttr pp::pipeline::getInputNames(ModuleOp module) {
  return get<ArrayAttr>(module, Names::InputNamesAttrHelper::getNameStr());
}
ArrayAttr pp::pipeline::getOutputNames(ModuleOp module) {
  return get<ArrayAttr>(module, Names::OutputNamesAttrHelper::getNameStr());
}
void pp::pipeline::setInputOutputNames(ModuleOp module,
                                       ArrayRef<Attribute> inputs,
                                       ArrayRef<Attribute> outputs) {
  Builder b(module.getContext());
  module->setAttr(Names::InputNamesAttrHelper::getNameStr(),
                  b.getArrayAttr(inputs));
  module->setAttr(Names::OutputNamesAttrHelper::getNameStr(),
                  b.getArrayAttr(outputs));
}

void pp::pipeline::setMicroBatchArg(FunctionOpInterface func, unsigned index) {
  func.setArgAttr(index, Names::MicroBatchAttrHelper::getNameStr(),
                  UnitAttr::get(func.getContext()));
}
bool pp::pipeline::isLossResult(FunctionOpInterface func, unsigned index) {
  return static_cast<bool>(
      func.getResultAttr(index, Names::LossAttrHelper::getNameStr()));
}
void pp::pipeline::setLossResult(FunctionOpInterface func, unsigned index) {
  func.setResultAttr(index, Names::LossAttrHelper::getNameStr(),
                     UnitAttr::get(func.getContext()));
}
IntegerAttr pp::pipeline::getClassAxis(FunctionOpInterface func,
                                       unsigned index) {
  return func.getResultAttrOfType<IntegerAttr>(
      index, Names::ClassAxisAttrHelper::getNameStr());
}
NamedAttribute pp::pipeline::getClassAxisResultAttr(MLIRContext *context,
                                                    int64_t axis) {
  return NamedAttribute(
      StringAttr::get(context, Names::ClassAxisAttrHelper::getNameStr()),
      IntegerAttr::get(IntegerType::get(context, 64), axis));
}
IntegerAttr pp::pipeline::getIgnoreIndex(FunctionOpInterface func,
                                         unsigned index) {
  return func.getResultAttrOfType<IntegerAttr>(
      index, Names::IgnoreIndexAttrHelper::getNameStr());
}
NamedAttribute pp::pipeline::getIgnoreIndexResultAttr(MLIRContext *context,
                                                      int64_t label) {
  return NamedAttribute(
      StringAttr::get(context, Names::IgnoreIndexAttrHelper::getNameStr()),
      IntegerAttr::get(IntegerType::get(context, 64), label));
}
NamedAttribute pp::pipeline::getLossResultAttr(MLIRContext *context) {
  return NamedAttribute(
      StringAttr::get(context, Names::LossAttrHelper::getNameStr()),
      UnitAttr::get(context));
}
FlatSymbolRefAttr pp::pipeline::getGradOf(FunctionOpInterface func,
                                          unsigned index) {
  return func.getResultAttrOfType<FlatSymbolRefAttr>(
      index, Names::GradOfAttrHelper::getNameStr());
}
NamedAttribute pp::pipeline::getGradOfResultAttr(FlatSymbolRefAttr global) {
  return NamedAttribute(StringAttr::get(global.getContext(),
                                        Names::GradOfAttrHelper::getNameStr()),
                        global);
}

//===----------------------------------------------------------------------===//
// Attributes
//===----------------------------------------------------------------------===//

LogicalResult PlanAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               pp::kinds::ScheduleKind schedule,
                               int64_t microBatches, int64_t chunks,
                               int64_t numStages, ArrayAttr stageDevices,
                               int64_t dataParallel, int64_t tensorParallel,
                               int64_t staleness, int64_t wave,
                               ArrayAttr placements, int64_t updateEvery,
                               bool verticalSync) {
  if (microBatches < 1)
    return emitError() << "micro_batches must be >= 1, got " << microBatches;
  if (chunks < 1)
    return emitError() << "chunks must be >= 1, got " << chunks;
  if (numStages < 1)
    return emitError() << "num_stages must be >= 1, got " << numStages;
  if (!stageDevices.empty() &&
      static_cast<int64_t>(stageDevices.size()) != numStages)
    return emitError() << "stage_devices names " << stageDevices.size()
                       << " devices for " << numStages << " stages";
  if (!llvm::all_of(stageDevices, llvm::IsaPred<StringAttr>))
    return emitError() << "stage_devices must be strings";
  if (dataParallel < 1 || tensorParallel < 1)
    return emitError() << "data_parallel and tensor_parallel must be >= 1";
  if (staleness < -1)
    return emitError() << "staleness must be >= 0 (or -1: synchronous), got "
                       << staleness;
  if (wave < 1)
    return emitError() << "wave must be >= 1, got " << wave;
  if (staleness >= 0 && dataParallel < 2)
    return emitError() << "staleness (Wave Synchronous Parallel) needs "
                          "data_parallel >= 2, got "
                       << dataParallel;
  if (wave > 1 && staleness < 0)
    return emitError() << "wave = " << wave
                       << " needs a staleness bound (Wave Synchronous "
                          "Parallel)";
  if (updateEvery < 0 || (updateEvery > 0 && microBatches % updateEvery))
    return emitError() << "update_every must be 0 or divide micro_batches ("
                       << microBatches << "), got " << updateEvery;
  if (verticalSync && schedule != pp::kinds::ScheduleKind::PipeDream)
    return emitError() << "vertical_sync is an option of pipedream";
  if (placements.empty())
    return success();
  if (chunks != 1)
    return emitError() << "placements need one chunk per device, got chunks = "
                       << chunks;
  if (static_cast<int64_t>(placements.size()) != dataParallel)
    return emitError() << "placements has " << placements.size()
                       << " entries for " << dataParallel << " replicas";
  int64_t numDevices = -1;
  for (auto [replica, attr] : llvm::enumerate(placements)) {
    auto placement = dyn_cast<DenseI64ArrayAttr>(attr);
    if (!placement || placement.size() != numStages)
      return emitError() << "placements[" << replica
                         << "] must be an array<i64> of " << numStages
                         << " devices";
    int64_t used = 0;
    for (int64_t device : placement.asArrayRef()) {
      if (device < 0 || device >= numStages)
        return emitError() << "placements[" << replica << "] has device "
                           << device << ", outside [0, " << numStages << ")";
      used = std::max(used, device + 1);
    }
    for (int64_t d = 0; d < used; ++d)
      if (!llvm::is_contained(placement.asArrayRef(), d))
        return emitError() << "placements[" << replica << "] gives device " << d
                           << " no stage";
    if (numDevices >= 0 && used != numDevices)
      return emitError() << "placements[" << replica << "] uses " << used
                         << " devices, placements[0] " << numDevices;
    numDevices = used;
  }
  return success();
}

int64_t PlanAttr::getNumDevices() const {
  if (!hasPlacements())
    return getNumStages() / getChunks();
  ArrayRef<int64_t> first =
      cast<DenseI64ArrayAttr>(getPlacements()[0]).asArrayRef();
  return first.empty() ? 0 : *llvm::max_element(first) + 1;
}

int64_t PlanAttr::getDeviceOf(int64_t stage, int64_t replica) const {
  if (!hasPlacements())
    return pp::kinds::deviceOfStage(getSchedule(), static_cast<int>(stage),
                                    static_cast<int>(getNumDevices()));
  return cast<DenseI64ArrayAttr>(getPlacements()[replica])[stage];
}

std::vector<int> PlanAttr::getPlacement(int64_t replica) const {
  std::vector<int> placement;
  for (int64_t s = 0; s < getNumStages(); ++s)
    placement.push_back(static_cast<int>(getDeviceOf(s, replica)));
  return placement;
}

std::optional<StringRef> PlanAttr::getStageDeviceName(int64_t stage) const {
  if (stage < 0 || stage >= static_cast<int64_t>(getStageDevices().size()))
    return std::nullopt;
  return cast<StringAttr>(getStageDevices()[stage]).getValue();
}

PlanAttr PlanAttr::withMicroBatches(int64_t microBatches) const {
  return PlanAttr::get(getContext(), getSchedule(), microBatches, getChunks(),
                       getNumStages(), getStageDevices(), getDataParallel(),
                       getTensorParallel(), getStaleness(), getWave(),
                       getPlacements(), getUpdateEvery(), getVerticalSync());
}
PlanAttr PlanAttr::withNumStages(int64_t numStages) const {
  return PlanAttr::get(
      getContext(), getSchedule(), getMicroBatches(), getChunks(), numStages,
      getStageDevices(), getDataParallel(), getTensorParallel(), getStaleness(),
      getWave(), getPlacements(), getUpdateEvery(), getVerticalSync());
}
PlanAttr PlanAttr::withChunks(int64_t chunks) const {
  return PlanAttr::get(getContext(), getSchedule(), getMicroBatches(), chunks,
                       getNumStages(), getStageDevices(), getDataParallel(),
                       getTensorParallel(), getStaleness(), getWave(),
                       getPlacements(), getUpdateEvery(), getVerticalSync());
}
PlanAttr PlanAttr::withSchedule(pp::kinds::ScheduleKind schedule) const {
  return PlanAttr::get(getContext(), schedule, getMicroBatches(), getChunks(),
                       getNumStages(), getStageDevices(), getDataParallel(),
                       getTensorParallel(), getStaleness(), getWave(),
                       getPlacements(), getUpdateEvery(), getVerticalSync());
}

/// The stage of the function holding `op` (its `pp.stage`), if any.
static std::optional<int64_t> enclosingStage(Operation *op) {
  for (Operation *parent = op->getParentOp(); parent;
       parent = parent->getParentOp())
    if (auto stage = getStage(parent))
      return stage;
  return std::nullopt;
}

template <typename CommOp> static LogicalResult verifyComm(CommOp op) {
  auto mb = cast<RankedTensorType>(op.getMicroBatch().getType());
  if (mb.getRank() != 0)
    return op.emitOpError("micro_batch must be a scalar tensor<i64>");
  int64_t peer = static_cast<int64_t>(op.getPeer());
  if (peer < 0)
    return op.emitOpError("peer must be a stage index >= 0, got ") << peer;
  if (auto stage = enclosingStage(op); stage && *stage == peer)
    return op.emitOpError("peer is the op's own stage ") << peer;
  return success();
}

LogicalResult SendOp::verify() { return verifyComm(*this); }
LogicalResult RecvOp::verify() { return verifyComm(*this); }

LogicalResult OutputOp::verify() {
  StringRef combine = getCombine();
  if (combine != "mean" && combine != "sum" && combine != "concat")
    return emitOpError("combine must be mean, sum or concat, got '")
           << combine << "'";
  auto type = cast<RankedTensorType>(getValue().getType());
  if (combine == "concat" && type.getRank() == 0)
    return emitOpError("cannot concat scalars over micro-batches");
  if (std::optional<uint64_t> axis = getClassAxis();
      axis && (*axis < 1 || static_cast<int64_t>(*axis) >= type.getRank()))
    return emitOpError("class_axis ")
           << static_cast<int64_t>(*axis) << " must name a non-batch dim of "
           << type;
  return success();
}

PlanAttr ScheduleOp::getPlan() {
  auto module = (*this)->getParentOfType<ModuleOp>();
  return module ? pp::pipeline::getPlan(module) : PlanAttr();
}

/// The ops of `body` (of a pp.schedule or pp.stream named `parent`) are
/// pp.devices numbered 0, 1, ... in order; `count` gets how many.
static LogicalResult verifyDeviceList(Block &body, StringRef parent,
                                      int64_t &count) {
  count = 0;
  for (Operation &op : body) {
    auto device = dyn_cast<DeviceOp>(op);
    if (!device)
      return op.emitOpError("is not a pp.device inside ") << parent;
    if (static_cast<int64_t>(device.getIndex()) != count++)
      return device.emitOpError("devices must be numbered 0, 1, ... in "
                                "order; expected ")
             << count - 1;
  }
  return success();
}

LogicalResult ScheduleOp::verify() {
  PlanAttr plan = getPlan();
  if (!plan)
    return emitOpError("needs the enclosing module's pp.plan");
  int64_t expected = 0;
  if (failed(verifyDeviceList(getBody().front(), "pp.schedule", expected)))
    return failure();
  if (expected != plan.getNumDevices())
    return emitOpError("has ")
           << expected << " devices but the plan's " << plan.getNumStages()
           << " stages in " << plan.getChunks() << " chunks need "
           << plan.getNumDevices();
  if (getReplica() &&
      (*getReplica() < 0 ||
       static_cast<int64_t>(*getReplica()) >= plan.getDataParallel()))
    return emitOpError("replica ") << *getReplica() << " is outside the plan's "
                                   << plan.getDataParallel() << " replicas";
  if (plan.hasPlacements() && !getReplica())
    return emitOpError("needs a replica: the plan places the stages of "
                       "each replica on its own");
  return success();
}

LogicalResult StreamOp::verify() {
  PlanAttr plan = getPlan((*this)->getParentOfType<ModuleOp>());
  if (!plan)
    return emitOpError("needs the enclosing module's pp.plan");
  if (!plan.isWeightVersioned())
    return emitOpError("needs a weight-versioned plan: a synchronous "
                       "schedule drains every step");
  if (getMinSteps() < 2)
    return emitOpError("min_steps must be at least 2, got ") << getMinSteps();
  int64_t expected = 0;
  if (failed(verifyDeviceList(getBody().front(), "pp.stream", expected)))
    return failure();
  for (auto device : getBody().front().getOps<DeviceOp>()) {
    if (!device.getPrologueLength() || !device.getBodyLength())
      return device.emitOpError(
          "inside pp.stream needs prologue_length and body_length");
    auto size = static_cast<int64_t>(
        std::distance(device.getBody().front().begin(),
                      device.getBody().front().end()));
    int64_t prologue = static_cast<int64_t>(*device.getPrologueLength());
    int64_t body = static_cast<int64_t>(*device.getBodyLength());
    if (prologue < 0 || body < 0 || prologue + body > size)
      return device.emitOpError("prologue_length ")
             << prologue << " and body_length " << body << " do not split its "
             << size << " actions";
  }
  if (expected != plan.getNumDevices())
    return emitOpError("has ") << expected << " devices, the plan "
                               << plan.getNumDevices();
  return success();
}

ScheduleOp pp::pipeline::getSchedule(ModuleOp module, int64_t replica) {
  ScheduleOp shared;
  for (auto schedule : module.getOps<ScheduleOp>()) {
    if (!schedule.getReplica())
      shared = schedule;
    else if (static_cast<int64_t>(*schedule.getReplica()) == replica)
      return schedule;
  }
  return shared;
}

/// `pp.action forward @f {...}`: the kind as a bare name.
static ParseResult parseActionKind(OpAsmParser &parser, ActionKindAttr &kind) {
  SMLoc loc = parser.getCurrentLocation();
  std::string name;
  if (parser.parseKeywordOrString(&name))
    return failure();
  std::optional<pp::kinds::ActionKind> value = pp::kinds::parseActionKind(name);
  if (!value)
    return parser.emitError(loc, "unknown action kind '") << name << "'";
  kind = ActionKindAttr::get(parser.getContext(), *value);
  return success();
}

static void printActionKind(OpAsmPrinter &printer, Operation *,
                            ActionKindAttr kind) {
  printer.printKeywordOrString(pp::kinds::toString(kind.getValue()));
}

LogicalResult ActionOp::verify() {
  pp::kinds::ActionKind kind = getKindValue();
  StringRef name = pp::kinds::toString(kind);
  bool perMicroBatch = !pp::kinds::isPerStep(kind);
  if (perMicroBatch && getMicroBatchAttr().getInt() < 0)
    return emitOpError("a ") << name << " action needs a micro_batch >= 0";
  if (!perMicroBatch && getMicroBatchAttr().getInt() != -1)
    return emitOpError("a ") << name << " action has micro_batch -1";
  if (getWeightVersionAttr().getInt() < 0)
    return emitOpError("weight_version must be >= 0");
  if (getBlendVersion().has_value() != getBlendFactor().has_value())
    return emitOpError("blend_version and blend_factor go together");
  if (getBlendVersion() &&
      *getBlendVersion() <= static_cast<uint64_t>(getWeightVersion()))
    return emitOpError("blend_version must be newer than weight_version");
  auto schedule = (*this)->getParentOfType<ScheduleOp>();
  auto device = (*this)->getParentOfType<DeviceOp>();
  // A pp.stream's actions run its replica's placement.
  auto stream = (*this)->getParentOfType<StreamOp>();
  PlanAttr plan = schedule ? schedule.getPlan()
                           : getPlan((*this)->getParentOfType<ModuleOp>());
  if (!plan)
    return failure(); // The schedule reports it.
  int64_t stage = getStageAttr().getInt();
  if (stage < 0 || stage >= plan.getNumStages())
    return emitOpError("stage ") << stage << " is out of range";
  int64_t deviceIndex = device.getIndexAttr().getInt();
  int64_t replica = !plan.hasPlacements() ? 0
                    : schedule            ? schedule.getReplicaIndex()
                    : stream ? static_cast<int64_t>(stream.getReplica())
                             : 0;
  if (plan.getDeviceOf(stage, replica) != deviceIndex)
    return emitOpError("stage ")
           << stage << " belongs on device " << plan.getDeviceOf(stage, replica)
           << ", not " << deviceIndex;
  if (!getCallee())
    return pp::kinds::phaseOf(kind) == pp::kinds::Phase::None
               ? success()
               : emitOpError("a ") << name << " action needs a callee";
  auto module = (*this)->getParentOfType<ModuleOp>();
  auto func =
      module ? module.lookupSymbol<func::FuncOp>(*getCallee()) : func::FuncOp();
  if (!func)
    return emitOpError("callee @") << *getCallee() << " is not a function";
  if (pp::pipeline::getStage(func) != static_cast<int64_t>(getStage()))
    return emitOpError("callee @")
           << *getCallee() << " is not a function of stage " << getStage();
  if (pp::pipeline::getPhase(func) != pp::kinds::phaseOf(kind))
    return emitOpError("callee @")
           << *getCallee() << " does not hold the "
           << pp::kinds::toString(pp::kinds::phaseOf(kind)) << " of its stage";
  return success();
}

/// Whether `attribute` has the type its declaration in PPDialect.td gives.
static LogicalResult verifyAttrType(Operation *op, NamedAttribute attribute) {
  StringRef name = attribute.getName().getValue();
  Attribute value = attribute.getValue();
  auto expect = [&](bool ok, StringRef what) -> LogicalResult {
    if (ok)
      return success();
    return op->emitError() << name << " must be " << what << ", got " << value;
  };
  if (name == Names::StageAttrHelper::getNameStr() ||
      name == Names::ArenaBytesAttrHelper::getNameStr() ||
      name == Names::ClassAxisAttrHelper::getNameStr())
    return expect(isa<IntegerAttr>(value) &&
                      cast<IntegerAttr>(value).getInt() >= 0,
                  "an integer >= 0");
  if (name == Names::IgnoreIndexAttrHelper::getNameStr())
    return expect(isa<IntegerAttr>(value), "an integer");
  if (name == Names::LossSeedAttrHelper::getNameStr() ||
      name == Names::RecomputeAttrHelper::getNameStr() ||
      name == Names::EveryStageAttrHelper::getNameStr() ||
      name == Names::MicroBatchAttrHelper::getNameStr() ||
      name == Names::LossAttrHelper::getNameStr())
    return expect(isa<UnitAttr>(value), "a unit attribute");
  if (name == Names::InPlaceAttrHelper::getNameStr())
    return expect(isa<UnitAttr>(value) &&
                      op->getName().getStringRef() == "train.global_write",
                  "a unit attribute on a train.global_write");
  if (name == Names::ActivationAttrHelper::getNameStr()) {
    auto kindName = dyn_cast<StringAttr>(value);
    std::optional<pp::rt::UnaryKind> kind =
        kindName ? pp::rt::parseUnaryKind(kindName.getValue()) : std::nullopt;
    return expect(
        kind && pp::pipeline::canFuseActivation(op, *kind),
        "\"Relu\" on an onnx.Conv, onnx.BatchNormalization or onnx.Gemm");
  }
  if (name == Names::PhaseAttrHelper::getNameStr())
    return expect(isa<PhaseAttr>(value), "a #pp.phase");
  if (name == Names::OffsetsAttrHelper::getNameStr() ||
      name == Names::PlannedPeakBytesAttrHelper::getNameStr() ||
      name == Names::PlannedBusyNsAttrHelper::getNameStr() ||
      name == Names::TensorParallelStagesAttrHelper::getNameStr())
    return expect(isa<DenseI64ArrayAttr>(value), "an array<i64>");
  if (name == Names::PlanAttrHelper::getNameStr())
    return expect(isa<PlanAttr>(value) && isa<ModuleOp>(op),
                  "a #pp.plan on the module");
  if (name == Names::ClusterAttrHelper::getNameStr())
    return expect(isa<ClusterAttr>(value) && isa<ModuleOp>(op),
                  "a #pp.cluster on the module");
  if (name == Names::InputNamesAttrHelper::getNameStr() ||
      name == Names::OutputNamesAttrHelper::getNameStr() ||
      name == Names::ReplicaDevicesAttrHelper::getNameStr())
    return expect(
        isa<ArrayAttr>(value) &&
            llvm::all_of(cast<ArrayAttr>(value), llvm::IsaPred<StringAttr>),
        "an array of strings");
  if (name == Names::LrScheduleAttrHelper::getNameStr())
    return expect(isa<StringAttr>(value) && isa<ModuleOp>(op),
                  "a string on the module");
  if (name == Names::GradOfAttrHelper::getNameStr())
    return expect(isa<FlatSymbolRefAttr>(value), "a symbol reference");
  if (name == Names::PredictedSamplesPerSecondAttrHelper::getNameStr())
    return expect(isa<FloatAttr>(value) && isa<ModuleOp>(op),
                  "a float on the module");
  return op->emitError() << "unknown pp dialect attribute " << name;
}

LogicalResult PPDialect::verifyRegionArgAttribute(Operation *op, unsigned,
                                                  unsigned,
                                                  NamedAttribute attribute) {
  return verifyAttrType(op, attribute);
}

LogicalResult PPDialect::verifyRegionResultAttribute(Operation *op, unsigned,
                                                     unsigned,
                                                     NamedAttribute attribute) {
  return verifyAttrType(op, attribute);
}

LogicalResult PPDialect::verifyOperationAttribute(Operation *op,
                                                  NamedAttribute attribute) {
  if (failed(verifyAttrType(op, attribute)))
    return failure();
  // Clusters that passes build are checked like parsed ones.
  if (auto cluster = dyn_cast<ClusterAttr>(attribute.getValue()))
    return ClusterAttr::verify(
        [&] { return op->emitError() << "invalid pp.cluster: "; },
        cluster.getDevices(), cluster.getNodes(), cluster.getIntraNode(),
        cluster.getInterNode(), cluster.getLinks(),
        cluster.getVirtualWorkers());
  if (attribute.getName() != Names::PlanAttrHelper::getNameStr())
    return success();
  auto plan = cast<PlanAttr>(attribute.getValue());
  // Plans that passes build are checked like parsed ones.
  if (failed(PlanAttr::verify(
          [&] { return op->emitError() << "invalid pp.plan: "; },
          plan.getSchedule(), plan.getMicroBatches(), plan.getChunks(),
          plan.getNumStages(), plan.getStageDevices(), plan.getDataParallel(),
          plan.getTensorParallel(), plan.getStaleness(), plan.getWave(),
          plan.getPlacements(), plan.getUpdateEvery(), plan.getVerticalSync())))
    return failure();
  int64_t numStages = plan.getNumStages();

  // Every send needs exactly one recv: same tag, peers pointing at each
  // other, same type. Key: (sender stage, receiver stage, tag).
  using Key = std::tuple<int64_t, int64_t, int64_t>;
  llvm::MapVector<Key, SmallVector<SendOp>> sends;
  llvm::MapVector<Key, SmallVector<RecvOp>> recvs;
  WalkResult walk = op->walk([&](Operation *nested) {
    auto check = [&](Operation *comm, int64_t peer) -> std::optional<int64_t> {
      std::optional<int64_t> stage = enclosingStage(comm);
      if (!stage) {
        comm->emitOpError("is not inside a function marked pp.stage");
        return std::nullopt;
      }
      if (*stage == peer) {
        comm->emitOpError("peer is the op's own stage ") << peer;
        return std::nullopt;
      }
      if (*stage >= numStages || peer >= numStages) {
        comm->emitOpError("stage ")
            << *stage << " or peer " << peer << " is out of range for "
            << numStages << " stages";
        return std::nullopt;
      }
      return stage;
    };
    if (auto send = dyn_cast<SendOp>(nested)) {
      auto stage = check(send, send.getPeer());
      if (!stage)
        return WalkResult::interrupt();
      sends[{*stage, static_cast<int64_t>(send.getPeer()),
             static_cast<int64_t>(send.getTag())}]
          .push_back(send);
    } else if (auto recv = dyn_cast<RecvOp>(nested)) {
      auto stage = check(recv, recv.getPeer());
      if (!stage)
        return WalkResult::interrupt();
      recvs[{static_cast<int64_t>(recv.getPeer()), *stage,
             static_cast<int64_t>(recv.getTag())}]
          .push_back(recv);
    }
    return WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return failure();
  for (auto &[key, list] : sends) {
    auto [from, to, tag] = key;
    if (list.size() > 1)
      return list[1].emitOpError("duplicates the send from stage ")
             << from << " to " << to << " with tag " << tag;
    auto it = recvs.find(key);
    if (it == recvs.end())
      return list.front().emitOpError("has no matching pp.recv on stage ")
             << to << " (peer " << from << ", tag " << tag << ")";
    if (it->second.size() > 1)
      return it->second[1].emitOpError("duplicates the recv on stage ")
             << to << " from " << from << " with tag " << tag;
    if (it->second.front().getValue().getType() !=
        list.front().getValue().getType())
      return it->second.front().emitOpError("receives ")
             << it->second.front().getValue().getType() << " but the send has "
             << list.front().getValue().getType();
  }
  // Every unstash (accumulated) takes what a stash (accumulate) of the same
  // stage and slot keeps, with the same type.
  using SlotKey = std::pair<int64_t, int64_t>;
  llvm::DenseMap<SlotKey, Type> stashed, accumulated;
  op->walk([&](Operation *nested) {
    std::optional<int64_t> stage = enclosingStage(nested);
    if (auto stash = dyn_cast<StashOp>(nested); stash && stage)
      stashed[{*stage, static_cast<int64_t>(stash.getSlot())}] =
          stash.getValue().getType();
    if (auto acc = dyn_cast<AccumulateOp>(nested); acc && stage)
      accumulated[{*stage, static_cast<int64_t>(acc.getSlot())}] =
          acc.getValue().getType();
  });
  WalkResult slots = op->walk([&](Operation *nested) {
    std::optional<int64_t> stage = enclosingStage(nested);
    auto checkSlot = [&](auto &map, int64_t slot, Type type,
                         StringRef producer) -> LogicalResult {
      if (!stage)
        return nested->emitOpError("is not inside a function marked pp.stage");
      auto it = map.find(SlotKey{*stage, slot});
      if (it == map.end())
        return nested->emitOpError("has no ")
               << producer << " of slot " << slot << " on stage " << *stage;
      if (it->second != type)
        return nested->emitOpError("takes ")
               << type << " but slot " << slot << " holds " << it->second;
      return success();
    };
    LogicalResult ok = success();
    if (auto unstash = dyn_cast<UnstashOp>(nested))
      ok = checkSlot(stashed, unstash.getSlot(), unstash.getType(), "pp.stash");
    else if (auto acc = dyn_cast<AccumulatedOp>(nested))
      ok =
          checkSlot(accumulated, acc.getSlot(), acc.getType(), "pp.accumulate");
    return failed(ok) ? WalkResult::interrupt() : WalkResult::advance();
  });
  if (slots.wasInterrupted())
    return failure();
  for (auto &[key, list] : recvs)
    if (!sends.count(key))
      return list.front().emitOpError("has no matching pp.send on stage ")
             << std::get<0>(key) << " (peer " << std::get<1>(key) << ", tag "
             << std::get<2>(key) << ")";
  return success();
}

ScheduleOp pp::pipeline::lookupSchedule(ModuleOp module, StringRef user,
                                        int64_t replica) {
  auto schedules = module.getOps<ScheduleOp>();
  PlanAttr plan = getPlan(module);
  if (plan && plan.hasPlacements()) {
    if (ScheduleOp schedule = getSchedule(module, replica);
        schedule && schedule.getReplica())
      return schedule;
    emitError(module.getLoc()) << user << " needs the pp.schedule of replica "
                               << replica << " (run --pp-schedule)";
    return nullptr;
  }
  if (llvm::hasSingleElement(schedules))
    return *schedules.begin();
  emitError(module.getLoc())
      << user << " needs exactly one pp.schedule (run --pp-schedule), found "
      << llvm::range_size(schedules);
  return nullptr;
}

func::FuncOp pp::pipeline::lookupFunction(ModuleOp module, StringRef name,
                                          StringRef purpose) {
  if (auto func = module.lookupSymbol<func::FuncOp>(name))
    return func;
  auto diag = module.emitError() << "no function @" << name;
  if (!purpose.empty())
    diag << " " << purpose;
  return nullptr;
}

/// The devices of `body` (a pp.schedule's or pp.stream's) as a library
/// schedule of `plan` over `steps` steps.
static pp::schedule::Schedule toLibrarySchedule(PlanAttr plan, Block &body,
                                                int64_t steps) {
  pp::schedule::Schedule schedule;
  schedule.kind = plan.getSchedule();
  schedule.chunksPerDevice = static_cast<int>(plan.getChunks());
  schedule.microBatches = static_cast<int>(plan.getMicroBatches() * steps);
  if (plan.isWeightVersioned()) {
    schedule.microBatchesPerUpdate = static_cast<int>(plan.getUpdateEvery());
    schedule.verticalSync = plan.getVerticalSync();
    if (schedule.kind == pp::kinds::ScheduleKind::HetPipe)
      schedule.inFlight = static_cast<int>(plan.getMicroBatches());
  }
  for (auto device : body.getOps<DeviceOp>()) {
    auto &list = schedule.actions.emplace_back();
    // The library numbers a weight-versioned schedule's updates of a stage.
    std::map<int, int> updates, reduces;
    for (auto action : device.getBody().front().getOps<ActionOp>()) {
      int stage = static_cast<int>(action.getStageAttr().getInt());
      pp::schedule::Action entry{
          action.getKindValue(), stage,
          static_cast<int>(action.getMicroBatchAttr().getInt()),
          static_cast<int>(action.getWeightVersionAttr().getInt())};
      if (plan.isWeightVersioned() &&
          entry.kind == pp::kinds::ActionKind::OptimizerStep)
        entry.microBatch = updates[stage]++;
      // Data parallelism: a grad_reduce before each update.
      if (plan.isWeightVersioned() &&
          entry.kind == pp::kinds::ActionKind::GradReduce)
        entry.microBatch = reduces[stage]++;
      if (auto blend = action.getBlendVersion()) {
        entry.blendVersion = static_cast<int>(*blend);
        entry.staleness = entry.blendVersion - entry.weightVersion;
      }
      entry.overlapsNext = action.getOverlapsNext();
      list.push_back(entry);
    }
  }
  schedule.numDevices = static_cast<int>(schedule.actions.size());
  return schedule;
}

pp::schedule::Schedule pp::pipeline::toLibrarySchedule(ScheduleOp op) {
  PlanAttr plan = op.getPlan();
  pp::schedule::Schedule schedule =
      ::toLibrarySchedule(plan, op.getBody().front(), 1);
  if (plan.hasPlacements())
    schedule.stageDevice = plan.getPlacement(op.getReplicaIndex());
  return schedule;
}

pp::schedule::Schedule pp::pipeline::toLibrarySchedule(StreamOp op,
                                                       PlanAttr plan) {
  return ::toLibrarySchedule(plan, op.getBody().front(), op.getMinSteps() + 1);
}

pp::schedule::StreamSchedule pp::pipeline::toStreamSchedule(StreamOp op,
                                                            PlanAttr plan) {
  pp::schedule::Schedule window = toLibrarySchedule(op, plan);
  pp::schedule::StreamSchedule stream;
  stream.microBatches = static_cast<int>(plan.getMicroBatches());
  stream.updatesPerStep = static_cast<int>(
      plan.getMicroBatches() / std::max<int64_t>(plan.getUpdateEvery(), 1));
  stream.minSteps = static_cast<int>(op.getMinSteps());
  size_t d = 0;
  for (auto device : op.getBody().front().getOps<DeviceOp>()) {
    const std::vector<pp::schedule::Action> &all = window.actions[d++];
    auto prologue = static_cast<size_t>(device.getPrologueLength().value_or(0));
    auto body = static_cast<size_t>(device.getBodyLength().value_or(0));
    stream.prologue.emplace_back(all.begin(), all.begin() + prologue);
    stream.body.emplace_back(all.begin() + prologue,
                             all.begin() + prologue + body);
    stream.epilogue.emplace_back(all.begin() + prologue + body, all.end());
  }
  return stream;
}

std::map<std::pair<int64_t, pp::kinds::Phase>, Operation *>
pp::pipeline::getStageFunctions(ScheduleOp op) {
  std::map<std::pair<int64_t, pp::kinds::Phase>, Operation *> functions;
  auto module = op->getParentOfType<ModuleOp>();
  op.walk([&](ActionOp action) {
    if (!action.getCallee())
      return;
    if (Operation *func = module.lookupSymbol(*action.getCallee()))
      functions[{static_cast<int64_t>(action.getStage()),
                 pp::kinds::phaseOf(action.getKindValue())}] = func;
  });
  return functions;
}

//===----------------------------------------------------------------------===//
// Fused elementwise kernels
//===----------------------------------------------------------------------===//

StringRef FusedOp::getElementFunction(Operation *op) {
  // The op's kernel facts (onnx ops and train.unary_grad declare them).
  auto facts = dyn_cast<pp::onnx::KernelFactsOpInterface>(op);
  return facts ? facts.getFusedElementFunction() : StringRef();
}

Value FusedOp::getYieldedValue() {
  return cast<YieldOp>(getBody().front().getTerminator()).getValue();
}

/// Whether a kernel producing `result` can read `operand` at i mod
/// numel(operand): the same shape, a scalar, or a suffix of the result's
/// shape, leading 1s aside.
static bool readsBySuffix(ArrayRef<int64_t> operand, ArrayRef<int64_t> result) {
  while (!operand.empty() && operand.front() == 1)
    operand = operand.drop_front();
  return operand.size() <= result.size() &&
         operand == result.take_back(operand.size());
}

LogicalResult FusedOp::verifyRegions() {
  auto type = cast<RankedTensorType>(getResult().getType());
  Type element = type.getElementType();
  if (!type.hasStaticShape() || !(element.isF32() || element.isF64()))
    return emitOpError("result must be a static f32 or f64 tensor, got ")
           << type;
  Block &body = getBody().front();
  if (body.getArgumentTypes() != getInputs().getTypes())
    return emitOpError("body arguments must have the types of the inputs");
  for (auto [i, input] : llvm::enumerate(getInputs())) {
    auto inputType = cast<RankedTensorType>(input.getType());
    if (inputType.getElementType() != element ||
        !readsBySuffix(inputType.getShape(), type.getShape()))
      return emitOpError("input ")
             << i << " of type " << inputType
             << " is neither the result's shape, a scalar nor a suffix of "
                "it, in the result's element type";
  }
  auto yield = dyn_cast_or_null<YieldOp>(body.empty() ? nullptr : &body.back());
  if (!yield)
    return emitOpError("body must end in pp.yield");
  if (yield.getValue().getType() != type)
    return yield.emitOpError("yields ")
           << yield.getValue().getType() << ", the op returns " << type;
  for (Operation &op : body.without_terminator()) {
    if (getElementFunction(&op).empty())
      return op.emitOpError("cannot run in a fused kernel");
    if (op.getNumResults() != 1 || op.getResult(0).getType() != type)
      return op.emitOpError("in a fused kernel must have the kernel's "
                            "result type ")
             << type;
  }
  return success();
}

#define GET_OP_CLASSES
#include "pp/Dialect/PP/IR/PPOps.cpp.inc"
