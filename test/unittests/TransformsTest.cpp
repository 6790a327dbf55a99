//===- TransformsTest.cpp - The passes' functions, called directly -*- C++
//-*-===//
//
// The Train and PP passes are adapters over the functions of Transforms.h;
// these tests build a two-stage training program by calling them in the
// order of --pp-compile, with no pass manager.
//
//===----------------------------------------------------------------------===//

#include "pp/Dialect/PP/Transforms/Transforms.h"
#include "pp/Dialect/ONNX/IR/ONNXOps.h"
#include "pp/Dialect/Train/Transforms/Transforms.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using namespace mlir;
namespace pipeline = pp::pipeline;
namespace train = pp::train;

namespace {

const char *kModel = R"mlir(
onnx.global "trainable" @w1 : tensor<256x256xf32>
onnx.global "trainable" @w2 : tensor<256x10xf32>
func.func @main(%x: tensor<64x256xf32>) -> tensor<64x10xf32> {
  %w1 = onnx.global_read @w1 : tensor<256x256xf32>
  %w2 = onnx.global_read @w2 : tensor<256x10xf32>
  %a = onnx.MatMul %x, %w1 : (tensor<64x256xf32>, tensor<256x256xf32>) -> tensor<64x256xf32>
  %r = onnx.Relu %a : (tensor<64x256xf32>) -> tensor<64x256xf32>
  %b = onnx.MatMul %r, %w2 : (tensor<64x256xf32>, tensor<256x10xf32>) -> tensor<64x10xf32>
  return %b : tensor<64x10xf32>
}
)mlir";

struct TransformsTest : ::testing::Test {
  TransformsTest() : context(registry()) {
    context.loadAllAvailableDialects();
    module = parseSourceString<ModuleOp>(kModel, &context);
  }
  static DialectRegistry registry() {
    DialectRegistry registry;
    registry.insert<pp::onnx::ONNXDialect, train::TrainDialect,
                    pipeline::PPDialect, func::FuncDialect>();
    train::registerONNXGradients(registry);
    return registry;
  }
  MLIRContext context;
  OwningOpRef<ModuleOp> module;
};

TEST_F(TransformsTest, BuildsATwoStageProgramWithoutAPassManager) {
  ASSERT_TRUE(module);
  ModuleOp m = *module;
  ASSERT_TRUE(succeeded(train::addLoss(m, {})));
  pp::PartitionPassOptions partition;
  partition.clusterSpec = "2xH100";
  partition.splitAfter = "";
  partition.microBatches = 4;
  ASSERT_TRUE(succeeded(pipeline::partitionStages(m, partition)));
  pipeline::PlanAttr plan = pipeline::getPlan(m);
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan.getNumStages(), 2);
  EXPECT_EQ(plan.getMicroBatches(), 4);
  ASSERT_TRUE(succeeded(train::differentiate(m, {})));
  pp::OptimizerPassOptions sgd;
  sgd.lr = 0.1f;
  ASSERT_TRUE(succeeded(train::applyOptimizer(m, sgd)));
  ASSERT_TRUE(succeeded(pipeline::splitStages(m, {})));
  ASSERT_TRUE(succeeded(pipeline::materializeSchedule(m, {})));
  ASSERT_TRUE(succeeded(verify(m)));

  // One device per stage, each running every micro-batch forward and
  // backward; the stage functions the actions name exist.
  pipeline::ScheduleOp schedule = pipeline::lookupSchedule(m, "the test");
  ASSERT_TRUE(schedule);
  int devices = 0, actions = 0;
  for (auto device : schedule.getBody().front().getOps<pipeline::DeviceOp>()) {
    ++devices;
    for (auto action : device.getBody().front().getOps<pipeline::ActionOp>()) {
      ++actions;
      EXPECT_TRUE(m.lookupSymbol<func::FuncOp>(action.getCalleeAttr()))
          << "action names a missing function";
    }
  }
  EXPECT_EQ(devices, 2);
  // 2 stages x 4 micro-batches x (forward + backward), plus an update each.
  EXPECT_EQ(actions, 2 * 4 * 2 + 2);
}

TEST_F(TransformsTest, ReportsErrorsOnTheModule) {
  ASSERT_TRUE(module);
  std::string message;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
    message = diag.str();
    return success();
  });
  pp::AddLossPassOptions options;
  options.funcName = "missing";
  EXPECT_TRUE(failed(train::addLoss(*module, options)));
  EXPECT_EQ(message, "no function @missing to train");
  pp::PartitionPassOptions partition; // no cluster
  EXPECT_TRUE(failed(pipeline::partitionStages(*module, partition)));
  EXPECT_EQ(message, "pp-partition needs cluster=<spec or .json>");
}

} // namespace
