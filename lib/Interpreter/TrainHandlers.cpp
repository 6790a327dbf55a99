//===- TrainHandlers.cpp - Interpreter handlers of the train dialect -*- C++
//-*-//
//
// Backward ops and optimizer steps map one to one onto the kernel library's
// gradient and optimizer kernels. Optimizer ops are functional in the IR, so
// their handlers update private copies of the parameter and state.
//
//===----------------------------------------------------------------------===//

#include "pp/Interpreter/TrainHandlers.h"
#include "pp/Dialect/Train/IR/TrainOps.h"
#include "pp/Interpreter/Interpreter.h"

#include "llvm/ADT/StringSwitch.h"

#include <cmath>

using namespace mlir;
using namespace pp::interp;
namespace train = pp::train;
namespace rt = pp::rt;

namespace {

template <typename OpTy, typename Fn> void on(Interpreter &interp, Fn fn) {
  interp.registerHandler(OpTy::getOperationName(),
                         [fn](Interpreter &in, Operation *op) -> LogicalResult {
                           return fn(in, cast<OpTy>(op));
                         });
}

int64_t normalize(int64_t axis, int64_t rank) {
  return axis < 0 ? axis + rank : axis;
}

std::vector<int64_t> toVector(ArrayRef<int64_t> values) {
  return std::vector<int64_t>(values.begin(), values.end());
}

template <typename WindowOp> rt::WindowParams convParams(WindowOp op) {
  rt::WindowParams params;
  params.kernel = toVector(op.getKernelShape());
  params.strides = toVector(op.getStrides());
  params.pads = toVector(op.getPads());
  params.dilations = toVector(op.getDilations());
  params.group = static_cast<int64_t>(op.getGroup());
  return params;
}

/// Allocates every result of `op`, then runs `body` on their views.
template <typename Body>
LogicalResult withResults(Interpreter &in, Operation *op, StringRef kernel,
                          Body body) {
  std::vector<Tensor> results;
  for (Value result : op->getResults()) {
    auto t = in.allocResult(op, result);
    if (failed(t))
      return failure();
    results.push_back(*t);
  }
  return in.check(op, body(results), kernel);
}

/// train.global_write: the step's new value of a global.
void registerGlobalWrite(Interpreter &interp) {
  on<train::GlobalWriteOp>(
      interp, [](Interpreter &in, train::GlobalWriteOp op) -> LogicalResult {
        std::string error;
        if (failed(in.setGlobal(op.getGlobal(), in.operand(op, 0), &error)))
          return op.emitError() << error;
        return success();
      });
}

/// The gradients of the elementwise activations, of broadcasting (a sum back
/// to the operand's shape) and of the normalisations.
void registerActivationAndNormGrads(Interpreter &interp) {
  on<train::UnaryGradOp>(
      interp, [](Interpreter &in, train::UnaryGradOp op) -> LogicalResult {
        rt::UnaryKind kind = op.getKind();
        float alpha = op.getAlpha().convertToFloat();
        float beta = op.getBeta().convertToFloat();
        return withResults(in, op, "unaryGrad", [&](std::vector<Tensor> &r) {
          return rt::unaryGrad(
              in.kernelContext(), kind, in.operand(op, 0).view(),
              in.operand(op, 1).view(), in.operand(op, 2).view(), r[0].view(),
              alpha, beta);
        });
      });

  on<train::ReduceSumToOp>(
      interp, [](Interpreter &in, train::ReduceSumToOp op) -> LogicalResult {
        return withResults(in, op, "reduceSumTo", [&](std::vector<Tensor> &r) {
          return rt::reduceSumTo(in.kernelContext(), in.operand(op, 0).view(),
                                 r[0].view());
        });
      });

  on<train::SoftmaxGradOp>(
      interp, [](Interpreter &in, train::SoftmaxGradOp op) -> LogicalResult {
        const Tensor &y = in.operand(op, 0);
        int64_t axis = normalize(static_cast<int64_t>(op.getAxis()), y.rank());
        return withResults(in, op, "softmaxGrad", [&](std::vector<Tensor> &r) {
          return rt::softmaxGrad(in.kernelContext(), y.view(),
                                 in.operand(op, 1).view(), axis, op.getLog(),
                                 r[0].view());
        });
      });

  on<train::LayerNormGradOp>(
      interp, [](Interpreter &in, train::LayerNormGradOp op) -> LogicalResult {
        const Tensor &x = in.operand(op, 1);
        int64_t axis = normalize(static_cast<int64_t>(op.getAxis()), x.rank());
        return withResults(
            in, op, "layerNormGrad", [&](std::vector<Tensor> &r) {
              return rt::layerNormGrad(
                  in.kernelContext(), in.operand(op, 0).view(), x.view(),
                  in.operand(op, 2).view(), in.operand(op, 3).view(),
                  in.operand(op, 4).view(), axis, r[0].view(), r[1].view(),
                  &r[2].view());
            });
      });

  on<train::BatchNormGradOp>(
      interp, [](Interpreter &in, train::BatchNormGradOp op) -> LogicalResult {
        const Tensor &x = in.operand(op, 1);
        if (x.rank() < 2)
          return op.emitError()
                 << "batch_norm_grad needs an input of rank >= 2";
        Tensor mean(x.dtype(), {x.shape()[1]}),
            invStd(x.dtype(), {x.shape()[1]});
        if (failed(in.check(
                op,
                rt::batchNormStatistics(in.kernelContext(), x.view(),
                                        op.getEpsilon().convertToDouble(),
                                        mean.view(), invStd.view()),
                "batchNormStatistics")))
          return failure();
        return withResults(
            in, op, "batchNormGrad", [&](std::vector<Tensor> &r) {
              return rt::batchNormGrad(
                  in.kernelContext(), in.operand(op, 0).view(), x.view(),
                  in.operand(op, 2).view(), mean.view(), invStd.view(),
                  r[0].view(), r[1].view(), r[2].view());
            });
      });
}

/// The gradients of convolution and pooling.
void registerWindowGrads(Interpreter &interp) {
  on<train::ConvGradInputOp>(
      interp, [](Interpreter &in, train::ConvGradInputOp op) -> LogicalResult {
        rt::WindowParams params = convParams(op);
        return withResults(in, op, "convGradInput",
                           [&](std::vector<Tensor> &r) {
                             return rt::convGradInput(
                                 in.kernelContext(), in.operand(op, 0).view(),
                                 in.operand(op, 1).view(), params, r[0].view());
                           });
      });

  on<train::ConvGradWeightOp>(
      interp, [](Interpreter &in, train::ConvGradWeightOp op) -> LogicalResult {
        rt::WindowParams params = convParams(op);
        return withResults(in, op, "convGradWeight",
                           [&](std::vector<Tensor> &r) {
                             return rt::convGradWeight(
                                 in.kernelContext(), in.operand(op, 0).view(),
                                 in.operand(op, 1).view(), params, r[0].view());
                           });
      });

  on<train::MaxPoolGradOp>(
      interp, [](Interpreter &in, train::MaxPoolGradOp op) -> LogicalResult {
        return withResults(in, op, "maxPoolGrad", [&](std::vector<Tensor> &r) {
          return rt::maxPoolGrad(in.kernelContext(), in.operand(op, 0).view(),
                                 in.operand(op, 1).view(), r[0].view());
        });
      });

  on<train::AvgPoolGradOp>(
      interp, [](Interpreter &in, train::AvgPoolGradOp op) -> LogicalResult {
        rt::WindowParams params;
        params.kernel = toVector(op.getKernelShape());
        params.strides = toVector(op.getStrides());
        params.pads = toVector(op.getPads());
        params.dilations.assign(params.kernel.size(), 1);
        return withResults(in, op, "avgPoolGrad", [&](std::vector<Tensor> &r) {
          return rt::avgPoolGrad(in.kernelContext(), in.operand(op, 0).view(),
                                 params, op.getCountIncludePad() != 0,
                                 r[0].view());
        });
      });
}

/// The gradients of the data movement ops: Slice, Pad, Gather and Dropout.
void registerMovementGrads(Interpreter &interp) {
  on<train::SliceGradOp>(
      interp, [](Interpreter &in, train::SliceGradOp op) -> LogicalResult {
        return withResults(in, op, "sliceGrad", [&](std::vector<Tensor> &r) {
          return rt::sliceGrad(in.kernelContext(), in.operand(op, 0).view(),
                               toVector(op.getStarts()),
                               toVector(op.getSteps()), r[0].view());
        });
      });

  on<train::PadGradOp>(
      interp, [](Interpreter &in, train::PadGradOp op) -> LogicalResult {
        auto mode = op.getPadMode();
        if (failed(mode))
          return failure();
        return withResults(in, op, "padGrad", [&](std::vector<Tensor> &r) {
          return rt::padGrad(in.kernelContext(), in.operand(op, 0).view(),
                             toVector(op.getPads()), *mode, r[0].view());
        });
      });

  on<train::GatherGradOp>(
      interp, [](Interpreter &in, train::GatherGradOp op) -> LogicalResult {
        int64_t rank =
            cast<RankedTensorType>(op.getDdata().getType()).getRank();
        int64_t axis = normalize(static_cast<int64_t>(op.getAxis()), rank);
        return withResults(in, op, "gatherGrad", [&](std::vector<Tensor> &r) {
          return rt::gatherGrad(in.kernelContext(), in.operand(op, 0).view(),
                                in.operand(op, 1).view(), axis, r[0].view());
        });
      });

  on<train::DropoutGradOp>(
      interp, [](Interpreter &in, train::DropoutGradOp op) -> LogicalResult {
        return withResults(in, op, "dropoutGrad", [&](std::vector<Tensor> &r) {
          return rt::dropoutGrad(in.kernelContext(), in.operand(op, 0).view(),
                                 in.operand(op, 1).view(),
                                 op.getRatio().convertToFloat(), r[0].view());
        });
      });
}

/// train.matmul (the transposed products of MatMul's gradient) and the
/// softmax cross-entropy loss's gradient.
void registerMatMulAndLossGrads(Interpreter &interp) {
  on<train::MatMulOp>(
      interp, [](Interpreter &in, train::MatMulOp op) -> LogicalResult {
        return withResults(in, op, "matmul", [&](std::vector<Tensor> &r) {
          return rt::matmul(in.kernelContext(), in.operand(op, 0).view(),
                            in.operand(op, 1).view(), r[0].view(),
                            op.getTransA(), op.getTransB());
        });
      });

  on<train::SoftmaxCrossEntropyGradOp>(
      interp,
      [](Interpreter &in,
         train::SoftmaxCrossEntropyGradOp op) -> LogicalResult {
        const Tensor *weights = in.lookupOptional(op.getWeights());
        std::optional<uint64_t> ignore = op.getIgnoreIndex();
        return withResults(
            in, op, "softmaxCrossEntropyGrad", [&](std::vector<Tensor> &r) {
              return rt::softmaxCrossEntropyGrad(
                  in.kernelContext(), in.lookup(op.getDloss()).view(),
                  in.lookup(op.getLogProb()).view(),
                  in.lookup(op.getLabels()).view(),
                  weights ? &weights->view() : nullptr, ignore.has_value(),
                  ignore ? static_cast<int64_t>(*ignore) : 0,
                  op.getReduction().str(), r[0].view());
            });
      });
}

/// The optimizer steps: functional in the IR, so each updates clones of the
/// parameter and its state and returns them as results.
void registerOptimizers(Interpreter &interp) {
  on<train::SGDOp>(
      interp, [](Interpreter &in, train::SGDOp op) -> LogicalResult {
        Tensor param = in.lookup(op.getParam()).clone();
        std::optional<Tensor> buffer;
        if (op.getMomentumBuffer())
          buffer = in.lookup(op.getMomentumBuffer()).clone();
        int64_t step = in.lookup(op.getStep()).getInt(0);
        rt::Status status = rt::sgdStep(
            in.kernelContext(), param.view(), in.lookup(op.getGrad()).view(),
            buffer ? &buffer->view() : nullptr, step,
            op.getLr().convertToDouble(), op.getMomentum().convertToDouble(),
            op.getDampening().convertToDouble(),
            op.getWeightDecay().convertToDouble(), op.getNesterov());
        if (failed(in.check(op, status, "sgdStep")) ||
            failed(in.setResult(op, op.getNewParam(), param)))
          return failure();
        if (buffer)
          return in.setResult(op, op.getNewMomentumBuffer(), *buffer);
        return success();
      });

  on<train::AdamOp>(
      interp, [](Interpreter &in, train::AdamOp op) -> LogicalResult {
        Tensor param = in.lookup(op.getParam()).clone();
        Tensor m = in.lookup(op.getM()).clone();
        Tensor v = in.lookup(op.getV()).clone();
        int64_t step = in.lookup(op.getStep()).getInt(0);
        rt::Status status = rt::adamStep(
            in.kernelContext(), param.view(), in.lookup(op.getGrad()).view(),
            m.view(), v.view(), step, op.getLr().convertToDouble(),
            op.getBeta1().convertToDouble(), op.getBeta2().convertToDouble(),
            op.getEpsilon().convertToDouble(),
            op.getWeightDecay().convertToDouble(), op.getDecoupled());
        if (failed(in.check(op, status, "adamStep")))
          return failure();
        if (failed(in.setResult(op, op.getNewParam(), param)) ||
            failed(in.setResult(op, op.getNewM(), m)))
          return failure();
        return in.setResult(op, op.getNewV(), v);
      });
}

} // namespace

void pp::interp::registerTrainHandlers(Interpreter &interp) {
  registerGlobalWrite(interp);
  registerActivationAndNormGrads(interp);
  registerWindowGrads(interp);
  registerMovementGrads(interp);
  registerMatMulAndLossGrads(interp);
  registerOptimizers(interp);
}
