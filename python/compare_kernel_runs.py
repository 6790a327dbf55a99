"""Compares two runs of the kernel cross-check (pp-rt-crosscheck-*).

Each run directory holds manifest.txt ("<case> <output> <dtype> <shape>
<file>") and the raw outputs. Float outputs pass when
max|other - reference| <= rtol * max|reference| + atol (python/compare.py);
integer and bool outputs (pool indices, dropout masks) must be identical.
Prints one line per output and exits non-zero on any mismatch or on an
output missing from either run.
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare import Comparison  # noqa: E402

DTYPES = {"f32": np.float32, "f64": np.float64, "f16": np.float16,
          "i64": np.int64, "i32": np.int32, "i8": np.int8, "u8": np.uint8,
          "bool": np.uint8, "u32": np.uint32, "u64": np.uint64}


def load(run):
    entries = {}
    for line in open(os.path.join(run, "manifest.txt")):
        case, output, dtype, shape, file = line.split()
        dims = [] if shape == "scalar" else [int(d) for d in shape.split("x")]
        data = np.fromfile(os.path.join(run, file), dtype=DTYPES[dtype])
        entries[(case, output)] = (dtype, data.reshape(dims))
    return entries


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reference", help="run directory (e.g. the CPU)")
    parser.add_argument("other", help="run directory (e.g. the GPU)")
    parser.add_argument("--rtol", type=float, default=1e-4)
    parser.add_argument("--atol", type=float, default=1e-5)
    args = parser.parse_args()
    reference, other = load(args.reference), load(args.other)
    check = Comparison(args.rtol, args.atol)
    for key in sorted(set(reference) | set(other)):
        name = "/".join(key)
        if key not in reference or key not in other:
            check.failures.append(f"{name}: only in one run")
            continue
        (dtype, ref), (_, got) = reference[key], other[key]
        if dtype.startswith("f"):
            check(name, got, ref)
        elif ref.shape != got.shape or not np.array_equal(ref, got):
            check.failures.append(f"{name}: {dtype} values differ")
    print(f"{len(reference)} outputs compared, worst relative error "
          f"{check.worst:.2e}")
    for failure in check.failures:
        print("MISMATCH", failure)
    return 1 if check.failures else 0


if __name__ == "__main__":
    sys.exit(main())
