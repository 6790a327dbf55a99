//===- TransformsTest.cpp - The passes' functions, called directly -*- C++
//-*-===//
//
// The Train and PP passes are adapters over the functions of Transforms.h;
// these tests build a two-stage training program by calling them in the
// order of --pp-compile, with no pass manager.
//
//===----------------------------------------------------------------------===//

#include "pp/Dialect/PP/Transforms/Transforms.h"
#include "pp/Analysis/CostModel.h"
#include "pp/Cluster/Cluster.h"
#include "pp/Dialect/ONNX/IR/ONNXOps.h"
#include "pp/Dialect/Train/Transforms/Transforms.h"

#include "mlir/AsmParser/AsmParser.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

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

/// A parsed cluster as #pp.cluster, printed and parsed back, gives the same
/// cluster (every field, as toJSON writes them, and the per-node vectors
/// as the parser leaves them): the passes after --pp-partition see what
/// parsing their own cluster= gave them.
TEST_F(TransformsTest, ClusterAttrRoundTrip) {
  std::vector<std::string> specs = {"2xT4", "3xP4000,TITANV", "4xH100",
                                    "2xA100-80,2xV100"};
  for (const char *name : {"compute-bound.json", "dgx-h100x2.json",
                           "hetpipe.json", "mixed.json", "shared-cores.json"})
    specs.push_back((llvm::Twine(PP_CLUSTER_INPUTS_DIR) + "/" + name).str());
  for (const std::string &spec : specs) {
    SCOPED_TRACE(spec);
    llvm::Expected<pp::cluster::Cluster> cluster =
        pp::cluster::parseClusterSpec(spec);
    ASSERT_TRUE(!!cluster) << llvm::toString(cluster.takeError());
    auto attr = pipeline::ClusterAttr::get(&context, *cluster);
    std::string text;
    llvm::raw_string_ostream(text) << attr;
    EXPECT_EQ(parseAttribute(text, &context), attr) << text;
    pp::cluster::Cluster back = attr.getCluster();
    EXPECT_EQ(pp::cluster::toJSON(back), pp::cluster::toJSON(*cluster));
    EXPECT_EQ(back.nodeIntraLinks.size(), cluster->nodeIntraLinks.size());
    EXPECT_EQ(back.nodeSharedProcessors, cluster->nodeSharedProcessors);
    EXPECT_EQ(back.intraNodeBandwidth, cluster->intraNodeBandwidth);
    EXPECT_EQ(back.intraNodeLatency, cluster->intraNodeLatency);
  }
}

/// tp=2 on one node of 2 H100: the model is one Megatron pair (MatMul by
/// w1 column-parallel, Relu, MatMul by w2 row-parallel), so one stage on a
/// group of 2 with every op split: forward = sum F / 2 + a ring all-reduce
/// of the row's output, backward = sum B / 2 + a ring all-reduce of the
/// group input's gradient (TensorParallelPlan.h), recomputed here from the
/// cost model and the cluster; the weights (and gradients) per GPU halve.
TEST_F(TransformsTest, TensorParallelStageCosts) {
  ASSERT_TRUE(module);
  ModuleOp m = *module;
  llvm::SmallString<64> json;
  ASSERT_FALSE(llvm::sys::fs::createTemporaryFile("tp-plan", "json", json));
  pp::PartitionPassOptions partition;
  partition.clusterSpec = "2xH100";
  partition.microBatches = 4;
  partition.tensorParallel = "2";
  partition.planJson = std::string(json);
  ASSERT_TRUE(succeeded(pipeline::partitionStages(m, partition)));
  pipeline::PlanAttr plan = pipeline::getPlan(m);
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan.getNumStages(), 1);
  EXPECT_EQ(plan.getTensorParallel(), 2);

  auto buffer = llvm::MemoryBuffer::getFile(json);
  ASSERT_TRUE(bool(buffer));
  llvm::sys::fs::remove(json);
  auto parsed = llvm::json::parse((*buffer)->getBuffer());
  ASSERT_TRUE(bool(parsed)) << llvm::toString(parsed.takeError());
  const llvm::json::Object *root = parsed->getAsObject();
  ASSERT_TRUE(root);
  EXPECT_EQ(root->getInteger("pp"), 1);
  EXPECT_EQ(root->getInteger("tp"), 2);
  EXPECT_EQ(root->getInteger("dp"), 1);
  const llvm::json::Object *stage =
      (*root->getArray("stages"))[0].getAsObject();
  ASSERT_TRUE(stage);

  auto cluster = pp::cluster::parseClusterSpec("2xH100");
  ASSERT_TRUE(bool(cluster)) << llvm::toString(cluster.takeError());
  auto model = pp::createCostModel("");
  ASSERT_TRUE(bool(model)) << llvm::toString(model.takeError());
  auto func = m.lookupSymbol<func::FuncOp>("main");
  (*model)->setSavedValues(pp::findValuesSavedForBackward(func.front()));
  const pp::cluster::Device &h100 = cluster->devices[0];
  double forward = 0, backward = 0;
  int64_t activations = 0, rowActivations = 0;
  Operation *row = nullptr;
  for (Operation &op : func.front().without_terminator()) {
    if (isa<pp::onnx::GlobalReadOp>(op))
      continue;
    forward += (*model)->getForwardTime(&op, h100);
    backward += (*model)->getBackwardTime(&op, h100);
    activations += (*model)->getWork(&op).activationBytes;
    row = &op; // the last op: the row-parallel MatMul
  }
  rowActivations = (*model)->getWork(row).activationBytes;
  pp::cluster::LinkParams link = cluster->link(0, 1);
  double outBytes = 64 * 10 * 4, inBytes = 64 * 256 * 4;
  double ringForward =
      2.0 * 1 / 2 * outBytes / link.bandwidth + 2.0 * 1 * link.latency;
  double ringBackward =
      2.0 * 1 / 2 * inBytes / link.bandwidth + 2.0 * 1 * link.latency;
  EXPECT_NEAR(*stage->getNumber("forward_seconds"), forward / 2 + ringForward,
              1e-12 * forward);
  EXPECT_NEAR(*stage->getNumber("backward_seconds"),
              backward / 2 + ringBackward, 1e-12 * backward);
  EXPECT_NEAR(*stage->getNumber("allreduce_seconds"),
              ringForward + ringBackward, 1e-15);
  EXPECT_EQ(*stage->getNumber("allreduce_bytes"), outBytes + inBytes);
  // SGD: weights and gradients, split over the 2 GPUs; the split ops'
  // activations halve, the row's output (whole after its all-reduce) not;
  // one micro-batch in flight on a single stage.
  int64_t weights = (256 * 256 + 256 * 10) * 4 * 2;
  EXPECT_EQ(*stage->getInteger("memory_bytes_per_gpu"),
            weights / 2 + rowActivations + (activations - rowActivations) / 2);
}

} // namespace
