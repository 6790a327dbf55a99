//===- MemoryPlan.cpp - Static buffer plan of a stage function ------------===//

#include "pp/Analysis/MemoryPlan.h"

#include "pp/Analysis/CostModel.h"
#include "pp/Dialect/ONNX/IR/ONNXOps.h"
#include "pp/Dialect/PP/IR/PPOps.h"
#include "pp/Dialect/Train/IR/TrainOps.h"

#include "mlir/IR/Operation.h"
#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <map>

using namespace mlir;

namespace {

struct Interval {
  Value value;
  int64_t bytes;
  unsigned start, end; // op indices, inclusive
};

int64_t alignUp(int64_t bytes) {
  return (bytes + pp::kArenaAlignment - 1) / pp::kArenaAlignment *
         pp::kArenaAlignment;
}

/// The operand of an optimizer step whose new value is result `index`.
Value updatedOperand(Operation *step, unsigned index) {
  if (auto sgd = dyn_cast<pp::train::SGDOp>(step))
    return index == 0 ? sgd.getParam() : sgd.getMomentumBuffer();
  if (auto adam = dyn_cast<pp::train::AdamOp>(step))
    return index == 0   ? adam.getParam()
           : index == 1 ? adam.getM()
                        : adam.getV();
  return {};
}

/// The global an op reads or writes, if any.
FlatSymbolRefAttr globalOf(Operation *op) {
  if (auto read = dyn_cast<pp::onnx::GlobalReadOp>(op))
    return read.getGlobalAttr();
  if (auto write = dyn_cast<pp::train::GlobalWriteOp>(op))
    return write.getGlobalAttr();
  return {};
}

/// Ops whose result holds their input's bytes under another shape.
bool isReshapeLike(Operation *op) {
  return isa<pp::onnx::ReshapeOp, pp::onnx::FlattenOp, pp::onnx::SqueezeOp,
             pp::onnx::UnsqueezeOp, pp::onnx::IdentityOp>(op);
}

/// Whether code generation may compute `value` in a held buffer (a stash's
/// or a gradient sum's, OpEmitter::result) rather than at its offset.
bool mayBeHeld(Value value) {
  return llvm::any_of(value.getUsers(), [](Operation *user) {
    return isa<pp::pipeline::StashOp, pp::pipeline::AccumulateOp>(user);
  });
}

} // namespace

Operation *pp::inPlaceGlobalUpdate(OpResult result) {
  Operation *step = result.getOwner();
  Value operand = updatedOperand(step, result.getResultNumber());
  if (!operand || !result.hasOneUse())
    return nullptr;
  auto read = operand.getDefiningOp<onnx::GlobalReadOp>();
  auto write = dyn_cast<train::GlobalWriteOp>(*result.getUsers().begin());
  Block *block = step->getBlock();
  if (!read || !write || read->getBlock() != block ||
      write->getBlock() != block ||
      write.getGlobalAttr() != read.getGlobalAttr() ||
      !step->isBeforeInBlock(write))
    return nullptr;
  FlatSymbolRefAttr global = read.getGlobalAttr();
  // Between the step and the write the global's storage holds the new
  // value: nothing may read it there, through an earlier read's value
  // either (reads are views of the storage), nor the step itself through
  // another operand.
  if (llvm::count_if(operand.getUses(), [&](OpOperand &use) {
        return use.getOwner() == step;
      }) != 1)
    return nullptr;
  bool conflict = false;
  block->walk([&](onnx::GlobalReadOp other) {
    if (other.getGlobalAttr() != global)
      return;
    for (OpOperand &use : other->getUses()) {
      Operation *user = block->findAncestorOpInBlock(*use.getOwner());
      if (!user || (user == step && use.get() != operand) ||
          (user != step && step->isBeforeInBlock(user) &&
           user->isBeforeInBlock(write)))
        conflict = true;
    }
  });
  if (conflict)
    return nullptr;
  for (Operation *op = step->getNextNode(); op != write; op = op->getNextNode())
    if (op->walk([&](Operation *inner) {
            return globalOf(inner) == global ? WalkResult::interrupt()
                                             : WalkResult::advance();
          }).wasInterrupted())
      return nullptr;
  return write;
}

pp::MemoryPlan pp::planMemory(Block &block) {
  MemoryPlan plan;
  llvm::DenseMap<Operation *, unsigned> index;
  unsigned position = 0;
  for (Operation &op : block)
    index[&op] = position++;

  // Live ranges: from the defining op to the last op (of this block) that
  // uses the value, directly or inside a region (a pp.fused kernel reads
  // its inputs where it runs).
  std::vector<Interval> intervals;
  // A reshape of a planned value is a view of its bytes: it joins the
  // interval of the value it reshapes (which then lives as long as the
  // last view) and gets the same offset, so its copy copies nothing.
  llvm::DenseMap<Value, size_t> intervalOf;
  for (Operation &op : block) {
    // Held buffers are read in place (code generation lends them to the
    // function: stashes, sums, received messages), as are globals and
    // constants.
    if (isa<onnx::GlobalReadOp, onnx::ConstantOp, pipeline::UnstashOp,
            pipeline::AccumulatedOp, pipeline::RecvOp>(op))
      continue;
    for (OpResult result : op.getResults()) {
      int64_t bytes = getTensorBytes(result.getType());
      if (bytes <= 0)
        continue;
      if (inPlaceGlobalUpdate(result)) {
        plan.inPlace.insert(result);
        continue;
      }
      unsigned end = index[&op];
      for (Operation *user : result.getUsers()) {
        Operation *top = block.findAncestorOpInBlock(*user);
        if (top)
          end = std::max(end, index[top]);
      }
      if (isReshapeLike(&op) && !mayBeHeld(result)) {
        auto viewed = intervalOf.find(op.getOperand(0));
        if (viewed != intervalOf.end() && !mayBeHeld(op.getOperand(0)) &&
            alignUp(bytes) == intervals[viewed->second].bytes) {
          Interval &shared = intervals[viewed->second];
          shared.end = std::max(shared.end, end);
          intervalOf[result] = viewed->second;
          plan.views[result] = shared.value;
          continue;
        }
      }
      intervalOf[result] = intervals.size();
      intervals.push_back({result, alignUp(bytes), index[&op], end});
      plan.totalBytes += alignUp(bytes);
    }
  }

  // The lower bound: bytes live at the busiest op (a difference array:
  // +bytes where a value starts, -bytes after its last use).
  std::vector<int64_t> delta(position + 2, 0);
  for (const Interval &in : intervals) {
    delta[in.start] += in.bytes;
    delta[in.end + 1] -= in.bytes;
  }
  int64_t live = 0;
  for (int64_t change : delta) {
    live += change;
    plan.peakLiveBytes = std::max(plan.peakLiveBytes, live);
  }

  // Greedy by size: each value at the lowest offset free for its lifetime.
  std::vector<size_t> order(intervals.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return intervals[a].bytes > intervals[b].bytes;
  });
  // (offset, interval), kept sorted by offset: the first fit walks the
  // blocks taken by values alive at the same time in offset order, with no
  // sort per value (equal offsets in any order give the same fit).
  std::vector<std::pair<int64_t, size_t>> placed;
  for (size_t i : order) {
    const Interval &in = intervals[i];
    int64_t offset = 0;
    for (auto [begin, j] : placed) {
      const Interval &other = intervals[j];
      if (other.start > in.end || in.start > other.end)
        continue;
      if (offset + in.bytes <= begin)
        break;
      offset = std::max(offset, begin + other.bytes);
    }
    placed.insert(llvm::upper_bound(placed, offset,
                                    [](int64_t value, const auto &entry) {
                                      return value < entry.first;
                                    }),
                  {offset, i});
    plan.offsets[in.value] = offset;
    plan.arenaBytes = std::max(plan.arenaBytes, offset + in.bytes);
  }
  for (auto [view, viewed] : plan.views)
    plan.offsets[view] = plan.offsets.lookup(viewed);
  return plan;
}
