//===- KernelFactsTest.cpp - KernelFactsOpInterface of onnx ops -*- C++ -*-===//
//
// The facts the interpreter, the code generator, the recompute pass and the
// cost model read come from each op's ODS definition.
//
//===----------------------------------------------------------------------===//

#include "pp/Dialect/ONNX/IR/ONNXOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using namespace mlir;
namespace onnx = pp::onnx;
namespace rt = pp::rt;

namespace {

const char *kModel = R"mlir(
func.func @main(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> tensor<4x8xf32> {
  %m = onnx.MatMul %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %r = onnx.Relu %m : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %l = onnx.LeakyRelu %r {alpha = 2.500000e-01 : f32} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %g = onnx.Gelu %l {approximate = "tanh"} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %e = onnx.Gelu %g : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %f = onnx.Floor %e : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %s = onnx.Softmax %f : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %a = onnx.Add %s, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %a : tensor<4x8xf32>
}
)mlir";

TEST(KernelFacts, FromODS) {
  DialectRegistry registry;
  registry.insert<onnx::ONNXDialect, func::FuncDialect>();
  MLIRContext context(registry);
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(kModel, &context);
  ASSERT_TRUE(module);
  std::vector<onnx::KernelFactsOpInterface> ops;
  module->walk([&](onnx::KernelFactsOpInterface op) { ops.push_back(op); });
  ASSERT_EQ(ops.size(), 8u);
  auto [matmul, relu, leaky, geluTanh, geluErf, floor, softmax, add] =
      std::tuple(ops[0], ops[1], ops[2], ops[3], ops[4], ops[5], ops[6],
                 ops[7]);

  EXPECT_TRUE(matmul.isContraction());
  EXPECT_FALSE(matmul.getUnaryKind());
  EXPECT_FALSE(matmul.isMemoryBound());

  EXPECT_EQ(relu.getUnaryKind(), rt::UnaryKind::Relu);
  EXPECT_TRUE(relu.isElementwise());
  EXPECT_TRUE(relu.isMemoryBound());
  EXPECT_FALSE(relu.isContraction());

  EXPECT_EQ(leaky.getUnaryKind(), rt::UnaryKind::LeakyRelu);
  EXPECT_EQ(leaky.getUnaryAlpha(), 0.25f);

  // Gelu's kernel follows its `approximate` attribute.
  EXPECT_EQ(geluTanh.getUnaryKind(), rt::UnaryKind::GeluTanh);
  EXPECT_EQ(geluErf.getUnaryKind(), rt::UnaryKind::GeluErf);

  // Floor runs a kernel but is no recomputation candidate, and has no
  // train.unary_grad.
  EXPECT_EQ(floor.getUnaryKind(), rt::UnaryKind::Floor);
  EXPECT_FALSE(floor.isMemoryBound());
  EXPECT_FALSE(rt::hasUnaryGrad(*floor.getUnaryKind()));

  // Softmax is memory-bound but reduces along an axis: not elementwise.
  EXPECT_TRUE(softmax.isMemoryBound());
  EXPECT_FALSE(softmax.isElementwise());
  EXPECT_FALSE(softmax.getUnaryKind());

  EXPECT_FALSE(add.getUnaryKind());
  EXPECT_FALSE(add.isContraction());

  // What a pp.fused kernel computes them with (pp/Runtime/Fused.h): binary
  // arithmetic and the unary kinds UnaryKinds.def gives a function.
  EXPECT_EQ(add.getFusedElementFunction(), "add");
  EXPECT_EQ(relu.getFusedElementFunction(), "relu");
  EXPECT_EQ(leaky.getFusedElementFunction(), "");
  EXPECT_EQ(floor.getFusedElementFunction(), "");
  EXPECT_EQ(softmax.getFusedElementFunction(), "");
  EXPECT_EQ(matmul.getFusedElementFunction(), "");
}

TEST(KernelFacts, UnaryKindNamesRoundTrip) {
  for (int k = 0; k < static_cast<int>(std::size(rt::kUnaryKinds)); ++k) {
    auto kind = static_cast<rt::UnaryKind>(k);
    EXPECT_EQ(rt::parseUnaryKind(rt::toString(kind)), kind);
  }
  EXPECT_EQ(rt::parseUnaryKind("Softplus"), rt::UnaryKind::Softplus);
  EXPECT_FALSE(rt::parseUnaryKind("Mish"));
}

} // namespace
