//===- Job.h - What every rank of a training process shares -----*- C++ -*-===//
//
// The job: the validated program, the options, the initial-value data file,
// the step inputs in host memory and the constants uploaded once per device;
// and how this process finds its place in the job (mpirun's environment,
// the world communicator, the executable's directory).
//
//===----------------------------------------------------------------------===//
#ifndef PP_RUNTIME_TRAIN_JOB_H
#define PP_RUNTIME_TRAIN_JOB_H

#include "Checkpoint.h"
#include "Dataset.h"
#include "HostTensor.h"
#include "Options.h"

#include "pp/Runtime/Comm.h"
#include "pp/Runtime/Program.h"

#include <atomic>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace pp::rt::train {

/// The rank mpirun gives this process, before MPI starts; 0 otherwise.
int environmentRank();

/// Whether mpirun started this process (Open MPI or a PMI launcher).
bool launchedByMPI();

/// The number of processes mpirun started (1 without mpirun).
int environmentSize();

/// The node-local rank (which GPU a rank of a multi-GPU node uses).
int localRank(int rank);

/// The communicator of a job launched by mpirun. `transport` "auto": NCCL
/// where this build has it (CUDA), else MPI (through host copies on the
/// CUDA backend); "nccl" or "mpi" ask for one. Null with `error` set when
/// this build lacks it.
std::unique_ptr<Communicator>
createWorldCommunicator(int *argc, char ***argv, const std::string &transport,
                        std::string &error);

/// The directory of the running executable (its data file lies there).
std::string executableDir(const char *argv0);

/// What every rank of this process shares. Read-only once loaded, except
/// the per-device constants (guarded by constantsMutex) and `aborted`.
struct Job {
  Job(const ProgramInfo &program, TrainOptions options)
      : program(program), options(std::move(options)) {}
  ~Job();

  const ProgramInfo &program;
  TrainOptions options;
  std::string exeDir;
  /// Devices of one pipeline (the schedule's), its data-parallel replicas
  /// and the ranks of the job (ranksPerReplica * replicas; rank w is slot
  /// w % ranksPerReplica of replica w / ranksPerReplica).
  int numDevices = 0;
  int64_t replicas = 1;
  /// The largest tensor-parallel group (ProgramInfo::tensorParallel).
  int64_t tensorParallel = 1;
  /// Per device of the schedule: its group's size and the slot of its
  /// first member in a replica (devices in order, each group's members
  /// together).
  std::vector<int> deviceTensorParallel, deviceFirstSlot;
  int ranksPerReplica = 0;
  int numRanks = 0;
  /// The device of a slot of a replica.
  int deviceOfSlot(int slot) const {
    int d = 0;
    while (d + 1 < numDevices && deviceFirstSlot[d + 1] <= slot)
      ++d;
    return d;
  }
  int64_t numStages = 0;
  /// Wave Synchronous Parallel across the replicas (program.staleness >= 0).
  bool waveSynchronous() const { return program.staleness >= 0; }
  /// HetPipe's pipelined VWs: each stage pushes and pulls its waves (steps)
  /// inside the stream of actions (WaveSync::pushStage, pullStage).
  bool wavesInStream() const {
    return waveSynchronous() &&
           program.scheduleKind == kinds::ScheduleKind::HetPipe;
  }
  /// The rank files of a checkpoint: one per device, which replica 0
  /// writes; under WSP one per rank (each replica keeps its own optimizer
  /// state and statistics).
  int checkpointRanks() const {
    return waveSynchronous() ? numRanks : numDevices;
  }
  /// Per replica and step.
  int64_t microBatches = 1;
  /// Where one replica runs its stages: stageDevice[s] is the device whose
  /// actions run stage s (-1: none); the stages and arena of each device.
  struct Layout {
    std::vector<int> stageDevice;
    std::vector<std::vector<int64_t>> deviceStages;
    std::vector<int64_t> deviceArena;
  };
  /// One layout shared by every replica, or one per replica when the
  /// program places each replica's stages on its own (replicaSchedules).
  std::vector<Layout> layouts;
  const Layout &layout(int64_t replica) const {
    return layouts[layouts.size() == 1 ? 0 : static_cast<size_t>(replica)];
  }
  /// The actions of `device` in `replica`.
  const std::vector<ActionInfo> &actionsOf(int64_t replica, int device) const {
    return replica == 0 || program.replicaSchedules.empty()
               ? program.schedule[device]
               : program.replicaSchedules[replica - 1][device];
  }
  std::vector<std::string> deviceNames;
  /// The name of device `device` of `replica`: the program's, else
  /// replica 0's with the replica added.
  std::string deviceName(int64_t replica, int device) const;

  // Initial values (pread is safe from every rank's thread).
  std::string dataPath;
  int dataFd = -1;

  /// --data: the memory-mapped samples of every input.
  Dataset dataset;
  /// Without --data: one random batch of each input, every step's.
  std::vector<HostTensor> inputData;
  /// --eval-data: the held-out samples, read in file order, and the batches
  /// of an evaluation (the last one completed from the first samples,
  /// which it does not count).
  Dataset evalDataset;
  int64_t evalBatches = 0;

  /// A classifier's logits (the output with a class axis) and the integer
  /// `labels` input of the same shape without that axis: each step counts
  /// the top-1 hits (-1: no accuracy).
  int logitsOutput = -1, labelsInput = -1;
  /// The logits of a sequence of tokens ([N, S, V], classes last):
  /// evaluations report perplexity rather than accuracy.
  bool languageModel = false;
  /// Per-position labels of a segmentation model ([N, C, H, W, ...]
  /// logits): its classes, over which evaluations report the mean
  /// intersection over union; 0 for other models.
  int64_t iouClasses = 0;
  /// The classes along the logits' class axis (0: no logits).
  int64_t logitsClasses = 0;
  /// --save-best's measure, resolved (Options::bestMetric or the model's
  /// default), and the best so far of a resumed run (NaN: none yet).
  std::string bestMetric;
  double resumedBest = NAN;
  int64_t resumedBestStep = -1;
  /// Whether `value` of bestMetric beats `best` (a NaN best is beaten by
  /// any number).
  bool beats(double value, double best) const;
  /// Bytes of the trainable weights stage `stage` holds (and updates).
  int64_t trainableBytes(int64_t stage) const;
  /// Samples per micro-batch of a replica.
  int64_t microBatchSamples() const {
    return samplesPerStep / (microBatches * replicas);
  }

  /// Scalar float outputs combined by mean or sum: printed and logged.
  std::vector<int> reported;
  int lossIndex = -1; // into `reported`
  int64_t samplesPerStep = 0;

  /// What checkpoints record of the program and check under --resume: the
  /// CRC-32C of its table (every field but the function pointers, with
  /// ProgramInfo::codeHash) and of its data file, in hex.
  std::string identity;

  uint64_t seed = 0;
  /// The run's learning-rate schedule and base rate (--lr-schedule, --lr;
  /// under --resume, the checkpoint's where the command line gives none).
  LRSchedule lrSchedule;
  std::optional<double> lr;
  /// --clip-grad-norm (under --resume, the checkpoint's where the command
  /// line gives none); 0: no clipping.
  double clipGradNorm = 0;
  bool resuming = false;
  /// --resume: the manifest and directory of the chosen checkpoint.
  CheckpointManifest resume;
  std::string resumeDir;

  /// Constants uploaded once per backend device.
  std::mutex constantsMutex;
  std::map<int, std::vector<void *>> constants;

  /// --local: set by the rank that failed first, so the others, woken by
  /// the abort, stop without a second report.
  std::atomic<bool> aborted{false};

  /// Checks the program's tables (schedule, stages, globals, inputs) and
  /// derives the device layout and the reported outputs from them.
  bool validateProgram(std::string &error);
  /// Opens the data file (checking it against ProgramInfo::dataHash), sets
  /// the identity, chooses the checkpoint under --resume and loads the step
  /// inputs (--data files, else one random batch).
  bool load(std::string &error);
  /// Reads `bytes` at `offset` of the data file; `what` names the value in
  /// the error.
  bool readData(int64_t offset, int64_t bytes, void *dst, std::string &what,
                std::string &error);
  /// The constants on backend device `device`, uploaded on first use; null
  /// with `error` set on failure.
  const std::vector<void *> *uploadConstants(int device, std::string &error);
  /// The index of the first step this run trains.
  int64_t firstStep() const { return resuming ? resume.completedSteps : 0; }

private:
  /// Opens the data file, checks its CRC-32C and that every global and
  /// constant fits; sets `identity`.
  bool openDataFile(std::string &error);
  /// The step inputs: the --data files (and --epochs' step count), else one
  /// batch drawn from `seed`.
  bool loadInputs(std::string &error);
  /// Refuses --clip-grad-norm for a program whose stages do not end each
  /// step together: weight versions (several updates a step, at different
  /// times per stage), WSP, or a device that updates before its last
  /// forward, backward or grad_reduce of the step.
  bool checkClipping(std::string &error) const;
  /// --eval-data's files, checked against the inputs like --data's.
  bool loadEvalData(std::string &error);
  /// Whether every label of `set`'s `labels` input (a classifier's, see
  /// logitsOutput) is a class of the logits or the ignored label; `flag`
  /// (--data, --eval-data) starts the error.
  bool checkLabels(Dataset &set, const std::string &flag,
                   std::string &error) const;
  /// Whether every input that a Gather indexes with holds indices of the
  /// dim it takes (InputInfo::gatherBound) in `set`.
  bool checkIndices(Dataset &set, const std::string &flag,
                    std::string &error) const;
  /// Finds the logits and labels that make the accuracy.
  void findLogits();
};

} // namespace pp::rt::train

#endif // PP_RUNTIME_TRAIN_JOB_H
