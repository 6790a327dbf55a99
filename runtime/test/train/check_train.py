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


def run(args, mpi_ranks=0, env=None, timeout=50, toy=None, file_limit=None):
    """Runs the toy; returns (status, stdout, stderr, seconds). With
    `file_limit`, no file it writes may grow past that many bytes (a full
    disk: writes fail with EFBIG)."""
    command = toy_command(args, mpi_ranks, env, toy)
    full_env = dict(os.environ)
    full_env.update(env or {})

    def limit_files():
        import resource
        import signal
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (file_limit, file_limit))
    start = time.time()
    try:
        done = subprocess.run(command, cwd=WORK, env=full_env,
                              capture_output=True, text=True, timeout=timeout,
                              preexec_fn=limit_files if file_limit else None)
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

    # --no-tf32 concerns CUDA's F32 GEMMs and convolutions: on the CPU the
    # same losses, bit for bit.
    out = run_ok(["--local", "--steps", "5", "--no-tf32"])
    expect(step_losses(out) == losses, "--no-tf32 changed the CPU's losses",
           out)

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
    latest = open(os.path.join(WORK, "ck-full", "latest")).read()
    expect(latest == "step-6\n", "latest after 6 steps: %r" % latest)
    # The two newest checkpoints are kept (--keep-checkpoints 2).
    files = sorted(os.listdir(os.path.join(WORK, "ck-full")))
    expect(files == ["latest", "step-4", "step-6"],
           "checkpoint directory: %s" % files)
    files = sorted(os.listdir(os.path.join(WORK, "ck-full", "step-6")))
    expect(files == ["MANIFEST", "rank0.ckpt", "rank1.ckpt"],
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
    expect("resuming from checkpoint 'ck/step-2' (step 2)" in out,
           "the resumed run does not say which checkpoint it took", out)
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


def expect_error(args, patterns, status=1, mpi_ranks=0, env=None,
                 file_limit=None, toy=None):
    code, out, err, _ = run(args, mpi_ranks=mpi_ranks, env=env, timeout=20,
                            file_limit=file_limit, toy=toy)
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
    np.save(os.path.join(WORK, "bad", "x_few.npy"),
            np.zeros((5, 4), np.float32))
    np.save(os.path.join(WORK, "bad", "label.npy"),
            np.zeros((8, 3), np.float32))
    lbl = ["--data", "label=bad/label.npy"]
    expect_error(["--local", "--data", "x=bad/x_bad.npy"] + lbl,
                 [r"'bad/x_bad\.npy' for input 'x': shape \[8, 5\], "
                  r"expected \[N, 4\]"])
    expect_error(["--local", "--data", "x=bad/x_f64.npy"] + lbl,
                 [r"x_f64\.npy' for input 'x': dtype f64, expected f32"])
    expect_error(["--local", "--data", "x=bad/x_few.npy"] + lbl,
                 [r"x_few\.npy' for input 'x': 5 sample\(s\) along dim 0, "
                  r"fewer than one batch of 8"])
    expect_error(["--local", "--data", "y=bad/label.npy"],
                 [r"no input 'y' \(inputs: 'x', 'label'\)"])
    expect_error(["--local", "--data", "x=bad/missing.npy"] + lbl,
                 [r"input 'x'.*cannot read 'bad/missing\.npy'"])
    expect_error(["--local"] + lbl, [r"no data for input 'x'"])
    expect_error(["--bogus"], [r"unknown option '--bogus'; valid options: "
                               r"--local, --steps"], status=2)
    expect_error(["--steps"], [r"--steps expects N"], status=2)
    expect_error(["--no-tf32=yes"], [r"--no-tf32 takes no value"], status=2)
    expect_error(["--steps", "zero"], [r"--steps: expected a positive"],
                 status=2)
    expect_error(["--lr", "0"], [r"--lr: the learning rate must be "
                                 r"positive"], status=2)
    expect_error(["--local", "--data-file", "no/such.data"],
                 [r"cannot read the data file 'no/such\.data': No such file"])
    open(os.path.join(WORK, "short.data"), "wb").write(b"\0" * 100)
    expect_error(["--local", "--data-file", "short.data"],
                 [r"'short\.data' \(100 bytes\) has no room for global 'W1'"])
    os.makedirs(os.path.join(WORK, "empty"))
    expect_error(["--local", "--resume", "empty"],
                 [r"--resume: no complete checkpoint in 'empty' \(no "
                  r"step-<k> directory\)"])
    expect_error(["--local", "--resume", "no/such"],
                 [r"--resume: cannot read directory 'no/such'"])
    if ARGS.mpirun:
        expect_error(["--steps", "2"], [r"the program runs on 2 devices: "
                                        r"launch it with mpirun -np 2 \(it "
                                        r"was launched on 3\)"],
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


# --- crash-safe checkpoints ---------------------------------------------------

CRASH_RUNS = 20


def checkpoint_operations(err):
    """Per rank, the checkpoint file operations PP_TEST_CRASH_AT=trace
    printed, in order."""
    ops = {}
    for rank, n, what in re.findall(r"^checkpoint operation (\d+):(\d+) "
                                    r"(.*)$", err, re.M):
        ops.setdefault(int(rank), []).append(what)
    return ops


def resumed_step(out):
    m = re.search(r"^resuming from checkpoint '(\S+)' \(step (\d+)\)$", out,
                  re.M)
    return (m.group(1), int(m.group(2))) if m else (None, None)


def crash_checks(mpi_ranks):
    """SIGKILLs rank 0 or 1 (the whole process under --local) at CRASH_RUNS
    checkpoint file operations drawn with a fixed seed (PP_TEST_CRASH_AT),
    from the second checkpoint on; every interrupted run must resume from a
    complete checkpoint with the losses of the uninterrupted run (exact: the
    same launcher)."""
    import random
    write_batches(os.path.join(WORK, "data"), 3, seed=3)
    launch = ([], {"mpi_ranks": mpi_ranks}) if mpi_ranks else (["--local"],
                                                                {})
    common = launch[0] + ["--data", "data", "--steps", "6",
                          "--checkpoint-every", "1", "--checkpoint", "ck"]
    status, out, err, _ = run(common + ["--seed", "3"],
                              env={"PP_TEST_CRASH_AT": "trace"}, **launch[1])
    expect(status == 0, "the uninterrupted run failed", out + err)
    full = step_losses(out)
    ops = checkpoint_operations(err)
    expect(len(full) == 6 and sorted(ops) == [0, 1],
           "expected 6 steps and the operations of ranks 0 and 1", out + err)
    # The operations of the first checkpoint: up to the first of step 2.
    first = {r: next(i for i, what in enumerate(ops[r]) if "step-2" in what)
             for r in ops}
    rng = random.Random(20240611 + mpi_ranks)
    resumed, steps, seconds = 0, [], 0.0
    for i in range(CRASH_RUNS):
        shutil.rmtree(os.path.join(WORK, "ck"), ignore_errors=True)
        rank = rng.randrange(2)
        n = rng.randint(first[rank] + 1, len(ops[rank]))
        point = "%d:%d" % (rank, n)
        status, out, err, t = run(common + ["--seed", "3"],
                                  env={"PP_TEST_CRASH_AT": point},
                                  **launch[1])
        seconds += t
        expect(status != 0, "the run killed at %s (%s) exited 0" %
               (point, ops[rank][n - 1]), out + err)
        if not mpi_ranks:
            expect("PP_TEST_CRASH_AT: killed at checkpoint operation %s " %
                   point in err, "not killed at %s" % point, out + err)
        # Resumed, it writes its checkpoints over what the crash left.
        status, out, err, t = run(common + ["--resume", "ck"], **launch[1])
        seconds += t
        path, step = resumed_step(out)
        expect(status == 0 and step is not None,
               "killed at %s (%s): the resumed run failed" %
               (point, ops[rank][n - 1]), out + err)
        expect(step_losses(out) == full[step:],
               "killed at %s (%s), resumed from %s: the losses differ:\n  %s"
               "\n  %s" % (point, ops[rank][n - 1], path, step_losses(out),
                           full[step:]), out + err)
        expect(open(os.path.join(WORK, "ck", "latest")).read() ==
               "step-6\n", "the resumed run did not commit step 6")
        resumed += 1
        steps.append(step)
    print("resumed %d of %d killed runs with the uninterrupted losses "
          "(from steps %s; %.1f s)" % (resumed, CRASH_RUNS, steps, seconds))
    if not mpi_ranks:
        random_time_kills(rng)


def random_time_kills(rng, runs=5, steps=60):
    """SIGKILLs a --local run with a checkpoint every step (whose time goes
    mostly to writing them) at a random time after its first commit; each
    must resume with the uninterrupted losses."""
    common = ["--local", "--data", "data", "--steps", str(steps), "--seed",
              "3", "--checkpoint-every", "1"]
    full = step_losses(run_ok(common + ["--checkpoint", "ck-full"]))
    latest = os.path.join(WORK, "ck", "latest")
    resumed = []
    for i in range(runs):
        shutil.rmtree(os.path.join(WORK, "ck"), ignore_errors=True)
        proc = subprocess.Popen(toy_command(common + ["--checkpoint", "ck"]),
                                cwd=WORK, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        while not os.path.exists(latest) and proc.poll() is None:
            time.sleep(0.002)
        time.sleep(rng.uniform(0, 0.3))
        proc.kill()
        killed = proc.wait() == -9
        out = run_ok(common + ["--checkpoint", "ck", "--resume", "ck"])
        path, step = resumed_step(out)
        expect(step is not None and step_losses(out) == full[step:],
               "killed at a random time, resumed from %s: the losses differ"
               % path, out)
        resumed.append((step, killed))
    print("random-time kills: resumed %d of %d with the uninterrupted losses "
          "(from steps %s)" % (len(resumed), runs,
                               [s for s, k in resumed if k]))


def check_checkpoint_crash():
    crash_checks(0)


def check_checkpoint_crash_mpi():
    crash_checks(2)


def flip_byte(path, offset):
    with open(path, "r+b") as f:
        f.seek(offset)
        byte = f.read(1)
        f.seek(offset)
        f.write(bytes([byte[0] ^ 0x01]))


def crc32c(data):
    crc = 0xffffffff
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xffffffff


def forge_first_global_id(step_dir, rank, add):
    """Adds `add` to the id of the first global of rank<rank>.ckpt (format:
    runtime/lib/train/Checkpoint.cpp) and rewrites the MANIFEST to match, so
    that the checkpoint passes its CRC-32C checks."""
    import struct
    name = "rank%d.ckpt" % rank
    path = os.path.join(step_dir, name)
    data = bytearray(open(path, "rb").read())
    pos = 8
    (n,) = struct.unpack_from("<Q", data, pos)      # model name
    pos += 8 + n + 6 * 8 + 8                          # 6 fields, stage count
    pos += 8 + 8 + 8                                  # stage, reserved, globals
    (gid,) = struct.unpack_from("<q", data, pos)
    struct.pack_into("<q", data, pos, gid + add)
    open(path, "wb").write(bytes(data))
    manifest = os.path.join(step_dir, "MANIFEST")
    lines = open(manifest).read().splitlines()[:-1]
    lines = ["file %s %d %08x" % (name, len(data), crc32c(data))
             if line.startswith("file " + name + " ") else line
             for line in lines]
    body = "".join(line + "\n" for line in lines)
    open(manifest, "w").write(body + "crc32c %08x\n" % crc32c(body.encode()))


def check_checkpoint_corrupt():
    write_batches(os.path.join(WORK, "data"), 3, seed=3)
    common = ["--local", "--data", "data"]
    full = step_losses(run_ok(common + ["--steps", "6", "--seed", "3"]))
    run_ok(common + ["--steps", "4", "--seed", "3", "--checkpoint-every", "2",
                     "--checkpoint", "ck"])
    shutil.copytree(os.path.join(WORK, "ck"), os.path.join(WORK, "ck-good"))

    def resume(expected_step, patterns, env=None):
        status, out, err, _ = run(common + ["--steps", "6", "--resume", "ck"],
                                  env=env)
        for pattern in patterns:
            expect(re.search(pattern, err), "no match for /%s/" % pattern,
                   out + err)
        expect(status == 0 and resumed_step(out) ==
               ("ck/step-%d" % expected_step, expected_step),
               "did not resume from step %d" % expected_step, out + err)
        expect(step_losses(out) == full[expected_step:],
               "the losses after step %d differ" % expected_step, out + err)

    # One flipped byte of a rank file, then of a manifest: named, skipped,
    # the previous checkpoint taken.
    flip_byte(os.path.join(WORK, "ck", "step-4", "rank1.ckpt"), 100)
    resume(2, [r"warning: --resume: skipping checkpoint 'ck/step-4': "
               r"'ck/step-4/rank1\.ckpt' fails its CRC-32C check"])
    shutil.rmtree(os.path.join(WORK, "ck"))
    shutil.copytree(os.path.join(WORK, "ck-good"), os.path.join(WORK, "ck"))
    flip_byte(os.path.join(WORK, "ck", "step-4", "MANIFEST"), 20)
    resume(2, [r"skipping checkpoint 'ck/step-4': 'ck/step-4/MANIFEST' "
               r"fails its CRC-32C check"])
    # A missing file (a torn checkpoint), a newer uncommitted one, a
    # corrupt latest.
    shutil.rmtree(os.path.join(WORK, "ck"))
    shutil.copytree(os.path.join(WORK, "ck-good"), os.path.join(WORK, "ck"))
    os.remove(os.path.join(WORK, "ck", "step-4", "rank0.ckpt"))
    resume(2, [r"skipping checkpoint 'ck/step-4': cannot read "
               r"'ck/step-4/rank0\.ckpt'"])
    shutil.rmtree(os.path.join(WORK, "ck"))
    shutil.copytree(os.path.join(WORK, "ck-good"), os.path.join(WORK, "ck"))
    open(os.path.join(WORK, "ck", "latest"), "w").write("step-2\n")
    resume(2, [r"skipping checkpoint 'ck/step-4': not committed "
               r"\('ck/latest' names step-2\)"])
    open(os.path.join(WORK, "ck", "latest"), "w").write("stwp-4\n")
    resume(4, [r"'ck/latest' is corrupt: trying every step-<k>"])
    # A checkpoint of another program is skipped by name; with none left,
    # nothing resumes.
    expect_error(common + ["--steps", "6", "--resume", "ck"],
                 [r"skipping checkpoint 'ck/step-4': written by another "
                  r"program \('toy', identity \w+ \w+; this is 'toy', "
                  r"identity \w+ \w+\)",
                  r"skipping checkpoint 'ck/step-2': written by another",
                  r"--resume: no complete checkpoint in 'ck'"],
                 env={"PP_TOY_OTHER_PROGRAM": "1"})
    # A rank file whose global id is out of range (2^32 + its id, CRCs
    # recomputed: found by the checkpoint fuzzer's review) is an error naming
    # the global, not an out-of-bounds read.
    shutil.rmtree(os.path.join(WORK, "ck"))
    shutil.copytree(os.path.join(WORK, "ck-good"), os.path.join(WORK, "ck"))
    forge_first_global_id(os.path.join(WORK, "ck", "step-4"), 0, 1 << 32)
    expect_error(common + ["--steps", "6", "--resume", "ck/step-4"],
                 [r"--resume: 'ck/step-4/rank0\.ckpt': stage \d+ holds "
                  r"global '[^']+', which this program's stage does not have"])
    shutil.rmtree(os.path.join(WORK, "ck"))
    shutil.copytree(os.path.join(WORK, "ck-good"), os.path.join(WORK, "ck"))
    # --resume DIR/step-<k> takes that one.
    out = run_ok(common + ["--steps", "6", "--resume", "ck/step-2"])
    expect(resumed_step(out) == ("ck/step-2", 2) and
           step_losses(out) == full[2:], "--resume ck/step-2", out)
    # The data file of another program (or a changed one) is rejected.
    data = os.path.join(os.path.dirname(ARGS.toy), "pp-rt-train-toy.data")
    shutil.copy(data, os.path.join(WORK, "other.data"))
    flip_byte(os.path.join(WORK, "other.data"), 10)
    expect_error(["--local", "--data-file", "other.data"],
                 [r"the data file 'other\.data' is not the one of program "
                  r"'toy' \(its CRC-32C is \w+, the program's data file has "
                  r"\w+\)"])
    # --keep-checkpoints K keeps the K newest.
    run_ok(common + ["--steps", "5", "--checkpoint-every", "1",
                     "--checkpoint", "keep", "--keep-checkpoints", "3"])
    expect(sorted(os.listdir(os.path.join(WORK, "keep"))) ==
           ["latest", "step-3", "step-4", "step-5"],
           "--keep-checkpoints 3: %s" % os.listdir(os.path.join(WORK, "keep")))
    for bad in ("0", "-1", "x"):
        expect_error(["--keep-checkpoints", bad],
                     [r"--keep-checkpoints: expected a positive integer"],
                     status=2)


# --- files and options the driver must refuse or report ----------------------


def check_io_errors():
    np.save(os.path.join(WORK, "label.npy"), np.zeros((8, 3), np.float32))
    lbl = ["--data", "label=label.npy"]
    # Inputs: only regular files (no directory, FIFO or device: no hang, no
    # endless read), with the limit stated.
    os.makedirs(os.path.join(WORK, "adir"))
    os.makedirs(os.path.join(WORK, "ddir", "x.npy"))
    os.mkfifo(os.path.join(WORK, "fifo"))
    regular = r"not a regular file \(only regular files of at most 1 TiB"
    expect_error(["--local", "--data", "x=adir"] + lbl,
                 [r"--data for input 'x': cannot read 'adir': it is a "
                  r"directory"])
    expect_error(["--local", "--data", "ddir"],
                 [r"cannot read 'ddir/x\.npy': it is a directory"])
    expect_error(["--local", "--data", "x=fifo"] + lbl,
                 [r"cannot read 'fifo': " + regular])
    expect_error(["--local", "--data", "x=/dev/zero"] + lbl,
                 [r"cannot read '/dev/zero': " + regular])
    expect_error(["--local", "--data-file", "fifo"],
                 [r"cannot read the data file 'fifo': " + regular])
    expect_error(["--local", "--data-file", "/dev/zero"],
                 [r"cannot read the data file '/dev/zero': " + regular])
    expect_error(["--local", "--data-file", "adir"],
                 [r"cannot read the data file 'adir': it is a directory"])
    # A --log FIFO that nobody reads: an error at once, not a hang in
    # open() (issue 42, item 6).
    expect_error(["--local", "--steps", "2", "--log", "fifo"],
                 [r"--log: 'fifo' is a FIFO that no process reads"])
    # Every write is checked: a full disk is an error naming the file.
    for log in ("/dev/full", "full.csv"):
        out = expect_error(["--local", "--steps", "3", "--log", log],
                           [r"error: --log: cannot write '%s': (No space "
                            r"left on device|File too large)" % log],
                           file_limit=120 if log == "full.csv" else None)
    out = expect_error(["--local", "--steps", "3", "--checkpoint-every", "1",
                        "--checkpoint", "fullck"],
                       [r"--checkpoint: rank \d: cannot write "
                        r"'fullck/step-1/rank\d\.ckpt\.tmp': File too large"],
                       file_limit=200)
    expect(not os.path.exists(os.path.join(WORK, "fullck", "latest")),
           "a failed checkpoint was committed")
    expect_error(["--local", "--steps", "1", "--dump-globals", "fulldump"],
                 [r"--dump-globals: cannot write 'fulldump/W0\.npy': File "
                  r"too large"], file_limit=100)
    # Output paths are checked before the first step.
    open(os.path.join(WORK, "afile"), "w").write("x")
    for args, pattern in (
            (["--dump-globals", "afile/dump"],
             r"--dump-globals: 'afile/dump' is not a directory|--dump-globals"
             r": cannot create directory 'afile/dump'"),
            (["--checkpoint-every", "1", "--checkpoint", "afile/ck"],
             r"--checkpoint: cannot create directory 'afile/ck'"),
            (["--log", "no/such/train.csv"],
             r"--log: cannot write 'no/such/train\.csv'")):
        out = expect_error(["--local", "--steps", "2"] + args, [pattern])
        expect(not step_losses(out), "trained before reporting %s" % args,
               out)
    # --timeout: finite, positive; an infinite one would livelock --local.
    for bad in ("inf", "nan", "-1", "0", "1e300"):
        expect_error(["--local", "--timeout", bad],
                     [r"--timeout: expected a finite, positive number of "
                      r"seconds, at most 1e6, got '%s'" % bad], status=2)
    # --test-delay: RANK:MS or RANK:MS:EVERY:AT.
    for bad in ("1", "-1:5", "0:inf", "0:5:2", "0:5:2:2", "0:5:0:0"):
        expect_error(["--local", "--test-delay", bad],
                     [r"--test-delay: expected RANK:MS\[:EVERY:AT\] .*, "
                      r"got '%s'" % bad], status=2)
    # --local under an mpirun of more than one process.
    if ARGS.mpirun:
        out = expect_error(["--local", "--steps", "2"],
                           [r"error: --local runs every device as a thread "
                            r"of one process, but mpirun started 2 processes"],
                           status=None, mpi_ranks=2)
        expect(not step_losses(out), "mpirun -np 2 --local trained", out)


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
    code, out, err, _ = run(launch[0] + ["--steps", "1", "--save-onnx",
                                         "no/such/out.onnx"], toy=toy,
                            **launch[1])
    expect(code != 0 and re.search(r"--save-onnx: cannot write 'no/such/"
                                   r"out\.onnx': its directory 'no/such' does "
                                   r"not exist", err) and
           not step_losses(out),
           "an unwritable --save-onnx is not reported before training",
           out + err)
    code, out, err, _ = run(launch[0] + ["--steps", "1", "--save-onnx",
                                         "/dev/full"], toy=toy, **launch[1])
    expect(code != 0 and re.search(r"--save-onnx: cannot write '/dev/full': "
                                   r"No space left on device", err),
           "a full disk under --save-onnx is not reported", out + err)
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


# --- hostile files: huge inputs and metadata, planted links -------------------

def sparse_file(path, size, head=b""):
    """A file of `size` bytes that starts with `head` and takes no disk."""
    with open(path, "wb") as f:
        f.write(head)
        f.truncate(size)


def check_huge_npy():
    """--data files far larger than memory (sparse files of ~900 GB) are
    memory-mapped, not loaded: a few steps train quickly in file order;
    --shuffle refuses more samples than its 32-bit permutation indexes,
    naming the file."""
    # f32[N, 4] and f32[N, 3] of ~900 GB and ~675 GB: below the 1 TiB file
    # limit, above any memory.
    rows = (900 << 30) // 16 // 8 * 8

    def sparse_npy(name, width):
        header = ("{'descr': '<f4', 'fortran_order': False, 'shape': "
                  "(%d, %d), }" % (rows, width))
        header += " " * (63 - (10 + len(header)) % 64) + "\n"
        head = b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + \
            header.encode()
        sparse_file(os.path.join(WORK, name), len(head) + rows * 4 * width,
                    head)
    sparse_npy("huge.npy", 4)
    sparse_npy("huge-label.npy", 3)
    huge = ["--local", "--data", "x=huge.npy", "--data",
            "label=huge-label.npy"]
    start = time.time()
    out = run_ok(huge + ["--steps", "3"])
    expect(len(step_losses(out)) == 3, "the huge data set did not train",
           out)
    expect(time.time() - start < 10, "the huge .npy took too long")
    expect_error(huge + ["--steps", "3", "--shuffle"],
                 [r"--shuffle: 'huge\.npy' holds %d samples, more than the "
                  r"2\^32 - 1 a permutation indexes" % rows])


def check_huge_metadata():
    """Checkpoint metadata of 64 GiB (sparse files): refused unread, the
    checkpoint skipped by name, quickly, never an abort."""
    write_batches(os.path.join(WORK, "data"), 3, seed=3)
    common = ["--local", "--data", "data", "--seed", "3"]
    full = step_losses(run_ok(common + ["--steps", "6"]))
    run_ok(common + ["--steps", "4", "--checkpoint-every", "2",
                     "--checkpoint", "ck"])
    shutil.copytree(os.path.join(WORK, "ck"), os.path.join(WORK, "ck-good"))

    def resume(patterns, expected_step=None):
        start = time.time()
        status, out, err, _ = run(common + ["--steps", "6", "--resume", "ck"])
        expect(time.time() - start < 10, "resuming took too long", out + err)
        for pattern in patterns:
            expect(re.search(pattern, err), "no match for /%s/" % pattern,
                   out + err)
        if expected_step is None:
            expect(status == 1, "exit status %d" % status, out + err)
            return
        expect(status == 0 and resumed_step(out) ==
               ("ck/step-%d" % expected_step, expected_step),
               "did not resume from step %d" % expected_step, out + err)
        expect(step_losses(out) == full[expected_step:],
               "the losses after step %d differ" % expected_step, out + err)

    def restore():
        shutil.rmtree(os.path.join(WORK, "ck"))
        shutil.copytree(os.path.join(WORK, "ck-good"),
                        os.path.join(WORK, "ck"))

    huge = 64 << 30
    # A 64 GiB MANIFEST: refused unread, the previous checkpoint taken.
    sparse_file(os.path.join(WORK, "ck", "step-4", "MANIFEST"), huge)
    resume([r"skipping checkpoint 'ck/step-4': cannot read "
            r"'ck/step-4/MANIFEST': it has 68719476736 bytes, more than a "
            r"MANIFEST of this program can hold"], 2)
    # ... and with no other checkpoint, an error naming it.
    shutil.rmtree(os.path.join(WORK, "ck", "step-2"))
    resume([r"'ck/step-4/MANIFEST': it has 68719476736 bytes",
            r"--resume: no complete checkpoint in 'ck'"])
    # A 64 GiB rank file (its manifest says otherwise) and latest.
    restore()
    sparse_file(os.path.join(WORK, "ck", "step-4", "rank1.ckpt"), huge)
    resume([r"skipping checkpoint 'ck/step-4': 'ck/step-4/rank1\.ckpt' has "
            r"68719476736 bytes, its manifest says \d+ \(torn\)"], 2)
    restore()
    sparse_file(os.path.join(WORK, "ck", "latest"), huge)
    resume([r"no committed checkpoint \(cannot read 'ck/latest': it has "
            r"68719476736 bytes, more than a 'latest' file can hold"], 4)


def check_diverge():
    """Weights that turn non-finite in an update whose loss is finite
    (PP_TOY_DIVERGE): the run stops naming the stage and the step before
    it checkpoints, dumps or exports them; --resume takes the last sound
    checkpoint."""
    write_batches(os.path.join(WORK, "data"), 3, seed=3)
    common = ["--local", "--data", "data", "--seed", "3"]
    diverge = {"PP_TOY_DIVERGE": "3"}
    out = expect_error(common + ["--steps", "5", "--checkpoint-every", "1",
                                 "--checkpoint", "ck"],
                       [r"error: rank 1 \(device cpu1\): training diverged "
                        r"at step 3: stage 1's global 'W1' \(15 of 15 "
                        r"values\) not finite after its update; checkpoint "
                        r"'ck/step-3' is not written"], env=diverge)
    expect(out.count("error: ") == 1, "more than one error reported", out)
    expect(open(os.path.join(WORK, "ck", "latest")).read() == "step-2\n",
           "latest does not name step 2")
    expect(not os.path.exists(os.path.join(WORK, "ck", "step-3")),
           "step-3 was written")
    out = run_ok(common + ["--steps", "4", "--resume", "ck"])
    expect(resumed_step(out) == ("ck/step-2", 2),
           "did not resume from step 2", out)
    # The last step's update: nothing dumped or exported, exit 1. (A private
    # copy of the toy finds its source model next to it.)
    try:
        import onnx  # noqa: F401
    except ImportError:
        print("SKIP: no python onnx")
        sys.exit(77)
    toy = os.path.join(WORK, "pp-rt-train-toy")
    shutil.copy(ARGS.toy, toy)
    subprocess.run([toy, "--write-toy-data", WORK], check=True)
    write_toy_model(os.path.join(WORK, "pp-rt-train-toy.onnx"),
                    *initial_weights(os.path.join(WORK,
                                                  "pp-rt-train-toy.data")))
    expect_error(common + ["--steps", "3", "--dump-globals", "dump",
                           "--save-onnx", "out.onnx"],
                 [r"error: rank 1 \(device cpu1\): training diverged at "
                  r"step 3: stage 1's global 'W1' \(15 of 15 values\) not "
                  r"finite after the last update; nothing is dumped or "
                  r"exported"], env=diverge, toy=toy)
    expect(not os.path.exists(os.path.join(WORK, "dump", "W1.npy")) and
           not os.path.exists(os.path.join(WORK, "out.onnx")),
           "non-finite weights were dumped or exported")


def check_checkpoint_links():
    """Symbolic links planted in a checkpoint directory: the run refuses
    the directory by name and never writes, truncates or removes what they
    name."""
    write_batches(os.path.join(WORK, "data"), 3, seed=3)
    common = ["--local", "--data", "data", "--steps", "2",
              "--checkpoint-every", "1", "--checkpoint", "ck"]
    victim = os.path.join(WORK, "victim")
    os.makedirs(victim)
    precious = os.path.join(victim, "precious")
    for name, target, kind in (("step-99", victim, "a checkpoint directory"),
                               ("step-2", victim, "a checkpoint directory"),
                               ("latest.tmp", precious, "a 'latest' file"),
                               ("latest", precious, "a 'latest' file")):
        shutil.rmtree(os.path.join(WORK, "ck"), ignore_errors=True)
        os.makedirs(os.path.join(WORK, "ck"))
        open(precious, "w").write("precious\n")
        os.symlink(target, os.path.join(WORK, "ck", name))
        expect_error(common, [r"--checkpoint: 'ck/%s' is a symbolic link, "
                              r"not %s" % (re.escape(name), kind)])
        expect(sorted(os.listdir(victim)) == ["precious"] and
               open(precious).read() == "precious\n",
               "%s: the link's target was touched: %s" %
               (name, os.listdir(victim)))
    # A step-<k> that is a file is refused too.
    shutil.rmtree(os.path.join(WORK, "ck"))
    os.makedirs(os.path.join(WORK, "ck"))
    open(os.path.join(WORK, "ck", "step-7"), "w").write("x")
    expect_error(common, [r"'ck/step-7' is not a checkpoint directory"])


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
    "checkpoint-crash": check_checkpoint_crash,
    "checkpoint-crash-mpi": check_checkpoint_crash_mpi,
    "checkpoint-corrupt": check_checkpoint_corrupt,
    "io-errors": check_io_errors,
    "save": check_save,
    "save-mpi": check_save_mpi,
    "huge-npy": check_huge_npy,
    "huge-metadata": check_huge_metadata,
    "diverge": check_diverge,
    "checkpoint-links": check_checkpoint_links,
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
