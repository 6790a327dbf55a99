#!/usr/bin/python3
"""Times the runtime's batch and layer normalisation kernels against PyTorch's.

Builds bench/norm_kernels.cpp against the runtime library of `--build`, then
runs it and PyTorch's native_batch_norm / native_layer_norm (forward and
backward, training mode, float32, the same shapes and thread count)
alternately, `--rounds` times each; each run prints the median of `--reps`
calls per kernel and shape. Prints the median over the rounds of both and
their ratio (runtime / PyTorch: below 1 is faster).

Run with Debian's interpreter (it has torch): /usr/bin/python3.
"""

import argparse
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.abspath(__file__)) + "/.."

TORCH = r"""
import math, sys, time, torch
torch.set_num_threads(int(sys.argv[1]))
reps = int(sys.argv[2])

def med(f):
    f()
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        f()
        ts.append((time.perf_counter() - t) * 1e3)
    return sorted(ts)[len(ts) // 2]

def filled(shape, off):  # the values norm_kernels.cpp uses
    i = torch.arange(math.prod(shape), dtype=torch.float32)
    return (off + torch.sin(0.37 * i) + 0.25 * torch.cos(i)).reshape(shape)

for shape in [(8, 64, 112, 112), (8, 256, 56, 56), (16, 128, 16, 16),
              (8, 768, 7, 7)]:
    c = shape[1]
    x, dy = filled(shape, 0.5), filled(shape, -0.1)
    w, b = torch.full((c,), 1.5), torch.full((c,), 0.1)
    rm, rv = torch.zeros(c), torch.ones(c)
    bn = torch.ops.aten.native_batch_norm
    out = bn(x, w, b, rm, rv, True, 0.1, 1e-5)
    fwd = med(lambda: bn(x, w, b, rm, rv, True, 0.1, 1e-5))
    bwd = med(lambda: torch.ops.aten.native_batch_norm_backward(
        dy, x, w, rm, rv, out[1], out[2], True, 1e-5, [True, True, True]))
    print("batchnorm %s fwd %.3f bwd %.3f" % ("x".join(map(str, shape)),
                                               fwd, bwd))
for rows, cols in [(25088, 64), (512, 768), (400, 768), (1024, 96)]:
    x, dy = filled((rows, cols), 3.0), filled((rows, cols), -0.1)
    w, b = torch.full((cols,), 1.5), torch.full((cols,), 0.1)
    ln = torch.ops.aten.native_layer_norm
    out = ln(x, [cols], w, b, 1e-5)
    fwd = med(lambda: ln(x, [cols], w, b, 1e-5))
    bwd = med(lambda: torch.ops.aten.native_layer_norm_backward(
        dy, x, [cols], out[1], out[2], w, b, [True, True, True]))
    print("layernorm %dx%d fwd %.3f bwd %.3f" % (rows, cols, fwd, bwd))
"""


def parse(text):
    """{(kernel, shape, direction): ms} from lines 'kernel shape fwd F bwd B'."""
    times = {}
    for line in text.splitlines():
        kernel, shape, _, fwd, _, bwd = line.split()
        times[(kernel, shape, "fwd")] = float(fwd)
        times[(kernel, shape, "bwd")] = float(bwd)
    return times


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--reps", type=int, default=9)
    parser.add_argument("--work", default="/tmp/pp-norm-kernels")
    args = parser.parse_args()

    os.makedirs(args.work, exist_ok=True)
    binary = os.path.join(args.work, "norm_kernels")
    subprocess.run(["g++", "-O2", "-std=c++17",
                    "-I" + os.path.join(ROOT, "runtime/include"),
                    os.path.join(ROOT, "bench/norm_kernels.cpp"),
                    os.path.join(args.build, "runtime/libpp_runtime.a"),
                    "-ldnnl", "-lopenblas", "-fopenmp", "-o", binary],
                   check=True)
    print("| kernel | shape | threads | pass | runtime ms | PyTorch ms "
          "| runtime / PyTorch |")
    print("|---|---|---|---|---|---|---|")
    for threads in map(int, args.threads.split(",")):
        env = dict(os.environ, OMP_NUM_THREADS=str(threads),
                   OPENBLAS_NUM_THREADS=str(threads))
        ours, theirs = [], []
        for _ in range(args.rounds):
            ours.append(parse(subprocess.run(
                [binary, str(threads), str(args.reps)], env=env, check=True,
                capture_output=True, text=True).stdout))
            theirs.append(parse(subprocess.run(
                ["/usr/bin/python3", "-c", TORCH, str(threads), str(args.reps)],
                env=env, check=True, capture_output=True, text=True).stdout))
        for key in ours[0]:
            mine = statistics.median(r[key] for r in ours)
            peer = statistics.median(r[key] for r in theirs)
            print(f"| {key[0]} | {key[1]} | {threads} | {key[2]} | {mine:.3f} "
                  f"| {peer:.3f} | {mine / peer:.2f}x |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
