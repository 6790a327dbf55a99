//===- MemoryPlan.h - Static buffer plan of a stage function ----*- C++ -*-===//
//
// Every tensor a straight-line stage function computes gets an offset in one
// arena, chosen at compile time from the values' live ranges (definition to
// last use): values that are never live at the same time share bytes.
// Placement is greedy by decreasing size at the lowest free offset (the
// arena planners of TFLite and XLA do the same), aligned for GPU access.
// Reads of globals and constants are not in the arena (they live in the
// model's state), nor are stashed values after the function returns (the
// stash is counted per micro-batch by the schedule).
//
//===----------------------------------------------------------------------===//
#ifndef PP_ANALYSIS_MEMORYPLAN_H
#define PP_ANALYSIS_MEMORYPLAN_H

#include "mlir/IR/Block.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/DenseMap.h"

#include <cstdint>

namespace pp {

struct MemoryPlan {
  /// Byte offset of every planned value in the arena.
  llvm::DenseMap<mlir::Value, int64_t> offsets;
  /// Size of the arena the offsets need.
  int64_t arenaBytes = 0;
  /// The most bytes live at one moment: no plan can do with less.
  int64_t peakLiveBytes = 0;
  /// Bytes the values would take without reuse.
  int64_t totalBytes = 0;
};

/// Alignment of every buffer in the arena.
constexpr int64_t kArenaAlignment = 256;

/// Plans the buffers of the values `block` defines (op results, in order).
/// `fusedInto` (code generation's elementwise fusion) maps an op that runs
/// inside a fused kernel to the group's last op, where the kernel runs: its
/// results get no buffer, and its operands stay live until that op.
MemoryPlan planMemory(mlir::Block &block,
                      const llvm::DenseMap<mlir::Operation *, mlir::Operation *>
                          *fusedInto = nullptr);

} // namespace pp

#endif // PP_ANALYSIS_MEMORYPLAN_H
