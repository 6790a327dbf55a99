//===- Checkpoint.h - Checkpoint files of the training driver ---*- C++ -*-===//
//
// A checkpoint directory holds one file per rank, rank<r>.ckpt (the globals
// of every stage the rank runs, each stage's Dropout seed counter and the
// completed step count), and `meta`, written by rank 0 once every rank has
// finished its file. Both are written to a .tmp file and renamed, so a crash
// leaves the previous checkpoint whole.
//
//===----------------------------------------------------------------------===//
#ifndef PP_RUNTIME_TRAIN_CHECKPOINT_H
#define PP_RUNTIME_TRAIN_CHECKPOINT_H

#include "HostTensor.h"

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

} // namespace pp::rt::train

#endif // PP_RUNTIME_TRAIN_CHECKPOINT_H
