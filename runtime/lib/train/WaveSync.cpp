//===- WaveSync.cpp - Wave Synchronous Parallel across replicas -----------===//

#include "WaveSync.h"
#include "Rank.h"
#include "Util.h"

#include "pp/Runtime/Memory.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <sys/stat.h>

using namespace pp::rt;
using namespace pp::rt::train;

namespace {

/// Wall-clock seconds (comparable between the processes of one node, which
/// the log's ordering checks rely on).
double wallSeconds() {
  return std::chrono::duration<double>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

/// dst := dst + (sum - own), elementwise in the dtype of the values.
template <typename T>
void addOthers(char *dst, const char *sum, const char *own, int64_t numel) {
  T *w = reinterpret_cast<T *>(dst);
  const T *r = reinterpret_cast<const T *>(sum);
  const T *u = reinterpret_cast<const T *>(own);
  for (int64_t i = 0; i < numel; ++i) {
    T others = r[i] - u[i];
    w[i] = w[i] + others;
  }
}

/// dst := now - start.
template <typename T>
void difference(char *dst, const char *now, const char *start, int64_t numel) {
  T *u = reinterpret_cast<T *>(dst);
  const T *w = reinterpret_cast<const T *>(now);
  const T *s = reinterpret_cast<const T *>(start);
  for (int64_t i = 0; i < numel; ++i)
    u[i] = w[i] - s[i];
}

} // namespace

WaveSync::~WaveSync() {
  for (Pending &p : pending_)
    for (Tensor &t : p.sums)
      rank_.pool.release(t);
  if (log_)
    std::fclose(log_);
}

void WaveSync::readGroup(const Group &group, std::vector<char> &host) const {
  int64_t size = dtypeSize(group.dtype);
  host.resize(static_cast<size_t>(group.numel * size));
  for (const Slot &slot : group.slots)
    copyFromBuffer(host.data() + slot.offset * size, slot.value->data,
                   slot.value->bytes());
}

void WaveSync::writeGroup(Group &group, const std::vector<char> &host) {
  int64_t size = dtypeSize(group.dtype);
  for (const Slot &slot : group.slots)
    copyToBuffer(slot.value->data, host.data() + slot.offset * size,
                 slot.value->bytes());
}

bool WaveSync::log(const std::string &json, std::string &error) {
  if (!log_)
    return true;
  // Like --log: a write that fails (a full disk) ends the run.
  if (std::fprintf(log_, "{%s,\"vw\":%lld,\"time\":%s}\n", json.c_str(),
                   static_cast<long long>(rank_.replica),
                   jsonNumber(wallSeconds(), 17).c_str()) < 0 ||
      std::fflush(log_) != 0) {
    logError_ = withErrno("--wsp-log: cannot write '" + logPath_ + "'");
    std::fclose(log_);
    log_ = nullptr;
    error = logError_;
    return false;
  }
  return true;
}

bool WaveSync::closeLog(std::string &error) {
  FILE *file = log_;
  log_ = nullptr;
  if (!file || std::fclose(file) == 0)
    return true;
  logError_ = withErrno("--wsp-log: cannot write '" + logPath_ + "'");
  error = logError_;
  return false;
}

bool WaveSync::begin(int64_t clock, std::string &error) {
  clock_ = applied_ = clock;
  const ProgramInfo &p = rank_.job.program;
  // Every holder of a trainable global exchanges its copy: the copies of a
  // tied weight are equal at every step's end, so they stay equal.
  for (auto &[s, state] : rank_.stages)
    for (auto &[id, t] : state->globals) {
      if (!p.globals[id].trainable)
        continue;
      if (t.dtype != DType::F32 && t.dtype != DType::F64) {
        error = "rank " + std::to_string(rank_.worldRank) +
                ": Wave Synchronous Parallel exchanges float32 and float64 "
                "weights; global '" +
                p.globals[id].name + "' is " + dtypeName(t.dtype);
        return false;
      }
      int64_t stage = rank_.stageComms.empty() ? -1 : s;
      auto group =
          std::find_if(groups_.begin(), groups_.end(), [&](const Group &g) {
            return g.dtype == t.dtype && g.stage == stage;
          });
      if (group == groups_.end())
        group = groups_.insert(groups_.end(),
                               Group{t.dtype,
                                     stage,
                                     stage < 0 ? rank_.replicaComm.get()
                                               : &rank_.reduceComm(stage),
                                     {},
                                     0,
                                     {}});
      group->slots.push_back({&t, group->numel});
      group->numel += t.numel();
    }
  for (Group &group : groups_)
    readGroup(group, group.start);

  const std::string &dir = rank_.job.options.wspLogDir;
  if (!dir.empty() && rank_.rank == 0) {
    mkdir(dir.c_str(), 0777); // an existing directory is fine
    std::string path = dir + "/vw" + std::to_string(rank_.replica) + ".jsonl";
    logPath_ = path;
    log_ = std::fopen(path.c_str(), rank_.job.resuming ? "a" : "w");
    if (!log_) {
      logError_ = withErrno("--wsp-log: cannot write '" + path + "'");
      error = logError_;
      return false;
    }
    return log("\"event\":\"begin\",\"clock\":" + std::to_string(clock_) +
                   ",\"staleness\":" + std::to_string(p.staleness) +
                   ",\"wave\":" + std::to_string(p.wave) +
                   ",\"workers\":" + std::to_string(rank_.job.replicas),
               error);
  }
  return true;
}

bool WaveSync::push(std::string &error) {
  Pending &wave = pending_.emplace_back();
  wave.wave = clock_ + 1;
  std::vector<char> now;
  for (Group &group : groups_) {
    readGroup(group, now);
    std::vector<char> &own = wave.own.emplace_back(now.size());
    if (group.dtype == DType::F32)
      difference<float>(own.data(), now.data(), group.start.data(),
                        group.numel);
    else
      difference<double>(own.data(), now.data(), group.start.data(),
                         group.numel);
    Tensor &sum =
        wave.sums.emplace_back(rank_.pool.acquire(group.dtype, {group.numel}));
    copyToBuffer(sum.data, own.data(), static_cast<int64_t>(own.size()));
    int &request = wave.requests.emplace_back(-1);
    Status s = group.comm->startAllReduceSum(sum, request);
    if (!s.ok()) {
      error = "pushing wave " + std::to_string(wave.wave) + ": " + s.message;
      return false;
    }
  }
  return true;
}

bool WaveSync::agreeOnComplete(int64_t &complete, std::string &error) {
  // What this rank has seen complete: the applied waves and the completed
  // prefix of the pending ones.
  complete = applied_;
  for (Pending &wave : pending_) {
    for (size_t g = 0; !wave.complete && g < wave.requests.size(); ++g) {
      bool done = false;
      Status s = groups_[g].comm->testAllReduce(wave.requests[g], done);
      if (!s.ok()) {
        error = "wave " + std::to_string(wave.wave) + ": " + s.message;
        return false;
      }
      if (!done)
        break;
      if (g + 1 == wave.requests.size())
        wave.complete = true;
    }
    if (wave.requests.empty())
      wave.complete = true;
    if (!wave.complete)
      break;
    complete = wave.wave;
  }
  int numDevices = rank_.job.numDevices;
  if (numDevices == 1)
    return true;
  // The least over the VW's ranks: each puts its count in its own entry.
  std::vector<double> counts(static_cast<size_t>(numDevices), 0.0);
  counts[rank_.rank] = static_cast<double>(complete);
  Status s = rank_.allReduce(counts, &rank_.pipeline());
  if (!s.ok()) {
    error = "agreeing on the pulled waves: " + s.message;
    return false;
  }
  complete =
      static_cast<int64_t>(*std::min_element(counts.begin(), counts.end()));
  return true;
}

void WaveSync::progress() {
  for (Pending &wave : pending_)
    for (size_t g = 0; g < wave.requests.size(); ++g) {
      bool done = false;
      // A failure shows again, with its message, where the wave is waited
      // for.
      (void)groups_[g].comm->testAllReduce(wave.requests[g], done);
    }
}

bool WaveSync::applyThrough(int64_t through, double &waitedMs,
                            std::string &error) {
  double start = nowSeconds();
  std::vector<char> now, sum;
  while (!pending_.empty() && pending_.front().wave <= through) {
    Pending &wave = pending_.front();
    for (size_t g = 0; g < groups_.size(); ++g) {
      Status s = groups_[g].comm->waitAllReduce(wave.requests[g]);
      if (!s.ok()) {
        error = "waiting for the other virtual workers' wave " +
                std::to_string(wave.wave) + ": " + s.message;
        return false;
      }
    }
    waitedMs += (nowSeconds() - start) * 1e3;
    for (size_t g = 0; g < groups_.size(); ++g) {
      Group &group = groups_[g];
      Tensor &reduced = wave.sums[g];
      sum.resize(static_cast<size_t>(reduced.bytes()));
      copyFromBuffer(sum.data(), reduced.data, reduced.bytes());
      readGroup(group, now);
      if (group.dtype == DType::F32)
        addOthers<float>(now.data(), sum.data(), wave.own[g].data(),
                         group.numel);
      else
        addOthers<double>(now.data(), sum.data(), wave.own[g].data(),
                          group.numel);
      writeGroup(group, now);
      rank_.pool.release(reduced);
    }
    applied_ = wave.wave;
    pending_.pop_front();
    start = nowSeconds();
  }
  for (Group &group : groups_)
    readGroup(group, group.start);
  return true;
}

bool WaveSync::afterStep(int64_t step, bool force, double loss,
                         std::string &error) {
  if (!log("\"event\":\"step\",\"step\":" + std::to_string(step + 1) +
               ",\"clock\":" + std::to_string(clock_) +
               ",\"loss\":" + jsonNumber(loss, 17),
           error))
    return false;
  const ProgramInfo &p = rank_.job.program;
  if (++stepsInWave_ < p.wave && !force)
    return true;
  stepsInWave_ = 0;
  // Logged as it starts: no VW can see the wave complete before.
  if (!log("\"event\":\"push\",\"wave\":" + std::to_string(clock_ + 1) +
               ",\"step\":" + std::to_string(step + 1),
           error) ||
      !push(error))
    return false;
  ++clock_;
  // The next wave may start only while clock - global clock <= D; pull
  // whatever else every rank of this VW has seen complete.
  int64_t complete = 0;
  if (!agreeOnComplete(complete, error))
    return false;
  int64_t through = std::max(clock_ - p.staleness, complete);
  double waited = 0;
  if (!applyThrough(through, waited, error))
    return false;
  waitedMs_ += waited;
  maxStaleness_ = std::max(maxStaleness_, clock_ - applied_);
  return log("\"event\":\"pull\",\"clock\":" + std::to_string(clock_) +
                 ",\"through\":" + std::to_string(applied_) +
                 ",\"waited_ms\":" + jsonNumber(waited),
             error);
}

bool WaveSync::drain(std::string &error) {
  double waited = 0;
  if (!applyThrough(clock_, waited, error))
    return false;
  waitedMs_ += waited;
  return log("\"event\":\"pull\",\"clock\":" + std::to_string(clock_) +
                 ",\"through\":" + std::to_string(applied_) +
                 ",\"waited_ms\":" + jsonNumber(waited) + ",\"drain\":true",
             error);
}
