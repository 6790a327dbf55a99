//===- ScheduleKinds.h - Schedule, action and phase kinds -------*- C++ -*-===//
//
// Enums and names from ScheduleKinds.def, with no dependency: the runtime,
// the schedule library and the pp dialect all use these.
//
//===----------------------------------------------------------------------===//
#ifndef PP_RUNTIME_SCHEDULEKINDS_H
#define PP_RUNTIME_SCHEDULEKINDS_H

#include <optional>
#include <string_view>

namespace pp::kinds {

enum class ScheduleKind {
#define PP_SCHEDULE_KIND(Enumerator, Name) Enumerator,
#include "pp/Runtime/ScheduleKinds.def"
};

/// The stage function an action runs (None: the action has no code).
enum class Phase {
  None,
#define PP_PHASE(Enumerator, Name) Enumerator,
#include "pp/Runtime/ScheduleKinds.def"
};

/// What one action of a device's schedule computes.
enum class ActionKind {
#define PP_ACTION_KIND(Enumerator, Name, Phase, PerStep) Enumerator,
#include "pp/Runtime/ScheduleKinds.def"
};

/// How many action kinds there are (dense from 0).
constexpr int kNumActionKinds = 0
#define PP_ACTION_KIND(Enumerator, Name, Phase, PerStep) +1
#include "pp/Runtime/ScheduleKinds.def"
    ;

constexpr const char *toString(ScheduleKind kind) {
  switch (kind) {
#define PP_SCHEDULE_KIND(Enumerator, Name)                                     \
  case ScheduleKind::Enumerator:                                               \
    return Name;
#include "pp/Runtime/ScheduleKinds.def"
  }
  return "unknown";
}

constexpr const char *toString(Phase phase) {
  switch (phase) {
  case Phase::None:
    return "none";
#define PP_PHASE(Enumerator, Name)                                             \
  case Phase::Enumerator:                                                      \
    return Name;
#include "pp/Runtime/ScheduleKinds.def"
  }
  return "unknown";
}

constexpr const char *toString(ActionKind kind) {
  switch (kind) {
#define PP_ACTION_KIND(Enumerator, Name, Phase, PerStep)                       \
  case ActionKind::Enumerator:                                                 \
    return Name;
#include "pp/Runtime/ScheduleKinds.def"
  }
  return "unknown";
}

/// The C++ spelling of each enumerator, for generated code.
constexpr const char *enumeratorName(ScheduleKind kind) {
  switch (kind) {
#define PP_SCHEDULE_KIND(Enumerator, Name)                                     \
  case ScheduleKind::Enumerator:                                               \
    return "pp::kinds::ScheduleKind::" #Enumerator;
#include "pp/Runtime/ScheduleKinds.def"
  }
  return "";
}
constexpr const char *enumeratorName(Phase phase) {
  switch (phase) {
  case Phase::None:
    return "pp::kinds::Phase::None";
#define PP_PHASE(Enumerator, Name)                                             \
  case Phase::Enumerator:                                                      \
    return "pp::kinds::Phase::" #Enumerator;
#include "pp/Runtime/ScheduleKinds.def"
  }
  return "";
}
constexpr const char *enumeratorName(ActionKind kind) {
  switch (kind) {
#define PP_ACTION_KIND(Enumerator, Name, Phase, PerStep)                       \
  case ActionKind::Enumerator:                                                 \
    return "pp::kinds::ActionKind::" #Enumerator;
#include "pp/Runtime/ScheduleKinds.def"
  }
  return "";
}

/// The stage function `kind` runs.
constexpr Phase phaseOf(ActionKind kind) {
  switch (kind) {
#define PP_ACTION_KIND(Enumerator, Name, PhaseEnumerator, PerStep)             \
  case ActionKind::Enumerator:                                                 \
    return Phase::PhaseEnumerator;
#include "pp/Runtime/ScheduleKinds.def"
  }
  return Phase::None;
}

/// Whether `kind` runs once per step rather than once per micro-batch.
constexpr bool isPerStep(ActionKind kind) {
  switch (kind) {
#define PP_ACTION_KIND(Enumerator, Name, Phase, PerStep)                       \
  case ActionKind::Enumerator:                                                 \
    return PerStep;
#include "pp/Runtime/ScheduleKinds.def"
  }
  return false;
}

inline std::optional<ScheduleKind> parseScheduleKind(std::string_view name) {
#define PP_SCHEDULE_KIND(Enumerator, Name)                                     \
  if (name == Name)                                                            \
    return ScheduleKind::Enumerator;
#include "pp/Runtime/ScheduleKinds.def"
  return std::nullopt;
}

inline std::optional<Phase> parsePhase(std::string_view name) {
#define PP_PHASE(Enumerator, Name)                                             \
  if (name == Name)                                                            \
    return Phase::Enumerator;
#include "pp/Runtime/ScheduleKinds.def"
  return std::nullopt;
}

inline std::optional<ActionKind> parseActionKind(std::string_view name) {
#define PP_ACTION_KIND(Enumerator, Name, Phase, PerStep)                       \
  if (name == Name)                                                            \
    return ActionKind::Enumerator;
#include "pp/Runtime/ScheduleKinds.def"
  return std::nullopt;
}

} // namespace pp::kinds

#endif // PP_RUNTIME_SCHEDULEKINDS_H
