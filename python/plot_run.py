#!/usr/bin/env python3
"""Plots a training run's curves from a generated program's JSON `--log`.

    plot_run.py RUN.jsonl -o curves.png [--summary] [--title TEXT]

Reads the JSON lines `train --log RUN.jsonl` writes (docs/cli.md): one
record per training step with `step`, `loss`, `step_ms` and `lr` (and
`accuracy` when the program reports one), and evaluation records, those
holding any of `eval_loss`, `eval_accuracy`, `eval_perplexity`, each at the
`step` it was taken after. Draws a 2 x 2 (3 x 2 with a learning rate)
figure with matplotlib's Agg backend (no display needed):

  - loss against steps and against wall time: the training loss of every
    step (and its running mean over 1/25 of the steps, 3 or more) and the
    evaluation loss where the log has one;
  - accuracy (or, for a language model, perplexity) against steps and wall
    time: training accuracy when logged, evaluation accuracy / perplexity;
    left empty with a note when the log has neither;
  - the learning rate against steps (when the log has `lr`).

Wall time is the record's own clock when it has one (`elapsed_s`, `time_s`
or `wall_s`, seconds since the start), else the running sum of the steps'
`step_ms` (the time of each step as the program measured it, so the time
between steps, e.g. an evaluation, is not counted). An evaluation record
without a clock takes the time of the last training step before it.

--summary prints one line per curve: its number of points, first and last
value and (for losses) the least one, then the total time, e.g.

    train loss: 460 steps, first 2.3026 last 0.0123 min 0.0051
    eval accuracy: 10 points, first 0.8923 last 0.9731 max 0.9798

A missing, empty or malformed file (a line that is not a JSON object, or a
record without a numeric `step`) is an error naming the file and the line,
with exit status 1. Lines that are blank are skipped; records of unknown
keys are fine (the fields above are all it reads).
"""
import argparse
import json
import math
import os
import sys

TIME_KEYS = ("elapsed_s", "time_s", "wall_s")
EVAL_KEYS = ("eval_loss", "eval_accuracy", "eval_perplexity")


class LogError(Exception):
    pass


def _number(value):
    """A finite or non-finite float from a JSON number (or the strings
    "nan"/"inf" some writers use), None for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def read_log(path):
    """The run's training steps and evaluation records, each a dict of
    floats with `step` and `time` (seconds, see the module doc)."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.readlines()
    except OSError as e:
        raise LogError(f"{path}: cannot read: {e.strerror or e}")
    except UnicodeDecodeError as e:
        raise LogError(f"{path}: not a text file ({e.reason})")
    train, evals = [], []
    clock = 0.0
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            record = json.loads(line.strip())
        except json.JSONDecodeError as e:
            hint = ""
            if number == 1 and line.startswith("step,"):
                hint = (" (a CSV --log: plot_run.py reads the JSON lines "
                        "that --log writes to a name not ending in .csv)")
            raise LogError(f"{where}: malformed JSON ({e.msg} at column "
                           f"{e.colno}): {line.strip()[:80]}{hint}")
        if not isinstance(record, dict):
            raise LogError(f"{where}: expected a JSON object, got "
                           f"{type(record).__name__}")
        step = _number(record.get("step"))
        if step is None:
            raise LogError(f"{where}: record without a numeric 'step': "
                           f"{line.strip()[:80]}")
        own = next((_number(record[k]) for k in TIME_KEYS if k in record),
                   None)
        is_eval = any(k in record for k in EVAL_KEYS)
        values = {k: _number(v) for k, v in record.items()}
        values = {k: v for k, v in values.items() if v is not None}
        if is_eval:
            values["time"] = own if own is not None else clock
            evals.append(values)
            # An evaluation record that also carries a training loss counts
            # as a step too only when it has a step time of its own.
            if "step_ms" not in record:
                continue
        if own is not None:
            clock = own
        else:
            step_ms = values.get("step_ms", 0.0)
            if not math.isfinite(step_ms):
                step_ms = 0.0
            clock += step_ms / 1000.0
        values["time"] = clock
        if "loss" in values or "accuracy" in values:
            train.append(values)
    if not train and not evals:
        raise LogError(f"{path}: no training or evaluation records (is it "
                       "a JSON --log? a .csv log is not read)")
    return train, evals


def series(records, key):
    points = [(r["step"], r["time"], r[key]) for r in records if key in r]
    return ([p[0] for p in points], [p[1] for p in points],
            [p[2] for p in points])


def smooth(values, window):
    """The mean of each value and the window - 1 before it (fewer at the
    start)."""
    out, total = [], 0.0
    for i, v in enumerate(values):
        total += v
        if i >= window:
            total -= values[i - window]
        out.append(total / min(i + 1, window))
    return out


def summary(train, evals):
    lines = []
    curves = [("train loss", train, "loss"),
              ("train accuracy", train, "accuracy"),
              ("eval loss", evals, "eval_loss"),
              ("eval accuracy", evals, "eval_accuracy"),
              ("eval perplexity", evals, "eval_perplexity"),
              ("lr", train, "lr")]
    for name, records, key in curves:
        steps, _, values = series(records, key)
        if not values:
            continue
        unit = "steps" if records is train else "points"
        line = (f"{name}: {len(values)} {unit}, first {values[0]:.6g} "
                f"last {values[-1]:.6g}")
        finite = [v for v in values if math.isfinite(v)]
        if finite and "accuracy" in key:
            best = max(finite)
            line += f" max {best:.6g} (step {steps[values.index(best)]:g})"
        elif finite and key != "lr":
            best = min(finite)
            line += f" min {best:.6g} (step {steps[values.index(best)]:g})"
        lines.append(line)
    total = max([r["time"] for r in train + evals] or [0.0])
    lines.append(f"time: {total:.3f} s over "
                 f"{len(train)} logged steps")
    return lines


def plot(train, evals, out, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    has_lr = any("lr" in r for r in train)
    rows = 3 if has_lr else 2
    fig, axes = plt.subplots(rows, 2, figsize=(11, 3.4 * rows),
                             squeeze=False)
    metric = None
    for key, label in (("eval_accuracy", "accuracy"),
                       ("accuracy", "accuracy"),
                       ("eval_perplexity", "perplexity")):
        if any(key in r for r in train + evals):
            metric = label
            break
    for col, (axis_name, index) in enumerate((("step", 0),
                                               ("wall time (s)", 1))):
        ax = axes[0][col]
        train_pts = series(train, "loss")
        if train_pts[2]:
            ax.plot(train_pts[index], train_pts[2], lw=0.7, alpha=0.45,
                    label="train loss")
            window = len(train_pts[2]) // 25
            if window >= 3:
                ax.plot(train_pts[index], smooth(train_pts[2], window),
                        lw=1.4, color="tab:blue",
                        label=f"train loss, mean of {window} steps")
        eval_pts = series(evals, "eval_loss")
        if eval_pts[2]:
            ax.plot(eval_pts[index], eval_pts[2], "o-", ms=3,
                    label="eval loss")
        ax.set_xlabel(axis_name)
        ax.set_ylabel("loss")
        ax.set_yscale("log" if train_pts[2] and min(train_pts[2]) > 0
                      else "linear")
        ax.grid(True, alpha=0.3)
        ax.legend(loc="best")

        ax = axes[1][col]
        drawn = False
        if metric == "accuracy":
            for records, key, style, label in (
                    (train, "accuracy", "-", "train accuracy"),
                    (evals, "eval_accuracy", "o-", "eval accuracy")):
                pts = series(records, key)
                if pts[2]:
                    ax.plot(pts[index], pts[2], style, ms=3, lw=0.9,
                            label=label)
                    drawn = True
            ax.set_ylabel("accuracy")
        elif metric == "perplexity":
            pts = series(evals, "eval_perplexity")
            ax.plot(pts[index], pts[2], "o-", ms=3, label="eval perplexity")
            ax.set_ylabel("perplexity")
            drawn = True
        if drawn:
            ax.legend(loc="best")
            ax.grid(True, alpha=0.3)
        else:
            ax.text(0.5, 0.5, "no accuracy or evaluation records in the log",
                    ha="center", va="center", transform=ax.transAxes,
                    color="gray")
            ax.set_xticks([])
            ax.set_yticks([])
        ax.set_xlabel(axis_name)

    if has_lr:
        steps, _, lrs = series(train, "lr")
        ax = axes[2][0]
        ax.plot(steps, lrs, lw=1.0, color="tab:green")
        ax.set_xlabel("step")
        ax.set_ylabel("learning rate")
        ax.grid(True, alpha=0.3)
        ax = axes[2][1]
        steps, _, ms = series(train, "step_ms")
        if ms:
            ax.plot(steps, ms, lw=0.6, color="tab:gray")
            ax.set_ylabel("step time (ms)")
            ax.set_xlabel("step")
            ax.grid(True, alpha=0.3)
        else:
            ax.axis("off")
    fig.suptitle(title)
    fig.tight_layout()
    try:
        fig.savefig(out, dpi=100)
    except OSError as e:
        raise LogError(f"{out}: cannot write: {e.strerror or e}")
    finally:
        plt.close(fig)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log", help="JSON lines of `train --log`")
    parser.add_argument("-o", "--out", help="the figure (PNG, or any "
                        "format matplotlib names by its suffix)")
    parser.add_argument("--summary", action="store_true",
                        help="print a line per curve")
    parser.add_argument("--title", default=None)
    args = parser.parse_args(argv)
    if not args.out and not args.summary:
        parser.error("give -o OUT.png, --summary or both")
    try:
        train, evals = read_log(args.log)
        if args.summary:
            print("\n".join(summary(train, evals)))
        if args.out:
            plot(train, evals, args.out,
                 args.title or os.path.basename(args.log))
            print(f"wrote {args.out}")
    except LogError as e:
        print(f"plot_run.py: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
