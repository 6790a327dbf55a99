//===- HostTensor.cpp - Owning host tensors of onnx values ---------------===//
//
// The interpreter's value buffers and the code generator's constant data
// both come from here, so both read an elements attribute the same way.
//
//===----------------------------------------------------------------------===//

#include "pp/Dialect/ONNX/Utils/HostTensor.h"

#include "pp/Dialect/ONNX/Utils/KernelParams.h"
#include "pp/Runtime/Half.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectResourceBlobManager.h"

#include <algorithm>
#include <cassert>
#include <cstring>

using namespace mlir;
namespace rt = pp::rt;

namespace pp::onnx {

HostTensor::HostTensor(rt::DType dtype, ArrayRef<int64_t> shape) {
  view_.dtype = dtype;
  view_.shape.assign(shape.begin(), shape.end());
  // Whole 8-byte words keep every dtype aligned; zero-filled by `()`.
  size_t words = (static_cast<size_t>(view_.bytes()) + 7) / 8;
  storage_ =
      std::shared_ptr<uint64_t[]>(new uint64_t[std::max<size_t>(words, 1)]());
  view_.data = storage_.get();
}

HostTensor HostTensor::fromBytes(rt::DType dtype, ArrayRef<int64_t> shape,
                                 const void *bytes) {
  HostTensor t(dtype, shape);
  if (t.bytes() > 0)
    std::memcpy(t.data(), bytes, t.bytes());
  return t;
}

HostTensor HostTensor::clone() const {
  if (!storage_)
    return *this;
  return fromBytes(dtype(), shape(), data());
}

HostTensor HostTensor::reshaped(ArrayRef<int64_t> shape) const {
  HostTensor t = *this;
  t.view_.shape.assign(shape.begin(), shape.end());
  assert(t.numel() == numel() && "reshape changes the element count");
  return t;
}

void HostTensor::detach() {
  if (isShared())
    *this = clone();
}

double HostTensor::getDouble(int64_t i) const {
  switch (dtype()) {
  case rt::DType::F32:
    return as<float>()[i];
  case rt::DType::F64:
    return as<double>()[i];
  case rt::DType::F16:
    return rt::halfToFloat(as<uint16_t>()[i]);
  case rt::DType::BF16:
    return rt::bfloat16ToFloat(as<uint16_t>()[i]);
  case rt::DType::U64:
    return static_cast<double>(as<uint64_t>()[i]);
  default:
    return static_cast<double>(getInt(i));
  }
}

int64_t HostTensor::getInt(int64_t i) const {
  switch (dtype()) {
  case rt::DType::F32:
    return static_cast<int64_t>(as<float>()[i]);
  case rt::DType::F64:
    return static_cast<int64_t>(as<double>()[i]);
  case rt::DType::I64:
    return as<int64_t>()[i];
  case rt::DType::I32:
    return as<int32_t>()[i];
  case rt::DType::I8:
    return as<int8_t>()[i];
  case rt::DType::U8:
    return as<uint8_t>()[i];
  case rt::DType::Bool:
    return as<uint8_t>()[i] != 0;
  case rt::DType::U32:
    return as<uint32_t>()[i];
  case rt::DType::U64:
    // Wraps beyond INT64_MAX.
    return static_cast<int64_t>(as<uint64_t>()[i]);
  case rt::DType::I16:
    return as<int16_t>()[i];
  case rt::DType::U16:
    return as<uint16_t>()[i];
  case rt::DType::F16:
  case rt::DType::BF16:
    return static_cast<int64_t>(getDouble(i));
  }
  return 0;
}

std::vector<int64_t> HostTensor::toInts() const {
  std::vector<int64_t> values;
  values.reserve(numel());
  for (int64_t i = 0, e = numel(); i < e; ++i)
    values.push_back(getInt(i));
  return values;
}

FailureOr<HostTensor> decodeElements(Location loc, ElementsAttr value) {
  auto type = cast<ShapedType>(value.getType());
  std::optional<rt::DType> dtype = getDType(type.getElementType());
  if (!dtype || !type.hasStaticShape())
    return emitError(loc) << "the interpreter does not support constants of "
                             "type "
                          << type,
           failure();
  HostTensor tensor(*dtype, type.getShape());
  size_t bytes = tensor.bytes();
  auto *out = static_cast<char *>(tensor.data());

  if (auto dense = dyn_cast<DenseElementsAttr>(value)) {
    // Bools are bit-packed in MLIR's storage: go through the element values.
    if (*dtype == rt::DType::Bool) {
      int64_t i = 0;
      for (bool b : dense.getValues<bool>())
        out[i++] = b;
      return tensor;
    }
    ArrayRef<char> raw = dense.getRawData();
    size_t width = rt::dtypeSize(*dtype);
    if (dense.isSplat()) {
      if (raw.size() < width)
        return emitError(loc) << "malformed splat constant", failure();
      for (size_t offset = 0; offset < bytes; offset += width)
        std::memcpy(out + offset, raw.data(), width);
      return tensor;
    }
    if (raw.size() != bytes)
      return emitError(loc) << "constant holds " << raw.size()
                            << " bytes, expected " << bytes << " for " << type,
             failure();
    std::memcpy(out, raw.data(), bytes);
    return tensor;
  }

  if (auto resource = dyn_cast<DenseResourceElementsAttr>(value)) {
    const AsmResourceBlob *blob = resource.getRawHandle().getBlob();
    if (!blob)
      return emitError(loc)
                 << "the data of resource '" << resource.getRawHandle().getKey()
                 << "' is not available (elided from the IR, or imported "
                    "with --shape-only: plan such a model, do not run it)",
             failure();
    ArrayRef<char> data = blob->getData();
    if (data.size() != bytes)
      return emitError(loc) << "resource '" << resource.getRawHandle().getKey()
                            << "' holds " << data.size() << " bytes, expected "
                            << bytes << " for " << type,
             failure();
    std::memcpy(out, data.data(), bytes);
    if (*dtype == rt::DType::Bool)
      for (size_t i = 0; i < bytes; ++i)
        out[i] = out[i] != 0;
    return tensor;
  }
  return emitError(loc) << "the interpreter cannot read constant " << value,
         failure();
}

} // namespace pp::onnx
