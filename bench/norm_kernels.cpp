//===- norm_kernels.cpp - The runtime's normalisation kernels, timed ------===//
//
// Times pp::rt::batchNorm / batchNormGrad (training mode) and layerNorm /
// layerNormGrad on the shapes of the coverage sweep's models, F32, and
// prints one line per kernel and shape: the median of `reps` calls in ms.
// bench/norm_kernels.py runs it alternately with PyTorch's kernels of the
// same shapes. Built by hand against the runtime library:
//   g++ -O2 -std=c++17 -Iruntime/include bench/norm_kernels.cpp \
//     build/runtime/libpp_runtime.a -ldnnl -lopenblas -fopenmp -o norm_kernels
// Usage: norm_kernels THREADS REPS
//
//===----------------------------------------------------------------------===//

#include "KernelBench.h"
#include "pp/Runtime/Kernels.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

using namespace pp::rt;
using namespace pp::bench;

namespace {

void benchBatchNorm(Context &ctx, int reps, std::vector<int64_t> shape) {
  int64_t c = shape[1], n = 1;
  for (int64_t d : shape)
    n *= d;
  std::vector<float> x = filled(n, 0.5f), dy = filled(n, -0.1f), y(n), dx(n);
  std::vector<float> scale(c, 1.5f), bias(c, 0.1f), rm(c, 0.f), rv(c, 1.f),
      sm(c), si(c), ds(c), db(c);
  Tensor tx = tensorOf(x, shape), tdy = tensorOf(dy, shape),
         ty = tensorOf(y, shape), tdx = tensorOf(dx, shape);
  Tensor tsc = tensorOf(scale, {c}), tbi = tensorOf(bias, {c}),
         trm = tensorOf(rm, {c}), trv = tensorOf(rv, {c}),
         tsm = tensorOf(sm, {c}), tsi = tensorOf(si, {c}),
         tds = tensorOf(ds, {c}), tdb = tensorOf(db, {c});
  double fwd = medianMs(reps, [&] {
    check(batchNorm(ctx, tx, tsc, tbi, trm, trv, 1e-5f, 0.9f, true, ty, trm,
                    trv, &tsm, &tsi));
  });
  double bwd = medianMs(reps, [&] {
    check(batchNormGrad(ctx, tdy, tx, tsc, tsm, tsi, tdx, tds, tdb));
  });
  std::printf("batchnorm %lldx%lldx%lldx%lld fwd %.3f bwd %.3f\n",
              (long long)shape[0], (long long)shape[1], (long long)shape[2],
              (long long)shape[3], fwd, bwd);
}

void benchLayerNorm(Context &ctx, int reps, int64_t rows, int64_t cols) {
  int64_t n = rows * cols;
  std::vector<float> x = filled(n, 3.f), dy = filled(n, -0.1f), y(n), dx(n);
  std::vector<float> scale(cols, 1.5f), bias(cols, 0.1f), mean(rows), inv(rows),
      ds(cols), db(cols);
  Tensor tx = tensorOf(x, {rows, cols}), tdy = tensorOf(dy, {rows, cols}),
         ty = tensorOf(y, {rows, cols}), tdx = tensorOf(dx, {rows, cols});
  Tensor tsc = tensorOf(scale, {cols}), tbi = tensorOf(bias, {cols}),
         tm = tensorOf(mean, {rows, 1}), ti = tensorOf(inv, {rows, 1}),
         tds = tensorOf(ds, {cols}), tdb = tensorOf(db, {cols});
  double fwd = medianMs(reps, [&] {
    check(layerNorm(ctx, tx, tsc, &tbi, -1, 1e-5f, ty, tm, ti));
  });
  double bwd = medianMs(reps, [&] {
    check(layerNormGrad(ctx, tdy, tx, tsc, tm, ti, -1, tdx, tds, &tdb));
  });
  std::printf("layernorm %lldx%lld fwd %.3f bwd %.3f\n", (long long)rows,
              (long long)cols, fwd, bwd);
}

} // namespace

int main(int argc, char **argv) {
  Context ctx;
  ctx.numThreads = argc > 1 ? std::atoi(argv[1]) : 1;
  int reps = argc > 2 ? std::atoi(argv[2]) : 9;
  // maxvit_t's stem and MBConv planes (batch 8, 224), resnet-style planes.
  benchBatchNorm(ctx, reps, {8, 64, 112, 112});
  benchBatchNorm(ctx, reps, {8, 256, 56, 56});
  benchBatchNorm(ctx, reps, {16, 128, 16, 16});
  benchBatchNorm(ctx, reps, {8, 768, 7, 7});
  // maxvit_t's attention (49-token windows of 64), GPT / ViT rows.
  benchLayerNorm(ctx, reps, 25088, 64);
  benchLayerNorm(ctx, reps, 512, 768);
  benchLayerNorm(ctx, reps, 8 * 50, 768);
  benchLayerNorm(ctx, reps, 16 * 64, 96);
  return 0;
}
