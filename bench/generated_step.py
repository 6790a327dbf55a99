#!/usr/bin/env python3
"""Times generated training programs against PyTorch CPU and against
themselves on one core.

1. One SGD training step of the MLP and resnet18 test models: the generated
   program compiled for one stage (`--pp-compile ... emit-dir=`, built with
   CMake, run `--local --threads 1`) against PyTorch CPU with one thread,
   same shapes, float32. Median of the steps after a warm-up; the program's
   time per step comes from its --log (step_ms).
2. Pipeline speed-up: resnet18, 1F1B with m = 8 micro-batches, 2 stages on 2
   MPI ranks with one core each (`mpirun -np 2 --bind-to core`) against the
   same step on 1 stage and 1 core; next to the ideal 2m / (m + 1) of two
   balanced stages without communication.

Usage: /usr/bin/python3 bench/generated_step.py --build build
"""
import argparse
import json
import os
import shlex
import statistics
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.abspath(__file__)) + "/.."
sys.path.insert(0, os.path.join(ROOT, "bench"))
sys.path.insert(0, os.path.join(ROOT, "python"))
from train_step import torch_step_times  # noqa: E402
from check_pipeline import cluster_file  # noqa: E402
from compare import run  # noqa: E402


def generated(build, work, name, devices, microbatches, dp=1, extra=""):
    """Compiles and builds the program (dp data-parallel replicas of
    `devices` each); returns the train executable."""
    program = os.path.join(work, name)
    replicas = f" dp={dp}" if dp > 1 else ""
    run([os.path.join(build, "bin", "pipeline-opt"),
         os.path.join(work, "model.onnx"),
         f"--pp-compile=cluster={cluster_file(work, devices * dp)} "
         f"schedule=1f1b microbatches={microbatches} lr=0.01{replicas} "
         f"report= emit-dir={program}{extra}",
         "-o", os.path.join(work, name + ".mlir")])
    run(["cmake", "-S", program, "-B", program + "/build", "-G", "Ninja",
         "-DCMAKE_BUILD_TYPE=Release"])
    run(["cmake", "--build", program + "/build"])
    return os.path.join(program, "build", "train")


def step_times(cmd, log, steps, busy=None):
    """Step times after the warm-up; `busy` gets each stage's median busy
    time per step."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    if os.path.exists(log):
        os.remove(log)
    run(cmd + [f"--steps={steps}", f"--log={log}", "--threads=1"], env=env)
    records = [json.loads(line) for line in open(log)][1:]
    if busy is not None:
        busy.extend(statistics.median(r["busy_ms"][s] for r in records)
                    for s in range(len(records[0]["busy_ms"])))
    return [r["step_ms"] for r in records]


def export(work, name, batch):
    run([sys.executable, os.path.join(ROOT, "python", "torch_reference.py"),
         "--model", name, "--out", work, "--steps", "1", "--batch",
         str(batch)])


def data_args(work, name):
    first = "tokens" if name == "gpt" else "input"
    return [f"--data={first}=" + os.path.join(work, "input.npy"),
            "--data=labels=" + os.path.join(work, "labels.npy")]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--models", default="mlp,resnet18")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--pipeline-model", default="resnet18")
    parser.add_argument("--micro-batch", type=int, default=4)
    parser.add_argument("--microbatches", type=int, default=8)
    parser.add_argument("--mpirun", default="mpirun --allow-run-as-root "
                        "--oversubscribe")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(f"1 thread, median of {args.steps - 1} steps after one warm-up, "
          "float32")
    for name in args.models.split(","):
        with tempfile.TemporaryDirectory() as work:
            batch = args.batch if name in ("resnet18", "transformer") else 0
            export(work, name, batch)
            train = generated(args.build, work, "one", 1, 1)
            ours = statistics.median(step_times(
                [train, "--local"] + data_args(work, name),
                os.path.join(work, "log.jsonl"), args.steps))
            ref = statistics.median(torch_step_times(
                name, work, args.steps, 1, batch))
            shape = list(np.load(os.path.join(work, "input.npy")).shape)
            print(f"{name:12s} input {shape}: generated {ours:8.2f} ms, "
                  f"PyTorch {ref:8.2f} ms, ratio {ours / ref:5.2f}x")

    name, m = args.pipeline_model, args.microbatches
    with tempfile.TemporaryDirectory() as work:
        export(work, name, args.micro_batch)
        whole = os.path.join(work, "whole")
        os.makedirs(whole)
        export(whole, name, args.micro_batch * m)
        data = data_args(whole, name)
        one = generated(args.build, work, "one", 1, m)
        two = generated(args.build, work, "two", 2, m)
        # Both as MPI jobs bound to cores, alternating, so that neither
        # gets a quieter machine; medians over all repeats.
        mpirun = shlex.split(args.mpirun) + ["--bind-to", "core"]
        t1, t2, busy1, busy2 = [], [], [], []
        for _ in range(args.repeats):
            t1 += step_times(mpirun + ["-np", "1", one] + data,
                             os.path.join(work, "one.jsonl"), args.steps,
                             busy1)
            t2 += step_times(mpirun + ["-np", "2", two] + data,
                             os.path.join(work, "two.jsonl"), args.steps,
                             busy2)
        t1, t2 = statistics.median(t1), statistics.median(t2)
        stages = len(busy2) // args.repeats
        busy2 = [statistics.median(busy2[s::stages]) for s in range(stages)]
        print(f"{name} 1F1B, {m} micro-batches of {args.micro_batch}: "
              f"1 stage on 1 core {t1:8.2f} ms (busy "
              f"{statistics.median(busy1):.1f} ms), 2 stages on 2 MPI ranks "
              f"{t2:8.2f} ms (busy per stage "
              + ", ".join(f"{b:.1f}" for b in busy2) + " ms): "
              f"speed-up {t1 / t2:4.2f}x (ideal 2m/(m+1) = "
              f"{2 * m / (m + 1):4.2f}x)")


if __name__ == "__main__":
    main()
