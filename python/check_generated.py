"""End-to-end check of generated training programs.

For one test model: exports it (dropout off unless --dropout, same weights)
at the micro-batch size and at the whole mini-batch, and, for every configuration
"schedule:devices:recompute:launch" (launch local = one process, a thread
per device; mpi = mpirun, a rank per device), compiles it with
--pp-compile ... emit-dir=, builds the generated program (CMake + Ninja),
trains it for --steps steps on the same data, and compares
  - with the reference interpreter running the same pipeline (pp-interpret),
  - with the unpipelined training step on the whole batch (or, with
    --reference one-stage, the one-device program: BatchNorm models),
the loss of every step and every final global (weights, optimizer and
BatchNorm state). Its --save-onnx model must re-import (pipeline-opt) and
hold the trained weights. With --cuda, the first configuration's program is
also built for the CUDA backend (nvcc, sm_80 and sm_90): compiled, not run.
With --dtype float64 the model and data are float64 (torch keeps
LayerNormalization statistics in float32 there: stash_type 1). With --dp N
each program trains N data-parallel replicas of its pipeline (dp=N: N x
devices ranks) on a global batch N times as large, and the references are
the unsplit step on that batch and the interpreter running the replicas.

A tensor passes when max|ours - reference| <= rtol * max|reference| + atol;
prints one line per configuration and exits non-zero on a mismatch.
"""
import argparse
import json
import os
import shutil
import shlex
import subprocess
import sys
import time

import numpy as np

from check_pipeline import (compile_pipeline, data_flags,
                            export_micro_and_whole,
                            losses_of, train_on_interpreter, unsplit_step)
from compare import Comparison, load_globals, run


def build(program_dir, cuda=False):
    build_dir = os.path.join(program_dir, "build-cuda" if cuda else "build")
    configure = ["cmake", "-S", program_dir, "-B", build_dir, "-G", "Ninja"]
    # PP_PROGRAM_OPT=N (the lit tests set 1): -ON instead of Release's -O3.
    opt = os.environ.get("PP_PROGRAM_OPT")
    configure += (["-DCMAKE_BUILD_TYPE=None", f"-DCMAKE_CXX_FLAGS=-O{opt}"]
                  if opt else ["-DCMAKE_BUILD_TYPE=Release"])
    if cuda:
        configure.append("-DPP_CUDA=ON")
    # PP_PROGRAM_CCACHE=1 (the lit tests where ccache exists): through ccache.
    if os.environ.get("PP_PROGRAM_CCACHE") == "1" and shutil.which("ccache"):
        configure.append("-DCMAKE_CXX_COMPILER_LAUNCHER=ccache")
    run(configure)
    run(["cmake", "--build", build_dir])
    return os.path.join(build_dir, "train")


def progress_disagreement(printed, logged):
    """Failures where a progress line's loss is not the log's loss.

    The log holds each loss round-trip (9 significant digits of the float32
    value), the progress line the same value to 6 decimals. Rounding the log
    again would round twice (20.1598415 -> 20.159842 or 20.159841, depending
    on digits past the 9th that the log no longer has), so a printed value
    passes when it lies within half a unit of the 6th decimal of the logged
    one, plus the log's own rounding (half a unit of its 9th digit).
    """
    if len(printed) != len(logged):
        return [f"{len(printed)} progress lines but {len(logged)} log rows"]
    failures = []
    for step, (p, l) in enumerate(zip(printed, logged), 1):
        if abs(p - l) > 0.5e-6 + 0.5e-8 * max(abs(l), 1.0):
            failures.append(f"the progress line of step {step} prints "
                            f"{p:.6f}, the log {l!r}")
    return failures


def onnx_initializers(path):
    import onnx
    from onnx import numpy_helper
    model = onnx.load(path)
    return {init.name: numpy_helper.to_array(init)
            for init in model.graph.initializer}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--work", required=True, help="scratch directory")
    parser.add_argument("--pipeline-opt", default="pipeline-opt")
    parser.add_argument("--pp-interpret", default="pp-interpret")
    parser.add_argument("--mpirun", default="mpirun --allow-run-as-root "
                        "--oversubscribe")
    parser.add_argument("--micro-batch", type=int, default=2)
    parser.add_argument("--microbatches", type=int, default=4)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--configs", default="1f1b:2:none:local",
                        help="comma-separated schedule:devices:recompute:"
                        "launch")
    parser.add_argument("--reference", choices=["unsplit", "one-stage"],
                        default="unsplit")
    parser.add_argument("--cuda", action="store_true",
                        help="also compile the first program with nvcc")
    parser.add_argument("--dropout", action="store_true",
                        help="keep the model's Dropout (training mode)")
    parser.add_argument("--rtol", type=float, default=1e-4)
    parser.add_argument("--atol", type=float, default=1e-6)
    parser.add_argument("--tp", default="1",
                        help="tensor-parallel devices of each stage "
                        "(--pp-compile tp=N; mpirun runs devices x tp x dp "
                        "ranks), or of stage by stage (tp=1,2: a stage-wise "
                        "mix; dp x the sum ranks)")
    parser.add_argument("--dp", type=int, default=1,
                        help="data-parallel replicas of each pipeline")
    parser.add_argument("--hetero", action="store_true",
                        help="make the cluster's devices P4000s and the last "
                        "an H100, so that the data-parallel replicas "
                        "(virtual workers) get partitions of their own")
    parser.add_argument("--dtype", choices=["float32", "float64"],
                        default="float32",
                        help="precision of the model and data")
    parser.add_argument("--precision", choices=["fp32", "bf16", "fp16"],
                        default="fp32",
                        help="--pp-compile precision= of every program and "
                        "reference (mixed precision over fp32 weights)")
    parser.add_argument("--compile-options", default="",
                        help="more --pp-compile / --pp-training-step "
                        "options for every program and reference, e.g. "
                        "loss-scale-value=16777216")
    parser.add_argument("--reference-rtol", type=float, default=None,
                        help="rtol against the unsplit or one-stage "
                        "reference (default --rtol): under bf16 the "
                        "micro-batches round their gradients apart")
    parser.add_argument("--p2p-matching", default="",
                        help="comma-separated --p2p-matching modes (order, "
                        "headers) to rerun every config with: messages "
                        "matched the way the NCCL transport matches them must "
                        "give the very same losses and weights as tags")
    parser.add_argument("--prefetch-off", action="store_true",
                        help="rerun every config with "
                        "--prefetch-receives=off: receiving when each "
                        "action starts must give the very same losses and "
                        "weights as receiving ahead")
    args = parser.parse_args()
    degrees = [int(d) for d in args.tp.split(",")]
    split = max(degrees) > 1
    os.makedirs(args.work, exist_ok=True)
    # GEMM rounding depends on OpenBLAS's thread count; the programs run
    # with one kernel thread (--threads 1), so the interpreter does too.
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    m = args.microbatches

    micro_dir, whole_dir = export_micro_and_whole(
        args.model, args.work, args.micro_batch, m * args.dp, args.dtype,
        dropout=args.dropout)
    files = [os.path.join(whole_dir, "input.npy"),
             os.path.join(whole_dir, "labels.npy")]
    interp_data = [f"--input=arg{i}={f}" for i, f in enumerate(files)]
    optimizer = (f"lr={args.lr} precision={args.precision} "
                 f"{args.compile_options}").strip()

    def compile_program(name, schedule, devices, recompute, dp=args.dp):
        program = os.path.join(args.work, name)
        # One replica runs the m x dp micro-batches in a row.
        mlir = compile_pipeline(args.pipeline_opt,
                                os.path.join(micro_dir, "model.onnx"),
                                args.work, name, schedule, devices, recompute,
                                m * args.dp // dp, optimizer,
                                f" report= emit-dir={program}", dp=dp,
                                tp=args.tp if name != "reference" else "1",
                                hetero=args.hetero and dp > 1)
        return mlir, program

    def interpret(name, mlir):
        return train_on_interpreter(args.pp_interpret, mlir, args.steps,
                                    os.path.join(args.work, name + ".interp"),
                                    interp_data)

    if args.reference == "unsplit":
        mlir = unsplit_step(args.pipeline_opt, whole_dir, args.work,
                            optimizer)
        ref_losses, ref_globals = interpret("reference", mlir)
    else:
        mlir, _ = compile_program("reference", "1f1b", 1, "none", dp=1)
        ref_losses, ref_globals = interpret("reference", mlir)

    failed = False
    for index, config in enumerate(args.configs.split(",")):
        schedule, devices, recompute, launch = config.split(":")
        name = f"{schedule}-{devices}-{recompute}-{launch}"
        if args.dp > 1:
            name += f"-dp{args.dp}"
        if split:
            name += "-tp" + args.tp.replace(",", "-")
        if args.hetero:
            name += "-hetero"
        mlir, program = compile_program(name, schedule, int(devices),
                                        recompute)
        if split and "shard.all_reduce" not in open(mlir).read():
            sys.exit(f"{name}: tp={args.tp}, but the program has no "
                     "all-reduce: nothing was split")
        started = time.time()
        train = build(program)
        build_s = time.time() - started
        data = data_flags(mlir, files)
        dump = os.path.join(args.work, name + ".generated")
        trained = os.path.join(args.work, name + ".trained.onnx")
        log = os.path.join(args.work, name + ".jsonl")
        if os.path.exists(log):
            os.remove(log)
        cmd = [train, f"--steps={args.steps}", f"--dump-globals={dump}",
               f"--save-onnx={trained}", f"--log={log}"] + data
        if launch == "mpi":
            cmd = shlex.split(args.mpirun) + [
                "-np", str(args.dp * (int(devices) * degrees[0]
                                      if len(degrees) == 1
                                      else sum(degrees)))] + cmd
        else:
            cmd.append("--local")
        started = time.time()
        out = run(cmd)
        run_s = time.time() - started
        losses = [json.loads(line)["loss"] for line in open(log)]
        final = load_globals(dump)
        check_failures = progress_disagreement(losses_of(out), losses)

        check = Comparison(args.rtol, args.atol)
        check.failures.extend(check_failures)
        ref_check = Comparison(args.rtol if args.reference_rtol is None
                               else args.reference_rtol, args.atol)
        interp_losses, interp_globals = interpret(name, mlir)
        for label, (r_losses, r_globals) in (
                ("interpreter", (interp_losses, interp_globals)),
                ("reference", (ref_losses, ref_globals))):
            checker = ref_check if label == "reference" else check
            if len(losses) != len(r_losses):
                checker.failures.append(
                    f"{label}: {len(losses)} losses vs {len(r_losses)}")
            for i, (a, b) in enumerate(zip(losses, r_losses)):
                checker(f"{label}: loss of step {i + 1}", [a], [b])
            for key, value in r_globals.items():
                # Under data parallelism replica 0's BatchNorm running
                # statistics are the model's (DDP's buffer broadcast); the
                # one-device program's run over every micro-batch, so only
                # the interpreter, running the replicas, has them.
                if (args.dp > 1 and label == "reference" and
                        args.reference == "one-stage" and
                        "running_" in key):
                    continue
                if key not in final:
                    checker.failures.append(f"{label}: {key} missing")
                elif np.issubdtype(value.dtype, np.floating):
                    checker(f"{label}: {key}", final[key], value)
                elif not np.array_equal(final[key], value):
                    checker.failures.append(f"{label}: {key} differs")
        # The saved model re-imports and holds the trained weights.
        run([args.pipeline_opt, trained,
             f"--batch-size={args.micro_batch}", "-o", os.devnull])
        saved = onnx_initializers(trained)
        compared = 0
        for key, value in saved.items():
            if key in final:
                check(f"saved {key}", value, final[key])
                compared += 1
        if compared == 0:
            check.failures.append("the saved model holds no trained weight")
        check.failures.extend(ref_check.failures)
        worst = max(check.worst, ref_check.worst)
        against = ("" if args.reference_rtol is None else
                   f" (interpreter {check.worst:.2e}, reference "
                   f"{ref_check.worst:.2e})")
        print(f"{args.model} {name}: {len(losses)} losses, "
              f"{len(ref_globals)} globals, {compared} saved weights; worst "
              f"relative error {worst:.2e}{against}; build {build_s:.1f} s, "
              f"{args.steps} steps {run_s:.1f} s")
        if "pp.loss_scale" in final:
            print(f"{args.model} {name}: loss scale "
                  f"{float(final['pp.loss_scale']):g} after applying "
                  f"{int(final['pp.step'])} of {args.steps} steps")
        for failure in check.failures:
            print("MISMATCH", failure)
        failed |= bool(check.failures)
        reruns = [(mode, f"--p2p-matching={mode}", "tags")
                  for mode in filter(None, args.p2p_matching.split(","))]
        if args.prefetch_off:
            reruns.append(("no-prefetch", "--prefetch-receives=off", "on"))
        for mode, flag, baseline in reruns:
            again = os.path.join(args.work, f"{name}.{mode}.generated")
            proc = subprocess.run(
                [c for c in cmd if not c.startswith(("--dump-globals",
                                                     "--save-onnx", "--log"))]
                + [f"--dump-globals={again}", flag],
                capture_output=True, text=True)
            if (mode == "order" and proc.returncode != 0 and
                    "did not prove" in proc.stderr):
                print(f"{args.model} {name}: --p2p-matching=order refused: "
                      "the compiler did not prove the messages in order")
                continue
            if proc.returncode != 0:
                print(f"MISMATCH {flag} failed "
                      f"({proc.returncode}): {proc.stderr.strip()[-2000:]}")
                failed = True
                continue
            matched = load_globals(again)
            same = (losses_of(proc.stdout) == losses_of(out) and
                    matched.keys() == final.keys() and
                    all(np.array_equal(matched[k], final[k]) for k in final))
            print(f"{args.model} {name}: {flag} gives the same losses "
                  f"and weights as {baseline}: {'yes' if same else 'NO'}")
            failed |= not same
        if index == 0:
            # --lr overrides the compiled learning rate: the same value
            # repeats the run, twice as much changes every step after the
            # first update (after the steps a loss scale skipped, which
            # leave the weights and so the loss as they were).
            base = [c for c in cmd if not c.startswith(("--dump-globals",
                                                        "--save-onnx",
                                                        "--log"))]
            same = losses_of(run(base + [f"--lr={args.lr}"]))
            doubled = losses_of(run(base + [f"--lr={2 * args.lr}"]))
            printed = losses_of(out)
            unchanged = next((i for i, loss in enumerate(printed)
                              if loss != printed[0]), len(printed))
            ok = (same == printed and
                  doubled[:unchanged] == printed[:unchanged] and
                  all(a != b for a, b in zip(doubled[unchanged:],
                                             printed[unchanged:])))
            print(f"{args.model} {name}: --lr={args.lr} repeats the run, "
                  f"--lr={2 * args.lr} changes steps 2..: "
                  f"{'yes' if ok else 'NO'}")
            if not ok:
                print(f"MISMATCH --lr: {same} / {doubled} vs {printed}")
                failed = True
        if args.cuda and index == 0:
            started = time.time()
            build(program, cuda=True)
            print(f"{args.model} {name}: CUDA variant compiled with nvcc in "
                  f"{time.time() - started:.1f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
