#!/usr/bin/env python3
"""Checks train --lr-schedule against PyTorch's learning-rate schedulers.

Compiles one test model (default mlp) for each pipeline of --configs
(schedule:devices[:update-every]; weight-versioned schedules update several
times a step) into a generated program and builds it. Then, per program:

  - rates: for every schedule of SCHEDULES it trains --steps steps (--local)
    with the JSON --log, whose rows give per step the rate the optimizer ops
    read (`lr`; `lr_max` where they read different ones) and how many read
    it (`param_updates`). Every step must have one rate, read by every
    parameter update of the step (trained tensors x updates per step), and
    it must equal, within --tol, the rate PyTorch's scheduler
    (torch_reference.make_scheduler: StepLR, MultiStepLR, ExponentialLR,
    CosineAnnealingLR, LinearLR, PolynomialLR or with min-lr mmcv's PolyLR,
    after a LinearLR warm-up chained by SequentialLR) holds at that step
    when stepped once per step. Cosine keeps min-lr after --decay-steps
    (PyTorch's rises again): those steps must be min-lr exactly.
  - resume (first program): the cosine run is repeated as 120 steps with
    checkpoints, then resumed to --steps with no schedule flags; the
    checkpoint's schedule must go on, giving the uninterrupted run's rates
    and losses exactly. A resume with another --lr-schedule notes it.
  - weights (first program): --weight-steps steps on real data with each
    schedule of WEIGHT_SCHEDULES against torch_reference.py's SGD with the
    same scheduler: every loss and final weight within --rtol / --atol.

Prints the largest |ours - PyTorch| rate difference per program and schedule
and MISMATCH lines for failures (exit status 1).
"""
import argparse
import contextlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import warnings

import numpy as np

from check_generated import build
from check_pipeline import cluster_file, data_flags, export_micro_and_whole
from compare import Comparison, load_globals, run

HERE = os.path.dirname(os.path.abspath(__file__))

# name -> (train flags as torch_reference.make_scheduler's arguments, --lr).
SCHEDULES = {
    "constant-warmup": dict(kind="constant", warmup_steps=10,
                            warmup_start_factor=0.1),
    "step": dict(kind="step", step_size=30, gamma=0.5),
    "step-warmup": dict(kind="step", warmup_steps=10, step_size=25,
                        gamma=0.7, lr=0.2),
    "cosine": dict(kind="cosine", min_lr=0.001),
    "cosine-warmup": dict(kind="cosine", warmup_steps=20,
                          warmup_start_factor=0.01, min_lr=0.001),
    "cosine-short": dict(kind="cosine", warmup_steps=5, min_lr=0.002,
                         decay_steps=150),
    "linear": dict(kind="linear"),
    "linear-warmup": dict(kind="linear", warmup_steps=15,
                          warmup_start_factor=0.25, min_lr=0.005,
                          decay_steps=150),
    "multistep": dict(kind="multistep", milestones=[30, 80, 81, 150],
                      gamma=0.5),
    "multistep-warmup": dict(kind="multistep", warmup_steps=10,
                             milestones=[20, 100], gamma=0.3),
    "exponential": dict(kind="exponential", gamma=0.98),
    "poly": dict(kind="poly", power=0.9),
    "poly-warmup": dict(kind="poly", warmup_steps=12, power=2.0,
                        decay_steps=160),
    "poly-min": dict(kind="poly", min_lr=0.004, power=0.9),
}

WEIGHT_SCHEDULES = {
    "multistep": dict(kind="multistep", milestones=[2, 4], gamma=0.5),
    "poly": dict(kind="poly", warmup_steps=1, power=0.9),
    "cosine-warmup": dict(kind="cosine", warmup_steps=2, min_lr=0.01),
    "step": dict(kind="step", step_size=2, gamma=0.5),
    "linear-warmup": dict(kind="linear", warmup_steps=1,
                          warmup_start_factor=0.5, min_lr=0.02),
}


def train_flags(schedule):
    flags = [f"--lr-schedule={schedule['kind']}"]
    for key in ("warmup_steps", "warmup_start_factor", "min_lr",
                "decay_steps", "step_size", "gamma", "lr", "power"):
        if key in schedule:
            name = "lr" if key == "lr" else key.replace("_", "-")
            flags.append(f"--{name}={schedule[key]!r}")
    if "milestones" in schedule:
        flags.append("--milestones=" +
                     ",".join(map(str, schedule["milestones"])))
    return flags


def torch_rates(schedule, base, steps, default_decay):
    """The rate of each step as PyTorch's scheduler sets it, stepped once a
    step."""
    import torch
    from torch_reference import make_scheduler
    lr = schedule.get("lr", base)
    param = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.SGD([param], lr=lr)
    args = {k: v for k, v in schedule.items() if k not in ("kind", "lr")}
    args.setdefault("decay_steps", default_decay)
    scheduler = make_scheduler(optimizer, schedule["kind"], **args)
    rates = []
    for _ in range(steps):
        rates.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
    return rates


def log_rows(path):
    return [json.loads(line) for line in open(path)]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="mlp")
    parser.add_argument("--work", required=True, help="scratch directory")
    parser.add_argument("--pipeline-opt", default="pipeline-opt")
    parser.add_argument("--configs", default="1f1b:2,pipedream-2bw:2:2",
                        help="comma-separated schedule:devices[:update-every]")
    parser.add_argument("--micro-batch", type=int, default=2)
    parser.add_argument("--microbatches", type=int, default=4)
    parser.add_argument("--lr", type=float, default=0.1,
                        help="the rate compiled in")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--drain-every", type=int, default=0,
                        help="the programs' --drain-every (0: a weight-"
                        "versioned schedule runs all steps as one stream)")
    parser.add_argument("--schedules", default=",".join(SCHEDULES))
    parser.add_argument("--weight-steps", type=int, default=6)
    parser.add_argument("--tol", type=float, default=1e-12)
    parser.add_argument("--rtol", type=float, default=1e-4)
    parser.add_argument("--atol", type=float, default=1e-6)
    args = parser.parse_args()
    # SequentialLR steps the schedule after the warm-up with an epoch, which
    # torch warns of.
    warnings.filterwarnings("ignore", category=UserWarning,
                            module="torch.optim.lr_scheduler")
    os.makedirs(args.work, exist_ok=True)
    m = args.microbatches
    micro_dir, whole_dir = export_micro_and_whole(
        args.model, args.work, args.micro_batch, m)
    files = [os.path.join(whole_dir, f) for f in ("input.npy", "labels.npy")]
    failures = []

    for index, config in enumerate(args.configs.split(",")):
        fields = config.split(":")
        schedule, devices = fields[0], int(fields[1])
        options = (f"cluster={cluster_file(args.work, devices)} "
                   f"schedule={schedule} microbatches={m} lr={args.lr}")
        if len(fields) > 2:
            options += f" update-every={fields[2]}"
        work = os.path.join(args.work, config.replace(":", "-"))
        os.makedirs(work, exist_ok=True)
        mlir = os.path.join(work, "pipelined.mlir")
        program = os.path.join(work, "program")
        run([args.pipeline_opt, os.path.join(micro_dir, "model.onnx"),
             f"--pp-compile={options} emit-dir={program}", "-o", mlir])
        exe = build(program)
        text = open(mlir).read()
        plan = re.search(r"pp\.plan = #pp\.plan<([^>]*)>", text).group(1)
        every = re.search(r"update_every = (\d+)", plan)
        updates = m // int(every.group(1)) if every and int(
            every.group(1)) > 0 else 1
        trained = len(re.findall(r'onnx\.global "trainable"', text))
        expected_reads = trained * updates
        data = data_flags(mlir, files)

        def train(flags, log, steps=args.steps):
            if os.path.exists(log) and "--resume" not in " ".join(flags):
                os.remove(log)
            return subprocess.run(
                [exe, "--local", f"--steps={steps}", f"--log={log}",
                 f"--drain-every={args.drain_every}"] + data + flags,
                capture_output=True, text=True)

        def checked(proc):
            if proc.returncode != 0:
                sys.exit(f"{config}: train failed ({proc.returncode}):\n"
                         f"{proc.stdout}{proc.stderr}")
            return proc

        print(f"{config}: {trained} trained tensors, {updates} update(s) "
              f"a step: {expected_reads} parameter updates a step")
        worst_overall = 0.0
        logs = {}
        for name in args.schedules.split(","):
            spec = SCHEDULES[name]
            log = os.path.join(work, f"{name}.jsonl")
            checked(train(train_flags(spec), log))
            rows = log_rows(log)
            logs[name] = rows
            theirs = torch_rates(spec, args.lr, args.steps, args.steps)
            decay = spec.get("decay_steps", args.steps)
            worst = 0.0
            for k, row in enumerate(rows):
                if row["step"] != k + 1 or "lr" not in row:
                    failures.append(f"{config} {name}: row {k + 1} is "
                                    f"{row}")
                    break
                if "lr_max" in row:
                    failures.append(f"{config} {name}: step {k + 1}'s "
                                    f"updates read rates {row['lr']} .. "
                                    f"{row['lr_max']}")
                if row["param_updates"] != expected_reads:
                    failures.append(f"{config} {name}: step {k + 1}: "
                                    f"{row['param_updates']} parameter "
                                    f"updates read the rate, not "
                                    f"{expected_reads}")
                if spec["kind"] == "cosine" and k >= decay:
                    if row["lr"] != spec["min_lr"]:
                        failures.append(f"{config} {name}: step {k + 1} "
                                        f"after the decay: {row['lr']}, not "
                                        f"min-lr {spec['min_lr']}")
                    continue
                worst = max(worst, abs(row["lr"] - theirs[k]))
            if len(rows) != args.steps:
                failures.append(f"{config} {name}: {len(rows)} log rows")
            if worst > args.tol:
                failures.append(f"{config} {name}: rates differ from "
                                f"PyTorch's by up to {worst:.3g}")
            worst_overall = max(worst_overall, worst)
            print(f"{config} {name}: {len(rows)} steps, rates "
                  f"{rows[0]['lr']:.6g} .. {rows[-1]['lr']:.6g}, max |ours - "
                  f"torch| {worst:.3g}")
        print(f"{config}: max |lr - torch lr| over every schedule "
              f"{worst_overall:.3g}")

        if index == 0 and "cosine-warmup" in logs:
            # Stopped after a checkpoint at step 120 (the decay still over
            # --steps), resumed with no schedule flags.
            spec = dict(SCHEDULES["cosine-warmup"], decay_steps=args.steps)
            ckpt = os.path.join(work, "checkpoints")
            shutil.rmtree(ckpt, ignore_errors=True)
            log = os.path.join(work, "resumed.jsonl")
            checked(train(train_flags(spec) + [
                "--checkpoint-every=60", f"--checkpoint={ckpt}"], log,
                steps=120))
            proc = checked(train([f"--resume={ckpt}"], log))
            resumed = log_rows(log)
            whole = logs["cosine-warmup"]
            same = ([(r["lr"], r["loss"]) for r in resumed] ==
                    [(r["lr"], r["loss"]) for r in whole])
            print(f"{config} resume at 120: rates and losses of the "
                  f"uninterrupted run: {'yes' if same else 'no'}")
            if not same:
                failures.append(f"{config}: the resumed run's rates or "
                                "losses differ")
            # A multistep schedule's milestones go through the checkpoint.
            if "multistep-warmup" in logs:
                shutil.rmtree(ckpt, ignore_errors=True)
                log = os.path.join(work, "resumed-multistep.jsonl")
                checked(train(train_flags(SCHEDULES["multistep-warmup"]) + [
                    "--checkpoint-every=60", f"--checkpoint={ckpt}"], log,
                    steps=120))
                checked(train([f"--resume={ckpt}"], log))
                same = ([r["lr"] for r in log_rows(log)] ==
                        [r["lr"] for r in logs["multistep-warmup"]])
                print(f"{config} multistep resumed at 120: rates of the "
                      f"uninterrupted run: {'yes' if same else 'no'}")
                if not same:
                    failures.append(f"{config}: the resumed multistep run's "
                                    "rates differ")
                shutil.rmtree(ckpt, ignore_errors=True)
                checked(train(train_flags(spec) + [
                    "--checkpoint-every=60", f"--checkpoint={ckpt}"],
                    os.path.join(work, "cosine.jsonl"), steps=120))
            proc = checked(train([f"--resume={ckpt}/step-60",
                                  "--lr-schedule=constant"],
                                 os.path.join(work, "other.jsonl"),
                                 steps=61))
            for line in proc.stderr.splitlines():
                if line.startswith("note: --resume"):
                    print(f"{config} resume with another schedule: {line}")
            row = log_rows(os.path.join(work, "other.jsonl"))[-1]
            if row["lr"] != args.lr:
                failures.append(f"{config}: resumed with --lr-schedule "
                                f"constant, step 61 ran at {row['lr']}")

        if index == 0:
            import torch_reference
            for name, spec in WEIGHT_SCHEDULES.items():
                out = os.path.join(work, f"torch-{name}")
                torch_args = argparse.Namespace(
                    model=args.model, steps=args.weight_steps, lr=args.lr,
                    momentum=0.0, optimizer="sgd", weight_decay=0.0,
                    seed=0, dtype="float32", autocast="none", dropout=False,
                    lr_schedule=spec["kind"],
                    warmup_steps=spec.get("warmup_steps", 0),
                    warmup_start_factor=spec.get("warmup_start_factor",
                                                 1 / 3),
                    min_lr=spec.get("min_lr", 0.0), decay_steps=None,
                    step_size=spec.get("step_size"),
                    gamma=spec.get("gamma", 0.1),
                    milestones=",".join(map(str, spec["milestones"]))
                    if "milestones" in spec else None,
                    power=spec.get("power", 1.0))
                with contextlib.redirect_stdout(io.StringIO()):
                    torch_reference.reference(torch_args, out,
                                              args.micro_batch * m)
                # The same data as the program's (one export's seed).
                for f in ("input.npy", "labels.npy"):
                    if not np.array_equal(np.load(os.path.join(out, f)),
                                          np.load(os.path.join(whole_dir,
                                                               f))):
                        sys.exit(f"{name}: torch's {f} is not the program's")
                log = os.path.join(work, f"weights-{name}.jsonl")
                dump = os.path.join(work, f"weights-{name}.globals")
                checked(train(train_flags(spec) + [f"--dump-globals={dump}"],
                              log, steps=args.weight_steps))
                compare = Comparison(args.rtol, args.atol)
                ours = load_globals(dump)
                final = np.load(os.path.join(out, "final.npz"))
                for key in final.files:
                    if key not in ours:
                        compare.failures.append(f"{key}: no such global")
                        continue
                    compare(key, ours[key], final[key])
                rows = log_rows(log)
                losses = np.load(os.path.join(out, "losses.npy"))
                rates = np.load(os.path.join(out, "lrs.npy"))
                for k, row in enumerate(rows):
                    compare(f"loss of step {k + 1}", [row["loss"]],
                            [losses[k]])
                    if abs(row["lr"] - rates[k]) > args.tol:
                        compare.failures.append(
                            f"rate of step {k + 1}: {row['lr']} vs torch "
                            f"{rates[k]}")
                print(f"{config} weights {name}: {len(final.files)} tensors "
                      f"and {len(rows)} losses vs PyTorch, worst relative "
                      f"error {compare.worst:.2e} ({compare.worst_name})")
                failures += [f"{config} weights {name}: {f}"
                             for f in compare.failures]

    for failure in failures:
        print("MISMATCH", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
