//===- CostModelTest.cpp - Work, roofline times and profiles -----*- C++
//-*-===//

#include "pp/Analysis/CostModel.h"
#include "pp/Dialect/ONNX/IR/ONNXOps.h"
#include "pp/Dialect/Train/IR/TrainOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using namespace mlir;

namespace {

const char *kModel = R"mlir(
onnx.global "trainable" @w : tensor<16x32xf32>
onnx.global "trainable" @b : tensor<16xf32>
func.func @main(%x: tensor<8x32xf32>) -> tensor<8x16xf32> {
  %w = onnx.global_read @w : tensor<16x32xf32>
  %b = onnx.global_read @b : tensor<16xf32>
  %y = onnx.Gemm %x, %w, %b {transB = 1 : i64} : (tensor<8x32xf32>, tensor<16x32xf32>, tensor<16xf32>) -> tensor<8x16xf32> loc("fc")
  %r = onnx.Relu %y : (tensor<8x16xf32>) -> tensor<8x16xf32> loc("relu")
  %s = onnx.Sigmoid %r : (tensor<8x16xf32>) -> tensor<8x16xf32> loc("sigmoid")
  %to16x8 = onnx.Constant dense<[16, 8]> : tensor<2xi64>
  %to8x16 = onnx.Constant dense<[8, 16]> : tensor<2xi64>
  %t = onnx.Reshape %s, %to16x8 : (tensor<8x16xf32>, tensor<2xi64>) -> tensor<16x8xf32> loc("reshape")
  %u = onnx.Reshape %t, %to8x16 : (tensor<16x8xf32>, tensor<2xi64>) -> tensor<8x16xf32>
  return %u : tensor<8x16xf32>
}
)mlir";

struct Fixture : public ::testing::Test {
  Fixture() : context(makeRegistry()) { context.loadAllAvailableDialects(); }
  static DialectRegistry makeRegistry() {
    DialectRegistry registry;
    registry.insert<pp::onnx::ONNXDialect, pp::train::TrainDialect,
                    func::FuncDialect>();
    pp::train::registerONNXGradients(registry);
    return registry;
  }
  Operation *opNamed(func::FuncOp func, StringRef name) {
    Operation *found = nullptr;
    func.walk([&](Operation *op) {
      if (pp::getOpName(op) == name)
        found = op;
    });
    return found;
  }
  MLIRContext context;
};

TEST_F(Fixture, WorkActivationsAndParameters) {
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(kModel, &context);
  ASSERT_TRUE(module);
  auto func = module->lookupSymbol<func::FuncOp>("main");
  Block &body = func.getBody().front();
  unsigned before = body.getOperations().size();
  DenseSet<Value> saved = pp::findValuesSavedForBackward(body);
  // Building the backward in place leaves the forward untouched.
  EXPECT_EQ(body.getOperations().size(), before);

  Operation *gemm = opNamed(func, "fc");
  Operation *relu = opNamed(func, "relu");
  Operation *sigmoid = opNamed(func, "sigmoid");
  Operation *reshape = opNamed(func, "reshape");
  ASSERT_TRUE(gemm && relu && sigmoid && reshape);
  // Gemm's weight gradient reads x; Relu and Sigmoid read their outputs
  // (Relu the sign, which is its input's), not the Gemm's; Reshape nothing.
  EXPECT_TRUE(saved.contains(func.getArgument(0)));
  EXPECT_FALSE(saved.contains(gemm->getResult(0)));
  EXPECT_TRUE(saved.contains(relu->getResult(0)));
  EXPECT_TRUE(saved.contains(sigmoid->getResult(0)));
  EXPECT_FALSE(saved.contains(reshape->getResult(0)));

  pp::CostModel model;
  model.setSavedValues(saved);
  pp::OpWork work = model.getWork(gemm);
  EXPECT_EQ(work.forwardFlops, 2.0 * 8 * 16 * 32);
  EXPECT_EQ(work.backwardFlops, 2 * work.forwardFlops);
  EXPECT_EQ(work.parameterBytes, (16 * 32 + 16) * 4);
  EXPECT_EQ(work.activationBytes, 0);
  EXPECT_EQ(model.getWork(relu).activationBytes, 8 * 16 * 4);
  EXPECT_EQ(model.getWork(reshape).activationBytes, 0);
  EXPECT_EQ(model.getWork(reshape).forwardFlops, 0);

  // Roofline: compute-bound at 1 GFLOP/s, memory-bound at 1 KB/s.
  pp::cluster::Device device;
  device.kind = "test";
  device.peakFlopsF32 = 1e9;
  device.memoryBandwidth = 1e12;
  EXPECT_DOUBLE_EQ(model.getForwardTime(gemm, device), 8192 / 1e9);
  device.memoryBandwidth = 1e3;
  EXPECT_DOUBLE_EQ(model.getForwardTime(gemm, device), work.forwardBytes / 1e3);

  // A profile overrides the ops it names, for its device kind.
  auto profiled = pp::ProfiledCostModel::fromJSON(
      R"({"test": {"fc": {"forward_ms": 2.5, "backward_ms": 4}}})", "p.json");
  ASSERT_TRUE(!!profiled) << llvm::toString(profiled.takeError());
  EXPECT_DOUBLE_EQ((*profiled)->getForwardTime(gemm, device), 2.5e-3);
  EXPECT_DOUBLE_EQ((*profiled)->getBackwardTime(gemm, device), 4e-3);
  EXPECT_DOUBLE_EQ((*profiled)->getForwardTime(relu, device),
                   model.getForwardTime(relu, device));
  EXPECT_EQ((*profiled)->hits, 2);
  EXPECT_EQ((*profiled)->misses, 1);
}

TEST(ProfiledCostModel, ErrorsNameTheField) {
  auto check = [](const char *json, const char *expected) {
    auto model = pp::ProfiledCostModel::fromJSON(json, "prof.json");
    ASSERT_FALSE(!!model);
    std::string message = llvm::toString(model.takeError());
    EXPECT_NE(message.find(expected), std::string::npos) << message;
  };
  check("{", "prof.json: invalid JSON");
  check("[]", "prof.json: expected an object of device kinds");
  check(R"({"H100": 3})", "H100: expected an object of ops");
  check(R"({"H100": {"fc": {"forward_ms": -1}}})",
        "H100.fc.forward_ms: expected a number >= 0");
  check(R"({"H100": {"fc": {}}})", "H100.fc: needs forward_ms or backward_ms");
  // Times whose sums overflow (1e400 reads as infinity) make no plan.
  check(R"({"H100": {"fc": {"forward_ms": 1.7e308}}})",
        "prof.json: H100.fc.forward_ms: expected a number >= 0 and <= 1e+09 "
        "(ms), got 1.7e+308");
  check(R"({"H100": {"fc": {"backward_ms": 1e400}}})",
        "prof.json: H100.fc.backward_ms: expected a number >= 0 and <= 1e+09 "
        "(ms), got inf");
}

} // namespace
