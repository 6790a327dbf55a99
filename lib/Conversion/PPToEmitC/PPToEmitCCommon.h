//===- PPToEmitCCommon.h - Shared by the PPToEmitC patterns -----*- C++ -*-===//
//
// What every PPToEmitC pattern file uses: the C++ literal printers, the
// argument list of an emitc.call_opaque, OpEmitter (the calls one op lowers
// to, at the op: arena views of its results, kernel calls with their status
// checks) and StageOpLowering, the pattern base class over it.
//
//===----------------------------------------------------------------------===//
#ifndef LIB_CONVERSION_PPTOEMITC_PPTOEMITCCOMMON_H
#define LIB_CONVERSION_PPTOEMITC_PPTOEMITCCOMMON_H

#include "pp/Runtime/Kernels.h"

#include "mlir/Dialect/EmitC/IR/EmitC.h"
#include "mlir/Transforms/DialectConversion.h"

#include <string>
#include <vector>

namespace pp::emitc_lowering {

//===----------------------------------------------------------------------===//
// C++ literals
//===----------------------------------------------------------------------===//

/// `pp::rt::DType::F32`, ...
const char *dtypeLiteral(rt::DType dtype);
/// A C++ string literal of `text`.
std::string quote(llvm::StringRef text);
/// A float (or double) literal that reads back to the same value.
std::string floatLiteral(double value, bool isDouble = false);
/// `{1, 2, 3}`.
std::string intList(llvm::ArrayRef<int64_t> values);
/// `std::vector<int64_t>{1, 2, 3}`.
std::string intVector(llvm::ArrayRef<int64_t> values);
/// `pp::rt::<enumType>(<value>)`: a kind enum of the runtime by value.
std::string enumLiteral(llvm::StringRef enumType, int value);
/// `pp::rt::WindowParams{...}`.
std::string windowLiteral(const rt::WindowParams &params);
/// The op's name and, where the importer recorded one, its ONNX node name
/// (what a failing kernel's message names).
std::string describeOp(mlir::Operation *op);

/// The static shape of a ranked tensor value.
llvm::ArrayRef<int64_t> shapeOf(mlir::Value value);
/// The runtime dtype of `type`'s element type, or an error at `op`.
mlir::FailureOr<rt::DType> dtypeOf(mlir::Operation *op, mlir::Type type);

//===----------------------------------------------------------------------===//
// Runtime names
//===----------------------------------------------------------------------===//

/// C++ types of the generated code.
constexpr llvm::StringLiteral kTensorType = "pp::rt::Tensor";
constexpr llvm::StringLiteral kStatusType = "pp::rt::Status";
constexpr llvm::StringLiteral kKernelContextType = "pp::rt::Context&";
constexpr llvm::StringLiteral kStageContextType = "pp::rt::StageContext&";

/// Callees of generated code whose arguments step 2 (the program) resolves:
/// `gen::global` / `gen::writeGlobal` name their global by symbol,
/// `gen::constant` carries its value, until they get their ids.
constexpr llvm::StringLiteral kGlobalCallee = "pp::rt::gen::global";
constexpr llvm::StringLiteral kWriteGlobalCallee = "pp::rt::gen::writeGlobal";
constexpr llvm::StringLiteral kConstantCallee = "pp::rt::gen::constant";
/// The call at the start of every lowered stage function whose result is
/// the kernels' context.
constexpr llvm::StringLiteral kKernelsCallee = "pp::rt::gen::kernels";

/// `!emitc.opaque<"text">`.
mlir::Type opaqueType(mlir::MLIRContext *context, llvm::StringRef text);

//===----------------------------------------------------------------------===//
// Calls
//===----------------------------------------------------------------------===//

/// The arguments of one emitc.call_opaque: values are referenced by index,
/// the others are C++ literals.
struct CallArgs {
  mlir::MLIRContext *context;
  llvm::SmallVector<mlir::Value> operands;
  llvm::SmallVector<mlir::Attribute> args;

  explicit CallArgs(mlir::MLIRContext *context) : context(context) {}
  CallArgs &value(mlir::Value v);
  CallArgs &lit(llvm::StringRef text);
  /// Any attribute as an argument (resolved later or printed by the emitter).
  CallArgs &attr(mlir::Attribute attr);
  CallArgs &integer(int64_t v) { return lit(std::to_string(v)); }
  CallArgs &flag(bool v) { return lit(v ? "true" : "false"); }
  CallArgs &f32(double v) { return lit(floatLiteral(v)); }
  CallArgs &f64(double v) { return lit(floatLiteral(v, /*isDouble=*/true)); }
};

/// Appends the activation fused into `op` (pp.activation), when it has one,
/// as the kernel's trailing UnaryKind argument.
void appendActivation(CallArgs &args, mlir::Operation *op);

/// Emits the code of one op of a stage function being lowered, before the
/// op: arena views of its results (the offsets of --pp-memory-plan), calls
/// of the runtime and the checks of their statuses. `finish` replaces the
/// op by the values its results became.
class OpEmitter {
public:
  /// Fails silently when `op` is not inside a lowered stage function (its
  /// function could not be lowered, with a diagnostic of its own).
  static mlir::FailureOr<OpEmitter>
  create(mlir::Operation *op, mlir::ConversionPatternRewriter &rewriter);

  mlir::Operation *getOp() const { return op; }
  mlir::ConversionPatternRewriter &getRewriter() const { return rewriter; }
  mlir::MLIRContext *getContext() const { return op->getContext(); }
  mlir::Location getLoc() const { return op->getLoc(); }
  /// The lowered stage function.
  mlir::emitc::FuncOp getFunction() const { return function; }
  /// Its `StageContext&` argument.
  mlir::Value getStageContext() const { return ctx; }
  /// The kernels' context (`pp::rt::Context&`) of the function.
  mlir::Value getKernels() const { return kernels; }
  /// Its `int64_t microBatch` argument (-1 in per-step functions).
  mlir::Value getMicroBatch() const { return mb; }

  /// A call of `callee`; its result when `result` is given.
  mlir::Value call(llvm::StringRef callee, CallArgs &args,
                   mlir::Type result = mlir::Type());
  CallArgs args() const { return CallArgs(getContext()); }
  /// Arguments that start with the StageContext.
  CallArgs ctxArgs() const;
  /// `callee(kernels, rest...)` and the check of its status, naming the op.
  void kernel(llvm::StringRef callee, const CallArgs &rest);
  /// Checks `status`, naming the op as `label`.
  void check(mlir::Value status, llvm::StringRef label);

  /// The arena view of result `index` (its pp.offsets entry), which the op's
  /// result becomes; an error when the memory plan gave it none.
  mlir::FailureOr<mlir::Value> result(unsigned index = 0);
  /// The views of every result, in order.
  mlir::LogicalResult results(llvm::SmallVectorImpl<mlir::Value> &views);
  /// Result `index` becomes `value` (a global, a constant).
  void define(unsigned index, mlir::Value value);

  /// `const pp::rt::Tensor *` of an optional (converted) operand: `nullptr`
  /// when absent.
  void optionalPointer(CallArgs &a, mlir::Value converted);
  /// `pp::rt::Tensor *` of a view.
  mlir::Value mutablePointer(mlir::Value tensor);
  /// Scratch `part` of `dtype` and `shape` (kernel temporaries that are not
  /// results), valid until the next op asks.
  mlir::Value scratch(rt::DType dtype, llvm::ArrayRef<int64_t> shape,
                      int64_t part);
  /// The compiled learning rate, or the run's --lr.
  mlir::Value learningRate(double compiled);
  /// Appends the `training` flag of an op that computes differently when it
  /// trains (BatchNormalization, Dropout): false when compiled so, else
  /// whether the running pass trains (false in an evaluation, which runs
  /// the forward functions with their ops in inference mode).
  void trainingFlag(CallArgs &args, bool compiled);
  /// An i64 of the generated code.
  mlir::Value i64(int64_t value);

  /// The micro-batch an (original) operand gives: the function's argument
  /// or a constant (per-step functions send with a fixed one).
  mlir::FailureOr<mlir::Value> microBatch(mlir::Value original);
  /// Values of a constant (original) operand: shape operands, axes, ratios.
  mlir::FailureOr<std::vector<double>> constantValues(mlir::Value original);
  mlir::FailureOr<std::vector<int64_t>> constantInts(mlir::Value original);

  /// Replaces the op by the values its results became (erases it when it
  /// has none).
  mlir::LogicalResult finish();

private:
  OpEmitter(mlir::Operation *op, mlir::ConversionPatternRewriter &rewriter,
            mlir::emitc::FuncOp function, mlir::Value ctx,
            mlir::Value microBatch, mlir::Value kernels);

  mlir::Operation *op;
  mlir::ConversionPatternRewriter &rewriter;
  mlir::emitc::FuncOp function;
  mlir::Value ctx, mb, kernels;
  llvm::SmallVector<mlir::Value> replacements;
};

/// A pattern lowering ops of type OpTy of a stage function: `lower` emits
/// the op's code through an OpEmitter (returning failure after a
/// diagnostic), and the op is replaced by what its results became.
template <typename OpTy>
class StageOpLowering : public mlir::OpConversionPattern<OpTy> {
public:
  using mlir::OpConversionPattern<OpTy>::OpConversionPattern;
  using Adaptor = typename OpTy::Adaptor;

  mlir::LogicalResult
  matchAndRewrite(OpTy op, Adaptor adaptor,
                  mlir::ConversionPatternRewriter &rewriter) const final {
    auto emitter = OpEmitter::create(op, rewriter);
    if (mlir::failed(emitter) || mlir::failed(lower(op, adaptor, *emitter)))
      return mlir::failure();
    return emitter->finish();
  }

  virtual mlir::LogicalResult lower(OpTy op, Adaptor adaptor,
                                    OpEmitter &emit) const = 0;
};

/// A pattern lowering ops of type OpTy to `callee(operands..., result)`:
/// the op's first `numOperands` (converted) operands and the view of its
/// single result.
template <typename OpTy>
class KernelCallLowering : public StageOpLowering<OpTy> {
public:
  using Adaptor = typename OpTy::Adaptor;
  KernelCallLowering(const mlir::TypeConverter &typeConverter,
                     mlir::MLIRContext *context, llvm::StringRef callee,
                     unsigned numOperands)
      : StageOpLowering<OpTy>(typeConverter, context), callee(callee),
        numOperands(numOperands) {}

  mlir::LogicalResult lower(OpTy op, Adaptor adaptor,
                            OpEmitter &emit) const override {
    auto out = emit.result();
    if (mlir::failed(out))
      return mlir::failure();
    CallArgs a = emit.args();
    for (mlir::Value v : adaptor.getOperands().take_front(numOperands))
      a.value(v);
    a.value(*out);
    emit.kernel(callee, a);
    return mlir::success();
  }

private:
  std::string callee;
  unsigned numOperands;
};

/// `copy(reshaped(input, shape of the op's result), result)`: reshape-like
/// ops copy into their own buffer (the memory plan gave them one; aliasing
/// would outlive the input's slot).
mlir::LogicalResult emitReshapeCopy(OpEmitter &emit, mlir::Value input);
/// `copy(from, to)`, checked.
void emitCopy(OpEmitter &emit, mlir::Value from, mlir::Value to);

/// `axis` normalized against `rank` (an error at the op when out of range),
/// then the view of the op's single result.
mlir::FailureOr<std::pair<int64_t, mlir::Value>>
axisAndResult(OpEmitter &emit, int64_t axis, int64_t rank);

/// A pattern for any op whose lowering is found by a table (`lower` fails
/// silently for ops it does not handle).
class TableOpLowering : public mlir::ConversionPattern {
public:
  TableOpLowering(const mlir::TypeConverter &typeConverter,
                  mlir::MLIRContext *context)
      : ConversionPattern(typeConverter, MatchAnyOpTypeTag(), /*benefit=*/1,
                          context) {}

  mlir::LogicalResult
  matchAndRewrite(mlir::Operation *op, llvm::ArrayRef<mlir::Value> operands,
                  mlir::ConversionPatternRewriter &rewriter) const final;

  /// Whether this pattern lowers `op`.
  virtual bool handles(mlir::Operation *op) const = 0;
  virtual mlir::LogicalResult lower(mlir::Operation *op,
                                    llvm::ArrayRef<mlir::Value> operands,
                                    OpEmitter &emit) const = 0;
};

//===----------------------------------------------------------------------===//
// The pattern families
//===----------------------------------------------------------------------===//

/// Unary and binary kernels, where, clip, cast, dropout, pp.fused.
void populateElementwisePatterns(const mlir::TypeConverter &typeConverter,
                                 mlir::RewritePatternSet &patterns);
/// MatMul, Gemm, Conv, pooling and reductions.
void populateLinalgPatterns(const mlir::TypeConverter &typeConverter,
                            mlir::RewritePatternSet &patterns);
/// Batch and layer normalisation, (log-)softmax, losses.
void populateNormPatterns(const mlir::TypeConverter &typeConverter,
                          mlir::RewritePatternSet &patterns);
/// Globals, constants, reshapes, transpose, expand, concat, split, slice,
/// gather.
void populateMovementPatterns(const mlir::TypeConverter &typeConverter,
                              mlir::RewritePatternSet &patterns);
/// The train dialect: gradients, optimizer steps, global writes.
void populateTrainPatterns(const mlir::TypeConverter &typeConverter,
                           mlir::RewritePatternSet &patterns);
/// Stage functions and the pp dialect's ops (data in and out, transfers,
/// stashes, gradient sums).
void populatePipelinePatterns(const mlir::TypeConverter &typeConverter,
                              mlir::RewritePatternSet &patterns);

} // namespace pp::emitc_lowering

#endif // LIB_CONVERSION_PPTOEMITC_PPTOEMITCCOMMON_H
