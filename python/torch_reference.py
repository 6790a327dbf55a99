#!/usr/bin/env python3
"""Trains a test model for a few SGD steps in PyTorch (CPU) as a reference.

Builds one model of make_models.py (same seed), turns dropout off (unless
--dropout), exports it to ONNX with static shapes (training mode, so BatchNorm uses batch
statistics), loads the exported initializers back into the torch model so both
sides start from identical weights, then runs `--steps` steps of
torch.optim.SGD (or Adam / AdamW) on fixed random data with mean cross-entropy loss
(the forward under torch.autocast with --autocast=bf16).

Writes to --out: model.onnx, input.npy, labels.npy, losses.npy (one loss per
step, float64) and final.npz (every initializer after training: parameters
and BatchNorm running statistics, keyed by initializer name).

--lr-schedule (with --warmup-steps, --min-lr, ...) steps a
torch.optim.lr_scheduler once per step, as the generated program's flags of
the same names do (make_scheduler); lrs.npy holds each step's rate.

--clip-grad-norm X clips every step's gradients with
torch.nn.utils.clip_grad_norm_ before the optimizer step; grad_norms.npy
holds each step's total norm. --accumulate N computes a step's gradient as
N micro-batches of the batch in a row (dim 0 slices, each loss / N), as a
pipeline does (BatchNorm then normalises each micro-batch alone).
"""
import argparse
import os
import sys
import warnings

import numpy as np
import onnx
from onnx import numpy_helper
import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_models  # noqa: E402


def disable_dropout(model):
    for module in model.modules():
        if isinstance(module, nn.Dropout):
            module.p = 0.0
        if isinstance(module, nn.MultiheadAttention):
            module.dropout = 0.0


def make_scheduler(optimizer, kind, warmup_steps=0, warmup_start_factor=1 / 3,
                   min_lr=0.0, decay_steps=None, step_size=None, gamma=0.1,
                   milestones=None, power=1.0):
    """The PyTorch scheduler of `train --lr-schedule kind ...` (docs/cli.md),
    None for a constant rate: StepLR, MultiStepLR, ExponentialLR,
    CosineAnnealingLR, LinearLR or PolynomialLR (decay to min_lr at
    decay_steps, warm-up included; PolynomialLR has no end rate, so with
    min_lr > 0 it is mmcv's PolyLR as a LambdaLR), after a LinearLR warm-up
    chained by SequentialLR."""
    S = torch.optim.lr_scheduler
    base = optimizer.param_groups[0]["lr"]
    decay = None if decay_steps is None else decay_steps - warmup_steps
    if kind == "constant":
        main = None
    elif kind == "step":
        main = S.StepLR(optimizer, step_size=step_size, gamma=gamma)
    elif kind == "multistep":
        main = S.MultiStepLR(optimizer, milestones=list(milestones),
                             gamma=gamma)
    elif kind == "exponential":
        main = S.ExponentialLR(optimizer, gamma=gamma)
    elif kind == "poly" and min_lr == 0:
        main = S.PolynomialLR(optimizer, total_iters=decay, power=power)
    elif kind == "poly":
        main = S.LambdaLR(optimizer, lambda k: (
            min_lr + (base - min_lr) *
            (1 - min(k, decay) / decay) ** power) / base)
    elif kind == "cosine":
        main = S.CosineAnnealingLR(optimizer, T_max=decay, eta_min=min_lr)
    elif kind == "linear":
        main = S.LinearLR(optimizer, start_factor=1.0,
                          end_factor=min_lr / base, total_iters=decay)
    else:
        raise ValueError(f"unknown schedule {kind}")
    if warmup_steps == 0:
        return main
    warmup = S.LinearLR(optimizer, start_factor=warmup_start_factor,
                        end_factor=1.0, total_iters=warmup_steps)
    if main is None:
        return warmup
    return S.SequentialLR(optimizer, [warmup, main],
                          milestones=[warmup_steps])


def make_data(name, example, seed):
    rng = np.random.default_rng(seed)
    if example.dtype == torch.int64:
        inputs = rng.integers(0, 64, size=example.shape, dtype=np.int64)
        labels = rng.integers(0, 64, size=example.shape, dtype=np.int64)
    elif name in make_models.SEGMENTATION_CLASSES:
        inputs = rng.standard_normal(example.shape).astype(np.float32)
        labels = rng.integers(0, make_models.SEGMENTATION_CLASSES[name],
                              size=(example.shape[0],) + example.shape[2:],
                              dtype=np.int64)
    else:
        inputs = rng.standard_normal(example.shape).astype(np.float32)
        labels = rng.integers(0, 10, size=(example.shape[0],), dtype=np.int64)
    return inputs, labels


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, choices=sorted(make_models.MODELS))
    parser.add_argument("--out", required=True, action="append",
                        help="output directory; repeat it (with a --batch "
                        "each) for several batch sizes of the same model")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--momentum", type=float, default=0.0)
    parser.add_argument("--optimizer", choices=["sgd", "adam", "adamw"],
                        default="sgd")
    parser.add_argument("--weight-decay", type=float, default=0.0)
    parser.add_argument("--label-smoothing", type=float, default=0.0)
    parser.add_argument("--class-weights", default="",
                        help="comma-separated per-class weights of the loss")
    parser.add_argument("--weight-decay-min-rank", type=int, default=0,
                        help="decay only parameters of at least this rank "
                        "(2: nanoGPT's groups, biases and norms undecayed)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dtype", choices=["float32", "float64"],
                        default="float32",
                        help="precision of the model and data")
    parser.add_argument("--autocast", choices=["none", "bf16"], default="none",
                        help="run the forward pass under torch.autocast on "
                        "the CPU (bf16): fp32 weights, bf16 matmuls")
    parser.add_argument("--batch", type=int, action="append",
                        help="batch size (default: the model's example)")
    parser.add_argument("--dropout", action="store_true",
                        help="keep the model's Dropout (training mode) in the "
                        "export; torch's masks are not ours, so its losses "
                        "are no reference then")
    parser.add_argument("--lr-schedule", default="constant",
                        choices=["constant", "step", "multistep",
                                 "exponential", "cosine", "linear", "poly"])
    parser.add_argument("--warmup-steps", type=int, default=0)
    parser.add_argument("--warmup-start-factor", type=float, default=1 / 3)
    parser.add_argument("--min-lr", type=float, default=0.0)
    parser.add_argument("--decay-steps", type=int, default=None,
                        help="default --steps")
    parser.add_argument("--step-size", type=int, default=None)
    parser.add_argument("--gamma", type=float, default=0.1)
    parser.add_argument("--milestones", default=None,
                        help="multistep: N1,N2,...")
    parser.add_argument("--power", type=float, default=1.0)
    parser.add_argument("--clip-grad-norm", type=float, default=None)
    parser.add_argument("--accumulate", type=int, default=1,
                        help="micro-batches per step (gradient "
                        "accumulation)")
    args = parser.parse_args()
    if args.batch and len(args.batch) > 1 and len(args.batch) != len(args.out):
        parser.error("give one --batch, or one per --out")
    warnings.filterwarnings("ignore", message="ONNX Preprocess - Removing mutation")
    torch.use_deterministic_algorithms(True)
    # Several exports in one process: importing torch is most of the time
    # of one (about 3 of 4 s for the MLP).
    batches = args.batch or [0]
    for i, out in enumerate(args.out):
        reference(args, out, batches[i] if len(batches) > 1 else batches[0])


def reference(args, out, batch, batches=None):
    """Exports the model at batch size `batch` (0: its example's) into `out`
    and trains it there; each call starts from the same seed. `batches`,
    when given, maps a step (from 0) to its (inputs, labels) arrays, which
    replace the fixed random batch (check_datasets.py's data sets)."""
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    model, example, input_name, _ = make_models.MODELS[args.model]()
    if batch:
        # A bigger batch keeps BatchNorm over 1x1 feature maps well
        # conditioned (two values per channel amplify float32 rounding).
        example = example[:1].expand(batch, *example.shape[1:]).clone()
    if not args.dropout:
        disable_dropout(model)
    model.train()
    if args.dtype == "float64":
        model = model.double()
        if example.is_floating_point():
            example = example.double()
    path = os.path.join(out, "model.onnx")
    torch.onnx.export(model, (example,), path, opset_version=17,
                      training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False, input_names=[input_name],
                      output_names=["logits"])

    # Exporting ran a forward pass; start both sides from the exported state.
    initializers = {t.name: numpy_helper.to_array(t)
                    for t in onnx.load(path).graph.initializer}
    state = model.state_dict()
    with torch.no_grad():
        for key, value in state.items():
            if key in initializers:
                value.copy_(torch.from_numpy(initializers[key].copy()))

    inputs, labels = make_data(args.model, example, args.seed)
    if example.is_floating_point():
        inputs = inputs.astype(args.dtype)
    np.save(os.path.join(out, "input.npy"), inputs)
    np.save(os.path.join(out, "labels.npy"), labels)
    # Two parameter groups, as nanoGPT's: decayed and not.
    min_rank = getattr(args, "weight_decay_min_rank", 0)
    groups = [
        {"params": [p for p in model.parameters() if p.dim() >= min_rank],
         "weight_decay": args.weight_decay},
        {"params": [p for p in model.parameters() if p.dim() < min_rank],
         "weight_decay": 0.0}]
    groups = [g for g in groups if g["params"]]
    if args.optimizer == "sgd":
        optimizer = torch.optim.SGD(groups, lr=args.lr,
                                    momentum=args.momentum)
    elif args.optimizer == "adam":
        optimizer = torch.optim.Adam(groups, lr=args.lr)
    else:
        optimizer = torch.optim.AdamW(groups, lr=args.lr)
    scheduler = make_scheduler(
        optimizer, args.lr_schedule, args.warmup_steps,
        args.warmup_start_factor, args.min_lr,
        args.decay_steps if args.decay_steps is not None else args.steps,
        args.step_size, args.gamma,
        # Callers that build their own arguments may leave these out.
        [int(m) for m in getattr(args, "milestones", None).split(",")]
        if getattr(args, "milestones", None) else None,
        getattr(args, "power", 1.0))
    x, y = torch.from_numpy(inputs), torch.from_numpy(labels)
    clip = getattr(args, "clip_grad_norm", None)
    parts = getattr(args, "accumulate", 1)
    losses, lrs, norms = [], [], []
    for k in range(args.steps):
        if batches is not None:
            x, y = (torch.from_numpy(np.ascontiguousarray(a))
                    for a in batches(k))
        lrs.append(optimizer.param_groups[0]["lr"])
        optimizer.zero_grad()
        loss = 0.0
        for xs, ys in zip(x.chunk(parts), y.chunk(parts)):
            with torch.autocast("cpu", dtype=torch.bfloat16,
                                enabled=args.autocast == "bf16"):
                logits = model(xs)
                # Per-pixel logits [N, C, H, W] have their classes in dim 1.
                if logits.dim() >= 4:
                    logits = logits.movedim(1, -1)
                weights = getattr(args, "class_weights", "")
                part = nn.functional.cross_entropy(
                    logits.reshape(-1, logits.shape[-1]), ys.reshape(-1),
                    weight=torch.tensor(
                        [float(w) for w in weights.split(",")],
                        dtype=logits.dtype) if weights else None,
                    label_smoothing=getattr(args, "label_smoothing",
                                            0.0)) / parts
            part.backward()
            loss += part.item()
        if clip is not None:
            norms.append(float(nn.utils.clip_grad_norm_(model.parameters(),
                                                        clip)))
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
        losses.append(loss)
    np.save(os.path.join(out, "losses.npy"), np.array(losses))
    np.save(os.path.join(out, "lrs.npy"), np.array(lrs))
    if clip is not None:
        np.save(os.path.join(out, "grad_norms.npy"), np.array(norms))
    final = {key: value.detach().numpy() for key, value in
             model.state_dict().items() if key in initializers}
    np.savez(os.path.join(out, "final.npz"), **final)
    print(f"{args.model}: losses {losses}")


if __name__ == "__main__":
    main()
