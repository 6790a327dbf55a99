"""Bit-for-bit comparison of two runs of check_generated.py.

  compare_generated_runs.py OLD_OUTPUT_DIR NEW_OUTPUT_DIR

Each directory holds the work directories of generated-programs.test
(build/test/Target/Program/Output); for every configuration, the losses of
its --log (JSON lines) and every final global it dumped (--dump-globals)
must be equal exactly. For refactors that must not change what generated
programs compute: run both sides on one machine with one OpenBLAS kernel
(e.g. OPENBLAS_CORETYPE=Haswell). Exits non-zero on a difference.
"""
import glob
import json
import os
import sys

import numpy as np


def main():
    old, new = sys.argv[1], sys.argv[2]
    configs = same = 0
    for path in sorted(glob.glob(os.path.join(old, "*", "*.jsonl"))):
        rel = os.path.relpath(path, old)
        other = os.path.join(new, rel)
        if not os.path.exists(other):
            print(f"{rel}: missing in {new}")
            configs += 1
            continue
        a = [json.loads(line)["loss"] for line in open(path)]
        b = [json.loads(line)["loss"] for line in open(other)]
        tensors = differ = 0
        dumped = path[:-len(".jsonl")] + ".generated"
        for f in sorted(glob.glob(os.path.join(dumped, "*.npy"))):
            g = os.path.join(other[:-len(".jsonl")] + ".generated",
                             os.path.basename(f))
            x = np.load(f)
            y = np.load(g) if os.path.exists(g) else None
            tensors += 1
            differ += y is None or not (x.shape == y.shape and
                                        np.array_equal(x, y))
        configs += 1
        same += a == b and differ == 0
        print(f"{rel}: {len(a)} losses {'identical' if a == b else 'DIFFER'}; "
              f"{tensors} final globals, {differ} differ")
    print(f"{same} of {configs} configurations bit-identical")
    return 0 if configs and same == configs else 1


if __name__ == "__main__":
    sys.exit(main())
