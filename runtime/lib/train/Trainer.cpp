//===- Trainer.cpp - The training driver of generated programs ------------===//
//
// trainMain (Program.h): one rank per device of each data-parallel replica
// of the pipeline, either threads of this process
// (--local, in-process communicator) or processes under mpirun (MPI, or
// NCCL in the CUDA build). Each rank runs its device's actions in order,
// every step, on one StageContext per stage it holds. The semantics mirror
// the reference interpreter's pipeline mode (lib/Interpreter/
// PipelineRunner.cpp): inputs are sliced along dim 0 into micro-batches,
// outputs combined by mean / sum, stashes keyed by (stage, slot,
// micro-batch) and dropped when unstashed, gradient sums started by a copy
// of the first value, one copy of the globals per stage, and Dropout seeds
// from (seed, the op's stream, step), whatever the stage.
//
// The parts: Job (what the ranks of a process share), Rank (one device's
// step loop), StageState (the StageContext), Checkpoint, Report (progress,
// --log, summary) and Export (--dump-globals, --save-onnx).
//
// Memory goes through Memory.h and kernels through Kernels.h, so these
// sources build for the CPU and the CUDA backend; only the communicator
// that mpirun gets differs (createWorldCommunicator).
//
//===----------------------------------------------------------------------===//

#include "Job.h"
#include "LinkProbe.h"
#include "Options.h"
#include "Rank.h"

#include "pp/Runtime/Comm.h"
#include "pp/Runtime/Program.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

using namespace pp::rt;
using namespace pp::rt::train;

namespace {
/// Set when trainMain returns: any exit() before comes from inside the run.
std::atomic<bool> trainMainReturned{false};

int runTrainer(const ProgramInfo &program, int argc, char **argv);
} // namespace

int pp::rt::trainMain(const ProgramInfo &program, int argc, char **argv) {
  // A library that gives up calls exit() from inside the run (libgomp when
  // it cannot start a thread, under an address-space limit); exit() then
  // runs the libraries' destructors, and OpenBLAS's thread shutdown can
  // block forever, so mpirun would wait for the rank until another one's
  // receive timed out. Such an exit leaves at once with status 1 (the
  // library has said why), and so does a failed run, whose communicator is
  // closed by then.
  std::atexit([] {
    if (!trainMainReturned) {
      std::fprintf(stderr,
                   "error: rank %d: a library ended the process "
                   "during the run (its message is above)\n",
                   environmentRank());
      std::fflush(nullptr);
      std::_Exit(1);
    }
  });
  int status = runTrainer(program, argc, argv);
  std::fflush(nullptr);
  if (status != 0)
    std::_Exit(status);
  trainMainReturned = true;
  return 0;
}

namespace {
/// argv with the compiled learning-rate schedule's flags after the program
/// name, unless the command line gives one of its own (any --lr-schedule
/// flag replaces the compiled ones); the strings live in `storage`.
std::vector<char *> withCompiledSchedule(const ProgramInfo &program, int argc,
                                         char **argv,
                                         std::vector<std::string> &storage) {
  std::vector<char *> args(argv, argv + argc);
  static const char *const kScheduleFlags[] = {
      "--lr-schedule", "--warmup-steps", "--warmup-start-factor",
      "--min-lr",      "--step-size",    "--milestones",
      "--gamma",       "--power",        "--decay-steps"};
  bool given = std::any_of(args.begin() + (argc > 0), args.end(), [](char *a) {
    std::string arg = a ? a : "";
    return std::any_of(std::begin(kScheduleFlags), std::end(kScheduleFlags),
                       [&](const char *flag) {
                         return arg == flag ||
                                arg.rfind(std::string(flag) + "=", 0) == 0;
                       });
  });
  if (given || program.lrSchedule.empty() || argc < 1)
    return args;
  std::string text = program.lrSchedule;
  size_t start = 0;
  bool first = true;
  while (start < text.size()) {
    size_t end = text.find(' ', start);
    std::string word = text.substr(start, end - start);
    start = end == std::string::npos ? text.size() : end + 1;
    if (word.empty())
      continue;
    storage.push_back(first ? "--lr-schedule=" + word : "--" + word);
    first = false;
  }
  std::vector<char *> out = {args[0]};
  for (std::string &flag : storage)
    out.push_back(flag.data());
  out.insert(out.end(), args.begin() + 1, args.end());
  return out;
}

/// The name the messages give the program: argv[0]'s file name.
std::string programNameOf(int argc, char **argv) {
  std::string programName = argc > 0 && argv[0] ? argv[0] : "train";
  if (size_t slash = programName.rfind('/'); slash != std::string::npos)
    programName = programName.substr(slash + 1);
  return programName;
}

/// Whether every --test-delay names a rank of the program: a delay for a
/// rank the program does not have would never apply.
bool testDelaysFit(const Job &job, const TrainOptions &options, bool printer) {
  for (const TrainOptions::TestDelay &delay : options.testDelays)
    if (delay.rank >= job.numRanks) {
      if (printer)
        std::fprintf(stderr,
                     "error: --test-delay: the program runs on %d rank(s) "
                     "(0..%d); there is no rank %lld\n",
                     job.numRanks, job.numRanks - 1,
                     static_cast<long long>(delay.rank));
      return false;
    }
  return true;
}

/// --measure-links with --local: the ranks are threads of this process, so
/// the links measured are what the in-process communicator costs.
int measureLinksInProcess(int numRanks, const std::string &path,
                          const std::string &programName) {
  int threadCount = std::max(2, numRanks);
  auto group = createInProcessGroup(threadCount);
  std::vector<int> status(static_cast<size_t>(threadCount), 0);
  std::vector<std::thread> threads;
  for (int r = 1; r < threadCount; ++r)
    threads.emplace_back(
        [&, r] { status[r] = measureLinks(*group[r], path, programName); });
  status[0] = measureLinks(*group[0], path, programName);
  for (std::thread &thread : threads)
    thread.join();
  return *std::max_element(status.begin(), status.end());
}

/// --local: every rank a thread of this process, on the in-process
/// communicator; the worst rank's status.
int runLocal(Job &job) {
  std::string error;
  if (!job.load(error)) {
    std::fprintf(stderr, "error: %s\n", error.c_str());
    return 1;
  }
  auto group = createInProcessGroup(job.numRanks);
  std::mutex mutex;
  std::condition_variable changed;
  int finished = 0, worst = 0;
  auto runRank = [&](int r) {
    Rank rank(job, r, *group[r]);
    int status = rank.run();
    std::lock_guard<std::mutex> lock(mutex);
    ++finished;
    worst = std::max(worst, status);
    changed.notify_all();
  };
  std::vector<std::thread> threads;
  for (int r = 0; r < job.numRanks; ++r)
    threads.emplace_back(runRank, r);
  std::unique_lock<std::mutex> lock(mutex);
  changed.wait(lock, [&] { return finished == job.numRanks || worst != 0; });
  if (worst != 0) {
    // A failed run ends the process even while another rank's thread is
    // blocked in a system call: the others get a grace period to report,
    // then the process leaves without the library destructors that can
    // block (OpenBLAS's thread shutdown after a failed thread start).
    changed.wait_for(lock, std::chrono::seconds(10),
                     [&] { return finished == job.numRanks; });
    std::fflush(nullptr);
    std::_Exit(worst);
  }
  lock.unlock();
  for (std::thread &thread : threads)
    thread.join();
  return 0;
}

/// The ranks the program runs on, for the message of a wrong mpirun -np:
/// its devices, their tensor-parallel groups and its replicas.
std::string describeRankLayout(const Job &job) {
  std::string layout = std::to_string(job.numDevices) + " devices";
  bool mixed = std::any_of(
      job.deviceTensorParallel.begin(), job.deviceTensorParallel.end(),
      [&](int degree) { return degree != job.tensorParallel; });
  if (mixed) {
    layout += " (tensor-parallel groups of";
    for (int d = 0; d < job.numDevices; ++d)
      layout += (d ? ", " : " ") + std::to_string(job.deviceTensorParallel[d]);
    layout += " devices)";
  } else if (job.tensorParallel > 1) {
    layout +=
        " x " + std::to_string(job.tensorParallel) + " tensor-parallel devices";
  }
  if (job.replicas > 1)
    layout += " x " + std::to_string(job.replicas) + " data-parallel replicas";
  return layout;
}

/// Under mpirun: this process is one rank of the world communicator.
int runUnderMPI(Job &job, int *argc, char ***argv, const TrainOptions &options,
                const std::string &programName, bool printer) {
  std::string error;
  std::unique_ptr<Communicator> comm =
      createWorldCommunicator(argc, argv, options.transport, error);
  if (!comm) {
    if (printer)
      std::fprintf(stderr, "error: %s\n", error.c_str());
    return 1;
  }
  // The links do not depend on the program: any rank count of 2 or more.
  if (!options.measureLinks.empty())
    return measureLinks(*comm, options.measureLinks, programName);
  if (comm->size() != job.numRanks) {
    if (comm->rank() == 0)
      std::fprintf(stderr,
                   "error: the program runs on %s: launch it with "
                   "mpirun -np %d (it was launched on %d), or run --local\n",
                   describeRankLayout(job).c_str(), job.numRanks, comm->size());
    return 1;
  }
  // Every rank loads the files; Rank::run agrees on the outcome, so one
  // failing rank stops all.
  if (job.load(error))
    error.clear();
  else if (error.empty())
    error = "cannot load the job";
  Rank rank(job, comm->rank(), *comm);
  return rank.run(error);
}

int runTrainer(const ProgramInfo &program, int argc, char **argv) {
  std::vector<std::string> compiledFlags;
  std::vector<char *> args =
      withCompiledSchedule(program, argc, argv, compiledFlags);
  argc = static_cast<int>(args.size());
  argv = args.data();
  bool printer = environmentRank() == 0;
  std::string programName = programNameOf(argc, argv);

  TrainOptions options;
  std::string error;
  if (!parseTrainOptions(argc, argv, options, error)) {
    if (printer)
      std::fprintf(stderr, "%s: error: %s\n", programName.c_str(),
                   error.c_str());
    return 2;
  }
  if (options.help) {
    if (printer)
      std::printf("%s", trainUsage(programName).c_str());
    return 0;
  }

  if (options.local && launchedByMPI() && environmentSize() > 1) {
    if (printer)
      std::fprintf(stderr,
                   "%s: error: --local runs every device as a thread of one "
                   "process, but mpirun started %d processes: run it without "
                   "mpirun, or without --local\n",
                   programName.c_str(), environmentSize());
    return 2;
  }

  Job job(program, options);
  job.exeDir = executableDir(argc > 0 ? argv[0] : nullptr);
  if (!job.validateProgram(error)) {
    if (printer)
      std::fprintf(stderr, "error: %s\n", error.c_str());
    return 1;
  }
  if (!testDelaysFit(job, options, printer))
    return 1;
  if (!options.local && !launchedByMPI())
    job.options.local = options.local = true;

  if (!options.measureLinks.empty() && options.local)
    return measureLinksInProcess(job.numRanks, options.measureLinks,
                                 programName);
  if (options.local)
    return runLocal(job);
  return runUnderMPI(job, &argc, &argv, options, programName, printer);
}
} // namespace
