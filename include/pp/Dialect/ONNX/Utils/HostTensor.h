//===- HostTensor.h - Owning host tensors of onnx values --------*- C++ -*-===//
//
// An owning dense row-major tensor in host memory over the runtime's kernel
// view, and the decoding of an elements attribute (an `onnx.constant` value
// or a global's initial value) into one. The interpreter computes on these;
// the code generator decodes constants and initial values with them into the
// program's data file.
//
//===----------------------------------------------------------------------===//

#ifndef PP_DIALECT_ONNX_UTILS_HOSTTENSOR_H
#define PP_DIALECT_ONNX_UTILS_HOSTTENSOR_H

#include "pp/Runtime/Kernels.h"

#include "mlir/IR/BuiltinAttributeInterfaces.h"
#include "mlir/IR/Location.h"
#include "mlir/Support/LLVM.h"
#include "llvm/ADT/ArrayRef.h"

#include <cstdint>
#include <memory>
#include <vector>

namespace pp::onnx {

/// An owning dense row-major tensor. Copies share the buffer; `detach` gives
/// a private buffer before an in-place update (copy-on-write).
class HostTensor {
public:
  /// A rank-0 f32 tensor without storage, until a value is assigned.
  HostTensor() = default;
  /// A zero-filled tensor.
  HostTensor(rt::DType dtype, llvm::ArrayRef<int64_t> shape);

  /// A tensor holding a copy of `bytes` (which must be `dtype`/`shape`-sized).
  static HostTensor fromBytes(rt::DType dtype, llvm::ArrayRef<int64_t> shape,
                              const void *bytes);
  template <typename T>
  static HostTensor fromValues(rt::DType dtype, llvm::ArrayRef<int64_t> shape,
                               llvm::ArrayRef<T> values) {
    return fromBytes(dtype, shape, values.data());
  }

  rt::DType dtype() const { return view_.dtype; }
  llvm::ArrayRef<int64_t> shape() const { return view_.shape; }
  int64_t rank() const { return view_.rank(); }
  int64_t numel() const { return view_.numel(); }
  int64_t bytes() const { return view_.bytes(); }
  bool hasStorage() const { return storage_ != nullptr; }

  void *data() { return view_.data; }
  const void *data() const { return view_.data; }
  template <typename T> T *as() { return static_cast<T *>(view_.data); }
  template <typename T> const T *as() const {
    return static_cast<const T *>(view_.data);
  }

  /// The non-owning kernel view of this tensor.
  rt::Tensor &view() { return view_; }
  const rt::Tensor &view() const { return view_; }

  /// A deep copy.
  HostTensor clone() const;
  /// The same buffer seen with another shape of as many elements.
  HostTensor reshaped(llvm::ArrayRef<int64_t> shape) const;
  /// Whether another HostTensor shares this buffer.
  bool isShared() const { return storage_ && storage_.use_count() > 1; }
  /// Makes the buffer private (copies it when shared).
  void detach();

  /// Element i converted to double / int64 (any dtype).
  double getDouble(int64_t i) const;
  int64_t getInt(int64_t i) const;
  /// All elements as int64 (for shape-like operands).
  std::vector<int64_t> toInts() const;

private:
  std::shared_ptr<uint64_t[]> storage_;
  rt::Tensor view_;
};

/// Decodes an elements attribute (dense, splat or dense resource) into a
/// tensor; emits an error at `loc` when unsupported or unreadable.
mlir::FailureOr<HostTensor> decodeElements(mlir::Location loc,
                                           mlir::ElementsAttr value);

} // namespace pp::onnx

#endif // PP_DIALECT_ONNX_UTILS_HOSTTENSOR_H
