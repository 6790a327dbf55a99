#!/usr/bin/env python3
"""Writes a GPT-shaped ONNX model whose weights are external data that is
never written: a model to plan with `pipeline-opt --shape-only`, at any size
(GPT-3 175B's 96 layers, d_model 12288, 96 heads, sequence 2048 by default)
without materialising its parameters.

Every float initializer of more than one element (and the causal mask) is a
TensorProto with data_location EXTERNAL pointing into `--data-file` (default
`weights.bin`, not created) at its offset; the small shape constants are
inline. The graph is the TinyGPT block of make_models.py (pre-LayerNorm,
separate Q, K, V projections, causal mask by Where, GELU through Erf,
embedding tied to the output projection), opset 17, training mode (no
dropout), with the model's `pp.trainable` metadata naming the parameters.

Usage: /usr/bin/python3 python/make_gpt_shape.py -o gpt3.onnx
         [--layers 96] [--d-model 12288] [--heads 96] [--seq 2048]
         [--vocab 50257] [--batch 1] [--data-file weights.bin]
         [--cluster-json cluster-1024.json] [--workers 64]
"""
import argparse
import json
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

FLOAT = TensorProto.FLOAT


class Builder:
    def __init__(self, data_file):
        self.nodes, self.inits, self.trainable = [], [], []
        self.data_file, self.offset, self.count = data_file, 0, 0

    def external(self, name, shape, dtype=FLOAT, trainable=True):
        """An initializer whose data is in the (absent) external file."""
        t = TensorProto()
        t.name, t.data_type = name, dtype
        t.dims.extend(shape)
        t.data_location = TensorProto.EXTERNAL
        length = int(np.prod(shape)) * (4 if dtype == FLOAT else 1)
        for key, value in (("location", self.data_file),
                           ("offset", str(self.offset)),
                           ("length", str(length))):
            entry = t.external_data.add()
            entry.key, entry.value = key, value
        self.offset += length
        self.inits.append(t)
        if trainable:
            self.trainable.append(name)
        return name

    def const(self, name, array):
        self.inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def op(self, op_type, inputs, name, **attrs):
        self.count += 1
        out = name + "_output"
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=name,
                                           **attrs))
        return out


def build(layers, d, heads, seq, vocab, batch, data_file):
    b = Builder(data_file)
    hd = d // heads
    wte = b.external("wte", [vocab, d])
    wpe = b.external("wpe", [seq, d])
    mask = b.external("mask", [1, 1, seq, seq], TensorProto.BOOL,
                      trainable=False)
    pos = b.const("pos", np.arange(seq, dtype=np.int64))
    heads_shape = b.const("heads_shape", np.array([batch, seq, heads, hd]))
    model_shape = b.const("model_shape", np.array([batch, seq, d]))
    scale = b.const("scale", np.array(hd ** 0.5, dtype=np.float32))
    neg_inf = b.const("neg_inf", np.array(-np.inf, dtype=np.float32))
    half = b.const("half", np.array(0.5, dtype=np.float32))
    one = b.const("one", np.array(1.0, dtype=np.float32))
    rsqrt2 = b.const("rsqrt2", np.array(2 ** -0.5, dtype=np.float32))

    x = b.op("Add", [b.op("Gather", [wte, "tokens"], "tok_emb"),
                     b.op("Gather", [wpe, pos], "pos_emb")], "emb")

    def linear(x, name, n_in, n_out):
        w = b.external(f"{name}.weight", [n_in, n_out])
        bias = b.external(f"{name}.bias", [n_out])
        return b.op("Add", [b.op("MatMul", [x, w], f"{name}/MatMul"), bias],
                    f"{name}/Add")

    def layer_norm(x, name):
        return b.op("LayerNormalization",
                    [x, b.external(f"{name}.weight", [d]),
                     b.external(f"{name}.bias", [d])], name, axis=-1,
                    epsilon=1e-5)

    for i in range(layers):
        p = f"h{i}"
        h = layer_norm(x, f"{p}.ln1")
        qkv = []
        for part in ("q", "k", "v"):
            y = linear(h, f"{p}.attn.{part}", d, d)
            y = b.op("Reshape", [y, heads_shape], f"{p}.attn.{part}/Reshape")
            qkv.append(b.op("Transpose", [y], f"{p}.attn.{part}/Transpose",
                            perm=[0, 2, 3, 1] if part == "k"
                            else [0, 2, 1, 3]))
        q, k, v = qkv
        s = b.op("Div", [b.op("MatMul", [q, k], f"{p}.attn/scores"), scale],
                 f"{p}.attn/scale")
        s = b.op("Where", [mask, neg_inf, s], f"{p}.attn/mask")
        a = b.op("Softmax", [s], f"{p}.attn/softmax", axis=-1)
        a = b.op("MatMul", [a, v], f"{p}.attn/context")
        a = b.op("Transpose", [a], f"{p}.attn/merge", perm=[0, 2, 1, 3])
        a = b.op("Reshape", [a, model_shape], f"{p}.attn/merge/Reshape")
        x = b.op("Add", [x, linear(a, f"{p}.attn.out", d, d)],
                 f"{p}/residual1")
        h = linear(layer_norm(x, f"{p}.ln2"), f"{p}.mlp.fc", d, 4 * d)
        erf = b.op("Erf", [b.op("Mul", [h, rsqrt2], f"{p}.mlp.gelu/scale")],
                   f"{p}.mlp.gelu/Erf")
        g = b.op("Mul", [b.op("Mul", [h, half], f"{p}.mlp.gelu/half"),
                         b.op("Add", [erf, one], f"{p}.mlp.gelu/one")],
                 f"{p}.mlp.gelu")
        x = b.op("Add", [x, linear(g, f"{p}.mlp.proj", 4 * d, d)],
                 f"{p}/residual2")
    x = layer_norm(x, "ln_f")
    wte_t = b.op("Transpose", [wte], "lm_head/Transpose", perm=[1, 0])
    logits = b.op("MatMul", [x, wte_t], "lm_head")
    b.nodes[-1].output[0] = "logits"

    graph = helper.make_graph(
        b.nodes, "gpt_shape",
        [helper.make_tensor_value_info("tokens", TensorProto.INT64,
                                       [batch, seq])],
        [helper.make_tensor_value_info("logits", FLOAT,
                                       [batch, seq, vocab])],
        initializer=b.inits)
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17)],
        producer_name="make_gpt_shape.py")
    helper.set_model_props(model, {"pp.trainable": json.dumps(b.trainable)})
    return model, b.offset


def cluster_json(path, workers=64):
    """A 1,024-GPU cluster of three kinds, 8 GPUs per node: 48 nodes of
    H100, 48 of A100-80, 32 of V100-32, and `workers` virtual workers (a
    divisor of 128) of 1024 / `workers` GPUs each (64 workers: 6 H100,
    6 A100-80, 4 V100-32 in that order; each kind's GPUs in node order)."""
    if 128 % workers:
        raise SystemExit(f"--workers {workers} does not divide 128")
    kinds = tuple((kind, nodes, nodes * 8 // workers)
                  for kind, nodes in (("H100", 48), ("A100-80", 48),
                                      ("V100-32", 32)))
    nodes, pools = [], []
    for kind, count, _ in kinds:
        pool = []
        for _ in range(count):
            name = f"n{len(nodes)}"
            nodes.append({"name": name,
                          "devices": [{"kind": kind, "count": 8}]})
            pool += [f"{name}/gpu{g}" for g in range(8)]
        pools.append(pool)
    vws = [[] for _ in range(workers)]
    for (kind, _, per_vw), pool in zip(kinds, pools):
        for w in range(workers):
            vws[w] += pool[w * per_vw:(w + 1) * per_vw]
    cluster = {"nodes": nodes,
               "links": {"intra_node": {"bandwidth": "300GB/s",
                                        "latency": "2us"},
                         "inter_node": {"bandwidth": "25GB/s",
                                        "latency": "5us"}},
               "virtual_workers": vws}
    with open(path, "w") as f:
        json.dump(cluster, f, indent=1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--layers", type=int, default=96)
    ap.add_argument("--d-model", type=int, default=12288)
    ap.add_argument("--heads", type=int, default=96)
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--data-file", default="weights.bin")
    ap.add_argument("--cluster-json", metavar="PATH",
                    help="also write a 1,024-GPU cluster of three kinds "
                    "with --workers virtual workers")
    ap.add_argument("--workers", type=int, default=64,
                    help="virtual workers of the cluster (a divisor of 128; "
                    "default 64 of 16 GPUs)")
    args = ap.parse_args()
    if args.cluster_json:
        cluster_json(args.cluster_json, args.workers)
    if args.d_model % args.heads:
        ap.error("--d-model must be a multiple of --heads")
    model, data_bytes = build(args.layers, args.d_model, args.heads, args.seq,
                              args.vocab, args.batch, args.data_file)
    onnx.save(model, args.output)
    params = sum(int(np.prod(t.dims)) for t in model.graph.initializer
                 if t.data_type == FLOAT and len(t.dims) > 0)
    print(f"{args.output}: {len(model.graph.node)} nodes, {params:,} float "
          f"parameters, {data_bytes:,} bytes of external data in "
          f"'{args.data_file}' (not written)")


if __name__ == "__main__":
    main()
