//===- ImporterTest.cpp - C++ API tests of the ONNX importer ----*- C++ -*-===//
//
// Builds ONNX models in memory with the protobuf API and imports them through
// pp::importONNXModel, checking what the library returns to C++ callers.
//
//===----------------------------------------------------------------------===//

#include "pp/Dialect/ONNX/IR/ONNXOps.h"
#include "pp/Import/ONNX/ONNXImporter.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

using namespace mlir;

namespace {

/// Y = Relu(X @ W + B) with W, B float initializers and a BatchNorm-free graph.
::onnx::ModelProto makeLinearModel(int64_t batch, bool symbolicBatch) {
  ::onnx::ModelProto model;
  model.set_ir_version(8);
  model.add_opset_import()->set_version(17);
  ::onnx::GraphProto *graph = model.mutable_graph();
  graph->set_name("linear");
  auto addTensorInfo = [](::onnx::ValueInfoProto *info, const char *name,
                          std::vector<int64_t> dims, const char *symbol) {
    info->set_name(name);
    auto *type = info->mutable_type()->mutable_tensor_type();
    type->set_elem_type(::onnx::TensorProto::FLOAT);
    for (size_t i = 0; i < dims.size(); ++i) {
      auto *dim = type->mutable_shape()->add_dim();
      if (i == 0 && symbol)
        dim->set_dim_param(symbol);
      else
        dim->set_dim_value(dims[i]);
    }
  };
  addTensorInfo(graph->add_input(), "X", {batch, 3},
                symbolicBatch ? "N" : nullptr);
  addTensorInfo(graph->add_output(), "Y", {batch, 2},
                symbolicBatch ? "N" : nullptr);
  auto addInitializer = [&](const char *name, std::vector<int64_t> dims) {
    ::onnx::TensorProto *t = graph->add_initializer();
    t->set_name(name);
    t->set_data_type(::onnx::TensorProto::FLOAT);
    int64_t count = 1;
    for (int64_t d : dims) {
      t->add_dims(d);
      count *= d;
    }
    for (int64_t i = 0; i < count; ++i)
      t->add_float_data(0.5f * i);
  };
  addInitializer("W", {3, 2});
  addInitializer("B", {2});
  auto addNode = [&](const char *op, std::vector<const char *> inputs,
                     const char *output) {
    ::onnx::NodeProto *node = graph->add_node();
    node->set_op_type(op);
    node->set_name(std::string("my_") + op);
    for (const char *input : inputs)
      node->add_input(input);
    node->add_output(output);
  };
  addNode("MatMul", {"X", "W"}, "XW");
  addNode("Add", {"XW", "B"}, "Z");
  addNode("Relu", {"Z"}, "Y");
  return model;
}

OwningOpRef<ModuleOp> importModel(MLIRContext &context,
                                  const ::onnx::ModelProto &model,
                                  pp::ONNXImportOptions options = {}) {
  std::string bytes = model.SerializeAsString();
  return pp::importONNXModel(bytes, "in-memory.onnx", &context, options);
}

TEST(ONNXImporter, ImportsStaticModelWithTrainableGlobals) {
  MLIRContext context;
  OwningOpRef<ModuleOp> module =
      importModel(context, makeLinearModel(4, false));
  ASSERT_TRUE(module);
  auto func = module->lookupSymbol<func::FuncOp>("main");
  ASSERT_TRUE(func);
  EXPECT_EQ(func.getFunctionType().getInput(0),
            RankedTensorType::get({4, 3}, Float32Type::get(&context)));
  auto weight = module->lookupSymbol<pp::onnx::GlobalOp>("W");
  ASSERT_TRUE(weight);
  EXPECT_EQ(weight.getKind(), pp::onnx::kTrainable);
  double flops = 0;
  module->walk(
      [&](pp::onnx::CostOpInterface op) { flops += op.getForwardFlops(); });
  // MatMul 2*4*2*3 + Add 8 + Relu 8.
  EXPECT_EQ(flops, 48 + 8 + 8);
}

TEST(ONNXImporter, SymbolicBatchNeedsBatchSize) {
  MLIRContext context;
  std::string message;
  context.getDiagEngine().registerHandler([&](Diagnostic &diag) {
    message = diag.str();
    return success();
  });
  EXPECT_FALSE(importModel(context, makeLinearModel(4, true)));
  EXPECT_NE(message.find("pass --batch-size=N"), std::string::npos) << message;

  pp::ONNXImportOptions options;
  options.batchSize = 16;
  OwningOpRef<ModuleOp> module =
      importModel(context, makeLinearModel(4, true), options);
  ASSERT_TRUE(module);
  auto func = module->lookupSymbol<func::FuncOp>("main");
  EXPECT_EQ(cast<RankedTensorType>(func.getResultTypes()[0]).getShape(),
            ArrayRef<int64_t>({16, 2}));
}

TEST(ONNXImporter, FrozenParametersBecomeConstants) {
  MLIRContext context;
  pp::ONNXImportOptions options;
  options.frozenPattern = "^W$";
  OwningOpRef<ModuleOp> module =
      importModel(context, makeLinearModel(2, false), options);
  ASSERT_TRUE(module);
  // A frozen tensor stays a constant global that says why (the plan's
  // summary names it), however small.
  auto weight = module->lookupSymbol<pp::onnx::GlobalOp>("W");
  ASSERT_TRUE(weight);
  EXPECT_EQ(weight.getKind(), pp::onnx::kConstant);
  auto reason = weight->getAttrOfType<StringAttr>(pp::onnx::kFrozenReasonAttr);
  ASSERT_TRUE(reason);
  EXPECT_EQ(reason.getValue(), "matches --frozen-params");
  auto bias = module->lookupSymbol<pp::onnx::GlobalOp>("B");
  ASSERT_TRUE(bias);
  EXPECT_EQ(bias.getKind(), pp::onnx::kTrainable);
}

TEST(ONNXImporter, GarbageBytesAreAnErrorNotACrash) {
  MLIRContext context;
  context.getDiagEngine().registerHandler(
      [](Diagnostic &) { return success(); });
  for (std::string bytes :
       {std::string(), std::string("hello, world"), std::string(1000, '\xff')})
    EXPECT_FALSE(pp::importONNXModel(bytes, "junk.onnx", &context, {}));
}

} // namespace
