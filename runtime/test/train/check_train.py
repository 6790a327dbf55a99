#!/usr/bin/env python3
"""Checks of the training driver (runtime/lib/train) on the toy program.

Usage: check_train.py --toy PATH --work DIR [--mpirun PATH] CHECK

Each CHECK runs the hand-written two-stage program of ToyProgram.cpp in a
fresh DIR/CHECK and exits non-zero with a FAIL line when the driver
misbehaves: wrong losses, a difference between --local and mpirun, a resumed
run that diverges, an unclear error, a hang.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time

import numpy as np

ARGS = None
WORK = None
MPI_FLAGS = ["--allow-run-as-root", "--oversubscribe"]


class Failure(Exception):
    pass


def expect(condition, message, output=None):
    if not condition:
        if output is not None:
            sys.stdout.write(output)
        raise Failure(message)


def toy_command(args, mpi_ranks=0, env=None, toy=None):
    toy = toy or ARGS.toy
    if not mpi_ranks:
        return [toy] + args
    command = [ARGS.mpirun] + MPI_FLAGS + ["-np", str(mpi_ranks)]
    for name in sorted(env or {}):
        command += ["-x", name]
    return command + [toy] + args


def run(args, mpi_ranks=0, env=None, timeout=50, toy=None):
    """Runs the toy; returns (status, stdout, stderr, seconds)."""
    command = toy_command(args, mpi_ranks, env, toy)
    full_env = dict(os.environ)
    full_env.update(env or {})
    start = time.time()
    try:
        done = subprocess.run(command, cwd=WORK, env=full_env,
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"")
        out = out.decode() if isinstance(out, bytes) else out
        raise Failure("hung: %s did not finish in %d s\n%s" %
                      (" ".join(command), timeout, out))
    seconds = time.time() - start
    print("$ %s  -> %d (%.1f s)" % (" ".join(command), done.returncode,
                                    seconds))
    return done.returncode, done.stdout, done.stderr, seconds


def run_ok(args, **kwargs):
    status, out, err, _ = run(args, **kwargs)
    expect(status == 0, "exit status %d" % status, out + err)
    return out


def step_losses(out):
    """[(step, loss string)] of the `step i/n` lines."""
    lines = re.findall(r"^step (\d+)/\d+  loss (\S+)  ", out, re.M)
    return [(int(s), loss) for s, loss in lines]


# Runs that cross OpenBLAS thread counts or launchers (--local threads against
# MPI ranks) may round GEMM sums in another order on some CPUs' kernels, so
# they agree within this relative tolerance, not bit for bit: float32 rounding
# differences grow over 5 steps to ~1e-6 relative; a wrong gradient or a
# missed micro-batch moves the loss by more than 1e-3. Runs of one launcher
# and one thread count (resume, --data DIR) stay exact.
CROSS_RUN_RTOL = 1e-5


def same_losses(a, b):
    """Step numbers equal and losses within CROSS_RUN_RTOL."""
    return len(a) == len(b) and all(
        sa == sb and abs(float(la) - float(lb)) <=
        CROSS_RUN_RTOL * abs(float(lb)) + 1e-6
        for (sa, la), (sb, lb) in zip(a, b))


def write_batches(directory, batches, seed):
    """x.npy and label.npy holding `batches` whole batches of 8."""
    os.makedirs(directory, exist_ok=True)
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (8 * batches, 4)).astype(np.float32)
    label = rng.uniform(-1, 1, (8 * batches, 3)).astype(np.float32)
    np.save(os.path.join(directory, "x.npy"), x)
    np.save(os.path.join(directory, "label.npy"), label)
    return x, label


def initial_weights(data_file):
    raw = open(data_file, "rb").read()
    w0 = np.frombuffer(raw, np.float32, 20, 0).reshape(4, 5).copy()
    w1 = np.frombuffer(raw, np.float32, 15, 80).reshape(5, 3).copy()
    return w0, w1


def reference_losses(x, label, steps, data_file):
    """The toy's training without Dropout, in numpy float32."""
    w0, w1 = initial_weights(data_file)
    m0 = np.zeros_like(w0)
    m1 = np.zeros_like(w1)
    batches = x.shape[0] // 8
    losses = []
    for step in range(steps):
        b = step % batches
        g0 = None
        g1 = None
        parts = []
        for mb in range(4):
            rows = slice(b * 8 + 2 * mb, b * 8 + 2 * mb + 2)
            xs, ls = x[rows], label[rows]
            y = xs @ w0
            z = y @ w1
            d = z - ls
            parts.append(float(np.mean(d * d, dtype=np.float32)))
            dz = d * np.float32(2.0 / 24)
            dw1 = y.T @ dz
            dy = dz @ w1.T
            dw0 = xs.T @ dy
            g1 = dw1 if g1 is None else g1 + dw1
            g0 = dw0 if g0 is None else g0 + dw0
        losses.append(float(np.float32(sum(parts) / 4)))
        for w, m, g in ((w0, m0, g0), (w1, m1, g1)):
            if step == 0:
                m[...] = g
            else:
                m[...] = np.float32(0.9) * m + g
            w -= np.float32(0.1) * m
    return losses


# --- checks ------------------------------------------------------------------


def check_local():
    out = run_ok(["--local", "--steps", "5", "--log", "train.csv"])
    losses = step_losses(out)
    expect([s for s, _ in losses] == [1, 2, 3, 4, 5] and
           len(re.findall(r"^step \d+/5  ", out, re.M)) == 5,
           "expected steps 1..5 of 5", out)
    values = [float(v) for _, v in losses]
    expect(values[-1] < values[0] and
           sum(b < a for a, b in zip(values, values[1:])) >= 3,
           "the loss does not decrease: %s" % values, out)
    expect(re.search(r"^trained 5 steps in \S+ s \(\S+ samples/s\)$", out,
                     re.M), "no summary line", out)
    for d in (0, 1):
        expect(re.search(r"^device %d \(cpu%d\): busy \S+ ms, planned peak "
                         r"\S+ MB, measured arena\+globals\+stash \S+ MB$" %
                         (d, d), out, re.M), "no line for device %d" % d, out)
    rows = open(os.path.join(WORK, "train.csv")).read().splitlines()
    expect(rows[0] == "step,loss,samples_per_s,step_ms,busy_ms_stage0,"
           "busy_ms_stage1", "bad CSV header: " + rows[0])
    expect(len(rows) == 6, "expected 5 CSV rows")
    for row, value in zip(rows[1:], values):
        expect(abs(float(row.split(",")[1]) - value) < 1e-6,
               "CSV loss differs: " + row)

    out = run_ok(["--local", "--steps", "3", "--log", "train.jsonl"])
    records = [json.loads(line) for line in open(
        os.path.join(WORK, "train.jsonl"))]
    expect([r["step"] for r in records] == [1, 2, 3], "bad JSON log steps")
    expect(all(len(r["busy_ms"]) == 2 and r["samples_per_s"] > 0
               for r in records), "bad JSON log record: %s" % records[0])

    # Threads inside the kernels change nothing.
    threaded = step_losses(run_ok(["--local", "--steps", "5", "--threads",
                                   "2"]))
    expect(same_losses(threaded, losses), "--threads 2 changes the losses")

    # Against numpy, without Dropout, on 3 batches of real data: input
    # slicing, gradient sums, the mean over micro-batches, momentum.
    x, label = write_batches(os.path.join(WORK, "data"), 3, seed=1)
    env = {"PP_TOY_NO_DROPOUT": "1"}
    files = ["--data", "x=data/x.npy", "--data", "label=data/label.npy"]
    out = run_ok(["--local", "--steps", "7"] + files, env=env)
    got = [float(v) for _, v in step_losses(out)]
    want = reference_losses(x, label, 7, os.path.join(
        os.path.dirname(ARGS.toy), "pp-rt-train-toy.data"))
    expect(np.allclose(got, want, rtol=2e-5, atol=1e-6),
           "losses differ from numpy:\n  got  %s\n  want %s" % (got, want))
    by_dir = step_losses(run_ok(["--local", "--steps", "7", "--data", "data"],
                                env=env))
    expect(by_dir == step_losses(out), "--data DIR differs from NAME=FILE")


def check_mpi():
    for extra in ([], ["--data", "data", "--seed", "7"]):
        if extra:
            write_batches(os.path.join(WORK, "data"), 2, seed=2)
        local = step_losses(run_ok(["--local", "--steps", "5"] + extra))
        mpi = step_losses(run_ok(["--steps", "5"] + extra, mpi_ranks=2))
        expect(len(local) == 5 and same_losses(local, mpi),
               "mpirun -np 2 differs from --local:\n  %s\n  %s" %
               (local, mpi))


def resume_checks(mpi_ranks):
    write_batches(os.path.join(WORK, "data"), 3, seed=3)
    common = ["--data", "data", "--seed", "3"]
    local = ["--local"]
    # Uninterrupted, with a checkpoint every 2 steps.
    full = step_losses(run_ok(local + ["--steps", "6", "--checkpoint-every",
                                       "2", "--checkpoint", "ck-full"] +
                              common))
    expect(len(full) == 6, "expected 6 steps")
    meta = open(os.path.join(WORK, "ck-full", "meta")).read()
    expect("steps 6" in meta, "meta after 6 steps: " + meta)
    files = sorted(os.listdir(os.path.join(WORK, "ck-full")))
    expect(files == ["meta", "rank0.ckpt", "rank1.ckpt"],
           "checkpoint files: %s" % files)

    # Stopped after 2 steps, then resumed to 6. Under mpirun this crosses
    # launchers (the uninterrupted run is --local).
    launch = {"mpi_ranks": mpi_ranks} if mpi_ranks else {}
    agree = same_losses if mpi_ranks else (lambda a, b: a == b)
    first_args = ([] if mpi_ranks else local) + [
        "--steps", "2", "--checkpoint-every", "2", "--checkpoint", "ck",
        "--log", "log.csv"] + common
    first = step_losses(run_ok(first_args, **launch))
    expect(agree(first, full[:2]), "the first two steps differ")
    second_args = ([] if mpi_ranks else local) + [
        "--steps", "6", "--resume", "ck", "--data", "data", "--log",
        "log.csv"]
    out = run_ok(second_args, **launch)
    second = step_losses(out)
    expect(agree(second, full[2:]),
           "the resumed run differs:\n  resumed %s\n  full    %s" %
           (second, full[2:]), out)
    rows = open(os.path.join(WORK, "log.csv")).read().splitlines()
    expect(len(rows) == 7 and rows[0].startswith("step,") and
           [r.split(",")[0] for r in rows[1:]] == [str(i) for i in
                                                   range(1, 7)],
           "the resumed run does not continue the log: %s" % rows)

    # A checkpoint of one launcher resumes under the other.
    other = run_ok((local if mpi_ranks else []) + ["--steps", "6", "--resume",
                                                   "ck", "--data", "data"],
                   **({} if mpi_ranks else
                      ({"mpi_ranks": 2} if ARGS.mpirun else {})))
    expect(same_losses(step_losses(other), full[2:]),
           "resuming under the other launcher differs")

    # --seed must not contradict the checkpoint.
    status, out, err, _ = run(local + ["--steps", "6", "--resume", "ck",
                                       "--seed", "4"])
    expect(status == 1 and "--seed 4 differs from the checkpoint's seed 3"
           in err, "a contradicting --seed is not reported", out + err)


def check_resume():
    resume_checks(0)


def check_resume_mpi():
    resume_checks(2)


def expect_error(args, patterns, status=1, mpi_ranks=0, env=None):
    code, out, err, _ = run(args, mpi_ranks=mpi_ranks, env=env)
    expect(code == status if status else code != 0,
           "expected exit status %s, got %d" % (status or "non-zero", code),
           out + err)
    for pattern in patterns:
        expect(re.search(pattern, err + out),
               "no match for /%s/ in the output" % pattern, out + err)
    return out + err


def check_bad_inputs():
    os.makedirs(os.path.join(WORK, "bad"))
    np.save(os.path.join(WORK, "bad", "x_bad.npy"),
            np.zeros((8, 5), np.float32))
    np.save(os.path.join(WORK, "bad", "x_f64.npy"),
            np.zeros((8, 4), np.float64))
    np.save(os.path.join(WORK, "bad", "x_odd.npy"),
            np.zeros((12, 4), np.float32))
    np.save(os.path.join(WORK, "bad", "label.npy"),
            np.zeros((8, 3), np.float32))
    lbl = ["--data", "label=bad/label.npy"]
    expect_error(["--local", "--data", "x=bad/x_bad.npy"] + lbl,
                 [r"'bad/x_bad\.npy' for input 'x': expected "
                  r"f32\[N\*8, 4\].*got f32\[8, 5\]"])
    expect_error(["--local", "--data", "x=bad/x_f64.npy"] + lbl,
                 [r"x_f64\.npy' for input 'x'.*got f64\[8, 4\]"])
    expect_error(["--local", "--data", "x=bad/x_odd.npy"] + lbl,
                 [r"x_odd\.npy' for input 'x'.*got f32\[12, 4\]"])
    expect_error(["--local", "--data", "y=bad/label.npy"],
                 [r"no input 'y' \(inputs: 'x', 'label'\)"])
    expect_error(["--local", "--data", "x=bad/missing.npy"] + lbl,
                 [r"input 'x'.*'bad/missing\.npy': cannot read"])
    expect_error(["--local"] + lbl, [r"no data for input 'x'"])
    expect_error(["--bogus"], [r"unknown option '--bogus'; valid options: "
                               r"--local, --steps"], status=2)
    expect_error(["--steps"], [r"--steps expects N"], status=2)
    expect_error(["--steps", "zero"], [r"--steps: expected a positive"],
                 status=2)
    expect_error(["--lr", "0"], [r"--lr: the learning rate must be "
                                 r"positive"], status=2)
    expect_error(["--local", "--data-file", "no/such.data"],
                 [r"cannot open the data file 'no/such\.data'"])
    open(os.path.join(WORK, "short.data"), "wb").write(b"\0" * 100)
    expect_error(["--local", "--data-file", "short.data"],
                 [r"'short\.data' \(100 bytes\) has no room for global 'W1'"])
    os.makedirs(os.path.join(WORK, "empty"))
    expect_error(["--local", "--resume", "empty"],
                 [r"--resume: cannot read 'empty/meta'"])
    run_ok(["--local", "--steps", "2", "--checkpoint-every", "1",
            "--checkpoint", "ck"])
    with open(os.path.join(WORK, "ck", "rank1.ckpt"), "r+b") as f:
        f.truncate(50)
    expect_error(["--local", "--resume", "ck"],
                 [r"'ck/rank1\.ckpt' is truncated or corrupt"])
    if ARGS.mpirun:
        expect_error(["--steps", "2"], [r"the program runs on 2 devices: "
                                        r"launch it with mpirun -np 2 \(this "
                                        r"job has 3 ranks\)"],
                     status=None, mpi_ranks=3)


def failure_checks(mpi_ranks):
    args = ([] if mpi_ranks else ["--local"]) + ["--steps", "5"]
    out = expect_error(args, [
        r"error: rank 1 \(device cpu1\), stage 1, micro-batch 0, forward "
        r"stage1_forward: op onnx.Gemm '/1/Gemm': gemm: contraction dims "
        r"differ"], status=None if mpi_ranks else 1, mpi_ranks=mpi_ranks,
        env={"PP_TOY_FAIL": "1"})
    expect(out.count("error: ") == 1, "more than one error reported", out)


def check_stage_failure():
    failure_checks(0)


def check_stage_failure_mpi():
    failure_checks(2)


def check_nan():
    expect_error(["--local", "--steps", "3"],
                 [r"error: rank 1 \(device cpu1\), stage 1, step 1: output "
                  r"'loss' is NaN"], env={"PP_TOY_NAN": "1"})


def check_timeout():
    start = time.time()
    expect_error(["--local", "--steps", "3", "--timeout", "1"],
                 [r"error: rank 0 \(device cpu0\), stage 0, micro-batch 0, "
                  r"backward stage0_backward: op pp.recv: waiting for the "
                  r"message from stage 1 on rank 1"],
                 env={"PP_TOY_SLEEP": "4"})
    expect(time.time() - start < 15, "the timeout took too long")


def check_killed_rank():
    code, out, err, seconds = run(["--steps", "1000"], mpi_ranks=2,
                                  env={"PP_TOY_KILL": "1"}, timeout=60)
    expect(code != 0, "the job exited 0", out + err)
    expect(seconds <= 30, "took %.0f s" % seconds, out + err)
    expect(re.search(r"rank 1", out + err), "no mention of rank 1", out + err)
    expect(len(step_losses(out)) >= 3, "rank 1 died before step 4", out + err)


def write_toy_model(path, w0, w1):
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W0"], ["y"]),
         helper.make_node("MatMul", ["y", "W1"], ["z"])],
        "toy",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 4])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, [8, 3])],
        [numpy_helper.from_array(w0, "W0"), numpy_helper.from_array(w1, "W1")])
    onnx.save(helper.make_model(graph), path)


def save_checks(mpi_ranks):
    try:
        import onnx
        from onnx import numpy_helper
    except ImportError:
        print("SKIP: no python onnx")
        sys.exit(77)
    # A private copy of the toy: the model and the data file resolve next to
    # the executable.
    toy = os.path.join(WORK, "pp-rt-train-toy")
    shutil.copy(ARGS.toy, toy)
    subprocess.run([toy, "--write-toy-data", WORK], check=True)
    w0, w1 = initial_weights(os.path.join(WORK, "pp-rt-train-toy.data"))
    model = os.path.join(WORK, "pp-rt-train-toy.onnx")
    launch = ([], {"mpi_ranks": mpi_ranks}) if mpi_ranks else (["--local"],
                                                                {})
    code, out, err, _ = run(launch[0] + ["--steps", "1", "--save-onnx",
                                         "out.onnx"], toy=toy, **launch[1])
    expect(code != 0 and re.search(r"the source model '.*pp-rt-train-toy"
                                   r"\.onnx' is missing", err),
           "a missing source model is not reported", out + err)

    write_toy_model(model, w0, w1[:4])
    code, out, err, _ = run(launch[0] + ["--steps", "1", "--save-onnx",
                                         "out.onnx"], toy=toy, **launch[1])
    expect(code != 0 and re.search(r"initializer 'W1' .*its shape is "
                                   r"\[4, 3\], the trained value's \[5, 3\]",
                                   err),
           "a shape mismatch is not reported", out + err)

    write_toy_model(model, w0, w1)
    out = run_ok(launch[0] + ["--steps", "3", "--save-onnx", "out.onnx",
                              "--dump-globals", "dump"], toy=toy, **launch[1])
    index = open(os.path.join(WORK, "dump", "globals.txt")).read()
    expect(index == "W0\tW0.npy\nW1\tW1.npy\nstep\tstep.npy\n"
           "W0.momentum\tW0.momentum.npy\nW1.momentum\tW1.momentum.npy\n",
           "globals.txt: %r" % index)
    dump = {name: np.load(os.path.join(WORK, "dump", name + ".npy"))
            for name in ("W0", "W1", "step", "W0.momentum", "W1.momentum")}
    expect(dump["step"].dtype == np.int64 and dump["step"].shape == () and
           int(dump["step"]) == 3, "step counter: %r" % dump["step"])
    saved = {t.name: numpy_helper.to_array(t) for t in
             onnx.load(os.path.join(WORK, "out.onnx")).graph.initializer}
    for name, initial in (("W0", w0), ("W1", w1)):
        expect(np.array_equal(saved[name], dump[name]),
               "%s in out.onnx differs from the dump" % name)
        expect(not np.allclose(saved[name], initial), "%s did not train" %
               name)
    return dump


def check_save():
    save_checks(0)


def check_save_mpi():
    global WORK
    mpi = save_checks(2)
    local_dir = os.path.join(WORK, "local")
    os.makedirs(local_dir)
    mpi_work, WORK = WORK, local_dir
    try:
        local = save_checks(0)
    finally:
        WORK = mpi_work
    for name in mpi:
        expect(np.allclose(mpi[name], local[name], rtol=CROSS_RUN_RTOL,
                           atol=1e-7),
               "%s differs between mpirun and --local" % name)


CHECKS = {
    "local": check_local,
    "mpi": check_mpi,
    "resume": check_resume,
    "resume-mpi": check_resume_mpi,
    "bad-inputs": check_bad_inputs,
    "stage-failure": check_stage_failure,
    "stage-failure-mpi": check_stage_failure_mpi,
    "nan": check_nan,
    "timeout": check_timeout,
    "killed-rank": check_killed_rank,
    "save": check_save,
    "save-mpi": check_save_mpi,
}


def main():
    global ARGS, WORK
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--toy", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--mpirun")
    parser.add_argument("check", choices=sorted(CHECKS))
    ARGS = parser.parse_args()
    ARGS.toy = os.path.abspath(ARGS.toy)
    WORK = os.path.join(os.path.abspath(ARGS.work), ARGS.check)
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    if ARGS.check.endswith("mpi") or ARGS.check == "killed-rank":
        if not ARGS.mpirun:
            print("SKIP: no mpirun")
            return 77
    try:
        CHECKS[ARGS.check]()
    except Failure as e:
        print("FAIL: %s" % e)
        return 1
    print("PASS: %s" % ARGS.check)
    return 0


if __name__ == "__main__":
    sys.exit(main())
