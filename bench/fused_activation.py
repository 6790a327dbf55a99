#!/usr/bin/env python3
"""The fused activation (Conv / BatchNormalization / Gemm + Relu) against the same
step with the Relus left as kernels of their own.

For each model, the one-stage SGD step is compiled twice (`--pp-compile`
with `fuse-activations=true` and `=false`, everything else equal: the
elementwise fusion runs in both), built, and run alternately `--repeats`
times on each thread count (`--local --threads=T`); each run takes `--steps`
steps, the first a warm-up. Prints the median ms per step of both and
fused / unfused (below 1: fusing is faster), and how many Relus were fused.

Usage: /usr/bin/python3 bench/fused_activation.py --build build
           [--models vgg11,resnet18,padnet,widemlp,mlp] [--threads 1,2]
"""
import argparse
import os
import re
import statistics
import sys
import tempfile

ROOT = os.path.dirname(os.path.abspath(__file__)) + "/.."
sys.path.insert(0, os.path.join(ROOT, "bench"))
sys.path.insert(0, os.path.join(ROOT, "python"))
from generated_step import export, generated  # noqa: E402
from model_steps import BATCH, program_step_times  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--models",
                        default="vgg11,resnet18,padnet,widemlp,mlp")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    threads = [int(t) for t in args.threads.split(",")]
    print(f"median ms per step over {args.repeats} alternating runs of "
          f"{args.steps - 1} steps after a warm-up, float32")
    print(f"{'model':10} {'threads':>7} {'fused':>9} {'unfused':>9} "
          f"{'ratio':>7} {'relus fused':>11}")
    for name in args.models.split(","):
        with tempfile.TemporaryDirectory() as work:
            export(work, name, BATCH.get(name, 0))
            fused = generated(args.build, work, "fused", 1, 1)
            unfused = generated(args.build, work, "unfused", 1, 1,
                                extra=" fuse-activations=false")
            mlir = open(os.path.join(work, "fused.mlir")).read()
            count = len(re.findall(r'pp\.activation = "Relu"', mlir))
            for t in threads:
                times = {"fused": [], "unfused": []}
                for _ in range(args.repeats):
                    times["fused"] += program_step_times(
                        fused, work, name, args.steps, t)
                    times["unfused"] += program_step_times(
                        unfused, work, name, args.steps, t)
                a = statistics.median(times["fused"])
                b = statistics.median(times["unfused"])
                print(f"{name:10} {t:>7} {a:9.2f} {b:9.2f} {a / b:7.3f} "
                      f"{count:>11}", flush=True)


if __name__ == "__main__":
    main()
