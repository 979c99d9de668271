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

Tensor make_empty_like_inputs(const Shape& sizes, DType dtype, Device device,
                              std::initializer_list<const Tensor*> inputs) {
  for (const Tensor* t : inputs) {
    if (t == nullptr || !t->defined() || t->sizes() != sizes) continue;
    Shape strides = dense_permuted_strides(*t);
    return strides.empty() ? make_empty(sizes, dtype, device) : make_empty_strided(sizes, strides, dtype, device);
  }
  return make_empty(sizes, dtype, device);
}

}  // namespace tessera
