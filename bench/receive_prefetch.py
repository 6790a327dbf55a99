#!/usr/bin/env python3
"""Times receive prefetch: the same 2-stage 1F1B program run with
`--prefetch-receives=on` (the default: the next action's receives are posted
before the running one computes) and `=off` (each action's receives are
posted when it starts), alternating, under `mpirun -np 2 --bind-to core`.

For each model (resnet18 and GPT by default): m micro-batches of the given
size, one kernel thread per rank. Reports the median step time of each mode
over all repeats, the ratio on / off, and each stage's median busy time
(the rest of the step is waiting for messages and the pipeline's fill and
drain).

Usage: /usr/bin/python3 bench/receive_prefetch.py --build build
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
from generated_step import (  # noqa: E402
    data_args, export, generated, step_times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--models", default="resnet18,gpt")
    parser.add_argument("--micro-batch", type=int, default=4)
    parser.add_argument("--microbatches", type=int, default=8)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--mpirun", default="mpirun --allow-run-as-root "
                        "--oversubscribe")
    args = parser.parse_args()
    m = args.microbatches
    mpirun = shlex.split(args.mpirun) + ["--bind-to", "core", "-np", "2"]
    print(f"2 MPI ranks, 1 thread each, 1F1B, {m} micro-batches; median of "
          f"{args.steps - 1} steps after a warm-up x {args.repeats} "
          "alternating repeats")
    for name in args.models.split(","):
        with tempfile.TemporaryDirectory() as work:
            whole = os.path.join(work, "whole")
            os.makedirs(whole)
            export(work, name, args.micro_batch)
            export(whole, name, args.micro_batch * m)
            train = generated(args.build, work, "two", 2, m)
            data = data_args(whole, name)
            times = {"on": [], "off": []}
            busy = {"on": [], "off": []}
            for _ in range(args.repeats):
                for mode in ("on", "off"):
                    times[mode] += step_times(
                        mpirun + [train, f"--prefetch-receives={mode}"] +
                        data, os.path.join(work, f"{mode}.jsonl"), args.steps,
                        busy[mode])
            median = {k: statistics.median(v) for k, v in times.items()}
            per_stage = {k: [statistics.median(v[s::2]) for s in range(2)]
                         for k, v in busy.items()}
            print(f"{name:9s} micro-batch {args.micro_batch}: prefetch on "
                  f"{median['on']:8.2f} ms (busy "
                  + ", ".join(f"{b:.1f}" for b in per_stage["on"])
                  + f"), off {median['off']:8.2f} ms (busy "
                  + ", ".join(f"{b:.1f}" for b in per_stage["off"])
                  + f"): on / off {median['on'] / median['off']:.3f}")


if __name__ == "__main__":
    main()
