#!/usr/bin/env python3
"""HetPipe's virtual workers at global staleness D = 0 against D = 2.

Two VWs of 2 devices train the test model with schedule=hetpipe dp=2
(Nm = --inflight micro-batches in flight, a wave per step), under mpirun,
one rank per device (4 ranks: on a 2-core machine they share the cores,
and the rates include that). The VWs are slowed in turn (--test-delay):
VW 0's first rank sleeps --delay ms after its even steps, VW 1's after its
odd ones, the jitter WSP's bound is there to absorb: at D = 0 every wave
waits for the slower VW (and the pipelines drain every wave); at D = 2 the
VWs run up to 2 waves apart, the pipelines stay full, and the sleeps
overlap. The runs alternate; each figure is the median of --repeats runs
of the program's own samples/s (both VWs' samples over the run's time).

Usage: /usr/bin/python3 bench/hetpipe_staleness.py --build build
"""
import argparse
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))

from check_generated import build as build_program  # noqa: E402
from check_pipeline import (cluster_file, data_flags,  # noqa: E402
                            export_micro_and_whole)


def run(cmd):
    return subprocess.run(cmd, check=True, capture_output=True,
                          text=True).stdout


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--model", default="mlp")
    parser.add_argument("--micro-batch", type=int, default=8)
    parser.add_argument("--inflight", type=int, default=4)
    parser.add_argument("--steps", type=int, default=24)
    parser.add_argument("--delay", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--hetero", action="store_true",
                        help="VWs with partitions of their own")
    parser.add_argument("--mpirun", default="mpirun --allow-run-as-root "
                        "--oversubscribe")
    args = parser.parse_args()
    os.environ["PATH"] = os.path.join(args.build, "bin") + ":" + \
        os.environ["PATH"]
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    nm = args.inflight
    with tempfile.TemporaryDirectory() as work:
        micro, whole = export_micro_and_whole(args.model, work,
                                              args.micro_batch, 2 * nm)
        files = [os.path.join(whole, f) for f in ("input.npy", "labels.npy")]
        exes = {}
        for d in (0, 2):
            out = os.path.join(work, f"d{d}")
            mlir = out + ".mlir"
            run([os.path.join(args.build, "bin", "pipeline-opt"),
                 os.path.join(micro, "model.onnx"),
                 f"--pp-compile=cluster={cluster_file(work, 4, args.hetero)} "
                 f"schedule=hetpipe microbatches={nm} dp=2 staleness={d} "
                 f"lr=0.01 report= emit-dir={out}", "-o", mlir])
            exes[d] = (build_program(out), data_flags(mlir, files))
        rates = {0: [], 2: []}
        delays = [f"--test-delay=0:{args.delay}:2:0",
                  f"--test-delay=2:{args.delay}:2:1"]
        for _ in range(args.repeats):
            for d in (0, 2):
                exe, data = exes[d]
                out = run(shlex.split(args.mpirun) +
                          ["-np", "4", exe, f"--steps={args.steps}"] + data +
                          delays)
                rates[d].append(float(re.search(
                    r"\(([0-9.]+) samples/s\)", out).group(1)))
        base = statistics.median(rates[0])
        print(f"{args.model}, 2 VWs x 2 devices"
              f"{' (own partitions)' if args.hetero else ''}, Nm = {nm} "
              f"micro-batches of {args.micro_batch}, {args.steps} steps, "
              f"{args.delay} ms sleeps alternating between the VWs, median "
              f"of {args.repeats}")
        print("| D | samples/s | vs D = 0 | runs |")
        print("|---|---|---|---|")
        for d in (0, 2):
            rate = statistics.median(rates[d])
            print(f"| {d} | {rate:.1f} | {rate / base:.2f}x | "
                  f"{', '.join(f'{r:.1f}' for r in rates[d])} |")


if __name__ == "__main__":
    main()
