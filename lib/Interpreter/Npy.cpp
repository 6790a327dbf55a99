//===- Npy.cpp - Read and write numpy .npy files ----------------*- C++ -*-===//
//
// Tensors of pp-interpret in the format of pp/Runtime/Npy.h, which the
// training driver reads and writes too.
//
//===----------------------------------------------------------------------===//

#include "pp/Interpreter/Npy.h"
#include "pp/Runtime/Npy.h"
#include "pp/Support/FileOutput.h"
#include "pp/Support/InputLimits.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <cstring>

using namespace pp::interp;
namespace rt = pp::rt;
using llvm::StringRef;

/// An error reading a .npy file.
static llvm::Error npyError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

llvm::Expected<Tensor> pp::interp::parseNpy(StringRef bytes) {
  rt::npy::Header header;
  std::string error;
  if (!rt::npy::parseHeader(std::string_view(bytes.data(), bytes.size()),
                            header, error))
    return npyError(error);
  Tensor tensor = Tensor::fromBytes(header.dtype, header.shape,
                                    bytes.data() + header.dataOffset);
  if (header.dtype == rt::DType::Bool)
    rt::npy::normalizeBools(tensor.as<uint8_t>(), header.numElements);
  return tensor;
}

llvm::Expected<Tensor> pp::interp::readNpy(StringRef path) {
  auto buffer =
      pp::limits::readRegularFile(path, pp::limits::kMaxNpyFileBytes, ".npy");
  if (!buffer)
    return buffer.takeError();
  auto tensor = parseNpy((*buffer)->getBuffer());
  if (!tensor)
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "'" + path + "': " + llvm::toString(tensor.takeError()));
  return tensor;
}

std::string pp::interp::serializeNpy(const Tensor &tensor) {
  std::string bytes = rt::npy::serializeHeader(
      tensor.dtype(),
      std::vector<int64_t>(tensor.shape().begin(), tensor.shape().end()));
  bytes.append(static_cast<const char *>(tensor.data()), tensor.bytes());
  return bytes;
}

llvm::Error pp::interp::writeNpy(StringRef path, const Tensor &tensor) {
  return pp::writeFileContents(path, serializeNpy(tensor));
}
