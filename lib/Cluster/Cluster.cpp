//===- Cluster.cpp - Cluster presets, spec strings and JSON ------*- C++
//-*-===//
//
// Device presets from public datasheets, the "4xH100,2xV100" spec syntax,
// the JSON schema of docs/cluster.md (through llvm::json), and link costs.
//
//===----------------------------------------------------------------------===//

#include "pp/Cluster/Cluster.h"
#include "pp/Support/InputLimits.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/Twine.h"
#include "llvm/ADT/bit.h"
#include "llvm/Support/MemoryBuffer.h"

#include <algorithm>
#include <cassert>
#include <charconv>
#include <cmath>
#include <limits>
#include <map>

using namespace llvm;

namespace pp::cluster {
namespace {

//===----------------------------------------------------------------------===//
// Presets
//===----------------------------------------------------------------------===//

constexpr double kGB = 1e9;
constexpr double kTFLOPS = 1e12;
constexpr int64_t kGiB = int64_t(1) << 30;

/// Datasheet numbers of one device kind (dense, no sparsity). Memory is the
/// marketed capacity, which is binary (GiB): "80 GB" HBM is 80 GiB.
struct Preset {
  const char *name;  ///< Canonical kind.
  const char *alias; ///< Another accepted name, or null.
  double f32, f16, f64;
  int64_t memoryBytes;
  double memoryBandwidth;
  /// NVLink bandwidth per direction between two devices of this kind in one
  /// node (0: none), and the host PCIe link per direction.
  double nvlinkBandwidth, pcieBandwidth;
};

// F16 is the fp16/bf16 tensor-core rate with fp32 accumulation (what mixed
// precision training runs); F32 the CUDA-core rate (no TF32); F64 the FP64
// tensor-core rate where there is one, which cuBLAS DGEMM uses by default.
// Kinds without tensor cores (Pascal) run fp16 GEMMs in fp32: F16 = F32.
// clang-format off
const Preset kPresets[] = {
  // name     alias       F32             F16             F64              memory      memory BW    NVLink     PCIe
  {"V100-16",  nullptr,    15.7 * kTFLOPS, 125 * kTFLOPS,  7.8 * kTFLOPS,   16 * kGiB,  900 * kGB,   150 * kGB, 16 * kGB},
  {"V100-32",  "V100",     15.7 * kTFLOPS, 125 * kTFLOPS,  7.8 * kTFLOPS,   32 * kGiB,  900 * kGB,   150 * kGB, 16 * kGB},
  {"A100-40",  nullptr,    19.5 * kTFLOPS, 312 * kTFLOPS,  19.5 * kTFLOPS,  40 * kGiB,  1555 * kGB,  300 * kGB, 32 * kGB},
  {"A100-80",  nullptr,    19.5 * kTFLOPS, 312 * kTFLOPS,  19.5 * kTFLOPS,  80 * kGiB,  2039 * kGB,  300 * kGB, 32 * kGB},
  {"H100",     "H100-SXM", 67 * kTFLOPS,   989 * kTFLOPS,  67 * kTFLOPS,    80 * kGiB,  3350 * kGB,  450 * kGB, 64 * kGB},
  {"H200",     nullptr,    67 * kTFLOPS,   989 * kTFLOPS,  67 * kTFLOPS,    141 * kGiB, 4800 * kGB,  450 * kGB, 64 * kGB},
  {"L4",       nullptr,    30.3 * kTFLOPS, 121 * kTFLOPS,  0.473 * kTFLOPS, 24 * kGiB,  300 * kGB,   0,         32 * kGB},
  {"A10",      nullptr,    31.2 * kTFLOPS, 125 * kTFLOPS,  0.488 * kTFLOPS, 24 * kGiB,  600 * kGB,   0,         32 * kGB},
  {"T4",       nullptr,    8.1 * kTFLOPS,  65 * kTFLOPS,   0.253 * kTFLOPS, 16 * kGiB,  320 * kGB,   0,         16 * kGB},
  {"TITANV",   nullptr,    14.9 * kTFLOPS, 110 * kTFLOPS,  7.45 * kTFLOPS,  12 * kGiB,  652.8 * kGB, 0,         16 * kGB},
  {"TITANRTX", nullptr,    16.3 * kTFLOPS, 130 * kTFLOPS,  0.51 * kTFLOPS,  24 * kGiB,  672 * kGB,   0,         16 * kGB},
  {"RTX2060",  nullptr,    6.45 * kTFLOPS, 25.8 * kTFLOPS, 0.2 * kTFLOPS,   6 * kGiB,   336 * kGB,   0,         16 * kGB},
  {"P4000",    nullptr,    5.3 * kTFLOPS,  5.3 * kTFLOPS,  0.166 * kTFLOPS, 8 * kGiB,   243 * kGB,   0,         16 * kGB},
};
// clang-format on

// Default links (docs/cluster.md). Latencies are per message, as NCCL sees
// them: small next to the transfer time of an activation.
constexpr double kNVLinkLatency = 2e-6;
constexpr double kPCIeLatency = 3e-6;
/// Kinds without a preset are assumed to sit on PCIe 3.0 x16.
constexpr double kFallbackPCIeBandwidth = 16 * kGB;
/// 200 Gb/s InfiniBand (HDR) between nodes.
constexpr double kInterNodeBandwidth = 25 * kGB;
constexpr double kInterNodeLatency = 5e-6;

/// A device entry's count may not exceed this (catches typos like 40000xT4).
constexpr int64_t kMaxCount = 4096;

const Preset *lookupPreset(StringRef kind) {
  for (const Preset &p : kPresets)
    if (kind.equals_insensitive(p.name) ||
        (p.alias && kind.equals_insensitive(p.alias)))
      return &p;
  return nullptr;
}

Device makeDevice(const Preset &p) {
  Device d;
  d.kind = p.name;
  d.peakFlopsF32 = p.f32;
  d.peakFlopsF16 = p.f16;
  d.peakFlopsF64 = p.f64;
  d.memoryBytes = p.memoryBytes;
  d.memoryBandwidth = p.memoryBandwidth;
  return d;
}

std::string presetList() { return join(getPresetNames(), ", "); }

//===----------------------------------------------------------------------===//
// Default links
//===----------------------------------------------------------------------===//

/// NVLink when every device of the node is of one kind that has it (NVLink
/// joins only like GPUs), else the slowest PCIe link among them.
LinkParams defaultIntraNodeLink(const Cluster &c, int node) {
  const Device *first = nullptr;
  bool mixed = false;
  double pcie = std::numeric_limits<double>::infinity();
  for (const Device &d : c.devices) {
    if (d.node != node)
      continue;
    const Preset *p = lookupPreset(d.kind);
    pcie = std::min(pcie, p ? p->pcieBandwidth : kFallbackPCIeBandwidth);
    if (!first)
      first = &d;
    else if (!StringRef(d.kind).equals_insensitive(first->kind))
      mixed = true;
  }
  if (first && !mixed)
    if (const Preset *p = lookupPreset(first->kind); p && p->nvlinkBandwidth)
      return {p->nvlinkBandwidth, kNVLinkLatency};
  if (!first)
    pcie = kFallbackPCIeBandwidth;
  return {pcie, kPCIeLatency};
}

/// Sets the intra-node default to the slowest node's link and gives faster
/// nodes their own, so that "2xA100-80,2xV100" keeps NVLink3 inside the A100
/// node and NVLink2 inside the V100 one. Nodes that already have a link of
/// their own (JSON "intra_node") keep it.
void setDefaultIntraNodeLinks(Cluster &c) {
  int numNodes = c.nodes.size();
  std::vector<int> count(numNodes, 0);
  for (const Device &d : c.devices)
    ++count[d.node];
  c.nodeIntraLinks.resize(numNodes);
  std::vector<LinkParams> derived;
  std::optional<LinkParams> slowest;
  for (int n = 0; n < numNodes; ++n) {
    derived.push_back(defaultIntraNodeLink(c, n));
    if (!c.nodeIntraLinks[n] && count[n] >= 2 &&
        (!slowest || derived.back().bandwidth < slowest->bandwidth))
      slowest = derived.back();
  }
  if (!slowest) // No node uses the default: any value will do.
    slowest = LinkParams{kFallbackPCIeBandwidth, kPCIeLatency};
  c.intraNodeBandwidth = slowest->bandwidth;
  c.intraNodeLatency = slowest->latency;
  for (int n = 0; n < numNodes; ++n)
    if (!c.nodeIntraLinks[n] && count[n] >= 2 && !(derived[n] == *slowest))
      c.nodeIntraLinks[n] = derived[n];
  // Keep the vector empty when no node differs, as documented.
  if (llvm::none_of(c.nodeIntraLinks,
                    [](const std::optional<LinkParams> &l) { return l; }))
    c.nodeIntraLinks.clear();
}

void setDefaultInterNodeLinks(Cluster &c) {
  c.interNodeBandwidth = kInterNodeBandwidth;
  c.interNodeLatency = kInterNodeLatency;
}

Error makeError(const Twine &message) {
  return createStringError(inconvertibleErrorCode(), message);
}

//===----------------------------------------------------------------------===//
// Quantities with units
//===----------------------------------------------------------------------===//

/// Length of the decimal number (sign, digits, fraction, exponent) that
/// starts `s`; 0 when there is none.
size_t numberLength(StringRef s) {
  size_t i = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-'))
    ++i;
  size_t digits = 0;
  for (; i < s.size() && isDigit(s[i]); ++i)
    ++digits;
  if (i < s.size() && s[i] == '.')
    for (++i; i < s.size() && isDigit(s[i]); ++i)
      ++digits;
  if (!digits)
    return 0;
  // An exponent only when digits follow ("1e15FLOPS", not "5EB").
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    size_t j = i + 1;
    if (j < s.size() && (s[j] == '+' || s[j] == '-'))
      ++j;
    if (j < s.size() && isDigit(s[j])) {
      while (j < s.size() && isDigit(s[j]))
        ++j;
      i = j;
    }
  }
  return i;
}

/// The factor of a decimal (k, M, G, T, P) or binary (Ki, Mi, Gi, Ti, Pi)
/// prefix; `caseInsensitive` also accepts m, g, t, p (FLOP/s, where milli
/// would make no sense).
std::optional<double> prefixFactor(StringRef prefix, bool binary,
                                   bool caseInsensitive) {
  if (prefix.empty())
    return 1.0;
  if (binary) {
    if (!prefix.consume_back("i"))
      return std::nullopt;
    static const char *names[] = {"K", "M", "G", "T", "P"};
    for (int i = 0; i < 5; ++i)
      if (prefix == names[i])
        return std::ldexp(1.0, 10 * (i + 1));
    return std::nullopt;
  }
  if (prefix.size() != 1)
    return std::nullopt;
  char c = prefix[0];
  if (caseInsensitive)
    c = toUpper(c);
  switch (c) {
  case 'k':
  case 'K':
    return 1e3;
  case 'M':
    return 1e6;
  case 'G':
    return 1e9;
  case 'T':
    return 1e12;
  case 'P':
    return 1e15;
  default:
    return std::nullopt;
  }
}

/// Factor of a byte or bit unit ("GB", "GiB", "Gb", "Gbit"); `bits` allows
/// the bit forms.
std::optional<double> byteUnitFactor(StringRef unit, bool bits) {
  double base;
  if (bits && unit.consume_back("bit"))
    base = 1.0 / 8;
  else if (unit.consume_back("B"))
    base = 1.0;
  else if (bits && unit.consume_back("b"))
    base = 1.0 / 8;
  else
    return std::nullopt;
  bool binary = unit.ends_with("i");
  if (std::optional<double> f = prefixFactor(unit, binary, false))
    return base * *f;
  return std::nullopt;
}

std::optional<double> unitFactor(StringRef unit, Quantity kind) {
  if (unit.empty())
    return 1.0;
  switch (kind) {
  case Quantity::Bytes:
    return byteUnitFactor(unit, /*bits=*/false);
  case Quantity::Bandwidth:
    if (!unit.consume_back("/s") && !unit.consume_back("ps"))
      return std::nullopt;
    return byteUnitFactor(unit, /*bits=*/true);
  case Quantity::Seconds:
    if (unit == "s")
      return 1.0;
    if (unit == "ms")
      return 1e-3;
    if (unit == "us" || unit == "\xC2\xB5s" /* µs */)
      return 1e-6;
    if (unit == "ns")
      return 1e-9;
    return std::nullopt;
  case Quantity::Flops: {
    if (!unit.consume_back_insensitive("flops") &&
        !unit.consume_back_insensitive("flop/s"))
      return std::nullopt;
    return prefixFactor(unit, /*binary=*/false, /*caseInsensitive=*/true);
  }
  }
  return std::nullopt;
}

const char *expectedUnits(Quantity kind) {
  switch (kind) {
  case Quantity::Bytes:
    return "B, KB, MB, GB, TB, KiB, MiB, GiB or TiB";
  case Quantity::Bandwidth:
    return "B/s, MB/s, GB/s, TB/s, GiB/s, Gb/s, Gbit/s or Gbps";
  case Quantity::Seconds:
    return "s, ms, us or ns";
  case Quantity::Flops:
    return "FLOPS, GFLOPS, TFLOPS, PFLOPS or TFLOP/s";
  }
  return "";
}

const char *exampleQuantity(Quantity kind) {
  switch (kind) {
  case Quantity::Bytes:
    return "\"80GB\"";
  case Quantity::Bandwidth:
    return "\"900GB/s\"";
  case Quantity::Seconds:
    return "\"5us\"";
  case Quantity::Flops:
    return "\"989TFLOPS\"";
  }
  return "";
}

//===----------------------------------------------------------------------===//
// JSON
//===----------------------------------------------------------------------===//

/// Describes a JSON value for "got ..." in messages.
std::string describe(const json::Value &v) {
  switch (v.kind()) {
  case json::Value::Null:
    return "null";
  case json::Value::Boolean:
    return "a boolean";
  case json::Value::Number: {
    // Shortest form that reads back, but whole numbers in full ("100000",
    // not "1e+05").
    double d = *v.getAsNumber();
    if (std::abs(d) < 1e15 && d == std::trunc(d))
      return std::to_string(static_cast<int64_t>(d));
    char buffer[32];
    std::to_chars_result r = std::to_chars(buffer, buffer + sizeof(buffer), d);
    return std::string(buffer, r.ptr);
  }
  case json::Value::String:
    return ("\"" + *v.getAsString() + "\"").str();
  case json::Value::Array:
    return "an array";
  case json::Value::Object:
    return "an object";
  }
  return "a value";
}

std::string field(StringRef path, StringRef name) {
  return path.empty() ? name.str() : (path + "." + name).str();
}

std::string element(StringRef path, size_t index) {
  return (path + "[" + Twine(index) + "]").str();
}

/// Reads the schema of docs/cluster.md into a Cluster. Every error names the
/// file and the JSON path of the offending value.
class JSONReader {
public:
  explicit JSONReader(StringRef fileName) : fileName(fileName) {}

  Expected<Cluster> read(const json::Value &root);

private:
  Error error(StringRef path, const Twine &message) const {
    std::string where = fileName.empty() ? "" : fileName + ": ";
    if (!path.empty())
      where += (path + ": ").str();
    return makeError(where + message);
  }

  /// Rejects fields outside `allowed` (typos would otherwise be ignored).
  Error checkFields(const json::Object &obj, StringRef path,
                    ArrayRef<StringRef> allowed) const;
  Expected<const json::Object *> getObject(const json::Value &v,
                                           StringRef path) const;
  Expected<const json::Array *> getArray(const json::Value &v,
                                         StringRef path) const;
  Expected<StringRef> getString(const json::Value &v, StringRef path) const;
  /// A number in base units or a string with a unit; `allowZero` for
  /// latencies.
  /// A positive number of processors (shared_processors, processors).
  Expected<double> getProcessors(const json::Value &v, StringRef path) const;
  Expected<double> getQuantity(const json::Value &v, StringRef path,
                               Quantity kind, bool allowZero = false) const;
  Expected<int> getDevice(const json::Value &v, StringRef path) const;

  Error readNode(const json::Value &v, StringRef path);
  Error readDeviceEntry(const json::Object &entry, StringRef path, int node,
                        int &indexInNode);
  /// The "bandwidth" and "latency" fields of `obj`.
  Expected<LinkParams> readLinkFields(const json::Object &obj,
                                      StringRef path) const;
  /// An object of exactly those two fields.
  Expected<LinkParams> readLinkParams(const json::Value &v,
                                      StringRef path) const;
  Error readLinks(const json::Value &v, StringRef path);
  Error readVirtualWorkers(const json::Value &v, StringRef path);

  std::string fileName;
  Cluster cluster;
  /// Where each node and device name was defined, for duplicate errors.
  StringMap<std::string> nodePaths, devicePaths;
};

Error JSONReader::checkFields(const json::Object &obj, StringRef path,
                              ArrayRef<StringRef> allowed) const {
  // json::Object is a hash map: sort to report the same field every time.
  SmallVector<StringRef> unknown;
  for (const auto &kv : obj)
    if (!is_contained(allowed, StringRef(kv.first)))
      unknown.push_back(kv.first);
  if (unknown.empty())
    return Error::success();
  llvm::sort(unknown);
  return error(field(path, unknown.front()),
               "unknown field (expected one of: " + join(allowed, ", ") + ")");
}

Expected<const json::Object *> JSONReader::getObject(const json::Value &v,
                                                     StringRef path) const {
  if (const json::Object *obj = v.getAsObject())
    return obj;
  return error(path, "expected an object, got " + describe(v));
}

Expected<const json::Array *> JSONReader::getArray(const json::Value &v,
                                                   StringRef path) const {
  if (const json::Array *arr = v.getAsArray())
    return arr;
  return error(path, "expected an array, got " + describe(v));
}

Expected<StringRef> JSONReader::getString(const json::Value &v,
                                          StringRef path) const {
  std::optional<StringRef> s = v.getAsString();
  if (!s)
    return error(path, "expected a string, got " + describe(v));
  if (s->empty())
    return error(path, "expected a non-empty string");
  return *s;
}

Expected<double> JSONReader::getQuantity(const json::Value &v, StringRef path,
                                         Quantity kind, bool allowZero) const {
  const char *expected = allowZero ? "expected a non-negative number"
                                   : "expected a positive number";
  double value;
  if (std::optional<double> n = v.getAsNumber()) {
    value = *n;
  } else if (std::optional<StringRef> s = v.getAsString()) {
    Expected<double> q = parseQuantity(*s, kind);
    if (!q)
      return error(path, toString(q.takeError()));
    value = *q;
  } else {
    return error(path, Twine(expected) + " or a string such as " +
                           exampleQuantity(kind) + ", got " + describe(v));
  }
  if (!std::isfinite(value) || value < 0 || (!allowZero && value == 0))
    return error(path, Twine(expected) + ", got " + describe(v));
  return value;
}

Expected<double> JSONReader::getProcessors(const json::Value &v,
                                           StringRef path) const {
  std::optional<double> n = v.getAsNumber();
  if (!n || !std::isfinite(*n) || *n <= 0 || *n > 1e6)
    return error(path, "expected a number of processors in (0, 1e6], got " +
                           describe(v));
  return *n;
}

Expected<int> JSONReader::getDevice(const json::Value &v,
                                    StringRef path) const {
  Expected<StringRef> name = getString(v, path);
  if (!name)
    return name.takeError();
  int index = cluster.findDevice(*name);
  if (index < 0)
    return error(path, "unknown device '" + *name + "'");
  return index;
}

Expected<Cluster> JSONReader::read(const json::Value &root) {
  const json::Object *obj = root.getAsObject();
  if (!obj)
    return error("", "expected a JSON object at the top level, got " +
                         describe(root));
  if (Error e = checkFields(*obj, "", {"nodes", "links", "virtual_workers"}))
    return std::move(e);

  const json::Value *nodes = obj->get("nodes");
  if (!nodes)
    return error("nodes", "missing (a cluster needs at least one node)");
  Expected<const json::Array *> nodeArray = getArray(*nodes, "nodes");
  if (!nodeArray)
    return nodeArray.takeError();
  if ((*nodeArray)->empty())
    return error("nodes", "expected at least one node");
  for (size_t i = 0; i < (*nodeArray)->size(); ++i)
    if (Error e = readNode((**nodeArray)[i], element("nodes", i)))
      return std::move(e);

  // Defaults first: explicit settings and pairs then override them.
  setDefaultInterNodeLinks(cluster);
  const json::Value *links = obj->get("links");
  bool intraGiven = false;
  if (links)
    if (const json::Object *linkObj = links->getAsObject())
      intraGiven = linkObj->get("intra_node") != nullptr;
  if (!intraGiven)
    setDefaultIntraNodeLinks(cluster);
  else if (llvm::none_of(cluster.nodeIntraLinks,
                         [](const std::optional<LinkParams> &l) { return l; }))
    cluster.nodeIntraLinks.clear();
  if (links)
    if (Error e = readLinks(*links, "links"))
      return std::move(e);

  if (const json::Value *workers = obj->get("virtual_workers"))
    if (Error e = readVirtualWorkers(*workers, "virtual_workers"))
      return std::move(e);
  return std::move(cluster);
}

Error JSONReader::readNode(const json::Value &v, StringRef path) {
  Expected<const json::Object *> obj = getObject(v, path);
  if (!obj)
    return obj.takeError();
  if (Error e = checkFields(
          **obj, path, {"name", "devices", "intra_node", "shared_processors"}))
    return e;

  int node = cluster.nodes.size();
  std::string name = ("node" + Twine(node)).str();
  if (const json::Value *nameValue = (*obj)->get("name")) {
    Expected<StringRef> s = getString(*nameValue, field(path, "name"));
    if (!s)
      return s.takeError();
    name = s->str();
  }
  auto [it, inserted] = nodePaths.try_emplace(name, path.str());
  if (!inserted)
    return error(field(path, "name"), "duplicate node name '" + name +
                                          "' (also " + it->second + ")");
  cluster.nodes.push_back(name);
  cluster.nodeIntraLinks.emplace_back();
  if (const json::Value *intra = (*obj)->get("intra_node")) {
    Expected<LinkParams> p = readLinkParams(*intra, field(path, "intra_node"));
    if (!p)
      return p.takeError();
    cluster.nodeIntraLinks.back() = *p;
  }
  if (const json::Value *shared = (*obj)->get("shared_processors")) {
    Expected<double> n =
        getProcessors(*shared, field(path, "shared_processors"));
    if (!n)
      return n.takeError();
    cluster.nodeSharedProcessors.resize(cluster.nodes.size(), 0);
    cluster.nodeSharedProcessors.back() = *n;
  }

  std::string devicesPath = field(path, "devices");
  const json::Value *devices = (*obj)->get("devices");
  if (!devices)
    return error(devicesPath, "missing (a node needs at least one device)");
  Expected<const json::Array *> arr = getArray(*devices, devicesPath);
  if (!arr)
    return arr.takeError();
  if ((*arr)->empty())
    return error(devicesPath, "expected at least one device");
  int indexInNode = 0;
  for (size_t i = 0; i < (*arr)->size(); ++i) {
    std::string entryPath = element(devicesPath, i);
    Expected<const json::Object *> entry = getObject((**arr)[i], entryPath);
    if (!entry)
      return entry.takeError();
    if (Error e = readDeviceEntry(**entry, entryPath, node, indexInNode))
      return e;
  }
  return Error::success();
}

Error JSONReader::readDeviceEntry(const json::Object &entry, StringRef path,
                                  int node, int &indexInNode) {
  if (Error e = checkFields(entry, path,
                            {"name", "kind", "count", "peak_flops",
                             "memory_bytes", "memory_bandwidth", "processors"}))
    return e;

  const json::Value *kindValue = entry.get("kind");
  if (!kindValue)
    return error(field(path, "kind"),
                 "missing (a preset such as \"H100\" or a custom kind)");
  Expected<StringRef> kind = getString(*kindValue, field(path, "kind"));
  if (!kind)
    return kind.takeError();
  const Preset *preset = lookupPreset(*kind);
  Device device;
  if (preset) {
    device = makeDevice(*preset);
  } else {
    device.kind = kind->str();
    // Without any numbers an unknown kind is most likely a misspelt preset.
    if (*kind != "custom" && !entry.get("peak_flops") &&
        !entry.get("memory_bytes") && !entry.get("memory_bandwidth"))
      return error(field(path, "kind"),
                   "unknown device kind '" + *kind +
                       "' (presets: " + presetList() +
                       "); a custom kind needs peak_flops, memory_bytes and "
                       "memory_bandwidth");
  }
  auto missing = [&](StringRef name) {
    return error(field(path, name),
                 "missing (required for custom kind '" + *kind + "')");
  };

  int64_t count = 1;
  if (const json::Value *countValue = entry.get("count")) {
    std::optional<int64_t> n = countValue->getAsInteger();
    if (!n || *n <= 0)
      return error(field(path, "count"),
                   "expected a positive integer, got " + describe(*countValue));
    if (*n > kMaxCount)
      return error(field(path, "count"), "count " + Twine(*n) +
                                             " exceeds the limit of " +
                                             Twine(kMaxCount));
    count = *n;
  }

  if (const json::Value *flops = entry.get("peak_flops")) {
    std::string flopsPath = field(path, "peak_flops");
    Expected<const json::Object *> obj = getObject(*flops, flopsPath);
    if (!obj)
      return obj.takeError();
    if (Error e = checkFields(**obj, flopsPath, {"f32", "f16", "f64"}))
      return e;
    struct {
      const char *key;
      double *value;
    } precisions[] = {{"f32", &device.peakFlopsF32},
                      {"f16", &device.peakFlopsF16},
                      {"f64", &device.peakFlopsF64}};
    for (auto &p : precisions)
      if (const json::Value *v = (*obj)->get(p.key)) {
        Expected<double> q =
            getQuantity(*v, field(flopsPath, p.key), Quantity::Flops);
        if (!q)
          return q.takeError();
        *p.value = *q;
      }
  }
  if (!preset) {
    if (!device.peakFlopsF32)
      return missing("peak_flops.f32");
    // Defaults for custom kinds: fp16 GEMMs run at least at the fp32 rate;
    // fp64 at the 1:32 ratio of consumer parts (give it for others).
    if (!device.peakFlopsF16)
      device.peakFlopsF16 = device.peakFlopsF32;
    if (!device.peakFlopsF64)
      device.peakFlopsF64 = device.peakFlopsF32 / 32;
  }

  if (const json::Value *v = entry.get("memory_bytes")) {
    Expected<double> q =
        getQuantity(*v, field(path, "memory_bytes"), Quantity::Bytes);
    if (!q)
      return q.takeError();
    if (*q >= 0x1p62)
      return error(field(path, "memory_bytes"), "too large: " + describe(*v));
    device.memoryBytes = std::llround(*q);
    if (device.memoryBytes <= 0)
      return error(field(path, "memory_bytes"),
                   "expected at least one byte, got " + describe(*v));
  } else if (!preset) {
    return missing("memory_bytes");
  }
  if (const json::Value *v = entry.get("memory_bandwidth")) {
    Expected<double> q =
        getQuantity(*v, field(path, "memory_bandwidth"), Quantity::Bandwidth);
    if (!q)
      return q.takeError();
    device.memoryBandwidth = *q;
  } else if (!preset) {
    return missing("memory_bandwidth");
  }

  if (const json::Value *v = entry.get("processors")) {
    Expected<double> n = getProcessors(*v, field(path, "processors"));
    if (!n)
      return n.takeError();
    device.processors = *n;
  }

  std::optional<std::string> explicitName;
  if (const json::Value *nameValue = entry.get("name")) {
    Expected<StringRef> s = getString(*nameValue, field(path, "name"));
    if (!s)
      return s.takeError();
    if (count != 1)
      return error(field(path, "name"),
                   "a named device entry must have count 1, got " +
                       Twine(count));
    explicitName = s->str();
  }

  device.node = node;
  for (int64_t i = 0; i < count; ++i, ++indexInNode) {
    device.name =
        explicitName
            ? *explicitName
            : (cluster.nodes[node] + "/gpu" + Twine(indexInNode)).str();
    auto [it, inserted] = devicePaths.try_emplace(device.name, path.str());
    if (!inserted)
      return error(explicitName ? field(path, "name") : path.str(),
                   "duplicate device name '" + device.name + "' (also " +
                       it->second + ")");
    cluster.devices.push_back(device);
  }
  return Error::success();
}

Expected<LinkParams> JSONReader::readLinkFields(const json::Object &obj,
                                                StringRef path) const {
  LinkParams params;
  const json::Value *bandwidth = obj.get("bandwidth");
  if (!bandwidth)
    return error(field(path, "bandwidth"), "missing");
  Expected<double> bw =
      getQuantity(*bandwidth, field(path, "bandwidth"), Quantity::Bandwidth);
  if (!bw)
    return bw.takeError();
  params.bandwidth = *bw;
  const json::Value *latency = obj.get("latency");
  if (!latency)
    return error(field(path, "latency"), "missing");
  Expected<double> lat = getQuantity(*latency, field(path, "latency"),
                                     Quantity::Seconds, /*allowZero=*/true);
  if (!lat)
    return lat.takeError();
  params.latency = *lat;
  return params;
}

Expected<LinkParams> JSONReader::readLinkParams(const json::Value &v,
                                                StringRef path) const {
  Expected<const json::Object *> obj = getObject(v, path);
  if (!obj)
    return obj.takeError();
  if (Error e = checkFields(**obj, path, {"bandwidth", "latency"}))
    return std::move(e);
  return readLinkFields(**obj, path);
}

Error JSONReader::readLinks(const json::Value &v, StringRef path) {
  Expected<const json::Object *> obj = getObject(v, path);
  if (!obj)
    return obj.takeError();
  if (Error e = checkFields(**obj, path, {"intra_node", "inter_node", "pairs"}))
    return e;
  if (const json::Value *intra = (*obj)->get("intra_node")) {
    Expected<LinkParams> p = readLinkParams(*intra, field(path, "intra_node"));
    if (!p)
      return p.takeError();
    cluster.intraNodeBandwidth = p->bandwidth;
    cluster.intraNodeLatency = p->latency;
  }
  if (const json::Value *inter = (*obj)->get("inter_node")) {
    Expected<LinkParams> p = readLinkParams(*inter, field(path, "inter_node"));
    if (!p)
      return p.takeError();
    cluster.interNodeBandwidth = p->bandwidth;
    cluster.interNodeLatency = p->latency;
  }
  const json::Value *pairs = (*obj)->get("pairs");
  if (!pairs)
    return Error::success();
  std::string pairsPath = field(path, "pairs");
  Expected<const json::Array *> arr = getArray(*pairs, pairsPath);
  if (!arr)
    return arr.takeError();
  // Pairs seen so far, by (min, max) device index, to their path.
  std::map<std::pair<int, int>, std::string> seen;
  for (size_t i = 0; i < (*arr)->size(); ++i) {
    std::string pairPath = element(pairsPath, i);
    Expected<const json::Object *> pairObj = getObject((**arr)[i], pairPath);
    if (!pairObj)
      return pairObj.takeError();
    if (Error e = checkFields(**pairObj, pairPath,
                              {"a", "b", "bandwidth", "latency"}))
      return e;
    int ends[2];
    for (int k = 0; k < 2; ++k) {
      StringRef key = k ? "b" : "a";
      const json::Value *end = (*pairObj)->get(key);
      if (!end)
        return error(field(pairPath, key), "missing (a device name)");
      Expected<int> d = getDevice(*end, field(pairPath, key));
      if (!d)
        return d.takeError();
      ends[k] = *d;
    }
    if (ends[0] == ends[1])
      return error(field(pairPath, "b"),
                   "a link needs two different devices, got '" +
                       cluster.devices[ends[0]].name + "' twice");
    std::pair<int, int> key(std::min(ends[0], ends[1]),
                            std::max(ends[0], ends[1]));
    auto [it, inserted] = seen.try_emplace(key, pairPath);
    if (!inserted)
      return error(pairPath, "duplicate link between '" +
                                 cluster.devices[ends[0]].name + "' and '" +
                                 cluster.devices[ends[1]].name + "' (also " +
                                 it->second + ")");
    Expected<LinkParams> p = readLinkFields(**pairObj, pairPath);
    if (!p)
      return p.takeError();
    cluster.links.push_back({ends[0], ends[1], p->bandwidth, p->latency});
  }
  return Error::success();
}

Error JSONReader::readVirtualWorkers(const json::Value &v, StringRef path) {
  Expected<const json::Array *> workers = getArray(v, path);
  if (!workers)
    return workers.takeError();
  // An empty list is not "absent": the docs leave the field out for that.
  if ((*workers)->empty())
    return error(path, "expected at least one worker (leave the field out "
                       "for one worker of every device)");
  std::vector<std::string> usedAt(cluster.devices.size());
  for (size_t w = 0; w < (*workers)->size(); ++w) {
    std::string workerPath = element(path, w);
    Expected<const json::Array *> names = getArray((**workers)[w], workerPath);
    if (!names)
      return names.takeError();
    if ((*names)->empty())
      return error(workerPath, "expected at least one device");
    std::vector<int> worker;
    for (size_t i = 0; i < (*names)->size(); ++i) {
      std::string devicePath = element(workerPath, i);
      Expected<int> d = getDevice((**names)[i], devicePath);
      if (!d)
        return d.takeError();
      if (!usedAt[*d].empty())
        return error(devicePath, "device '" + cluster.devices[*d].name +
                                     "' is already in " + usedAt[*d]);
      usedAt[*d] = devicePath;
      worker.push_back(*d);
    }
    cluster.virtualWorkers.push_back(std::move(worker));
  }
  return Error::success();
}

} // namespace

//===----------------------------------------------------------------------===//
// Public API
//===----------------------------------------------------------------------===//

int Cluster::findDevice(StringRef name) const {
  for (int i = 0, e = numDevices(); i < e; ++i)
    if (devices[i].name == name)
      return i;
  return -1;
}

const Link *Cluster::findLink(int a, int b) const {
  for (const Link &l : links)
    if ((l.a == a && l.b == b) || (l.a == b && l.b == a))
      return &l;
  return nullptr;
}

LinkParams Cluster::link(int a, int b) const {
  assert(a >= 0 && a < numDevices() && b >= 0 && b < numDevices() &&
         "device index out of range");
  if (a == b)
    return {std::numeric_limits<double>::infinity(), 0};
  if (const Link *l = findLink(a, b))
    return {l->bandwidth, l->latency};
  if (!sameNode(a, b))
    return {interNodeBandwidth, interNodeLatency};
  size_t node = devices[a].node;
  if (node < nodeIntraLinks.size() && nodeIntraLinks[node])
    return *nodeIntraLinks[node];
  return {intraNodeBandwidth, intraNodeLatency};
}

double Cluster::bandwidth(int a, int b) const { return link(a, b).bandwidth; }

double Cluster::latency(int a, int b) const { return link(a, b).latency; }

double Cluster::transferTime(int a, int b, double bytes) const {
  if (a == b)
    return 0;
  LinkParams l = link(a, b);
  return l.latency + bytes / l.bandwidth;
}

std::optional<Device> getPreset(StringRef kind) {
  if (const Preset *p = lookupPreset(kind))
    return makeDevice(*p);
  return std::nullopt;
}

std::vector<std::string> getPresetNames() {
  std::vector<std::string> names;
  for (const Preset &p : kPresets) {
    names.push_back(p.name);
    if (p.alias)
      names.push_back(p.alias);
  }
  return names;
}

Expected<double> parseQuantity(StringRef text, Quantity kind) {
  StringRef s = text.trim();
  size_t length = numberLength(s);
  if (!length)
    return makeError("invalid quantity '" + text +
                     "': expected a number with an optional unit, such as " +
                     exampleQuantity(kind));
  double value;
  if (s.take_front(length).getAsDouble(value) || !std::isfinite(value))
    return makeError("invalid number in '" + text + "'");
  StringRef unit = s.drop_front(length).ltrim();
  std::optional<double> factor = unitFactor(unit, kind);
  if (!factor)
    return makeError("unknown unit '" + unit + "' in '" + text +
                     "' (expected " + expectedUnits(kind) + ")");
  return value * *factor;
}

Expected<Cluster> parseClusterJSON(StringRef text, StringRef fileName) {
  Expected<json::Value> root = pp::limits::parseBoundedJSON(text);
  if (!root)
    return makeError((fileName.empty() ? "" : fileName + ": ") +
                     "invalid JSON " + toString(root.takeError()));
  return JSONReader(fileName).read(*root);
}

Expected<Cluster> parseClusterSpec(StringRef spec, bool sameNode) {
  StringRef trimmed = spec.trim();
  if (trimmed.ends_with_insensitive(".json")) {
    Expected<std::unique_ptr<MemoryBuffer>> buffer =
        pp::limits::readRegularFile(trimmed, pp::limits::kMaxClusterFileBytes,
                                    "cluster file", /*isText=*/true);
    if (!buffer)
      return buffer.takeError();
    return parseClusterJSON((*buffer)->getBuffer(), trimmed);
  }

  auto specError = [&](const Twine &message) {
    return makeError("cluster spec '" + spec + "': " + message);
  };
  if (trimmed.empty())
    return makeError("empty cluster spec (expected e.g. 4xH100, "
                     "2xA100-80,2xV100 or a .json file)");
  SmallVector<StringRef> groups;
  trimmed.split(groups, ',');
  Cluster cluster;
  int indexInNode = 0;
  for (auto [g, rawGroup] : enumerate(groups)) {
    StringRef group = rawGroup.trim();
    if (group.empty())
      return specError("device group " + Twine(g + 1) + " is empty");
    // "<count>x<kind>"; a kind may contain x itself ("RTX2060"), so only a
    // leading number (or sign) before the x makes a count.
    int64_t count = 1;
    StringRef kind = group;
    size_t x = group.find_first_of("xX");
    if (x != StringRef::npos && x > 0 &&
        (isDigit(group[0]) || group[0] == '-' || group[0] == '+')) {
      StringRef countText = group.take_front(x).trim();
      if (countText.getAsInteger(10, count) || count <= 0)
        return specError("bad count '" + countText + "' in '" + group +
                         "' (expected a positive integer)");
      if (count > kMaxCount)
        return specError("count " + Twine(count) + " in '" + group +
                         "' exceeds the limit of " + Twine(kMaxCount));
      kind = group.drop_front(x + 1).trim();
    }
    const Preset *preset = lookupPreset(kind);
    if (!preset)
      return specError("unknown device kind '" + kind +
                       "' (presets: " + presetList() + ")");
    if (!sameNode || cluster.nodes.empty()) {
      cluster.nodes.push_back(("node" + Twine(cluster.nodes.size())).str());
      indexInNode = 0;
    }
    int node = cluster.nodes.size() - 1;
    for (int64_t i = 0; i < count; ++i, ++indexInNode) {
      Device device = makeDevice(*preset);
      device.node = node;
      device.name = (cluster.nodes[node] + "/gpu" + Twine(indexInNode)).str();
      cluster.devices.push_back(std::move(device));
    }
  }
  setDefaultIntraNodeLinks(cluster);
  setDefaultInterNodeLinks(cluster);
  return cluster;
}

json::Value toJSON(const Cluster &cluster) {
  auto linkParams = [](double bandwidth, double latency) {
    return json::Object{{"bandwidth", bandwidth}, {"latency", latency}};
  };
  json::Array nodes;
  for (auto [n, nodeName] : enumerate(cluster.nodes)) {
    json::Array devices;
    for (const Device &d : cluster.devices) {
      if (d.node != static_cast<int>(n))
        continue;
      devices.push_back(
          json::Object{{"name", d.name},
                       {"kind", d.kind},
                       {"peak_flops", json::Object{{"f32", d.peakFlopsF32},
                                                   {"f16", d.peakFlopsF16},
                                                   {"f64", d.peakFlopsF64}}},
                       {"memory_bytes", d.memoryBytes},
                       {"memory_bandwidth", d.memoryBandwidth}});
      if (d.processors != 1)
        devices.back().getAsObject()->try_emplace("processors", d.processors);
    }
    json::Object node{{"name", nodeName}, {"devices", std::move(devices)}};
    if (n < cluster.nodeSharedProcessors.size() &&
        cluster.nodeSharedProcessors[n] > 0)
      node["shared_processors"] = cluster.nodeSharedProcessors[n];
    if (n < cluster.nodeIntraLinks.size() && cluster.nodeIntraLinks[n])
      node["intra_node"] = linkParams(cluster.nodeIntraLinks[n]->bandwidth,
                                      cluster.nodeIntraLinks[n]->latency);
    nodes.push_back(std::move(node));
  }
  json::Array pairs;
  for (const Link &l : cluster.links)
    pairs.push_back(json::Object{{"a", cluster.devices[l.a].name},
                                 {"b", cluster.devices[l.b].name},
                                 {"bandwidth", l.bandwidth},
                                 {"latency", l.latency}});
  json::Object result{
      {"nodes", std::move(nodes)},
      {"links",
       json::Object{{"intra_node", linkParams(cluster.intraNodeBandwidth,
                                              cluster.intraNodeLatency)},
                    {"inter_node", linkParams(cluster.interNodeBandwidth,
                                              cluster.interNodeLatency)},
                    {"pairs", std::move(pairs)}}}};
  if (!cluster.virtualWorkers.empty()) {
    json::Array workers;
    for (const std::vector<int> &worker : cluster.virtualWorkers) {
      json::Array names;
      for (int d : worker)
        names.push_back(cluster.devices[d].name);
      workers.push_back(std::move(names));
    }
    result["virtual_workers"] = std::move(workers);
  }
  return result;
}

llvm::Expected<std::vector<std::vector<int>>>
groupVirtualWorkers(const Cluster &cluster, llvm::StringRef policy) {
  auto fail = [&](const llvm::Twine &message) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "virtual-workers=" + policy + ": " +
                                       message);
  };
  std::vector<std::vector<int>> workers;
  if (policy == "np") {
    workers.resize(cluster.nodes.size());
    for (int d = 0; d < cluster.numDevices(); ++d)
      workers[cluster.devices[d].node].push_back(d);
    llvm::erase_if(workers, [](const auto &w) { return w.empty(); });
    return workers;
  }
  if (policy != "ed" && policy != "hd")
    return fail("unknown policy (np, ed, hd or auto)");
  // Devices by kind, kinds fastest first (ties: first seen).
  std::vector<std::string> kinds;
  std::map<std::string, std::vector<int>> byKind;
  for (int d = 0; d < cluster.numDevices(); ++d) {
    const std::string &kind = cluster.devices[d].kind;
    if (!byKind.count(kind))
      kinds.push_back(kind);
    byKind[kind].push_back(d);
  }
  std::stable_sort(kinds.begin(), kinds.end(),
                   [&](const auto &a, const auto &b) {
                     return cluster.devices[byKind[a].front()].peakFlopsF32 >
                            cluster.devices[byKind[b].front()].peakFlopsF32;
                   });
  size_t count = byKind[kinds.front()].size();
  std::string counts;
  bool equal = true;
  for (const std::string &kind : kinds) {
    counts += (counts.empty() ? "" : ", ") + kind + " " +
              std::to_string(byKind[kind].size());
    equal &= byKind[kind].size() == count;
  }
  if (!equal)
    return fail("every device kind needs as many devices (" + counts + ")");
  if (policy == "ed") {
    workers.resize(count);
    for (size_t i = 0; i < count; ++i)
      for (const std::string &kind : kinds)
        workers[i].push_back(byKind[kind][i]);
    return workers;
  }
  if (count % 2 != 0)
    return fail("every device kind needs an even count to split between "
                "two workers (" +
                counts + ")");
  size_t half = count / 2;
  for (size_t lo = 0, hi = kinds.size() - 1; lo <= hi; ++lo, --hi) {
    const std::vector<int> &fast = byKind[kinds[lo]];
    const std::vector<int> &slow = byKind[kinds[hi]];
    for (size_t part = 0; part < 2; ++part) {
      std::vector<int> &worker = workers.emplace_back();
      for (size_t i = 0; i < half; ++i)
        worker.push_back(fast[part * half + i]);
      if (lo != hi)
        for (size_t i = 0; i < half; ++i)
          worker.push_back(slow[part * half + i]);
    }
    if (hi == 0)
      break;
  }
  return workers;
}

} // namespace pp::cluster

pp::cluster::LinkParams
pp::cluster::Cluster::slowestLink(llvm::ArrayRef<int> group) const {
  LinkParams slowest{std::numeric_limits<double>::infinity(), 0};
  for (int a : group)
    for (int b : group)
      if (a != b) {
        slowest.bandwidth = std::min(slowest.bandwidth, bandwidth(a, b));
        slowest.latency = std::max(slowest.latency, latency(a, b));
      }
  return slowest;
}

void pp::cluster::Cluster::appendPlanningKey(llvm::ArrayRef<int> group,
                                             std::string &key) const {
  // Bit patterns: values that differ in the last bit are different keys.
  auto bits = [&](double value) {
    key += std::to_string(llvm::bit_cast<uint64_t>(value)) + ',';
  };
  for (int index : group) {
    const Device &d = devices[index];
    key += '|' + d.kind + ',' + std::to_string(d.memoryBytes) + ',';
    for (double value :
         {d.peakFlopsF32, d.peakFlopsF16, d.peakFlopsF64, d.memoryBandwidth})
      bits(value);
  }
  for (int a : group)
    for (int b : group) {
      key += a == b ? "|=" : "|";
      bits(bandwidth(a, b));
      bits(latency(a, b));
    }
}

double pp::cluster::ringAllReduceSeconds(double bytes, unsigned n,
                                         double bandwidth, double latency) {
  if (n <= 1)
    return 0;
  double steps = 2.0 * (n - 1);
  double moved = steps / n * bytes;
  return (bandwidth > 0 && std::isfinite(bandwidth) ? moved / bandwidth : 0) +
         steps * latency;
}
