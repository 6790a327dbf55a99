//===- LRSchedule.cpp - Learning-rate schedules of the driver -------------===//
//
// The closed forms are PyTorch's (_get_closed_form_lr); its schedulers
// compute the same rates recursively, which differs by rounding only.
//
//===----------------------------------------------------------------------===//

#include "LRSchedule.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

using namespace pp::rt::train;

const char *pp::rt::train::toString(LRSchedule::Kind kind) {
  switch (kind) {
#define PP_LR_SCHEDULE(Enumerator, Name)                                       \
  case LRSchedule::Kind::Enumerator:                                           \
    return Name;
#include "pp/Runtime/LRScheduleKinds.def"
  }
  return "constant";
}

bool pp::rt::train::parseKind(const std::string &text, LRSchedule::Kind &kind) {
  for (LRSchedule::Kind k : {
#define PP_LR_SCHEDULE(Enumerator, Name) LRSchedule::Kind::Enumerator,
#include "pp/Runtime/LRScheduleKinds.def"
       })
    if (text == toString(k)) {
      kind = k;
      return true;
    }
  return false;
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
  case Kind::MultiStep: {
    // bisect_right: the milestones passed, k itself included.
    auto passed = std::upper_bound(milestones.begin(), milestones.end(), k) -
                  milestones.begin();
    return base * std::pow(gamma, static_cast<double>(passed));
  }
  case Kind::Exponential:
    return base * std::pow(gamma, static_cast<double>(k));
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
  case Kind::Poly:
    // PolynomialLR's closed form (minLr = 0), with mmcv's eta_min.
    return minLr + (base - minLr) *
                       std::pow(1.0 - static_cast<double>(std::min(k, decay)) /
                                          static_cast<double>(decay),
                                power);
  }
  return base;
}

bool pp::rt::train::parseMilestones(const std::string &text,
                                    std::vector<int64_t> &milestones) {
  std::vector<int64_t> parsed;
  size_t at = 0;
  while (at <= text.size()) {
    size_t comma = std::min(text.find(',', at), text.size());
    std::string item = text.substr(at, comma - at);
    char *end = nullptr;
    errno = 0;
    long long value = std::strtoll(item.c_str(), &end, 10);
    if (item.empty() || *end || errno || value < 1 ||
        (!parsed.empty() && value <= parsed.back()))
      return false;
    parsed.push_back(value);
    at = comma + 1;
  }
  milestones = std::move(parsed);
  return true;
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
    text += " step-size=" + std::to_string(stepSize);
  if (kind == Kind::MultiStep) {
    text += " milestones=";
    for (size_t i = 0; i < milestones.size(); ++i)
      text += (i ? "," : "") + std::to_string(milestones[i]);
  }
  if (usesGamma())
    text += " gamma=" + exact(gamma);
  if (kind == Kind::Poly)
    text += " power=" + exact(power);
  if (decays())
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
  if (!parseKind(word, parsed.kind))
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
    else if (key == "power")
      parsed.power = std::strtod(value.c_str(), &end);
    else if (key == "milestones") {
      if (!parseMilestones(value, parsed.milestones))
        return false;
      continue;
    } else
      return false;
    if (value.empty() || *end)
      return false;
  }
  // What rate() divides by or searches.
  if (parsed.warmupSteps < 0 ||
      (parsed.kind == Kind::Step && parsed.stepSize < 1) ||
      (parsed.kind == Kind::MultiStep && parsed.milestones.empty()) ||
      (parsed.kind == Kind::Poly && !(parsed.power > 0)) ||
      (parsed.decays() && parsed.decaySteps <= parsed.warmupSteps))
    return false;
  schedule = parsed;
  return true;
}
