// Ordering ops: sort, argsort, topk, unique. Meta functions wrap dims, check k, and allocate
// contiguous outputs; 0-dim inputs are handed to the kernels as 1-element 1-D views so that kernels
// always see a dim to work along.
//
// Note [Sort order]: NaN sorts as the largest value (after +inf ascending, first descending) and
// equal elements keep their input order in both directions, so `stable` changes nothing: every sort
// here is stable, which PyTorch allows for stable=false. topk breaks ties by the lower index.
// unique is always sorted (sorted=false leaves the order unspecified in PyTorch, so sorted is a valid
// answer) and treats each NaN as distinct, as PyTorch's CPU kernel does.
//
// Autograd (Note [Autograd stage]): sort and topk record their values output (the indices take no
// gradient and travel in attrs.tensors, the wrapped dim in IndexAttrs); argsort and unique are not
// differentiable and record nothing.
#include "ops/autograd_hook.h"
#include "ops/no_record.h"
#include "ops/op_scope.h"
#include "ops/capture_check.h"
#include "ops/op_utils.h"
#include "ops/shape_ops_kernel.h"
#include "tensor/tensor_impl.h"
#include "tessera/functions.h"

namespace tessera {

KernelSlot<SortKernelFn> sort_kernel("sort");
KernelSlot<TopkKernelFn> topk_kernel("topk");
KernelSlot<UniqueKernelFn> unique_kernel("unique");

namespace {

Tensor as_1d(const Tensor& t) { return t.dim() == 0 ? t.reshape({1}) : t; }

// Records a values-and-indices op: the derivative scatters the values' gradient to the indices.
void record_selection(OpId id, const Tensor& x, const Tensor& values, const Tensor& indices, int64_t d) {
  if (should_record({&x})) record_op(id, {x}, {values}, OpAttrs{.tensors = {indices}, .typed = IndexAttrs{.dim = d}});
}

}  // namespace

std::tuple<Tensor, Tensor> sort(const Tensor& x, int64_t dim, bool descending, bool stable) {
  (void)stable;  // Note [Sort order]: always stable
  OpScope scope(OpId::sort, {&x});
  check_defined("sort", x, "self");
  const int64_t d = wrap_dim(dim, x.dim(), "sort");
  Tensor values = make_empty(x.sizes(), x.dtype(), x.device());
  Tensor indices = make_empty(x.sizes(), kInt64, x.device());
  if (x.numel() > 0) {
    NoRecordScope no_record;
    sort_kernel(x.device(), as_1d(values), as_1d(indices), as_1d(x), d, descending);
  }
  record_selection(OpId::sort, x, values, indices, d);
  return {values, indices};
}

Tensor argsort(const Tensor& x, int64_t dim, bool descending, bool stable) {
  NoRecordScope no_record;  // only the indices are returned: nothing to differentiate
  return std::get<1>(sort(x, dim, descending, stable));
}

std::tuple<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim, bool largest, bool sorted) {
  (void)sorted;  // the result is always sorted, one of the orders PyTorch allows for sorted=false
  OpScope scope(OpId::topk, {&x});
  check_defined("topk", x, "self");
  TS_CHECK(x.dtype() != kBool, DTypeError, "topk: not implemented for dtype bool");
  const int64_t d = wrap_dim(dim, x.dim(), "topk");
  const int64_t size = x.dim() ? x.sizes()[d] : 1;
  TS_CHECK(k >= 0 && k <= size, IndexError, "topk: selected index k out of range: k (", k,
           ") must be in [0, ", size, "], the size of dimension ", d, " of input of shape ", x.sizes());
  Shape out_sizes = x.sizes();
  if (x.dim() > 0) out_sizes[d] = k;
  Tensor values = make_empty(out_sizes, x.dtype(), x.device());
  Tensor indices = make_empty(out_sizes, kInt64, x.device());
  // A 0-dim input gives back its element for k = 0 as well as k = 1, as PyTorch does.
  if (x.dim() == 0) k = 1;
  if (values.numel() > 0) {
    NoRecordScope no_record;
    topk_kernel(x.device(), as_1d(values), as_1d(indices), as_1d(x), k, d, largest);
  }
  record_selection(OpId::topk, x, values, indices, d);
  return {values, indices};
}

std::tuple<Tensor, Tensor, Tensor> unique(const Tensor& x, bool sorted, bool return_inverse, bool return_counts,
                                          std::optional<int64_t> dim) {
  (void)sorted;  // Note [Sort order]: always sorted
  OpScope scope(OpId::unique, {&x});
  check_defined("unique", x, "self");
  TS_CHECK(!x.is_meta(), NotImplementedError,
           "unique: the output size depends on the input's values, which meta tensors do not have");
  check_not_capturing("unique", x);
  const Tensor none = make_empty({0}, kInt64, x.device());
  Tensor values, inverse, counts;
  if (!dim) {
    unique_kernel(x.device(), x.reshape({-1, 1}).contiguous(), return_inverse, return_counts, values, inverse,
                  counts);
    values = values.reshape({-1});
    if (return_inverse) inverse = inverse.reshape(x.sizes());
  } else {
    // Unique slices along d: move d to the front and compare the flattened slices as rows.
    TS_CHECK(x.dim() > 0, IndexError, "unique: dimension specified as ", *dim, " but tensor has no dimensions");
    const int64_t d = wrap_dim(*dim, x.dim(), "unique");
    Tensor moved = x.movedim(d, 0);
    const int64_t n = moved.sizes()[0];
    Shape rest(moved.sizes().begin() + 1, moved.sizes().end());
    if (n == 0) {
      Tensor v = make_empty(x.sizes(), x.dtype(), x.device());
      return {v, return_inverse ? none.clone() : none, return_counts ? none.clone() : none};
    }
    TS_CHECK(x.numel() > 0, ShapeError, "unique: input of shape ", x.sizes(), " has 0-sized dimensions other than ",
             "the selected dimension ", d, ", so unique cannot be applied");
    unique_kernel(x.device(), moved.reshape({n, numel_of(rest)}).contiguous(), return_inverse, return_counts, values,
                  inverse, counts);
    Shape vsizes = rest;
    vsizes.insert(vsizes.begin(), values.sizes()[0]);
    values = values.reshape(vsizes).movedim(0, d).contiguous();
  }
  return {values, return_inverse ? inverse : none, return_counts ? counts : none};
}

}  // namespace tessera
