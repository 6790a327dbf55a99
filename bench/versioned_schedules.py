#!/usr/bin/env python3
"""Weight-versioned schedules against 1F1B, continuous and drained.

For 2 and 4 MPI ranks (a stage each): the model's step of m micro-batches
compiled with schedule=1f1b, pipedream, pipedream-2bw (an update every p
micro-batches, the least its rule allows, and every m: 1F1B's updates,
one version behind), nf1b (an update every --update-every) and
hetpipe (HetPipe's virtual worker: Nm = m in flight, an update each),
built, and run alternately --repeats times. Each weight-versioned program
runs twice: continuous (--drain-every 0: the steps of the run form one
stream, the next steps' forwards overlapping earlier backwards) and
drained (--drain-every 1: the pipeline empties after every step, as 1F1B
does). Per configuration: samples per second over the whole run after the
first step (sum of the logged step times; a continuous run's first step
carries the fill, its last the drain), its ratio to 1F1B (the median
over rounds of its rate over the same round's 1F1B rate), and the
no-bubble bound: the samples of a step over the slowest stage's median
busy time per step (--log busy_ms), with the share of it reached. With
more ranks than cores the ranks share cores (rates then include that).

Usage: /usr/bin/python3 bench/versioned_schedules.py --build build
"""
import argparse
import os
import shlex
import statistics
import sys
import tempfile

ROOT = os.path.dirname(os.path.abspath(__file__)) + "/.."
sys.path.insert(0, os.path.join(ROOT, "bench"))
sys.path.insert(0, os.path.join(ROOT, "python"))
from check_pipeline import cluster_file  # noqa: E402
from check_profile import cpu_cluster, timed_runs  # noqa: E402
from compare import run  # noqa: E402
from generated_step import data_args, export, step_times  # noqa: E402


def program(build, work, name, stages, m, schedule, update_every,
            profile=None):
    """The built program of `schedule`; planned for `stages` CPU ranks with
    the measured `profile` (each op's time on this machine), or without one
    for P4000s whose links cost nothing."""
    out = os.path.join(work, name)
    every = f" update-every={update_every}" if update_every else ""
    cluster = (cpu_cluster(work, stages, "5GB/s", "20us") +
               f" profile={profile}" if profile else
               cluster_file(work, stages))
    run([os.path.join(build, "bin", "pipeline-opt"),
         os.path.join(work, "model.onnx"),
         f"--pp-compile=cluster={cluster} "
         f"schedule={schedule} microbatches={m}{every} lr=0.01 report= "
         f"emit-dir={out}", "-o", os.path.join(work, name + ".mlir")])
    run(["cmake", "-S", out, "-B", out + "/build", "-G", "Ninja",
         "-DCMAKE_BUILD_TYPE=Release"])
    run(["cmake", "--build", out + "/build"])
    return os.path.join(out, "build", "train")


def measured_profile(build, work, m, data):
    """Each op of the model timed in its one-rank program on this machine
    (train --write-profile, per-op median of 3 runs): the planner then cuts
    the stages where the CPU's times balance them. The P4000 roofline cuts
    resnet18 at batch 16 into stages busy 300 and 750 ms a step here."""
    train = program(build, work, "profile-1", 1, m, "1f1b", 0)
    profile = os.path.join(work, "profile.json")
    timed_runs([train, "--local", "--threads=1", "--steps=3",
                f"--write-profile={profile}", "--profile-kind=cpu"] + data,
               3, profile)
    return profile


def drain_settings(text):
    """--pipelines: the --drain-every of each run named."""
    setting = {"continuous": 0, "drained": 1}
    names = text.split(",")
    if not set(names) <= setting.keys():
        raise argparse.ArgumentTypeError(
            f"expected continuous, drained or both, got '{text}'")
    return [setting[name] for name in names]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--model", default="resnet18")
    parser.add_argument("--micro-batch", type=int, default=16)
    parser.add_argument("--microbatches", type=int, default=8)
    parser.add_argument("--update-every", type=int, default=2,
                        help="nf1b's micro-batches per update")
    parser.add_argument("--ranks", default="2,4")
    parser.add_argument("--schedules", default=None,
                        help="a comma-separated subset of pipedream, "
                        "pipedream-2bw, nf1b, hetpipe (1f1b always runs)")
    parser.add_argument("--steps", type=int, default=9)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--pipelines", default="continuous,drained",
                        type=drain_settings,
                        help="the weight-versioned runs: continuous, "
                        "drained or both (their --drain-every)")
    parser.add_argument("--plan", choices=["profile", "p4000"],
                        default="profile",
                        help="cut the stages with each op's time measured "
                        "here (default) or for P4000s (the roofline)")
    parser.add_argument("--mpirun", default="mpirun --allow-run-as-root "
                        "--oversubscribe")
    args = parser.parse_args()
    m, mb = args.microbatches, args.micro_batch
    cores = os.cpu_count() or 1
    with tempfile.TemporaryDirectory() as work:
        export(work, args.model, mb)
        data_dir = os.path.join(work, "whole")
        os.makedirs(data_dir)
        export(data_dir, args.model, m * mb)
        # The profile's ops run as the ranks run them: one thread.
        os.environ["OPENBLAS_NUM_THREADS"] = "1"
        profile = (measured_profile(args.build, work, m,
                                    data_args(data_dir, args.model))
                   if args.plan == "profile" else None)
        plan = ("by each op's time measured here" if profile else
                "for P4000s")
        print(f"{args.model}, {m} micro-batches of {mb} per step, 1 thread "
              f"per rank, {cores} cores, {args.steps - 1} steps after the "
              f"first, median of {args.repeats} runs, stages cut {plan}",
              flush=True)
        print("| ranks | schedule | update every | pipeline | samples/s | "
              "vs 1F1B | no-bubble bound | of the bound | busy ms per stage | "
              "runs |")
        print("|---|---|---|---|---|---|---|---|---|---|", flush=True)
        for p in map(int, args.ranks.split(",")):
            bind = "core" if p <= cores else "none"
            mpirun = shlex.split(args.mpirun) + ["--bind-to", bind]
            # PipeDream-2BW twice: an update every p micro-batches (the
            # least its rule allows) and every m (the batch of 1F1B's step:
            # the same updates, one version behind).
            least_2bw = next(k for k in range(p, m + 1) if m % k == 0)
            configs = [("1f1b", 0), ("pipedream", 1),
                       ("pipedream-2bw", least_2bw)]
            if least_2bw != m:
                configs.append(("pipedream-2bw", m))
            configs += [("nf1b", args.update_every), ("hetpipe", 1)]
            if args.schedules:
                wanted = set(args.schedules.split(","))
                configs = [c for c in configs
                           if c[0] == "1f1b" or c[0] in wanted]
            exes = {(s, n): program(args.build, work, f"{s}-{n}-{p}", p, m,
                                    s, n, profile)
                    for s, n in configs}
            runs = [("1f1b", 0, 1)]
            for s, n in configs[1:]:
                runs += [(s, n, d) for d in args.pipelines]
            times = {r: [] for r in runs}
            busy = {r: [] for r in runs}
            for _ in range(args.repeats):
                for r in runs:
                    s, n, drain = r
                    log = os.path.join(work, f"{s}-{n}-{p}-{drain}.jsonl")
                    per_step = step_times(
                        mpirun + ["-np", str(p), exes[(s, n)],
                                  f"--drain-every={drain}"] +
                        data_args(data_dir, args.model), log, args.steps,
                        busy[r])
                    times[r].append(sum(per_step) / len(per_step))
            for r in runs:
                s, n, drain = r
                step = statistics.median(times[r])
                rate = m * mb / step * 1e3
                # busy[r]: per run, each stage's median busy ms per step.
                stage_busy = [statistics.median(busy[r][i::p])
                              for i in range(p)]
                slowest = max(stage_busy)
                bound = m * mb / slowest * 1e3
                mode = ("drains every step" if drain == 1 or s == "1f1b"
                        else "continuous")
                each = ", ".join(f"{m * mb / t * 1e3:.1f}" for t in times[r])
                # Against the 1F1B run of the same round: the machine's
                # speed drifts between rounds more than within one.
                ratio = statistics.median(
                    base / t for t, base in zip(times[r], times[runs[0]]))
                print(f"| {p} | {s} | {n or m} | {mode} | {rate:.1f} | "
                      f"{ratio:.3f}x | {bound:.1f} | "
                      f"{100 * rate / bound:.0f}% | "
                      f"{', '.join(f'{b:.0f}' for b in stage_busy)} | "
                      f"{each} |")

if __name__ == "__main__":
    main()
