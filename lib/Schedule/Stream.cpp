//===- Stream.cpp - Schedules that run across step boundaries -------------===//
//
// A weight-versioned schedule built for a window of K steps (K m micro-
// batches) is periodic in its steady state: the action lists of the
// windows of 2 and 3 steps give a warm-up, one steady step and a cool-down
// (StreamSchedule) that expand to the window of any K. The decomposition is
// checked against the builder's own windows of 4 and 5 steps, so an order
// that is not periodic is refused rather than run wrongly.
//
//===----------------------------------------------------------------------===//

#include "pp/Schedule/Schedule.h"

using namespace pp::schedule;

Action pp::schedule::shiftAction(const Action &action, int shift,
                                 int microBatches, int updatesPerStep) {
  Action moved = action;
  // An update and its grad_reduce count updates.
  if (action.kind == ActionKind::OptimizerStep ||
      action.kind == ActionKind::GradReduce) {
    if (action.microBatch >= 0)
      moved.microBatch += shift * updatesPerStep;
  } else if (action.microBatch >= 0) {
    moved.microBatch += shift * microBatches;
  }
  if (!isPerStep(action.kind)) {
    moved.weightVersion += shift * updatesPerStep;
    if (action.blendVersion >= 0)
      moved.blendVersion += shift * updatesPerStep;
  }
  return moved;
}

std::vector<Action> pp::schedule::expandStream(const StreamSchedule &stream,
                                               int device, int steps) {
  auto d = static_cast<size_t>(device);
  int m = stream.microBatches, u = stream.updatesPerStep;
  std::vector<Action> list = stream.prologue[d];
  for (int r = 0; r < steps - stream.minSteps; ++r)
    for (const Action &a : stream.body[d])
      list.push_back(shiftAction(a, r, m, u));
  for (const Action &a : stream.epilogue[d])
    list.push_back(shiftAction(a, steps - stream.minSteps - 1, m, u));
  return list;
}

namespace {

/// Splits device lists `two` (2 steps) and `three` (3 steps) as
/// three = two[:a] + body + shift(two[a:], 1); false when no split exists.
bool splitDevice(const std::vector<Action> &two,
                 const std::vector<Action> &three, int m, int u,
                 std::vector<Action> &prologue, std::vector<Action> &body,
                 std::vector<Action> &epilogue) {
  if (three.size() < two.size())
    return false;
  size_t bodySize = three.size() - two.size();
  size_t common = 0;
  while (common < two.size() && two[common] == three[common])
    ++common;
  // The longest prologue that fits: the body starts where the windows part.
  for (size_t a = common + 1; a-- > 0;) {
    bool tailMatches = true;
    for (size_t i = a; i < two.size() && tailMatches; ++i)
      tailMatches = three[i + bodySize] == shiftAction(two[i], 1, m, u);
    if (!tailMatches)
      continue;
    prologue.assign(two.begin(), two.begin() + a);
    body.assign(three.begin() + a, three.begin() + a + bodySize);
    epilogue.clear();
    for (size_t i = a + bodySize; i < three.size(); ++i)
      epilogue.push_back(three[i]);
    return true;
  }
  return false;
}

} // namespace

namespace {

/// The stream whose parts come from the windows of `first` and `first` + 1
/// steps, checked against the windows of `first` + 2 and + 3; false with
/// `error` when the order is not periodic from there.
bool streamFrom(const WindowBuilder &buildWindow, int first, int microBatches,
                int updatesPerStep, StreamSchedule &stream,
                std::string &error) {
  Schedule windows[4];
  for (int k = 0; k < 4; ++k)
    if (!buildWindow(first + k, windows[k], error))
      return false;
  stream.microBatches = microBatches;
  stream.updatesPerStep = updatesPerStep;
  stream.minSteps = first;
  size_t devices = windows[0].actions.size();
  stream.prologue.assign(devices, {});
  stream.body.assign(devices, {});
  stream.epilogue.assign(devices, {});
  for (size_t d = 0; d < devices; ++d)
    if (!splitDevice(windows[0].actions[d], windows[1].actions[d],
                     microBatches, updatesPerStep, stream.prologue[d],
                     stream.body[d], stream.epilogue[d])) {
      error = "the order of device " + std::to_string(d) +
              " is not periodic from one step to the next";
      return false;
    }
  for (int k = 2; k < 4; ++k)
    for (size_t d = 0; d < devices; ++d)
      if (expandStream(stream, static_cast<int>(d), first + k) !=
          windows[k].actions[d]) {
        error = "the order of device " + std::to_string(d) + " over " +
                std::to_string(first + k) +
                " steps differs from its periodic expansion";
        return false;
      }
  return true;
}

} // namespace

bool pp::schedule::buildStream(const WindowBuilder &buildWindow,
                               int microBatches, int updatesPerStep,
                               StreamSchedule &out, std::string &error) {
  // The warm-up of p - 1 forwards spans several steps when m is small: the
  // order is periodic from a longer window on.
  constexpr int kLongestStart = 16;
  std::string first;
  for (int steps = 2; steps <= kLongestStart; ++steps) {
    StreamSchedule stream;
    if (streamFrom(buildWindow, steps, microBatches, updatesPerStep, stream,
                   error)) {
      out = std::move(stream);
      return true;
    }
    if (first.empty())
      first = error;
  }
  error = first;
  return false;
}
