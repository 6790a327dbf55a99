#!/usr/bin/env python3
"""Times the planning pipeline (--pp-compile) against mlir-opt parse + print.

For each size (12, 48 and 96 layers by default), exports the TinyGPT test
model of python/make_models.py with that many blocks (opset 17, training
mode, as make_models.py exports it), then in the same run, interleaved, times
`--repeat` runs of:

  plan        pipeline-opt gpt.onnx --pp-compile="cluster=... schedule=...
              microbatches=... recompute=... report=" -o plan.mlir
              (import, add-loss, partition, autodiff, optimizer, recompute,
              stage split, schedule, plan report, print)
  +plan-dir   the same with plan-dir=DIR (plan.json, timeline.json and
              timeline.svg written too)
  mlir-opt    mlir-opt --allow-unregistered-dialect model.mlir -o out.mlir,
              where model.mlir is the imported model in generic form
              (pipeline-opt gpt.onnx --mlir-print-op-generic): the bare cost
              of parsing and printing the IR the planner starts from
  ours        pipeline-opt model.mlir -o out.mlir (our parse + print of the
              same file)
  mlir-opt/plan-IR  mlir-opt parse + print of the plan itself (generic form),
              which is larger than the input

  import      pipeline-opt gpt.onnx --mlir-print-op-generic -o model.mlir
              (the importer alone; part of `plan`)

Each command runs once untimed first (warm-up; the planner's warm-up run
adds --mlir-timing, which gives the partition pass's share). Reports the
median wall time of each (process start included; the time of both tools on
an empty module is printed below the table), the ratio plan / mlir-opt in
wall and in CPU time (user + system of the child; less disturbed by other
load on the machine), op counts of the imported IR and of the plan (ops in
generic form, module and functions included), and the number of stages and
the predicted iteration time from plan.json. If recompute=auto fails at a
size, that size is planned with recompute=none and the table says so.
pipeline-opt is copied into the work directory first, so a rebuild during
the run cannot mix versions.

Usage: /usr/bin/python3 bench/plan_pipeline.py --build build
         [--layers 12,48,96] [--repeat 3] [--work DIR] [--json out.json]
"""
import argparse
import contextlib
import io
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
import make_models  # noqa: E402

GENERIC_OP = re.compile(r'^\s*(?:%[^=]*=\s*)?"[A-Za-z_][\w.$]*"\(')


def count_ops(path):
    """Ops in a file printed in MLIR's generic form (one op per line)."""
    with open(path) as f:
        return sum(1 for line in f if GENERIC_OP.match(line))


def run(cmd, timeout):
    """Runs cmd; returns ((wall s, CPU s), completed process)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True,
                          timeout=timeout)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime
           + after.ru_stime - before.ru_stime)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}:\n"
                           f"{proc.stderr[-2000:]}")
    return (wall, cpu), proc


def pass_share(timing_text, name):
    """Fraction of the total --mlir-timing wall time spent in pass `name`
    (the column next to the name: wall time, after user time when the
    report has both)."""
    total = re.search(r"([\d.]+) \(100\.0%\)\s+Total$", timing_text, re.M)
    row = re.search(r"([\d.]+) \(\s*[\d.]+%\)\s+" + name + r"$",
                    timing_text, re.M)
    if not total or not row:
        return None
    return float(row.group(1)) / float(total.group(1))


def startup_floor(args, opt, work):
    """Median seconds of each tool on an empty module (process start)."""
    empty = os.path.join(work, "empty.mlir")
    with open(empty, "w") as f:
        f.write("module {}\n")
    out = os.path.join(work, "empty.out.mlir")
    floor = {}
    for name, cmd in (("mlir_opt", [args.mlir_opt,
                                    "--allow-unregistered-dialect"]),
                      ("pipeline_opt", [opt])):
        run(cmd + [empty, "-o", out], args.timeout)
        floor[name] = statistics.median(
            run(cmd + [empty, "-o", out], args.timeout)[0][0]
            for _ in range(max(args.repeat, 3)))
    return floor


def bench_size(args, opt, layers, work):
    d = os.path.join(work, f"gpt-{layers}L")
    os.makedirs(d, exist_ok=True)
    print(f"{layers} layers: exporting and timing", file=sys.stderr)
    with contextlib.redirect_stdout(io.StringIO()):
        make_models.export("gpt", d, n_layer=layers)
    onnx_path = os.path.join(d, "gpt.onnx")
    model = os.path.join(d, "model.mlir")
    plan = os.path.join(d, "plan.mlir")
    plan_dir = os.path.join(d, "plan")
    plan_generic = os.path.join(d, "plan.generic.mlir")

    import_cmd = [opt, onnx_path, "--mlir-print-op-generic", "-o", model]
    run(import_cmd, args.timeout)

    recompute, note = args.recompute, ""

    def compile_cmd(extra=""):
        return [opt, onnx_path,
                f"--pp-compile=cluster={args.cluster} schedule={args.schedule}"
                f" microbatches={args.microbatches} recompute={recompute}"
                f" report={extra}", "-o", plan]

    # Warm-up of the planner, with pass timing.
    try:
        _, proc = run(compile_cmd() + ["--mlir-timing"], args.timeout)
    except (RuntimeError, subprocess.TimeoutExpired) as err:
        if recompute == "none":
            raise
        note = f"recompute={recompute} failed ({str(err).splitlines()[0]}); "\
               "planned with recompute=none"
        print(f"  {layers} layers: {note}", file=sys.stderr)
        recompute = "none"
        _, proc = run(compile_cmd() + ["--mlir-timing"], args.timeout)
    partition = pass_share(proc.stderr + proc.stdout, "PartitionPass")

    commands = {
        "import": import_cmd,
        "plan": compile_cmd(),
        "plan_dir": compile_cmd(f" plan-dir={plan_dir}"),
        "mlir_opt": [args.mlir_opt, "--allow-unregistered-dialect", model,
                     "-o", os.path.join(d, "out.mlir-opt.mlir")],
        "ours": [opt, model, "-o", os.path.join(d, "out.pipeline-opt.mlir")],
    }
    # The plan in generic form, for its op count and the second peer.
    run([opt, plan, "--mlir-print-op-generic", "-o", plan_generic],
        args.timeout)
    commands["mlir_opt_plan"] = [
        args.mlir_opt, "--allow-unregistered-dialect", plan_generic,
        "-o", os.path.join(d, "out.plan.mlir-opt.mlir")]
    for name in ("plan_dir", "mlir_opt", "ours", "mlir_opt_plan"):
        run(commands[name], args.timeout)  # warm-up
    times = {name: [] for name in commands}
    for _ in range(args.repeat):  # interleaved, so load spreads evenly
        for name, cmd in commands.items():
            times[name].append(run(cmd, args.timeout)[0])
    med = {name: statistics.median(w for w, _ in t)
           for name, t in times.items()}
    cpu = {name: statistics.median(c for _, c in t)
           for name, t in times.items()}

    with open(os.path.join(plan_dir, "plan.json")) as f:
        summary = json.load(f)
    return {
        "layers": layers,
        "ops": count_ops(model),
        "plan_ops": count_ops(plan_generic),
        "model_mlir_bytes": os.path.getsize(model),
        "import_s": med["import"],
        "plan_s": med["plan"],
        "plan_dir_s": med["plan_dir"],
        "mlir_opt_s": med["mlir_opt"],
        "ours_s": med["ours"],
        "mlir_opt_plan_s": med["mlir_opt_plan"],
        "ratio": med["plan"] / med["mlir_opt"],
        "cpu_s": cpu,
        "cpu_ratio": cpu["plan"] / cpu["mlir_opt"],
        "partition_share": partition,
        "stages": len(summary["stages"]),
        "iteration_ms": summary["prediction"]["iteration_seconds"] * 1e3,
        "bubble": summary["prediction"]["bubble_fraction"],
        "recompute": recompute,
        "note": note,
        "times_wall_cpu": times,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--mlir-opt", default="/usr/lib/llvm-22/bin/mlir-opt")
    parser.add_argument("--layers", default="12,48,96",
                        help="comma-separated TinyGPT block counts")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--cluster", default="8xA100-80")
    parser.add_argument("--schedule", default="1f1b")
    parser.add_argument("--microbatches", type=int, default=8)
    parser.add_argument("--recompute", default="auto")
    parser.add_argument("--timeout", type=float, default=600,
                        help="seconds allowed per command")
    parser.add_argument("--work", help="keep models and outputs here "
                        "(default: a temporary directory, removed)")
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()
    layers = [int(n) for n in args.layers.split(",") if n.strip()]
    warnings.filterwarnings("ignore")  # exporter chatter

    print(f"--pp-compile cluster={args.cluster} schedule={args.schedule} "
          f"microbatches={args.microbatches} recompute={args.recompute}; "
          f"median of {args.repeat} after one warm-up, wall seconds, "
          f"{os.cpu_count()} cores, load average %.2f at start" %
          os.getloadavg()[0])
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        work = args.work or tmp
        os.makedirs(work, exist_ok=True)
        # A private copy, so a rebuild during the run cannot mix versions.
        opt = os.path.join(work, "pipeline-opt")
        shutil.copy2(os.path.join(args.build, "bin", "pipeline-opt"), opt)
        floor = startup_floor(args, opt, work)
        for n in layers:
            results.append(bench_size(args, opt, n, work))

    print("load average %.2f at end" % os.getloadavg()[0])
    header = ("| layers | ops in | ops plan | import s | plan s "
              "| +plan-dir s | mlir-opt s | ours s | plan / mlir-opt | (CPU) "
              "| partition share | mlir-opt plan IR s | stages "
              "| iteration ms |")
    print(header)
    print("|" + "---|" * (header.count("|") - 1))
    for r in results:
        share = ("-" if r["partition_share"] is None
                 else f"{100 * r['partition_share']:.0f}%")
        rec = "" if r["recompute"] == args.recompute else \
            f" (recompute={r['recompute']})"
        print(f"| {r['layers']} | {r['ops']} | {r['plan_ops']} "
              f"| {r['import_s']:.3f} | {r['plan_s']:.3f} "
              f"| {r['plan_dir_s']:.3f} | {r['mlir_opt_s']:.3f} "
              f"| {r['ours_s']:.3f} | {r['ratio']:.1f}x "
              f"| {r['cpu_ratio']:.1f}x | {share} "
              f"| {r['mlir_opt_plan_s']:.3f} | {r['stages']} "
              f"| {r['iteration_ms']:.3f}{rec} |")
    print(f"empty module (process start only): mlir-opt "
          f"{floor['mlir_opt']:.3f} s, pipeline-opt "
          f"{floor['pipeline_opt']:.3f} s")
    for r in results:
        if r["note"]:
            print(f"{r['layers']} layers: {r['note']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "empty_module_s": floor,
                       "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
