#!/usr/bin/env python3
"""Imports ONNX's own test models (Debian's libonnx-testdata) with pipeline-opt.

A model counts as *supported* when every node is a default-domain op that the
onnx dialect defines (read from ONNXOps.td). Each supported model must import
or appear in the expected-failures file with its reason; the script prints
per-directory counts and exits non-zero on an unexpected failure, an
unexpectedly passing listed model, or a crash.
"""
import argparse
import os
import re
import subprocess
import sys

import onnx


# ONNX ops the importer builds from dialect ops (no op of their own):
# lib/Import/ONNX/Einsum.cpp, Decompose.cpp, Recurrent.cpp and the
# importer's Tile.
DECOMPOSED_OPS = {"Einsum", "Tile", "Sum", "Mean", "PRelu", "LessOrEqual",
                  "GreaterOrEqual", "ReduceL1", "ReduceL2", "ReduceSumSquare",
                  "ReduceLogSum", "ReduceLogSumExp", "Resize", "Trilu",
                  "InstanceNormalization", "CastLike", "IsNaN", "IsInf", "Sign",
                  "NegativeLogLikelihoodLoss", "GatherElements", "ArgMax",
                  "ArgMin", "Hardmax", "OneHot", "CumSum", "DepthToSpace",
                  "SpaceToDepth", "Xor", "EyeLike", "Shrink", "Tan", "Sinh",
                  "Cosh", "Asinh", "Acosh", "Atanh", "RNN", "GRU", "LSTM"}


def dialect_ops(td_path):
    text = open(td_path).read()
    ops = set(re.findall(r'^def ONNX_\w+ : ONNX_\w+<"([A-Z]\w*)"', text, re.M))
    return ops | DECOMPOSED_OPS


def load_expected(path):
    expected = {}
    for line in open(path):
        line = line.strip()
        if line and not line.startswith("#"):
            name, _, reason = line.partition(":")
            expected[name.strip()] = reason.strip()
    return expected


def first_error(stderr):
    for line in stderr.splitlines():
        if "error:" in line:
            return line.split("error:", 1)[1].strip()
    return stderr.strip().splitlines()[-1] if stderr.strip() else "no message"


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pipeline-opt", required=True)
    parser.add_argument("--ops-td", required=True)
    parser.add_argument("--expected-failures", required=True)
    parser.add_argument("data_dirs", nargs="+")
    args = parser.parse_args()

    ops = dialect_ops(args.ops_td)
    expected = load_expected(args.expected_failures)
    problems = []
    total_supported = total_imported = 0
    for data_dir in args.data_dirs:
        cases = sorted(d for d in os.listdir(data_dir)
                       if os.path.exists(os.path.join(data_dir, d, "model.onnx")))
        supported = imported = 0
        for case in cases:
            path = os.path.join(data_dir, case, "model.onnx")
            model = onnx.load(path, load_external_data=False)
            if not all(n.domain in ("", "ai.onnx") and n.op_type in ops
                       for n in model.graph.node):
                continue
            supported += 1
            proc = subprocess.run([args.pipeline_opt, path, "-o", os.devnull],
                                  capture_output=True, text=True, timeout=60)
            if proc.returncode not in (0, 1):
                problems.append(f"{case}: CRASH (exit {proc.returncode})")
                continue
            if proc.returncode == 0:
                imported += 1
                if case in expected:
                    problems.append(f"{case}: imports now; remove it from the "
                                    "expected failures")
                continue
            reason = first_error(proc.stderr)
            if case in expected:
                print(f"  expected failure {case}: {reason}")
            else:
                problems.append(f"{case}: {reason}")
        print(f"{os.path.basename(data_dir.rstrip('/'))}: imported {imported} "
              f"of {supported} supported models ({len(cases)} models in all)")
        total_supported += supported
        total_imported += imported
    print(f"total: imported {total_imported} of {total_supported} supported models")
    for problem in problems:
        print("UNEXPECTED", problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
