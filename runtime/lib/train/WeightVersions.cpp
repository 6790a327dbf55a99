//===- WeightVersions.cpp - Older weights of weight-versioned stages ------===//

#include "WeightVersions.h"

#include "pp/Runtime/Memory.h"

#include <stdexcept>
#include <string>

using namespace pp::rt;
using namespace pp::rt::train;

void WeightVersions::plan(const std::vector<ActionInfo> &actions) {
  plans_.clear();
  for (auto &[stage, count] : updates_)
    count = 0;
  if (program_.updateEvery <= 0)
    return;
  std::map<int64_t, int64_t> updates;
  for (size_t i = 0; i < actions.size(); ++i) {
    const ActionInfo &a = actions[i];
    Plan &plan = plans_[a.stage];
    if (a.kind == kinds::ActionKind::OptimizerStep) {
      ++updates[a.stage];
      continue;
    }
    if (kinds::isPerStep(a.kind))
      continue;
    if (a.weightVersion != updates[a.stage] || a.blendVersion >= 0)
      plan.lastReader[a.weightVersion] = i;
    if (a.blendVersion >= 0 && a.blendVersion != updates[a.stage])
      plan.lastReader[a.blendVersion] = i;
  }
  for (auto &[stage, plan] : plans_)
    for (int id : program_.stageGlobals[stage])
      if (program_.globals[id].trainable)
        plan.trainables.push_back(id);
}

int64_t WeightVersions::updates(int64_t stage) const {
  auto it = updates_.find(stage);
  return it == updates_.end() ? 0 : it->second;
}

void WeightVersions::beforeUpdate(int64_t stage,
                                  std::map<int, Tensor> &globals) {
  auto it = plans_.find(stage);
  int64_t version = updates(stage);
  if (it == plans_.end() || !it->second.lastReader.count(version))
    return;
  Version &kept = versions_[stage][version];
  targets_.clear();
  updated_.clear();
  for (int id : it->second.trainables) {
    const Tensor &t = globals.at(id);
    Tensor updated = pool_.acquire(t.dtype, t.shape);
    kept[id] = t;
    targets_.push_back({t.data, updated.data});
    updated_.emplace_back(id, updated);
  }
  kernels_.updateTargets = &targets_;
}

void WeightVersions::afterUpdate(int64_t stage,
                                 std::map<int, Tensor> &globals) {
  if (plans_.empty())
    return;
  ++updates_[stage];
  if (!kernels_.updateTargets)
    return;
  kernels_.updateTargets = nullptr;
  for (size_t i = 0; i < updated_.size(); ++i) {
    auto &[id, updated] = updated_[i];
    // A zero-size weight has nothing to write.
    if (!targets_[i].written && updated.bytes() > 0)
      throw std::runtime_error(
          "the update of global '" + program_.globals[id].name +
          "' did not go through an optimizer kernel (its kept version "
          "would be lost)");
    globals[id] = updated;
  }
  targets_.clear();
  updated_.clear();
}

void WeightVersions::afterAction(int64_t stage, size_t index) {
  auto it = plans_.find(stage);
  if (it == plans_.end())
    return;
  for (auto &[version, last] : it->second.lastReader) {
    if (last != index)
      continue;
    auto held = versions_[stage].find(version);
    if (held == versions_[stage].end())
      continue;
    for (auto &[id, t] : held->second)
      pool_.release(t);
    versions_[stage].erase(held);
  }
}

void WeightVersions::read(const ActionInfo &action,
                          std::map<int, Tensor> &globals,
                          std::map<int, Tensor> &latest,
                          std::vector<Tensor> &temporaries) {
  int64_t current = updates(action.stage);
  if (action.weightVersion == current && action.blendVersion < 0)
    return;
  auto versionOf = [&](int64_t version) -> Version * {
    if (version == current)
      return nullptr; // the globals themselves
    auto it = versions_[action.stage].find(version);
    if (it == versions_[action.stage].end())
      throw std::runtime_error("weight version " + std::to_string(version) +
                               " of the stage is not kept (" +
                               std::to_string(current) +
                               " updates so far this window of steps)");
    return &it->second;
  };
  Version *source = versionOf(action.weightVersion);
  Version *base =
      action.blendVersion >= 0 ? versionOf(action.blendVersion) : nullptr;
  for (int id : plans_[action.stage].trainables) {
    Tensor &global = globals.at(id);
    latest[id] = global;
    const Tensor &stale = source ? source->at(id) : global;
    if (action.blendVersion < 0) {
      global = stale;
      continue;
    }
    // W_b + c (W_v - W_b) = W_b - (-c) (W_v - W_b): one SGD step.
    const Tensor &fresh = base ? base->at(id) : latest[id];
    Tensor mixed = pool_.acquire(fresh.dtype, fresh.shape);
    temporaries.push_back(mixed);
    Tensor difference = pool_.acquire(fresh.dtype, fresh.shape);
    temporaries.push_back(difference);
    copyBuffer(mixed.data, fresh.data, fresh.bytes());
    Status s = binary(kernels_, BinaryKind::Sub, stale, fresh, difference);
    if (s.ok())
      s = sgdStep(kernels_, mixed, difference, nullptr, 1, -action.blendFactor,
                  0, 0, 0, false);
    if (!s.ok())
      throw std::runtime_error("blending weight versions: " + s.message);
    global = mixed;
  }
}
