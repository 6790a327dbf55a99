#!/usr/bin/env python3
"""A memory-mapped --data set larger than memory against a small one.

Compiles the MLP test model (uint8 MNIST-shaped samples [1, 28, 28], a
batch of --batch) into a 2-stage 1F1B program, and trains it --local with
--shuffle on two data sets of uint8 inputs and labels:

  - small: --small samples of random values (a few MiB, in the page cache
    after the first touch);
  - large: a sparse file of --large-gib GiB (default: 1.25 x the machine's
    memory, MemTotal), written with np.lib.format.open_memmap and never
    filled, so it takes no disk: the reads of its holes are zero pages that
    the kernel allocates in the page cache, as a cold file's pages would be
    read (without the disk's latency).

With --real the large inputs file is written with random bytes instead
(a 64 MiB random block repeated), flushed, and dropped from the page cache
(posix_fadvise DONTNEED) before every run: its reads go to the disk.

The large set runs twice, with the default --data-prefetch (a thread reads
the next steps' samples ahead) and with --data-prefetch 0.

Per data set it reports the median step time of the steps after the first
--warmup (from the JSON --log), the samples/s, and the process's peak
resident memory (VmHWM, from /usr/bin/time -v's maximum resident set
size); then the ratio of the step rates. The acceptance: within 10% and a
peak under 2 GiB.

Usage: /usr/bin/python3 bench/dataset_mmap.py --build build [--work DIR]
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.abspath(__file__)) + "/.."
sys.path.insert(0, os.path.join(ROOT, "python"))
from check_pipeline import cluster_file, data_flags  # noqa: E402
from check_generated import build as build_program  # noqa: E402
from compare import run  # noqa: E402


def mem_total():
    for line in open("/proc/meminfo"):
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) * 1024
    return 0


def sparse_data(directory, samples, shape):
    """uint8 input and label files of `samples` samples, not written."""
    os.makedirs(directory, exist_ok=True)
    x = os.path.join(directory, "x.npy")
    y = os.path.join(directory, "y.npy")
    for path, full in ((x, (samples,) + shape), (y, (samples,))):
        array = np.lib.format.open_memmap(path, mode="w+", dtype=np.uint8,
                                          shape=full)
        del array
    return x, y


def real_data(directory, samples, shape):
    """The inputs file of sparse_data written with random bytes."""
    x, y = sparse_data(directory, samples, shape)
    block = np.random.default_rng(1).integers(0, 256, 64 << 20, np.uint8)
    block = block.tobytes()
    with open(x, "r+b") as f:
        version = np.lib.format.read_magic(f)
        np.lib.format._read_array_header(f, version)
        start = f.tell()  # after the .npy header
        size = f.seek(0, os.SEEK_END)
        f.seek(start)
        left = size - start
        while left > 0:
            left -= f.write(block[:min(left, len(block))])
        f.flush()
        os.fsync(f.fileno())
    return x, y


def drop_cache(paths):
    for path in paths:
        with open(path, "rb") as f:
            os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)


def train(exe, mlir, files, steps, log, seed, extra=()):
    if os.path.exists(log):
        os.remove(log)
    command = ["/usr/bin/time", "-v", exe, "--local", f"--steps={steps}",
               "--shuffle", f"--seed={seed}", f"--log={log}"] + list(extra)
    proc = subprocess.run(command + data_flags(mlir, files),
                          capture_output=True, text=True,
                          env=dict(os.environ, OPENBLAS_NUM_THREADS="1"))
    if proc.returncode != 0:
        sys.exit(f"train failed:\n{proc.stdout}{proc.stderr}")
    rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)",
                        proc.stderr).group(1)) * 1024
    rows = [json.loads(line) for line in open(log)]
    return rows, rss


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--work", default=None)
    parser.add_argument("--model", default="mlp",
                        help="a test model with one float input (mlp, "
                        "widemlp, resnet18, ...)")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--microbatches", type=int, default=4)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--small", type=int, default=4096)
    parser.add_argument("--large-gib", type=float, default=None)
    parser.add_argument("--real", action="store_true",
                        help="write the large inputs file (random bytes) "
                        "and drop it from the page cache before each run")
    parser.add_argument("--repeats", type=int, default=2,
                        help="runs per data set, alternating; the fastest "
                        "median counts")
    args = parser.parse_args()
    work = args.work or tempfile.mkdtemp(prefix="pp-dataset-bench-")
    os.makedirs(work, exist_ok=True)
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import torch_reference

    # The model at the micro-batch (its data files are not used).
    micro = args.batch // args.microbatches
    export = argparse.Namespace(
        model=args.model, steps=0, lr=0.01, momentum=0.0, optimizer="sgd",
        weight_decay=0.0, seed=0, dtype="float32", autocast="none",
        dropout=False, lr_schedule="constant", warmup_steps=0,
        warmup_start_factor=1 / 3, min_lr=0.0, decay_steps=None,
        step_size=None, gamma=0.1)
    model_dir = os.path.join(work, "model")
    torch_reference.reference(export, model_dir, micro)
    program = os.path.join(work, "program")
    mlir = os.path.join(work, "program.mlir")
    run([os.path.join(args.build, "bin", "pipeline-opt"),
         os.path.join(model_dir, "model.onnx"),
         f"--pp-compile=cluster={cluster_file(work, 2)} schedule=1f1b "
         f"microbatches={args.microbatches} lr=0.001 emit-dir={program}",
         "-o", mlir])
    exe = build_program(program)

    shape = tuple(np.load(os.path.join(model_dir, "input.npy")).shape[1:])
    rng = np.random.default_rng(0)
    small_dir = os.path.join(work, "small")
    os.makedirs(small_dir, exist_ok=True)
    small = [os.path.join(small_dir, "x.npy"), os.path.join(small_dir,
                                                            "y.npy")]
    np.save(small[0], rng.integers(0, 256, (args.small,) + shape, np.uint8))
    np.save(small[1], rng.integers(0, 10, args.small, np.uint8))

    gib = args.large_gib or 1.25 * mem_total() / 2**30
    samples = int(gib * 2**30) // int(np.prod(shape))
    large = (real_data if args.real else sparse_data)(
        os.path.join(work, "large"), samples, shape)
    size = os.path.getsize(large[0]) + os.path.getsize(large[1])
    used = sum(os.stat(p).st_blocks * 512 for p in large)
    print(f"small: {args.small} samples ({os.path.getsize(small[0]) / 2**20:.1f}"
          f" MiB); large: {samples} samples, {size / 2**30:.1f} GiB "
          f"({used / 2**20:.1f} MiB on disk), memory {mem_total() / 2**30:.1f}"
          " GiB")

    runs = (("small", small, []), ("large", large, []),
            ("large, no prefetch", large, ["--data-prefetch=0"]))
    results = {name: [] for name, _, _ in runs}
    for repeat in range(args.repeats):
        for name, files, extra in runs:
            if args.real and files is large:
                drop_cache(large)
            rows, rss = train(exe, mlir, files, args.steps,
                              os.path.join(work, "run.jsonl"),
                              seed=repeat + 1, extra=extra)
            ms = statistics.median(r["step_ms"] for r in rows[args.warmup:])
            results[name].append((ms, rss))
            print(f"{name} run {repeat + 1}: median step {ms:.3f} ms "
                  f"({args.batch / ms * 1e3:.0f} samples/s), peak RSS "
                  f"{rss / 2**20:.0f} MiB")
    best = {name: (min(ms for ms, _ in runs), max(rss for _, rss in runs))
            for name, runs in results.items()}
    ratio = best["small"][0] / best["large"][0]
    unfetched = best["small"][0] / best["large, no prefetch"][0]
    print(f"step rate large / small: {ratio:.3f} ({unfetched:.3f} without "
          f"prefetch); peak RSS large {best['large'][1] / 2**20:.0f} MiB, "
          f"small {best['small'][1] / 2**20:.0f} MiB")
    ok = ratio >= 0.9 and best["large"][1] < 2 * 2**30
    print("PASS" if ok else "FAIL")
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
