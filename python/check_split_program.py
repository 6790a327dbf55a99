"""Checks that a generated program split into parts and translation units
computes exactly what the one-unit program computes.

For one test model: compiles it twice with --pp-compile ... emit-dir=, once
with small budgets (emit-function-ops, emit-tu-bytes) and once unsplit
(both 0), and checks that
  - the split program has several translation units (CMakeLists.txt lists
    them), none above the byte budget unless it holds a single function,
    and its stage functions were cut into parts; the unsplit one is one;
  - both build (CMake + Ninja) and train --steps steps on the same data
    with losses and final globals equal bit for bit (same machine, same
    kernels: only the layout of the C++ differs);
  - the weights are on disk once: the build directory's program.data and
    model.onnx are links to the program directory's files, model.onnx a
    hard link to the exported model;
  - --save-onnx refuses a source model overwritten since the compile.
Prints what it found, one fact a line; exits non-zero on a failure.
"""
import argparse
import json
import os
import re
import subprocess
import sys

import numpy as np

from check_generated import build
from check_pipeline import compile_pipeline, data_flags, export_micro_and_whole
from compare import load_globals, run


def units_of(program):
    """The translation units CMakeLists.txt builds."""
    text = open(os.path.join(program, "CMakeLists.txt")).read()
    sources = re.search(r"set\(PP_SOURCES([^)]*)\)", text).group(1)
    return sources.split()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--work", required=True, help="scratch directory")
    parser.add_argument("--pipeline-opt", default="pipeline-opt")
    parser.add_argument("--schedule", default="1f1b")
    parser.add_argument("--devices", type=int, default=2)
    parser.add_argument("--microbatches", type=int, default=2)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--function-ops", type=int, default=40)
    parser.add_argument("--tu-bytes", type=int, default=20000)
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    micro_dir, whole_dir = export_micro_and_whole(
        args.model, args.work, 2, args.microbatches)
    model = os.path.join(micro_dir, "model.onnx")
    failures = []

    results = {}
    for name, ops, tu in (("split", args.function_ops, args.tu_bytes),
                          ("unsplit", 0, 0)):
        program = os.path.join(args.work, name)
        summary = os.path.join(args.work, name + ".summary")
        mlir = compile_pipeline(
            args.pipeline_opt, model, args.work, name, args.schedule,
            args.devices, "none", args.microbatches, "lr=0.05",
            f" report={summary} emit-dir={program} emit-function-ops={ops} "
            f"emit-tu-bytes={tu}")
        units = units_of(program)
        sizes = [os.path.getsize(os.path.join(program, u)) for u in units]
        code = "".join(open(os.path.join(program, u)).read() for u in units)
        parts = len(re.findall(r"^void \w+_part\d+\(", code, re.M))
        print(f"{name}: {len(units)} translation units, {parts} parts")
        if name == "split":
            if len(units) < 2 or parts < 2:
                failures.append("the split program is not split")
            for unit, size in zip(units, sizes):
                text = open(os.path.join(program, unit)).read()
                functions = len(re.findall(r"^void \w+\(", text, re.M))
                if size > tu and functions > 1:
                    failures.append(f"{unit}: {size} bytes, {functions} "
                                    f"functions, over the budget of {tu}")
            print(f"split: every unit within {tu} bytes or one function: "
                  f"{'no' if failures else 'yes'}")
        elif len(units) != 1 or parts:
            failures.append(f"unsplit: {len(units)} units, {parts} parts")
        summary_text = open(summary).read()
        if f"{len(units)} translation units" not in summary_text:
            failures.append(f"{name}: the summary does not say "
                            f"{len(units)} translation units:\n"
                            f"{summary_text}")

        train = build(program)
        build_dir = os.path.dirname(train)
        for file in ("program.data", "model.onnx"):
            linked = os.path.join(build_dir, file)
            if not (os.path.islink(linked) and os.path.samefile(
                    linked, os.path.join(program, file))):
                failures.append(f"{name}: build/{file} is not a link to "
                                f"the program's {file}")
        if not os.path.samefile(os.path.join(program, "model.onnx"), model):
            failures.append(f"{name}: model.onnx is a copy of the model, "
                            f"not a hard link")
        files = [os.path.join(whole_dir, f)
                 for f in ("input.npy", "labels.npy")]
        log = os.path.join(args.work, name + ".jsonl")
        dump = os.path.join(args.work, name + ".globals")
        if os.path.exists(log):
            os.remove(log)
        run([train, "--local", f"--steps={args.steps}", f"--log={log}",
             f"--dump-globals={dump}"] +
            data_flags(mlir, files))
        results[name] = ([json.loads(line)["loss"] for line in open(log)],
                         load_globals(dump), train)

    (a, ga, train), (b, gb, _) = results["split"], results["unsplit"]
    differ = [k for k in ga if k not in gb or ga[k].shape != gb[k].shape or
              not np.array_equal(ga[k], gb[k])]
    print(f"split vs unsplit: {len(a)} losses "
          f"{'identical' if a == b else 'DIFFER'}, {len(ga)} final globals, "
          f"{len(differ)} differ")
    if a != b or differ or len(ga) != len(gb):
        failures.append(f"split and unsplit differ: {a} vs {b}; {differ}")

    # The program directory's model.onnx is the exported file itself: one
    # overwritten in place since must not be taken for the compiled one.
    with open(model, "ab") as f:
        f.write(b"\0")
    proc = subprocess.run([train, "--local", "--steps=1",
                           f"--save-onnx={os.path.join(args.work, 'x.onnx')}"],
                          capture_output=True, text=True)
    refused = proc.returncode != 0 and "not the one the program was compiled" \
        in proc.stderr
    print(f"--save-onnx with the model overwritten: "
          f"{'refused' if refused else 'NOT REFUSED'}")
    if not refused:
        failures.append(f"--save-onnx: {proc.returncode} {proc.stderr}")
    for failure in failures:
        print("FAIL", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
