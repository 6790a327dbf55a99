#!/usr/bin/env python3
"""The Python half of scripts/gpu-bench.sh: the benchmark models, their
weights rebuilt on a node that cannot receive them, the PyTorch peers, and
the results table.

  export --out DIR [--small]
      The GPT test model scaled up (make_models.TinyGPT: 12 layers, d 768,
      12 heads, sequence 1024, vocabulary 8192, no dropout, batch 8) and
      torchvision's resnet50 (1000 classes, 224 x 224, batch 64) as
      DIR/gpt.onnx and DIR/resnet50.onnx, static batch, opset 17, training
      mode; DIR/models.json holds each one's configuration and training
      FLOPs per sample (3 x the forward's multiply-adds x 2 over every
      Conv, Linear and attention product). Every float initializer of rank
      >= 2 (the weights) is replaced by values drawn from a counter-based
      hash of its name and position (uniform in +-1/sqrt(fan_in), PyTorch's
      default bound), so that `rebuild` can make them again anywhere.
      --small: a 2-layer GPT (d 64, sequence 64) and a resnet of one
      bottleneck per stage at 32 x 32, batch 2: the same exporters and ops
      at a size the dry run exports in seconds.
  recipe --data program.data --onnx MODEL.onnx --out DIR
      Finds each hashed weight's bytes in a generated program's data file
      and writes DIR/recipe.json (where each goes) and DIR/rest.bin (every
      other byte: biases, normalisation parameters, shape constants); then
      rebuilds the file from them and checks it is identical. The data of
      resnet50 (100 MB) and the GPT (370 MB) cannot travel to the GPU node
      (the device tool carries 64 MiB); their recipes are a few hundred KB.
  rebuild --recipe DIR --out program.data
      Makes the data file again (numpy only), checks its SHA-256.
  torch --model gpt|resnet50 --models DIR --mode MODE --steps N --out F.json
        [--device cpu]
      The PyTorch peer on the GPU: the same model, batch and SGD step,
      MODE eager-fp32 (TF32 allowed, as the generated program's default),
      eager-bf16 (torch.autocast bf16) or compile-bf16 (torch.compile of the
      autocast step); median samples/s of the timed steps after the
      warm-up, and torch.cuda.max_memory_allocated.
  summary --results DIR --models DIR --gpu NAME
      The markdown section for bench/README.md from the results.

Usage: see scripts/gpu-bench.sh.
"""
import argparse
import hashlib
import json
import math
import os
import statistics
import sys
import time
import zlib

import numpy as np

ROOT = os.path.dirname(os.path.abspath(__file__)) + "/.."
sys.path.insert(0, os.path.join(ROOT, "python"))

# The benchmark sizes (--small: the dry run's).
SIZES = {
    "gpt": dict(n_layer=12, d_model=768, n_head=12, context=1024, vocab=8192,
                batch=8),
    "resnet50": dict(image=224, classes=1000, batch=64, blocks=[3, 4, 6, 3]),
}
SMALL = {
    "gpt": dict(n_layer=2, d_model=64, n_head=2, context=64, vocab=128,
                batch=2),
    "resnet50": dict(image=32, classes=10, batch=2, blocks=[1, 1, 1, 1]),
}

# Dense peak TFLOP/s (datasheets; SXM parts): bf16 tensor cores, TF32
# tensor cores, fp32 CUDA cores.
PEAKS = [("H200", 989.4, 494.7, 66.9), ("H100 PCIe", 756.0, 378.0, 51.2),
         ("H100", 989.4, 494.7, 66.9), ("A100", 312.0, 156.0, 19.5)]


def peak_tflops(gpu, precision):
    """The part's peak for bf16, tf32 or fp32 (None: an unknown part)."""
    for name, bf16, tf32, fp32 in PEAKS:
        if name.lower() in gpu.lower():
            return {"bf16": bf16, "tf32": tf32, "fp32": fp32}[precision]
    return None


#===---------------------------------------------------------------------===#
# Hashed weights
#===---------------------------------------------------------------------===#

MASK = np.uint64(0xFFFFFFFFFFFFFFFF)


def splitmix64(x):
    """splitmix64's finaliser on a uint64 array (wrapping arithmetic)."""
    with np.errstate(over="ignore"):
        x = (x + np.uint64(0x9E3779B97F4A7C15)) & MASK
        x = ((x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)) & MASK
        x = ((x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)) & MASK
        return x ^ (x >> np.uint64(31))


def hashed_weight(name, shape):
    """Uniform values in +-1/sqrt(fan_in) from a hash of (name, index):
    the same float32 bits with any numpy (integer arithmetic, then one
    rounding of a float64 product)."""
    n = int(np.prod(shape))
    fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else 1
    bound = 1.0 / math.sqrt(fan_in)
    key = np.uint64(zlib.crc32(name.encode()))
    out = np.empty(n, np.float32)
    chunk = 1 << 24
    for start in range(0, n, chunk):
        index = np.arange(start, min(n, start + chunk), dtype=np.uint64)
        bits = splitmix64((key << np.uint64(40)) ^ index) >> np.uint64(40)
        unit = bits.astype(np.float64) * 2.0 ** -24  # [0, 1), 24 bits
        out[start:start + len(index)] = ((2.0 * unit - 1.0) * bound).astype(
            np.float32)
    return out.reshape(shape)


def hashed_initializers(model):
    """The float initializers of rank >= 2 of an onnx model."""
    from onnx import TensorProto
    return [t for t in model.graph.initializer
            if t.data_type == TensorProto.FLOAT and len(t.dims) >= 2]


#===---------------------------------------------------------------------===#
# export
#===---------------------------------------------------------------------===#

def build_model(name, cfg):
    """The torch module, an example input and the input's name."""
    import torch
    import torchvision
    import make_models
    torch.manual_seed(0)
    if name == "gpt":
        model, tokens, input_name, _ = make_models.make_gpt(
            n_layer=cfg["n_layer"], d_model=cfg["d_model"],
            n_head=cfg["n_head"], context=cfg["context"], batch=cfg["batch"],
            dropout=0.0, vocab=cfg["vocab"])
        return model, tokens, input_name
    from torchvision.models.resnet import Bottleneck, ResNet
    model = ResNet(Bottleneck, cfg["blocks"], num_classes=cfg["classes"])
    example = torch.randn(cfg["batch"], 3, cfg["image"], cfg["image"])
    del torchvision
    return model, example, "input"


def training_flops(name, cfg, model, example):
    """FLOPs of one training step per sample: 3 x the forward's (2 per
    multiply-add) over Conv and Linear layers, plus the GPT's attention
    products (q k^T and p v)."""
    import torch
    total = [0]

    def conv_hook(module, inputs, output):
        kernel = int(np.prod(module.kernel_size))
        total[0] += (2 * output.numel() * kernel * module.in_channels
                     // module.groups)

    def linear_hook(module, inputs, output):
        total[0] += 2 * output.numel() * module.in_features

    hooks = []
    for m in model.modules():
        if isinstance(m, torch.nn.Conv2d):
            hooks.append(m.register_forward_hook(conv_hook))
        elif isinstance(m, torch.nn.Linear):
            hooks.append(m.register_forward_hook(linear_hook))
    with torch.no_grad():
        model.eval()
        model(example[:1])
        model.train()
    for h in hooks:
        h.remove()
    forward = total[0]
    if name == "gpt":
        # Per sample: 2 products of context x context x d per layer.
        forward += (cfg["n_layer"] * 2 * 2 * cfg["context"] ** 2
                    * cfg["d_model"])
    return 3 * forward


def export(args):
    import onnx
    import torch
    from onnx import numpy_helper
    os.makedirs(args.out, exist_ok=True)
    sizes = SMALL if args.small else SIZES
    info = {}
    for name, cfg in sizes.items():
        model, example, input_name = build_model(name, cfg)
        model.train()
        path = os.path.join(args.out, name + ".onnx")
        torch.onnx.export(model, (example,), path, opset_version=17,
                          training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False,
                          input_names=[input_name], output_names=["logits"])
        proto = onnx.load(path)
        for t in hashed_initializers(proto):
            values = hashed_weight(t.name, tuple(t.dims))
            t.CopyFrom(numpy_helper.from_array(values, t.name))
        onnx.save(proto, path)
        onnx.checker.check_model(path)
        params = sum(int(np.prod(t.dims)) for t in proto.graph.initializer
                     if t.data_type == onnx.TensorProto.FLOAT)
        info[name] = dict(cfg, input=input_name, params=params,
                          flops_per_sample=training_flops(name, cfg, model,
                                                          example))
        print(f"{name}: {path}, {params / 1e6:.1f} M parameters, "
              f"{info[name]['flops_per_sample'] / 1e9:.1f} GFLOP per "
              "sample per training step")
    with open(os.path.join(args.out, "models.json"), "w") as f:
        json.dump(info, f, indent=1)


#===---------------------------------------------------------------------===#
# recipe / rebuild
#===---------------------------------------------------------------------===#

def recipe(args):
    import onnx
    data = open(args.data, "rb").read()
    model = onnx.load(args.onnx)
    placed = []  # (offset, length, name, shape)
    covered = np.zeros(len(data), bool)
    for t in hashed_initializers(model):
        values = hashed_weight(t.name, tuple(t.dims)).tobytes()
        start = 0
        while True:
            at = data.find(values, start)
            if at < 0:
                break
            placed.append((at, len(values), t.name, list(t.dims)))
            covered[at:at + len(values)] = True
            start = at + len(values)
    # Every other byte, as runs.
    rest, runs = bytearray(), []
    edges = np.flatnonzero(np.diff(np.concatenate(
        ([True], covered, [True])).astype(np.int8)))
    for begin, end in zip(edges[0::2], edges[1::2]):
        runs.append((int(begin), int(end - begin)))
        rest += data[begin:end]
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "rest.bin"), "wb") as f:
        f.write(rest)
    doc = dict(size=len(data), sha256=hashlib.sha256(data).hexdigest(),
               weights=placed, rest=runs)
    with open(os.path.join(args.out, "recipe.json"), "w") as f:
        json.dump(doc, f)
    rebuilt = rebuild_bytes(args.out)
    if rebuilt != data:
        sys.exit(f"recipe: {args.data} rebuilt differs")
    print(f"recipe: {args.data}: {len(data)} bytes, {len(placed)} weights "
          f"hashed, {len(rest)} other bytes")


def rebuild_bytes(directory):
    doc = json.load(open(os.path.join(directory, "recipe.json")))
    rest = open(os.path.join(directory, "rest.bin"), "rb").read()
    out = bytearray(doc["size"])
    at = 0
    for begin, length in doc["rest"]:
        out[begin:begin + length] = rest[at:at + length]
        at += length
    cache = {}
    for offset, length, name, shape in doc["weights"]:
        if name not in cache:
            cache[name] = hashed_weight(name, tuple(shape)).tobytes()
        out[offset:offset + length] = cache[name]
    return bytes(out)


def rebuild(args):
    data = rebuild_bytes(args.recipe)
    doc = json.load(open(os.path.join(args.recipe, "recipe.json")))
    if hashlib.sha256(data).hexdigest() != doc["sha256"]:
        sys.exit(f"rebuild: {args.recipe}: the rebuilt data file differs "
                 "from the one the program was generated with")
    with open(args.out, "wb") as f:
        f.write(data)


#===---------------------------------------------------------------------===#
# torch
#===---------------------------------------------------------------------===#

def torch_peer(args):
    import torch
    info = json.load(open(os.path.join(args.models, "models.json")))[args.model]
    model, example, _ = build_model(args.model, info)
    dev = torch.device(args.device)
    cuda = dev.type == "cuda"

    def sync():
        if cuda:
            torch.cuda.synchronize()

    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    torch.backends.cudnn.benchmark = True
    # The exported weights' distribution (uniform in +-1/sqrt(fan_in)),
    # not the test model's N(0, 1) embedding.
    with torch.no_grad():
        for name, param in model.named_parameters():
            if param.dim() >= 2:
                param.copy_(torch.from_numpy(
                    hashed_weight(name, tuple(param.shape))))
    model = model.to(dev).train()
    batch = info["batch"]
    if args.model == "gpt":
        x = torch.randint(0, info["vocab"], (batch, info["context"]),
                          device=dev)
        labels = torch.randint(0, info["vocab"], (batch, info["context"]),
                               device=dev)
    else:
        x = torch.randn(example.shape, device=dev)
        labels = torch.randint(0, info["classes"], (batch,), device=dev)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr)
    loss_fn = torch.nn.CrossEntropyLoss()
    bf16 = args.mode.endswith("bf16")

    def forward_loss(x, labels):
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=bf16):
            logits = model(x)
            return loss_fn(logits.reshape(-1, logits.shape[-1]).float(),
                           labels.reshape(-1))

    run = torch.compile(forward_loss) if args.mode.startswith(
        "compile") else forward_loss

    def step():
        loss = run(x, labels)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    start = time.perf_counter()
    for _ in range(args.warmup):
        step()
    sync()
    warm = time.perf_counter() - start
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    times = []
    for _ in range(args.steps):
        begin = time.perf_counter()
        loss = step()
        sync()
        times.append(time.perf_counter() - begin)
    result = dict(model=args.model, mode=args.mode, batch=batch,
                  samples_per_s=batch / statistics.median(times),
                  step_ms=1e3 * statistics.median(times),
                  warmup_s=warm, loss=float(loss),
                  torch=torch.__version__, device=str(dev))
    if cuda:
        result["peak_allocated_mib"] = torch.cuda.max_memory_allocated() / 2**20
    print(json.dumps(result))
    with open(args.out, "w") as f:
        json.dump(result, f)


#===---------------------------------------------------------------------===#
# summary
#===---------------------------------------------------------------------===#

def summary(args):
    info = json.load(open(os.path.join(args.models, "models.json")))
    rows = []
    for file in sorted(os.listdir(args.results)):
        if not file.endswith(".json"):
            continue
        r = json.load(open(os.path.join(args.results, file)))
        if "model" not in r:
            continue
        kind = ("bf16" if "bf16" in r["mode"] else
                "fp32" if "notf32" in r["mode"] else "tf32")
        precision = {"bf16": "bf16", "tf32": "fp32/TF32",
                     "fp32": "fp32 (--no-tf32)"}[kind]
        mfu = ""
        peak = peak_tflops(args.gpu, kind)
        if r.get("samples_per_s") and peak:
            flops = info[r["model"]]["flops_per_sample"] * r["samples_per_s"]
            mfu = f"{100 * flops / (peak * 1e12):.1f}%"
        sps = r.get("samples_per_s")
        rows.append((r["model"], r["mode"], precision,
                     f"{sps:.1f}" if sps else r.get("status", "failed"),
                     mfu, r.get("peak_mib", ""),
                     f"{r['peak_allocated_mib']:.0f}"
                     if "peak_allocated_mib" in r else ""))
    sizes = ", ".join(
        f"{m} " + json.dumps({k: v for k, v in c.items()
                             if k not in ("params", "flops_per_sample",
                                          "input")})
        for m, c in info.items())
    lines = [f"## GPU bench: generated programs against PyTorch "
             f"({time.strftime('%Y-%m-%d')}, {args.gpu})", "",
             f"`bash scripts/gpu-bench.sh`: {sizes}. Runs: the generated "
             "program (`--local`, 1 or 2 stages, fp32 or bf16) or PyTorch "
             "(`torch-`). MFU against the part's dense peak (bf16, TF32, or "
             "fp32 for --no-tf32). Peak memory: the GPU's used memory "
             "(nvidia-smi, polled) less its idle use; PyTorch's own "
             "max_memory_allocated beside it.",
             "", "| model | run | precision | samples/s | MFU | peak MiB "
             "(nvidia-smi) | PyTorch allocated MiB |",
             "|---|---|---|---|---|---|---|"]
    rows.sort(key=lambda row: (row[0], row[1].startswith("torch"), row[1]))
    for row in rows:
        lines.append("| " + " | ".join(str(c) for c in row) + " |")
    print("\n".join(lines))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("export")
    p.add_argument("--out", required=True)
    p.add_argument("--small", action="store_true")
    p.set_defaults(fn=export)
    p = sub.add_parser("recipe")
    p.add_argument("--data", required=True)
    p.add_argument("--onnx", required=True)
    p.add_argument("--out", required=True)
    p.set_defaults(fn=recipe)
    p = sub.add_parser("rebuild")
    p.add_argument("--recipe", required=True)
    p.add_argument("--out", required=True)
    p.set_defaults(fn=rebuild)
    p = sub.add_parser("torch")
    p.add_argument("--model", required=True, choices=sorted(SIZES))
    p.add_argument("--models", required=True)
    p.add_argument("--mode", required=True,
                   choices=["eager-fp32", "eager-bf16", "compile-bf16"])
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--device", default="cuda",
                   help="cuda; cpu to try the peer without a GPU")
    p.add_argument("--out", required=True)
    p.set_defaults(fn=torch_peer)
    p = sub.add_parser("summary")
    p.add_argument("--results", required=True)
    p.add_argument("--models", required=True)
    p.add_argument("--gpu", required=True)
    p.set_defaults(fn=summary)
    args = parser.parse_args()
    args.fn(args)


if __name__ == "__main__":
    main()
