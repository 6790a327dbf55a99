//===- PPAttrs.td - Attributes of the pp dialect -----------*- tablegen -*-===//
#ifndef PP_DIALECT_PP_IR_PPATTRS_TD
#define PP_DIALECT_PP_IR_PPATTRS_TD

include "pp/Dialect/PP/IR/PPDialect.td"
include "mlir/IR/AttrTypeBase.td"

class PP_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<PP_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

// One of the kinds of pp/Runtime/ScheduleKinds.def (the definition the
// schedule library and the runtime share), parsed and printed by its name.
class PP_KindParameter<string kind>
    : AttrParameter<"::pp::kinds::" # kind, "a " # kind> {
  let parser = [{[&]() -> ::mlir::FailureOr<::pp::kinds::}] # kind # [{> {
    auto loc = $_parser.getCurrentLocation();
    std::string name;
    if (::mlir::failed($_parser.parseKeywordOrString(&name)))
      return ::mlir::failure();
    if (auto value = ::pp::kinds::parse}] # kind # [{(name))
      return *value;
    return $_parser.emitError(loc, "unknown }] # kind # [{ '") << name << "'";
  }()}];
  let printer = "$_printer.printKeywordOrString(::pp::kinds::toString($_self))";
}

// Schedule names are printed quoted ("1f1b" is no keyword; all alike).
def PP_ScheduleKindParameter : PP_KindParameter<"ScheduleKind"> {
  let printer = [{$_printer << '"' << ::pp::kinds::toString($_self) << '"'}];
}

class PP_KindAttr<string kind, string attrMnemonic, string what>
    : PP_Attr<kind, attrMnemonic> {
  let summary = what;
  let parameters = (ins PP_KindParameter<kind>:$value);
  let assemblyFormat = "`<` $value `>`";
}

def PP_ScheduleKindAttr : PP_KindAttr<"ScheduleKind", "schedule_kind",
    "A pipeline schedule: gpipe, 1f1b, interleaved or zb-h1">;
def PP_ActionKindAttr : PP_KindAttr<"ActionKind", "action_kind",
    "What a pp.action computes: forward, backward, backward_input, "
    "backward_weight, grad_reduce or optimizer_step">;
def PP_PhaseAttr : PP_KindAttr<"Phase", "phase",
    "Which part of a stage's step a stage function holds: forward, "
    "backward, backward_input, backward_weight or update">;

def PP_PlanAttr : PP_Attr<"Plan", "plan"> {
  let summary = "How a training step is pipelined";
  let description = [{
    Set once on the module by `--pp-partition` (or by `--pp-split-stages`
    when no partition ran) and read through accessors by every later pass:
    the schedule, the micro-batches per step, the stages (model chunks) per
    device, the number of stages, and the name of the device each stage runs
    on (stage s runs on device s mod p, p = num_stages / chunks; under the
    V-shaped zb-v and dualpipev, with 2 chunks, stage s >= p runs on device
    2p-1-s), the
    data-parallel replicas (virtual workers) and the tensor-parallel degree
    (1 until that feature lands). `staleness` = D >= 0 makes the replicas
    train under Wave Synchronous Parallel (HetPipe) instead of all-reducing
    gradients every step: a replica pushes the summed update of each wave of
    `wave` steps and may run at most D waves ahead of the slowest; -1
    (default) is synchronous data parallelism.

    `placements` (heterogeneous virtual workers, whose partitions differ):
    one `array<i64>` per replica giving the device (within the replica) of
    every stage. The stages are then the common refinement of the replicas'
    own partitions, so all replicas share the stage functions while each
    places them on its own devices; `stage_devices` names replica 0's
    devices. Empty (default): stage s runs on device s mod num_devices in
    every replica.

    ```mlir
    module attributes {pp.plan = #pp.plan<schedule = "1f1b", micro_batches = 4,
                                          num_stages = 2,
                                          stage_devices = ["T4", "T4"]>} {}
    ```
  }];
  let parameters = (ins
    PP_ScheduleKindParameter:$schedule,
    "int64_t":$micro_batches,
    DefaultValuedParameter<"int64_t", "1">:$chunks,
    "int64_t":$num_stages,
    DefaultValuedParameter<"::mlir::ArrayAttr",
                           "::mlir::ArrayAttr::get($_ctxt, {})">:$stage_devices,
    DefaultValuedParameter<"int64_t", "1">:$data_parallel,
    DefaultValuedParameter<"int64_t", "1">:$tensor_parallel,
    DefaultValuedParameter<"int64_t", "-1">:$staleness,
    DefaultValuedParameter<"int64_t", "1">:$wave,
    DefaultValuedParameter<"::mlir::ArrayAttr",
                           "::mlir::ArrayAttr::get($_ctxt, {})">:$placements,
    DefaultValuedParameter<"int64_t", "0">:$update_every,
    DefaultValuedParameter<"bool", "false">:$vertical_sync
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The devices of one replica: num_stages / chunks, or as many as the
    /// placements use.
    int64_t getNumDevices() const;
    /// The device index of `stage` in `replica`.
    int64_t getDeviceOf(int64_t stage, int64_t replica = 0) const;
    /// Whether the replicas place the stages by `placements` (their
    /// partitions differ).
    bool hasPlacements() const { return !getPlacements().empty(); }
    /// The device of every stage in `replica`.
    std::vector<int> getPlacement(int64_t replica) const;
    /// The name of the device of `stage`, if the plan names it.
    std::optional<llvm::StringRef> getStageDeviceName(int64_t stage) const;
    /// The same plan with other values for some fields.
    PlanAttr withMicroBatches(int64_t microBatches) const;
    PlanAttr withNumStages(int64_t numStages) const;
    PlanAttr withChunks(int64_t chunks) const;
    PlanAttr withSchedule(::pp::kinds::ScheduleKind schedule) const;
    /// Whether stages update several times a step (weight versions).
    bool isWeightVersioned() const { return getUpdateEvery() > 0; }
    /// Micro-batches whose mean loss one update descends: n, or the
    /// step's m.
    int64_t getMicroBatchesPerUpdate() const {
      return isWeightVersioned() ? getUpdateEvery() : getMicroBatches();
    }
    /// Whether the replicas train under WSP (staleness >= 0).
    bool isWaveSynchronous() const { return getStaleness() >= 0; }
  }];
}


//===----------------------------------------------------------------------===//
// The cluster of pp/Cluster/Cluster.h, parsed once from a cluster= option.
//===----------------------------------------------------------------------===//

// A double, printed so that it parses back to the same value.
class PP_F64Parameter<string desc, string default = "">
    : APFloatParameter<desc> {
  let parser = [{[&]() -> ::mlir::FailureOr<::llvm::APFloat> {
    double value;
    if (::mlir::failed($_parser.parseFloat(value)))
      return ::mlir::failure();
    return ::llvm::APFloat(value);
  }()}];
  let printer = "$_printer << $_self";
  let defaultValue = default;
}

// A list of this dialect's `attr`s, `[...]` (empty by default), each
// printed without its `#pp.mnemonic` (which the parser also accepts).
class PP_AttrListParameter<string attr, string desc>
    : OptionalArrayRefParameter<attr, desc> {
  let parser = [{[&]() -> ::mlir::FailureOr<::llvm::SmallVector<}] # attr #
      [{>> {
    ::llvm::SmallVector<}] # attr # [{> values;
    if ($_parser.parseCommaSeparatedList(
            ::mlir::AsmParser::Delimiter::Square, [&] {
              return $_parser.parseCustomAttributeWithFallback(
                  values.emplace_back());
            }))
      return ::mlir::failure();
    return values;
  }()}];
  let printer = [{
    $_printer << '[';
    ::llvm::interleaveComma($_self, $_printer, [&](}] # attr # [{ value) {
      $_printer.printStrippedAttrOrType(value);
    });
    $_printer << ']';
  }];
}

def PP_LinkAttr : PP_Attr<"Link", "link"> {
  let summary = "Bandwidth (bytes/s each way) and latency (s) of a link";
  let parameters = (ins PP_F64Parameter<"bytes/s">:$bandwidth,
                        PP_F64Parameter<"seconds">:$latency);
  let assemblyFormat = "`<` struct(params) `>`";
}

def PP_ClusterDeviceAttr : PP_Attr<"ClusterDevice", "cluster_device"> {
  let summary = "One accelerator of a #pp.cluster";
  let description = [{
    Its speeds (FLOP/s), its memory (bytes, bytes/s), its node (an index
    into the cluster's nodes) and the processors of the node's shared pool
    one of its ops occupies.
  }];
  let parameters = (ins
    StringRefParameter<"unique name">:$name,
    StringRefParameter<"preset or user kind">:$kind,
    PP_F64Parameter<"fp32 FLOP/s">:$flops_f32,
    PP_F64Parameter<"fp16/bf16 FLOP/s">:$flops_f16,
    PP_F64Parameter<"fp64 FLOP/s">:$flops_f64,
    "int64_t":$memory_bytes,
    PP_F64Parameter<"bytes/s">:$memory_bandwidth,
    DefaultValuedParameter<"int64_t", "0">:$node,
    PP_F64Parameter<"processors", "::llvm::APFloat(1.0)">:$processors
  );
  let assemblyFormat = "`<` struct(params) `>`";
}

def PP_ClusterNodeAttr : PP_Attr<"ClusterNode", "cluster_node"> {
  let summary = "A node of a #pp.cluster";
  let description = [{
    Its name, the link between two of its devices where it differs from the
    cluster's `intra_node` default, and the processors its devices share
    (0: each has its own).
  }];
  let parameters = (ins
    StringRefParameter<"name">:$name,
    OptionalParameter<"::pp::pipeline::LinkAttr">:$intra_node,
    PP_F64Parameter<"processors", "::llvm::APFloat(0.0)">:$shared_processors
  );
  let assemblyFormat = "`<` struct(params) `>`";
}

def PP_ClusterLinkAttr : PP_Attr<"ClusterLink", "cluster_link"> {
  let summary = "A link of a #pp.cluster between two devices (by index)";
  let parameters = (ins "int64_t":$a, "int64_t":$b,
                        PP_F64Parameter<"bytes/s">:$bandwidth,
                        PP_F64Parameter<"seconds">:$latency);
  let assemblyFormat = "`<` struct(params) `>`";
}

def PP_ClusterAttr : PP_Attr<"Cluster", "cluster"> {
  let summary = "The devices a model is planned for and their links";
  let description = [{
    The cluster of a `cluster=` option (pp/Cluster/Cluster.h), parsed once:
    `--pp-partition` sets it on the module as `pp.cluster`, and the passes
    after it (`--pp-recompute`, `--pp-plan-report`) read it instead of their
    own `cluster=`. Devices, nodes and links are lists of
    `#pp.cluster_device`, `#pp.cluster_node` and `#pp.cluster_link`, written
    without their `#pp.` prefix. `intra_node` and `inter_node` are the links
    between two devices of one node and of two nodes where no other applies;
    `virtual_workers` (optional) group the devices, in pipeline order.

    ```mlir
    module attributes {pp.cluster = #pp.cluster<
        devices = [<name = "gpu0", kind = "T4", flops_f32 = 8.1e12,
                    flops_f16 = 6.5e13, flops_f64 = 2.5e11,
                    memory_bytes = 16000000000, memory_bandwidth = 3.2e11>],
        nodes = [<name = "node0">],
        intra_node = <bandwidth = 1.6e10, latency = 1.0e-05>,
        inter_node = <bandwidth = 1.25e10, latency = 1.0e-05>>} {}
    ```
  }];
  let parameters = (ins
    PP_AttrListParameter<"::pp::pipeline::ClusterDeviceAttr", "devices">:$devices,
    PP_AttrListParameter<"::pp::pipeline::ClusterNodeAttr", "nodes">:$nodes,
    "::pp::pipeline::LinkAttr":$intra_node,
    "::pp::pipeline::LinkAttr":$inter_node,
    PP_AttrListParameter<"::pp::pipeline::ClusterLinkAttr", "links">:$links,
    PP_AttrListParameter<"::mlir::DenseI64ArrayAttr",
                         "device indices per worker">:$virtual_workers
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The attribute of a parsed cluster; getCluster gives it back.
    static ClusterAttr get(::mlir::MLIRContext *context,
                           const ::pp::cluster::Cluster &cluster);
    /// The cluster in the form the planners read (the inverse of the
    /// builder from one).
    ::pp::cluster::Cluster getCluster() const;
  }];
}

#endif // PP_DIALECT_PP_IR_PPATTRS_TD
