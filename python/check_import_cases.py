#!/usr/bin/env python3
"""Runs import cases of make_import_cases.py on pp-interpret against numpy.

For the cases whose import folds shape arithmetic or decomposes an op (Pad in
every mode, Tile, the Range/Size/Equal/Where/Expand shape ops, a ViT's class
token exported from torch, Einsum): writes a deterministic input, runs the
imported model with pp-interpret and compares each output with a numpy
reference (float32 data moved, exact; Einsum's float32 sums against numpy's
float64 ones: both within 1e-6 of the largest value). Prints one line per
output and exits non-zero on a mismatch.

Usage: check_import_cases.py --pp-interpret PATH --cases DIR [--only a,b]
       [--batch N]
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare import Comparison, run  # noqa: E402
from make_import_cases import EINSUM_CASES, farange  # noqa: E402


def pad(x, pads, mode, value=0.0):
    """ONNX Pad: numpy.pad by the positive pads, then a crop by the negative
    ones."""
    rank = x.ndim
    widths = [(max(pads[d], 0), max(pads[d + rank], 0)) for d in range(rank)]
    kwargs = {"constant_values": value} if mode == "constant" else {}
    y = np.pad(x, widths, mode=mode, **kwargs)
    return y[tuple(slice(-min(pads[d], 0), y.shape[d] + min(pads[d + rank], 0))
                   for d in range(rank))]


def references(case, x, batch):
    if case == "pad_modes":
        return {"C": pad(x, [0, 0, 1, -1, 0, 0, 1, 2], "constant", 0.5),
                "R": pad(x, [0, 0, 2, 1, 0, 0, 1, 2], "reflect"),
                "E": pad(x, [0, 0, 3, 0, 0, 0, 0, 3], "edge")}
    if case == "pad_opset2":
        return {"Y": pad(x, [1, 0, 0, 2], "edge")}
    if case == "tile":
        return {"Y": np.tile(x, (3, 2))}
    if case == "shape_ops":
        return {"Y": x + np.arange(3, dtype=np.float32)[:, None]}
    if case in EINSUM_CASES:
        equation, shapes = EINSUM_CASES[case]
        weights = [farange(s, 0.0625) for s in shapes[1:]]
        return {"Y": np.einsum(equation, x.astype(np.float64),
                               *weights).astype(np.float32)}
    if case == "vit_cls_token":
        cls = np.broadcast_to(np.arange(8, dtype=np.float32) * 0.5 + 0.25,
                              (batch, 1, 8))
        return {"y": np.concatenate([cls, x], 1) * 2}
    raise ValueError(case)


SHAPES = {"pad_modes": (1, 2, 4, 4), "pad_opset2": (2, 3), "tile": (2, 3),
          "shape_ops": (3, 4), "vit_cls_token": None,
          **{case: shapes[0] for case, (_, shapes) in EINSUM_CASES.items()}}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pp-interpret", required=True)
    parser.add_argument("--cases", required=True, help="make_import_cases.py --out DIR")
    parser.add_argument("--only", default="",
                        help="these cases (default: all of SHAPES)")
    parser.add_argument("--batch", type=int, default=5,
                        help="--batch-size of vit_cls_token")
    args = parser.parse_args()
    check = Comparison(1e-6, 1e-6)
    rng = np.random.default_rng(0)
    only = [c for c in args.only.split(",") if c]
    unknown = [c for c in only if c not in SHAPES]
    if unknown:
        parser.error(f"unknown case(s): {', '.join(unknown)}")
    for case, shape in SHAPES.items():
        if only and case not in only:
            continue
        if shape is None:
            shape = (args.batch, 4, 8)
        x = rng.uniform(-2, 2, shape).astype(np.float32)
        work = os.path.join(args.cases, case + ".out")
        os.makedirs(work, exist_ok=True)
        np.save(os.path.join(work, "input.npy"), x)
        name = "x" if case == "vit_cls_token" else "X"
        cmd = [args.pp_interpret, os.path.join(args.cases, case + ".onnx"),
               f"--input={name}=" + os.path.join(work, "input.npy"),
               f"--output-dir={work}"]
        if case == "vit_cls_token":
            cmd.append(f"--batch-size={args.batch}")
        run(cmd)
        for output, expected in references(case, x, args.batch).items():
            got = np.load(os.path.join(work, output + ".npy"))
            before = len(check.failures)
            check(f"{case}/{output}", got, expected)
            print(f"{case} {output}: {'x'.join(map(str, got.shape))} "
                  f"{'ok' if len(check.failures) == before else 'MISMATCH'}")
    for failure in check.failures:
        print("MISMATCH", failure)
    return 1 if check.failures else 0


if __name__ == "__main__":
    sys.exit(main())
