"""Checks a generated program's Wave Synchronous Parallel run against an oracle.

Compiles a test model with --pp-compile dp=N staleness=D wave=K (N virtual
workers, VWs, of --stages devices each), trains the generated program
under mpirun (or --local) with --wsp-log, optionally slowing chosen ranks
(--delay RANK:MS, the program's --test-delay), and then:
  - checks the logs against the WSP rules: every VW started each wave at
    most D waves ahead of the global clock (clock - pulled-through <= D),
    and a pull through wave g happened only after every VW had pushed wave
    g (wall-clock times of the one node's processes);
  - replays the logged order with the rules, step by step: each VW's step
    is the training step on that VW's micro-batches (pp-interpret
    --load-globals / --dump-globals; with a weight-versioned --schedule,
    check_versioned's rule over one VW's pipeline, each stage function by
    pp-interpret, drained every step), its wave update U = W - W(wave start)
    over the trainable globals, a pull through g adds sum over VWs of U_g
    minus its own U_g; and compares every logged loss of every VW and the
    final globals (VW 0's, which after the last pull hold every update) with
    the program's.
A tensor passes when max|ours - oracle| <= rtol * max|oracle| + atol.
Prints per VW the waves, the largest staleness seen and the time waited.
"""
import argparse
import json
import os
import re
import shlex
import shutil
import sys

import numpy as np

from check_generated import build
from check_pipeline import (compile_pipeline, data_flags,
                            export_micro_and_whole,
                            unsplit_step)
from compare import Comparison, load_globals, run


def read_log(path):
    return [json.loads(line) for line in open(path)]


def check_rules(logs, staleness):
    """Failures of the logged events against the WSP rules."""
    failures = []
    pushed = {}  # (vw, wave) -> time
    for vw, events in enumerate(logs):
        for e in events:
            if e["event"] == "push":
                pushed[(vw, e["wave"])] = e["time"]
    for vw, events in enumerate(logs):
        for e in events:
            if e["event"] != "pull":
                continue
            if e["clock"] - e["through"] > staleness:
                failures.append(f"VW {vw}: wave {e['clock'] + 1} started "
                                f"{e['clock'] - e['through']} waves ahead "
                                f"(bound {staleness})")
            g = e["through"]
            for other in range(len(logs)):
                if g > 0 and (other, g) not in pushed:
                    failures.append(f"VW {vw} pulled wave {g}, which VW "
                                    f"{other} never pushed")
                elif g > 0 and pushed[(other, g)] > e["time"]:
                    failures.append(f"VW {vw} pulled wave {g} before VW "
                                    f"{other} pushed it")
    return failures


def trainable_names(mlir):
    return set(re.findall(r'onnx\.global "trainable" @"?([^"\s:]+)"?',
                          open(mlir).read()))


def save_state(state, directory):
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "globals.txt"), "w") as index:
        for i, (name, value) in enumerate(state.items()):
            np.save(os.path.join(directory, f"g{i}.npy"), value)
            index.write(f"{name}\tg{i}.npy\n")


def run_program(args, program, mlir, name, files, vws):
    """Builds the generated program in `program` and trains it --steps steps
    with --wsp-log (and --test-delay, --checkpoint-every as `args` say)
    under mpirun or --local; (its output, the log directory, the dump of
    its final globals)."""
    train = build(program)
    log_dir = os.path.join(args.work, name + ".wsp")
    dump = os.path.join(args.work, name + ".generated")
    shutil.rmtree(log_dir, ignore_errors=True)
    shutil.rmtree(os.path.join(args.work, "ckpt"), ignore_errors=True)
    cmd = [train, f"--steps={args.steps}", f"--dump-globals={dump}",
           f"--wsp-log={log_dir}"] + data_flags(mlir, files) + [
        f"--test-delay={d}" for d in args.delay]
    if args.checkpoint_every:
        cmd += [f"--checkpoint-every={args.checkpoint_every}",
                f"--checkpoint={os.path.join(args.work, 'ckpt')}"]
    if args.launch == "mpi":
        cmd = shlex.split(args.mpirun) + ["-np", str(args.stages * vws)] + cmd
    else:
        cmd.append("--local")
    return run(cmd), log_dir, dump


class Oracle:
    """Replays the logged WSP events with the rules."""

    def __init__(self, pp_interpret, mlir, work, inputs, initial, trainable):
        self.pp_interpret, self.mlir, self.work = pp_interpret, mlir, work
        self.inputs = inputs  # per VW: [--input=... flags]
        self.trainable = trainable
        n = len(inputs)
        self.state = [dict(initial) for _ in range(n)]
        self.start = [{k: initial[k].copy() for k in trainable}
                      for _ in range(n)]
        self.own = [{} for _ in range(n)]  # wave -> U
        self.applied = [0] * n
        self.losses = [[] for _ in range(n)]
        self.runs = 0

    def step(self, vw):
        here = os.path.join(self.work, f"vw{vw}")
        save_state(self.state[vw], here + ".in")
        shutil.rmtree(here + ".out", ignore_errors=True)
        out = run([self.pp_interpret, self.mlir, "--steps=1",
                   f"--load-globals={here}.in",
                   f"--dump-globals={here}.out"] + self.inputs[vw])
        self.runs += 1
        self.losses[vw].append(float(re.search(r"step 1 loss (\S+)",
                                               out).group(1)))
        self.state[vw] = load_globals(here + ".out")

    def push(self, vw, wave):
        self.own[vw][wave] = {k: self.state[vw][k] - self.start[vw][k]
                              for k in self.trainable}
        self.start[vw] = {k: self.state[vw][k].copy()
                          for k in self.trainable}

    def can_pull(self, through):
        return all(through in own or through <= applied
                   for own, applied in zip(self.own, self.applied))

    def pull(self, vw, through):
        for g in range(self.applied[vw] + 1, through + 1):
            total = None
            for other in range(len(self.own)):
                u = self.own[other][g]
                total = dict(u) if total is None else {
                    k: total[k] + u[k] for k in self.trainable}
            for k in self.trainable:
                self.state[vw][k] = (self.state[vw][k] +
                                     (total[k] - self.own[vw][g][k]))
        self.applied[vw] = max(self.applied[vw], through)
        self.start[vw] = {k: self.state[vw][k].copy()
                          for k in self.trainable}

    def replay(self, logs):
        """Advances each VW through its events while it can; None, or why
        the order cannot have happened."""
        position = [0] * len(logs)
        while True:
            moved = False
            for vw, events in enumerate(logs):
                while position[vw] < len(events):
                    e = events[position[vw]]
                    if e["event"] == "step":
                        self.step(vw)
                    elif e["event"] == "push":
                        self.push(vw, e["wave"])
                    elif e["event"] == "pull":
                        if not self.can_pull(e["through"]):
                            break
                        self.pull(vw, e["through"])
                    position[vw] += 1
                    moved = True
            if all(p == len(e) for p, e in zip(position, logs)):
                return None
            if not moved:
                return f"the logged pulls wait on each other at {position}"


class VersionedOracle(Oracle):
    """The WSP rules over VWs that each run a weight-versioned schedule,
    drained at every step: a VW's step is the schedule's rule (one window
    of check_versioned.Oracle over that VW's micro-batches) from its
    current weights and optimizer state, each stage on its own copy."""

    def __init__(self, pp_interpret, mlir, work, inputs, p, m, n, rule):
        from check_versioned import Oracle as StageOracle
        self.vws = [StageOracle(pp_interpret, mlir,
                                os.path.join(work, f"vw{v}-stages"), whole,
                                p, m, n)
                    for v, whole in enumerate(inputs)]
        self.rule, self.m = rule, m
        super().__init__(pp_interpret, mlir, work, [[]] * len(inputs),
                         self.vws[0].final(), self.vws[0].trainable)
        self.steps = [0] * len(inputs)

    def step(self, vw):
        stages = self.vws[vw]
        for state in stages.state:  # the pulled waves reach every copy
            for key in state:
                if key in self.state[vw]:
                    state[key] = self.state[vw][key]
        forward, backward = self.rule(self.m)
        losses = []
        stages.window(self.steps[vw], 1, forward, backward, losses)
        self.steps[vw] += 1
        self.runs = sum(o.runs for o in self.vws)
        self.losses[vw].extend(losses)
        self.state[vw] = stages.final()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--pipeline-opt", default="pipeline-opt")
    parser.add_argument("--pp-interpret", default="pp-interpret")
    parser.add_argument("--mpirun", default="mpirun --allow-run-as-root "
                        "--oversubscribe")
    parser.add_argument("--launch", choices=["mpi", "local"], default="mpi")
    parser.add_argument("--stages", type=int, default=2)
    parser.add_argument("--dp", type=int, default=2)
    parser.add_argument("--staleness", type=int, required=True)
    parser.add_argument("--wave", type=int, default=1)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--micro-batch", type=int, default=2)
    parser.add_argument("--microbatches", type=int, default=2)
    parser.add_argument("--optimizer", default="lr=0.05 momentum=0.9")
    parser.add_argument("--schedule", default="1f1b",
                        help="each VW's schedule; a weight-versioned one "
                        "is replayed by check_versioned's rule, drained "
                        "every step")
    parser.add_argument("--update-every", type=int, default=0)
    parser.add_argument("--rule-schedule", default=None,
                        help="replay another schedule's version rule (a "
                        "negative control: the check must then fail)")
    parser.add_argument("--delay", action="append", default=[],
                        help="RANK:MS, passed as --test-delay")
    parser.add_argument("--checkpoint-every", type=int, default=0)
    parser.add_argument("--reference", choices=["unsplit", "one-stage"],
                        default="unsplit")
    parser.add_argument("--hetero", action="store_true",
                        help="make the devices P4000s and the last an H100, "
                        "so that the VWs get partitions of their own")
    parser.add_argument("--rtol", type=float, default=1e-4)
    parser.add_argument("--atol", type=float, default=1e-6)
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    m, n = args.microbatches, args.dp

    # The program's model at the micro-batch size, a VW's batch for the
    # oracle's step, and the global batch holding every VW's micro-batches.
    micro_dir, vw_dir = export_micro_and_whole(
        args.model, os.path.join(args.work, "vw-batch"), args.micro_batch, m)
    _, whole_dir = export_micro_and_whole(
        args.model, args.work, args.micro_batch, m * n)
    name = f"wsp-{args.schedule}-d{args.staleness}-k{args.wave}"
    program = os.path.join(args.work, name)
    versioned = args.schedule not in ("1f1b", "gpipe")
    extra = (f" update-every={args.update_every}" if versioned else "")
    mlir = compile_pipeline(
        args.pipeline_opt, os.path.join(micro_dir, "model.onnx"), args.work,
        name, args.schedule, args.stages, "none", m, args.optimizer,
        f" report= emit-dir={program} staleness={args.staleness} "
        f"wave={args.wave}{extra}", dp=n, hetero=args.hetero)
    files = [os.path.join(whole_dir, "input.npy"),
             os.path.join(whole_dir, "labels.npy")]
    out, log_dir, dump = run_program(args, program, mlir, name, files, n)
    logs = [read_log(os.path.join(log_dir, f"vw{v}.jsonl")) for v in range(n)]
    final = load_globals(dump)

    # The oracle's step: one VW's step on its micro-batches, by the
    # one-device pipeline (BatchNorm normalises each micro-batch, as the
    # program does), or the unpipelined step on their concatenation.
    if args.reference == "one-stage":
        reference = compile_pipeline(
            args.pipeline_opt, os.path.join(micro_dir, "model.onnx"),
            args.work, "reference", "1f1b", 1, "none", m, args.optimizer,
            " report=")
    else:
        reference = unsplit_step(args.pipeline_opt, vw_dir, args.work,
                                 args.optimizer)
    initial_dir = os.path.join(args.work, "initial")
    shutil.rmtree(initial_dir, ignore_errors=True)
    run([args.pp_interpret, reference, "--steps=0", "--random-inputs",
         f"--dump-globals={initial_dir}"])
    initial = load_globals(initial_dir)
    rows = args.micro_batch * m
    inputs = []
    for v in range(n):
        flags = []
        for i, f in enumerate(files):
            part = os.path.join(args.work, f"vw{v}-arg{i}.npy")
            np.save(part, np.load(f)[v * rows:(v + 1) * rows])
            flags.append(f"--input=arg{i}={part}")
        inputs.append(flags)
    if versioned:
        from check_versioned import version_rule
        plan = re.search(r"pp\.plan = #pp\.plan<([^>]*)>",
                         open(mlir).read()).group(1)
        every = int(re.search(r"update_every = (\d+)", plan).group(1))
        # One VW's pipeline (the interpreter runs no WSP): the same stage
        # functions, the loss a mean over the VW's micro-batches.
        one_vw = compile_pipeline(
            args.pipeline_opt, os.path.join(micro_dir, "model.onnx"),
            args.work, "one-vw", args.schedule, args.stages, "none", m,
            args.optimizer, f" report= update-every={every}")
        whole = [[np.load(f)[v * rows:(v + 1) * rows] for f in files]
                 for v in range(n)]
        oracle = VersionedOracle(
            args.pp_interpret, one_vw, args.work, whole, args.stages, m, every,
            lambda count: version_rule(args.rule_schedule or args.schedule,
                                       args.stages, count, every, False, 1.0,
                                       m))
    else:
        oracle = Oracle(args.pp_interpret, reference, args.work, inputs,
                        initial, trainable_names(reference))

    check = Comparison(args.rtol, args.atol)
    check.failures.extend(check_rules(logs, args.staleness))
    why = oracle.replay(logs)
    if why:
        check.failures.append(why)
    for v in range(n):
        logged = [e["loss"] for e in logs[v] if e["event"] == "step"]
        if len(logged) != args.steps or len(oracle.losses[v]) != args.steps:
            check.failures.append(f"VW {v}: {len(logged)} logged losses, "
                                  f"{len(oracle.losses[v])} replayed")
        for i, (a, b) in enumerate(zip(logged, oracle.losses[v])):
            check(f"VW {v}: loss of step {i + 1}", [a], [b])
    for key, value in oracle.state[0].items():
        if key not in final:
            check.failures.append(f"{key} missing from the program's dump")
        else:
            check(key, final[key], value)
    # Every VW holds the same weights once every wave is applied.
    for v in range(1, n):
        for key in oracle.trainable:
            check(f"VW {v}: {key}", oracle.state[v][key], oracle.state[0][key])

    for v in range(n):
        pulls = [e for e in logs[v]
                 if e["event"] == "pull" and not e.get("drain")]
        stale = max((e["clock"] - e["through"] for e in pulls), default=0)
        waited = sum(e["waited_ms"] for e in logs[v] if e["event"] == "pull")
        print(f"VW {v}: {len(pulls)} waves, largest staleness {stale}, "
              f"waited {waited:.0f} ms")
    summary = re.findall(r"virtual worker \d+: .*", out)
    if len(summary) != n:
        check.failures.append(f"the program's summary names {len(summary)} "
                              f"of {n} virtual workers")
    print(f"{args.model} D={args.staleness} wave={args.wave}: {args.steps} "
          f"steps x {n} VWs replayed ({oracle.runs} oracle steps), "
          f"{len(final)} globals; worst relative error {check.worst:.2e}")
    for failure in check.failures:
        print("MISMATCH", failure)
    sys.exit(1 if check.failures else 0)


if __name__ == "__main__":
    main()
