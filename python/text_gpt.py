#!/usr/bin/env python3
"""The byte-level GPT example's data, model and evaluation
(scripts/gpt-demo.sh).

    text_gpt.py data --out DIR [--context 64] [--micro-batch 8]
    text_gpt.py eval --model trained.onnx --data DIR/heldout

data: the text is Python's standard library as Debian ships it: every
`/usr/lib/python3.N/*.py` of the first such directory (python3-minimal's
and libpython3.N-stdlib's modules, sorted by name), concatenated as bytes
(4.7 MB for Debian 12's Python 3.11). Tokens are the bytes (vocabulary
256). Samples are the non-overlapping windows of context + 1 bytes: the
input is the first `context`, the labels the same window shifted by one
(next-byte prediction). The last 5% of the windows (the end of the
alphabet of modules) are held out and their first --heldout-max (1024)
are kept for evaluation; the rest train. Writes DIR/train/{tokens,
labels}.npy and DIR/heldout/{tokens,labels}.npy (int64 [N, context]) and
DIR/model.onnx: make_models.py's TinyGPT (pre-LayerNorm blocks, causal
attention, GELU MLP, output projection tied to the token embedding) at
vocabulary 256, context 64, d_model 64, 2 heads, 2 blocks, no dropout,
torch.manual_seed(0), the embeddings drawn from N(0, 0.02) as GPT-2's,
with a symbolic batch dim.

eval: runs the trained model (train --save-onnx) on the held-out windows
with pp-interpret and prints the mean next-byte cross-entropy (nats) and
the perplexity exp(loss); with --log (train's JSON log of a run with
--eval-data), also the run's last evaluation and whether the two agree
(relative error 1e-4: the same weights, other kernels' sums); for scale,
the loss of the training text's byte frequencies on the same bytes.
"""
import argparse
import glob
import math
import os
import subprocess
import sys
import tempfile
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
HELD_OUT_FRACTION = 0.05


def corpus():
    dirs = sorted(d for d in glob.glob("/usr/lib/python3.*")
                  if os.path.isdir(d))
    if not dirs:
        sys.exit("text_gpt.py: no /usr/lib/python3.N directory (Debian's "
                 "python3-minimal installs one)")
    files = sorted(glob.glob(os.path.join(dirs[0], "*.py")))
    data = b"".join(open(f, "rb").read() for f in files)
    return dirs[0], len(files), np.frombuffer(data, dtype=np.uint8)


def export_model(path, context, micro_batch):
    import torch
    sys.path.insert(0, HERE)
    import make_models
    from pp_export_torch import export
    warnings.filterwarnings("ignore")
    torch.manual_seed(0)
    model = make_models.TinyGPT(vocab=256, context=context, d_model=64,
                                n_head=2, n_layer=2, dropout=0.0)
    # GPT-2's initialisation of the embeddings (N(0, 0.02)): with the
    # output projection tied to the token embedding, nn.Embedding's N(0, 1)
    # starts at a loss of 33 nats instead of ln(256) = 5.5.
    with torch.no_grad():
        torch.nn.init.normal_(model.tok_emb.weight, std=0.02)
        torch.nn.init.normal_(model.pos_emb.weight, std=0.02)
    model.train()
    tokens = torch.zeros(micro_batch, context, dtype=torch.int64)
    export(model, (tokens,), path, input_names=["tokens"],
           output_names=["logits"],
           dynamic_axes={"tokens": {0: "batch"}, "logits": {0: "batch"}})
    return sum(p.numel() for p in model.parameters())


def data(args):
    where, files, text = corpus()
    window = args.context + 1
    count = len(text) // window
    windows = text[:count * window].reshape(count, window).astype(np.int64)
    held = max(1, int(count * HELD_OUT_FRACTION))
    parts = {"train": windows[:count - held],
             "heldout": windows[count - held:][:args.heldout_max]}
    for name, w in parts.items():
        os.makedirs(os.path.join(args.out, name), exist_ok=True)
        np.save(os.path.join(args.out, name, "tokens.npy"),
                np.ascontiguousarray(w[:, :-1]))
        np.save(os.path.join(args.out, name, "labels.npy"),
                np.ascontiguousarray(w[:, 1:]))
    params = export_model(os.path.join(args.out, "model.onnx"),
                          args.context, args.micro_batch)
    print(f"text: {len(text)} bytes of {files} files in {where}; "
          f"{count} windows of {window} bytes: {len(parts['train'])} train, "
          f"{held} held out (the last {HELD_OUT_FRACTION:.0%}; the first "
          f"{len(parts['heldout'])} evaluated); model {params} parameters")


def evaluate(args):
    x = np.load(os.path.join(args.data, "tokens.npy"))
    y = np.load(os.path.join(args.data, "labels.npy"))
    with tempfile.TemporaryDirectory() as work:
        out = os.path.join(work, "out")
        proc = subprocess.run(
            [args.pp_interpret, args.model, f"--batch-size={len(x)}",
             f"--input=tokens={os.path.join(args.data, 'tokens.npy')}",
             f"--output-dir={out}"], capture_output=True, text=True)
        if proc.returncode != 0:
            sys.exit(f"text_gpt.py: pp-interpret failed on {args.model}:\n"
                     f"{proc.stderr.strip()}")
        logits = np.load(os.path.join(out, "logits.npy")).astype(np.float64)
    z = logits - logits.max(axis=-1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=-1, keepdims=True))
    loss = float(-np.take_along_axis(logp, y[..., None], axis=-1).mean())
    print(f"held-out loss {loss:.4f} nats/byte, perplexity "
          f"{math.exp(loss):.3f} ({x.size} bytes; the --save-onnx "
          f"weights run by pp-interpret)")
    if args.log:
        import json
        records = [json.loads(line) for line in open(args.log)]
        last = [r for r in records if "eval_loss" in r]
        if not last:
            sys.exit(f"text_gpt.py: {args.log} has no evaluation record")
        ours = last[-1]["eval_loss"]
        error = abs(ours - loss) / loss
        print(f"train's last evaluation (after step {last[-1]['step']}): "
              f"loss {ours:.4f}, perplexity "
              f"{last[-1]['eval_perplexity']:.3f}; equal to pp-interpret's: "
              f"{'yes' if error <= 1e-4 else 'NO'} (relative error "
              f"{error:.1e})")
        if error > 1e-4:
            sys.exit(1)
    # For scale: the byte frequencies of the training text as the model
    # (add-one smoothed), on the same held-out bytes.
    train_labels = os.path.join(os.path.dirname(os.path.abspath(
        args.data)), "train", "labels.npy")
    if os.path.exists(train_labels):
        counts = np.bincount(np.load(train_labels, mmap_mode="r").ravel(),
                             minlength=256) + 1.0
        unigram = float(-np.log(counts / counts.sum())[y].mean())
        print(f"for scale, byte frequencies alone: {unigram:.4f} "
              f"nats/byte, perplexity {math.exp(unigram):.3f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("data")
    d.add_argument("--out", required=True)
    d.add_argument("--context", type=int, default=64)
    d.add_argument("--micro-batch", type=int, default=8)
    d.add_argument("--heldout-max", type=int, default=1024)
    e = sub.add_parser("eval")
    e.add_argument("--model", required=True)
    e.add_argument("--data", required=True)
    e.add_argument("--pp-interpret", default="pp-interpret")
    e.add_argument("--log", help="train's JSON log: check its last "
                   "evaluation against pp-interpret's")
    args = parser.parse_args()
    data(args) if args.command == "data" else evaluate(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
