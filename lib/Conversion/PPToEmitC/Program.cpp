//===- Program.cpp - The program table of a generated program ---*- C++ -*-===//
//
// collectProgramTable reads globals, step inputs and outputs, stage
// functions and the schedule from a pipeline module into the runtime's
// ProgramInfo; buildProgram resolves the converted functions' references to
// globals and constants and emits
//
//   static pp::rt::ProgramInfo makeProgram() {
//     pp::rt::ProgramInfo v1;
//     v1.modelName = "mlp";
//     v1.globals = {
//         {.name = "w", .dtype = pp::rt::DType::F32, .shape = {8, 8}, ...},
//         ...};
//     ...
//   }
//   int main(int argc, char **argv) { ... pp::rt::trainMain(...) ... }
//
// as EmitC: a variable, one member assignment per field (its value a
// literal of the entries, each field named), and calls.
//
//===----------------------------------------------------------------------===//

#include "Program.h"
#include "PPToEmitCCommon.h"

#include "pp/Dialect/ONNX/IR/ONNXOps.h"
#include "pp/Dialect/ONNX/Utils/HostTensor.h"
#include "pp/Dialect/ONNX/Utils/KernelParams.h"
#include "pp/Dialect/PP/IR/PPOps.h"
#include "pp/Dialect/PP/Transforms/Transforms.h"
#include "pp/Dialect/Train/IR/TrainOps.h"
#include "pp/Runtime/Checksum.h"
#include "pp/Runtime/Program.h"

#include "mlir/Dialect/EmitC/IR/EmitC.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <set>

using namespace mlir;
using namespace pp::emitc_lowering;
namespace onnx = pp::onnx;
namespace train = pp::train;
namespace pipeline = pp::pipeline;
namespace rt = pp::rt;

int64_t ProgramTable::appendData(const void *bytes, int64_t size) {
  // 256-byte aligned, as the runtime's buffers.
  dataBytes.resize((dataBytes.size() + 255) / 256 * 256, '\0');
  int64_t offset = dataBytes.size();
  dataBytes.append(static_cast<const char *>(bytes), size);
  return offset;
}

//===----------------------------------------------------------------------===//
// Reading the table
//===----------------------------------------------------------------------===//

namespace {

/// The micro-batch a pp.recv names as a constant (one integer).
FailureOr<int64_t> getConstantMicroBatch(Value microBatch) {
  auto constant = microBatch.getDefiningOp<onnx::ConstantOp>();
  if (!constant)
    return failure();
  auto decoded = pp::onnx::decodeElements(
      constant.getLoc(), cast<ElementsAttr>(constant.getValue()));
  if (failed(decoded) || decoded->numel() != 1)
    return failure();
  return static_cast<int64_t>(decoded->getDouble(0));
}

/// Exclusive upper bound for random integers of input `index`: the size of
/// the dim it indexes, as pp-interpret --random-inputs draws them.
int64_t randomBound(ModuleOp module, int64_t index) {
  int64_t bound = 0;
  module.walk([&](pipeline::InputOp input) {
    if (static_cast<int64_t>(input.getIndex()) != index)
      return;
    int64_t dim = pp::onnx::indexBound(input.getValue());
    if (dim > 0)
      bound = bound ? std::min(bound, dim) : dim;
  });
  return bound ? bound : 10;
}

/// The smallest dim a Gather indexes with input `index` (0: none) and that
/// Gather's node name.
std::pair<int64_t, std::string> gatherBound(ModuleOp module, int64_t index) {
  std::pair<int64_t, std::string> bound = {0, ""};
  module.walk([&](pipeline::InputOp input) {
    if (static_cast<int64_t>(input.getIndex()) != index)
      return;
    for (OpOperand &use : input.getValue().getUses()) {
      auto gather = dyn_cast<onnx::GatherOp>(use.getOwner());
      if (!gather || use.getOperandNumber() != 1)
        continue;
      auto type = gather.getData().getType();
      int64_t axis = static_cast<int64_t>(gather.getAxis());
      if (axis < 0)
        axis += type.getRank();
      if (axis < 0 || axis >= type.getRank() || type.isDynamicDim(axis))
        continue;
      int64_t dim = type.getDimSize(axis);
      if (bound.first == 0 || dim < bound.first)
        bound = {dim, describeOp(gather)};
    }
  });
  return bound;
}

LogicalResult collectGlobals(ModuleOp module, ProgramTable &table) {
  for (auto global : module.getOps<onnx::GlobalOp>()) {
    auto dtype = dtypeOf(global, global.getType());
    if (failed(dtype))
      return failure();
    auto type = cast<RankedTensorType>(global.getType());
    pp::onnx::HostTensor value(*dtype, type.getShape());
    if (auto init = global.getInitialValueAttr()) {
      auto decoded = pp::onnx::decodeElements(global.getLoc(), init);
      if (failed(decoded))
        return failure();
      value = std::move(*decoded);
    }
    rt::GlobalInfo entry{.name = global.getSymName().str(),
                         .dtype = *dtype,
                         .shape = std::vector<int64_t>(type.getShape().begin(),
                                                       type.getShape().end()),
                         .trainable = global.getKind() == "trainable",
                         .dataOffset =
                             table.appendData(value.data(), value.bytes()),
                         // The first stage that writes it, else the first that
                         // reads it (collectGlobalUse).
                         .ownerStage = -1};
    table.globalIds[entry.name] = table.globals.size();
    table.globals.push_back(std::move(entry));
  }
  return success();
}

LogicalResult collectInputsOutputs(ModuleOp module, ProgramTable &table) {
  ArrayAttr inputNames = pipeline::getInputNames(module);
  ArrayAttr outputNames = pipeline::getOutputNames(module);
  if (!inputNames || !outputNames)
    return module.emitError() << "not a split module (no pp.input_names): run "
                                 "--pp-split-stages";
  table.inputs.resize(inputNames.size());
  for (auto [i, name] : llvm::enumerate(inputNames)) {
    table.inputs[i].name = cast<StringAttr>(name).str();
    table.inputs[i].randomBound = randomBound(module, i);
    std::tie(table.inputs[i].gatherBound, table.inputs[i].gatherNode) =
        gatherBound(module, i);
  }
  table.outputs.resize(outputNames.size());
  for (auto [i, name] : llvm::enumerate(outputNames))
    table.outputs[i].name = cast<StringAttr>(name).str();
  LogicalResult result = success();
  module.walk([&](Operation *op) {
    if (auto input = dyn_cast<pipeline::InputOp>(op)) {
      uint64_t index = input.getIndex();
      if (index >= table.inputs.size()) {
        result = input.emitError()
                 << "reads input " << index << " of " << table.inputs.size();
        return;
      }
      auto dtype = dtypeOf(op, input.getValue().getType());
      if (failed(dtype)) {
        result = failure();
        return;
      }
      std::vector<int64_t> shape(shapeOf(input.getValue()));
      // The step's input is the global batch: every replica's
      // micro-batches.
      if (!shape.empty())
        shape[0] *= table.microBatches * table.dataParallel;
      table.inputs[index].dtype = *dtype;
      table.inputs[index].shape = std::move(shape);
    } else if (auto output = dyn_cast<pipeline::OutputOp>(op)) {
      uint64_t index = output.getIndex();
      if (index >= table.outputs.size()) {
        result = output.emitError()
                 << "writes output " << index << " of " << table.outputs.size();
        return;
      }
      auto dtype = dtypeOf(op, output.getValue().getType());
      if (failed(dtype)) {
        result = failure();
        return;
      }
      table.outputs[index].dtype = *dtype;
      table.outputs[index].combine = output.getCombine().str();
      table.outputs[index].shape = shapeOf(output.getValue()).vec();
      if (std::optional<uint64_t> axis = output.getClassAxis())
        table.outputs[index].classAxis = static_cast<int64_t>(*axis);
      if (IntegerAttr label = output.getIgnoreIndexAttr()) {
        table.outputs[index].hasIgnoreIndex = true;
        table.outputs[index].ignoreIndex = label.getInt();
      }
    }
  });
  return result;
}

/// The global a read or write names, or null.
FlatSymbolRefAttr globalOf(Operation *op) {
  if (auto read = dyn_cast<onnx::GlobalReadOp>(op))
    return read.getGlobalAttr();
  if (auto write = dyn_cast<train::GlobalWriteOp>(op))
    return write.getGlobalAttr();
  return {};
}

/// The plan's part of the table: the schedule kind, stages, micro-batches,
/// replicas, the tensor-parallel group (the shard.grid and a stage-wise
/// mix of degrees) and Wave Synchronous Parallel.
LogicalResult collectPlan(ModuleOp module, pipeline::PlanAttr plan,
                          ProgramTable &table) {
  table.scheduleKind = plan.getSchedule();
  table.numStages = plan.getNumStages();
  table.microBatches = plan.getMicroBatches();
  table.dataParallel = plan.getDataParallel();
  for (auto grid : module.getOps<shard::GridOp>()) {
    if (grid.getShape().size() != 1 || table.tensorParallel != 1)
      return grid.emitError() << "code generation takes one "
                                 "one-dimensional shard.grid (the "
                                 "tensor-parallel group)";
    table.tensorParallel = grid.getShape()[0];
  }
  // A stage-wise mix: the stages left whole run on one device.
  if (DenseI64ArrayAttr degrees = pipeline::getTensorParallelStages(module);
      degrees && table.tensorParallel > 1 &&
      llvm::any_of(degrees.asArrayRef(), [&](int64_t degree) {
        return degree != table.tensorParallel;
      })) {
    if (static_cast<int64_t>(degrees.size()) != table.numStages ||
        llvm::any_of(degrees.asArrayRef(), [&](int64_t degree) {
          return degree != 1 && degree != table.tensorParallel;
        }))
      return module.emitError() << "code generation: pp.tensor_parallel_stages "
                                << degrees << " does not give each of the "
                                << table.numStages << " stages 1 or the grid's "
                                << table.tensorParallel << " devices";
    table.stageTensorParallel.assign(degrees.asArrayRef().begin(),
                                     degrees.asArrayRef().end());
  }
  table.staleness = plan.getStaleness();
  table.wave = plan.getWave();
  table.updateEvery = plan.getUpdateEvery();
  return success();
}

/// The pp.recv ops of stage function `f`, in program order.
LogicalResult collectReceives(func::FuncOp f, rt::FunctionInfo &entry) {
  WalkResult walked = f.walk([&](pipeline::RecvOp recv) {
    auto dtype = dtypeOf(recv, recv.getType());
    if (failed(dtype))
      return WalkResult::interrupt();
    rt::ReceiveInfo &r = entry.receives.emplace_back();
    r.peerStage = static_cast<int64_t>(recv.getPeer());
    r.tag = static_cast<int64_t>(recv.getTag());
    r.microBatch = pp::rt::kFunctionMicroBatch;
    if (!isa<BlockArgument>(recv.getMicroBatch())) {
      auto constant = getConstantMicroBatch(recv.getMicroBatch());
      if (failed(constant)) {
        recv.emitError() << "code generation needs the micro-batch as the "
                            "stage function's argument or a constant";
        return WalkResult::interrupt();
      }
      r.microBatch = *constant;
    }
    r.dtype = *dtype;
    auto type = cast<RankedTensorType>(recv.getType());
    r.shape.assign(type.getShape().begin(), type.getShape().end());
    return WalkResult::advance();
  });
  return failure(walked.wasInterrupted());
}

/// The stage functions, in module order, with the arena of the memory plan
/// and their receives; `functions` gets their ops.
LogicalResult collectFunctions(ModuleOp module, ProgramTable &table,
                               SmallVectorImpl<func::FuncOp> &functions) {
  for (auto f : module.getOps<func::FuncOp>()) {
    std::optional<int64_t> stage = pipeline::getStage(f);
    if (!stage)
      continue;
    std::optional<int64_t> arena = pipeline::getArenaBytes(f);
    if (!arena)
      return f.emitError() << "stage function has no planned arena "
                              "(pp.arena_bytes): run --pp-memory-plan";
    rt::FunctionInfo &entry = table.functions.emplace_back(rt::FunctionInfo{
        .name = f.getSymName().str(),
        .function = nullptr,
        .stage = *stage,
        .phase = pipeline::getPhase(f).value_or(pp::kinds::Phase::None),
        .arenaBytes = *arena});
    if (failed(collectReceives(f, entry)))
      return failure();
    functions.push_back(f);
  }
  if (functions.empty())
    return module.emitError() << "code generation needs stage functions: run "
                                 "--pp-split-stages";
  return success();
}

/// The owner stage of each global (the first writer, else the first
/// reader) and the globals of each stage.
LogicalResult collectGlobalUse(ArrayRef<func::FuncOp> functions,
                               ProgramTable &table) {
  auto idOf = [&](FlatSymbolRefAttr symbol) -> FailureOr<int> {
    auto it = table.globalIds.find(symbol.getValue());
    if (it == table.globalIds.end())
      return failure();
    return it->second;
  };
  for (bool writes : {true, false})
    for (func::FuncOp f : functions)
      f.walk([&](Operation *op) {
        FlatSymbolRefAttr symbol = globalOf(op);
        if (!symbol || isa<train::GlobalWriteOp>(op) != writes)
          return;
        auto id = idOf(symbol);
        if (succeeded(id) && table.globals[*id].ownerStage < 0)
          table.globals[*id].ownerStage = *pipeline::getStage(f);
      });
  for (rt::GlobalInfo &g : table.globals)
    if (g.ownerStage < 0)
      g.ownerStage = 0;
  table.stageGlobals.resize(table.numStages);
  LogicalResult known = success();
  for (func::FuncOp f : functions) {
    int64_t stage = *pipeline::getStage(f);
    if (stage < 0 || stage >= table.numStages)
      return f.emitError() << "stage " << stage << " of a plan with "
                           << table.numStages << " stages";
    std::vector<int> &used = table.stageGlobals[stage];
    f.walk([&](Operation *op) {
      FlatSymbolRefAttr symbol = globalOf(op);
      if (!symbol)
        return;
      auto id = idOf(symbol);
      if (failed(id)) {
        known = op->emitError()
                << "no global named '" << symbol.getValue() << "'";
        return;
      }
      if (!llvm::is_contained(used, *id))
        used.push_back(*id);
    });
  }
  if (failed(known))
    return failure();
  for (std::vector<int> &used : table.stageGlobals)
    llvm::sort(used);
  return success();
}

/// The actions of one device, in order; `functionIndex`: the index of each
/// stage function in ProgramInfo::functions.
void collectDevice(pipeline::DeviceOp device,
                   const llvm::StringMap<int> &functionIndex,
                   std::vector<rt::ActionInfo> &actions) {
  for (auto action : device.getBody().front().getOps<pipeline::ActionOp>()) {
    int function = -1;
    if (auto callee = action.getCallee())
      function = functionIndex.lookup(*callee);
    rt::ActionInfo &entry = actions.emplace_back(
        rt::ActionInfo{.kind = action.getKindValue(),
                       .function = function,
                       .stage = static_cast<int64_t>(action.getStage()),
                       .microBatch = action.getMicroBatchAttr().getInt()});
    entry.weightVersion = action.getWeightVersion();
    if (auto blend = action.getBlendVersion()) {
      entry.blendVersion = static_cast<int64_t>(*blend);
      entry.blendFactor = action.getBlendFactorAttr().getValueAsDouble();
    }
  }
}

/// The devices and their actions: each device's pp.stream, the schedule
/// and, when the plan places each replica's stages on its own, the
/// schedules of replicas 1 .. dataParallel-1.
LogicalResult collectSchedules(ModuleOp module, pipeline::ScheduleOp schedule,
                               pipeline::PlanAttr plan, ProgramTable &table) {
  llvm::StringMap<int> functionIndex;
  for (auto [i, f] : llvm::enumerate(table.functions))
    functionIndex[f.name] = i;
  if (ArrayAttr replicas = pipeline::getReplicaDevices(module))
    for (Attribute name : replicas)
      if (auto text = dyn_cast<StringAttr>(name))
        table.replicaDeviceNames.push_back(text.str());
  auto collectSchedule = [&](pipeline::ScheduleOp op,
                             std::vector<std::vector<rt::ActionInfo>> &list) {
    for (auto device : op.getBody().front().getOps<pipeline::DeviceOp>())
      collectDevice(device, functionIndex, list.emplace_back());
  };
  for (auto stream : module.getOps<pipeline::StreamOp>())
    for (auto device : stream.getBody().front().getOps<pipeline::DeviceOp>()) {
      std::vector<rt::ActionInfo> all;
      collectDevice(device, functionIndex, all);
      auto prologue = static_cast<size_t>(*device.getPrologueLength());
      auto body = static_cast<size_t>(*device.getBodyLength());
      rt::StreamInfo &entry = table.stream.emplace_back();
      entry.minSteps = static_cast<int64_t>(stream.getMinSteps());
      entry.prologue.assign(all.begin(), all.begin() + prologue);
      entry.body.assign(all.begin() + prologue, all.begin() + prologue + body);
      entry.epilogue.assign(all.begin() + prologue + body, all.end());
    }
  for (auto device : schedule.getBody().front().getOps<pipeline::DeviceOp>())
    table.deviceNames.push_back(device.getName().str());
  collectSchedule(schedule, table.schedule);
  if (plan.hasPlacements())
    for (int64_t r = 1; r < plan.getDataParallel(); ++r) {
      pipeline::ScheduleOp own =
          pipeline::lookupSchedule(module, "code generation", r);
      if (!own)
        return failure();
      collectSchedule(own, table.replicaSchedules.emplace_back());
    }
  return success();
}

/// The stage pairs that exchange messages, and whether every device pair's
/// messages are received in send order.
LogicalResult collectMessages(ModuleOp module, ProgramTable &table) {
  std::set<std::pair<int64_t, int64_t>> links;
  for (auto func : module.getOps<func::FuncOp>())
    if (std::optional<int64_t> stage = pipeline::getStage(func))
      func.walk([&](pipeline::SendOp send) {
        links.insert({*stage, static_cast<int64_t>(send.getPeer())});
      });
  table.stageLinks.assign(links.begin(), links.end());
  FailureOr<std::optional<std::string>> outOfOrder =
      pipeline::findMessageOutOfOrder(module);
  if (failed(outOfOrder))
    return failure();
  table.messagesInSendOrder = !outOfOrder->has_value();
  return success();
}

/// The planned peak of every replica's devices when each has its own
/// schedule, else of replica 0's (0 where the plan has none).
void collectPlannedPeaks(ModuleOp module, pipeline::PlanAttr plan,
                         ProgramTable &table) {
  auto peaks = pipeline::getPlannedPeakBytes(module);
  size_t numPeaks = table.deviceNames.size() *
                    (plan.hasPlacements() ? plan.getDataParallel() : 1);
  for (size_t d = 0; d < numPeaks; ++d)
    table.plannedPeakBytes.push_back(
        peaks && static_cast<int64_t>(d) < peaks.size() ? peaks[d] : 0);
  if (auto busy = pipeline::getPlannedBusyNanos(module);
      busy && busy.size() == static_cast<int64_t>(table.deviceNames.size()))
    table.plannedBusyNanos.assign(busy.asArrayRef().begin(),
                                  busy.asArrayRef().end());
}

} // namespace

FailureOr<ProgramTable>
pp::emitc_lowering::collectProgramTable(ModuleOp module) {
  pipeline::ScheduleOp schedule =
      pipeline::lookupSchedule(module, "code generation");
  if (!schedule)
    return failure();
  ProgramTable table{};
  auto graphName = module->getAttrOfType<StringAttr>("onnx.graph_name");
  table.modelName = graphName ? graphName.str() : "model";
  if (auto lrSchedule = module->getAttrOfType<StringAttr>("pp.lr_schedule"))
    table.lrSchedule = lrSchedule.str();
  pipeline::PlanAttr plan = schedule.getPlan();
  SmallVector<func::FuncOp> functions;
  if (failed(collectPlan(module, plan, table)) ||
      failed(collectGlobals(module, table)) ||
      failed(collectInputsOutputs(module, table)) ||
      failed(collectFunctions(module, table, functions)) ||
      failed(collectGlobalUse(functions, table)) ||
      failed(collectSchedules(module, schedule, plan, table)) ||
      failed(collectMessages(module, table)))
    return failure();
  collectPlannedPeaks(module, plan, table);
  return table;
}

//===----------------------------------------------------------------------===//
// Building the program
//===----------------------------------------------------------------------===//

namespace {

/// Gives globals and constants their ids in the calls that name them by
/// symbol and by value; constants get ids (and data) in order of first use.
LogicalResult resolveIds(ModuleOp module, ProgramTable &table) {
  MLIRContext *context = module.getContext();
  llvm::DenseMap<Attribute, int> constantIds;
  LogicalResult result = success();
  module.walk([&](emitc::CallOpaqueOp call) {
    StringRef callee = call.getCallee();
    if (callee != kGlobalCallee && callee != kWriteGlobalCallee &&
        callee != kConstantCallee)
      return;
    ArrayAttr args = call.getArgsAttr();
    if (!args)
      return;
    SmallVector<Attribute> resolved(args.begin(), args.end());
    for (Attribute &arg : resolved) {
      if (auto symbol = dyn_cast<FlatSymbolRefAttr>(arg)) {
        auto it = table.globalIds.find(symbol.getValue());
        if (it == table.globalIds.end()) {
          result = call.emitError()
                   << "no global named '" << symbol.getValue() << "'";
          return;
        }
        arg = emitc::OpaqueAttr::get(context, std::to_string(it->second));
      } else if (auto value = dyn_cast<ElementsAttr>(arg)) {
        auto [it, inserted] = constantIds.try_emplace(value, 0);
        if (inserted) {
          auto decoded = pp::onnx::decodeElements(call.getLoc(), value);
          if (failed(decoded)) {
            result = failure();
            return;
          }
          it->second = table.constants.size();
          table.constants.push_back(rt::ConstantInfo{
              .dtype = decoded->dtype(),
              .shape = std::vector<int64_t>(decoded->shape().begin(),
                                            decoded->shape().end()),
              .dataOffset =
                  table.appendData(decoded->data(), decoded->bytes())});
        }
        arg = emitc::OpaqueAttr::get(context, std::to_string(it->second));
      }
    }
    call.setArgsAttr(ArrayAttr::get(context, resolved));
  });
  return result;
}

/// `{\n    a,\n    b}`: one entry a line (the emitter indents each line of
/// a literal as its statement).
std::string listLiteral(ArrayRef<std::string> entries) {
  if (entries.empty())
    return "{}";
  std::string text = "{";
  for (auto [i, entry] : llvm::enumerate(entries))
    text += (i ? ",\n    " : "\n    ") + entry;
  return text + "}";
}

template <typename T, typename F>
std::string listOf(ArrayRef<T> values, F &&print) {
  std::vector<std::string> entries;
  for (const T &value : values)
    entries.push_back(print(value));
  return listLiteral(entries);
}

//===----------------------------------------------------------------------===//
// The table's fields by name
//
// The generated table names every field it sets: a designated initializer
// (`{.name = "w", .dtype = ...}`) for the entries, an assignment for the
// members of ProgramInfo. FIELD(Struct, member) is the name of a field of
// pp::rt::Struct and compiles only while the runtime's struct has it; the
// generated program's compiler checks the names and their order again. Each
// printer starts with a structured binding, one name a field of its struct:
// it stops compiling when a field is added to or removed from the struct in
// the runtime's Program.h, until the printer below handles it. So neither
// side can add, drop or move a field without the other.
//===----------------------------------------------------------------------===//

#define FIELD(Struct, member)                                                  \
  (static_cast<void>(&pp::rt::Struct::member), llvm::StringLiteral(#member))

/// `{.a = x, .b = y}`: an aggregate of the runtime by designated
/// initializers, in the order of its fields.
class Fields {
public:
  /// Adds `.name = value`, after `separator` unless it is the first.
  Fields &add(StringRef name, StringRef value, StringRef separator = ", ") {
    text += (text.empty() ? std::string("{") : separator.str()) + "." +
            name.str() + " = " + value.str();
    return *this;
  }
  std::string str() const { return text.empty() ? "{}" : text + "}"; }

private:
  std::string text;
};

std::string globalLiteral(const rt::GlobalInfo &g) {
  [[maybe_unused]] const auto &[f0, f1, f2, f3, f4, f5] = g;
  return Fields()
      .add(FIELD(GlobalInfo, name), quote(g.name))
      .add(FIELD(GlobalInfo, dtype), dtypeLiteral(g.dtype))
      .add(FIELD(GlobalInfo, shape), intList(g.shape))
      .add(FIELD(GlobalInfo, trainable), g.trainable ? "true" : "false")
      .add(FIELD(GlobalInfo, dataOffset), std::to_string(g.dataOffset))
      .add(FIELD(GlobalInfo, ownerStage), std::to_string(g.ownerStage))
      .str();
}

std::string constantLiteral(const rt::ConstantInfo &c) {
  [[maybe_unused]] const auto &[f0, f1, f2] = c;
  return Fields()
      .add(FIELD(ConstantInfo, dtype), dtypeLiteral(c.dtype))
      .add(FIELD(ConstantInfo, shape), intList(c.shape))
      .add(FIELD(ConstantInfo, dataOffset), std::to_string(c.dataOffset))
      .str();
}

std::string inputLiteral(const rt::InputInfo &in) {
  [[maybe_unused]] const auto &[f0, f1, f2, f3, f4, f5] = in;
  Fields fields;
  fields.add(FIELD(InputInfo, name), quote(in.name))
      .add(FIELD(InputInfo, dtype), dtypeLiteral(in.dtype))
      .add(FIELD(InputInfo, shape), intList(in.shape))
      .add(FIELD(InputInfo, randomBound), std::to_string(in.randomBound));
  // Only an index input has them (the defaults say none).
  if (in.gatherBound > 0)
    fields.add(FIELD(InputInfo, gatherBound), std::to_string(in.gatherBound))
        .add(FIELD(InputInfo, gatherNode), quote(in.gatherNode));
  return fields.str();
}

std::string outputLiteral(const rt::OutputInfo &out) {
  [[maybe_unused]] const auto &[f0, f1, f2, f3, f4, f5, f6] = out;
  Fields fields;
  fields.add(FIELD(OutputInfo, name), quote(out.name))
      .add(FIELD(OutputInfo, combine), quote(out.combine))
      .add(FIELD(OutputInfo, dtype), dtypeLiteral(out.dtype))
      .add(FIELD(OutputInfo, shape), intList(out.shape));
  if (out.classAxis >= 0)
    fields.add(FIELD(OutputInfo, classAxis), std::to_string(out.classAxis));
  if (out.hasIgnoreIndex)
    fields.add(FIELD(OutputInfo, hasIgnoreIndex), "true")
        .add(FIELD(OutputInfo, ignoreIndex), std::to_string(out.ignoreIndex));
  return fields.str();
}

std::string receiveLiteral(const rt::ReceiveInfo &r) {
  [[maybe_unused]] const auto &[f0, f1, f2, f3, f4] = r;
  return Fields()
      .add(FIELD(ReceiveInfo, peerStage), std::to_string(r.peerStage))
      .add(FIELD(ReceiveInfo, tag), std::to_string(r.tag))
      .add(FIELD(ReceiveInfo, microBatch), std::to_string(r.microBatch))
      .add(FIELD(ReceiveInfo, dtype), dtypeLiteral(r.dtype))
      .add(FIELD(ReceiveInfo, shape), intList(r.shape))
      .str();
}

std::string functionLiteral(const rt::FunctionInfo &f) {
  [[maybe_unused]] const auto &[f0, f1, f2, f3, f4, f5] = f;
  Fields fields;
  fields.add(FIELD(FunctionInfo, name), quote(f.name))
      .add(FIELD(FunctionInfo, function), "&" + f.name)
      .add(FIELD(FunctionInfo, stage), std::to_string(f.stage))
      .add(FIELD(FunctionInfo, phase), pp::kinds::enumeratorName(f.phase))
      .add(FIELD(FunctionInfo, arenaBytes), std::to_string(f.arenaBytes));
  if (!f.receives.empty()) {
    std::string receives;
    for (auto [i, r] : llvm::enumerate(f.receives))
      receives += (i ? ", " : "") + receiveLiteral(r);
    fields.add(FIELD(FunctionInfo, receives), "{" + receives + "}");
  }
  return fields.str();
}

std::string actionLiteral(const rt::ActionInfo &a) {
  [[maybe_unused]] const auto &[f0, f1, f2, f3, f4, f5, f6] = a;
  Fields fields;
  fields.add(FIELD(ActionInfo, kind), pp::kinds::enumeratorName(a.kind))
      .add(FIELD(ActionInfo, function), std::to_string(a.function))
      .add(FIELD(ActionInfo, stage), std::to_string(a.stage))
      .add(FIELD(ActionInfo, microBatch), std::to_string(a.microBatch));
  if (a.weightVersion || a.blendVersion >= 0)
    fields
        .add(FIELD(ActionInfo, weightVersion), std::to_string(a.weightVersion))
        .add(FIELD(ActionInfo, blendVersion), std::to_string(a.blendVersion))
        .add(FIELD(ActionInfo, blendFactor),
             llvm::formatv("{0:e17}", a.blendFactor).str());
  return fields.str();
}

/// A device's actions, one a line.
std::string actionList(const std::vector<rt::ActionInfo> &actions) {
  std::string text = "{";
  for (auto [i, a] : llvm::enumerate(actions))
    text += (i ? ",\n        " : "\n        ") + actionLiteral(a);
  return text + "}";
}

std::string streamLiteral(const rt::StreamInfo &entry) {
  [[maybe_unused]] const auto &[f0, f1, f2, f3] = entry;
  return Fields()
      .add(FIELD(StreamInfo, prologue), actionList(entry.prologue))
      .add(FIELD(StreamInfo, body), actionList(entry.body), ",\n      ")
      .add(FIELD(StreamInfo, epilogue), actionList(entry.epilogue), ",\n      ")
      .add(FIELD(StreamInfo, minSteps), std::to_string(entry.minSteps))
      .str();
}

/// Assignments of the table's fields to the members of one
/// pp::rt::ProgramInfo variable.
class TableBuilder {
public:
  TableBuilder(OpBuilder &b, Location loc, Value program)
      : b(b), loc(loc), program(program) {}

  /// `program.member = literal;`, the member of C++ type `type`.
  void set(StringRef member, StringRef type, const std::string &literal) {
    Type valueType = opaqueType(b.getContext(), type);
    auto lvalue = emitc::MemberOp::create(
        b, loc, emitc::LValueType::get(valueType), member, program);
    Value value = emitc::LiteralOp::create(b, loc, valueType, literal);
    emitc::AssignOp::create(b, loc, lvalue, value);
  }

private:
  OpBuilder &b;
  Location loc;
  Value program;
};

/// The members of the table that are numbers, names and flags; the ones a
/// program without the feature leaves at their default are not set.
void setScalars(TableBuilder &set, const rt::ProgramInfo &p) {
  set.set(FIELD(ProgramInfo, modelName), "std::string", quote(p.modelName));
  if (!p.lrSchedule.empty())
    set.set(FIELD(ProgramInfo, lrSchedule), "std::string", quote(p.lrSchedule));
  set.set(FIELD(ProgramInfo, scheduleKind), "pp::kinds::ScheduleKind",
          pp::kinds::enumeratorName(p.scheduleKind));
  set.set(FIELD(ProgramInfo, numStages), "int64_t",
          std::to_string(p.numStages));
  set.set(FIELD(ProgramInfo, microBatches), "int64_t",
          std::to_string(p.microBatches));
  if (p.dataParallel > 1)
    set.set(FIELD(ProgramInfo, dataParallel), "int64_t",
            std::to_string(p.dataParallel));
  if (p.tensorParallel > 1)
    set.set(FIELD(ProgramInfo, tensorParallel), "int64_t",
            std::to_string(p.tensorParallel));
  if (!p.stageTensorParallel.empty())
    set.set(FIELD(ProgramInfo, stageTensorParallel), "std::vector<int64_t>",
            intList(p.stageTensorParallel));
  if (p.updateEvery > 0)
    set.set(FIELD(ProgramInfo, updateEvery), "int64_t",
            std::to_string(p.updateEvery));
  if (p.staleness >= 0) {
    set.set(FIELD(ProgramInfo, staleness), "int64_t",
            std::to_string(p.staleness));
    set.set(FIELD(ProgramInfo, wave), "int64_t", std::to_string(p.wave));
  }
  if (!p.stageLinks.empty())
    set.set(FIELD(ProgramInfo, stageLinks),
            "std::vector<std::pair<int64_t, int64_t>>",
            listOf(ArrayRef(p.stageLinks),
                   [](const std::pair<int64_t, int64_t> &link) {
                     return "{" + std::to_string(link.first) + ", " +
                            std::to_string(link.second) + "}";
                   }));
  set.set(FIELD(ProgramInfo, messagesInSendOrder), "bool",
          p.messagesInSendOrder ? "true" : "false");
  auto names = [](ArrayRef<std::string> names) {
    return listOf(names, [](const std::string &name) { return quote(name); });
  };
  if (!p.replicaDeviceNames.empty())
    set.set(FIELD(ProgramInfo, replicaDeviceNames), "std::vector<std::string>",
            names(p.replicaDeviceNames));
  set.set(FIELD(ProgramInfo, dataFile), "std::string", quote(p.dataFile));
  set.set(FIELD(ProgramInfo, onnxFile), "std::string", quote(p.onnxFile));
  if (!p.onnxFile.empty())
    set.set(FIELD(ProgramInfo, onnxHash), "uint32_t",
            std::to_string(p.onnxHash));
  // The identity the driver checks the data file and checkpoints against.
  set.set(FIELD(ProgramInfo, dataHash), "uint32_t", std::to_string(p.dataHash));
  set.set(FIELD(ProgramInfo, codeHash), "uint32_t", std::to_string(p.codeHash));
  set.set(FIELD(ProgramInfo, deviceNames), "std::vector<std::string>",
          names(p.deviceNames));
  set.set(FIELD(ProgramInfo, plannedPeakBytes), "std::vector<int64_t>",
          intList(p.plannedPeakBytes));
  set.set(FIELD(ProgramInfo, plannedBusyNanos), "std::vector<int64_t>",
          intList(p.plannedBusyNanos));
}

/// The members of the table that are lists of entries.
void setEntries(TableBuilder &set, const rt::ProgramInfo &p) {
  set.set(FIELD(ProgramInfo, globals), "std::vector<pp::rt::GlobalInfo>",
          listOf(ArrayRef(p.globals), globalLiteral));
  set.set(FIELD(ProgramInfo, constants), "std::vector<pp::rt::ConstantInfo>",
          listOf(ArrayRef(p.constants), constantLiteral));
  set.set(FIELD(ProgramInfo, inputs), "std::vector<pp::rt::InputInfo>",
          listOf(ArrayRef(p.inputs), inputLiteral));
  set.set(FIELD(ProgramInfo, outputs), "std::vector<pp::rt::OutputInfo>",
          listOf(ArrayRef(p.outputs), outputLiteral));
  set.set(FIELD(ProgramInfo, functions), "std::vector<pp::rt::FunctionInfo>",
          listOf(ArrayRef(p.functions), functionLiteral));
  set.set(FIELD(ProgramInfo, stageGlobals), "std::vector<std::vector<int>>",
          listOf(ArrayRef(p.stageGlobals), [](const std::vector<int> &ids) {
            return intList(SmallVector<int64_t>(ids.begin(), ids.end()));
          }));
  set.set(FIELD(ProgramInfo, schedule),
          "std::vector<std::vector<pp::rt::ActionInfo>>",
          listOf(ArrayRef(p.schedule), actionList));
  if (!p.replicaSchedules.empty())
    set.set(FIELD(ProgramInfo, replicaSchedules),
            "std::vector<std::vector<std::vector<pp::rt::ActionInfo>>>",
            listOf(ArrayRef(p.replicaSchedules),
                   [](const std::vector<std::vector<rt::ActionInfo>> &list) {
                     return listOf(ArrayRef(list), actionList);
                   }));
  if (!p.stream.empty())
    set.set(FIELD(ProgramInfo, stream), "std::vector<pp::rt::StreamInfo>",
            listOf(ArrayRef(p.stream), streamLiteral));
}

/// `static pp::rt::ProgramInfo makeProgram()`: a variable, every field of
/// `p` that is not at its default assigned, returned.
void buildTableFunction(OpBuilder &b, Location loc, const rt::ProgramInfo &p) {
  // One name a field of ProgramInfo: see "The table's fields by name".
  [[maybe_unused]] const auto &[f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10,
                                f11, f12, f13, f14, f15, f16, f17, f18, f19,
                                f20, f21, f22, f23, f24, f25, f26, f27, f28,
                                f29, f30] = p;
  MLIRContext *context = b.getContext();
  Type infoType = opaqueType(context, "pp::rt::ProgramInfo");
  auto fn = emitc::FuncOp::create(b, loc, "makeProgram",
                                  b.getFunctionType({}, {infoType}));
  fn.setSpecifiersAttr(b.getStrArrayAttr({"static"}));
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(fn.addEntryBlock());
  Value program =
      emitc::VariableOp::create(b, loc, emitc::LValueType::get(infoType),
                                emitc::OpaqueAttr::get(context, ""));
  TableBuilder set(b, loc, program);
  setScalars(set, p);
  setEntries(set, p);
  Value result = emitc::LoadOp::create(b, loc, infoType, program);
  emitc::ReturnOp::create(b, loc, result);
}

#undef FIELD

/// int main(int argc, char **argv): the training driver on the table.
void buildMain(OpBuilder &b, Location loc) {
  MLIRContext *context = b.getContext();
  Type intType = opaqueType(context, "int");
  Type argvType = emitc::PointerType::get(
      emitc::PointerType::get(opaqueType(context, "char")));
  Type infoType = opaqueType(context, "pp::rt::ProgramInfo");
  auto fn = emitc::FuncOp::create(
      b, loc, "main", b.getFunctionType({intType, argvType}, {intType}));
  OpBuilder::InsertionGuard guard(b);
  Block *entry = fn.addEntryBlock();
  b.setInsertionPointToStart(entry);
  Value program = emitc::CallOp::create(b, loc, StringRef("makeProgram"),
                                        TypeRange{infoType}, ValueRange{})
                      .getResult(0);
  Value status =
      emitc::CallOpaqueOp::create(
          b, loc, TypeRange{intType}, "pp::rt::trainMain",
          ValueRange{program, entry->getArgument(0), entry->getArgument(1)})
          .getResult(0);
  emitc::ReturnOp::create(b, loc, status);
}

} // namespace

LogicalResult
pp::emitc_lowering::buildProgram(ModuleOp module, ProgramTable &table,
                                 const EmitProgramOptions &options) {
  if (failed(resolveIds(module, table)))
    return failure();
  // What is left of the pipeline module: globals, the schedule, functions
  // that are not stages.
  for (Operation &op : llvm::make_early_inc_range(*module.getBody()))
    if (op.getDialect() == nullptr ||
        !isa<emitc::EmitCDialect>(op.getDialect()))
      op.erase();
  for (NamedAttribute attr : llvm::to_vector(module->getAttrs()))
    module->removeAttr(attr.getName());
  for (StringRef name : {"makeProgram", "main"})
    if (SymbolTable::lookupSymbolIn(module, name))
      return module.emitError()
             << "a stage function may not be named '" << name << "'";

  // The stage code (all that is left), as MLIR text: its CRC-32C is the
  // program's code identity.
  std::string code;
  llvm::raw_string_ostream codeStream(code);
  module.print(codeStream);
  uint32_t codeHash = pp::rt::crc32c(0, code.data(), code.size());

  Location loc = module.getLoc();
  OpBuilder b(module.getContext());
  b.setInsertionPointToStart(module.getBody());
  emitc::VerbatimOp::create(
      b, loc,
      b.getStringAttr("// Generated by pipeline-opt: the stage functions of "
                      "a pipelined training step and its schedule."));
  emitc::IncludeOp::create(b, loc, "pp/Runtime/Generated.h",
                           /*isStandardInclude=*/false);
  emitc::IncludeOp::create(b, loc, "limits", /*isStandardInclude=*/true);
  b.setInsertionPointToEnd(module.getBody());
  table.dataFile = options.dataFileName;
  table.onnxFile = options.onnxFileName;
  table.onnxHash = options.onnxHash;
  table.dataHash =
      pp::rt::crc32c(0, table.dataBytes.data(), table.dataBytes.size());
  table.codeHash = codeHash;
  buildTableFunction(b, loc, table);
  buildMain(b, loc);
  return success();
}
