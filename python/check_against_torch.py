#!/usr/bin/env python3
"""Checks our training step against PyTorch for one test model.

Runs python/torch_reference.py (PyTorch CPU: export, then `--steps` SGD
steps), compiles the exported model into a training step with pipeline-opt
(--pp-add-loss --pp-autodiff --pp-optimizer), runs the same steps with
pp-interpret from the same weights and data, and compares the loss of every
step and every final global (parameters and BatchNorm running statistics).

A tensor passes when max|ours - torch| <= rtol * max|torch| + atol; prints the
worst relative error per model and exits non-zero on a mismatch.
"""
import argparse
import os
import sys

import numpy as np

from compare import Comparison, run

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--work", required=True, help="scratch directory")
    parser.add_argument("--pipeline-opt", default="pipeline-opt")
    parser.add_argument("--pp-interpret", default="pp-interpret")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--momentum", type=float, default=0.0)
    parser.add_argument("--batch", type=int, default=0)
    parser.add_argument("--optimizer", default="sgd")
    parser.add_argument("--weight-decay", type=float, default=0.0)
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--rtol", type=float, default=1e-4)
    parser.add_argument("--atol", type=float, default=1e-6)
    args = parser.parse_args()
    work = args.work
    run([sys.executable, os.path.join(HERE, "torch_reference.py"),
         "--model", args.model, "--out", work, "--steps", str(args.steps),
         "--lr", str(args.lr), "--momentum", str(args.momentum),
         "--batch", str(args.batch), "--dtype", args.dtype,
         "--optimizer", args.optimizer,
         "--weight-decay", str(args.weight_decay)])
    step_mlir = os.path.join(work, "train.mlir")
    run([args.pipeline_opt, os.path.join(work, "model.onnx"), "--pp-add-loss",
         "--pp-autodiff",
         f"--pp-optimizer=kind={args.optimizer} lr={args.lr} "
         f"momentum={args.momentum} weight-decay={args.weight_decay}",
         "-o", step_mlir])
    input_name = "tokens" if args.model == "gpt" else "input"
    out = run([args.pp_interpret, step_mlir, f"--steps={args.steps}",
               f"--input={input_name}=" + os.path.join(work, "input.npy"),
               "--input=labels=" + os.path.join(work, "labels.npy"),
               "--dump-globals=" + os.path.join(work, "ours")])
    ours = [float(line.split()[3]) for line in out.splitlines()
            if line.startswith("step ")]
    theirs = np.load(os.path.join(work, "losses.npy"))

    compare = Comparison(args.rtol, args.atol)
    failures = compare.failures

    if len(ours) != len(theirs):
        failures.append(f"{len(ours)} losses vs torch {len(theirs)}")
    for i, (a, b) in enumerate(zip(ours, theirs)):
        compare(f"loss of step {i + 1}", [a], [b])
    index = dict(line.rstrip("\n").split("\t") for line in
                 open(os.path.join(work, "ours", "globals.txt")))
    final = np.load(os.path.join(work, "final.npz"))
    for name in final.files:
        if not np.issubdtype(final[name].dtype, np.floating):
            continue  # Integer/bool buffers (masks, positions) are constants.
        if name not in index:
            failures.append(f"{name}: no such global")
            continue
        compare(name, np.load(os.path.join(work, "ours", index[name])),
                final[name])
    print(f"{args.model}: {len(final.files)} tensors and {len(ours)} losses, "
          f"worst relative error {compare.worst:.2e} ({compare.worst_name}); "
          f"losses ours {ours} "
          f"torch {list(theirs)}")
    for failure in failures:
        print("MISMATCH", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
