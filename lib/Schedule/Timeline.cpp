//===- Timeline.cpp - Timelines of a simulated schedule -------------------===//
//
// Chrome trace JSON (through llvm::json::OStream, which escapes every string)
// and an SVG drawn by hand.
//
//===----------------------------------------------------------------------===//

#include "pp/Schedule/Timeline.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_os_ostream.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

using namespace pp::schedule;

std::string pp::schedule::shortLabel(const Action &action) {
  std::string mb = std::to_string(action.microBatch);
  switch (action.kind) {
  case ActionKind::Forward:
    return "F" + mb;
  case ActionKind::Backward:
  case ActionKind::BackwardInput:
    return "B" + mb;
  case ActionKind::BackwardWeight:
    return "W" + mb;
  case ActionKind::GradReduce:
    return "reduce";
  case ActionKind::OptimizerStep:
    return "opt";
  }
  return "?";
}

/// The name of device `d`, valid UTF-8 so that JSON accepts it.
static std::string deviceName(const std::vector<std::string> &names, int d) {
  if (static_cast<size_t>(d) < names.size() && !names[d].empty()) {
    const std::string &name = names[d];
    return llvm::json::isUTF8(name) ? name : llvm::json::fixUTF8(name);
  }
  return "device " + std::to_string(d);
}

//===----------------------------------------------------------------------===//
// Chrome trace
//===----------------------------------------------------------------------===//

/// Seconds to the trace's microseconds; JSON has no infinities or NaNs.
static double micros(double seconds) {
  return std::isfinite(seconds) ? seconds * 1e6 : 0;
}

void pp::schedule::writeChromeTrace(const Schedule &schedule,
                                    const SimulationResult &result,
                                    const std::vector<std::string> &deviceNames,
                                    std::ostream &os) {
  writeChromeTrace({{std::string(toString(schedule.kind)) + " schedule",
                     &schedule, &result, deviceNames}},
                   os);
}

void pp::schedule::writeChromeTrace(
    const std::vector<TracedPipeline> &pipelines, std::ostream &os) {
  llvm::raw_os_ostream out(os);
  llvm::json::OStream json(out);
  auto metadata = [&](const char *what, int pid, int tid, llvm::StringRef key,
                      llvm::json::Value value) {
    json.object([&] {
      json.attribute("name", what);
      json.attribute("ph", "M");
      json.attribute("pid", pid);
      if (tid >= 0)
        json.attribute("tid", tid);
      json.attributeObject("args", [&] { json.attribute(key, value); });
    });
  };

  json.object([&] {
    json.attributeArray("traceEvents", [&] {
      for (auto [index, pipeline] : llvm::enumerate(pipelines)) {
        const Schedule &schedule = *pipeline.schedule;
        const SimulationResult &result = *pipeline.result;
        const std::vector<std::string> &deviceNames = pipeline.deviceNames;
        // Each pipeline's devices, then its links.
        int pid = 2 * static_cast<int>(index);
        std::string prefix =
            pipelines.size() > 1 ? pipeline.name + ": " : std::string();
        // Thread ids of the links, numbered in the order of their first
        // transfer.
        std::map<std::pair<int, int>, int> linkIds;
        for (const TransferTiming &t : result.transfers)
          linkIds.emplace(std::make_pair(t.fromDevice, t.toDevice),
                          static_cast<int>(linkIds.size()));

        metadata("process_name", pid, -1, "name", pipeline.name);
        metadata("process_sort_index", pid, -1, "sort_index", pid);
        for (int d = 0; d < schedule.numDevices; ++d) {
          metadata("thread_name", pid, d, "name", deviceName(deviceNames, d));
          metadata("thread_sort_index", pid, d, "sort_index", d);
        }
        for (const ActionTiming &a : result.actions) {
          json.object([&] {
            json.attribute("name", shortLabel(a.action));
            json.attribute("cat", toString(a.action.kind));
            json.attribute("ph", "X");
            json.attribute("pid", pid);
            json.attribute("tid", a.device);
            json.attribute("ts", micros(a.start));
            json.attribute("dur", micros(a.end - a.start));
            json.attributeObject("args", [&] {
              json.attribute("stage", a.action.stage);
              json.attribute("microBatch", a.action.microBatch);
              json.attribute("weightVersion", a.action.weightVersion);
            });
          });
        }

        if (linkIds.empty())
          continue;
        metadata("process_name", pid + 1, -1, "name", prefix + "links");
        metadata("process_sort_index", pid + 1, -1, "sort_index", pid + 1);
        for (const auto &[link, tid] : linkIds) {
          metadata("thread_name", pid + 1, tid, "name",
                   deviceName(deviceNames, link.first) + " -> " +
                       deviceName(deviceNames, link.second));
          metadata("thread_sort_index", pid + 1, tid, "sort_index", tid);
        }
        for (const TransferTiming &t : result.transfers) {
          json.object([&] {
            json.attribute("name", (t.forward ? "act" : "grad") +
                                       std::to_string(t.microBatch));
            json.attribute("cat", t.forward ? "activation" : "gradient");
            json.attribute("ph", "X");
            json.attribute("pid", pid + 1);
            json.attribute("tid", linkIds[{t.fromDevice, t.toDevice}]);
            json.attribute("ts", micros(t.start));
            json.attribute("dur", micros(t.end - t.start));
            json.attributeObject("args", [&] {
              json.attribute("fromStage", t.fromStage);
              json.attribute("toStage", t.toStage);
              json.attribute("microBatch", t.microBatch);
              json.attribute("bytes", static_cast<int64_t>(t.bytes));
            });
          });
        }
      }
    });
    json.attribute("displayTimeUnit", "ms");
  });
  out.flush();
}

//===----------------------------------------------------------------------===//
// SVG
//===----------------------------------------------------------------------===//

static std::string escapeXML(const std::string &text) {
  std::string escaped;
  for (char c : text) {
    switch (c) {
    case '&':
      escaped += "&amp;";
      break;
    case '<':
      escaped += "&lt;";
      break;
    case '>':
      escaped += "&gt;";
      break;
    case '"':
      escaped += "&quot;";
      break;
    case '\'':
      escaped += "&apos;";
      break;
    default:
      // XML 1.0 forbids most control characters even when escaped.
      if (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n')
        escaped += ' ';
      else
        escaped += c;
    }
  }
  return escaped;
}

static std::string number(double value, const char *format = "%.2f") {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), format,
                std::isfinite(value) ? value : 0.0);
  return buffer;
}

static const char *colourOf(ActionKind kind) {
  switch (kind) {
  case ActionKind::Forward:
    return "#4c72b0";
  case ActionKind::Backward:
    return "#dd8452";
  case ActionKind::BackwardInput:
    return "#c44e52";
  case ActionKind::BackwardWeight:
    return "#55a868";
  case ActionKind::GradReduce:
    return "#8172b3";
  case ActionKind::OptimizerStep:
    return "#7f7f7f";
  }
  return "#000000";
}

namespace {
/// A unit for the axis labels and the seconds it stands for.
struct TimeUnit {
  const char *name;
  double seconds;
};
} // namespace

static TimeUnit unitFor(double seconds) {
  if (seconds >= 1)
    return {"s", 1};
  if (seconds >= 1e-3)
    return {"ms", 1e-3};
  return {"&#181;s", 1e-6};
}

/// A tick spacing of 1, 2 or 5 times a power of ten giving at most ~10 ticks.
static double tickStep(double span) {
  double raw = span / 10;
  double power = std::pow(10, std::floor(std::log10(raw)));
  for (double factor : {1.0, 2.0, 5.0})
    if (factor * power >= raw)
      return factor * power;
  return 10 * power;
}

void pp::schedule::writeTimelineSVG(const Schedule &schedule,
                                    const SimulationResult &result,
                                    const std::vector<std::string> &deviceNames,
                                    std::ostream &os) {
  const double left = 140, right = 30, top = 40, rowHeight = 28, rowGap = 6;
  int p = std::max(schedule.numDevices, 0);
  std::vector<size_t> perDevice(p, 0);
  for (const ActionTiming &a : result.actions)
    if (a.device >= 0 && a.device < p)
      ++perDevice[a.device];
  size_t most = perDevice.empty()
                    ? 0
                    : *std::max_element(perDevice.begin(), perDevice.end());
  // Room for a two-digit label per action, within reason.
  double plotWidth = std::clamp(20.0 * most, 800.0, 8000.0);
  double span = result.iterationTime > 0 && std::isfinite(result.iterationTime)
                    ? result.iterationTime
                    : 1;
  double axisY = top + p * (rowHeight + rowGap) + 4;
  double legendY = axisY + 40;
  double width = left + plotWidth + right, height = legendY + 30;
  auto xOf = [&](double t) { return left + t / span * plotWidth; };

  os << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
     << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << number(width)
     << "\" height=\"" << number(height) << "\" viewBox=\"0 0 " << number(width)
     << " " << number(height)
     << "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  os << "<text x=\"" << number(left) << "\" y=\"22\" font-size=\"14\">"
     << escapeXML(std::string(toString(schedule.kind)) + " schedule, " +
                  std::to_string(schedule.numDevices) + " devices, " +
                  std::to_string(schedule.microBatches) + " micro-batches" +
                  (schedule.chunksPerDevice > 1
                       ? ", " + std::to_string(schedule.chunksPerDevice) +
                             " chunks per device"
                       : std::string()) +
                  ": iteration " + number(result.iterationTime, "%.6g") +
                  " s, bubble " + number(100 * result.bubbleFraction, "%.1f") +
                  "%" + (result.deadlock ? " (DEADLOCK)" : ""))
     << "</text>\n";

  for (int d = 0; d < p; ++d) {
    double y = top + d * (rowHeight + rowGap);
    os << "<text x=\"" << number(left - 8) << "\" y=\""
       << number(y + rowHeight / 2 + 4) << "\" text-anchor=\"end\">"
       << escapeXML(deviceName(deviceNames, d)) << "</text>\n";
    os << "<line x1=\"" << number(left) << "\" y1=\"" << number(y + rowHeight)
       << "\" x2=\"" << number(left + plotWidth) << "\" y2=\""
       << number(y + rowHeight) << "\" stroke=\"#dddddd\"/>\n";
  }

  for (const ActionTiming &a : result.actions) {
    double y = top + a.device * (rowHeight + rowGap);
    double x = xOf(a.start);
    double w = std::max(xOf(a.end) - x, 0.5);
    int chunk =
        schedule.numDevices > 0 ? a.action.stage / schedule.numDevices : 0;
    double opacity = schedule.chunksPerDevice > 1
                         ? 1 - 0.5 * chunk / (schedule.chunksPerDevice - 1)
                         : 1;
    os << "<rect x=\"" << number(x, "%.3f") << "\" y=\"" << number(y)
       << "\" width=\"" << number(w, "%.3f") << "\" height=\""
       << number(rowHeight) << "\" fill=\"" << colourOf(a.action.kind)
       << "\" fill-opacity=\"" << number(opacity) << "\" stroke=\"#ffffff\""
       << " stroke-width=\"0.5\"><title>"
       << escapeXML(toString(a.action) + " on " +
                    deviceName(deviceNames, a.device) + ": " +
                    number(a.start, "%.6g") + " s to " + number(a.end, "%.6g") +
                    " s")
       << "</title></rect>\n";
    std::string label = isPerStep(a.action.kind)
                            ? shortLabel(a.action)
                            : std::to_string(a.action.microBatch);
    if (w >= 7.0 * label.size() + 2)
      os << "<text x=\"" << number(x + w / 2) << "\" y=\""
         << number(y + rowHeight / 2 + 4)
         << "\" text-anchor=\"middle\" fill=\"#ffffff\" font-size=\"11\">"
         << escapeXML(label) << "</text>\n";
  }

  // Time axis.
  TimeUnit unit = unitFor(span);
  double step = tickStep(span / unit.seconds) * unit.seconds;
  os << "<line x1=\"" << number(left) << "\" y1=\"" << number(axisY)
     << "\" x2=\"" << number(left + plotWidth) << "\" y2=\"" << number(axisY)
     << "\" stroke=\"#000000\"/>\n";
  for (int i = 0; i * step <= span * (1 + 1e-9); ++i) {
    double t = i * step, x = xOf(t);
    os << "<line x1=\"" << number(x) << "\" y1=\"" << number(axisY)
       << "\" x2=\"" << number(x) << "\" y2=\"" << number(axisY + 5)
       << "\" stroke=\"#000000\"/>\n";
    os << "<text x=\"" << number(x) << "\" y=\"" << number(axisY + 18)
       << "\" text-anchor=\"middle\">" << number(t / unit.seconds, "%g") << " "
       << unit.name << "</text>\n";
  }

  // Legend: the kinds present, drawn with paths to keep <rect> for actions.
  std::vector<ActionKind> kinds;
  for (const std::vector<Action> &list : schedule.actions)
    for (const Action &a : list)
      if (std::find(kinds.begin(), kinds.end(), a.kind) == kinds.end())
        kinds.push_back(a.kind);
  std::sort(kinds.begin(), kinds.end());
  double x = left;
  for (ActionKind kind : kinds) {
    os << "<path d=\"M" << number(x) << " " << number(legendY - 10)
       << " h12 v12 h-12 z\" fill=\"" << colourOf(kind) << "\"/>\n";
    os << "<text x=\"" << number(x + 16) << "\" y=\"" << number(legendY)
       << "\">" << toString(kind) << "</text>\n";
    x += 30 + 7.0 * std::string(toString(kind)).size();
  }
  os << "</svg>\n";
}
