"""A measured cost model, end to end.

For one test model: exports it at the micro-batch size, measures each ONNX
node's forward and backward time on this machine (the generated program of
the whole model on one device, train --write-profile, kind "cpu"; or the
interpreter's training step, pp-interpret --write-profile), then for every
device count compiles the 1F1B pipeline for a cluster of that many "cpu"
devices with that profile (--pp-compile profile=), builds and runs the
generated program under mpirun (a rank per device, one kernel thread
each) with --log, and sets the run against the prediction
(--pp-plan-report measured-log=). Prints, per device count, the predicted
and the measured step time and their relative error; --max-error fails
the run beyond it (benchmarks use it; tests only check the flow).

With --profile-load=ranks the generated profile is measured again for each
device count d under the load of that run: min(d, cores) copies of the
one-device program at once, their per-op times averaged, and that device
count is planned with it (ranks that share a machine's caches and memory
bandwidth run each op slower than one process alone does; ranks beyond the
cores time-share them, which no per-op time expresses). With
--profile-load=pipeline the d-rank program planned with the one-device
profile runs once with --write-profile (each op timed on the rank that runs
it, under the others' load, receive waits left out), and d ranks are
planned again with that profile: the program measured is the replanned one.

With 1 among the device counts, each other count's measured speed-up over
one rank is printed against the ideal 1F1B speed-up d m / (m + d - 1);
--repeats R runs the programs R more times, alternating, and sets
the median of their median steps against the prediction and, with 1 rank,
against each other (one run's step varies with the machine's load); each
repeat also times the program's ops once more (--write-profile), and the
median prediction from those profiles is printed beside the plan's.

With --measure-link the cluster's link is measured (train --measure-links:
one-way times of 4 B to 16 MiB between 2 ranks) instead of taken from
--link-bandwidth / --link-latency: the line fitted over every size for the
one-device plan, and for each device count the line fitted to the sizes
its plan sends (the plan is made again with that line).

With --shared-processors N the ranks share N cores (the cluster file's
shared_processors): the plan report simulates processor sharing, so more
ranks than cores are predicted from the profile of one rank alone.

With --pack DIR nothing runs after the one-device profile: the programs of
every device count (planned with this machine's profile) go to DIR with
their inputs and a manifest, for another machine (one with a core per
rank) without the toolchain; python/run_packed_ranks.py runs them there
(the link measured, then --repeats alternating runs of each device count,
each timed once more with --write-profile) and --results RESULTS, given the
same --work, sets each device count's median step against the predictions
from that machine's profiles: the one-rank run's (one device's op times)
and the d-rank run's own (each op timed under the others' load), with the
link fitted to that machine's measured one-way times.
"""
import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys

from check_generated import build
from check_pipeline import data_flags, export_micro_and_whole
from compare import run


SHARED_PROCESSORS = 0


def cpu_cluster(work, devices, link_bandwidth, link_latency):
    """`devices` CPU ranks of one node: a custom kind whose op times come
    from the profile (the roofline figures only cover what it lacks). With
    --shared-processors the node's ranks share that many cores (one kernel
    thread each): the plan report simulates processor sharing."""
    path = os.path.join(work, f"cpu{devices}.json")
    node = {"name": "n0", "devices": [{
        "kind": "cpu", "count": devices,
        "peak_flops": {"f32": "50GFLOPS"},
        "memory_bytes": "8GiB", "memory_bandwidth": "10GB/s"}]}
    if SHARED_PROCESSORS > 0:
        node["shared_processors"] = SHARED_PROCESSORS
    with open(path, "w") as f:
        json.dump({"nodes": [node],
                   "links": {"intra_node": {"bandwidth": link_bandwidth,
                                            "latency": link_latency}}}, f)
    return path


def fit_link(pair, sizes=None):
    """(bandwidth, latency) strings of the line latency + bytes / bandwidth
    with the least squared relative error through `pair`'s one-way times
    (train --measure-links), over the sizes within 4x of `sizes` (the
    messages a plan sends; at least the two nearest sizes) or all of them;
    and the line's worst relative error there."""
    points = list(zip(pair["bytes"], pair["one_way_us"]))
    if sizes:
        low, high = min(sizes) / 4, max(sizes) * 4
        near = [p for p in points if low <= p[0] <= high]
        if len(near) < 2:
            middle = (min(sizes) * max(sizes)) ** 0.5
            near = sorted(points, key=lambda p: abs(
                (p[0] / middle) - 1 if p[0] > middle else middle / p[0] - 1))
            near = sorted(near[:2])
        points = near
    sw = sb = st = sbb = sbt = 0.0
    for b, t in points:
        w = 1 / (t * t)
        sw, sb, st = sw + w, sb + w * b, st + w * t
        sbb, sbt = sbb + w * b * b, sbt + w * b * t
    denominator = sw * sbb - sb * sb
    slope = (sw * sbt - sb * st) / denominator if denominator > 0 else 0
    intercept = (st - slope * sb) / sw
    if slope <= 0 or intercept <= 0:
        intercept = points[0][1]
        slope = max(points[-1][1] - intercept, 1e-6) / max(points[-1][0], 1)
    worst = max(abs((intercept + slope * b) / t - 1) for b, t in points)
    return (f"{1e-3 / slope:.4g}GB/s", f"{intercept:.4g}us",
            [b for b, _ in points], worst)


def cut_bytes(pipeline_opt, mlir, cluster, profile, work):
    """The bytes of each message between the stages of the plan in
    `mlir` (its report's cuts)."""
    out = os.path.join(work, "cuts")
    run([pipeline_opt, mlir, f"--pp-plan-report=cluster={cluster} "
         f"profile={profile} summary= dir={out}", "-o", os.devnull])
    plan = json.load(open(os.path.join(out, "plan.json")))
    return sorted({cut["bytes"] for cut in plan["cuts"]})


def averaged_profile(paths, out, statistic="mean"):
    """Writes to `out` the profile whose every time is the mean (or the
    median) of the profiles at `paths` (same program, so the same nodes and
    fields)."""
    profiles = [json.load(open(path)) for path in paths]
    merged = json.loads(json.dumps(profiles[0]))
    for kind, nodes in merged.items():
        for node, fields in nodes.items():
            for field, value in fields.items():
                if isinstance(value, (int, float)):
                    values = sorted(p[kind][node][field] for p in profiles)
                    fields[field] = (sum(values) / len(values)
                                     if statistic == "mean" else
                                     values[len(values) // 2])
    with open(out, "w") as f:
        json.dump(merged, f, indent=1)


def timed_runs(command, runs, path):
    """Runs the profiling `command` (a list with a --write-profile= entry)
    `runs` times one after the other and writes the per-node median of
    their profiles to `path` (a run in a slow spell of the machine does not
    move it); returns the last run's output."""
    if runs == 1:
        return run([f"--write-profile={path}"
                    if arg.startswith("--write-profile=") else arg
                    for arg in command])
    paths = [f"{path}.run{r}" for r in range(runs)]
    for p in paths:
        out = run([f"--write-profile={p}"
                   if arg.startswith("--write-profile=") else arg
                   for arg in command])
    averaged_profile(paths, path, statistic="median")
    print(f"profile: per-op median of {runs} runs written to {path}")
    return out


def profile_under_load(command, copies, path):
    """Runs `copies` instances of the profiling `command` (a list whose
    --write-profile= entry is replaced per copy) at once and writes their
    averaged profile to `path`."""
    paths = [f"{path}.{copy}" for copy in range(copies)]
    procs = [subprocess.Popen(
        [f"--write-profile={p}" if arg.startswith("--write-profile=") else arg
         for arg in command], stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True) for p in paths]
    for proc in procs:
        out, _ = proc.communicate()
        if proc.returncode != 0:
            sys.exit(f"profiling under load exited {proc.returncode}:\n"
                     f"{out[-2000:]}")
    averaged_profile(paths, path)


def report_step(pipeline_opt, mlir, cluster, profile, log):
    """The plan report's measured and predicted step of `log`."""
    report = run([pipeline_opt, mlir,
                  f"--pp-plan-report=cluster={cluster} profile={profile} "
                  f"measured-log={log}", "-o", os.devnull])
    found = re.search(r"step ([0-9.]+) ms, predicted ([0-9.]+) ms", report)
    if not found:
        sys.exit(f"the plan report has no measured comparison:\n{report}")
    return float(found.group(1)), float(found.group(2))


def median(values):
    """The middle value (the upper one of an even count)."""
    return sorted(values)[len(values) // 2]


def median_step(log):
    """The median step time of a --log after its first step."""
    return median([json.loads(line)["step_ms"]
                   for line in open(log).read().splitlines()[1:]])


def pack_program(pack, name, train):
    """Copies the program `train` (its executable and data file) to
    pack/name."""
    out = os.path.join(pack, name)
    os.makedirs(out, exist_ok=True)
    for f in (train, os.path.join(os.path.dirname(os.path.dirname(train)),
                                  "program.data")):
        shutil.copy2(f, out)


def write_pack_manifest(args, programs, files):
    """pack/manifest.json: what run_packed_ranks.py runs; work/packed.json:
    what --results needs of this machine's plans."""
    inputs = []
    for f in files:
        shutil.copy2(f, args.pack)
        inputs.append(os.path.basename(f))
    manifest = {"model": args.model, "steps": args.steps,
                "repeats": max(args.repeats, 1), "inputs": inputs,
                "programs": {}}
    for d, (mlir, _) in programs.items():
        manifest["programs"][str(d)] = {
            "dir": f"1f1b-{d}",
            # NAME=FILE of each input, FILE in the pack.
            "data": [f"{name}={os.path.basename(path)}" for name, path in
                     (flag[len("--data="):].split("=", 1)
                      for flag in data_flags(mlir, files))]}
    with open(os.path.join(args.pack, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    with open(os.path.join(args.work, "packed.json"), "w") as f:
        json.dump({"model": args.model, "microbatches": args.microbatches,
                   "programs": {str(d): list(p) for d, p in
                                programs.items()}}, f, indent=1)
    print(f"{args.model}: programs of {', '.join(map(str, programs))} "
          f"devices packed in {args.pack}")


def packed_results(args):
    """Sets the runs of a pack (run_packed_ranks.py's output in
    args.results) against the plan report's predictions from the profiles
    timed in them; returns whether an error exceeds --max-error."""
    packed = os.path.join(args.work, "packed.json")
    if not os.path.exists(packed):
        sys.exit(f"--results: {packed} does not exist: --work must be the "
                 "directory of a --pack run")
    state = json.load(open(packed))
    model, m = state["model"], state["microbatches"]
    results = os.path.join(args.results, model)
    if not os.path.exists(os.path.join(results, "manifest.json")):
        sys.exit(f"--results: {results} holds no runs of {model} "
                 "(python/run_packed_ranks.py OUT writes OUT/<model>)")
    manifest = json.load(open(os.path.join(results, "manifest.json")))
    links = os.path.join(results, "links.json")
    pair = json.load(open(links))["pairs"][0] if os.path.exists(links) \
        else None
    info = os.path.join(args.results, "machine.txt")
    if os.path.exists(info):
        print(open(info).read().strip())

    def predicted_step(mlir, cluster, profile, log):
        return report_step(args.pipeline_opt, mlir, cluster, profile, log)[1]

    repeats = manifest["repeats"]
    one_rank = [os.path.join(results, f"repeat-1-{r}-profile.json")
                for r in range(repeats)]
    failed = False
    measured = {}
    for d, (mlir, cluster) in sorted(state["programs"].items(),
                                     key=lambda kv: int(kv[0])):
        d = int(d)
        logs = [os.path.join(results, f"repeat-{d}-{r}.jsonl")
                for r in range(repeats)]
        profiles = [os.path.join(results, f"repeat-{d}-{r}-profile.json")
                    for r in range(repeats)]
        missing = [p for p in logs + profiles if not os.path.exists(p)]
        if missing:
            sys.exit(f"--results: {model} on {d} ranks: {missing[0]} is "
                     "missing (a run failed?)")
        if pair and d > 1:
            # The plan is fixed: any of its profiles gives the cut sizes.
            sizes = cut_bytes(args.pipeline_opt, mlir, cluster, profiles[0],
                              args.work)
            bandwidth, latency, used, worst = fit_link(pair, sizes)
            print(f"{model} 1f1b-{d}: messages of {sizes[0]} to {sizes[-1]} "
                  f"B: measured link {latency}, {bandwidth} over {used[0]} "
                  f"to {used[-1]} B (worst error {worst * 100:.0f}%)")
            cluster = cpu_cluster(args.work, d, bandwidth, latency)
        steps = [median_step(log) for log in logs]
        step = median(steps)
        measured[d] = (step, steps)
        owns = [predicted_step(mlir, cluster, profile, log)
                for profile, log in zip(profiles, logs)]
        own = median(owns)
        # Each round's prediction against its own run (timed one after the
        # other): the machine's speed drifts less within a round.
        paired = [p / s - 1 for p, s in zip(owns, steps)]
        line = (f"{model} 1f1b-{d}: median of {repeats} alternating runs "
                f"{step:.3f} ms (" + ", ".join(f"{s:.2f}" for s in steps) +
                f"); predicted from the {d}-rank runs' profiles {own:.3f} ms "
                f"({(own / step - 1) * 100:+.1f}%; per round " +
                ", ".join(f"{e * 100:+.1f}%" for e in paired) +
                f", median {median(paired) * 100:+.1f}%)")
        error = own / step - 1
        if d > 1 and os.path.exists(one_rank[0]):
            one = median([predicted_step(mlir, cluster, p, logs[r])
                          for r, p in enumerate(one_rank)])
            line += (f", from the 1-rank runs' profiles {one:.3f} ms "
                     f"({(one / step - 1) * 100:+.1f}%)")
        print(line)
        if args.max_error is not None and abs(error) > args.max_error:
            print(f"{model} 1f1b-{d}: |error| {abs(error):.3f} > "
                  f"{args.max_error}")
            failed = True
        if d > 1 and 1 in measured:
            ideal = d * m / (m + d - 1)
            speedups = [a / b for a, b in zip(measured[1][1], steps)]
            speedup = measured[1][0] / step
            print(f"{model} 1f1b-{d}: speed-up over 1 rank {speedup:.3f}x, "
                  f"{speedup / ideal * 100:.1f}% of the ideal 1F1B "
                  f"{ideal:.3f}x (per run: "
                  + ", ".join(f"{x:.3f}x" for x in speedups) + ")")
    return failed


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", required=True)
    parser.add_argument("--pipeline-opt", default="pipeline-opt")
    parser.add_argument("--pp-interpret", default="pp-interpret")
    parser.add_argument("--work", required=True)
    parser.add_argument("--mpirun", default="mpirun")
    parser.add_argument("--devices", default="1,2",
                        help="comma-separated device (rank) counts")
    parser.add_argument("--micro-batch", type=int, default=4)
    parser.add_argument("--microbatches", type=int, default=4)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--profile-steps", type=int, default=11)
    parser.add_argument("--profile-runs", type=int, default=1,
                        help="generated profiles: time the program this "
                        "many times and take each op's median")
    parser.add_argument("--profile-from", default="generated",
                        choices=["generated", "interpreter"],
                        help="time the ops in the generated program of one "
                        "device (train --write-profile) or in pp-interpret "
                        "(--write-profile)")
    parser.add_argument("--link-bandwidth", default="5GB/s")
    parser.add_argument("--link-latency", default="20us")
    parser.add_argument("--measure-link", action="store_true",
                        help="time messages between 2 ranks (train "
                        "--measure-links under mpirun) and use, for each "
                        "device count, the line fitted to the sizes its "
                        "plan sends instead of --link-bandwidth and "
                        "--link-latency")
    parser.add_argument("--profile-load", default="none",
                        choices=["none", "ranks", "pipeline"],
                        help="ranks: for d devices, profile with d copies "
                        "of the one-device program running at once; "
                        "pipeline: profile the d-rank program planned with "
                        "the one-device profile, then plan again with it "
                        "(generated profiles only)")
    parser.add_argument("--repeats", type=int, default=0,
                        help="run every program this many more times, "
                        "alternating; print the median step against the "
                        "prediction and (with 1 among --devices) the "
                        "speed-up over 1 rank")
    parser.add_argument("--shared-processors", default="0",
                        help="the cores the ranks share (a number, or "
                        "'auto': this machine's): the cluster file says so "
                        "and the plan report simulates processor sharing "
                        "(use with the one-device profile, --profile-load "
                        "none); 0: each rank has a core of its own")
    parser.add_argument("--pack", default=None,
                        help="plan and build the programs, do not run "
                        "them: copy them to this directory for "
                        "python/run_packed_ranks.py on another machine")
    parser.add_argument("--results", default=None,
                        help="the output directory of "
                        "python/run_packed_ranks.py for this --work's "
                        "--pack: predictions against its runs")
    parser.add_argument("--max-error", type=float, default=None,
                        help="fail when |predicted / measured - 1| exceeds "
                        "this (e.g. 0.05)")
    args = parser.parse_args()
    global SHARED_PROCESSORS
    SHARED_PROCESSORS = (os.cpu_count() if args.shared_processors == "auto"
                         else float(args.shared_processors))
    os.makedirs(args.work, exist_ok=True)
    if args.results:
        sys.exit(1 if packed_results(args) else 0)
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    m = args.microbatches

    micro_dir, whole_dir = export_micro_and_whole(
        args.model, args.work, args.micro_batch, m, "float32")
    model = os.path.join(micro_dir, "model.onnx")

    files = [os.path.join(whole_dir, "input.npy"),
             os.path.join(whole_dir, "labels.npy")]
    profile = os.path.join(args.work, "profile.json")
    if args.profile_from == "interpreter":
        # The training step at the micro-batch size on the interpreter; the
        # node names (locations) key the profile: printed with the module.
        step = os.path.join(args.work, "step.mlir")
        run([args.pipeline_opt, model, "--pp-training-step=lr=0.01",
             "--mlir-print-debuginfo", "-o", step])
        out = run([args.pp_interpret, step, "--random-inputs",
                   f"--steps={args.profile_steps}",
                   f"--write-profile={profile}", "--profile-kind=cpu"])
    else:
        # The generated program of the whole model on one device, every op
        # timed (train --write-profile).
        cluster = cpu_cluster(args.work, 1, args.link_bandwidth,
                              args.link_latency)
        program = os.path.join(args.work, "profile-program")
        mlir = os.path.join(args.work, "profile-program.mlir")
        run([args.pipeline_opt, model,
             f"--pp-compile=cluster={cluster} schedule=1f1b "
             f"microbatches={m} lr=0.01 report= emit-dir={program}",
             "-o", mlir])
        profile_command = ([build(program), "--local", "--threads=1",
                            f"--steps={args.profile_steps}",
                            f"--write-profile={profile}",
                            "--profile-kind=cpu"] + data_flags(mlir, files))
        out = timed_runs(profile_command, args.profile_runs, profile)
    print(next(line for line in out.splitlines()
               if line.startswith("profile: ")))
    link_pair = None
    if args.measure_link:
        if args.profile_from != "generated":
            sys.exit("--measure-link needs --profile-from=generated (the "
                     "generated program measures the link)")
        links = os.path.join(args.work, "links.json")
        run(shlex.split(args.mpirun) + ["-np", "2", profile_command[0],
                                        f"--measure-links={links}"])
        link_pair = json.load(open(links))["pairs"][0]
        bandwidth, latency, _, worst = fit_link(link_pair)
        args.link_bandwidth, args.link_latency = bandwidth, latency
        print(f"link: measured between 2 ranks: {latency}, {bandwidth} over "
              f"{link_pair['bytes'][0]} B to {link_pair['bytes'][-1]} B "
              f"(worst fit error {worst * 100:.0f}%)")
    nodes = json.load(open(profile))["cpu"]
    backward = sum(1 for t in nodes.values() if "backward_ms" in t)
    print(f"{args.model}: profile ({args.profile_from}) of {len(nodes)} "
          f"nodes, {backward} with a backward time")

    if args.profile_load != "none" and args.profile_from != "generated":
        sys.exit(f"--profile-load={args.profile_load} needs "
                 "--profile-from=generated")
    failed = False
    one_device_profile = profile
    steps = {}
    predictions = {}
    launches = {}
    programs = {}

    def compile_program(name, cluster, profile):
        program = os.path.join(args.work, name)
        mlir = os.path.join(args.work, name + ".mlir")
        run([args.pipeline_opt, model,
             f"--pp-compile=cluster={cluster} schedule=1f1b "
             f"microbatches={m} lr=0.01 profile={profile} report= "
             f"emit-dir={program}", "--mlir-print-debuginfo", "-o", mlir])
        return build(program), mlir

    for devices in [int(d) for d in args.devices.split(",")]:
        name = f"1f1b-{devices}"
        if args.profile_load == "pipeline":
            profile = one_device_profile
        if args.profile_load == "pipeline" and devices > 1:
            # The program planned with the one-device profile, each op timed
            # on its rank while the others run theirs.
            cluster = cpu_cluster(args.work, devices, args.link_bandwidth,
                                  args.link_latency)
            train, mlir = compile_program(name + "-first", cluster,
                                          one_device_profile)
            profile = os.path.join(args.work, f"profile-{devices}.json")
            out = timed_runs(shlex.split(args.mpirun) + [
                "-np", str(devices), train, f"--steps={args.profile_steps}",
                f"--write-profile={profile}", "--profile-kind=cpu",
                "--threads=1"] + data_flags(mlir, files), args.profile_runs,
                profile)
            print(f"{args.model} {name}: profile measured in the pipeline "
                  f"of {devices} ranks planned with the one-device profile: "
                  + next(line for line in out.splitlines()
                         if line.startswith("profile: ")))
        if args.profile_load == "ranks":
            # Ranks beyond the cores time-share them: that is not a slower
            # op but a rank that waits, which a per-op profile cannot hold.
            copies = min(devices, os.cpu_count() or 1)
            profile = os.path.join(args.work, f"profile-{devices}.json")
            profile_under_load(profile_command, copies, profile)
            print(f"{args.model} {name}: profile measured under the load of "
                  f"{copies} copies")
        cluster = cpu_cluster(args.work, devices, args.link_bandwidth,
                              args.link_latency)
        train, mlir = compile_program(name, cluster, profile)
        if link_pair and devices > 1:
            # The line through the sizes this plan sends (a memory hierarchy
            # bends the whole range's curve); a new plan if it moves.
            sizes = cut_bytes(args.pipeline_opt, mlir, cluster, profile,
                              args.work)
            bandwidth, latency, used, worst = fit_link(link_pair, sizes)
            print(f"{args.model} {name}: messages of {sizes[0]} to "
                  f"{sizes[-1]} B: link {latency}, {bandwidth} fitted over "
                  f"{used[0]} to {used[-1]} B (worst error "
                  f"{worst * 100:.0f}%)")
            cluster = cpu_cluster(args.work, devices, bandwidth, latency)
            train, mlir = compile_program(name, cluster, profile)
        programs[devices] = (mlir, cluster)
        if args.pack:
            pack_program(args.pack, name, train)
            continue
        log = os.path.join(args.work, name + ".jsonl")
        if os.path.exists(log):
            os.remove(log)
        launches[devices] = (shlex.split(args.mpirun) + [
            "-np", str(devices), train, f"--steps={args.steps}",
            "--threads=1"] + data_flags(mlir, files))
        run(launches[devices] + [f"--log={log}"])
        report = run([args.pipeline_opt, mlir,
                      f"--pp-plan-report=cluster={cluster} profile={profile} "
                      f"measured-log={log}", "-o", os.devnull])
        coverage = re.search(r"cost model: profile \S+ measured (\d+) of "
                             r"(\d+) op times", report)
        found = re.search(r"step ([0-9.]+) ms, predicted ([0-9.]+) ms", report)
        if not coverage or not found:
            sys.exit(f"{name}: the plan report has no measured comparison:\n"
                     f"{report}")
        measured, predicted = float(found.group(1)), float(found.group(2))
        error = predicted / measured - 1
        print(f"{args.model} {name}: profile covers {coverage.group(1)} of "
              f"{coverage.group(2)} op times; step measured {measured:.3f} "
              f"ms, predicted {predicted:.3f} ms ({error * 100:+.1f}%)")
        for line in report.splitlines():
            if line.strip().startswith("device ") and "predicted" in line:
                print(f"  {line.strip()}")
        steps[devices] = measured
        predictions[devices] = predicted
        if devices > 1 and 1 in steps:
            ideal = devices * m / (m + devices - 1)
            speedup = steps[1] / measured
            print(f"{args.model} {name}: speed-up over 1 rank {speedup:.3f}x, "
                  f"{speedup / ideal * 100:.1f}% of the ideal 1F1B "
                  f"{ideal:.3f}x")
        if args.max_error is not None and abs(error) > args.max_error:
            print(f"{args.model} {name}: |error| {abs(error):.3f} > "
                  f"{args.max_error}")
            failed = True
    if args.pack:
        write_pack_manifest(args, programs, files)
        return
    if args.repeats > 0:
        # Each repeat runs every program twice: once measured, once timing
        # its ops (--write-profile). The profiles of the repeats predict the
        # program as the plan's profile did, from other runs of the same
        # period: the machine's speed drifts by more than 5% over minutes.
        medians = {d: [] for d in launches}
        repredicted = {d: [] for d in launches}
        for repeat in range(args.repeats):
            for d, command in launches.items():
                log = os.path.join(args.work, f"repeat-{d}-{repeat}.jsonl")
                if os.path.exists(log):
                    os.remove(log)
                run(command + [f"--log={log}"])
                medians[d].append(median_step(log))
                timed = os.path.join(args.work,
                                     f"repeat-{d}-{repeat}-profile.json")
                run(command + [f"--write-profile={timed}",
                               "--profile-kind=cpu"])
                mlir, cluster = programs[d]
                repredicted[d].append(report_step(
                    args.pipeline_opt, mlir, cluster, timed, log)[1])

        for d in launches:
            step = median(medians[d])
            again = median(repredicted[d])
            print(f"{args.model} 1f1b-{d}: over {args.repeats} "
                  f"alternating runs, median step {step:.3f} ms, predicted "
                  f"{predictions[d]:.3f} ms "
                  f"({(predictions[d] / step - 1) * 100:+.1f}%), from the "
                  f"profiles timed between them {again:.3f} ms "
                  f"({(again / step - 1) * 100:+.1f}%)")
        for d in launches:
            if d == 1 or 1 not in launches:
                continue
            one = median(medians[1])
            step = median(medians[d])
            ideal = d * m / (m + d - 1)
            print(f"{args.model} 1f1b-{d}: over {args.repeats} "
                  f"alternating runs, median step 1 rank {one:.3f} ms, {d} "
                  f"ranks {step:.3f} ms: speed-up {one / step:.3f}x, "
                  f"{one / step / ideal * 100:.1f}% of the ideal {ideal:.3f}x "
                  f"(per run: "
                  + ", ".join(f"{a / b:.3f}x" for a, b in
                              zip(medians[1], medians[d])) + ")")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
