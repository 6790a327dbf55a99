//===- Timeline.h - Timelines of a simulated schedule -----------*- C++ -*-===//
//
// Writers that draw a SimulationResult: a Chrome trace (JSON for
// chrome://tracing and ui.perfetto.dev) and a self-contained SVG.
//
//===----------------------------------------------------------------------===//

#ifndef PP_SCHEDULE_TIMELINE_H
#define PP_SCHEDULE_TIMELINE_H

#include "pp/Schedule/Schedule.h"
#include "pp/Schedule/Simulator.h"

#include <ostream>
#include <string>
#include <vector>

namespace pp::schedule {

/// The short label of an action: "F3", "B3", "W3" (forward, backward or
/// backward_input, backward_weight of micro-batch 3), "reduce", "opt".
std::string shortLabel(const Action &action);

/// Writes {"traceEvents": [...], "displayTimeUnit": "ms"}: process 0 has one
/// thread per device (named by `deviceNames`, or "device d" where missing)
/// and one complete ("X") event per action, with the stage, micro-batch and
/// weight version as args; process 1 ("links") has one thread per directed
/// link used and one "X" event per transfer. Timestamps are microseconds.
void writeChromeTrace(const Schedule &schedule, const SimulationResult &result,
                      const std::vector<std::string> &deviceNames,
                      std::ostream &os);

/// One simulated pipeline of a trace: a process named `name` with a thread
/// per device, and a process of its links.
struct TracedPipeline {
  std::string name;
  const Schedule *schedule;
  const SimulationResult *result;
  std::vector<std::string> deviceNames;
};

/// The same for several pipelines in one trace (the virtual workers of a
/// data-parallel plan, each step from time 0): pipeline i is process 2i,
/// its links process 2i + 1, named after the pipeline.
void writeChromeTrace(const std::vector<TracedPipeline> &pipelines,
                      std::ostream &os);

/// Writes an SVG with one row per device and one <rect> per action (and no
/// other <rect>), coloured by kind and labelled with the micro-batch where it
/// fits, a time axis and a legend. Later chunks of a device are drawn
/// lighter.
void writeTimelineSVG(const Schedule &schedule, const SimulationResult &result,
                      const std::vector<std::string> &deviceNames,
                      std::ostream &os);

} // namespace pp::schedule

#endif // PP_SCHEDULE_TIMELINE_H
