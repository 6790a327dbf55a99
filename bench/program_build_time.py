#!/usr/bin/env python3
"""Times the build of a generated program: torchvision's mobilenet_v2 on one
stage, split into parts and translation units (the default budgets of
--pp-compile emit-dir=) against the same program as one unit and one
function a stage function (emit-function-ops=0 emit-tu-bytes=0, the layout
before the split).

Exports mobilenet_v2 (10 classes, input --input, opset 17, training mode,
as python/pp_export_torch.py does), compiles it with --pp-compile
"cluster=<1 device> schedule=1f1b microbatches=2 emit-dir=...", configures
each program into a clean build directory and times `cmake --build -j
JOBS` (wall and the compilers' CPU seconds); then trains both 2 steps and
checks that their losses are equal bit for bit. Prints the load average
too: the machine is shared, so compare runs of one invocation.

Usage: /usr/bin/python3 bench/program_build_time.py --build build
       [--jobs 2] [--input 2,3,32,32] [--layouts split,unsplit]
"""
import argparse
import json
import os
import resource
import shutil
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.abspath(__file__)) + "/.."
sys.path.insert(0, os.path.join(ROOT, "python"))
from check_pipeline import cluster_file  # noqa: E402
from compare import run  # noqa: E402

LAYOUTS = {"split": "", "unsplit": " emit-function-ops=0 emit-tu-bytes=0"}


def export_mobilenet(path, shape):
    import torch
    import torchvision
    from pp_export_torch import export
    torch.manual_seed(0)
    model = torchvision.models.mobilenet_v2(num_classes=10)
    model.train()
    export(model, (torch.randn(*shape),), path, input_names=["input"],
           output_names=["logits"])


def children_cpu():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", required=True,
                        help="pipeline-opt build directory")
    parser.add_argument("--work", help="scratch directory (default: a new "
                        "temporary one)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--input", default="2,3,32,32")
    parser.add_argument("--layouts", default="split,unsplit")
    args = parser.parse_args()
    work = args.work or tempfile.mkdtemp(prefix="pp-build-time-")
    os.makedirs(work, exist_ok=True)
    shape = [int(d) for d in args.input.split(",")]
    model = os.path.join(work, "mobilenet_v2.onnx")
    export_mobilenet(model, shape)
    losses = {}
    for layout in args.layouts.split(","):
        program = os.path.join(work, layout)
        summary = os.path.join(work, layout + ".summary")
        run([os.path.join(args.build, "bin", "pipeline-opt"), model,
             f"--pp-compile=cluster={cluster_file(work, 1)} schedule=1f1b "
             f"microbatches=2 lr=0.01 report={summary} emit-dir={program}"
             + LAYOUTS[layout], "-o", os.path.join(work, layout + ".mlir")])
        units = [line for line in open(summary)
                 if "translation units" in line]
        build = os.path.join(program, "build")
        shutil.rmtree(build, ignore_errors=True)
        run(["cmake", "-S", program, "-B", build, "-G", "Ninja",
             "-DCMAKE_BUILD_TYPE=Release"])
        load = os.getloadavg()[0]
        cpu, started = children_cpu(), time.time()
        run(["cmake", "--build", build, "-j", str(args.jobs)])
        wall, cpu = time.time() - started, children_cpu() - cpu
        print(f"mobilenet_v2 {'x'.join(map(str, shape))} {layout}: build "
              f"{wall:.1f} s wall, {cpu:.1f} s CPU, -j{args.jobs}, load "
              f"{load:.2f} -> {os.getloadavg()[0]:.2f}; "
              f"{units[0].strip() if units else '?'}", flush=True)
        log = os.path.join(work, layout + ".jsonl")
        if os.path.exists(log):
            os.remove(log)
        run([os.path.join(build, "train"), "--local", "--steps=2",
             f"--log={log}"],
            env=dict(os.environ, OPENBLAS_NUM_THREADS="1"))
        losses[layout] = [json.loads(line)["loss"] for line in open(log)]
    if len(losses) > 1:
        values = list(losses.values())
        same = all(v == values[0] for v in values)
        print(f"losses of 2 steps: {values[0]} "
              f"{'identical in every layout' if same else 'DIFFER: ' + str(losses)}")
        return 0 if same else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
