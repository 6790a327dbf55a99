//===- ToyProgram.cpp - A hand-written stand-in for generated code --------===//
//
// A two-stage, two-device, four-micro-batch 1F1B training program written
// the way pipeline-opt's C++ emitter writes one, to test the training driver
// (runtime/lib/train) without the compiler:
//   stage 0: y = dropout(x · W0), sent to stage 1;
//   stage 1: z = y · W1, loss = mean((z - label)^2), output "loss" (mean);
//   backward functions with the gradients by hand, summed over the
//   micro-batches, and per-stage updates (SGD with momentum) that advance a
//   step counter global each stage holds a copy of.
//
// `--write-toy-data DIR` writes the data file (initial values) into DIR.
// Test-only faults, from the environment: PP_TOY_FAIL=1 gives stage 1's
// Gemm a wrongly shaped weight; PP_TOY_NAN=1 makes the loss NaN;
// PP_TOY_SLEEP=S makes stage 1 sleep S seconds in its first forward;
// PP_TOY_KILL=1 makes stage 1 SIGKILL itself during step 4;
// PP_TOY_NO_DROPOUT=1 sets Dropout's ratio to 0; PP_TOY_OTHER_PROGRAM=1
// makes another program (one arena size differs), whose checkpoints and
// data file identity differ from the toy's; PP_TOY_DIVERGE=K makes stage
// 1's update of step K write infinities into W1 (the step's loss is still
// finite).
//
//===----------------------------------------------------------------------===//

#include "pp/Runtime/Checksum.h"
#include "pp/Runtime/Generated.h"
#include "pp/Runtime/Memory.h"

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

using namespace pp::rt;
namespace kinds = pp::kinds;

namespace {

bool envFlag(const char *name) {
  const char *value = std::getenv(name);
  return value && *value && std::strcmp(value, "0") != 0;
}

/// Dropout's ratio; PP_TOY_NO_DROPOUT=1 turns it off so that a numpy
/// reference can follow the run exactly.
float dropoutRatio() { return envFlag("PP_TOY_NO_DROPOUT") ? 0.0f : 0.1f; }

void stage0_forward(StageContext &ctx, int64_t mb) {
  Tensor v0 = gen::view(ctx, 0, DType::F32, {2, 4});
  ctx.input(0, mb, v0);
  Tensor v1 = ctx.global(0);
  Tensor v2 = gen::view(ctx, 256, DType::F32, {2, 5});
  Status s3 =
      gemm(ctx.kernels(), v0, v1, nullptr, 1.0f, 0.0f, false, false, v2);
  gen::check(ctx, s3, "onnx.Gemm '/0/Gemm'");
  Tensor v4 = gen::view(ctx, 512, DType::F32, {2, 5});
  Tensor v5 = gen::view(ctx, 768, DType::Bool, {2, 5});
  Status s6 =
      dropout(ctx.kernels(), v2, dropoutRatio(), true, gen::dropoutSeed(ctx, 0),
              gen::dropoutOffset(mb, 10), v4, v5);
  gen::check(ctx, s6, "onnx.Dropout '/0/Dropout'");
  ctx.send(1, 0, mb, v4);
  ctx.stash(0, mb, v0);
  ctx.stash(1, mb, v5);
}

void stage1_forward(StageContext &ctx, int64_t mb) {
  static int calls = 0;
  if (envFlag("PP_TOY_KILL") && ++calls == 13)
    std::raise(SIGKILL); // the first forward of step 4
  if (const char *sleep = std::getenv("PP_TOY_SLEEP"); sleep && mb == 0)
    std::this_thread::sleep_for(std::chrono::duration<double>(atof(sleep)));
  Tensor v0 = gen::view(ctx, 0, DType::F32, {2, 5});
  ctx.recv(0, 0, mb, v0);
  Tensor v1 = ctx.global(1);
  if (envFlag("PP_TOY_FAIL"))
    v1 = gen::reshaped(v1, {3, 5});
  Tensor v2 = gen::view(ctx, 256, DType::F32, {2, 3});
  Status s3 =
      gemm(ctx.kernels(), v0, v1, nullptr, 1.0f, 0.0f, false, false, v2);
  gen::check(ctx, s3, "onnx.Gemm '/1/Gemm'");
  Tensor v4 = gen::view(ctx, 512, DType::F32, {2, 3});
  ctx.input(1, mb, v4);
  Tensor v5 = gen::view(ctx, 768, DType::F32, {2, 3});
  Status s6 = binary(ctx.kernels(), BinaryKind::Sub, v2, v4, v5);
  gen::check(ctx, s6, "onnx.Sub '/1/Sub'");
  Tensor v7 = gen::view(ctx, 1024, DType::F32, {2, 3});
  Status s8 = binary(ctx.kernels(), BinaryKind::Mul, v5, v5, v7);
  gen::check(ctx, s8, "onnx.Mul '/1/Mul'");
  Tensor v9 = gen::view(ctx, 1280, DType::F32, {});
  Status s10 = reduce(ctx.kernels(), ReduceKind::Mean, v7, {0, 1}, v9);
  gen::check(ctx, s10, "onnx.ReduceMean '/1/ReduceMean'");
  if (envFlag("PP_TOY_NAN")) {
    Status s11 = fill(ctx.kernels(), v9, std::nan(""));
    gen::check(ctx, s11, "test.nan");
  }
  ctx.output(0, mb, v9);
  ctx.stash(0, mb, v0);
  ctx.stash(1, mb, v5);
}

void stage1_backward(StageContext &ctx, int64_t mb) {
  Tensor v0 = gen::view(ctx, 0, DType::F32, {2, 5});
  ctx.unstash(0, mb, v0);
  Tensor v1 = gen::view(ctx, 256, DType::F32, {2, 3});
  ctx.unstash(1, mb, v1);
  // d loss / d z = 2 (z - label) / 6 per micro-batch, / 4 for the mean
  // over micro-batches: constant 0.
  Tensor v2 = ctx.constant(0);
  Tensor v3 = gen::view(ctx, 512, DType::F32, {2, 3});
  Status s4 = binary(ctx.kernels(), BinaryKind::Mul, v1, v2, v3);
  gen::check(ctx, s4, "onnx.Mul '/1/Mul_grad'");
  Tensor v5 = gen::view(ctx, 768, DType::F32, {5, 3});
  Status s6 = gemm(ctx.kernels(), v0, v3, nullptr, 1.0f, 0.0f, true, false, v5);
  gen::check(ctx, s6, "onnx.Gemm '/1/Gemm_grad_w'");
  ctx.accumulate(0, v5);
  Tensor v7 = ctx.global(1);
  Tensor v8 = gen::view(ctx, 1024, DType::F32, {2, 5});
  Status s9 = gemm(ctx.kernels(), v3, v7, nullptr, 1.0f, 0.0f, false, true, v8);
  gen::check(ctx, s9, "onnx.Gemm '/1/Gemm_grad_x'");
  ctx.send(0, 1, mb, v8);
}

void stage0_backward(StageContext &ctx, int64_t mb) {
  Tensor v0 = gen::view(ctx, 0, DType::F32, {2, 5});
  ctx.recv(1, 1, mb, v0);
  Tensor v1 = gen::view(ctx, 256, DType::Bool, {2, 5});
  ctx.unstash(1, mb, v1);
  Tensor v2 = gen::view(ctx, 512, DType::F32, {2, 5});
  Status s3 = dropoutGrad(ctx.kernels(), v0, v1, dropoutRatio(), v2);
  gen::check(ctx, s3, "onnx.Dropout '/0/Dropout_grad'");
  Tensor v4 = gen::view(ctx, 768, DType::F32, {2, 4});
  ctx.unstash(0, mb, v4);
  Tensor v5 = gen::view(ctx, 1024, DType::F32, {4, 5});
  Status s6 = gemm(ctx.kernels(), v4, v2, nullptr, 1.0f, 0.0f, true, false, v5);
  gen::check(ctx, s6, "onnx.Gemm '/0/Gemm_grad_w'");
  ctx.accumulate(0, v5);
}

/// SGD with momentum on weight `weight` (momentum buffer `moment`) and the
/// shared step counter (global 2).
void update(StageContext &ctx, int weight, int moment,
            const std::vector<int64_t> &shape) {
  Tensor v0 = gen::view(ctx, 0, DType::F32, shape);
  ctx.accumulated(0, v0);
  Tensor v1 = ctx.global(2);
  Tensor v2 = ctx.constant(1);
  Tensor v3 = gen::view(ctx, 256, DType::I64, {});
  Status s4 = binary(ctx.kernels(), BinaryKind::Add, v1, v2, v3);
  gen::check(ctx, s4, "onnx.Add 'step'");
  int64_t step = 0;
  copyFromBuffer(&step, v3.data, sizeof(step));
  Tensor v5 = gen::view(ctx, 512, DType::F32, shape);
  Status s6 = copy(ctx.kernels(), ctx.global(weight), v5);
  gen::check(ctx, s6, "train.sgd");
  Tensor v7 = gen::view(ctx, 768, DType::F32, shape);
  Status s8 = copy(ctx.kernels(), ctx.global(moment), v7);
  gen::check(ctx, s8, "train.sgd");
  Status s9 =
      sgdStep(ctx.kernels(), v5, v0, &v7, step, 0.1f, 0.9f, 0.0f, 0.0f, false);
  gen::check(ctx, s9, "train.sgd");
  if (const char *diverge = std::getenv("PP_TOY_DIVERGE");
      diverge && weight == 1 && step == std::atoll(diverge)) {
    Status s10 = fill(ctx.kernels(), v5, INFINITY);
    gen::check(ctx, s10, "test.diverge");
  }
  ctx.writeGlobal(weight, v5);
  ctx.writeGlobal(moment, v7);
  ctx.writeGlobal(2, v3);
}

void stage0_update(StageContext &ctx, int64_t) { update(ctx, 0, 3, {4, 5}); }
void stage1_update(StageContext &ctx, int64_t) { update(ctx, 1, 4, {5, 3}); }

ActionInfo F(int64_t stage, int64_t mb) {
  return {kinds::ActionKind::Forward, stage == 0 ? 0 : 1, stage, mb};
}
ActionInfo B(int64_t stage, int64_t mb) {
  return {kinds::ActionKind::Backward, stage == 0 ? 3 : 2, stage, mb};
}

const ProgramInfo program = {
    /*modelName=*/"toy",
    /*scheduleKind=*/kinds::ScheduleKind::OneFOneB,
    /*numStages=*/2,
    /*microBatches=*/4,
    /*plannedPeakBytes=*/{4096, 4096},
    /*plannedBusyNanos=*/{},
    /*deviceNames=*/{"cpu0", "cpu1"},
    /*globals=*/
    {{"W0", DType::F32, {4, 5}, true, 0, 0},
     {"W1", DType::F32, {5, 3}, true, 80, 1},
     {"step", DType::I64, {}, false, 140, 0},
     {"W0.momentum", DType::F32, {4, 5}, false, 148, 0},
     {"W1.momentum", DType::F32, {5, 3}, false, 228, 1}},
    /*constants=*/
    {{DType::F32, {}, 288}, {DType::I64, {}, 292}},
    /*inputs=*/
    {{"x", DType::F32, {8, 4}, 10}, {"label", DType::F32, {8, 3}, 10}},
    /*outputs=*/{{"loss", "mean", DType::F32, {}}},
    /*functions=*/
    {{"stage0_forward", stage0_forward, 0, kinds::Phase::Forward, 1024},
     {"stage1_forward", stage1_forward, 1, kinds::Phase::Forward, 1536},
     {"stage1_backward", stage1_backward, 1, kinds::Phase::Backward, 1536},
     {"stage0_backward", stage0_backward, 0, kinds::Phase::Backward, 1536},
     {"stage0_update", stage0_update, 0, kinds::Phase::Update, 1024},
     {"stage1_update", stage1_update, 1, kinds::Phase::Update, 1024}},
    /*stageGlobals=*/{{0, 2, 3}, {1, 2, 4}},
    /*schedule=*/
    {{F(0, 0),
      F(0, 1),
      B(0, 0),
      F(0, 2),
      B(0, 1),
      F(0, 3),
      B(0, 2),
      B(0, 3),
      {kinds::ActionKind::GradReduce, -1, 0, -1},
      {kinds::ActionKind::OptimizerStep, 4, 0, -1}},
     {F(1, 0),
      B(1, 0),
      F(1, 1),
      B(1, 1),
      F(1, 2),
      B(1, 2),
      F(1, 3),
      B(1, 3),
      {kinds::ActionKind::OptimizerStep, 5, 1, -1}}},
    /*dataFile=*/"pp-rt-train-toy.data",
    /*onnxFile=*/"pp-rt-train-toy.onnx",
};

/// The initial values at the offsets of `program`.
std::string toyData() {
  std::string bytes(300, '\0');
  auto put = [&](int64_t offset, const void *data, size_t size) {
    std::memcpy(bytes.data() + offset, data, size);
  };
  for (int i = 0; i < 20; ++i) {
    float w = 0.5f * std::sin(1.0f + i);
    put(4 * i, &w, 4);
  }
  for (int i = 0; i < 15; ++i) {
    float w = 0.5f * std::cos(2.0f + 3 * i);
    put(80 + 4 * i, &w, 4);
  }
  float scale = 2.0f / (6 * 4);
  int64_t one = 1;
  put(288, &scale, 4);
  put(292, &one, 8);
  return bytes;
}

int writeToyData(const std::string &dir) {
  std::string bytes = toyData();
  std::string path = dir + "/" + program.dataFile;
  FILE *file = std::fopen(path.c_str(), "wb");
  if (!file ||
      std::fwrite(bytes.data(), 1, bytes.size(), file) != bytes.size()) {
    std::fprintf(stderr, "cannot write '%s'\n", path.c_str());
    return 1;
  }
  return std::fclose(file) == 0 ? 0 : 1;
}

} // namespace

int main(int argc, char **argv) {
  if (argc == 3 && std::string(argv[1]) == "--write-toy-data")
    return writeToyData(argv[2]);
  // The data file's CRC, as the code generator records it.
  ProgramInfo toy = program;
  std::string data = toyData();
  toy.dataHash = crc32c(0, data.data(), data.size());
  if (envFlag("PP_TOY_OTHER_PROGRAM"))
    toy.functions[0].arenaBytes += 256;
  return trainMain(toy, argc, argv);
}
