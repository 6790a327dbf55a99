#!/usr/bin/env python3
"""Checks our training step against PyTorch for one test model.

Runs python/torch_reference.py (PyTorch CPU: export, then `--steps` SGD
steps), compiles the exported model into a training step with pipeline-opt
(--pp-add-loss --pp-autodiff --pp-optimizer), runs the same steps with
pp-interpret from the same weights and data, and compares the loss of every
step and every final global (parameters and BatchNorm running statistics).

A tensor passes when max|ours - torch| <= rtol * max|torch| + atol; prints the
worst relative error per model and exits non-zero on a mismatch.

Mixed precision: --precision bf16 compiles our step with --pp-mixed-precision
and --autocast bf16 runs torch's forward under torch.autocast (CPU). With
--fp32-rtol R our step also runs in fp32: every loss of the low-precision
run must lie within R (relative) of the fp32 run's, and differ from it
somewhere (else the low precision did not take effect). Where torch's CPU
bf16 GEMMs do not sum in fp32 (probed on one Linear's backward) its autocast
run is no reference: the script says so and compares only with our fp32 run.
"""
import argparse
import os
import sys

import numpy as np

from compare import Comparison, run

HERE = os.path.dirname(os.path.abspath(__file__))


def torch_bf16_gemm_differences():
    """How many elements of a bf16 Linear's weight gradient under torch's
    CPU autocast differ from the product summed in fp32 and rounded once
    (what our bf16 kernels and torch's forward compute), of how many. On an
    AVX2-only AMD EPYC (torch 1.13) most differ: torch's backward GEMMs
    round their sums there, so its autocast run is no reference for ours."""
    import torch
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(8, 784, generator=generator)
    w = (torch.randn(128, 784, generator=generator) * 0.05).requires_grad_()
    dy = torch.randn(8, 128, generator=generator).bfloat16()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = torch.nn.functional.linear(x, w)
    y.backward(dy)
    summed = (dy.float().T @ x.bfloat16().float()).bfloat16().float()
    return int((w.grad != summed).sum()), summed.numel()


def compare_with_torch(work, ours, theirs, compare):
    """Every loss and final float global of ours against torch's; returns
    the number of tensors compared."""
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
    return len(final.files)


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
    parser.add_argument("--precision", default="fp32",
                        choices=["fp32", "bf16", "fp16"])
    parser.add_argument("--autocast", default="none", choices=["none", "bf16"])
    parser.add_argument("--fp32-rtol", type=float, default=None)
    parser.add_argument("--rtol", type=float, default=1e-4)
    parser.add_argument("--atol", type=float, default=1e-6)
    parser.add_argument("--weight-decay-min-rank", type=int, default=0,
                        help="both sides' (--pp-optimizer "
                        "weight-decay-min-rank)")
    parser.add_argument("--class-weights", default="",
                        help="both sides' per-class loss weights, "
                        "comma-separated (--pp-add-loss class-weights)")
    parser.add_argument("--label-smoothing", type=float, default=0.0,
                        help="both sides' (--pp-add-loss label-smoothing)")
    args = parser.parse_args()
    work = args.work
    run([sys.executable, os.path.join(HERE, "torch_reference.py"),
         "--model", args.model, "--out", work, "--steps", str(args.steps),
         "--lr", str(args.lr), "--momentum", str(args.momentum),
         "--batch", str(args.batch), "--dtype", args.dtype,
         "--optimizer", args.optimizer,
         "--weight-decay", str(args.weight_decay),
         "--weight-decay-min-rank", str(args.weight_decay_min_rank),
         "--label-smoothing", str(args.label_smoothing),
         "--class-weights", args.class_weights,
         "--autocast", args.autocast])
    input_name = "tokens" if args.model == "gpt" else "input"

    def train(precision, dump):
        """Our step in `precision`: its losses (globals dumped to `dump`)."""
        step_mlir = os.path.join(work, f"train-{precision}.mlir")
        run([args.pipeline_opt, os.path.join(work, "model.onnx"),
             f"--pp-add-loss=label-smoothing={args.label_smoothing}" +
             (f" class-weights={args.class_weights}"
              if args.class_weights else ""),
             f"--pp-mixed-precision=precision={precision}",
             "--pp-autodiff",
             f"--pp-optimizer=kind={args.optimizer} lr={args.lr} "
             f"momentum={args.momentum} weight-decay={args.weight_decay} "
             f"weight-decay-min-rank={args.weight_decay_min_rank}",
             "-o", step_mlir])
        out = run([args.pp_interpret, step_mlir, f"--steps={args.steps}",
                   f"--input={input_name}=" +
                   os.path.join(work, "input.npy"),
                   "--input=labels=" + os.path.join(work, "labels.npy"),
                   "--dump-globals=" + dump])
        return [float(line.split()[3]) for line in out.splitlines()
                if line.startswith("step ")]

    ours = train(args.precision, os.path.join(work, "ours"))
    theirs = np.load(os.path.join(work, "losses.npy"))

    compare = Comparison(args.rtol, args.atol)
    failures = compare.failures

    differing, total = (torch_bf16_gemm_differences()
                        if args.autocast == "bf16" else (0, 0))
    # Summation order may flip a few roundings; a reference flips almost
    # none.
    if differing > total // 100:
        print(f"{args.model}: torch's CPU bf16 GEMMs round their sums here "
              f"({differing} of {total} weight-gradient elements differ "
              "from fp32 sums rounded once): its autocast run is no "
              "reference, not compared")
    else:
        tensors = compare_with_torch(work, ours, theirs, compare)
        print(f"{args.model}: {tensors} tensors and {len(ours)} losses, "
              f"worst relative error {compare.worst:.2e} "
              f"({compare.worst_name}); losses ours {ours} "
              f"torch {list(theirs)}")
    if args.fp32_rtol is not None:
        full = train("fp32", os.path.join(work, "ours-fp32"))
        gap = max(abs(a - b) / abs(b) for a, b in zip(ours, full))
        print(f"{args.model}: {args.precision} against our fp32 run over "
              f"{len(full)} steps: worst relative loss difference {gap:.2e} "
              f"(last loss {ours[-1]:.6g} against {full[-1]:.6g})")
        if gap > args.fp32_rtol:
            failures.append(f"{args.precision} losses leave fp32's by "
                            f"{gap:.2e} > {args.fp32_rtol}")
        if gap == 0:
            failures.append(f"{args.precision} losses equal fp32's: the "
                            "low precision took no effect")
    for failure in failures:
        print("MISMATCH", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
