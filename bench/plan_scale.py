#!/usr/bin/env python3
"""Times planning a GPT-3-shaped model (python/make_gpt_shape.py: 96 layers,
d_model 12288, 96 heads, sequence 2048, 174.6B float parameters, no weights
on disk) for a simulated 1,024-GPU cluster of three kinds (48 nodes of 8
H100, 48 of A100-80, 32 of V100-32, as 64 virtual workers of 16 GPUs):

  pipeline-opt --shape-only gpt3.onnx --pp-compile="cluster=cluster.json
      dp=64 tp=auto regroup-workers=1 recompute=full microbatches=M
      optimizer=adam report=R plan-dir=DIR"

(import, loss, the three-dimensional plan over every grouping of the
workers, its report, plan-3d.json and the timeline). Prints the median wall
time of `--repeat` runs after one warm-up, and from plan-3d.json the chosen
(pp, tp, dp), the predicted iteration, the peak memory per GPU and each
grouping's result.

Usage: /usr/bin/python3 bench/plan_scale.py --build build [--repeat 3]
         [--microbatches 2] [--work DIR]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--microbatches", type=int, default=2,
                    help="per replica of the 64 given workers (a grouping "
                    "of g merged workers runs g times as many)")
    ap.add_argument("--work", help="keep the model and plans here")
    args = ap.parse_args()
    work = args.work or tempfile.mkdtemp(prefix="plan-scale-")
    os.makedirs(work, exist_ok=True)
    model = os.path.join(work, "gpt3.onnx")
    cluster = os.path.join(work, "cluster-1024.json")
    subprocess.run([sys.executable, os.path.join(ROOT, "python",
                                                 "make_gpt_shape.py"),
                    "-o", model, "--cluster-json", cluster], check=True)
    opt = os.path.join(args.build, "bin", "pipeline-opt")
    plan_dir = os.path.join(work, "plan")
    report = os.path.join(work, "report.txt")
    cmd = [opt, "--shape-only", model,
           f"--pp-compile=cluster={cluster} dp=64 tp=auto regroup-workers=1 "
           f"recompute=full microbatches={args.microbatches} optimizer=adam "
           f"report={report} plan-dir={plan_dir}", "-o", os.devnull]
    times = []
    for i in range(args.repeat + 1):
        start = time.perf_counter()
        subprocess.run(cmd, check=True)
        if i > 0:
            times.append(time.perf_counter() - start)
    plan = json.load(open(os.path.join(plan_dir, "plan-3d.json")))
    pred = plan["prediction"]
    median = statistics.median(times)
    runs = ", ".join(f"{t:.2f}" for t in times)
    print(f"plan of GPT-3 175B shape for 1,024 GPUs: median {median:.2f} s "
          f"wall over {len(times)} runs ({runs}); load average "
          f"{os.getloadavg()[0]:.2f}")
    print(f"chosen (pp, tp, dp) = ({plan['pp']}, {plan['tp']}, {plan['dp']}),"
          f" {plan['micro_batches']} micro-batches per replica: predicted "
          f"iteration {pred['iteration_seconds'] * 1e3:.1f} ms, peak "
          f"{pred['peak_memory_bytes_per_gpu'] / 1e9:.1f} GB per GPU")
    for g in plan["groupings"]:
        result = (f"{g['iteration_seconds'] * 1e3:.1f} ms" if g["planned"]
                  else "does not fit or cannot beat the best")
        print(f"  {g['workers']} workers x {g['gpus_per_worker']} GPUs: "
              f"{result}")
    for name in ("timeline-3d.json", "timeline-3d.svg"):
        path = os.path.join(plan_dir, name)
        print(f"  {name}: {os.path.getsize(path)} bytes")


if __name__ == "__main__":
    main()
