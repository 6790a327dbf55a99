#!/usr/bin/env python3
"""PyTorch reference of the digits demo (scripts/digits-demo.sh).

    digits_torch.py --data DIR --epochs 10 --batch 32 --lr 0.05 \\
        --momentum 0.9 --seed 1 --warmup-steps 20 [--compare-log RUN.jsonl]

Trains python/digits_data.py's DigitsCNN with the recipe the demo gives
`train`, so that the two runs are the same computation up to float32
rounding:

  - initial weights: DIR/model.onnx's initializers (the file pipeline-opt
    compiled), copied into the torch module by name;
  - data: DIR/train/{input,labels}.npy, in the order `train --data
    --shuffle --seed S` reads them (python/pp_data_order.py: epoch e's
    splitmix64 permutation, floor(1500 / batch) batches an epoch, the rest
    dropped);
  - loss: mean softmax cross-entropy over the batch (the program's loss is
    the mean over its micro-batches of their means: the same value);
  - optimizer: torch.optim.SGD(lr, momentum, weight_decay), as the
    compiler's `--pp-compile optimizer=sgd momentum= weight-decay=`;
  - --clip-grad-norm X: torch.nn.utils.clip_grad_norm_(X) of the batch's
    gradient before each update (for `train --clip-grad-norm`, when it has
    it);
  - schedule: `--lr-schedule cosine --warmup-steps W --min-lr M` is
    torch_reference.make_scheduler's LinearLR warm-up (start factor 1/3)
    chained with CosineAnnealingLR to M at the last step (`train`'s
    --decay-steps defaults to the run's step count), stepped once a step.

Prints the held-out accuracy and loss on DIR/heldout (297 images), and with
--losses FILE writes every step's loss (JSON list). --compare-log RUN.jsonl
sets the first --compare-steps losses of a `train --log` run against these
(relative difference, --rtol) and prints `compare: N steps, max rel diff X:
ok` or `MISMATCH` lines (exit status 1), then the largest difference over
all steps, unchecked: over many steps the two runs' float32 rounding,
which training amplifies, may set them apart.
"""
import argparse
import json
import os
import sys
import time
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def make_scheduler(optimizer, kind, warmup_steps, min_lr, decay_steps):
    # torch_reference's (the one check_lr_schedule.py holds train's rates
    # to); imported lazily, it imports torchvision through make_models.
    from torch_reference import make_scheduler as make
    return make(optimizer, kind, warmup_steps=warmup_steps, min_lr=min_lr,
                decay_steps=decay_steps)


def evaluate(model, x, y):
    """(accuracy, mean cross-entropy) of `model` on arrays x, y."""
    import torch
    with torch.no_grad():
        logits = model(torch.from_numpy(x))
        loss = torch.nn.functional.cross_entropy(logits, torch.from_numpy(y))
        accuracy = (logits.argmax(1).numpy() == y).mean()
    return float(accuracy), float(loss)


def train(args):
    import torch
    from digits_data import load_onnx_weights, make_model
    from pp_data_order import DataOrder
    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    model = load_onnx_weights(make_model(),
                              os.path.join(args.data, "model.onnx"))
    model.train()
    x = np.load(os.path.join(args.data, "train", "input.npy"))
    y = np.load(os.path.join(args.data, "train", "labels.npy"))
    order = DataOrder(len(x), args.batch, shuffle=True, seed=args.seed)
    steps = args.epochs * order.steps_per_epoch
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr,
                                momentum=args.momentum,
                                weight_decay=args.weight_decay)
    with warnings.catch_warnings():
        # SequentialLR passes an epoch to the cosine scheduler.
        warnings.simplefilter("ignore", UserWarning)
        scheduler = make_scheduler(optimizer, args.lr_schedule,
                                   args.warmup_steps, args.min_lr, steps)
    run_steps = steps if args.steps is None else min(args.steps, steps)
    losses, lrs = [], []
    start = time.perf_counter()
    for k in range(run_steps):
        idx = order.step(k)
        xb, yb = torch.from_numpy(x[idx]), torch.from_numpy(y[idx])
        lrs.append(optimizer.param_groups[0]["lr"])
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(xb), yb)
        loss.backward()
        if args.clip_grad_norm is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(),
                                           args.clip_grad_norm)
        optimizer.step()
        if scheduler is not None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                scheduler.step()
        losses.append(loss.item())
    seconds = time.perf_counter() - start
    return model, losses, lrs, steps, seconds


def log_losses(path, steps):
    """The first `steps` training losses of a `train --log` JSON file."""
    sys.path.insert(0, HERE)
    from plot_run import LogError, read_log
    try:
        records, _ = read_log(path)
    except LogError as e:
        sys.exit(f"digits_torch.py: error: {e}")
    return [r["loss"] for r in records if "loss" in r][:steps]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True,
                        help="digits_data.py's --out directory")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--steps", type=int, default=None,
                        help="stop after this many steps (the schedule "
                        "still spans --epochs)")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--weight-decay", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--lr-schedule", default="cosine",
                        choices=["constant", "step", "cosine", "linear"])
    parser.add_argument("--warmup-steps", type=int, default=20)
    parser.add_argument("--min-lr", type=float, default=0.0)
    parser.add_argument("--clip-grad-norm", type=float, default=None,
                        help="torch.nn.utils.clip_grad_norm_ to this total "
                        "norm before each update (train's flag of the same "
                        "name, issue 41 item 3)")
    parser.add_argument("--losses", help="write every step's loss (JSON)")
    parser.add_argument("--compare-log", help="a `train --log` of the run")
    parser.add_argument("--compare-steps", type=int, default=None,
                        help="steps to compare (default: all run)")
    parser.add_argument("--rtol", type=float, default=1e-4)
    args = parser.parse_args()

    model, losses, lrs, steps, seconds = train(args)
    print(f"torch: {len(losses)} of {steps} steps ({args.epochs} epochs of "
          f"batch {args.batch}) in {seconds:.1f} s, loss {losses[0]:.4f} -> "
          f"{losses[-1]:.4f}")
    hx = np.load(os.path.join(args.data, "heldout", "input.npy"))
    hy = np.load(os.path.join(args.data, "heldout", "labels.npy"))
    accuracy, loss = evaluate(model, hx, hy)
    print(f"torch held-out accuracy: {100 * accuracy:.2f}% "
          f"({round(accuracy * len(hy))}/{len(hy)}), loss {loss:.4f}")
    if args.losses:
        with open(args.losses, "w") as f:
            json.dump({"losses": losses, "lrs": lrs,
                       "heldout_accuracy": accuracy,
                       "heldout_loss": loss}, f)
    if args.compare_log:
        ours = log_losses(args.compare_log, len(losses))
        count = min(args.compare_steps or len(losses), len(losses))
        if len(ours) < count:
            print(f"MISMATCH: {len(ours)} logged losses, {count} to compare")
            return 1
        rel = [abs(a - b) / max(abs(b), 1e-12) for a, b in zip(ours, losses)]
        worst = int(np.argmax(rel[:count]))
        verdict = "ok" if rel[worst] <= args.rtol else "MISMATCH"
        print(f"compare: {count} steps, max rel diff {rel[worst]:.2e} at "
              f"step {worst + 1} (ours {ours[worst]:.7g}, torch "
              f"{losses[worst]:.7g}), rtol {args.rtol:g}: {verdict}")
        if len(rel) > count:
            # Past the checked steps the two runs may drift apart as the
            # rounding of float32 sums grows (training amplifies it): shown,
            # not checked.
            late = int(np.argmax(rel))
            print(f"compare: all {len(rel)} steps (not checked): max rel "
                  f"diff {rel[late]:.2e} at step {late + 1} (ours "
                  f"{ours[late]:.7g}, torch {losses[late]:.7g})")
        if verdict != "ok":
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
