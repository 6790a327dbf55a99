#!/usr/bin/env python3
"""Times one training step: the reference interpreter against PyTorch CPU.

For each model (MLP and resnet18 by default), exports it with
python/torch_reference.py, compiles the SGD training step with pipeline-opt,
and in the same run times `--steps` steps in pp-interpret and in PyTorch
(same shapes, same thread count, float32). Reports the median step time of
each (the first step is a warm-up and not counted) and the ratio
interpreter / PyTorch.

Usage: /usr/bin/python3 bench/train_step.py --build build [--threads 1]
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
import make_models  # noqa: E402
import torch_reference  # noqa: E402


def torch_step_times(name, work, steps, threads, batch):
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model, example, _, _ = make_models.MODELS[name]()
    torch_reference.disable_dropout(model)
    model.train()
    x = torch.from_numpy(np.load(os.path.join(work, "input.npy")))
    y = torch.from_numpy(np.load(os.path.join(work, "labels.npy")))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        optimizer.zero_grad()
        logits = model(x)
        loss = torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        loss.backward()
        optimizer.step()
        times.append((time.perf_counter() - start) * 1e3)
    return times[1:]


def ours_step_times(build, work, steps, threads, input_name):
    bin_dir = os.path.join(build, "bin")
    step = os.path.join(work, "train.mlir")
    subprocess.run([os.path.join(bin_dir, "pipeline-opt"),
                    os.path.join(work, "model.onnx"), "--pp-add-loss",
                    "--pp-autodiff", "--pp-optimizer=lr=0.01", "-o", step],
                   check=True)
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads))
    out = subprocess.run([os.path.join(bin_dir, "pp-interpret"), step,
                          f"--steps={steps}", f"--num-threads={threads}",
                          f"--input={input_name}=" + os.path.join(work, "input.npy"),
                          "--input=labels=" + os.path.join(work, "labels.npy")],
                         check=True, capture_output=True, text=True, env=env)
    times = [float(line.split()[5]) for line in out.stdout.splitlines()
             if line.startswith("step ")]
    return times[1:]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--models", default="mlp,resnet18")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--batch", type=int, default=8)
    args = parser.parse_args()
    print(f"threads={args.threads}, median of {args.steps - 1} steps after "
          "one warm-up, float32")
    for name in args.models.split(","):
        with tempfile.TemporaryDirectory() as work:
            batch = args.batch if name in ("resnet18", "transformer") else 0
            subprocess.run([sys.executable,
                            os.path.join(ROOT, "python", "torch_reference.py"),
                            "--model", name, "--out", work, "--steps", "1",
                            "--batch", str(batch)],
                           check=True, capture_output=True)
            input_name = "tokens" if name == "gpt" else "input"
            ours = statistics.median(ours_step_times(
                args.build, work, args.steps, args.threads, input_name))
            ref = statistics.median(torch_step_times(
                name, work, args.steps, args.threads, batch))
            shape = list(np.load(os.path.join(work, "input.npy")).shape)
            print(f"{name:12s} input {shape}: interpreter {ours:8.2f} ms, "
                  f"PyTorch {ref:8.2f} ms, ratio {ours / ref:5.2f}x")


if __name__ == "__main__":
    main()
