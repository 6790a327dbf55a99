//===- LRSchedule.cpp - Learning-rate schedules of the driver -------------===//
//
// The closed forms are PyTorch's (_get_closed_form_lr); its schedulers
// compute the same rates recursively, which differs by rounding only.
//
//===----------------------------------------------------------------------===//

#include "LRSchedule.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

using namespace pp::rt::train;

const char *pp::rt::train::toString(LRSchedule::Kind kind) {
  switch (kind) {
  case LRSchedule::Kind::Constant:
    return "constant";
  case LRSchedule::Kind::Step:
    return "step";
  case LRSchedule::Kind::Cosine:
    return "cosine";
  case LRSchedule::Kind::Linear:
    return "linear";
  }
  return "constant";
}

double LRSchedule::rate(double base, int64_t step) const {
  if (step < warmupSteps)
    return base * (warmupStartFactor + (1.0 - warmupStartFactor) *
                                           static_cast<double>(step) /
                                           static_cast<double>(warmupSteps));
  // SequentialLR restarts the schedule after the warm-up at its step 0.
  int64_t k = step - warmupSteps;
  int64_t decay = decaySteps - warmupSteps;
  switch (kind) {
  case Kind::Constant:
    return base;
  case Kind::Step:
    return base * std::pow(gamma, static_cast<double>(k / stepSize));
  case Kind::Cosine:
    // PyTorch's cosine rises again after T_max; ours keeps min-lr.
    if (k >= decay)
      return minLr;
    return minLr + (base - minLr) *
                       (1.0 + std::cos(M_PI * static_cast<double>(k) /
                                       static_cast<double>(decay))) /
                       2.0;
  case Kind::Linear:
    // LinearLR(start_factor=1, end_factor=min-lr / base, total_iters=T),
    // without dividing by a base that may be 0.
    return base + (minLr - base) * static_cast<double>(std::min(k, decay)) /
                      static_cast<double>(decay);
  }
  return base;
}

namespace {

std::string exact(double value) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.17g", value);
  return text;
}

} // namespace

std::string LRSchedule::str() const {
  std::string text = toString(kind);
  if (warmupSteps > 0)
    text += " warmup-steps=" + std::to_string(warmupSteps) +
            " warmup-start-factor=" + exact(warmupStartFactor);
  if (kind == Kind::Step)
    text += " step-size=" + std::to_string(stepSize) + " gamma=" + exact(gamma);
  if (kind == Kind::Cosine || kind == Kind::Linear)
    text += " min-lr=" + exact(minLr) +
            " decay-steps=" + std::to_string(decaySteps);
  return text;
}

bool LRSchedule::parse(const std::string &text, LRSchedule &schedule) {
  std::istringstream in(text);
  std::string word;
  if (!(in >> word))
    return false;
  LRSchedule parsed;
  if (word == "constant")
    parsed.kind = Kind::Constant;
  else if (word == "step")
    parsed.kind = Kind::Step;
  else if (word == "cosine")
    parsed.kind = Kind::Cosine;
  else if (word == "linear")
    parsed.kind = Kind::Linear;
  else
    return false;
  while (in >> word) {
    size_t eq = word.find('=');
    if (eq == std::string::npos)
      return false;
    std::string key = word.substr(0, eq), value = word.substr(eq + 1);
    char *end = nullptr;
    if (key == "warmup-steps")
      parsed.warmupSteps = std::strtoll(value.c_str(), &end, 10);
    else if (key == "warmup-start-factor")
      parsed.warmupStartFactor = std::strtod(value.c_str(), &end);
    else if (key == "step-size")
      parsed.stepSize = std::strtoll(value.c_str(), &end, 10);
    else if (key == "gamma")
      parsed.gamma = std::strtod(value.c_str(), &end);
    else if (key == "min-lr")
      parsed.minLr = std::strtod(value.c_str(), &end);
    else if (key == "decay-steps")
      parsed.decaySteps = std::strtoll(value.c_str(), &end, 10);
    else
      return false;
    if (value.empty() || *end)
      return false;
  }
  // What rate() divides by.
  if (parsed.warmupSteps < 0 ||
      (parsed.kind == Kind::Step && parsed.stepSize < 1) ||
      ((parsed.kind == Kind::Cosine || parsed.kind == Kind::Linear) &&
       parsed.decaySteps <= parsed.warmupSteps))
    return false;
  schedule = parsed;
  return true;
}
