#!/usr/bin/env python3
"""Times the CPU convolution kernels inside a generated training step.

The resnet18 test model compiled for one stage (`--pp-compile ...
emit-dir=`, CMake, `--local`), one SGD step per batch of 8 and 16 float32
32x32 images, on 1 and 2 kernel threads, three ways in the same run:
  - the program as built (F32 convolutions on oneDNN when the runtime has
    it, runtime/lib/cpu/Dnnl.cpp),
  - the same program with PP_RUNTIME_CONV=im2col (im2col + OpenBLAS GEMM),
  - PyTorch CPU (torch.set_num_threads), same model, data and optimizer.
The three alternate `--repeats` times so that none gets a quieter machine;
each run takes `--steps` steps, the first a warm-up. Prints the median ms
per step of every configuration over all runs and the ratios to PyTorch, and
the machine's state (cores, load average before and after).

Usage: /usr/bin/python3 bench/conv_kernels.py --build build
"""
import argparse
import json
import os
import platform
import statistics
import sys
import tempfile

ROOT = os.path.dirname(os.path.abspath(__file__)) + "/.."
sys.path.insert(0, os.path.join(ROOT, "bench"))
sys.path.insert(0, os.path.join(ROOT, "python"))
from generated_step import data_args, export, generated  # noqa: E402
from train_step import torch_step_times  # noqa: E402
from compare import run  # noqa: E402


def program_step_times(train, work, steps, threads, conv):
    """Step times of the generated program after its warm-up step; `conv`
    is PP_RUNTIME_CONV ("" leaves it unset)."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads))
    env.pop("PP_RUNTIME_CONV", None)
    if conv:
        env["PP_RUNTIME_CONV"] = conv
    log = os.path.join(work, "log.jsonl")
    if os.path.exists(log):
        os.remove(log)
    run([train, "--local", f"--threads={threads}", f"--steps={steps}",
         f"--log={log}"] + data_args(work, "resnet18"), env=env)
    return [json.loads(line)["step_ms"] for line in open(log)][1:]


def cpu_model():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--batches", default="8,16")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    import torch
    print(f"machine: {os.cpu_count()} cores ({cpu_model()}), load average "
          f"{' '.join(f'{v:.2f}' for v in os.getloadavg())}; torch "
          f"{torch.__version__} (mkldnn {torch.backends.mkldnn.is_available()})")
    print(f"resnet18 [N,3,32,32] one SGD step, float32; median of "
          f"{args.repeats} runs x {args.steps - 1} steps after a warm-up")
    print(f"{'batch':>5} {'threads':>7} {'oneDNN ms':>10} {'im2col ms':>10} "
          f"{'PyTorch ms':>10} {'oneDNN/PT':>9} {'im2col/PT':>9} "
          f"{'im2col/oneDNN':>13}")
    rows = []
    for batch in [int(b) for b in args.batches.split(",")]:
        with tempfile.TemporaryDirectory() as work:
            export(work, "resnet18", batch)
            train = generated(args.build, work, "one", 1, 1)
            for threads in [int(t) for t in args.threads.split(",")]:
                dnnl, im2col, ref = [], [], []
                for _ in range(args.repeats):
                    dnnl += program_step_times(train, work, args.steps,
                                               threads, "")
                    im2col += program_step_times(train, work, args.steps,
                                                 threads, "im2col")
                    ref += torch_step_times("resnet18", work, args.steps,
                                            threads, batch)
                d, i, r = (statistics.median(v) for v in (dnnl, im2col, ref))
                rows.append((batch, threads, d, i, r))
                print(f"{batch:5d} {threads:7d} {d:10.1f} {i:10.1f} "
                      f"{r:10.1f} {d / r:8.2f}x {i / r:8.2f}x {i / d:12.2f}x",
                      flush=True)
    print(f"load average after: "
          f"{' '.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
