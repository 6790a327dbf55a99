#!/usr/bin/env python3
"""Checks train --clip-grad-norm against torch.nn.utils.clip_grad_norm_.

For one test model: exports it at the micro-batch size and at the whole
mini-batch (check_pipeline.export_micro_and_whole), trains the whole-batch
model --steps steps in PyTorch with clip_grad_norm_(parameters, X) before
every optimizer step (torch_reference.py; with --accumulate, as gradient
accumulation over the pipeline's micro-batches: BatchNorm models normalise
each micro-batch alone), and, for every configuration of --configs,
compiles the micro-batch model into a generated program, builds it and
trains it --steps steps on the same data with --clip-grad-norm X.

A configuration is SCHEDULE:DEVICES[:tpN][:dpN][:mpi]: tp and dp split
each stage over N tensor-parallel devices and N data-parallel replicas (the
step's --microbatches then split among the replicas); mpi launches a rank
per device under mpirun (else --local threads).

Every logged grad_norm must equal PyTorch's total norm of the step, and
every loss and final trained weight PyTorch's, within --rtol (of the
largest |value|) + --atol. The clip must be active: PyTorch's norm above X
at every step. BatchNorm running statistics are no gradients and are left
out: their largest relative difference is printed (under data parallelism
they are replica 0's, DDP's buffer broadcast, which PyTorch's are not;
without it resnet18's running variances of 2x2 maps differ from PyTorch's
by up to 2e-3 after 5 steps, the trained weights by 6e-6).

--resume-check (first configuration): a run checkpointed after step 3 and
resumed with no --clip-grad-norm goes on clipping (the checkpoint holds
the setting): the resumed steps log the uninterrupted run's losses and
norms exactly.

Prints one line per configuration with its worst relative errors, and
MISMATCH lines for failures (exit status 1).
"""
import argparse
import contextlib
import io
import json
import os
import shlex
import shutil
import subprocess
import sys

import numpy as np

from check_generated import build
from check_pipeline import compile_pipeline, data_flags, export_micro_and_whole
from compare import Comparison, load_globals


def parse_config(config):
    fields = config.split(":")
    parsed = dict(schedule=fields[0], devices=int(fields[1]), tp=1, dp=1,
                  mpi=False)
    for field in fields[2:]:
        if field == "mpi":
            parsed["mpi"] = True
        elif field.startswith(("tp", "dp")):
            parsed[field[:2]] = int(field[2:])
        else:
            sys.exit(f"{config}: unknown field '{field}'")
    return parsed


def torch_run(args, out, whole_dir):
    """PyTorch's clipped steps on the whole batch: losses, norms, weights."""
    import torch_reference
    torch_args = argparse.Namespace(
        model=args.model, steps=args.steps, lr=args.lr,
        momentum=args.momentum,
        optimizer=args.optimizer, weight_decay=0.0, seed=0, dtype="float32",
        autocast="none", dropout=False, lr_schedule="constant",
        warmup_steps=0, warmup_start_factor=1 / 3, min_lr=0.0,
        decay_steps=None, step_size=None, gamma=0.1,
        clip_grad_norm=args.clip, accumulate=args.accumulate)
    with contextlib.redirect_stdout(io.StringIO()):
        torch_reference.reference(torch_args, out,
                                  args.micro_batch * args.microbatches)
    # The same weights and data as the program's (one export's seed).
    for f in ("input.npy", "labels.npy"):
        if not np.array_equal(np.load(os.path.join(out, f)),
                              np.load(os.path.join(whole_dir, f))):
            sys.exit(f"torch's {f} is not the program's")
    return (np.load(os.path.join(out, "losses.npy")),
            np.load(os.path.join(out, "grad_norms.npy")),
            np.load(os.path.join(out, "final.npz")))


def log_rows(path):
    return [json.loads(line) for line in open(path)]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--work", required=True, help="scratch directory")
    parser.add_argument("--pipeline-opt", default="pipeline-opt")
    parser.add_argument("--mpirun", default="mpirun --allow-run-as-root "
                        "--oversubscribe")
    parser.add_argument("--configs", default="1f1b:2")
    parser.add_argument("--clip", type=float, required=True,
                        help="--clip-grad-norm X (below the real norms)")
    parser.add_argument("--micro-batch", type=int, default=2)
    parser.add_argument("--microbatches", type=int, default=4,
                        help="micro-batches of a step, over every replica")
    parser.add_argument("--accumulate", type=int, default=1,
                        help="PyTorch's micro-batches per step (1: the "
                        "whole batch at once)")
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--optimizer", default="sgd",
                        choices=["sgd", "adam"])
    parser.add_argument("--momentum", type=float, default=0.0,
                        help="SGD's momentum")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--resume-check", action="store_true")
    parser.add_argument("--rtol", type=float, default=1e-4)
    parser.add_argument("--atol", type=float, default=1e-6)
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    # GEMM rounding depends on OpenBLAS's thread count: one, as the
    # programs' kernels.
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    micro_dir, whole_dir = export_micro_and_whole(
        args.model, args.work, args.micro_batch, args.microbatches)
    files = [os.path.join(whole_dir, f) for f in ("input.npy", "labels.npy")]
    losses, norms, final = torch_run(args, os.path.join(args.work, "torch"),
                                     whole_dir)
    active = int(np.sum(norms > args.clip))
    print(f"{args.model}: clip {args.clip:g}, torch's norms "
          f"{norms.min():.4g} .. {norms.max():.4g}: active at {active} of "
          f"{len(norms)} steps")
    failures = []
    if active != len(norms):
        failures.append(f"the clip is inactive at {len(norms) - active} "
                        "step(s): choose a smaller --clip")
    optimizer = (f"lr={args.lr} optimizer={args.optimizer} "
                 f"momentum={args.momentum}")

    for index, config in enumerate(args.configs.split(",")):
        c = parse_config(config)
        if args.microbatches % c["dp"]:
            sys.exit(f"{config}: {args.microbatches} micro-batches do not "
                     f"split among {c['dp']} replicas")
        name = config.replace(":", "-")
        program = os.path.join(args.work, name)
        mlir = compile_pipeline(
            args.pipeline_opt, os.path.join(micro_dir, "model.onnx"),
            args.work, name, c["schedule"], c["devices"], "none",
            args.microbatches // c["dp"], optimizer,
            f" emit-dir={program}", dp=c["dp"], tp=c["tp"])
        exe = build(program)
        ranks = c["devices"] * c["tp"] * c["dp"]
        launch = (shlex.split(args.mpirun) + ["-np", str(ranks)]
                  if c["mpi"] else [])

        def train(log, flags, steps=args.steps):
            if os.path.exists(log) and not any(
                    f.startswith("--resume") for f in flags):
                os.remove(log)
            cmd = launch + [exe, f"--steps={steps}", f"--log={log}"] + \
                data_flags(mlir, files) + flags + \
                ([] if c["mpi"] else ["--local"])
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                sys.exit(f"{config}: train failed ({proc.returncode}):\n"
                         f"{proc.stdout}{proc.stderr}")
            train.stderr = proc.stderr
            return log_rows(log)

        clip = f"--clip-grad-norm={args.clip!r}"
        dump = os.path.join(args.work, name + ".globals")
        rows = train(os.path.join(args.work, name + ".jsonl"),
                     [clip, f"--dump-globals={dump}"])
        ours = load_globals(dump)
        weights = Comparison(args.rtol, args.atol)
        stepwise = Comparison(args.rtol, args.atol)
        if len(rows) != args.steps:
            stepwise.failures.append(f"{len(rows)} log rows")
        norm_error = 0.0
        for k, row in enumerate(rows[:args.steps]):
            if row.get("grad_norm") is None:
                stepwise.failures.append(f"step {k + 1} logs no grad_norm")
                continue
            stepwise(f"grad_norm of step {k + 1}", [row["grad_norm"]],
                     [norms[k]])
            norm_error = max(norm_error,
                             abs(row["grad_norm"] - norms[k]) / norms[k])
            stepwise(f"loss of step {k + 1}", [row["loss"]], [losses[k]])
        compared = 0
        statistics = Comparison(np.inf, np.inf)
        for key in final.files:
            value = final[key]
            if not np.issubdtype(value.dtype, np.floating):
                continue
            if key not in ours:
                weights.failures.append(f"{key}: no such global")
                continue
            if "running_" in key:
                statistics(key, ours[key], value)
                continue
            weights(key, ours[key], value)
            compared += 1
        extra = (f"; BatchNorm running statistics (not compared) "
                 f"{statistics.worst:.2e}" if statistics.worst_name else "")
        print(f"{args.model} {config}: {len(rows)} steps, {compared} "
              f"tensors vs PyTorch; max relative error: weights "
              f"{weights.worst:.2e} ({weights.worst_name}), grad_norm "
              f"{norm_error:.2e}, losses and norms "
              f"{stepwise.worst:.2e}{extra}")
        failures += [f"{config}: {f}"
                     for f in stepwise.failures + weights.failures]

        if index == 0 and args.resume_check:
            ckpt = os.path.join(args.work, name + ".checkpoints")
            shutil.rmtree(ckpt, ignore_errors=True)
            log = os.path.join(args.work, name + ".resumed.jsonl")
            train(log, [clip, "--checkpoint-every=3",
                        f"--checkpoint={ckpt}"], steps=3)
            manifest = open(os.path.join(ckpt, "step-3", "MANIFEST")).read()
            recorded = [line for line in manifest.splitlines()
                        if line.startswith("clip-grad-norm ")]
            resumed = train(log, [f"--resume={ckpt}"])
            same = ([(r["loss"], r.get("grad_norm")) for r in resumed] ==
                    [(r["loss"], r.get("grad_norm")) for r in rows])
            print(f"{args.model} {config}: checkpoint records "
                  f"{recorded[0] if recorded else 'nothing'}; resumed with "
                  f"no --clip-grad-norm: steps 4..{args.steps} equal the "
                  f"uninterrupted run: {'yes' if same else 'no'}")
            if not same or not recorded:
                failures.append(f"{config}: the resumed run does not clip "
                                "as the uninterrupted one")
            # off drops the checkpoint's clip, with a note.
            log = os.path.join(args.work, name + ".off.jsonl")
            row = train(log, [f"--resume={ckpt}/step-3",
                              "--clip-grad-norm=off"], steps=4)[-1]
            notes = [line for line in train.stderr.splitlines()
                     if "--clip-grad-norm" in line]
            print(f"{args.model} {config}: resumed with "
                  f"--clip-grad-norm=off: {notes[0] if notes else 'no note'};"
                  f" step 4 logs {'no ' if 'grad_norm' not in row else ''}"
                  "grad_norm")
            if "grad_norm" in row or not notes:
                failures.append(f"{config}: --clip-grad-norm=off on resume")

    for failure in failures:
        print("MISMATCH", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
