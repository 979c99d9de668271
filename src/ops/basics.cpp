// The Tensor's own basics: metadata, copies and dtype/device conversion, item, fill, and the factories
// that need no kernel family of their own (empty, zeros, ones, full, *_like, tensor, from_blob).
#include <cstring>

#include "ops/autograd_hook.h"
#include "ops/capture_check.h"
#include "ops/copy_kernel.h"
#include "ops/op_scope.h"
#include "ops/op_utils.h"
#include "tensor/tensor_impl.h"
#include "tessera/functions.h"

namespace tessera {

KernelSlot<CopyKernelFn> copy_kernel("copy_");
KernelSlot<CopyBetweenDevicesKernelFn> copy_between_devices_kernel("copy_");
KernelSlot<FillKernelFn> fill_kernel("fill_");

// ---- metadata --------------------------------------------------------------------------------
const Shape& Tensor::sizes() const { return impl_->sizes(); }
const Shape& Tensor::strides() const { return impl_->strides(); }
int64_t Tensor::size(int64_t d) const { return impl_->sizes()[wrap_dim(d, dim(), "size")]; }
int64_t Tensor::stride(int64_t d) const { return impl_->strides()[wrap_dim(d, dim(), "stride")]; }
int64_t Tensor::dim() const { return impl_->dim(); }
int64_t Tensor::numel() const { return impl_->numel(); }
int64_t Tensor::storage_offset() const { return impl_->storage_offset(); }
DType Tensor::dtype() const { return impl_->dtype(); }
Device Tensor::device() const { return impl_->device(); }
size_t Tensor::element_size() const { return tessera::element_size(impl_->dtype()); }
size_t Tensor::nbytes() const { return static_cast<size_t>(numel()) * element_size(); }
bool Tensor::is_contiguous() const { return impl_->is_contiguous(); }
bool Tensor::is_contiguous(MemoryFormat format) const {
  if (format == MemoryFormat::Contiguous) return is_contiguous();
  return is_channels_last_layout(sizes(), strides());
}
bool Tensor::is_alias_of(const Tensor& o) const { return impl_->storage() == o.impl_->storage(); }
uint64_t Tensor::version() const { return impl_->storage()->version(); }

void* Tensor::data_ptr() const {
  TS_CHECK(defined(), ValueError, "data_ptr: undefined tensor");
  TS_CHECK(!is_meta(), DeviceError, "data_ptr: meta tensors have no data");
  if (detail::t_capturing && detail::t_op_depth == 0) [[unlikely]]
    detail::trace_host_read("data_ptr(): the program reads or writes tensor data itself");
  void* p = impl_->data();
  if (!p && impl_->storage()->fake()) [[unlikely]]
    TS_THROW(ValueError, "data_ptr: this ", dtype_name(dtype()), " tensor of sizes ", sizes(), " has no data: it was made "
             "while ts::compile traced a pass over fake data (Note [Fake data] in src/runtime/fake_data.h)");
  return p;
}

// ---- copies ----------------------------------------------------------------------------------
Tensor& Tensor::copy_(const Tensor& src, bool non_blocking) {
  OpScope scope(OpId::copy_, {this, &src});
  check_defined("copy_", *this, "self");
  check_defined("copy_", src, "src");
  broadcast_shapes(sizes(), src.sizes(), "copy_");
  check_inplace("copy_", *this, {&src});
  Tensor s = src.expand(sizes());
  check_writable("copy_", *this);
  if (device() == src.device()) {
    copy_kernel(device(), *this, s);
  } else if (is_meta() || src.is_meta()) {
    TS_THROW(DeviceError, "copy_: cannot copy between ", src.device().str(), " and ", device().str(),
             " (meta tensors have no data)");
  } else {
    // Cross-device copies belong to the device backend that is not the CPU.
    copy_between_devices_kernel(is_cpu() ? src.device() : device(), *this, s, non_blocking);
  }
  impl_->bump_version();
  record_inplace(OpId::copy_, *this, {src}, OpAttrs{.flag = non_blocking});
  return *this;
}

Tensor& Tensor::fill_(const Scalar& value) {
  OpScope scope(OpId::fill_, {this});
  check_inplace("fill_", *this);
  check_writable("fill_", *this);
  fill_kernel(device(), *this, value);
  impl_->bump_version();
  record_inplace(OpId::fill_, *this, {}, OpAttrs{.scalars = {value}});
  return *this;
}

Tensor& Tensor::zero_() { return fill_(0); }

// to() and clone() keep a dense layout (channels-last, a transpose): Note [Output layout].
Tensor Tensor::to(DType d, bool copy) const {
  if (d == dtype() && !copy) return *this;
  Tensor out = make_empty_like_inputs(sizes(), d, device(), {this});
  out.copy_(*this);
  return out;
}

Tensor Tensor::to(Device dev, bool non_blocking, bool copy) const { return to(dev, dtype(), non_blocking, copy); }

Tensor Tensor::to(Device dev, DType d, bool non_blocking, bool copy) const {
  if (dev == device() && d == dtype() && !copy) return *this;
  if (dev.is_cpu()) check_not_capturing("cpu", *this);  // the copy lands in pageable memory: it synchronizes
  Tensor out = make_empty_like_inputs(sizes(), d, dev, {this});
  out.copy_(*this, non_blocking);
  return out;
}

// A row-major copy through copy_, as clone(), so that autograd sees the same recorded copy.
Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  Tensor out = make_empty(sizes(), dtype(), device());
  out.copy_(*this);
  return out;
}

// A copy through copy_, as clone(), so that autograd sees the same recorded copy.
Tensor Tensor::contiguous(MemoryFormat format) const {
  if (format == MemoryFormat::Contiguous) return contiguous();
  TS_CHECK(dim() == 4, ShapeError, "contiguous: the channels_last memory format needs a 4-D tensor, got a ", dim(),
           "-D tensor of size ", sizes());
  if (is_contiguous(format)) return *this;
  Tensor out = make_empty_strided(sizes(), channels_last_strides(sizes()), dtype(), device());
  out.copy_(*this);
  return out;
}

Tensor Tensor::clone() const {
  Tensor out = make_empty_like_inputs(sizes(), dtype(), device(), {this});
  out.copy_(*this);
  return out;
}

Tensor clone(const Tensor& t) { return t.clone(); }
Tensor contiguous(const Tensor& t) { return t.contiguous(); }

Scalar Tensor::item() const {
  TS_CHECK(numel() == 1, ValueError, "item: a Tensor with ", numel(), " elements cannot be converted to Scalar");
  TS_CHECK(!is_meta(), DeviceError, "item: meta tensors have no data");
  check_not_capturing("item", *this);
  if (detail::t_capturing && detail::t_op_depth == 0) [[unlikely]]
    detail::trace_host_read("item(): a host read of a tensor's value");
  Tensor c = is_cpu() ? *this : to(kCPU);
  const void* p = c.data_ptr();
  switch (dtype()) {
    case DType::Bool: return Scalar(*static_cast<const bool*>(p));
    case DType::UInt8: return Scalar(static_cast<int64_t>(*static_cast<const uint8_t*>(p)));
    case DType::Int8: return Scalar(static_cast<int64_t>(*static_cast<const int8_t*>(p)));
    case DType::Int32: return Scalar(static_cast<int64_t>(*static_cast<const int32_t*>(p)));
    case DType::Int64: return Scalar(*static_cast<const int64_t*>(p));
    case DType::Float16: return Scalar(static_cast<double>(float(*static_cast<const Half*>(p))));
    case DType::BFloat16: return Scalar(static_cast<double>(float(*static_cast<const BFloat16*>(p))));
    case DType::Float32: return Scalar(static_cast<double>(*static_cast<const float*>(p)));
    case DType::Float64: return Scalar(*static_cast<const double*>(p));
  }
  TS_THROW(DTypeError, "item: unknown dtype");
}

template <class T>
std::vector<T> Tensor::tolist() const {
  Tensor c = to(kCPU, dtype_of_v<T>).contiguous();
  const T* p = c.template data_ptr<T>();
  return std::vector<T>(p, p + c.numel());
}
template std::vector<bool> Tensor::tolist<bool>() const;
template std::vector<uint8_t> Tensor::tolist<uint8_t>() const;
template std::vector<int8_t> Tensor::tolist<int8_t>() const;
template std::vector<int32_t> Tensor::tolist<int32_t>() const;
template std::vector<int64_t> Tensor::tolist<int64_t>() const;
template std::vector<Half> Tensor::tolist<Half>() const;
template std::vector<BFloat16> Tensor::tolist<BFloat16>() const;
template std::vector<float> Tensor::tolist<float>() const;
template std::vector<double> Tensor::tolist<double>() const;

// ---- factories -------------------------------------------------------------------------------
Tensor empty(const Shape& sizes, TensorOptions opts) {
  return make_empty(sizes, opts.dtype_or(kFloat32), opts.device);
}

Tensor empty_strided(const Shape& sizes, const Shape& strides, TensorOptions opts) {
  return make_empty_strided(sizes, strides, opts.dtype_or(kFloat32), opts.device);
}

Tensor full(const Shape& sizes, const Scalar& value, TensorOptions opts) {
  Tensor t = make_empty(sizes, opts.dtype_or(value.dtype()), opts.device);
  t.fill_(value);
  return t;
}

Tensor zeros(const Shape& sizes, TensorOptions opts) { return full(sizes, 0, TensorOptions(opts.dtype_or(kFloat32), opts.device)); }
Tensor ones(const Shape& sizes, TensorOptions opts) { return full(sizes, 1, TensorOptions(opts.dtype_or(kFloat32), opts.device)); }

namespace {
TensorOptions like(const Tensor& t, const TensorOptions& opts) {
  // A device given in opts wins only when it differs from the default (cpu) or dtype is unset.
  TensorOptions o(opts.dtype_or(t.dtype()), opts.device);
  if (opts.device == kCPU && !t.is_cpu()) o.device = t.device();
  return o;
}
}  // namespace

// The *_like factories keep t's layout, as PyTorch's memory_format=torch.preserve_format (Note [Output
// layout]): zeros_like of an NHWC or transposed tensor is NHWC or transposed. rand_like and randn_like
// draw row-major, so that they equal rand / randn of the same sizes and seed.
namespace {
Tensor empty_in_layout_of(const Tensor& t, TensorOptions opts) {
  TensorOptions o = like(t, opts);
  return make_empty_like_inputs(t.sizes(), o.dtype_or(t.dtype()), o.device, {&t});
}
}  // namespace

Tensor empty_like(const Tensor& t, TensorOptions opts) { return empty_in_layout_of(t, opts); }
Tensor zeros_like(const Tensor& t, TensorOptions opts) { return full_like(t, 0, opts); }
Tensor ones_like(const Tensor& t, TensorOptions opts) { return full_like(t, 1, opts); }
Tensor full_like(const Tensor& t, const Scalar& value, TensorOptions opts) {
  Tensor r = empty_in_layout_of(t, opts);
  r.fill_(value);
  return r;
}
Tensor rand_like(const Tensor& t, TensorOptions opts, Generator* gen) { return rand(t.sizes(), like(t, opts), gen); }
Tensor randn_like(const Tensor& t, TensorOptions opts, Generator* gen) { return randn(t.sizes(), like(t, opts), gen); }

Tensor from_blob(const void* data, const Shape& sizes, DType dtype) {
  Tensor t = make_empty(sizes, dtype, kCPU);
  if (t.nbytes()) std::memcpy(t.data_ptr(), data, t.nbytes());
  return t;
}

template <class T>
Tensor tensor(const std::vector<T>& values, const Shape& sizes, TensorOptions opts) {
  Shape shape = sizes.empty() ? Shape{static_cast<int64_t>(values.size())} : sizes;
  TS_CHECK(numel_of(shape) == static_cast<int64_t>(values.size()), ShapeError, "tensor: ", values.size(),
           " values cannot fill shape ", shape);
  Tensor host;
  if constexpr (std::is_same_v<T, bool>) {
    host = make_empty(shape, kBool, kCPU);
    bool* p = host.data_ptr<bool>();
    for (size_t i = 0; i < values.size(); ++i) p[i] = values[i];
  } else {
    host = from_blob(values.data(), shape, dtype_of_v<T>);
  }
  DType want = opts.dtype_or(std::is_same_v<T, double> ? kFloat32 : dtype_of_v<T>);
  return host.to(opts.device, want);
}
template Tensor tensor<bool>(const std::vector<bool>&, const Shape&, TensorOptions);
template Tensor tensor<uint8_t>(const std::vector<uint8_t>&, const Shape&, TensorOptions);
template Tensor tensor<int8_t>(const std::vector<int8_t>&, const Shape&, TensorOptions);
template Tensor tensor<int32_t>(const std::vector<int32_t>&, const Shape&, TensorOptions);
template Tensor tensor<int64_t>(const std::vector<int64_t>&, const Shape&, TensorOptions);
template Tensor tensor<Half>(const std::vector<Half>&, const Shape&, TensorOptions);
template Tensor tensor<BFloat16>(const std::vector<BFloat16>&, const Shape&, TensorOptions);
template Tensor tensor<float>(const std::vector<float>&, const Shape&, TensorOptions);
template Tensor tensor<double>(const std::vector<double>&, const Shape&, TensorOptions);

Tensor tensor(std::initializer_list<double> values, TensorOptions opts) {
  return tensor(std::vector<double>(values), {}, opts);
}

Tensor scalar_tensor(const Scalar& value, TensorOptions opts) {
  return full({}, value, TensorOptions(opts.dtype_or(value.dtype()), opts.device));
}

}  // namespace tessera
