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
#include <new>
#include <unistd.h>

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

bool pp::rt::train::readNpy(const std::string &path, HostTensor &out,
                            std::string &error) {
  int64_t size = 0;
  int fd = openRegularFile(path, size, error);
  if (fd < 0)
    return false;
  // The header first (numpy's are a few hundred bytes): the data's size is
  // known before any of it is allocated or read.
  std::string prefix(
      static_cast<size_t>(std::min<int64_t>(size, npy::kMaxHeaderBytes)), '\0');
  npy::Header header;
  bool ok = readFully(fd, path, 0, prefix.data(), prefix.size(), error);
  if (ok && !npy::parseHeader(prefix, size, header, error)) {
    error = "'" + path + "': " + error;
    ok = false;
  }
  int64_t dataBytes = size - static_cast<int64_t>(header.dataOffset);
  int64_t available = ok ? availableMemoryBytes() : -1;
  if (ok && available >= 0 && dataBytes > available) {
    error = "'" + path + "' holds " + describe(header.dtype, header.shape) +
            ": " + std::to_string(dataBytes) + " bytes (" +
            byteSize(dataBytes) + ") to load, more than the " +
            byteSize(available) +
            " of memory available (a --data file is loaded whole)";
    ok = false;
  }
  if (ok) {
    try {
      out.bytes.resize(static_cast<size_t>(dataBytes));
    } catch (const std::bad_alloc &) {
      error = "'" + path + "' holds " + describe(header.dtype, header.shape) +
              ": cannot allocate the " + std::to_string(dataBytes) +
              " bytes (" + byteSize(dataBytes) + ") to load it";
      ok = false;
    }
  }
  ok = ok && readFully(fd, path, static_cast<int64_t>(header.dataOffset),
                       out.bytes.data(), dataBytes, error);
  close(fd);
  if (!ok) {
    out.bytes = {};
    return false;
  }
  out.dtype = header.dtype;
  out.shape = header.shape;
  if (out.dtype == DType::Bool)
    npy::normalizeBools(reinterpret_cast<uint8_t *>(out.bytes.data()),
                        out.bytes.size());
  return true;
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
