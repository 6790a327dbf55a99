//===- ClusterOption.cpp - The cluster of a pass ----------------*- C++ -*-===//
//
// --pp-partition parses cluster= once and sets it on the module
// (#pp.cluster); the passes after it read that instead of parsing their own
// cluster=, which stays for running them alone.
//
//===----------------------------------------------------------------------===//

#include "pp/Dialect/PP/Transforms/Transforms.h"

#include "llvm/ADT/StringExtras.h"

using namespace mlir;
namespace cl = pp::cluster;

/// The device kinds of `cluster` in the spec syntax ("2xT4,TITANV").
static std::string describeKinds(const cl::Cluster &cluster) {
  std::vector<std::string> groups;
  for (size_t i = 0, e = cluster.devices.size(); i < e;) {
    size_t j = i + 1;
    while (j < e && cluster.devices[j].kind == cluster.devices[i].kind)
      ++j;
    groups.push_back((j - i > 1 ? std::to_string(j - i) + "x" : "") +
                     cluster.devices[i].kind);
    i = j;
  }
  return llvm::join(groups, ",");
}

FailureOr<std::optional<cl::Cluster>>
pp::pipeline::resolveCluster(ModuleOp module, StringRef spec,
                             StringRef passName,
                             function_ref<InFlightDiagnostic()> emitError) {
  ClusterAttr attached = getCluster(module);
  if (spec.empty())
    return attached ? std::optional(attached.getCluster()) : std::nullopt;
  llvm::Expected<cl::Cluster> parsed = cl::parseClusterSpec(spec);
  if (!parsed) {
    emitError() << "cluster: " << llvm::toString(parsed.takeError());
    return failure();
  }
  if (attached && ClusterAttr::get(module.getContext(), *parsed) != attached) {
    emitError() << passName << ": cluster=" << spec << " ("
                << describeKinds(*parsed)
                << ") is another cluster than the module's pp.cluster ("
                << describeKinds(attached.getCluster())
                << "): give one of them";
    return failure();
  }
  return std::optional(std::move(*parsed));
}
