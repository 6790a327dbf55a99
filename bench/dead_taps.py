#!/usr/bin/env python3
"""Convolutions cut to their live taps against the whole kernel.

resnet18 on 32x32 images (CIFAR-sized) runs layer4's 3x3 kernels over 1x1
planes, where 8 of 9 taps only read padding. The runtime cuts such kernels
to their live taps (runtime/lib/cpu/DeadTaps.h); PP_RUNTIME_DEAD_TAPS=keep
runs the whole kernel. One SGD step of --batch images, the one-stage
generated program on one core (`--local --threads 1`), cut and kept run
alternately --repeats times, next to PyTorch CPU with one thread on the
same step; and the 2-rank 1F1B pipeline (m micro-batches of
--micro-batch, stages cut for P4000s) cut and kept, alternately. Medians of
the steps after a warm-up; ratios are kept / cut.

Usage: /usr/bin/python3 bench/dead_taps.py --build build
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
from generated_step import data_args, export, generated, step_times  # noqa
from train_step import torch_step_times  # noqa: E402


def alternate(cmd, work, steps, repeats, busy=None):
    """Median step ms of `cmd` with dead taps cut and kept, alternating."""
    times = {"cut": [], "keep": []}
    for _ in range(repeats):
        for mode in times:
            if mode == "keep":
                os.environ["PP_RUNTIME_DEAD_TAPS"] = "keep"
            else:
                os.environ.pop("PP_RUNTIME_DEAD_TAPS", None)
            times[mode] += step_times(cmd, os.path.join(work, "log.jsonl"),
                                      steps)
    os.environ.pop("PP_RUNTIME_DEAD_TAPS", None)
    return {mode: statistics.median(t) for mode, t in times.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--model", default="resnet18")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--micro-batch", type=int, default=16)
    parser.add_argument("--microbatches", type=int, default=8)
    parser.add_argument("--mpirun", default="mpirun --allow-run-as-root "
                        "--oversubscribe --bind-to core")
    args = parser.parse_args()
    name = args.model
    with tempfile.TemporaryDirectory() as work:
        export(work, name, args.batch)
        train = generated(args.build, work, "one", 1, 1)
        one = alternate([train, "--local"] + data_args(work, name), work,
                        args.steps, args.repeats)
        torch_ms = statistics.median(torch_step_times(
            name, work, args.steps, 1, args.batch))
        print(f"{name}, batch {args.batch}, 1 core: cut {one['cut']:.1f} ms, "
              f"kept {one['keep']:.1f} ms ({one['keep'] / one['cut']:.2f}x), "
              f"PyTorch {torch_ms:.1f} ms (cut {one['cut'] / torch_ms:.2f}x "
              f"PyTorch's time, kept {one['keep'] / torch_ms:.2f}x)",
              flush=True)
    m, mb = args.microbatches, args.micro_batch
    with tempfile.TemporaryDirectory() as work:
        export(work, name, mb)
        whole = os.path.join(work, "whole")
        os.makedirs(whole)
        export(whole, name, m * mb)
        two = generated(args.build, work, "two", 2, m)
        cmd = shlex.split(args.mpirun) + ["-np", "2", two] + data_args(
            whole, name)
        pipe = alternate(cmd, work, args.steps, args.repeats)
        samples = m * mb
        print(f"{name} 1F1B, {m} micro-batches of {mb}, 2 MPI ranks: cut "
              f"{samples / pipe['cut'] * 1e3:.1f} samples/s, kept "
              f"{samples / pipe['keep'] * 1e3:.1f} samples/s "
              f"({pipe['keep'] / pipe['cut']:.2f}x)")


if __name__ == "__main__":
    main()
