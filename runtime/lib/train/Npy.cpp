//===- Npy.cpp - numpy .npy files without LLVM ------------------*- C++ -*-===//
//
// The runtime's copy of lib/Interpreter/Npy.cpp (which uses LLVM): the same
// dtype strings, header layout and 64-byte data alignment, so files written
// here read back in pp-interpret and numpy and the other way round.
//
//===----------------------------------------------------------------------===//

#include "HostTensor.h"
#include "Util.h"

#include <cstring>

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

namespace {

const char *descrOf(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return "<f4";
  case DType::F64:
    return "<f8";
  case DType::I64:
    return "<i8";
  case DType::I32:
    return "<i4";
  case DType::I8:
    return "|i1";
  case DType::U8:
    return "|u1";
  case DType::Bool:
    return "|b1";
  case DType::F16:
    return "<f2";
  case DType::BF16:
    return "|V2";
  case DType::U32:
    return "<u4";
  case DType::U64:
    return "<u8";
  }
  return "?";
}

bool dtypeOfDescr(const std::string &descr, DType &dtype) {
  // One-byte types and void may carry any byte-order character.
  if (descr.size() == 3 && std::strchr("|<>=", descr[0])) {
    std::string code = descr.substr(1);
    if (code == "i1")
      return dtype = DType::I8, true;
    if (code == "u1")
      return dtype = DType::U8, true;
    if (code == "b1")
      return dtype = DType::Bool, true;
    if (code == "V2")
      return dtype = DType::BF16, true;
  }
  static const std::pair<const char *, DType> table[] = {
      {"<f4", DType::F32}, {"<f8", DType::F64}, {"<i8", DType::I64},
      {"<i4", DType::I32}, {"<f2", DType::F16}, {"<u4", DType::U32},
      {"<u8", DType::U64}};
  for (const auto &[name, type] : table)
    if (descr == name)
      return dtype = type, true;
  return false;
}

std::string trimLeft(const std::string &s, size_t from) {
  while (from < s.size() && (s[from] == ' ' || s[from] == '\t'))
    ++from;
  return s.substr(from);
}

/// The text after `'key':` in the header dict; empty when absent.
std::string dictValue(const std::string &header, const std::string &key) {
  size_t at = header.find("'" + key + "'");
  if (at == std::string::npos)
    return {};
  std::string rest = trimLeft(header, at + key.size() + 2);
  if (rest.empty() || rest[0] != ':')
    return {};
  return trimLeft(rest, 1);
}

} // namespace

bool pp::rt::train::readNpy(const std::string &path, HostTensor &out,
                            std::string &error) {
  std::string bytes;
  return readRegularFile(path, bytes, error) &&
         parseNpy(path, bytes, out, error);
}

bool pp::rt::train::parseNpy(const std::string &path, const std::string &bytes,
                             HostTensor &out, std::string &error) {
  auto fail = [&](const std::string &message) {
    error = "'" + path + "': " + message;
    return false;
  };
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0)
    return fail("not a .npy file (no \\x93NUMPY magic)");
  auto byteAt = [&](size_t i) { return size_t(uint8_t(bytes[i])); };
  size_t headerLen, offset;
  int major = static_cast<int>(byteAt(6));
  if (major == 1) {
    headerLen = byteAt(8) | byteAt(9) << 8;
    offset = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12)
      return fail("malformed .npy: truncated header");
    headerLen =
        byteAt(8) | byteAt(9) << 8 | byteAt(10) << 16 | byteAt(11) << 24;
    offset = 12;
  } else {
    return fail("unsupported .npy version " + std::to_string(major));
  }
  if (bytes.size() - offset < headerLen)
    return fail("malformed .npy: truncated header");
  std::string header = bytes.substr(offset, headerLen);

  std::string descr = dictValue(header, "descr");
  if (descr.empty() || (descr[0] != '\'' && descr[0] != '"'))
    return fail("malformed .npy: no 'descr' string in the header");
  size_t close = descr.find(descr[0], 1);
  descr = descr.substr(1, close == std::string::npos ? close : close - 1);
  if (!dtypeOfDescr(descr, out.dtype))
    return fail("unsupported .npy dtype '" + descr +
                "' (expected little-endian f4, f8, f2, i8, i4, i1, u8, u4, "
                "u1, b1 or V2 for bfloat16)");

  std::string fortran = dictValue(header, "fortran_order");
  if (fortran.rfind("True", 0) == 0)
    return fail("Fortran-order arrays are not supported (save a C-order "
                "array)");
  if (fortran.rfind("False", 0) != 0)
    return fail("malformed .npy: no 'fortran_order' in the header");

  std::string shapeText = dictValue(header, "shape");
  if (shapeText.empty() || shapeText[0] != '(')
    return fail("malformed .npy: no 'shape' tuple in the header");
  shapeText = shapeText.substr(1, shapeText.find(')') - 1);
  out.shape.clear();
  int64_t count = 1;
  size_t pos = 0;
  while (pos <= shapeText.size()) {
    size_t comma = shapeText.find(',', pos);
    std::string item = shapeText.substr(
        pos, comma == std::string::npos ? std::string::npos : comma - pos);
    pos = comma == std::string::npos ? shapeText.size() + 1 : comma + 1;
    size_t b = item.find_first_not_of(" \t"), e = item.find_last_not_of(" \t");
    if (b == std::string::npos)
      continue;
    item = item.substr(b, e - b + 1);
    char *end = nullptr;
    long long dim = std::strtoll(item.c_str(), &end, 10);
    if (*end || dim < 0)
      return fail("malformed .npy: bad dim '" + item + "' in the shape");
    // Bound the size before multiplying, so a hostile shape cannot overflow.
    if (dim != 0 && count > (int64_t(1) << 40) / dim)
      return fail("malformed .npy: the shape is too large");
    count *= dim;
    out.shape.push_back(dim);
  }

  size_t expected = size_t(count) * size_t(dtypeSize(out.dtype));
  size_t available = bytes.size() - offset - headerLen;
  if (available != expected)
    return fail("malformed .npy: the data holds " + std::to_string(available) +
                " bytes, the header describes " + std::to_string(expected));
  out.bytes.assign(bytes.begin() + offset + headerLen, bytes.end());
  if (out.dtype == DType::Bool)
    for (char &b : out.bytes)
      b = b != 0;
  return true;
}

bool pp::rt::train::writeNpy(const std::string &path, DType dtype,
                             const std::vector<int64_t> &shape,
                             const void *data, std::string &error) {
  std::string header = "{'descr': '";
  header += descrOf(dtype);
  header += "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < shape.size(); ++i)
    header += (i ? ", " : "") + std::to_string(shape[i]);
  if (shape.size() == 1)
    header += ","; // a 1-tuple
  header += "), }";
  // Pad so that the data starts on a 64-byte boundary, as numpy does.
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';

  int64_t count = 1;
  for (int64_t d : shape)
    count *= d;
  std::string bytes("\x93NUMPY\x01\x00", 8);
  bytes += char(header.size() & 0xff);
  bytes += char(header.size() >> 8);
  bytes += header;
  bytes.append(static_cast<const char *>(data),
               static_cast<size_t>(count * dtypeSize(dtype)));
  return writeWholeFile(path, bytes, error);
}
