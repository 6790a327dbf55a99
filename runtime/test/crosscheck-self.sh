#!/bin/sh
# The kernel cross-check harness on the CPU: it runs every case, the
# comparison accepts an identical run and rejects one with a single float
# changed by 1% (so a GPU run that differs would be caught).
set -e
check=$1; python=$2; compare=$3
work=$(mktemp -d)
mkdir -p "$work/a"
"$check" "$work/a"
cp -r "$work/a" "$work/b"
"$python" "$compare" "$work/a" "$work/b"
"$python" - "$work/b/conv_and_grads.dw.bin" <<'PY'
import sys, numpy as np
a = np.fromfile(sys.argv[1], np.float32); a[5] *= 1.01; a.tofile(sys.argv[1])
PY
if "$python" "$compare" "$work/a" "$work/b"; then
  echo "FAIL: a changed output was accepted"; exit 1
fi
# A BF16 output changed by 5% (past the 16-bit tolerance) is rejected too.
cp "$work/a/conv_and_grads.dw.bin" "$work/b/conv_and_grads.dw.bin"
"$python" - "$work/b/bf16.conv_and_grads.dw.bin" <<'PY'
import sys, numpy as np
bits = np.fromfile(sys.argv[1], np.uint16)
a = (bits.astype(np.uint32) << 16).view(np.float32)
k = int(np.argmax(np.abs(a))); a[k] *= 1.05
(a.view(np.uint32) >> 16).astype(np.uint16).tofile(sys.argv[1])
PY
if "$python" "$compare" "$work/a" "$work/b"; then
  echo "FAIL: a changed BF16 output was accepted"; exit 1
fi
rm -rf "$work"
echo "PASS"
