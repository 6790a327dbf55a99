#!/usr/bin/env python3
"""Sweeps torchvision's classification models through the whole toolchain.

For each model (torchvision.models.get_model(name, weights=None,
num_classes=10), dropout and stochastic depth off, a small input): export at
opset 17 in training mode with pp_export_torch.export, train 3 SGD steps in
PyTorch from the exported weights as the reference, then

  import   pipeline-opt model.onnx
  step     --pp-add-loss --pp-autodiff --pp-optimizer, 3 steps on pp-interpret
  plan     --pp-compile for 2 devices (1F1B, 1 micro-batch, emit-dir=)
  build    the emitted program, with CMake against the runtime
  train    3 steps of the 2-stage program (--local)

and compares the losses of `step` and `train` with PyTorch's: the first
step's loss within a relative `--rtol` (the forward pass), the second's
within `--rtol-trained` (the gradients of the first step; float32 rounding
that BatchNorm over a few values per channel amplifies, so looser), and the
2-stage program's losses with the unsplit step's (`--rtol-trained`). The
third step's error is reported, not judged: a tiny batch makes training
chaotic enough that float32 rounding grows past any fixed bound (in
float64 the same models agree to 1e-7 after two steps). The first stage that
fails gives the model's reason. Prints one line per model and, with --table, writes the
Markdown table of docs/torchvision.md.

    torchvision_sweep.py --work /tmp/sweep [--models a,b | --all] [--table F]

By default one model per family (the smallest); --all takes every model
torchvision lists (some need many GiB and hours on a CPU).
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

# One per family, the smallest.
DEFAULT_MODELS = [
    "alexnet", "convnext_tiny", "densenet121", "efficientnet_b0",
    "efficientnet_v2_s", "googlenet", "inception_v3", "maxvit_t",
    "mnasnet0_5", "mobilenet_v2", "mobilenet_v3_small", "regnet_x_400mf",
    "regnet_y_400mf", "resnet18", "resnext50_32x4d", "shufflenet_v2_x0_5",
    "squeezenet1_1", "swin_t", "vgg11_bn", "vit_b_32", "wide_resnet50_2",
]
# Models whose input size is fixed or has a lower bound above the default.
# alexnet, vgg: their adaptive pools (to 6x6, 7x7) export only as the
# identity, at 224.
IMAGE_SIZE = {"inception_v3": 96, "maxvit_t": 224, "alexnet": 224,
              **{name: 224 for name in ("vgg11", "vgg11_bn", "vgg13",
                                        "vgg13_bn", "vgg16", "vgg16_bn",
                                        "vgg19", "vgg19_bn")}}
MODEL_KWARGS = {"inception_v3": {"aux_logits": False, "init_weights": True},
                "googlenet": {"aux_logits": False, "init_weights": True}}
STAGES = ["export", "import", "step", "plan", "build", "train"]


class StageFailed(Exception):
    def __init__(self, stage, reason):
        super().__init__(f"{stage}: {reason}")
        self.stage, self.reason = stage, reason


def first_error(text):
    """The line of a tool's output that says why it failed."""
    lines = [l.strip() for l in text.splitlines() if l.strip()]
    for line in lines:
        if "error:" in line or "Error" in line or "MISMATCH" in line:
            return line[:300]
    return (lines[-1] if lines else "no output")[:300]


def run(stage, cmd, timeout, env=None):
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True,
                              timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        raise StageFailed(stage, f"timed out after {timeout} s")
    if proc.returncode != 0:
        raise StageFailed(stage, f"exit {proc.returncode}: "
                          + first_error(proc.stderr + "\n" + proc.stdout))
    return proc.stdout


def losses_of(text):
    return [float(line.split()[3]) for line in text.splitlines()
            if line.startswith("step ")]


def relative_errors(ours, theirs):
    """Per step; infinite where a side has no loss."""
    errors = [abs(a - b) / max(abs(b), 1e-12) for a, b in zip(ours, theirs)]
    return errors + [float("inf")] * (max(len(ours), len(theirs)) - len(errors))


def judge(stage, ours, theirs, label, args):
    """Raises StageFailed unless step 1 is within --rtol and step 2 within
    --rtol-trained; returns the per-step errors."""
    errors = relative_errors(ours, theirs)
    limits = [args.rtol, args.rtol_trained]
    for step, (error, limit) in enumerate(zip(errors, limits), 1):
        if not error <= limit:
            raise StageFailed(stage, f"loss of step {step} {ours[step - 1] if step <= len(ours) else None} "
                              f"against {label} {theirs[step - 1] if step <= len(theirs) else None} "
                              f"(relative {error:.1e} > {limit:g})")
    return errors


def make_model(name):
    """torchvision's `name` with 10 classes, seed 0, Dropout and stochastic
    depth off, in training mode."""
    import torch
    import torch.nn as nn
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.get_model(name, weights=None, num_classes=10,
                                         **MODEL_KWARGS.get(name, {}))
    for module in model.modules():
        if isinstance(module, nn.Dropout):
            module.p = 0.0
        if isinstance(module, torchvision.ops.StochasticDepth):
            module.p = 0.0
        if isinstance(module, nn.MultiheadAttention):
            module.dropout = 0.0
    model.train()
    return model


def export_model(name, work, batch, lr, steps, dtype):
    """Exports `name`, trains it `steps` steps in torch; returns a dict of
    facts (params, image size, torch losses)."""
    import onnx
    import torch
    import torch.nn as nn
    from onnx import numpy_helper
    from pp_export_torch import export

    model = make_model(name)
    if dtype == "float64":
        model = model.double()
    size = IMAGE_SIZE.get(name, 224 if name.startswith("vit") else 64)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((batch, 3, size, size)).astype(dtype)
    y = rng.integers(0, 10, size=(batch,), dtype=np.int64)
    path = os.path.join(work, "model.onnx")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        export(model, (torch.from_numpy(x),), path, input_names=["input"],
               output_names=["logits"])
    # Exporting ran a forward pass (BatchNorm statistics moved): start
    # torch from the exported state, as pipeline-opt does.
    initializers = {t.name: numpy_helper.to_array(t)
                    for t in onnx.load(path).graph.initializer}
    with torch.no_grad():
        for key, value in model.state_dict().items():
            if key in initializers:
                value.copy_(torch.from_numpy(initializers[key].copy()))
    np.save(os.path.join(work, "input.npy"), x)
    np.save(os.path.join(work, "labels.npy"), y)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(torch.from_numpy(x)),
                                           torch.from_numpy(y))
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    params = sum(p.numel() for p in model.parameters())
    return {"params": params, "image": size, "torch": losses}


def sweep_one(name, args):
    work = os.path.join(args.work, name)
    os.makedirs(work, exist_ok=True)
    row = {"model": name, "passed": [], "times": {}}
    onnx_path = os.path.join(work, "model.onnx")
    x, y = (os.path.join(work, f) for f in ("input.npy", "labels.npy"))
    started = time.time()

    def timed(stage, fn):
        t0 = time.time()
        result = fn()
        row["times"][stage] = time.time() - t0
        row["passed"].append(stage)
        return result

    try:
        # Each export runs in its own process: a model that crashes torch
        # (or eats the memory) does not end the sweep.
        def do_export():
            out = run("export", [sys.executable, __file__, "--export-one",
                                 name, "--work", work,
                                 "--batch", str(args.batch),
                                 "--lr", str(args.lr),
                                 "--steps", str(args.steps),
                                 "--dtype", args.dtype], args.timeout)
            return json.loads(out.strip().splitlines()[-1])
        row.update(timed("export", do_export))

        timed("import", lambda: run("import", [
            args.pipeline_opt, onnx_path, "-o",
            os.path.join(work, "import.mlir")], args.timeout))

        def do_step():
            step = os.path.join(work, "train.mlir")
            run("step", [args.pipeline_opt, onnx_path, "--pp-add-loss",
                         "--pp-autodiff",
                         f"--pp-optimizer=kind=sgd lr={args.lr}", "-o", step],
                args.timeout)
            out = run("step", [args.pp_interpret, step,
                               f"--steps={args.steps}", f"--input=input={x}",
                               f"--input=labels={y}"], args.timeout)
            row["step_losses"] = losses_of(out)
            row["step_errors"] = judge("step", row["step_losses"],
                                       row["torch"], "torch", args)
        timed("step", do_step)

        program = os.path.join(work, "program")
        plan = os.path.join(work, "plan.mlir")
        report = os.path.join(work, "plan.txt")

        def do_plan():
            run("plan", [args.pipeline_opt, onnx_path,
                         f"--pp-compile=cluster={args.cluster} schedule=1f1b "
                         f"microbatches=1 lr={args.lr} report={report} "
                         f"emit-dir={program}", "-o", plan], args.timeout)
            text = open(report).read()
            split = re.findall(r"^stage \d+: \S+\s+(\d+) ops", text,
                               re.MULTILINE)
            row["split"] = "/".join(split)
        timed("plan", do_plan)

        build = os.path.join(program, "build")

        def do_build():
            run("build", ["cmake", "-S", program, "-B", build, "-G", "Ninja",
                          "-DCMAKE_BUILD_TYPE=Release"], args.timeout)
            run("build", ["cmake", "--build", build], args.timeout)
        timed("build", do_build)

        def do_train():
            names = re.search(r'pp.input_names = \[([^\]]*)\]',
                              open(plan).read()).group(1)
            names = [n.strip().strip('"') for n in names.split(",")]
            data = [f"--data={n}={f}" for n, f in zip(names, (x, y))]
            log = os.path.join(work, "train.jsonl")
            if os.path.exists(log):
                os.remove(log)
            run("train", [os.path.join(build, "train"), "--local",
                          f"--steps={args.steps}", f"--log={log}"] + data,
                args.timeout)
            losses = [json.loads(line)["loss"] for line in open(log)]
            row["train_errors"] = judge("train", losses, row["torch"],
                                        "torch", args)
            # Steps 1 and 2 as against torch; the third is reported.
            row["train_vs_step"] = judge("train", losses, row["step_losses"],
                                         "the unsplit step", args)
        timed("train", do_train)
    except StageFailed as failure:
        row["failed"], row["reason"] = failure.stage, failure.reason
    row["seconds"] = time.time() - started
    return row


def describe(row):
    if "failed" in row:
        return f"FAILED at {row['failed']}: {row['reason']}"
    return (f"ok; split {row.get('split', '?')} ops; loss errors against "
            f"torch per step: unsplit {fmt(row['step_errors'])}, 2-stage "
            f"program {fmt(row['train_errors'])}")


def fmt(errors):
    return "/".join(f"{e:.0e}" for e in errors)


def recheck_note(row, label):
    """What a rerun (e.g. in float64, a larger batch) of a failed model
    found, for its reason column."""
    if "failed" in row:
        return f"{label}: fails at {row['failed']} ({row['reason'][:120]})"
    return (f"{label}: trains, loss errors unsplit {fmt(row['step_errors'])}, "
            f"2-stage {fmt(row['train_errors'])}")


def write_table(rows, path, args, rechecks=None):
    lines = [
        "<!-- Written by python/torchvision_sweep.py; do not edit. -->",
        "# torchvision models through pipeline-opt",
        "",
        f"torch {args.torch_version}, torchvision {args.tv_version}, "
        f"opset 17, training mode, 10 classes, {args.dtype}, batch "
        f"{args.batch}, "
        f"{args.steps} SGD steps at lr {args.lr}, cluster `{args.cluster}` "
        "(2 stages, 1F1B, one micro-batch). A stage passes when it runs and "
        f"its first loss is within a relative {args.rtol:g} of PyTorch's, "
        f"its second within {args.rtol_trained:g} (the 2-stage program's "
        "also against the unsplit step's); the third step's error "
        "is shown, not judged (float32 rounding that a batch of 2 through "
        "BatchNorm amplifies). A float32 failure at step 2 of a deep "
        "BatchNorm network can be that amplification too (BatchNorm over "
        "2x2 maps of 2 samples): `--dtype float64` separates it from a "
        "wrong gradient.",
        "Stages: export (torch.onnx.export via python/pp_export_torch.py), "
        "import, step (pp-interpret, unsplit), plan (--pp-compile), "
        "build (the emitted program), train (the 2-stage program, --local).",
        *([f"A failed model's reason also gives its rerun ({args.recheck_label})."]
          if args.recheck else []),
        "",
        "| model | params | image | result | ops per stage | loss errors "
        "per step, unsplit | 2-stage | build s | reason |",
        "|---|---:|---:|---|---|---|---|---:|---|",
    ]
    for row in rows:
        ok = "failed" not in row
        result = "trains" if ok else f"fails at {row['failed']}"
        step = fmt(row["step_errors"]) if "step_errors" in row else "-"
        train = fmt(row["train_errors"]) if "train_errors" in row else "-"
        reason = "" if ok else row["reason"]
        if not ok and rechecks and row["model"] in rechecks:
            reason += "; " + recheck_note(rechecks[row["model"]],
                                          args.recheck_label)
        reason = reason.replace("|", "\\|")
        lines.append(
            f"| {row['model']} | {row.get('params', 0) / 1e6:.1f}M | "
            f"{row.get('image', '-')} | {result} | {row.get('split', '-')} | "
            f"{step} | {train} | {row['times'].get('build', 0):.0f} | "
            f"{reason} |")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", required=True)
    parser.add_argument("--models", default="")
    parser.add_argument("--all", action="store_true")
    parser.add_argument("--pipeline-opt", default="pipeline-opt")
    parser.add_argument("--pp-interpret", default="pp-interpret")
    parser.add_argument("--cluster", default="2xT4")
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--rtol", type=float, default=1e-4,
                        help="relative error of the first step's loss")
    parser.add_argument("--rtol-trained", type=float, default=2e-3,
                        help="of the second step's loss")
    parser.add_argument("--dtype", choices=["float32", "float64"],
                        default="float32", help="of the model and data "
                        "(float64 separates wrong gradients from float32 "
                        "rounding that training amplifies)")
    parser.add_argument("--timeout", type=int, default=3600,
                        help="seconds per command")
    parser.add_argument("--table", help="write the Markdown table here")
    parser.add_argument("--results", help="JSON lines of earlier runs to "
                        "keep (rerun only --models)")
    parser.add_argument("--recheck", help="JSON lines of a rerun of the "
                        "failed models (e.g. --dtype float64 --batch 4): "
                        "the table adds what it found to their reason")
    parser.add_argument("--recheck-label", default="float64, batch 4",
                        help="what --recheck's runs were")
    parser.add_argument("--table-only", action="store_true",
                        help="write --table from --results, run nothing")
    parser.add_argument("--export-one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    if args.export_one:
        facts = export_model(args.export_one, args.work, args.batch, args.lr,
                             args.steps, args.dtype)
        print(json.dumps(facts))
        return 0

    import torch
    import torchvision
    args.torch_version = torch.__version__
    args.tv_version = torchvision.__version__
    if args.all:
        names = torchvision.models.list_models(module=torchvision.models)
    elif args.models:
        names = args.models.split(",")
    else:
        names = DEFAULT_MODELS
    results = os.path.join(args.work, "results.jsonl")
    rows = {}
    if args.results and os.path.exists(args.results):
        for line in open(args.results):
            row = json.loads(line)
            rows[row["model"]] = row
    for name in [] if args.table_only else names:
        row = sweep_one(name, args)
        rows[name] = row
        print(f"{name}: {describe(row)} ({row['seconds']:.0f} s)",
              flush=True)
        with open(results, "a") as f:
            f.write(json.dumps(row) + "\n")
    if args.table:
        ordered = [rows[n] for n in sorted(rows)]
        rechecks = {}
        if args.recheck:
            for line in open(args.recheck):
                row = json.loads(line)
                rechecks[row["model"]] = row
        write_table(ordered, args.table, args, rechecks)
    return 0


if __name__ == "__main__":
    sys.exit(main())
