//===- Npy.h - The numpy .npy format ----------------------------*- C++ -*-===//
//
// One reader and writer of .npy headers for every tool: pp-interpret (its
// tensors) and the training driver (--data inputs, --dump-globals) read and
// write the same files through it. No LLVM: generated programs link it.
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

#ifndef PP_RUNTIME_NPY_H
#define PP_RUNTIME_NPY_H

#include "pp/Runtime/Kernels.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace pp::rt::npy {

/// What a .npy file holds: a C-order array of `shape`, whose data starts at
/// `dataOffset` of the file's bytes.
struct Header {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  int64_t numElements = 1;
  size_t dataOffset = 0;
};

/// Parses the header of a .npy file's `bytes` and checks that the data that
/// follows is exactly what it describes (at most 2^40 elements). On failure,
/// `error` says what is malformed ("malformed .npy: ...").
bool parseHeader(std::string_view bytes, Header &out, std::string &error);

/// parseHeader of a file of `fileSize` bytes given its first bytes,
/// `prefix` (at least its header): the data need not be read to check it.
bool parseHeader(std::string_view prefix, uint64_t fileSize, Header &out,
                 std::string &error);

/// The most bytes before the data that parseHeader of a prefix reads
/// (numpy writes a few hundred): 1 MiB.
constexpr size_t kMaxHeaderBytes = size_t(1) << 20;

/// The bytes before the data of a version 1.0 file holding a C-order array
/// (`shape`, `dtype`), padded so that the data is 64-byte aligned as numpy
/// does.
std::string serializeHeader(DType dtype, const std::vector<int64_t> &shape);

/// numpy's bool is one byte, any non-zero value true: makes them 0 or 1, as
/// the kernels expect.
void normalizeBools(uint8_t *data, size_t count);

} // namespace pp::rt::npy

#endif // PP_RUNTIME_NPY_H
