#!/usr/bin/env python3
"""Checks pp-interpret op by op against numpy and PyTorch.

ONNX's own test cases (onnx_conformance.py) cover float tensors of common
shapes; this script covers the rest of what the interpreter and the kernels
promise: every dtype an op accepts (integer and bool elementwise ops, casts
between all dtypes, data movement on every dtype), shape operands read at run
time (Reshape, Slice with negative steps, Expand, Split, Squeeze), Pad in
every mode (with cropping, a constant of each dtype, axes), rank-1
MatMul operands, Gemm bias shapes, convolutions and pooling in 1-3 spatial
dims with groups, dilations, padding and ceil mode.

Each case is a one-op function written as MLIR, run through pp-interpret with
.npy inputs; the script prints the failing cases and exits non-zero if any.

Usage: interpreter_op_checks.py --pp-interpret PATH
"""
import argparse
import itertools
import math
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F

MLIR_TYPES = {np.float32: "f32", np.float64: "f64", np.int64: "i64",
              np.int32: "i32", np.int8: "i8", np.uint8: "ui8", np.bool_: "i1"}
ONNX_CODES = {np.float32: 1, np.uint8: 2, np.int8: 3, np.int32: 6,
              np.int64: 7, np.bool_: 9, np.float64: 11}
FLOATS = [np.float32, np.float64]


def tensor_type(shape, dtype):
    return "tensor<" + "".join(f"{d}x" for d in shape) + MLIR_TYPES[dtype] + ">"


def ty(array):
    array = np.asarray(array)
    return tensor_type(array.shape, array.dtype.type)


def arr(values):
    return "array<i64: " + ", ".join(map(str, values)) + ">"


def const_i64(name, values):
    return (f"  %{name} = onnx.Constant dense<[{', '.join(map(str, values))}]> "
            f": tensor<{len(values)}xi64>\n")


class Checker:
    def __init__(self, pp_interpret, work_dir):
        self.pp_interpret = pp_interpret
        self.work_dir = work_dir
        self.count = 0
        self.failures = []
        self.rng = np.random.default_rng(0)

    def rand(self, shape, dtype, lo=-3, hi=3):
        if dtype == np.bool_:
            return self.rng.integers(0, 2, shape).astype(np.bool_)
        if np.issubdtype(dtype, np.integer):
            info = np.iinfo(dtype)
            return self.rng.integers(max(lo, info.min), min(hi, info.max) + 1,
                                     shape).astype(dtype)
        return self.rng.uniform(lo, hi, shape).astype(dtype)

    def check(self, name, body, inputs, expected, rtol=1e-5, atol=1e-6):
        """Runs `body` (MLIR ops reading %a0.. and defining %r0..) on
        `inputs` and compares its results with `expected`."""
        self.count += 1
        args = ", ".join(f"%a{i}: {ty(x)}" for i, x in enumerate(inputs))
        types = ", ".join(ty(r) for r in expected)
        values = ", ".join(f"%r{i}" for i in range(len(expected)))
        source = (f"func.func @main({args}) -> ({types}) {{\n{body}\n"
                  f"  return {values} : {types}\n}}\n")
        model = os.path.join(self.work_dir, "case.mlir")
        with open(model, "w") as f:
            f.write(source)
        out_dir = os.path.join(self.work_dir, "out")
        cmd = [self.pp_interpret, model, f"--output-dir={out_dir}"]
        for i, x in enumerate(inputs):
            path = os.path.join(self.work_dir, f"in{i}.npy")
            np.save(path, np.asarray(x))
            cmd.append(f"--input=arg{i}={path}")
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            lines = proc.stderr.strip().splitlines()
            self.failures.append((name, lines[0] if lines else
                                  f"exit {proc.returncode}"))
            return
        for i, want in enumerate(expected):
            want = np.asarray(want)
            got = np.load(os.path.join(out_dir, f"output_{i}.npy"))
            if got.dtype != want.dtype or got.shape != want.shape:
                self.failures.append((name, f"output {i} is {got.dtype}"
                                      f"{got.shape}, expected {want.dtype}"
                                      f"{want.shape}"))
                return
            if want.dtype.kind == "f":
                bad = ~np.isclose(got, want, rtol=rtol, atol=atol,
                                  equal_nan=True)
            else:
                bad = got != want
            if bad.any():
                at = tuple(int(i) for i in np.argwhere(bad)[0])
                self.failures.append((name, f"output {i} differs at {at}: "
                                      f"{got[at]} vs {want[at]}"))
                return


def check_elementwise(c):
    erf = np.vectorize(math.erf)
    for dt in FLOATS:
        x = c.rand((3, 4), dt)
        xp = np.abs(x) + 0.1
        unary = {"Relu": (x, np.maximum(x, 0)), "Sigmoid": (x, 1 / (1 + np.exp(-x))),
                 "Tanh": (x, np.tanh(x)), "Erf": (x, erf(x)), "Sqrt": (xp, np.sqrt(xp)),
                 "Exp": (x, np.exp(x)), "Log": (xp, np.log(xp)),
                 "Reciprocal": (xp, 1 / xp), "Floor": (x, np.floor(x)),
                 "Ceil": (x, np.ceil(x)), "Neg": (x, -x), "Abs": (x, np.abs(x)),
                 "Softplus": (x, np.log1p(np.exp(x))), "Softsign": (x, x / (1 + np.abs(x))),
                 "Sin": (x, np.sin(x)), "Cos": (x, np.cos(x)),
                 "Round": (x * 2, np.round(x * 2))}
        for op, (inp, ref) in unary.items():
            c.check(f"{op} {dt.__name__}",
                    f"  %r0 = onnx.{op} %a0 : ({ty(inp)}) -> {ty(inp)}",
                    [inp], [ref.astype(dt)])
        alpha = dt(np.float32(0.3))
        c.check(f"LeakyRelu {dt.__name__}",
                f"  %r0 = onnx.LeakyRelu %a0 {{alpha = 0.3 : f32}} : ({ty(x)}) -> {ty(x)}",
                [x], [np.where(x > 0, x, alpha * x).astype(dt)])
        expm1 = np.expm1(x)
        c.check(f"Elu {dt.__name__}",
                f"  %r0 = onnx.Elu %a0 {{alpha = 0.3 : f32}} : ({ty(x)}) -> {ty(x)}",
                [x], [np.where(x > 0, x, alpha * expm1).astype(dt)])
        selu_alpha, gamma = dt(np.float32(1.5)), dt(np.float32(2.0))
        c.check(f"Selu {dt.__name__}",
                f"  %r0 = onnx.Selu %a0 {{alpha = 1.5 : f32, gamma = 2.0 : f32}} : ({ty(x)}) -> {ty(x)}",
                [x], [(gamma * np.where(x > 0, x, selu_alpha * expm1)).astype(dt)])
        c.check(f"Celu {dt.__name__}",
                f"  %r0 = onnx.Celu %a0 {{alpha = 0.3 : f32}} : ({ty(x)}) -> {ty(x)}",
                [x], [(np.maximum(x, 0) + np.minimum(0, alpha * np.expm1(x / alpha))).astype(dt)])
        c.check(f"ThresholdedRelu {dt.__name__}",
                f"  %r0 = onnx.ThresholdedRelu %a0 {{alpha = 0.3 : f32}} : ({ty(x)}) -> {ty(x)}",
                [x], [np.where(x > alpha, x, 0).astype(dt)])
        c.check(f"Gelu {dt.__name__}",
                f"  %r0 = onnx.Gelu %a0 : ({ty(x)}) -> {ty(x)}",
                [x], [(0.5 * x * (1 + erf(x / np.sqrt(2)))).astype(dt)])
        tanh = 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))
        c.check(f"Gelu tanh {dt.__name__}",
                f"  %r0 = onnx.Gelu %a0 {{approximate = \"tanh\"}} : ({ty(x)}) -> {ty(x)}",
                [x], [tanh.astype(dt)])
        base, exponent = c.rand((3, 4), dt, 0.1, 3), c.rand((4,), dt, -2, 2)
        c.check(f"Pow {dt.__name__}",
                f"  %r0 = onnx.Pow %a0, %a1 : ({ty(base)}, {ty(exponent)}) -> {ty(base)}",
                [base, exponent], [np.power(base, exponent).astype(dt)])
    for dt in [np.int64, np.int32, np.int8]:
        x = c.rand((5,), dt, -100, 100)
        for op, ref in {"Neg": -x, "Abs": np.abs(x)}.items():
            c.check(f"{op} {dt.__name__}",
                    f"  %r0 = onnx.{op} %a0 : ({ty(x)}) -> {ty(x)}", [x], [ref])
    b = c.rand((2, 3), np.bool_)
    c.check("Not", f"  %r0 = onnx.Not %a0 : ({ty(b)}) -> {ty(b)}", [b], [~b])

    for dt in FLOATS + [np.int64, np.int32, np.int8, np.uint8]:
        a = c.rand((2, 3, 4), dt, 1 if dt == np.uint8 else -20, 20)
        d = c.rand((3, 1), dt, 1, 9)
        if dt != np.uint8:  # mixed signs: integer Div truncates toward zero
            d = d * np.where(c.rng.integers(0, 2, d.shape) == 1, 1, -1).astype(dt)
        if dt in FLOATS:
            quotient = (a / d).astype(dt)
        else:
            quotient = np.trunc(a.astype(np.float64) / d).astype(dt)
        arithmetic = {"Add": a + d, "Sub": a - d, "Mul": a * d, "Div": quotient,
                      "Max": np.maximum(a, d), "Min": np.minimum(a, d)}
        compare = {"Equal": a == d, "Less": a < d, "Greater": a > d}
        for op, ref in {**arithmetic, **compare}.items():
            c.check(f"{op} {dt.__name__}",
                    f"  %r0 = onnx.{op} %a0, %a1 : ({ty(a)}, {ty(d)}) -> {ty(ref)}",
                    [a, d], [ref])
        cond = c.rand((2, 1, 4), np.bool_)
        ref = np.where(cond, a, d)
        c.check(f"Where {dt.__name__}",
                f"  %r0 = onnx.Where %a0, %a1, %a2 : ({ty(cond)}, {ty(a)}, {ty(d)}) -> {ty(ref)}",
                [cond, a, d], [ref])
        lo, hi = np.array(2 if dt == np.uint8 else -5, dt), np.array(7, dt)
        c.check(f"Clip {dt.__name__}",
                f"  %r0 = onnx.Clip %a0 min %a1 max %a2 : ({ty(a)}, {ty(lo)}, {ty(hi)}) -> {ty(a)}",
                [a, lo, hi], [np.clip(a, lo, hi)])
        c.check(f"Clip max {dt.__name__}",
                f"  %r0 = onnx.Clip %a0 max %a1 : ({ty(a)}, {ty(hi)}) -> {ty(a)}",
                [a, hi], [np.minimum(a, hi)])
    x, y = c.rand((3, 4), np.bool_), c.rand((4,), np.bool_)
    for op, ref in {"Equal": x == y, "And": x & y, "Or": x | y}.items():
        c.check(f"{op} bool",
                f"  %r0 = onnx.{op} %a0, %a1 : ({ty(x)}, {ty(y)}) -> {ty(x)}",
                [x, y], [ref])

    for src, dst in itertools.product(ONNX_CODES, ONNX_CODES):
        x = c.rand((7,), src, 0 if src == np.uint8 else -50, 120)
        if src in FLOATS:
            x = (x + 0.25).astype(src)  # truncation toward zero
        if dst == np.uint8 and src != np.bool_:
            x = np.abs(x).astype(src)
        ref = x.astype(dst)
        c.check(f"Cast {src.__name__} to {dst.__name__}",
                f"  %r0 = onnx.Cast %a0 {{to = {ONNX_CODES[dst]} : i64}} : ({ty(x)}) -> {ty(ref)}",
                [x], [ref])


def check_contractions(c):
    for dt in FLOATS:
        for sa, sb in [((3, 4), (4, 5)), ((2, 1, 3, 4), (5, 4, 2)),
                       ((4,), (2, 4, 3)), ((2, 3, 4), (4,)), ((4,), (4,)),
                       ((1, 3, 4), (2, 4, 6))]:
            a, b = c.rand(sa, dt), c.rand(sb, dt)
            ref = np.matmul(a, b)
            c.check(f"MatMul {dt.__name__} {sa} x {sb}",
                    f"  %r0 = onnx.MatMul %a0, %a1 : ({ty(a)}, {ty(b)}) -> {ty(ref)}",
                    [a, b], [ref.astype(dt)], rtol=1e-4)
        for ta, tb in itertools.product([0, 1], [0, 1]):
            for bias in [None, (5,), (1, 5), (3, 1), (3, 5), ()]:
                a = c.rand((4, 3) if ta else (3, 4), dt)
                b = c.rand((5, 4) if tb else (4, 5), dt)
                ref = 0.5 * (a.T if ta else a) @ (b.T if tb else b)
                inputs, operand, operand_type = [a, b], "", ""
                if bias is not None:
                    bias_value = c.rand(bias, dt)
                    inputs.append(bias_value)
                    ref = ref + 2.0 * bias_value
                    operand, operand_type = ", %a2", f", {ty(bias_value)}"
                attrs = (f"{{alpha = 0.5 : f32, beta = 2.0 : f32, "
                         f"transA = {ta} : i64, transB = {tb} : i64}}")
                c.check(f"Gemm {dt.__name__} transA={ta} transB={tb} C={bias}",
                        f"  %r0 = onnx.Gemm %a0, %a1{operand} {attrs} : "
                        f"({ty(a)}, {ty(b)}{operand_type}) -> {ty(ref)}",
                        inputs, [ref.astype(dt)], rtol=1e-4)


def check_reductions(c):
    for dt in FLOATS:
        x = c.rand((2, 3, 4), dt, -10, 10)
        for axis in [0, 1, 2, -1]:
            e = np.exp(x - x.max(axis=axis, keepdims=True))
            softmax = e / e.sum(axis=axis, keepdims=True)
            c.check(f"Softmax {dt.__name__} axis {axis}",
                    f"  %r0 = onnx.Softmax %a0 {{axis = {axis} : i64}} : ({ty(x)}) -> {ty(x)}",
                    [x], [softmax.astype(dt)])
            c.check(f"LogSoftmax {dt.__name__} axis {axis}",
                    f"  %r0 = onnx.LogSoftmax %a0 {{axis = {axis} : i64}} : ({ty(x)}) -> {ty(x)}",
                    [x], [np.log(softmax).astype(dt)], atol=1e-5)
    for dt in FLOATS + [np.int64, np.int32]:
        x = c.rand((2, 3, 4), dt, -10, 10)
        for axes in [(0,), (1,), (2,), (0, 2), (-1, 0), (0, 1, 2)]:
            for keep in [0, 1]:
                ref = x.sum(axis=axes, keepdims=bool(keep)).astype(dt)
                c.check(f"ReduceSum {dt.__name__} {axes} keepdims={keep}",
                        const_i64("axes", axes) +
                        f"  %r0 = onnx.ReduceSum %a0, %axes {{keepdims = {keep} : i64}} : "
                        f"({ty(x)}, tensor<{len(axes)}xi64>) -> {ty(ref)}", [x], [ref])
                for op, reduce in {"ReduceMax": x.max, "ReduceMin": x.min}.items():
                    ref = reduce(axis=axes, keepdims=bool(keep)).astype(dt)
                    c.check(f"{op} {dt.__name__} {axes} keepdims={keep}",
                            f"  %r0 = onnx.{op} %a0 {{axes = {arr(axes)}, keepdims = {keep} : i64}} : "
                            f"({ty(x)}) -> {ty(ref)}", [x], [ref])
                if dt in FLOATS:
                    ref = x.mean(axis=axes, keepdims=bool(keep)).astype(dt)
                    c.check(f"ReduceMean {dt.__name__} {axes} keepdims={keep}",
                            f"  %r0 = onnx.ReduceMean %a0 {{axes = {arr(axes)}, keepdims = {keep} : i64}} : "
                            f"({ty(x)}) -> {ty(ref)}", [x], [ref])
    for dt in FLOATS:
        x = c.rand((2, 3, 4, 5), dt, -10, 10)
        pooled = tensor_type((2, 3, 1, 1), dt)
        c.check(f"GlobalAveragePool {dt.__name__}",
                f"  %r0 = onnx.GlobalAveragePool %a0 : ({ty(x)}) -> {pooled}",
                [x], [x.mean(axis=(2, 3), keepdims=True).astype(dt)])
        c.check(f"GlobalMaxPool {dt.__name__}",
                f"  %r0 = onnx.GlobalMaxPool %a0 : ({ty(x)}) -> {pooled}",
                [x], [x.max(axis=(2, 3), keepdims=True).astype(dt)])


def check_movement(c):
    for dt in MLIR_TYPES:
        x = c.rand((2, 3, 4), dt)
        for perm in itertools.permutations(range(3)):
            ref = np.transpose(x, perm)
            c.check(f"Transpose {dt.__name__} {perm}",
                    f"  %r0 = onnx.Transpose %a0 {{perm = {arr(perm)}}} : ({ty(x)}) -> {ty(ref)}",
                    [x], [ref])
        y = c.rand((2, 2, 4), dt)
        ref = np.concatenate([x, y, x], axis=1)
        c.check(f"Concat {dt.__name__}",
                f"  %r0 = onnx.Concat %a0, %a1, %a0 {{axis = 1 : i64}} : "
                f"({ty(x)}, {ty(y)}, {ty(x)}) -> {ty(ref)}", [x, y], [ref])
        parts = np.split(x, [1, 4], axis=2)
        c.check(f"Split {dt.__name__}",
                const_i64("sizes", [1, 3, 0]) +
                f"  %r0, %r1, %r2 = onnx.Split %a0, %sizes {{axis = 2 : i64}} : "
                f"({ty(x)}, tensor<3xi64>) -> ({', '.join(ty(p) for p in parts)})",
                [x], parts)
        for axis in range(3):
            indices = np.array([[2, -1], [0, 1]], np.int64) % x.shape[axis]
            indices[0, 1] -= x.shape[axis]  # one negative index
            ref = np.take(x, indices % x.shape[axis], axis=axis)
            c.check(f"Gather {dt.__name__} axis {axis}",
                    f"  %r0 = onnx.Gather %a0, %a1 {{axis = {axis} : i64}} : "
                    f"({ty(x)}, {ty(indices)}) -> {ty(ref)}", [x, indices], [ref])
        ref = x[::-1, 1:3, ::2]
        c.check(f"Slice {dt.__name__}",
                const_i64("starts", [-1, 1, 0]) + const_i64("ends", [-10, 3, 100]) +
                const_i64("steps", [-1, 1, 2]) +
                f"  %r0 = onnx.Slice %a0, %starts, %ends steps %steps : ({ty(x)}, "
                f"tensor<3xi64>, tensor<3xi64>, tensor<3xi64>) -> {ty(ref)}", [x], [ref])
        ref = x[:, 2:0:-1, 3:4]
        c.check(f"Slice axes {dt.__name__}",
                const_i64("starts", [3, 2]) + const_i64("ends", [4, 0]) +
                const_i64("axes", [-1, 1]) + const_i64("steps", [1, -1]) +
                f"  %r0 = onnx.Slice %a0, %starts, %ends axes %axes steps %steps : "
                f"({ty(x)}, tensor<2xi64>, tensor<2xi64>, tensor<2xi64>, tensor<2xi64>) "
                f"-> {ty(ref)}", [x], [ref])
        z = c.rand((3, 1), dt)
        ref = np.broadcast_to(z, (2, 3, 5)).copy()
        c.check(f"Expand {dt.__name__}",
                const_i64("shape", [2, 1, 5]) +
                f"  %r0 = onnx.Expand %a0, %shape : ({ty(z)}, tensor<3xi64>) -> {ty(ref)}",
                [z], [ref])
        ref = x.reshape(4, 6)
        c.check(f"Reshape {dt.__name__}",
                const_i64("shape", [4, -1]) +
                f"  %r0 = onnx.Reshape %a0, %shape : ({ty(x)}, tensor<2xi64>) -> {ty(ref)}",
                [x], [ref])
        ref = x.reshape(2, 1, 3, 4, 1)
        c.check(f"Unsqueeze {dt.__name__}",
                const_i64("axes", [1, -1]) +
                f"  %r0 = onnx.Unsqueeze %a0, %axes : ({ty(x)}, tensor<2xi64>) -> {ty(ref)}",
                [x], [ref])
        c.check(f"Squeeze {dt.__name__}",
                const_i64("axes", [1, -1]) +
                f"  %r0 = onnx.Squeeze %a0, %axes : ({ty(ref)}, tensor<2xi64>) -> {ty(x)}",
                [ref], [x])
        c.check(f"Flatten {dt.__name__}",
                f"  %r0 = onnx.Flatten %a0 {{axis = 2 : i64}} : ({ty(x)}) -> "
                f"{tensor_type((6, 4), dt)}", [x], [x.reshape(6, 4)])
    c.check("ConstantOfShape i64",
            const_i64("shape", [2, 3]) +
            "  %r0 = onnx.ConstantOfShape %shape {value = dense<9223372036854775807> : "
            "tensor<1xi64>} : (tensor<2xi64>) -> tensor<2x3xi64>",
            [], [np.full((2, 3), 2**63 - 1, np.int64)])
    c.check("ConstantOfShape default",
            const_i64("shape", [2]) +
            "  %r0 = onnx.ConstantOfShape %shape : (tensor<1xi64>) -> tensor<2xf32>",
            [], [np.zeros(2, np.float32)])


def numpy_pad(x, pads, mode, value=0):
    """ONNX Pad: numpy.pad by the positive pads, then a crop by the negative
    ones."""
    rank = x.ndim
    widths = [(max(pads[d], 0), max(pads[d + rank], 0)) for d in range(rank)]
    kwargs = {"constant_values": value} if mode == "constant" else {}
    y = np.pad(x, widths, mode=mode, **kwargs)
    crop = tuple(slice(-min(pads[d], 0), y.shape[d] + min(pads[d + rank], 0))
                 for d in range(rank))
    return y[crop]


def check_pad(c):
    scalar = {np.bool_: "true"}
    for dt in MLIR_TYPES:
        x = c.rand((2, 3, 4), dt)
        value = scalar.get(dt, "7" if np.issubdtype(dt, np.integer) else "2.5")
        fill = {"true": True, "7": 7, "2.5": 2.5}[value]
        for mode, pads in [("constant", [0, 1, 2, 1, 0, 3]),
                           ("constant", [-1, 2, -1, 1, 0, -2]),
                           ("reflect", [1, 2, 3, 0, 2, 3]),
                           ("reflect", [0, -1, 5, 1, 1, -2]),
                           ("edge", [1, 0, 2, 2, 3, 1]),
                           ("edge", [0, 2, -3, 0, -1, 1])]:
            ref = numpy_pad(x, pads, mode, fill)
            operand = "value %v " if mode == "constant" else ""
            types = f"{ty(x)}, tensor<6xi64>" + (
                f", {tensor_type((), dt)}" if mode == "constant" else "")
            c.check(f"Pad {mode} {dt.__name__} {pads}",
                    const_i64("pads", pads) +
                    f"  %v = onnx.Constant dense<{value}> : {tensor_type((), dt)}\n"
                    f"  %r0 = onnx.Pad %a0, %pads {operand}{{mode = \"{mode}\"}} : "
                    f"({types}) -> {ty(ref)}", [x], [ref])
    # Opset 18's axes: pads of the named (possibly negative) axes only.
    x = c.rand((2, 3, 4), np.float32)
    ref = numpy_pad(x, [0, 0, 2, 0, 0, 1], "reflect")
    c.check("Pad axes",
            const_i64("pads", [2, 0, 1, 0]) + const_i64("axes", [-1, 1]) +
            f"  %r0 = onnx.Pad %a0, %pads axes %axes {{mode = \"reflect\"}} : "
            f"({ty(x)}, tensor<4xi64>, tensor<2xi64>) -> {ty(ref)}", [x], [ref])
    # Default: constant 0.
    ref = numpy_pad(x, [1, 0, 0, 0, 0, 1], "constant")
    c.check("Pad default",
            const_i64("pads", [1, 0, 0, 0, 0, 1]) +
            f"  %r0 = onnx.Pad %a0, %pads : ({ty(x)}, tensor<6xi64>) -> {ty(ref)}",
            [x], [ref])


def check_normalization(c):
    for dt in FLOATS:
        x = c.rand((2, 3, 4), dt)
        for axis in [-1, 1, 0]:
            first = axis % 3
            axes = tuple(range(first, 3))
            mean = x.mean(axis=axes, keepdims=True)
            inv_std = 1 / np.sqrt(x.var(axis=axes, keepdims=True) + 1e-5)
            scale, bias = c.rand(x.shape[first:], dt), c.rand(x.shape[first:], dt)
            y = (x - mean) * inv_std * scale + bias
            stats = tensor_type(mean.shape, np.float32)  # stash_type 1
            c.check(f"LayerNormalization {dt.__name__} axis {axis}",
                    f"  %r0, %r1, %r2 = onnx.LayerNormalization %a0, %a1, %a2 {{axis = {axis} : i64}} : "
                    f"({ty(x)}, {ty(scale)}, {ty(bias)}) -> ({ty(x)}, {stats}, {stats})",
                    [x, scale, bias],
                    [y.astype(dt), mean.astype(np.float32), inv_std.astype(np.float32)],
                    rtol=1e-4)
        x = c.rand((4, 3, 2, 2), dt)
        scale, bias, mean = (c.rand((3,), dt) for _ in range(3))
        var = c.rand((3,), dt, 0.5, 2)
        types = f"({ty(x)}, {ty(scale)}, {ty(scale)}, {ty(scale)}, {ty(scale)}) -> ({ty(x)}, {ty(scale)}, {ty(scale)})"
        y = ((x - mean[:, None, None]) / np.sqrt(var[:, None, None] + 1e-5)
             * scale[:, None, None] + bias[:, None, None])
        c.check(f"BatchNormalization {dt.__name__}",
                f"  %r0, %r1, %r2 = onnx.BatchNormalization %a0, %a1, %a2, %a3, %a4 : {types}",
                [x, scale, bias, mean, var], [y.astype(dt), mean, var], rtol=1e-4)
        # Training mode against torch (momentum 0.9 in ONNX is 0.1 in torch),
        # whose running variance takes the unbiased batch variance.
        running_mean, running_var = torch.tensor(mean), torch.tensor(var)
        y = F.batch_norm(torch.tensor(x), running_mean, running_var,
                         torch.tensor(scale), torch.tensor(bias), training=True,
                         momentum=0.1, eps=1e-5).numpy()
        c.check(f"BatchNormalization training unbiased {dt.__name__}",
                f"  %r0, %r1, %r2 = onnx.BatchNormalization %a0, %a1, %a2, %a3, %a4 "
                f"{{training_mode = 1 : i64, unbiased_running_var}} : {types}",
                [x, scale, bias, mean, var],
                [y, running_mean.numpy(), running_var.numpy()], rtol=1e-4)
        # ONNX's reference takes the biased one.
        axes = (0, 2, 3)
        biased_var = var * 0.9 + x.var(axis=axes) * 0.1
        c.check(f"BatchNormalization training {dt.__name__}",
                f"  %r0, %r1, %r2 = onnx.BatchNormalization %a0, %a1, %a2, %a3, %a4 "
                f"{{training_mode = 1 : i64}} : {types}",
                [x, scale, bias, mean, var],
                [y, (mean * 0.9 + x.mean(axis=axes) * 0.1).astype(dt),
                 biased_var.astype(dt)], rtol=1e-4)
    for labels_dt in [np.int64, np.int32]:
        scores = c.rand((4, 5), np.float32)
        labels = c.rng.integers(0, 5, (4,)).astype(labels_dt)
        log_prob = F.log_softmax(torch.tensor(scores), 1)
        loss = F.nll_loss(log_prob, torch.tensor(labels.astype(np.int64))).numpy()
        c.check(f"SoftmaxCrossEntropyLoss labels {labels_dt.__name__}",
                f"  %r0, %r1 = onnx.SoftmaxCrossEntropyLoss %a0, %a1 : ({ty(scores)}, "
                f"{ty(labels)}) -> (tensor<f32>, {ty(scores)})",
                [scores, labels], [loss, log_prob.numpy()])


def check_windows(c):
    for nd in [1, 2, 3]:
        conv = [F.conv1d, F.conv2d, F.conv3d][nd - 1]
        max_pool = [F.max_pool1d, F.max_pool2d, F.max_pool3d][nd - 1]
        avg_pool = [F.avg_pool1d, F.avg_pool2d, F.avg_pool3d][nd - 1]
        spatial, kernel = [7, 6, 5][:nd], [3, 2, 3][:nd]
        for group, dilation, stride, pad in [(1, 1, 1, 0), (2, 2, 2, 1),
                                             (3, 1, 3, 2), (1, 2, 1, 3)]:
            for dt in FLOATS:
                x = c.rand([2, 2 * group] + spatial, dt)
                w = c.rand([2 * group, 2] + kernel, dt)
                b = c.rand([2 * group], dt)
                ref = conv(torch.tensor(x), torch.tensor(w), torch.tensor(b),
                           stride=stride, padding=pad, dilation=dilation,
                           groups=group).numpy()
                attrs = (f"{{dilations = {arr([dilation] * nd)}, group = {group} : i64, "
                         f"kernel_shape = {arr(kernel)}, pads = {arr([pad] * 2 * nd)}, "
                         f"strides = {arr([stride] * nd)}}}")
                c.check(f"Conv {nd}-d group={group} dilation={dilation} "
                        f"stride={stride} pad={pad} {dt.__name__}",
                        f"  %r0 = onnx.Conv %a0, %a1, %a2 {attrs} : ({ty(x)}, {ty(w)}, "
                        f"{ty(b)}) -> {ty(ref)}", [x, w, b], [ref], rtol=1e-4, atol=1e-5)
            pool_spatial = [9, 8, 7][:nd]
            pad = min(pad, 1)
            dilation = dilation if nd < 3 else 1
            x = c.rand([2, 3] + pool_spatial, np.float32)
            for ceil in [0, 1]:
                y, indices = max_pool(torch.tensor(x), kernel, stride=stride,
                                      padding=pad, dilation=dilation,
                                      ceil_mode=bool(ceil), return_indices=True)
                # torch's indices count within an (n, c) plane, ONNX's over NC...
                plane = int(np.prod(pool_spatial))
                offsets = np.arange(6).reshape(2, 3, *([1] * nd)) * plane
                attrs = (f"{{ceil_mode = {ceil} : i64, dilations = {arr([dilation] * nd)}, "
                         f"kernel_shape = {arr(kernel)}, pads = {arr([pad] * 2 * nd)}, "
                         f"strides = {arr([stride] * nd)}}}")
                c.check(f"MaxPool {nd}-d stride={stride} pad={pad} "
                        f"dilation={dilation} ceil={ceil}",
                        f"  %r0, %r1 = onnx.MaxPool %a0 {attrs} : ({ty(x)}) -> "
                        f"({ty(y.numpy())}, {tensor_type(y.shape, np.int64)})",
                        [x], [y.numpy(), indices.numpy() + offsets])
                for include_pad in [0, 1]:
                    y = avg_pool(torch.tensor(x), kernel, stride=stride, padding=pad,
                                 ceil_mode=bool(ceil),
                                 count_include_pad=bool(include_pad)).numpy()
                    attrs = (f"{{ceil_mode = {ceil} : i64, count_include_pad = "
                             f"{include_pad} : i64, kernel_shape = {arr(kernel)}, "
                             f"pads = {arr([pad] * 2 * nd)}, strides = {arr([stride] * nd)}}}")
                    c.check(f"AveragePool {nd}-d stride={stride} pad={pad} "
                            f"ceil={ceil} count_include_pad={include_pad}",
                            f"  %r0 = onnx.AveragePool %a0 {attrs} : ({ty(x)}) -> {ty(y)}",
                            [x], [y])
    x = c.rng.integers(0, 256, (1, 2, 5, 5)).astype(np.uint8)
    y, indices = F.max_pool2d(torch.tensor(x.astype(np.float32)), 2, stride=2,
                              return_indices=True)
    c.check("MaxPool u8",
            "  %r0, %r1 = onnx.MaxPool %a0 {kernel_shape = array<i64: 2, 2>, strides = "
            f"array<i64: 2, 2>}} : ({ty(x)}) -> ({tensor_type((1, 2, 2, 2), np.uint8)}, "
            f"{tensor_type((1, 2, 2, 2), np.int64)})",
            [x], [y.numpy().astype(np.uint8),
                  indices.numpy() + np.arange(2).reshape(1, 2, 1, 1) * 25])


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pp-interpret", required=True)
    args = parser.parse_args()
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory(prefix="pp-op-checks-") as work_dir:
        c = Checker(args.pp_interpret, work_dir)
        for group in [check_elementwise, check_contractions, check_reductions,
                      check_movement, check_pad, check_normalization,
                      check_windows]:
            group(c)
    for name, problem in c.failures:
        print(f"FAIL {name}: {problem}")
    print(f"checked {c.count} cases, {len(c.failures)} failed")
    return 1 if c.failures else 0


if __name__ == "__main__":
    sys.exit(main())
