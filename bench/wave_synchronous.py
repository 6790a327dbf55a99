#!/usr/bin/env python3
"""Wave Synchronous Parallel: staleness D = 2 against D = 0, same run.

Two virtual workers (VWs) of one stage each (2 MPI ranks, one core each)
train the same generated program, compiled with dp=2 staleness=0 and with
dp=2 staleness=2, in three situations made with the program's --test-delay:
  - none: both VWs at their own speed;
  - slowed: VW 1 sleeps X ms after every step (a slower GPU);
  - straggler: VW 1 sleeps 2X ms after every other step (the same mean
    delay, in bursts: a noisy node, a thermal throttle);
  - both: each VW sleeps 2X ms after every other step, out of phase.
X is half the measured step time. Samples per second of the job = every
VW's samples over the wall time the program reports; the two programs run
alternately, medians over --repeats runs. Ratio D=2 / D=0 > 1: what the
staleness bound buys (a push overlapped with the next wave, delays
absorbed up to D waves). The VW that has to wait says how long in the
program's summary; its waits are printed too.

Usage: /usr/bin/python3 bench/wave_synchronous.py --build build
"""
import argparse
import os
import re
import shlex
import statistics
import sys
import tempfile

ROOT = os.path.dirname(os.path.abspath(__file__)) + "/.."
sys.path.insert(0, os.path.join(ROOT, "bench"))
sys.path.insert(0, os.path.join(ROOT, "python"))
from generated_step import data_args, export, generated  # noqa: E402
from compare import run  # noqa: E402


def train(cmd, steps, delays):
    """(samples/s of the job, ms each VW waited for the other)."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    out = run(cmd + [f"--steps={steps}", "--threads=1"] +
              [f"--test-delay={d}" for d in delays], env=env)
    rate = float(re.search(r"trained \d+ steps in [0-9.]+ s \(([0-9.]+) "
                           r"samples/s\)", out).group(1))
    waited = [float(w) for w in
              re.findall(r"virtual worker \d+: \d+ waves, waited ([0-9.]+) ms",
                         out)]
    return rate, waited


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--models", default="mlp,resnet18")
    parser.add_argument("--micro-batch", type=int, default=8)
    parser.add_argument("--microbatches", type=int, default=2)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--mpirun", default="mpirun --allow-run-as-root "
                        "--oversubscribe")
    args = parser.parse_args()
    m, mb = args.microbatches, args.micro_batch
    mpirun = shlex.split(args.mpirun) + ["--bind-to", "core", "-np", "2"]
    print(f"2 VWs x 1 stage, 1 thread per rank, {m} micro-batches of {mb} "
          f"per VW, {args.steps} steps, median of {args.repeats} runs")
    for name in args.models.split(","):
        with tempfile.TemporaryDirectory() as work:
            export(work, name, mb)
            data_dir = os.path.join(work, "global")
            os.makedirs(data_dir)
            export(data_dir, name, 2 * m * mb)
            programs = {d: generated(args.build, work, f"d{d}", 1, m, dp=2,
                                     extra=f" staleness={d}")
                        for d in (0, 2)}
            data = data_args(data_dir, name)
            # The step time without delays sets X.
            base, _ = train(mpirun + [programs[0]] + data, args.steps, [])
            step_ms = 2 * m * mb / base * 1e3
            x = round(step_ms / 2, 1)
            situations = {
                "none": [],
                "slowed": [f"1:{x}"],
                "straggler": [f"1:{2 * x}:2:1"],
                "both": [f"0:{2 * x}:2:0", f"1:{2 * x}:2:1"],
            }
            print(f"{name}: step {step_ms:.1f} ms without delays, X = {x} ms")
            for label, delays in situations.items():
                rates = {0: [], 2: []}
                waits = {0: [], 2: []}
                for _ in range(args.repeats):
                    for d in (0, 2):
                        rate, waited = train(mpirun + [programs[d]] + data,
                                             args.steps, delays)
                        rates[d].append(rate)
                        waits[d].append(waited)
                r0, r2 = (statistics.median(rates[d]) for d in (0, 2))
                w0, w2 = ([statistics.median(w[v] for w in waits[d])
                           for v in range(2)] for d in (0, 2))
                print(f"  {label:9s} D=0 {r0:8.1f} samples/s (waits "
                      f"{w0[0]:.0f}/{w0[1]:.0f} ms), D=2 {r2:8.1f} samples/s "
                      f"(waits {w2[0]:.0f}/{w2[1]:.0f} ms): D=2/D=0 "
                      f"{r2 / r0:4.2f}x")


if __name__ == "__main__":
    main()
