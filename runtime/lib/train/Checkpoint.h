//===- Checkpoint.h - Checkpoint files of the training driver ---*- C++ -*-===//
//
// A checkpoint directory holds one file per rank, rank<r>.ckpt (the globals
// of every stage the rank runs, each stage's Dropout seed counter and the
// completed step count), and `meta`, written by rank 0 once every rank has
// finished its file. Both are written to a .tmp file and renamed, so a crash
// leaves the previous checkpoint whole.
//
// Below the file formats: what a rank's stages put into a checkpoint and
// take back from it under --resume.
//
//===----------------------------------------------------------------------===//
#ifndef PP_RUNTIME_TRAIN_CHECKPOINT_H
#define PP_RUNTIME_TRAIN_CHECKPOINT_H

#include "HostTensor.h"
#include "StageState.h"

#include <cstdint>
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
  uint64_t seedCounter;
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

struct CheckpointMeta {
  std::string modelName;
  int64_t completedSteps = 0;
  int64_t numDevices = 0;
  int64_t numStages = 0;
  uint64_t seed = 0;
};

std::string rankCheckpointPath(const std::string &dir, int rank);

bool writeRankCheckpoint(const std::string &dir, const RankCheckpoint &ckpt,
                         std::string &error);
bool readRankCheckpoint(const std::string &path, RankCheckpoint &ckpt,
                        std::string &error);
bool writeCheckpointMeta(const std::string &dir, const CheckpointMeta &meta,
                         std::string &error);
bool readCheckpointMeta(const std::string &dir, CheckpointMeta &meta,
                        std::string &error);

/// mkdir -p.
bool makeDirectories(const std::string &path, std::string &error);

//===----------------------------------------------------------------------===//
// A rank's training state in a checkpoint
//===----------------------------------------------------------------------===//

struct Job;

/// --resume DIR: reads DIR/meta into `meta` and checks that a program like
/// this one (model, devices, stages) wrote it, with the --seed given.
bool readResumeMeta(const Job &job, CheckpointMeta &meta, std::string &error);

/// What `rank` saves after `completedSteps` steps: the globals of each of
/// its stages (copied from the backend) and their Dropout seed counters.
RankCheckpoint captureRankCheckpoint(const Job &job, int rank,
                                     const StageMap &stages,
                                     int64_t completedSteps);

/// --resume: loads `rank`'s file of the checkpoint into `stages` (globals
/// and seed counters), once it matches the job and the checkpoint's meta.
bool restoreRankCheckpoint(const Job &job, int rank, StageMap &stages,
                           std::string &error);

} // namespace pp::rt::train

#endif // PP_RUNTIME_TRAIN_CHECKPOINT_H
