"""Checks that split, scheduled pipelines train exactly like the unsplit step.

For one test model: exports it (dropout off unless --dropout, same weights)
at the micro-batch size and at the whole mini-batch (micro-batch x m) with torch_reference.py,
builds the reference training step from the whole-batch model
(--pp-training-step) and runs it with pp-interpret; then, for every
configuration "schedule:devices:recompute" (recompute none, full,
selective, or auto@BYTES: automatic under that activation budget), compiles the micro-batch model
with --pp-compile (m micro-batches, a compute-bound cluster of that many
devices so every stage gets work), runs the pipeline on the same data with
pp-interpret (one thread per device) and compares the loss of every step and
every final global (weights, optimizer and BatchNorm state).

--shared NAME prints, per configuration, the stages that read global NAME
and their devices (a weight two layers share).

--dp N trains N data-parallel replicas of each pipeline (--pp-compile dp=N,
N x devices devices): the whole mini-batch is then micro-batch x m x N and
replica r takes its r-th part; it must still train like the unsplit step.

--reference one-stage compares with the same program on one device instead
(for BatchNorm models, whose statistics are per micro-batch by definition).

--dropout keeps the model's Dropout in training mode: masks follow the op,
the step and the element's place in the whole mini-batch (docs/cli.md), so
the pipeline must still train like the unsplit step.

A tensor passes when max|split - reference| <= rtol * max|reference| + atol;
prints one line per configuration and exits non-zero on a mismatch.
"""
import argparse
import hashlib
import importlib.util
import json
import os
import re
import shutil
import sys
import tempfile

import numpy as np

from compare import Comparison, load_globals, run

HERE = os.path.dirname(os.path.abspath(__file__))


def cluster_file(work, devices, fast_last=False):
    """A cluster whose links cost nothing: the partition follows compute.
    With fast_last the devices are P4000s and the last one an H100, so a
    data-parallel replica holding it cuts the model differently from the
    others (heterogeneous virtual workers). (Against T4s the MLP's cut on
    the H100 ties with the T4s' once the partitioner counts each stage's
    update.)"""
    path = os.path.join(
        work, f"cluster{devices}{'-fast' if fast_last else ''}.json")
    kinds = [{"kind": "P4000", "count": devices}]
    if fast_last:
        kinds = [{"kind": "P4000", "count": devices - 1},
                 {"kind": "H100", "count": 1}]
    with open(path, "w") as f:
        json.dump({"nodes": [{"name": "n0", "devices": kinds}],
            "links": {"intra_node": {"bandwidth": "1000TB/s",
                                     "latency": "0us"}}}, f)
    return path


def export_micro_and_whole(model, work, micro_batch, microbatches,
                           dtype="float32", dropout=False):
    """Exports `model` (same weights; dropout off unless `dropout`) at the
    micro-batch size and at the whole mini-batch into work/micro and
    work/whole; returns both directories (model.onnx, input.npy, labels.npy
    in each)."""
    dirs = [os.path.join(work, "micro"), os.path.join(work, "whole")]
    batches = [micro_batch, micro_batch * microbatches]

    def export(outs):
        # One process for both: importing torch is most of an export's time.
        command = [sys.executable, os.path.join(HERE, "torch_reference.py"),
                   "--model", model, "--steps", "0", "--dtype", dtype]
        for out, batch in zip(outs, batches):
            command += ["--out", out, "--batch", str(batch)]
        run(command + (["--dropout"] if dropout else []))

    cached_export(export, dirs, [model, dtype, dropout] + batches)
    if dropout:
        count = dropout_count(os.path.join(dirs[0], "model.onnx"))
        if count == 0:
            sys.exit(f"{model}: --dropout, but the export has no Dropout in "
                     "training mode with a non-zero ratio")
        print(f"{model}: {count} Dropout ops in training mode")
    return dirs


def cached_export(export, dirs, key_fields):
    """Runs export(dirs), or copies what an earlier call with the same
    `key_fields` exported into PP_EXPORT_CACHE (the lit tests set it; many
    of them export the same model at the same batch sizes). The exports are
    deterministic and the key holds the exporting scripts' text, so a copy
    is the file a new export would write."""
    cache = os.environ.get("PP_EXPORT_CACHE")
    if not cache:
        export(dirs)
        return
    digest = hashlib.sha256(repr(key_fields).encode())
    sources = [os.path.join(HERE, script)
               for script in ("torch_reference.py", "make_models.py")]
    # The exporter's version, read without importing torch (3 s).
    for package in ("torch", "onnx"):
        spec = importlib.util.find_spec(package)
        if spec and spec.origin:
            sources.append(os.path.join(os.path.dirname(spec.origin),
                                        "version.py"))
    for source in sources:
        if os.path.exists(source):
            with open(source, "rb") as f:
                digest.update(f.read())
    entry = os.path.join(cache, digest.hexdigest()[:24])
    names = [str(i) for i in range(len(dirs))]
    if not os.path.isdir(entry):
        os.makedirs(cache, exist_ok=True)
        # Exported aside, then renamed: a concurrent test sees the whole
        # entry or none, and the loser of a race drops its copy.
        staging = tempfile.mkdtemp(dir=cache, prefix="tmp-")
        export([os.path.join(staging, n) for n in names])
        try:
            os.rename(staging, entry)
        except OSError:
            shutil.rmtree(staging, ignore_errors=True)
    for name, out in zip(names, dirs):
        shutil.rmtree(out, ignore_errors=True)
        shutil.copytree(os.path.join(entry, name), out)


def dropout_count(path):
    """The Dropout nodes of an ONNX model that drop something: a constant
    ratio above 0 and training mode on."""
    import onnx
    from onnx import numpy_helper
    graph = onnx.load(path).graph
    consts = {}
    for node in graph.node:
        if node.op_type == "Constant":
            for attr in node.attribute:
                if attr.name == "value":
                    consts[node.output[0]] = numpy_helper.to_array(attr.t)
    for init in graph.initializer:
        consts[init.name] = numpy_helper.to_array(init)
    count = 0
    for node in graph.node:
        if node.op_type != "Dropout" or len(node.input) < 3:
            continue
        ratio, mode = consts.get(node.input[1]), consts.get(node.input[2])
        if ratio is not None and mode is not None and float(ratio) > 0 \
                and bool(mode):
            count += 1
    return count


def compile_pipeline(pipeline_opt, model, work, name, schedule, devices,
                     recompute, microbatches, optimizer, extra="", dp=1,
                     hetero=False, tp=1):
    """`pipeline-opt model --pp-compile=...` into work/name.mlir on a
    compute-bound cluster of `devices`; recompute is none, full, selective
    or auto@BYTES (automatic under that activation budget). Full and auto
    (under a budget the model does not fit) must recompute something;
    selective only where that lowers the kept bytes."""
    mlir = os.path.join(work, name + ".mlir")
    policy, _, budget = recompute.partition("@")
    if budget:
        extra += f" activation-budget={budget}"
    if dp > 1:
        extra += f" dp={dp}"
    # tp: a degree for every stage, or a per-stage list ("1,2"), whose
    # groups take one device each of the cluster.
    degrees = [int(d) for d in str(tp).split(",")]
    if str(tp) != "1":
        extra += f" tp={tp}"
    ranks = devices * degrees[0] if len(degrees) == 1 else sum(degrees)
    run([pipeline_opt, model,
         f"--pp-compile=cluster={cluster_file(work, ranks * dp, hetero)} "
         f"schedule={schedule} microbatches={microbatches} "
         f"recompute={policy} {optimizer}{extra}", "-o", mlir])
    if policy in ("full", "auto") and "pp.recompute" not in open(mlir).read():
        sys.exit(f"{name}: recompute={recompute} recomputed nothing")
    if hetero and "placements = [" not in open(mlir).read():
        sys.exit(f"{name}: the virtual workers' partitions do not differ")
    return mlir


def data_flags(mlir, files):
    """The --data flags of a generated program compiled to `mlir`: its
    inputs (pp.input_names, in order) from `files`."""
    names = re.search(r'pp.input_names = \[([^\]]*)\]',
                      open(mlir).read()).group(1)
    names = [n.strip().strip('"') for n in names.split(",")]
    return [f"--data={n}={f}" for n, f in zip(names, files)]


def train_on_interpreter(pp_interpret, mlir, steps, dump, data):
    """Trains `mlir` for `steps` steps on pp-interpret; its losses and the
    final globals (dumped to `dump`)."""
    out = run([pp_interpret, mlir, f"--steps={steps}",
               f"--dump-globals={dump}"] + data)
    return losses_of(out), load_globals(dump)


def unsplit_step(pipeline_opt, whole_dir, work, optimizer):
    """The unpipelined training step of the whole-batch model."""
    mlir = os.path.join(work, "reference.mlir")
    run([pipeline_opt, os.path.join(whole_dir, "model.onnx"),
         f"--pp-training-step={optimizer}", "-o", mlir])
    return mlir


def stages_reading(mlir, name):
    """The stages whose functions read global `name` in `mlir`."""
    stages, stage = set(), None
    func = re.compile(r"func\.func @stage(\d+)_")
    read = re.compile(r'onnx\.global_read @"?' + re.escape(name) + r'"?\s')
    with open(mlir) as f:
        for line in f:
            if (match := func.search(line)):
                stage = int(match.group(1))
            elif stage is not None and read.search(line):
                stages.add(stage)
    return sorted(stages)


def losses_of(out):
    return [float(line.split()[3]) for line in out.splitlines()
            if line.startswith("step ")]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--work", required=True, help="scratch directory")
    parser.add_argument("--pipeline-opt", default="pipeline-opt")
    parser.add_argument("--pp-interpret", default="pp-interpret")
    parser.add_argument("--micro-batch", type=int, default=2)
    parser.add_argument("--microbatches", type=int, default=4)
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--momentum", type=float, default=0.0)
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--configs", default="1f1b:2:none",
                        help="comma-separated schedule:devices:recompute")
    parser.add_argument("--reference", choices=["unsplit", "one-stage"],
                        default="unsplit")
    parser.add_argument("--shared", default="",
                        help="a global read by several layers: print the "
                             "stages (and their devices) that read it")
    parser.add_argument("--dropout", action="store_true",
                        help="keep the model's Dropout (training mode)")
    parser.add_argument("--dp", type=int, default=1,
                        help="data-parallel replicas of every pipeline")
    parser.add_argument("--rtol", type=float, default=1e-4)
    parser.add_argument("--atol", type=float, default=1e-6)
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    m = args.microbatches

    micro_dir, whole_dir = export_micro_and_whole(
        args.model, args.work, args.micro_batch, m * args.dp, args.dtype,
        args.dropout)
    data = [f"--input=arg0={os.path.join(whole_dir, 'input.npy')}",
            f"--input=arg1={os.path.join(whole_dir, 'labels.npy')}"]
    optimizer = f"lr={args.lr} momentum={args.momentum}"

    def pipelined(name, schedule, devices, recompute, dp=args.dp):
        mlir = compile_pipeline(args.pipeline_opt,
                                os.path.join(micro_dir, "model.onnx"),
                                args.work, name, schedule, devices, recompute,
                                m if dp == args.dp else m * args.dp,
                                optimizer, dp=dp)
        if args.shared:
            stages = stages_reading(mlir, args.shared)
            print(f"{args.model} {name}: {args.shared} read by stages "
                  f"{', '.join(map(str, stages))} on devices "
                  f"{', '.join(str(s % devices) for s in stages)}")
        return train_on_interpreter(args.pp_interpret, mlir, args.steps,
                         os.path.join(args.work, name + ".globals"), data)

    if args.reference == "unsplit":
        mlir = unsplit_step(args.pipeline_opt, whole_dir, args.work, optimizer)
        ref_losses, ref_globals = train_on_interpreter(
            args.pp_interpret, mlir, args.steps,
            os.path.join(args.work, "reference.globals"), data)
    else:
        # One device, no replicas: the same m x dp micro-batches in a row.
        ref_losses, ref_globals = pipelined("reference", "1f1b", 1, "none",
                                            dp=1)

    failed = False
    for config in args.configs.split(","):
        schedule, devices, recompute = config.split(":")
        name = f"{schedule}-{devices}-{recompute}"
        if args.dp > 1:
            name += f"-dp{args.dp}"
        losses, final = pipelined(name, schedule, int(devices), recompute)
        check = Comparison(args.rtol, args.atol)
        failures = check.failures

        if len(losses) != len(ref_losses):
            failures.append(f"{len(losses)} losses vs {len(ref_losses)}")
        for i, (a, b) in enumerate(zip(losses, ref_losses)):
            check(f"loss of step {i + 1}", [a], [b])
        for key, value in ref_globals.items():
            if key not in final:
                failures.append(f"{key}: missing in the pipeline")
            elif np.issubdtype(value.dtype, np.floating):
                check(key, final[key], value)
            elif not np.array_equal(final[key], value):
                failures.append(f"{key}: differs")
        print(f"{args.model} {name}: {len(ref_globals)} globals and "
              f"{len(losses)} losses, worst relative error {check.worst:.2e}")
        for failure in failures:
            print("MISMATCH", failure)
        failed |= bool(failures)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
