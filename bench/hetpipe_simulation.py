#!/usr/bin/env python3
"""HetPipe's evaluation structure, by simulation: predicted throughput.

The cluster of HetPipe's testbed (test/Cluster/Inputs/hetpipe.json: 4 nodes
of 4 GPUs, TITAN V, TITAN RTX, RTX 2060, Quadro P4000, one kind per node,
56 Gb/s between nodes) and torchvision's VGG-19 and ResNet-152 (random
weights, 224x224, micro-batches of --micro-batch, 1000 classes). For each
configuration `pipeline-opt --pp-compile=... plan-dir=` predicts the
samples per second of all virtual workers (VWs) with the plan report's
simulation (cost model of each GPU kind, each VW's step on its own GPUs,
50 waves under WSP, pushes as ring all-reduces sharing the links):
  - DP: data parallelism, one model per GPU (16 VWs of 1 GPU), D = 0;
  - NP, ED, HD: HetPipe's allocation policies (4 VWs of 4 GPUs each), 1F1B
    with --microbatches micro-batches per step, at D = 0 and D = --staleness;
  - the same policies with HetPipe's pipelined VWs (schedule=hetpipe:
    Nm = --microbatches in flight, an update per micro-batch, the stream
    kept across waves at D > 0; at D = 0 each wave drains).
Every VW gets its own partition (the common refinement of their cuts; see
docs/hetpipe.md). A configuration whose plan does not fit the GPUs' memory
is reported so (the memory column looks at VW 0's devices; the partitioner
refuses a VW whose own partition does not fit).

Writes the Markdown table (--table) and an SVG bar chart (--svg).
Usage: /usr/bin/python3 bench/hetpipe_simulation.py --build build
         --table docs/hetpipe.md --svg docs/hetpipe.svg
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.abspath(__file__)) + "/.."
sys.path.insert(0, os.path.join(ROOT, "python"))

CLUSTER = os.path.join(ROOT, "test", "Cluster", "Inputs", "hetpipe.json")


def export(name, path, batch):
    import torch
    import torchvision
    from pp_export_torch import export as export_onnx
    torch.manual_seed(0)
    model = torchvision.models.get_model(name, weights=None)
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
    model.train()
    x = torch.randn(batch, 3, 224, 224)
    export_onnx(model, (x,), path, input_names=["input"],
                output_names=["logits"])


def predict(build, model, cluster, options, work, schedule="1f1b"):
    """(samples/s under the bound, at D = 0, fits memory, seconds)."""
    plan_dir = tempfile.mkdtemp(dir=work)
    started = time.time()
    proc = subprocess.run(
        [os.path.join(build, "bin", "pipeline-opt"), model,
         f"--pp-compile=cluster={cluster} schedule={schedule} report=- "
         f"plan-dir={plan_dir} {options}", "-o", os.devnull],
        capture_output=True, text=True)
    seconds = time.time() - started
    if proc.returncode != 0:
        return None, None, proc.stderr.strip().splitlines()[-1], seconds
    plan = json.load(open(os.path.join(plan_dir, "plan.json")))
    wsp = plan["wave_synchronous"]
    fits = all(d["peak_memory_bytes"] <= d["memory_bytes"]
               for d in plan["devices"])
    return (wsp["samples_per_second"],
            wsp["samples_per_second_at_staleness_0"],
            "fits" if fits else "OVER memory (VW 0's devices)", seconds)


def write_svg(rows, path):
    """Grouped bars: samples/s per configuration, one group per model."""
    width, height, left, bottom = 760, 320, 60, 60
    bars = [(m, label, value) for m, label, value in rows if value]
    top = max(v for _, _, v in bars) * 1.1
    step = (width - left - 20) / max(len(bars), 1)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" '
           f'height="{height}" font-family="sans-serif" font-size="10">',
           f'<text x="{left}" y="14" font-size="12">Predicted samples/s, '
           f'HetPipe cluster (16 GPUs, 4 kinds)</text>']
    colors = {"vgg19": "#4e79a7", "resnet152": "#f28e2b"}
    for i, (model, label, value) in enumerate(bars):
        h = (height - bottom - 30) * value / top
        x = left + i * step
        y = height - bottom - h
        out.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{step * 0.8:.1f}" '
                   f'height="{h:.1f}" fill="{colors.get(model, "#888")}"/>')
        out.append(f'<text x="{x + step * 0.4:.1f}" y="{y - 3:.1f}" '
                   f'text-anchor="middle">{value:.0f}</text>')
        out.append(f'<text transform="translate({x + step * 0.4:.1f},'
                   f'{height - bottom + 10}) rotate(40)">{model} {label}'
                   f'</text>')
    out.append(f'<line x1="{left - 5}" y1="{height - bottom}" '
               f'x2="{width - 10}" y2="{height - bottom}" stroke="black"/>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--models", default="vgg19,resnet152")
    parser.add_argument("--micro-batch", type=int, default=32)
    parser.add_argument("--microbatches", type=int, default=4)
    parser.add_argument("--staleness", type=int, default=4)
    parser.add_argument("--table")
    parser.add_argument("--svg")
    args = parser.parse_args()
    rows, lines, bars = [], [], []
    with tempfile.TemporaryDirectory() as work:
        # Without the file's own virtual workers, so policies apply.
        spec = json.load(open(CLUSTER))
        spec.pop("virtual_workers", None)
        cluster = os.path.join(work, "hetpipe-nodes.json")
        json.dump(spec, open(cluster, "w"))
        for name in args.models.split(","):
            model = os.path.join(work, name + ".onnx")
            export(name, model, args.micro_batch)
            configs = [("DP (16 x 1 GPU)",
                        f"microbatches=1 dp=16 staleness=0")]
            for policy in ("np", "ed", "hd"):
                configs.append(
                    (f"HetPipe {policy.upper()} (4 VWs x 4 GPUs)",
                     f"microbatches={args.microbatches} dp=4 "
                     f"virtual-workers={policy} "
                     f"staleness={args.staleness}"))
            # HetPipe's pipelined VWs: Nm = --microbatches in flight, the
            # stream kept across waves at D > 0 (D = 0 drains each wave).
            for policy in ("np", "ed", "hd"):
                configs.append(
                    (f"HetPipe {policy.upper()} pipelined (4 VWs x 4 GPUs)",
                     f"microbatches={args.microbatches} dp=4 "
                     f"virtual-workers={policy} "
                     f"staleness={args.staleness}"))
            for label, options in configs:
                schedule = "hetpipe" if "pipelined" in label else "1f1b"
                wsp, d0, fits, seconds = predict(args.build, model, cluster,
                                                 options, work, schedule)
                if wsp is None:
                    line = f"| {name} | {label} | - | - | {fits} |"
                elif label.startswith("DP"):
                    line = (f"| {name} | {label} | {d0:.0f} | - | {fits} |")
                    bars.append((name, "DP", d0))
                else:
                    line = (f"| {name} | {label} | {d0:.0f} | {wsp:.0f} "
                            f"({wsp / d0:.2f}x) | {fits} |")
                    short = label.split()[1] + (
                        " PMP" if "pipelined" in label else "")
                    bars += [(name, f"{short} D=0", d0),
                             (name, f"{short} D={args.staleness}", wsp)]
                print(line + f"  ({seconds:.0f} s to plan)", flush=True)
                lines.append(line)
    header = ("| model | configuration | samples/s, D = 0 | samples/s, "
              f"D = {args.staleness} | memory |\n|---|---|---|---|---|")
    table = header + "\n" + "\n".join(lines)
    print(table)
    if args.table:
        with open(args.table, "w") as f:
            f.write(table + "\n")
    if args.svg:
        write_svg(bars, args.svg)


if __name__ == "__main__":
    main()
