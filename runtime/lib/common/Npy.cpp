//===- Npy.cpp - The numpy .npy format --------------------------*- C++ -*-===//

#include "pp/Runtime/Npy.h"

#include <charconv>

using namespace pp::rt;
using std::string_view;

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
  case DType::I16:
    return "<i2";
  case DType::U16:
    return "<u2";
  }
  return "?";
}

bool dtypeOfDescr(string_view descr, DType &dtype) {
  // One-byte types and void carry any byte-order character.
  if (descr.size() == 3 &&
      string_view("|<>=").find(descr[0]) != string_view::npos) {
    string_view code = descr.substr(1);
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
      {"<u8", DType::U64}, {"<i2", DType::I16}, {"<u2", DType::U16}};
  for (const auto &[name, type] : table)
    if (descr == name)
      return dtype = type, true;
  return false;
}

string_view trim(string_view s) {
  size_t b = s.find_first_not_of(" \t\n");
  if (b == string_view::npos)
    return {};
  return s.substr(b, s.find_last_not_of(" \t\n") - b + 1);
}

/// The text after `'key':` in the header dict, left-trimmed; empty when
/// absent.
string_view dictValue(string_view header, string_view key) {
  std::string quoted(1, '\'');
  quoted.append(key).push_back('\'');
  size_t at = header.find(quoted);
  if (at == string_view::npos)
    return {};
  string_view rest = header.substr(at + quoted.size());
  rest.remove_prefix(std::min(rest.size(), rest.find_first_not_of(" \t")));
  if (rest.empty() || rest[0] != ':')
    return {};
  rest.remove_prefix(1);
  rest.remove_prefix(std::min(rest.size(), rest.find_first_not_of(" \t")));
  return rest;
}

} // namespace

bool npy::parseHeader(string_view bytes, Header &out, std::string &error) {
  return parseHeader(bytes, bytes.size(), out, error);
}

bool npy::parseHeader(string_view bytes, uint64_t fileSize, Header &out,
                      std::string &error) {
  auto fail = [&](std::string message) {
    error = std::move(message);
    return false;
  };
  if (fileSize < bytes.size())
    return fail("malformed .npy: truncated header");
  if (bytes.substr(0, 6) != string_view("\x93NUMPY", 6))
    return fail("malformed .npy: missing the \\x93NUMPY magic");
  if (bytes.size() < 10)
    return fail("malformed .npy: truncated header");
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
  string_view header = bytes.substr(offset, headerLen);

  string_view descr = dictValue(header, "descr");
  if (descr.empty() || (descr[0] != '\'' && descr[0] != '"'))
    return fail("malformed .npy: no 'descr' string in the header");
  descr = descr.substr(1, descr.find(descr[0], 1) - 1);
  if (!dtypeOfDescr(descr, out.dtype))
    return fail("unsupported .npy dtype '" + std::string(descr) +
                "' (expected little-endian f4, f8, f2, i8, i4, i1, u8, u4, "
                "u1, b1 or V2 for bfloat16)");

  string_view fortran = dictValue(header, "fortran_order");
  if (fortran.substr(0, 4) == "True")
    return fail("Fortran-order .npy arrays are not supported (save a C-order "
                "array)");
  if (fortran.substr(0, 5) != "False")
    return fail("malformed .npy: no 'fortran_order' in the header");

  string_view shapeText = dictValue(header, "shape");
  if (shapeText.empty() || shapeText[0] != '(')
    return fail("malformed .npy: no 'shape' tuple in the header");
  shapeText = shapeText.substr(1, shapeText.find(')') - 1);
  out.shape.clear();
  out.numElements = 1;
  while (!(shapeText = trim(shapeText)).empty()) {
    size_t comma = shapeText.find(',');
    string_view item = trim(shapeText.substr(0, comma));
    shapeText = comma == string_view::npos ? string_view()
                                           : shapeText.substr(comma + 1);
    if (item.empty())
      continue;
    int64_t dim = 0;
    auto [end, ec] =
        std::from_chars(item.data(), item.data() + item.size(), dim);
    if (ec != std::errc() || end != item.data() + item.size() || dim < 0)
      return fail("malformed .npy: bad dim '" + std::string(item) +
                  "' in the shape");
    // Bound the size before multiplying, so a hostile shape cannot overflow.
    if (dim != 0 && out.numElements > (int64_t(1) << 40) / dim)
      return fail("malformed .npy: the shape is too large");
    out.numElements *= dim;
    out.shape.push_back(dim);
  }

  size_t expected = size_t(out.numElements) * size_t(dtypeSize(out.dtype));
  uint64_t available = fileSize - offset - headerLen;
  if (available != expected)
    return fail("malformed .npy: the data holds " + std::to_string(available) +
                " bytes, the header describes " + std::to_string(expected));
  out.dataOffset = offset + headerLen;
  return true;
}

std::string npy::serializeHeader(DType dtype,
                                 const std::vector<int64_t> &shape) {
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
  std::string bytes("\x93NUMPY\x01\x00", 8);
  bytes += char(header.size() & 0xff);
  bytes += char(header.size() >> 8);
  return bytes + header;
}

void npy::normalizeBools(uint8_t *data, size_t count) {
  for (size_t i = 0; i < count; ++i)
    data[i] = data[i] != 0;
}
