//===- Generated.h - Helpers that generated stage code calls ----*- C++ -*-===//
//
// The small portability layer of generated stage functions: arena views,
// status checks, addresses and the StageContext calls, as free functions
// (EmitC emits calls, not member calls). The same on every backend: the
// arena and the tensors live in device memory on CUDA, and nothing here
// touches their bytes except readInt, which copies one value out.
//
//===----------------------------------------------------------------------===//
#ifndef PP_RUNTIME_GENERATED_H
#define PP_RUNTIME_GENERATED_H

#include "pp/Runtime/Fused.h"
#include "pp/Runtime/Kernels.h"
#include "pp/Runtime/Memory.h"
#include "pp/Runtime/Program.h"

#include <cstdint>
#include <utility>
#include <vector>

namespace pp::rt::gen {

inline Context &kernels(StageContext &ctx) { return ctx.kernels(); }

/// A tensor at `offset` bytes into the running function's arena.
inline Tensor view(StageContext &ctx, int64_t offset, DType dtype,
                   std::vector<int64_t> shape) {
  return Tensor{ctx.arena() + offset, dtype, std::move(shape)};
}

/// Scratch `part` holding a tensor of `dtype` and `shape`.
inline Tensor scratch(StageContext &ctx, DType dtype,
                      std::vector<int64_t> shape, int part) {
  Tensor t{nullptr, dtype, std::move(shape)};
  t.data = ctx.scratch(part, t.bytes());
  return t;
}

/// A tensor with the storage of `base` and another shape (same bytes).
inline Tensor reshaped(const Tensor &base, std::vector<int64_t> shape) {
  return Tensor{base.data, base.dtype, std::move(shape)};
}

/// Fails the stage function on an error status, naming the op.
inline void check(StageContext &ctx, const Status &status, const char *op) {
  if (!status.ok())
    ctx.fail(op, status.message);
  if (ctx.timingOps)
    ctx.opFinished(op);
}

inline const Tensor *addr(const Tensor &value) { return &value; }
inline Tensor *addrMut(Tensor &value) { return &value; }

template <typename... Ts>
std::vector<const Tensor *> pointers(const Ts &...values) {
  return {&values...};
}
template <typename... Ts> std::vector<Tensor *> mutablePointers(Ts &...values) {
  return {&values...};
}

/// The first element of an I64 tensor (the optimizer's step counter).
inline int64_t readInt(const Tensor &value) {
  int64_t result = 0;
  copyFromBuffer(&result, value.data, sizeof(result));
  return result;
}

inline Tensor global(StageContext &ctx, int id) { return ctx.global(id); }
inline void writeGlobal(StageContext &ctx, int id, const Tensor &value) {
  ctx.writeGlobal(id, value);
}
inline Tensor constant(StageContext &ctx, int id) { return ctx.constant(id); }
inline void input(StageContext &ctx, int index, int64_t mb, Tensor &dst) {
  ctx.input(index, mb, dst);
}
inline void output(StageContext &ctx, int index, int64_t mb,
                   const Tensor &value) {
  ctx.output(index, mb, value);
}
inline void send(StageContext &ctx, int peer, int tag, int64_t mb,
                 const Tensor &value) {
  ctx.send(peer, tag, mb, value);
}
inline void recv(StageContext &ctx, int peer, int tag, int64_t mb,
                 Tensor &dst) {
  ctx.recv(peer, tag, mb, dst);
}
inline void stash(StageContext &ctx, int slot, int64_t mb,
                  const Tensor &value) {
  ctx.stash(slot, mb, value);
}
inline void unstash(StageContext &ctx, int slot, int64_t mb, Tensor &dst) {
  ctx.unstash(slot, mb, dst);
}
inline void accumulate(StageContext &ctx, int slot, const Tensor &value) {
  ctx.accumulate(slot, value);
}
inline void accumulated(StageContext &ctx, int slot, Tensor &dst) {
  ctx.accumulated(slot, dst);
}
inline Tensor stashTarget(StageContext &ctx, int slot, int64_t mb,
                          const Tensor &arenaView) {
  return ctx.stashTarget(slot, mb, arenaView);
}
inline Tensor accumulateTarget(StageContext &ctx, int slot,
                               const Tensor &arenaView) {
  return ctx.accumulateTarget(slot, arenaView);
}
inline Tensor recvView(StageContext &ctx, int peer, int tag, int64_t mb,
                       DType dtype, std::vector<int64_t> shape) {
  return ctx.recvView(peer, tag, mb, dtype, shape);
}
inline Tensor unstashView(StageContext &ctx, int slot, int64_t mb) {
  return ctx.unstashView(slot, mb);
}
inline Tensor accumulatedView(StageContext &ctx, int slot) {
  return ctx.accumulatedView(slot);
}
/// shard.all_reduce (sum): dst := the sum over the tensor-parallel group
/// of src.
inline void tpAllReduce(StageContext &ctx, const Tensor &src, Tensor &dst) {
  if (dst.data != src.data)
    check(ctx, copy(ctx.kernels(), src, dst), "shard.all_reduce");
  ctx.tensorParallelAllReduce(dst);
}
/// shard.all_gather: the group's parts of src along `axis`, in rank order.
inline void tpAllGather(StageContext &ctx, int64_t axis, const Tensor &src,
                        Tensor &dst) {
  ctx.tensorParallelAllGather(src, axis, dst);
}
/// shard.all_slice: this rank's part of the whole `src` along `axis`.
inline void tpAllSlice(StageContext &ctx, int64_t axis, const Tensor &src,
                       Tensor &dst) {
  std::vector<int64_t> starts(src.shape.size(), 0), steps(src.shape.size(), 1);
  starts[axis] = ctx.tensorParallelRank() * dst.shape[axis];
  check(ctx, slice(ctx.kernels(), src, starts, steps, dst), "shard.all_slice");
}
/// Whether the running function trains: BatchNormalization and Dropout
/// compiled for training run in inference mode in an evaluation.
inline bool training(StageContext &ctx) { return !ctx.evaluating; }
inline uint64_t dropoutSeed(StageContext &ctx, uint64_t stream) {
  return ctx.dropoutSeed(stream);
}
/// The position in the whole mini-batch's tensor of the first element of
/// micro-batch `mb`'s `numel` elements (Kernels.h's dropout offset).
inline uint64_t dropoutOffset(int64_t mb, int64_t numel) {
  return mb > 0 ? uint64_t(mb) * uint64_t(numel) : 0;
}
inline double learningRate(StageContext &ctx, double compiled) {
  return ctx.learningRate(compiled);
}

} // namespace pp::rt::gen

#endif // PP_RUNTIME_GENERATED_H
