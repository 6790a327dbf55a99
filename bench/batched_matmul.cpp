//===- batched_matmul.cpp - Attention's batched products --------*- C++ -*-===//
//
// The F32 batched products of swin_t's attention (batch 16, 64 x 64: 144 x 3
// and 16 x 12 matrices of 49 x 32 and 49 x 49), each as the step runs them
// now (an operand read transposed through matmul's flag) and as before
// (a Transpose copy, then the plain product), each with the batched matmul
// primitive (GemmImpl::Auto) and with dnnl_sgemm per matrix
// (GemmImpl::Sgemm), alternating `ROUNDS` times; the mean of each round's
// median of `REPS` calls, in ms.
// Built by hand against the runtime library:
//   g++ -O2 -std=c++17 -Iruntime/include -Iruntime/lib -Ibench \
//     bench/batched_matmul.cpp build/runtime/libpp_runtime.a -ldnnl \
//     -lopenblas -fopenmp -o batched_matmul
// Usage: batched_matmul THREADS REPS ROUNDS
//
//===----------------------------------------------------------------------===//

#include "KernelBench.h"
#include "cpu/Dnnl.h"
#include "pp/Runtime/Kernels.h"

#include <cstdio>
#include <cstdlib>
#include <utility>
#include <vector>

using namespace pp::rt;
using namespace pp::bench;

namespace {

struct Problem {
  const char *name;
  std::vector<int64_t> a, b; // as stored
  bool transA, transB;
};

int64_t numel(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

std::vector<int64_t> swapped(std::vector<int64_t> shape, bool swap) {
  if (swap)
    std::swap(shape[shape.size() - 2], shape.back());
  return shape;
}

} // namespace

int main(int argc, char **argv) {
  Context ctx;
  ctx.numThreads = argc > 1 ? std::atoi(argv[1]) : 1;
  int reps = argc > 2 ? std::atoi(argv[2]) : 11;
  int rounds = argc > 3 ? std::atoi(argv[3]) : 3;
  std::vector<Problem> problems = {
      {"q k^T", {144, 3, 49, 32}, {144, 3, 49, 32}, false, true},
      {"attn v", {144, 3, 49, 49}, {144, 3, 49, 32}, false, false},
      {"attn^T dy", {144, 3, 49, 49}, {144, 3, 49, 32}, true, false},
      {"q k^T", {16, 12, 49, 32}, {16, 12, 49, 32}, false, true},
      {"attn v", {16, 12, 49, 49}, {16, 12, 49, 32}, false, false},
      {"attn^T dy", {16, 12, 49, 49}, {16, 12, 49, 32}, true, false},
  };
  std::printf("threads %d; ms: flag = operand read transposed, copy = "
              "Transpose then product\n",
              ctx.numThreads);
  std::printf("%-10s %-16s %10s %10s %10s %10s\n", "product", "a", "batched",
              "batched", "sgemm", "sgemm");
  std::printf("%-10s %-16s %10s %10s %10s %10s\n", "", "", "flag", "copy",
              "flag", "copy");
  const std::vector<int64_t> perm = {0, 1, 3, 2};
  for (const Problem &p : problems) {
    std::vector<int64_t> opA = swapped(p.a, p.transA),
                         opB = swapped(p.b, p.transB);
    std::vector<int64_t> yShape = {opA[0], opA[1], opA[2], opB[3]};
    std::vector<float> av = filled(numel(p.a), 0), bv = filled(numel(p.b), 0),
                       yv(numel(yShape)), tav(numel(opA)), tbv(numel(opB));
    Tensor a = tensorOf(av, p.a), b = tensorOf(bv, p.b),
           y = tensorOf(yv, yShape), ta = tensorOf(tav, opA),
           tb = tensorOf(tbv, opB);
    auto flag = [&] { check(matmul(ctx, a, b, y, p.transA, p.transB)); };
    auto copy = [&] {
      if (p.transA)
        check(transpose(ctx, a, perm, ta));
      if (p.transB)
        check(transpose(ctx, b, perm, tb));
      check(matmul(ctx, p.transA ? ta : a, p.transB ? tb : b, y));
    };
    double ms[4] = {0, 0, 0, 0};
    for (int r = 0; r < rounds; ++r) {
      cpu::setGemmImpl(cpu::GemmImpl::Auto);
      ms[0] += medianMs(reps, flag);
      ms[1] += medianMs(reps, copy);
      cpu::setGemmImpl(cpu::GemmImpl::Sgemm);
      ms[2] += medianMs(reps, flag);
      ms[3] += medianMs(reps, copy);
    }
    char shape[64];
    std::snprintf(shape, sizeof shape, "%ldx%ldx%ldx%ld%s",
                  static_cast<long>(p.a[0]), static_cast<long>(p.a[1]),
                  static_cast<long>(p.a[2]), static_cast<long>(p.a[3]),
                  p.transA ? "^T" : "");
    std::printf("%-10s %-16s %10.3f %10.3f %10.3f %10.3f\n", p.name, shape,
                ms[0] / rounds, ms[1] / rounds, ms[2] / rounds, ms[3] / rounds);
  }
  return 0;
}
