// The indexing ops other than index/index_put: index_select, gather, scatter, scatter_add, index_add,
// masked_fill, masked_select, nonzero, embedding, one_hot. Meta functions only: validation, shapes,
// output allocation and the restrided views the kernels walk (ops/index_kernel.h).
//
// PyTorch 1.13's rules, followed here:
// - index dtypes: gather/scatter/scatter_add and one_hot take int64 only; index_select, index_add and
//   embedding take int64 or int32; anything else is a DTypeError.
// - negative index values are out of range for gather, scatter, index_select, index_add and embedding
//   (PyTorch's CPU kernels do not wrap them); only index/index_put wrap.
// - 0-dim self/index/src count as 1-dim of size 1 in gather/scatter/index_select/index_add.
// - gather/scatter: index has as many dims as self (and src), index.size(d) <= self.size(d) for
//   d != dim and index.size(d) <= src.size(d) for every d; scatter skips the checks for an empty index.
// - outputs with data-dependent sizes (nonzero, masked_select, one_hot with num_classes = -1) raise
//   NotImplementedError on the meta device.
//
// Autograd (Note [Autograd stage]): each differentiable op computes its result with recording off
// (the clone()s and reshape()s inside are its implementation, not steps to differentiate) and then
// records itself once. Index tensors and masks take no gradient: they travel in attrs.tensors, the
// wrapped dim in IndexAttrs. nonzero and one_hot have integer outputs and record nothing.
#include <algorithm>

#include "ops/autocast_hook.h"
#include "ops/advanced_index.h"
#include "ops/autograd_hook.h"
#include "ops/no_record.h"
#include "ops/index_kernel.h"
#include "ops/op_scope.h"
#include "ops/capture_check.h"
#include "ops/op_utils.h"
#include "tensor/tensor_impl.h"
#include "tessera/functions.h"

namespace tessera {

KernelSlot<GatherKernelFn> gather_kernel("gather");
KernelSlot<ScatterKernelFn> scatter_kernel("scatter");
KernelSlot<MaskedFillKernelFn> masked_fill_kernel("masked_fill");
KernelSlot<CountNonzeroKernelFn> count_nonzero_kernel("count_nonzero");
KernelSlot<NonzeroKernelFn> nonzero_kernel("nonzero");
KernelSlot<MaskedSelectKernelFn> masked_select_kernel("masked_select");
KernelSlot<IndexMinMaxKernelFn> index_min_max_kernel("one_hot");
KernelSlot<OneHotKernelFn> one_hot_kernel("one_hot");

namespace {

void check_index_dtype(const char* op, const Tensor& index, bool int32_ok) {
  const DType d = index.dtype();
  TS_CHECK(d == kInt64 || (int32_ok && d == kInt32), DTypeError, op, ": expected index of dtype int64",
           int32_ok ? " or int32" : "", ", got ", dtype_name(d));
}

// A 0-dim tensor as 1-dim of size 1 (a view); others unchanged.
Tensor at_least_1d(const Tensor& t) { return t.dim() == 0 ? t.reshape({1}) : t; }

// `t` with index's sizes except size 1 along `dim` (a view over t's storage, t's strides).
Tensor squash_dim(const Tensor& t, const Shape& index_sizes, int64_t dim) {
  Shape s = index_sizes;
  s[dim] = 1;
  return make_view(t, s, t.strides(), t.storage_offset());
}

// Shared by scatter (src or value) and scatter_add. `src` undefined means `value` is scattered.
Tensor scatter_impl(const char* op, const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src,
                    const Scalar& value, ScatterReduce reduce) {
  check_defined(op, x, "self");
  check_defined(op, index, "index");
  check_same_device(op, {&x, &index, &src});
  check_index_dtype(op, index, /*int32_ok=*/false);
  if (src.defined())
    TS_CHECK(src.dtype() == x.dtype(), DTypeError, op, ": expected self.dtype to be equal to src.dtype, got ",
             dtype_name(x.dtype()), " and ", dtype_name(src.dtype()));
  const int64_t nd = std::max<int64_t>(x.dim(), 1);
  const int64_t d = wrap_dim(dim, nd, op);
  Tensor out = x.clone();
  if (index.numel() == 0) return out;
  TS_CHECK(std::max<int64_t>(index.dim(), 1) == nd, ShapeError, op,
           ": index tensor must have the same number of dimensions as self tensor, got ", index.dim(), " and ",
           x.dim());
  if (src.defined())
    TS_CHECK(std::max<int64_t>(src.dim(), 1) == nd, ShapeError, op,
             ": index tensor must have the same number of dimensions as src tensor, got ", index.dim(), " and ",
             src.dim());
  Tensor x1 = at_least_1d(out), i1 = at_least_1d(index), s1 = src.defined() ? at_least_1d(src) : Tensor();
  for (int64_t k = 0; k < nd; ++k) {
    bool ok = (k == d || i1.size(k) <= x1.size(k)) && (!s1.defined() || i1.size(k) <= s1.size(k));
    TS_CHECK(ok, ShapeError, op, ": expected index ", index.sizes(), " to be smaller than self ", x.sizes(),
             " apart from dimension ", d, src.defined() ? detail::str_cat(" and to be smaller than src ", src.sizes()) : "",
             " (size mismatch at dimension ", k, ")");
  }
  TS_CHECK(x1.size(d) > 0, IndexError, op, ": index is out of bounds for dimension ", d,
           " with size 0 (the index tensor is not empty)");
  ScatterGatherDim sd;
  sd.dim = d;
  sd.self_size = x1.size(d);
  sd.self_stride = x1.stride(d);
  sd.index_size = i1.size(d);
  sd.index_stride = i1.stride(d);
  Tensor src_r;
  Shape rs = i1.sizes();
  rs[d] = 1;
  if (s1.defined()) {
    src_r = squash_dim(s1, i1.sizes(), d);
    sd.src_stride = s1.stride(d);
  } else {
    src_r = scalar_tensor(value, TensorOptions(x.dtype(), x.device())).expand(rs);
    sd.src_stride = 0;
  }
  scatter_kernel(x.device(), squash_dim(x1, i1.sizes(), d), squash_dim(i1, i1.sizes(), d), src_r, sd, reduce);
  return out;
}

// index_select on a tensor of at least one dim, through the advanced-index kernel.
Tensor index_select_impl(const char* op, const Tensor& x, int64_t d, const Tensor& index1d) {
  std::vector<std::optional<Tensor>> indices(static_cast<size_t>(d));
  indices.push_back(index1d);
  AdvancedIndex ai = plan_advanced_index(op, x, indices, /*wrap_negative=*/false);
  Tensor out = make_empty(ai.result_sizes, x.dtype(), x.device());
  index_kernel(x.device(), out, ai.self, ai.plan);
  return out;
}

}  // namespace

namespace {
Tensor index_select_fwd(const Tensor& x, int64_t dim, const Tensor& index) {
  const OpId id = OpId::index_select;
  const char* op = op_name(id);
  NoRecordScope no_record;
  check_defined(op, x, "self");
  check_defined(op, index, "index");
  check_same_device(op, {&x, &index});
  check_index_dtype(op, index, /*int32_ok=*/true);
  TS_CHECK(index.dim() <= 1, ShapeError, op, ": index is supposed to be a vector, got a ", index.dim(), "-D tensor");
  const int64_t d = wrap_dim(dim, std::max<int64_t>(x.dim(), 1), op);
  Tensor idx = index.reshape({-1});
  if (x.dim() == 0) {
    TS_CHECK(idx.numel() == 1, IndexError, op, ": index to a 0-dim tensor can have only 1 value, got ", idx.numel(),
             " value(s)");
    return index_select_impl(op, x.reshape({1}), 0, idx).reshape({});
  }
  return index_select_impl(op, x, d, idx);
}
}  // namespace

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  OpScope scope(OpId::index_select, {&x, &index});
  Tensor out = index_select_fwd(x, dim, index);
  if (should_record({&x})) {
    const int64_t d = wrap_dim(dim, std::max<int64_t>(x.dim(), 1), "index_select");
    record_op(OpId::index_select, {x}, {out}, OpAttrs{.tensors = {index.reshape({-1})}, .typed = IndexAttrs{.dim = d}});
  }
  return out;
}

namespace {
Tensor gather_fwd(const Tensor& x, int64_t dim, const Tensor& index) {
  const OpId id = OpId::gather;
  const char* op = op_name(id);
  NoRecordScope no_record;
  check_defined(op, x, "self");
  check_defined(op, index, "index");
  check_same_device(op, {&x, &index});
  check_index_dtype(op, index, /*int32_ok=*/false);
  const int64_t nd = std::max<int64_t>(x.dim(), 1);
  const int64_t d = wrap_dim(dim, nd, op);
  TS_CHECK(std::max<int64_t>(index.dim(), 1) == nd, ShapeError, op,
           ": index tensor must have the same number of dimensions as input tensor, got ", index.dim(), " and ",
           x.dim());
  Tensor x1 = at_least_1d(x), i1 = at_least_1d(index);
  for (int64_t k = 0; k < nd; ++k)
    TS_CHECK(k == d || i1.size(k) <= x1.size(k), ShapeError, op, ": size does not match at dimension ", k,
             ": expected index ", index.sizes(), " to be smaller than self ", x.sizes(), " apart from dimension ", d);
  Tensor out = make_empty(index.sizes(), x.dtype(), x.device());
  if (out.numel() == 0) return out;
  TS_CHECK(x1.size(d) > 0, IndexError, op, ": index is out of bounds for dimension ", d,
           " with size 0 (the index tensor is not empty)");
  // self restrided to index's sizes, stride 0 along dim: the kernel adds index * self_stride.
  Shape st = x1.strides();
  st[d] = 0;
  Tensor self_r = make_view(x1, i1.sizes(), st, x1.storage_offset());
  ScatterGatherDim sd;
  sd.dim = d;
  sd.self_size = x1.size(d);
  sd.self_stride = x1.stride(d);
  gather_kernel(x.device(), at_least_1d(out), self_r, i1, sd);
  return out;
}
}  // namespace

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  OpScope scope(OpId::gather, {&x, &index});
  Tensor out = gather_fwd(x, dim, index);
  if (should_record({&x})) {
    const int64_t d = wrap_dim(dim, std::max<int64_t>(x.dim(), 1), "gather");
    record_op(OpId::gather, {x}, {out}, OpAttrs{.tensors = {index}, .typed = IndexAttrs{.dim = d}});
  }
  return out;
}

namespace {
// Records scatter / scatter_add: inputs {self} (scattered value) or {self, src}.
Tensor record_scatter(OpId id, const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src,
                      Tensor out) {
  const char* op = op_name(id);
  const bool with_src = src.defined();
  if (!(with_src ? should_record({&x, &src}) : should_record({&x}))) return out;
  const int64_t d = wrap_dim(dim, std::max<int64_t>(x.dim(), 1), op);
  std::vector<Tensor> inputs = {x};
  if (with_src) inputs.push_back(src);
  record_op(id, inputs, {out}, OpAttrs{.tensors = {index}, .typed = IndexAttrs{.dim = d}});
  return out;
}
}  // namespace

Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  OpScope scope(OpId::scatter, {&x, &index, &src});
  check_defined("scatter", src, "src");
  Tensor out;
  {
    NoRecordScope no_record;
    out = scatter_impl("scatter", x, dim, index, src, Scalar(0), ScatterReduce::None);
  }
  return record_scatter(OpId::scatter, x, dim, index, src, out);
}

Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Scalar& value) {
  OpScope scope(OpId::scatter, {&x, &index});
  Tensor out;
  {
    NoRecordScope no_record;
    out = scatter_impl("scatter", x, dim, index, Tensor(), value, ScatterReduce::None);
  }
  return record_scatter(OpId::scatter, x, dim, index, Tensor(), out);
}

Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  if (autocast_pending()) [[unlikely]]
    if (AutocastArgs c(OpId::scatter_add, {&x, &index, &src}); c) return scatter_add(c[0], dim, c[1], c[2]);
  OpScope scope(OpId::scatter_add, {&x, &index, &src});
  check_defined("scatter_add", src, "src");
  Tensor out;
  {
    NoRecordScope no_record;
    out = scatter_impl("scatter_add", x, dim, index, src, Scalar(0), ScatterReduce::Add);
  }
  return record_scatter(OpId::scatter_add, x, dim, index, src, out);
}

namespace {
Tensor index_add_fwd(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source, const Scalar& alpha) {
  const OpId id = OpId::index_add;
  const char* op = op_name(id);
  NoRecordScope no_record;
  check_defined(op, x, "self");
  check_defined(op, index, "index");
  check_defined(op, source, "source");
  check_same_device(op, {&x, &index, &source});
  check_index_dtype(op, index, /*int32_ok=*/true);
  TS_CHECK(index.dim() <= 1, ShapeError, op, ": index is supposed to be a vector, got a ", index.dim(), "-D tensor");
  TS_CHECK(source.dtype() == x.dtype(), DTypeError, op, ": self (", dtype_name(x.dtype()), ") and source (",
           dtype_name(source.dtype()), ") must have the same dtype");
  TS_CHECK(!alpha.is_bool() || x.dtype() == kBool, DTypeError, op, ": boolean alpha only supported for bool tensors, got ",
           dtype_name(x.dtype()));
  TS_CHECK(is_floating_point(x.dtype()) || !alpha.is_floating_point(), DTypeError, op,
           ": for integral input tensors, argument alpha must not be a floating point number (got ", alpha, " for ",
           dtype_name(x.dtype()), ")");
  const int64_t d = wrap_dim(dim, std::max<int64_t>(x.dim(), 1), op);
  Tensor out = x.clone();
  Tensor x1 = at_least_1d(out), s1 = at_least_1d(source);
  const int64_t n = index.numel();
  TS_CHECK(s1.dim() == x1.dim(), ShapeError, op, ": source and self must have the same number of dimensions, got ",
           source.dim(), " and ", x.dim());
  TS_CHECK(s1.size(d) == n, ShapeError, op, ": number of indices (", n, ") should be equal to source.size(dim) (",
           s1.size(d), ")");
  for (int64_t k = 0; k < x1.dim(); ++k)
    TS_CHECK(k == d || s1.size(k) == x1.size(k), ShapeError, op, ": source ", source.sizes(), " and self ",
             x.sizes(), " must have the same slice shapes apart from dimension ", d);
  std::vector<std::optional<Tensor>> indices(static_cast<size_t>(d));
  indices.push_back(index.reshape({-1}));
  AdvancedIndex ai = plan_advanced_index(op, x1, indices, /*wrap_negative=*/false);
  index_put_kernel(x.device(), ai.self, s1, ai.plan, /*accumulate=*/true, alpha);
  return out;
}
}  // namespace

Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source, const Scalar& alpha) {
  OpScope scope(OpId::index_add, {&x, &index, &source});
  Tensor out = index_add_fwd(x, dim, index, source, alpha);
  if (should_record({&x, &source})) {
    const int64_t d = wrap_dim(dim, std::max<int64_t>(x.dim(), 1), "index_add");
    record_op(OpId::index_add, {x, source}, {out},
              OpAttrs{.tensors = {index.reshape({-1})}, .typed = IndexAttrs{.dim = d, .alpha = alpha.to_double()}});
  }
  return out;
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, const Scalar& value) {
  const OpId id = OpId::masked_fill;
  const char* op = op_name(id);
  OpScope scope(id, {&x, &mask});
  check_defined(op, x, "self");
  check_defined(op, mask, "mask");
  check_same_device(op, {&x, &mask});
  TS_CHECK(mask.dtype() == kBool, DTypeError, op, ": only supports boolean masks, but got mask with dtype ",
           dtype_name(mask.dtype()));
  Shape shape = broadcast_shapes(x.sizes(), mask.sizes(), op);
  Tensor out = make_empty(shape, x.dtype(), x.device());
  masked_fill_kernel(x.device(), out, x, mask, value);
  if (should_record({&x})) {
    OpAttrs attrs = make_attrs({}, {mask});
    attrs.scalars = {value};  // for the compiler's replay; the derivative needs only the mask
    record_op(id, {x}, {out}, std::move(attrs));
  }
  return out;
}

Tensor masked_select(const Tensor& x, const Tensor& mask) {
  const OpId id = OpId::masked_select;
  const char* op = op_name(id);
  OpScope scope(id, {&x, &mask});
  check_defined(op, x, "self");
  check_defined(op, mask, "mask");
  check_same_device(op, {&x, &mask});
  TS_CHECK(mask.dtype() == kBool, DTypeError, op, ": expected a bool mask, got ", dtype_name(mask.dtype()));
  Shape shape = broadcast_shapes(x.sizes(), mask.sizes(), op);
  TS_CHECK(!x.is_meta(), NotImplementedError, op,
           ": the output size depends on the mask's values, which the meta device does not have");
  Tensor out;
  {
    NoRecordScope no_record;
    Tensor xb = x.expand(shape), mb = mask.expand(shape);
    int64_t n = 0;
    check_not_capturing(op, x);
    count_nonzero_kernel(x.device(), mb, &n);
    out = make_empty({n}, x.dtype(), x.device());
    masked_select_kernel(x.device(), out, xb, mb);
  }
  // The derivative puts the gradient back at the mask's true positions of the broadcast shape.
  if (should_record({&x})) record_op(id, {x}, {out}, make_attrs({}, {mask}));
  return out;
}

Tensor nonzero(const Tensor& x) {
  const OpId id = OpId::nonzero;
  const char* op = op_name(id);
  OpScope scope(id, {&x});
  check_defined(op, x, "self");
  TS_CHECK(!x.is_meta(), NotImplementedError, op,
           ": the output size depends on the tensor's values, which the meta device does not have");
  int64_t n = 0;
  check_not_capturing(op, x);
  count_nonzero_kernel(x.device(), x, &n);
  Tensor out = make_empty({n, x.dim()}, kInt64, x.device());
  nonzero_kernel(x.device(), out, x);
  return out;
}

Tensor embedding(const Tensor& weight, const Tensor& indices, std::optional<int64_t> padding_idx) {
  const OpId id = OpId::embedding;
  const char* op = op_name(id);
  OpScope scope(id, {&weight, &indices});
  check_defined(op, weight, "weight");
  check_defined(op, indices, "indices");
  check_same_device(op, {&weight, &indices});
  TS_CHECK(weight.dim() == 2, ShapeError, op, ": 'weight' must be 2-D, got a ", weight.dim(), "-D tensor");
  check_index_dtype(op, indices, /*int32_ok=*/true);
  // padding_idx only changes the backward (its row gets no gradient); the forward just gathers.
  if (padding_idx) {
    const int64_t n = weight.size(0);
    TS_CHECK(*padding_idx >= -n && *padding_idx < n, IndexError, op, ": padding_idx (", *padding_idx,
             ") must be within num_embeddings (", n, ")");
  }
  Tensor out;
  {
    NoRecordScope no_record;
    AdvancedIndex ai = plan_advanced_index(op, weight, {indices}, /*wrap_negative=*/false);
    out = make_empty(ai.result_sizes, weight.dtype(), weight.device());  // indices.sizes() + (D,)
    index_kernel(weight.device(), out, ai.self, ai.plan);
  }
  // IndexAttrs::padding_idx: the given padding_idx, wrapped (-1: none).
  if (should_record({&weight})) {
    const int64_t pad = !padding_idx ? -1 : *padding_idx < 0 ? *padding_idx + weight.size(0) : *padding_idx;
    record_op(id, {weight}, {out}, OpAttrs{.tensors = {indices}, .typed = IndexAttrs{.padding_idx = pad}});
  }
  return out;
}

Tensor one_hot(const Tensor& indices, int64_t num_classes) {
  const OpId id = OpId::one_hot;
  const char* op = op_name(id);
  OpScope scope(id, {&indices});
  check_defined(op, indices, "indices");
  TS_CHECK(indices.dtype() == kInt64, DTypeError, op, ": is only applicable to index tensors of dtype int64, got ",
           dtype_name(indices.dtype()));
  TS_CHECK(num_classes >= -1, ValueError, op, ": num_classes must be -1 or non-negative, got ", num_classes);
  Shape shape = indices.sizes();
  if (indices.numel() == 0) {
    TS_CHECK(num_classes > 0, ValueError, op, ": can not infer the total number of classes from an empty tensor");
    shape.push_back(num_classes);
    return make_empty(shape, kInt64, indices.device());
  }
  if (num_classes == -1) {
    TS_CHECK(!indices.is_meta(), NotImplementedError, op,
             ": num_classes = -1 depends on the values of indices, which the meta device does not have");
    int64_t lo = 0, hi = 0;
    check_not_capturing(op, indices);
    index_min_max_kernel(indices.device(), indices, &lo, &hi);
    TS_CHECK(lo >= 0, IndexError, op, ": class values must be non-negative, got ", lo);
    num_classes = hi + 1;
  }
  shape.push_back(num_classes);
  Tensor out = make_empty(shape, kInt64, indices.device());
  one_hot_kernel(indices.device(), out, indices, num_classes);
  return out;
}

}  // namespace tessera
