//===- Common.cpp - Shared helpers of the CPU kernels -----------*- C++ -*-===//

#include "Common.h"

#include <algorithm>
#include <cmath>
#include <thread>

namespace pp::rt {

int64_t dtypeSize(DType dtype) {
  switch (dtype) {
  case DType::F64:
  case DType::I64:
  case DType::U64:
    return 8;
  case DType::F32:
  case DType::I32:
  case DType::U32:
    return 4;
  case DType::F16:
  case DType::BF16:
    return 2;
  case DType::I8:
  case DType::U8:
  case DType::Bool:
    return 1;
  }
  return 0;
}

const char *dtypeName(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return "f32";
  case DType::F64:
    return "f64";
  case DType::I64:
    return "i64";
  case DType::I32:
    return "i32";
  case DType::I8:
    return "i8";
  case DType::U8:
    return "u8";
  case DType::Bool:
    return "bool";
  case DType::F16:
    return "f16";
  case DType::BF16:
    return "bf16";
  case DType::U32:
    return "u32";
  case DType::U64:
    return "u64";
  }
  return "?";
}

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

} // namespace pp::rt

namespace pp::rt::cpu {

std::vector<int64_t> stridesOf(const std::vector<int64_t> &shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (int64_t i = static_cast<int64_t>(shape.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * shape[i + 1];
  return strides;
}

bool broadcastShapes(const std::vector<int64_t> &a,
                     const std::vector<int64_t> &b, std::vector<int64_t> &out) {
  size_t rank = std::max(a.size(), b.size());
  out.assign(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      return false;
    out[i] = da == 1 ? db : da;
  }
  return true;
}

std::vector<int64_t> broadcastStrides(const std::vector<int64_t> &shape,
                                      const std::vector<int64_t> &target) {
  std::vector<int64_t> own = stridesOf(shape);
  std::vector<int64_t> result(target.size(), 0);
  size_t offset = target.size() - shape.size();
  for (size_t i = 0; i < shape.size(); ++i)
    result[i + offset] = shape[i] == 1 ? 0 : own[i];
  return result;
}

std::string shapeString(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

void parallelFor(const Context &ctx, int64_t n, int64_t grain,
                 const std::function<void(int64_t, int64_t)> &body) {
  int64_t threads = std::min<int64_t>(ctx.numThreads, n / std::max<int64_t>(grain, 1));
  if (threads <= 1) {
    if (n > 0)
      body(0, n);
    return;
  }
  std::vector<std::thread> workers;
  int64_t chunk = (n + threads - 1) / threads;
  for (int64_t t = 1; t < threads; ++t) {
    int64_t begin = t * chunk, end = std::min(n, begin + chunk);
    if (begin < end)
      workers.emplace_back(body, begin, end);
  }
  body(0, std::min(n, chunk));
  for (std::thread &worker : workers)
    worker.join();
}

Status expectDType(const Tensor &t, DType dtype, const char *what) {
  if (t.dtype != dtype)
    return Status::error(std::string(what) + ": expected dtype " +
                         dtypeName(dtype) + ", got " + dtypeName(t.dtype));
  if (!t.data && t.numel() > 0)
    return Status::error(std::string(what) + ": null data");
  return Status::success();
}

Status expectShape(const Tensor &t, const std::vector<int64_t> &shape,
                   const char *what) {
  if (t.shape != shape)
    return Status::error(std::string(what) + ": expected shape " +
                         shapeString(shape) + ", got " + shapeString(t.shape));
  if (!t.data && t.numel() > 0)
    return Status::error(std::string(what) + ": null data");
  return Status::success();
}

int64_t readInt(const Tensor &t, int64_t i) {
  switch (t.dtype) {
  case DType::I64:
    return t.as<int64_t>()[i];
  case DType::I32:
    return t.as<int32_t>()[i];
  case DType::I8:
    return t.as<int8_t>()[i];
  case DType::U8:
    return t.as<uint8_t>()[i];
  case DType::Bool:
    return t.as<uint8_t>()[i] != 0;
  case DType::U32:
    return t.as<uint32_t>()[i];
  case DType::U64:
    return static_cast<int64_t>(t.as<uint64_t>()[i]);
  case DType::F32:
    return static_cast<int64_t>(t.as<float>()[i]);
  case DType::F64:
    return static_cast<int64_t>(t.as<double>()[i]);
  case DType::F16:
  case DType::BF16:
    return convertDouble<int64_t>(readDouble(t, i));
  }
  return 0;
}

double readDouble(const Tensor &t, int64_t i) {
  switch (t.dtype) {
  case DType::F32:
    return t.as<float>()[i];
  case DType::F64:
    return t.as<double>()[i];
  case DType::F16:
    return halfToFloat(t.as<uint16_t>()[i]);
  case DType::BF16:
    return bfloat16ToFloat(t.as<uint16_t>()[i]);
  case DType::U64:
    return static_cast<double>(t.as<uint64_t>()[i]);
  default:
    return static_cast<double>(readInt(t, i));
  }
}

void writeDouble(Tensor &t, int64_t i, double value) {
  switch (t.dtype) {
  case DType::F32:
    t.as<float>()[i] = static_cast<float>(value);
    break;
  case DType::F64:
    t.as<double>()[i] = value;
    break;
  case DType::I64:
    t.as<int64_t>()[i] = static_cast<int64_t>(value);
    break;
  case DType::I32:
    t.as<int32_t>()[i] = static_cast<int32_t>(value);
    break;
  case DType::I8:
    t.as<int8_t>()[i] = static_cast<int8_t>(value);
    break;
  case DType::U8:
    t.as<uint8_t>()[i] = static_cast<uint8_t>(value);
    break;
  case DType::Bool:
    t.as<uint8_t>()[i] = value != 0;
    break;
  case DType::U32:
    t.as<uint32_t>()[i] = convertDouble<uint32_t>(value);
    break;
  case DType::U64:
    t.as<uint64_t>()[i] = convertDouble<uint64_t>(value);
    break;
  case DType::F16:
    t.as<uint16_t>()[i] = doubleToHalf(value);
    break;
  case DType::BF16:
    t.as<uint16_t>()[i] = doubleToBFloat16(value);
    break;
  }
}

Status expectValid(const Tensor &t, const char *what) {
  for (int64_t d : t.shape)
    if (d < 0)
      return Status::error(std::string(what) + ": negative dim in shape " +
                           shapeString(t.shape));
  if (!t.data && t.numel() > 0)
    return Status::error(std::string(what) + ": null data");
  return Status::success();
}

bool normalizeAxis(int64_t &axis, int64_t rank) {
  if (axis < -rank || axis >= rank)
    return false;
  if (axis < 0)
    axis += rank;
  return true;
}

} // namespace pp::rt::cpu
