//===- Options.h - The training executable's command line -------*- C++ -*-===//
#ifndef PP_RUNTIME_TRAIN_OPTIONS_H
#define PP_RUNTIME_TRAIN_OPTIONS_H

#include "LRSchedule.h"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace pp::rt::train {

/// The longest --timeout (about 11.6 days).
constexpr double kMaxTimeout = 1e6;

struct TrainOptions {
  bool local = false;
  int64_t steps = 10;
  /// --lr: the base rate of every optimizer step (else the compiled one).
  std::optional<double> lr;
  /// --lr-schedule and its parameters, when any of their flags is given
  /// (decaySteps resolved: --decay-steps, else --steps); else the run
  /// keeps a resumed checkpoint's schedule, or a constant rate.
  std::optional<LRSchedule> lrSchedule;
  /// --clip-grad-norm: the largest global gradient norm of a step (0: off,
  /// given to drop a resumed checkpoint's); unset: the checkpoint's, else
  /// none.
  std::optional<double> clipGradNorm;
  /// --data NAME=FILE.npy entries, or --data DIR.
  std::vector<std::pair<std::string, std::string>> dataFiles;
  std::string dataDir;
  /// --shuffle: each epoch reads the samples in a permutation drawn from
  /// the seed (Dataset.h), else in file order.
  bool shuffle = false;
  /// --data-prefetch: how many steps ahead a thread of the data set reads
  /// the pages of the samples the stages will gather (0: none).
  int64_t dataPrefetch = 2;
  /// --epochs: the run's steps are this many epochs of whole batches
  /// (0: --steps).
  int64_t epochs = 0;
  /// --eval-data NAME=FILE.npy entries, or --eval-data DIR: the held-out
  /// set evaluated every --eval-every steps (0: at the end only) and after
  /// the last step.
  std::vector<std::pair<std::string, std::string>> evalDataFiles;
  std::string evalDataDir;
  int64_t evalEvery = 0;
  bool evaluates() const {
    return !evalDataFiles.empty() || !evalDataDir.empty();
  }
  bool stepsGiven = false;
  bool synthetic = false;
  uint64_t seed = 0;
  bool seedGiven = false;
  int threads = 1;
  std::string logFile;
  int64_t checkpointEvery = 0;
  /// --drain-every: steps between drains of a weight-versioned schedule's
  /// stream (0: only before a checkpoint and at the end of the run).
  int64_t drainEvery = 0;
  std::string checkpointDir = "checkpoint";
  /// How many of the newest checkpoints are kept (the older are removed).
  int64_t keepCheckpoints = 2;
  std::string resumeDir;
  std::string saveOnnx;
  /// --save-best: the source model with the weights of the best evaluation
  /// so far by --best-metric ("loss", "accuracy", "miou"; empty: the
  /// model's default, Job::bestMetric).
  std::string saveBest;
  std::string bestMetric;
  /// --write-profile: each ONNX node's measured forward and backward time
  /// as the profile JSON of --pp-partition profile=, for --profile-kind.
  std::string writeProfile;
  std::string profileKind = "cpu";
  /// --measure-links: the file of the measured links (no training).
  std::string measureLinks;
  std::string dumpGlobals;
  std::string dataFile;
  /// Receive timeout in seconds: finite, positive, at most kMaxTimeout.
  double timeout = 60;
  /// --wsp-log: the directory of the virtual workers' WSP event logs.
  std::string wspLogDir;
  /// --test-delay: world rank `rank` sleeps `ms` after each step whose
  /// index (from 0) mod `every` is `at`.
  struct TestDelay {
    int64_t rank = 0;
    double ms = 0;
    int64_t every = 1, at = 0;
  };
  std::vector<TestDelay> testDelays;
  /// --p2p-matching: how a receive finds its message. "auto": by tag where
  /// the transport has tags (MPI, in-process), by order on NCCL; "tags";
  /// "order": the k-th receive between two ranks takes the k-th message
  /// (only where the compiler proved the messages in order); "headers":
  /// each message follows a header with its tag (what NCCL does otherwise).
  std::string p2pMatching = "auto";
  /// --transport under mpirun: "auto" (NCCL in a CUDA build with NCCL,
  /// else MPI), "nccl" or "mpi" (through host copies on GPUs).
  std::string transport = "auto";
  /// --prefetch-receives: post the next action's receives before the
  /// running one starts, so transfers overlap compute ("on", the default),
  /// or each action's own when it starts ("off").
  bool prefetchReceives = true;
  /// CUDA: F32 GEMMs and convolutions on tensor cores in TF32 (the
  /// default); --no-tf32 keeps them in full FP32 (Context::allowTF32).
  bool tf32 = true;
  bool help = false;
};

/// Parses argv (argv[0] is the program). On a usage error returns false
/// with `error` set (the caller exits with status 2).
bool parseTrainOptions(int argc, char **argv, TrainOptions &options,
                       std::string &error);

/// The --help text.
std::string trainUsage(const std::string &program);

} // namespace pp::rt::train

#endif // PP_RUNTIME_TRAIN_OPTIONS_H
