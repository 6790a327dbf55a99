"""Checks weight-versioned pipeline schedules against an oracle that applies
their version rules.

For one test model and each schedule of --schedules (pipedream,
pipedream-2bw, nf1b, v-timeprest, i-timeprest): compiles the micro-batch
model with --pp-compile (--stages devices, m micro-batches per step, an
update every n of them), trains it --steps steps in the pipelined
interpreter (and, with --program, as a generated program under mpirun),
and replays the same steps with an oracle:

  - the oracle derives, from the schedule's published rule (docs/
    schedules.md), which version of its stage's weights every forward and
    backward reads: PipeDream's stashing (a backward reads its forward's
    version; vertical sync: every stage the version stage 0 read), 2BW's
    max(floor(k / n) - 1, 0), TiMePReSt's vertical forwards and latest
    backwards, V's latest everywhere, I's blend
    W_l + exp(-lambda d) (W_s - W_l); "latest" is counted along each
    stage's order (1F1B without flushes, or TiMePReSt's unit-slot rule);
  - it then runs every stage function one at a time with pp-interpret
    --stage-io (messages, stashes and gradient sums as files), setting the
    stage's trainable globals to the version the rule names before each
    forward and backward, and making version u + 1 of a stage by running
    its update function after mini-batch u's backwards;
  - every step's loss (the mean over the step's micro-batches) and every
    global the stage functions read (weights, optimizer and BatchNorm
    state) at the end must match the pipelined runs.

A tensor passes when max|ours - oracle| <= rtol * max|oracle| + atol.
Prints, per schedule, the versions the rule gave (a line per stage),
the worst relative error, and exits non-zero on a mismatch.
"""
import argparse
import json
import math
import os
import re
import shlex
import shutil
import sys

import numpy as np

from check_generated import build
from check_pipeline import (cluster_file, data_flags, export_micro_and_whole,
                            losses_of)
from check_wsp import save_state, trainable_names
from compare import Comparison, load_globals, run

VERSIONED = ("pipedream", "pipedream-2bw", "nf1b", "v-timeprest",
             "i-timeprest", "hetpipe")


# -- The rules -----------------------------------------------------------


def one_f_one_b_order(p, m, inflight=None):
    """Per stage, 1F1B without flushes: ("F", micro-batch) and ("B",
    micro-batch); stage s warms up with inflight - s - 1 forwards (1F1B:
    inflight = p; HetPipe: Nm)."""
    inflight = p if inflight is None else inflight
    order = []
    for s in range(p):
        warmup = min(max(inflight - s - 1, 0), m)
        mine = [("F", j) for j in range(warmup)]
        for j in range(m - warmup):
            mine += [("F", warmup + j), ("B", j)]
        mine += [("B", j) for j in range(m - warmup, m)]
        order.append(mine)
    return order


def nf1b_order(p, m, n):
    """TiMePReSt's order in unit slots: each slot a stage runs a ready
    mini-batch backward ("B", mini-batch: its n forwards done here, the next
    stage's backward of it done in an earlier slot), else its next forward
    whose input arrived in an earlier slot."""
    minis = m // n
    order = [[] for _ in range(p)]
    fwd_at = [[None] * m for _ in range(p)]
    bwd_at = [[None] * minis for _ in range(p)]
    next_f, next_b = [0] * p, [0] * p
    t = 0
    while sum(len(o) for o in order) < p * (m + minis):
        for s in range(p):
            b = next_b[s]
            if (b < minis and next_f[s] >= (b + 1) * n
                    and fwd_at[s][(b + 1) * n - 1] < t
                    and (s == p - 1 or (bwd_at[s + 1][b] is not None
                                        and bwd_at[s + 1][b] < t))):
                bwd_at[s][b] = t
                order[s].append(("B", b))
                next_b[s] += 1
                continue
            j = next_f[s]
            if j < m and (s == 0 or (fwd_at[s - 1][j] is not None
                                     and fwd_at[s - 1][j] < t)):
                fwd_at[s][j] = t
                order[s].append(("F", j))
                next_f[s] += 1
        t += 1
    return order


def version_rule(schedule, p, m, n, vertical, lam, inflight=None):
    """Per stage: forward[j] = the version forward j reads; backward[j] =
    (version, blend) where blend is None or (latest version, factor): the
    backward reads version + factor... i.e. W_l + factor (W_version - W_l)."""
    one_f = schedule in ("pipedream", "pipedream-2bw", "hetpipe")
    order = (one_f_one_b_order(p, m, inflight if schedule == "hetpipe"
                               else None)
             if one_f else nf1b_order(p, m, n))
    forward = [[0] * m for _ in range(p)]
    backward = [[None] * m for _ in range(p)]
    for s in range(p):  # stage 0 first: the vertical rules read it
        updates = 0
        for kind, index in order[s]:
            if kind == "F":
                j = index
                if schedule == "pipedream":
                    v = forward[0][j] if vertical and s > 0 else updates
                elif schedule == "pipedream-2bw":
                    v = max(j // n - 1, 0)
                elif schedule == "hetpipe":
                    # HetPipe: its VW's updates through j - Nm, on every
                    # stage (vertical sync); Nm = the step's micro-batches.
                    v = max(j - inflight + 1, 0)
                elif schedule == "nf1b":
                    # The version stage 0's first forward of the mini-batch
                    # read (there: the latest).
                    v = (updates if s == 0 and j % n == 0
                         else forward[0][j // n * n])
                else:
                    v = updates
                assert v <= updates, (schedule, s, j, v, updates)
                forward[s][j] = v
                continue
            micro = [index] if one_f else range(index * n, index * n + n)
            for j in micro:
                if one_f:
                    backward[s][j] = (forward[s][j], None)  # stashed
                elif schedule == "i-timeprest" and forward[s][j] != updates:
                    d = updates - forward[s][j]
                    kept = max(forward[s][j], updates - 1)  # two versions
                    backward[s][j] = (kept, (updates, math.exp(-lam * d)))
                else:
                    backward[s][j] = (updates, None)  # the latest
            if (micro[-1] + 1) % n == 0:
                updates += 1
    return forward, backward


# -- The oracle ----------------------------------------------------------


def stage_functions(mlir):
    """(stage, phase) -> function name, from pp.stage / pp.phase."""
    functions = {}
    for line in open(mlir):
        if not line.lstrip().startswith("func.func @"):
            continue
        name = re.search(r"func\.func @\"?([\w.$-]+)", line).group(1)
        stage = re.search(r"pp\.stage = (\d+)", line)
        phase = re.search(r'pp\.phase = #pp\.phase<(\w+)>', line)
        if stage and phase:
            functions[(int(stage.group(1)), phase.group(1))] = name
    return functions


def stage_globals(mlir):
    """stage -> the globals its functions read."""
    result, stage = {}, None
    for line in open(mlir):
        if line.lstrip().startswith("func.func @"):
            match = re.search(r"pp\.stage = (\d+)", line)
            stage = int(match.group(1)) if match else None
        elif stage is not None:
            for name in re.findall(r'onnx\.global_read @"?([^"\s:]+)"?',
                                   line):
                result.setdefault(stage, set()).add(name)
    return result


class Oracle:
    def __init__(self, pp_interpret, mlir, work, inputs, p, m, n, dp=1):
        self.pp_interpret, self.mlir, self.work = pp_interpret, mlir, work
        self.p, self.m, self.n, self.dp = p, m, n, dp
        self.functions = stage_functions(mlir)
        self.trainable = trainable_names(mlir)
        self.reads = stage_globals(mlir)
        self.io = os.path.join(work, "io")
        shutil.rmtree(self.io, ignore_errors=True)
        os.makedirs(self.io)
        # Micro-batch slices of the step's inputs, as pp.input reads them.
        for i, whole in enumerate(inputs):
            for j, part in enumerate(np.split(whole, m * dp)):
                np.save(os.path.join(self.io, f"input_{i}_{j}.npy"), part)
        initial = os.path.join(work, "initial")
        run([pp_interpret, mlir, "--steps=0", "--random-inputs",
             f"--dump-globals={initial}"])
        start = load_globals(initial)
        self.state = [dict(start) for _ in range(p)]  # every global, latest
        self.runs = 0

    def call(self, stage, phase, step, micro_batch, weights):
        """Runs the (stage, phase) function with the stage's globals, its
        trainables replaced by `weights`; keeps what it wrote except the
        trainables (only updates write those)."""
        name = self.functions[(stage, phase)]
        here = os.path.join(self.work, "call")
        given = dict(self.state[stage])
        given.update(weights)
        save_state(given, here + ".in")
        shutil.rmtree(here + ".out", ignore_errors=True)
        run([self.pp_interpret, self.mlir, f"--func={name}",
             f"--stage-io={self.io}", f"--micro-batch={micro_batch}",
             f"--first-step={step}", f"--load-globals={here}.in",
             f"--dump-globals={here}.out"])
        self.runs += 1
        out = load_globals(here + ".out")
        for key, value in out.items():
            if key not in self.trainable or phase == "update":
                self.state[stage][key] = value

    def train(self, steps, rule, drain_every=1):
        """Trains `steps` steps in windows that end at every multiple of
        drain_every (0: one window): the rule(micro-batches) of a window
        numbers its micro-batches and versions from the window's start, as
        if the window were one step of its micro-batches."""
        p, m, n = self.p, self.m, self.n
        losses = []
        first = 0
        while first < steps:
            last = (steps if drain_every == 0 else
                    min(steps, (first // drain_every + 1) * drain_every))
            forward, backward = rule((last - first) * m)
            self.window(first, last - first, forward, backward, losses)
            first = last
        return losses

    def window(self, first, count, forward, backward, losses):
        """Replica r's micro-batch j of a step is the global micro-batch
        r m + j (its input slice and Dropout masks); every replica runs
        mini-batch u on the same version and the update takes the sum of
        all replicas' gradients (the all-reduce before each update)."""
        p, m, n, dp = self.p, self.m, self.n, self.dp
        total = count * m
        # The oldest version any read from micro-batch J on needs, per
        # stage: older ones are dropped (a window holds many).
        needed = [[0] * (total + 1) for _ in range(p)]
        for s in range(p):
            needed[s][total] = 1 << 30
            for j in reversed(range(total)):
                reads = [forward[s][j], backward[s][j][0]]
                if backward[s][j][1]:
                    reads.append(backward[s][j][1][0])
                needed[s][j] = min([needed[s][j + 1]] + reads)
        # versions[s][v]: stage s's trainables after v updates this window.
        versions = [{0: {k: v for k, v in self.state[s].items()
                         if k in self.trainable}} for s in range(p)]
        for u in range(total // n):
            micro = range(u * n, u * n + n)
            for r in range(dp):
                for j in micro:
                    for s in range(p):
                        self.call(s, "forward", first + j // m,
                                  r * m + j % m, versions[s][forward[s][j]])
            for r in range(dp):
                for j in micro:
                    for s in reversed(range(p)):
                        version, blend = backward[s][j]
                        weights = versions[s][version]
                        if blend is not None:
                            latest, factor = blend
                            wl = versions[s][latest]
                            c = np.float32(factor)
                            weights = {k: wl[k] + c * (weights[k] - wl[k])
                                       for k in weights}
                        self.call(s, "backward", first + j // m,
                                  r * m + j % m, weights)
            step = first + micro[-1] // m
            for s in range(p):
                self.call(s, "update", step, -1, {})
                versions[s][u + 1] = {k: v for k, v in
                                      self.state[s].items()
                                      if k in self.trainable}
                for v in [v for v in versions[s]
                          if v < needed[s][micro[-1] + 1]]:
                    del versions[s][v]
            if (micro[-1] + 1) % m == 0:
                parts = [float(np.load(os.path.join(
                    self.io, f"output_{0}_{j}.npy"))) for j in range(m * dp)]
                losses.append(sum(parts) / (m * dp))

    def final(self):
        """Each global a stage function reads (weights, optimizer and
        BatchNorm state), from the first stage that reads it."""
        result = {}
        for s in range(self.p):
            for key in sorted(self.reads.get(s, ())):
                if key not in result:
                    result[key] = self.state[s][key]
        return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--work", required=True, help="scratch directory")
    parser.add_argument("--pipeline-opt", default="pipeline-opt")
    parser.add_argument("--pp-interpret", default="pp-interpret")
    parser.add_argument("--schedules", default=",".join(VERSIONED))
    parser.add_argument("--stages", type=int, default=2)
    parser.add_argument("--micro-batch", type=int, default=2)
    parser.add_argument("--microbatches", type=int, default=4)
    parser.add_argument("--update-every", type=int, default=0,
                        help="micro-batches per update (n; 0: the "
                             "compiler's default; PipeDream: 1; 2BW: at "
                             "least the stages)")
    parser.add_argument("--optimizer", default="",
                        help="more --pp-compile options (momentum=0.9, "
                             "optimizer=adam ...)")
    parser.add_argument("--vertical-sync", action="store_true")
    parser.add_argument("--lambda", dest="lam", type=float, default=0.5)
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--program", action="store_true",
                        help="also build the generated program and train it "
                             "under mpirun")
    parser.add_argument("--mpirun", default="mpirun --allow-run-as-root "
                        "--oversubscribe")
    parser.add_argument("--drain-every", type=int, default=1,
                        help="steps between drains of the pipeline (0: "
                             "only at the end): the program runs the steps "
                             "of each window as one stream and the oracle "
                             "applies the rule over the window")
    parser.add_argument("--dp", type=int, default=1,
                        help="data-parallel replicas of the pipeline (an "
                             "all-reduce before each update); the "
                             "interpreter, which runs one pipeline of these "
                             "schedules, is not run")
    parser.add_argument("--program-drain-every", type=int, default=None,
                        help="the program's --drain-every when it should "
                             "differ from the oracle's (a negative control: "
                             "the check must then fail)")
    parser.add_argument("--resume-at", type=int, default=0,
                        help="with --program: train to this step with a "
                             "checkpoint there, then resume to --steps (the "
                             "interpreter, which has no checkpoints, is not "
                             "run)")
    parser.add_argument("--local", action="store_true",
                        help="with --program: also train it as one process "
                             "(--local)")
    parser.add_argument("--rtol", type=float, default=1e-4)
    parser.add_argument("--atol", type=float, default=1e-6)
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    p, m = args.stages, args.microbatches

    micro_dir, whole_dir = export_micro_and_whole(
        args.model, args.work, args.micro_batch, m * args.dp)
    inputs = [np.load(os.path.join(whole_dir, "input.npy")),
              np.load(os.path.join(whole_dir, "labels.npy"))]
    data = [f"--input=arg0={os.path.join(whole_dir, 'input.npy')}",
            f"--input=arg1={os.path.join(whole_dir, 'labels.npy')}"]
    cluster = cluster_file(args.work, p * args.dp)

    failed = False
    for schedule in args.schedules.split(","):
        # 0: the compiler's default; 2BW needs n >= the stages.
        n = 0 if schedule in ("pipedream", "hetpipe") else args.update_every
        if schedule == "pipedream-2bw" and 0 < n < p:
            n = next(k for k in range(p, m + 1) if m % k == 0)
        vertical = args.vertical_sync and schedule == "pipedream"
        name = schedule + ("-vertical" if vertical else "")
        work = os.path.join(args.work, name)
        os.makedirs(work, exist_ok=True)
        mlir = os.path.join(work, "pipelined.mlir")
        options = (f"cluster={cluster} schedule={schedule} "
                   f"microbatches={m} update-every={n} lr={args.lr}")
        if args.dp > 1:
            options += f" dp={args.dp}"
        if args.optimizer:
            options += " " + args.optimizer
        if vertical:
            options += " vertical-sync=true"
        if schedule == "i-timeprest":
            options += f" lambda={args.lam}"
        run([args.pipeline_opt, os.path.join(micro_dir, "model.onnx"),
             f"--pp-compile={options}", "-o", mlir])

        # The plan's mini-batch size (n) and its stages.
        plan = re.search(r"pp\.plan = #pp\.plan<([^>]*)>",
                         open(mlir).read()).group(1)
        n = int(re.search(r"update_every = (\d+)", plan).group(1))
        stages = int(re.search(r"num_stages = (\d+)", plan).group(1))
        if stages != p:
            sys.exit(f"{name}: the plan has {stages} stages, not {p}")
        forward, backward = version_rule(schedule, p, m, n, vertical,
                                         args.lam, m)
        def rule(micro_batches):
            return version_rule(schedule, p, micro_batches, n, vertical,
                                args.lam, m)
        oracle = Oracle(args.pp_interpret, mlir, work, inputs, p, m, n,
                        args.dp)
        oracle_losses = oracle.train(args.steps, rule, args.drain_every)
        oracle_final = oracle.final()

        runs = {}
        if not args.resume_at and args.dp == 1:
            # The pipelined interpreter, with the same drains.
            dump = os.path.join(work, "interpreter.globals")
            out = run([args.pp_interpret, mlir, f"--steps={args.steps}",
                       f"--drain-every={args.drain_every}",
                       f"--dump-globals={dump}"] + data)
            runs["interpreter"] = (losses_of(out), load_globals(dump))
        if args.program:
            program = os.path.join(work, "program")
            run([args.pipeline_opt, os.path.join(micro_dir, "model.onnx"),
                 f"--pp-compile={options} emit-dir={program}", "-o",
                 os.devnull])
            exe = build(program)
            dump = os.path.join(work, "program.globals")
            log = os.path.join(work, "program.jsonl")
            if os.path.exists(log):
                os.remove(log)
            files = [os.path.join(whole_dir, f)
                     for f in ("input.npy", "labels.npy")]
            program_drain = (args.drain_every if args.program_drain_every
                             is None else args.program_drain_every)
            drain = [f"--drain-every={program_drain}"]
            if args.resume_at:
                # Stopped after a checkpoint at step resume_at (a drain),
                # then resumed to the end: the uninterrupted run's result.
                ckpt = os.path.join(work, "checkpoints")
                shutil.rmtree(ckpt, ignore_errors=True)
                run(shlex.split(args.mpirun) + ["-np", str(p * args.dp), exe,
                     f"--steps={args.resume_at}",
                     f"--checkpoint-every={args.resume_at}",
                     f"--checkpoint={ckpt}", f"--log={log}"] + drain +
                    data_flags(mlir, files))
                drain += [f"--resume={ckpt}"]
            out = run(shlex.split(args.mpirun) + ["-np", str(p * args.dp), exe,
                 f"--steps={args.steps}", f"--dump-globals={dump}",
                 f"--log={log}"] + drain +
                data_flags(mlir, files))
            losses = [json.loads(line)["loss"] for line in open(log)]
            runs["mpirun"] = (losses, load_globals(dump))
            if args.local:
                dump = os.path.join(work, "local.globals")
                os.remove(log)
                run([exe, "--local", f"--steps={args.steps}",
                     f"--dump-globals={dump}", f"--log={log}"] +
                    [f"--drain-every={program_drain}"] +
                    data_flags(mlir, files))
                losses = [json.loads(line)["loss"] for line in open(log)]
                runs["local"] = (losses, load_globals(dump))
            # The memory plan (older versions and blend temporaries
            # included) against what each rank allocated.
            for d, planned, measured in re.findall(
                    r"device (\d+) \(.*\): busy .* planned peak ([\d.]+) "
                    r"MB, measured arena\+globals\+stash ([\d.]+) MB", out):
                print(f"{args.model} {name} memory device {d}: measured "
                      f"{measured} MB of {planned} MB planned")
                if float(measured) > float(planned) + 0.01:  # printed 2 dp
                    if args.dp > 1:
                        # Known gap: the memory plan does not count the
                        # all-reduce's packed bucket of gradient sums.
                        print(f"NOTE memory device {d}: above the plan "
                              "(the all-reduce bucket is not planned)")
                        continue
                    print(f"MISMATCH memory device {d}: above the plan")
                    failed = True

        for s in range(p):
            reads = " ".join(
                f"F{j}:v{forward[s][j]}/B{j}:v{backward[s][j][0]}" +
                (f"~v{backward[s][j][1][0]}" if backward[s][j][1] else "")
                for j in range(m))
            print(f"{args.model} {name} stage {s}: {reads}")
        diverged = [k for k, v in oracle_final.items()
                    if v.dtype.kind == "f" and not np.all(np.isfinite(v))]
        for where, (losses, final) in runs.items():
            check = Comparison(args.rtol, args.atol)
            if diverged or not np.all(np.isfinite(oracle_losses)):
                # NaN compares as nothing: a diverged run proves nothing.
                check.failures.append(
                    f"the training diverged ({len(diverged)} globals not "
                    "finite): lower --lr")
            if len(losses) != len(oracle_losses):
                check.failures.append(
                    f"{len(losses)} losses vs {len(oracle_losses)}")
            for i, (a, b) in enumerate(zip(losses, oracle_losses)):
                check(f"loss of step {i + 1}", [a], [b])
            for key, value in oracle_final.items():
                if key not in final:
                    check.failures.append(f"{key}: missing")
                elif np.issubdtype(value.dtype, np.floating):
                    check(key, final[key], value)
                elif not np.array_equal(final[key], value):
                    check.failures.append(f"{key}: differs")
            print(f"{args.model} {name} {where}: {len(oracle_final)} "
                  f"globals and {len(losses)} losses vs the "
                  f"oracle ({oracle.runs} stage-function runs), worst "
                  f"relative error {check.worst:.2e}")
            for failure in check.failures:
                print("MISMATCH", failure)
            failed |= bool(check.failures)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
