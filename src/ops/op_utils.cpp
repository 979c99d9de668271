#include "ops/op_utils.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "ops/copy_kernel.h"

namespace tessera {

void check_defined(const char* op, const Tensor& t, const char* arg) {
  TS_CHECK(t.defined(), ValueError, op, ": argument '", arg, "' is an undefined tensor");
}

void check_same_device(const char* op, std::initializer_list<const Tensor*> tensors) {
  const Tensor* first = nullptr;
  for (const Tensor* t : tensors) {
    if (!t || !t->defined()) continue;
    if (!first) { first = t; continue; }
    TS_CHECK(t->device() == first->device(), DeviceError, op,
             ": expected all tensors to be on the same device, but found at least two devices, ",
             first->device().str(), " and ", t->device().str());
  }
}

Tensor& prepare_out(const char* op, Tensor& out, const Shape& sizes, DType dtype, Device device) {
  check_defined(op, out, "out");
  TS_CHECK(out.device() == device, DeviceError, op, ": out= tensor is on ", out.device().str(),
           " but the result is on ", device.str());
  TS_CHECK(can_cast(dtype, out.dtype()), DTypeError, op, ": result type ", dtype_name(dtype),
           " can't be cast to the desired output type ", dtype_name(out.dtype()));
  if (out.sizes() != sizes) {
    TS_CHECK(out.numel() == 0, ShapeError, op, ": out= tensor has shape ", out.sizes(),
             " but the result has shape ", sizes, " (only an empty out= tensor is resized)");
    Tensor fresh = make_empty(sizes, out.dtype(), out.device());
    out.impl()->reset_storage(fresh.impl()->storage(), sizes, contiguous_strides(sizes), 0);
  }
  return out;
}

Tensor cast_to(const Tensor& t, DType d) { return t.dtype() == d ? t : t.to(d); }

void write_out(Tensor& out, const Tensor& result) {
  if (result.is_same(out)) return;
  out.copy_(result);
}

void check_writable(const char* op, const Tensor& out) {
  for (int64_t i = 0; i < out.dim(); ++i)
    TS_CHECK(out.strides()[i] != 0 || out.sizes()[i] <= 1, ValueError, op,
             ": unsupported operation: more than one element of the written-to tensor refers to a single "
             "memory location. Please clone() the tensor before performing the operation.");
}

Scalar scalar_from_tensor(const Tensor& t) { return t.item(); }

std::pair<int64_t, int64_t> exact_int_range(DType t) {
  switch (t) {
    case DType::Bool: return {0, 1};
    case DType::UInt8: return {0, 255};
    case DType::Int8: return {-128, 127};
    case DType::Int32: return {std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()};
    case DType::Int64: return {std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()};
    case DType::Float16: return {-(int64_t{1} << 11), int64_t{1} << 11};
    case DType::BFloat16: return {-(int64_t{1} << 8), int64_t{1} << 8};
    case DType::Float32: return {-(int64_t{1} << 24), int64_t{1} << 24};
    case DType::Float64: return {-(int64_t{1} << 53), int64_t{1} << 53};
  }
  return {0, 0};
}


bool suggests_channels_last(const Tensor& t) {
  return t.defined() && t.dim() == 4 && !t.is_contiguous() && t.is_contiguous(MemoryFormat::ChannelsLast);
}

Tensor make_empty_in_format(const Shape& sizes, DType dtype, Device device, bool channels_last) {
  if (!channels_last) return make_empty(sizes, dtype, device);
  return make_empty_strided(sizes, channels_last_strides(sizes), dtype, device);
}

Shape dense_permuted_strides(const Tensor& t) {
  if (!t.defined() || t.is_contiguous() || t.numel() == 0) return {};
  const Shape& sizes = t.sizes();
  const Shape& strides = t.strides();
  const int64_t nd = t.dim();
  std::vector<int64_t> order(static_cast<size_t>(nd));
  for (int64_t d = 0; d < nd; ++d) order[static_cast<size_t>(d)] = d;
  // Innermost last: by decreasing stride, outer dims first among equal strides.
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return strides[a] > strides[b]; });
  int64_t expected = 1;
  for (int64_t i = nd - 1; i >= 0; --i) {
    const int64_t d = order[static_cast<size_t>(i)];
    if (sizes[d] == 1) continue;  // any stride will do
    if (strides[d] != expected) return {};
    expected *= sizes[d];
  }
  return strides;
}

namespace {

// Each operand's strides over the result's dims: 0 where it broadcasts (a missing leading dim, or a
// size-1 dim against a larger one), as TensorIterator's compute_strides.
std::vector<Shape> broadcast_strides(const Shape& sizes, const std::vector<const Tensor*>& ops) {
  const size_t nd = sizes.size();
  std::vector<Shape> r;
  for (const Tensor* t : ops) {
    Shape st(nd, 0);
    const size_t off = nd - static_cast<size_t>(t->dim());
    for (size_t i = 0; i < static_cast<size_t>(t->dim()); ++i)
      st[off + i] = (t->size(static_cast<int64_t>(i)) == 1 && sizes[off + i] != 1) ? 0 : t->stride(static_cast<int64_t>(i));
    r.push_back(std::move(st));
  }
  return r;
}

}  // namespace

Tensor make_empty_like_inputs(const Shape& sizes, DType dtype, Device device,
                              std::initializer_list<const Tensor*> inputs) {
  return make_empty_like_inputs(sizes, dtype, device, std::vector<const Tensor*>(inputs));
}

Tensor make_empty_like_inputs(const Shape& sizes, DType dtype, Device device, const std::vector<const Tensor*>& inputs) {
  std::vector<const Tensor*> ops;
  for (const Tensor* t : inputs)
    if (t != nullptr && t->defined()) ops.push_back(t);
  const int64_t nd = static_cast<int64_t>(sizes.size());
  if (ops.empty() || nd <= 1) return make_empty(sizes, dtype, device);
  // All contiguous (broadcast or not): reorder_dimensions below would keep row-major order, so skip it
  // (the common case, on every eager op). Every operand of the result's shape and dense with the first
  // one's strides: those strides.
  bool same_shape = true, contiguous = true;
  for (const Tensor* t : ops) {
    same_shape = same_shape && t->sizes() == sizes;
    contiguous = contiguous && t->is_contiguous();
  }
  if (contiguous) return make_empty(sizes, dtype, device);
  if (same_shape) {
    Shape first = dense_permuted_strides(*ops[0]);
    bool all_same = !first.empty();
    for (const Tensor* t : ops) all_same = all_same && t->strides() == ops[0]->strides();
    if (all_same) return make_empty_strided(sizes, first, dtype, device);
  }
  // TensorIterator's reorder_dimensions: perm[0] is the innermost dim. Two dims are ordered by the
  // first operand whose strides tell them apart (broadcast dims tell nothing); equal strides put the
  // smaller size inside.
  const std::vector<Shape> st = broadcast_strides(sizes, ops);
  auto should_swap = [&](int64_t d0, int64_t d1) {
    for (const Shape& s : st) {
      const int64_t a = s[static_cast<size_t>(d0)], b = s[static_cast<size_t>(d1)];
      if (a == 0 || b == 0) continue;
      if (a < b) return -1;
      if (a > b) return 1;
      if (sizes[static_cast<size_t>(d0)] > sizes[static_cast<size_t>(d1)]) return 1;
    }
    return 0;
  };
  std::vector<int64_t> perm(static_cast<size_t>(nd));
  for (int64_t i = 0; i < nd; ++i) perm[static_cast<size_t>(i)] = nd - 1 - i;
  for (int64_t i = 1; i < nd; ++i) {
    int64_t d1 = i;
    for (int64_t d0 = i - 1; d0 >= 0; --d0) {
      const int c = should_swap(perm[static_cast<size_t>(d0)], perm[static_cast<size_t>(d1)]);
      if (c > 0) {
        std::swap(perm[static_cast<size_t>(d0)], perm[static_cast<size_t>(d1)]);
        d1 = d0;
      } else if (c < 0) {
        break;
      }
    }
  }
  bool row_major = true;
  for (int64_t i = 0; i < nd; ++i) row_major = row_major && perm[static_cast<size_t>(i)] == nd - 1 - i;
  if (row_major) return make_empty(sizes, dtype, device);
  Shape strides(static_cast<size_t>(nd));
  int64_t next = 1;
  for (int64_t i = 0; i < nd; ++i) {
    const int64_t d = perm[static_cast<size_t>(i)];
    strides[static_cast<size_t>(d)] = next;
    next *= sizes[static_cast<size_t>(d)];
  }
  return make_empty_strided(sizes, strides, dtype, device);
}

}  // namespace tessera
