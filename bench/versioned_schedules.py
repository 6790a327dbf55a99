#!/usr/bin/env python3
"""Weight-versioned schedules against 1F1B, generated programs, same run.

For 2 and 4 MPI ranks (a stage each): the model's step of m micro-batches
compiled with schedule=1f1b, pipedream, pipedream-2bw (an update every p
micro-batches, its m >= p) and nf1b (an update every --update-every),
built, and run alternately --repeats times; per schedule the samples per
second (median step after a warm-up), its ratio to 1F1B, and the bubble
measured from each stage's busy time (--log): 1 - mean busy / step time.
A step drains the pipeline at its end (the runtime's unit for logs and
checkpoints), so the asynchronous schedules gain within a step, more so
as m grows. With more ranks than cores the ranks share cores (bubble and
rates then include that).

Usage: /usr/bin/python3 bench/versioned_schedules.py --build build
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
from check_pipeline import cluster_file  # noqa: E402
from compare import run  # noqa: E402
from generated_step import data_args, export, step_times  # noqa: E402


def program(build, work, name, stages, m, schedule, update_every):
    out = os.path.join(work, name)
    every = f" update-every={update_every}" if update_every else ""
    run([os.path.join(build, "bin", "pipeline-opt"),
         os.path.join(work, "model.onnx"),
         f"--pp-compile=cluster={cluster_file(work, stages)} "
         f"schedule={schedule} microbatches={m}{every} lr=0.01 report= "
         f"emit-dir={out}", "-o", os.path.join(work, name + ".mlir")])
    run(["cmake", "-S", out, "-B", out + "/build", "-G", "Ninja",
         "-DCMAKE_BUILD_TYPE=Release"])
    run(["cmake", "--build", out + "/build"])
    return os.path.join(out, "build", "train")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--model", default="resnet18")
    parser.add_argument("--micro-batch", type=int, default=4)
    parser.add_argument("--microbatches", type=int, default=8)
    parser.add_argument("--update-every", type=int, default=2,
                        help="nf1b's micro-batches per update")
    parser.add_argument("--ranks", default="2,4")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--mpirun", default="mpirun --allow-run-as-root "
                        "--oversubscribe")
    args = parser.parse_args()
    m, mb = args.microbatches, args.micro_batch
    cores = os.cpu_count() or 1
    print(f"{args.model}, {m} micro-batches of {mb} per step, 1 thread per "
          f"rank, {cores} cores, median of {args.steps - 1} steps x "
          f"{args.repeats} runs")
    print("| ranks | schedule | update every | samples/s | vs 1F1B | "
          "bubble (busy) |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as work:
        export(work, args.model, mb)
        data_dir = os.path.join(work, "whole")
        os.makedirs(data_dir)
        export(data_dir, args.model, m * mb)
        for p in map(int, args.ranks.split(",")):
            bind = "core" if p <= cores else "none"
            mpirun = shlex.split(args.mpirun) + ["--bind-to", bind]
            configs = [("1f1b", 0), ("pipedream", 1),
                       ("pipedream-2bw", next(k for k in range(p, m + 1)
                                              if m % k == 0)),
                       ("nf1b", args.update_every)]
            exes = {s: program(args.build, work, f"{s}-{p}", p, m, s, n)
                    for s, n in configs}
            times = {s: [] for s, _ in configs}
            busy = {s: [] for s, _ in configs}
            for _ in range(args.repeats):
                for s, _ in configs:
                    times[s] += step_times(
                        mpirun + ["-np", str(p), exes[s]] +
                        data_args(data_dir, args.model),
                        os.path.join(work, f"{s}-{p}.jsonl"), args.steps,
                        busy[s])
            base = m * mb / statistics.median(times["1f1b"]) * 1e3
            for s, n in configs:
                step = statistics.median(times[s])
                rate = m * mb / step * 1e3
                # busy[s]: per run, each stage's median busy ms per step.
                mean_busy = statistics.mean(busy[s])
                print(f"| {p} | {s} | {n or m} | {rate:.1f} | "
                      f"{rate / base:.2f}x | "
                      f"{100 * (1 - mean_busy / step):.1f}% |")


if __name__ == "__main__":
    main()
