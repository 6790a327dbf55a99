"""Checks HetPipe's pipelined virtual workers against an oracle that applies
HetPipe's rules to every mini-batch.

Compiles a test model with --pp-compile schedule=hetpipe dp=N staleness=D
(N virtual workers, VWs, of --stages devices; Nm = the micro-batches of a
step, each a mini-batch with its own update; a wave = a step), trains the
generated program under mpirun (or --local) with --wsp-log, optionally
slowing ranks (--delay RANK:MS, the program's --test-delay) and with
checkpoints, and then:
  - checks the logs against the bounds: every stage of every VW started
    wave c having pulled every VW's waves through c - 1 - D (global
    staleness <= D), only after each of them had pushed its part of that
    wave; every step's forwards missed at most Nm - 1 of their own VW's
    updates (local staleness), as logged by the program;
  - replays the run with HetPipe's rule, mini-batch by mini-batch: VW k's
    mini-batch j of step c reads w0 + its own updates of mini-batches
    0 .. j - Nm (all of them before the last drain: checkpoints drain) +
    every other VW's waves through c - 1 - D (all of them before the last
    drain); its update is the optimizer's step on that gradient (one
    pp-interpret step of the mini-batch model from those weights and the
    VW's optimizer and BatchNorm state), added to the VW's weights. Every
    logged step loss (the mean of its Nm mini-batches) of every VW and the
    final globals must match.
The replay needs updates that do not depend on the weights they are added
to (SGD, momentum, Adam without weight decay): the program adds each
update to the latest weights, the rule to the version it names.
A tensor passes when max|ours - oracle| <= rtol * max|oracle| + atol.
"""
import argparse
import json
import os
import re
import shutil
import sys

import numpy as np

from check_pipeline import compile_pipeline, export_micro_and_whole
from check_wsp import run_program, save_state, trainable_names
from compare import Comparison, load_globals, run


def read_logs(log_dir, vws, stages):
    """Per VW: its rank 0 log (steps) and every rank's push / pull events."""
    steps, events = [], []
    for v in range(vws):
        lines = []
        for r in range(stages):
            name = f"vw{v}.jsonl" if r == 0 else f"vw{v}.rank{r}.jsonl"
            path = os.path.join(log_dir, name)
            records = [json.loads(line) for line in open(path)]
            if r == 0:
                steps.append([e for e in records if e["event"] == "step"])
            lines += [dict(e, rank=r) for e in records
                      if e["event"] in ("push", "pull")]
        events.append(lines)
    return steps, events


def check_bounds(steps, events, staleness, nm):
    """Failures of the logged events against HetPipe's bounds."""
    failures = []
    pushed = {}  # (vw, stage, wave) -> time
    for v, lines in enumerate(events):
        for e in lines:
            if e["event"] == "push":
                pushed[(v, e["stage"], e["wave"])] = e["time"]
    pulls = 0
    for v, lines in enumerate(events):
        for e in lines:
            if e["event"] != "pull" or e.get("drain"):
                continue
            pulls += 1
            if e["clock"] - e["through"] > staleness:
                failures.append(f"VW {v} stage {e['stage']}: wave "
                                f"{e['clock'] + 1} started "
                                f"{e['clock'] - e['through']} waves ahead "
                                f"(bound {staleness})")
            g = e["through"]
            for other in range(len(events)):
                when = pushed.get((other, e["stage"], g))
                if g > 0 and when is None:
                    failures.append(f"VW {v} stage {e['stage']} pulled wave "
                                    f"{g}, which VW {other} never pushed")
                elif g > 0 and when > e["time"]:
                    failures.append(f"VW {v} stage {e['stage']} pulled wave "
                                    f"{g} before VW {other} pushed it")
    for v, records in enumerate(steps):
        for e in records:
            if not 0 <= e["local_staleness"] <= nm - 1:
                failures.append(f"VW {v} step {e['step']}: local staleness "
                                f"{e['local_staleness']} (bound {nm - 1})")
    return failures, pulls


class Oracle:
    """HetPipe's rule, mini-batch by mini-batch, over every VW."""

    def __init__(self, pp_interpret, mlir, work, inputs, initial, trainable,
                 nm, staleness, drains):
        self.pp_interpret, self.mlir, self.work = pp_interpret, mlir, work
        self.inputs = inputs  # [vw][mini-batch in step] -> --input flags
        self.trainable = sorted(trainable)
        self.nm, self.staleness, self.drains = nm, staleness, drains
        n = len(inputs)
        self.w0 = {k: initial[k] for k in self.trainable}
        # The non-trainable state each VW carries (optimizer, BatchNorm).
        self.state = [dict(initial) for _ in range(n)]
        self.delta = [[] for _ in range(n)]  # per own mini-batch
        self.losses = [[] for _ in range(n)]
        self.runs = 0

    def wave_sum(self, v, c):
        """VW v's update of wave (step) c, 0-based."""
        total = {k: np.zeros_like(self.w0[k]) for k in self.trainable}
        for d in self.delta[v][c * self.nm:(c + 1) * self.nm]:
            for k in self.trainable:
                total[k] += d[k]
        return total

    def weights(self, v, j, drained):
        """The version VW v's global mini-batch j reads; `drained`: the steps
        before the window's start (every update of them applied)."""
        c = j // self.nm
        own = max(drained * self.nm, j - self.nm + 1)
        waves = max(drained, c - self.staleness)
        w = {k: self.w0[k].copy() for k in self.trainable}
        for d in self.delta[v][:own]:
            for k in self.trainable:
                w[k] += d[k]
        for other in range(len(self.delta)):
            if other == v:
                continue
            for g in range(waves):
                s = self.wave_sum(other, g)
                for k in self.trainable:
                    w[k] += s[k]
        return w

    def mini_batch(self, v, j, drained):
        here = os.path.join(self.work, f"vw{v}")
        state = dict(self.state[v])
        w = self.weights(v, j, drained)
        state.update(w)
        save_state(state, here + ".in")
        shutil.rmtree(here + ".out", ignore_errors=True)
        out = run([self.pp_interpret, self.mlir, "--steps=1",
                   f"--load-globals={here}.in",
                   f"--dump-globals={here}.out"] +
                  self.inputs[v][j % self.nm])
        self.runs += 1
        loss = float(re.search(r"step 1 loss (\S+)", out).group(1))
        after = load_globals(here + ".out")
        self.delta[v].append({k: after[k] - w[k] for k in self.trainable})
        self.state[v] = after
        return loss

    def train(self, steps):
        n = len(self.inputs)
        drained = 0
        for c in range(steps):
            for v in range(n):
                losses = [self.mini_batch(v, c * self.nm + i, drained)
                          for i in range(self.nm)]
                self.losses[v].append(float(np.mean(losses)))
            if c + 1 in self.drains:
                drained = c + 1
        # The last drain applies every wave: each VW's latest weights.
        final = []
        for v in range(n):
            state = dict(self.state[v])
            state.update(self.weights(v, steps * self.nm, steps))
            final.append(state)
        return final


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
    parser.add_argument("--inflight", type=int, default=3,
                        help="Nm: the micro-batches (mini-batches) of a step")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--micro-batch", type=int, default=2)
    parser.add_argument("--optimizer", default="lr=0.05 momentum=0.9")
    parser.add_argument("--delay", action="append", default=[],
                        help="RANK:MS, passed as --test-delay")
    parser.add_argument("--checkpoint-every", type=int, default=0)
    parser.add_argument("--hetero", action="store_true",
                        help="make the devices P4000s and the last an H100, "
                        "so that the VWs get partitions of their own")
    parser.add_argument("--rule-staleness", type=int, default=None,
                        help="the D the replay applies (default: "
                        "--staleness; another value is a negative control)")
    parser.add_argument("--rtol", type=float, default=1e-4)
    parser.add_argument("--atol", type=float, default=1e-6)
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    nm, n = args.inflight, args.dp

    # The program's model at the micro-batch size (the oracle's mini-batch
    # step too) and the step's batch holding every VW's micro-batches.
    micro_dir, whole_dir = export_micro_and_whole(
        args.model, args.work, args.micro_batch, nm * n)
    name = f"hetpipe-d{args.staleness}-nm{nm}"
    program = os.path.join(args.work, name)
    mlir = compile_pipeline(
        args.pipeline_opt, os.path.join(micro_dir, "model.onnx"), args.work,
        name, "hetpipe", args.stages, "none", nm, args.optimizer,
        f" report= emit-dir={program} staleness={args.staleness}",
        dp=n, hetero=args.hetero)
    files = [os.path.join(whole_dir, "input.npy"),
             os.path.join(whole_dir, "labels.npy")]
    out, log_dir, dump = run_program(args, program, mlir, name, files, n)
    steps, events = read_logs(log_dir, n, args.stages)
    final = load_globals(dump)

    # The oracle's step: one mini-batch (a micro-batch) on one device.
    reference = compile_pipeline(
        args.pipeline_opt, os.path.join(micro_dir, "model.onnx"), args.work,
        "reference", "1f1b", 1, "none", 1, args.optimizer, " report=")
    initial_dir = os.path.join(args.work, "initial")
    shutil.rmtree(initial_dir, ignore_errors=True)
    run([args.pp_interpret, reference, "--steps=0", "--random-inputs",
         f"--dump-globals={initial_dir}"])
    initial = load_globals(initial_dir)
    rows = args.micro_batch
    inputs = []
    for v in range(n):
        per_mini_batch = []
        for i in range(nm):
            flags = []
            first = (v * nm + i) * rows
            for a, f in enumerate(files):
                part = os.path.join(args.work, f"vw{v}-mb{i}-arg{a}.npy")
                np.save(part, np.load(f)[first:first + rows])
                flags.append(f"--input=arg{a}={part}")
            per_mini_batch.append(flags)
        inputs.append(per_mini_batch)
    drains = set(range(args.checkpoint_every, args.steps,
                       args.checkpoint_every)) if args.checkpoint_every \
        else set()
    rule = (args.staleness if args.rule_staleness is None
            else args.rule_staleness)
    if rule == 0:
        # D = 0: wave c needs every VW's wave c - 1, the VW's own included,
        # so the pipeline drains every wave.
        drains = set(range(1, args.steps))
    oracle = Oracle(args.pp_interpret, reference, args.work, inputs, initial,
                    trainable_names(reference), nm, rule, drains)
    expected = oracle.train(args.steps)

    check = Comparison(args.rtol, args.atol)
    failures, pulls = check_bounds(steps, events, args.staleness, nm)
    check.failures.extend(failures)
    for v in range(n):
        logged = [e["loss"] for e in steps[v]]
        if len(logged) != args.steps:
            check.failures.append(f"VW {v}: {len(logged)} logged losses")
        for i, (a, b) in enumerate(zip(logged, oracle.losses[v])):
            check(f"VW {v}: loss of step {i + 1}", [a], [b])
    for key, value in expected[0].items():
        if key not in final:
            check.failures.append(f"{key} missing from the program's dump")
        else:
            check(key, final[key], value)
    for v in range(1, n):
        for key in oracle.trainable:
            check(f"VW {v}: {key}", expected[v][key], expected[0][key])

    for v in range(n):
        stale = max((e["clock"] - e["through"] for e in events[v]
                     if e["event"] == "pull"), default=0)
        local = max((e["local_staleness"] for e in steps[v]), default=0)
        waited = sum(e["waited_ms"] for e in events[v]
                     if e["event"] == "pull")
        print(f"VW {v}: {len(steps[v])} waves, largest global staleness "
              f"{stale}, largest local staleness {local}, waited "
              f"{waited:.0f} ms")
    rate = re.search(r"([0-9.]+) samples/s", out)
    print(f"{args.model} hetpipe D={args.staleness} Nm={nm}: {args.steps} "
          f"steps x {n} VWs replayed ({oracle.runs} mini-batches), "
          f"{pulls} pulls checked, {len(final)} globals; worst relative "
          f"error {check.worst:.2e}" +
          (f"; {rate.group(1)} samples/s" if rate else ""))
    for failure in check.failures:
        print("MISMATCH", failure)
    sys.exit(1 if check.failures else 0)


if __name__ == "__main__":
    main()
