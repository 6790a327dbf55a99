//===- Options.cpp - The training executable's command line ---------------===//
//
// A hand-written parser (the runtime links no LLVM): `--opt=value` and
// `--opt value` are both accepted.
//
//===----------------------------------------------------------------------===//

#include "Options.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <initializer_list>
#include <limits>

using namespace pp::rt::train;

namespace {

/// The --lr-schedule flags as given, before they make an LRSchedule.
struct ScheduleFlags {
  std::optional<std::string> kind;
  std::optional<int64_t> warmupSteps, decaySteps, stepSize;
  std::optional<double> warmupStartFactor, minLr, gamma, power;
  std::optional<std::vector<int64_t>> milestones;
  bool any() const {
    return kind || warmupSteps || decaySteps || stepSize || warmupStartFactor ||
           minLr || gamma || power || milestones;
  }
};

bool parseInt(const std::string &text, int64_t &value) {
  if (text.empty())
    return false;
  errno = 0;
  char *end = nullptr;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (*end || errno)
    return false;
  value = v;
  return true;
}

bool parseDouble(const std::string &text, double &value) {
  if (text.empty())
    return false;
  errno = 0;
  char *end = nullptr;
  value = std::strtod(text.c_str(), &end);
  return !*end && !errno;
}

/// One option's value as given, and what its handler sets.
struct OptionValue {
  const std::string &name;
  const std::string &value;
  TrainOptions &options;
  ScheduleFlags &schedule;
  std::string &error;

  bool bad(const char *expected) const {
    error = "--" + name + ": expected " + expected + ", got '" + value + "'";
    return false;
  }
  bool real(double &x) const { return parseDouble(value, x); }
  /// An integer in [lo, hi] into `out`, else the error `expected`.
  bool integer(int64_t lo, int64_t hi, const char *expected,
               int64_t &out) const {
    int64_t n;
    if (!parseInt(value, n) || n < lo || n > hi)
      return bad(expected);
    out = n;
    return true;
  }
  bool integer(int64_t lo, int64_t hi, const char *expected,
               std::optional<int64_t> &out) const {
    int64_t n;
    if (!integer(lo, hi, expected, n))
      return false;
    out = n;
    return true;
  }
  bool oneOf(std::initializer_list<const char *> choices) const {
    for (const char *choice : choices)
      if (value == choice)
        return true;
    return false;
  }
  bool nonEmpty(const char *expected, std::string &out) const {
    if (value.empty())
      return bad(expected);
    out = value;
    return true;
  }
  /// --data / --eval-data: NAME=FILE.npy entries, or one DIR.
  bool dataSource(std::vector<std::pair<std::string, std::string>> &files,
                  std::string &dir) const {
    if (size_t eq = value.find('='); eq != std::string::npos) {
      if (eq == 0 || eq + 1 == value.size())
        return bad("NAME=FILE.npy or DIR");
      files.emplace_back(value.substr(0, eq), value.substr(eq + 1));
      return true;
    }
    if (value.empty())
      return bad("NAME=FILE.npy or DIR");
    if (!dir.empty()) {
      error =
          "--" + name + " DIR given twice ('" + dir + "' and '" + value + "')";
      return false;
    }
    dir = value;
    return true;
  }
};

constexpr int64_t kNoLimit = std::numeric_limits<int64_t>::max();

/// --test-delay RANK:MS[:EVERY:AT].
bool parseTestDelay(OptionValue &v) {
  std::vector<std::string> fields;
  for (size_t start = 0;;) {
    size_t colon = v.value.find(':', start);
    fields.push_back(v.value.substr(start, colon - start));
    if (colon == std::string::npos)
      break;
    start = colon + 1;
  }
  TrainOptions::TestDelay delay;
  if ((fields.size() != 2 && fields.size() != 4) ||
      !parseInt(fields[0], delay.rank) || delay.rank < 0 ||
      !parseDouble(fields[1], delay.ms) || !std::isfinite(delay.ms) ||
      delay.ms < 0 || delay.ms > 1e6 ||
      (fields.size() == 4 &&
       (!parseInt(fields[2], delay.every) || delay.every < 1 ||
        !parseInt(fields[3], delay.at) || delay.at < 0 ||
        delay.at >= delay.every)))
    return v.bad("RANK:MS[:EVERY:AT] (a rank >= 0, 0 <= MS <= 1e6, "
                 "0 <= AT < EVERY)");
  v.options.testDelays.push_back(delay);
  return true;
}

/// An option: its name, its argument (null for a flag), its help, and what
/// it sets (false with the error set when its value is bad).
struct OptionSpec {
  const char *name;
  const char *argument;
  const char *help;
  bool (*apply)(OptionValue &);
};

const OptionSpec kOptions[] = {
    {"local", nullptr,
     "run every device as a thread of this process (default without mpirun)",
     [](OptionValue &v) {
       v.options.local = true;
       return true;
     }},
    {"steps", "N", "total training steps (default 10)",
     [](OptionValue &v) {
       v.options.stepsGiven = true;
       return v.integer(1, kNoLimit, "a positive integer", v.options.steps);
     }},
    {"lr", "X",
     "learning rate of every optimizer step (default: the one compiled in); "
     "the base rate of --lr-schedule",
     [](OptionValue &v) {
       double x;
       if (!v.real(x))
         return v.bad("a number");
       v.options.lr = x;
       return true;
     }},
    {"lr-schedule", "constant|step|multistep|exponential|cosine|linear|poly",
     "the rate per step, as PyTorch's schedulers stepped once a step: "
     "constant (the default), step (StepLR), multistep (MultiStepLR), "
     "exponential (ExponentialLR), cosine (CosineAnnealingLR), linear "
     "(LinearLR decay to --min-lr) or poly (PolynomialLR, to --min-lr as "
     "mmcv's PolyLR); after --warmup-steps",
     [](OptionValue &v) {
       if (!v.oneOf({"constant", "step", "multistep", "exponential", "cosine",
                     "linear", "poly"}))
         return v.bad(
             "constant, step, multistep, exponential, cosine, linear or poly");
       v.schedule.kind = v.value;
       return true;
     }},
    {"warmup-steps", "N",
     "linear warm-up over the first N steps (LinearLR chained by "
     "SequentialLR), from --warmup-start-factor times the rate (default 0)",
     [](OptionValue &v) {
       return v.integer(0, kNoLimit, "a non-negative integer",
                        v.schedule.warmupSteps);
     }},
    {"warmup-start-factor", "F",
     "the warm-up's first rate as a fraction of the base rate, 0 < F <= 1 "
     "(default 1/3, as LinearLR's)",
     [](OptionValue &v) {
       double x;
       if (!v.real(x) || !(x > 0 && x <= 1))
         return v.bad("a number in (0, 1]");
       v.schedule.warmupStartFactor = x;
       return true;
     }},
    {"min-lr", "X",
     "cosine's eta_min, the linear and poly decays' end rate (default 0)",
     [](OptionValue &v) {
       double x;
       if (!v.real(x) || !std::isfinite(x) || x < 0)
         return v.bad("a finite number >= 0");
       v.schedule.minLr = x;
       return true;
     }},
    {"decay-steps", "N",
     "cosine, linear and poly: the step at which the decay ends, warm-up "
     "included (default --steps)",
     [](OptionValue &v) {
       return v.integer(1, kNoLimit, "a positive integer",
                        v.schedule.decaySteps);
     }},
    {"step-size", "N", "step: multiply the rate by --gamma every N steps",
     [](OptionValue &v) {
       return v.integer(1, kNoLimit, "a positive integer", v.schedule.stepSize);
     }},
    {"milestones", "N1,N2,...",
     "multistep: multiply the rate by --gamma at each of these steps after "
     "the warm-up (increasing)",
     [](OptionValue &v) {
       std::vector<int64_t> milestones;
       if (!parseMilestones(v.value, milestones))
         return v.bad("positive, strictly increasing integers separated by "
                      "commas");
       v.schedule.milestones = milestones;
       return true;
     }},
    {"power", "P",
     "poly: the exponent of the decay, (1 - k / T)^P (default 1, as "
     "PolynomialLR's)",
     [](OptionValue &v) {
       double x;
       if (!v.real(x) || !std::isfinite(x) || !(x > 0))
         return v.bad("a finite, positive number");
       v.schedule.power = x;
       return true;
     }},
    {"gamma", "G",
     "step, multistep and exponential: the factor every --step-size steps, "
     "at each milestone or every step (default 0.1)",
     [](OptionValue &v) {
       double x;
       if (!v.real(x) || !std::isfinite(x) || !(x > 0))
         return v.bad("a finite, positive number");
       v.schedule.gamma = x;
       return true;
     }},
    {"clip-grad-norm", "X|off",
     "scale each step's gradients by min(1, X / (norm + 1e-6)) before the "
     "optimizer, the norm taken over every trained tensor of the model (as "
     "torch.nn.utils.clip_grad_norm_; synchronous schedules only), and log "
     "the norm as grad_norm; off: no clipping (drops a resumed "
     "checkpoint's)",
     [](OptionValue &v) {
       double x = 0;
       if (v.value != "off" && (!v.real(x) || !std::isfinite(x) || !(x > 0)))
         return v.bad("a finite, positive number or off");
       v.options.clipGradNorm = x;
       return true;
     }},
    {"data", "NAME=FILE.npy|DIR",
     "step inputs: dim 0 holds samples, memory-mapped; each step takes the "
     "next whole batch of the epoch (repeatable; DIR reads "
     "DIR/<input>.npy)",
     [](OptionValue &v) {
       return v.dataSource(v.options.dataFiles, v.options.dataDir);
     }},
    {"eval-data", "NAME=FILE.npy|DIR",
     "a held-out set, as --data: a forward-only pass over it (BatchNorm on "
     "its running statistics, Dropout off) logs the loss and top-1 accuracy "
     "(classifiers) or perplexity (language models) after the last step",
     [](OptionValue &v) {
       return v.dataSource(v.options.evalDataFiles, v.options.evalDataDir);
     }},
    {"eval-every", "N",
     "with --eval-data: evaluate every N steps too (the pipeline drains "
     "there)",
     [](OptionValue &v) {
       return v.integer(1, kNoLimit, "a positive integer", v.options.evalEvery);
     }},
    {"shuffle", nullptr,
     "with --data: each epoch reads the samples in a permutation drawn from "
     "--seed (splitmix64 and Fisher-Yates), else in file order",
     [](OptionValue &v) {
       v.options.shuffle = true;
       return true;
     }},
    {"data-prefetch", "N",
     "with --data: a thread reads the pages of the next N steps' samples "
     "ahead of the stages, so a cold file's reads overlap training "
     "(default 2; 0: off)",
     [](OptionValue &v) {
       return v.integer(0, 1024, "an integer from 0 to 1024",
                        v.options.dataPrefetch);
     }},
    {"epochs", "N",
     "with --data: train N epochs of whole batches (instead of --steps; a "
     "last partial batch is dropped)",
     [](OptionValue &v) {
       return v.integer(1, kNoLimit, "a positive integer", v.options.epochs);
     }},
    {"synthetic", nullptr,
     "one fixed random batch every step (default without --data)",
     [](OptionValue &v) {
       v.options.synthetic = true;
       return true;
     }},
    {"seed", "S", "seed of --synthetic and of Dropout (stage seed = S + stage)",
     [](OptionValue &v) {
       int64_t n;
       if (!parseInt(v.value, n))
         return v.bad("an integer");
       v.options.seed = static_cast<uint64_t>(n);
       v.options.seedGiven = true;
       return true;
     }},
    {"threads", "N", "kernel threads per device (default 1)",
     [](OptionValue &v) {
       int64_t n;
       if (!v.integer(1, 4096, "a positive integer", n))
         return false;
       v.options.threads = static_cast<int>(n);
       return true;
     }},
    {"log", "FILE", "per-step log: CSV when FILE ends in .csv, else JSON lines",
     [](OptionValue &v) {
       v.options.logFile = v.value;
       return true;
     }},
    {"checkpoint-every", "N", "write a checkpoint every N steps",
     [](OptionValue &v) {
       return v.integer(1, kNoLimit, "a positive integer",
                        v.options.checkpointEvery);
     }},
    {"drain-every", "N",
     "weight-versioned schedules: drain the pipeline every N steps (default "
     "0: only before a checkpoint and at the end; 1: every step). Between "
     "drains the next steps' forwards overlap earlier backwards",
     [](OptionValue &v) {
       return v.integer(0, kNoLimit, "a non-negative integer",
                        v.options.drainEvery);
     }},
    {"checkpoint", "DIR",
     "checkpoint directory (default ./checkpoint): DIR/step-<k>/, DIR/latest",
     [](OptionValue &v) {
       v.options.checkpointDir = v.value;
       return true;
     }},
    {"keep-checkpoints", "K",
     "keep the K newest checkpoints, remove the older (default 2)",
     [](OptionValue &v) {
       return v.integer(1, 1000000, "a positive integer",
                        v.options.keepCheckpoints);
     }},
    {"resume", "DIR",
     "continue from the newest complete, verified checkpoint in DIR",
     [](OptionValue &v) {
       v.options.resumeDir = v.value;
       return true;
     }},
    {"save-onnx", "OUT.onnx", "write the source model with the trained weights",
     [](OptionValue &v) {
       v.options.saveOnnx = v.value;
       return true;
     }},
    {"save-best", "OUT.onnx",
     "with --eval-data: after every evaluation that improves on the best so "
     "far by --best-metric, write the source model with the weights of that "
     "moment (replaced whole, never half written); checkpoints keep the "
     "best so far, so a resumed run goes on from it",
     [](OptionValue &v) {
       v.options.saveBest = v.value;
       return true;
     }},
    {"best-metric", "loss|accuracy|miou",
     "--save-best's measure: the held-out loss (lower is better), the top-1 "
     "or pixel accuracy, or the mean IoU (higher is better); default miou "
     "for segmentation, accuracy for other classifiers, loss otherwise "
     "(language models)",
     [](OptionValue &v) {
       if (!v.oneOf({"loss", "accuracy", "miou"}))
         return v.bad("loss, accuracy or miou");
       v.options.bestMetric = v.value;
       return true;
     }},
    {"write-profile", "FILE.json",
     "time every op on the rank that runs it (receive waits left out): "
     "write each ONNX node's mean forward and backward ms per micro-batch "
     "over the steps after the first, as the profile --pp-compile profile= "
     "reads",
     [](OptionValue &v) {
       v.options.writeProfile = v.value;
       return true;
     }},
    {"measure-links", "FILE.json",
     "train nothing: time messages of 4 B to 16 MiB between rank 0 and each "
     "other rank (2 ranks or more) and write the links' latency and "
     "bandwidth as the cluster file's \"links\"",
     [](OptionValue &v) {
       return v.nonEmpty("a file path", v.options.measureLinks);
     }},
    {"profile-kind", "KIND",
     "the device kind of --write-profile's times (default cpu)",
     [](OptionValue &v) {
       return v.nonEmpty("a device kind", v.options.profileKind);
     }},
    {"dump-globals", "DIR",
     "write every global to DIR/<name>.npy and DIR/globals.txt",
     [](OptionValue &v) {
       v.options.dumpGlobals = v.value;
       return true;
     }},
    {"data-file", "PATH", "initial values of globals and constants",
     [](OptionValue &v) {
       v.options.dataFile = v.value;
       return true;
     }},
    {"timeout", "S",
     "seconds a receive waits for a peer (default 60, at most 1e6)",
     [](OptionValue &v) {
       double x;
       if (!v.real(x) || !std::isfinite(x) || !(x > 0) || x > kMaxTimeout)
         return v.bad("a finite, positive number of seconds, at most 1e6");
       v.options.timeout = x;
       return true;
     }},
    {"wsp-log", "DIR",
     "Wave Synchronous Parallel: each virtual worker logs its steps, pushes "
     "and pulls to DIR/vw<r>.jsonl",
     [](OptionValue &v) {
       return v.nonEmpty("a directory", v.options.wspLogDir);
     }},
    {"test-delay", "RANK:MS[:EVERY:AT]",
     "tests and benchmarks: rank RANK sleeps MS ms after its steps (those "
     "whose index mod EVERY is AT; repeatable)",
     [](OptionValue &v) { return parseTestDelay(v); }},
    {"p2p-matching", "auto|tags|order|headers",
     "how a receive finds its message: by tag (MPI), by send order between "
     "two ranks (NCCL, where the compiler proved the order), or by headers "
     "sent before each message (NCCL otherwise); auto (the default) picks "
     "by transport",
     [](OptionValue &v) {
       if (!v.oneOf({"auto", "tags", "order", "headers"}))
         return v.bad("auto, tags, order or headers");
       v.options.p2pMatching = v.value;
       return true;
     }},
    {"transport", "auto|nccl|mpi",
     "under mpirun: NCCL between GPUs (auto in a CUDA build with NCCL) or "
     "MPI (through host memory on GPUs)",
     [](OptionValue &v) {
       if (!v.oneOf({"auto", "nccl", "mpi"}))
         return v.bad("auto, nccl or mpi");
       v.options.transport = v.value;
       return true;
     }},
    {"prefetch-receives", "on|off",
     "post the next action's receives while the running one computes, so "
     "messages arrive during compute (on, the default), or each action's "
     "own when it starts (off)",
     [](OptionValue &v) {
       if (!v.oneOf({"on", "off"}))
         return v.bad("on or off");
       v.options.prefetchReceives = v.value == "on";
       return true;
     }},
    {"no-tf32", nullptr,
     "CUDA: F32 GEMMs and convolutions in full FP32 instead of TF32 on "
     "tensor cores, the default (bf16 and fp16 programs use tensor cores "
     "either way)",
     [](OptionValue &v) {
       v.options.tf32 = false;
       return true;
     }},
    {"help", nullptr, "print this help",
     [](OptionValue &v) {
       v.options.help = true;
       return true;
     }},
};

/// Checks that the flags fit the schedule they name and sets
/// options.lrSchedule when any is given.
bool resolveSchedule(const ScheduleFlags &flags, TrainOptions &options,
                     std::string &error) {
  if (!flags.any())
    return true;
  LRSchedule s;
  std::string kind = flags.kind.value_or("constant");
  parseKind(kind, s.kind); // --lr-schedule checked the name
  bool decays = s.decays();
  auto refuse = [&](const char *flag, const char *kinds) {
    error = std::string("--") + flag + " applies to --lr-schedule " + kinds +
            " only (the schedule is " + kind + ")";
    return false;
  };
  if (flags.stepSize && s.kind != LRSchedule::Kind::Step)
    return refuse("step-size", "step");
  if (flags.milestones && s.kind != LRSchedule::Kind::MultiStep)
    return refuse("milestones", "multistep");
  if (flags.gamma && !s.usesGamma())
    return refuse("gamma", "step, multistep or exponential");
  if (flags.power && s.kind != LRSchedule::Kind::Poly)
    return refuse("power", "poly");
  if ((flags.minLr || flags.decaySteps) && !decays)
    return refuse(flags.minLr ? "min-lr" : "decay-steps",
                  "cosine, linear or poly");
  s.warmupSteps = flags.warmupSteps.value_or(0);
  if (flags.warmupStartFactor && s.warmupSteps == 0) {
    error = "--warmup-start-factor needs --warmup-steps N with N > 0";
    return false;
  }
  s.warmupStartFactor = flags.warmupStartFactor.value_or(s.warmupStartFactor);
  if (s.kind == LRSchedule::Kind::Step) {
    if (!flags.stepSize) {
      error = "--lr-schedule step needs --step-size N";
      return false;
    }
    s.stepSize = *flags.stepSize;
  }
  if (s.kind == LRSchedule::Kind::MultiStep) {
    if (!flags.milestones) {
      error = "--lr-schedule multistep needs --milestones N1,N2,...";
      return false;
    }
    s.milestones = *flags.milestones;
  }
  if (s.kind == LRSchedule::Kind::Exponential && !flags.gamma) {
    // ExponentialLR has no default: 0.1 a step would end training at once.
    error = "--lr-schedule exponential needs --gamma G (the factor per step, "
            "e.g. 0.999)";
    return false;
  }
  if (s.usesGamma())
    s.gamma = flags.gamma.value_or(s.gamma);
  s.power = flags.power.value_or(s.power);
  if (decays) {
    s.minLr = flags.minLr.value_or(0);
    // Under --epochs the run's steps are known once the data is: 0 until
    // Job::load sets them.
    s.decaySteps = flags.decaySteps.value_or(
        options.epochs > 0 && !flags.decaySteps ? 0 : options.steps);
    if ((flags.decaySteps || options.epochs == 0) &&
        s.decaySteps <= s.warmupSteps) {
      error = (flags.decaySteps ? "--decay-steps " : "--steps ") +
              std::to_string(s.decaySteps) + " leaves no " + kind +
              " decay after --warmup-steps " + std::to_string(s.warmupSteps) +
              " (the decay ends at --decay-steps, default --steps)";
      return false;
    }
  }
  options.lrSchedule = s;
  return true;
}

std::string validOptions() {
  std::string list;
  for (const OptionSpec &spec : kOptions)
    list += std::string(list.empty() ? "" : ", ") + "--" + spec.name;
  return list;
}

} // namespace

std::string pp::rt::train::trainUsage(const std::string &program) {
  std::string text = "usage: " + program +
                     " [options]\n\n"
                     "Trains the compiled pipeline. Under mpirun each rank "
                     "runs one device; otherwise\nevery device is a thread "
                     "(--local).\n\noptions:\n";
  for (const OptionSpec &spec : kOptions) {
    std::string left = std::string("  --") + spec.name;
    if (spec.argument)
      left += std::string(" ") + spec.argument;
    if (left.size() < 28)
      left.append(28 - left.size(), ' ');
    else
      left += "\n" + std::string(28, ' ');
    text += left + spec.help + "\n";
  }
  return text;
}

namespace {

/// The options that exclude or need each other.
bool checkCombinations(const TrainOptions &options, std::string &error) {
  if (options.synthetic &&
      (!options.dataFiles.empty() || !options.dataDir.empty())) {
    error = "--synthetic and --data exclude each other";
    return false;
  }
  if (!options.dataFiles.empty() && !options.dataDir.empty()) {
    error = "--data NAME=FILE.npy and --data DIR exclude each other";
    return false;
  }
  bool data = !options.dataFiles.empty() || !options.dataDir.empty();
  if (!options.evalDataFiles.empty() && !options.evalDataDir.empty()) {
    error = "--eval-data NAME=FILE.npy and --eval-data DIR exclude each other";
    return false;
  }
  if (options.evalEvery > 0 && !options.evaluates()) {
    error = "--eval-every needs --eval-data (the held-out set to evaluate)";
    return false;
  }
  if (!options.saveBest.empty() && !options.evaluates()) {
    error = "--save-best needs --eval-data (the held-out set that decides "
            "which weights are best)";
    return false;
  }
  if (!options.bestMetric.empty() && options.saveBest.empty()) {
    error = "--best-metric needs --save-best OUT.onnx";
    return false;
  }
  if (!options.saveBest.empty() && options.saveBest == options.saveOnnx) {
    error = "--save-best and --save-onnx name the same file '" +
            options.saveBest + "'";
    return false;
  }
  if (options.epochs > 0 && options.stepsGiven) {
    error = "--epochs and --steps exclude each other";
    return false;
  }
  if ((options.epochs > 0 || options.shuffle) && !data) {
    error = std::string(options.shuffle ? "--shuffle" : "--epochs") +
            " needs --data (random inputs have no epochs)";
    return false;
  }
  if (options.lr && !(*options.lr > 0 && std::isfinite(*options.lr))) {
    error = "--lr: the learning rate must be positive and finite";
    return false;
  }
  return true;
}

} // namespace

bool pp::rt::train::parseTrainOptions(int argc, char **argv,
                                      TrainOptions &options,
                                      std::string &error) {
  ScheduleFlags schedule;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-h")
      arg = "--help";
    if (arg.rfind("--", 0) != 0) {
      error =
          "unexpected argument '" + arg + "'; valid options: " + validOptions();
      return false;
    }
    std::string name = arg.substr(2), value;
    bool hasValue = false;
    if (size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      hasValue = true;
    }
    const OptionSpec *spec = nullptr;
    for (const OptionSpec &candidate : kOptions)
      if (name == candidate.name)
        spec = &candidate;
    if (!spec) {
      error =
          "unknown option '--" + name + "'; valid options: " + validOptions();
      return false;
    }
    if (!spec->argument && hasValue) {
      error = "--" + name + " takes no value";
      return false;
    }
    if (spec->argument && !hasValue) {
      if (i + 1 >= argc) {
        error = "--" + name + " expects " + spec->argument;
        return false;
      }
      value = argv[++i];
    }
    OptionValue given{name, value, options, schedule, error};
    if (!spec->apply(given))
      return false;
  }
  return checkCombinations(options, error) &&
         resolveSchedule(schedule, options, error);
}
