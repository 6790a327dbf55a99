//===- ShardingInterfaceImpl.cpp - onnx ops under upstream shard ----------===//
//
// Loops of the models: Gemm (m, n, k), MatMul (batch..., m, n, k), an
// elementwise op one loop per result dimension. Indexing maps follow ONNX
// broadcasting (operands aligned to the right; a dimension of size 1 that
// broadcasts maps to the constant 0, so it is never split). A contraction
// whose k loop is split computes partial products, sums them with
// shard.all_reduce and then adds Gemm's bias once, as upstream's linalg
// models do for their reductions.
//
//===----------------------------------------------------------------------===//

#include "pp/Dialect/ONNX/Transforms/ShardingInterfaceImpl.h"

#include "pp/Dialect/ONNX/IR/ONNXOps.h"

#include "mlir/Dialect/Func/Extensions/ShardingExtensions.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Shard/Interfaces/ShardingInterface.h"
#include "mlir/Dialect/Shard/Interfaces/ShardingInterfaceImpl.h"
#include "mlir/IR/AffineMap.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"

using namespace mlir;
namespace onnx = pp::onnx;
using shard::GridAxesAttr;
using shard::GridAxis;
using shard::ReductionKind;
using shard::Sharding;

namespace {

/// The map of an operand of type `operand` broadcast (ONNX rules) to the
/// result's `loops` leading loops of `numLoops`.
AffineMap broadcastMap(Type operand, ArrayRef<int64_t> resultShape,
                       unsigned numLoops, MLIRContext *context) {
  auto type = cast<RankedTensorType>(operand);
  SmallVector<AffineExpr> exprs;
  int64_t offset = static_cast<int64_t>(resultShape.size()) - type.getRank();
  for (int64_t i = 0; i < type.getRank(); ++i) {
    int64_t loop = offset + i;
    bool broadcast = type.getDimSize(i) == 1 && resultShape[loop] != 1;
    exprs.push_back(broadcast ? getAffineConstantExpr(0, context)
                              : getAffineDimExpr(loop, context));
  }
  return AffineMap::get(numLoops, 0, exprs, context);
}

/// One parallel loop per dimension of the op's first result.
SmallVector<utils::IteratorType> parallelLoopsOverResult(Operation *op) {
  auto type = cast<RankedTensorType>(op->getResult(0).getType());
  return SmallVector<utils::IteratorType>(type.getRank(),
                                          utils::IteratorType::parallel);
}

/// Annotates `op` with `shardings` (its operands', then its results'):
/// results for their definition, tensor operands for this user, each
/// insertion from the builder's place (as upstream's default does).
void insertAnnotations(Operation *op, OpBuilder &builder,
                       ArrayRef<Sharding> shardings) {
  unsigned numOperands = op->getNumOperands();
  for (OpResult result : op->getResults()) {
    OpBuilder::InsertionGuard guard(builder);
    if (isa<RankedTensorType>(result.getType()))
      shard::maybeInsertTargetShardingAnnotation(
          shardings[numOperands + result.getResultNumber()], result, builder);
  }
  for (OpOperand &operand : op->getOpOperands()) {
    OpBuilder::InsertionGuard guard(builder);
    if (isa<RankedTensorType>(operand.get().getType()))
      shard::maybeInsertSourceShardingAnnotation(
          shardings[operand.getOperandNumber()], operand, builder);
  }
}

/// A model whose op each device runs on its own slices, with no
/// collective (upstream's trivial partition).
template <typename Model, typename Op>
struct TriviallyPartitionedModel
    : public shard::ShardingInterface::ExternalModel<Model, Op> {
  LogicalResult partition(Operation *op, ArrayRef<Value> partitionedOperands,
                          ArrayRef<Sharding> operandShardings,
                          ArrayRef<Sharding> resultShardings,
                          IRMapping &partitionMap,
                          SymbolTableCollection &symbolTable,
                          OpBuilder &builder) const {
    // An unused result (Dropout's mask) has no annotation; it is split like
    // the first result, whose loops it shares.
    std::vector<Sharding> results(resultShardings.begin(),
                                  resultShardings.end());
    for (Sharding &sharding : results)
      if (!sharding && !results.empty())
        sharding = results.front();
    if (llvm::any_of(results, [](const Sharding &s) { return !s; }))
      return op->emitError() << "cannot partition " << op->getName()
                             << ": no sharding of its results";
    shard::partitionTriviallyShardableOperation(
        *op, partitionedOperands, operandShardings, results, partitionMap,
        symbolTable, builder);
    return success();
  }
};

/// Elementwise ops with broadcasting: every loop parallel.
template <typename Op>
struct ElementwiseModel
    : public TriviallyPartitionedModel<ElementwiseModel<Op>, Op> {
  SmallVector<utils::IteratorType> getLoopIteratorTypes(Operation *op) const {
    return parallelLoopsOverResult(op);
  }

  SmallVector<AffineMap> getIndexingMaps(Operation *op) const {
    auto type = cast<RankedTensorType>(op->getResult(0).getType());
    SmallVector<AffineMap> maps;
    for (Type operand : op->getOperandTypes())
      maps.push_back(broadcastMap(operand, type.getShape(), type.getRank(),
                                  op->getContext()));
    for (unsigned i = 0; i < op->getNumResults(); ++i)
      maps.push_back(
          AffineMap::getMultiDimIdentityMap(type.getRank(), op->getContext()));
    return maps;
  }

  /// Upstream's option, from the operands that do not broadcast (a
  /// broadcast operand, such as attention's [1, 1, S, S] mask, says nothing
  /// of the loops it does not span, and upstream's default fails on it).
  FailureOr<shard::ShardingOption>
  getShardingOption(Operation *op, ArrayRef<Sharding> operandShardings,
                    ArrayRef<Sharding> resultShardings) const {
    SmallVector<AffineMap> maps = getIndexingMaps(op);
    std::vector<Sharding> kept(operandShardings.begin(),
                               operandShardings.end());
    for (auto [index, map] : llvm::enumerate(
             ArrayRef(maps).take_front(std::min(kept.size(), maps.size()))))
      if (llvm::any_of(map.getResults(), llvm::IsaPred<AffineConstantExpr>))
        kept[index] = Sharding();
    // A whole operand next to a split one is sliced for free, a split one
    // next to a whole one would need gathering: the split operands decide
    // (upstream weighs both reshardings alike and may pick the gather).
    auto split = [](const Sharding &s) {
      return s && !shard::isFullReplication(s);
    };
    // Propagation offers the operands' annotations in several subsets;
    // an operand already split in the IR is split in every one of them.
    for (auto [index, operand] : llvm::enumerate(op->getOperands()))
      if (auto annotation = operand.template getDefiningOp<shard::ShardOp>();
          annotation && index < kept.size() &&
          !llvm::any_of(maps[index].getResults(),
                        llvm::IsaPred<AffineConstantExpr>) &&
          split(Sharding(annotation.getSharding())))
        kept[index] = Sharding(annotation.getSharding());
    if (llvm::any_of(kept, split))
      for (Sharding &sharding : kept)
        if (!split(sharding))
          sharding = Sharding();
    return shard::detail::defaultGetShardingOption(op, kept, resultShardings);
  }

  /// Each operand dimension takes its loop's split; a broadcast one (the
  /// constant 0 of its map) stays whole. (Upstream's default fails on a
  /// broadcast boolean operand such as attention's [1, 1, S, S] mask.)
  FailureOr<std::vector<Sharding>>
  getShardingAnnotations(Operation *op,
                         const shard::ShardingOption &option) const {
    // Upstream's, unless it fails on a broadcast operand.
    FailureOr<std::vector<Sharding>> upstream =
        shard::detail::defaultGetShardingAnnotations(op, option);
    if (succeeded(upstream))
      return upstream;
    MLIRContext *context = op->getContext();
    std::vector<Sharding> shardings;
    for (AffineMap map : getIndexingMaps(op)) {
      SmallVector<GridAxesAttr> axes;
      for (AffineExpr expr : map.getResults()) {
        auto dim = dyn_cast<AffineDimExpr>(expr);
        unsigned loop = dim ? dim.getPosition() : ~0u;
        axes.push_back(GridAxesAttr::get(
            context, loop < option.shardingArray.size()
                         ? ArrayRef<GridAxis>(option.shardingArray[loop])
                         : ArrayRef<GridAxis>()));
      }
      while (!axes.empty() && axes.back().empty())
        axes.pop_back();
      shardings.push_back(Sharding::get(option.grid, axes));
    }
    return shardings;
  }

  LogicalResult
  addShardingAnnotations(Operation *op, OpBuilder &builder,
                         const shard::ShardingOption &option) const {
    FailureOr<std::vector<Sharding>> shardings =
        getShardingAnnotations(op, option);
    if (failed(shardings))
      return failure();
    insertAnnotations(op, builder, *shardings);
    return success();
  }
};

/// Transpose: result loop j reads operand dim perm[j]; a split follows it.
struct TransposeModel
    : public TriviallyPartitionedModel<TransposeModel, onnx::TransposeOp> {
  SmallVector<utils::IteratorType> getLoopIteratorTypes(Operation *op) const {
    return parallelLoopsOverResult(op);
  }

  SmallVector<AffineMap> getIndexingMaps(Operation *op) const {
    auto transpose = cast<onnx::TransposeOp>(op);
    int64_t rank = cast<RankedTensorType>(transpose.getType()).getRank();
    SmallVector<int64_t> perm;
    if (auto attr = transpose.getPermAttr())
      perm.assign(attr.asArrayRef().begin(), attr.asArrayRef().end());
    else
      for (int64_t j = rank - 1; j >= 0; --j)
        perm.push_back(j);
    SmallVector<AffineExpr> operandExprs(rank);
    for (int64_t j = 0; j < rank; ++j)
      operandExprs[perm[j]] = getAffineDimExpr(j, op->getContext());
    return {AffineMap::get(rank, 0, operandExprs, op->getContext()),
            AffineMap::getMultiDimIdentityMap(rank, op->getContext())};
  }
};

/// Softmax and LogSoftmax: independent along every dimension but `axis`,
/// which a split must not cut (attention's scores split by head).
template <typename Op>
struct SoftmaxModel : public TriviallyPartitionedModel<SoftmaxModel<Op>, Op> {
  static int64_t axisOf(Operation *op) {
    int64_t rank = cast<RankedTensorType>(op->getResult(0).getType()).getRank();
    int64_t axis = cast<Op>(op).getAxis();
    return axis < 0 ? axis + rank : axis;
  }

  SmallVector<utils::IteratorType> getLoopIteratorTypes(Operation *op) const {
    return parallelLoopsOverResult(op);
  }

  SmallVector<AffineMap> getIndexingMaps(Operation *op) const {
    int64_t rank = cast<RankedTensorType>(op->getResult(0).getType()).getRank();
    AffineMap identity =
        AffineMap::getMultiDimIdentityMap(rank, op->getContext());
    return {identity, identity};
  }

  FailureOr<shard::ShardingOption>
  getShardingOption(Operation *op, ArrayRef<Sharding> operandShardings,
                    ArrayRef<Sharding> resultShardings) const {
    FailureOr<shard::ShardingOption> option =
        shard::detail::defaultGetShardingOption(op, operandShardings,
                                                resultShardings);
    // Whole along the axis: an operand split there is gathered first
    // (which --pp-tensor-parallel reports as not built).
    int64_t axis = axisOf(op);
    if (succeeded(option) && !option->empty &&
        static_cast<int64_t>(option->shardingArray.size()) > axis)
      option->shardingArray[axis].clear();
    return option;
  }
};

/// The dimension of `to` that a split of dimension `dim` of `from` into
/// `parts` contiguous blocks becomes through a row-major reshape: the one
/// after the same number of elements, when both sizes divide by `parts`
/// (a split of [B, S, H*D]'s last dim is a split of [B, S, H, D]'s H).
std::optional<int64_t> reshapedDim(ArrayRef<int64_t> from, ArrayRef<int64_t> to,
                                   int64_t dim, int64_t parts) {
  if (from[dim] % parts != 0)
    return std::nullopt;
  int64_t before = 1;
  for (int64_t i = 0; i < dim; ++i)
    before *= from[i];
  int64_t toBefore = 1;
  for (int64_t j = 0; j < static_cast<int64_t>(to.size()); ++j) {
    if (toBefore == before && to[j] % parts == 0 && to[j] != 1)
      return j;
    toBefore *= to[j];
    if (toBefore > before)
      break;
  }
  return std::nullopt;
}

/// Reshape: a split dimension maps to the dimension that holds the same
/// contiguous blocks (reshapedDim); the target shape is rewritten per
/// device. Splits that a reshape would interleave are not modelled.
struct ReshapeModel
    : public shard::ShardingInterface::ExternalModel<ReshapeModel,
                                                     onnx::ReshapeOp> {
  static int64_t partsOf(Operation *op, FlatSymbolRefAttr gridName,
                         ArrayRef<GridAxesAttr> axes) {
    auto grid =
        SymbolTable::lookupNearestSymbolFrom<shard::GridOp>(op, gridName);
    int64_t parts = 1;
    for (GridAxesAttr dimAxes : axes)
      for (GridAxis axis : dimAxes.asArrayRef())
        parts *= grid ? grid.getShape()[axis] : 1;
    return parts;
  }

  /// `sharding`'s split axes carried from shape `from` to shape `to`.
  static FailureOr<SmallVector<GridAxesAttr>> carry(Operation *op,
                                                    const Sharding &sharding,
                                                    ArrayRef<int64_t> from,
                                                    ArrayRef<int64_t> to) {
    MLIRContext *context = op->getContext();
    SmallVector<GridAxesAttr> carried(to.size(),
                                      GridAxesAttr::get(context, {}));
    for (auto [dim, axes] : llvm::enumerate(sharding.getSplitAxes())) {
      if (axes.empty())
        continue;
      std::optional<int64_t> target = reshapedDim(
          from, to, dim, partsOf(op, sharding.getGridAttr(), {axes}));
      if (!target)
        return failure();
      carried[*target] = axes;
    }
    while (!carried.empty() && carried.back().empty())
      carried.pop_back();
    return carried;
  }

  static ArrayRef<int64_t> shapeOf(Value value) {
    return cast<RankedTensorType>(value.getType()).getShape();
  }

  SmallVector<utils::IteratorType> getLoopIteratorTypes(Operation *op) const {
    return parallelLoopsOverResult(op);
  }

  SmallVector<AffineMap> getIndexingMaps(Operation *) const { return {}; }

  FailureOr<shard::ShardingOption>
  getShardingOption(Operation *op, ArrayRef<Sharding> operandShardings,
                    ArrayRef<Sharding> resultShardings) const {
    auto reshape = cast<onnx::ReshapeOp>(op);
    FailureOr<SmallVector<GridAxesAttr>> split;
    FlatSymbolRefAttr grid;
    auto isSplit = [](const Sharding &sharding) {
      return sharding && !shard::isFullReplication(sharding);
    };
    // A split operand wins over a whole result (a free slice against a
    // gather), as in the elementwise models.
    bool operandSplit =
        !operandShardings.empty() && isSplit(operandShardings[0]) &&
        !isSplit(resultShardings.empty() ? Sharding() : resultShardings[0]);
    if (!operandSplit && !resultShardings.empty() && resultShardings[0]) {
      grid = resultShardings[0].getGridAttr();
      split = SmallVector<GridAxesAttr>(resultShardings[0].getSplitAxes());
    } else if (!operandShardings.empty() && operandShardings[0]) {
      grid = operandShardings[0].getGridAttr();
      split = carry(op, operandShardings[0], shapeOf(reshape.getData()),
                    shapeOf(reshape.getReshaped()));
      if (failed(split))
        return op->emitOpError(
            "cannot carry its operand's split through the reshape");
    } else {
      return shard::ShardingOption::makeEmpty();
    }
    shard::ShardingArray array;
    for (GridAxesAttr axes : *split)
      array.push_back(SmallVector<GridAxis>(axes.asArrayRef()));
    return shard::ShardingOption(array, grid);
  }

  FailureOr<std::vector<Sharding>>
  getShardingAnnotations(Operation *op,
                         const shard::ShardingOption &option) const {
    auto reshape = cast<onnx::ReshapeOp>(op);
    MLIRContext *context = op->getContext();
    SmallVector<GridAxesAttr> resultAxes;
    for (ArrayRef<GridAxis> axes : option.shardingArray)
      resultAxes.push_back(GridAxesAttr::get(context, axes));
    Sharding result = Sharding::get(option.grid, resultAxes);
    FailureOr<SmallVector<GridAxesAttr>> operandAxes = carry(
        op, result, shapeOf(reshape.getReshaped()), shapeOf(reshape.getData()));
    if (failed(operandAxes))
      return op->emitOpError("cannot carry its result's split back through "
                             "the reshape");
    return std::vector<Sharding>{Sharding::get(option.grid, *operandAxes),
                                 Sharding::get(option.grid, {}), result};
  }

  LogicalResult
  addShardingAnnotations(Operation *op, OpBuilder &builder,
                         const shard::ShardingOption &option) const {
    FailureOr<std::vector<Sharding>> shardings =
        getShardingAnnotations(op, option);
    if (failed(shardings))
      return failure();
    // The shape operand is whole on every device: the op's type inference
    // reads the constant through the annotation (onnx::getConstantInts).
    insertAnnotations(op, builder, *shardings);
    return success();
  }

  LogicalResult partition(Operation *op, ArrayRef<Value> partitionedOperands,
                          ArrayRef<Sharding>,
                          ArrayRef<Sharding> resultShardings,
                          IRMapping &partitionMap,
                          SymbolTableCollection &symbolTable,
                          OpBuilder &builder) const {
    auto reshape = cast<onnx::ReshapeOp>(op);
    Sharding result = resultShardings.front();
    auto localType = cast<RankedTensorType>(shard::shardType(
        reshape.getType(),
        shard::getGrid(op, result.getGridAttr(), symbolTable), result));
    auto shapeType =
        RankedTensorType::get({localType.getRank()}, builder.getI64Type());
    Value shape = onnx::ConstantOp::create(
        builder, op->getLoc(),
        DenseIntElementsAttr::get(shapeType, localType.getShape()));
    Value local = onnx::ReshapeOp::create(builder, op->getLoc(), localType,
                                          partitionedOperands[0], shape,
                                          reshape.getAllowzeroAttr());
    partitionMap.map(op->getResult(0), local);
    return success();
  }
};

/// What a contraction's model needs of the op: its loops and maps, and how
/// to rebuild it on local operands without Gemm's bias.
struct Contraction {
  SmallVector<utils::IteratorType> loops;
  SmallVector<AffineMap> maps;
};

Contraction describeGemm(onnx::GemmOp gemm) {
  MLIRContext *context = gemm.getContext();
  auto d = [&](unsigned i) { return getAffineDimExpr(i, context); };
  // Loops m, n, k.
  Contraction c;
  c.loops = {utils::IteratorType::parallel, utils::IteratorType::parallel,
             utils::IteratorType::reduction};
  c.maps.push_back(AffineMap::get(
      3, 0, gemm.getTransA() ? ArrayRef{d(2), d(0)} : ArrayRef{d(0), d(2)},
      context));
  c.maps.push_back(AffineMap::get(
      3, 0, gemm.getTransB() ? ArrayRef{d(1), d(2)} : ArrayRef{d(2), d(1)},
      context));
  auto resultType = cast<RankedTensorType>(gemm.getType());
  if (Value bias = gemm.getC())
    c.maps.push_back(
        broadcastMap(bias.getType(), resultType.getShape(), 3, context));
  c.maps.push_back(AffineMap::get(3, 0, {d(0), d(1)}, context));
  return c;
}

/// MatMul with operands of rank >= 2 (batch dimensions broadcast as ONNX
/// says): loops batch..., m, n, k over the result's batch dimensions.
FailureOr<Contraction> describeMatMul(onnx::MatMulOp matmul) {
  auto a = cast<RankedTensorType>(matmul.getA().getType());
  auto b = cast<RankedTensorType>(matmul.getB().getType());
  auto y = cast<RankedTensorType>(matmul.getType());
  if (a.getRank() < 2 || b.getRank() < 2)
    return failure();
  MLIRContext *context = matmul.getContext();
  int64_t batch = y.getRank() - 2;
  unsigned numLoops = y.getRank() + 1;
  int64_t m = batch, n = batch + 1, k = batch + 2;
  auto d = [&](int64_t i) { return getAffineDimExpr(i, context); };
  // Batch dimensions aligned to the right of the result's; the last two
  // map to `rows` and `cols`.
  auto mapOf = [&](RankedTensorType type, int64_t rows, int64_t cols) {
    SmallVector<AffineExpr> exprs;
    int64_t offset = batch - (type.getRank() - 2);
    for (int64_t i = 0; i < type.getRank() - 2; ++i)
      exprs.push_back(type.getDimSize(i) == 1 && y.getDimSize(offset + i) != 1
                          ? getAffineConstantExpr(0, context)
                          : d(offset + i));
    exprs.push_back(d(rows));
    exprs.push_back(d(cols));
    return AffineMap::get(numLoops, 0, exprs, context);
  };
  Contraction c;
  c.loops.assign(numLoops, utils::IteratorType::parallel);
  c.loops.back() = utils::IteratorType::reduction;
  SmallVector<AffineExpr> result;
  for (int64_t i = 0; i < batch; ++i)
    result.push_back(d(i));
  result.append({d(m), d(n)});
  c.maps = {mapOf(a, m, k), mapOf(b, k, n),
            AffineMap::get(numLoops, 0, result, context)};
  return c;
}

template <typename Op>
struct ContractionModel
    : public shard::ShardingInterface::ExternalModel<ContractionModel<Op>, Op> {
  static FailureOr<Contraction> describe(Operation *op) {
    if (auto gemm = dyn_cast<onnx::GemmOp>(op))
      return describeGemm(gemm);
    return describeMatMul(cast<onnx::MatMulOp>(op));
  }

  SmallVector<utils::IteratorType> getLoopIteratorTypes(Operation *op) const {
    FailureOr<Contraction> c = describe(op);
    return succeeded(c) ? c->loops : SmallVector<utils::IteratorType>();
  }

  SmallVector<AffineMap> getIndexingMaps(Operation *op) const {
    FailureOr<Contraction> c = describe(op);
    return succeeded(c) ? c->maps : SmallVector<AffineMap>();
  }

  SmallVector<ReductionKind> getReductionLoopIteratorKinds(Operation *) const {
    return {ReductionKind::Sum};
  }

  LogicalResult partition(Operation *op, ArrayRef<Value> partitionedOperands,
                          ArrayRef<Sharding> operandShardings,
                          ArrayRef<Sharding> resultShardings,
                          IRMapping &partitionMap,
                          SymbolTableCollection &symbolTable,
                          OpBuilder &builder) const {
    FailureOr<Contraction> c = describe(op);
    if (failed(c))
      return op->emitOpError("has an operand of rank < 2: it cannot be "
                             "sharded");
    shard::ShardingArray assignment =
        shard::getGridAxisAssignmentForLoopIterators(
            operandShardings, resultShardings, c->loops, c->maps);
    if (!shard::isAtLeastOneReductionIteratorSharded(c->loops, assignment)) {
      shard::partitionTriviallyShardableOperation(
          *op, partitionedOperands, operandShardings, resultShardings,
          partitionMap, symbolTable, builder);
      return success();
    }
    // Each device multiplies its slices of k; the partial products are
    // summed over the devices that split k, then the bias is added once.
    SmallVector<GridAxis> axes =
        shard::getReductionGridAxes(c->loops, assignment);
    Sharding resultSharding = resultShardings.front();
    shard::GridOp grid =
        shard::getGrid(op, resultSharding.getGridAttr(), symbolTable);
    Type localType =
        shard::shardType(op->getResult(0).getType(), grid, resultSharding);
    Location loc = op->getLoc();
    Value partial, bias;
    if (auto gemm = dyn_cast<onnx::GemmOp>(op)) {
      if (gemm.getC() && gemm.getBeta().convertToFloat() != 1.0f)
        return op->emitOpError("with beta != 1 and its reduction split is "
                               "not supported");
      partial = onnx::GemmOp::create(
          builder, loc, localType, partitionedOperands[0],
          partitionedOperands[1], Value(), gemm.getAlphaAttr(),
          builder.getF32FloatAttr(1.0f), gemm.getTransAAttr(),
          gemm.getTransBAttr());
      if (gemm.getC())
        bias = partitionedOperands[2];
    } else {
      partial = onnx::MatMulOp::create(builder, loc, localType,
                                       partitionedOperands[0],
                                       partitionedOperands[1]);
    }
    Value sum = shard::AllReduceOp::create(builder, loc, partial,
                                           resultSharding.getGrid(), axes,
                                           ReductionKind::Sum)
                    .getResult();
    if (bias)
      sum = onnx::AddOp::create(builder, loc, localType, sum, bias);
    partitionMap.map(op->getResult(0), sum);
    return success();
  }
};

/// A weight read: the whole global, on every device (it is never split;
/// an annotation on its users slices it there).
struct GlobalReadModel
    : public shard::ShardingInterface::ExternalModel<GlobalReadModel,
                                                     onnx::GlobalReadOp> {
  SmallVector<utils::IteratorType> getLoopIteratorTypes(Operation *op) const {
    return parallelLoopsOverResult(op);
  }

  SmallVector<AffineMap> getIndexingMaps(Operation *op) const {
    auto type = cast<RankedTensorType>(op->getResult(0).getType());
    return {
        AffineMap::getMultiDimIdentityMap(type.getRank(), op->getContext())};
  }

  FailureOr<shard::ShardingOption>
  getShardingOption(Operation *, ArrayRef<Sharding>, ArrayRef<Sharding>) const {
    return shard::ShardingOption::makeEmpty();
  }

  LogicalResult partition(Operation *op, ArrayRef<Value>, ArrayRef<Sharding>,
                          ArrayRef<Sharding>, IRMapping &partitionMap,
                          SymbolTableCollection &, OpBuilder &builder) const {
    builder.clone(*op, partitionMap);
    return success();
  }
};

/// Every other op (Transpose, Reshape, Softmax, LayerNormalization, ...):
/// its operands and results whole on every device; a split operand is
/// gathered before it.
template <typename Op>
struct ReplicatedModel
    : public shard::ShardingInterface::ExternalModel<ReplicatedModel<Op>, Op> {
  SmallVector<utils::IteratorType> getLoopIteratorTypes(Operation *) const {
    return {};
  }

  SmallVector<AffineMap> getIndexingMaps(Operation *) const { return {}; }

  FailureOr<shard::ShardingOption>
  getShardingOption(Operation *, ArrayRef<Sharding> operandShardings,
                    ArrayRef<Sharding> resultShardings) const {
    for (ArrayRef<Sharding> list : {operandShardings, resultShardings})
      for (const Sharding &sharding : list)
        if (sharding)
          return shard::ShardingOption({}, sharding.getGridAttr());
    return shard::ShardingOption::makeEmpty();
  }

  FailureOr<std::vector<Sharding>>
  getShardingAnnotations(Operation *op,
                         const shard::ShardingOption &option) const {
    return std::vector<Sharding>(op->getNumOperands() + op->getNumResults(),
                                 Sharding::get(option.grid, {}));
  }

  LogicalResult
  addShardingAnnotations(Operation *op, OpBuilder &builder,
                         const shard::ShardingOption &option) const {
    // A constant's own result stays unannotated; its users annotate it
    // whole (partitioning needs every operand annotated; integer constants
    // an op's types depend on are read through the annotation, see
    // onnx::getConstantInts).
    if (isa<onnx::ConstantOp>(op))
      return success();
    insertAnnotations(op, builder,
                      std::vector<Sharding>(op->getNumOperands() +
                                                op->getNumResults(),
                                            Sharding::get(option.grid, {})));
    return success();
  }

  LogicalResult partition(Operation *op, ArrayRef<Value>, ArrayRef<Sharding>,
                          ArrayRef<Sharding>, IRMapping &partitionMap,
                          SymbolTableCollection &, OpBuilder &builder) const {
    builder.clone(*op, partitionMap);
    return success();
  }
};

template <typename... Ops> void attachElementwise(MLIRContext *context) {
  (Ops::template attachInterface<ElementwiseModel<Ops>>(*context), ...);
}

/// ElementwiseModel for each of `Ops` that runs a unary kernel.
template <typename... Ops> void attachUnaryKernels(MLIRContext *context) {
  auto attach = [&](auto *tag) {
    using Op = std::remove_pointer_t<decltype(tag)>;
    if constexpr (Op::template hasTrait<onnx::OpTrait::UnaryKernel>())
      Op::template attachInterface<ElementwiseModel<Op>>(*context);
  };
  (attach(static_cast<Ops *>(nullptr)), ...);
}

/// ReplicatedModel for each of `Ops` that has no model yet.
template <typename... Ops>
void attachReplicatedToTheRest(MLIRContext *context) {
  auto attach = [&](auto *tag) {
    using Op = std::remove_pointer_t<decltype(tag)>;
    std::optional<RegisteredOperationName> name =
        RegisteredOperationName::lookup(Op::getOperationName(), context);
    if (name && !name->hasInterface<shard::ShardingInterface>())
      Op::template attachInterface<ReplicatedModel<Op>>(*context);
  };
  (attach(static_cast<Ops *>(nullptr)), ...);
}

} // namespace

void pp::onnx::registerShardingInterfaceExternalModels(
    DialectRegistry &registry) {
  registry.insert<shard::ShardDialect>();
  func::registerShardingInterfaceExternalModels(registry);
  registry.addExtension(+[](MLIRContext *context, onnx::ONNXDialect *) {
    context->getOrLoadDialect<shard::ShardDialect>();
    onnx::GlobalReadOp::attachInterface<GlobalReadModel>(*context);
    onnx::GemmOp::attachInterface<ContractionModel<onnx::GemmOp>>(*context);
    onnx::MatMulOp::attachInterface<ContractionModel<onnx::MatMulOp>>(*context);
    onnx::TransposeOp::attachInterface<TransposeModel>(*context);
    onnx::ReshapeOp::attachInterface<ReshapeModel>(*context);
    onnx::SoftmaxOp::attachInterface<SoftmaxModel<onnx::SoftmaxOp>>(*context);
    onnx::LogSoftmaxOp::attachInterface<SoftmaxModel<onnx::LogSoftmaxOp>>(
        *context);
    attachUnaryKernels<
#define GET_OP_LIST
#include "pp/Dialect/ONNX/IR/ONNXOps.cpp.inc"
        >(context);
    attachElementwise<onnx::IdentityOp, onnx::AddOp, onnx::SubOp, onnx::MulOp,
                      onnx::DivOp, onnx::PowOp, onnx::ModOp, onnx::MaxOp,
                      onnx::MinOp, onnx::WhereOp, onnx::DropoutOp>(context);
    attachReplicatedToTheRest<
#define GET_OP_LIST
#include "pp/Dialect/ONNX/IR/ONNXOps.cpp.inc"
        >(context);
  });
}
