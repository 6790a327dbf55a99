#!/usr/bin/env python3
"""Checks that pipeline-opt trains exactly PyTorch's trainable set.

A small torch model with two registered buffers (an additive -inf mask and
a 0/1 mask) and, in a second variant, a frozen parameter
(requires_grad=False), is exported plainly (torch.onnx.export) and with
python/pp_export_torch.py. Each export is compiled into a training step
(--pp-add-loss --pp-autodiff --pp-optimizer), run for --steps SGD steps with
pp-interpret, and compared with PyTorch training from the same weights on
the same data: every loss, every parameter, and every buffer and frozen
parameter unchanged. A plain export of the frozen parameter needs
--frozen-params; without it the parameter trains, which the check reports
(the EXPECTED-MISMATCH line shows the comparison can fail).
"""
import argparse
import os
import re
import sys

import numpy as np
import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare import Comparison, run  # noqa: E402
from pp_export_torch import export  # noqa: E402


class MaskedMLP(nn.Module):
    def __init__(self, freeze_first):
        super().__init__()
        self.first = nn.Linear(16, 16)
        self.head = nn.Linear(16, 10)
        additive = torch.zeros(16)
        additive[::3] = float("-inf")
        self.register_buffer("additive_mask", additive)
        keep = torch.ones(16)
        keep[1::4] = 0.0
        self.register_buffer("keep_mask", keep)
        if freeze_first:
            self.first.requires_grad_(False)

    def forward(self, x):
        h = torch.tanh(self.first(x))
        return self.head(torch.softmax(h + self.additive_mask, dim=-1) *
                         self.keep_mask)


def torch_training(model, inputs, labels, steps, lr):
    optimizer = torch.optim.SGD(
        [p for p in model.parameters() if p.requires_grad], lr=lr)
    x, y = torch.from_numpy(inputs), torch.from_numpy(labels)
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    state = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    return losses, state


def check(args, name, freeze_first, helper, import_flags, expect_match=True):
    work = os.path.join(args.work, name)
    os.makedirs(work, exist_ok=True)
    torch.manual_seed(0)
    model = MaskedMLP(freeze_first)
    example = torch.randn(8, 16)
    path = os.path.join(work, "model.onnx")
    kwargs = dict(input_names=["input"], output_names=["logits"])
    if helper:
        export(model, (example,), path, **kwargs)
    else:
        torch.onnx.export(model, (example,), path, opset_version=17,
                          training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False, **kwargs)
    initial = {k: v.detach().numpy().copy()
               for k, v in model.state_dict().items()}
    rng = np.random.default_rng(1)
    inputs = rng.standard_normal((8, 16)).astype(np.float32)
    labels = rng.integers(0, 10, size=(8,), dtype=np.int64)
    np.save(os.path.join(work, "input.npy"), inputs)
    np.save(os.path.join(work, "labels.npy"), labels)
    theirs, final = torch_training(model, inputs, labels, args.steps, args.lr)

    step = os.path.join(work, "train.mlir")
    run([args.pipeline_opt, path, *import_flags, "--pp-add-loss",
         "--pp-autodiff", f"--pp-optimizer=kind=sgd lr={args.lr}",
         "-o", step])
    kinds = {name: kind for kind, name in re.findall(
        r'onnx\.global "(\w+)" @"?([\w.]+)"?', open(step).read())}
    out = run([args.pp_interpret, step, f"--steps={args.steps}",
               "--input=input=" + os.path.join(work, "input.npy"),
               "--input=labels=" + os.path.join(work, "labels.npy"),
               "--dump-globals=" + os.path.join(work, "ours")])
    ours = [float(line.split()[3]) for line in out.splitlines()
            if line.startswith("step ")]
    index = dict(line.rstrip("\n").split("\t") for line in
                 open(os.path.join(work, "ours", "globals.txt")))
    compare = Comparison(args.rtol, args.atol)
    for i, (a, b) in enumerate(zip(ours, theirs)):
        compare(f"loss of step {i + 1}", [a], [b])
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    for key, value in final.items():
        if key in trainable:
            if kinds.get(key) != "trainable":
                compare.failures.append(f"{key}: imported as {kinds.get(key)}")
            elif key in index:
                compare(key, np.load(os.path.join(work, "ours", index[key])),
                        value)
            else:
                compare.failures.append(f"{key}: no such global")
        else:  # buffers and frozen parameters: constants, unchanged
            if not np.array_equal(value, initial[key]):
                compare.failures.append(f"{key}: torch changed it")
            if kinds.get(key, "constant") != "constant":
                compare.failures.append(f"{key}: imported as {kinds[key]}, "
                                        "not constant")
    matched = not compare.failures
    frozen = sorted(k for k, v in kinds.items() if v == "constant")
    print(f"{name}: {len(ours)} losses, worst relative error "
          f"{compare.worst:.2e}; constants {frozen}; "
          f"{'match' if matched else 'differ'}")
    if matched != expect_match:
        for failure in compare.failures or ["it matched"]:
            print(("MISMATCH " if expect_match else "UNEXPECTED ") + failure)
        return False
    if not expect_match:
        print(f"EXPECTED-MISMATCH {name}: {compare.failures[0]}")
    return True


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", required=True)
    parser.add_argument("--pipeline-opt", default="pipeline-opt")
    parser.add_argument("--pp-interpret", default="pp-interpret")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--rtol", type=float, default=1e-5)
    parser.add_argument("--atol", type=float, default=1e-6)
    args = parser.parse_args()
    results = [
        check(args, "buffers-plain", False, False, []),
        check(args, "buffers-helper", False, True, []),
        check(args, "frozen-plain-flag", True, False,
              ["--frozen-params=^first\\."]),
        check(args, "frozen-helper", True, True, []),
        check(args, "frozen-plain-noflag", True, False, [],
              expect_match=False),
    ]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
