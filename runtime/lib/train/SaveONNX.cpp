//===- SaveONNX.cpp - Trained weights into the source ONNX model ----------===//
//
// Kept apart from the driver so that only this file needs the ONNX protobuf.
//
//===----------------------------------------------------------------------===//

#include "SaveONNX.h"

#include <onnx/onnx_pb.h>

#include <fstream>
#include <map>

using namespace pp::rt;
using namespace pp::rt::train;

namespace {

/// The TensorProto element type of a float dtype; 0 for the others.
int onnxFloatType(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return onnx::TensorProto::FLOAT;
  case DType::F64:
    return onnx::TensorProto::DOUBLE;
  case DType::F16:
    return onnx::TensorProto::FLOAT16;
  case DType::BF16:
    return onnx::TensorProto::BFLOAT16;
  default:
    return 0;
  }
}

const char *floatName(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return "f32";
  case DType::F64:
    return "f64";
  case DType::F16:
    return "f16";
  case DType::BF16:
    return "bf16";
  default:
    return "a non-float type";
  }
}

// Local copies of the shape helpers: this library links no kernel backend.
std::string dimsString(const std::vector<int64_t> &shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

} // namespace

bool pp::rt::train::saveTrainedONNX(
    const std::string &source,
    const std::vector<std::pair<std::string, HostTensor>> &values,
    const std::vector<bool> &required, std::string &bytes, std::string &error) {
  onnx::ModelProto model;
  {
    std::ifstream in(source, std::ios::binary);
    if (!in) {
      error = "--save-onnx: cannot read the source model '" + source + "'";
      return false;
    }
    if (!model.ParseFromIstream(&in)) {
      error = "--save-onnx: '" + source + "' is not an ONNX model";
      return false;
    }
  }
  std::map<std::string, onnx::TensorProto *> initializers;
  for (onnx::TensorProto &init : *model.mutable_graph()->mutable_initializer())
    initializers.emplace(init.name(), &init);

  for (size_t index = 0; index < values.size(); ++index) {
    const auto &[name, value] = values[index];
    bool mustSave = index < required.size() && required[index];
    if (!mustSave && !initializers.count(name))
      continue;
    auto fail = [&, &name = name](const std::string &message) {
      error = "--save-onnx: initializer '" + name + "' of '" + source +
              "': " + message;
      return false;
    };
    int type = onnxFloatType(value.dtype);
    if (!type)
      return fail("only float globals can be saved, this one is " +
                  std::string(floatName(value.dtype)));
    auto it = initializers.find(name);
    if (it == initializers.end())
      return fail("no initializer of that name");
    onnx::TensorProto &init = *it->second;
    std::vector<int64_t> dims(init.dims().begin(), init.dims().end());
    if (dims != value.shape)
      return fail("its shape is " + dimsString(dims) +
                  ", the trained value's " + dimsString(value.shape));
    if (init.data_type() != type)
      return fail("its element type is " + std::to_string(init.data_type()) +
                  " (TensorProto.DataType), the trained value is " +
                  floatName(value.dtype));
    init.clear_float_data();
    init.clear_double_data();
    init.clear_int32_data();
    init.clear_int64_data();
    init.clear_external_data();
    init.set_data_location(onnx::TensorProto::DEFAULT);
    init.set_raw_data(value.bytes.data(), value.bytes.size());
  }

  if (!model.SerializeToString(&bytes)) {
    error = "--save-onnx: cannot serialize the model of '" + source + "'";
    return false;
  }
  return true;
}
