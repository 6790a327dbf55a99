//===- GradientCheckTest.cpp - Finite-difference checks of every VJP -*- C++
//-*-//
//
// For every onnx op with a gradient rule: builds f(p) = sum(op(p...) * r) in
// float64 with the parameters p as trainable globals and r a random constant,
// derives the gradient with --pp-autodiff, runs it in the interpreter, and
// compares each gradient entry with a central finite difference of f.
//
//===----------------------------------------------------------------------===//

#include "pp/Dialect/ONNX/IR/ONNXOps.h"
#include "pp/Dialect/Train/IR/TrainOps.h"
#include "pp/Dialect/Train/Transforms/Passes.h"
#include "pp/Interpreter/Interpreter.h"
#include "pp/Interpreter/TrainHandlers.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

using namespace mlir;
using pp::interp::Tensor;

namespace {

struct Param {
  std::string name;
  std::vector<int64_t> shape;
  /// Values are drawn from [lo, hi] (e.g. positive for Log and Sqrt).
  double lo = -1.0, hi = 1.0;
};

struct GradCase {
  std::string name;
  std::vector<Param> params;
  /// Defines %y from the parameters (%<name>); may use onnx.Constant.
  std::string body;
  std::vector<int64_t> outShape;
  /// Finite-difference step and relative tolerance (looser where the op
  /// rounds through float32).
  double step = 1e-6, tolerance = 1e-5;
};

std::string tensorType(const std::vector<int64_t> &shape) {
  std::string s = "tensor<";
  for (int64_t d : shape)
    s += std::to_string(d) + "x";
  return s + "f64>";
}

std::string moduleSource(const GradCase &c) {
  std::string out = tensorType(c.outShape);
  std::string src;
  for (const Param &p : c.params)
    src += "onnx.global \"trainable\" @" + p.name + " : " +
           tensorType(p.shape) + "\n";
  src += "onnx.global \"constant\" @r : " + out + "\n";
  src += "func.func @main() -> (tensor<f64> {pp.loss}) {\n";
  for (const Param &p : c.params)
    src += "  %" + p.name + " = onnx.global_read @" + p.name + " : " +
           tensorType(p.shape) + "\n";
  src += c.body + "\n";
  src += "  %r = onnx.global_read @r : " + out + "\n";
  src += "  %m = onnx.Mul %y, %r : (" + out + ", " + out + ") -> " + out + "\n";
  src += "  %l = onnx.ReduceSum %m {keepdims = 0 : i64} : (" + out +
         ") -> tensor<f64>\n";
  src += "  return %l : tensor<f64>\n}\n";
  return src;
}

Tensor randomTensor(const std::vector<int64_t> &shape, double lo, double hi,
                    std::mt19937_64 &rng) {
  Tensor t(pp::rt::DType::F64, shape);
  std::uniform_real_distribution<double> dist(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) {
    double v = dist(rng);
    // Stay away from kinks (Relu, Abs, Clip bounds at 0).
    if (std::abs(v) < 0.05)
      v += v < 0 ? -0.05 : 0.05;
    t.as<double>()[i] = v;
  }
  return t;
}

class GradientCheck : public ::testing::TestWithParam<GradCase> {};

TEST_P(GradientCheck, MatchesFiniteDifferences) {
  const GradCase &c = GetParam();
  DialectRegistry registry;
  registry.insert<pp::onnx::ONNXDialect, pp::train::TrainDialect,
                  func::FuncDialect>();
  pp::train::registerONNXGradients(registry);
  MLIRContext context(registry);
  std::string source = moduleSource(c);
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(source, &context);
  ASSERT_TRUE(module) << source;
  PassManager pm(&context);
  pm.addPass(pp::createAutodiffPass());
  ASSERT_TRUE(succeeded(pm.run(*module))) << source;

  pp::interp::Interpreter interp(*module);
  pp::interp::registerTrainHandlers(interp);
  ASSERT_TRUE(succeeded(interp.initialize()));
  std::mt19937_64 rng(42);
  for (const Param &p : c.params)
    ASSERT_TRUE(succeeded(
        interp.setGlobal(p.name, randomTensor(p.shape, p.lo, p.hi, rng))));
  ASSERT_TRUE(
      succeeded(interp.setGlobal("r", randomTensor(c.outShape, -1, 1, rng))));

  auto results = interp.run("main", {});
  ASSERT_TRUE(succeeded(results));
  ASSERT_EQ(results->size(), 1 + c.params.size());
  const double h = c.step;
  for (size_t k = 0; k < c.params.size(); ++k) {
    const Tensor &grad = (*results)[1 + k];
    Tensor base = interp.getGlobal(c.params[k].name)->clone();
    for (int64_t i = 0; i < base.numel(); ++i) {
      auto lossAt = [&](double delta) {
        Tensor shifted = base.clone();
        shifted.as<double>()[i] += delta;
        EXPECT_TRUE(succeeded(interp.setGlobal(c.params[k].name, shifted)));
        auto r = interp.run("main", {});
        EXPECT_TRUE(succeeded(r));
        return (*r)[0].as<double>()[0];
      };
      double numeric = (lossAt(h) - lossAt(-h)) / (2 * h);
      double analytic = grad.as<double>()[i];
      EXPECT_NEAR(analytic, numeric, c.tolerance * (0.1 + std::abs(numeric)))
          << c.name << ": d/d" << c.params[k].name << "[" << i << "]";
    }
    ASSERT_TRUE(succeeded(interp.setGlobal(c.params[k].name, base)));
  }
}

std::string unary(const std::string &op, const std::string &attrs = "") {
  return "  %y = onnx." + op + " %x " + attrs +
         " : (tensor<2x3xf64>) -> tensor<2x3xf64>";
}

std::vector<GradCase> cases() {
  std::vector<int64_t> s23 = {2, 3};
  Param x{"x", s23};
  Param xPos{"x", s23, 0.2, 2.0};
  std::vector<GradCase> c = {
      {"Relu", {x}, unary("Relu"), s23},
      {"LeakyRelu", {x}, unary("LeakyRelu", "{alpha = 0.2 : f32}"), s23},
      {"Sigmoid", {x}, unary("Sigmoid"), s23},
      {"Tanh", {x}, unary("Tanh"), s23},
      {"Erf", {x}, unary("Erf"), s23},
      {"Gelu", {x}, unary("Gelu"), s23},
      {"GeluTanh", {x}, unary("Gelu", "{approximate = \"tanh\"}"), s23},
      {"Sqrt", {xPos}, unary("Sqrt"), s23},
      {"Exp", {x}, unary("Exp"), s23},
      {"Log", {xPos}, unary("Log"), s23},
      {"Abs", {x}, unary("Abs"), s23},
      {"Reciprocal", {xPos}, unary("Reciprocal"), s23},
      {"Neg", {x}, unary("Neg"), s23},
      {"Identity", {x}, unary("Identity"), s23},
      {"Elu", {x}, unary("Elu", "{alpha = 0.7 : f32}"), s23},
      {"Selu",
       {x},
       unary("Selu", "{alpha = 1.5 : f32, gamma = 1.2 : f32}"),
       s23},
      {"Celu", {x}, unary("Celu", "{alpha = 0.5 : f32}"), s23},
      {"ThresholdedRelu",
       {x},
       unary("ThresholdedRelu", "{alpha = 0.1 : f32}"),
       s23},
      {"Softplus", {x}, unary("Softplus"), s23},
      {"Softsign", {x}, unary("Softsign"), s23},
      {"Sin", {x}, unary("Sin"), s23},
      {"Cos", {x}, unary("Cos"), s23},
      {"Softmax", {x}, unary("Softmax", "{axis = 1 : i64}"), s23},
      {"LogSoftmax", {x}, unary("LogSoftmax", "{axis = 0 : i64}"), s23},
      {"Clip",
       {x},
       "  %lo = onnx.Constant dense<-0.5> : tensor<f64>\n"
       "  %hi = onnx.Constant dense<0.5> : tensor<f64>\n"
       "  %y = onnx.Clip %x min %lo max %hi : (tensor<2x3xf64>, tensor<f64>, "
       "tensor<f64>) -> tensor<2x3xf64>",
       s23},
      {"Add",
       {x, {"b", {3}}},
       "  %y = onnx.Add %x, %b : (tensor<2x3xf64>, tensor<3xf64>) -> "
       "tensor<2x3xf64>",
       s23},
      {"Sub",
       {{"a", {2, 1}}, x},
       "  %y = onnx.Sub %a, %x : (tensor<2x1xf64>, tensor<2x3xf64>) -> "
       "tensor<2x3xf64>",
       s23},
      {"Mul",
       {x, {"b", {2, 3}}},
       "  %y = onnx.Mul %x, %b : (tensor<2x3xf64>, tensor<2x3xf64>) -> "
       "tensor<2x3xf64>",
       s23},
      {"Div",
       {x, {"b", {3}, 0.5, 2.0}},
       "  %y = onnx.Div %x, %b : (tensor<2x3xf64>, tensor<3xf64>) -> "
       "tensor<2x3xf64>",
       s23},
      // |a| up to 3 times |b|: trunc(a / b) is 0 to +-6, so db is tested.
      {"Mod",
       {{"x", {2, 3}, -3.0, 3.0}, {"b", {3}, 0.5, 2.0}},
       "  %y = onnx.Mod %x, %b {fmod = 1 : i64} : (tensor<2x3xf64>, "
       "tensor<3xf64>) -> tensor<2x3xf64>",
       s23},
      // Random values: no ties, so each gradient goes to one operand.
      {"Max",
       {x, {"b", {3}}},
       "  %y = onnx.Max %x, %b : (tensor<2x3xf64>, tensor<3xf64>) -> "
       "tensor<2x3xf64>",
       s23},
      {"Min",
       {{"a", {2, 1}}, x},
       "  %y = onnx.Min %a, %x : (tensor<2x1xf64>, tensor<2x3xf64>) -> "
       "tensor<2x3xf64>",
       s23},
      {"Pow",
       {xPos, {"e", {3}, 0.5, 2.0}},
       "  %y = onnx.Pow %x, %e : (tensor<2x3xf64>, tensor<3xf64>) -> "
       "tensor<2x3xf64>",
       s23},
      // Rows of data replaced by updates (k = 1, a negative index), then
      // single elements (k = 2): each operand's gradient.
      {"ScatterNDRows",
       {{"d", {4, 3}}, {"u", {2, 3}}},
       "  %i = onnx.Constant dense<[[2], [-4]]> : tensor<2x1xi64>\n"
       "  %y = onnx.ScatterND %d, %i, %u : (tensor<4x3xf64>, tensor<2x1xi64>, "
       "tensor<2x3xf64>) -> tensor<4x3xf64>",
       {4, 3}},
      {"ScatterNDElements",
       {{"d", {4, 3}}, {"u", {3}}},
       "  %i = onnx.Constant dense<[[0, 2], [3, -1], [1, 1]]> : "
       "tensor<3x2xi64>\n"
       "  %y = onnx.ScatterND %d, %i, %u : (tensor<4x3xf64>, tensor<3x2xi64>, "
       "tensor<3xf64>) -> tensor<4x3xf64>",
       {4, 3}},
      {"Where",
       {x, {"b", {3}}},
       "  %c = onnx.Constant dense<[[true, false, true], [false, true, "
       "false]]> : tensor<2x3xi1>\n"
       "  %y = onnx.Where %c, %x, %b : (tensor<2x3xi1>, tensor<2x3xf64>, "
       "tensor<3xf64>) -> tensor<2x3xf64>",
       s23},
      {"MatMul",
       {{"a", {2, 2, 3}}, {"b", {3, 4}}},
       "  %y = onnx.MatMul %a, %b : (tensor<2x2x3xf64>, tensor<3x4xf64>) -> "
       "tensor<2x2x4xf64>",
       {2, 2, 4}},
      {"Gemm",
       {{"a", {3, 2}}, {"b", {4, 3}}, {"c", {4}}},
       "  %y = onnx.Gemm %a, %b, %c {alpha = 0.5 : f32, beta = 2.0 : f32, "
       "transA = 1 : i64, transB = 1 : i64} : (tensor<3x2xf64>, "
       "tensor<4x3xf64>, tensor<4xf64>) -> tensor<2x4xf64>",
       {2, 4}},
      {"Conv",
       {{"x", {1, 4, 5, 5}}, {"w", {2, 2, 3, 3}}, {"b", {2}}},
       "  %y = onnx.Conv %x, %w, %b {group = 2 : i64, pads = array<i64: 1, 0, "
       "1, 2>, strides = array<i64: 2, 1>, dilations = array<i64: 1, 2>} : "
       "(tensor<1x4x5x5xf64>, tensor<2x2x3x3xf64>, tensor<2xf64>) -> "
       "tensor<1x2x3x3xf64>",
       {1, 2, 3, 3}},
      // Strided with output_padding: out = 2 (3 - 1) + 1 + 3 - 1 - 1 = 6.
      {"ConvTranspose",
       {{"x", {1, 2, 3, 3}}, {"w", {2, 3, 3, 3}}, {"b", {3}}},
       "  %y = onnx.ConvTranspose %x, %w, %b {pads = array<i64: 1, 1, 1, 1>, "
       "strides = array<i64: 2, 2>, output_padding = array<i64: 1, 1>} : "
       "(tensor<1x2x3x3xf64>, tensor<2x3x3x3xf64>, tensor<3xf64>) -> "
       "tensor<1x3x6x6xf64>",
       {1, 3, 6, 6}},
      // Grouped (M = 1 x 2), dilated, SAME_UPPER: out = 3 x 2 = 6.
      {"ConvTransposeGroupedSame",
       {{"x", {1, 4, 3, 3}}, {"w", {4, 1, 2, 2}}},
       "  %y = onnx.ConvTranspose %x, %w {group = 2 : i64, auto_pad = "
       "\"SAME_UPPER\", strides = array<i64: 2, 2>, dilations = array<i64: 2, "
       "1>} : (tensor<1x4x3x3xf64>, tensor<4x1x2x2xf64>) -> "
       "tensor<1x2x6x6xf64>",
       {1, 2, 6, 6}},
      {"MaxPool",
       {{"x", {1, 2, 4, 4}}},
       "  %y, %i = onnx.MaxPool %x {kernel_shape = array<i64: 2, 2>, strides = "
       "array<i64: 2, 1>, pads = array<i64: 0, 0, 1, 0>} : "
       "(tensor<1x2x4x4xf64>) "
       "-> (tensor<1x2x2x3xf64>, tensor<1x2x2x3xi64>)",
       {1, 2, 2, 3}},
      {"AveragePool",
       {{"x", {1, 2, 4, 4}}},
       "  %y = onnx.AveragePool %x {kernel_shape = array<i64: 3, 3>, pads = "
       "array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : "
       "(tensor<1x2x4x4xf64>) -> tensor<1x2x2x2xf64>",
       {1, 2, 2, 2}},
      {"GlobalAveragePool",
       {{"x", {2, 2, 3, 3}}},
       "  %y = onnx.GlobalAveragePool %x : (tensor<2x2x3x3xf64>) -> "
       "tensor<2x2x1x1xf64>",
       {2, 2, 1, 1}},
      {"BatchNormalization",
       {{"x", {3, 2, 2, 2}}, {"s", {2}}, {"bias", {2}}},
       "  %mean = onnx.Constant dense<0.0> : tensor<2xf64>\n"
       "  %var = onnx.Constant dense<1.0> : tensor<2xf64>\n"
       "  %y, %rm, %rv = onnx.BatchNormalization %x, %s, %bias, %mean, %var "
       "{training_mode = 1 : i64} : (tensor<3x2x2x2xf64>, tensor<2xf64>, "
       "tensor<2xf64>, tensor<2xf64>, tensor<2xf64>) -> (tensor<3x2x2x2xf64>, "
       "tensor<2xf64>, tensor<2xf64>)",
       {3, 2, 2, 2}},
      {"LayerNormalization",
       {{"x", {2, 3, 4}}, {"s", {4}}, {"bias", {4}}},
       "  %y, %mean, %inv = onnx.LayerNormalization %x, %s, %bias {axis = -1 : "
       "i64, stash_type = 0 : i64} : (tensor<2x3x4xf64>, tensor<4xf64>, "
       "tensor<4xf64>) -> (tensor<2x3x4xf64>, tensor<2x3x1xf64>, "
       "tensor<2x3x1xf64>)",
       {2, 3, 4}},
      {"SoftmaxCrossEntropyLoss",
       {{"x", {3, 4}}},
       "  %labels = onnx.Constant dense<[1, 3, 0]> : tensor<3xi64>\n"
       "  %y, %logp = onnx.SoftmaxCrossEntropyLoss %x, %labels : "
       "(tensor<3x4xf64>, tensor<3xi64>) -> (tensor<f64>, tensor<3x4xf64>)",
       {}},
      {"ReduceMean",
       {{"x", {2, 3, 4}}},
       "  %y = onnx.ReduceMean %x {axes = array<i64: 1>, keepdims = 0 : i64} : "
       "(tensor<2x3x4xf64>) -> tensor<2x4xf64>",
       {2, 4}},
      {"ReduceMax",
       {{"x", {2, 3, 4}}},
       "  %y = onnx.ReduceMax %x {axes = array<i64: 1>, keepdims = 0 : i64} : "
       "(tensor<2x3x4xf64>) -> tensor<2x4xf64>",
       {2, 4}},
      {"ReduceMin",
       {{"x", {2, 3, 4}}},
       "  %y = onnx.ReduceMin %x {axes = array<i64: 0, 2>} : "
       "(tensor<2x3x4xf64>) -> tensor<1x3x1xf64>",
       {1, 3, 1}},
      {"ReduceSum",
       {{"x", {2, 3, 4}}},
       "  %axes = onnx.Constant dense<[0, 2]> : tensor<2xi64>\n"
       "  %y = onnx.ReduceSum %x, %axes : (tensor<2x3x4xf64>, tensor<2xi64>) "
       "-> tensor<1x3x1xf64>",
       {1, 3, 1}},
      {"Reshape",
       {x},
       "  %shape = onnx.Constant dense<[3, 2]> : tensor<2xi64>\n"
       "  %y = onnx.Reshape %x, %shape : (tensor<2x3xf64>, tensor<2xi64>) -> "
       "tensor<3x2xf64>",
       {3, 2}},
      {"Flatten",
       {{"x", {2, 3, 2}}},
       "  %y = onnx.Flatten %x : (tensor<2x3x2xf64>) -> tensor<2x6xf64>",
       {2, 6}},
      {"Squeeze",
       {{"x", {2, 1, 3}}},
       "  %axes = onnx.Constant dense<[1]> : tensor<1xi64>\n"
       "  %y = onnx.Squeeze %x, %axes : (tensor<2x1x3xf64>, tensor<1xi64>) -> "
       "tensor<2x3xf64>",
       s23},
      {"Unsqueeze",
       {x},
       "  %axes = onnx.Constant dense<[0]> : tensor<1xi64>\n"
       "  %y = onnx.Unsqueeze %x, %axes : (tensor<2x3xf64>, tensor<1xi64>) -> "
       "tensor<1x2x3xf64>",
       {1, 2, 3}},
      {"Transpose",
       {{"x", {2, 3, 4}}},
       "  %y = onnx.Transpose %x {perm = array<i64: 2, 0, 1>} : "
       "(tensor<2x3x4xf64>) -> tensor<4x2x3xf64>",
       {4, 2, 3}},
      {"Expand",
       {{"x", {3, 1}}},
       "  %shape = onnx.Constant dense<[2, 3, 4]> : tensor<3xi64>\n"
       "  %y = onnx.Expand %x, %shape : (tensor<3x1xf64>, tensor<3xi64>) -> "
       "tensor<2x3x4xf64>",
       {2, 3, 4}},
      {"PadConstant",
       {{"x", {2, 3, 4}}},
       "  %pads = onnx.Constant dense<[0, 1, 2, 1, 0, 3]> : tensor<6xi64>\n"
       "  %v = onnx.Constant dense<1.5> : tensor<f64>\n"
       "  %y = onnx.Pad %x, %pads value %v : (tensor<2x3x4xf64>, "
       "tensor<6xi64>, tensor<f64>) -> tensor<3x4x9xf64>",
       {3, 4, 9}},
      {"PadConstantCropping",
       {{"x", {2, 3, 4}}},
       "  %pads = onnx.Constant dense<[1, -1, 0, 0, 2, -2]> : tensor<6xi64>\n"
       "  %y = onnx.Pad %x, %pads : (tensor<2x3x4xf64>, tensor<6xi64>) -> "
       "tensor<3x4x2xf64>",
       {3, 4, 2}},
      {"PadReflect",
       {{"x", {1, 2, 3, 4}}},
       "  %pads = onnx.Constant dense<[0, 0, 2, 3, 0, 0, 3, -1]> : "
       "tensor<8xi64>\n"
       "  %y = onnx.Pad %x, %pads {mode = \"reflect\"} : (tensor<1x2x3x4xf64>, "
       "tensor<8xi64>) -> tensor<1x2x8x6xf64>",
       {1, 2, 8, 6}},
      {"PadEdge",
       {{"x", {2, 3, 4}}},
       "  %pads = onnx.Constant dense<[2, 1]> : tensor<2xi64>\n"
       "  %axes = onnx.Constant dense<[-1]> : tensor<1xi64>\n"
       "  %y = onnx.Pad %x, %pads axes %axes {mode = \"edge\"} : "
       "(tensor<2x3x4xf64>, tensor<2xi64>, tensor<1xi64>) -> tensor<2x3x7xf64>",
       {2, 3, 7}},
      {"Concat",
       {x, {"b", {2, 2}}},
       "  %y = onnx.Concat %x, %b {axis = 1 : i64} : (tensor<2x3xf64>, "
       "tensor<2x2xf64>) -> tensor<2x5xf64>",
       {2, 5}},
      {"Split",
       {{"x", {2, 5}}},
       "  %sizes = onnx.Constant dense<[2, 3]> : tensor<2xi64>\n"
       "  %a, %b = onnx.Split %x, %sizes {axis = 1 : i64} : (tensor<2x5xf64>, "
       "tensor<2xi64>) -> (tensor<2x2xf64>, tensor<2x3xf64>)\n"
       "  %y = onnx.Mul %b, %b : (tensor<2x3xf64>, tensor<2x3xf64>) -> "
       "tensor<2x3xf64>",
       s23},
      {"Slice",
       {{"x", {4, 5}}},
       "  %st = onnx.Constant dense<[3, 0]> : tensor<2xi64>\n"
       "  %en = onnx.Constant dense<[0, 5]> : tensor<2xi64>\n"
       "  %ax = onnx.Constant dense<[0, 1]> : tensor<2xi64>\n"
       "  %sp = onnx.Constant dense<[-1, 2]> : tensor<2xi64>\n"
       "  %y = onnx.Slice %x, %st, %en axes %ax steps %sp : (tensor<4x5xf64>, "
       "tensor<2xi64>, tensor<2xi64>, tensor<2xi64>, tensor<2xi64>) -> "
       "tensor<3x3xf64>",
       {3, 3}},
      {"Gather",
       {{"x", {4, 3}}},
       "  %idx = onnx.Constant dense<[[1, 3], [1, -4]]> : tensor<2x2xi64>\n"
       "  %y = onnx.Gather %x, %idx {axis = 0 : i64} : (tensor<4x3xf64>, "
       "tensor<2x2xi64>) -> tensor<2x2x3xf64>",
       {2, 2, 3}},
      {"Cast",
       {x},
       "  %c = onnx.Cast %x {to = 1 : i64} : (tensor<2x3xf64>) -> "
       "tensor<2x3xf32>\n"
       "  %y = onnx.Cast %c {to = 11 : i64} : (tensor<2x3xf32>) -> "
       "tensor<2x3xf64>",
       s23,
       1e-3,
       1e-3},
  };
  return c;
}

INSTANTIATE_TEST_SUITE_P(ONNXOps, GradientCheck, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<GradCase> &info) {
                           return info.param.name;
                         });

} // namespace
