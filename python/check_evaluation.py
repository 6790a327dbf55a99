#!/usr/bin/env python3
"""Checks generated programs' `train --eval-data` against PyTorch's eval().

For each configuration MODEL:STAGES:LAUNCH[:dp2][:tp2][:2bw][:dropout]
[:lr=X][:ls=EPS][:cw=W0/W1/...] (ls: label-smoothing=EPS, cw: class-weights
on both sides; LAUNCH mpi,
local, or both: mpirun, then --local, whose evaluations must be the same
to the bit) exports the test model at a micro-batch of --micro-batch, compiles
a 1F1B program of --microbatches micro-batches per replica (dp=2: two
replicas of the pipeline; tp2: tp=2, each stage on a group of two; 2bw:
PipeDream-2BW of 4 micro-batches updating every 2, whose steps between
evaluations run as one stream), builds it and trains --steps steps on a data
set of whole batches with `--eval-data` (a held-out set whose size is no
multiple of the batch or the micro-batch) and `--eval-every 2`. Then:

  - the evaluation after the last step equals PyTorch's model.eval() on the
    weights the program dumped (--dump-globals: trained weights and
    BatchNorm running statistics): the mean cross-entropy over the counted
    samples (the whole micro-batches of held-out samples) to --rtol, and
    the top-1 accuracy (classifiers) or perplexity exp(loss) (language
    models, over every token);
  - every evaluation is in the JSON --log with its step, and the printed
    line says the same;
  - with Dropout kept in training mode (`dropout`), the evaluation has no
    mask (PyTorch's eval() neither);
  - BatchNorm's running statistics trained away from their initial values
    (so eval mode is not batch statistics nor the initial ones) and stay
    as trained (an evaluation updates nothing: a run evaluating every step
    trains to the same weights as one that does not);
  - a classifier's JSON log has each step's training `accuracy`, which
    equals the top-1 accuracy of PyTorch's training forward on the step's
    batch (the MLP, SGD replayed from the same weights).

--errors adds bad input: an eval set whose per-sample shape or dtype is not
the program's, and flags that do not fit ("error case NAME: ..." lines).
Prints MISMATCH lines for failures (exit status 1).
"""
import argparse
import json
import os
import re
import shlex
import subprocess
import sys

import numpy as np

from check_generated import build
from check_pipeline import cluster_file, export_micro_and_whole
from compare import load_globals, run, check_error_case
import make_models

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def input_flags(mlir, option, files):
    """--data / --eval-data flags naming the program's inputs in order."""
    names = re.search(r'pp.input_names = \[([^\]]*)\]',
                      open(mlir).read()).group(1)
    names = [n.strip().strip('"') for n in names.split(",")]
    return [f"--{option}={n}={f}" for n, f in zip(names, files)]


# Segmentation: the label the loss skips (--pp-add-loss ignore-index), as
# VOC marks its masks' borders.
IGNORED = 255


def make_sets(example, samples, seed, classes=None):
    """Inputs and labels of `samples` samples shaped like `example`'s;
    `classes`: a segmentation's, whose per-pixel labels are IGNORED at
    about one pixel in 8."""
    rng = np.random.default_rng(seed)
    if example.dtype == np.int64:  # tokens: a language model
        x = rng.integers(0, 64, size=(samples,) + example.shape[1:])
        return x.astype(np.int64), rng.integers(
            0, 64, size=x.shape).astype(np.int64)
    x = rng.standard_normal((samples,) + example.shape[1:])
    if classes:
        y = rng.integers(0, classes, size=(samples,) + example.shape[2:])
        y[rng.random(y.shape) < 1 / 8] = IGNORED
        return x.astype(np.float32), y.astype(np.int64)
    return x.astype(np.float32), rng.integers(0, 10, size=samples).astype(
        np.int64)


def torch_model(name, state):
    """The test model with `state` (name -> array) loaded; the keys of its
    state_dict that `state` lacks."""
    import torch
    import make_models
    torch.manual_seed(0)
    model = make_models.MODELS[name]()[0]
    missing, loaded = [], set()
    with torch.no_grad():
        for key, value in model.state_dict().items():
            if key in state:
                value.copy_(torch.from_numpy(np.array(state[key])))
                loaded.add(value.data_ptr())
    # A tied weight (the GPT's lm_head) is its twin's tensor.
    for key, value in model.state_dict().items():
        if value.data_ptr() not in loaded and \
                not key.endswith("num_batches_tracked"):
            missing.append(key)
    return model, missing


def torch_eval(model, x, y, micro, smoothing=0.0, weights=None):
    """PyTorch's eval(): the mean over micro-batches of `micro` samples of
    their mean cross-entropy over the labels (tokens, pixels) not IGNORED,
    the top-1 accuracy over those labels, and for per-pixel logits the mean
    intersection over union of the classes predicted or labelled."""
    import torch
    import torch.nn.functional as F
    model.eval()
    with torch.no_grad():
        logits = model(torch.from_numpy(x))
        per_pixel = logits.dim() >= 4
        if per_pixel:  # [N, C, H, W]: classes last
            logits = logits.movedim(1, -1)
        losses = [F.cross_entropy(
            part.reshape(-1, part.shape[-1]), labels.reshape(-1),
            ignore_index=IGNORED, label_smoothing=smoothing,
            weight=weights).double().item()
            for part, labels in zip(logits.split(micro),
                                    torch.from_numpy(y).split(micro))]
        flat = logits.reshape(-1, logits.shape[-1])
        labels = torch.from_numpy(y).reshape(-1)
        kept = labels != IGNORED
        scores = flat[kept].double()
        predicted, labels = flat.argmax(dim=-1)[kept], labels[kept]
        accuracy = (predicted == labels).double().mean().item()
        # Top-5: the label's rank in a stable descending sort (ties to the
        # lower class) below 5.
        own = scores.gather(1, labels[:, None])
        classes = torch.arange(scores.shape[1])[None, :]
        rank = ((scores > own) | ((scores == own) &
                                  (classes < labels[:, None]))).sum(dim=1)
        top5 = ((rank < 5).double().mean().item()
                if scores.shape[1] > 5 else None)
        ious = []
        for c in range(flat.shape[-1]):
            union = ((predicted == c) | (labels == c)).sum().item()
            if union:
                ious.append(((predicted == c) & (labels == c)).sum().item() /
                            union)
    return (float(np.mean(losses)), accuracy,
            float(np.mean(ious)) if per_pixel else None, top5)


def torch_weights(weights):
    """The class weights as PyTorch's float32 `weight=`, or None."""
    import torch
    return (torch.tensor([float(w) for w in weights], dtype=torch.float32)
            if weights else None)


def torch_train(name, initial, batches, lr, steps, micro, smoothing=0.0,
                weights=None):
    """PyTorch's SGD steps over micro-batches of `micro` samples (gradients
    accumulated, BatchNorm per micro-batch, as a pipeline): each step's loss
    (the mean of the micro-batches' means over labels not IGNORED) and the
    top-1 accuracy of its training forward over those labels."""
    import torch
    import torch.nn.functional as F
    model, _ = torch_model(name, initial)
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    losses, accuracies = [], []
    for k in range(steps):
        x, y = (torch.from_numpy(a) for a in batches(k))
        optimizer.zero_grad()
        parts = list(zip(x.split(micro), y.split(micro)))
        loss, hits, counted = 0.0, 0, 0
        for xs, ys in parts:
            logits = model(xs)
            if logits.dim() >= 4:  # [N, C, H, W]: classes last
                logits = logits.movedim(1, -1)
            flat, labels = logits.reshape(-1, logits.shape[-1]), ys.reshape(-1)
            part = F.cross_entropy(flat, labels, ignore_index=IGNORED,
                                   label_smoothing=smoothing, weight=weights)
            (part / len(parts)).backward()
            loss += part.item() / len(parts)
            kept = labels != IGNORED
            hits += (flat.argmax(dim=-1)[kept] == labels[kept]).sum().item()
            counted += kept.sum().item()
        optimizer.step()
        losses.append(loss)
        accuracies.append(hits / counted)
    return losses, accuracies


def log_records(path):
    return [json.loads(line) for line in open(path)]


def check_config(args, config, failures):
    fields = config.split(":")
    model, stages, launch = fields[0], int(fields[1]), fields[2]
    dp = 2 if "dp2" in fields[3:] else 1
    tp = 2 if "tp2" in fields[3:] else 1
    ranks = stages * tp * dp
    dropout = "dropout" in fields[3:]
    micro, m = args.micro_batch, args.microbatches
    # PipeDream-2BW: 4 micro-batches, an update every 2, the steps between
    # evaluations one stream that drains at each.
    versioned = "2bw" in fields[3:]
    lr = next((float(f[3:]) for f in fields[3:] if f.startswith("lr=")),
              args.lr)
    smoothing = next((float(f[3:]) for f in fields[3:]
                      if f.startswith("ls=")), 0.0)
    # cw=W0/W1/...: per-class loss weights on both sides.
    class_weights = next((f[3:].split("/") for f in fields[3:]
                          if f.startswith("cw=")), None)
    if versioned:
        m = 4
    work = os.path.join(args.work, config.replace(":", "-"))
    os.makedirs(work, exist_ok=True)
    micro_dir, whole_dir = export_micro_and_whole(
        model, os.path.join(args.work, f"export-{model}"
                            f"{'-dropout' if dropout else ''}"),
        micro, m * dp, dropout=dropout)
    batch = micro * m * dp
    mlir = os.path.join(work, "pipelined.mlir")
    program = os.path.join(work, "program")
    schedule = ("pipedream-2bw update-every=2" if versioned else "1f1b")
    classes = make_models.SEGMENTATION_CLASSES.get(model)
    options = (f"cluster={cluster_file(work, ranks)} schedule={schedule} "
               f"microbatches={m} lr={lr}" +
               (f" ignore-index={IGNORED}" if classes else "") +
               (f" label-smoothing={smoothing}" if smoothing else "") +
               (f" class-weights={','.join(class_weights)}"
                if class_weights else "") +
               (f" dp={dp}" if dp > 1 else "") +
               (f" tp={tp}" if tp > 1 else ""))
    run([args.pipeline_opt, os.path.join(micro_dir, "model.onnx"),
         f"--pp-compile={options} emit-dir={program}", "-o", mlir])
    exe = build(program)

    example = np.load(os.path.join(whole_dir, "input.npy"))
    x, y = make_sets(example, batch * args.steps, 1, classes)
    # Held-out: no multiple of the batch nor of the micro-batch.
    held = batch + micro + 1
    ex, ey = make_sets(example, held, 2, classes)
    files = []
    for name, array in (("x", x), ("y", y), ("ex", ex), ("ey", ey)):
        files.append(os.path.join(work, f"{name}.npy"))
        np.save(files[-1], array)
    counted = held // micro * micro

    log = os.path.join(work, "train.jsonl")
    dump = os.path.join(work, "dump")
    command = [exe] + input_flags(mlir, "data", files[:2]) + input_flags(
        mlir, "eval-data", files[2:]) + [
        f"--steps={args.steps}", "--eval-every=2", f"--log={log}",
        f"--dump-globals={dump}"]
    if launch == "local":
        out = run(command + ["--local"])
    else:
        out = run(shlex.split(args.mpirun) +
                  ["-np", str(ranks)] + command)
    records = log_records(log)
    if launch == "both":
        local_log = os.path.join(work, "local.jsonl")
        run([a if not a.startswith("--log=") else f"--log={local_log}"
             for a in command] + ["--local"])
        evaluations = [{k: v for k, v in r.items()} for r in
                       log_records(local_log) if "eval_loss" in r]
        same = evaluations == [r for r in records if "eval_loss" in r]
        print(f"{config}: --local evaluates as mpirun to the bit: "
              f"{'yes' if same else 'no'}")
        if not same:
            failures.append(f"{config}: --local evaluations {evaluations}")
    evals = [r for r in records if "eval_loss" in r]
    steps = [r for r in records if "eval_loss" not in r]
    want = sorted(set([k for k in range(2, args.steps + 1, 2)] +
                      [args.steps]))
    if [r["step"] for r in evals] != want or len(steps) != args.steps:
        failures.append(f"{config}: evaluations after steps "
                        f"{[r['step'] for r in evals]}, expected {want}")
        return
    printed = re.findall(r"^eval after step (\d+): loss (\S+)", out, re.M)
    if [int(s) for s, _ in printed] != want or any(
            abs(float(l) - r["eval_loss"]) > 1e-6 * abs(r["eval_loss"])
            for (_, l), r in zip(printed, evals)):
        failures.append(f"{config}: printed evaluations {printed} are not "
                        f"the log's")

    trained = load_globals(dump)
    # What the program holds as constants (the GPT's position table and
    # causal masks) keeps the exported value.
    exported = initializers(os.path.join(micro_dir, "model.onnx"))
    torch_net, missing = torch_model(model, {**exported, **trained})
    if missing:
        failures.append(f"{config}: the dump lacks {missing}")
        return
    loss, accuracy, miou, top5 = torch_eval(torch_net, ex[:counted], ey[:counted],
                                      micro, smoothing,
                                      torch_weights(class_weights))
    last = evals[-1]
    language = example.dtype == np.int64
    error = abs(last["eval_loss"] - loss) / abs(loss)
    kind = "perplexity" if language else "accuracy"
    if error > args.rtol:
        failures.append(f"{config}: eval_loss {last['eval_loss']} against "
                        f"PyTorch's {loss}")
    if language:
        ours = last.get("eval_perplexity")
        theirs = float(np.exp(loss))
        ok = ours is not None and "eval_accuracy" not in last and \
            abs(ours - theirs) <= args.rtol * theirs
    else:
        ours = last.get("eval_accuracy")
        theirs = accuracy
        ok = ours is not None and abs(ours - theirs) < 1e-12
    if not ok:
        failures.append(f"{config}: eval {kind} {ours} against PyTorch's "
                        f"{theirs}")
    print(f"{config}: {len(evals)} evaluations (after steps {want}) of "
          f"{counted} of {held} held-out samples; the last equals "
          f"PyTorch's eval(): loss rel. error {error:.1e}, {kind} "
          f"{ours:.6g} (PyTorch {theirs:.6g})")
    # More than 5 classes (not a language model's): the top-5 accuracy.
    if not language and (top5 is not None or "eval_top5" in last):
        ours = last.get("eval_top5")
        if ours is None or top5 is None or abs(ours - top5) > 1e-12:
            failures.append(f"{config}: eval top-5 {ours} against "
                            f"PyTorch's {top5}")
        else:
            print(f"{config}: top-5 accuracy {ours:.6g} (PyTorch "
                  f"{top5:.6g})")
    # Segmentation: the mean IoU, printed and logged.
    if miou is not None or "eval_miou" in last:
        ours = last.get("eval_miou")
        printed = re.findall(r"^eval after step \d+: .* mIoU (\S+)", out,
                             re.M)
        if ours is None or miou is None or abs(ours - miou) > 1e-12 or \
                len(printed) != len(evals) or \
                abs(float(printed[-1]) - ours) > 1e-4:
            failures.append(f"{config}: eval mIoU {ours} (printed "
                            f"{printed}) against PyTorch's {miou}")
        else:
            print(f"{config}: mean IoU over {ey[:counted].size} pixels, "
                  f"{int((ey[:counted] == IGNORED).sum())} ignored: "
                  f"{ours:.6g} (PyTorch {miou:.6g})")

    # BatchNorm: the running statistics moved in training; evaluations
    # left them as trained.
    if any(k.endswith("running_mean") for k in trained):
        initial = initializers(os.path.join(micro_dir, "model.onnx"))
        moved = max(float(np.abs(trained[k] - initial[k]).max())
                    for k in trained if k.endswith("running_mean"))
        quiet = os.path.join(work, "dump-no-eval")
        plain = [a for a in command if not a.startswith("--eval") and
                 not a.startswith("--dump-globals") and
                 not a.startswith("--log")] + [f"--dump-globals={quiet}",
                                               "--local"]
        run(plain)
        again = load_globals(quiet)
        same = all(np.array_equal(trained[k], again[k]) for k in trained)
        print(f"{config}: running means moved up to {moved:.3g} from their "
              f"initial values; weights as without evaluations: "
              f"{'yes' if same else 'no'}")
        if moved == 0 or not same:
            failures.append(f"{config}: running statistics: moved {moved}, "
                            f"same as without evaluations {same}")

    # A classifier's training loss and accuracy per step (SGD replayed;
    # the segmentation's skipping the IGNORED pixels).
    if model in ("mlp", "segnet") and not versioned:
        initial = initializers(os.path.join(micro_dir, "model.onnx"))
        losses, theirs = torch_train(
            model, initial,
            lambda k: (x[k * batch:(k + 1) * batch],
                       y[k * batch:(k + 1) * batch]), lr, args.steps, micro,
            smoothing, torch_weights(class_weights))
        ours = [r.get("accuracy") for r in steps]
        close = all(abs(r["loss"] - l) <= args.rtol * abs(l)
                    for r, l in zip(steps, losses))
        if ours != theirs or not close:
            failures.append(f"{config}: training accuracy {ours} and losses "
                            f"{[r['loss'] for r in steps]} against "
                            f"PyTorch's {theirs} and {losses}")
        else:
            print(f"{config}: training losses and accuracy per step equal "
                  f"PyTorch's: {ours}")
    if "best" in fields[3:]:
        check_save_best(args, config, exe, mlir, files, work,
                        lambda command: run(command + ["--local"])
                        if launch == "local" else
                        run(shlex.split(args.mpirun) + ["-np", str(ranks)] +
                            command), failures)
    return mlir, exe, files, example


def check_save_best(args, config, exe, mlir, files, work, launch, failures):
    """--save-best OUT.onnx --best-metric loss over 7 steps, evaluated after
    each: the log flags the evaluations that beat every earlier one, the
    file holds the weights of a run stopped after the last of them, and a
    run checkpointed after step 4 and resumed keeps the checkpoint's best
    (the same flags after step 4, the same file)."""
    steps = 7

    def train(extra, name):
        log = os.path.join(work, name + ".jsonl")
        out = launch([exe] + input_flags(mlir, "data", files[:2]) +
                     input_flags(mlir, "eval-data", files[2:]) +
                     [f"--log={log}"] + extra)
        return out, [r for r in log_records(log) if "eval_loss" in r]

    best = os.path.join(work, "best.onnx")
    flags = ["--eval-every=1", "--best-metric=loss"]
    out, evals = train([f"--steps={steps}", f"--save-best={best}"] + flags,
                       "best")
    improved, low = [], None
    for r in evals:
        if low is None or r["eval_loss"] < low:
            improved.append(r["step"])
            low = r["eval_loss"]
    logged = [r["step"] for r in evals if r.get("eval_best")]
    printed = [int(s) for s in re.findall(
        r"^best loss so far \(\S+ after step (\d+)\): saved to ", out, re.M)]
    reference = os.path.join(work, "best-reference.onnx")
    train([f"--steps={improved[-1]}", f"--save-onnx={reference}"],
          "best-reference")
    ours, theirs = initializers(best), initializers(reference)
    same = sorted(ours) == sorted(theirs) and all(
        np.array_equal(ours[k], theirs[k]) for k in ours)
    # Stopped after step 4 with a checkpoint, resumed to step 8.
    resumed = os.path.join(work, "best-resumed.onnx")
    ckpt = os.path.join(work, "best-checkpoints")
    train(["--steps=4", "--checkpoint-every=4", f"--checkpoint={ckpt}",
           f"--save-best={resumed}"] + flags, "best-first")
    _, later = train([f"--steps={steps}", f"--resume={ckpt}",
                      f"--save-best={resumed}"] + flags, "best-resumed")
    again = initializers(resumed)
    kept = ([r["step"] for r in later if r.get("eval_best")] ==
            [s for s in improved if s > 4] and sorted(again) == sorted(ours)
            and all(np.array_equal(again[k], ours[k]) for k in ours))
    print(f"{config}: --save-best: eval loss improved after steps "
          f"{improved} of {steps}; logged and printed alike: "
          f"{'yes' if logged == printed == improved else 'no'}; the file "
          f"holds the weights of a run stopped after step {improved[-1]}: "
          f"{'yes' if same else 'no'}; resumed after step 4: the same "
          f"best: {'yes' if kept else 'no'}")
    if logged != improved or printed != improved or not same or not kept:
        failures.append(f"{config}: --save-best: improved {improved}, "
                        f"logged {logged}, printed {printed}, same {same}, "
                        f"resumed {kept}")


def initializers(path):
    import onnx
    from onnx import numpy_helper
    return {t.name: numpy_helper.to_array(t)
            for t in onnx.load(path).graph.initializer}


def check_errors(mlir, exe, files, example, work, failures):
    wide_shape = (9,) + example.shape[1:-1] + (example.shape[-1] + 1,)
    cases = [
        ("shape", input_flags(mlir, "data", files[:2]) +
         input_flags(mlir, "eval-data",
                     [save(work, "wide", np.zeros(wide_shape,
                                                  example.dtype)),
                      files[3]])),
        ("label-dtype", input_flags(mlir, "data", files[:2]) +
         input_flags(mlir, "eval-data",
                     [files[2], save(work, "eyf", np.load(files[3]).astype(
                         np.float32))])),
        ("label-range", input_flags(mlir, "data", files[:2]) +
         input_flags(mlir, "eval-data",
                     [files[2], save(work, "eybig", np.where(
                         np.arange(len(np.load(files[3]))) == 3, 10,
                         np.load(files[3])))])),
        ("every-without-data", ["--eval-every=2"]),
        ("best-without-data", [f"--save-best={work}/best.onnx"]),
        ("best-metric-miou", input_flags(mlir, "data", files[:2]) +
         input_flags(mlir, "eval-data", files[2:]) +
         [f"--save-best={work}/best.onnx", "--best-metric=miou"]),
        ("every-zero", input_flags(mlir, "eval-data", files[2:]) +
         ["--eval-every=0"]),
    ]
    for name, extra in cases:
        proc = subprocess.run([exe, "--local", "--steps=1"] + extra,
                              capture_output=True, text=True, timeout=60)
        check_error_case(name, proc, failures)


def save(work, name, array):
    path = os.path.join(work, f"{name}.npy")
    np.save(path, array)
    return path


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", required=True, help="scratch directory")
    parser.add_argument("--configs", default="mlp:2:mpi",
                        help="MODEL:STAGES:mpi|local[:dp2][:dropout], "
                        "comma-separated")
    parser.add_argument("--pipeline-opt", default="pipeline-opt")
    parser.add_argument("--mpirun", default="mpirun --allow-run-as-root "
                        "--oversubscribe")
    parser.add_argument("--micro-batch", type=int, default=2)
    parser.add_argument("--microbatches", type=int, default=2)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--rtol", type=float, default=1e-5)
    parser.add_argument("--errors", action="store_true")
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    failures = []
    first = None
    for config in args.configs.split(","):
        result = check_config(args, config, failures)
        first = first or result
    if args.errors and first:
        check_errors(*first, args.work, failures)
    for failure in failures:
        print("MISMATCH", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
