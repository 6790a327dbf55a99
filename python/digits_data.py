#!/usr/bin/env python3
"""The digits demo's data set and model (scripts/digits-demo.sh).

    digits_data.py --out DIR [--micro-batch 8]

Data: scikit-learn's digits (sklearn.datasets.load_digits: 1797 grey 8x8
images of the digits 0-9, pixel values 0..16, in the order scikit-learn
ships them). The split is fixed: every sixth image (index % 6 == 5, 299
images, 25..37 per class) is held out, the other 1498 train. (The last
297 images as the held-out set are a harder, shifted set: the same
recipe reaches 93-95% there depending on the shuffle seed, against 97-98%
on the interleaved split, measured with python/digits_torch.py.) Images
are stored as float32 scaled to [0, 1] (value / 16), shape [N, 1, 8, 8]
(the runtime converts uint8 files without scaling, so floats keep the
model free of a division); labels as int64 [N]. Writes
DIR/train/{input,labels}.npy and DIR/heldout/{input,labels}.npy (the
names are the program's inputs, so `train --data DIR/train` finds them).

Model (DigitsCNN): Conv 1->16 3x3 (pad 1), ReLU, Conv 16->32 3x3 (pad 1),
ReLU, MaxPool 2x2 (8x8 -> 4x4), Flatten, Linear 512->64, ReLU, Linear
64->10: 38282 weights. The planner cuts it after the convolutions (the
head is what makes the second stage more than the loss).
Exported once with torch.manual_seed(SEED) to DIR/model.onnx (opset 17,
training mode, no constant folding, pp.trainable metadata, input `input`
with a symbolic batch dim, output `logits`): these are the initial weights
of both our program and the PyTorch reference (python/digits_torch.py loads
them back from the file). The loss is not in the model: `--pp-compile`
adds softmax cross-entropy (mean over the batch) and a `labels` input.
"""
import argparse
import json
import os
import sys
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SAMPLES = 1797
EVERY = 6               # image i is held out when i % EVERY == EVERY - 1
SEED = 0                # torch.manual_seed of the initial weights


def load_split():
    """(train_x, train_y, heldout_x, heldout_y): float32 [N, 1, 8, 8] in
    [0, 1] and int64 [N]."""
    from sklearn.datasets import load_digits
    digits = load_digits()
    x = (digits.images.astype(np.float32) / 16.0).reshape(-1, 1, 8, 8)
    y = digits.target.astype(np.int64)
    if len(x) != SAMPLES:
        sys.exit(f"digits_data.py: load_digits gave {len(x)} images, "
                 f"expected {SAMPLES}")
    held = np.arange(SAMPLES) % EVERY == EVERY - 1
    return x[~held], y[~held], x[held], y[held]


def make_model():
    import torch.nn as nn

    class DigitsCNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
            self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
            self.fc1 = nn.Linear(32 * 4 * 4, 64)
            self.fc2 = nn.Linear(64, 10)
            self.relu = nn.ReLU()
            self.pool = nn.MaxPool2d(2)
            self.flatten = nn.Flatten()

        def forward(self, x):
            x = self.relu(self.conv1(x))
            x = self.pool(self.relu(self.conv2(x)))
            return self.fc2(self.relu(self.fc1(self.flatten(x))))

    return DigitsCNN()


def load_onnx_weights(model, path):
    """Copies the initializers of ONNX file `path` into `model`'s
    parameters of the same names (every one must be there)."""
    import onnx
    import torch
    from onnx import numpy_helper
    weights = {t.name: numpy_helper.to_array(t)
               for t in onnx.load(path).graph.initializer}
    state = model.state_dict()
    missing = [k for k in state if k not in weights]
    if missing:
        sys.exit(f"{path}: no initializer for {', '.join(missing)}")
    with torch.no_grad():
        for key, value in state.items():
            value.copy_(torch.from_numpy(np.array(weights[key])))
    return model


def export_model(path, micro_batch):
    import torch
    sys.path.insert(0, HERE)
    from pp_export_torch import export
    warnings.filterwarnings("ignore")
    torch.manual_seed(SEED)
    model = make_model()
    model.train()
    example = torch.zeros(micro_batch, 1, 8, 8)
    export(model, (example,), path, input_names=["input"],
           output_names=["logits"],
           dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}})


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--micro-batch", type=int, default=8,
                        help="the example batch of the export (the "
                        "compiler's --batch-size sets the one it trains)")
    args = parser.parse_args()
    for part in ("train", "heldout"):
        os.makedirs(os.path.join(args.out, part), exist_ok=True)
    tx, ty, hx, hy = load_split()
    for part, x, y in (("train", tx, ty), ("heldout", hx, hy)):
        np.save(os.path.join(args.out, part, "input.npy"), x)
        np.save(os.path.join(args.out, part, "labels.npy"), y)
    export_model(os.path.join(args.out, "model.onnx"), args.micro_batch)
    with open(os.path.join(args.out, "split.json"), "w") as f:
        json.dump({"heldout": f"index % {EVERY} == {EVERY - 1}",
                   "train": len(tx), "heldout_images": len(hx),
                   "scale": "value / 16, float32", "seed": SEED}, f)
    tc, hc = np.bincount(ty, minlength=10), np.bincount(hy, minlength=10)
    print(f"digits: {len(tx)} training images ({tc.min()}..{tc.max()} per "
          f"class), {len(hx)} held out (every {EVERY}th: index % {EVERY} == "
          f"{EVERY - 1}; {hc.min()}..{hc.max()} per class); model "
          f"{args.out}/model.onnx")


if __name__ == "__main__":
    main()
