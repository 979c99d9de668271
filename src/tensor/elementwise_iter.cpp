// ElementwiseIter construction: broadcast strides, order dims by the output, merge dims.
#include "tensor/elementwise_iter.h"

#include <algorithm>
#include <numeric>

#include "tessera/error.h"

namespace tessera {

ElementwiseIter::ElementwiseIter(const Tensor& out, std::initializer_list<const Tensor*> inputs) {
  ntensors_ = 1 + static_cast<int>(inputs.size());
  TS_CHECK(ntensors_ <= kMaxOperands, ValueError, "ElementwiseIter: at most ", kMaxOperands - 1, " inputs");
  const Shape& shape = out.sizes();
  const int nd = static_cast<int>(shape.size());
  TS_CHECK(nd <= kMaxDims, ShapeError, "elementwise: tensors of more than ", kMaxDims, " dims are not supported (got ", nd, ")");
  numel_ = out.numel();

  // The common case first: every operand contiguous with the output's shape is one dense dim.
  bool dense = out.is_contiguous();
  for (const Tensor* t : inputs) dense = dense && t->sizes() == shape && t->is_contiguous();
  if (dense) {
    int k = 0;
    data_[k] = static_cast<char*>(out.impl()->data());
    strides_[k++][0] = static_cast<int64_t>(element_size(out.dtype()));
    for (const Tensor* t : inputs) {
      data_[k] = static_cast<char*>(t->impl()->data());
      strides_[k++][0] = static_cast<int64_t>(element_size(t->dtype()));
    }
    shape_[0] = numel_;
    ndim_ = numel_ > 1 ? 1 : 0;  // as below: size-1 dims are dropped, and an empty space has none
    return;
  }

  // Byte strides per operand, aligned to the output's dims (outermost first); 0 where broadcast.
  std::array<std::array<int64_t, kMaxDims>, kMaxOperands> st;  // [t][d] for t < ntensors_, d < nd: all set below
  std::array<const Tensor*, kMaxOperands> ops{};
  ops[0] = &out;
  int k = 1;
  for (const Tensor* t : inputs) ops[k++] = t;
  for (int t = 0; t < ntensors_; ++t) {
    const Tensor& x = *ops[t];
    data_[t] = static_cast<char*>(x.impl()->data());
    const int64_t es = static_cast<int64_t>(element_size(x.dtype()));
    const int xd = static_cast<int>(x.dim());
    TS_CHECK(xd <= nd, ShapeError, "elementwise: input of shape ", x.sizes(), " does not broadcast to ", shape);
    for (int d = 0; d < nd; ++d) {
      int xdim = d - (nd - xd);
      if (xdim < 0) { st[t][d] = 0; continue; }
      int64_t s = x.sizes()[xdim];
      TS_CHECK(s == shape[d] || s == 1, ShapeError, "elementwise: input of shape ", x.sizes(),
               " does not broadcast to ", shape);
      st[t][d] = (s == 1 && shape[d] != 1) ? 0 : x.strides()[xdim] * es;
    }
  }

  // Order dims innermost first: by the output's stride, ascending (stable, so ties keep row-major).
  std::array<int, kMaxDims> perm;
  std::iota(perm.begin(), perm.begin() + nd, 0);
  std::reverse(perm.begin(), perm.begin() + nd);
  if (!out.is_contiguous()) {
    std::stable_sort(perm.begin(), perm.begin() + nd, [&](int a, int b) {
      return st[0][a] < st[0][b] || (st[0][a] == st[0][b] && st[1 % ntensors_][a] < st[1 % ntensors_][b]);
    });
  }

  // Drop size-1 dims and merge neighbours whose strides chain for every operand.
  ndim_ = 0;
  for (int i = 0; i < nd; ++i) {
    int d = perm[i];
    if (shape[d] == 1) continue;
    if (ndim_ > 0) {
      bool mergeable = true;
      for (int t = 0; t < ntensors_; ++t)
        if (st[t][d] != shape_[ndim_ - 1] * strides_[t][ndim_ - 1]) { mergeable = false; break; }
      if (mergeable) {
        shape_[ndim_ - 1] *= shape[d];
        continue;
      }
    }
    shape_[ndim_] = shape[d];
    for (int t = 0; t < ntensors_; ++t) strides_[t][ndim_] = st[t][d];
    ++ndim_;
  }
  if (numel_ == 0) ndim_ = 0;
}

bool ElementwiseIter::is_contiguous_inner(const int64_t* elem_sizes) const {
  if (ndim_ == 0) return true;
  for (int t = 0; t < ntensors_; ++t)
    if (strides_[t][0] != elem_sizes[t] && strides_[t][0] != 0) return false;
  return true;
}

}  // namespace tessera
