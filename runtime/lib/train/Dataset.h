//===- Dataset.h - --data arrays of samples, memory-mapped ------*- C++ -*-===//
//
// The step inputs of a generated program read from --data: one .npy array
// per program input whose dim 0 holds samples. The files are memory-mapped,
// never read whole; each step's batch is gathered from them in the order of
// the epoch (file order, or a permutation drawn from the seed with
// --shuffle), converting uint8 samples to the input's dtype on the way.
//
//===----------------------------------------------------------------------===//
#ifndef PP_RUNTIME_TRAIN_DATASET_H
#define PP_RUNTIME_TRAIN_DATASET_H

#include "pp/Runtime/Kernels.h"

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace pp::rt {
struct ProgramInfo;
} // namespace pp::rt

namespace pp::rt::train {

struct TrainOptions;

/// splitmix64 (Steele, Lea and Flood, 2014), the generator of --shuffle:
/// state += 0x9E3779B97F4A7C15, then the output is the state mixed by
/// z = (z ^ z >> 30) * 0xBF58476D1CE4E5B9, z = (z ^ z >> 27) *
/// 0x94D049BB133111EB, z ^ z >> 31 (all mod 2^64).
class SplitMix64 {
public:
  explicit SplitMix64(uint64_t state) : state_(state) {}
  uint64_t next();

private:
  uint64_t state_;
};

/// The sample order of epoch `epoch` under --shuffle: splitmix64 from the
/// state seed + (epoch + 1) * 0xD1342543DE82EF95 (mod 2^64), then
/// Fisher-Yates over 0 .. samples - 1: for i from samples - 1 down to 1,
/// swap the entries i and next() mod (i + 1). python/pp_data_order.py
/// computes the same.
std::vector<uint32_t> epochPermutation(uint64_t seed, int64_t epoch,
                                       int64_t samples);

class Dataset {
public:
  Dataset() = default;
  Dataset(const Dataset &) = delete;
  Dataset &operator=(const Dataset &) = delete;
  ~Dataset();

  /// Maps `options`' --data files, one per input of `program`, and checks
  /// each: readable .npy, the input's dtype (or uint8 for a numeric input),
  /// dim 0 at least one batch (the input's dim 0) of samples of the input's
  /// per-sample shape, and every file the same number of samples. False
  /// with `error` naming the file and what is wrong.
  bool open(const ProgramInfo &program, const TrainOptions &options,
            std::string &error);
  /// The same for the files of `flag` (--data, --eval-data): NAME=FILE.npy
  /// entries or a directory, with at least `minSamples` samples.
  bool open(const ProgramInfo &program,
            const std::vector<std::pair<std::string, std::string>> &files,
            const std::string &dir, const std::string &flag, int64_t minSamples,
            std::string &error);
  /// No files: the inputs are random (--synthetic).
  bool empty() const { return arrays_.empty(); }
  /// Checks that every integer label of input `input` lies in [0, classes)
  /// or is `ignoreIndex` (where `hasIgnoreIndex`); false with `error`
  /// naming the file, the sample and the label otherwise.
  bool checkLabels(int input, int64_t classes, bool hasIgnoreIndex,
                   int64_t ignoreIndex, std::string &error);
  /// Checks that every integer of input `input` lies in [-size, size), the
  /// indices of a dim of `size` that Gather `node` takes; false with `error`
  /// naming the file, the sample, the value and the Gather otherwise.
  bool checkIndices(int input, int64_t size, const std::string &node,
                    std::string &error);

  int64_t samples() const { return samples_; }
  int64_t batchSize() const { return batch_; }
  /// Whole batches of an epoch; the samples after the last are not used.
  int64_t stepsPerEpoch() const { return samples_ / batch_; }
  bool shuffled() const { return shuffle_; }
  /// File order, or (`shuffle`) the permutations drawn from `seed` (the
  /// checkpoint's under --resume); false when the samples are too many to
  /// permute.
  bool setOrder(bool shuffle, uint64_t seed, std::string &error);

  /// Samples [first, first + count) of step `step`'s batch of input
  /// `input`, in the input's dtype: a pointer into the mapping where they
  /// are contiguous and need no conversion, else into a buffer of the
  /// calling thread, valid until its next gather.
  const char *gather(int input, int64_t step, int64_t first, int64_t count);
  /// Samples [first, first + count) of input `input` in file order, those
  /// past the last sample taken from the start again (an evaluation's last
  /// batch, whose extra samples are not counted); valid as gather's.
  const char *gatherWrapped(int input, int64_t first, int64_t count);

  /// --data-prefetch: from now on each gather of step k has a thread of the
  /// data set read the pages of the same samples of steps k + 1 .. k +
  /// `steps` (touching one byte a page), so that a cold file's reads
  /// overlap the training instead of stalling the stage. 0: none.
  void startPrefetch(int64_t steps);

  /// What fixes the order of the samples, recorded in checkpoints:
  /// "samples <n> batch <b> shuffle <0|1>".
  std::string orderKey() const;

private:
  struct Array {
    std::string path;
    DType fileType = DType::F32, inputType = DType::F32;
    std::vector<int64_t> shape;
    void *map = nullptr;
    size_t mapBytes = 0;
    const char *data = nullptr;
    int64_t fileSampleBytes = 0, inputSampleBytes = 0;
    /// Bytes gathered since the mapping last gave back its pages.
    std::atomic<int64_t> touched{0};
  };
  /// The first integer of input `input` (sample, element, value) for which
  /// `outside` holds; nothing when none does or the file is not integers.
  struct Found {
    int64_t sample, element, value, perSample;
    const std::string *path;
  };
  template <typename Outside>
  std::optional<Found> findInteger(int input, Outside outside);
  /// The order of epoch `epoch` (null: file order); the two newest epochs
  /// are kept (stages of a pipeline may be an epoch apart).
  std::shared_ptr<const std::vector<uint32_t>> order(int64_t epoch);
  /// Drops `array`'s mapped pages from the process (they stay in the page
  /// cache) once it has gathered enough since the last time, so that the
  /// resident memory stays bounded however large the file.
  void release(Array &array, int64_t bytes);
  /// Copies `count` samples of `array`, sample sampleOf(i) to place i, into
  /// the calling thread's staging buffer as the input's dtype (uint8
  /// converted, bools normalised); the buffer stays valid until the
  /// thread's next call.
  static const char *stage(const Array &array, int64_t count,
                           const std::function<int64_t(int64_t)> &sampleOf);

  /// Queues the steps after `step` up to `step` + lookahead_ for the
  /// samples [first, first + count) of `input` not queued yet.
  void queuePrefetch(int input, int64_t step, int64_t first, int64_t count);
  /// The prefetch thread: touches the pages of each queued request.
  void prefetchLoop();

  struct PrefetchRequest {
    int input;
    int64_t step, first, count;
  };
  int64_t lookahead_ = 0;
  std::thread prefetcher_;
  std::mutex prefetchMutex_;
  std::condition_variable prefetchWake_;
  std::deque<PrefetchRequest> prefetchQueue_;
  /// (input, first) -> the last step queued for those samples, and the
  /// last one gathered (requests up to it are stale and dropped).
  std::map<std::pair<int, int64_t>, int64_t> prefetchedThrough_, gathered_;
  bool stopping_ = false;

  std::vector<std::unique_ptr<Array>> arrays_;
  int64_t samples_ = 0, batch_ = 1;
  bool shuffle_ = false;
  uint64_t seed_ = 0;
  std::mutex mutex_;
  std::vector<std::pair<int64_t, std::shared_ptr<const std::vector<uint32_t>>>>
      orders_;
};

} // namespace pp::rt::train

#endif // PP_RUNTIME_TRAIN_DATASET_H
