#!/usr/bin/env python3
"""Held-out accuracy of the digits demo's trained model.

    digits_eval.py --model trained.onnx --data DIR/heldout [--log RUN.jsonl]

With --log, the program's own evaluation (`train --eval-data DIR
--eval-every N`, whose log holds `eval_loss` / `eval_accuracy` records):
the last record's accuracy and loss, over the held-out micro-batches the
program evaluates (whole micro-batches of held-out samples). Without one
(or with a log of a run without --eval-data), a check from outside: the
weights the program wrote with `--save-onnx` run by our reference
interpreter on all held-out images at once (`pp-interpret trained.onnx
--batch-size=N --input=input=DIR/input.npy --output-dir=...`), numpy
taking the argmax of the logits and the mean cross-entropy.

Prints `ours held-out accuracy: 97.31% (289/297), loss 0.1234 (...)`.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def from_log(path):
    """The last evaluation record of a `train --log`, or None."""
    sys.path.insert(0, HERE)
    from plot_run import LogError, read_log
    try:
        _, evals = read_log(path)
    except LogError as e:
        sys.exit(f"digits_eval.py: error: {e}")
    evals = [r for r in evals if "eval_accuracy" in r]
    return evals[-1] if evals else None


def interpret(pp_interpret, model, x):
    """The logits of `model` (ONNX) on inputs x, run by pp-interpret."""
    with tempfile.TemporaryDirectory() as work:
        inputs = os.path.join(work, "input.npy")
        np.save(inputs, x)
        out = os.path.join(work, "out")
        proc = subprocess.run(
            [pp_interpret, model, f"--batch-size={len(x)}",
             f"--input=input={inputs}", f"--output-dir={out}"],
            capture_output=True, text=True)
        if proc.returncode != 0:
            sys.exit(f"digits_eval.py: pp-interpret failed on {model}:\n"
                     f"{proc.stderr.strip()}")
        return np.load(os.path.join(out, "logits.npy"))


def cross_entropy(logits, y):
    z = logits.astype(np.float64)
    z = z - z.max(axis=1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    return float(-logp[np.arange(len(y)), y].mean())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True,
                        help="the trained model (train --save-onnx)")
    parser.add_argument("--data", required=True,
                        help="a directory of input.npy and labels.npy")
    parser.add_argument("--log", help="the run's train --log (JSON lines)")
    parser.add_argument("--pp-interpret", default="pp-interpret")
    args = parser.parse_args()
    y = np.load(os.path.join(args.data, "labels.npy"))
    record = from_log(args.log) if args.log else None
    if record is not None:
        accuracy = record["eval_accuracy"]
        loss = record.get("eval_loss", float("nan"))
        source = f"train --eval-data, step {record['step']:g}"
    else:
        x = np.load(os.path.join(args.data, "input.npy"))
        logits = interpret(args.pp_interpret, args.model, x)
        accuracy = float((logits.argmax(axis=1) == y).mean())
        loss = cross_entropy(logits, y)
        source = "--save-onnx weights run by pp-interpret"
    count = ("" if record is not None else
             f"({round(accuracy * len(y))}/{len(y)}), ")
    print(f"ours held-out accuracy: {100 * accuracy:.2f}% {count}"
          f"loss {loss:.4f} ({source})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
