#!/usr/bin/env python3
"""Exports a torch.nn.Module to ONNX for pipeline-opt, with its trainable set.

    from pp_export_torch import export
    export(model, (example,), "model.onnx", input_names=["input"])

Runs torch.onnx.export in training mode without constant folding (so every
parameter stays an initializer of its own name), then records in the model's
metadata which initializers are PyTorch parameters with requires_grad
(`pp.trainable`) and which are buffers (`pp.buffers`), as JSON arrays. The
importer trains exactly the `pp.trainable` ones: a registered buffer (a
causal mask, position ids) or a frozen parameter stays constant, as in
PyTorch.

As a script, exports one of make_models.py's models:
    pp_export_torch.py --model mlp --out model.onnx
"""
import argparse
import json
import os
import sys

import onnx
import torch

TRAINABLE_KEY = "pp.trainable"
BUFFERS_KEY = "pp.buffers"


def export(model, args, path, opset_version=17, **kwargs):
    """torch.onnx.export(model, args, path, ...) plus the trainable set."""
    kwargs.setdefault("training", torch.onnx.TrainingMode.TRAINING)
    kwargs.setdefault("do_constant_folding", False)
    torch.onnx.export(model, args, path, opset_version=opset_version, **kwargs)
    proto = onnx.load(path)
    names = {init.name for init in proto.graph.initializer}
    trainable = [n for n, p in model.named_parameters()
                 if p.requires_grad and n in names]
    buffers = [n for n, _ in model.named_buffers() if n in names]
    # A parameter that torch exported under another name (deduplicated
    # equal tensors keep one name) is absent here: say so rather than
    # freeze it silently.
    missing = [n for n, p in model.named_parameters()
               if p.requires_grad and n not in names]
    if missing:
        print(f"pp_export_torch: parameters not exported under their own "
              f"name (torch merged or renamed them): {', '.join(missing)}",
              file=sys.stderr)
    for key, value in ((TRAINABLE_KEY, trainable), (BUFFERS_KEY, buffers)):
        entry = next((p for p in proto.metadata_props if p.key == key), None)
        if entry is None:
            entry = proto.metadata_props.add()
            entry.key = key
        entry.value = json.dumps(value)
    onnx.save(proto, path)
    return trainable, buffers


def main():
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import make_models  # noqa: E402
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True,
                        choices=sorted(make_models.MODELS))
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    torch.manual_seed(0)
    model, example, input_name, _ = make_models.MODELS[args.model]()
    model.train()
    trainable, buffers = export(model, (example,), args.out,
                                input_names=[input_name],
                                output_names=["logits"])
    print(f"{args.out}: {len(trainable)} trainable, {len(buffers)} buffers")


if __name__ == "__main__":
    main()
