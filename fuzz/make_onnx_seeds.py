"""Writes the hand-made seeds of fuzz/corpus/onnx: tiny models with
initializers (trainable weights, BatchNorm state, int64 shape constants), a
symbolic batch dim, torch's Shape->Gather->Unsqueeze->Concat->Reshape
sub-graph, and an opset-11 model (the version converter's path). The other
seeds there are ONNX's own node-test models (libonnx-testdata).

  /usr/bin/python3 fuzz/make_onnx_seeds.py fuzz/corpus/onnx
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def init(name, shape, dtype=np.float32):
    rng = np.random.default_rng(len(name))
    return numpy_helper.from_array(rng.standard_normal(shape).astype(dtype), name)


def const(name, values):
    return numpy_helper.from_array(np.array(values, dtype=np.int64), name)


def mlp(opset):
    nodes = [
        helper.make_node("Flatten", ["input"], ["f"], axis=1, name="flatten"),
        helper.make_node("Gemm", ["f", "w1", "b1"], ["h"], transB=1, name="fc1"),
        helper.make_node("Relu", ["h"], ["r"], name="relu"),
        helper.make_node("Gemm", ["r", "w2", "b2"], ["logits"], transB=1,
                         name="fc2"),
    ]
    graph = helper.make_graph(
        nodes, "mlp",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT,
                                       ["batch", 1, 2, 2])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT,
                                       ["batch", 3])],
        [init("w1", (4, 4)), init("b1", (4,)), init("w2", (3, 4)),
         init("b2", (3,))])
    return helper.make_model(graph,
                             opset_imports=[helper.make_opsetid("", opset)])


def convnet():
    nodes = [
        helper.make_node("Conv", ["input", "cw", "cb"], ["c"], pads=[1, 1, 1, 1],
                         kernel_shape=[3, 3], name="conv"),
        helper.make_node("BatchNormalization",
                         ["c", "scale", "bias", "mean", "var"],
                         ["bn", "rm", "rv"], training_mode=1, name="bn"),
        helper.make_node("Relu", ["bn"], ["r"]),
        helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2],
                         strides=[2, 2]),
        helper.make_node("Add", ["p", "p"], ["s"], name="residual"),
        helper.make_node("GlobalAveragePool", ["s"], ["g"]),
        helper.make_node("Shape", ["g"], ["shape"]),
        helper.make_node("Gather", ["shape", "zero"], ["n"], axis=0),
        helper.make_node("Unsqueeze", ["n", "zeros"], ["n1"]),
        helper.make_node("Concat", ["n1", "minus1"], ["newshape"], axis=0),
        helper.make_node("Reshape", ["g", "newshape"], ["flat"]),
        helper.make_node("Dropout", ["flat", "ratio", "training"], ["d"]),
        helper.make_node("MatMul", ["d", "fw"], ["logits"]),
    ]
    inits = [init("cw", (2, 1, 3, 3)), init("cb", (2,)), init("scale", (2,)),
             init("bias", (2,)), init("mean", (2,)), init("var", (2,)),
             init("fw", (2, 3)), const("zero", 0), const("zeros", [0]),
             const("minus1", [-1]),
             numpy_helper.from_array(np.array(0.5, np.float32), "ratio"),
             numpy_helper.from_array(np.array(True), "training")]
    graph = helper.make_graph(
        nodes, "convnet",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT,
                                       [2, 1, 4, 4])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [2, 3])],
        inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def attention():
    nodes = [
        helper.make_node("Gather", ["emb", "tokens"], ["x"], axis=0),
        helper.make_node("LayerNormalization", ["x", "g", "b"], ["n"], axis=-1),
        helper.make_node("MatMul", ["n", "wq"], ["q"]),
        helper.make_node("Transpose", ["q"], ["qt"], perm=[0, 2, 1]),
        helper.make_node("MatMul", ["q", "qt"], ["scores"]),
        helper.make_node("Where", ["mask", "scores", "neg"], ["masked"]),
        helper.make_node("Softmax", ["masked"], ["att"], axis=-1),
        helper.make_node("MatMul", ["att", "n"], ["ctx"]),
        helper.make_node("Erf", ["ctx"], ["e"]),
        helper.make_node("ReduceMean", ["e"], ["logits"], axes=[1],
                         keepdims=0),
    ]
    inits = [init("emb", (5, 4)), init("g", (4,)), init("b", (4,)),
             init("wq", (4, 4)),
             numpy_helper.from_array(np.tril(np.ones((3, 3), bool)), "mask"),
             numpy_helper.from_array(np.array(-1e9, np.float32), "neg")]
    graph = helper.make_graph(
        nodes, "attention",
        [helper.make_tensor_value_info("tokens", TensorProto.INT64, [2, 3])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [2, 4])],
        inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    models = {"pp-mlp.onnx": mlp(17), "pp-mlp-opset11.onnx": mlp(11),
              "pp-convnet.onnx": convnet(), "pp-attention.onnx": attention()}
    for name, model in models.items():
        onnx.checker.check_model(model)
        onnx.save(model, os.path.join(out, name))
        print(name, os.path.getsize(os.path.join(out, name)), "bytes")


if __name__ == "__main__":
    main()
