#!/usr/bin/env python3
"""Runs every pipeline-opt command of the lit suite, plus a matrix of
--pp-compile configurations over the test models, and writes each one's
outputs (the -o module, stdout, stderr, exit status, report, plan-dir,
emit-dir) under OUT/<case>/. Two trees written before and after a refactoring
compare with `diff -r`: issue 43's "every generated program and plan is byte
for byte the same".

  scripts/golden-outputs.py OUT [--build DIR] [--filter REGEX] [--jobs N]

Commands whose input is a file an earlier RUN line made with something other
than pipeline-opt (a Python export, a shell edit) are skipped and counted.
"""
import argparse
import concurrent.futures
import hashlib
import os
import re
import shlex
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCHEDULES = ["gpipe", "1f1b", "interleaved", "zb-h1", "zb-h2", "zb-v",
             "dualpipev", "pipedream", "pipedream-2bw", "nf1b", "hetpipe",
             "auto"]
# Test models exported with a symbolic batch dim.
DYNAMIC_BATCH = ("transformer", "resnet18")
MODELS = ["mlp", "transformer", "gpt", "vgg11", "resnet18", "tied", "padnet"]


def run_lines(path):
    """The test file's RUN lines, continuation backslashes joined."""
    lines, current = [], ""
    with open(path, errors="replace") as f:
        for text in f:
            m = re.search(r"RUN:(.*)$", text)
            if not m:
                continue
            part = m.group(1).rstrip()
            if part.endswith("\\"):
                current += part[:-1] + " "
                continue
            lines.append(current + part)
            current = ""
    return lines


def pipeline_opt_segments(line):
    """The pipeline-opt commands of one RUN line, up to the first pipe,
    redirection or command separator."""
    try:
        words = shlex.split(line, posix=True)
    except ValueError:
        return []
    segments, current = [], None
    for w in words:
        if w in ("|", "&&", ";", "||") or w.startswith(">") or w.startswith("2>") \
                or w.startswith("<"):
            if current is not None:
                segments.append(current)
            current = None
            continue
        if w == "pipeline-opt":
            current = []
            continue
        if current is not None:
            current.append(w)
    if current is not None:
        segments.append(current)
    return segments


class Case:
    def __init__(self, name, args):
        self.name, self.args = name, args


def substitute(word, test, models, made):
    test_dir = os.path.dirname(test)
    word = word.replace("%models", models).replace("%clusters",
                                                   os.path.join(ROOT, "test", "Cluster", "Inputs"))
    word = word.replace("%pp_src", ROOT).replace("%S", test_dir).replace("%s", test)
    word = word.replace("%p", test_dir)
    for key in sorted(made, key=len, reverse=True):
        word = word.replace(key, made[key])
    # Models an earlier RUN line copied from the build's test models.
    def model(m):
        name = m.group(1)
        candidate = os.path.join(models, name + ".onnx")
        return candidate if os.path.exists(candidate) else m.group(0)
    word = re.sub(r"%t[^ /\"=]*/(\w+)\.onnx", model, word)
    return word


OUTPUT_OPTIONS = ("report", "plan-dir", "emit-dir", "report-dir", "json")


def rewrite_outputs(args, out):
    """Points -o and the --pp-compile output options at files under out."""
    result, made = [], {}
    i = 0
    while i < len(args):
        a = args[i]
        if a == "-o" and i + 1 < len(args):
            dest = args[i + 1]
            path = os.path.join(out, "out.mlir") if dest != "-" else "-"
            if dest.startswith("%t"):
                made[dest] = path
            result += ["-o", path]
            i += 2
            continue
        def option(m):
            key, value = m.group(1), m.group(2)
            if value in ("", "-") or value.startswith("/dev/"):
                return m.group(0)
            path = os.path.join(out, key)
            if value.startswith("%t"):
                made[value] = path
            return f"{key}={path}"
        a = re.sub(r"(?<![\w-])(" + "|".join(OUTPUT_OPTIONS) + r")=([^ \"}]*)", option, a)
        result.append(a)
        i += 1
    return result, made


def lit_cases(models, test_filter):
    cases, skipped = [], 0
    for dirpath, _, files in os.walk(os.path.join(ROOT, "test")):
        if "Inputs" in dirpath.split(os.sep):
            continue
        for f in sorted(files):
            if not f.endswith((".mlir", ".test")):
                continue
            test = os.path.join(dirpath, f)
            rel = os.path.relpath(test, os.path.join(ROOT, "test"))
            if test_filter and not re.search(test_filter, rel):
                continue
            made = {}
            for n, line in enumerate(run_lines(test)):
                for k, seg in enumerate(pipeline_opt_segments(line)):
                    name = f"lit/{rel}/{n}.{k}"
                    args = [substitute(w, test, models, made) for w in seg]
                    if any("%t" in w for w in args):
                        skipped += 1
                        continue
                    out = name
                    args, new = rewrite_outputs(args, "@OUT@")
                    for key, path in new.items():
                        made[key] = path.replace("@OUT@", os.path.join("@ROOT@", out))
                    cases.append(Case(name, args))
    return cases, skipped


def matrix_cases(models):
    cases = []
    clusters = {"2": "cluster=2xT4", "4": "cluster=4xT4",
                "het": "cluster=2xA100-80,2xT4"}
    for model in MODELS:
        onnx = os.path.join(models, model + ".onnx")
        if not os.path.exists(onnx):
            continue
        for sched in SCHEDULES:
            for key, cluster in clusters.items():
                extra = " dp=2 staleness=1" if sched == "hetpipe" and key != "2" else ""
                opts = (f"{cluster} schedule={sched} microbatches=4{extra} "
                        "report=@OUT@/report plan-dir=@OUT@/plan-dir "
                        "emit-dir=@OUT@/emit-dir")
                batch = ["--batch-size=8"] if model in DYNAMIC_BATCH else []
                cases.append(Case(f"matrix/{model}/{sched}-{key}",
                                  [onnx] + batch + [f"--pp-compile={opts}", "-o",
                                                    "@OUT@/out.mlir"]))
    return cases


def run_case(case, tool, build, root, timeout):
    out = os.path.join(root, case.name)
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    args = [a.replace("@OUT@", out).replace("@ROOT@", root) for a in case.args]
    with open(os.path.join(out, "command"), "w") as f:
        f.write(" ".join(shlex.quote(a) for a in args) + "\n")
    try:
        p = subprocess.run([tool] + args, cwd=out, capture_output=True,
                           timeout=timeout, stdin=subprocess.DEVNULL)
        rc, stdout, stderr = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired:
        rc, stdout, stderr = "timeout", b"", b""
    with open(os.path.join(out, "stdout"), "wb") as f:
        f.write(stdout)
    with open(os.path.join(out, "stderr"), "wb") as f:
        f.write(stderr)
    with open(os.path.join(out, "rc"), "w") as f:
        f.write(f"{rc}\n")
    normalise_paths(out, [(root, "@ROOT@"), (build, "@BUILD@"), (ROOT, "@SRC@")])
    return case.name, rc


def normalise_paths(out, replacements):
    """Trees written from two checkouts differ in their paths only: those
    are replaced by placeholders so that `diff -r` shows real changes."""
    for dirpath, _, files in os.walk(out):
        for f in files:
            path = os.path.join(dirpath, f)
            with open(path, "rb") as fh:
                data = fh.read()
            new = data
            for old, mark in replacements:
                new = new.replace(old.encode(), mark.encode())
            if len(new) > (1 << 20):
                # Large modules and weights files: their digest (of the
                # normalised text: modules name their source file) is enough
                # to compare, and keeps the tree at a few hundred MiB.
                os.remove(path)
                with open(path + ".sha256", "w") as fh:
                    fh.write(hashlib.sha256(new).hexdigest() + "\n")
                continue
            if new != data:
                with open(path, "wb") as fh:
                    fh.write(new)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--build", default=os.environ.get("BUILD_DIR",
                                                          os.path.join(ROOT, "build")))
    parser.add_argument("--filter", default="")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--timeout", type=int, default=300)
    parser.add_argument("--no-matrix", action="store_true")
    args = parser.parse_args()
    # Absolute: each command runs in its own output folder.
    args.build = os.path.abspath(args.build)
    tool = os.path.join(args.build, "bin", "pipeline-opt")
    models = os.path.join(args.build, "test", "models")
    if not os.path.exists(tool) or not os.path.exists(models):
        sys.exit(f"error: {tool} or {models} missing (ninja pipeline-opt pp-test-models)")
    root = os.path.abspath(args.out)
    cases, skipped = lit_cases(models, args.filter)
    if not args.no_matrix:
        cases += matrix_cases(models)
    # Commands reading an earlier command's output run after it: one test
    # file's cases stay in order on one worker.
    groups = {}
    for c in cases:
        groups.setdefault(c.name.rsplit("/", 1)[0], []).append(c)

    def run_group(group):
        return [run_case(c, tool, args.build, root, args.timeout) for c in group]

    results = []
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        for r in pool.map(run_group, groups.values()):
            results += r
    digest = hashlib.sha256()
    for dirpath, _, files in sorted(os.walk(root)):
        for f in sorted(files):
            with open(os.path.join(dirpath, f), "rb") as fh:
                digest.update(os.path.relpath(os.path.join(dirpath, f), root).encode())
                digest.update(fh.read())
    failed = sum(1 for _, rc in results if rc != 0)
    print(f"{len(results)} commands ({failed} exit non-zero, {skipped} skipped: "
          f"inputs made by other tools); tree digest {digest.hexdigest()[:16]}")


if __name__ == "__main__":
    main()
