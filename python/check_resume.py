"""A generated program under mpirun survives a lost rank through its
checkpoints.

Compiles a test model into a 2-stage 1F1B program (--pp-compile ...
emit-dir=), builds it, and
  1. trains it --steps steps without interruption (the reference losses);
  2. trains it again with --checkpoint-every, and `kill -9`s the process of
     rank 1 (--kill-rank) from outside once step --kill-after has been
     printed: the job must exit non-zero within 30 s with a message
     naming that rank;
  3. resumes from the last checkpoint (--resume) to --steps: it must name
     the checkpoint it takes (checkpoint/step-<k>), and every step it
     prints must have the reference loss, to the printed digit.
With --dp N the program trains N data-parallel replicas of the pipeline
(2 N ranks), with --tp N (or a per-stage list, 1,2) each stage runs on a
tensor-parallel group of that many ranks, and --kill-rank picks the rank
to kill (default 1).
Prints what happened and exits non-zero when any of it fails.
"""
import argparse
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time

from check_pipeline import cluster_file, data_flags, export_micro_and_whole
from compare import run
from check_generated import build


def step_losses(text):
    """step number -> loss text, from the program's progress lines."""
    return {int(m.group(1)): m.group(2) for m in
            re.finditer(r"^step (\d+)/\d+\s+loss (\S+)", text, re.M)}


def rank_pids(executable, rank):
    """PIDs of `executable` processes whose MPI rank is `rank`."""
    pids = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read().split(b"\0")
            if not cmdline or os.path.realpath(cmdline[0].decode()) != \
                    os.path.realpath(executable):
                continue
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        if f"OMPI_COMM_WORLD_RANK={rank}".encode() in env:
            pids.append(int(pid))
    return pids


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet18")
    parser.add_argument("--work", required=True)
    parser.add_argument("--pipeline-opt", default="pipeline-opt")
    parser.add_argument("--mpirun", default="mpirun --allow-run-as-root "
                        "--oversubscribe")
    parser.add_argument("--micro-batch", type=int, default=2)
    parser.add_argument("--microbatches", type=int, default=4)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--every", type=int, default=2)
    parser.add_argument("--kill-after", type=int, default=3)
    parser.add_argument("--dp", type=int, default=1,
                        help="data-parallel replicas of the pipeline")
    parser.add_argument("--staleness", type=int, default=-1,
                        help="with --dp: Wave Synchronous Parallel with this "
                        "bound (0 keeps the run deterministic)")
    parser.add_argument("--wave", type=int, default=1)
    parser.add_argument("--schedule", default="1f1b",
                        help="hetpipe: Nm = --microbatches in flight, the "
                        "stream kept across waves for staleness >= 1")
    parser.add_argument("--tp", default="1",
                        help="tensor-parallel degree of each stage, or a "
                        "per-stage list (--pp-compile tp=)")
    parser.add_argument("--kill-rank", type=int, default=1)
    parser.add_argument("--hetero", action="store_true",
                        help="make the devices P4000s and the last an H100, "
                        "so that the replicas get partitions of their own")
    parser.add_argument("--dropout", action="store_true",
                        help="keep the model's Dropout (training mode): the "
                        "resumed steps must draw the masks of the "
                        "uninterrupted run")
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    m = args.microbatches

    micro_dir, whole_dir = export_micro_and_whole(
        args.model, args.work, args.micro_batch, m * args.dp,
        dropout=args.dropout)
    degrees = [int(d) for d in args.tp.split(",")]
    ranks = (2 * degrees[0] if len(degrees) == 1 else sum(degrees)) * args.dp
    dp = f" dp={args.dp}" if args.dp > 1 else ""
    if args.tp != "1":
        dp += f" tp={args.tp}"
    if args.staleness >= 0:
        dp += f" staleness={args.staleness} wave={args.wave}"
    program = os.path.join(args.work, "program")
    mlir = os.path.join(args.work, "pipeline.mlir")
    run([args.pipeline_opt, os.path.join(micro_dir, "model.onnx"),
         f"--pp-compile=cluster={cluster_file(args.work, ranks, args.hetero)} "
         f"schedule={args.schedule} microbatches={m} lr=0.05{dp} report= "
         f"emit-dir={program}", "-o", mlir])
    if args.hetero and "placements = [" not in open(mlir).read():
        sys.exit("the replicas' partitions do not differ")
    train = build(program)
    data = data_flags(mlir, [os.path.join(whole_dir, f)
                             for f in ("input.npy", "labels.npy")])
    mpirun = shlex.split(args.mpirun) + ["-np", str(ranks), train,
                                         f"--steps={args.steps}"] + data
    failures = []

    # Under WSP a checkpoint ends a wave, so the uninterrupted run
    # checkpoints at the same steps.
    wsp = args.staleness >= 0
    uninterrupted = run(mpirun + (
        [f"--checkpoint-every={args.every}",
         f"--checkpoint={os.path.join(args.work, 'uninterrupted')}"]
        if wsp else []))
    reference = step_losses(uninterrupted)
    if len(reference) != args.steps:
        sys.exit(f"the uninterrupted run printed {len(reference)} steps")

    checkpoint = os.path.join(args.work, "checkpoint")
    proc = subprocess.Popen(
        mpirun + [f"--checkpoint-every={args.every}",
                  f"--checkpoint={checkpoint}"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    output, killed_at = [], None
    done = threading.Event()

    def reader():
        for line in proc.stdout:
            output.append(line)
            if line.startswith(f"step {args.kill_after}/"):
                done.set()
        done.set()
    threading.Thread(target=reader, daemon=True).start()
    done.wait(120)
    victim = args.kill_rank
    pids = rank_pids(train, victim)
    if proc.poll() is not None or not pids:
        failures.append(f"the job ended before rank {victim} could be killed")
    else:
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        killed_at = time.time()
        try:
            code = proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = None
        elapsed = time.time() - killed_at
        time.sleep(0.2)  # the reader drains the pipe
        text = "".join(output)
        last = max(step_losses(text) or {0: ""})
        named = re.search(rf".*\brank {victim}\b.*", text)
        print(f"killed rank {victim} after step {last}: the job exited with code "
              f"{code} after {elapsed:.1f} s")
        print("message: " + (named.group(0).strip() if named else "(none)"))
        if code is None or code == 0:
            failures.append(f"exit code {code}")
        if elapsed > 30:
            failures.append(f"took {elapsed:.1f} s to stop")
        if not named:
            failures.append(f"no message names rank {victim}")

    # Under WSP the resumed run goes on checkpointing at the same steps
    # (they end waves, and drain HetPipe's pipelines).
    resumed = run(mpirun + [f"--resume={checkpoint}"] + (
        [f"--checkpoint-every={args.every}", f"--checkpoint={checkpoint}"]
        if wsp else []))
    losses = step_losses(resumed)
    took = re.search(r"^resuming from checkpoint '(.*)' \(step (\d+)\)$",
                     resumed, re.M)
    print("took " + (f"{os.path.relpath(took.group(1), args.work)} "
                     f"(step {took.group(2)})" if took else "(none named)"))
    if not losses:
        # Its last lines say why (a flaky failure is otherwise undiagnosable).
        tail = " | ".join(resumed.strip().splitlines()[-6:])
        failures.append(f"the resumed run printed no step; it ended: {tail}")
    else:
        first = min(losses)
        if not took or int(took.group(2)) != first - 1:
            failures.append("the resumed run does not name the checkpoint "
                            f"of step {first - 1}")
        same = all(losses[s] == reference[s] for s in losses)
        print(f"resumed at step {first}: steps {first}..{max(losses)} "
              f"{'equal' if same else 'DIFFER FROM'} the uninterrupted run")
        if not same or max(losses) != args.steps:
            failures.append(f"resumed losses {losses} vs {reference}")
    if wsp:
        # The clocks come back with the checkpoint: every VW ends at the
        # uninterrupted run's wave count.
        waves = re.findall(r"virtual worker (\d+): (\d+) waves", uninterrupted)
        again = re.findall(r"virtual worker (\d+): (\d+) waves", resumed)
        print("WSP clocks at the end: " + ", ".join(
            f"VW {v} {w}" for v, w in again) +
            (" (as uninterrupted)" if waves == again and waves else
             f" (uninterrupted: {waves})"))
        if waves != again or len(waves) != args.dp:
            failures.append(f"WSP clocks {again} vs {waves}")
    for failure in failures:
        print("FAILED", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
