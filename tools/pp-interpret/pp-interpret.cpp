//===- pp-interpret.cpp - Run a model on the reference interpreter -*- C++ -*-//
//
//   pp-interpret model.onnx|model.mlir [--batch-size=N] [--func=main]
//       [--input=NAME=FILE.npy ...] [--random-inputs [--seed=S]]
//       [--output-dir=DIR] [--print] [--num-threads=N]
//
// Imports the model (an .onnx file through the importer, anything else is
// parsed as MLIR), runs one function once on the CPU kernels and reports
// each output: a summary line on stdout, the values with --print, and a
// .npy file per output in --output-dir. Inputs are named by their
// `onnx.name` argument attribute (or argN) and read from .npy files;
// --random-inputs fills the others deterministically from --seed.
//
//===----------------------------------------------------------------------===//

#include "pp/Dialect/ONNX/IR/ONNXOps.h"
#include "pp/Dialect/ONNX/Utils/KernelParams.h"
#include "pp/Dialect/PP/IR/PPOps.h"
#include "pp/Dialect/Train/IR/TrainOps.h"
#include "pp/Import/ONNX/ONNXImporter.h"
#include "pp/Interpreter/Interpreter.h"
#include "pp/Interpreter/Npy.h"
#include "pp/Interpreter/PipelineRunner.h"
#include "pp/Interpreter/TensorParallel.h"
#include "pp/Interpreter/TrainHandlers.h"
#include "pp/Runtime/Half.h"
#include "pp/Support/FileOutput.h"
#include "pp/Support/InputLimits.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Parser/Parser.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <cmath>
#include <random>

using namespace mlir;
using namespace pp::interp;
namespace rt = pp::rt;

/// The options of this tool: --help lists these (and --help, --version);
/// the options every LLVM tool registers show with --help-hidden.
static llvm::cl::OptionCategory interpretCategory("pp-interpret options");

static llvm::cl::opt<std::string> inputFile(llvm::cl::Positional,
                                            llvm::cl::desc("<model>"),
                                            llvm::cl::Required,
                                            llvm::cl::cat(interpretCategory));
static llvm::cl::opt<int64_t> batchSize(
    "batch-size",
    llvm::cl::desc("Batch size for a symbolic leading dim of an ONNX model's "
                   "inputs"),
    llvm::cl::init(0), llvm::cl::cat(interpretCategory));
static llvm::cl::opt<std::string>
    funcName("func", llvm::cl::desc("Function to run (default: main)"),
             llvm::cl::init("main"), llvm::cl::cat(interpretCategory));
static llvm::cl::list<std::string>
    inputs("input", llvm::cl::desc("NAME=FILE.npy: the value of input NAME"),
           llvm::cl::cat(interpretCategory));
static llvm::cl::opt<bool> randomInputs(
    "random-inputs",
    llvm::cl::desc("Fill the inputs not given with --input randomly"),
    llvm::cl::cat(interpretCategory));
static llvm::cl::opt<uint64_t>
    seed("seed", llvm::cl::desc("Seed of --random-inputs and of Dropout masks"),
         llvm::cl::init(0), llvm::cl::cat(interpretCategory));
static llvm::cl::opt<std::string>
    outputDir("output-dir",
              llvm::cl::desc("Write every output to DIR/<name>.npy"),
              llvm::cl::cat(interpretCategory));
static llvm::cl::opt<bool> printValues("print",
                                       llvm::cl::desc("Print output values"),
                                       llvm::cl::cat(interpretCategory));
static llvm::cl::opt<int>
    numThreads("num-threads", llvm::cl::desc("Threads the CPU kernels may use"),
               llvm::cl::init(1), llvm::cl::cat(interpretCategory));

static llvm::cl::opt<int> steps(
    "steps",
    llvm::cl::desc("Run the function N times (training steps: globals carry "
                   "over) and print the pp.loss result of each; 0 runs "
                   "nothing (--dump-globals writes the initial values)"),
    llvm::cl::init(1), llvm::cl::cat(interpretCategory));
static llvm::cl::opt<int> drainEvery(
    "drain-every",
    llvm::cl::desc("A pipelined module with a pp.stream (weight-versioned "
                   "schedules): run the steps between drains as one stream, "
                   "as train does; drains every N steps (0: only at the end "
                   "and every 4096 steps; 1: every step)"),
    llvm::cl::init(0), llvm::cl::cat(interpretCategory));
static llvm::cl::opt<std::string> dumpGlobals(
    "dump-globals",
    llvm::cl::desc("After the last run, write every global to DIR/<name>.npy "
                   "(and DIR/globals.txt: name -> file)"),
    llvm::cl::cat(interpretCategory));

static llvm::cl::opt<std::string> loadGlobals(
    "load-globals",
    llvm::cl::desc("Before the first run, set globals from DIR/globals.txt "
                   "(name -> .npy file, as --dump-globals writes it)"),
    llvm::cl::cat(interpretCategory));
static llvm::cl::opt<int> firstStep(
    "first-step",
    llvm::cl::desc("The index (from 0) of the first step run: Dropout masks "
                   "follow it, so a run can continue another's steps"),
    llvm::cl::init(0), llvm::cl::cat(interpretCategory));

static llvm::cl::opt<std::string> stageIO(
    "stage-io",
    llvm::cl::desc("Run one stage function of a split module (--func) on "
                   "its own, its pipeline ops on files in DIR: pp.input reads "
                   "input_<index>_<mb>.npy, pp.output writes output_<index>_"
                   "<mb>.npy, pp.send writes and pp.recv takes msg_<from>_"
                   "<to>_<tag>_<mb>.npy, pp.stash / pp.unstash stash_<stage>_"
                   "<slot>_<mb>.npy, pp.accumulate adds into and "
                   "pp.accumulated takes sum_<stage>_<slot>.npy (an oracle "
                   "drives the schedule)"),
    llvm::cl::cat(interpretCategory));
static llvm::cl::opt<int64_t> stageMicroBatch(
    "micro-batch",
    llvm::cl::desc("With --stage-io: the micro-batch the function runs"),
    llvm::cl::init(-1), llvm::cl::cat(interpretCategory));

static llvm::cl::opt<bool>
    profile("profile",
            llvm::cl::desc("Print the time spent per op kind over all steps"),
            llvm::cl::cat(interpretCategory));

static llvm::cl::opt<std::string> writeProfile(
    "write-profile",
    llvm::cl::desc("Measure each ONNX node's forward and backward time on "
                   "this machine's CPU kernels (a training step at the "
                   "micro-batch size, from --pp-training-step; the mean over "
                   "the steps after the first) and write the profile JSON "
                   "that --pp-partition / --pp-compile profile= read"),
    llvm::cl::value_desc("file.json"), llvm::cl::cat(interpretCategory));

static llvm::cl::opt<std::string> profileKind(
    "profile-kind",
    llvm::cl::desc("With --write-profile: the device kind the times are "
                   "for (the cluster's kind of this machine)"),
    llvm::cl::init("cpu"), llvm::cl::cat(interpretCategory));

/// Sets each global listed in `dir`/globals.txt (name, tab, .npy file) with
/// `set`; the error naming the file and the global, if any.
static std::optional<std::string> loadGlobalValues(
    StringRef dir,
    llvm::function_ref<LogicalResult(StringRef, Tensor, std::string &)> set) {
  llvm::SmallString<256> indexPath(dir);
  llvm::sys::path::append(indexPath, "globals.txt");
  auto index = pp::limits::readRegularFile(
      indexPath, pp::limits::kMaxMLIRFileBytes, "--load-globals index",
      /*isText=*/true);
  if (!index)
    return llvm::toString(index.takeError());
  llvm::SmallVector<StringRef> lines;
  (*index)->getBuffer().split(lines, '\n', -1, /*KeepEmpty=*/false);
  for (auto [number, line] : llvm::enumerate(lines)) {
    auto [name, file] = line.split('\t');
    std::string where =
        indexPath.str().str() + ":" + std::to_string(number + 1) + ": ";
    if (name.empty() || file.empty())
      return where + "expected NAME<tab>FILE.npy, got '" + line.str() + "'";
    llvm::SmallString<256> path(dir);
    llvm::sys::path::append(path, file);
    auto tensor = readNpy(path);
    if (!tensor)
      return where + llvm::toString(tensor.takeError());
    std::string why;
    if (failed(set(name, std::move(*tensor), why)))
      return where + why;
  }
  return std::nullopt;
}

static int fail(const llvm::Twine &message) {
  llvm::errs() << "pp-interpret: error: " << message << "\n";
  return 1;
}

/// The name of argument or result `index` (its `onnx.name`), or a default.
static std::string nameOf(DictionaryAttr attrs, StringRef prefix,
                          unsigned index) {
  if (attrs)
    if (auto name = attrs.getAs<StringAttr>("onnx.name"))
      return name.str();
  return (prefix + llvm::Twine(index)).str();
}

/// Exclusive upper bound for random values of integer argument `arg`: the
/// size of the dim it indexes (Gather indices, loss labels), 10 otherwise.
static int64_t integerBound(Value arg) {
  int64_t bound = pp::onnx::indexBound(arg);
  return bound ? bound : 10;
}

static Tensor randomTensor(rt::DType dtype, ArrayRef<int64_t> shape,
                           int64_t bound, std::mt19937_64 &rng) {
  Tensor t(dtype, shape);
  // Uniform in [0, 1) from the top 53 bits (exact across platforms).
  auto unit = [&] { return double(rng() >> 11) * 0x1.0p-53; };
  for (int64_t i = 0, e = t.numel(); i < e; ++i) {
    switch (dtype) {
    case rt::DType::F32:
      t.as<float>()[i] = static_cast<float>(2 * unit() - 1);
      break;
    case rt::DType::F64:
      t.as<double>()[i] = 2 * unit() - 1;
      break;
    case rt::DType::F16:
      t.as<uint16_t>()[i] = rt::doubleToHalf(2 * unit() - 1);
      break;
    case rt::DType::BF16:
      t.as<uint16_t>()[i] = rt::doubleToBFloat16(2 * unit() - 1);
      break;
    case rt::DType::Bool:
      t.as<uint8_t>()[i] = rng() & 1;
      break;
    case rt::DType::I64:
      t.as<int64_t>()[i] = static_cast<int64_t>(rng() % bound);
      break;
    case rt::DType::I32:
      t.as<int32_t>()[i] = static_cast<int32_t>(rng() % bound);
      break;
    case rt::DType::I8:
      t.as<int8_t>()[i] =
          static_cast<int8_t>(rng() % std::min<int64_t>(bound, 128));
      break;
    case rt::DType::U8:
      t.as<uint8_t>()[i] =
          static_cast<uint8_t>(rng() % std::min<int64_t>(bound, 256));
      break;
    case rt::DType::U32:
      t.as<uint32_t>()[i] = static_cast<uint32_t>(rng() % bound);
      break;
    case rt::DType::U64:
      t.as<uint64_t>()[i] = rng() % bound;
      break;
    case rt::DType::I16:
      t.as<int16_t>()[i] =
          static_cast<int16_t>(rng() % std::min<int64_t>(bound, 32768));
      break;
    case rt::DType::U16:
      t.as<uint16_t>()[i] =
          static_cast<uint16_t>(rng() % std::min<int64_t>(bound, 65536));
      break;
    }
  }
  return t;
}

static bool isFloatDType(rt::DType dtype) {
  return dtype == rt::DType::F32 || dtype == rt::DType::F64 ||
         dtype == rt::DType::F16 || dtype == rt::DType::BF16;
}

/// A file name made of the output's name ([A-Za-z0-9_.-] kept).
static std::string fileStem(StringRef name) {
  std::string stem;
  for (char c : name)
    stem += llvm::isAlnum(c) || c == '_' || c == '-' || c == '.' ? c : '_';
  if (stem.empty() || stem == "." || stem == "..")
    stem = "output";
  return stem;
}

/// "finite min=.. max=.. mean=.." (or the count of NaN/Inf values).
static void printSummary(llvm::raw_ostream &os, const Tensor &t) {
  int64_t n = t.numel();
  if (n == 0) {
    os << " empty";
    return;
  }
  bool isFloat = isFloatDType(t.dtype());
  double lo = INFINITY, hi = -INFINITY, sum = 0;
  int64_t nonFinite = 0;
  for (int64_t i = 0; i < n; ++i) {
    double v = t.getDouble(i);
    if (!std::isfinite(v)) {
      ++nonFinite;
      continue;
    }
    lo = std::min(lo, v);
    hi = std::max(hi, v);
    sum += v;
  }
  if (isFloat)
    os << (nonFinite ? " non-finite(" + std::to_string(nonFinite) + ")"
                     : std::string(" finite"));
  if (nonFinite < n)
    os << llvm::format(" min=%g max=%g mean=%g", lo, hi,
                       sum / double(n - nonFinite));
}

static void printElements(llvm::raw_ostream &os, const Tensor &t) {
  constexpr int64_t kMaxPrinted = 64;
  bool isFloat = isFloatDType(t.dtype());
  os << "  [";
  for (int64_t i = 0, n = t.numel(); i < n && i < kMaxPrinted; ++i) {
    os << (i ? ", " : "");
    if (isFloat)
      os << llvm::format("%.6g", t.getDouble(i));
    else if (t.dtype() == rt::DType::U64)
      os << t.as<uint64_t>()[i]; // beyond int64
    else
      os << t.getInt(i);
  }
  if (t.numel() > kMaxPrinted)
    os << ", ... (" << t.numel() << " values)";
  os << "]\n";
}

namespace {
/// --stage-io's files: DIR/<stem>.npy, the stem naming the pipeline op's
/// kind and its (stage, slot, peer, tag, micro-batch) numbers.
struct StageIOFiles {
  std::string dir;

  std::string path(const std::string &stem) const {
    llvm::SmallString<256> p(dir);
    llvm::sys::path::append(p, stem + ".npy");
    return std::string(p);
  }
  /// "<kind>_<part>_<part>...".
  static std::string stem(std::initializer_list<int64_t> parts,
                          const char *kind) {
    std::string stem = kind;
    for (int64_t part : parts)
      stem += "_" + std::to_string(part);
    return stem;
  }
  /// Reads a file into `op`'s result; `take` removes the file.
  LogicalResult read(Operation *op, Interpreter &in, Value result,
                     const std::string &stem, bool take) const {
    auto value = readNpy(path(stem));
    if (!value)
      return op->emitError()
             << "--stage-io: " << llvm::toString(value.takeError());
    if (take)
      llvm::sys::fs::remove(path(stem));
    return in.setResult(op, result, std::move(*value));
  }
  LogicalResult write(Operation *op, const std::string &stem,
                      const Tensor &value) const {
    if (llvm::Error error = writeNpy(path(stem), value))
      return op->emitError()
             << "--stage-io: " << llvm::toString(std::move(error));
    return success();
  }
};
} // namespace

static int64_t stageOf(Operation *op) {
  auto func = op->getParentOfType<func::FuncOp>();
  return func ? pp::pipeline::getStage(func).value_or(0) : 0;
}

static int64_t microBatchOf(Interpreter &in, Value mb) {
  return in.lookup(mb).getInt(0);
}

/// pp.input reads and pp.output writes the files of the whole pipeline's
/// inputs and outputs.
static void registerStageIOInputsOutputs(Interpreter &interp,
                                         const StageIOFiles &files) {
  namespace pipeline = pp::pipeline;
  interp.registerHandler(
      pipeline::InputOp::getOperationName(),
      [=](Interpreter &in, Operation *op) {
        auto input = cast<pipeline::InputOp>(op);
        int64_t mb = microBatchOf(in, input.getMicroBatch());
        return files.read(
            op, in, input.getValue(),
            StageIOFiles::stem({int64_t(input.getIndex()), mb}, "input"),
            false);
      });
  interp.registerHandler(
      pipeline::OutputOp::getOperationName(),
      [=](Interpreter &in, Operation *op) {
        auto output = cast<pipeline::OutputOp>(op);
        int64_t mb = microBatchOf(in, output.getMicroBatch());
        return files.write(
            op, StageIOFiles::stem({int64_t(output.getIndex()), mb}, "output"),
            in.lookup(output.getValue()));
      });
}

/// pp.send writes a message's file, pp.recv takes the one its peer wrote.
static void registerStageIOMessages(Interpreter &interp,
                                    const StageIOFiles &files) {
  namespace pipeline = pp::pipeline;
  interp.registerHandler(
      pipeline::SendOp::getOperationName(),
      [=](Interpreter &in, Operation *op) {
        auto send = cast<pipeline::SendOp>(op);
        int64_t mb = microBatchOf(in, send.getMicroBatch());
        return files.write(
            op,
            StageIOFiles::stem({stageOf(op), int64_t(send.getPeer()),
                                int64_t(send.getTag()), mb},
                               "msg"),
            in.lookup(send.getValue()));
      });
  interp.registerHandler(
      pipeline::RecvOp::getOperationName(),
      [=](Interpreter &in, Operation *op) {
        auto recv = cast<pipeline::RecvOp>(op);
        int64_t mb = microBatchOf(in, recv.getMicroBatch());
        return files.read(
            op, in, recv.getValue(),
            StageIOFiles::stem({int64_t(recv.getPeer()), stageOf(op),
                                int64_t(recv.getTag()), mb},
                               "msg"),
            true);
      });
}

/// pp.accumulate: adds the value into the slot's sum file (held + value, in
/// the order the pipeline adds them), or starts it.
static LogicalResult accumulateIntoFile(const StageIOFiles &files,
                                        Interpreter &in,
                                        pp::pipeline::AccumulateOp acc) {
  Operation *op = acc;
  std::string stem =
      StageIOFiles::stem({stageOf(op), int64_t(acc.getSlot())}, "sum");
  Tensor sum = in.lookup(acc.getValue()).clone();
  if (llvm::sys::fs::exists(files.path(stem))) {
    auto held = readNpy(files.path(stem));
    if (!held)
      return op->emitError()
             << "--stage-io: " << llvm::toString(held.takeError());
    Tensor total = held->clone();
    for (int64_t i = 0, e = total.numel(); i < e; ++i) {
      if (total.dtype() == rt::DType::F32)
        total.as<float>()[i] += sum.as<float>()[i];
      else if (total.dtype() == rt::DType::F64)
        total.as<double>()[i] += sum.as<double>()[i];
      else
        return op->emitError() << "accumulates only f32 and f64";
    }
    sum = std::move(total);
  }
  return files.write(op, stem, sum);
}

/// pp.stash / pp.unstash and pp.accumulate / pp.accumulated keep their
/// values in files between the stage's runs.
static void registerStageIOStashes(Interpreter &interp,
                                   const StageIOFiles &files) {
  namespace pipeline = pp::pipeline;
  interp.registerHandler(
      pipeline::StashOp::getOperationName(),
      [=](Interpreter &in, Operation *op) {
        auto stash = cast<pipeline::StashOp>(op);
        int64_t mb = microBatchOf(in, stash.getMicroBatch());
        return files.write(
            op,
            StageIOFiles::stem({stageOf(op), int64_t(stash.getSlot()), mb},
                               "stash"),
            in.lookup(stash.getValue()));
      });
  interp.registerHandler(
      pipeline::UnstashOp::getOperationName(),
      [=](Interpreter &in, Operation *op) {
        auto unstash = cast<pipeline::UnstashOp>(op);
        int64_t mb = microBatchOf(in, unstash.getMicroBatch());
        return files.read(
            op, in, unstash.getValue(),
            StageIOFiles::stem({stageOf(op), int64_t(unstash.getSlot()), mb},
                               "stash"),
            true);
      });
  interp.registerHandler(pipeline::AccumulateOp::getOperationName(),
                         [=](Interpreter &in, Operation *op) {
                           return accumulateIntoFile(
                               files, in, cast<pipeline::AccumulateOp>(op));
                         });
  interp.registerHandler(
      pipeline::AccumulatedOp::getOperationName(),
      [=](Interpreter &in, Operation *op) {
        auto acc = cast<pipeline::AccumulatedOp>(op);
        return files.read(
            op, in, acc.getValue(),
            StageIOFiles::stem({stageOf(op), int64_t(acc.getSlot())}, "sum"),
            true);
      });
}

/// --stage-io: the pipeline ops of a stage function on files in `dir`.
static void registerStageIOHandlers(Interpreter &interp, std::string dir) {
  StageIOFiles files{std::move(dir)};
  registerStageIOInputsOutputs(interp, files);
  registerStageIOMessages(interp, files);
  registerStageIOStashes(interp, files);
}

/// Hides the options outside `category` (LLVM's own, which every tool that
/// links it registers) from --help, as cl::HideUnrelatedOptions does, but
/// keeps them in --help-hidden: HideUnrelatedOptions makes them
/// ReallyHidden, which would leave them out of every listing.
static void hideUnrelatedOptions(llvm::cl::OptionCategory &category) {
  auto &options = llvm::cl::getRegisteredOptions();
  llvm::DenseMap<llvm::cl::Option *, llvm::cl::OptionHidden> before;
  for (auto &[name, option] : options)
    before[option] = option->getOptionHiddenFlag();
  llvm::cl::HideUnrelatedOptions(category);
  for (auto &[name, option] : options)
    if (option->getOptionHiddenFlag() == llvm::cl::ReallyHidden &&
        before[option] != llvm::cl::ReallyHidden)
      option->setHiddenFlag(llvm::cl::Hidden);
}

/// Prints "pp-interpret: error: `message`" and fails.
static LogicalResult reportError(const llvm::Twine &message) {
  fail(message);
  return failure();
}

namespace {
/// The diagnostics of a run: the importer's style for ONNX locations,
/// source lines for MLIR (one of the two is set).
struct DiagnosticHandlers {
  std::unique_ptr<SourceMgrDiagnosticHandler> mlir;
  std::unique_ptr<ScopedDiagnosticHandler> onnx;
};

/// The function that runs, as the command line sees it: its inputs' names
/// and types, a value reading each (the bound of random integers), and its
/// outputs' names.
struct RunSignature {
  std::vector<std::string> argNames, resultNames;
  std::vector<Type> argTypes;
  std::vector<Value> argReaders;
};

/// What runs the function: the interpreter, or the pipeline runner (a split
/// and scheduled module) or the SPMD runner (an unsplit tensor-parallel
/// one) where set. The interpreter always exists: it also measures
/// --write-profile's nodes.
struct Runners {
  Interpreter &interp;
  PipelineRunner *pipeline = nullptr;
  SPMDRunner *spmd = nullptr;

  LogicalResult setGlobal(StringRef name, Tensor value, std::string &why) {
    if (spmd)
      return spmd->setGlobal(name, std::move(value), &why);
    return pipeline ? pipeline->setGlobal(name, std::move(value), &why)
                    : interp.setGlobal(name, std::move(value), &why);
  }
  const Tensor *getGlobal(StringRef name) const {
    return spmd       ? spmd->getGlobal(name)
           : pipeline ? pipeline->getGlobal(name)
                      : interp.getGlobal(name);
  }
  ArrayRef<std::string> getGlobalNames() const {
    return spmd       ? spmd->getGlobalNames()
           : pipeline ? pipeline->getGlobalNames()
                      : interp.getGlobalNames();
  }
  std::vector<OpProfile> getProfile() const {
    return spmd       ? spmd->getProfile()
           : pipeline ? pipeline->getProfile()
                      : interp.getProfile();
  }
};
} // namespace

static DiagnosticHandlers installDiagnosticHandlers(MLIRContext &context,
                                                    llvm::SourceMgr &sourceMgr,
                                                    bool isONNX) {
  DiagnosticHandlers handlers;
  if (isONNX)
    handlers.onnx = std::make_unique<ScopedDiagnosticHandler>(
        &context, [](Diagnostic &diag) {
          pp::printImportDiagnostic(diag, llvm::errs());
          return success();
        });
  else
    handlers.mlir =
        std::make_unique<SourceMgrDiagnosticHandler>(sourceMgr, &context);
  return handlers;
}

/// Imports the .onnx model or parses the MLIR one (through `sourceMgr`);
/// null once the error is reported.
static OwningOpRef<ModuleOp>
loadModule(MLIRContext &context, llvm::SourceMgr &sourceMgr, bool isONNX) {
  if (isONNX) {
    pp::ONNXImportOptions options;
    if (batchSize.getNumOccurrences())
      options.batchSize = batchSize;
    return pp::importONNXFile(inputFile, &context, options);
  }
  // A regular file of bounded size: /dev/zero or a FIFO would be read
  // forever.
  auto read = pp::limits::readRegularFile(
      inputFile, pp::limits::kMaxMLIRFileBytes, "input file", /*isText=*/true);
  if (!read) {
    llvm::errs() << "error: " << llvm::toString(read.takeError()) << "\n";
    return nullptr;
  }
  sourceMgr.AddNewSourceBuffer(std::move(*read), llvm::SMLoc());
  return parseSourceFile<ModuleOp>(sourceMgr, ParserConfig(&context));
}

static RunSignature signatureOf(const PipelineRunner &runner) {
  RunSignature signature;
  for (const StepInput &input : runner.getInputs()) {
    signature.argNames.push_back(input.name);
    signature.argTypes.push_back(input.type);
    signature.argReaders.push_back(input.reader);
  }
  signature.resultNames = runner.getOutputNames();
  return signature;
}

static RunSignature signatureOf(func::FuncOp func) {
  RunSignature signature;
  for (unsigned i = 0; i < func.getNumArguments(); ++i) {
    signature.argNames.push_back(nameOf(func.getArgAttrDict(i), "arg", i));
    signature.argTypes.push_back(func.getArgument(i).getType());
    signature.argReaders.push_back(func.getArgument(i));
  }
  for (unsigned i = 0; i < func.getNumResults(); ++i)
    signature.resultNames.push_back(
        nameOf(func.getResultAttrDict(i), "output_", i));
  return signature;
}

/// The inputs given by --input (NAME=FILE.npy, NAME an input's name or
/// argN), and a stage function's micro-batch (--stage-io); the others
/// unset. `runName` names what runs in errors.
static FailureOr<std::vector<std::optional<Tensor>>>
readGivenInputs(const RunSignature &signature, StringRef runName) {
  ArrayRef<std::string> argNames = signature.argNames;
  unsigned numArgs = argNames.size();
  std::vector<std::optional<Tensor>> args(numArgs);
  // A stage function's one argument is its micro-batch.
  if (!stageIO.empty() && numArgs == 1)
    args[0] = Tensor::fromValues<int64_t>(rt::DType::I64, {},
                                          {stageMicroBatch.getValue()});
  for (StringRef spec : inputs) {
    auto [name, path] = spec.split('=');
    if (path.empty())
      return reportError("--input expects NAME=FILE.npy, got '" + spec + "'");
    auto it = llvm::find(argNames, name);
    if (it == argNames.end() && name.consume_front("arg")) {
      unsigned index;
      if (!name.getAsInteger(10, index) && index < numArgs)
        it = argNames.begin() + index;
    }
    if (it == argNames.end())
      return reportError("'" + runName + "' has no input named '" +
                         spec.split('=').first + "'");
    auto tensor = readNpy(path);
    if (!tensor)
      return reportError(llvm::toString(tensor.takeError()));
    args[it - argNames.begin()] = std::move(*tensor);
  }
  return args;
}

/// Every input's value: the given ones (checked against their types) and
/// random ones for the rest with --random-inputs.
static FailureOr<std::vector<Tensor>>
completeInputs(const RunSignature &signature,
               std::vector<std::optional<Tensor>> args) {
  std::mt19937_64 rng(seed);
  std::vector<Tensor> argValues;
  for (unsigned i = 0; i < args.size(); ++i) {
    const std::string &name = signature.argNames[i];
    Type argType = signature.argTypes[i];
    auto type = dyn_cast<RankedTensorType>(argType);
    std::optional<rt::DType> dtype =
        type && type.hasStaticShape()
            ? pp::onnx::getDType(type.getElementType())
            : std::nullopt;
    if (!dtype)
      return reportError("input '" + name + "' has unsupported type " +
                         llvm::formatv("{0}", argType).str());
    if (std::optional<std::string> error =
            checkAllocation(*dtype, type.getShape()))
      return reportError("input '" + name + "' (" +
                         llvm::formatv("{0}", type).str() + "): " + *error);
    if (!args[i]) {
      if (!randomInputs)
        return reportError("no value for input '" + name + "' (" +
                           llvm::formatv("{0}", type).str() +
                           "): pass --input=" + name +
                           "=FILE.npy or --random-inputs");
      args[i] = randomTensor(*dtype, type.getShape(),
                             integerBound(signature.argReaders[i]), rng);
    }
    if (args[i]->dtype() != *dtype || args[i]->shape() != type.getShape())
      return reportError("input '" + name + "' must be " +
                         llvm::formatv("{0}", type).str() +
                         ", the file holds " + describe(*args[i]));
    argValues.push_back(std::move(*args[i]));
  }
  return argValues;
}

/// "step N loss L time_ms T" when the function has a loss result.
static void printLoss(std::optional<unsigned> lossIndex, int step,
                      const std::vector<Tensor> &values, double ms) {
  if (!lossIndex)
    return;
  // Enough digits to round-trip the loss's own type.
  const auto &loss = values[*lossIndex];
  const char *format = loss.dtype() == rt::DType::F64 ? "%.17g" : "%.9g";
  llvm::outs() << "step " << step << " loss "
               << llvm::format(format, loss.getDouble(0)) << " time_ms "
               << llvm::format("%.3f", ms) << "\n";
}

static double millisecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now() - start)
      .count();
}

/// --steps of a pipelined module with a pp.stream: the steps between drains
/// as one window each, as the training driver counts them (multiples from
/// step 0, at most 4096; a window shorter than the stream's shortest runs
/// one step). The last step's outputs.
static FailureOr<std::vector<Tensor>>
runStreamWindows(PipelineRunner &runner, const std::vector<Tensor> &argValues,
                 std::optional<unsigned> lossIndex) {
  int64_t minSteps = runner.getStreamMinSteps();
  std::vector<Tensor> outputs;
  for (int step = 1; step <= steps;) {
    auto nextMultiple = [&](int64_t period) {
      return ((step - 1) / period + 1) * period;
    };
    int64_t end = std::min<int64_t>(steps, nextMultiple(4096));
    if (drainEvery > 0)
      end = std::min<int64_t>(end, nextMultiple(drainEvery));
    int64_t count = end - (step - 1);
    if (count < minSteps)
      count = 1;
    auto start = std::chrono::steady_clock::now();
    FailureOr<std::vector<std::vector<Tensor>>> window =
        runner.runWindow(std::vector<std::vector<Tensor>>(
            static_cast<size_t>(count), argValues));
    if (failed(window))
      return failure();
    // time_ms: the window's time over its steps.
    double ms = millisecondsSince(start) / static_cast<double>(count);
    for (const std::vector<Tensor> &values : *window)
      printLoss(lossIndex, step++, values, ms);
    outputs = std::move(window->back());
  }
  return outputs;
}

/// --steps one run at a time, the Dropout masks at --first-step's offset.
/// The last step's outputs.
static FailureOr<std::vector<Tensor>>
runEachStep(Runners &runners, const std::vector<Tensor> &argValues,
            std::optional<unsigned> lossIndex) {
  std::vector<Tensor> outputs;
  for (int step = 1; step <= steps; ++step) {
    auto start = std::chrono::steady_clock::now();
    runners.interp.setRandomPosition(
        firstStep + step - 1, stageIO.empty() ? 0 : stageMicroBatch.getValue());
    FailureOr<std::vector<Tensor>> values = failure();
    if (runners.spmd) {
      runners.spmd->setRandomPosition(firstStep + step - 1, 0);
      values = runners.spmd->run(funcName, argValues);
    } else {
      values = runners.pipeline ? runners.pipeline->runStep(argValues)
                                : runners.interp.run(funcName, argValues);
    }
    if (failed(values))
      return failure();
    double ms = millisecondsSince(start);
    // The first step warms caches and allocations up: not measured.
    if (!writeProfile.empty() && step == 1 && steps > 1)
      runners.interp.clearProfile();
    printLoss(lossIndex, step, *values, ms);
    outputs = std::move(*values);
  }
  return outputs;
}

/// --profile: the time per op kind over all steps.
static void printOpProfile(ArrayRef<OpProfile> entries) {
  double total = 0;
  for (const auto &entry : entries)
    total += entry.milliseconds;
  llvm::outs() << "profile over " << steps
               << " run(s): " << llvm::format("%.3f", total) << " ms in ops\n";
  for (const auto &entry : entries)
    llvm::outs() << llvm::format(
        "  %-34s %6lld calls %10.3f ms %5.1f%%\n", entry.opName.c_str(),
        static_cast<long long>(entry.calls), entry.milliseconds,
        100.0 * entry.milliseconds / total);
}

/// --write-profile: each ONNX node's mean forward and backward time, as
/// JSON under --profile-kind.
static LogicalResult writeNodeProfile(ModuleOp module,
                                      const Interpreter &interp) {
  int measured = steps > 1 ? steps - 1 : steps;
  if (measured < 1)
    return reportError("--write-profile needs --steps of at least 1");
  // The cost model asks per op of a node (a forward op's forward and
  // backward time; an update op's time): a name several ops carry (the
  // optimizer's updates) gets its times shared among them.
  llvm::StringMap<int64_t> opsNamed;
  module->walk([&](Operation *op) {
    if (auto name = dyn_cast<NameLoc>(op->getLoc()))
      ++opsNamed[name.getName()];
  });
  llvm::json::Object nodes;
  for (const NodeProfile &node : interp.getNodeProfile()) {
    double share = measured * std::max<int64_t>(1, opsNamed[node.node]);
    llvm::json::Object times;
    times["forward_ms"] = node.forwardMs / share;
    if (node.backwardMs > 0)
      times["backward_ms"] = node.backwardMs / share;
    nodes[node.node] = std::move(times);
  }
  size_t count = nodes.size();
  if (count == 0)
    return reportError(
        "--write-profile: no op of the module carries an ONNX node "
        "name (its location): import the .onnx here, or print the "
        "module with --mlir-print-debuginfo");
  llvm::json::Object root;
  root[profileKind] = std::move(nodes);
  std::string json =
      llvm::formatv("{0:2}", llvm::json::Value(std::move(root))).str();
  if (llvm::Error error = pp::writeFileContents(writeProfile, json + "\n"))
    return reportError(llvm::toString(std::move(error)));
  llvm::outs() << "profile: " << count << " nodes of kind '" << profileKind
               << "', mean of " << measured << " step(s), written to "
               << writeProfile << "\n";
  return success();
}

/// --dump-globals: every global to DIR/<stem>.npy, and DIR/globals.txt
/// listing name -> file (as --load-globals reads it).
static LogicalResult dumpGlobalValues(const Runners &runners) {
  if (std::error_code ec = llvm::sys::fs::create_directories(dumpGlobals))
    return reportError("cannot create '" + dumpGlobals + "': " + ec.message());
  std::string index;
  llvm::StringSet<> stems;
  for (const std::string &name : runners.getGlobalNames()) {
    std::string stem = fileStem(name);
    while (!stems.insert(stem).second)
      stem += "_";
    llvm::SmallString<256> path(dumpGlobals);
    llvm::sys::path::append(path, stem + ".npy");
    if (llvm::Error error = writeNpy(path, *runners.getGlobal(name)))
      return reportError(llvm::toString(std::move(error)));
    index += name + "\t" + stem + ".npy\n";
  }
  llvm::SmallString<256> indexPath(dumpGlobals);
  llvm::sys::path::append(indexPath, "globals.txt");
  if (llvm::Error error = pp::writeFileContents(indexPath, index))
    return reportError(llvm::toString(std::move(error)));
  return success();
}

/// A line per output (its summary, and its file with --output-dir), and
/// its values with --print.
static LogicalResult printOutputs(ArrayRef<Tensor> outputs,
                                  ArrayRef<std::string> resultNames) {
  if (!outputDir.empty())
    if (std::error_code ec = llvm::sys::fs::create_directories(outputDir))
      return reportError("cannot create '" + outputDir + "': " + ec.message());
  llvm::StringSet<> usedStems;
  for (auto [i, output] : llvm::enumerate(outputs)) {
    std::string name = resultNames[i];
    llvm::outs() << "output " << i << " \"" << name
                 << "\": " << describe(output);
    printSummary(llvm::outs(), output);
    if (!outputDir.empty()) {
      std::string stem = fileStem(name);
      if (!usedStems.insert(stem).second)
        stem = "output_" + std::to_string(i);
      usedStems.insert(stem);
      llvm::SmallString<256> path(outputDir);
      llvm::sys::path::append(path, stem + ".npy");
      if (llvm::Error error = writeNpy(path, output))
        return reportError(llvm::toString(std::move(error)));
      llvm::outs() << " -> " << path;
    }
    llvm::outs() << "\n";
    if (printValues)
      printElements(llvm::outs(), output);
  }
  return success();
}

/// Runs the prepared function (--steps, from --load-globals' values) and
/// writes what the options ask for.
static int runAndReport(ModuleOp module, Runners &runners,
                        const RunSignature &signature,
                        const std::vector<Tensor> &argValues,
                        std::optional<unsigned> lossIndex) {
  if (!loadGlobals.empty())
    if (std::optional<std::string> error = loadGlobalValues(
            loadGlobals, [&](StringRef name, Tensor value, std::string &why) {
              return runners.setGlobal(name, std::move(value), why);
            }))
      return fail(*error);
  if (firstStep < 0)
    return fail("--first-step must be at least 0");
  if (drainEvery < 0)
    return fail("--drain-every must be at least 0");
  bool streams = runners.pipeline &&
                 runners.pipeline->getStreamMinSteps() > 0 && drainEvery != 1;
  FailureOr<std::vector<Tensor>> outputs =
      streams ? runStreamWindows(*runners.pipeline, argValues, lossIndex)
              : runEachStep(runners, argValues, lossIndex);
  if (failed(outputs))
    return 1;

  if (profile)
    printOpProfile(runners.getProfile());
  if (!writeProfile.empty() && failed(writeNodeProfile(module, runners.interp)))
    return 1;
  // Every device of a tensor-parallel group keeps the whole weights, updated
  // from the same collectives: they must not have drifted apart.
  if (runners.spmd)
    if (std::optional<std::string> diverged =
            runners.spmd->findDivergedGlobal())
      return fail("global '" + *diverged +
                  "' differs between the devices of the tensor-parallel "
                  "group");
  if (!dumpGlobals.empty() && failed(dumpGlobalValues(runners)))
    return 1;
  // --steps=0 runs nothing: no outputs.
  if (steps == 0)
    return 0;
  return failed(printOutputs(*outputs, signature.resultNames)) ? 1 : 0;
}

/// Runs `module`: one interpreter, or a runner for a pipelined or
/// tensor-parallel module.
static int interpret(ModuleOp module) {
  // A split and scheduled module runs as a pipeline: one interpreter per
  // device, inputs and outputs for the whole mini-batch.
  bool pipelined =
      stageIO.empty() && !module.getOps<pp::pipeline::ScheduleOp>().empty();
  std::unique_ptr<PipelineRunner> runner;
  // A tensor-parallel module runs on one interpreter per device.
  FailureOr<std::optional<int64_t>> tensorParallel =
      getTensorParallelSize(module);
  if (failed(tensorParallel))
    return 1;
  if (*tensorParallel && !stageIO.empty())
    return fail("--stage-io runs one device; a tensor-parallel stage (a "
                "shard.grid) needs its whole group");
  std::unique_ptr<SPMDRunner> spmd;
  func::FuncOp func;
  RunSignature signature;
  if (pipelined) {
    PipelineRunOptions options;
    options.numThreadsPerDevice = numThreads;
    options.seed = seed;
    options.profile = profile;
    runner = std::make_unique<PipelineRunner>(module, options);
    if (failed(runner->initialize()))
      return 1;
    signature = signatureOf(*runner);
  } else {
    func = dyn_cast_or_null<func::FuncOp>(
        SymbolTable::lookupSymbolIn(module, funcName));
    if (!func || func.isExternal())
      return fail("no function with a body named '" + funcName + "'");
    signature = signatureOf(func);
  }

  FailureOr<std::vector<std::optional<Tensor>>> givenInputs = readGivenInputs(
      signature, pipelined ? StringRef("the pipeline") : StringRef(funcName));
  if (failed(givenInputs))
    return 1;
  FailureOr<std::vector<Tensor>> argValues =
      completeInputs(signature, std::move(*givenInputs));
  if (failed(argValues))
    return 1;

  if (!writeProfile.empty() && (pipelined || *tensorParallel))
    return fail("--write-profile measures an unsplit training step (the "
                "model at the micro-batch size through --pp-training-step), "
                "not a pipelined or tensor-parallel module");
  if (!writeProfile.empty() && profileKind.empty())
    return fail("--profile-kind must name a device kind");
  InterpreterOptions options;
  options.numThreads = numThreads;
  options.seed = seed;
  options.profile = profile || !writeProfile.empty();
  Interpreter interp(module, options);
  pp::interp::registerTrainHandlers(interp);
  if (*tensorParallel && !pipelined)
    spmd = std::make_unique<SPMDRunner>(module, **tensorParallel, options);
  if (!stageIO.empty())
    registerStageIOHandlers(interp, stageIO);
  // --steps=0 runs nothing: the globals as loaded (--dump-globals).
  if (steps < 0)
    return fail("--steps must be at least 0");
  std::optional<unsigned> lossIndex;
  if (pipelined)
    lossIndex = runner->getLossIndex();
  else
    for (unsigned i = 0; i < func.getNumResults(); ++i)
      if (pp::pipeline::isLossResult(func, i))
        lossIndex = i;
  if (spmd ? failed(spmd->initialize())
           : !pipelined && failed(interp.initialize()))
    return 1;
  Runners runners{interp, runner.get(), spmd.get()};
  return runAndReport(module, runners, signature, *argValues, lossIndex);
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  hideUnrelatedOptions(interpretCategory);
  llvm::cl::ParseCommandLineOptions(
      argc, argv, "pp-interpret: run a model on the reference interpreter\n");

  DialectRegistry registry;
  pp::registerONNXImportDialects(registry);
  registry.insert<pp::train::TrainDialect, pp::pipeline::PPDialect,
                  mlir::shard::ShardDialect>();
  MLIRContext context(registry);
  context.loadAllAvailableDialects();

  llvm::SourceMgr sourceMgr;
  bool isONNX = StringRef(inputFile).ends_with_insensitive(".onnx");
  DiagnosticHandlers diagnostics =
      installDiagnosticHandlers(context, sourceMgr, isONNX);
  OwningOpRef<ModuleOp> module = loadModule(context, sourceMgr, isONNX);
  if (!module)
    return 1;
  return interpret(*module);
}
