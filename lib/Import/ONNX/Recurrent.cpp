//===- Recurrent.cpp - ONNX RNN, GRU and LSTM unrolled --------------------===//
//
// ONNX's equations (gate order: RNN i; GRU z, r, h; LSTM i, o, f, c), one
// direction at a time over the time-major input [S, B, I]:
//   the input projection of all steps: Gemm(X [S B, I], W_d, Wb + Rb)
//   (GRU with linear_before_reset: Wb + the z and r parts of Rb);
//   per step t: the step's projection (a Gather) plus Gemm(H, R_d), split
//   into the gates by Slices, activations, the state update.
// Y stacks each step's H at its time index; Y_h and Y_c are the last states.
//
//===----------------------------------------------------------------------===//

#include "Recurrent.h"
#include "FoldingBuilder.h"

#include "pp/Dialect/ONNX/IR/ONNXOps.h"

#include "llvm/ADT/StringSwitch.h"

using namespace mlir;

namespace {

enum class Cell { RNN, GRU, LSTM };

class Unroller : pp::onnx::FoldingBuilder {
public:
  Unroller(OpBuilder &b, Location loc,
           const std::function<Value(Operation *)> &fold, std::string &error)
      : FoldingBuilder(b, loc, fold), error(error) {}

  FailureOr<SmallVector<Value>> build(Cell cell, ArrayRef<Value> operands,
                                      const pp::onnx::RecurrentAttrs &attrs) {
    gates = cell == Cell::RNN ? 1 : cell == Cell::GRU ? 3 : 4;
    size_t maxInputs = cell == Cell::LSTM ? 8 : 6;
    if (operands.size() < 3 || operands.size() > maxInputs || !operands[0] ||
        !operands[1] || !operands[2])
      return fail("takes X, W, R and at most " + std::to_string(maxInputs - 3) +
                  " optional inputs");
    auto input = [&](size_t i) {
      return i < operands.size() ? operands[i] : Value();
    };
    if (attrs.hasClip)
      return fail("clip is not supported");
    if (attrs.inputForget)
      return fail("input_forget is not supported");
    if (attrs.hasActivationParams)
      return fail("activation_alpha / activation_beta are not supported");
    if (attrs.direction != "forward" && attrs.direction != "reverse" &&
        attrs.direction != "bidirectional")
      return fail("unknown direction '" + attrs.direction + "'");
    int64_t directions = attrs.direction == "bidirectional" ? 2 : 1;
    Value x = operands[0], w = operands[1], r = operands[2];
    element = elementType(x);
    if (!isa<FloatType>(element))
      return fail("takes float inputs");
    if (shapeOf(x).size() != 3)
      return fail("X must have rank 3");
    if (attrs.layout == 1)
      x = transpose(x, {1, 0, 2});
    else if (attrs.layout != 0)
      return fail("layout must be 0 or 1");
    steps = shapeOf(x)[0];
    batch = shapeOf(x)[1];
    int64_t features = shapeOf(x)[2];
    ArrayRef<int64_t> wShape = shapeOf(w);
    if (wShape.size() != 3 || wShape[0] != directions ||
        wShape[1] % gates != 0 || wShape[2] != features)
      return fail("W must be [" + std::to_string(directions) + ", " +
                  std::to_string(gates) + " x hidden, " +
                  std::to_string(features) + "]");
    hidden = wShape[1] / gates;
    if (attrs.hiddenSize && *attrs.hiddenSize != hidden)
      return fail("hidden_size " + std::to_string(*attrs.hiddenSize) +
                  " does not match W's " + std::to_string(hidden));
    if (shapeOf(r) != ArrayRef<int64_t>{directions, gates * hidden, hidden})
      return fail("R must be [directions, gates x hidden, hidden]");
    Value bias = input(3);
    if (bias &&
        shapeOf(bias) != ArrayRef<int64_t>{directions, 2 * gates * hidden})
      return fail("B must be [directions, 2 x gates x hidden]");
    if (Value lens = input(4)) {
      auto values = pp::onnx::getConstantInts(lens);
      if (!values ||
          llvm::any_of(*values, [&](int64_t v) { return v != steps; }))
        return fail("sequence_lens must be a constant of the full sequence "
                    "length " +
                    std::to_string(steps) +
                    " (shorter sequences are not "
                    "supported)");
    }
    if (steps * directions * gates > (int64_t(1) << 16))
      return fail("the unrolled sequence would be too long (" +
                  std::to_string(steps) + " steps)");
    Value initialH =
        stateInput(input(5), directions, attrs.layout, "initial_h");
    Value initialC = cell == Cell::LSTM ? stateInput(input(6), directions,
                                                     attrs.layout, "initial_c")
                                        : Value();
    Value peepholes = cell == Cell::LSTM ? input(7) : Value();
    if (!error.empty())
      return failure();
    if (peepholes &&
        shapeOf(peepholes) != ArrayRef<int64_t>{directions, 3 * hidden})
      return fail("P must be [directions, 3 x hidden]");
    if (failed(resolveActivations(cell, attrs, directions)))
      return failure();

    SmallVector<Value> ys, hs, cs;
    for (int64_t d = 0; d < directions; ++d) {
      bool reverse = attrs.direction == "reverse" || d == 1;
      Direction dir;
      dir.w = at(w, d);
      dir.r = at(r, d);
      if (bias) {
        Value both = at(bias, d);
        dir.wb = slice(both, 0, 0, gates * hidden);
        dir.rb = slice(both, 0, gates * hidden, gates * hidden);
      }
      if (peepholes)
        dir.p = at(peepholes, d);
      dir.h = initialH ? at(initialH, d) : zeros({batch, hidden});
      if (cell == Cell::LSTM)
        dir.c = initialC ? at(initialC, d) : zeros({batch, hidden});
      dir.acts = ArrayRef<StringRef>(activations)
                     .slice(d * perDirection, perDirection);
      Value projected =
          project(x, dir, cell == Cell::GRU && attrs.linearBeforeReset);
      SmallVector<Value> perStep(steps);
      for (int64_t i = 0; i < steps; ++i) {
        int64_t t = reverse ? steps - 1 - i : i;
        Value xt = at(projected, t);
        if (cell == Cell::RNN)
          rnnStep(dir, xt);
        else if (cell == Cell::GRU)
          gruStep(dir, xt, attrs.linearBeforeReset);
        else
          lstmStep(dir, xt);
        perStep[t] = reshape(dir.h, {1, 1, batch, hidden});
      }
      ys.push_back(concat(perStep, 0));
      hs.push_back(reshape(dir.h, {1, batch, hidden}));
      if (cell == Cell::LSTM)
        cs.push_back(reshape(dir.c, {1, batch, hidden}));
    }
    Value y = concat(ys, 1), yh = concat(hs, 0);
    Value yc = cell == Cell::LSTM ? concat(cs, 0) : Value();
    if (attrs.layout == 1) {
      y = transpose(y, {2, 0, 1, 3});
      yh = transpose(yh, {1, 0, 2});
      if (yc)
        yc = transpose(yc, {1, 0, 2});
    }
    SmallVector<Value> results = {y, yh};
    if (yc)
      results.push_back(yc);
    return results;
  }

private:
  struct Direction {
    Value w, r, wb, rb, p, h, c;
    ArrayRef<StringRef> acts;
  };

  FailureOr<SmallVector<Value>> fail(const std::string &message) {
    error = message;
    return failure();
  }

  /// initial_h / initial_c as [directions, B, H] (layout 1: from [B, D, H]).
  Value stateInput(Value v, int64_t directions, int64_t layout,
                   StringRef name) {
    if (!v)
      return v;
    if (layout == 1)
      v = transpose(v, {1, 0, 2});
    if (shapeOf(v) != ArrayRef<int64_t>{directions, batch, hidden}) {
      error = name.str() + " must be [directions, batch, hidden]";
      return Value();
    }
    return v;
  }

  /// The activation names per direction (ONNX's defaults; one set given
  /// for a bidirectional op serves both directions).
  LogicalResult resolveActivations(Cell cell,
                                   const pp::onnx::RecurrentAttrs &attrs,
                                   int64_t directions) {
    perDirection = cell == Cell::RNN ? 1 : cell == Cell::GRU ? 2 : 3;
    std::vector<std::string> names = attrs.activations;
    if (names.empty()) {
      if (cell == Cell::RNN)
        names = {"Tanh"};
      else if (cell == Cell::GRU)
        names = {"Sigmoid", "Tanh"};
      else
        names = {"Sigmoid", "Tanh", "Tanh"};
    }
    if (int64_t(names.size()) == perDirection && directions == 2) {
      std::vector<std::string> forward = names;
      names.insert(names.end(), forward.begin(), forward.end());
    }
    if (int64_t(names.size()) != perDirection * directions) {
      error = "activations needs " + std::to_string(perDirection) +
              " names per direction";
      return failure();
    }
    for (const std::string &name : names) {
      if (name != "Sigmoid" && name != "Tanh" && name != "Relu") {
        error = "activation '" + name +
                "' is not supported (Sigmoid, Tanh and Relu are)";
        return failure();
      }
      storage.push_back(name);
    }
    for (const std::string &name : storage)
      activations.push_back(name);
    return success();
  }

  Value activate(StringRef name, Value v) {
    if (name == "Sigmoid")
      return fold(pp::onnx::SigmoidOp::create(b, loc, v));
    if (name == "Tanh")
      return fold(pp::onnx::TanhOp::create(b, loc, v));
    return fold(pp::onnx::ReluOp::create(b, loc, v));
  }

  /// Every step's input projection, [S, B, gates x H].
  Value project(Value x, const Direction &dir, bool splitRecurrenceBias) {
    Value bias = dir.wb;
    if (dir.rb) {
      // GRU with linear_before_reset adds h's recurrence bias inside the
      // reset gate's product (gruStep), so only z's and r's come here.
      Value rb = dir.rb;
      if (splitRecurrenceBias)
        rb = concat({slice(dir.rb, 0, 0, 2 * hidden), zeros({hidden})}, 0);
      bias = add(bias, rb);
    }
    Value flat = reshape(x, {steps * batch, shapeOf(x)[2]});
    Value projected = fold(pp::onnx::GemmOp::create(
        b, loc, flat, dir.w, bias, b.getF32FloatAttr(1.0),
        b.getF32FloatAttr(1.0), b.getI64IntegerAttr(0),
        b.getI64IntegerAttr(1)));
    return reshape(projected, {steps, batch, gates * hidden});
  }

  void rnnStep(Direction &dir, Value xt) {
    dir.h = activate(dir.acts[0], add(xt, recurrence(dir.h, dir.r)));
  }

  void gruStep(Direction &dir, Value xt, bool linearBeforeReset) {
    Value xz = slice(xt, 1, 0, hidden), xr = slice(xt, 1, hidden, hidden),
          xh = slice(xt, 1, 2 * hidden, hidden);
    Value rzr = slice(dir.r, 0, 0, 2 * hidden),
          rh = slice(dir.r, 0, 2 * hidden, hidden);
    Value hzr = recurrence(dir.h, rzr);
    Value z = activate(dir.acts[0], add(xz, slice(hzr, 1, 0, hidden)));
    Value reset = activate(dir.acts[0], add(xr, slice(hzr, 1, hidden, hidden)));
    Value candidate;
    if (linearBeforeReset) {
      Value hh = recurrence(dir.h, rh);
      if (dir.rb)
        hh = add(hh, slice(dir.rb, 0, 2 * hidden, hidden));
      candidate = activate(dir.acts[1], add(xh, mul(reset, hh)));
    } else {
      candidate =
          activate(dir.acts[1], add(xh, recurrence(mul(reset, dir.h), rh)));
    }
    // (1 - z) candidate + z h = candidate + z (h - candidate).
    dir.h = add(candidate, mul(z, sub(dir.h, candidate)));
  }

  void lstmStep(Direction &dir, Value xt) {
    Value g = add(xt, recurrence(dir.h, dir.r));
    Value i = slice(g, 1, 0, hidden), o = slice(g, 1, hidden, hidden),
          f = slice(g, 1, 2 * hidden, hidden),
          c = slice(g, 1, 3 * hidden, hidden);
    if (dir.p) {
      i = add(i, mul(slice(dir.p, 0, 0, hidden), dir.c));
      f = add(f, mul(slice(dir.p, 0, 2 * hidden, hidden), dir.c));
    }
    Value cell = add(mul(activate(dir.acts[0], f), dir.c),
                     mul(activate(dir.acts[0], i), activate(dir.acts[1], c)));
    if (dir.p)
      o = add(o, mul(slice(dir.p, 0, hidden, hidden), cell));
    dir.h = mul(activate(dir.acts[0], o), activate(dir.acts[2], cell));
    dir.c = cell;
  }

  /// h [B, H] times the rows of a recurrence weight, transposed.
  Value recurrence(Value h, Value weight) {
    return fold(pp::onnx::GemmOp::create(
        b, loc, h, weight, Value(), b.getF32FloatAttr(1.0),
        b.getF32FloatAttr(0.0), b.getI64IntegerAttr(0),
        b.getI64IntegerAttr(1)));
  }

  /// Element `index` of dim 0 (the dim dropped).
  Value at(Value v, int64_t index) {
    Value i = fold(pp::onnx::ConstantOp::create(
        b, loc,
        DenseElementsAttr::get(RankedTensorType::get({}, b.getI64Type()),
                               APInt(64, index))));
    return fold(
        pp::onnx::GatherOp::create(b, loc, v, i, b.getI64IntegerAttr(0)));
  }
  Value slice(Value v, int64_t axis, int64_t start, int64_t size) {
    return fold(pp::onnx::SliceOp::create(
        b, loc, v, i64s({start}), i64s({start + size}), i64s({axis}), Value()));
  }
  Value transpose(Value v, ArrayRef<int64_t> perm) {
    return fold(
        pp::onnx::TransposeOp::create(b, loc, v, b.getDenseI64ArrayAttr(perm)));
  }
  Value concat(ArrayRef<Value> parts, int64_t axis) {
    if (parts.size() == 1)
      return parts[0];
    return fold(
        pp::onnx::ConcatOp::create(b, loc, parts, b.getI64IntegerAttr(axis)));
  }
  Value zeros(ArrayRef<int64_t> shape) {
    auto type = RankedTensorType::get(shape, element);
    return fold(pp::onnx::ConstantOp::create(
        b, loc, DenseElementsAttr::get(type, b.getFloatAttr(element, 0.0))));
  }
  Value add(Value p, Value q) {
    return fold(pp::onnx::AddOp::create(b, loc, p, q));
  }
  Value sub(Value p, Value q) {
    return fold(pp::onnx::SubOp::create(b, loc, p, q));
  }
  Value mul(Value p, Value q) {
    return fold(pp::onnx::MulOp::create(b, loc, p, q));
  }

  std::string &error;
  Type element;
  int64_t gates = 1, hidden = 0, steps = 0, batch = 0, perDirection = 1;
  std::vector<std::string> storage;
  SmallVector<StringRef> activations;
};

} // namespace

bool pp::onnx::isRecurrentOp(StringRef opType) {
  return opType == "RNN" || opType == "GRU" || opType == "LSTM";
}

FailureOr<SmallVector<Value>>
pp::onnx::buildRecurrent(OpBuilder &builder, Location loc, StringRef opType,
                         ArrayRef<Value> operands, const RecurrentAttrs &attrs,
                         const std::function<Value(Operation *)> &fold,
                         std::string &error) {
  Cell cell = llvm::StringSwitch<Cell>(opType)
                  .Case("RNN", Cell::RNN)
                  .Case("GRU", Cell::GRU)
                  .Default(Cell::LSTM);
  return Unroller(builder, loc, fold, error).build(cell, operands, attrs);
}
