//===- SplitStages.cpp - Outline pipeline stages into functions -*- C++ -*-===//
//
// Turns a partitioned training step into per-stage programs. Every op of
// the step gets a (stage, phase) home: forward ops keep the stage the
// partitioner gave them, backward ops the stage autodiff copied from their
// forward op, optimizer ops the stage of the gradient they consume. Ops are
// then cloned, in their original order, into the function of their home;
// an operand whose home differs is fetched by `valueIn`, which inserts the
// transfer that bridges the two homes (send/recv, stash/unstash,
// accumulate/accumulated). Constants, global reads and the step counter are
// cheap and stage-independent, so they are re-materialised where used, as
// are the casts and transposes of them.
//
//===----------------------------------------------------------------------===//

#include "pp/Dialect/ONNX/IR/ONNXOps.h"
#include "pp/Dialect/PP/IR/PPOps.h"
#include "pp/Dialect/PP/Transforms/Transforms.h"
#include "pp/Dialect/Train/IR/TrainOps.h"
#include "pp/Support/InputLimits.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"

using namespace mlir;
namespace onnx = pp::onnx;
namespace train = pp::train;
namespace pipeline = pp::pipeline;

namespace {

using Phase = pp::kinds::Phase;
using pp::kinds::toString;

bool isBackward(Phase phase) {
  return phase == Phase::Backward || phase == Phase::BackwardInput ||
         phase == Phase::BackwardWeight;
}

/// Where an op of the step runs. Re-materialised ops (constants, global
/// reads, the step counter) have no home: they are cloned into every
/// function that uses them.
struct Home {
  int64_t stage = 0;
  Phase phase = Phase::Forward;
  bool rematerialised = false;
  /// A write of a re-materialised value (the step counter): every stage.
  bool everyStage = false;
};

struct StageFunction {
  func::FuncOp func;
  OpBuilder builder;
  Value microBatch;
  IRMapping mapping;
};

class Splitter {
public:
  Splitter(ModuleOp module, func::FuncOp step, int64_t microBatches,
           bool splitBackward)
      : module(module), step(step), microBatches(microBatches),
        splitBackward(splitBackward), ctx(module.getContext()) {}

  LogicalResult run();

private:
  LogicalResult assignHomes();
  void splitBackwards();
  void createFunctions();
  FailureOr<Value> valueIn(Value value, int64_t stage, Phase phase);
  LogicalResult cloneOp(Operation *op);
  LogicalResult emitOutputs();
  void syncTiedWeights();
  StageFunction &fn(int64_t stage, Phase phase) {
    return *functions[{stage, static_cast<int>(phase)}];
  }
  Value mbOrZero(StageFunction &f);
  Value insertPoint(StageFunction &f);
  int64_t stageOfValue(Value value) {
    Operation *def = value.getDefiningOp();
    return def && homes.count(def) ? homes[def].stage : -1;
  }

  ModuleOp module;
  func::FuncOp step;
  int64_t microBatches;
  bool splitBackward;
  MLIRContext *ctx;
  int64_t numStages = 1;
  Operation *seed = nullptr;
  llvm::DenseMap<Operation *, Home> homes;
  std::map<std::pair<int64_t, int>, std::unique_ptr<StageFunction>> functions;
  // (value, stage, phase) -> the value there.
  llvm::DenseMap<std::tuple<Value, int64_t, int>, Value> fetched;
  llvm::DenseMap<std::pair<int64_t, int64_t>, int64_t> nextSlot;
  int64_t nextTag = 0;
  int64_t nextAccumulator = 0;
  bool lossIsSum = false;
};

LogicalResult Splitter::assignHomes() {
  Block &body = step.getBody().front();
  for (Operation &op : body.without_terminator())
    if (pipeline::isLossSeed(&op))
      seed = &op;
  if (!seed)
    return step.emitError()
           << "no loss gradient seed (pp.loss_seed): run --pp-autodiff on "
              "the partitioned step first";

  bool forward = true;
  for (Operation &op : body.without_terminator()) {
    if (&op == seed)
      forward = false;
    Home home;
    std::optional<int64_t> stageAttr = pipeline::getStage(&op);
    if (isa<onnx::ConstantOp, onnx::GlobalReadOp>(op) && &op != seed) {
      home.rematerialised = true;
      homes[&op] = home;
      continue;
    }
    // A cast or transpose of a weight (mixed precision's 16-bit copy) is
    // one pass over it: made again where used rather than stashed from
    // the forward, a copy of the weight per micro-batch in flight.
    if (isa<onnx::CastOp, onnx::TransposeOp>(op) &&
        llvm::all_of(op.getOperands(), [&](Value v) {
          Operation *def = v.getDefiningOp();
          return def && homes.count(def) && homes[def].rematerialised;
        })) {
      home.rematerialised = true;
      homes[&op] = home;
      continue;
    }
    auto operandHomes = [&](auto predicate) {
      return llvm::any_of(op.getOperands(), [&](Value v) {
        Operation *def = v.getDefiningOp();
        return def && homes.count(def) && predicate(homes[def]);
      });
    };
    auto minOperandStage = [&]() {
      std::optional<int64_t> stage;
      for (Value v : op.getOperands())
        if (Operation *def = v.getDefiningOp();
            def && homes.count(def) && !homes[def].rematerialised)
          stage = stage ? std::min(*stage, homes[def].stage) : homes[def].stage;
      return stage;
    };
    if (auto write = dyn_cast<train::GlobalWriteOp>(op)) {
      // Writes run where their value is made; BatchNorm's running
      // statistics in the forward, optimizer results in the update.
      Operation *def = write.getValue().getDefiningOp();
      if (!def || !homes.count(def))
        return write.emitError() << "writes a value the step does not make";
      home = homes[def];
      if (home.rematerialised) {
        home.rematerialised = false;
        home.everyStage = true;
        home.phase = Phase::Update;
      }
      homes[&op] = home;
      continue;
    }
    if (&op == seed) {
      home.phase = Phase::Backward; // its stage is the loss's (below)
    } else if (forward) {
      if (!stageAttr)
        return op.emitError() << "has no pp.stage: run --pp-partition before "
                                 "--pp-autodiff";
      home.stage = *stageAttr;
      home.phase = Phase::Forward;
    } else if (isa<train::SGDOp, train::AdamOp>(op)) {
      Value grad = isa<train::SGDOp>(op) ? cast<train::SGDOp>(op).getGrad()
                                         : cast<train::AdamOp>(op).getGrad();
      home.phase = Phase::Update;
      // A constant (zero) gradient has no stage of its own.
      home.stage = std::max<int64_t>(stageOfValue(grad), 0);
    } else if (pipeline::isEveryStage(&op)) {
      home.phase = Phase::Update;
      home.everyStage = true;
    } else if (operandHomes([](const Home &h) {
                 return !h.rematerialised && h.phase == Phase::Update;
               })) {
      // Where the optimizer placed it (a skipped step's select of a
      // stage's weight), else by its operands.
      home.phase = Phase::Update;
      home.stage = stageAttr ? *stageAttr : *minOperandStage();
    } else if (&op != seed && isMemoryEffectFree(&op) &&
               llvm::all_of(op.getOperands(), [&](Value v) {
                 Operation *def = v.getDefiningOp();
                 return def && homes.count(def) && homes[def].rematerialised;
               })) {
      home.rematerialised = true;
    } else {
      home.phase = Phase::Backward;
      if (stageAttr)
        home.stage = *stageAttr;
      else if (auto stage = minOperandStage())
        home.stage = *stage;
      else
        return op.emitError() << "backward op of unknown stage";
    }
    homes[&op] = home;
  }
  // The seed's stage is the loss's.
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  for (unsigned i = 0; i < step.getNumResults(); ++i)
    if (pipeline::isLossResult(step, i)) {
      Value loss = ret.getOperand(i);
      homes[seed].stage = std::max<int64_t>(stageOfValue(loss), 0);
      if (auto reduction =
              loss.getDefiningOp()
                  ? loss.getDefiningOp()->getAttrOfType<StringAttr>("reduction")
                  : StringAttr())
        lossIsSum = reduction.getValue() == "sum";
    }
  for (auto &[op, home] : homes)
    if (!home.rematerialised)
      numStages = std::max(numStages, home.stage + 1);
  if (pipeline::PlanAttr plan = pipeline::getPlan(module))
    numStages = std::max<int64_t>(numStages, plan.getNumStages());
  return success();
}

/// Zero-bubble: a stage's input-gradient part is what the earlier stages
/// wait for (the ancestors of the gradients it sends); the rest, weight
/// gradients, can run later.
void Splitter::splitBackwards() {
  Block &body = step.getBody().front();
  llvm::DenseSet<Operation *> inputPart;
  SmallVector<Operation *> ops;
  for (Operation &op : body.without_terminator())
    ops.push_back(&op);
  for (Operation *op : llvm::reverse(ops)) {
    Home &home = homes[op];
    if (home.rematerialised || !isBackward(home.phase))
      continue;
    bool critical = inputPart.contains(op);
    for (Operation *user : op->getUsers())
      if (homes.count(user) && !homes[user].rematerialised &&
          isBackward(homes[user].phase) && homes[user].stage != home.stage)
        critical = true;
    if (!critical)
      continue;
    inputPart.insert(op);
    for (Value v : op->getOperands())
      if (Operation *def = v.getDefiningOp(); def && homes.count(def) &&
                                              isBackward(homes[def].phase) &&
                                              homes[def].stage == home.stage)
        inputPart.insert(def);
  }
  for (Operation *op : ops) {
    Home &home = homes[op];
    if (!home.rematerialised && isBackward(home.phase))
      home.phase =
          inputPart.contains(op) ? Phase::BackwardInput : Phase::BackwardWeight;
  }
}

void Splitter::createFunctions() {
  OpBuilder moduleBuilder(ctx);
  moduleBuilder.setInsertionPoint(step);
  auto mbType = RankedTensorType::get({}, IntegerType::get(ctx, 64));
  SmallVector<Phase> phases = {Phase::Forward};
  if (splitBackward)
    phases.append({Phase::BackwardInput, Phase::BackwardWeight});
  else
    phases.push_back(Phase::Backward);
  phases.push_back(Phase::Update);
  for (int64_t s = 0; s < numStages; ++s)
    for (Phase phase : phases) {
      bool perMicroBatch = phase != Phase::Update;
      auto type = FunctionType::get(
          ctx, perMicroBatch ? TypeRange(mbType) : TypeRange(), {});
      std::string name =
          ("stage" + llvm::Twine(s) + "_" + toString(phase)).str();
      auto func =
          func::FuncOp::create(moduleBuilder, step.getLoc(), name, type);
      pipeline::setStage(func, s);
      pipeline::setPhase(func, phase);
      if (perMicroBatch)
        pipeline::setMicroBatchArg(func, 0);
      Block *block = func.addEntryBlock();
      auto f = std::make_unique<StageFunction>(
          StageFunction{func,
                        OpBuilder::atBlockEnd(block),
                        perMicroBatch ? block->getArgument(0) : Value(),
                        {}});
      functions[{s, static_cast<int>(phase)}] = std::move(f);
    }
}

Value Splitter::mbOrZero(StageFunction &f) {
  if (f.microBatch)
    return f.microBatch;
  // Per-step transfers (the update) are addressed as micro-batch 0.
  auto type = RankedTensorType::get({}, IntegerType::get(ctx, 64));
  f.microBatch = onnx::ConstantOp::create(
      f.builder, step.getLoc(),
      DenseElementsAttr::get(type, f.builder.getI64IntegerAttr(0)));
  return f.microBatch;
}

FailureOr<Value> Splitter::valueIn(Value value, int64_t stage, Phase phase) {
  auto key = std::make_tuple(value, stage, static_cast<int>(phase));
  if (Value known = fetched.lookup(key))
    return known;
  StageFunction &here = fn(stage, phase);
  Location loc = value.getLoc();
  Value result;

  if (auto arg = dyn_cast<BlockArgument>(value)) {
    if (phase == Phase::Update)
      return step.emitError()
             << "the update of stage " << stage << " reads input "
             << arg.getArgNumber() << ", which only micro-batches have";
    result = pipeline::InputOp::create(
        here.builder, loc, arg.getType(), here.microBatch,
        here.builder.getI64IntegerAttr(arg.getArgNumber()));
    fetched[key] = result;
    return result;
  }

  Operation *def = value.getDefiningOp();
  Home home = homes.lookup(def);
  auto makeSendRecv = [&](StageFunction &from, int64_t fromStage, Value sent,
                          StageFunction &to, int64_t toStage) -> Value {
    int64_t tag = nextTag++;
    pipeline::SendOp::create(from.builder, loc, sent, mbOrZero(from),
                             from.builder.getI64IntegerAttr(toStage),
                             from.builder.getI64IntegerAttr(tag));
    return pipeline::RecvOp::create(to.builder, loc, sent.getType(),
                                    mbOrZero(to),
                                    to.builder.getI64IntegerAttr(fromStage),
                                    to.builder.getI64IntegerAttr(tag));
  };
  auto stash = [&](Value kept, int64_t atStage) -> Value {
    int64_t slot = nextSlot[{atStage, 0}]++;
    StageFunction &keeper =
        fn(atStage, homes[def].phase == Phase::Forward ? Phase::Forward
                                                       : Phase::BackwardInput);
    pipeline::StashOp::create(keeper.builder, loc, kept, keeper.microBatch,
                              keeper.builder.getI64IntegerAttr(slot));
    return pipeline::UnstashOp::create(here.builder, loc, kept.getType(),
                                       here.microBatch,
                                       here.builder.getI64IntegerAttr(slot));
  };

  if (home.rematerialised) {
    IRMapping mapping;
    for (Value operand : def->getOperands()) {
      auto local = valueIn(operand, stage, phase);
      if (failed(local))
        return failure();
      mapping.map(operand, *local);
    }
    Operation *clone = here.builder.clone(*def, mapping);
    pipeline::removeStage(clone);
    if (def == seed || pipeline::isLossSeed(def))
      pipeline::removeLossSeed(clone);
    for (auto [original, cloned] :
         llvm::zip(def->getResults(), clone->getResults()))
      fetched[std::make_tuple(original, stage, static_cast<int>(phase))] =
          cloned;
    return fetched.lookup(key);
  }

  if ((home.stage == stage || home.everyStage) && home.phase == phase)
    return here.mapping.lookup(value);

  auto unsupported = [&]() {
    return def->emitError()
           << "pp-split-stages: a " << toString(phase) << " op of stage "
           << stage << " uses this " << toString(home.phase)
           << " value of stage " << home.stage << ", which no transfer carries";
  };

  if (home.phase == Phase::Forward) {
    if (phase == Phase::Forward) {
      // An activation for a later stage.
      Value sent = fn(home.stage, Phase::Forward).mapping.lookup(value);
      result = makeSendRecv(fn(home.stage, Phase::Forward), home.stage, sent,
                            here, stage);
    } else if (isBackward(phase)) {
      auto kept = valueIn(value, stage, Phase::Forward);
      if (failed(kept))
        return failure();
      int64_t slot = nextSlot[{stage, 0}]++;
      StageFunction &fwd = fn(stage, Phase::Forward);
      pipeline::StashOp::create(fwd.builder, loc, *kept, fwd.microBatch,
                                fwd.builder.getI64IntegerAttr(slot));
      result = pipeline::UnstashOp::create(
          here.builder, loc, kept->getType(), here.microBatch,
          here.builder.getI64IntegerAttr(slot));
    } else {
      return unsupported();
    }
  } else if (isBackward(home.phase)) {
    if (isBackward(phase)) {
      Phase arrival = splitBackward ? Phase::BackwardInput : Phase::Backward;
      if (home.stage == stage) {
        if (home.phase != Phase::BackwardInput ||
            phase != Phase::BackwardWeight)
          return unsupported();
        result = stash(fn(stage, home.phase).mapping.lookup(value), stage);
      } else if (phase == arrival) {
        Value sent = fn(home.stage, home.phase).mapping.lookup(value);
        result = makeSendRecv(fn(home.stage, home.phase), home.stage, sent,
                              here, stage);
      } else {
        auto arrived = valueIn(value, stage, arrival);
        if (failed(arrived))
          return failure();
        int64_t slot = nextSlot[{stage, 0}]++;
        StageFunction &b = fn(stage, arrival);
        pipeline::StashOp::create(b.builder, loc, *arrived, b.microBatch,
                                  b.builder.getI64IntegerAttr(slot));
        result = pipeline::UnstashOp::create(
            here.builder, loc, arrived->getType(), here.microBatch,
            here.builder.getI64IntegerAttr(slot));
      }
    } else if (phase == Phase::Update && home.stage == stage) {
      // A gradient: summed over the step's micro-batches.
      int64_t slot = nextAccumulator++;
      StageFunction &b = fn(home.stage, home.phase);
      pipeline::AccumulateOp::create(b.builder, loc, b.mapping.lookup(value),
                                     b.builder.getI64IntegerAttr(slot));
      result =
          pipeline::AccumulatedOp::create(here.builder, loc, value.getType(),
                                          here.builder.getI64IntegerAttr(slot));
    } else {
      return unsupported();
    }
  } else if (home.phase == Phase::Update && phase == Phase::Update) {
    Value sent = fn(home.stage, Phase::Update).mapping.lookup(value);
    result = makeSendRecv(fn(home.stage, Phase::Update), home.stage, sent, here,
                          stage);
  } else {
    return unsupported();
  }
  fetched[key] = result;
  return result;
}

LogicalResult Splitter::cloneOp(Operation *op) {
  Home home = homes[op];
  SmallVector<int64_t> stages;
  if (home.everyStage) {
    for (int64_t s = 0; s < numStages; ++s)
      stages.push_back(s);
  } else {
    stages.push_back(home.stage);
  }
  for (int64_t stage : stages) {
    StageFunction &f = fn(stage, home.phase);
    IRMapping operands;
    for (Value operand : op->getOperands()) {
      auto local = valueIn(operand, stage, home.phase);
      if (failed(local))
        return failure();
      operands.map(operand, *local);
    }
    Operation *clone = f.builder.clone(*op, operands);
    pipeline::removeStage(clone);
    if (op == seed) {
      pipeline::removeLossSeed(clone);
      // The step's loss is the mean over the micro-batches of every
      // data-parallel replica: their gradients are summed. Under WSP each
      // replica trains on its own mean loss (it exchanges updates); under a
      // weight-versioned schedule each update descends the mean loss of its
      // own mini-batch of update_every micro-batches.
      pipeline::PlanAttr plan = pipeline::getPlan(module);
      int64_t parts = plan && plan.isWeightVersioned()
                          ? plan.getUpdateEvery()
                          : microBatches * (plan && !plan.isWaveSynchronous()
                                                ? plan.getDataParallel()
                                                : 1);
      if (!lossIsSum && parts > 1) {
        auto constant = cast<onnx::ConstantOp>(clone);
        auto type = cast<RankedTensorType>(constant.getOutput().getType());
        constant.setValueAttr(DenseElementsAttr::get(
            type, FloatAttr::get(type.getElementType(),
                                 1.0 / static_cast<double>(parts))));
      }
    }
    for (auto [original, cloned] :
         llvm::zip(op->getResults(), clone->getResults()))
      f.mapping.map(original, cloned);
  }
  return success();
}

LogicalResult Splitter::emitOutputs() {
  auto ret = cast<func::ReturnOp>(step.getBody().front().getTerminator());
  for (auto [index, value] : llvm::enumerate(ret.getOperands())) {
    if (pipeline::getGradOf(step, index))
      return step.emitError()
             << "result " << index
             << " is a gradient: run --pp-optimizer before splitting";
    Operation *def = value.getDefiningOp();
    int64_t stage = numStages - 1;
    if (def && homes.count(def) && !homes[def].rematerialised) {
      if (homes[def].phase != Phase::Forward)
        return step.emitError()
               << "result " << index << " is not made by the forward";
      stage = homes[def].stage;
    }
    auto local = valueIn(value, stage, Phase::Forward);
    if (failed(local))
      return failure();
    StageFunction &f = fn(stage, Phase::Forward);
    auto type = cast<RankedTensorType>(value.getType());
    StringRef combine =
        type.getRank() == 0 ? (lossIsSum ? "sum" : "mean") : "concat";
    pipeline::OutputOp::create(f.builder, value.getLoc(), *local, f.microBatch,
                               f.builder.getI64IntegerAttr(index),
                               f.builder.getStringAttr(combine),
                               pipeline::getClassAxis(step, index),
                               pipeline::getIgnoreIndex(step, index));
  }
  return success();
}

/// A weight read by several stages is updated where its gradient is summed;
/// that stage sends the new value to the other holders, which store it.
void Splitter::syncTiedWeights() {
  llvm::DenseMap<StringAttr, llvm::SetVector<int64_t>> readers;
  for (auto &[key, f] : functions)
    f->func.walk([&](onnx::GlobalReadOp read) {
      readers[read.getGlobalAttr().getAttr()].insert(key.first);
    });
  // The optimizer's writes, gathered before any copy is added.
  SmallVector<std::pair<int64_t, train::GlobalWriteOp>> writes;
  for (int64_t s = 0; s < numStages; ++s)
    fn(s, Phase::Update).func.walk([&](train::GlobalWriteOp w) {
      writes.push_back({s, w});
    });
  // The written globals exist before the loop (what it adds is never
  // looked up here).
  SymbolTable symbols(module);
  for (auto [s, write] : writes) {
    auto global =
        symbols.lookup<onnx::GlobalOp>(write.getGlobalAttr().getAttr());
    if (!global || global.getKind() != onnx::kTrainable)
      continue;
    StageFunction &update = fn(s, Phase::Update);
    for (int64_t other : readers[write.getGlobalAttr().getAttr()]) {
      if (other == s)
        continue;
      StageFunction &holder = fn(other, Phase::Update);
      int64_t tag = nextTag++;
      pipeline::SendOp::create(update.builder, write.getLoc(), write.getValue(),
                               mbOrZero(update),
                               update.builder.getI64IntegerAttr(other),
                               update.builder.getI64IntegerAttr(tag));
      Value received = pipeline::RecvOp::create(
          holder.builder, write.getLoc(), write.getValue().getType(),
          mbOrZero(holder), holder.builder.getI64IntegerAttr(s),
          holder.builder.getI64IntegerAttr(tag));
      train::GlobalWriteOp::create(holder.builder, write.getLoc(),
                                   write.getGlobalAttr(), received);
    }
  }
}

LogicalResult Splitter::run() {
  if (failed(assignHomes()))
    return failure();
  if (splitBackward)
    splitBackwards();
  // Check the inputs split evenly before building anything.
  for (BlockArgument arg : step.getArguments()) {
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    if (!type || type.getRank() == 0)
      return step.emitError() << "input " << arg.getArgNumber()
                              << " has no batch dimension to split";
  }
  createFunctions();
  Block &body = step.getBody().front();
  for (Operation &op : body.without_terminator()) {
    if (homes[&op].rematerialised)
      continue;
    if (failed(cloneOp(&op)))
      return failure();
  }
  if (failed(emitOutputs()))
    return failure();
  syncTiedWeights();
  for (auto &[key, f] : functions)
    func::ReturnOp::create(f->builder, step.getLoc());

  Builder b(ctx);
  SmallVector<Attribute> inputNames, outputNames;
  for (unsigned i = 0; i < step.getNumArguments(); ++i) {
    auto name = step.getArgAttrOfType<StringAttr>(i, "onnx.name");
    inputNames.push_back(name ? name : b.getStringAttr("input" + Twine(i)));
  }
  for (unsigned i = 0; i < step.getNumResults(); ++i) {
    auto name = step.getResultAttrOfType<StringAttr>(i, "onnx.name");
    if (pipeline::isLossResult(step, i))
      name = b.getStringAttr("loss");
    outputNames.push_back(name ? name : b.getStringAttr("output" + Twine(i)));
  }
  pipeline::setInputOutputNames(module, inputNames, outputNames);
  // The plan records the split: without a partition, one stage per device
  // under 1F1B.
  pipeline::PlanAttr plan = pipeline::getPlan(module);
  if (!plan)
    plan = pipeline::PlanAttr::get(ctx, pp::kinds::ScheduleKind::OneFOneB,
                                   microBatches, /*chunks=*/1, numStages,
                                   b.getArrayAttr({}), /*dataParallel=*/1,
                                   /*tensorParallel=*/1, /*staleness=*/-1,
                                   /*wave=*/1, b.getArrayAttr({}),
                                   /*updateEvery=*/0, /*verticalSync=*/false);
  pipeline::setPlan(
      module, plan.withMicroBatches(microBatches).withNumStages(numStages));
  step.erase();
  return success();
}

} // namespace

LogicalResult
pp::pipeline::splitStages(ModuleOp module,
                          const pp::SplitStagesPassOptions &options) {
  auto step = pipeline::lookupFunction(module, options.funcName, "to split");
  if (!step)
    return failure();
  // A tensor-parallel plan runs once --pp-tensor-parallel has split the
  // stages over groups of the plan's degree (a stage-wise mix: the others
  // left whole, on one device).
  if (pipeline::PlanAttr plan = pipeline::getPlan(module);
      plan && plan.getTensorParallel() > 1) {
    DenseI64ArrayAttr stages = pipeline::getTensorParallelStages(module);
    bool runnable =
        !stages || llvm::all_of(stages.asArrayRef(), [&](int64_t degree) {
          return degree == 1 || degree == plan.getTensorParallel();
        });
    auto grids = module.getOps<shard::GridOp>();
    bool split = llvm::any_of(grids, [&](shard::GridOp grid) {
      return grid.getShape() == ArrayRef<int64_t>{plan.getTensorParallel()};
    });
    if (!runnable || !split) {
      module.emitError()
          << "pp-split-stages: the plan has tensor-parallel degree "
          << plan.getTensorParallel()
          << (runnable ? " but the step is not split over a group of that "
                         "size: run --pp-tensor-parallel=tp=N first"
                       : " and stages of other degrees above 1, which are "
                         "planned only (running a mix of 1 and one other "
                         "degree is built)");
      return failure();
    }
  }
  FailureOr<int64_t> m = pipeline::resolveMicroBatches(
      module, options.microBatches, "pp-split-stages");
  if (failed(m))
    return failure();
  Splitter splitter(module, step, *m, options.splitBackward);
  if (failed(splitter.run()))
    return failure();
  return success();
}
