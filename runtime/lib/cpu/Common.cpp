//===- Common.cpp - Shared helpers of the CPU kernels -----------*- C++ -*-===//

#include "Common.h"

#include <algorithm>
#include <cmath>
#include <thread>

namespace pp::rt::cpu {

void parallelFor(const Context &ctx, int64_t n, int64_t grain,
                 const std::function<void(int64_t, int64_t)> &body) {
  int64_t threads =
      std::min<int64_t>(ctx.numThreads, n / std::max<int64_t>(grain, 1));
  if (threads <= 1) {
    if (n > 0)
      body(0, n);
    return;
  }
  int64_t chunk = (n + threads - 1) / threads;
#ifdef PP_RUNTIME_HAVE_DNNL
  // OpenMP's team is the pool oneDNN's kernels run on: one pool of threads
  // that persist (a thread per call costs 20-50 us, and raced the previous
  // oneDNN call's spinning workers for the cores; Dnnl.h).
#pragma omp parallel for num_threads(threads) schedule(static, 1)
  for (int64_t t = 0; t < threads; ++t) {
    int64_t begin = t * chunk, end = std::min(n, begin + chunk);
    if (begin < end)
      body(begin, end);
  }
#else
  std::vector<std::thread> workers;
  for (int64_t t = 1; t < threads; ++t) {
    int64_t begin = t * chunk, end = std::min(n, begin + chunk);
    if (begin < end)
      workers.emplace_back(body, begin, end);
  }
  body(0, std::min(n, chunk));
  for (std::thread &worker : workers)
    worker.join();
#endif
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
  case DType::I16:
    return t.as<int16_t>()[i];
  case DType::U16:
    return t.as<uint16_t>()[i];
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
  case DType::I16:
    t.as<int16_t>()[i] = convertDouble<int16_t>(value);
    break;
  case DType::U16:
    t.as<uint16_t>()[i] = convertDouble<uint16_t>(value);
    break;
  case DType::F16:
    t.as<uint16_t>()[i] = doubleToHalf(value);
    break;
  case DType::BF16:
    t.as<uint16_t>()[i] = doubleToBFloat16(value);
    break;
  }
}

namespace {

/// Elements per thread of the widening and narrowing loops.
constexpr int64_t kConvertGrain = int64_t(1) << 15;

} // namespace

Tensor &Float16Widening::widen(const Tensor &t, bool read, bool write) {
  Slot &slot = slots.emplace_back();
  slot.wide = t;
  slot.wide.dtype = DType::F32;
  // A tensor that the kernel's checks reject (a negative dim, no data) or
  // that holds nothing keeps its data pointer: there is nothing to convert.
  bool valid = std::none_of(t.shape.begin(), t.shape.end(),
                            [](int64_t d) { return d < 0; });
  int64_t n = valid ? t.numel() : 0;
  if (n == 0 || !t.data)
    return slot.wide;
  slot.buffer.reset(new float[n]);
  float *wide = slot.buffer.get();
  slot.wide.data = wide;
  if (read) {
    const uint16_t *bits = t.as<const uint16_t>();
    bool isBF16 = t.dtype == DType::BF16;
    parallelFor(ctx, n, kConvertGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        wide[i] = float16ToFloat(bits[i], isBF16);
    });
  }
  if (write)
    slot.narrow = t;
  return slot.wide;
}

Status Float16Widening::finish(Status status) {
  if (!status.ok()) {
    status.message += " (16-bit float operands computed as f32)";
    return status;
  }
  for (Slot &slot : slots) {
    if (!slot.narrow.data || !slot.buffer)
      continue;
    const float *wide = slot.buffer.get();
    uint16_t *bits = slot.narrow.as<uint16_t>();
    bool isBF16 = slot.narrow.dtype == DType::BF16;
    parallelFor(ctx, slot.narrow.numel(), kConvertGrain,
                [&](int64_t begin, int64_t end) {
                  if (isBF16)
                    for (int64_t i = begin; i < end; ++i)
                      bits[i] = floatToBFloat16(wide[i]);
                  else
                    for (int64_t i = begin; i < end; ++i)
                      bits[i] = floatToHalf(wide[i]);
                });
  }
  return status;
}

} // namespace pp::rt::cpu
