#!/usr/bin/env python3
"""Runs ONNX's own test cases (Debian's libonnx-testdata) on pp-interpret.

Every case directory holds model.onnx and test_data_set_*/ with input_*.pb
and output_*.pb TensorProtos. For each data set the inputs are converted to
.npy, pp-interpret imports and runs the model, and its outputs are compared
with the expected ones as ONNX's backend test runner does: same dtype and
shape, numpy.testing.assert_allclose with rtol=1e-3, atol=1e-7 (unless the
case needs otherwise, see TOLERANCES). numpy has no bfloat16: values of
bfloat16 graph inputs are passed as their bits in 2-byte void arrays (which
pp-interpret reads as bf16, and writes bf16 outputs as), and bfloat16
outputs are compared as float32 values.

A case is *not supported* when one of its nodes is not an op of the onnx
dialect (read from ONNXOps.td) or when the importer is known not to import it
(the importer's expected-failures file). Every supported case must pass or be
listed, with the reason, in the conformance expected-failures file. The
script prints per-directory counts and exits non-zero on an unexpected
failure, a listed case that passes now, or a crash.
"""
import argparse
import concurrent.futures
import glob
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper

# The ops the dialect has and those the importer decomposes (one list).
from onnx_testdata_coverage import dialect_ops

# Cases whose reference outputs need a looser comparison than ONNX's default,
# with the reason. (None so far.)
TOLERANCES = {}
DEFAULT_RTOL, DEFAULT_ATOL = 1e-3, 1e-7




def load_list(path):
    entries = {}
    for line in open(path):
        line = line.strip()
        if line and not line.startswith("#"):
            name, _, reason = line.partition(":")
            entries[name.strip()] = reason.strip()
    return entries


def first_error(stderr):
    for line in stderr.splitlines():
        if "error:" in line:
            return line.split("error:", 1)[1].strip()
    lines = stderr.strip().splitlines()
    return lines[-1] if lines else "no message"


def read_tensor(path):
    tensor = onnx.TensorProto()
    with open(path, "rb") as f:
        tensor.ParseFromString(f.read())
    return tensor


def bfloat16_bits(array):
    """The uint16 bits of bfloat16 data given as its bits (uint16: how ONNX's
    test data stores it) or as its values (float32 or ml_dtypes.bfloat16:
    what numpy_helper makes of a BFLOAT16 tensor)."""
    if array.dtype == np.uint16:
        return array
    wide = np.asarray(array, dtype=np.float32)
    # (Flattened: numpy cannot change the itemsize of a 0-d array's view.)
    bits = (wide.reshape(-1).view(np.uint32) >> 16).astype(np.uint16)
    return bits.reshape(wide.shape)


def bfloat16_to_float32(bits):
    """The float32 values of bfloat16 bits (uint16)."""
    wide = bits.reshape(-1).astype(np.uint32) << 16
    return wide.view(np.float32).reshape(bits.shape)


def is_bfloat16(value_info):
    return value_info.type.tensor_type.elem_type == onnx.TensorProto.BFLOAT16


def declared_shape(value_info):
    """The static shape a graph input declares, or None."""
    tensor_type = value_info.type.tensor_type
    if not tensor_type.HasField("shape"):
        return None
    dims = tensor_type.shape.dim
    if not all(d.HasField("dim_value") for d in dims):
        return None
    return tuple(d.dim_value for d in dims)


def names_read(graph):
    """Every value name a node of `graph` or of its sub-graphs reads, and the
    graph's outputs."""
    names = {o.name for o in graph.output}
    for node in graph.node:
        names.update(node.input)
        for attr in node.attribute:
            for sub in list(attr.graphs) + ([attr.g] if attr.HasField("g")
                                            else []):
                names |= names_read(sub)
    return names


def compare(index, actual, expected, rtol, atol):
    """None when `actual` matches `expected`, else what differs."""
    if actual.dtype != expected.dtype:
        return f"output {index}: dtype {actual.dtype}, expected {expected.dtype}"
    if actual.shape != expected.shape:
        return f"output {index}: shape {actual.shape}, expected {expected.shape}"
    try:
        np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol)
    except AssertionError:
        bad = ~np.isclose(actual, expected, rtol=rtol, atol=atol,
                          equal_nan=True)
        where = np.argwhere(bad)
        first = tuple(where[0]) if len(where) else ()
        return (f"output {index}: {int(bad.sum())} of {actual.size} values "
                f"differ, first at {list(map(int, first))}: "
                f"{actual[first]!r} vs expected {expected[first]!r}")
    return None


def run_data_set(args, model, model_path, data_set, work_dir, rtol, atol):
    """None when the data set passes, else (reason, crashed)."""
    initializers = {init.name for init in model.graph.initializer}
    graph_inputs = list(model.graph.input)
    read = names_read(model.graph)
    input_flags = []
    input_files = sorted(glob.glob(os.path.join(data_set, "input_*.pb")),
                         key=lambda p: int(re.findall(r"(\d+)\.pb$", p)[0]))
    for i, path in enumerate(input_files):
        # Data set inputs follow the order of the graph's inputs.
        if i >= len(graph_inputs):
            return f"input_{i}.pb has no graph input", False
        name = graph_inputs[i].name
        if name in initializers:
            return (f"input '{name}' overrides an initializer (imported as a "
                    "global)"), False
        array = numpy_helper.to_array(read_tensor(path))
        shape = declared_shape(graph_inputs[i])
        if name not in read and shape is not None and array.shape != shape:
            # No node reads the input, so its value cannot matter, and some
            # data sets contradict its declared shape (the 'like' input of
            # the castlike BFLOAT16 expanded cases: [1] for a 3x4 input).
            array = np.zeros(shape, dtype=array.dtype)
        if is_bfloat16(graph_inputs[i]):
            array = bfloat16_bits(array).view("V2")
        npy = os.path.join(work_dir, f"input_{i}.npy")
        # (np.ascontiguousarray would make a 0-d array 1-d.)
        np.save(npy, array.copy(order="C"))
        input_flags.append(f"--input={name}={npy}")
    out_dir = os.path.join(work_dir, "out")
    cmd = [args.pp_interpret, model_path, f"--output-dir={out_dir}"]
    cmd += input_flags
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True,
                              timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return f"timeout after {args.timeout}s", True
    if proc.returncode not in (0, 1):
        return f"CRASH (exit {proc.returncode}): {first_error(proc.stderr)}", True
    if proc.returncode != 0:
        return first_error(proc.stderr).replace(work_dir, "<tmp>"), False
    outputs = {}
    for line in proc.stdout.splitlines():
        m = re.match(r"output (\d+) .* -> (.*)$", line)
        if m:
            outputs[int(m.group(1))] = m.group(2)
    expected_files = glob.glob(os.path.join(data_set, "output_*.pb"))
    for i in range(len(expected_files)):
        expected = numpy_helper.to_array(
            read_tensor(os.path.join(data_set, f"output_{i}.pb")))
        if i not in outputs:
            return f"output {i} missing", False
        actual = np.load(outputs[i])
        if i < len(model.graph.output) and is_bfloat16(model.graph.output[i]):
            if actual.dtype != np.dtype("V2"):
                return (f"output {i}: dtype {actual.dtype}, expected bfloat16 "
                        "(2-byte void)"), False
            actual = bfloat16_to_float32(actual.view(np.uint16))
            expected = bfloat16_to_float32(bfloat16_bits(expected))
        problem = compare(i, actual, expected, rtol, atol)
        if problem:
            return problem, False
    return None


def run_case(args, case_dir):
    """(status, reason): status is 'pass', 'fail' or 'crash'."""
    model_path = os.path.join(case_dir, "model.onnx")
    model = onnx.load(model_path, load_external_data=False)
    rtol, atol = TOLERANCES.get(os.path.basename(case_dir),
                                (DEFAULT_RTOL, DEFAULT_ATOL))[:2]
    data_sets = sorted(glob.glob(os.path.join(case_dir, "test_data_set_*")))
    if not data_sets:
        return "fail", "no test data set"
    for data_set in data_sets:
        with tempfile.TemporaryDirectory(prefix="pp-conf-") as work_dir:
            result = run_data_set(args, model, model_path, data_set, work_dir,
                                  rtol, atol)
        if result:
            reason, crashed = result
            where = os.path.basename(data_set)
            return ("crash" if crashed else "fail"), f"{where}: {reason}"
    return "pass", ""


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pp-interpret", required=True)
    parser.add_argument("--ops-td", required=True)
    parser.add_argument("--import-failures", required=True,
                        help="the importer's expected-failures file")
    parser.add_argument("--expected-failures", required=True)
    parser.add_argument("--filter", default="",
                        help="only cases whose name matches this regex")
    parser.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--timeout", type=int, default=300)
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="print every case's result")
    parser.add_argument("data_dirs", nargs="+")
    args = parser.parse_args()

    ops = dialect_ops(args.ops_td)
    import_failures = load_list(args.import_failures)
    expected = load_list(args.expected_failures)
    problems = []
    totals = [0, 0, 0]  # passed, supported, not supported
    for data_dir in args.data_dirs:
        cases = sorted(d for d in os.listdir(data_dir)
                       if os.path.exists(os.path.join(data_dir, d, "model.onnx"))
                       and re.search(args.filter, d))
        runnable = []
        unsupported_ops = no_import = 0
        for case in cases:
            model = onnx.load(os.path.join(data_dir, case, "model.onnx"),
                              load_external_data=False)
            if not all(n.domain in ("", "ai.onnx") and n.op_type in ops
                       for n in model.graph.node):
                unsupported_ops += 1
            elif case in import_failures:
                no_import += 1
            else:
                runnable.append(case)
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            results = list(pool.map(
                lambda c: run_case(args, os.path.join(data_dir, c)), runnable))
        passed = 0
        for case, (status, reason) in zip(runnable, results):
            if args.verbose:
                print(f"  {status.upper()} {case}" + (f": {reason}" if reason else ""))
            if status == "pass":
                passed += 1
                if case in expected:
                    problems.append(f"{case}: passes now; remove it from the "
                                    "expected failures")
            elif status == "crash":
                problems.append(f"{case}: {reason}")
            elif case in expected:
                print(f"  expected failure {case}: {reason}")
            else:
                problems.append(f"{case}: {reason}")
        name = os.path.basename(data_dir.rstrip("/"))
        print(f"{name}: passed {passed} of {len(runnable)} supported cases "
              f"({unsupported_ops + no_import} not supported: "
              f"{unsupported_ops} with ops outside the dialect, "
              f"{no_import} that do not import)")
        totals[0] += passed
        totals[1] += len(runnable)
        totals[2] += unsupported_ops + no_import
    print(f"total: passed {totals[0]} of {totals[1]} supported cases "
          f"({totals[2]} not supported)")
    for problem in problems:
        print("UNEXPECTED", problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
