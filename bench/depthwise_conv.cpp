//===- depthwise_conv.cpp - Depthwise convolutions: direct against oneDNN -===//
//
// Times the three F32 depthwise convolution kernels (conv, convGradInput,
// convGradWeight) on the depthwise layers of the coverage sweep's models
// (batch 16, 64 x 64 images; ConvNeXt also at 224 x 224, batch 4) as the
// runtime runs them (ConvImpl::Auto: oneDNN's JIT kernels, else the direct
// loops of lib/cpu/Depthwise.cpp) and as oneDNN alone runs them
// (ConvImpl::OneDnn, PP_RUNTIME_CONV=onednn: its own im2col + GEMM where it
// has no JIT kernel), alternately, and prints per kernel the median of
// `reps` calls of each in ms, their ratio, and which code ran under Auto.
// Built by hand against the runtime library:
//   g++ -O2 -std=c++17 -Iruntime/include -Iruntime/lib \
//     bench/depthwise_conv.cpp build/runtime/libpp_runtime.a -ldnnl \
//     -lopenblas -fopenmp -o depthwise_conv
// Usage: depthwise_conv THREADS REPS ROUNDS
//
//===----------------------------------------------------------------------===//

#include "KernelBench.h"
#include "cpu/Dnnl.h"
#include "pp/Runtime/Kernels.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

using namespace pp::rt;
using namespace pp::bench;
using pp::rt::cpu::ConvImpl;

namespace {

struct Layer {
  const char *model;
  int64_t n, c, size, kernel, stride;
};

void benchLayer(Context &ctx, int reps, int rounds, const Layer &l) {
  int64_t pad = l.kernel / 2;
  int64_t out = (l.size + 2 * pad - l.kernel) / l.stride + 1;
  std::vector<int64_t> xShape{l.n, l.c, l.size, l.size},
      yShape{l.n, l.c, out, out}, wShape{l.c, 1, l.kernel, l.kernel};
  int64_t xn = l.n * l.c * l.size * l.size, yn = l.n * l.c * out * out;
  std::vector<float> x = filled(xn, 0.5f), dy = filled(yn, -0.1f),
                     w = filled(l.c * l.kernel * l.kernel, 0.f), y(yn), dx(xn),
                     dw(w.size());
  Tensor tx = tensorOf(x, xShape), tdy = tensorOf(dy, yShape),
         tw = tensorOf(w, wShape), ty = tensorOf(y, yShape),
         tdx = tensorOf(dx, xShape), tdw = tensorOf(dw, wShape);
  WindowParams p;
  p.kernel = {l.kernel, l.kernel};
  p.strides = {l.stride, l.stride};
  p.pads = {pad, pad, pad, pad};
  p.group = l.c;
  std::function<void()> kernels[3] = {
      [&] { check(conv(ctx, tx, tw, nullptr, p, ty)); },
      [&] { check(convGradInput(ctx, tdy, tw, p, tdx)); },
      [&] { check(convGradWeight(ctx, tdy, tx, p, tdw)); }};
  const char *names[3] = {"forward", "input grad", "weight grad"};
  for (int k = 0; k < 3; ++k) {
    std::vector<double> autoMs, oneDnnMs;
    bool direct = false;
    for (int r = 0; r < rounds; ++r)
      for (ConvImpl impl : {ConvImpl::Auto, ConvImpl::OneDnn}) {
        cpu::setConvImpl(impl);
        kernels[k](); // warm-up: primitive caches, first touch
        std::vector<double> times;
        int64_t before = cpu::dnnlConvCalls();
        for (int i = 0; i < reps; ++i)
          times.push_back(msOf(kernels[k]));
        if (impl == ConvImpl::Auto) {
          direct = cpu::dnnlConvCalls() == before;
          autoMs.push_back(median(times));
        } else {
          oneDnnMs.push_back(median(times));
        }
      }
    double a = median(autoMs), o = median(oneDnnMs);
    std::printf("%-14s %4lldx%-4lld %3lldx%-3lld k%lld s%lld %-11s %8.3f "
                "%8.3f %6.3fx  %s\n",
                l.model, (long long)l.n, (long long)l.c, (long long)l.size,
                (long long)l.size, (long long)l.kernel, (long long)l.stride,
                names[k], a, o, a / o, direct ? "direct" : "oneDNN");
  }
}

} // namespace

int main(int argc, char **argv) {
  Context ctx;
  ctx.numThreads = argc > 1 ? std::atoi(argv[1]) : 1;
  int reps = argc > 2 ? std::atoi(argv[2]) : 7;
  int rounds = argc > 3 ? std::atoi(argv[3]) : 3;
  const Layer layers[] = {
      {"convnext_tiny", 16, 96, 16, 7, 1}, {"convnext_tiny", 16, 192, 8, 7, 1},
      {"convnext_tiny", 16, 384, 4, 7, 1}, {"convnext_tiny", 16, 768, 2, 7, 1},
      {"convnext_tiny", 4, 96, 56, 7, 1},  {"convnext_tiny", 4, 768, 7, 7, 1},
      {"mobilenet_v2", 16, 32, 32, 3, 1},  {"mobilenet_v2", 16, 96, 32, 3, 2},
      {"mobilenet_v2", 16, 144, 16, 3, 1}, {"mobilenet_v2", 16, 576, 4, 3, 1},
      {"mobilenet_v2", 16, 960, 2, 3, 1},  {"efficientnet", 16, 240, 8, 5, 1},
      {"efficientnet", 16, 672, 4, 5, 1},  {"efficientnet", 16, 1152, 2, 5, 1},
  };
  std::printf("%-14s %-9s %-7s %-6s %-11s %8s %8s %7s  %s\n", "model", "NxC",
              "plane", "window", "kernel", "auto ms", "oneDNN", "ratio",
              "auto ran");
  for (const Layer &l : layers)
    benchLayer(ctx, reps, rounds, l);
  return 0;
}
