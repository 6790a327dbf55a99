//===- ScheduleKinds.h - Schedule, action and phase kinds -------*- C++ -*-===//
//
// Enums and names from ScheduleKinds.def, with no dependency: the runtime,
// the schedule library and the pp dialect all use these.
//
//===----------------------------------------------------------------------===//
#ifndef PP_RUNTIME_SCHEDULEKINDS_H
#define PP_RUNTIME_SCHEDULEKINDS_H

#include <cstddef>
#include <iterator>
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

/// What the definition says of each kind, indexed by the enum's value.
struct KindInfo {
  const char *name;
  /// The C++ spelling, for generated code.
  const char *enumerator;
};
struct ActionKindInfo : KindInfo {
  Phase phase;
  bool perStep;
};

inline constexpr KindInfo kScheduleKinds[] = {
#define PP_SCHEDULE_KIND(Enumerator, Name)                                     \
  {Name, "pp::kinds::ScheduleKind::" #Enumerator},
#include "pp/Runtime/ScheduleKinds.def"
};
inline constexpr KindInfo kPhases[] = {
    {"none", "pp::kinds::Phase::None"},
#define PP_PHASE(Enumerator, Name) {Name, "pp::kinds::Phase::" #Enumerator},
#include "pp/Runtime/ScheduleKinds.def"
};
inline constexpr ActionKindInfo kActionKinds[] = {
#define PP_ACTION_KIND(Enumerator, Name, PhaseEnumerator, PerStep)             \
  {{Name, "pp::kinds::ActionKind::" #Enumerator}, Phase::PhaseEnumerator,      \
   PerStep},
#include "pp/Runtime/ScheduleKinds.def"
};

/// How many action kinds there are (dense from 0).
constexpr int kNumActionKinds = std::size(kActionKinds);

constexpr const KindInfo &infoOf(ScheduleKind kind) {
  return kScheduleKinds[static_cast<int>(kind)];
}
constexpr const KindInfo &infoOf(Phase phase) {
  return kPhases[static_cast<int>(phase)];
}
constexpr const ActionKindInfo &infoOf(ActionKind kind) {
  return kActionKinds[static_cast<int>(kind)];
}

/// "1f1b", "forward", "optimizer_step", ...
template <typename Kind>
constexpr auto toString(Kind kind) -> decltype(infoOf(kind).name) {
  return infoOf(kind).name;
}
/// "pp::kinds::ActionKind::Forward", ...
template <typename Kind>
constexpr auto enumeratorName(Kind kind) -> decltype(infoOf(kind).enumerator) {
  return infoOf(kind).enumerator;
}
/// The stage function `kind` runs.
constexpr Phase phaseOf(ActionKind kind) { return infoOf(kind).phase; }
/// Whether `kind` runs once per step rather than once per micro-batch.
constexpr bool isPerStep(ActionKind kind) { return infoOf(kind).perStep; }

/// The kind whose name is `name` in `table`, if any.
template <typename Enum, typename Info, size_t N>
std::optional<Enum> parseKind(const Info (&table)[N], std::string_view name) {
  for (size_t i = 0; i < N; ++i)
    if (name == table[i].name)
      return static_cast<Enum>(i);
  return std::nullopt;
}
inline std::optional<ScheduleKind> parseScheduleKind(std::string_view name) {
  return parseKind<ScheduleKind>(kScheduleKinds, name);
}
/// Whether `kind` places its two chunks per device in a V (ZB-V,
/// DualPipeV): the stages run down the devices and back up, so the first
/// and the last stage share device 0.
constexpr bool isVShaped(ScheduleKind kind) {
  return kind == ScheduleKind::ZBV || kind == ScheduleKind::DualPipeV;
}
/// The device of `stage` when `numDevices` devices hold the stages by the
/// schedule's rule: V-shaped schedules put stage s >= p on device 2p-1-s;
/// the others interleave (Megatron-LM): stage s on device s mod p.
constexpr int deviceOfStage(ScheduleKind kind, int stage, int numDevices) {
  if (isVShaped(kind) && stage >= numDevices)
    return 2 * numDevices - 1 - stage;
  return stage % numDevices;
}
/// A stage function's phase ("none" names no stage function).
inline std::optional<Phase> parsePhase(std::string_view name) {
  std::optional<Phase> phase = parseKind<Phase>(kPhases, name);
  return phase == Phase::None ? std::nullopt : phase;
}
inline std::optional<ActionKind> parseActionKind(std::string_view name) {
  return parseKind<ActionKind>(kActionKinds, name);
}

} // namespace pp::kinds

#endif // PP_RUNTIME_SCHEDULEKINDS_H
