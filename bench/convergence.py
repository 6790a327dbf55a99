#!/usr/bin/env python3
"""Convergence of every schedule on a small real data set, same start.

scikit-learn's bundled digits (1,797 8x8 images, 10 classes, features / 16):
an MLP 64-64-64-10 (ReLU, torch's default initialisation, seed 0) exported
once, compiled for --ranks stages (default 2) with each schedule (1f1b,
pipedream, pipedream-2bw, nf1b, v-timeprest, i-timeprest, and HetPipe's
pipelined virtual worker with Nm = m), m micro-batches of b per step, SGD;
each generated program trains --epochs passes over the same batches in the
same order from the same initial weights, a rank per stage under mpirun
(a core each on a 2-core machine), the weight-versioned ones as one
continuous stream (train's default: drained only at the end). Writes a
table (mean loss over each epoch's steps, the measured samples/s) to
stdout and docs/convergence.md, and docs/convergence.png: loss against
samples, against the measured wall time of the run from the end of step 1
(the sum of the logged step times after it) and against simulated time (steps x the plan report's
predicted iteration time on the cluster).

Usage: /usr/bin/python3 bench/convergence.py --build build
"""
import argparse
import json
import os
import re
import shlex
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.abspath(__file__)) + "/.."
sys.path.insert(0, os.path.join(ROOT, "python"))
from compare import run  # noqa: E402

SCHEDULES = [("1f1b", ""), ("pipedream", ""),
             ("pipedream-2bw", " update-every=4"),
             ("nf1b", " update-every=2"), ("v-timeprest", " update-every=2"),
             ("i-timeprest", " update-every=2 lambda=1"), ("hetpipe", "")]


def export_model(path, micro_batch):
    import torch
    from torch import nn
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 64),
                          nn.ReLU(), nn.Linear(64, 10))
    torch.onnx.export(model, torch.zeros(micro_batch, 64), path,
                      input_names=["input"], output_names=["logits"],
                      opset_version=17)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--cluster", default="2xV100")
    parser.add_argument("--ranks", type=int, default=2,
                        help="stages, a rank each under mpirun (the "
                        "cluster must have as many devices)")
    parser.add_argument("--mpirun", default="mpirun --allow-run-as-root "
                        "--oversubscribe --bind-to core")
    parser.add_argument("--micro-batch", type=int, default=4)
    parser.add_argument("--microbatches", type=int, default=8)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--docs", default=os.path.join(ROOT, "docs"))
    args = parser.parse_args()
    from sklearn.datasets import load_digits
    digits = load_digits()
    batch = args.micro_batch * args.microbatches
    count = len(digits.target) // batch
    x = (digits.data[:count * batch] / 16.0).astype(np.float32)
    y = digits.target[:count * batch].astype(np.int64)
    steps = count * args.epochs
    results = {}
    with tempfile.TemporaryDirectory() as work:
        model = os.path.join(work, "mlp.onnx")
        export_model(model, args.micro_batch)
        np.save(os.path.join(work, "input.npy"), x)
        np.save(os.path.join(work, "labels.npy"), y)
        for schedule, extra in SCHEDULES:
            program = os.path.join(work, schedule)
            report = os.path.join(work, schedule + ".txt")
            run([os.path.join(args.build, "bin", "pipeline-opt"), model,
                 f"--pp-compile=cluster={args.cluster} schedule={schedule} "
                 f"microbatches={args.microbatches} lr={args.lr}{extra} "
                 f"report={report} emit-dir={program}", "-o", os.devnull])
            text = open(report).read()
            iteration_ms = float(re.search(r"iteration ([\d.]+) ms",
                                           text).group(1))
            per_step = re.search(r"micro-batch\(es\), (\d+) a step", text)
            updates = int(per_step.group(1)) if per_step else 1
            run(["cmake", "-S", program, "-B", program + "/build", "-G",
                 "Ninja", "-DCMAKE_BUILD_TYPE=Release"])
            run(["cmake", "--build", program + "/build"])
            log = os.path.join(work, schedule + ".jsonl")
            run(shlex.split(args.mpirun) + [
                "-np", str(args.ranks),
                os.path.join(program, "build", "train"),
                f"--steps={steps}", f"--log={log}",
                f"--data=input={work}/input.npy",
                f"--data=labels={work}/labels.npy"],
                env=dict(os.environ, OPENBLAS_NUM_THREADS="1",
                         OMP_NUM_THREADS="1"))
            records = [json.loads(line) for line in open(log)]
            records = [r for r in records if "loss" in r]
            losses = [r["loss"] for r in records]
            # From the end of step 1, which holds the start-up (first
            # touches, kernel selection): the run's steady pace.
            wall = np.cumsum([0] + [r["step_ms"] for r in records[1:]]) / 1e3
            results[schedule] = (losses, iteration_ms, updates, wall)

    lines = [f"{args.epochs} epochs of {count} steps, {args.microbatches} "
             f"micro-batches of {args.micro_batch} ({batch} samples a step), "
             f"SGD lr {args.lr}, {args.ranks} stages on {args.ranks} MPI "
             f"ranks (a core each); simulated time on {args.cluster}",
             "",
             "| schedule | updates a step | predicted step (ms) | "
             "measured samples/s | " +
             " | ".join(f"epoch {e + 1} mean loss" for e in
                        range(args.epochs)) + " |",
             "|---|---|---|---|" + "---|" * args.epochs]
    for schedule, (losses, ms, updates, wall) in results.items():
        means = [np.mean(losses[e * count:(e + 1) * count])
                 for e in range(args.epochs)]
        rate = (len(losses) - 1) * batch / wall[-1]
        lines.append(f"| {schedule} | {updates} | {ms:.3f} | {rate:.0f} | " +
                     " | ".join(f"{v:.4f}" for v in means) + " |")
    table = "\n".join(lines)
    print(table)

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (left, middle, right) = plt.subplots(1, 3, figsize=(15, 4))
    window = max(1, count // 4)
    kernel = np.ones(window) / window
    for schedule, (losses, ms, _, wall) in results.items():
        smooth = np.convolve(losses, kernel, mode="valid")
        samples = (np.arange(len(smooth)) + window) * batch
        left.plot(samples, smooth, label=schedule)
        middle.plot(wall[window - 1:], smooth, label=schedule)
        right.plot(samples / batch * ms, smooth, label=schedule)
    left.set_xlabel("samples")
    middle.set_xlabel(f"measured wall time after step 1, {args.ranks} MPI "
                      "ranks (s)")
    right.set_xlabel(f"simulated time on {args.cluster} (ms)")
    for axis in (left, middle, right):
        axis.set_ylabel(f"loss (mean of {window} steps)")
        axis.grid(alpha=0.3)
    left.legend()
    fig.suptitle(f"sklearn digits, MLP 64-64-64-10, {args.ranks} stages")
    fig.tight_layout()
    fig.savefig(os.path.join(args.docs, "convergence.png"), dpi=90)
    with open(os.path.join(args.docs, "convergence.md"), "w") as out:
        out.write("# Convergence of the schedules\n\n"
                  "Written by `bench/convergence.py` (scikit-learn's digits, "
                  "same initial weights and batches for every schedule; the "
                  "1F1B row is the unpipelined step's result). Equal "
                  "samples are not equal updates: 1F1B updates once a step "
                  "on the mean of all 32 samples, the weight-versioned "
                  "schedules after every mini-batch of n micro-batches, with "
                  "the same learning rate, so they descend further per "
                  "sample; their stale gradients show as the bumps of the "
                  "TiMePReSt curves. HetPipe's virtual worker updates after "
                  "every mini-batch with local staleness Nm - 1. The "
                  "weight-versioned runs are continuous streams; the "
                  "measured time is the sum of the logged step times "
                  "(bench/README.md has the throughput against 1F1B on a "
                  "larger model).\n\n" + table +
                  "\n\n![loss against samples, measured and simulated time]"
                  "(convergence.png)\n")


if __name__ == "__main__":
    main()
