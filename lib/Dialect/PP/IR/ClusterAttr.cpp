//===- ClusterAttr.cpp - #pp.cluster and pp::cluster::Cluster ---*- C++ -*-===//
//
// The cluster a pass parsed, as an attribute the later passes read back to
// the same pp::cluster::Cluster.
//
//===----------------------------------------------------------------------===//

#include "pp/Dialect/PP/IR/PPOps.h"

using namespace mlir;
using namespace pp::pipeline;
namespace cl = pp::cluster;

static LinkAttr getLink(MLIRContext *context, double bandwidth,
                        double latency) {
  return LinkAttr::get(context, APFloat(bandwidth), APFloat(latency));
}

static double toDouble(const APFloat &value) { return value.convertToDouble(); }

ClusterAttr ClusterAttr::get(MLIRContext *context, const cl::Cluster &cluster) {
  SmallVector<ClusterDeviceAttr> devices;
  for (const cl::Device &d : cluster.devices)
    devices.push_back(ClusterDeviceAttr::get(
        context, d.name, d.kind, APFloat(d.peakFlopsF32),
        APFloat(d.peakFlopsF16), APFloat(d.peakFlopsF64), d.memoryBytes,
        APFloat(d.memoryBandwidth), d.node, APFloat(d.processors)));
  SmallVector<ClusterNodeAttr> nodes;
  for (auto [n, name] : llvm::enumerate(cluster.nodes)) {
    LinkAttr intraNode;
    if (n < cluster.nodeIntraLinks.size() && cluster.nodeIntraLinks[n])
      intraNode = getLink(context, cluster.nodeIntraLinks[n]->bandwidth,
                          cluster.nodeIntraLinks[n]->latency);
    double shared = n < cluster.nodeSharedProcessors.size()
                        ? cluster.nodeSharedProcessors[n]
                        : 0;
    nodes.push_back(
        ClusterNodeAttr::get(context, name, intraNode, APFloat(shared)));
  }
  SmallVector<ClusterLinkAttr> links;
  for (const cl::Link &l : cluster.links)
    links.push_back(ClusterLinkAttr::get(
        context, l.a, l.b, APFloat(l.bandwidth), APFloat(l.latency)));
  SmallVector<DenseI64ArrayAttr> workers;
  for (const std::vector<int> &worker : cluster.virtualWorkers)
    workers.push_back(
        DenseI64ArrayAttr::get(context, llvm::to_vector_of<int64_t>(worker)));
  return get(
      context, devices, nodes,
      getLink(context, cluster.intraNodeBandwidth, cluster.intraNodeLatency),
      getLink(context, cluster.interNodeBandwidth, cluster.interNodeLatency),
      links, workers);
}

cl::Cluster ClusterAttr::getCluster() const {
  cl::Cluster cluster;
  for (ClusterDeviceAttr d : getDevices())
    cluster.devices.push_back(
        {.name = d.getName().str(),
         .kind = d.getKind().str(),
         .peakFlopsF32 = toDouble(d.getFlopsF32()),
         .peakFlopsF16 = toDouble(d.getFlopsF16()),
         .peakFlopsF64 = toDouble(d.getFlopsF64()),
         .memoryBytes = d.getMemoryBytes(),
         .memoryBandwidth = toDouble(d.getMemoryBandwidth()),
         .node = static_cast<int>(d.getNode()),
         .processors = toDouble(d.getProcessors())});
  // As the parser leaves them: a link per node when any node has its own,
  // else none; shared processors up to the last node that has them.
  bool anyIntraNode = llvm::any_of(
      getNodes(), [](ClusterNodeAttr node) { return node.getIntraNode(); });
  for (auto [n, node] : llvm::enumerate(getNodes())) {
    cluster.nodes.push_back(node.getName().str());
    if (anyIntraNode) {
      LinkAttr link = node.getIntraNode();
      cluster.nodeIntraLinks.push_back(
          link ? std::optional<cl::LinkParams>({toDouble(link.getBandwidth()),
                                                toDouble(link.getLatency())})
               : std::nullopt);
    }
    if (double shared = toDouble(node.getSharedProcessors()); shared > 0) {
      cluster.nodeSharedProcessors.resize(n + 1, 0);
      cluster.nodeSharedProcessors[n] = shared;
    }
  }
  cluster.intraNodeBandwidth = toDouble(getIntraNode().getBandwidth());
  cluster.intraNodeLatency = toDouble(getIntraNode().getLatency());
  cluster.interNodeBandwidth = toDouble(getInterNode().getBandwidth());
  cluster.interNodeLatency = toDouble(getInterNode().getLatency());
  for (ClusterLinkAttr l : getLinks())
    cluster.links.push_back(
        {static_cast<int>(l.getA()), static_cast<int>(l.getB()),
         toDouble(l.getBandwidth()), toDouble(l.getLatency())});
  for (DenseI64ArrayAttr worker : getVirtualWorkers())
    cluster.virtualWorkers.emplace_back(worker.asArrayRef().begin(),
                                        worker.asArrayRef().end());
  return cluster;
}

LogicalResult ClusterAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                  ArrayRef<ClusterDeviceAttr> devices,
                                  ArrayRef<ClusterNodeAttr> nodes, LinkAttr,
                                  LinkAttr, ArrayRef<ClusterLinkAttr> links,
                                  ArrayRef<DenseI64ArrayAttr> virtualWorkers) {
  int64_t numDevices = devices.size();
  if (devices.empty() || nodes.empty())
    return emitError() << "a cluster needs at least one device and one node";
  for (ClusterDeviceAttr device : devices)
    if (device.getNode() < 0 ||
        device.getNode() >= static_cast<int64_t>(nodes.size()))
      return emitError() << "device '" << device.getName() << "' is in node "
                         << device.getNode() << " of " << nodes.size();
  auto isDevice = [&](int64_t d) { return d >= 0 && d < numDevices; };
  for (ClusterLinkAttr link : links)
    if (!isDevice(link.getA()) || !isDevice(link.getB()) ||
        link.getA() == link.getB())
      return emitError() << "a link needs two different devices of "
                         << numDevices << ", got " << link.getA() << " and "
                         << link.getB();
  for (DenseI64ArrayAttr worker : virtualWorkers)
    if (worker.empty() || !llvm::all_of(worker.asArrayRef(), isDevice))
      return emitError() << "a virtual worker needs devices of " << numDevices
                         << ", got " << worker;
  return success();
}
