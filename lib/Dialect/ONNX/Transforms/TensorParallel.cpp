//===- TensorParallel.cpp - Megatron shardings as shard annotations -------===//
//
// --pp-tensor-parallel: finds the column-then-row pairs of contractions
// (see Passes.td) and annotates their weights with shard.shard; upstream's
// propagation and partition passes do the rest.
//
//===----------------------------------------------------------------------===//

#include "pp/Analysis/CostModel.h"
#include "pp/Dialect/ONNX/Transforms/Passes.h"
#include "pp/Dialect/ONNX/Transforms/TensorParallelGroups.h"
#include "pp/Dialect/PP/IR/PPOps.h"
#include "pp/Dialect/Train/IR/TrainOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Shard/Transforms/Passes.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Regex.h"

namespace pp {
#define GEN_PASS_DEF_TENSORPARALLELPASS
#include "pp/Dialect/ONNX/Transforms/Passes.h.inc"
} // namespace pp

using namespace mlir;
namespace onnx = pp::onnx;
namespace train = pp::train;

namespace {

/// A Gemm or MatMul of a 2-D weight: the operand that is split and the
/// dimension of it that holds the output (n) or input (k) features.
struct Linear {
  Operation *op = nullptr;
  OpOperand *weight = nullptr;
  OpOperand *bias = nullptr;
  int64_t outputDim = 1, inputDim = 0;
};

bool isWeightDerived(Value value, int depth = 0);

/// The bias operand of the Add that follows a MatMul of a 2-D weight (how
/// torch exports a Linear of a 3-D input): a weight-derived vector of the
/// output features. Annotating it with the weight lets the split pass the
/// Add (upstream's propagation otherwise may make the sum whole).
OpOperand *biasAdd(onnx::MatMulOp matmul) {
  if (!matmul->hasOneUse())
    return nullptr;
  auto add = dyn_cast<onnx::AddOp>(*matmul->user_begin());
  if (!add)
    return nullptr;
  OpOperand &bias = add->getOpOperand(add.getA() == matmul.getResult());
  auto type = cast<RankedTensorType>(bias.get().getType());
  auto weight = cast<RankedTensorType>(matmul.getB().getType());
  if (type.getRank() != 1 || weight.getRank() != 2 ||
      type.getDimSize(0) != weight.getDimSize(1) ||
      !isWeightDerived(bias.get()))
    return nullptr;
  return &bias;
}

std::optional<Linear> asLinear(Operation *op) {
  Linear linear;
  linear.op = op;
  if (auto gemm = dyn_cast<onnx::GemmOp>(op)) {
    if (gemm.getTransA())
      return std::nullopt;
    linear.weight = &gemm->getOpOperand(1);
    if (gemm.getC())
      linear.bias = &gemm->getOpOperand(2);
    if (gemm.getTransB())
      std::swap(linear.outputDim, linear.inputDim);
  } else if (auto matmul = dyn_cast<onnx::MatMulOp>(op)) {
    linear.weight = &matmul->getOpOperand(1);
    linear.bias = biasAdd(matmul);
  } else {
    return std::nullopt;
  }
  if (cast<RankedTensorType>(linear.weight->get().getType()).getRank() != 2)
    return std::nullopt;
  return linear;
}

/// Ops that compute each element from the same element of their operands
/// (ONNX broadcasting aside): a split passes through them.
bool isElementwise(Operation *op) {
  return op->hasTrait<onnx::OpTrait::UnaryKernel>() ||
         isa<onnx::IdentityOp, onnx::AddOp, onnx::SubOp, onnx::MulOp,
             onnx::DivOp, onnx::PowOp, onnx::ModOp, onnx::MaxOp, onnx::MinOp>(
             op);
}

/// Whether `value` is computed from constants and weight reads alone (a
/// slice of a fused bias, a transposed weight).
bool isWeightDerived(Value value, int depth) {
  Operation *def = value.getDefiningOp();
  if (!def || depth > 8)
    return false;
  if (isa<onnx::ConstantOp, onnx::GlobalReadOp>(def))
    return true;
  return def->getNumOperands() > 0 &&
         llvm::all_of(def->getOperands(), [&](Value operand) {
           return isWeightDerived(operand, depth + 1);
         });
}

/// Whether a Dropout passes its input through: inference mode or ratio 0
/// (both constant).
bool isInert(onnx::DropoutOp dropout) {
  auto source = [](Value value) {
    while (auto annotation = value.getDefiningOp<shard::ShardOp>())
      value = annotation.getSrc();
    return value;
  };
  if (Value mode = dropout.getTrainingMode()) {
    std::optional<SmallVector<int64_t>> training =
        onnx::getConstantInts(source(mode));
    if (training && llvm::all_of(*training, [](int64_t t) { return !t; }))
      return true;
  } else {
    return true;
  }
  DenseFPElementsAttr ratio;
  return dropout.getRatio() &&
         matchPattern(source(dropout.getRatio()), m_Constant(&ratio)) &&
         llvm::all_of(ratio.getValues<APFloat>(),
                      [](const APFloat &r) { return r.isZero(); });
}

/// Ops that a split of the features or of the heads passes through:
/// elementwise ops, the reshapes and transposes between [B, S, H*D] and
/// [B, H, S, D], Softmax over a whole dimension, the batched score and value
/// MatMuls of two split operands, and masking.
bool carriesSplit(Operation *op) {
  return isElementwise(op) ||
         isa<onnx::ReshapeOp, onnx::TransposeOp, onnx::SoftmaxOp,
             onnx::LogSoftmaxOp, onnx::WhereOp, onnx::MatMulOp,
             onnx::DropoutOp>(op);
}

/// The contractions whose results reach `row`'s input only through ops
/// that carry a split (constants and weight reads may join in), when
/// nothing computed on the way is used elsewhere: an MLP's first linear,
/// or attention's Q, K and V projections.
std::optional<SmallVector<Linear>>
precedingColumns(const Linear &row,
                 llvm::SetVector<Operation *> *regionOut = nullptr) {
  SmallVector<Linear> columns;
  llvm::SetVector<Operation *> region;
  SmallVector<Value> worklist = {row.op->getOperand(0)};
  while (!worklist.empty()) {
    Value value = worklist.pop_back_val();
    Operation *def = value.getDefiningOp();
    if (!def)
      return std::nullopt; // a function argument
    if (isWeightDerived(value) || region.contains(def))
      continue;
    region.insert(def);
    if (std::optional<Linear> column = asLinear(def)) {
      columns.push_back(*column);
      continue;
    }
    if (!carriesSplit(def))
      return std::nullopt;
    llvm::append_range(worklist, def->getOperands());
  }
  for (Operation *op : region)
    for (Operation *user : op->getUsers())
      if (user != row.op && !region.contains(user))
        return std::nullopt;
  if (columns.empty())
    return std::nullopt;
  if (regionOut)
    *regionOut = std::move(region);
  return columns;
}

/// A Megatron group: the column-parallel contractions, the row-parallel
/// one, and the ops carrying the split between them.
struct Pair {
  SmallVector<Linear> columns;
  Linear row;
  llvm::SetVector<Operation *> region;
};

/// The groups of `func` that split over `tp` devices, in op order, leaving
/// out those with an op in `excluded` (pinned ones, those of stages left
/// whole); `onWhole(row, column,
/// features)` is told of each group whose features `tp` does not divide (it
/// stays whole).
SmallVector<Pair> groupPairs(
    func::FuncOp func, int64_t tp, const llvm::DenseSet<Operation *> &excluded,
    llvm::function_ref<void(const Linear &, const Linear &, int64_t)> onWhole) {
  llvm::DenseSet<Operation *> used;
  SmallVector<Pair> groups;
  func.walk([&](Operation *op) {
    std::optional<Linear> row = asLinear(op);
    if (!row || used.contains(op) || excluded.contains(op))
      return;
    llvm::SetVector<Operation *> region;
    std::optional<SmallVector<Linear>> columns =
        precedingColumns(*row, &region);
    if (!columns ||
        llvm::any_of(*columns,
                     [&](const Linear &column) {
                       return used.contains(column.op) ||
                              excluded.contains(column.op);
                     }) ||
        llvm::any_of(region, [&](Operation *between) {
          return excluded.contains(between);
        }))
      return;
    auto rowWeight = cast<RankedTensorType>(row->weight->get().getType());
    for (const Linear &column : *columns) {
      auto weight = cast<RankedTensorType>(column.weight->get().getType());
      int64_t features = weight.getDimSize(column.outputDim);
      if (features % tp != 0 || rowWeight.getDimSize(row->inputDim) % tp) {
        onWhole(*row, column, features);
        return;
      }
    }
    used.insert(op);
    for (const Linear &column : *columns)
      used.insert(column.op);
    groups.push_back({*columns, *row, std::move(region)});
  });
  return groups;
}

struct TensorParallelPass
    : public pp::impl::TensorParallelPassBase<TensorParallelPass> {
  using TensorParallelPassBase::TensorParallelPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (tp < 1) {
      module.emitError() << "pp-tensor-parallel: tp must be >= 1, got "
                         << int64_t(tp);
      return signalPassFailure();
    }
    if (tp == 1)
      return;
    pinned.clear();
    markedFunctions.clear();
    if (failed(collectWholeStages(module)))
      return signalPassFailure();
    if (failed(declareGrid(module)))
      return signalPassFailure();
    FailureOr<SmallVector<Pin>> parsedPins = parsePins(module);
    if (failed(parsedPins))
      return signalPassFailure();
    module.walk([&](func::FuncOp func) { moveWeightOpsToUsers(func); });
    SmallVector<func::FuncOp> annotated;
    bool pinFailed = false;
    module.walk([&](func::FuncOp func) {
      FailureOr<bool> pinned = annotatePins(func, *parsedPins);
      pinFailed |= failed(pinned);
      if (succeeded(pinned) && (annotatePairs(func) || *pinned))
        annotated.push_back(func);
    });
    if (pinFailed)
      return signalPassFailure();
    for (const Pin &pin : *parsedPins)
      if (!pin.matched) {
        module.emitError() << "pp-tensor-parallel: pin pattern '" << pin.pattern
                           << "' matches no op";
        return signalPassFailure();
      }
    if (!partition)
      return;
    for (func::FuncOp func : annotated)
      if (failed(partitionFunction(func)))
        return signalPassFailure();
  }

  /// Upstream's propagation, then its partition once every op is fully
  /// annotated (upstream's own check only asserts).
  LogicalResult partitionFunction(func::FuncOp func) {
    OpPassManager propagate(func::FuncOp::getOperationName());
    // Forward first: the splits start at the annotated weights and flow
    // with the data (a backward pass first can fix a value whole before
    // the split reaches it).
    shard::ShardingPropagationOptions order;
    order.traversal = shard::TraversalOrder::ForwardBackward;
    propagate.addPass(shard::createShardingPropagation(order));
    if (failed(runPipeline(propagate, func)))
      return failure();
    annotateTheRestWhole(func);
    if (failed(checkFullyAnnotated(func)))
      return failure();
    markWholeInputsOfSplitOps(func);
    OpPassManager split(func::FuncOp::getOperationName());
    split.addPass(shard::createPartition());
    if (failed(runPipeline(split, func)))
      return failure();
    keepPipelineStages(func);
    return success();
  }

  /// In a function --pp-partition split into stages, an op computed from
  /// weights and constants alone (a transposed weight) joins the earliest
  /// stage of its users: split, it is a slice of this stage's group, which
  /// a stage of another degree cannot compute (nor should it be sent).
  static void moveWeightOpsToUsers(func::FuncOp func) {
    Block &body = func.getBody().front();
    for (Operation &op : llvm::reverse(body.without_terminator())) {
      if (!pp::pipeline::getStage(&op) || op.use_empty() ||
          (!isa<onnx::ConstantOp, onnx::GlobalReadOp>(op) &&
           !llvm::all_of(op.getResults(),
                         [](Value result) { return isWeightDerived(result); })))
        continue;
      std::optional<int64_t> first;
      for (Operation *user : op.getUsers()) {
        std::optional<int64_t> stage = pp::pipeline::getStage(user);
        if (!stage) {
          first.reset();
          break;
        }
        first = first ? std::min(*first, *stage) : *stage;
      }
      if (first)
        pp::pipeline::setStage(&op, *first);
    }
  }

  /// A function that --pp-partition already split into pipeline stages
  /// keeps every op on one: the ops partitioning made (collectives, slices,
  /// rebuilt reshapes and contractions) join the latest stage of their
  /// activation operands, or, computed from weights and constants alone,
  /// the earliest of their users.
  static void keepPipelineStages(func::FuncOp func) {
    bool staged = false;
    func.walk([&](Operation *op) {
      staged |= pp::pipeline::getStage(op).has_value();
    });
    if (!staged)
      return;
    auto needsStage = [](Operation &op) {
      return !isa<onnx::ConstantOp, onnx::GlobalReadOp, func::ReturnOp>(op) &&
             !pp::pipeline::getStage(&op);
    };
    Block &body = func.getBody().front();
    SmallVector<Operation *> fromUsers;
    for (Operation &op : body) {
      if (!needsStage(op))
        continue;
      // Weight reads and constants do not count: a slice of a weight
      // belongs with its users (the weight may be read on a stage that
      // stays whole).
      std::optional<int64_t> stage;
      for (Value operand : op.getOperands())
        if (Operation *def = operand.getDefiningOp())
          if (std::optional<int64_t> s = pp::pipeline::getStage(def);
              s && !isa<onnx::ConstantOp, onnx::GlobalReadOp>(def))
            stage = stage ? std::max(*stage, *s) : *s;
      if (stage)
        pp::pipeline::setStage(&op, *stage);
      else
        fromUsers.push_back(&op);
    }
    for (Operation *op : llvm::reverse(fromUsers)) {
      std::optional<int64_t> stage;
      for (Operation *user : op->getUsers())
        if (std::optional<int64_t> s = pp::pipeline::getStage(user))
          stage = stage ? std::min(*stage, *s) : *s;
      pp::pipeline::setStage(op, stage.value_or(0));
    }
  }

  /// Megatron's f: an op that computes a split result from a whole
  /// activation (a column-parallel contraction's input) gives each device
  /// only its part's share of that activation's gradient; marks such
  /// operands for --pp-autodiff, which sums their gradients over the group.
  /// Weights and constants are left out: a weight reaches a split op
  /// through shard.all_slice, whose gradient rule gathers.
  void markWholeInputsOfSplitOps(func::FuncOp func) {
    auto shardingOf = [](Value value) -> std::optional<shard::Sharding> {
      auto annotation = value.getDefiningOp<shard::ShardOp>();
      if (!annotation)
        return std::nullopt;
      return shard::Sharding(annotation.getSharding());
    };
    auto source = [](Value value) {
      while (auto annotation = value.getDefiningOp<shard::ShardOp>())
        value = annotation.getSrc();
      return value;
    };
    func.walk([&](Operation *op) {
      if (isa<shard::ShardOp, shard::ShardingOp, onnx::ConstantOp, func::FuncOp,
              func::ReturnOp>(op))
        return;
      bool splitResult = llvm::any_of(op->getResults(), [](Value result) {
        if (!result.hasOneUse())
          return false;
        auto annotation = dyn_cast<shard::ShardOp>(*result.user_begin());
        return annotation && !shard::isFullReplication(
                                 shard::Sharding(annotation.getSharding()));
      });
      if (!splitResult)
        return;
      train::GradAllReduce reduce;
      for (OpOperand &operand : op->getOpOperands()) {
        std::optional<shard::Sharding> sharding = shardingOf(operand.get());
        Value input = source(operand.get());
        if (!sharding || !shard::isFullReplication(*sharding) ||
            !isa<FloatType>(getElementTypeOrSelf(input.getType())) ||
            isWeightDerived(input))
          continue;
        reduce.operands.push_back(operand.getOperandNumber());
      }
      if (reduce.operands.empty())
        return;
      reduce.grid = FlatSymbolRefAttr::get(func.getContext(), gridName);
      reduce.axes = {0};
      train::setGradAllReduce(op, reduce);
    });
  }

  /// Values that propagation left unannotated are whole on every device
  /// (no split reached them): annotated so, as partitioning needs every
  /// tensor of rank > 0 annotated. A split value that reaches such an op
  /// then needs gathering, which checkFullyAnnotated reports.
  void annotateTheRestWhole(func::FuncOp func) {
    OpBuilder b(func.getContext());
    auto whole = [&](Location loc) {
      return shard::ShardingOp::create(
          b, loc, FlatSymbolRefAttr::get(func.getContext(), gridName),
          ArrayRef<shard::GridAxesAttr>{});
    };
    auto ranked = [](Value v) {
      auto type = dyn_cast<RankedTensorType>(v.getType());
      return type && type.getRank() > 0;
    };
    SmallVector<Operation *> ops;
    func.walk([&](Operation *op) {
      if (!isa<shard::ShardOp, shard::ShardingOp, func::FuncOp, func::ReturnOp>(
              op))
        ops.push_back(op);
    });
    for (Operation *op : ops) {
      for (OpResult result : op->getResults()) {
        if (!ranked(result) || result.use_empty() ||
            llvm::any_of(result.getUsers(), llvm::IsaPred<shard::ShardOp>))
          continue;
        b.setInsertionPointAfter(op);
        auto annotation =
            shard::ShardOp::create(b, op->getLoc(), result, whole(op->getLoc()),
                                   /*annotate_for_users=*/
                                   UnitAttr());
        result.replaceAllUsesExcept(annotation, annotation);
      }
      if (isa<onnx::ConstantOp>(op))
        continue;
      for (OpOperand &operand : op->getOpOperands()) {
        auto source = operand.get().getDefiningOp<shard::ShardOp>();
        if (!ranked(operand.get()) || (source && source.getAnnotateForUsers()))
          continue;
        b.setInsertionPoint(op);
        operand.set(shard::ShardOp::create(b, op->getLoc(), operand.get(),
                                           whole(op->getLoc()),
                                           /*annotate_for_users=*/
                                           b.getUnitAttr()));
      }
    }
  }

  /// What partitioning needs of an op (upstream's pass casts without
  /// checking): every tensor operand of rank > 0 comes from a shard.shard
  /// for its users, every used tensor result goes to exactly one
  /// shard.shard.
  static LogicalResult checkFullyAnnotated(func::FuncOp func) {
    auto needsAnnotation = [](Type type) {
      auto tensor = dyn_cast<RankedTensorType>(type);
      return tensor && tensor.getRank() > 0;
    };
    auto unsupported = [&](Operation *op, const Twine &what) {
      return op->emitError()
             << "pp-tensor-parallel: cannot partition " << op->getName() << " ("
             << what
             << "): tensor parallelism through this op is not built yet";
    };
    WalkResult result = func.walk([&](Operation *op) {
      // Resharding a split tensor into another sharding (an all-gather or
      // an all-to-all) makes upstream's partition crash here; slicing a
      // whole tensor is fine.
      if (auto target = dyn_cast<shard::ShardOp>(op)) {
        auto source = target.getSrc().getDefiningOp<shard::ShardOp>();
        if (source && target.getAnnotateForUsers() &&
            !shard::isFullReplication(shard::Sharding(source.getSharding())) &&
            shard::Sharding(source.getSharding()) !=
                shard::Sharding(target.getSharding())) {
          Operation *user = *target->user_begin();
          user->emitError()
              << "pp-tensor-parallel: cannot partition " << user->getName()
              << ": it needs a split tensor gathered (an op "
                 "without a split model between pinned ops?), "
                 "which is not built yet";
          return WalkResult::interrupt();
        }
        return WalkResult::advance();
      }
      if (isa<shard::ShardingOp, onnx::ConstantOp, func::FuncOp,
              func::ReturnOp>(op))
        return WalkResult::advance();
      // A training Dropout draws its mask by the element's place in the
      // whole tensor; on a part, every device would draw the same mask.
      if (auto dropout = dyn_cast<onnx::DropoutOp>(op)) {
        auto result =
            dropout.getOutput().hasOneUse()
                ? dyn_cast<shard::ShardOp>(*dropout.getOutput().user_begin())
                : nullptr;
        if (!isInert(dropout) && result &&
            !shard::isFullReplication(shard::Sharding(result.getSharding())))
          return unsupported(op, "a training-mode Dropout of a split tensor "
                                 "would draw the same mask on every device"),
                 WalkResult::interrupt();
      }
      for (OpOperand &operand : op->getOpOperands()) {
        auto shardOp = operand.get().getDefiningOp<shard::ShardOp>();
        if (needsAnnotation(operand.get().getType()) &&
            (!shardOp || !shardOp.getAnnotateForUsers()))
          return unsupported(op, "operand #" +
                                     Twine(operand.getOperandNumber()) +
                                     " is not annotated"),
                 WalkResult::interrupt();
      }
      for (OpResult value : op->getResults())
        if (needsAnnotation(value.getType()) && !value.use_empty() &&
            (!value.hasOneUse() || !isa<shard::ShardOp>(*value.user_begin())))
          return unsupported(op, "result #" + Twine(value.getResultNumber()) +
                                     " is not annotated once"),
                 WalkResult::interrupt();
      return WalkResult::advance();
    });
    return failure(result.wasInterrupted());
  }

  LogicalResult declareGrid(ModuleOp module) {
    if (Operation *existing = SymbolTable::lookupSymbolIn(module, gridName)) {
      auto grid = dyn_cast<shard::GridOp>(existing);
      if (grid && grid.getShape() == ArrayRef<int64_t>{tp})
        return success();
      return existing->emitError()
             << "pp-tensor-parallel: symbol @" << gridName
             << " is taken by something other than a grid of shape "
             << int64_t(tp);
    }
    OpBuilder b = OpBuilder::atBlockBegin(module.getBody());
    shard::GridOp::create(b, module.getLoc(), gridName, ArrayRef<int64_t>{tp});
    return success();
  }

  /// Splits dimension `dim` of the value `operand` carries over the grid,
  /// for its user only.
  void annotate(OpOperand &operand, int64_t dim) {
    auto type = cast<RankedTensorType>(operand.get().getType());
    MLIRContext *context = type.getContext();
    OpBuilder b(operand.getOwner());
    Location loc = operand.getOwner()->getLoc();
    auto shardingOf = [&](std::optional<int64_t> splitDim) -> Value {
      SmallVector<shard::GridAxesAttr> splitAxes(
          splitDim ? *splitDim + 1 : 0, shard::GridAxesAttr::get(context, {}));
      if (splitDim)
        splitAxes[*splitDim] = shard::GridAxesAttr::get(context, {0});
      return shard::ShardingOp::create(
          b, loc, FlatSymbolRefAttr::get(context, gridName), splitAxes);
    };
    Value split =
        shard::ShardOp::create(b, loc, operand.get(), shardingOf(dim),
                               /*annotate_for_users=*/b.getUnitAttr());
    operand.set(split);
  }

  struct Pin {
    std::string pattern;
    std::shared_ptr<llvm::Regex> regex;
    bool column;
    bool matched = false;
  };

  FailureOr<SmallVector<Pin>> parsePins(ModuleOp module) {
    SmallVector<Pin> parsed;
    for (StringRef entry : llvm::split(StringRef(pins), ',')) {
      if (entry.trim().empty())
        continue;
      auto [pattern, kind] = entry.rsplit('=');
      auto regex = std::make_shared<llvm::Regex>(pattern.trim());
      std::string regexError;
      kind = kind.trim();
      if ((kind != "column" && kind != "row") || !regex->isValid(regexError))
        return module.emitError()
               << "pp-tensor-parallel: pin '" << entry
               << "' is not PATTERN=column or PATTERN=row with a valid regex"
               << (regexError.empty() ? "" : " (" + regexError + ")");
      parsed.push_back({pattern.trim().str(), regex, kind == "column"});
    }
    return parsed;
  }

  /// Splits the ops the pins name; whether it annotated anything. A pinned
  /// op joins no pair.
  FailureOr<bool> annotatePins(func::FuncOp func, SmallVector<Pin> &pins) {
    bool any = false;
    WalkResult result = func.walk([&](Operation *op) {
      std::string name = pp::getOpName(op);
      for (Pin &pin : pins) {
        if (name.empty() || !pin.regex->match(name))
          continue;
        pin.matched = true;
        std::optional<Linear> linear = asLinear(op);
        if (!linear) {
          op->emitError() << "pp-tensor-parallel: pin '" << pin.pattern
                          << "' names " << op->getName()
                          << ", not a Gemm or MatMul of a 2-D weight";
          return WalkResult::interrupt();
        }
        auto weight = cast<RankedTensorType>(linear->weight->get().getType());
        int64_t dim = pin.column ? linear->outputDim : linear->inputDim;
        if (weight.getDimSize(dim) % tp != 0) {
          op->emitError() << "pp-tensor-parallel: pin '" << pin.pattern
                          << "': " << weight.getDimSize(dim)
                          << " features do not split over tp = " << int64_t(tp);
          return WalkResult::interrupt();
        }
        if (wholeStageOps.contains(op)) {
          op->emitError() << "pp-tensor-parallel: pin '" << pin.pattern
                          << "' names an op of pipeline stage "
                          << *pp::pipeline::getStage(op)
                          << ", which the plan leaves on one device (tp=1)";
          return WalkResult::interrupt();
        }
        if (pinned.insert(op).second) {
          markWholeWeightReads(func);
          annotate(*linear->weight, dim);
          if (pin.column && linear->bias)
            annotateBias(*linear->bias);
          any = true;
        }
      }
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      return failure();
    return any;
  }

  /// Every weight read is whole on every device (as onnx.global_read
  /// makes it): annotated so, partitioning slices it for a user that takes
  /// a split (here or after propagation) instead of taking it as split
  /// already. Once per function.
  void markWholeWeightReads(func::FuncOp func) {
    if (!markedFunctions.insert(func).second)
      return;
    func.walk([&](onnx::GlobalReadOp read) {
      OpBuilder b = OpBuilder::atBlockBegin(read->getBlock());
      b.setInsertionPointAfter(read);
      Value whole = shard::ShardingOp::create(
          b, read.getLoc(), FlatSymbolRefAttr::get(read.getContext(), gridName),
          ArrayRef<shard::GridAxesAttr>{});
      auto annotation = shard::ShardOp::create(b, read.getLoc(), read, whole,
                                               /*annotate_for_users=*/
                                               UnitAttr());
      read.getResult().replaceAllUsesExcept(annotation, annotation);
    });
  }

  /// A bias of the output features (n or 1 x n) splits with them.
  void annotateBias(OpOperand &bias) {
    auto type = cast<RankedTensorType>(bias.get().getType());
    if (type.getRank() >= 1 && type.getShape().back() != 1)
      annotate(bias, type.getRank() - 1);
  }

  llvm::DenseSet<Operation *> pinned;
  llvm::DenseSet<Operation *> markedFunctions;
  /// The ops of pipeline stages whose tensor-parallel degree is 1 (a
  /// stage-wise mix, pp.tensor_parallel_stages): they stay whole and join
  /// no group, so the values between such a stage and a split one are
  /// whole.
  llvm::DenseSet<Operation *> wholeStageOps;

  /// Reads the per-stage degrees --pp-partition planned: each is 1 or tp.
  LogicalResult collectWholeStages(ModuleOp module) {
    wholeStageOps.clear();
    DenseI64ArrayAttr degrees = pp::pipeline::getTensorParallelStages(module);
    if (!degrees)
      return success();
    for (auto [stage, degree] : llvm::enumerate(degrees.asArrayRef()))
      if (degree != 1 && degree != tp)
        return module.emitError()
               << "pp-tensor-parallel: stage " << stage
               << " is planned on a tensor-parallel group of " << degree
               << " devices, the pass splits over tp = " << int64_t(tp)
               << ": a stage-wise mix runs with degrees 1 and one other "
                  "(different degrees above 1 are not built)";
    module.walk([&](Operation *op) {
      std::optional<int64_t> stage = pp::pipeline::getStage(op);
      if (stage && *stage >= 0 &&
          *stage < static_cast<int64_t>(degrees.size()) && degrees[*stage] == 1)
        wholeStageOps.insert(op);
    });
    return success();
  }

  /// Whether it annotated anything.
  bool annotatePairs(func::FuncOp func) {
    llvm::DenseSet<Operation *> excluded = wholeStageOps;
    excluded.insert(pinned.begin(), pinned.end());
    SmallVector<Pair> groups = groupPairs(
        func, tp, excluded,
        [&](const Linear &, const Linear &column, int64_t features) {
          column.op->emitRemark()
              << "pp-tensor-parallel: " << features
              << " features do not split over tp = " << int64_t(tp)
              << "; this pair stays whole";
        });
    if (groups.empty())
      return false;
    markWholeWeightReads(func);
    for (auto &[columns, row, region] : groups) {
      for (Linear &column : columns) {
        annotate(*column.weight, column.outputDim);
        if (column.bias)
          annotateBias(*column.bias);
      }
      annotate(*row.weight, row.inputDim);
    }
    return true;
  }
};

} // namespace

std::vector<pp::onnx::TensorParallelGroup>
pp::onnx::findTensorParallelGroups(func::FuncOp func, int64_t tp,
                                   SmallVectorImpl<Operation *> *wholeRows) {
  std::vector<TensorParallelGroup> groups;
  if (tp <= 1)
    return groups;
  auto whole = [&](const Linear &row, const Linear &, int64_t) {
    if (wholeRows)
      wholeRows->push_back(row.op);
  };
  for (Pair &pair : groupPairs(func, tp, {}, whole)) {
    TensorParallelGroup group;
    group.row = pair.row.op;
    for (const Linear &column : pair.columns) {
      group.columns.push_back(column.op);
      group.splitWeights.push_back(column.weight->get());
      if (column.bias) {
        auto type = cast<RankedTensorType>(column.bias->get().getType());
        if (type.getRank() >= 1 && type.getShape().back() != 1)
          group.splitWeights.push_back(column.bias->get());
      }
      Value input = column.op->getOperand(0);
      if (!llvm::is_contained(group.backwardReduced, input))
        group.backwardReduced.push_back(input);
    }
    group.splitWeights.push_back(pair.row.weight->get());
    // In op order, the row last.
    for (Operation &candidate : *pair.row.op->getBlock())
      if (pair.region.contains(&candidate))
        group.splitOps.push_back(&candidate);
    group.splitOps.push_back(pair.row.op);
    group.forwardReduced = pair.row.op->getResult(0);
    groups.push_back(std::move(group));
  }
  return groups;
}
