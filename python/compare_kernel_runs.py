"""Compares two runs of the kernel cross-check (pp-rt-crosscheck-*).

Each run directory holds manifest.txt ("<case> <output> <dtype> <shape>
<file>") and the raw outputs. Float outputs pass when
max|other - reference| <= rtol * max|reference| + atol (python/compare.py);
integer and bool outputs (pool indices, dropout masks) must be identical.
F16 and BF16 outputs (the "f16.*" and "bf16.*" cases) are each rounded once
from a float result; the two backends' float results differ within the F32
tolerance, which can move a rounding by one unit in the last place (2^-7
relative for BF16, 2^-10 for F16), and later kernels of a case read the
rounded values: they pass within --rtol16 (1e-2, above one BF16 ulp) of the
largest reference magnitude.
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
          "bf16": np.uint16, "i64": np.int64, "i32": np.int32, "i8": np.int8,
          "u8": np.uint8, "bool": np.uint8, "u32": np.uint32,
          "u64": np.uint64}


def load(run):
    entries = {}
    for line in open(os.path.join(run, "manifest.txt")):
        case, output, dtype, shape, file = line.split()
        dims = [] if shape == "scalar" else [int(d) for d in shape.split("x")]
        data = np.fromfile(os.path.join(run, file), dtype=DTYPES[dtype])
        if dtype == "bf16":  # the high half of an f32
            data = (data.astype(np.uint32) << 16).view(np.float32)
        entries[(case, output)] = (dtype, data.reshape(dims))
    return entries


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reference", help="run directory (e.g. the CPU)")
    parser.add_argument("other", help="run directory (e.g. the GPU)")
    parser.add_argument("--rtol", type=float, default=1e-4)
    parser.add_argument("--atol", type=float, default=1e-5)
    parser.add_argument("--rtol16", type=float, default=1e-2,
                        help="rtol of F16 and BF16 outputs")
    args = parser.parse_args()
    reference, other = load(args.reference), load(args.other)
    check = Comparison(args.rtol, args.atol)
    check16 = Comparison(args.rtol16, args.atol)
    for key in sorted(set(reference) | set(other)):
        name = "/".join(key)
        if key not in reference or key not in other:
            check.failures.append(f"{name}: only in one run")
            continue
        (dtype, ref), (_, got) = reference[key], other[key]
        if dtype in ("f16", "bf16"):
            check16(name, got, ref)
        elif dtype.startswith("f"):
            check(name, got, ref)
        elif ref.shape != got.shape or not np.array_equal(ref, got):
            check.failures.append(f"{name}: {dtype} values differ")
    print(f"{len(reference)} outputs compared, worst relative error "
          f"{check.worst:.2e} (16-bit outputs: {check16.worst:.2e})")
    check.failures += check16.failures
    for failure in check.failures:
        print("MISMATCH", failure)
    return 1 if check.failures else 0


if __name__ == "__main__":
    sys.exit(main())
