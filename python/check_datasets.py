#!/usr/bin/env python3
"""Checks generated programs' `train --data` on data sets of samples.

Exports a test model (default mlp) at a micro-batch of 2, compiles it into a
2-stage 1F1B program of 4 micro-batches (a batch of 8) and the same with
dp=2 (4 ranks), builds both, and writes a data set of --samples samples (43:
5 whole batches and 3 samples that every epoch drops) as float32 inputs and
int64 labels, and again as uint8 inputs and labels. Then:

  - shuffle: `--epochs 2 --shuffle --seed S` under mpirun (2 ranks) trains
    10 steps whose losses must equal, within --rtol / --atol, PyTorch's SGD
    on the batches python/pp_data_order.py's permutation gives
    (torch_reference.py, the same initial weights);
  - resume: a run of 7 steps with a checkpoint every 3, resumed from step 3
    (epoch 0, third batch) and from step 6 (epoch 1, first batch) without
    --shuffle or --seed on the command line (the checkpoint's go on), must
    print the uninterrupted run's losses for the remaining steps exactly;
  - uint8: the uint8 files train as their values converted to the inputs'
    dtypes, unscaled (against PyTorch on x.astype(float32));
  - data parallelism: the dp=2 program of 2 micro-batches per replica
    (--local; the same batch of 8) gives PyTorch's losses too (every
    replica reads its micro-batches of the step's samples);
  - errors: a wrong per-sample shape, a wrong dtype, truncated and corrupt
    .npy files, fewer samples than a batch, files of different sample
    counts and flags that do not fit print an error naming the file and the
    field and exit non-zero ("error case NAME: MESSAGE" lines).

Prints MISMATCH lines for failures (exit status 1).
"""
import argparse
import contextlib
import io
import os
import re
import shlex
import shutil
import subprocess
import sys

import numpy as np

from check_generated import build
from check_pipeline import cluster_file, data_flags, export_micro_and_whole
from compare import run, check_error_case
from pp_data_order import DataOrder


def step_losses(text):
    return [float(v) for v in
            re.findall(r"^step \d+/\d+\s+loss (\S+)", text, re.M)]


def step_texts(text):
    """step number -> the loss as printed."""
    return {int(m.group(1)): m.group(2) for m in
            re.finditer(r"^step (\d+)/\d+\s+loss (\S+)", text, re.M)}


def torch_losses(model, work, name, lr, steps, batch, batches):
    import torch_reference
    args = argparse.Namespace(
        model=model, steps=steps, lr=lr, momentum=0.0, optimizer="sgd",
        weight_decay=0.0, seed=0, dtype="float32", autocast="none",
        dropout=False, lr_schedule="constant", warmup_steps=0,
        warmup_start_factor=1 / 3, min_lr=0.0, decay_steps=None,
        step_size=None, gamma=0.1)
    out = os.path.join(work, f"torch-{name}")
    with contextlib.redirect_stdout(io.StringIO()):
        torch_reference.reference(args, out, batch, batches)
    return list(np.load(os.path.join(out, "losses.npy")))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="mlp")
    parser.add_argument("--work", required=True, help="scratch directory")
    parser.add_argument("--pipeline-opt", default="pipeline-opt")
    parser.add_argument("--mpirun", default="mpirun --allow-run-as-root "
                        "--oversubscribe")
    parser.add_argument("--samples", type=int, default=43)
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--rtol", type=float, default=1e-4)
    parser.add_argument("--atol", type=float, default=1e-6)
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    micro, m = 2, 4
    batch = micro * m
    micro_dir, whole_dir = export_micro_and_whole(args.model, args.work,
                                                  micro, m)
    example = np.load(os.path.join(whole_dir, "input.npy"))
    failures = []

    # The data sets: float32 / int64, and the same shapes in uint8.
    rng = np.random.default_rng(1)
    n = args.samples
    x = rng.standard_normal((n,) + example.shape[1:]).astype(np.float32)
    y = rng.integers(0, 10, size=n).astype(np.int64)
    xu = rng.integers(0, 256, size=x.shape, dtype=np.uint8)
    yu = rng.integers(0, 10, size=n, dtype=np.uint8)
    data = os.path.join(args.work, "data")
    os.makedirs(data, exist_ok=True)
    files = {}
    for name, array in (("x", x), ("y", y), ("xu", xu), ("yu", yu)):
        files[name] = os.path.join(data, f"{name}.npy")
        np.save(files[name], array)

    def compile_program(name, devices, dp=1, microbatches=m):
        work = os.path.join(args.work, name)
        os.makedirs(work, exist_ok=True)
        mlir = os.path.join(work, "pipelined.mlir")
        program = os.path.join(work, "program")
        options = (f"cluster={cluster_file(work, devices * dp)} "
                   f"schedule=1f1b microbatches={microbatches} "
                   f"lr={args.lr}" +
                   (f" dp={dp}" if dp > 1 else ""))
        run([args.pipeline_opt, os.path.join(micro_dir, "model.onnx"),
             f"--pp-compile={options} emit-dir={program}", "-o", mlir])
        return build(program), mlir

    exe, mlir = compile_program("pipeline", 2)
    flags = data_flags(mlir, [files["x"], files["y"]])
    mpirun = shlex.split(args.mpirun) + ["-np", "2", exe]
    order = DataOrder(n, batch, shuffle=True, seed=args.seed)
    steps = 2 * order.steps_per_epoch

    # Two shuffled epochs against PyTorch on the documented permutation.
    whole = run(mpirun + flags + ["--epochs=2", "--shuffle",
                                  f"--seed={args.seed}"])
    ours = step_losses(whole)
    shuffled = torch_losses(args.model, args.work, "shuffle", args.lr,
                            steps, batch, lambda k: (x[order.step(k)],
                                                     y[order.step(k)]))
    theirs = shuffled
    epochs = [np.concatenate([order.step(k) for k in
                              range(e * order.steps_per_epoch,
                                    (e + 1) * order.steps_per_epoch)])
              for e in range(2)]
    dropped = [sorted(set(range(n)) - set(e.tolist())) for e in epochs]
    print(f"shuffle: {n} samples, batch {batch}: {len(ours)} steps in 2 "
          f"epochs of {order.steps_per_epoch}; dropped samples "
          f"{dropped[0]} and {dropped[1]}")
    if len(ours) != steps:
        failures.append(f"--epochs 2 ran {len(ours)} steps, not {steps}")
    elif not np.allclose(ours, theirs, rtol=args.rtol, atol=args.atol):
        failures.append(f"shuffled losses differ from PyTorch's:\n  ours  "
                        f"{ours}\n  torch {theirs}")
    else:
        worst = max(abs(a - b) / abs(b) for a, b in zip(ours, theirs))
        print(f"shuffle: {steps} losses equal PyTorch's on the python "
              f"permutation (worst relative error {worst:.1e})")
    # The file order would give other losses: the shuffle is no identity.
    plain = torch_losses(args.model, args.work, "file-order", args.lr, 2,
                         batch, lambda k: (x[k * batch:(k + 1) * batch],
                                           y[k * batch:(k + 1) * batch]))
    if np.allclose(ours[1:2], plain[1:2], rtol=args.rtol, atol=args.atol):
        failures.append("step 2's loss is the file order's")

    # Reading ahead changes no sample: without it, and 64 steps ahead
    # (many epochs: their permutations drawn ahead of the stages).
    for ahead in (0, 64):
        again = run(mpirun + flags + ["--epochs=2", "--shuffle",
                                      f"--seed={args.seed}",
                                      f"--data-prefetch={ahead}"])
        same = step_texts(again) == step_texts(whole)
        print(f"prefetch: --data-prefetch {ahead} prints the same "
              f"{len(step_texts(again))} steps: {'yes' if same else 'no'}")
        if not same:
            failures.append(f"--data-prefetch {ahead} changed the losses")

    # Stopped mid-epoch, resumed without --shuffle and --seed.
    ckpt = os.path.join(args.work, "checkpoint")
    shutil.rmtree(ckpt, ignore_errors=True)
    first = run(mpirun + flags + ["--steps=7", "--shuffle",
                                  f"--seed={args.seed}",
                                  "--checkpoint-every=3",
                                  f"--checkpoint={ckpt}"])
    reference = step_texts(whole)
    if step_texts(first) != {k: reference[k] for k in range(1, 8)}:
        failures.append("the first 7 steps differ from the uninterrupted "
                        "run's")
    manifest = open(os.path.join(ckpt, "step-6", "MANIFEST")).read()
    print("resume: the manifest records: " +
          re.search(r"^data .*$", manifest, re.M).group(0))
    for start, where in ((3, os.path.join(ckpt, "step-3")), (6, ckpt)):
        resumed = run(mpirun + flags + ["--epochs=2", f"--resume={where}"])
        got = step_texts(resumed)
        want = {k: reference[k] for k in range(start + 1, steps + 1)}
        epoch, place = divmod(start, order.steps_per_epoch)
        same = got == want
        print(f"resume at step {start} (epoch {epoch}, batch {place + 1} "
              f"next): steps {start + 1}..{steps} equal the uninterrupted "
              f"run: {'yes' if same else 'no'}")
        if not same:
            failures.append(f"resumed at {start}: {got} != {want}")

    # uint8 files for a float32 input and int64 labels, unscaled.
    u8 = run([exe, "--local", "--epochs=1", "--shuffle", "--seed=9",
              "--lr=0.001"] + data_flags(mlir, [files["xu"], files["yu"]]))
    order8 = DataOrder(n, batch, shuffle=True, seed=9)
    ours = step_losses(u8)
    theirs = torch_losses(
        args.model, args.work, "uint8", 0.001, order8.steps_per_epoch, batch,
        lambda k: (xu[order8.step(k)].astype(np.float32),
                   yu[order8.step(k)].astype(np.int64)))
    if len(ours) != len(theirs) or not np.allclose(
            ours, theirs, rtol=args.rtol, atol=args.atol):
        failures.append(f"uint8 losses differ from PyTorch's on the "
                        f"unscaled values:\n  ours  {ours}\n  torch {theirs}")
    else:
        print(f"uint8: {len(ours)} losses equal PyTorch's on "
              "x.astype(float32) (unscaled)")

    # Data parallelism: 2 replicas of the 2-stage pipeline, m / 2
    # micro-batches each (the same batch of 8), read the step's samples,
    # replica r its micro-batches r m / 2 .. (r + 1) m / 2 - 1.
    exe_dp, mlir_dp = compile_program("dp2", 2, dp=2, microbatches=m // 2)
    dp = run([exe_dp, "--local", "--epochs=2", "--shuffle",
              f"--seed={args.seed}"] +
             data_flags(mlir_dp, [files["x"], files["y"]]))
    theirs = shuffled
    if len(step_losses(dp)) != steps or not np.allclose(
            step_losses(dp), theirs, rtol=args.rtol, atol=args.atol):
        failures.append(f"dp=2 losses differ:\n  ours  {step_losses(dp)}\n"
                        f"  torch {theirs}")
    else:
        print(f"dp=2: {steps} losses equal PyTorch's")

    # Bad data sets and flags.
    def bad(name, array):
        path = os.path.join(data, f"{name}.npy")
        np.save(path, array)
        return path

    good = open(files["x"], "rb").read()
    truncated = os.path.join(data, "truncated.npy")
    open(truncated, "wb").write(good[:-100])
    corrupt = os.path.join(data, "corrupt.npy")
    open(corrupt, "wb").write(b"\x93NUMPY\x01\x00\x10\x00{'descr': <f4'}\n" +
                              good[80:])
    cases = [
        ("shape", [bad("wide", np.zeros((n, 1, 28, 27), np.float32)),
                   files["y"]], []),
        ("dtype", [bad("f64", x.astype(np.float64)), files["y"]], []),
        ("label-dtype", [files["x"], bad("yf", y.astype(np.float32))], []),
        ("truncated", [truncated, files["y"]], []),
        ("corrupt", [corrupt, files["y"]], []),
        ("few", [bad("few", x[:5]), bad("fewy", y[:5])], []),
        ("counts", [files["x"], bad("y42", y[:42])], []),
        ("epochs-steps", [files["x"], files["y"]],
         ["--epochs=1", "--steps=3"]),
        ("shuffle-synthetic", None, ["--shuffle"]),
        ("prefetch", [files["x"], files["y"]], ["--data-prefetch=-1"]),
    ]
    for name, paths, extra in cases:
        command = [exe, "--local"] + extra + (
            data_flags(mlir, paths) if paths else [])
        proc = subprocess.run(command, capture_output=True, text=True,
                              timeout=60)
        check_error_case(name, proc, failures)

    for failure in failures:
        print("MISMATCH", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
