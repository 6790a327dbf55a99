//===- FuseElementwise.cpp - Elementwise trees into pp.fused ----*- C++ -*-===//
//
// Groups of elementwise ops that one generated kernel computes: trees of
// single-use values of one shape and one float type, whose other operands
// the kernel reads at i mod their element count (same shape, scalar or a
// suffix of the shape). The last op of a group (its root) is where the
// kernel runs: the group moves into a pp.fused op there. First, a Relu of
// a convolution's or batch norm's output that nothing else reads becomes
// that op's pp.activation: its kernel applies it as it writes.
//
//===----------------------------------------------------------------------===//

#include "pp/Dialect/PP/Transforms/Transforms.h"

#include "pp/Dialect/ONNX/IR/ONNXOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"

using namespace mlir;
namespace pipeline = pp::pipeline;

namespace {

/// Whether a fused kernel producing `result` can read `operand` at
/// i mod numel(operand): the same shape, a scalar, or a suffix of the
/// result's shape (a bias), leading 1s aside.
bool readsBySuffix(ArrayRef<int64_t> operand, ArrayRef<int64_t> result) {
  while (!operand.empty() && operand.front() == 1)
    operand = operand.drop_front();
  return operand.size() <= result.size() &&
         operand == result.take_back(operand.size());
}

/// The groups of `block` with two ops or more, each in block order (root
/// last), in the order of their roots.
SmallVector<SmallVector<Operation *>> findGroups(Block &block) {
  llvm::MapVector<Operation *, SmallVector<Operation *>> open;
  // Groups that may not grow past a global write.
  llvm::DenseSet<Operation *> closed;
  for (Operation &op : block) {
    // A global write may change what a deferred read of it sees.
    if (isa<pp::train::GlobalWriteOp>(op)) {
      for (auto &entry : open)
        closed.insert(entry.first);
      continue;
    }
    if (pipeline::FusedOp::getElementFunction(&op).empty() ||
        op.getNumResults() != 1)
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
      if (def && open.count(def) && !closed.contains(def) &&
          operand.hasOneUse() && operandType == type &&
          !llvm::is_contained(absorbed, def)) {
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
  SmallVector<SmallVector<Operation *>> groups;
  for (auto &entry : open)
    if (entry.second.size() >= 2)
      groups.push_back(std::move(entry.second));
  return groups;
}

/// Moves `members` (block order, root last) into a pp.fused op at the root.
void fuse(ArrayRef<Operation *> members) {
  Operation *root = members.back();
  // Inputs of the group, in order of first use.
  llvm::DenseSet<Value> inner;
  for (Operation *op : members)
    inner.insert(op->getResult(0));
  SmallVector<Value> inputs;
  for (Operation *op : members)
    for (Value operand : op->getOperands())
      if (!inner.contains(operand) && !llvm::is_contained(inputs, operand))
        inputs.push_back(operand);

  OpBuilder b(root);
  auto fused = pipeline::FusedOp::create(b, root->getLoc(),
                                         root->getResult(0).getType(), inputs);
  SmallVector<Type> types;
  SmallVector<Location> locs;
  for (Value input : inputs) {
    types.push_back(input.getType());
    locs.push_back(input.getLoc());
  }
  Block *body = b.createBlock(&fused.getBody(), {}, types, locs);
  IRMapping mapping;
  mapping.map(inputs, body->getArguments());
  for (Operation *op : members)
    b.clone(*op, mapping);
  pipeline::YieldOp::create(b, root->getLoc(),
                            mapping.lookup(root->getResult(0)));
  root->getResult(0).replaceAllUsesWith(fused.getResult());
  for (Operation *op : llvm::reverse(members))
    op->erase();
}

/// Fuses each unary op of a value that only it reads into the value's
/// producer where that op's kernel can apply it (canFuseActivation): one
/// pass over the tensor instead of two. The Relu's gradient reads its
/// output only (the producer's result from now on), so no op needs the
/// value before the activation.
void fuseActivations(Block &block) {
  for (Operation &op : llvm::make_early_inc_range(block)) {
    auto facts = dyn_cast<pp::onnx::KernelFactsOpInterface>(op);
    std::optional<pp::rt::UnaryKind> kind =
        facts ? facts.getUnaryKind() : std::nullopt;
    if (!kind || op.getNumOperands() != 1 || op.getNumResults() != 1)
      continue;
    Value input = op.getOperand(0);
    auto produced = dyn_cast<OpResult>(input);
    if (!produced || produced.getResultNumber() != 0 || !input.hasOneUse() ||
        input.getType() != op.getResult(0).getType())
      continue;
    Operation *producer = produced.getOwner();
    if (producer->getBlock() != &block ||
        pipeline::getActivation(producer) != pp::rt::UnaryKind::Identity ||
        !pipeline::canFuseActivation(producer, *kind))
      continue;
    pipeline::setActivation(producer, *kind);
    op.getResult(0).replaceAllUsesWith(input);
    op.erase();
  }
}

} // namespace

void pp::pipeline::fuseElementwise(func::FuncOp func, bool activations) {
  for (Block &block : func.getBody()) {
    if (activations)
      fuseActivations(block);
    for (SmallVector<Operation *> &group : findGroups(block))
      fuse(group);
  }
}
