//===- Checkpoint.h - Checkpoint files of the training driver ---*- C++ -*-===//
//
// A checkpoint directory DIR holds one directory per checkpoint,
// DIR/step-<k>/ (k: the completed steps), and DIR/latest naming the newest
// committed one ("step-<k>"). A checkpoint is written as:
//   1. every rank writes DIR/step-<k>/rank<r>.ckpt (the globals of every
//      stage it runs, the completed step count) through a .tmp file, fsynced,
//      renamed, the directory fsynced;
//   2. once every rank has (an all-reduce, which also hands rank 0 each
//      file's size and CRC-32C), rank 0 writes DIR/step-<k>/MANIFEST (the
//      program's identity, the step, each file's size and CRC-32C, and its
//      own CRC-32C) the same way;
//   3. rank 0 commits it by renaming DIR/latest.tmp over DIR/latest, then
//      removes all but the --keep-checkpoints newest checkpoints.
// A crash at any point leaves the previous committed checkpoint whole.
// Nothing there is written, renamed or removed through a symbolic link:
// a run refuses a directory whose step-<k>, latest or latest.tmp is one.
// Metadata reads are bounded by what the format can need (a MANIFEST of
// the program, a rank file of its globals); larger files are refused
// unread.
// --resume DIR takes the newest step-<k> not newer than the one `latest`
// names whose manifest, identity and files all verify; each one it skips is
// reported by name.
//
// PP_TEST_CRASH_AT=<rank>:<n> (tests only) SIGKILLs the process at rank
// <rank>'s n-th checkpoint file operation (counted from 1: mkdir, open,
// each of two write halves, fsync, rename, directory fsync, and unlink and
// rmdir when old checkpoints are removed);
// PP_TEST_CRASH_AT=trace prints every operation to stderr instead.
//
//===----------------------------------------------------------------------===//
#ifndef PP_RUNTIME_TRAIN_CHECKPOINT_H
#define PP_RUNTIME_TRAIN_CHECKPOINT_H

#include "HostTensor.h"
#include "LRSchedule.h"
#include "StageState.h"

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace pp::rt::train {

struct CheckpointGlobal {
  int64_t id;
  std::string name;
  HostTensor value;
};

struct CheckpointStage {
  int64_t stage;
  std::vector<CheckpointGlobal> globals;
};

struct RankCheckpoint {
  std::string modelName;
  int64_t numStages = 0;
  int64_t numDevices = 0;
  int64_t numGlobals = 0;
  int64_t rank = 0;
  uint64_t seed = 0;
  int64_t completedSteps = 0;
  std::vector<CheckpointStage> stages;
};

/// A file of a checkpoint as its manifest lists it.
struct CheckpointFile {
  std::string name;
  int64_t size = 0;
  uint32_t crc = 0;
};

/// DIR/step-<k>/MANIFEST.
struct CheckpointManifest {
  std::string modelName;
  /// Job::identity of the program that wrote it.
  std::string identity;
  int64_t completedSteps = 0;
  int64_t numDevices = 0;
  int64_t numStages = 0;
  uint64_t seed = 0;
  /// Wave Synchronous Parallel: the waves every virtual worker had pushed
  /// and pulled when it was written (-1: synchronous).
  int64_t waveClock = -1;
  /// The run's learning-rate schedule and --lr (none: the compiled rate);
  /// absent from the manifests of older drivers (lrRecorded false).
  std::optional<LRSchedule> lrSchedule;
  std::optional<double> lr;
  bool lrRecorded = false;
  /// --clip-grad-norm of the run that wrote it (absent: no clipping).
  std::optional<double> clipGradNorm;
  /// Dataset::orderKey of a run on --data (empty otherwise): a resumed run
  /// goes on through the same epochs.
  std::string dataOrder;
  /// --save-best: the measure, its best value so far and the step index
  /// after which it was measured (empty metric: none).
  std::string bestMetric;
  double bestValue = 0;
  int64_t bestStep = -1;
  /// rank<r>.ckpt, in rank order.
  std::vector<CheckpointFile> files;
};

/// The bytes of a MANIFEST (`path` names it in messages): checks its CRC-32C
/// line and reads its fields; false with `why` saying what is wrong.
bool parseManifest(const std::string &path, const std::string &text,
                   CheckpointManifest &manifest, std::string &why);

/// The bytes of a rank<r>.ckpt (`path` names it in messages); false with
/// `error` when it is not one, truncated or corrupt. The caller checks the
/// fields against the program.
bool decodeRankCheckpoint(const std::string &path, const std::string &bytes,
                          RankCheckpoint &ckpt, std::string &error);

/// rank<r>.ckpt.
std::string rankCheckpointName(int64_t rank);

/// DIR/step-<k>.
std::string checkpointStepDir(const std::string &dir, int64_t step);

/// mkdir -p.
bool makeDirectories(const std::string &path, std::string &error);

/// Before training: refuses checkpoint directory `dir` when a step-<k>,
/// `latest` or `latest.tmp` in it is a symbolic link (or of the wrong
/// kind), naming it: the driver writes, renames and removes there, and
/// must never reach what a planted link names.
bool checkCheckpointDirectory(const std::string &dir, std::string &error);

//===----------------------------------------------------------------------===//
// A rank's training state in a checkpoint
//===----------------------------------------------------------------------===//

struct Job;

/// --resume DIR: chooses the checkpoint (see above) into job.resume and
/// job.resumeDir, printing which on stdout and each one skipped, and why, on
/// stderr (from rank 0); checks that the --seed given agrees with it and
/// notes a --lr, --lr-schedule or --clip-grad-norm that differs from the
/// checkpoint's.
bool selectResumeCheckpoint(Job &job, std::string &error);

/// What `rank` saves after `completedSteps` steps: the globals of each of
/// its stages (copied from the backend).
RankCheckpoint captureRankCheckpoint(const Job &job, int rank,
                                     const StageMap &stages,
                                     int64_t completedSteps);

/// Step 1: writes `ckpt` as rank<r>.ckpt of checkpoint directory `stepDir`
/// and describes it in `file`.
bool writeRankCheckpoint(const std::string &stepDir, const RankCheckpoint &ckpt,
                         CheckpointFile &file, std::string &error);

/// Steps 2 and 3 (rank 0, once every rank's file is written): the manifest,
/// the commit, and the removal of all but the `keep` newest checkpoints of
/// `dir` (a newer one than this, of an interrupted or an earlier run, too).
bool commitCheckpoint(const std::string &dir,
                      const CheckpointManifest &manifest, int64_t keep,
                      std::string &error);

/// --resume: loads `rank`'s file of the chosen checkpoint into `stages`
/// (its globals), once it matches the job and the manifest. With
/// `restored`, the file may hold other stages too (a replica placing its
/// stages on its own devices reads each from replica 0's file that has
/// it): only those in `stages` are loaded, and added to `restored`.
bool restoreRankCheckpoint(const Job &job, int rank, StageMap &stages,
                           std::set<int64_t> *restored, std::string &error);

} // namespace pp::rt::train

#endif // PP_RUNTIME_TRAIN_CHECKPOINT_H
