//===- LRSchedule.h - Learning-rate schedules of the driver -----*- C++ -*-===//
//
// --lr-schedule: the rate of step k (counted from 0) is the one PyTorch's
// scheduler gives after k calls of scheduler.step(), one call per step: an
// optional linear warm-up over W steps (LinearLR from a start factor to 1,
// chained by SequentialLR with milestone W), then, from step W, constant,
// StepLR, MultiStepLR, ExponentialLR, CosineAnnealingLR, a linear decay
// (LinearLR to min-lr) or PolynomialLR (to min-lr as mmcv's PolyLR). Each is
// computed in closed form from the step alone, so a run resumed at step k
// continues with the rates of the uninterrupted one.
//
//===----------------------------------------------------------------------===//
#ifndef PP_RUNTIME_TRAIN_LRSCHEDULE_H
#define PP_RUNTIME_TRAIN_LRSCHEDULE_H

#include <cstdint>
#include <string>
#include <vector>

namespace pp::rt::train {

struct LRSchedule {
  /// pp/Runtime/LRScheduleKinds.def's kinds, as the compiler names them.
  enum class Kind {
#define PP_LR_SCHEDULE(Enumerator, Name) Enumerator,
#include "pp/Runtime/LRScheduleKinds.def"
  };
  Kind kind = Kind::Constant;
  /// Linear warm-up: steps 0 .. warmupSteps - 1 run at base * (f + (1 - f)
  /// k / warmupSteps), f = warmupStartFactor (PyTorch's LinearLR default).
  int64_t warmupSteps = 0;
  double warmupStartFactor = 1.0 / 3.0;
  /// Cosine's eta_min and the linear decay's end rate.
  double minLr = 0;
  /// StepLR: the rate is multiplied by gamma every stepSize steps;
  /// MultiStepLR: at each milestone (steps after the warm-up, increasing);
  /// ExponentialLR: every step.
  int64_t stepSize = 0;
  std::vector<int64_t> milestones;
  double gamma = 0.1;
  /// Cosine, linear and poly: the step (warm-up included) at which the
  /// decay reaches minLr, which it keeps after; T_max / total_iters is
  /// decaySteps - warmupSteps.
  int64_t decaySteps = 0;
  /// Poly: base + (minLr - base) (1 - (1 - k / T)^power).
  double power = 1.0;

  /// Whether the kind decays to minLr at decaySteps.
  bool decays() const {
    return kind == Kind::Cosine || kind == Kind::Linear || kind == Kind::Poly;
  }
  /// Whether the kind multiplies by gamma.
  bool usesGamma() const {
    return kind == Kind::Step || kind == Kind::MultiStep ||
           kind == Kind::Exponential;
  }

  /// The rate of step `step` for the optimizer's base rate `base`.
  double rate(double base, int64_t step) const;

  /// "cosine warmup-steps=10 ..." with every parameter the kind reads,
  /// doubles exact (%.17g): what checkpoints record and messages show.
  std::string str() const;
  /// Reads str()'s text; false when it is not one.
  static bool parse(const std::string &text, LRSchedule &schedule);

  bool operator==(const LRSchedule &other) const {
    return str() == other.str();
  }
  bool operator!=(const LRSchedule &other) const { return !(*this == other); }
};

/// "constant", "step", "multistep", "exponential", "cosine", "linear",
/// "poly".
const char *toString(LRSchedule::Kind kind);
/// The kind toString names `text`; false for none.
bool parseKind(const std::string &text, LRSchedule::Kind &kind);
/// "30,60,80": positive, strictly increasing step counts; false otherwise.
bool parseMilestones(const std::string &text, std::vector<int64_t> &milestones);

} // namespace pp::rt::train

#endif // PP_RUNTIME_TRAIN_LRSCHEDULE_H
