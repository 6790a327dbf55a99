"""Runs the programs that python/check_profile.py --pack packed, on a
machine without the toolchain (e.g. a GPU node's CPUs, a core per rank).

    run_packed_ranks.py OUT PACK [PACK...] [--mpirun "mpirun ..."]

For each pack (one model, the 1F1B programs of several device counts):
the link between 2 ranks (train --measure-links), then --repeats rounds
(the manifest's) in which every device count runs once with --log and once
with --write-profile, alternating, so a slow spell of the machine falls on
all of them. Everything goes to OUT/<model>/ (with the manifest);
OUT/machine.txt says what ran it. check_profile.py --results OUT, with the
--work of the pack, sets the runs against the predictions. Needs only the
standard library. Exits non-zero when a run failed (the others still run).
"""
import argparse
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys


def machine_summary():
    """The processor and core count of this machine, for the figures."""
    model = platform.processor() or "unknown processor"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (f"machine: {model}, {os.cpu_count()} logical CPUs, "
            f"{len(os.sched_getaffinity(0))} usable")


def run_logged(label, command, timeout):
    """Runs `command`; True when it exits 0 (the command and its output
    printed if not)."""
    print(label, flush=True)
    failure = None
    try:
        proc = subprocess.run(command, capture_output=True, text=True,
                              timeout=timeout)
        if proc.returncode != 0:
            failure = (f"exited {proc.returncode}:\n{proc.stdout[-3000:]}"
                       f"{proc.stderr[-3000:]}")
    except subprocess.TimeoutExpired:
        failure = f"timed out after {timeout} s"
    if failure:
        print("  " + " ".join(shlex.quote(c) for c in command) + "\n  " +
              failure, flush=True)
    return failure is None


def run_pack(pack, out_root, mpirun, timeout):
    manifest = json.load(open(os.path.join(pack, "manifest.json")))
    out = os.path.join(out_root, manifest["model"])
    os.makedirs(out, exist_ok=True)
    shutil.copy2(os.path.join(pack, "manifest.json"), out)
    programs = {int(d): p for d, p in manifest["programs"].items()}
    ok = True

    def launch(d):
        program = programs[d]
        data = []
        for entry in program["data"]:
            name, file = entry.split("=", 1)
            data.append(f"--data={name}={os.path.join(pack, file)}")
        return mpirun + ["-np", str(d),
                         os.path.join(pack, program["dir"], "train"),
                         f"--steps={manifest['steps']}",
                         "--threads=1"] + data

    if any(d > 1 for d in programs):
        two = 2 if 2 in programs else max(programs)
        ok &= run_logged(
            f"{manifest['model']}: link between 2 ranks",
            mpirun + ["-np", "2",
                      os.path.join(pack, programs[two]["dir"], "train"),
                      f"--measure-links={os.path.join(out, 'links.json')}"],
            timeout)
    for repeat in range(manifest["repeats"]):
        for d in sorted(programs):
            log = os.path.join(out, f"repeat-{d}-{repeat}.jsonl")
            if os.path.exists(log):
                os.remove(log)
            label = f"{manifest['model']}: {d} rank(s), round {repeat}"
            ok &= run_logged(label + ", timed", launch(d) + [f"--log={log}"],
                             timeout)
            profile = os.path.join(out, f"repeat-{d}-{repeat}-profile.json")
            ok &= run_logged(label + ", profiled", launch(d) + [
                f"--write-profile={profile}", "--profile-kind=cpu"], timeout)
    return ok


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("out")
    parser.add_argument("packs", nargs="+")
    parser.add_argument("--mpirun", default="mpirun --bind-to core",
                        help="the launcher and its options (one rank a "
                        "core: --bind-to core)")
    parser.add_argument("--timeout", type=int, default=300,
                        help="seconds one run may take")
    args = parser.parse_args()
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    os.makedirs(args.out, exist_ok=True)
    summary = machine_summary()
    print(summary, flush=True)
    with open(os.path.join(args.out, "machine.txt"), "w") as f:
        f.write(summary + "\n")
    ok = True
    for pack in args.packs:
        ok &= run_pack(pack, args.out, shlex.split(args.mpirun), args.timeout)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
