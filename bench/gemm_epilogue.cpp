// Times a Gemm + bias + Relu layer on one thread, two ways, alternating:
//   sgemm + pass  dnnl_sgemm (what the runtime's F32 GEMM calls), then one
//                 pass adding the bias and applying the Relu (what the
//                 fused elementwise kernel does after it);
//   matmul        oneDNN's matmul primitive with the bias and an eltwise
//                 Relu post-op (the epilogue in the GEMM's own loop).
// Shapes: the widemlp layer (256 x 1024 x 1024) and the MLP test model's
// layers (8 x 784 x 128, 8 x 128 x 10). Prints the median of 31 runs of
// each, their ratio, and the largest difference between the two results.
//
// Build and run (Debian libdnnl-dev):
//   g++ -O2 -std=c++17 bench/gemm_epilogue.cpp -ldnnl -o /tmp/gemm_epilogue
//   OMP_NUM_THREADS=1 /tmp/gemm_epilogue
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

using namespace dnnl;

static double seconds() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int main() {
  engine cpu(engine::kind::cpu, 0);
  stream s(cpu);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uniform(-1, 1);
  struct Shape {
    int m, k, n;
  };
  for (Shape shape :
       {Shape{256, 1024, 1024}, Shape{8, 784, 128}, Shape{8, 128, 10}}) {
    int m = shape.m, k = shape.k, n = shape.n;
    std::vector<float> a(size_t(m) * k), b(size_t(k) * n), bias(n),
        viaSgemm(size_t(m) * n), viaMatmul(size_t(m) * n);
    for (float &x : a)
      x = uniform(rng);
    for (float &x : b)
      x = uniform(rng);
    for (float &x : bias)
      x = uniform(rng);

    memory::desc aDesc({m, k}, memory::data_type::f32, memory::format_tag::ab);
    memory::desc bDesc({k, n}, memory::data_type::f32, memory::format_tag::ab);
    memory::desc biasDesc({1, n}, memory::data_type::f32,
                          memory::format_tag::ab);
    memory::desc cDesc({m, n}, memory::data_type::f32, memory::format_tag::ab);
    post_ops ops;
    // oneDNN 2.x (Debian 12): scale, kind, alpha, beta.
    ops.append_eltwise(1.f, algorithm::eltwise_relu, 0.f, 0.f);
    primitive_attr attr;
    attr.set_post_ops(ops);
    matmul::primitive_desc pd(matmul::desc(aDesc, bDesc, biasDesc, cDesc), attr,
                              cpu);
    matmul layer(pd);
    memory aMem(aDesc, cpu, a.data()), bMem(bDesc, cpu, b.data()),
        biasMem(biasDesc, cpu, bias.data()), cMem(cDesc, cpu, viaMatmul.data());

    auto runSgemm = [&] {
      dnnl_sgemm('N', 'N', m, n, k, 1.f, a.data(), k, b.data(), n, 0.f,
                 viaSgemm.data(), n);
      for (int i = 0; i < m; ++i) {
        float *row = viaSgemm.data() + size_t(i) * n;
        for (int j = 0; j < n; ++j)
          row[j] = std::max(row[j] + bias[j], 0.f);
      }
    };
    auto runMatmul = [&] {
      layer.execute(s, {{DNNL_ARG_SRC, aMem},
                        {DNNL_ARG_WEIGHTS, bMem},
                        {DNNL_ARG_BIAS, biasMem},
                        {DNNL_ARG_DST, cMem}});
      s.wait();
    };
    runSgemm();
    runMatmul();
    std::vector<double> tSgemm, tMatmul;
    for (int r = 0; r < 31; ++r) {
      double t0 = seconds();
      runSgemm();
      double t1 = seconds();
      runMatmul();
      double t2 = seconds();
      tSgemm.push_back(t1 - t0);
      tMatmul.push_back(t2 - t1);
    }
    std::sort(tSgemm.begin(), tSgemm.end());
    std::sort(tMatmul.begin(), tMatmul.end());
    double worst = 0;
    for (size_t i = 0; i < viaSgemm.size(); ++i)
      worst = std::max(worst, double(std::fabs(viaSgemm[i] - viaMatmul[i])));
    double sg = tSgemm[15] * 1e3, mm = tMatmul[15] * 1e3;
    std::printf("%4d x %4d x %4d: sgemm + pass %8.3f ms, matmul with "
                "post-ops %8.3f ms, matmul / sgemm %.3f, worst difference "
                "%.2e\n",
                m, k, n, sg, mm, mm / sg, worst);
  }
  return 0;
}
