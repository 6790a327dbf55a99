//===- Report.cpp - What rank 0 prints and logs while training ------------===//

#include "Report.h"
#include "Job.h"
#include "Util.h"

#include <cerrno>
#include <cmath>
#include <cstring>

#include <fcntl.h>
#include <unistd.h>

using namespace pp::rt;
using namespace pp::rt::train;

namespace {

/// "M:SS", or "H:MM:SS" from an hour on.
std::string formatDuration(double seconds) {
  long total = seconds > 0 && std::isfinite(seconds) ? std::lround(seconds) : 0;
  char text[32];
  if (total >= 3600)
    std::snprintf(text, sizeof(text), "%ld:%02ld:%02ld", total / 3600,
                  total / 60 % 60, total % 60);
  else
    std::snprintf(text, sizeof(text), "%ld:%02ld", total / 60, total % 60);
  return text;
}

} // namespace

StepLog::~StepLog() {
  if (file_)
    std::fclose(file_);
}

bool StepLog::close(std::string &error) {
  FILE *file = file_;
  file_ = nullptr;
  if (!file || std::fclose(file) == 0)
    return true;
  error = withErrno("--log: cannot write '" + path_ + "'");
  return false;
}

bool StepLog::open(const std::string &path, int64_t numStages, bool resuming,
                   std::string &error) {
  numStages_ = numStages;
  path_ = path;
  csv_ = path.size() >= 4 && path.compare(path.size() - 4, 4, ".csv") == 0;
  // A resumed run continues the log of the run it resumes.
  bool append = resuming && fileExists(path);
  // Non-blocking: a FIFO that nobody reads would block open() forever.
  int fd = ::open(path.c_str(),
                  O_WRONLY | O_CREAT | O_NONBLOCK | O_CLOEXEC |
                      (append ? O_APPEND : O_TRUNC),
                  0666);
  if (fd < 0 && errno == ENXIO) {
    error = "--log: '" + path +
            "' is a FIFO that no process reads (start its reader first)";
    return false;
  }
  int flags = fd >= 0 ? ::fcntl(fd, F_GETFL) : -1;
  if (flags >= 0)
    ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  file_ = fd >= 0 ? ::fdopen(fd, append ? "a" : "w") : nullptr;
  if (!file_) {
    error = withErrno("--log: cannot write '" + path + "'");
    if (fd >= 0)
      ::close(fd);
    return false;
  }
  if (!csv_ || append)
    return true;
  std::string header = "step,loss,samples_per_s,step_ms";
  for (int64_t s = 0; s < numStages; ++s)
    header += ",busy_ms_stage" + std::to_string(s);
  return writeRow(header, error);
}

bool StepLog::writeRow(const std::string &row, std::string &error) {
  if (std::fprintf(file_, "%s\n", row.c_str()) < 0 || std::fflush(file_) != 0) {
    error = withErrno("--log: cannot write '" + path_ + "'");
    return false;
  }
  return true;
}

bool StepLog::write(int64_t step, double loss, double samplesPerSecond,
                    double stepMs, const double *busyMs, const Rates &rates,
                    std::optional<double> gradNorm, std::string &error) {
  std::string row;
  if (csv_) {
    row = std::to_string(step + 1) + "," + jsonNumber(loss) + "," +
          jsonNumber(samplesPerSecond) + "," + jsonNumber(stepMs);
    for (int64_t s = 0; s < numStages_; ++s)
      row += "," + jsonNumber(busyMs[s]);
  } else {
    row = "{\"step\":" + std::to_string(step + 1) +
          ",\"loss\":" + jsonNumber(loss) +
          ",\"samples_per_s\":" + jsonNumber(samplesPerSecond) +
          ",\"step_ms\":" + jsonNumber(stepMs) + ",\"busy_ms\":[";
    for (int64_t s = 0; s < numStages_; ++s)
      row += (s ? "," : "") + jsonNumber(busyMs[s]);
    row += "]";
    // Exact (17 digits): tests compare the rates with PyTorch's. lr_max
    // only where the step's updates read different rates (optimizer ops
    // compiled with different base rates).
    if (rates.reads > 0) {
      row += ",\"lr\":" + jsonNumber(rates.min, 17);
      if (rates.max != rates.min)
        row += ",\"lr_max\":" + jsonNumber(rates.max, 17);
      row += ",\"param_updates\":" + std::to_string(rates.reads);
    }
    // Exact too: compared with torch.nn.utils.clip_grad_norm_'s.
    if (gradNorm)
      row += ",\"grad_norm\":" + jsonNumber(*gradNorm, 17);
    if (!std::isnan(accuracy_))
      row += ",\"accuracy\":" + jsonNumber(accuracy_, 17);
    row += "}";
  }
  accuracy_ = NAN;
  return writeRow(row, error);
}

std::string StepLog::Evaluation::line(int64_t step, int64_t samples) const {
  char text[160];
  std::snprintf(text, sizeof(text), "eval after step %lld: loss %.6f",
                static_cast<long long>(step + 1), loss);
  std::string result = text;
  for (auto [name, value] : {std::pair{"accuracy", accuracy},
                             {"top-5", top5},
                             {"mIoU", meanIoU},
                             {"perplexity", perplexity}})
    if (!std::isnan(value)) {
      std::snprintf(text, sizeof(text), "  %s %.4f", name, value);
      result += text;
    }
  return result + "  (" + std::to_string(samples) + " samples)";
}

bool StepLog::writeEvaluation(int64_t step, const Evaluation &evaluation,
                              std::string &error) {
  // A CSV log keeps its columns: evaluations are printed only.
  if (csv_)
    return true;
  std::string row = "{\"step\":" + std::to_string(step + 1) +
                    ",\"eval_loss\":" + jsonNumber(evaluation.loss, 17);
  for (auto [name, value] : {std::pair{"eval_accuracy", evaluation.accuracy},
                             {"eval_top5", evaluation.top5},
                             {"eval_miou", evaluation.meanIoU},
                             {"eval_perplexity", evaluation.perplexity}})
    if (!std::isnan(value))
      row += ",\"" + std::string(name) + "\":" + jsonNumber(value, 17);
  if (evaluation.best)
    row += ",\"eval_best\":true";
  return writeRow(row + "}", error);
}

void pp::rt::train::printProgress(const Job &job, int64_t step,
                                  const std::vector<double> &values,
                                  double samplesPerSecond, double etaSeconds) {
  std::string line = "step " + std::to_string(step + 1) + "/" +
                     std::to_string(job.options.steps);
  char text[128];
  if (job.lossIndex >= 0) {
    std::snprintf(text, sizeof(text), "  loss %.6f", values[job.lossIndex]);
    line += text;
  }
  for (size_t i = 0; i < values.size(); ++i) {
    if (static_cast<int>(i) == job.lossIndex)
      continue;
    std::snprintf(text, sizeof(text), "  %s %.6f",
                  job.program.outputs[job.reported[i]].name.c_str(), values[i]);
    line += text;
  }
  std::snprintf(text, sizeof(text), "  %.1f samples/s  ETA %s",
                samplesPerSecond, formatDuration(etaSeconds).c_str());
  line += text;
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

namespace {

/// How much more one device may run, against its planned time, than
/// another before the plan is called unbalanced for this machine.
constexpr double kPlanMismatch = 1.25;

/// A note when the devices' busy times (`busyMs` over `steps` steps,
/// replica 0's) are spread otherwise than the plan's: the cost model
/// misjudged these devices (a GPU cluster's roofline run on CPUs), so the
/// stages are unbalanced.
void noteUnplannedImbalance(const Job &job, int64_t steps,
                            const std::vector<double> &busyMs) {
  const std::vector<int64_t> &planned = job.program.plannedBusyNanos;
  // The first step's one-time work (allocations, kernel set-up) would
  // weigh too much alone.
  if (job.numDevices < 2 || planned.size() != job.deviceNames.size() ||
      steps < 2)
    return;
  // Measured over planned time: the same on every device the cost model
  // fits, whatever the devices' absolute speed.
  int slow = 0, fast = 0;
  std::vector<double> ratio(planned.size());
  for (size_t d = 0; d < planned.size(); ++d) {
    if (planned[d] <= 0 || busyMs[d] <= 0)
      return;
    ratio[d] = busyMs[d] / (static_cast<double>(planned[d]) * 1e-6);
    slow = ratio[d] > ratio[slow] ? static_cast<int>(d) : slow;
    fast = ratio[d] < ratio[fast] ? static_cast<int>(d) : fast;
  }
  if (ratio[slow] < kPlanMismatch * ratio[fast])
    return;
  std::printf(
      "note: against the plan, device %d (%s) ran %.2fx as long as device "
      "%d (%s): busy %.3g and %.3g ms, planned %.3g and %.3g ms a step. The "
      "cluster's cost model does not fit the devices this ran on, so its "
      "stages are unbalanced here; to cut them by op times measured here, "
      "run train --write-profile=ops.json and compile with profile=ops.json "
      "(docs/cli.md, Pipeline plan)\n",
      slow, job.deviceNames[slow].c_str(), ratio[slow] / ratio[fast], fast,
      job.deviceNames[fast].c_str(), busyMs[slow] / static_cast<double>(steps),
      busyMs[fast] / static_cast<double>(steps),
      static_cast<double>(planned[slow]) * 1e-6,
      static_cast<double>(planned[fast]) * 1e-6);
}

} // namespace

void pp::rt::train::printSummary(const Job &job, int64_t stepsRun,
                                 double seconds,
                                 const std::vector<double> &totals) {
  const ProgramInfo &p = job.program;
  double samples = static_cast<double>(stepsRun * job.samplesPerStep);
  std::printf("trained %lld steps in %.3f s (%.1f samples/s)\n",
              static_cast<long long>(stepsRun), seconds,
              seconds > 0 ? samples / seconds : 0.0);
  for (int d = 0; d < job.numDevices; ++d) {
    double planned = d < static_cast<int>(p.plannedPeakBytes.size())
                         ? static_cast<double>(p.plannedPeakBytes[d])
                         : 0.0;
    std::printf("device %d (%s): busy %.1f ms, planned peak %.2f MB, "
                "measured arena+globals+stash %.2f MB\n",
                d, job.deviceNames[d].c_str(), totals[d], planned / 1e6,
                totals[job.numDevices + d] / 1e6);
  }
  noteUnplannedImbalance(job, stepsRun, totals);
  std::fflush(stdout);
}
