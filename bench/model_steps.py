#!/usr/bin/env python3
"""Times the generated training step of every test model against PyTorch CPU.

For each model of python/make_models.py (the test models, and `widemlp`:
8 layers of 1024 x 1024 and a head at batch 256, compute-bound), the SGD
step compiled for one stage (`--pp-compile ... emit-dir=`, CMake, `--local
--threads=T`, OPENBLAS_NUM_THREADS=T) and the same step in PyTorch
(torch.set_num_threads(T), in a process with OPENBLAS_NUM_THREADS=T and
OMP_NUM_THREADS=T), same data, float32, on 1 and 2 threads. The two
alternate `--repeats` times so that neither gets a quieter machine; each run
takes `--steps` steps, the first a warm-up. Prints the median ms per step of
both over all runs and generated / PyTorch (below 1: the generated step is
faster).

For widemlp it also times, in the same run, OpenBLAS sgemm (numpy's matmul
on Debian's OpenBLAS, same thread count) on the step's GEMM shapes: each
layer's forward (N x K by K x M), input gradient and weight gradient; the
sum of their medians against the generated step is the share of sgemm's
speed the step reaches (the step also runs the ReLUs, the loss, the
updates).

With --torchvision a,b it times torchvision models the same way (built
and exported as python/torchvision_sweep.py does: 10 classes, Dropout and
stochastic depth off, 64 x 64 images unless the sweep says otherwise, batch
--torchvision-batch).

Usage: /usr/bin/python3 bench/model_steps.py --build build
           [--models mlp,gpt] [--threads 1,2] [--torchvision resnet34]
           [--keep DIR [--build-only]]
"""
import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.abspath(__file__)) + "/.."
sys.path.insert(0, os.path.join(ROOT, "bench"))
sys.path.insert(0, os.path.join(ROOT, "python"))
import make_models  # noqa: E402
from compare import run  # noqa: E402
from conv_kernels import cpu_model  # noqa: E402
from generated_step import data_args, export, generated  # noqa: E402

# Batches: the models' examples, except where a batch of 8 is the common
# benchmark size (resnet18 and vgg11 at 32 x 32).
BATCH = {"resnet18": 8, "vgg11": 8}

SGEMM = r"""
import sys, time, numpy as np
shapes = [tuple(map(int, s.split("x"))) for s in sys.argv[2].split(",")]
reps = int(sys.argv[1])
total = 0.0
for m, k, n in shapes:
    a = np.random.standard_normal((m, k)).astype(np.float32)
    b = np.random.standard_normal((k, n)).astype(np.float32)
    c = np.empty((m, n), np.float32)
    np.matmul(a, b, out=c)
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        np.matmul(a, b, out=c)
        times.append(time.perf_counter() - t)
    total += sorted(times)[len(times) // 2]
print(total * 1e3)
"""


def program_step_times(train, work, name, steps, threads):
    """Step times of the generated program after its warm-up step."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads))
    log = os.path.join(work, "log.jsonl")
    if os.path.exists(log):
        os.remove(log)
    run([train, "--local", f"--threads={threads}", f"--steps={steps}",
         f"--log={log}"] + data_args(work, name), env=env)
    return [json.loads(line)["step_ms"] for line in open(log)][1:]


def torch_times(name, work, steps, threads, batch):
    """PyTorch's step times (train_step.torch_step_times) in a process of
    its own whose OpenBLAS has `threads` threads too: torch.set_num_threads
    does not reach Debian's OpenBLAS, whose own threads would otherwise
    take every core besides torch's (and, on 2 threads, fight them)."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads),
               OMP_NUM_THREADS=str(threads))
    code = ("import json, sys; sys.path[:0] = [%r, %r]; "
            "from train_step import torch_step_times; "
            "print(json.dumps(torch_step_times(%r, %r, %d, %d, %d)))"
            % (os.path.join(ROOT, "bench"), os.path.join(ROOT, "python"),
               name, work, steps, threads, batch))
    out = subprocess.run(["/usr/bin/python3", "-c", code], env=env,
                         check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


TORCHVISION_STEPS = r"""
import json, sys, time
import numpy as np, torch, torch.nn as nn
sys.path.insert(0, %(python)r)
from torchvision_sweep import make_model
name, work, steps, threads = %(name)r, %(work)r, %(steps)d, %(threads)d
torch.set_num_threads(threads)
model = make_model(name)
x = torch.from_numpy(np.load(work + "/input.npy"))
y = torch.from_numpy(np.load(work + "/labels.npy"))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
times = []
for _ in range(steps):
    start = time.perf_counter()
    optimizer.zero_grad()
    nn.functional.cross_entropy(model(x), y).backward()
    optimizer.step()
    times.append((time.perf_counter() - start) * 1e3)
print(json.dumps(times[1:]))
"""


def torchvision_times(name, work, steps, threads):
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads),
               OMP_NUM_THREADS=str(threads))
    code = TORCHVISION_STEPS % {"python": os.path.join(ROOT, "python"),
                                "name": name, "work": work, "steps": steps,
                                "threads": threads}
    out = subprocess.run(["/usr/bin/python3", "-c", code], env=env,
                         check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def widemlp_gemm_shapes(batch):
    """(m, k, n) of each GEMM of the step: forward, input and weight
    gradients of the 8 hidden layers and the head (the first layer has no
    input gradient to compute)."""
    layers = [(1024, 1024)] * 8 + [(1024, 10)]
    shapes = []
    for index, (fan_in, fan_out) in enumerate(layers):
        shapes.append((batch, fan_in, fan_out))      # y = x W^T
        if index > 0:
            shapes.append((batch, fan_out, fan_in))  # dx = dy W
        shapes.append((fan_out, batch, fan_in))      # dW = dy^T x
    return shapes


def sgemm_ms(shapes, threads, reps=7):
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads))
    spec = ",".join(f"{m}x{k}x{n}" for m, k, n in shapes)
    out = subprocess.run(["/usr/bin/python3", "-c", SGEMM, str(reps), spec],
                         env=env, check=True, capture_output=True, text=True)
    return float(out.stdout.strip())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--models", default="mlp,resnet18,vgg11,transformer,"
                        "gpt,tied,padnet,widemlp")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--torchvision", default="",
                        help="torchvision models to time too")
    parser.add_argument("--torchvision-batch", type=int, default=16)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--keep", default="",
                        help="keep each model's exported model and built "
                        "program under this folder, and reuse them when "
                        "there (so a build can run before a quiet timing)")
    parser.add_argument("--build-only", action="store_true",
                        help="export and build, time nothing (with --keep)")
    args = parser.parse_args()
    if args.build_only and not args.keep:
        parser.error("--build-only needs --keep")
    import torch
    print(f"machine: {os.cpu_count()} cores ({cpu_model()}), load average "
          f"{' '.join(f'{v:.2f}' for v in os.getloadavg())}; torch "
          f"{torch.__version__}")
    print(f"one SGD step, float32; median of {args.repeats} runs x "
          f"{args.steps - 1} steps after a warm-up")
    print(f"{'model':>12} {'batch':>5} {'threads':>7} {'generated ms':>12} "
          f"{'PyTorch ms':>10} {'gen/PT':>7}")
    threads_list = [int(t) for t in args.threads.split(",")]
    rows = []
    jobs = [(name, False) for name in args.models.split(",") if name]
    jobs += [(name, True) for name in args.torchvision.split(",") if name]
    for name, vision in jobs:
        if vision:
            batch = args.torchvision_batch
        else:
            _, example, _, _ = make_models.MODELS[name]()
            batch = BATCH.get(name, example.shape[0])
        with contextlib.ExitStack() as stack:
            if args.keep:
                work = os.path.join(os.path.abspath(args.keep),
                                    f"{name}-b{batch}")
                os.makedirs(work, exist_ok=True)
            else:
                work = stack.enter_context(tempfile.TemporaryDirectory())
            train = os.path.join(work, "one", "build", "train")
            if not os.path.exists(train):
                if vision:
                    from torchvision_sweep import export_model
                    export_model(name, work, batch, 0.01, 1, "float32")
                else:
                    export(work, name, batch)
                train = generated(args.build, work, "one", 1, 1)
            if args.build_only:
                print(f"{name:>12} {batch:>5} built: {train}", flush=True)
                continue
            for threads in threads_list:
                ours, theirs, gemm = [], [], []
                for _ in range(args.repeats):
                    ours += program_step_times(
                        train, work, "input" if vision else name, args.steps,
                        threads)
                    theirs += (torchvision_times(name, work, args.steps,
                                                 threads) if vision else
                               torch_times(name, work, args.steps, threads,
                                           batch))
                    if name == "widemlp":
                        gemm.append(sgemm_ms(widemlp_gemm_shapes(batch),
                                             threads))
                o, t = statistics.median(ours), statistics.median(theirs)
                row = {"model": name, "batch": batch, "threads": threads,
                       "generated_ms": o, "pytorch_ms": t, "ratio": o / t}
                line = (f"{name:>12} {batch:>5} {threads:>7} {o:>12.2f} "
                        f"{t:>10.2f} {o / t:>6.2f}x")
                if gemm:
                    g = statistics.median(gemm)
                    row["sgemm_ms"] = g
                    line += (f"   OpenBLAS sgemm of its GEMMs {g:.1f} ms: "
                             f"the step runs at {g / o:.1%} of it")
                print(line, flush=True)
                rows.append(row)
    print(f"load average after: "
          f"{' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
