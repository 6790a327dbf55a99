//===- Dataset.cpp - --data arrays of samples, memory-mapped --------------===//

#include "Dataset.h"
#include "HostTensor.h"
#include "Options.h"
#include "Util.h"

#include "pp/Runtime/Half.h"
#include "pp/Runtime/Npy.h"
#include "pp/Runtime/Program.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <sys/mman.h>
#include <unistd.h>

using namespace pp::rt;
using namespace pp::rt::train;

namespace {

/// A fault on a mapping maps the pages around it that the page cache holds
/// (the kernel's fault-around, 64 KiB by default): what a gathered sample
/// may add to the resident memory at most, however small.
constexpr int64_t kFaultAroundBytes = 64 << 10;
/// Mapped bytes a mapping may gather before it gives its pages back: the
/// most a mapping adds to the resident memory.
constexpr int64_t kReleaseBytes = 512 << 20;

/// Whether uint8 samples convert to `to` without loss (exact integers).
bool convertsFromU8(DType to) {
  switch (to) {
  case DType::F32:
  case DType::F64:
  case DType::F16:
  case DType::BF16:
  case DType::I16:
  case DType::I32:
  case DType::I64:
  case DType::U16:
  case DType::U32:
  case DType::U64:
    return true;
  default:
    return false;
  }
}

template <typename T> void widen(const uint8_t *src, char *dst, int64_t count) {
  T *out = reinterpret_cast<T *>(dst);
  for (int64_t i = 0; i < count; ++i)
    out[i] = static_cast<T>(src[i]);
}

/// uint8 values to `to`, unscaled: 255 becomes 255.0.
void convertU8(const uint8_t *src, DType to, char *dst, int64_t count) {
  switch (to) {
  case DType::F32:
    return widen<float>(src, dst, count);
  case DType::F64:
    return widen<double>(src, dst, count);
  case DType::I16:
    return widen<int16_t>(src, dst, count);
  case DType::I32:
    return widen<int32_t>(src, dst, count);
  case DType::I64:
    return widen<int64_t>(src, dst, count);
  case DType::U16:
    return widen<uint16_t>(src, dst, count);
  case DType::U32:
    return widen<uint32_t>(src, dst, count);
  case DType::U64:
    return widen<uint64_t>(src, dst, count);
  case DType::F16:
  case DType::BF16: {
    uint16_t *out = reinterpret_cast<uint16_t *>(dst);
    for (int64_t i = 0; i < count; ++i)
      out[i] =
          to == DType::F16 ? doubleToHalf(src[i]) : doubleToBFloat16(src[i]);
    return;
  }
  default:
    return; // refused by Dataset::open
  }
}

} // namespace

uint64_t SplitMix64::next() {
  uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

std::vector<uint32_t>
pp::rt::train::epochPermutation(uint64_t seed, int64_t epoch, int64_t samples) {
  SplitMix64 rng(seed +
                 static_cast<uint64_t>(epoch + 1) * 0xD1342543DE82EF95ull);
  std::vector<uint32_t> order(static_cast<size_t>(samples));
  for (int64_t i = 0; i < samples; ++i)
    order[i] = static_cast<uint32_t>(i);
  for (int64_t i = samples - 1; i > 0; --i) {
    uint64_t j = rng.next() % static_cast<uint64_t>(i + 1);
    std::swap(order[i], order[j]);
  }
  return order;
}

Dataset::~Dataset() {
  if (prefetcher_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(prefetchMutex_);
      stopping_ = true;
    }
    prefetchWake_.notify_all();
    prefetcher_.join();
  }
  for (auto &array : arrays_)
    if (array->map)
      munmap(array->map, array->mapBytes);
}

bool Dataset::open(const ProgramInfo &p, const TrainOptions &options,
                   std::string &error) {
  int64_t batch = p.inputs.empty() ? 1 : p.inputs[0].shape[0];
  return open(p, options.dataFiles, options.dataDir, "--data", batch, error);
}

bool Dataset::open(
    const ProgramInfo &p,
    const std::vector<std::pair<std::string, std::string>> &files,
    const std::string &dir, const std::string &flag, int64_t minSamples,
    std::string &error) {
  if (files.empty() && dir.empty())
    return true;
  std::vector<std::string> paths(p.inputs.size());
  for (const auto &[name, path] : files) {
    auto it =
        std::find_if(p.inputs.begin(), p.inputs.end(),
                     [&](const InputInfo &in) { return in.name == name; });
    if (it == p.inputs.end()) {
      std::string names;
      for (const InputInfo &in : p.inputs)
        names += (names.empty() ? "'" : ", '") + in.name + "'";
      error = flag + " " + name + "=" + path + ": the program has no input '" +
              name + "' (inputs: " + names + ")";
      return false;
    }
    paths[it - p.inputs.begin()] = path;
  }
  for (size_t i = 0; i < p.inputs.size(); ++i) {
    if (!dir.empty()) {
      paths[i] = dir + "/" + p.inputs[i].name + ".npy";
      std::string stemmed = dir + "/" + fileStem(p.inputs[i].name) + ".npy";
      if (!fileExists(paths[i]) && fileExists(stemmed))
        paths[i] = stemmed;
    }
    if (paths[i].empty()) {
      error = "no data for input '" + p.inputs[i].name + "': pass " + flag +
              " " + p.inputs[i].name + "=FILE.npy";
      return false;
    }
  }
  batch_ = p.inputs.empty() ? 1 : p.inputs[0].shape[0];
  for (size_t i = 0; i < p.inputs.size(); ++i) {
    const InputInfo &info = p.inputs[i];
    auto &array = arrays_.emplace_back(std::make_unique<Array>());
    Array &a = *array;
    a.path = paths[i];
    std::string where =
        flag + " '" + a.path + "' for input '" + info.name + "'";
    int64_t size = 0;
    int fd = openRegularFile(a.path, size, error);
    if (fd < 0) {
      error = flag + " for input '" + info.name + "': " + error;
      return false;
    }
    // The header only: the samples are mapped, never read whole.
    std::string prefix(
        static_cast<size_t>(std::min<int64_t>(size, npy::kMaxHeaderBytes)),
        '\0');
    npy::Header header;
    bool ok = readFully(fd, a.path, 0, prefix.data(), prefix.size(), error);
    if (ok &&
        !npy::parseHeader(prefix, static_cast<uint64_t>(size), header, error)) {
      error = where + ": " + error;
      ok = false;
    }
    if (ok && size > 0) {
      a.mapBytes = static_cast<size_t>(size);
      a.map = mmap(nullptr, a.mapBytes, PROT_READ, MAP_SHARED, fd, 0);
      if (a.map == MAP_FAILED) {
        a.map = nullptr;
        error = withErrno(where + ": cannot memory-map it");
        ok = false;
      }
    }
    close(fd);
    if (!ok)
      return false;
    a.data = static_cast<const char *>(a.map) + header.dataOffset;
    a.fileType = header.dtype;
    a.inputType = info.dtype;
    a.shape = header.shape;

    std::vector<int64_t> sample(info.shape.begin() + 1, info.shape.end());
    if (a.fileType != a.inputType &&
        !(a.fileType == DType::U8 && convertsFromU8(a.inputType))) {
      error = where + ": dtype " + dtypeName(a.fileType) + ", expected " +
              dtypeName(a.inputType) + " (the input's dtype" +
              (convertsFromU8(a.inputType) ? std::string(", or u8") : "") + ")";
      return false;
    }
    if (a.shape.empty() || !std::equal(a.shape.begin() + 1, a.shape.end(),
                                       sample.begin(), sample.end())) {
      std::string dims = "[N";
      for (int64_t d : sample)
        dims += ", " + std::to_string(d);
      dims += "]";
      error = where + ": shape " + shapeString(a.shape) + ", expected " + dims +
              " (N samples of the input's per-sample shape " +
              shapeString(sample) + ")";
      return false;
    }
    int64_t count = a.shape[0];
    if (count < minSamples) {
      error = where + ": " + std::to_string(count) +
              " sample(s) along dim 0, fewer than " +
              (minSamples == batch_ ? "one batch" : "one micro-batch") +
              " of " + std::to_string(minSamples);
      return false;
    }
    if (i == 0) {
      samples_ = count;
    } else if (count != samples_) {
      error = flag + ": '" + a.path + "' holds " + std::to_string(count) +
              " samples of input '" + info.name + "', '" + arrays_[0]->path +
              "' holds " + std::to_string(samples_) + " of input '" +
              p.inputs[0].name + "'";
      return false;
    }
    int64_t numel = 1;
    for (int64_t d : sample)
      numel *= d;
    a.fileSampleBytes = numel * dtypeSize(a.fileType);
    a.inputSampleBytes = numel * dtypeSize(a.inputType);
  }
  return true;
}

bool Dataset::setOrder(bool shuffle, uint64_t seed, std::string &error) {
  // The permutation holds 32-bit indices (4 bytes a sample in memory).
  if (shuffle && samples_ > std::numeric_limits<uint32_t>::max()) {
    error = "--shuffle: '" + arrays_[0]->path + "' holds " +
            std::to_string(samples_) +
            " samples, more than the 2^32 - 1 a permutation indexes";
    return false;
  }
  shuffle_ = shuffle;
  seed_ = seed;
  // Shuffled samples are read one by one: readahead would read pages that
  // the epoch reaches much later, if at all.
  for (auto &array : arrays_)
    if (array->map)
      madvise(array->map, array->mapBytes,
              shuffle ? MADV_RANDOM : MADV_SEQUENTIAL);
  return true;
}

std::shared_ptr<const std::vector<uint32_t>> Dataset::order(int64_t epoch) {
  if (!shuffle_)
    return nullptr;
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto &[e, perm] : orders_)
    if (e == epoch)
      return perm;
  auto perm = std::make_shared<const std::vector<uint32_t>>(
      epochPermutation(seed_, epoch, samples_));
  if (orders_.size() == 2)
    orders_.erase(std::min_element(orders_.begin(), orders_.end()));
  orders_.emplace_back(epoch, perm);
  return perm;
}

template <typename Outside>
std::optional<Dataset::Found> Dataset::findInteger(int input, Outside outside) {
  if (input < 0 || input >= static_cast<int>(arrays_.size()))
    return std::nullopt;
  Array &a = *arrays_[static_cast<size_t>(input)];
  int64_t size = dtypeSize(a.fileType);
  if (a.fileType != DType::I64 && a.fileType != DType::I32 &&
      a.fileType != DType::U8)
    return std::nullopt;
  int64_t perSample = a.fileSampleBytes / std::max<int64_t>(1, size);
  for (int64_t s = 0; s < samples_; ++s) {
    const char *sample = a.data + s * a.fileSampleBytes;
    for (int64_t i = 0; i < perSample; ++i) {
      const char *at = sample + i * size;
      int64_t value =
          a.fileType == DType::I64   ? *reinterpret_cast<const int64_t *>(at)
          : a.fileType == DType::I32 ? *reinterpret_cast<const int32_t *>(at)
                                     : *reinterpret_cast<const uint8_t *>(at);
      if (outside(value))
        return Found{s, i, value, perSample, &a.path};
    }
    release(a, a.fileSampleBytes);
  }
  return std::nullopt;
}

namespace {

/// "'file': <what> 7 of sample 2 (element 27)".
std::string describeFound(const std::string &path, const char *what,
                          int64_t sample, int64_t element, int64_t value,
                          int64_t perSample) {
  return "'" + path + "': " + what + " " + std::to_string(value) +
         " of sample " + std::to_string(sample) +
         (perSample > 1 ? " (element " + std::to_string(element) + ")" : "");
}

} // namespace

bool Dataset::checkLabels(int input, int64_t classes, bool hasIgnoreIndex,
                          int64_t ignoreIndex, std::string &error) {
  std::optional<Found> found = findInteger(input, [&](int64_t label) {
    return !((label >= 0 && label < classes) ||
             (hasIgnoreIndex && label == ignoreIndex));
  });
  if (!found)
    return true;
  error = describeFound(*found->path, "label", found->sample, found->element,
                        found->value, found->perSample) +
          " is outside [0, " + std::to_string(classes) + ")" +
          (hasIgnoreIndex
               ? " and not the ignore index " + std::to_string(ignoreIndex)
               : "");
  return false;
}

bool Dataset::checkIndices(int input, int64_t size, const std::string &node,
                           std::string &error) {
  std::optional<Found> found = findInteger(
      input, [&](int64_t index) { return index < -size || index >= size; });
  if (!found)
    return true;
  error = describeFound(*found->path, "index", found->sample, found->element,
                        found->value, found->perSample) +
          " is outside [" + std::to_string(-size) + ", " +
          std::to_string(size) + "): " + node + " takes it along a dim of " +
          std::to_string(size) + " (e.g. a token id past the vocabulary)";
  return false;
}

void Dataset::release(Array &array, int64_t bytes) {
  // A mapping no larger than the window never needs it; one that does
  // refaults what it unmaps (a minor fault while the page is cached).
  if (static_cast<int64_t>(array.mapBytes) <= kReleaseBytes ||
      array.touched.fetch_add(bytes) + bytes < kReleaseBytes)
    return;
  array.touched = 0;
  // Read-only and shared: the pages stay in the page cache, and a reader
  // on another thread faults them back in unchanged.
  madvise(array.map, array.mapBytes, MADV_DONTNEED);
}

const char *Dataset::stage(const Array &a, int64_t count,
                           const std::function<int64_t(int64_t)> &sampleOf) {
  thread_local std::vector<char> staging;
  staging.resize(static_cast<size_t>(count * a.inputSampleBytes));
  int64_t numel =
      a.inputSampleBytes / std::max<int64_t>(1, dtypeSize(a.inputType));
  for (int64_t i = 0; i < count; ++i) {
    const char *src = a.data + sampleOf(i) * a.fileSampleBytes;
    char *dst = staging.data() + i * a.inputSampleBytes;
    if (a.fileType == a.inputType) {
      std::memcpy(dst, src, static_cast<size_t>(a.fileSampleBytes));
      if (a.fileType == DType::Bool)
        npy::normalizeBools(reinterpret_cast<uint8_t *>(dst),
                            static_cast<size_t>(numel));
    } else {
      convertU8(reinterpret_cast<const uint8_t *>(src), a.inputType, dst,
                numel);
    }
  }
  return staging.data();
}

void Dataset::startPrefetch(int64_t steps) {
  if (steps <= 0 || arrays_.empty() || prefetcher_.joinable())
    return;
  lookahead_ = steps;
  prefetcher_ = std::thread([this] { prefetchLoop(); });
}

void Dataset::queuePrefetch(int input, int64_t step, int64_t first,
                            int64_t count) {
  {
    std::lock_guard<std::mutex> lock(prefetchMutex_);
    gathered_[{input, first}] = step;
    int64_t &through =
        prefetchedThrough_.try_emplace({input, first}, step).first->second;
    // A resumed or restarted stream starts again from its own step.
    through = std::max(through, step);
    for (; through < step + lookahead_; ++through)
      prefetchQueue_.push_back({input, through + 1, first, count});
  }
  prefetchWake_.notify_one();
}

void Dataset::prefetchLoop() {
  long page = sysconf(_SC_PAGESIZE);
  for (;;) {
    PrefetchRequest r;
    {
      std::unique_lock<std::mutex> lock(prefetchMutex_);
      prefetchWake_.wait(lock,
                         [&] { return stopping_ || !prefetchQueue_.empty(); });
      if (stopping_)
        return;
      r = prefetchQueue_.front();
      prefetchQueue_.pop_front();
      // Behind the stage already: reading it now would only compete.
      if (r.step <= gathered_[{r.input, r.first}])
        continue;
    }
    const Array &a = *arrays_[static_cast<size_t>(r.input)];
    int64_t perEpoch = stepsPerEpoch();
    auto perm = order(r.step / perEpoch);
    int64_t start = r.step % perEpoch * batch_ + r.first;
    for (int64_t i = 0; i < r.count; ++i) {
      int64_t sample = perm ? (*perm)[start + i] : start + i;
      // MADV_WILLNEED starts the reads and returns: the samples' reads run
      // side by side (a cold file's latency paid once, not per sample).
      auto begin = reinterpret_cast<uintptr_t>(a.data) +
                   static_cast<uintptr_t>(sample * a.fileSampleBytes);
      uintptr_t aligned = begin - begin % static_cast<uintptr_t>(page);
      madvise(reinterpret_cast<void *>(aligned),
              begin + static_cast<uintptr_t>(a.fileSampleBytes) - aligned,
              MADV_WILLNEED);
    }
  }
}

const char *Dataset::gather(int input, int64_t step, int64_t first,
                            int64_t count) {
  if (lookahead_ > 0)
    queuePrefetch(input, step, first, count);
  Array &a = *arrays_[static_cast<size_t>(input)];
  int64_t perEpoch = stepsPerEpoch();
  int64_t start = step % perEpoch * batch_ + first;
  auto perm = order(step / perEpoch);
  bool same = a.fileType == a.inputType && a.fileType != DType::Bool;
  if (!perm && same) {
    release(a, count * a.fileSampleBytes + kFaultAroundBytes);
    return a.data + start * a.fileSampleBytes;
  }
  const char *staged = stage(a, count, [&](int64_t i) {
    return perm ? (*perm)[start + i] : start + i;
  });
  release(a, count * std::max(a.fileSampleBytes, kFaultAroundBytes));
  return staged;
}

const char *Dataset::gatherWrapped(int input, int64_t first, int64_t count) {
  Array &a = *arrays_[static_cast<size_t>(input)];
  bool same = a.fileType == a.inputType && a.fileType != DType::Bool;
  release(a, count * std::max(a.fileSampleBytes, kFaultAroundBytes));
  if (same && first + count <= samples_)
    return a.data + first * a.fileSampleBytes;
  return stage(a, count, [&](int64_t i) { return (first + i) % samples_; });
}

std::string Dataset::orderKey() const {
  if (empty())
    return "";
  return "samples " + std::to_string(samples_) + " batch " +
         std::to_string(batch_) + " shuffle " + (shuffle_ ? "1" : "0");
}
