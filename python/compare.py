"""Tensor comparison and command running shared by the checks against
references.

A tensor passes when max|ours - reference| <= rtol * max|reference| + atol;
`Comparison` collects the failures and the worst relative error.
"""
import re
import subprocess
import sys

import numpy as np


def run(cmd, env=None):
    """Runs `cmd`; its stdout, or exit with its output when it fails."""
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        sys.exit(f"command failed ({proc.returncode}): {' '.join(cmd)}\n"
                 f"{proc.stdout}{proc.stderr}")
    return proc.stdout


class Comparison:
    def __init__(self, rtol, atol):
        self.rtol, self.atol = rtol, atol
        self.failures = []
        self.worst = 0.0
        self.worst_name = None

    def __call__(self, name, ours, reference):
        a = np.asarray(ours, np.float64)
        b = np.asarray(reference, np.float64)
        if a.shape != b.shape:
            self.failures.append(f"{name}: shape {a.shape} vs {b.shape}")
            return
        err = float(np.max(np.abs(a - b))) if a.size else 0.0
        scale = float(np.max(np.abs(b))) if b.size else 0.0
        relative = err / max(scale, 1e-30)
        if relative >= self.worst:
            self.worst, self.worst_name = relative, name
        if err > self.rtol * scale + self.atol:
            self.failures.append(f"{name}: max abs error {err:.3g} "
                                 f"(max |reference| {scale:.3g})")


def load_globals(directory):
    """The globals pp-interpret --dump-globals wrote, by name."""
    import os
    index = dict(line.rstrip("\n").split("\t") for line in
                 open(os.path.join(directory, "globals.txt")))
    return {name: np.load(os.path.join(directory, file))
            for name, file in index.items()}


def check_error_case(name, proc, failures):
    """Prints a bad-input run's first error line and records a failure
    when it exited 0 or printed none ("<program>: error: ..." counts)."""
    lines = [l[l.index("error"):] for l in proc.stderr.splitlines()
             if re.match(r"(\S+: )?error: ", l)]
    print(f"error case {name}: exit {proc.returncode}: " +
          (lines[0] if lines else "(no error line)"))
    if proc.returncode == 0 or not lines:
        failures.append(f"error case {name}: exit {proc.returncode}")
