//===- HostTensor.h - Tensors in host memory for the driver -----*- C++ -*-===//
//
// What the training driver reads from and writes to files (.npy, the data
// file, checkpoints, ONNX): dense row-major bytes with a dtype and a shape.
//
//===----------------------------------------------------------------------===//
#ifndef PP_RUNTIME_TRAIN_HOSTTENSOR_H
#define PP_RUNTIME_TRAIN_HOSTTENSOR_H

#include "pp/Runtime/Kernels.h"

#include <string>
#include <vector>

namespace pp::rt::train {

struct HostTensor {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<char> bytes;

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    return n;
  }
};

/// "[2, 3]".
std::string shapeString(const std::vector<int64_t> &shape);
/// "f32[2, 3]".
std::string describe(DType dtype, const std::vector<int64_t> &shape);

/// Parses the bytes of a C-order little-endian .npy file (f32, f64, f16,
/// i64, i32, i8, u8, u32, u64, bool; 2-byte void as bf16); false with
/// `error` naming the file (`path`) otherwise.
bool parseNpy(const std::string &path, const std::string &bytes,
              HostTensor &out, std::string &error);
/// Writes `bytes` (dtype, shape) as a version 1.0 .npy file.
bool writeNpy(const std::string &path, DType dtype,
              const std::vector<int64_t> &shape, const void *bytes,
              std::string &error);

} // namespace pp::rt::train

#endif // PP_RUNTIME_TRAIN_HOSTTENSOR_H
