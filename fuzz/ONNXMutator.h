//===- ONNXMutator.h - Structure-aware mutations of ONNX models -*- C++ -*-===//
//
// The fuzzers that take an ONNX ModelProto (the importer's and the compile
// path's) share this LLVMFuzzerCustomMutator: half of the mutations parse
// the input as a ModelProto, perturb one dim, attribute, node input, opset
// or initializer, and serialize it again; the rest are libFuzzer's byte
// mutations. Included by exactly one file of each harness.
//
//===----------------------------------------------------------------------===//

#ifndef PP_FUZZ_ONNXMUTATOR_H
#define PP_FUZZ_ONNXMUTATOR_H

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>

extern "C" size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t maxSize);

namespace {

/// A small or boundary integer: what shape and attribute checks trip on.
int64_t pickInt(std::minstd_rand &rng, int64_t old) {
  static const int64_t special[] = {0,  1,  -1, 2,         3,
                                    -2, 64, 1 << 20, INT32_MAX, INT64_MAX,
                                    INT64_MIN};
  switch (rng() % 3) {
  case 0:
    return special[rng() % (sizeof(special) / sizeof(special[0]))];
  case 1:
    return int64_t(uint64_t(old) + rng() % 5 - 2); // wraps, no UB
  default:
    return int64_t(rng() % 17) - 4;
  }
}

void mutateDims(onnx::TypeProto *type, std::minstd_rand &rng) {
  if (!type->has_tensor_type())
    return;
  onnx::TensorShapeProto *shape = type->mutable_tensor_type()->mutable_shape();
  if (shape->dim_size() == 0 || rng() % 4 == 0) {
    shape->add_dim()->set_dim_value(pickInt(rng, 1));
    return;
  }
  onnx::TensorShapeProto::Dimension *dim =
      shape->mutable_dim(rng() % shape->dim_size());
  if (rng() % 5 == 0)
    dim->set_dim_param("N");
  else
    dim->set_dim_value(pickInt(rng, dim->dim_value()));
}

void mutateModel(onnx::ModelProto &model, std::minstd_rand &rng) {
  onnx::GraphProto *graph = model.mutable_graph();
  switch (rng() % 6) {
  case 0: { // a dim of a graph input or output
    auto *values = rng() % 2 ? graph->mutable_input() : graph->mutable_output();
    if (!values->empty())
      mutateDims(values->Mutable(rng() % values->size())->mutable_type(), rng);
    return;
  }
  case 1: { // an integer attribute (or one element of an ints attribute)
    if (graph->node_size() == 0)
      return;
    onnx::NodeProto *node = graph->mutable_node(rng() % graph->node_size());
    if (node->attribute_size() == 0)
      return;
    onnx::AttributeProto *attr =
        node->mutable_attribute(rng() % node->attribute_size());
    if (attr->ints_size() > 0 && rng() % 2)
      attr->set_ints(rng() % attr->ints_size(),
                     pickInt(rng, attr->ints(0)));
    else if (attr->ints_size() > 0)
      attr->add_ints(pickInt(rng, 0));
    else if (attr->has_f())
      attr->set_f(rng() % 2 ? -attr->f() : attr->f() * 1e30f);
    else
      attr->set_i(pickInt(rng, attr->i()));
    return;
  }
  case 2: { // a node input: another value, dropped or duplicated
    if (graph->node_size() == 0)
      return;
    onnx::NodeProto *node = graph->mutable_node(rng() % graph->node_size());
    if (node->input_size() == 0)
      return;
    int i = rng() % node->input_size();
    if (rng() % 3 == 0)
      node->mutable_input()->RemoveLast();
    else if (rng() % 2)
      node->add_input(node->input(i));
    else
      node->set_input(i, node->input(rng() % node->input_size()));
    return;
  }
  case 3: { // a dim of an initializer (its data no longer fits)
    if (graph->initializer_size() == 0)
      return;
    onnx::TensorProto *t =
        graph->mutable_initializer(rng() % graph->initializer_size());
    if (t->dims_size() == 0 || rng() % 4 == 0)
      t->add_dims(pickInt(rng, 1));
    else
      t->set_dims(rng() % t->dims_size(), pickInt(rng, t->dims(0)));
    return;
  }
  case 4: // the opset
    if (model.opset_import_size() > 0)
      model.mutable_opset_import(0)->set_version(
          rng() % 2 ? pickInt(rng, 13) : 7 + rng() % 12);
    return;
  default: // a node's op type from another node, or a node dropped
    if (graph->node_size() < 2)
      return;
    if (rng() % 2)
      graph->mutable_node(rng() % graph->node_size())
          ->set_op_type(graph->node(rng() % graph->node_size()).op_type());
    else
      graph->mutable_node()->DeleteSubrange(rng() % graph->node_size(), 1);
    return;
  }
}

} // namespace

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size,
                                          size_t maxSize, unsigned seed) {
  std::minstd_rand rng(seed);
  onnx::ModelProto model;
  if (rng() % 2 == 0 || !model.ParseFromArray(data, static_cast<int>(size)))
    return LLVMFuzzerMutate(data, size, maxSize);
  mutateModel(model, rng);
  std::string out;
  if (!model.SerializeToString(&out) || out.size() > maxSize)
    return LLVMFuzzerMutate(data, size, maxSize);
  std::memcpy(data, out.data(), out.size());
  return out.size();
}

#endif // PP_FUZZ_ONNXMUTATOR_H
