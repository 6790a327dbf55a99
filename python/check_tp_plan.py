#!/usr/bin/env python3
"""Plans a GPT-style model in three dimensions and checks the plan's figures.

Exports TinyGPT of python/make_models.py at the given size, runs
--pp-compile with tp= (default auto), dp= and plan-dir=, prints the plan
report, and then recomputes from plan-3d.json what the planner derived:

- the GPUs: sum of the stages' tp degrees times dp is the cluster's count;
- every stage's all-reduce seconds from its bytes, its count of all-reduces,
  its degree t and its group's slowest link: 2 (t - 1) / t * bytes /
  bandwidth + 2 (t - 1) * latency * count;
- every stage's memory per GPU fits the GPU;
- the choice: the chosen candidate has the least predicted iteration time
  of the candidates that fit;
- with --linear-check (one GPU kind, uniform candidates), that tensor
  parallelism divides the split work: the compute per GPU of a uniform
  candidate of degree t (sum over its stages of forward + backward -
  all-reduce) is S / t + W; S and W are solved from the t = 1 and t = 2
  candidates and every other degree must match S / t + W.

Prints the chosen (pp, tp, dp), the predicted iteration and peak memory per
GPU, and the predicted speed-up over the tp = 1 candidate; a line starting
with MISMATCH for each failed check.
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def close(a, b, rtol=1e-9, atol=1e-15):
    return abs(a - b) <= atol + rtol * max(abs(a), abs(b))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", required=True)
    parser.add_argument("--model-dir", default=None,
                        help="where gpt.onnx is exported (once; default: "
                        "--work)")
    parser.add_argument("--pipeline-opt", default="pipeline-opt")
    parser.add_argument("--cluster", required=True)
    parser.add_argument("--tp", default="auto")
    parser.add_argument("--dp", type=int, default=1)
    parser.add_argument("--schedule", default="1f1b")
    parser.add_argument("--precision", default="bf16")
    parser.add_argument("--microbatches", type=int, default=8)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--d-model", type=int, default=512)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--context", type=int, default=256)
    parser.add_argument("--batch", type=int, default=16,
                        help="micro-batch size")
    parser.add_argument("--linear-check", action="store_true")
    parser.add_argument("--min-speedup", type=float, default=None,
                        help="fail unless the plan beats the tp=1 "
                        "candidate by this factor")
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    sys.path.insert(0, HERE)
    model_dir = args.model_dir or args.work
    os.makedirs(model_dir, exist_ok=True)
    model = os.path.join(model_dir, "gpt.onnx")
    if not os.path.exists(model):
        import make_models
        make_models.export("gpt", model_dir, n_layer=args.layers,
                           d_model=args.d_model, n_head=args.heads,
                           context=args.context, batch=args.batch)
    plan_dir = os.path.join(args.work, "plan")
    report = os.path.join(args.work, "report.txt")
    cmd = [args.pipeline_opt, model,
           f"--pp-compile=cluster={args.cluster} schedule={args.schedule} "
           f"microbatches={args.microbatches} precision={args.precision} "
           f"tp={args.tp} dp={args.dp} plan-dir={plan_dir} report={report}",
           "-o", os.devnull]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"command failed ({proc.returncode}): {' '.join(cmd)}\n"
                 f"{proc.stdout}{proc.stderr}")
    print(open(report).read(), end="")
    plan = json.load(open(os.path.join(plan_dir, "plan-3d.json")))
    failures = []

    if args.cluster.endswith(".json"):
        spec = json.load(open(args.cluster))
        gpus = sum(d.get("count", 1) for node in spec["nodes"]
                   for d in node["devices"])
    else:
        gpus = sum(int(part.split("x")[0]) if "x" in part.lower() else 1
                   for part in args.cluster.replace("X", "x").split(","))
    used = sum(plan["tp_per_stage"]) * plan["dp"]
    if used != gpus:
        failures.append(f"the plan uses {used} GPUs, the cluster has {gpus}")

    def check_stages(stages, where):
        for st in stages:
            t = st["tp"]
            bw = st["group_link_bandwidth"]
            expected = 0.0
            if t > 1 and st["allreduce_count"] > 0:
                expected = (2 * (t - 1) / t * st["allreduce_bytes"] / bw +
                            2 * (t - 1) * st["group_link_latency"] *
                            st["allreduce_count"])
            if not close(expected, st["allreduce_seconds"]):
                failures.append(
                    f"{where} stage {st['stage']}: all-reduce "
                    f"{st['allreduce_seconds']} s, recomputed {expected} s")
            if st["memory_bytes_per_gpu"] > st["memory_capacity_bytes"]:
                failures.append(f"{where} stage {st['stage']} does not fit")
            if len(st["devices"]) != t:
                failures.append(f"{where} stage {st['stage']}: tp={t} on "
                                f"{len(st['devices'])} GPUs")

    check_stages(plan["stages"], "plan")
    mine = [c for c in plan["candidates"] if c["worker"] == 0]
    for c in mine:
        if c["feasible"]:
            check_stages(c["stages"], f"candidate tp={c['tp']}")
    fitting = [c for c in mine if c["feasible"]]
    best = min(fitting, key=lambda c: c["iteration_seconds"])
    chosen = [s["tp"] for s in plan["stages"]]
    best_tp = [s["tp"] for s in best["stages"]]
    if best_tp != chosen and not close(best["iteration_seconds"],
                                       plan["prediction"]["iteration_seconds"]):
        failures.append(f"chose tp={chosen}, but tp={best_tp} predicts "
                        f"{best['iteration_seconds']} s")

    def label(tps):
        return str(tps[0]) if len(set(tps)) == 1 else "[" + ",".join(
            map(str, tps)) + "]"

    iteration = plan["prediction"]["iteration_seconds"]
    peak = plan["prediction"]["peak_memory_bytes_per_gpu"]
    print(f"chosen (pp, tp, dp) = ({plan['pp']}, {label(chosen)}, "
          f"{plan['dp']}) on {gpus} GPUs: iteration {iteration * 1e3:.3f} ms, "
          f"peak {peak / 1e9:.2f} GB per GPU")
    whole = [c for c in fitting if all(t == 1 for t in c["tp"])]
    # A skipped tp=1 candidate: its lower bound bounds the speed-up.
    skipped_whole = [c for c in mine if c.get("skipped") and
                     all(t == 1 for t in c["tp"])]
    if whole or skipped_whole:
        if whole:
            speedup = whole[0]["iteration_seconds"] / iteration
            at_least = ""
        else:
            whole = skipped_whole
            speedup = whole[0]["iteration_lower_bound_seconds"] / iteration
            at_least = "at least "
        print(f"predicted speed-up over tp=1 (pp={whole[0]['pp']}): "
              f"{at_least}{speedup:.2f}x")
        if speedup < 1 - 1e-9:
            failures.append("the chosen plan is slower than tp=1")
        if args.min_speedup is not None and speedup < args.min_speedup:
            failures.append(f"speed-up {speedup:.3f} < {args.min_speedup}")

    # A skipped candidate's lower bound must be no better than the plan.
    for c in mine:
        if c.get("skipped"):
            bound = c["iteration_lower_bound_seconds"]
            if bound < iteration * (1 - 1e-9):
                failures.append(f"tp={label(c['tp'])} skipped with a lower "
                                f"bound {bound} s below the plan's "
                                f"{iteration} s")
            else:
                print(f"tp={label(c['tp'])}: skipped, lower bound >= the "
                      f"plan's iteration")

    if args.linear_check:
        uniform = {}
        for c in fitting:
            if len(set(c["tp"])) == 1:
                t = c["tp"][0]
                compute = sum(s["forward_seconds"] + s["backward_seconds"] -
                              s["allreduce_seconds"] for s in c["stages"])
                uniform[t] = compute
        if len(uniform) < 2:
            failures.append("linear check needs two uniform candidates "
                            "partitioned")
        else:
            # S and W from the two smallest degrees partitioned.
            ta, tb = sorted(uniform)[:2]
            split = (uniform[ta] - uniform[tb]) / (1 / ta - 1 / tb)
            rest = uniform[ta] - split / ta
            print(f"split work {split * 1e3:.3f} ms, whole work "
                  f"{rest * 1e3:.3f} ms per micro-batch (from tp={ta} and "
                  f"{tb})")
            for t, compute in sorted(uniform.items()):
                expected = split / t + rest
                if not close(compute, expected, rtol=1e-6):
                    failures.append(f"tp={t}: compute {compute} s, S/t + W = "
                                    f"{expected} s")
                else:
                    print(f"tp={t}: compute = S/{t} + W")
    for failure in failures:
        print("MISMATCH", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
