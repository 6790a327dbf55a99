"""Checks that tensor-parallel training steps train like the unsplit step.

For one model (an .onnx file, or one make_models.py exports with --export
NAME and --kwargs), builds the training step with
--pp-training-step (the options of --options) at tp = 1 and at each degree
of --tp, runs each for --steps steps on the same random inputs with
pp-interpret (one interpreter per device of the group, in threads) and
compares the loss of every step and every final global (weights and
optimizer state). pp-interpret itself fails when the devices of a group end
a step with different losses or weights.

--pipelines "SCHEDULE:STAGES[:DP]" ... also compiles each degree into a
pipeline (an --export model with a `batch` keyword, exported again at the
micro-batch size with the same weights): --pp-compile tp=N dp=DP on a
compute-bound cluster of STAGES x tp x DP GPUs; pp-interpret runs them all
on the same whole mini-batches as the reference.

A tensor passes when max|tp - reference| <= rtol * max|reference| + atol;
prints one line per degree, with the number of all-reduces and all-gathers
in its program, and exits non-zero on a mismatch.
"""
import argparse
import json
import os
import sys

from compare import Comparison, load_globals, run


def losses_of(out):
    return [float(line.split()[3]) for line in out.splitlines()
            if line.startswith("step ")]


def train(args, tp):
    mlir = os.path.join(args.work, f"tp{tp}.mlir")
    dump = os.path.join(args.work, f"globals-tp{tp}")
    options = f"{args.options} tp={tp}".strip()
    run([args.pipeline_opt, args.model, f"--pp-training-step={options}",
         "-o", mlir])
    return interpret(args, mlir, dump)


def interpret(args, mlir, dump):
    """Trains `mlir` with pp-interpret: the step losses, the final globals
    and the number of each collective in the program."""
    out = run([args.pp_interpret, mlir, "--random-inputs",
               f"--seed={args.seed}", f"--steps={args.steps}",
               f"--dump-globals={dump}"])
    text = open(mlir).read()
    counts = {op: text.count(f"shard.{op} ")
              for op in ("all_reduce", "all_gather", "all_slice")}
    return losses_of(out), load_globals(dump), counts


def same_weights(whole, micro):
    """Gives the micro-batch export the whole one's initializers (the
    builder draws its example inputs first, so the two exports' random
    weights differ)."""
    import onnx
    reference = {init.name: init for init in onnx.load(whole).graph.initializer}
    model = onnx.load(micro)
    for init in model.graph.initializer:
        if init.name not in reference:
            sys.exit(f"{micro}: no initializer {init.name} in {whole}")
        init.CopyFrom(reference[init.name])
    onnx.save(model, micro)


def cluster_file(work, devices):
    """A cluster whose links cost nothing: the partition follows compute."""
    path = os.path.join(work, f"cluster{devices}.json")
    with open(path, "w") as f:
        json.dump({"nodes": [{"name": "n0", "devices": [
            {"kind": "P4000", "count": devices}]}],
            "links": {"intra_node": {"bandwidth": "1000TB/s",
                                     "latency": "0us"}}}, f)
    return path


def train_pipeline(args, model, tp, config):
    """The step split into a pipeline by `config` (SCHEDULE:STAGES[:DP])."""
    schedule, stages, *rest = config.split(":")
    stages, dp = int(stages), int(rest[0]) if rest else 1
    name = f"{schedule}-{stages}-dp{dp}-tp{tp}"
    mlir = os.path.join(args.work, name + ".mlir")
    dump = os.path.join(args.work, "globals-" + name)
    run([args.pipeline_opt, model,
         f"--pp-compile=cluster={cluster_file(args.work, stages * tp * dp)} "
         f"schedule={schedule} microbatches={args.microbatches} tp={tp} "
         f"dp={dp} {args.options}", "-o", mlir])
    return interpret(args, mlir, dump)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="an .onnx file")
    parser.add_argument("--export", help="a make_models.py model to export")
    parser.add_argument("--kwargs", default="{}",
                        help="JSON keywords of the --export model's builder")
    parser.add_argument("--work", required=True, help="scratch directory")
    parser.add_argument("--pipeline-opt", default="pipeline-opt")
    parser.add_argument("--pp-interpret", default="pp-interpret")
    parser.add_argument("--tp", type=int, nargs="+", default=[2])
    parser.add_argument("--options", default="lr=0.1",
                        help="other --pp-training-step options")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--pipelines", nargs="*", default=[],
                        help="SCHEDULE:STAGES[:DP] pipelines of each degree")
    parser.add_argument("--microbatches", type=int, default=2)
    parser.add_argument("--rtol", type=float, default=1e-5)
    parser.add_argument("--atol", type=float, default=1e-7)
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    micro_models = {}
    if args.export:
        import make_models
        kwargs = json.loads(args.kwargs)
        make_models.export(args.export, args.work, **kwargs)
        args.model = os.path.join(args.work, args.export + ".onnx")
        for config in args.pipelines:
            dp = int(config.split(":")[2]) if config.count(":") > 1 else 1
            parts = args.microbatches * dp
            if kwargs.get("batch", 4) % parts:
                sys.exit(f"{config}: batch {kwargs.get('batch', 4)} does not "
                         f"split into {parts} micro-batches")
            micro = os.path.join(args.work, f"micro{parts}")
            os.makedirs(micro, exist_ok=True)
            make_models.export(args.export, micro, **dict(
                kwargs, batch=kwargs.get("batch", 4) // parts))
            micro_models[config] = os.path.join(micro, args.export + ".onnx")
            same_weights(args.model, micro_models[config])
    elif args.pipelines:
        sys.exit("--pipelines needs an --export model")
    if not args.model:
        sys.exit("give --model or --export")

    ref_losses, ref_globals, _ = train(args, 1)
    if len(ref_losses) != args.steps:
        sys.exit(f"the reference ran {len(ref_losses)} of {args.steps} steps")
    failed = False
    runs = [(f"tp={tp}", lambda tp=tp: train(args, tp)) for tp in args.tp]
    runs += [(f"{config} tp={tp}",
              lambda tp=tp, config=config: train_pipeline(
                  args, micro_models[config], tp, config))
             for config in args.pipelines for tp in args.tp]
    for label, train_one in runs:
        losses, globals_, counts = train_one()
        if counts["all_reduce"] == 0:
            sys.exit(f"{label}: the program has no all-reduce: nothing was "
                     "split")
        loss_check = Comparison(args.rtol, args.atol)
        check = Comparison(args.rtol, args.atol)
        if len(losses) != len(ref_losses):
            check.failures.append(f"{len(losses)} steps ran")
        for step, (ours, ref) in enumerate(zip(losses, ref_losses), 1):
            loss_check(f"loss of step {step}", [ours], [ref])
        if set(globals_) != set(ref_globals):
            check.failures.append("the globals differ: " + ", ".join(
                sorted(set(globals_) ^ set(ref_globals))))
        # Globals that stay within atol of zero (a key bias, whose gradient
        # is zero up to rounding) pass on atol; their relative error says
        # nothing and is left out of the worst one reported.
        tiny = Comparison(args.rtol, args.atol)
        for name in sorted(set(globals_) & set(ref_globals)):
            large = abs(ref_globals[name]).max(initial=0) > 100 * args.atol
            (check if large else tiny)(name, globals_[name],
                                       ref_globals[name])
        failures = loss_check.failures + check.failures + tiny.failures
        status = "FAIL" if failures else "ok"
        print(f"{label}: {status}: {args.steps} steps, all_reduce "
              f"{counts['all_reduce']}, all_gather {counts['all_gather']}, "
              f"all_slice {counts['all_slice']}; worst relative error: "
              f"losses {loss_check.worst:.2e}, globals {check.worst:.2e} "
              f"({check.worst_name})")
        for failure in failures[:10]:
            print(f"  {failure}")
        failed |= bool(failures)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
