// TensorImpl: what a Tensor handle points to. Storage is separate from layout (sizes, strides, offset
// in elements), so many TensorImpls can view one Storage. Device and dtype are fixed at creation.
#pragma once
#include <memory>

#include "runtime/storage.h"
#include "tessera/dtype.h"
#include "tessera/shape.h"
#include "tessera/tensor.h"

namespace tessera {

// What the autograd layer keeps per tensor (gradient, grad_fn, hooks). Only `requires_grad` is
// visible below autograd, so that ops can decide cheaply whether to record (Note [Autograd stage]).
struct AutogradMetaBase {
  virtual ~AutogradMetaBase() = default;
  bool requires_grad = false;
  bool is_view = false;  // shares memory with another tensor that autograd knows of
  // Note [View tracking] (src/autograd/view_tracking.h): a view made by a view op keeps its root base,
  // the tensor whose memory it shows (never itself a view), so that an in-place write through the
  // view can rewrite the base's history. A view requires grad when its base does.
  std::shared_ptr<TensorImpl> view_base;
};

class TensorImpl {
 public:
  TensorImpl(std::shared_ptr<Storage> storage, DType dtype, Shape sizes, Shape strides, int64_t offset);

  const Shape& sizes() const { return sizes_; }
  const Shape& strides() const { return strides_; }
  int64_t dim() const { return static_cast<int64_t>(sizes_.size()); }
  int64_t numel() const { return numel_; }
  int64_t storage_offset() const { return offset_; }
  DType dtype() const { return dtype_; }
  Device device() const { return storage_->device(); }
  bool is_contiguous() const { return contiguous_; }
  const std::shared_ptr<Storage>& storage() const { return storage_; }
  // First element; null for meta tensors and for empty storages.
  void* data() const {
    char* base = static_cast<char*>(storage_->data());
    return base ? base + offset_ * static_cast<int64_t>(element_size(dtype_)) : nullptr;
  }
  // Changes the layout in place (resize of an out= argument, set of a view). Checks storage bounds.
  void set_layout(Shape sizes, Shape strides, int64_t offset);
  // Points this tensor at other storage (resize of an empty out= argument).
  void reset_storage(std::shared_ptr<Storage> storage, Shape sizes, Shape strides, int64_t offset) {
    storage_ = std::move(storage);
    set_layout(std::move(sizes), std::move(strides), offset);
  }
  void bump_version() { storage_->bump_version(); }

  // Set by the autograd layer for tensors that require grad or have a grad_fn; null otherwise.
  std::unique_ptr<AutogradMetaBase> autograd_meta;

 private:
  void refresh();

  std::shared_ptr<Storage> storage_;
  DType dtype_;
  Shape sizes_;
  Shape strides_;
  int64_t offset_;
  int64_t numel_ = 1;
  bool contiguous_ = true;
};

// A new contiguous tensor with uninitialized contents.
Tensor make_empty(const Shape& sizes, DType dtype, Device device);
// A new tensor with the given strides over freshly allocated storage large enough for them.
Tensor make_empty_strided(const Shape& sizes, const Shape& strides, DType dtype, Device device);
// A view of `base`'s storage with a new layout (bounds checked against the storage).
Tensor make_view(const Tensor& base, Shape sizes, Shape strides, int64_t offset);
// Whether sizes/strides describe a row-major dense layout (size-1 dims may have any stride).
bool is_contiguous_layout(const Shape& sizes, const Shape& strides);
// Whether 4-D sizes/strides are dense in channels-last (N, H, W, C) order (size-1 dims may have any
// stride; an empty layout counts as dense, as for is_contiguous_layout). False for other ranks.
bool is_channels_last_layout(const Shape& sizes, const Shape& strides);
// The channels-last strides of 4-D sizes (N, C, H, W): (H*W*C, 1, W*C, C), with size-0 dims counted
// as 1 (as contiguous_strides does).
Shape channels_last_strides(const Shape& sizes);
// Number of elements of storage a layout reaches: 1 + sum((size - 1) * stride), 0 if empty.
int64_t storage_extent(const Shape& sizes, const Shape& strides);

}  // namespace tessera
