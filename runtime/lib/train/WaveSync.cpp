//===- WaveSync.cpp - Wave Synchronous Parallel across replicas -----------===//

#include "WaveSync.h"
#include "RankState.h"
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

/// dst := dst + src.
template <typename T> void add(char *dst, const char *src, int64_t numel) {
  T *d = reinterpret_cast<T *>(dst);
  const T *s = reinterpret_cast<const T *>(src);
  for (int64_t i = 0; i < numel; ++i)
    d[i] = d[i] + s[i];
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
      group->slots.push_back({&t, group->numel, id, s});
      group->numel += t.numel();
    }
  for (Group &group : groups_)
    readGroup(group, group.start);

  const std::string &dir = rank_.job.options.wspLogDir;
  // HetPipe's stages push and pull on their own: every rank logs (device
  // r > 0 of VW k to vwK.rankR.jsonl).
  bool everyRank = rank_.job.wavesInStream();
  if (!dir.empty() && (rank_.rank == 0 || everyRank)) {
    mkdir(dir.c_str(), 0777); // an existing directory is fine
    std::string path =
        dir + "/vw" + std::to_string(rank_.replica) +
        (rank_.rank == 0 ? "" : ".rank" + std::to_string(rank_.rank)) +
        ".jsonl";
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
  for (size_t g = 0; g < groups_.size(); ++g)
    wave.groups.push_back(g);
  return startPush(wave, error);
}

bool WaveSync::startPush(Pending &wave, std::string &error) {
  std::vector<char> now;
  for (size_t g : wave.groups) {
    Group &group = groups_[g];
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
    group.start = std::move(now);
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
      Status s =
          groups_[wave.groups[g]].comm->testAllReduce(wave.requests[g], done);
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
  auto test = [&](Pending &wave) {
    for (size_t g = 0; g < wave.requests.size(); ++g) {
      bool done = false;
      // A failure shows again, with its message, where the wave is waited
      // for.
      (void)groups_[wave.groups[g]].comm->testAllReduce(wave.requests[g], done);
    }
  };
  for (Pending &wave : pending_)
    test(wave);
  for (auto &[stage, waves] : stageWaves_)
    for (Pending &wave : waves.pending)
      test(wave);
}

bool WaveSync::applyPending(Pending &wave, int64_t version,
                            std::string &error) {
  for (size_t g = 0; g < wave.groups.size(); ++g) {
    Status s = groups_[wave.groups[g]].comm->waitAllReduce(wave.requests[g]);
    if (!s.ok()) {
      error = "waiting for the other virtual workers' wave " +
              std::to_string(wave.wave) + ": " + s.message;
      return false;
    }
  }
  std::vector<char> now, sum, others;
  for (size_t g = 0; g < wave.groups.size(); ++g) {
    Group &group = groups_[wave.groups[g]];
    Tensor &reduced = wave.sums[g];
    sum.resize(static_cast<size_t>(reduced.bytes()));
    copyFromBuffer(sum.data(), reduced.data, reduced.bytes());
    rank_.pool.release(reduced);
    // others = R - U, added to W and to the wave start (not this VW's own).
    others.assign(sum.size(), 0);
    bool f32 = group.dtype == DType::F32;
    if (f32)
      addOthers<float>(others.data(), sum.data(), wave.own[g].data(),
                       group.numel);
    else
      addOthers<double>(others.data(), sum.data(), wave.own[g].data(),
                        group.numel);
    auto addTo = [&](char *dst, const char *src, int64_t numel) {
      if (f32)
        add<float>(dst, src, numel);
      else
        add<double>(dst, src, numel);
    };
    readGroup(group, now);
    addTo(now.data(), others.data(), group.numel);
    writeGroup(group, now);
    if (!group.start.empty())
      addTo(group.start.data(), others.data(), group.numel);
    if (version < 0)
      continue;
    // The kept versions the wave's later mini-batches read.
    int64_t size = dtypeSize(group.dtype);
    for (const Slot &slot : group.slots) {
      for (auto &[kept, copy] : rank_.weightVersions.kept(slot.stage)) {
        auto it = copy.find(slot.id);
        if (kept < version || it == copy.end())
          continue;
        std::vector<char> value(static_cast<size_t>(it->second.bytes()));
        copyFromBuffer(value.data(), it->second.data, it->second.bytes());
        addTo(value.data(), others.data() + slot.offset * size,
              slot.value->numel());
        copyToBuffer(it->second.data, value.data(), it->second.bytes());
      }
    }
  }
  return true;
}

bool WaveSync::applyThrough(int64_t through, double &waitedMs,
                            std::string &error) {
  double start = nowSeconds();
  while (!pending_.empty() && pending_.front().wave <= through) {
    Pending &wave = pending_.front();
    if (!applyPending(wave, -1, error))
      return false;
    waitedMs += (nowSeconds() - start) * 1e3;
    applied_ = wave.wave;
    pending_.pop_front();
    start = nowSeconds();
  }
  // HetPipe's stages at a drain: every wave they pushed.
  for (auto &[stage, waves] : stageWaves_)
    while (!waves.pending.empty() && waves.pending.front().wave <= through) {
      if (!applyPending(waves.pending.front(), -1, error))
        return false;
      waves.applied = waves.pending.front().wave;
      waves.pending.pop_front();
    }
  waitedMs += (nowSeconds() - start) * 1e3;
  applied_ = std::max(applied_, through);
  for (Group &group : groups_)
    readGroup(group, group.start);
  return true;
}

bool WaveSync::pushStage(int64_t stage, int64_t wave, std::string &error) {
  StageWaves &waves = stageWaves_[stage];
  Pending &pending = waves.pending.emplace_back();
  pending.wave = wave;
  for (size_t g = 0; g < groups_.size(); ++g)
    if (groups_[g].stage == stage || groups_[g].stage < 0)
      pending.groups.push_back(g);
  clock_ = std::max(clock_, wave);
  // A stage without trainable weights has nothing to exchange.
  if (pending.groups.empty()) {
    waves.pending.pop_back();
    waves.applied = wave;
    return true;
  }
  // Logged before it starts: no VW can see the wave complete before.
  return log("\"event\":\"push\",\"stage\":" + std::to_string(stage) +
                 ",\"wave\":" + std::to_string(wave),
             error) &&
         startPush(pending, error);
}

bool WaveSync::pullStage(int64_t stage, int64_t wave, int64_t version,
                         std::string &error) {
  StageWaves &waves = stageWaves_[stage];
  int64_t through = wave - 1 - rank_.job.program.staleness;
  waves.applied = std::max(waves.applied, applied_);
  if (std::none_of(groups_.begin(), groups_.end(), [&](const Group &g) {
        return g.stage == stage || g.stage < 0;
      }))
    return true; // nothing to exchange
  double start = nowSeconds();
  while (!waves.pending.empty() && waves.pending.front().wave <= through) {
    if (!applyPending(waves.pending.front(), version, error))
      return false;
    waves.applied = waves.pending.front().wave;
    waves.pending.pop_front();
  }
  if (waves.applied < through) {
    error = "stage " + std::to_string(stage) + " starts wave " +
            std::to_string(wave) + " before pushing wave " +
            std::to_string(through);
    return false;
  }
  double waited = (nowSeconds() - start) * 1e3;
  waitedMs_ += waited;
  maxStaleness_ = std::max(maxStaleness_, wave - 1 - waves.applied);
  return log("\"event\":\"pull\",\"stage\":" + std::to_string(stage) +
                 ",\"clock\":" + std::to_string(wave - 1) +
                 ",\"through\":" + std::to_string(waves.applied) +
                 ",\"waited_ms\":" + jsonNumber(waited),
             error);
}

bool WaveSync::afterStep(int64_t step, bool force, double loss,
                         std::string &error) {
  bool inStream = rank_.job.wavesInStream();
  if (inStream && rank_.rank != 0)
    return true;
  if (!log("\"event\":\"step\",\"step\":" + std::to_string(step + 1) +
               ",\"clock\":" + std::to_string(clock_) +
               ",\"loss\":" + jsonNumber(loss, 17) +
               (inStream ? ",\"local_staleness\":" +
                               std::to_string(localStaleness_[step])
                         : ""),
           error))
    return false;
  // HetPipe: the stages pushed and pulled inside the stream.
  if (inStream) {
    localStaleness_.erase(step);
    return true;
  }
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
