"""Build small ONNX models that exercise the pipeline-opt importer.

Each case is one .onnx file written with onnx.helper: bad inputs the importer
must reject with a clear error (unsupported op, symbolic dims, non-constant
shape inputs, type mismatches, undefined inputs, bad attributes, unsupported
opsets, malformed tensor data) and small well-formed graphs whose import has
defined semantics (schema defaults, initializer kinds, folding of shape
sub-graphs, locations, the version converter for old opsets).

The models are built from fixed values only (no randomness), so the output is
deterministic, and the whole set is written in well under a second. The
files are not run through onnx.checker here: several cases are meant to fail
the importer's own run of it.

Besides the cases, DIR gets `empty.onnx` (0 bytes) and `text.onnx` (a text
file), and with `--half-of FILE...` a copy of each FILE cut to half its size,
as DIR/<name>.half.onnx (truncated-model tests).

Cases under "Known importer bugs" reproduce problems the importer does not
handle yet; the lit tests do not use them.

TORCH_CASES (a ViT's class token) are exported from PyTorch: slower, so they
are written only when --cases names them.

Usage:
  /usr/bin/python3 python/make_import_cases.py --out DIR [--cases a,b,...]
      [--half-of FILE...]
"""

import argparse
import os

import numpy as np
from onnx import TensorProto, helper, numpy_helper

FLOAT = TensorProto.FLOAT
INT32 = TensorProto.INT32
INT64 = TensorProto.INT64


def tensor(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def const(name, array):
    return numpy_helper.from_array(np.asarray(array), name)


def model(nodes, inputs, outputs, initializers=(), opset=17, name="case",
          domains=()):
    graph = helper.make_graph(list(nodes), name, list(inputs), list(outputs),
                              initializer=list(initializers))
    opsets = [helper.make_opsetid("", opset)]
    opsets += [helper.make_opsetid(d, v) for d, v in domains]
    m = helper.make_model(graph, opset_imports=opsets,
                          producer_name="make_import_cases")
    # IR version 8 goes with opsets up to 17 (and 18 for the opset18 case);
    # older opsets get the IR version of their time.
    m.ir_version = 6 if opset <= 11 else 8
    return m


def raw_tensor(name, elem, dims, raw):
    """A TensorProto with the given raw_data, however many bytes it holds
    (helper.make_tensor checks the size)."""
    t = TensorProto()
    t.name, t.data_type = name, elem
    t.dims.extend(dims)
    t.raw_data = raw
    return t


def farange(shape, scale=0.125):
    """Deterministic float32 values of the given shape."""
    n = int(np.prod(shape)) if shape else 1
    return (np.arange(n, dtype=np.float32) * scale - 1.0).reshape(shape)


# --------------------------------------------------------------------------
# Bad input: errors.
# --------------------------------------------------------------------------

def unsupported_op():
    # ReduceProd is a valid opset-17 op with no onnx dialect equivalent.
    node = helper.make_node("ReduceProd", ["A"], ["Y"], name="my_prod",
                            axes=[1], keepdims=0)
    return model([node], [tensor("A", FLOAT, [2, 3])],
                 [tensor("Y", FLOAT, [2])])


def custom_domain():
    # A node of a non-default domain (imported by the model, so the checker
    # accepts it).
    node = helper.make_node("FusedGelu", ["X"], ["Y"], name="my_fused",
                            domain="com.example")
    return model([node], [tensor("X", FLOAT, [2, 3])], [tensor("Y", FLOAT, [2, 3])],
                 domains=[("com.example", 1)])


def dynamic_batch():
    # Symbolic batch dim "N": needs --batch-size.
    nodes = [helper.make_node("Relu", ["X"], ["H"], name="relu"),
             helper.make_node("Flatten", ["H"], ["Y"], name="flatten")]
    return model(nodes, [tensor("X", FLOAT, ["N", 4, 5])],
                 [tensor("Y", FLOAT, ["N", 20])])


def dynamic_inner():
    # A symbolic non-batch dim: --batch-size does not help.
    node = helper.make_node("Relu", ["X"], ["Y"], name="relu")
    return model([node], [tensor("X", FLOAT, ["N", "S", 4])],
                 [tensor("Y", FLOAT, ["N", "S", 4])])


def unknown_dim():
    # A dim with neither dim_value nor dim_param.
    node = helper.make_node("Relu", ["X"], ["Y"], name="relu")
    return model([node], [tensor("X", FLOAT, [2, None])],
                 [tensor("Y", FLOAT, [2, None])])


def no_shape_input():
    # A graph input without any shape. (ONNX's checker rejects it first,
    # with a message that does not name the input.)
    node = helper.make_node("Relu", ["X"], ["Y"], name="relu")
    x = helper.make_tensor_value_info("X", FLOAT, None)
    return model([node], [x], [tensor("Y", FLOAT, [2])])


def string_input():
    # An element type the onnx dialect does not represent.
    node = helper.make_node("Identity", ["S"], ["Y"], name="ident")
    return model([node], [tensor("S", TensorProto.STRING, [2])],
                 [tensor("Y", TensorProto.STRING, [2])])


def sequence_input():
    # A graph input that is a sequence, not a tensor.
    seq = helper.make_tensor_sequence_value_info("Seq", FLOAT, [2])
    node = helper.make_node("SequenceLength", ["Seq"], ["Y"], name="seqlen")
    return model([node], [seq], [tensor("Y", INT64, [])])


def reshape_dynamic_shape():
    # Reshape whose target shape is a graph input, not a constant.
    node = helper.make_node("Reshape", ["X", "target"], ["Y"], name="my_reshape")
    return model([node], [tensor("X", FLOAT, [2, 6]), tensor("target", INT64, [2])],
                 [tensor("Y", FLOAT, [3, 4])])


def relu_int():
    # ONNX Relu accepts int32 (the checker does not look at types); the
    # onnx dialect's Relu takes float tensors only.
    node = helper.make_node("Relu", ["X"], ["Y"], name="int_relu")
    return model([node], [tensor("X", INT32, [2, 3])], [tensor("Y", INT32, [2, 3])])


def matmul_mismatch():
    # Contraction dims 3 vs 4.
    node = helper.make_node("MatMul", ["A", "B"], ["Y"], name="bad_matmul")
    return model([node], [tensor("A", FLOAT, [2, 3]), tensor("B", FLOAT, [4, 5])],
                 [tensor("Y", FLOAT, [2, 5])])


def gemm_bad_bias():
    # Gemm's C (bias) of size 7 does not broadcast to the [2, 5] result.
    node = helper.make_node("Gemm", ["A", "B", "C"], ["Y"], name="bad_gemm",
                            transB=1)
    return model([node],
                 [tensor("A", FLOAT, [2, 3]), tensor("B", FLOAT, [5, 3]),
                  tensor("C", FLOAT, [7])],
                 [tensor("Y", FLOAT, [2, 5])])


def broadcast_mismatch():
    # Add of [2, 3] and [4]: shapes do not broadcast.
    node = helper.make_node("Add", ["A", "B"], ["Y"], name="bad_add")
    return model([node], [tensor("A", FLOAT, [2, 3]), tensor("B", FLOAT, [4])],
                 [tensor("Y", FLOAT, [2, 3])])


def add_mixed_types():
    # Add of float and int64: invalid ONNX (A and B share type T), which the
    # checker does not see because it does not infer types.
    node = helper.make_node("Add", ["A", "B"], ["Y"], name="mixed_add")
    return model([node], [tensor("A", FLOAT, [2, 3]), tensor("B", INT64, [2, 3])],
                 [tensor("Y", FLOAT, [2, 3])])


def output_type_mismatch():
    # The graph output is declared int64 but Relu computes f32.
    node = helper.make_node("Relu", ["X"], ["Y"], name="relu")
    return model([node], [tensor("X", FLOAT, [2, 3])], [tensor("Y", INT64, [2, 3])])


def missing_input():
    # "ghost" is not a graph input, an initializer or a node output.
    nodes = [helper.make_node("Relu", ["X"], ["H"], name="relu"),
             helper.make_node("Add", ["H", "ghost"], ["Y"], name="reader")]
    return model(nodes, [tensor("X", FLOAT, [2, 3])], [tensor("Y", FLOAT, [2, 3])])


def missing_output():
    # The graph output "Z" is not computed by any node.
    node = helper.make_node("Relu", ["X"], ["Y"], name="relu")
    return model([node], [tensor("X", FLOAT, [2, 3])], [tensor("Z", FLOAT, [2, 3])])


def bad_attribute_type():
    # Conv's `group` given as a FLOAT attribute instead of an INT.
    node = helper.make_node("Conv", ["X", "W"], ["Y"], name="bad_conv")
    node.attribute.append(helper.make_attribute("group", 1.0))
    return model([node], [tensor("X", FLOAT, [1, 3, 8, 8])],
                 [tensor("Y", FLOAT, [1, 4, 6, 6])],
                 [const("W", farange([4, 3, 3, 3]))])


def softmax_axis():
    # Softmax axis 5 is out of range for a rank-2 input.
    node = helper.make_node("Softmax", ["X"], ["Y"], name="bad_softmax", axis=5)
    return model([node], [tensor("X", FLOAT, [2, 3])], [tensor("Y", FLOAT, [2, 3])])


def conv_channels():
    # X has 3 channels, W expects 2 (group 1).
    node = helper.make_node("Conv", ["X", "W"], ["Y"], name="bad_channels")
    return model([node], [tensor("X", FLOAT, [1, 3, 8, 8])],
                 [tensor("Y", FLOAT, [1, 4, 6, 6])],
                 [const("W", farange([4, 2, 3, 3]))])


def gelu_opset17():
    # The dialect has Gelu, but ONNX has it only from opset 20 on: at opset
    # 17 ONNX's checker rejects the node.
    node = helper.make_node("Gelu", ["X"], ["Y"], name="my_gelu")
    return model([node], [tensor("X", FLOAT, [2, 3])], [tensor("Y", FLOAT, [2, 3])])


def opset18():
    node = helper.make_node("Relu", ["X"], ["Y"], name="relu")
    return model([node], [tensor("X", FLOAT, [2, 3])], [tensor("Y", FLOAT, [2, 3])],
                 opset=18)


def no_opset():
    # Only a non-default domain is imported.
    node = helper.make_node("Relu", ["X"], ["Y"], name="relu")
    m = model([node], [tensor("X", FLOAT, [2, 3])], [tensor("Y", FLOAT, [2, 3])])
    del m.opset_import[:]
    m.opset_import.append(helper.make_opsetid("com.example", 1))
    return m


def no_outputs():
    # A graph that declares no outputs.
    node = helper.make_node("Relu", ["X"], ["Y"], name="relu")
    return model([node], [tensor("X", FLOAT, [2, 3])], [])


def bad_raw_data():
    # A float initializer of dims [4, 4] (64 bytes) whose raw_data holds 10.
    w = raw_tensor("W", FLOAT, [4, 4], b"\x00" * 10)
    node = helper.make_node("MatMul", ["X", "W"], ["Y"], name="mm")
    return model([node], [tensor("X", FLOAT, [2, 4])], [tensor("Y", FLOAT, [2, 4])],
                 [w])


def bad_raw_data_const():
    # The same for a small int64 constant (imported inline): 3 bytes for [2].
    s = raw_tensor("shape", INT64, [2], b"\x01\x02\x03")
    node = helper.make_node("Reshape", ["X", "shape"], ["Y"], name="reshape")
    return model([node], [tensor("X", FLOAT, [2, 6])], [tensor("Y", FLOAT, [3, 4])],
                 [s])


def bad_float_data():
    # float_data with 3 values for dims [2, 2].
    w = TensorProto()
    w.name, w.data_type = "W", FLOAT
    w.dims.extend([2, 2])
    w.float_data.extend([1.0, 2.0, 3.0])
    node = helper.make_node("MatMul", ["X", "W"], ["Y"], name="mm")
    return model([node], [tensor("X", FLOAT, [2, 2])], [tensor("Y", FLOAT, [2, 2])],
                 [w])


def constant_value_string():
    # A Constant node whose value is a string: not representable.
    node = helper.make_node("Constant", [], ["Y"], name="greeting",
                            value_string="hello")
    return model([node], [], [tensor("Y", TensorProto.STRING, [])])


def external_tensor(name, dims, location, offset, length):
    t = TensorProto()
    t.name, t.data_type = name, FLOAT
    t.dims.extend(dims)
    t.data_location = TensorProto.EXTERNAL
    fields = [("location", location), ("offset", str(offset))]
    if length is not None:
        fields.append(("length", str(length)))
    for key, value in fields:
        entry = t.external_data.add()
        entry.key, entry.value = key, value
    return t


def external_model(location, offset):
    node = helper.make_node("MatMul", ["X", "W"], ["Y"], name="mm")
    w = external_tensor("W", [4, 4], location, offset, 64)
    return model([node], [tensor("X", FLOAT, [2, 4])], [tensor("Y", FLOAT, [2, 4])],
                 [w])


# Written next to the external-data cases: 64 bytes of float32 data for W.
EXTERNAL_DATA_FILE = "external_data.bin"


def external_data():
    # W [4, 4] lives in external_data.bin (the weights of farange([4, 4])).
    return external_model(EXTERNAL_DATA_FILE, 0)


def external_data_offset():
    # Offset 32 leaves only 32 of the 64 bytes W needs in the file.
    return external_model(EXTERNAL_DATA_FILE, 32)


def external_data_no_length():
    # No length: W [4, 4] takes the whole 64-byte file.
    node = helper.make_node("MatMul", ["X", "W"], ["Y"], name="mm")
    w = external_tensor("W", [4, 4], EXTERNAL_DATA_FILE, 0, None)
    return model([node], [tensor("X", FLOAT, [2, 4])], [tensor("Y", FLOAT, [2, 4])],
                 [w])


def external_data_no_length_long():
    # No length: W [2, 4] (32 bytes) in the 64-byte file, which holds more.
    node = helper.make_node("MatMul", ["X", "W"], ["Y"], name="mm")
    w = external_tensor("W", [2, 4], EXTERNAL_DATA_FILE, 0, None)
    return model([node], [tensor("X", FLOAT, [2, 2])], [tensor("Y", FLOAT, [2, 4])],
                 [w])


def opset_twice():
    # The default domain imported at opsets 17 and 13.
    m = opset18()
    del m.opset_import[:]
    m.opset_import.extend([helper.make_opsetid("", 17),
                           helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m


def missing_external_data():
    # An initializer stored in an external file that does not exist.
    return external_model("no_such_weights.bin", 0)


def external_escape():
    # A location that climbs out of the model's directory.
    return external_model("../" * 32 + "etc/passwd", 0)


# Written by main() next to the cases: a symlink to a file outside the
# model's directory and a FIFO (reading it would block forever).
EXTERNAL_SYMLINK = "escape_link.bin"
EXTERNAL_FIFO = "weights_fifo.bin"


def external_symlink():
    return external_model(EXTERNAL_SYMLINK, 0)


def external_fifo():
    return external_model(EXTERNAL_FIFO, 0)


def opset1():
    # Opset 1: ONNX's version converter has no adapter for its Split (and
    # fails with an internal assertion); the importer rejects it first.
    m = old_opset()
    m.opset_import[0].version = 1
    return m


def opset5_softmax():
    # Opset 5: the converter's Softmax adapter needs a shape that shape
    # inference does not find for Relu-1 (consumed_inputs); the importer
    # names the input before the converter fails on an internal assertion.
    m = old_opset_inferred()
    m.opset_import[0].version = 5
    return m


def opset12_missing_output():
    # Opset 12 is upgraded by the version converter, which crashes on a
    # graph output that no node computes: checked before it runs.
    node = helper.make_node("Relu", ["X"], ["Y"], name="relu")
    return model([node], [tensor("X", FLOAT, [2, 3])], [tensor("Z", FLOAT, [2, 3])],
                 opset=12)


def opset12_short_raw():
    # bad_raw_data_const at opset 12: ONNX's shape inference and version
    # converter read raw_data as its dims say (a segfault), so its size is
    # checked before they run.
    s = raw_tensor("shape", INT64, [2], b"\x01\x02\x03")
    node = helper.make_node("Reshape", ["X", "shape"], ["Y"], name="reshape")
    return model([node], [tensor("X", FLOAT, [8])], [tensor("Y", FLOAT, [2, 4])],
                 [s], opset=12)


def opset12_short_raw_constant():
    # The same in a Constant node's value.
    s = raw_tensor("shape", INT64, [2], b"\x01\x02\x03")
    nodes = [helper.make_node("Constant", [], ["shape"], name="shape_const",
                              value=s),
             helper.make_node("Reshape", ["X", "shape"], ["Y"], name="reshape")]
    return model(nodes, [tensor("X", FLOAT, [8])], [tensor("Y", FLOAT, [2, 4])],
                 opset=12)


def zero_size_weight(rank):
    # x -> MatMul(w1[4, 8]) -> MatMul(w[8, 0]): an empty weight, whose
    # training divided by zero (rank 2) or built an empty Reshape (rank 3).
    batch = [2] if rank == 2 else [2, 3]
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"], name="mm1"),
             helper.make_node("MatMul", ["h", "w"], ["y"], name="mm2")]
    return model(nodes, [tensor("x", FLOAT, batch + [4])],
                 [tensor("y", FLOAT, batch + [0])],
                 [const("w1", farange([4, 8])),
                  const("w", np.zeros((8, 0), np.float32))])


def zero_size_input():
    # A graph input without elements.
    node = helper.make_node("Relu", ["X"], ["Y"], name="relu")
    return model([node], [tensor("X", FLOAT, [2, 0])], [tensor("Y", FLOAT, [2, 0])])


def zero_size_slice():
    # Nonempty operands, an empty result (rows 2..2 of X).
    nodes = [helper.make_node("Slice", ["X", "starts", "ends"], ["S"],
                              name="empty_slice"),
             helper.make_node("Relu", ["S"], ["Y"], name="relu")]
    return model(nodes, [tensor("X", FLOAT, [2, 4])], [tensor("Y", FLOAT, [0, 4])],
                 [const("starts", np.array([2], np.int64)),
                  const("ends", np.array([2], np.int64))])


def huge_input():
    # A graph input of 2^40 x 4 floats (16 TiB): over the tensor limits.
    node = helper.make_node("Relu", ["X"], ["Y"], name="relu")
    return model([node], [tensor("X", FLOAT, [2 ** 40, 4])],
                 [tensor("Y", FLOAT, [2 ** 40, 4])])


def overflowing_input():
    # Dims whose product overflows int64.
    node = helper.make_node("Relu", ["X"], ["Y"], name="relu")
    return model([node], [tensor("X", FLOAT, [2 ** 40, 2 ** 40])],
                 [tensor("Y", FLOAT, [2 ** 40, 2 ** 40])])


# --------------------------------------------------------------------------
# Known importer bugs: what should happen is an error; the lit tests do not
# use these cases yet.
# --------------------------------------------------------------------------

def bug_huge_initializer():
    # dims [2^20, 2^20] with 4 bytes of raw_data: the importer allocates the
    # 4 TiB buffer before comparing sizes and aborts ("LLVM ERROR: out of
    # memory") instead of reporting the size mismatch.
    w = raw_tensor("W", FLOAT, [2 ** 20, 2 ** 20], b"\0\0\0\0")
    node = helper.make_node("Relu", ["W"], ["Y"], name="relu")
    return model([node], [], [tensor("Y", FLOAT, [])], [w])


def bug_overflowing_dims():
    # dims [2^40, 2^40]: the element count overflows to 0, so an empty
    # raw_data "matches" and the initializer imports as an empty dense<>
    # constant of type tensor<1099511627776x1099511627776xf32>.
    w = raw_tensor("W", FLOAT, [2 ** 40, 2 ** 40], b"")
    node = helper.make_node("Relu", ["W"], ["Y"], name="relu")
    return model([node], [], [tensor("Y", FLOAT, [])], [w])


def bug_split_negative_size():
    # Split sizes [-1, 4] sum to the dim (3) and are accepted: the result
    # type is the invalid tensor<2x-1xf32>.
    node = helper.make_node("Split", ["X", "sizes"], ["A", "B"], name="split",
                            axis=1)
    return model([node], [tensor("X", FLOAT, [2, 3])],
                 [tensor("A", FLOAT, [2, 1]), tensor("B", FLOAT, [2, 2])],
                 [const("sizes", np.array([-1, 4], np.int64))])


def bug_gather_out_of_range():
    # A constant index 5 into a dim of size 2 is accepted (ONNX: invalid).
    node = helper.make_node("Gather", ["X", "idx"], ["Y"], name="gather")
    return model([node], [tensor("X", FLOAT, [2, 3])], [tensor("Y", FLOAT, [1, 3])],
                 [const("idx", np.array([5], np.int64))])


# --------------------------------------------------------------------------
# Semantics.
# --------------------------------------------------------------------------

def old_opset():
    # Opset 11, upgraded by ONNX's version converter to 13:
    #  - Softmax(axis=1) on a rank-3 input coerces it to 2-D (softmax over the
    #    flattened dims 1..2); opset 13 has no such coercion, so the
    #    converter rewrites it as Flatten -> Softmax -> Reshape.
    #  - Unsqueeze and ReduceSum take `axes`, Split takes `split` as
    #    attributes; at opset 13 they become constant inputs.
    nodes = [
        helper.make_node("Softmax", ["X"], ["S"], name="softmax", axis=1),
        helper.make_node("Unsqueeze", ["S"], ["U"], name="unsq", axes=[0]),
        helper.make_node("ReduceSum", ["U"], ["R"], name="rsum", axes=[3],
                         keepdims=0),
        helper.make_node("Split", ["R"], ["Y1", "Y2"], name="split", axis=2,
                         split=[1, 2]),
    ]
    return model(nodes, [tensor("X", FLOAT, [2, 3, 4])],
                 [tensor("Y1", FLOAT, [1, 2, 1]), tensor("Y2", FLOAT, [1, 2, 2])],
                 opset=11)


def old_opset_inferred():
    # Opset 11 Softmax on an intermediate value: the converter's Softmax
    # adapter needs the input shape, which only shape inference provides.
    nodes = [
        helper.make_node("Relu", ["X"], ["R"], name="relu"),
        helper.make_node("Softmax", ["R"], ["Y"], name="softmax", axis=1),
    ]
    return model(nodes, [tensor("X", FLOAT, [2, 3, 4])],
                 [tensor("Y", FLOAT, [2, 3, 4])], opset=11)


def defaults():
    # The nodes leave their attributes out (except leaky_given); the importer
    # fills in the ONNX schema defaults of the model's opset.
    nodes = [
        helper.make_node("LeakyRelu", ["X"], ["L"], name="leaky"),
        helper.make_node("LeakyRelu", ["L"], ["L2"], name="leaky_given",
                         alpha=0.5),
        helper.make_node("Gemm", ["L2", "W", "B"], ["G"], name="gemm"),
        helper.make_node("Softmax", ["G"], ["S"], name="softmax"),
        helper.make_node("BatchNormalization", ["X4", "sc", "bi", "mean", "var"],
                         ["Z"], name="bn"),
    ]
    return model(nodes, [tensor("X", FLOAT, [2, 3]), tensor("X4", FLOAT, [2, 2, 4, 4])],
                 [tensor("S", FLOAT, [2, 5]), tensor("Z", FLOAT, [2, 2, 4, 4])],
                 [const("W", farange([3, 5])), const("B", farange([5])),
                  const("sc", farange([2])), const("bi", farange([2])),
                  const("mean", farange([2])), const("var", np.ones([2], np.float32))])


def initializers():
    # A small conv net with every initializer kind:
    #   conv.weight  float [4,3,3,3]   trainable
    #   bn.scale/bias float [4]        trainable
    #   bn.mean/var  float [4]         state (BatchNorm running statistics)
    #   fc.weight    float [80,64]     trainable (5120 elements: a global
    #                                  even when frozen)
    #   flat_shape   int64 [2]         constant, inline onnx.Constant
    #   half         float scalar      constant, inline onnx.Constant
    nodes = [
        helper.make_node("Conv", ["X", "conv.weight"], ["C"], name="conv",
                         pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization",
                         ["C", "bn.scale", "bn.bias", "bn.mean", "bn.var"],
                         ["B", "bn.mean_out", "bn.var_out"], name="bn",
                         training_mode=1),
        helper.make_node("Mul", ["B", "half"], ["H"], name="scale"),
        helper.make_node("Reshape", ["H", "flat_shape"], ["F"], name="flatten"),
        helper.make_node("MatMul", ["F", "fc.weight"], ["Y"], name="fc"),
    ]
    inits = [
        const("conv.weight", farange([4, 3, 3, 3], 0.01)),
        const("bn.scale", np.ones([4], np.float32)),
        const("bn.bias", np.zeros([4], np.float32)),
        const("bn.mean", np.zeros([4], np.float32)),
        const("bn.var", np.ones([4], np.float32)),
        const("half", np.float32(0.5)),
        const("flat_shape", np.array([2, 64], np.int64)),
        const("fc.weight", farange([64, 80], 0.001)),
    ]
    return model(nodes, [tensor("X", FLOAT, [2, 3, 4, 4])],
                 [tensor("Y", FLOAT, [2, 80])], inits)


def shape_subgraph():
    # The usual exporter pattern: Reshape(X, Concat(Unsqueeze(Gather(Shape(X),
    # 0)), [-1])). With a static (or --batch-size) input it folds away.
    nodes = [
        helper.make_node("Shape", ["X"], ["shape"], name="shape"),
        helper.make_node("Gather", ["shape", "zero"], ["batch"], name="gather",
                         axis=0),
        helper.make_node("Unsqueeze", ["batch", "axes0"], ["batch1"],
                         name="unsqueeze"),
        helper.make_node("Concat", ["batch1", "minus_one"], ["target"],
                         name="concat", axis=0),
        helper.make_node("Reshape", ["X", "target"], ["R"], name="reshape"),
        helper.make_node("Relu", ["R"], ["Y"], name="relu"),
    ]
    inits = [const("zero", np.array(0, np.int64)),
             const("axes0", np.array([0], np.int64)),
             const("minus_one", np.array([-1], np.int64))]
    return model(nodes, [tensor("X", FLOAT, ["N", 3, 4])],
                 [tensor("Y", FLOAT, ["N", 12])], inits)


def locations():
    # Named nodes and one unnamed node (named "<OpType>_<index>").
    nodes = [
        helper.make_node("Relu", ["X"], ["A"], name="first_relu"),
        helper.make_node("Sigmoid", ["A"], ["B"], name="the_sigmoid"),
        helper.make_node("Tanh", ["B"], ["Y"]),
    ]
    return model(nodes, [tensor("X", FLOAT, [2, 3])], [tensor("Y", FLOAT, [2, 3])])


def pad_dynamic_pads():
    # Pad's pads as a graph input: the result shape is unknown.
    nodes = [helper.make_node("Pad", ["X", "P"], ["Y"], name="pad")]
    return model(nodes, [tensor("X", FLOAT, [2, 3]), tensor("P", INT64, [4])],
                 [tensor("Y", FLOAT, [3, 5])])


def pad_bad_mode():
    nodes = [helper.make_node("Pad", ["X", "pads"], ["Y"], name="pad",
                              mode="wrap")]
    return model(nodes, [tensor("X", FLOAT, [2, 3])],
                 [tensor("Y", FLOAT, [2, 5])],
                 [const("pads", np.array([0, 1, 0, 1], np.int64))])


def pad_overcrop():
    # Cropping 2 + 2 of a dim of 3.
    nodes = [helper.make_node("Pad", ["X", "pads"], ["Y"], name="pad")]
    return model(nodes, [tensor("X", FLOAT, [2, 3])],
                 [tensor("Y", FLOAT, [2, 1])],
                 [const("pads", np.array([0, -2, 0, -2], np.int64))])


def tile_dynamic_repeats():
    nodes = [helper.make_node("Tile", ["X", "R"], ["Y"], name="tile")]
    return model(nodes, [tensor("X", FLOAT, [2, 3]), tensor("R", INT64, [2])],
                 [tensor("Y", FLOAT, [4, 6])])


def pad_modes():
    # One Pad per mode; the constant one crops a dim and pads by 0.5.
    nodes = [
        helper.make_node("Pad", ["X", "pads_c", "half"], ["C"], name="pad_c"),
        helper.make_node("Pad", ["X", "pads_r"], ["R"], name="pad_r",
                         mode="reflect"),
        helper.make_node("Pad", ["X", "pads_e"], ["E"], name="pad_e",
                         mode="edge"),
    ]
    inits = [const("pads_c", np.array([0, 0, 1, -1, 0, 0, 1, 2], np.int64)),
             const("pads_r", np.array([0, 0, 2, 1, 0, 0, 1, 2], np.int64)),
             const("pads_e", np.array([0, 0, 3, 0, 0, 0, 0, 3], np.int64)),
             const("half", np.array(0.5, np.float32))]
    return model(nodes, [tensor("X", FLOAT, [1, 2, 4, 4])],
                 [tensor("C", FLOAT, [1, 2, 6, 5]),
                  tensor("R", FLOAT, [1, 2, 7, 7]),
                  tensor("E", FLOAT, [1, 2, 7, 7])], inits)


def pad_zero():
    # torchvision's DenseNet: an all-zero Pad in front of an AveragePool.
    nodes = [
        helper.make_node("Pad", ["X", "pads"], ["P"], name="pad",
                         mode="constant"),
        helper.make_node("AveragePool", ["P"], ["Y"], name="pool",
                         kernel_shape=[2, 2], strides=[2, 2]),
    ]
    return model(nodes, [tensor("X", FLOAT, [1, 2, 4, 4])],
                 [tensor("Y", FLOAT, [1, 2, 2, 2])],
                 [const("pads", np.zeros(8, np.int64))])


def pad_opset2():
    # Opset 2's Pad: pads and value are attributes; the version converter
    # makes them inputs.
    nodes = [helper.make_node("Pad", ["X"], ["Y"], name="pad", mode="edge",
                              pads=[1, 0, 0, 2])]
    return model(nodes, [tensor("X", FLOAT, [2, 3])],
                 [tensor("Y", FLOAT, [3, 5])], opset=2)


def tile():
    nodes = [helper.make_node("Tile", ["X", "repeats"], ["Y"], name="tile")]
    return model(nodes, [tensor("X", FLOAT, [2, 3])],
                 [tensor("Y", FLOAT, [6, 6])],
                 [const("repeats", np.array([3, 2], np.int64))])


# Einsum: X against constant operands (farange), each equation's shapes in
# EINSUM_CASES (python/check_import_cases.py computes numpy.einsum of them).
EINSUM_CASES = {
    # attention scores, batched over b and h (maxvit_t's)
    "einsum_attention": ("bhid,bhjd->bhij", [(2, 2, 3, 4), (2, 2, 5, 4)]),
    # implicit output: the letters used once, sorted (ik)
    "einsum_implicit": ("ij,jk", [(3, 4), (4, 6)]),
    # one operand: i summed away, the rest transposed
    "einsum_reduce": ("ijk->kj", [(2, 3, 4)]),
    # three operands, contracted left to right
    "einsum_chain": ("ij,jk,kl->il", [(3, 4), (4, 5), (5, 2)]),
    # "..." in one operand, an outer product dim (n) and a summed one (m)
    "einsum_ellipsis": ("...ij,jkm->...ki", [(2, 3, 4, 5), (5, 6, 2)]),
    # a diagonal under "..." (ONNX's batch_diagonal), a trace (implicit:
    # i is used twice, so it is summed), a diagonal of dims apart
    "einsum_batch_diagonal": ("...ii->...i", [(2, 3, 3)]),
    "einsum_trace": ("ii", [(4, 4)]),
    "einsum_diagonal_apart": ("iji,jk->ik", [(3, 4, 3), (4, 2)]),
    # b of size 1 in the second operand broadcasts against 2, m against 3
    "einsum_broadcast": ("bijm,bkjm->bikm", [(2, 3, 4, 1), (1, 5, 4, 3)]),
    # nothing summed: a Mul (an outer product per b; a broadcast gate)
    "einsum_outer": ("bi,bj->bij", [(2, 3), (2, 4)]),
    "einsum_gate": ("bid,bid->bid", [(2, 3, 4), (1, 1, 4)]),
}


def einsum_case(equation, shapes):
    names = ["X"] + [f"W{i}" for i in range(1, len(shapes))]
    nodes = [helper.make_node("Einsum", names, ["Y"], name="einsum",
                              equation=equation)]
    consts = [const(n, farange(s, 0.0625)) for n, s in zip(names[1:],
                                                           shapes[1:])]
    out = np.einsum(equation, *(np.zeros(s, np.float32) for s in shapes))
    return model(nodes, [tensor("X", FLOAT, list(shapes[0]))],
                 [tensor("Y", FLOAT, list(out.shape))], consts, opset=12)


def einsum_bad(equation, x_shape, w_shape, y_shape):
    nodes = [helper.make_node("Einsum", ["X", "W"], ["Y"], name="bad_einsum",
                              equation=equation)]
    return model(nodes, [tensor("X", FLOAT, x_shape)],
                 [tensor("Y", FLOAT, y_shape)],
                 [const("W", farange(w_shape, 0.0625))], opset=12)


def decomposed():
    # Ops the importer builds from others (lib/Import/ONNX/Decompose.cpp):
    # a 3-input Max, Mean, a 1-input Sum, PRelu with one slope per column,
    # GreaterOrEqual, ReduceSumSquare and ReduceLogSum over axis 1.
    nodes = [
        helper.make_node("Max", ["X", "A", "B"], ["max"], name="max3"),
        helper.make_node("Mean", ["max", "A"], ["mean"], name="mean2"),
        helper.make_node("Sum", ["mean"], ["sum"], name="sum1"),
        helper.make_node("PRelu", ["sum", "slope"], ["prelu"], name="prelu"),
        helper.make_node("GreaterOrEqual", ["prelu", "A"], ["ge"], name="ge"),
        helper.make_node("Where", ["ge", "prelu", "A"], ["w"], name="where"),
        helper.make_node("ReduceSumSquare", ["w"], ["sq"], name="sumsq",
                         axes=[1], keepdims=0),
        helper.make_node("ReduceLogSum", ["sq"], ["Y"], name="logsum",
                         keepdims=1),
    ]
    return model(nodes, [tensor("X", FLOAT, [2, 3])],
                 [tensor("Y", FLOAT, [1])],
                 [const("A", farange((2, 3), 0.25)),
                  const("B", farange((3,), -0.5)),
                  const("slope", np.array([0.1, 0.2, 0.3], np.float32))])


def gelu_chains():
    # The erf GELU as exporters write it (lib/Import/ONNX/Fusion.cpp):
    # torch's x * (1 + erf(x / sqrt(2))) * 0.5, the 0.5 * x first with the
    # constants on the left, and two chains that must stay as they are: a
    # factor of 0.6, and an erf the graph also returns.
    sqrt2, inv = np.float32(np.sqrt(2)), np.float32(1 / np.sqrt(2))
    nodes = [
        helper.make_node("Div", ["X", "sqrt2"], ["a1"], name="t_div"),
        helper.make_node("Erf", ["a1"], ["a2"], name="t_erf"),
        helper.make_node("Add", ["a2", "one"], ["a3"], name="t_add"),
        helper.make_node("Mul", ["X", "a3"], ["a4"], name="t_mul"),
        helper.make_node("Mul", ["a4", "half"], ["Y1"], name="t_half"),
        helper.make_node("Mul", ["half", "Y1"], ["b0"], name="h_half"),
        helper.make_node("Mul", ["inv", "Y1"], ["b1"], name="h_scale"),
        helper.make_node("Erf", ["b1"], ["b2"], name="h_erf"),
        helper.make_node("Add", ["one", "b2"], ["b3"], name="h_add"),
        helper.make_node("Mul", ["b0", "b3"], ["Y2"], name="h_gelu"),
        helper.make_node("Div", ["Y2", "sqrt2"], ["c1"], name="x_div"),
        helper.make_node("Erf", ["c1"], ["c2"], name="x_erf"),
        helper.make_node("Add", ["c2", "one"], ["c3"], name="x_add"),
        helper.make_node("Mul", ["Y2", "c3"], ["c4"], name="x_mul"),
        helper.make_node("Mul", ["c4", "other"], ["Y3"], name="x_other"),
        helper.make_node("Div", ["Y3", "sqrt2"], ["d1"], name="e_div"),
        helper.make_node("Erf", ["d1"], ["Y4"], name="e_erf"),
        helper.make_node("Add", ["Y4", "one"], ["d3"], name="e_add"),
        helper.make_node("Mul", ["Y3", "d3"], ["d4"], name="e_mul"),
        helper.make_node("Mul", ["d4", "half"], ["Y5"], name="e_half"),
    ]
    return model(nodes, [tensor("X", FLOAT, [2, 3])],
                 [tensor(y, FLOAT, [2, 3]) for y in ("Y2", "Y4", "Y5")],
                 [const("sqrt2", sqrt2), const("inv", inv),
                  const("one", np.float32(1)), const("half", np.float32(0.5)),
                  const("other", np.float32(0.6))])


def identity_dropouts():
    # Dropouts that keep every element (ratio 0 in training mode, as torch
    # exports nn.Dropout(p=0.0); inference mode by default or by a false
    # training_mode) become their input; one that drops (ratio 0.5, or
    # ONNX's default ratio in training mode) and one whose mask the graph
    # returns stay.
    nodes = [
        helper.make_node("Dropout", ["X", "zero", "on"], ["a"], name="zero"),
        helper.make_node("Dropout", ["a", "half", "on"], ["b"], name="half"),
        helper.make_node("Dropout", ["b"], ["c"], name="inference"),
        helper.make_node("Dropout", ["c", "zero", "on"], ["d", "M"],
                         name="mask_read"),
        helper.make_node("Dropout", ["d", "", "on"], ["e"], name="default"),
        helper.make_node("Dropout", ["e", "half", "off"], ["Y"], name="off"),
    ]
    return model(nodes, [tensor("X", FLOAT, [2, 3])],
                 [tensor("Y", FLOAT, [2, 3]), tensor("M", TensorProto.BOOL, [2, 3])],
                 [const("zero", np.float32(0)), const("half", np.float32(0.5)),
                  const("on", np.bool_(True)), const("off", np.bool_(False))])


def gelu_tanh_chains():
    # GELU's tanh approximation as torch exports GELU(approximate='tanh')
    # (Pow(x, 3), (x * 0.5) * (1 + tanh)), as written with x * x * x and the
    # constants on the left ((x * (1 + tanh)) * 0.5), and one with another
    # cubic coefficient, which must stay as it is.
    beta, kappa = np.float32(np.sqrt(2 / np.pi)), np.float32(0.044715)
    nodes = [
        helper.make_node("Pow", ["X", "three"], ["a1"], name="t_pow"),
        helper.make_node("Mul", ["a1", "kappa"], ["a2"], name="t_kappa"),
        helper.make_node("Add", ["X", "a2"], ["a3"], name="t_inner"),
        helper.make_node("Mul", ["a3", "beta"], ["a4"], name="t_beta"),
        helper.make_node("Tanh", ["a4"], ["a5"], name="t_tanh"),
        helper.make_node("Add", ["a5", "one"], ["a6"], name="t_add"),
        helper.make_node("Mul", ["X", "half"], ["a7"], name="t_half"),
        helper.make_node("Mul", ["a7", "a6"], ["Y1"], name="t_gelu"),
        helper.make_node("Mul", ["Y1", "Y1"], ["b1"], name="h_square"),
        helper.make_node("Mul", ["b1", "Y1"], ["b2"], name="h_cube"),
        helper.make_node("Mul", ["kappa", "b2"], ["b3"], name="h_kappa"),
        helper.make_node("Add", ["b3", "Y1"], ["b4"], name="h_inner"),
        helper.make_node("Mul", ["beta", "b4"], ["b5"], name="h_beta"),
        helper.make_node("Tanh", ["b5"], ["b6"], name="h_tanh"),
        helper.make_node("Add", ["one", "b6"], ["b7"], name="h_add"),
        helper.make_node("Mul", ["Y1", "b7"], ["b8"], name="h_mul"),
        helper.make_node("Mul", ["half", "b8"], ["Y2"], name="h_gelu"),
        helper.make_node("Pow", ["Y2", "three"], ["c1"], name="x_pow"),
        helper.make_node("Mul", ["c1", "other"], ["c2"], name="x_other"),
        helper.make_node("Add", ["Y2", "c2"], ["c3"], name="x_inner"),
        helper.make_node("Mul", ["c3", "beta"], ["c4"], name="x_beta"),
        helper.make_node("Tanh", ["c4"], ["c5"], name="x_tanh"),
        helper.make_node("Add", ["c5", "one"], ["c6"], name="x_add"),
        helper.make_node("Mul", ["Y2", "half"], ["c7"], name="x_half"),
        helper.make_node("Mul", ["c7", "c6"], ["Y3"], name="x_gelu"),
    ]
    return model(nodes, [tensor("X", FLOAT, [2, 3])],
                 [tensor("Y3", FLOAT, [2, 3])],
                 [const("three", np.float32(3)), const("kappa", kappa),
                  const("beta", beta), const("one", np.float32(1)),
                  const("half", np.float32(0.5)),
                  const("other", np.float32(0.05))])


def prelu_bad_slope():
    # The slope must broadcast to X: [2] does not to [2, 3].
    nodes = [helper.make_node("PRelu", ["X", "slope"], ["Y"],
                              name="bad_prelu")]
    return model(nodes, [tensor("X", FLOAT, [2, 3])],
                 [tensor("Y", FLOAT, [2, 3])],
                 [const("slope", np.array([0.1, 0.2], np.float32))])


def reduce_l2_bad_axis():
    nodes = [helper.make_node("ReduceL2", ["X"], ["Y"], name="bad_norm",
                              axes=[2], keepdims=0)]
    return model(nodes, [tensor("X", FLOAT, [2, 3])],
                 [tensor("Y", FLOAT, [2])])


def resize_modes():
    # Nearest by 2 (torch's Upsample: asymmetric, floor) repeats elements;
    # linear to sizes 3 x 5 interpolates.
    nodes = [
        helper.make_node("Resize", ["X", "", "scales"], ["N"], name="near",
                         mode="nearest",
                         coordinate_transformation_mode="asymmetric",
                         nearest_mode="floor"),
        helper.make_node("Resize", ["N", "", "", "sizes"], ["Y"],
                         name="linear", mode="linear"),
    ]
    return model(nodes, [tensor("X", FLOAT, [1, 2, 2, 3])],
                 [tensor("Y", FLOAT, [1, 2, 3, 5])],
                 [const("scales", np.array([1, 1, 2, 2], np.float32)),
                  const("sizes", np.array([1, 2, 3, 5], np.int64))])


def eyelike_too_large():
    # The decomposition would build a 10^8-element constant.
    nodes = [helper.make_node("EyeLike", ["X"], ["Y"], name="big_eye")]
    return model(nodes, [tensor("X", FLOAT, [10000, 10000])],
                 [tensor("Y", FLOAT, [10000, 10000])])


def lstm_clip():
    # Cell clipping is not supported: an error names it.
    nodes = [helper.make_node("LSTM", ["X", "W", "R"], ["Y"], name="clipped",
                              hidden_size=2, clip=3.0)]
    return model(nodes, [tensor("X", FLOAT, [3, 1, 2])],
                 [tensor("Y", FLOAT, [3, 1, 1, 2])],
                 [const("W", farange((1, 8, 2))),
                  const("R", farange((1, 8, 2)))])


def resize_huge_scale():
    # 2 x 1e30 rows: refused before any conversion to an integer.
    nodes = [helper.make_node("Resize", ["X", "", "scales"], ["Y"],
                              name="huge_resize")]
    return model(nodes, [tensor("X", FLOAT, [1, 1, 2, 2])],
                 [tensor("Y", FLOAT, [1, 1, 2, 2])],
                 [const("scales", np.array([1, 1, 1e30, 1], np.float32))])


def resize_cubic():
    nodes = [helper.make_node("Resize", ["X", "", "scales"], ["Y"],
                              name="bad_resize", mode="cubic")]
    return model(nodes, [tensor("X", FLOAT, [1, 1, 2, 2])],
                 [tensor("Y", FLOAT, [1, 1, 4, 4])],
                 [const("scales", np.array([1, 1, 2, 2], np.float32))])


def shape_ops():
    # Range, Size, Cast, Where and Equal of shape data feed ConstantOfShape,
    # Expand and Reshape: all fold, so the results are static.
    nodes = [
        helper.make_node("Size", ["X"], ["n"], name="size"),  # 12
        helper.make_node("Div", ["n", "four"], ["n4"], name="div"),  # 3
        helper.make_node("Range", ["zero", "n4", "one"], ["r"],
                         name="range"),  # [0, 1, 2]
        helper.make_node("Cast", ["r"], ["rf"], name="cast", to=FLOAT),
        helper.make_node("Shape", ["X"], ["shape"], name="shape"),  # [3, 4]
        helper.make_node("Equal", ["shape", "three"], ["is3"], name="equal"),
        helper.make_node("Where", ["is3", "minus_one", "shape"], ["target"],
                         name="where"),  # [-1, 4]
        helper.make_node("Reshape", ["X", "target"], ["R"], name="reshape"),
        helper.make_node("Unsqueeze", ["rf", "axes1"], ["col"],
                         name="unsqueeze"),  # [3, 1]
        helper.make_node("Expand", ["col", "shape"], ["E"], name="expand"),
        helper.make_node("Add", ["R", "E"], ["S"], name="add"),
        helper.make_node("ConstantOfShape", ["shape"], ["Z"],
                         name="zeros"),
        helper.make_node("Add", ["S", "Z"], ["Y"], name="add_zeros"),
    ]
    inits = [const("four", np.array(4, np.int64)),
             const("zero", np.array(0, np.int64)),
             const("one", np.array(1, np.int64)),
             const("three", np.array(3, np.int64)),
             const("minus_one", np.array(-1, np.int64)),
             const("axes1", np.array([1], np.int64))]
    return model(nodes, [tensor("X", FLOAT, [3, 4])],
                 [tensor("Y", FLOAT, [3, 4])], inits)


def vit_cls_token():
    # A Vision Transformer's class token, exported from torch:
    # cls_token.expand(x.shape[0], -1, -1) makes Expand's shape from the
    # batch dim (Shape -> Gather -> Unsqueeze -> Concat, then torch's
    # Where(Equal(shape, -1), 1, shape)).
    import io
    import warnings

    import onnx
    import torch

    class ClassToken(torch.nn.Module):
        def __init__(self):
            super().__init__()
            # Not whole numbers: a trained parameter (see --frozen-params).
            self.cls_token = torch.nn.Parameter(
                torch.arange(8, dtype=torch.float32).reshape(1, 1, 8) * 0.5 +
                0.25)

        def forward(self, x):
            cls = self.cls_token.expand(x.shape[0], -1, -1)
            return torch.cat([cls, x], 1) * 2.0

    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(ClassToken(), torch.zeros(3, 4, 8), buffer,
                          input_names=["x"], output_names=["y"],
                          opset_version=17, do_constant_folding=False,
                          dynamic_axes={"x": {0: "N"}, "y": {0: "N"}})
    return onnx.load_from_string(buffer.getvalue())


CASES = {
    # errors
    "unsupported_op": unsupported_op,
    "custom_domain": custom_domain,
    "dynamic_batch": dynamic_batch,
    "dynamic_inner": dynamic_inner,
    "unknown_dim": unknown_dim,
    "no_shape_input": no_shape_input,
    "string_input": string_input,
    "sequence_input": sequence_input,
    "reshape_dynamic_shape": reshape_dynamic_shape,
    "relu_int": relu_int,
    "matmul_mismatch": matmul_mismatch,
    "gemm_bad_bias": gemm_bad_bias,
    "broadcast_mismatch": broadcast_mismatch,
    "add_mixed_types": add_mixed_types,
    "output_type_mismatch": output_type_mismatch,
    "missing_input": missing_input,
    "missing_output": missing_output,
    "bad_attribute_type": bad_attribute_type,
    "softmax_axis": softmax_axis,
    "conv_channels": conv_channels,
    "gelu_opset17": gelu_opset17,
    "opset18": opset18,
    "no_opset": no_opset,
    "no_outputs": no_outputs,
    "bad_raw_data": bad_raw_data,
    "bad_raw_data_const": bad_raw_data_const,
    "bad_float_data": bad_float_data,
    "missing_external_data": missing_external_data,
    "external_data_offset": external_data_offset,
    "external_data_no_length_long": external_data_no_length_long,
    "opset_twice": opset_twice,
    "constant_value_string": constant_value_string,
    "external_escape": external_escape,
    "external_symlink": external_symlink,
    "external_fifo": external_fifo,
    "opset1": opset1,
    "opset5_softmax": opset5_softmax,
    "opset12_missing_output": opset12_missing_output,
    "opset12_short_raw": opset12_short_raw,
    "opset12_short_raw_constant": opset12_short_raw_constant,
    "zero_size_matmul": lambda: zero_size_weight(2),
    "zero_size_matmul_rank3": lambda: zero_size_weight(3),
    "zero_size_input": zero_size_input,
    "zero_size_slice": zero_size_slice,
    "huge_input": huge_input,
    "overflowing_input": overflowing_input,
    "pad_dynamic_pads": pad_dynamic_pads,
    "pad_bad_mode": pad_bad_mode,
    "pad_overcrop": pad_overcrop,
    "tile_dynamic_repeats": tile_dynamic_repeats,
    # semantics
    "old_opset": old_opset,
    "old_opset_inferred": old_opset_inferred,
    "external_data": external_data,
    "external_data_no_length": external_data_no_length,
    "defaults": defaults,
    "initializers": initializers,
    "shape_subgraph": shape_subgraph,
    "locations": locations,
    "pad_modes": pad_modes,
    "pad_zero": pad_zero,
    "pad_opset2": pad_opset2,
    "tile": tile,
    **{name: (lambda e=e, s=s: einsum_case(e, s))
       for name, (e, s) in EINSUM_CASES.items()},
    # j is 4 in X and 5 in W: neither is 1
    "einsum_mismatch": lambda: einsum_bad("ij,jk->ik", [3, 4], (5, 2),
                                          [3, 2]),
    # a diagonal of a 3 x 4 dims pair
    "einsum_uneven_diagonal": lambda: einsum_bad("iij,jk->ik", [3, 4, 2],
                                                 (2, 2), [3, 2]),
    "shape_ops": shape_ops,
    "decomposed": decomposed,
    "gelu_chains": gelu_chains,
    "gelu_tanh_chains": gelu_tanh_chains,
    "identity_dropouts": identity_dropouts,
    "prelu_bad_slope": prelu_bad_slope,
    "reduce_l2_bad_axis": reduce_l2_bad_axis,
    "resize_cubic": resize_cubic,
    "eyelike_too_large": eyelike_too_large,
    "lstm_clip": lstm_clip,
    "resize_huge_scale": resize_huge_scale,
    "resize_modes": resize_modes,
    # known bugs
    "bug_huge_initializer": bug_huge_initializer,
    "bug_overflowing_dims": bug_overflowing_dims,
    "bug_split_negative_size": bug_split_negative_size,
    "bug_gather_out_of_range": bug_gather_out_of_range,
}


# Cases exported from PyTorch (slower: written only when --cases names them).
TORCH_CASES = {
    "vit_cls_token": vit_cls_token,
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True, help="output directory")
    parser.add_argument("--cases", default="",
                        help="comma-separated subset of: " +
                        ",".join(list(CASES) + list(TORCH_CASES)))
    parser.add_argument("--half-of", nargs="+", default=[], metavar="FILE",
                        help="also write FILE cut to half its size as "
                             "OUT/<name>.half.onnx")
    args = parser.parse_args()
    names = [n for n in args.cases.split(",") if n] or list(CASES)
    unknown = [n for n in names if n not in CASES and n not in TORCH_CASES]
    if unknown:
        parser.error("unknown case(s): " + ", ".join(unknown))
    os.makedirs(args.out, exist_ok=True)
    for name in names:
        m = CASES[name]() if name in CASES else TORCH_CASES[name]()
        with open(os.path.join(args.out, name + ".onnx"), "wb") as f:
            f.write(m.SerializeToString())
    with open(os.path.join(args.out, EXTERNAL_DATA_FILE), "wb") as f:
        f.write(farange([4, 4]).tobytes())
    for name in (EXTERNAL_SYMLINK, EXTERNAL_FIFO):
        path = os.path.join(args.out, name)
        if os.path.lexists(path):
            os.remove(path)
    os.symlink("/etc/passwd", os.path.join(args.out, EXTERNAL_SYMLINK))
    os.mkfifo(os.path.join(args.out, EXTERNAL_FIFO))
    # A text file with an .onnx name and an empty file.
    with open(os.path.join(args.out, "text.onnx"), "w") as f:
        f.write("this is not an ONNX model, just some text\n")
    open(os.path.join(args.out, "empty.onnx"), "wb").close()
    for path in args.half_of:
        with open(path, "rb") as f:
            data = f.read()
        stem = os.path.splitext(os.path.basename(path))[0]
        with open(os.path.join(args.out, stem + ".half.onnx"), "wb") as f:
            f.write(data[:len(data) // 2])


if __name__ == "__main__":
    main()
