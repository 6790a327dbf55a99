//===- SplitFunctions.cpp - Large generated functions in parts --*- C++ -*-===//
//
// A stage function of a large model is one straight-line function of
// thousands of kernel calls, each with its own Tensor locals (a shape
// vector, so a destructor and an exception cleanup each). The C++
// compiler's optimizer is superlinear in the size of such a function, so
// splitFunctions cuts it into parts of bounded size, called in order:
//
//   void stage0_forward_part0(pp::rt::StageContext& v1, int64_t v2) { ... }
//   void stage0_forward_part1(pp::rt::StageContext& v1, int64_t v2) { ... }
//   void stage0_forward(pp::rt::StageContext& v1, int64_t v2) {
//     stage0_forward_part0(v1, v2);
//     stage0_forward_part1(v1, v2);
//     return;
//   }
//
// Parts take the function's arguments only. A value a later part uses is
// recomputed there when it is a pure function of the arguments (a view of
// the arena, a global, a constant, the kernel context, a reshaped view, an
// address of one); a part ends only where nothing else is live, so the
// calls and their order are those of the original function and the program
// computes the same.
//
//===----------------------------------------------------------------------===//

#include "pp/Conversion/PPToEmitC/PPToEmitC.h"

#include "mlir/Dialect/EmitC/IR/EmitC.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"

#include <functional>

using namespace mlir;

namespace {

/// Runtime helpers (pp/Runtime/Generated.h) whose result depends on their
/// operands and the stage context only, and which touch no tensor data: a
/// later part may call them again for the same value. (Tensor structs are
/// never changed after they are made: kernels write through their data
/// pointers.) The held-buffer calls (stash and sum targets, unstash,
/// accumulated and receive views) give the same buffer when asked again for
/// the same value while the function runs (StageState); a receive view
/// receives on its first call only.
constexpr llvm::StringLiteral kPureCallees[] = {
    "pp::rt::gen::kernels",          "pp::rt::gen::view",
    "pp::rt::gen::global",           "pp::rt::gen::constant",
    "pp::rt::gen::reshaped",         "pp::rt::gen::addr",
    "pp::rt::gen::addrMut",          "pp::rt::gen::pointers",
    "pp::rt::gen::mutablePointers",  "pp::rt::gen::stashTarget",
    "pp::rt::gen::accumulateTarget", "pp::rt::gen::unstashView",
    "pp::rt::gen::accumulatedView",  "pp::rt::gen::recvView"};

bool isPureOp(Operation *op) {
  if (op->getNumRegions() != 0 || op->getNumResults() != 1)
    return false;
  if (isa<emitc::ConstantOp, emitc::LiteralOp>(op))
    return true;
  auto call = dyn_cast<emitc::CallOpaqueOp>(op);
  return call && llvm::is_contained(kPureCallees, call.getCallee());
}

int64_t countOps(Operation *op) {
  int64_t n = 0;
  op->walk([&](Operation *) { ++n; });
  return n;
}

/// Splits `fn` (one block, no results) into parts of about `maxOps` ops;
/// returns the number of parts (1: left as it is).
int64_t splitFunction(emitc::FuncOp fn, int64_t maxOps, SymbolTable &symbols) {
  Block &body = fn.getBody().front();
  SmallVector<Operation *> ops;
  for (Operation &op : body.without_terminator())
    ops.push_back(&op);
  if (ops.empty())
    return 1;

  // Values a later part may recompute: pure ops of the arguments and of
  // other such values.
  DenseMap<Operation *, int64_t> index;
  for (auto [i, op] : llvm::enumerate(ops))
    index[op] = i;
  DenseSet<Value> recomputable;
  for (Operation *op : ops)
    if (isPureOp(op) && llvm::all_of(op->getOperands(), [&](Value v) {
          return isa<BlockArgument>(v) || recomputable.contains(v);
        }))
      recomputable.insert(op->getResult(0));

  // reach[i]: the last op that uses a value, not recomputable, of ops
  // [0, i]; a part may end after op i only where reach[i] <= i.
  SmallVector<int64_t> lastUse(ops.size());
  for (auto [i, op] : llvm::enumerate(ops)) {
    lastUse[i] = i;
    for (Value result : op->getResults()) {
      if (recomputable.contains(result))
        continue;
      for (Operation *user : result.getUsers()) {
        Operation *top = body.findAncestorOpInBlock(*user);
        auto it = top ? index.find(top) : index.end();
        if (it != index.end())
          lastUse[i] = std::max(lastUse[i], it->second);
      }
    }
  }
  SmallVector<std::pair<int64_t, int64_t>> parts; // [begin, end)
  int64_t begin = 0, size = 0, reach = 0;
  for (auto [i, op] : llvm::enumerate(ops)) {
    size += countOps(op);
    reach = std::max(reach, lastUse[i]);
    bool last = static_cast<size_t>(i) + 1 == ops.size();
    if (last || (size >= maxOps && reach <= static_cast<int64_t>(i))) {
      parts.push_back({begin, static_cast<int64_t>(i) + 1});
      begin = i + 1;
      size = 0;
    }
  }
  if (parts.size() < 2)
    return 1;

  OpBuilder b(fn);
  Location loc = fn.getLoc();
  SmallVector<emitc::FuncOp> partFunctions;
  for (auto [n, range] : llvm::enumerate(parts)) {
    auto part = emitc::FuncOp::create(
        b, loc, (fn.getSymName() + "_part" + Twine(n)).str(),
        fn.getFunctionType());
    // Renamed if the name is taken.
    symbols.insert(part);
    Block *entry = part.addEntryBlock();
    OpBuilder pb = OpBuilder::atBlockEnd(entry);
    IRMapping mapping;
    for (auto [from, to] :
         llvm::zip(body.getArguments(), entry->getArguments()))
      mapping.map(from, to);
    // Recomputes, in order, the values of earlier parts this one uses.
    std::function<void(Value)> provide = [&](Value v) {
      if (mapping.contains(v))
        return;
      Operation *def = v.getDefiningOp();
      // Parts end where only recomputable values are live.
      assert(recomputable.contains(v) && "a part uses a value it cannot "
                                         "recompute");
      for (Value operand : def->getOperands())
        provide(operand);
      pb.clone(*def, mapping);
    };
    for (int64_t i = range.first; i < range.second; ++i) {
      ops[i]->walk([&](Operation *nested) {
        for (Value operand : nested->getOperands()) {
          Operation *def = operand.getDefiningOp();
          if ((isa<BlockArgument>(operand) &&
               operand.getParentBlock() == &body) ||
              (def && def->getBlock() == &body &&
               index.lookup(def) < range.first))
            provide(operand);
        }
      });
      pb.clone(*ops[i], mapping);
    }
    emitc::ReturnOp::create(pb, loc, Value());
    partFunctions.push_back(part);
  }

  // The function calls its parts.
  for (Operation *op : llvm::reverse(ops))
    op->erase();
  OpBuilder fb(body.getTerminator());
  SmallVector<Value> args(body.getArguments().begin(),
                          body.getArguments().end());
  for (emitc::FuncOp part : partFunctions)
    emitc::CallOpaqueOp::create(fb, loc, TypeRange{}, part.getSymName(), args);
  return parts.size();
}

} // namespace

int64_t pp::splitFunctions(ModuleOp module, int64_t maxOps) {
  SymbolTable symbols(module);
  int64_t split = 0;
  for (auto fn : llvm::to_vector(module.getOps<emitc::FuncOp>())) {
    // Functions with specifiers (the static table, inline fused kernels)
    // stay whole: a part has external linkage.
    ArrayAttr specifiers = fn.getSpecifiersAttr();
    if (maxOps <= 0 || fn.isExternal() || !fn.getBody().hasOneBlock() ||
        (specifiers && !specifiers.empty()) ||
        fn.getFunctionType().getNumResults() != 0 || countOps(fn) <= maxOps)
      continue;
    if (splitFunction(fn, maxOps, symbols) > 1)
      ++split;
  }
  return split;
}
