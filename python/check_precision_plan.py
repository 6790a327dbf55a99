#!/usr/bin/env python3
"""Plans a GPT-style model in fp32 and in bf16 and compares the plans.

Exports TinyGPT of python/make_models.py at the given size, compiles it with
--pp-compile (same cluster, schedule and micro-batches) once with
precision=fp32 and once with precision=bf16, and reads both plan.json files.
Prints per precision the stages, the activations stashed per micro-batch
(all stages), the static bytes, the predicted peak memory of the fullest
device and the predicted iteration time. Fails unless the bf16 plan stashes
at most --max-ratio times the fp32 plan's activations and predicts no longer
an iteration.
"""
import argparse
import json
import os
import sys

from compare import run

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", required=True)
    parser.add_argument("--pipeline-opt", default="pipeline-opt")
    parser.add_argument("--cluster", required=True)
    parser.add_argument("--schedule", default="1f1b")
    parser.add_argument("--microbatches", type=int, default=8)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--context", type=int, default=128)
    parser.add_argument("--batch", type=int, default=8,
                        help="micro-batch size")
    parser.add_argument("--max-ratio", type=float, default=0.53)
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    sys.path.insert(0, HERE)
    import make_models
    make_models.export("gpt", args.work, n_layer=args.layers,
                       d_model=args.d_model, n_head=args.heads,
                       context=args.context, batch=args.batch)
    model = os.path.join(args.work, "gpt.onnx")
    plans = {}
    for precision in ("fp32", "bf16"):
        plan_dir = os.path.join(args.work, "plan-" + precision)
        run([args.pipeline_opt, model,
             f"--pp-compile=cluster={args.cluster} schedule={args.schedule} "
             f"microbatches={args.microbatches} precision={precision} "
             f"plan-dir={plan_dir} report=", "-o", os.devnull])
        plan = json.load(open(os.path.join(plan_dir, "plan.json")))
        stages = plan["stages"]
        stash = sum(s["stash_bytes_per_micro_batch"] for s in stages)
        static = sum(s["static_bytes"] for s in stages)
        peak = max(d.get("peak_memory_bytes", 0) for d in plan["devices"])
        seconds = plan["prediction"]["iteration_seconds"]
        plans[precision] = (stash, seconds)
        if plan["precision"] != precision:
            sys.exit(f"plan.json says precision {plan['precision']}, "
                     f"compiled with {precision}")
        print(f"{precision}: {len(stages)} stages on {args.cluster}, "
              f"{args.microbatches} micro-batches of {args.batch}: "
              f"activations {stash / 1e6:.2f} MB per micro-batch, static "
              f"{static / 1e6:.2f} MB, peak {peak / 1e6:.2f} MB, iteration "
              f"{seconds * 1e3:.3f} ms")
    ratio = plans["bf16"][0] / plans["fp32"][0]
    speedup = plans["fp32"][1] / plans["bf16"][1]
    print(f"bf16 / fp32: activations {ratio:.3f}, predicted speed-up "
          f"{speedup:.2f}x")
    failures = []
    if ratio > args.max_ratio:
        failures.append(f"bf16 activations are {ratio:.3f} of fp32's "
                        f"(> {args.max_ratio})")
    if speedup < 1.0:
        failures.append("the bf16 plan predicts a longer iteration")
    for failure in failures:
        print("MISMATCH", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
