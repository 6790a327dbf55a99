//===- Npy.cpp - Read and write numpy .npy files ----------------*- C++ -*-===//
//
// Format: "\x93NUMPY", major and minor version bytes, the header length
// (2 bytes in version 1, 4 bytes in versions 2 and 3, little endian), then a
// Python dict literal such as
//   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
// padded with spaces and a newline, then the raw data.
//
// numpy has no bfloat16: BF16 tensors are written as 2-byte void ('|V2')
// holding the raw bits, and 2-byte void files ('|V2', or '<V2' as np.save
// writes ml_dtypes' bfloat16) read back as BF16. In numpy,
// `a.view(np.uint16)` gives the bits.
//
//===----------------------------------------------------------------------===//

#include "pp/Interpreter/Npy.h"
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

/// numpy's dtype string of a runtime dtype.
static const char *descrOf(rt::DType dtype) {
  switch (dtype) {
  case rt::DType::F32:
    return "<f4";
  case rt::DType::F64:
    return "<f8";
  case rt::DType::I64:
    return "<i8";
  case rt::DType::I32:
    return "<i4";
  case rt::DType::I8:
    return "|i1";
  case rt::DType::U8:
    return "|u1";
  case rt::DType::Bool:
    return "|b1";
  case rt::DType::F16:
    return "<f2";
  case rt::DType::BF16:
    return "|V2";
  case rt::DType::U32:
    return "<u4";
  case rt::DType::U64:
    return "<u8";
  }
  return "?";
}

static std::optional<rt::DType> dtypeOfDescr(StringRef descr) {
  // One-byte types may carry any byte-order character.
  if (descr.size() == 3 && (descr[0] == '|' || descr[0] == '<' ||
                            descr[0] == '>' || descr[0] == '=')) {
    StringRef code = descr.drop_front();
    if (code == "i1")
      return rt::DType::I8;
    if (code == "u1")
      return rt::DType::U8;
    if (code == "b1")
      return rt::DType::Bool;
  }
  if (descr == "<f4")
    return rt::DType::F32;
  if (descr == "<f8")
    return rt::DType::F64;
  if (descr == "<i8")
    return rt::DType::I64;
  if (descr == "<i4")
    return rt::DType::I32;
  if (descr == "<f2")
    return rt::DType::F16;
  if (descr == "<u4")
    return rt::DType::U32;
  if (descr == "<u8")
    return rt::DType::U64;
  // Void has no byte order: any prefix.
  if (descr.size() == 3 && descr.drop_front() == "V2")
    return rt::DType::BF16;
  return std::nullopt;
}

/// The text after `'key':` in the header dict, trimmed; empty when absent.
static StringRef dictValue(StringRef header, StringRef key) {
  std::string quoted = "'" + key.str() + "'";
  size_t at = header.find(quoted);
  if (at == StringRef::npos)
    return {};
  StringRef rest = header.drop_front(at + quoted.size()).ltrim();
  if (!rest.consume_front(":"))
    return {};
  return rest.ltrim();
}

llvm::Expected<Tensor> pp::interp::parseNpy(StringRef bytes) {
  if (!bytes.starts_with(StringRef("\x93NUMPY", 6)))
    return npyError("malformed .npy: missing the \\x93NUMPY magic");
  if (bytes.size() < 10)
    return npyError("malformed .npy: truncated header");
  uint8_t major = bytes[6];
  size_t headerLen, offset;
  if (major == 1) {
    headerLen = uint8_t(bytes[8]) | (size_t(uint8_t(bytes[9])) << 8);
    offset = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12)
      return npyError("malformed .npy: truncated header");
    headerLen = 0;
    for (int i = 0; i < 4; ++i)
      headerLen |= size_t(uint8_t(bytes[8 + i])) << (8 * i);
    offset = 12;
  } else {
    return npyError("unsupported .npy version " + llvm::Twine(int(major)));
  }
  if (bytes.size() - offset < headerLen)
    return npyError("malformed .npy: truncated header");
  StringRef header = bytes.substr(offset, headerLen);
  StringRef data = bytes.drop_front(offset + headerLen);

  StringRef descr = dictValue(header, "descr");
  if (descr.empty() || (descr[0] != '\'' && descr[0] != '"'))
    return npyError("malformed .npy: no 'descr' string in the header");
  char quote = descr[0];
  descr = descr.drop_front();
  descr = descr.take_until([&](char c) { return c == quote; });
  std::optional<rt::DType> dtype = dtypeOfDescr(descr);
  if (!dtype)
    return npyError("unsupported .npy dtype '" + descr +
                    "' (expected little-endian f4, f8, f2, i8, i4, i1, u8, "
                    "u4, u1, b1 or V2 for bfloat16)");

  StringRef fortran = dictValue(header, "fortran_order");
  if (fortran.starts_with("True"))
    return npyError(
        "Fortran-order .npy arrays are not supported (save a C-order "
        "array)");
  if (!fortran.starts_with("False"))
    return npyError("malformed .npy: no 'fortran_order' in the header");

  StringRef shapeText = dictValue(header, "shape");
  if (!shapeText.consume_front("("))
    return npyError("malformed .npy: no 'shape' tuple in the header");
  shapeText = shapeText.take_until([](char c) { return c == ')'; });
  std::vector<int64_t> shape;
  int64_t count = 1;
  while (!(shapeText = shapeText.trim()).empty()) {
    StringRef item;
    std::tie(item, shapeText) = shapeText.split(',');
    item = item.trim();
    if (item.empty())
      continue;
    int64_t dim;
    if (item.getAsInteger(10, dim) || dim < 0)
      return npyError("malformed .npy: bad dim '" + item + "' in the shape");
    // Bound the size before multiplying, so a hostile shape cannot overflow.
    if (dim != 0 && count > (int64_t(1) << 40) / dim)
      return npyError("malformed .npy: shape is too large");
    count *= dim;
    shape.push_back(dim);
  }

  size_t expected = size_t(count) * rt::dtypeSize(*dtype);
  if (data.size() != expected)
    return npyError("malformed .npy: data holds " + llvm::Twine(data.size()) +
                    " bytes, the header describes " + llvm::Twine(expected));
  Tensor tensor = Tensor::fromBytes(*dtype, shape, data.data());
  if (*dtype == rt::DType::Bool)
    for (int64_t i = 0; i < count; ++i)
      tensor.as<uint8_t>()[i] = tensor.as<uint8_t>()[i] != 0;
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
  std::string header = "{'descr': '";
  header += descrOf(tensor.dtype());
  header += "', 'fortran_order': False, 'shape': (";
  for (int64_t i = 0; i < tensor.rank(); ++i)
    header += (i ? ", " : "") + std::to_string(tensor.shape()[i]);
  if (tensor.rank() == 1)
    header += ","; // a 1-tuple
  header += ")";
  header += ", }";
  // Pad so that the data starts on a 64-byte boundary, as numpy does.
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';

  std::string bytes("\x93NUMPY\x01\x00", 8);
  bytes += char(header.size() & 0xff);
  bytes += char(header.size() >> 8);
  bytes += header;
  bytes.append(static_cast<const char *>(tensor.data()), tensor.bytes());
  return bytes;
}

llvm::Error pp::interp::writeNpy(StringRef path, const Tensor &tensor) {
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec, llvm::sys::fs::OF_None);
  if (ec)
    return llvm::createStringError(ec, "cannot write '" + path +
                                           "': " + ec.message());
  os << serializeNpy(tensor);
  os.close();
  if (os.has_error())
    return llvm::createStringError(os.error(), "cannot write '" + path + "'");
  return llvm::Error::success();
}
