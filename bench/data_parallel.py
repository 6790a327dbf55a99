#!/usr/bin/env python3
"""Data-parallel generated programs against one replica, same run.

Weak scaling: the model's step of m micro-batches on 1 stage and 1 MPI rank
bound to a core, against the same step per replica on dp = 2 replicas (2
ranks, one core each) over a global batch twice as large: samples per
second of both, their ratio next to the ideal 2, and the share of the
dp = 2 step outside the replicas' compute (busy time from --log: the
gradient all-reduce, waits, the step's bookkeeping) next to how much the
compute itself slowed (two ranks share the memory bus and caches). Medians over the steps after a warm-up,
both programs run alternately so that neither gets a quieter machine.

Usage: /usr/bin/python3 bench/data_parallel.py --build build
"""
import argparse
import os
import shlex
import statistics
import sys
import tempfile

ROOT = os.path.dirname(os.path.abspath(__file__)) + "/.."
sys.path.insert(0, os.path.join(ROOT, "bench"))
sys.path.insert(0, os.path.join(ROOT, "python"))
from generated_step import (data_args, export, generated,  # noqa: E402
                            step_times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--models", default="mlp,resnet18")
    parser.add_argument("--micro-batch", type=int, default=8)
    parser.add_argument("--microbatches", type=int, default=4)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--mpirun", default="mpirun --allow-run-as-root "
                        "--oversubscribe")
    args = parser.parse_args()
    m, mb = args.microbatches, args.micro_batch
    mpirun = shlex.split(args.mpirun) + ["--bind-to", "core"]
    print(f"1 thread per rank, {m} micro-batches of {mb} per replica, "
          f"median of {args.steps - 1} steps x {args.repeats} runs")
    for name in args.models.split(","):
        with tempfile.TemporaryDirectory() as work:
            export(work, name, mb)
            one_dir, two_dir = (os.path.join(work, d) for d in ("b1", "b2"))
            for d, n in ((one_dir, m * mb), (two_dir, 2 * m * mb)):
                os.makedirs(d)
                export(d, name, n)
            one = generated(args.build, work, "one", 1, m)
            two = generated(args.build, work, "two", 1, m, dp=2)
            t1, t2, busy1, busy2 = [], [], [], []
            for _ in range(args.repeats):
                t1 += step_times(mpirun + ["-np", "1", one] +
                                 data_args(one_dir, name),
                                 os.path.join(work, "one.jsonl"), args.steps,
                                 busy1)
                t2 += step_times(mpirun + ["-np", "2", two] +
                                 data_args(two_dir, name),
                                 os.path.join(work, "two.jsonl"), args.steps,
                                 busy2)
            t1, t2 = statistics.median(t1), statistics.median(t2)
            # One stage: busy is the replica's compute per step (the mean
            # over the replicas under dp = 2).
            b1, b2 = statistics.median(busy1), statistics.median(busy2)
            rate1 = m * mb / t1 * 1e3
            rate2 = 2 * m * mb / t2 * 1e3
            print(f"{name:10s} 1 replica {t1:8.2f} ms/step "
                  f"({rate1:8.1f} samples/s), 2 replicas {t2:8.2f} ms/step "
                  f"({rate2:8.1f} samples/s): {rate2 / rate1:4.2f}x "
                  f"(ideal 2.00x); compute {b1:.2f} -> {b2:.2f} ms "
                  f"({100 * (b2 / b1 - 1):+.1f}%), outside compute "
                  f"{t1 - b1:.2f} -> {t2 - b2:.2f} ms")


if __name__ == "__main__":
    main()
