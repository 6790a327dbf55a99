//===- Report.h - What rank 0 prints and logs while training ----*- C++ -*-===//
//
// The progress line of every step, the --log rows (CSV or JSON lines) and
// the summary after the last step.
//
//===----------------------------------------------------------------------===//
#ifndef PP_RUNTIME_TRAIN_REPORT_H
#define PP_RUNTIME_TRAIN_REPORT_H

#include "Util.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

namespace pp::rt::train {

struct Job;

/// The per-step --log file: CSV when its name ends in .csv, else JSON
/// lines. Closed when destroyed.
class StepLog : NonCopyable {
public:
  ~StepLog();

  /// Opens `path` for a job of `numStages` stages. A resumed run appends to
  /// the log of the run it resumes; a new CSV file starts with its header.
  /// False with `error` set when the file cannot be written.
  bool open(const std::string &path, int64_t numStages, bool resuming,
            std::string &error);
  bool isOpen() const { return file_ != nullptr; }
  /// The learning rates a step's optimizer ops read, over every stage:
  /// the least, the largest and how many (0: no update read one).
  struct Rates {
    double min = INFINITY, max = -INFINITY;
    int64_t reads = 0;
  };
  /// Writes and flushes the row of step index `step` (logged from 1): the
  /// loss (NaN: none), samples/s, the step's time and the busy time of each
  /// of the `numStages` stages, in ms, and in JSON the learning rate and
  /// the gradient norm (--clip-grad-norm). False with `error` naming the
  /// file when the row cannot be written (a full disk).
  bool write(int64_t step, double loss, double samplesPerSecond, double stepMs,
             const double *busyMs, const Rates &rates,
             std::optional<double> gradNorm, std::string &error);
  /// The accuracy of the next step written (JSON's "accuracy"; a
  /// classifier's top-1 over the step's batch).
  void setAccuracy(double accuracy) { accuracy_ = accuracy; }
  /// What an evaluation measured: its mean loss and, where not NaN, the
  /// top-1 accuracy (per position for a segmentation), the top-5 accuracy
  /// (more than 5 classes), the perplexity (a
  /// language model) and the mean intersection over union (a segmentation).
  struct Evaluation {
    double loss = NAN, accuracy = NAN, top5 = NAN, perplexity = NAN,
           meanIoU = NAN;
    /// The best so far by --best-metric: --save-best wrote its weights.
    bool best = false;
    /// The line train prints for it after step index `step`.
    std::string line(int64_t step, int64_t samples) const;
  };
  /// Writes an evaluation after step index `step` (JSON lines only).
  bool writeEvaluation(int64_t step, const Evaluation &evaluation,
                       std::string &error);
  /// Closes the file; false with `error` when the last rows do not reach it.
  bool close(std::string &error);

private:
  bool writeRow(const std::string &row, std::string &error);

  FILE *file_ = nullptr;
  std::string path_;
  bool csv_ = false;
  int64_t numStages_ = 0;
  double accuracy_ = NAN;
};

/// Prints the progress line of step index `step`: the loss, the other
/// reported outputs (`values`, in Job::reported order), the throughput and
/// the time left.
void printProgress(const Job &job, int64_t step,
                   const std::vector<double> &values, double samplesPerSecond,
                   double etaSeconds);

/// Prints the summary of the run: its throughput and, per device, the busy
/// time, the planned and the measured memory. `totals` holds the busy ms of
/// every device, then the measured bytes of every device.
void printSummary(const Job &job, int64_t stepsRun, double seconds,
                  const std::vector<double> &totals);

} // namespace pp::rt::train

#endif // PP_RUNTIME_TRAIN_REPORT_H
