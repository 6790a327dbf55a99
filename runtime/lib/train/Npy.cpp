//===- Npy.cpp - numpy .npy files without LLVM ------------------*- C++ -*-===//
//
// The training driver's .npy files, in the format of pp/Runtime/Npy.h
// (which pp-interpret reads and writes too), and shape strings.
//
//===----------------------------------------------------------------------===//

#include "HostTensor.h"
#include "Util.h"

#include "pp/Runtime/Npy.h"

#include <algorithm>

using namespace pp::rt;
using namespace pp::rt::train;

std::string pp::rt::train::shapeString(const std::vector<int64_t> &shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

std::string pp::rt::train::describe(DType dtype,
                                    const std::vector<int64_t> &shape) {
  return dtypeName(dtype) + shapeString(shape);
}

bool pp::rt::train::parseNpy(const std::string &path, const std::string &bytes,
                             HostTensor &out, std::string &error) {
  npy::Header header;
  if (!npy::parseHeader(bytes, header, error)) {
    error = "'" + path + "': " + error;
    return false;
  }
  out.dtype = header.dtype;
  out.shape = header.shape;
  out.bytes.assign(bytes.begin() + header.dataOffset, bytes.end());
  if (out.dtype == DType::Bool)
    npy::normalizeBools(reinterpret_cast<uint8_t *>(out.bytes.data()),
                        out.bytes.size());
  return true;
}

bool pp::rt::train::writeNpy(const std::string &path, DType dtype,
                             const std::vector<int64_t> &shape,
                             const void *data, std::string &error) {
  int64_t count = 1;
  for (int64_t d : shape)
    count *= d;
  std::string bytes = npy::serializeHeader(dtype, shape);
  bytes.append(static_cast<const char *>(data),
               static_cast<size_t>(count * dtypeSize(dtype)));
  return writeWholeFile(path, bytes, error);
}
