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

using namespace pp::rt::train;

namespace {

struct OptionSpec {
  const char *name;
  const char *argument; // null for a flag
  const char *help;
};

const OptionSpec kOptions[] = {
    {"local", nullptr,
     "run every device as a thread of this process (default without mpirun)"},
    {"steps", "N", "total training steps (default 10)"},
    {"lr", "X",
     "learning rate of every optimizer step (default: the one compiled in); "
     "the base rate of --lr-schedule"},
    {"lr-schedule", "constant|step|cosine|linear",
     "the rate per step, as PyTorch's schedulers stepped once a step: "
     "constant (the default), step (StepLR), cosine (CosineAnnealingLR) or "
     "linear (LinearLR decay to --min-lr); after --warmup-steps"},
    {"warmup-steps", "N",
     "linear warm-up over the first N steps (LinearLR chained by "
     "SequentialLR), from --warmup-start-factor times the rate (default 0)"},
    {"warmup-start-factor", "F",
     "the warm-up's first rate as a fraction of the base rate, 0 < F <= 1 "
     "(default 1/3, as LinearLR's)"},
    {"min-lr", "X",
     "cosine's eta_min and the linear decay's end rate (default 0)"},
    {"decay-steps", "N",
     "cosine and linear: the step at which the decay ends, warm-up included "
     "(default --steps)"},
    {"step-size", "N", "step: multiply the rate by --gamma every N steps"},
    {"gamma", "G", "step: the factor every --step-size steps (default 0.1)"},
    {"clip-grad-norm", "X|off",
     "scale each step's gradients by min(1, X / (norm + 1e-6)) before the "
     "optimizer, the norm taken over every trained tensor of the model (as "
     "torch.nn.utils.clip_grad_norm_; synchronous schedules only), and log "
     "the norm as grad_norm; off: no clipping (drops a resumed "
     "checkpoint's)"},
    {"data", "NAME=FILE.npy|DIR",
     "step inputs: dim 0 holds samples, memory-mapped; each step takes the "
     "next whole batch of the epoch (repeatable; DIR reads "
     "DIR/<input>.npy)"},
    {"eval-data", "NAME=FILE.npy|DIR",
     "a held-out set, as --data: a forward-only pass over it (BatchNorm on "
     "its running statistics, Dropout off) logs the loss and top-1 accuracy "
     "(classifiers) or perplexity (language models) after the last step"},
    {"eval-every", "N",
     "with --eval-data: evaluate every N steps too (the pipeline drains "
     "there)"},
    {"shuffle", nullptr,
     "with --data: each epoch reads the samples in a permutation drawn from "
     "--seed (splitmix64 and Fisher-Yates), else in file order"},
    {"data-prefetch", "N",
     "with --data: a thread reads the pages of the next N steps' samples "
     "ahead of the stages, so a cold file's reads overlap training "
     "(default 2; 0: off)"},
    {"epochs", "N",
     "with --data: train N epochs of whole batches (instead of --steps; a "
     "last partial batch is dropped)"},
    {"synthetic", nullptr,
     "one fixed random batch every step (default without --data)"},
    {"seed", "S",
     "seed of --synthetic and of Dropout (stage seed = S + stage)"},
    {"threads", "N", "kernel threads per device (default 1)"},
    {"log", "FILE",
     "per-step log: CSV when FILE ends in .csv, else JSON lines"},
    {"checkpoint-every", "N", "write a checkpoint every N steps"},
    {"drain-every", "N",
     "weight-versioned schedules: drain the pipeline every N steps (default "
     "0: only before a checkpoint and at the end; 1: every step). Between "
     "drains the next steps' forwards overlap earlier backwards"},
    {"checkpoint", "DIR",
     "checkpoint directory (default ./checkpoint): DIR/step-<k>/, DIR/latest"},
    {"keep-checkpoints", "K",
     "keep the K newest checkpoints, remove the older (default 2)"},
    {"resume", "DIR",
     "continue from the newest complete, verified checkpoint in DIR"},
    {"save-onnx", "OUT.onnx",
     "write the source model with the trained weights"},
    {"write-profile", "FILE.json",
     "time every op on the rank that runs it (receive waits left out): "
     "write each ONNX node's mean forward and backward ms per micro-batch "
     "over the steps after the first, as the profile --pp-compile profile= "
     "reads"},
    {"measure-links", "FILE.json",
     "train nothing: time messages of 4 B to 16 MiB between rank 0 and each "
     "other rank (2 ranks or more) and write the links' latency and "
     "bandwidth as the cluster file's \"links\""},
    {"profile-kind", "KIND",
     "the device kind of --write-profile's times (default cpu)"},
    {"dump-globals", "DIR",
     "write every global to DIR/<name>.npy and DIR/globals.txt"},
    {"data-file", "PATH", "initial values of globals and constants"},
    {"timeout", "S",
     "seconds a receive waits for a peer (default 60, at most 1e6)"},
    {"wsp-log", "DIR",
     "Wave Synchronous Parallel: each virtual worker logs its steps, pushes "
     "and pulls to DIR/vw<r>.jsonl"},
    {"test-delay", "RANK:MS[:EVERY:AT]",
     "tests and benchmarks: rank RANK sleeps MS ms after its steps (those "
     "whose index mod EVERY is AT; repeatable)"},
    {"p2p-matching", "auto|tags|order|headers",
     "how a receive finds its message: by tag (MPI), by send order between "
     "two ranks (NCCL, where the compiler proved the order), or by headers "
     "sent before each message (NCCL otherwise); auto (the default) picks "
     "by transport"},
    {"transport", "auto|nccl|mpi",
     "under mpirun: NCCL between GPUs (auto in a CUDA build with NCCL) or "
     "MPI (through host memory on GPUs)"},
    {"prefetch-receives", "on|off",
     "post the next action's receives while the running one computes, so "
     "messages arrive during compute (on, the default), or each action's "
     "own when it starts (off)"},
    {"help", nullptr, "print this help"},
};

/// The --lr-schedule flags as given, before they make an LRSchedule.
struct ScheduleFlags {
  std::optional<std::string> kind;
  std::optional<int64_t> warmupSteps, decaySteps, stepSize;
  std::optional<double> warmupStartFactor, minLr, gamma;
  bool any() const {
    return kind || warmupSteps || decaySteps || stepSize || warmupStartFactor ||
           minLr || gamma;
  }
};

/// Checks that the flags fit the schedule they name and sets
/// options.lrSchedule when any is given.
bool resolveSchedule(const ScheduleFlags &flags, TrainOptions &options,
                     std::string &error) {
  if (!flags.any())
    return true;
  LRSchedule s;
  std::string kind = flags.kind.value_or("constant");
  s.kind = kind == "step"     ? LRSchedule::Kind::Step
           : kind == "cosine" ? LRSchedule::Kind::Cosine
           : kind == "linear" ? LRSchedule::Kind::Linear
                              : LRSchedule::Kind::Constant;
  bool decays =
      s.kind == LRSchedule::Kind::Cosine || s.kind == LRSchedule::Kind::Linear;
  auto refuse = [&](const char *flag, const char *kinds) {
    error = std::string("--") + flag + " applies to --lr-schedule " + kinds +
            " only (the schedule is " + kind + ")";
    return false;
  };
  if ((flags.stepSize || flags.gamma) && s.kind != LRSchedule::Kind::Step)
    return refuse(flags.stepSize ? "step-size" : "gamma", "step");
  if ((flags.minLr || flags.decaySteps) && !decays)
    return refuse(flags.minLr ? "min-lr" : "decay-steps", "cosine or linear");
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
    s.gamma = flags.gamma.value_or(s.gamma);
  }
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
    auto badValue = [&](const char *expected) {
      error = "--" + name + ": expected " + expected + ", got '" + value + "'";
      return false;
    };

    int64_t number = 0;
    double real = 0;
    if (name == "local") {
      options.local = true;
    } else if (name == "steps") {
      if (!parseInt(value, number) || number < 1)
        return badValue("a positive integer");
      options.steps = number;
      options.stepsGiven = true;
    } else if (name == "lr") {
      if (!parseDouble(value, real))
        return badValue("a number");
      options.lr = real;
    } else if (name == "lr-schedule") {
      if (value != "constant" && value != "step" && value != "cosine" &&
          value != "linear")
        return badValue("constant, step, cosine or linear");
      schedule.kind = value;
    } else if (name == "warmup-steps") {
      if (!parseInt(value, number) || number < 0)
        return badValue("a non-negative integer");
      schedule.warmupSteps = number;
    } else if (name == "warmup-start-factor") {
      if (!parseDouble(value, real) || !(real > 0 && real <= 1))
        return badValue("a number in (0, 1]");
      schedule.warmupStartFactor = real;
    } else if (name == "min-lr") {
      if (!parseDouble(value, real) || !std::isfinite(real) || real < 0)
        return badValue("a finite number >= 0");
      schedule.minLr = real;
    } else if (name == "decay-steps") {
      if (!parseInt(value, number) || number < 1)
        return badValue("a positive integer");
      schedule.decaySteps = number;
    } else if (name == "step-size") {
      if (!parseInt(value, number) || number < 1)
        return badValue("a positive integer");
      schedule.stepSize = number;
    } else if (name == "gamma") {
      if (!parseDouble(value, real) || !std::isfinite(real) || !(real > 0))
        return badValue("a finite, positive number");
      schedule.gamma = real;
    } else if (name == "clip-grad-norm") {
      if (value == "off")
        options.clipGradNorm = 0;
      else if (!parseDouble(value, real) || !std::isfinite(real) || !(real > 0))
        return badValue("a finite, positive number or off");
      else
        options.clipGradNorm = real;
    } else if (name == "data") {
      if (size_t eq = value.find('='); eq != std::string::npos) {
        if (eq == 0 || eq + 1 == value.size())
          return badValue("NAME=FILE.npy or DIR");
        options.dataFiles.emplace_back(value.substr(0, eq),
                                       value.substr(eq + 1));
      } else {
        if (value.empty())
          return badValue("NAME=FILE.npy or DIR");
        if (!options.dataDir.empty()) {
          error = "--data DIR given twice ('" + options.dataDir + "' and '" +
                  value + "')";
          return false;
        }
        options.dataDir = value;
      }
    } else if (name == "eval-data") {
      if (size_t eq = value.find('='); eq != std::string::npos) {
        if (eq == 0 || eq + 1 == value.size())
          return badValue("NAME=FILE.npy or DIR");
        options.evalDataFiles.emplace_back(value.substr(0, eq),
                                           value.substr(eq + 1));
      } else {
        if (value.empty())
          return badValue("NAME=FILE.npy or DIR");
        if (!options.evalDataDir.empty()) {
          error = "--eval-data DIR given twice ('" + options.evalDataDir +
                  "' and '" + value + "')";
          return false;
        }
        options.evalDataDir = value;
      }
    } else if (name == "eval-every") {
      if (!parseInt(value, number) || number < 1)
        return badValue("a positive integer");
      options.evalEvery = number;
    } else if (name == "shuffle") {
      options.shuffle = true;
    } else if (name == "data-prefetch") {
      if (!parseInt(value, number) || number < 0 || number > 1024)
        return badValue("an integer from 0 to 1024");
      options.dataPrefetch = number;
    } else if (name == "epochs") {
      if (!parseInt(value, number) || number < 1)
        return badValue("a positive integer");
      options.epochs = number;
    } else if (name == "synthetic") {
      options.synthetic = true;
    } else if (name == "seed") {
      if (!parseInt(value, number))
        return badValue("an integer");
      options.seed = static_cast<uint64_t>(number);
      options.seedGiven = true;
    } else if (name == "threads") {
      if (!parseInt(value, number) || number < 1 || number > 4096)
        return badValue("a positive integer");
      options.threads = static_cast<int>(number);
    } else if (name == "log") {
      options.logFile = value;
    } else if (name == "checkpoint-every") {
      if (!parseInt(value, number) || number < 1)
        return badValue("a positive integer");
      options.checkpointEvery = number;
    } else if (name == "drain-every") {
      if (!parseInt(value, number) || number < 0)
        return badValue("a non-negative integer");
      options.drainEvery = number;
    } else if (name == "keep-checkpoints") {
      if (!parseInt(value, number) || number < 1 || number > 1000000)
        return badValue("a positive integer");
      options.keepCheckpoints = number;
    } else if (name == "checkpoint") {
      options.checkpointDir = value;
    } else if (name == "resume") {
      options.resumeDir = value;
    } else if (name == "save-onnx") {
      options.saveOnnx = value;
    } else if (name == "write-profile") {
      options.writeProfile = value;
    } else if (name == "measure-links") {
      if (value.empty())
        return badValue("a file path");
      options.measureLinks = value;
    } else if (name == "profile-kind") {
      if (value.empty())
        return badValue("a device kind");
      options.profileKind = value;
    } else if (name == "dump-globals") {
      options.dumpGlobals = value;
    } else if (name == "data-file") {
      options.dataFile = value;
    } else if (name == "timeout") {
      double seconds;
      if (!parseDouble(value, seconds) || !std::isfinite(seconds) ||
          !(seconds > 0) || seconds > kMaxTimeout)
        return badValue("a finite, positive number of seconds, at most 1e6");
      options.timeout = seconds;
    } else if (name == "wsp-log") {
      if (value.empty())
        return badValue("a directory");
      options.wspLogDir = value;
    } else if (name == "test-delay") {
      std::vector<std::string> fields;
      for (size_t start = 0;;) {
        size_t colon = value.find(':', start);
        fields.push_back(value.substr(start, colon - start));
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
        return badValue("RANK:MS[:EVERY:AT] (a rank >= 0, 0 <= MS <= 1e6, "
                        "0 <= AT < EVERY)");
      options.testDelays.push_back(delay);
    } else if (name == "p2p-matching") {
      if (value != "auto" && value != "tags" && value != "order" &&
          value != "headers")
        return badValue("auto, tags, order or headers");
      options.p2pMatching = value;
    } else if (name == "transport") {
      if (value != "auto" && value != "nccl" && value != "mpi")
        return badValue("auto, nccl or mpi");
      options.transport = value;
    } else if (name == "prefetch-receives") {
      if (value != "on" && value != "off")
        return badValue("on or off");
      options.prefetchReceives = value == "on";
    } else if (name == "help") {
      options.help = true;
    }
  }
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
  return resolveSchedule(schedule, options, error);
}
