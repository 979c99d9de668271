#include "tensor/tensor_impl.h"

#include "tessera/error.h"

namespace tessera {

TensorImpl::TensorImpl(std::shared_ptr<Storage> storage, DType dtype, Shape sizes, Shape strides, int64_t offset)
    : storage_(std::move(storage)), dtype_(dtype), sizes_(std::move(sizes)), strides_(std::move(strides)), offset_(offset) {
  refresh();
}

void TensorImpl::refresh() {
  numel_ = numel_of(sizes_);
  contiguous_ = is_contiguous_layout(sizes_, strides_);
}

// Note [Checked layouts]: every size, stride and offset product that decides an allocation or a
// bounds check is computed with overflow checks, so that no wrapped product (empty_strided({2},
// {2^62 - 1}) once asked for 0 bytes, and a crafted offset passed the bounds check) can address
// memory outside the storage. Negative sizes, strides and offsets are refused. The messages are
// PyTorch's ("Storage size calculation overflowed ...", "... are out of bounds for storage of size N").
void TensorImpl::set_layout(Shape sizes, Shape strides, int64_t offset) {
  TS_CHECK(sizes.size() == strides.size(), ShapeError, "set_layout: ", sizes.size(), " sizes but ",
           strides.size(), " strides");
  numel_of(sizes);  // negative sizes and an element count past int64 raise
  for (int64_t s : strides)
    TS_CHECK(s >= 0, ValueError, "set_layout: Negative strides are not supported at the moment, got strides: ", strides);
  TS_CHECK(offset >= 0, ValueError, "set_layout: invalid storage offset ", offset);
  const int64_t extent = storage_extent(sizes, strides);
  const auto itemsize = static_cast<int64_t>(element_size(dtype_));
  int64_t end = 0, bytes = 0;
  const bool overflow = extent != 0 && (__builtin_add_overflow(offset, extent, &end) ||
                                        __builtin_mul_overflow(end, itemsize, &bytes));
  TS_CHECK(!overflow && bytes <= static_cast<int64_t>(storage_->nbytes()), IndexError, "set_layout: sizes ", sizes,
           ", strides ", strides, ", storage offset ", offset, ", and itemsize ", itemsize, " requiring a storage size of ",
           overflow ? std::string("more than 2^63 - 1") : std::to_string(bytes), " are out of bounds for storage of size ",
           storage_->nbytes());
  sizes_ = std::move(sizes);
  strides_ = std::move(strides);
  offset_ = offset;
  refresh();
}

bool is_contiguous_layout(const Shape& sizes, const Shape& strides) {
  int64_t expected = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    if (sizes[i] == 0) return true;
    if (sizes[i] == 1) continue;
    if (strides[i] != expected) return false;
    expected *= sizes[i];
  }
  return true;
}

bool is_channels_last_layout(const Shape& sizes, const Shape& strides) {
  if (sizes.size() != 4) return false;
  int64_t expected = 1;
  for (size_t d : {1, 3, 2, 0}) {  // C, W, H, N: innermost first
    if (sizes[d] == 0) return true;
    if (sizes[d] == 1) continue;
    if (strides[d] != expected) return false;
    expected *= sizes[d];
  }
  return true;
}

Shape channels_last_strides(const Shape& sizes) {
  TS_CHECK(sizes.size() == 4, ShapeError, "channels_last: expected 4-D sizes (N, C, H, W), got ", sizes);
  auto at_least_1 = [](int64_t v) { return v > 1 ? v : int64_t(1); };
  Shape st(4);
  st[1] = 1;
  st[3] = at_least_1(sizes[1]);
  st[2] = st[3] * at_least_1(sizes[3]);
  st[0] = st[2] * at_least_1(sizes[2]);
  return st;
}

int64_t storage_extent(const Shape& sizes, const Shape& strides) {
  int64_t hi = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == 0) return 0;
    int64_t step;
    TS_CHECK(!__builtin_mul_overflow(sizes[i] - 1, strides[i], &step) && !__builtin_add_overflow(hi, step, &hi),
             ValueError, "Storage size calculation overflowed with sizes=", sizes, " and strides=", strides);
  }
  return hi + 1;
}

Tensor make_empty(const Shape& sizes, DType dtype, Device device) {
  int64_t n = numel_of(sizes);
  int64_t bytes;
  TS_CHECK(!__builtin_mul_overflow(n, static_cast<int64_t>(element_size(dtype)), &bytes), ValueError,
           "empty: ", n, " elements of ", dtype_name(dtype), " overflow the addressable size");
  auto storage = std::make_shared<Storage>(static_cast<size_t>(bytes), device);
  return Tensor(std::make_shared<TensorImpl>(std::move(storage), dtype, sizes, contiguous_strides(sizes), 0));
}

Tensor make_empty_strided(const Shape& sizes, const Shape& strides, DType dtype, Device device) {
  TS_CHECK(sizes.size() == strides.size(), ShapeError, "empty_strided: ", sizes.size(), " sizes but ",
           strides.size(), " strides");
  for (int64_t s : strides)
    TS_CHECK(s >= 0, ValueError, "empty_strided: Negative strides are not supported at the moment, got strides: ", strides);
  numel_of(sizes);
  const int64_t extent = storage_extent(sizes, strides);  // Note [Checked layouts]
  int64_t bytes;
  TS_CHECK(!__builtin_mul_overflow(extent, static_cast<int64_t>(element_size(dtype)), &bytes), ValueError,
           "empty_strided: Storage size calculation overflowed with sizes=", sizes, " and strides=", strides, " (",
           extent, " elements of ", dtype_name(dtype), ")");
  auto storage = std::make_shared<Storage>(static_cast<size_t>(bytes), device);
  return Tensor(std::make_shared<TensorImpl>(std::move(storage), dtype, sizes, strides, 0));
}

Tensor make_view(const Tensor& base, Shape sizes, Shape strides, int64_t offset) {
  TensorImpl* b = base.impl();
  auto impl = std::make_shared<TensorImpl>(b->storage(), b->dtype(), Shape{}, Shape{}, b->storage_offset());
  impl->set_layout(std::move(sizes), std::move(strides), offset);
  return Tensor(std::move(impl));
}

}  // namespace tessera
