//===- Checks.cpp - Host-side code shared by the kernel backends ----------===//
//
// Compiled into both pp_runtime and pp_runtime_cuda: the dtype helpers that
// Kernels.h declares and the checks of Checks.h.
//
//===----------------------------------------------------------------------===//

#include "common/Checks.h"

#include <algorithm>

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
  case DType::I16:
  case DType::U16:
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
  case DType::I16:
    return "i16";
  case DType::U16:
    return "u16";
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

namespace pp::rt::common {

//===----------------------------------------------------------------------===//
// Shapes and tensors
//===----------------------------------------------------------------------===//

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

bool broadcastsTo(const std::vector<int64_t> &from,
                  const std::vector<int64_t> &to) {
  std::vector<int64_t> out;
  return from.size() <= to.size() && broadcastShapes(from, to, out) &&
         out == to;
}

std::string shapeString(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
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

int64_t product(const std::vector<int64_t> &dims, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t d = begin; d < end; ++d)
    n *= dims[d];
  return n;
}

Status expectFloat(const Tensor &t, const std::vector<int64_t> &shape,
                   const std::string &what) {
  if (!isFloat(t.dtype))
    return Status::error(what + ": expected dtype f32 or f64, got " +
                         dtypeName(t.dtype));
  return expectShape(t, shape, what.c_str());
}

Status expectSameDType(const std::string &what,
                       std::initializer_list<const Tensor *> tensors) {
  const Tensor *first = nullptr;
  for (const Tensor *t : tensors) {
    if (!t)
      continue;
    if (!first)
      first = t;
    else if (t->dtype != first->dtype)
      return Status::error(
          what + ": operand dtypes differ: " + dtypeName(first->dtype) +
          " and " + dtypeName(t->dtype));
  }
  return Status::success();
}

Status dtypeError(const std::string &what, DType dtype) {
  return Status::error(what + ": unsupported dtype " + dtypeName(dtype));
}

const char *unaryName(UnaryKind kind) { return toString(kind); }

const char *binaryName(BinaryKind kind) {
  switch (kind) {
  case BinaryKind::Add:
    return "Add";
  case BinaryKind::Sub:
    return "Sub";
  case BinaryKind::Mul:
    return "Mul";
  case BinaryKind::Div:
    return "Div";
  case BinaryKind::Pow:
    return "Pow";
  case BinaryKind::Equal:
    return "Equal";
  case BinaryKind::Less:
    return "Less";
  case BinaryKind::Greater:
    return "Greater";
  case BinaryKind::And:
    return "And";
  case BinaryKind::Or:
    return "Or";
  case BinaryKind::Mod:
    return "Mod";
  case BinaryKind::FMod:
    return "FMod";
  case BinaryKind::Max:
    return "Max";
  case BinaryKind::Min:
    return "Min";
  }
  return "?";
}

//===----------------------------------------------------------------------===//
// Element-wise
//===----------------------------------------------------------------------===//

Status checkBinary(BinaryKind kind, const Tensor &a, const Tensor &b,
                   const Tensor &c, BinaryPlan &plan) {
  const std::string what = std::string("binary ") + binaryName(kind);
  PP_RT_TRY(expectValid(a, (what + " a").c_str()));
  PP_RT_TRY(expectValid(b, (what + " b").c_str()));
  std::vector<int64_t> shape;
  if (!broadcastShapes(a.shape, b.shape, shape))
    return Status::error(what + ": shapes " + shapeString(a.shape) + " and " +
                         shapeString(b.shape) + " do not broadcast");
  // Pow alone lets the exponent's dtype differ from the base's (ONNX T1).
  if (kind != BinaryKind::Pow && a.dtype != b.dtype)
    return Status::error(what + ": operand dtypes differ: " +
                         dtypeName(a.dtype) + " and " + dtypeName(b.dtype));
  bool isCompare = kind == BinaryKind::Equal || kind == BinaryKind::Less ||
                   kind == BinaryKind::Greater;
  bool isLogic = kind == BinaryKind::And || kind == BinaryKind::Or;
  DType outType = isCompare || isLogic ? DType::Bool : a.dtype;
  PP_RT_TRY(expectDType(c, outType, (what + " c").c_str()));
  PP_RT_TRY(expectShape(c, shape, (what + " c").c_str()));
  if (isLogic && a.dtype != DType::Bool)
    return dtypeError(what, a.dtype);
  plan.what = what;
  plan.shape = std::move(shape);
  plan.isCompare = isCompare;
  plan.isLogic = isLogic;
  return Status::success();
}

Status checkWhere(const Tensor &cond, const Tensor &x, const Tensor &y,
                  const Tensor &out, std::vector<int64_t> &shape) {
  PP_RT_TRY(expectDType(cond, DType::Bool, "where cond"));
  PP_RT_TRY(expectValid(cond, "where cond"));
  PP_RT_TRY(expectValid(x, "where x"));
  PP_RT_TRY(expectDType(y, x.dtype, "where y"));
  PP_RT_TRY(expectValid(y, "where y"));
  std::vector<int64_t> xy;
  if (!broadcastShapes(x.shape, y.shape, xy) ||
      !broadcastShapes(cond.shape, xy, shape))
    return Status::error("where: shapes " + shapeString(cond.shape) + ", " +
                         shapeString(x.shape) + " and " + shapeString(y.shape) +
                         " do not broadcast");
  PP_RT_TRY(expectDType(out, x.dtype, "where out"));
  PP_RT_TRY(expectShape(out, shape, "where out"));
  return Status::success();
}

//===----------------------------------------------------------------------===//
// Movement
//===----------------------------------------------------------------------===//

Status slicePlan(const char *what, const std::vector<int64_t> &full,
                 const std::vector<int64_t> &part,
                 const std::vector<int64_t> &starts,
                 const std::vector<int64_t> &steps, int64_t &base,
                 std::vector<int64_t> &strides) {
  size_t rank = full.size();
  if (part.size() != rank || starts.size() != rank || steps.size() != rank)
    return Status::error(
        std::string(what) + ": expected rank " + std::to_string(rank) +
        " for the sliced shape, " + "starts and steps, got " +
        std::to_string(part.size()) + ", " + std::to_string(starts.size()) +
        " and " + std::to_string(steps.size()));
  std::vector<int64_t> fullStrides = stridesOf(full);
  base = 0;
  strides.assign(rank, 0);
  bool empty = false;
  for (size_t d = 0; d < rank; ++d) {
    if (steps[d] == 0)
      return Status::error(std::string(what) + ": step of dim " +
                           std::to_string(d) + " is 0");
    strides[d] = fullStrides[d] * steps[d];
    if (part[d] == 0) {
      empty = true;
      continue;
    }
    int64_t last = starts[d] + (part[d] - 1) * steps[d];
    if (starts[d] < 0 || starts[d] >= full[d] || last < 0 || last >= full[d])
      return Status::error(
          std::string(what) + ": dim " + std::to_string(d) + " reads [" +
          std::to_string(starts[d]) + ", " + std::to_string(last) +
          "] (start, last) outside size " + std::to_string(full[d]));
    base += starts[d] * fullStrides[d];
  }
  if (empty)
    base = 0;
  return Status::success();
}

std::vector<int64_t> gatherShape(const std::vector<int64_t> &data,
                                 const std::vector<int64_t> &indices,
                                 int64_t axis) {
  std::vector<int64_t> shape(data.begin(), data.begin() + axis);
  shape.insert(shape.end(), indices.begin(), indices.end());
  shape.insert(shape.end(), data.begin() + axis + 1, data.end());
  return shape;
}

//===----------------------------------------------------------------------===//
// Movement kernels
//===----------------------------------------------------------------------===//

Status checkScatterND(const Tensor &data, const Tensor &indices,
                      const Tensor &updates, ScatterReduction reduction,
                      const Tensor &y, int64_t &tuples, int64_t &k,
                      int64_t &slice) {
  const char *what = "scatterND";
  PP_RT_TRY(expectValid(data, "scatterND data"));
  PP_RT_TRY(expectValid(indices, "scatterND indices"));
  PP_RT_TRY(expectValid(updates, "scatterND updates"));
  if (indices.dtype != DType::I64 && indices.dtype != DType::I32)
    return Status::error("scatterND indices: expected dtype i64 or i32, got " +
                         std::string(dtypeName(indices.dtype)));
  if (static_cast<int>(reduction) < 0 || static_cast<int>(reduction) > 4)
    return Status::error("scatterND: unknown reduction " +
                         std::to_string(static_cast<int>(reduction)));
  if (reduction != ScatterReduction::None && data.dtype == DType::Bool)
    return dtypeError("scatterND with a reduction", data.dtype);
  PP_RT_TRY(expectDType(updates, data.dtype, "scatterND updates"));
  PP_RT_TRY(expectDType(y, data.dtype, "scatterND y"));
  PP_RT_TRY(expectShape(y, data.shape, "scatterND y"));
  if (data.rank() == 0 || indices.rank() == 0)
    return Status::error(std::string(what) +
                         ": data and indices must have rank >= 1");
  k = indices.shape.back();
  if (k < 1 || k > data.rank())
    return Status::error(std::string(what) + ": indices' last dim " +
                         std::to_string(k) + " must be in [1, data rank " +
                         std::to_string(data.rank()) + "]");
  std::vector<int64_t> expected(indices.shape.begin(), indices.shape.end() - 1);
  expected.insert(expected.end(), data.shape.begin() + k, data.shape.end());
  PP_RT_TRY(expectShape(updates, expected, "scatterND updates"));
  tuples = indices.numel() / k;
  slice = 1;
  for (size_t d = static_cast<size_t>(k); d < data.shape.size(); ++d)
    slice *= data.shape[d];
  return Status::success();
}

Status scatterNDOffsets(const std::vector<int64_t> &shape,
                        const std::vector<int64_t> &values, int64_t k,
                        int64_t slice, std::vector<int64_t> &offsets) {
  int64_t tuples = static_cast<int64_t>(values.size()) / k;
  offsets.resize(static_cast<size_t>(tuples));
  for (int64_t n = 0; n < tuples; ++n) {
    int64_t offset = 0;
    for (int64_t d = 0; d < k; ++d) {
      int64_t index = values[n * k + d];
      int64_t normal = index < 0 ? index + shape[d] : index;
      if (normal < 0 || normal >= shape[d])
        return Status::error("scatterND: index " + std::to_string(index) +
                             " of tuple " + std::to_string(n) + " (dim " +
                             std::to_string(d) + ") is out of range for size " +
                             std::to_string(shape[d]));
      offset = offset * shape[d] + normal;
    }
    offsets[n] = offset * slice;
  }
  return Status::success();
}

Status checkGatherShapes(const char *what, const Tensor &full,
                         const Tensor &part, const Tensor &indices,
                         int64_t &axis) {
  PP_RT_TRY(expectValid(full, what));
  int64_t a = axis;
  if (!normalizeAxis(a, full.rank()))
    return Status::error(std::string(what) + ": axis " + std::to_string(axis) +
                         " out of range for rank " +
                         std::to_string(full.rank()));
  axis = a;
  PP_RT_TRY(expectDType(part, full.dtype, what));
  return expectShape(part, gatherShape(full.shape, indices.shape, axis), what);
}

Status checkCopy(const Tensor &x, const Tensor &y) {
  PP_RT_TRY(expectValid(x, "copy x"));
  PP_RT_TRY(expectDType(y, x.dtype, "copy y"));
  PP_RT_TRY(expectValid(y, "copy y"));
  if (y.numel() != x.numel())
    return Status::error("copy: x " + shapeString(x.shape) + " has " +
                         std::to_string(x.numel()) + " elements, y " +
                         shapeString(y.shape) + " has " +
                         std::to_string(y.numel()));
  return Status::success();
}

Status checkTranspose(const Tensor &x, const std::vector<int64_t> &perm,
                      const Tensor &y, StridedView &view) {
  std::vector<int64_t> &shape = view.shape;
  std::vector<int64_t> &strides = view.strides[0];
  PP_RT_TRY(expectValid(x, "transpose x"));
  // An empty perm reverses the dims, as ONNX's default.
  std::vector<int64_t> p = perm;
  if (p.empty())
    for (int64_t d = x.rank() - 1; d >= 0; --d)
      p.push_back(d);
  if (static_cast<int64_t>(p.size()) != x.rank())
    return Status::error("transpose: perm has " + std::to_string(p.size()) +
                         " entries for rank " + std::to_string(x.rank()));
  std::vector<bool> seen(p.size(), false);
  shape.assign(p.size(), 0);
  strides.clear();
  std::vector<int64_t> xStrides = stridesOf(x.shape);
  for (size_t i = 0; i < p.size(); ++i) {
    int64_t d = p[i];
    if (d < 0 || d >= x.rank() || seen[d])
      return Status::error("transpose: perm is not a permutation of [0, " +
                           std::to_string(x.rank()) + ")");
    seen[d] = true;
    shape[i] = x.shape[d];
    strides.push_back(xStrides[d]);
  }
  PP_RT_TRY(expectDType(y, x.dtype, "transpose y"));
  PP_RT_TRY(expectShape(y, shape, "transpose y"));
  return Status::success();
}

Status checkSlice(const Tensor &x, const std::vector<int64_t> &starts,
                  const std::vector<int64_t> &steps, const Tensor &y,
                  StridedView &view) {
  PP_RT_TRY(expectValid(x, "slice x"));
  PP_RT_TRY(expectDType(y, x.dtype, "slice y"));
  PP_RT_TRY(expectValid(y, "slice y"));
  view.shape = y.shape;
  return slicePlan("slice", x.shape, y.shape, starts, steps, view.base,
                   view.strides[0]);
}

Status checkPad(const char *what, const Tensor &x, const Tensor &y,
                const std::vector<int64_t> &pads, PadMode mode) {
  std::string op = what;
  PP_RT_TRY(expectValid(x, (op + " x").c_str()));
  PP_RT_TRY(expectDType(y, x.dtype, (op + " y").c_str()));
  PP_RT_TRY(expectValid(y, (op + " y").c_str()));
  if (mode != PadMode::Constant && mode != PadMode::Reflect &&
      mode != PadMode::Edge)
    return Status::error(op + ": unknown mode " +
                         std::to_string(static_cast<int>(mode)));
  size_t rank = x.shape.size();
  if (pads.size() != 2 * rank || y.shape.size() != rank)
    return Status::error(op + ": expected " + std::to_string(2 * rank) +
                         " pads and rank " + std::to_string(rank) +
                         " results, got " + std::to_string(pads.size()) +
                         " and " + std::to_string(y.shape.size()));
  for (size_t d = 0; d < rank; ++d) {
    int64_t begin = pads[d], end = pads[d + rank];
    int64_t size = x.shape[d] + begin + end;
    if (size < 0 || size != y.shape[d])
      return Status::error(op + ": dim " + std::to_string(d) + " of size " +
                           std::to_string(x.shape[d]) + " padded by [" +
                           std::to_string(begin) + ", " + std::to_string(end) +
                           "] is " + std::to_string(size) + ", y has " +
                           std::to_string(y.shape[d]));
    if (mode != PadMode::Constant && x.shape[d] == 0 && size > 0)
      return Status::error(op + ": cannot " +
                           (mode == PadMode::Reflect ? "reflect" : "edge-pad") +
                           " the empty dim " + std::to_string(d));
  }
  return Status::success();
}

Status checkSliceGrad(const Tensor &dy, const std::vector<int64_t> &starts,
                      const std::vector<int64_t> &steps, const Tensor &dx,
                      StridedView &view) {
  PP_RT_TRY(expectValid(dy, "sliceGrad dy"));
  PP_RT_TRY(expectDType(dx, dy.dtype, "sliceGrad dx"));
  PP_RT_TRY(expectValid(dx, "sliceGrad dx"));
  view.shape = dy.shape;
  return slicePlan("sliceGrad", dx.shape, dy.shape, starts, steps, view.base,
                   view.strides[0]);
}

namespace {

/// The checks of concat (`parts` the inputs, `whole` y) and split (`parts`
/// the outputs, `whole` x); sets `a` to the normalised axis.
template <typename TensorPtr>
Status checkParts(const char *what, const char *partName, const char *wholeName,
                  const std::vector<TensorPtr> &parts, int64_t axis,
                  const Tensor &whole, int64_t &a) {
  std::string op = what;
  if (parts.empty())
    return Status::error(op + ": no " + partName + "s");
  PP_RT_TRY(expectValid(whole, (op + " " + wholeName).c_str()));
  a = axis;
  if (!normalizeAxis(a, whole.rank()))
    return Status::error(op + ": axis " + std::to_string(axis) +
                         " out of range for rank " +
                         std::to_string(whole.rank()));
  int64_t total = 0;
  for (size_t k = 0; k < parts.size(); ++k) {
    std::string name = op + " " + partName + " " + std::to_string(k);
    if (!parts[k])
      return Status::error(name + ": null");
    const Tensor &part = *parts[k];
    PP_RT_TRY(expectDType(part, whole.dtype, name.c_str()));
    PP_RT_TRY(expectValid(part, name.c_str()));
    std::vector<int64_t> expected = whole.shape;
    if (part.rank() == whole.rank())
      expected[a] = part.shape[a];
    PP_RT_TRY(expectShape(part, expected, name.c_str()));
    total += part.shape[a];
  }
  if (total != whole.shape[a])
    return Status::error(op + ": " + partName + "s sum to " +
                         std::to_string(total) + " along axis " +
                         std::to_string(a) + ", " + wholeName + " has " +
                         std::to_string(whole.shape[a]));
  return Status::success();
}

} // namespace

Status checkConcat(const std::vector<const Tensor *> &inputs, int64_t axis,
                   const Tensor &y, int64_t &a) {
  return checkParts("concat", "input", "y", inputs, axis, y, a);
}

Status checkSplit(const Tensor &x, int64_t axis,
                  const std::vector<Tensor *> &outputs, int64_t &a) {
  return checkParts("split", "output", "x", outputs, axis, x, a);
}

//===----------------------------------------------------------------------===//
// matmul / gemm
//===----------------------------------------------------------------------===//

Status checkMatmul(const Tensor &a, const Tensor &b, const Tensor &y,
                   MatmulShape &ms, bool transA, bool transB) {
  if (a.rank() < 1 || b.rank() < 1)
    return Status::error("matmul: operands need rank >= 1, got a " +
                         shapeString(a.shape) + " and b " +
                         shapeString(b.shape));
  if ((transA && a.rank() < 2) || (transB && b.rank() < 2))
    return Status::error(
        "matmul: a transposed operand needs rank >= 2, got "
        "a " +
        shapeString(a.shape) + (transA ? " (transposed)" : "") + " and b " +
        shapeString(b.shape) + (transB ? " (transposed)" : ""));
  PP_RT_TRY(expectValid(a, "matmul: a"));
  PP_RT_TRY(expectValid(b, "matmul: b"));
  PP_RT_TRY(expectDType(b, a.dtype, "matmul: b"));
  PP_RT_TRY(expectDType(y, a.dtype, "matmul: y"));
  // Rank-1 operands are promoted: a [K] -> [1, K], b [K] -> [K, 1].
  std::vector<int64_t> as = a.shape, bs = b.shape;
  if (as.size() == 1)
    as.insert(as.begin(), 1);
  if (bs.size() == 1)
    bs.push_back(1);
  if (transA)
    std::swap(as[as.size() - 2], as.back());
  if (transB)
    std::swap(bs[bs.size() - 2], bs.back());
  int64_t m = as[as.size() - 2], k = as.back();
  int64_t kb = bs[bs.size() - 2], n = bs.back();
  if (k != kb)
    return Status::error(
        "matmul: contraction dims differ: a " + shapeString(a.shape) +
        " has K = " + std::to_string(k) + ", b " + shapeString(b.shape) +
        " has K = " + std::to_string(kb));
  ms.m = m;
  ms.k = k;
  ms.n = n;
  ms.aBatch.assign(as.begin(), as.end() - 2);
  ms.bBatch.assign(bs.begin(), bs.end() - 2);
  if (!broadcastShapes(ms.aBatch, ms.bBatch, ms.batch))
    return Status::error("matmul: batch dims of a " + shapeString(a.shape) +
                         " and b " + shapeString(b.shape) +
                         " do not broadcast");
  std::vector<int64_t> yShape = ms.batch;
  if (a.rank() > 1)
    yShape.push_back(m);
  if (b.rank() > 1)
    yShape.push_back(n);
  PP_RT_TRY(expectShape(y, yShape, "matmul: y"));
  return Status::success();
}

Status checkGemm(const Tensor &a, const Tensor &b, const Tensor *c, bool transA,
                 bool transB, const Tensor &y, int64_t &m, int64_t &k,
                 int64_t &n) {
  if (a.rank() != 2 || b.rank() != 2)
    return Status::error("gemm: a and b must have rank 2, got a " +
                         shapeString(a.shape) + " and b " +
                         shapeString(b.shape));
  PP_RT_TRY(expectValid(a, "gemm: a"));
  PP_RT_TRY(expectValid(b, "gemm: b"));
  PP_RT_TRY(expectDType(b, a.dtype, "gemm: b"));
  PP_RT_TRY(expectDType(y, a.dtype, "gemm: y"));
  m = transA ? a.shape[1] : a.shape[0];
  k = transA ? a.shape[0] : a.shape[1];
  int64_t kb = transB ? b.shape[1] : b.shape[0];
  n = transB ? b.shape[0] : b.shape[1];
  if (k != kb)
    return Status::error("gemm: contraction dims differ: op(a) is " +
                         shapeString({m, k}) + ", op(b) is " +
                         shapeString({kb, n}));
  PP_RT_TRY(expectShape(y, {m, n}, "gemm: y"));
  if (c) {
    PP_RT_TRY(expectValid(*c, "gemm: c"));
    PP_RT_TRY(expectDType(*c, a.dtype, "gemm: c"));
    // Unidirectional broadcast: c's dims, aligned right, are 1 or y's.
    bool ok = c->rank() <= 2;
    for (int64_t i = 0; ok && i < c->rank(); ++i) {
      int64_t target = i + 2 - c->rank() == 0 ? m : n;
      ok = c->shape[i] == 1 || c->shape[i] == target;
    }
    if (!ok)
      return Status::error("gemm: c " + shapeString(c->shape) +
                           " does not broadcast to y " + shapeString({m, n}));
  }
  return Status::success();
}

//===----------------------------------------------------------------------===//
// Window geometry
//===----------------------------------------------------------------------===//

namespace {

/// Output size of one spatial dim in floor mode, and the largest accepted
/// size (ceil mode); -1 when the dilated kernel exceeds the padded input.
void outputRange(int64_t in, int64_t k, int64_t s, int64_t pb, int64_t pe,
                 int64_t d, int64_t &lo, int64_t &hi) {
  int64_t span = in + pb + pe - d * (k - 1) - 1;
  if (span < 0) {
    lo = hi = -1;
    return;
  }
  lo = span / s + 1;
  hi = (span + s - 1) / s + 1;
}

} // namespace

Status resolveGeometry(const std::string &what, const WindowParams &params,
                       const std::vector<int64_t> &in,
                       const std::vector<int64_t> &out,
                       const std::vector<int64_t> *weightKernel, bool allowCeil,
                       const char *outName, Geometry &g) {
  size_t rank = in.size();
  if (rank < 1 || rank > 3)
    return Status::error(what + ": expected 1 to 3 spatial dims, got " +
                         std::to_string(rank));
  std::vector<int64_t> kernel = params.kernel;
  if (kernel.empty() && weightKernel)
    kernel = *weightKernel;
  auto sizeError = [&](const char *name, size_t expected, size_t got) {
    return Status::error(what + ": " + name + " needs " +
                         std::to_string(expected) + " values, got " +
                         std::to_string(got));
  };
  if (kernel.size() != rank)
    return sizeError("kernel", rank, kernel.size());
  if (weightKernel && kernel != *weightKernel)
    return Status::error(what + ": kernel " + shapeString(kernel) +
                         " differs from the weight's spatial dims " +
                         shapeString(*weightKernel));
  if (!params.strides.empty() && params.strides.size() != rank)
    return sizeError("strides", rank, params.strides.size());
  if (!params.pads.empty() && params.pads.size() != 2 * rank)
    return sizeError("pads", 2 * rank, params.pads.size());
  if (!params.dilations.empty() && params.dilations.size() != rank)
    return sizeError("dilations", rank, params.dilations.size());
  size_t lead = 3 - rank;
  for (size_t i = 0; i < 3; ++i) {
    g.in[i] = g.out[i] = g.k[i] = g.s[i] = g.d[i] = 1;
    g.pb[i] = g.pe[i] = 0;
  }
  std::vector<int64_t> expectLo(rank), expectHi(rank);
  bool outOk = out.size() == rank;
  for (size_t i = 0; i < rank; ++i) {
    size_t j = i + lead;
    g.in[j] = in[i];
    g.k[j] = kernel[i];
    g.s[j] = params.strides.empty() ? 1 : params.strides[i];
    g.d[j] = params.dilations.empty() ? 1 : params.dilations[i];
    g.pb[j] = params.pads.empty() ? 0 : params.pads[i];
    g.pe[j] = params.pads.empty() ? 0 : params.pads[i + rank];
    if (g.k[j] < 1 || g.s[j] < 1 || g.d[j] < 1 || g.pb[j] < 0 || g.pe[j] < 0)
      return Status::error(what + ": kernel, strides and dilations must be " +
                           ">= 1 and pads >= 0, got kernel " +
                           shapeString(kernel) + ", strides " +
                           shapeString(params.strides) + ", pads " +
                           shapeString(params.pads) + ", dilations " +
                           shapeString(params.dilations));
    outputRange(g.in[j], g.k[j], g.s[j], g.pb[j], g.pe[j], g.d[j], expectLo[i],
                expectHi[i]);
    if (expectLo[i] < 0)
      return Status::error(what + ": dilated kernel " + shapeString(kernel) +
                           " is larger than the padded input " +
                           shapeString(in));
    if (outOk) {
      g.out[j] = out[i];
      outOk = out[i] == expectLo[i] || (allowCeil && out[i] == expectHi[i]);
    }
  }
  if (!outOk) {
    std::string msg = what + ": " + outName + ": expected spatial dims " +
                      shapeString(expectLo);
    if (allowCeil && expectHi != expectLo)
      msg += " (or " + shapeString(expectHi) + " in ceil mode)";
    return Status::error(msg + ", got " + shapeString(out));
  }
  for (int i = 0; i < 3; ++i) {
    g.inSize *= g.in[i];
    g.outSize *= g.out[i];
    g.kSize *= g.k[i];
  }
  return Status::success();
}

Status resolvePool(const std::string &what, const Tensor &x, const Tensor &y,
                   const WindowParams &params, const char *xName,
                   const char *yName, Geometry &g) {
  PP_RT_TRY(expectValid(x, (what + ": " + xName).c_str()));
  PP_RT_TRY(expectValid(y, (what + ": " + yName).c_str()));
  PP_RT_TRY(expectDType(y, x.dtype, (what + ": " + yName).c_str()));
  if (!isFloat(x.dtype))
    return Status::error(what + ": unsupported dtype " + dtypeName(x.dtype));
  if (x.rank() < 3 || x.rank() > 5 || y.rank() != x.rank() ||
      y.shape[0] != x.shape[0] || y.shape[1] != x.shape[1])
    return Status::error(what + ": expected " + xName + " [N, C, 1 to 3 " +
                         "spatial dims] and " + yName +
                         " with the same N and C, got " + xName + " " +
                         shapeString(x.shape) + " and " + yName + " " +
                         shapeString(y.shape));
  std::vector<int64_t> in(x.shape.begin() + 2, x.shape.end());
  std::vector<int64_t> out(y.shape.begin() + 2, y.shape.end());
  return resolveGeometry(what, params, in, out, nullptr, true, yName, g);
}

Status checkMaxPoolGrad(const Tensor &dy, const Tensor &indices,
                        const Tensor &dx, PoolPlanes &planes) {
  PP_RT_TRY(expectValid(dy, "maxPoolGrad: dy"));
  PP_RT_TRY(expectValid(dx, "maxPoolGrad: dx"));
  PP_RT_TRY(expectDType(dx, dy.dtype, "maxPoolGrad: dx"));
  PP_RT_TRY(expectDType(indices, DType::I64, "maxPoolGrad: indices"));
  PP_RT_TRY(expectShape(indices, dy.shape, "maxPoolGrad: indices"));
  if (dy.rank() < 3 || dx.rank() != dy.rank() || dx.shape[0] != dy.shape[0] ||
      dx.shape[1] != dy.shape[1])
    return Status::error("maxPoolGrad: expected dy [N, C, spatial...] and dx "
                         "with the same N and C, got dy " +
                         shapeString(dy.shape) + " and dx " +
                         shapeString(dx.shape));
  planes.planes = dy.shape[0] * dy.shape[1];
  planes.outSize = planes.planes ? dy.numel() / planes.planes : 0;
  planes.inSize = planes.planes ? dx.numel() / planes.planes : 0;
  return Status::success();
}

Status maxPoolIndexError(const Tensor &dx) {
  return Status::error("maxPoolGrad: an index lies outside the (n, c) plane "
                       "of dx " +
                       shapeString(dx.shape) + " it belongs to");
}

Status resolveConvDims(const std::string &what, const Tensor &x,
                       const Tensor &w, const Tensor &y,
                       const WindowParams &params, const char *const names[3],
                       ConvDims &cp) {
  const Tensor *ts[3] = {&x, &w, &y};
  for (int i = 0; i < 3; ++i) {
    std::string name = what + ": " + names[i];
    PP_RT_TRY(expectValid(*ts[i], name.c_str()));
    PP_RT_TRY(expectDType(*ts[i], x.dtype, name.c_str()));
    if (ts[i]->rank() < 3 || ts[i]->rank() > 5 || ts[i]->rank() != x.rank())
      return Status::error(what + ": " + names[i] +
                           ": expected rank 3 to 5 (N, C and 1 to 3 spatial "
                           "dims) matching " +
                           names[0] + " " + shapeString(x.shape) + ", got " +
                           shapeString(ts[i]->shape));
  }
  if (!isFloat(x.dtype))
    return Status::error(what + ": unsupported dtype " + dtypeName(x.dtype));
  cp.n = x.shape[0];
  cp.c = x.shape[1];
  cp.m = w.shape[0];
  cp.cinG = w.shape[1];
  cp.group = params.group;
  if (cp.group < 1 || cp.c != cp.cinG * cp.group || cp.m % cp.group != 0)
    return Status::error(
        what + ": " + names[0] + " " + shapeString(x.shape) + " and " +
        names[1] + " " + shapeString(w.shape) + " do not fit group " +
        std::to_string(cp.group) +
        " (need C = w.shape[1] * group and M divisible by group)");
  cp.coutG = cp.m / cp.group;
  if (y.shape[0] != cp.n || y.shape[1] != cp.m)
    return Status::error(what + ": " + names[2] + ": expected leading dims [" +
                         std::to_string(cp.n) + ", " + std::to_string(cp.m) +
                         "], got " + shapeString(y.shape));
  std::vector<int64_t> in(x.shape.begin() + 2, x.shape.end());
  std::vector<int64_t> out(y.shape.begin() + 2, y.shape.end());
  std::vector<int64_t> kernel(w.shape.begin() + 2, w.shape.end());
  return resolveGeometry(what, params, in, out, &kernel, false, names[2],
                         cp.geo);
}

//===----------------------------------------------------------------------===//
// Normalisation
//===----------------------------------------------------------------------===//

Status resolveLayerNormDims(const std::string &what, const Tensor &x,
                            const Tensor &scale, const Tensor *bias,
                            int64_t axis, LayerNormDims &ln) {
  PP_RT_TRY(expectValid(x, (what + ": x").c_str()));
  if (!isFloat(x.dtype))
    return Status::error(what + ": unsupported dtype " + dtypeName(x.dtype));
  ln.axis = axis;
  if (!normalizeAxis(ln.axis, x.rank()))
    return Status::error(what + ": axis " + std::to_string(axis) +
                         " out of range for x " + shapeString(x.shape));
  ln.normShape.assign(x.shape.begin() + ln.axis, x.shape.end());
  const std::vector<int64_t> &normShape = ln.normShape;
  ln.statShape = x.shape;
  for (int64_t d = 0; d < x.rank(); ++d)
    if (d >= ln.axis)
      ln.statShape[d] = 1;
    else
      ln.outer *= x.shape[d];
  for (int64_t d : normShape)
    ln.inner *= d;
  const Tensor *params[2] = {&scale, bias};
  const char *names[2] = {"scale", "bias"};
  for (int i = 0; i < 2; ++i) {
    if (!params[i])
      continue;
    const Tensor &p = *params[i];
    std::string name = what + ": " + names[i];
    PP_RT_TRY(expectDType(p, x.dtype, name.c_str()));
    // Unidirectional broadcast to the normalised dims.
    bool ok = p.rank() <= static_cast<int64_t>(normShape.size());
    for (int64_t d = 0; ok && d < p.rank(); ++d) {
      int64_t target = normShape[normShape.size() - p.rank() + d];
      ok = p.shape[d] == 1 || p.shape[d] == target;
    }
    if (!ok)
      return Status::error(name + ": " + shapeString(p.shape) +
                           " does not broadcast to the normalised dims " +
                           shapeString(normShape));
  }
  if (bias && bias->shape != scale.shape)
    return Status::error(what + ": bias " + shapeString(bias->shape) +
                         " differs from scale " + shapeString(scale.shape));
  return Status::success();
}

namespace {

/// x [N, C, spatial...] as N blocks of C planes: checks x, fills `bs`.
Status resolveBatch(const std::string &what, const Tensor &x, BatchShape &bs) {
  PP_RT_TRY(expectValid(x, (what + ": x").c_str()));
  if (!isFloat(x.dtype))
    return Status::error(what + ": unsupported dtype " + dtypeName(x.dtype));
  if (x.rank() < 2)
    return Status::error(what + ": x needs rank >= 2 (N, C, ...), got " +
                         shapeString(x.shape));
  bs.n = x.shape[0];
  bs.c = x.shape[1];
  for (int64_t d = 2; d < x.rank(); ++d)
    bs.plane *= x.shape[d];
  return Status::success();
}

} // namespace

Status checkLayerNormOutputs(const Tensor &x, const LayerNormDims &ln,
                             const Tensor &y, const Tensor &mean,
                             const Tensor &invStdDev) {
  PP_RT_TRY(expectDType(y, x.dtype, "layerNorm: y"));
  PP_RT_TRY(expectShape(y, x.shape, "layerNorm: y"));
  PP_RT_TRY(expectFloat(mean, ln.statShape, "layerNorm: mean"));
  PP_RT_TRY(expectFloat(invStdDev, ln.statShape, "layerNorm: invStdDev"));
  return Status::success();
}

Status checkLayerNormGradOutputs(const Tensor &dy, const Tensor &x,
                                 const Tensor &scale, const Tensor &mean,
                                 const Tensor &invStdDev,
                                 const LayerNormDims &ln, const Tensor &dx,
                                 const Tensor &dscale, const Tensor *dbias) {
  PP_RT_TRY(expectDType(dy, x.dtype, "layerNormGrad: dy"));
  PP_RT_TRY(expectShape(dy, x.shape, "layerNormGrad: dy"));
  PP_RT_TRY(expectDType(dx, x.dtype, "layerNormGrad: dx"));
  PP_RT_TRY(expectShape(dx, x.shape, "layerNormGrad: dx"));
  PP_RT_TRY(expectFloat(mean, ln.statShape, "layerNormGrad: mean"));
  PP_RT_TRY(expectFloat(invStdDev, ln.statShape, "layerNormGrad: invStdDev"));
  PP_RT_TRY(expectDType(dscale, x.dtype, "layerNormGrad: dscale"));
  PP_RT_TRY(expectShape(dscale, scale.shape, "layerNormGrad: dscale"));
  if (dbias) {
    PP_RT_TRY(expectDType(*dbias, x.dtype, "layerNormGrad: dbias"));
    PP_RT_TRY(expectShape(*dbias, scale.shape, "layerNormGrad: dbias"));
  }
  return Status::success();
}

Status checkBatchNorm(const Tensor &x, const Tensor &scale, const Tensor &bias,
                      const Tensor &inputMean, const Tensor &inputVar,
                      bool training, const Tensor &y, const Tensor &runningMean,
                      const Tensor &runningVar, const Tensor *savedMean,
                      const Tensor *savedInvStd, bool unbiasedRunningVar,
                      BatchShape &bs) {
  PP_RT_TRY(resolveBatch("batchNorm", x, bs));
  PP_RT_TRY(expectDType(y, x.dtype, "batchNorm: y"));
  PP_RT_TRY(expectShape(y, x.shape, "batchNorm: y"));
  std::vector<int64_t> cShape = {bs.c};
  PP_RT_TRY(expectFloat(scale, cShape, "batchNorm: scale"));
  PP_RT_TRY(expectFloat(bias, cShape, "batchNorm: bias"));
  PP_RT_TRY(expectFloat(inputMean, cShape, "batchNorm: inputMean"));
  PP_RT_TRY(expectFloat(inputVar, cShape, "batchNorm: inputVar"));
  PP_RT_TRY(expectFloat(runningMean, cShape, "batchNorm: runningMean"));
  PP_RT_TRY(expectFloat(runningVar, cShape, "batchNorm: runningVar"));
  if (savedMean)
    PP_RT_TRY(expectFloat(*savedMean, cShape, "batchNorm: savedMean"));
  if (savedInvStd)
    PP_RT_TRY(expectFloat(*savedInvStd, cShape, "batchNorm: savedInvStd"));
  // The unbiased variance needs two values per channel (PyTorch refuses
  // the same case).
  if (training && unbiasedRunningVar && bs.count() < 2)
    return Status::error("batchNorm: training needs more than one value per "
                         "channel, got x " +
                         shapeString(x.shape));
  return Status::success();
}

Status checkBatchNormGrad(const Tensor &dy, const Tensor &x,
                          const Tensor &scale, const Tensor &savedMean,
                          const Tensor &savedInvStd, const Tensor &dx,
                          const Tensor &dscale, const Tensor &dbias,
                          BatchShape &bs) {
  PP_RT_TRY(resolveBatch("batchNormGrad", x, bs));
  PP_RT_TRY(expectDType(dy, x.dtype, "batchNormGrad: dy"));
  PP_RT_TRY(expectShape(dy, x.shape, "batchNormGrad: dy"));
  PP_RT_TRY(expectDType(dx, x.dtype, "batchNormGrad: dx"));
  PP_RT_TRY(expectShape(dx, x.shape, "batchNormGrad: dx"));
  std::vector<int64_t> cShape = {bs.c};
  PP_RT_TRY(expectFloat(scale, cShape, "batchNormGrad: scale"));
  PP_RT_TRY(expectFloat(savedMean, cShape, "batchNormGrad: savedMean"));
  PP_RT_TRY(expectFloat(savedInvStd, cShape, "batchNormGrad: savedInvStd"));
  PP_RT_TRY(expectFloat(dscale, cShape, "batchNormGrad: dscale"));
  PP_RT_TRY(expectFloat(dbias, cShape, "batchNormGrad: dbias"));
  return Status::success();
}

//===----------------------------------------------------------------------===//
// Dropout
//===----------------------------------------------------------------------===//

namespace {

Status checkRatio(const char *what, float ratio) {
  if (!(ratio >= 0.f && ratio <= 1.f))
    return Status::error(std::string(what) + ": ratio must lie in [0, 1], " +
                         "got " + std::to_string(ratio));
  return Status::success();
}

/// Checks that `t` matches param's dtype and shape.
Status expectLike(const Tensor &t, const Tensor &param, const char *what) {
  PP_RT_TRY(expectDType(t, param.dtype, what));
  return expectShape(t, param.shape, what);
}

} // namespace

Status checkDropout(const Tensor &x, float ratio, const Tensor &y,
                    const Tensor &mask) {
  PP_RT_TRY(expectValid(x, "dropout: x"));
  if (!isFloat(x.dtype))
    return Status::error(std::string("dropout: unsupported dtype ") +
                         dtypeName(x.dtype));
  PP_RT_TRY(expectDType(y, x.dtype, "dropout: y"));
  PP_RT_TRY(expectShape(y, x.shape, "dropout: y"));
  PP_RT_TRY(expectDType(mask, DType::Bool, "dropout: mask"));
  PP_RT_TRY(expectShape(mask, x.shape, "dropout: mask"));
  PP_RT_TRY(checkRatio("dropout", ratio));
  return Status::success();
}

Status checkDropoutGrad(const Tensor &dy, const Tensor &mask, float ratio,
                        const Tensor &dx) {
  PP_RT_TRY(expectValid(dy, "dropoutGrad: dy"));
  if (!isFloat(dy.dtype))
    return Status::error(std::string("dropoutGrad: unsupported dtype ") +
                         dtypeName(dy.dtype));
  PP_RT_TRY(expectDType(mask, DType::Bool, "dropoutGrad: mask"));
  PP_RT_TRY(expectShape(mask, dy.shape, "dropoutGrad: mask"));
  PP_RT_TRY(expectDType(dx, dy.dtype, "dropoutGrad: dx"));
  PP_RT_TRY(expectShape(dx, dy.shape, "dropoutGrad: dx"));
  PP_RT_TRY(checkRatio("dropoutGrad", ratio));
  return Status::success();
}

//===----------------------------------------------------------------------===//
// Cross-entropy
//===----------------------------------------------------------------------===//

Status parseReduction(const char *what, const std::string &name, Reduction &r) {
  if (name == "none")
    r = Reduction::None;
  else if (name == "sum")
    r = Reduction::Sum;
  else if (name == "mean")
    r = Reduction::Mean;
  else
    return Status::error(std::string(what) +
                         ": reduction must be none, sum "
                         "or mean, got '" +
                         name + "'");
  return Status::success();
}

Status resolveSce(const std::string &what, const Tensor &probs,
                  const char *probsName, const Tensor &labels,
                  const Tensor *weights, SceShape &ss) {
  PP_RT_TRY(expectValid(probs, (what + ": " + probsName).c_str()));
  PP_RT_TRY(expectValid(labels, (what + ": labels").c_str()));
  if (!isFloat(probs.dtype))
    return Status::error(what + ": unsupported dtype " +
                         dtypeName(probs.dtype));
  if (probs.rank() < 2)
    return Status::error(what + ": " + probsName +
                         " needs rank >= 2 (N, C, ...), got " +
                         shapeString(probs.shape));
  if (labels.dtype != DType::I64 && labels.dtype != DType::I32)
    return Status::error(what + ": labels: expected dtype i64 or i32, got " +
                         dtypeName(labels.dtype));
  std::vector<int64_t> labelShape = probs.shape;
  labelShape.erase(labelShape.begin() + 1);
  PP_RT_TRY(expectShape(labels, labelShape, (what + ": labels").c_str()));
  ss.n = probs.shape[0];
  ss.c = probs.shape[1];
  for (int64_t d = 2; d < probs.rank(); ++d)
    ss.inner *= probs.shape[d];
  if (weights) {
    PP_RT_TRY(expectDType(*weights, probs.dtype, (what + ": weights").c_str()));
    PP_RT_TRY(expectShape(*weights, {ss.c}, (what + ": weights").c_str()));
  }
  return Status::success();
}

Status checkSoftmaxCrossEntropy(const Tensor &scores, const Tensor &labels,
                                const Tensor *weights,
                                const std::string &reduction,
                                const Tensor &loss, const Tensor &logProb,
                                SceShape &ss, Reduction &red) {
  const std::string what = "softmaxCrossEntropy";
  PP_RT_TRY(parseReduction(what.c_str(), reduction, red));
  PP_RT_TRY(resolveSce(what, scores, "scores", labels, weights, ss));
  PP_RT_TRY(expectDType(logProb, scores.dtype, "softmaxCrossEntropy: logProb"));
  PP_RT_TRY(expectShape(logProb, scores.shape, "softmaxCrossEntropy: logProb"));
  PP_RT_TRY(expectDType(loss, scores.dtype, "softmaxCrossEntropy: loss"));
  if (red == Reduction::None)
    PP_RT_TRY(expectShape(loss, labels.shape, "softmaxCrossEntropy: loss"));
  else if (loss.numel() != 1 || !loss.data)
    return Status::error(what + ": loss: expected a scalar for reduction '" +
                         reduction + "', got " + shapeString(loss.shape));
  return Status::success();
}

Status checkSoftmaxCrossEntropyGrad(const Tensor &dloss, const Tensor &logProb,
                                    const Tensor &labels, const Tensor *weights,
                                    const std::string &reduction,
                                    const Tensor &dscores, SceShape &ss,
                                    Reduction &red) {
  const std::string what = "softmaxCrossEntropyGrad";
  PP_RT_TRY(parseReduction(what.c_str(), reduction, red));
  PP_RT_TRY(resolveSce(what, logProb, "logProb", labels, weights, ss));
  PP_RT_TRY(expectDType(dscores, logProb.dtype, (what + ": dscores").c_str()));
  PP_RT_TRY(expectShape(dscores, logProb.shape, (what + ": dscores").c_str()));
  PP_RT_TRY(expectDType(dloss, logProb.dtype, (what + ": dloss").c_str()));
  if (red == Reduction::None)
    PP_RT_TRY(expectShape(dloss, labels.shape, (what + ": dloss").c_str()));
  else if (dloss.numel() != 1 || !dloss.data)
    return Status::error(what + ": dloss: expected a scalar for reduction '" +
                         reduction + "', got " + shapeString(dloss.shape));
  return Status::success();
}

//===----------------------------------------------------------------------===//
// Optimisers
//===----------------------------------------------------------------------===//

Status checkSgdStep(const Tensor &param, const Tensor &grad,
                    const Tensor *momentumBuffer, double momentum,
                    double dampening, bool nesterov) {
  PP_RT_TRY(expectValid(param, "sgdStep: param"));
  if (!isFloat(param.dtype))
    return Status::error(std::string("sgdStep: unsupported dtype ") +
                         dtypeName(param.dtype));
  PP_RT_TRY(expectLike(grad, param, "sgdStep: grad"));
  if (momentum != 0.0) {
    if (!momentumBuffer)
      return Status::error("sgdStep: momentum " + std::to_string(momentum) +
                           " needs a momentum buffer");
    PP_RT_TRY(expectLike(*momentumBuffer, param, "sgdStep: momentumBuffer"));
  }
  if (nesterov && (momentum <= 0.0 || dampening != 0.0))
    return Status::error("sgdStep: Nesterov momentum requires a momentum > 0 "
                         "and zero dampening, got momentum " +
                         std::to_string(momentum) + ", dampening " +
                         std::to_string(dampening));
  return Status::success();
}

Status checkAdamStep(const Tensor &param, const Tensor &grad, const Tensor &m,
                     const Tensor &v, int64_t step) {
  PP_RT_TRY(expectValid(param, "adamStep: param"));
  if (!isFloat(param.dtype))
    return Status::error(std::string("adamStep: unsupported dtype ") +
                         dtypeName(param.dtype));
  PP_RT_TRY(expectLike(grad, param, "adamStep: grad"));
  PP_RT_TRY(expectLike(m, param, "adamStep: m"));
  PP_RT_TRY(expectLike(v, param, "adamStep: v"));
  if (step < 1)
    return Status::error("adamStep: step counts from 1, got " +
                         std::to_string(step));
  return Status::success();
}

const char *reduceName(ReduceKind kind) {
  switch (kind) {
  case ReduceKind::Sum:
    return "reduce Sum";
  case ReduceKind::Mean:
    return "reduce Mean";
  case ReduceKind::Max:
    return "reduce Max";
  case ReduceKind::Min:
    return "reduce Min";
  }
  return "reduce ?";
}

void splitAtAxis(const std::vector<int64_t> &shape, int64_t axis,
                 int64_t &outer, int64_t &n, int64_t &inner) {
  outer = inner = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= shape[d];
  n = shape[axis];
  for (size_t d = axis + 1; d < shape.size(); ++d)
    inner *= shape[d];
}

Status checkReduceAxes(const char *what, const Tensor &x,
                       const std::vector<int64_t> &axes, const Tensor &y,
                       std::vector<bool> &reduced) {
  reduced.assign(x.shape.size(), false);
  for (int64_t axis : axes) {
    int64_t a = axis;
    if (!normalizeAxis(a, x.rank()))
      return Status::error(std::string(what) + ": axis " +
                           std::to_string(axis) + " out of range for rank " +
                           std::to_string(x.rank()));
    if (reduced[a])
      return Status::error(std::string(what) + ": duplicate axis " +
                           std::to_string(axis));
    reduced[a] = true;
  }
  std::vector<int64_t> keepDims, dropDims;
  for (size_t d = 0; d < x.shape.size(); ++d) {
    keepDims.push_back(reduced[d] ? 1 : x.shape[d]);
    if (!reduced[d])
      dropDims.push_back(x.shape[d]);
  }
  if (y.shape != keepDims && y.shape != dropDims)
    return Status::error(
        std::string(what) + ": expected y shape " + shapeString(keepDims) +
        " or " + shapeString(dropDims) + ", got " + shapeString(y.shape));
  return Status::success();
}

} // namespace pp::rt::common
