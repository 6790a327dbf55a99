"""Compares the per-step losses of two runs of a generated program.

Each file holds the program's progress lines (`step N/M  loss L ...`) or
pp-interpret's (`step N loss L ...`). They
match when both have the same steps and every loss agrees within --rtol
(relative); prints the worst difference and exits non-zero otherwise.
"""
import argparse
import re
import sys


def losses(path):
    return [float(m.group(1)) for m in
            re.finditer(r"^step \d+(?:/\d+)?\s+loss (\S+)", open(path).read(),
                        re.M)]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reference")
    parser.add_argument("other")
    parser.add_argument("--rtol", type=float, default=1e-3)
    args = parser.parse_args()
    a, b = losses(args.reference), losses(args.other)
    if not a or len(a) != len(b):
        print(f"steps differ: {len(a)} vs {len(b)}")
        return 1
    worst = max(abs(x - y) / max(abs(x), 1e-30) for x, y in zip(a, b))
    print(f"{len(a)} steps, worst relative loss difference {worst:.2e}")
    return 0 if worst <= args.rtol else 1


if __name__ == "__main__":
    sys.exit(main())
