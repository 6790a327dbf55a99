//===- ClusterTest.cpp - Tests of the cluster description -------*- C++ -*-===//
//
// Presets, "4xH100" spec strings, the JSON schema (valid documents and every
// error), units, and link costs of pp/Cluster/Cluster.h.
//
//===----------------------------------------------------------------------===//

#include "pp/Cluster/Cluster.h"
#include "pp/Support/InputLimits.h"

#include "llvm/ADT/ScopeExit.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FileUtilities.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include <sys/stat.h>

using namespace pp::cluster;

namespace {

constexpr double kGiB = 1024.0 * 1024 * 1024;

/// The cluster, failing the test on an error.
Cluster parseOK(llvm::Expected<Cluster> result) {
  if (!result) {
    ADD_FAILURE() << llvm::toString(result.takeError());
    return Cluster();
  }
  return std::move(*result);
}

/// The error message, failing the test on success.
std::string errorOf(llvm::Expected<Cluster> result) {
  if (result) {
    ADD_FAILURE() << "expected an error";
    return "";
  }
  return llvm::toString(result.takeError());
}

Cluster parseJSON(llvm::StringRef text) {
  return parseOK(parseClusterJSON(text, "test.json"));
}

std::string jsonError(llvm::StringRef text) {
  return errorOf(parseClusterJSON(text, "test.json"));
}

std::string inputPath(llvm::StringRef name) {
  return (llvm::Twine(PP_CLUSTER_INPUTS_DIR) + "/" + name).str();
}

//===----------------------------------------------------------------------===//
// Presets
//===----------------------------------------------------------------------===//

TEST(ClusterPresets, EveryNameResolvesToPlausibleNumbers) {
  std::vector<std::string> names = getPresetNames();
  for (const char *expected :
       {"V100", "V100-16", "V100-32", "A100-40", "A100-80", "H100", "H200",
        "RTX2060", "TITANV", "P4000", "T4", "L4", "A10", "TITANRTX"})
    EXPECT_NE(std::find(names.begin(), names.end(), expected), names.end())
        << expected;
  for (const std::string &name : names) {
    SCOPED_TRACE(name);
    std::optional<Device> d = getPreset(name);
    ASSERT_TRUE(d);
    EXPECT_TRUE(d->name.empty());
    EXPECT_EQ(d->node, 0);
    EXPECT_GT(d->peakFlopsF32, 1e12);
    EXPECT_GE(d->peakFlopsF16, d->peakFlopsF32);
    EXPECT_GT(d->peakFlopsF64, 0);
    EXPECT_LE(d->peakFlopsF64, d->peakFlopsF32);
    EXPECT_GE(d->memoryBytes, 6 * kGiB);
    EXPECT_GT(d->memoryBandwidth, 200e9);
  }
}

TEST(ClusterPresets, DatasheetNumbers) {
  std::optional<Device> h100 = getPreset("H100");
  ASSERT_TRUE(h100);
  EXPECT_EQ(h100->kind, "H100");
  EXPECT_DOUBLE_EQ(h100->peakFlopsF32, 67e12);
  EXPECT_DOUBLE_EQ(h100->peakFlopsF16, 989e12);
  EXPECT_EQ(h100->memoryBytes, int64_t(80) << 30);
  EXPECT_DOUBLE_EQ(h100->memoryBandwidth, 3.35e12);

  std::optional<Device> h200 = getPreset("H200");
  ASSERT_TRUE(h200);
  EXPECT_EQ(h200->memoryBytes, int64_t(141) << 30);
  EXPECT_DOUBLE_EQ(h200->memoryBandwidth, 4.8e12);
  EXPECT_DOUBLE_EQ(h200->peakFlopsF16, h100->peakFlopsF16);

  EXPECT_EQ(getPreset("A100-40")->memoryBytes, int64_t(40) << 30);
  EXPECT_EQ(getPreset("A100-80")->memoryBytes, int64_t(80) << 30);
  EXPECT_DOUBLE_EQ(getPreset("A100-80")->peakFlopsF16, 312e12);
  EXPECT_EQ(getPreset("V100-16")->memoryBytes, int64_t(16) << 30);
  EXPECT_EQ(getPreset("RTX2060")->memoryBytes, int64_t(6) << 30);
  EXPECT_EQ(getPreset("TITANV")->memoryBytes, int64_t(12) << 30);
  EXPECT_EQ(getPreset("P4000")->memoryBytes, int64_t(8) << 30);
  EXPECT_EQ(getPreset("T4")->memoryBytes, int64_t(16) << 30);
  // Pascal has no tensor cores: fp16 GEMMs run at the fp32 rate.
  EXPECT_DOUBLE_EQ(getPreset("P4000")->peakFlopsF16,
                   getPreset("P4000")->peakFlopsF32);
}

TEST(ClusterPresets, AliasesAndCase) {
  std::optional<Device> v100 = getPreset("V100");
  ASSERT_TRUE(v100);
  EXPECT_EQ(v100->kind, "V100-32");
  EXPECT_EQ(v100->memoryBytes, int64_t(32) << 30);
  EXPECT_EQ(getPreset("h100-sxm")->kind, "H100");
  EXPECT_EQ(getPreset("a100-80")->kind, "A100-80");
  EXPECT_EQ(getPreset("TitanV")->kind, "TITANV");
  EXPECT_FALSE(getPreset("H1000"));
  EXPECT_FALSE(getPreset("A100")); // Ambiguous: A100-40 or A100-80.
  EXPECT_FALSE(getPreset(""));
}

//===----------------------------------------------------------------------===//
// Units
//===----------------------------------------------------------------------===//

double quantity(llvm::StringRef text, Quantity kind) {
  llvm::Expected<double> q = parseQuantity(text, kind);
  if (!q) {
    ADD_FAILURE() << llvm::toString(q.takeError());
    return NAN;
  }
  return *q;
}

std::string quantityError(llvm::StringRef text, Quantity kind) {
  llvm::Expected<double> q = parseQuantity(text, kind);
  if (q) {
    ADD_FAILURE() << "expected an error for '" << text.str() << "'";
    return "";
  }
  return llvm::toString(q.takeError());
}

TEST(ClusterUnits, Bytes) {
  EXPECT_DOUBLE_EQ(quantity("80GB", Quantity::Bytes), 80e9);
  EXPECT_DOUBLE_EQ(quantity("80 GB", Quantity::Bytes), 80e9);
  EXPECT_DOUBLE_EQ(quantity("16GiB", Quantity::Bytes), 16 * kGiB);
  EXPECT_DOUBLE_EQ(quantity("512MiB", Quantity::Bytes), 512.0 * (1 << 20));
  EXPECT_DOUBLE_EQ(quantity("1.5kB", Quantity::Bytes), 1500);
  EXPECT_DOUBLE_EQ(quantity("2TB", Quantity::Bytes), 2e12);
  EXPECT_DOUBLE_EQ(quantity("1024", Quantity::Bytes), 1024);
  EXPECT_DOUBLE_EQ(quantity("1e9B", Quantity::Bytes), 1e9);
  EXPECT_DOUBLE_EQ(quantity(" 8 GB ", Quantity::Bytes), 8e9);
}

TEST(ClusterUnits, Bandwidth) {
  EXPECT_DOUBLE_EQ(quantity("900GB/s", Quantity::Bandwidth), 900e9);
  EXPECT_DOUBLE_EQ(quantity("200Gb/s", Quantity::Bandwidth), 25e9);
  EXPECT_DOUBLE_EQ(quantity("200Gbit/s", Quantity::Bandwidth), 25e9);
  EXPECT_DOUBLE_EQ(quantity("56Gbps", Quantity::Bandwidth), 7e9);
  EXPECT_DOUBLE_EQ(quantity("4.8TB/s", Quantity::Bandwidth), 4.8e12);
  EXPECT_DOUBLE_EQ(quantity("1GiB/s", Quantity::Bandwidth), kGiB);
  EXPECT_DOUBLE_EQ(quantity("3e10", Quantity::Bandwidth), 3e10);
}

TEST(ClusterUnits, SecondsAndFlops) {
  EXPECT_DOUBLE_EQ(quantity("5us", Quantity::Seconds), 5e-6);
  EXPECT_DOUBLE_EQ(quantity("5\xC2\xB5s", Quantity::Seconds), 5e-6);
  EXPECT_DOUBLE_EQ(quantity("1.5ms", Quantity::Seconds), 1.5e-3);
  EXPECT_DOUBLE_EQ(quantity("20ns", Quantity::Seconds), 20e-9);
  EXPECT_DOUBLE_EQ(quantity("2s", Quantity::Seconds), 2);
  EXPECT_DOUBLE_EQ(quantity("0", Quantity::Seconds), 0);
  EXPECT_DOUBLE_EQ(quantity("989TFLOPS", Quantity::Flops), 989e12);
  EXPECT_DOUBLE_EQ(quantity("19.5 TFLOP/s", Quantity::Flops), 19.5e12);
  EXPECT_DOUBLE_EQ(quantity("500gflops", Quantity::Flops), 500e9);
  EXPECT_DOUBLE_EQ(quantity("1PFLOPS", Quantity::Flops), 1e15);
  EXPECT_DOUBLE_EQ(quantity("1e15FLOPS", Quantity::Flops), 1e15);
  // The sign is kept; the JSON reader checks ranges.
  EXPECT_DOUBLE_EQ(quantity("-5us", Quantity::Seconds), -5e-6);
}

TEST(ClusterUnits, Errors) {
  EXPECT_EQ(quantityError("80XB", Quantity::Bytes),
            "unknown unit 'XB' in '80XB' (expected B, KB, MB, GB, TB, KiB, "
            "MiB, GiB or TiB)");
  EXPECT_EQ(quantityError("GB", Quantity::Bytes),
            "invalid quantity 'GB': expected a number with an optional unit, "
            "such as \"80GB\"");
  EXPECT_EQ(quantityError("", Quantity::Seconds),
            "invalid quantity '': expected a number with an optional unit, "
            "such as \"5us\"");
  // Sizes are bytes; bits only make sense for rates.
  EXPECT_NE(quantityError("80Gb", Quantity::Bytes).find("unknown unit 'Gb'"),
            std::string::npos);
  // A rate needs "/s".
  EXPECT_NE(quantityError("900GB", Quantity::Bandwidth)
                .find("unknown unit 'GB' in '900GB' (expected B/s"),
            std::string::npos);
  EXPECT_NE(quantityError("80GB/s", Quantity::Bytes).find("unknown unit"),
            std::string::npos);
  EXPECT_NE(quantityError("5 hours", Quantity::Seconds)
                .find("unknown unit 'hours' in '5 hours' (expected s, ms, us "
                      "or ns)"),
            std::string::npos);
  EXPECT_NE(quantityError("989TOPS", Quantity::Flops).find("unknown unit"),
            std::string::npos);
  EXPECT_NE(quantityError("1.2.3GB", Quantity::Bytes).find("unknown unit"),
            std::string::npos);
  EXPECT_NE(quantityError("0x10GB", Quantity::Bytes).find("unknown unit"),
            std::string::npos);
  EXPECT_NE(quantityError("1e999GB", Quantity::Bytes).find("invalid number"),
            std::string::npos);
}

//===----------------------------------------------------------------------===//
// Spec strings
//===----------------------------------------------------------------------===//

TEST(ClusterSpec, OneNode) {
  Cluster c = parseOK(parseClusterSpec("4xH100"));
  ASSERT_EQ(c.numDevices(), 4);
  ASSERT_EQ(c.nodes.size(), 1u);
  EXPECT_EQ(c.nodes[0], "node0");
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(c.devices[i].name, "node0/gpu" + std::to_string(i));
    EXPECT_EQ(c.devices[i].kind, "H100");
    EXPECT_EQ(c.devices[i].node, 0);
  }
  EXPECT_EQ(c.findDevice("node0/gpu3"), 3);
  EXPECT_EQ(c.findDevice("node0/gpu4"), -1);
  // NVLink4: 900 GB/s in total, 450 GB/s each way.
  EXPECT_DOUBLE_EQ(c.intraNodeBandwidth, 450e9);
  EXPECT_DOUBLE_EQ(c.intraNodeLatency, 2e-6);
  EXPECT_DOUBLE_EQ(c.interNodeBandwidth, 25e9);
  EXPECT_DOUBLE_EQ(c.interNodeLatency, 5e-6);
  EXPECT_TRUE(c.links.empty());
  EXPECT_TRUE(c.nodeIntraLinks.empty());
  EXPECT_TRUE(c.virtualWorkers.empty());
}

TEST(ClusterSpec, SingleDeviceWithoutCount) {
  Cluster c = parseOK(parseClusterSpec("H100"));
  ASSERT_EQ(c.numDevices(), 1);
  EXPECT_EQ(c.devices[0].name, "node0/gpu0");
  c = parseOK(parseClusterSpec(" rtx2060 "));
  ASSERT_EQ(c.numDevices(), 1);
  EXPECT_EQ(c.devices[0].kind, "RTX2060");
  // PCIe 3.0 x16 without NVLink.
  EXPECT_DOUBLE_EQ(c.intraNodeBandwidth, 16e9);
  c = parseOK(parseClusterSpec("2XRTX2060"));
  EXPECT_EQ(c.numDevices(), 2);
  c = parseOK(parseClusterSpec("3 x T4"));
  EXPECT_EQ(c.numDevices(), 3);
}

TEST(ClusterSpec, OneNodePerGroup) {
  Cluster c = parseOK(parseClusterSpec("2xA100-80,2xV100"));
  ASSERT_EQ(c.numDevices(), 4);
  ASSERT_EQ(c.nodes.size(), 2u);
  EXPECT_EQ(c.devices[1].name, "node0/gpu1");
  EXPECT_EQ(c.devices[2].name, "node1/gpu0");
  EXPECT_EQ(c.devices[2].kind, "V100-32");
  EXPECT_EQ(c.devices[2].node, 1);
  EXPECT_FALSE(c.sameNode(1, 2));
  // Each node keeps its own NVLink generation; the default is the slower.
  EXPECT_DOUBLE_EQ(c.intraNodeBandwidth, 150e9);
  EXPECT_DOUBLE_EQ(c.bandwidth(0, 1), 300e9);
  EXPECT_DOUBLE_EQ(c.bandwidth(2, 3), 150e9);
  EXPECT_DOUBLE_EQ(c.bandwidth(1, 2), 25e9);
  EXPECT_DOUBLE_EQ(c.latency(1, 2), 5e-6);
}

TEST(ClusterSpec, SameNodeMixesKindsOverPCIe) {
  Cluster c = parseOK(parseClusterSpec("2xA100-80,2xV100", /*sameNode=*/true));
  ASSERT_EQ(c.nodes.size(), 1u);
  EXPECT_EQ(c.devices[3].name, "node0/gpu3");
  EXPECT_TRUE(c.sameNode(0, 3));
  // NVLink joins only like GPUs: the slower PCIe (V100, gen 3) remains.
  EXPECT_DOUBLE_EQ(c.bandwidth(0, 3), 16e9);
  EXPECT_DOUBLE_EQ(c.latency(0, 3), 3e-6);
}

TEST(ClusterSpec, Errors) {
  EXPECT_EQ(errorOf(parseClusterSpec("")),
            "empty cluster spec (expected e.g. 4xH100, 2xA100-80,2xV100 or "
            "a .json file)");
  EXPECT_EQ(errorOf(parseClusterSpec("4xH100,,2xV100")),
            "cluster spec '4xH100,,2xV100': device group 2 is empty");
  EXPECT_EQ(errorOf(parseClusterSpec("4xH100,")),
            "cluster spec '4xH100,': device group 2 is empty");
  EXPECT_EQ(errorOf(parseClusterSpec("0xH100")),
            "cluster spec '0xH100': bad count '0' in '0xH100' (expected a "
            "positive integer)");
  EXPECT_EQ(errorOf(parseClusterSpec("-2xH100")),
            "cluster spec '-2xH100': bad count '-2' in '-2xH100' (expected a "
            "positive integer)");
  EXPECT_EQ(errorOf(parseClusterSpec("2.5xH100")),
            "cluster spec '2.5xH100': bad count '2.5' in '2.5xH100' "
            "(expected a positive integer)");
  EXPECT_EQ(errorOf(parseClusterSpec("5000xT4")),
            "cluster spec '5000xT4': count 5000 in '5000xT4' exceeds the "
            "limit of 4096");
  std::string unknown = errorOf(parseClusterSpec("2xH100,4xH1000"));
  EXPECT_EQ(unknown.rfind("cluster spec '2xH100,4xH1000': unknown device "
                          "kind 'H1000' (presets: V100-16, V100-32, V100, ",
                          0),
            0u)
      << unknown;
  EXPECT_NE(unknown.find("RTX2060, P4000)"), std::string::npos) << unknown;
  EXPECT_NE(errorOf(parseClusterSpec("4xA100"))
                .find("unknown device kind "
                      "'A100'"),
            std::string::npos);
  EXPECT_NE(errorOf(parseClusterSpec("4x")).find("unknown device kind ''"),
            std::string::npos);
}

TEST(ClusterSpec, ReadsJSONFiles) {
  Cluster c = parseOK(parseClusterSpec(inputPath("hetpipe.json")));
  EXPECT_EQ(c.numDevices(), 16);

  std::string missing = inputPath("no-such-cluster.json");
  EXPECT_EQ(errorOf(parseClusterSpec(missing)),
            "cannot read cluster file '" + missing +
                "': No such file or directory");

  std::string bad = inputPath("invalid-memory.json");
  EXPECT_EQ(errorOf(parseClusterSpec(bad)),
            bad + ": nodes[0].devices[2].memory_bytes: expected a positive "
                  "number, got -1");
}

TEST(ClusterSpec, ReadsATemporaryJSONFile) {
  llvm::SmallString<128> path;
  ASSERT_FALSE(llvm::sys::fs::createTemporaryFile("cluster", "json", path));
  llvm::FileRemover remover(path);
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(path, ec);
    ASSERT_FALSE(ec);
    os << R"({"nodes": [{"devices": [{"kind": "T4", "count": 2}]}]})";
  }
  Cluster c = parseOK(parseClusterSpec(path));
  ASSERT_EQ(c.numDevices(), 2);
  EXPECT_EQ(c.devices[1].name, "node0/gpu1");
}

//===----------------------------------------------------------------------===//
// JSON documents
//===----------------------------------------------------------------------===//

TEST(ClusterJSON, PresetsCountsAndDefaultNames) {
  Cluster c = parseJSON(R"({"nodes": [
      {"devices": [{"kind": "A100-80", "count": 2}, {"kind": "a100-80"}]},
      {"name": "big", "devices": [{"kind": "H200"}]}]})");
  ASSERT_EQ(c.numDevices(), 4);
  EXPECT_EQ(c.nodes, (std::vector<std::string>{"node0", "big"}));
  EXPECT_EQ(c.devices[0].name, "node0/gpu0");
  EXPECT_EQ(c.devices[2].name, "node0/gpu2");
  EXPECT_EQ(c.devices[2].kind, "A100-80");
  EXPECT_EQ(c.devices[3].name, "big/gpu0");
  EXPECT_EQ(c.devices[3].node, 1);
  // Defaults as for spec strings.
  EXPECT_DOUBLE_EQ(c.bandwidth(0, 2), 300e9);
  EXPECT_DOUBLE_EQ(c.bandwidth(0, 3), 25e9);
}

TEST(ClusterJSON, PresetOverridesAndCustomDevices) {
  Cluster c = parseJSON(R"({"nodes": [{"name": "n0", "devices": [
      {"name": "small", "kind": "H100", "memory_bytes": "40GiB",
       "peak_flops": {"f16": "500TFLOPS"}},
      {"kind": "custom", "peak_flops": {"f32": 1e13, "f16": "40 TFLOPS",
                                        "f64": "1TFLOPS"},
       "memory_bytes": "24GB", "memory_bandwidth": "1TB/s"},
      {"kind": "MyAccel", "peak_flops": {"f32": "3.2e13"},
       "memory_bytes": 1e10, "memory_bandwidth": 5e11}]}]})");
  ASSERT_EQ(c.numDevices(), 3);
  const Device &small = c.devices[0];
  EXPECT_EQ(small.name, "small");
  EXPECT_EQ(small.kind, "H100");
  EXPECT_EQ(small.memoryBytes, int64_t(40) << 30);
  EXPECT_DOUBLE_EQ(small.peakFlopsF16, 500e12);
  EXPECT_DOUBLE_EQ(small.peakFlopsF32, 67e12); // Kept from the preset.
  EXPECT_DOUBLE_EQ(small.memoryBandwidth, 3.35e12);

  const Device &custom = c.devices[1];
  EXPECT_EQ(custom.name, "n0/gpu1");
  EXPECT_EQ(custom.kind, "custom");
  EXPECT_DOUBLE_EQ(custom.peakFlopsF32, 1e13);
  EXPECT_DOUBLE_EQ(custom.peakFlopsF16, 40e12);
  EXPECT_DOUBLE_EQ(custom.peakFlopsF64, 1e12);
  EXPECT_EQ(custom.memoryBytes, 24000000000);
  EXPECT_DOUBLE_EQ(custom.memoryBandwidth, 1e12);

  // Omitted precisions of a custom kind: f16 = f32, f64 = f32 / 32.
  const Device &accel = c.devices[2];
  EXPECT_EQ(accel.kind, "MyAccel");
  EXPECT_DOUBLE_EQ(accel.peakFlopsF16, 3.2e13);
  EXPECT_DOUBLE_EQ(accel.peakFlopsF64, 1e12);
  // Mixed kinds in one node: PCIe, the slowest of the node (custom: gen 3).
  EXPECT_DOUBLE_EQ(c.bandwidth(0, 1), 16e9);
}

TEST(ClusterJSON, LinksAndVirtualWorkers) {
  Cluster c = parseOK(parseClusterSpec(inputPath("mixed.json")));
  ASSERT_EQ(c.numDevices(), 5);
  int a0 = c.findDevice("n0/gpu0"), a1 = c.findDevice("n0/gpu1");
  int small = c.findDevice("n0/small");
  int v = c.findDevice("n1/gpu0"), fpga = c.findDevice("n1/fpga");
  ASSERT_TRUE(a0 >= 0 && a1 >= 0 && small >= 0 && v >= 0 && fpga >= 0);
  EXPECT_EQ(c.devices[small].memoryBytes, int64_t(38) << 30);
  EXPECT_DOUBLE_EQ(c.devices[fpga].peakFlopsF64, 5e11);

  // links.intra_node for n0, n1's own intra_node, inter_node between nodes,
  // and the explicit pair over the inter-node default.
  EXPECT_DOUBLE_EQ(c.bandwidth(a0, a1), 300e9);
  EXPECT_DOUBLE_EQ(c.latency(a0, small), 2e-6);
  EXPECT_DOUBLE_EQ(c.bandwidth(v, fpga), 32e9);
  EXPECT_DOUBLE_EQ(c.latency(fpga, v), 3e-6);
  EXPECT_DOUBLE_EQ(c.bandwidth(a1, v), 25e9);
  EXPECT_DOUBLE_EQ(c.bandwidth(a0, v), 12.5e9);
  EXPECT_DOUBLE_EQ(c.bandwidth(v, a0), 12.5e9);
  EXPECT_DOUBLE_EQ(c.latency(v, a0), 8e-6);

  ASSERT_EQ(c.virtualWorkers.size(), 2u);
  EXPECT_EQ(c.virtualWorkers[0], (std::vector<int>{a0, v}));
  EXPECT_EQ(c.virtualWorkers[1], (std::vector<int>{a1, small, fpga}));
}

TEST(ClusterJSON, HetPipeCluster) {
  Cluster c = parseOK(parseClusterSpec(inputPath("hetpipe.json")));
  ASSERT_EQ(c.numDevices(), 16);
  ASSERT_EQ(c.nodes.size(), 4u);
  EXPECT_EQ(c.devices[4].name, "titanrtx/gpu0");
  EXPECT_EQ(c.devices[4].kind, "TITANRTX");
  // 56 Gb/s FDR InfiniBand between nodes, PCIe 3 inside them.
  EXPECT_DOUBLE_EQ(c.bandwidth(0, 4), 7e9);
  EXPECT_DOUBLE_EQ(c.bandwidth(0, 1), 16e9);
  ASSERT_EQ(c.virtualWorkers.size(), 4u);
  for (int w = 0; w < 4; ++w)
    EXPECT_EQ(c.virtualWorkers[w], (std::vector<int>{w, 4 + w, 8 + w, 12 + w}));
}

// HetPipe's allocation policies on its testbed's four kinds (one node
// each, listed slowest-first here to see the fastest-first order):
// RTX2060 6.45, P4000 5.3, TITANV 14.9, TITANRTX 16.3 TFLOP/s.
TEST(VirtualWorkers, HetPipePolicies) {
  auto c = parseClusterSpec("4xRTX2060,4xP4000,4xTITANV,4xTITANRTX");
  ASSERT_TRUE(static_cast<bool>(c)) << llvm::toString(c.takeError());
  auto names = [&](const std::vector<std::vector<int>> &workers) {
    std::vector<std::string> out;
    for (const auto &w : workers) {
      std::string line;
      for (int d : w)
        line += (line.empty() ? "" : " ") + c->devices[d].name;
      out.push_back(line);
    }
    return out;
  };
  auto np = groupVirtualWorkers(*c, "np");
  ASSERT_TRUE(static_cast<bool>(np));
  EXPECT_EQ(names(*np)[0], "node0/gpu0 node0/gpu1 node0/gpu2 node0/gpu3");
  EXPECT_EQ(np->size(), 4u);
  // ED: one of each kind, TITANRTX (node 3) first, P4000 (node 1) last.
  auto ed = groupVirtualWorkers(*c, "ed");
  ASSERT_TRUE(static_cast<bool>(ed));
  ASSERT_EQ(ed->size(), 4u);
  EXPECT_EQ(names(*ed)[0], "node3/gpu0 node2/gpu0 node0/gpu0 node1/gpu0");
  EXPECT_EQ(names(*ed)[3], "node3/gpu3 node2/gpu3 node0/gpu3 node1/gpu3");
  // HD: TITANRTX with P4000, TITANV with RTX2060, two workers per pair.
  auto hd = groupVirtualWorkers(*c, "hd");
  ASSERT_TRUE(static_cast<bool>(hd));
  std::vector<std::string> expected = {
      "node3/gpu0 node3/gpu1 node1/gpu0 node1/gpu1",
      "node3/gpu2 node3/gpu3 node1/gpu2 node1/gpu3",
      "node2/gpu0 node2/gpu1 node0/gpu0 node0/gpu1",
      "node2/gpu2 node2/gpu3 node0/gpu2 node0/gpu3"};
  EXPECT_EQ(names(*hd), expected);
  // Three kinds: the middle one makes two workers of its own.
  auto three = parseClusterSpec("2xTITANV,2xP4000,2xRTX2060");
  ASSERT_TRUE(static_cast<bool>(three));
  auto hd3 = groupVirtualWorkers(*three, "hd");
  ASSERT_TRUE(static_cast<bool>(hd3));
  EXPECT_EQ(hd3->size(), 4u);
  EXPECT_EQ(hd3->at(2).size(), 1u);
}

TEST(VirtualWorkers, PolicyErrorsNameTheCounts) {
  auto c = parseClusterSpec("4xTITANV,2xP4000");
  ASSERT_TRUE(static_cast<bool>(c));
  auto ed = groupVirtualWorkers(*c, "ed");
  ASSERT_FALSE(static_cast<bool>(ed));
  EXPECT_EQ(llvm::toString(ed.takeError()),
            "virtual-workers=ed: every device kind needs as many devices "
            "(TITANV 4, P4000 2)");
  auto odd = parseClusterSpec("3xTITANV,3xP4000");
  ASSERT_TRUE(static_cast<bool>(odd));
  auto hd = groupVirtualWorkers(*odd, "hd");
  ASSERT_FALSE(static_cast<bool>(hd));
  EXPECT_EQ(llvm::toString(hd.takeError()),
            "virtual-workers=hd: every device kind needs an even count to "
            "split between two workers (TITANV 3, P4000 3)");
  auto bad = groupVirtualWorkers(*c, "round-robin");
  ASSERT_FALSE(static_cast<bool>(bad));
  EXPECT_EQ(llvm::toString(bad.takeError()),
            "virtual-workers=round-robin: unknown policy (np, ed, hd or auto)");
}

TEST(ClusterJSON, EveryInputFileParses) {
  for (const char *name :
       {"hetpipe.json", "dgx-h100x2.json", "mixed.json", "shared-cores.json"}) {
    SCOPED_TRACE(name);
    Cluster c = parseOK(parseClusterSpec(inputPath(name)));
    EXPECT_GT(c.numDevices(), 0);
  }
  Cluster dgx = parseOK(parseClusterSpec(inputPath("dgx-h100x2.json")));
  EXPECT_EQ(dgx.numDevices(), 16);
  EXPECT_DOUBLE_EQ(dgx.bandwidth(0, 8), 50e9);
}

/// Field-by-field equality, for round trips.
void expectSameCluster(const Cluster &a, const Cluster &b) {
  ASSERT_EQ(a.numDevices(), b.numDevices());
  for (int i = 0; i < a.numDevices(); ++i) {
    SCOPED_TRACE(a.devices[i].name);
    const Device &x = a.devices[i], &y = b.devices[i];
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.kind, y.kind);
    EXPECT_EQ(x.peakFlopsF32, y.peakFlopsF32);
    EXPECT_EQ(x.peakFlopsF16, y.peakFlopsF16);
    EXPECT_EQ(x.peakFlopsF64, y.peakFlopsF64);
    EXPECT_EQ(x.memoryBytes, y.memoryBytes);
    EXPECT_EQ(x.memoryBandwidth, y.memoryBandwidth);
    EXPECT_EQ(x.node, y.node);
  }
  EXPECT_EQ(a.nodes, b.nodes);
  EXPECT_EQ(a.virtualWorkers, b.virtualWorkers);
  for (int i = 0; i < a.numDevices(); ++i)
    for (int j = 0; j < a.numDevices(); ++j) {
      EXPECT_EQ(a.bandwidth(i, j), b.bandwidth(i, j)) << i << " " << j;
      EXPECT_EQ(a.latency(i, j), b.latency(i, j)) << i << " " << j;
    }
}

TEST(ClusterJSON, RoundTripsThroughToJSON) {
  for (llvm::StringRef spec :
       {"2xA100-80,2xV100", "4xH100", "mixed.json", "hetpipe.json"}) {
    SCOPED_TRACE(spec.str());
    std::string path = spec.ends_with(".json") ? inputPath(spec) : spec.str();
    Cluster c = parseOK(parseClusterSpec(path));
    std::string text;
    llvm::raw_string_ostream os(text);
    os << llvm::formatv("{0:2}", toJSON(c));
    Cluster back = parseOK(parseClusterJSON(text, "roundtrip.json"));
    expectSameCluster(c, back);
  }
}

/// Ranks sharing the cores of a node: read, and written back by toJSON.
TEST(ClusterJSON, SharedProcessors) {
  const char *text = R"({"nodes": [
      {"name": "cpu", "shared_processors": 2, "devices": [
        {"kind": "c", "count": 3, "processors": 1.5, "peak_flops": {"f32": 1e9},
         "memory_bytes": "1GiB", "memory_bandwidth": "1GB/s"}]},
      {"name": "gpu", "devices": [{"kind": "T4"}]}]})";
  Cluster c = parseOK(parseClusterJSON(text, "test.json"));
  ASSERT_EQ(c.nodeSharedProcessors.size(), 1u);
  EXPECT_EQ(c.nodeSharedProcessors[0], 2);
  EXPECT_EQ(c.devices[0].processors, 1.5);
  EXPECT_EQ(c.devices[3].processors, 1);
  std::string written;
  llvm::raw_string_ostream os(written);
  os << llvm::formatv("{0:2}", toJSON(c));
  Cluster back = parseOK(parseClusterJSON(written, "roundtrip.json"));
  ASSERT_EQ(back.nodeSharedProcessors.size(), 1u);
  EXPECT_EQ(back.nodeSharedProcessors[0], 2);
  EXPECT_EQ(back.devices[2].processors, 1.5);
  EXPECT_EQ(back.devices[3].processors, 1);
}

//===----------------------------------------------------------------------===//
// JSON errors: each names the file and the path of the offending value.
//===----------------------------------------------------------------------===//

struct ErrorCase {
  const char *json;
  const char *message; ///< Expected message after "test.json: ".
};

/// Shows the document of a failing case instead of its bytes.
void PrintTo(const ErrorCase &c, std::ostream *os) { *os << c.json; }

class ClusterJSONError : public testing::TestWithParam<ErrorCase> {};

TEST_P(ClusterJSONError, NamesFileAndPath) {
  EXPECT_EQ(jsonError(GetParam().json),
            std::string("test.json: ") + GetParam().message);
}

// Documents around a device entry, a links object or virtual workers.
#define DEVICE(entry) R"({"nodes": [{"devices": [)" entry "]}]}"
#define LINKS(links)                                                           \
  R"({"nodes": [{"name": "n0", "devices": [{"kind": "T4", "count": 2}]},)"     \
  R"( {"name": "n1", "devices": [{"kind": "T4"}]}], "links": )" links "}"
#define WORKERS(workers)                                                       \
  R"({"nodes": [{"name": "n0", "devices": [{"kind": "T4", "count": 2}]}],)"    \
  R"( "virtual_workers": )" workers "}"

const ErrorCase kErrorCases[] = {
    // Document.
    {"[1, 2]", "expected a JSON object at the top level, got an array"},
    {R"({"nodes": [], "linkz": {}})",
     "linkz: unknown field (expected one of: nodes, links, virtual_workers)"},
    {"{}", "nodes: missing (a cluster needs at least one node)"},
    {R"({"nodes": {}})", "nodes: expected an array, got an object"},
    {R"({"nodes": []})", "nodes: expected at least one node"},
    // Nodes.
    {R"({"nodes": [3]})", "nodes[0]: expected an object, got 3"},
    {R"({"nodes": [{"name": 3, "devices": []}]})",
     "nodes[0].name: expected a string, got 3"},
    {R"({"nodes": [{"name": "", "devices": []}]})",
     "nodes[0].name: expected a non-empty string"},
    {R"({"nodes": [{"devices": [{"kind": "T4"}], "device": []}]})",
     "nodes[0].device: unknown field (expected one of: name, devices, "
     "intra_node, shared_processors)"},
    {R"({"nodes": [{"devices": [{"kind": "T4"}], "shared_processors": 0}]})",
     "nodes[0].shared_processors: expected a number of processors in (0, "
     "1e6], got 0"},
    {DEVICE(R"({"kind": "T4", "processors": "2"})"),
     "nodes[0].devices[0].processors: expected a number of processors in (0, "
     "1e6], got \"2\""},
    {R"({"nodes": [{"name": "a", "devices": [{"kind": "T4"}]},
                   {"name": "a", "devices": [{"kind": "T4"}]}]})",
     "nodes[1].name: duplicate node name 'a' (also nodes[0])"},
    {R"({"nodes": [{"name": "a"}]})",
     "nodes[0].devices: missing (a node needs at least one device)"},
    {R"({"nodes": [{"devices": []}]})",
     "nodes[0].devices: expected at least one device"},
    {R"({"nodes": [{"devices": "H100"}]})",
     "nodes[0].devices: expected an array, got \"H100\""},
    {R"({"nodes": [{"devices": [{"kind": "T4"}],
                    "intra_node": {"bandwidth": "1GB/s"}}]})",
     "nodes[0].intra_node.latency: missing"},
    // Devices.
    {DEVICE("null"), "nodes[0].devices[0]: expected an object, got null"},
    {DEVICE(R"({"count": 2})"),
     "nodes[0].devices[0].kind: missing (a preset such as \"H100\" or a "
     "custom kind)"},
    {DEVICE(R"({"kind": true})"),
     "nodes[0].devices[0].kind: expected a string, got a boolean"},
    {DEVICE(R"({"kind": "T4"}, {"kind": "T4", "memroy_bytes": 1})"),
     "nodes[0].devices[1].memroy_bytes: unknown field (expected one of: "
     "name, kind, count, peak_flops, memory_bytes, memory_bandwidth, "
     "processors)"},
    {DEVICE(R"({"kind": "T4", "count": 0})"),
     "nodes[0].devices[0].count: expected a positive integer, got 0"},
    {DEVICE(R"({"kind": "T4", "count": 1.5})"),
     "nodes[0].devices[0].count: expected a positive integer, got 1.5"},
    {DEVICE(R"({"kind": "T4", "count": "4"})"),
     "nodes[0].devices[0].count: expected a positive integer, got \"4\""},
    {DEVICE(R"({"kind": "T4", "count": 100000})"),
     "nodes[0].devices[0].count: count 100000 exceeds the limit of 4096"},
    {DEVICE(R"({"kind": "T4", "name": "x", "count": 2})"),
     "nodes[0].devices[0].name: a named device entry must have count 1, "
     "got 2"},
    {DEVICE(R"({"kind": "T4", "name": ""})"),
     "nodes[0].devices[0].name: expected a non-empty string"},
    {DEVICE(R"({"kind": "T4", "memory_bytes": -1})"),
     "nodes[0].devices[0].memory_bytes: expected a positive number, got -1"},
    {DEVICE(R"({"kind": "T4", "memory_bytes": 0})"),
     "nodes[0].devices[0].memory_bytes: expected a positive number, got 0"},
    {DEVICE(R"({"kind": "T4", "memory_bytes": 0.25})"),
     "nodes[0].devices[0].memory_bytes: expected at least one byte, got "
     "0.25"},
    {DEVICE(R"({"kind": "T4", "memory_bytes": 1e30})"),
     "nodes[0].devices[0].memory_bytes: too large: 1e+30"},
    {DEVICE(R"({"kind": "T4", "memory_bytes": [16]})"),
     "nodes[0].devices[0].memory_bytes: expected a positive number or a "
     "string such as \"80GB\", got an array"},
    {DEVICE(R"({"kind": "T4", "memory_bytes": "16 GX"})"),
     "nodes[0].devices[0].memory_bytes: unknown unit 'GX' in '16 GX' "
     "(expected B, KB, MB, GB, TB, KiB, MiB, GiB or TiB)"},
    {DEVICE(R"({"kind": "T4", "memory_bytes": "-16GB"})"),
     "nodes[0].devices[0].memory_bytes: expected a positive number, got "
     "\"-16GB\""},
    {DEVICE(R"({"kind": "T4", "memory_bandwidth": "300GB"})"),
     "nodes[0].devices[0].memory_bandwidth: unknown unit 'GB' in '300GB' "
     "(expected B/s, MB/s, GB/s, TB/s, GiB/s, Gb/s, Gbit/s or Gbps)"},
    {DEVICE(R"({"kind": "T4", "peak_flops": 8e12})"),
     "nodes[0].devices[0].peak_flops: expected an object, got 8000000000000"},
    {DEVICE(R"({"kind": "T4", "peak_flops": {"fp32": 8e12}})"),
     "nodes[0].devices[0].peak_flops.fp32: unknown field (expected one of: "
     "f32, f16, f64)"},
    {DEVICE(R"({"kind": "T4", "peak_flops": {"f16": "65 TOPS"}})"),
     "nodes[0].devices[0].peak_flops.f16: unknown unit 'TOPS' in '65 TOPS' "
     "(expected FLOPS, GFLOPS, TFLOPS, PFLOPS or TFLOP/s)"},
    {DEVICE(R"({"kind": "T4", "peak_flops": {"f64": 0}})"),
     "nodes[0].devices[0].peak_flops.f64: expected a positive number, got 0"},
    {DEVICE(R"({"kind": "custom", "memory_bytes": "8GB",
                "memory_bandwidth": "300GB/s"})"),
     "nodes[0].devices[0].peak_flops.f32: missing (required for custom kind "
     "'custom')"},
    {DEVICE(R"({"kind": "custom", "peak_flops": {"f32": 1e13},
                "memory_bandwidth": "300GB/s"})"),
     "nodes[0].devices[0].memory_bytes: missing (required for custom kind "
     "'custom')"},
    {DEVICE(R"({"kind": "MyAccel", "peak_flops": {"f32": 1e13},
                "memory_bytes": "8GB"})"),
     "nodes[0].devices[0].memory_bandwidth: missing (required for custom "
     "kind 'MyAccel')"},
    // Duplicate names, explicit or generated.
    {R"({"nodes": [{"name": "n0", "devices": [{"kind": "T4"},
        {"kind": "T4", "name": "n0/gpu0"}]}]})",
     "nodes[0].devices[1].name: duplicate device name 'n0/gpu0' (also "
     "nodes[0].devices[0])"},
    {R"({"nodes": [{"name": "n0", "devices": [{"kind": "T4", "name": "n0/gpu1"},
        {"kind": "T4", "count": 2}]}]})",
     "nodes[0].devices[1]: duplicate device name 'n0/gpu1' (also "
     "nodes[0].devices[0])"},
    {R"({"nodes": [{"devices": [{"kind": "T4", "name": "x"}]},
                   {"devices": [{"kind": "T4", "name": "x"}]}]})",
     "nodes[1].devices[0].name: duplicate device name 'x' (also "
     "nodes[0].devices[0])"},
    // Links.
    {LINKS("[]"), "links: expected an object, got an array"},
    {LINKS(R"({"inter": {}})"),
     "links.inter: unknown field (expected one of: intra_node, inter_node, "
     "pairs)"},
    {LINKS(R"({"intra_node": {"latency": "1us"}})"),
     "links.intra_node.bandwidth: missing"},
    {LINKS(R"({"intra_node": {"bandwidth": "1GB/s", "latency": "1us",
                              "mtu": 4096}})"),
     "links.intra_node.mtu: unknown field (expected one of: bandwidth, "
     "latency)"},
    {LINKS(R"({"inter_node": {"bandwidth": 0, "latency": "1us"}})"),
     "links.inter_node.bandwidth: expected a positive number, got 0"},
    {LINKS(R"({"inter_node": {"bandwidth": "1GB/s", "latency": -1e-6}})"),
     "links.inter_node.latency: expected a non-negative number, got -1e-06"},
    {LINKS(R"({"inter_node": {"bandwidth": "1GB/s", "latency": "1 hour"}})"),
     "links.inter_node.latency: unknown unit 'hour' in '1 hour' (expected s, "
     "ms, us or ns)"},
    {LINKS(R"({"pairs": {}})"),
     "links.pairs: expected an array, got an object"},
    {LINKS(R"({"pairs": [{"a": "n0/gpu0", "b": "n1/gpu7",
                          "bandwidth": 1e9, "latency": 0}]})"),
     "links.pairs[0].b: unknown device 'n1/gpu7'"},
    {LINKS(R"({"pairs": [{"b": "n0/gpu0", "bandwidth": 1e9, "latency": 0}]})"),
     "links.pairs[0].a: missing (a device name)"},
    {LINKS(R"({"pairs": [{"a": 0, "b": "n0/gpu0"}]})"),
     "links.pairs[0].a: expected a string, got 0"},
    {LINKS(R"({"pairs": [{"a": "n0/gpu1", "b": "n0/gpu1",
                          "bandwidth": 1e9, "latency": 0}]})"),
     "links.pairs[0].b: a link needs two different devices, got 'n0/gpu1' "
     "twice"},
    {LINKS(R"({"pairs": [{"a": "n0/gpu0", "b": "n1/gpu0", "latency": 0}]})"),
     "links.pairs[0].bandwidth: missing"},
    {LINKS(R"({"pairs": [{"a": "n0/gpu0", "b": "n1/gpu0", "bandwidth": 1e9,
                          "latency": 0, "both": true}]})"),
     "links.pairs[0].both: unknown field (expected one of: a, b, bandwidth, "
     "latency)"},
    {LINKS(R"({"pairs": [
        {"a": "n0/gpu0", "b": "n1/gpu0", "bandwidth": 1e9, "latency": 0},
        {"a": "n1/gpu0", "b": "n0/gpu0", "bandwidth": 2e9, "latency": 0}]})"),
     "links.pairs[1]: duplicate link between 'n1/gpu0' and 'n0/gpu0' (also "
     "links.pairs[0])"},
    // Virtual workers.
    {WORKERS(R"({"vw0": []})"),
     "virtual_workers: expected an array, got an object"},
    {WORKERS(R"([["n0/gpu0"], "n0/gpu1"])"),
     "virtual_workers[1]: expected an array, got \"n0/gpu1\""},
    {WORKERS("[]"), "virtual_workers: expected at least one worker (leave "
                    "the field out for one worker of every device)"},
    {WORKERS("[[]]"), "virtual_workers[0]: expected at least one device"},
    {WORKERS(R"([["n0/gpu0", "n0/gpu2"]])"),
     "virtual_workers[0][1]: unknown device 'n0/gpu2'"},
    {WORKERS(R"([["n0/gpu0"], ["n0/gpu1", "n0/gpu0"]])"),
     "virtual_workers[1][1]: device 'n0/gpu0' is already in "
     "virtual_workers[0][0]"},
    {WORKERS(R"([["n0/gpu0", "n0/gpu0"]])"),
     "virtual_workers[0][1]: device 'n0/gpu0' is already in "
     "virtual_workers[0][0]"},
};

INSTANTIATE_TEST_SUITE_P(AllFields, ClusterJSONError,
                         testing::ValuesIn(kErrorCases));

TEST(ClusterJSON, UnknownKindListsPresets) {
  std::string e = jsonError(DEVICE(R"({"kind": "H1000", "count": 2})"));
  EXPECT_EQ(e.rfind("test.json: nodes[0].devices[0].kind: unknown device "
                    "kind 'H1000' (presets: V100-16, ",
                    0),
            0u)
      << e;
  EXPECT_NE(e.find("P4000); a custom kind needs peak_flops, memory_bytes and "
                   "memory_bandwidth"),
            std::string::npos)
      << e;
}

TEST(ClusterJSON, NestingDepthIsBounded) {
  // llvm::json's parser recurses per level: without a bound this overflows
  // the stack (or takes minutes) before any cluster field is looked at.
  std::string deep = std::string(1 << 20, '[') + std::string(1 << 20, ']');
  std::string e = jsonError(deep);
  EXPECT_EQ(e, "test.json: invalid JSON [1:65, byte=64]: arrays and objects "
               "nest deeper than the limit of 64")
      << e;
  // Brackets inside strings do not count; 64 levels are within the limit.
  std::string ok = R"({"nodes": [{"devices": [{"kind": "T4", "name": "[[[[", )"
                   R"("count": 1}]}], "x": )" +
                   std::string(63, '[') + std::string(63, ']') + "}";
  e = jsonError(ok);
  EXPECT_EQ(e.find("nest deeper"), std::string::npos) << e;
}

TEST(ClusterSpec, ReadsOnlyRegularFilesOfBoundedSize) {
  llvm::SmallString<128> dir;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("clusters", dir));
  llvm::scope_exit removeDir([&] { llvm::sys::fs::remove_directories(dir); });
  // A FIFO would block the reader; /dev/zero would be read forever.
  std::string fifo = (dir + "/fifo.json").str();
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(errorOf(parseClusterSpec(fifo)),
            "cannot read cluster file '" + fifo + "': not a regular file");
  std::string zero = (dir + "/zero.json").str();
  ASSERT_FALSE(llvm::sys::fs::create_link("/dev/zero", zero));
  EXPECT_EQ(errorOf(parseClusterSpec(zero)),
            "cannot read cluster file '" + zero + "': not a regular file");
  std::string big = (dir + "/big.json").str();
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(big, ec);
    ASSERT_FALSE(ec);
    os << std::string(pp::limits::kMaxClusterFileBytes + 1, ' ');
  }
  EXPECT_EQ(errorOf(parseClusterSpec(big)),
            "cannot read cluster file '" + big +
                "': " + std::to_string(pp::limits::kMaxClusterFileBytes + 1) +
                " bytes exceed the limit of " +
                std::to_string(pp::limits::kMaxClusterFileBytes) + " bytes");
}

TEST(ClusterJSON, SyntaxErrorsNameTheFile) {
  std::string e = jsonError(R"({"nodes": [})");
  EXPECT_EQ(e.rfind("test.json: invalid JSON [1:", 0), 0u) << e;
  // Without a file name, messages start at the path.
  EXPECT_EQ(errorOf(parseClusterJSON(R"({"nodes": []})", "")),
            "nodes: expected at least one node");
}

//===----------------------------------------------------------------------===//
// Link costs
//===----------------------------------------------------------------------===//

TEST(ClusterTransfer, IntraVersusInterNode) {
  Cluster c = parseOK(parseClusterSpec("2xH100,2xH100"));
  const double bytes = 64 << 20;
  // Intra: 2 us + 64 MiB at 450 GB/s; inter: 5 us + 64 MiB at 25 GB/s.
  EXPECT_DOUBLE_EQ(c.transferTime(0, 1, bytes), 2e-6 + bytes / 450e9);
  EXPECT_DOUBLE_EQ(c.transferTime(1, 2, bytes), 5e-6 + bytes / 25e9);
  EXPECT_GT(c.transferTime(1, 2, bytes), 10 * c.transferTime(0, 1, bytes));
  EXPECT_DOUBLE_EQ(c.transferTime(3, 0, bytes), c.transferTime(0, 3, bytes));
  EXPECT_EQ(c.transferTime(2, 2, bytes), 0);
  EXPECT_TRUE(std::isinf(c.bandwidth(1, 1)));
  EXPECT_EQ(c.latency(1, 1), 0);
  // Latency alone for an empty message.
  EXPECT_DOUBLE_EQ(c.transferTime(0, 2, 0), 5e-6);
}

TEST(ClusterTransfer, ExplicitPairOverridesDefaults) {
  Cluster c = parseJSON(R"({
    "nodes": [{"name": "a", "devices": [{"kind": "V100", "count": 2}]},
              {"name": "b", "devices": [{"kind": "V100", "count": 2}]}],
    "links": {"intra_node": {"bandwidth": "100GB/s", "latency": "1us"},
              "inter_node": {"bandwidth": "10GB/s", "latency": "10us"},
              "pairs": [
                {"a": "a/gpu0", "b": "a/gpu1", "bandwidth": "25GB/s",
                 "latency": "2us"},
                {"a": "b/gpu1", "b": "a/gpu1", "bandwidth": "50GB/s",
                 "latency": 0}]}})");
  ASSERT_EQ(c.numDevices(), 4);
  EXPECT_DOUBLE_EQ(c.transferTime(0, 1, 1e9), 2e-6 + 1e9 / 25e9);
  EXPECT_DOUBLE_EQ(c.transferTime(1, 0, 1e9), 2e-6 + 1e9 / 25e9);
  EXPECT_DOUBLE_EQ(c.transferTime(2, 3, 1e9), 1e-6 + 1e9 / 100e9);
  EXPECT_DOUBLE_EQ(c.transferTime(1, 3, 1e9), 1e9 / 50e9);
  EXPECT_DOUBLE_EQ(c.transferTime(0, 2, 1e9), 10e-6 + 1e9 / 10e9);
  ASSERT_NE(c.findLink(3, 1), nullptr);
  EXPECT_EQ(c.findLink(0, 2), nullptr);
  LinkParams l = c.link(1, 3);
  EXPECT_DOUBLE_EQ(l.bandwidth, 50e9);
  EXPECT_DOUBLE_EQ(l.latency, 0);
}

TEST(ClusterTransfer, ProgrammaticCluster) {
  // Other code builds clusters directly; defaults need no parser.
  Cluster c;
  c.nodes = {"n0", "n1"};
  for (int i = 0; i < 3; ++i) {
    Device d = *getPreset("T4");
    d.name = "d" + std::to_string(i);
    d.node = i / 2;
    c.devices.push_back(d);
  }
  c.intraNodeBandwidth = 16e9;
  c.interNodeBandwidth = 1e9;
  c.interNodeLatency = 1e-5;
  c.nodeIntraLinks = {LinkParams{32e9, 0}}; // n1 has no entry.
  EXPECT_DOUBLE_EQ(c.bandwidth(0, 1), 32e9);
  EXPECT_DOUBLE_EQ(c.transferTime(1, 2, 1e9), 1e-5 + 1.0);
}

} // namespace

/// The ring all-reduce of tensor-parallel groups: 2 (n - 1) / n of the
/// bytes over the slowest link, 2 (n - 1) latencies.
TEST(ClusterLinks, RingAllReduce) {
  using pp::cluster::ringAllReduceSeconds;
  EXPECT_DOUBLE_EQ(ringAllReduceSeconds(1e9, 1, 1e9, 1e-6), 0);
  EXPECT_DOUBLE_EQ(ringAllReduceSeconds(1e9, 2, 1e9, 1e-6), 1.0 + 2e-6);
  EXPECT_DOUBLE_EQ(ringAllReduceSeconds(8e8, 8, 4e8, 0), 2.0 * 7 / 8 * 2);
  auto cluster = pp::cluster::parseClusterSpec("4xH100");
  ASSERT_TRUE(bool(cluster)) << llvm::toString(cluster.takeError());
  pp::cluster::LinkParams link = cluster->slowestLink({0, 1, 2, 3});
  EXPECT_DOUBLE_EQ(link.bandwidth, cluster->bandwidth(0, 1));
  EXPECT_DOUBLE_EQ(link.latency, cluster->latency(0, 1));
  EXPECT_TRUE(std::isinf(cluster->slowestLink({2}).bandwidth));
}
