//===- WeightVersions.h - Older weights of versioned stages -*- C++ -*-===//
//
// Weight-versioned schedules (ProgramInfo::updateEvery > 0: PipeDream, 2BW,
// the TiMePReSt family, HetPipe) update a stage several times in a window
// of steps while actions of older mini-batches still read the weights
// they started with. The versions an action list reads are planned from
// it; a version is kept where an update supersedes it (its buffers, no
// copy: the update writes fresh ones through Context::updateTargets) and
// given back to the pool after its last reader.
//
//===----------------------------------------------------------------------===//
#ifndef PP_RUNTIME_TRAIN_WEIGHTVERSIONS_H
#define PP_RUNTIME_TRAIN_WEIGHTVERSIONS_H

#include "StageState.h"

#include "pp/Runtime/Kernels.h"
#include "pp/Runtime/Program.h"

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

namespace pp::rt::train {

class WeightVersions {
public:
  /// A stage's version v is its weights after v updates of the window.
  using Version = std::map<int, Tensor>; // global id -> its value

  WeightVersions(const ProgramInfo &program, BufferPool &pool, Context &kernels)
      : program_(program), pool_(pool), kernels_(kernels) {}

  /// Plans the versions of a window from its action list (this rank's) and
  /// starts counting updates from 0. Nothing to plan for programs that
  /// update once a step.
  void plan(const std::vector<ActionInfo> &actions);
  bool planned() const { return !plans_.empty(); }

  /// The updates `stage` has made this window: its latest version.
  int64_t updates(int64_t stage) const;

  /// Around the stage's update (action `index`): `beforeUpdate` keeps the
  /// version it supersedes when a later action reads it and points the
  /// kernels' updates at fresh buffers; `afterUpdate` makes those the
  /// stage's weights and counts the update (throws if a weight was written
  /// in place); `afterAction` (after every action) gives back the versions
  /// read for the last time.
  void beforeUpdate(int64_t stage, std::map<int, Tensor> &globals);
  void afterUpdate(int64_t stage, std::map<int, Tensor> &globals);
  void afterAction(int64_t stage, size_t index);

  /// Points the stage's trainables at the version `action` reads (a blend
  /// in pool buffers for I-TiMePReSt, listed in `temporaries`), keeping
  /// the latest in `latest`. Throws when that version is not kept.
  void read(const ActionInfo &action, std::map<int, Tensor> &globals,
            std::map<int, Tensor> &latest, std::vector<Tensor> &temporaries);

  /// The stage's kept versions, oldest first (HetPipe's pulls reach them).
  std::map<int64_t, Version> &kept(int64_t stage) { return versions_[stage]; }

private:
  struct Plan {
    std::vector<int> trainables;
    std::map<int64_t, size_t> lastReader; // version -> action index
  };
  const ProgramInfo &program_;
  BufferPool &pool_;
  Context &kernels_;
  std::map<int64_t, Plan> plans_;
  std::map<int64_t, std::map<int64_t, Version>> versions_;
  std::map<int64_t, int64_t> updates_;
  /// The update being run out of place: its targets and the trainables
  /// whose fresh buffers they are.
  std::vector<UpdateTarget> targets_;
  std::vector<std::pair<int, Tensor>> updated_;
};

} // namespace pp::rt::train

#endif // PP_RUNTIME_TRAIN_WEIGHTVERSIONS_H
