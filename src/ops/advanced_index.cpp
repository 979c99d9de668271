// Advanced indexing: index (x[i0, i1, ...]) and index_put (x[i0, i1, ...] = v), and the planning they
// share with index_select, index_add and embedding (Note [Advanced index plan] in ops/index_kernel.h).
//
// PyTorch's rules, followed here:
// - one optional index per leading dim; nullopt is a full slice; missing trailing entries are slices;
// - int64 and int32 indices wrap negative values (plan.wrap_negative); bool and uint8 tensors are
//   masks that consume mask.dim() dims and become their nonzero() coordinates; a 0-dim mask inserts
//   a size-1 dim indexed by [0] (true) or [] (false), as NumPy does;
// - the index tensors broadcast together to index_shape;
// - when the indexed dims are adjacent, the index block replaces them in place in the result;
//   otherwise (separated by a slice) it goes first, followed by every non-indexed dim in order.
// Error classes: a mismatched mask or too many indices is an IndexError (as in PyTorch); index tensors
// that do not broadcast, or values that do not broadcast to the result, are a ShapeError.
//
// Autograd (Note [Autograd stage]): index and index_put compute with recording off and record once;
// attrs.tensors holds the index list as given (an undefined tensor for each nullopt slice), so the
// derivatives replay the same indexing, masks included.
#include <algorithm>

#include "ops/autocast_hook.h"
#include "ops/advanced_index.h"
#include "ops/autograd_hook.h"
#include "ops/no_record.h"
#include "ops/op_scope.h"
#include "ops/op_utils.h"
#include "tensor/tensor_impl.h"
#include "tessera/functions.h"

namespace tessera {

KernelSlot<IndexKernelFn> index_kernel("index");
KernelSlot<IndexPutKernelFn> index_put_kernel("index_put");

namespace {

bool is_mask_dtype(DType d) { return d == kBool || d == kUInt8; }

// The index list as attrs.tensors: undefined entries stand for nullopt.
OpAttrs index_attrs(const std::vector<std::optional<Tensor>>& indices) {
  OpAttrs attrs;
  for (const auto& t : indices) attrs.tensors.push_back(t ? *t : Tensor());
  return attrs;
}

// Broadcast shape of the index tensors, with PyTorch's message listing all of them on failure.
Shape broadcast_index_shapes(const char* op, const std::vector<std::optional<Tensor>>& idx) {
  Shape out;
  bool ok = true;
  for (const auto& t : idx) {
    if (!t) continue;
    const Shape& s = t->sizes();
    size_t n = std::max(out.size(), s.size());
    Shape next(n);
    for (size_t i = 0; i < n; ++i) {
      int64_t a = i < n - out.size() ? 1 : out[i - (n - out.size())];
      int64_t b = i < n - s.size() ? 1 : s[i - (n - s.size())];
      if (a != b && a != 1 && b != 1) ok = false;
      next[i] = a == 1 ? b : a;
    }
    if (!ok) break;
    out = std::move(next);
  }
  if (!ok) {
    std::string shapes;
    for (const auto& t : idx)
      if (t) shapes += (shapes.empty() ? "" : ", ") + detail::str_cat(t->sizes());
    TS_THROW(ShapeError, op, ": shape mismatch: indexing tensors could not be broadcast together with shapes ", shapes);
  }
  return out;
}

}  // namespace

AdvancedIndex plan_advanced_index(const char* op, const Tensor& self_in,
                                  const std::vector<std::optional<Tensor>>& indices, bool wrap_negative) {
  // Validate every index and count the dims of the input they consume.
  int64_t consumed = 0;
  for (size_t i = 0; i < indices.size(); ++i) {
    if (!indices[i]) {
      ++consumed;
      continue;
    }
    const Tensor& t = *indices[i];
    check_defined(op, t, "indices");
    TS_CHECK(t.device() == self_in.device(), DeviceError, op, ": indices[", i, "] is on ", t.device().str(),
             " but the indexed tensor is on ", self_in.device().str());
    const DType d = t.dtype();
    TS_CHECK(d == kInt64 || d == kInt32 || is_mask_dtype(d), DTypeError, op,
             ": tensors used as indices must be long, int, byte or bool tensors, but indices[", i, "] is ",
             dtype_name(d));
    consumed += is_mask_dtype(d) ? t.dim() : 1;
  }
  TS_CHECK(consumed <= self_in.dim(), IndexError, op, ": too many indices for tensor of dimension ", self_in.dim(),
           " (got ", consumed, ")");

  // Expand masks into coordinate tensors: one optional integer index per dim of `self`.
  Tensor self = self_in;
  std::vector<std::optional<Tensor>> idx;
  Shape orig_dim;  // the input's dim each entry of idx addresses (for messages)
  int64_t odim = 0;
  for (const auto& entry : indices) {
    if (!entry || !is_mask_dtype(entry->dtype())) {
      idx.push_back(entry);
      orig_dim.push_back(odim++);
      continue;
    }
    const Tensor& mask = *entry;
    TS_CHECK(!mask.is_meta(), NotImplementedError, op,
             ": boolean mask indices give data-dependent shapes, which the meta device cannot compute");
    const int64_t pos = static_cast<int64_t>(idx.size());
    if (mask.dim() == 0) {
      self = self.unsqueeze(pos);
      bool on = mask.item().to_bool();
      idx.push_back(on ? zeros({1}, TensorOptions(kInt64, self.device())) : empty({0}, TensorOptions(kInt64, self.device())));
      orig_dim.push_back(odim);  // the inserted dim has size 1 and index 0: never out of range
      continue;
    }
    for (int64_t j = 0; j < mask.dim(); ++j)
      TS_CHECK(mask.size(j) == self.size(pos + j), IndexError, op, ": the shape of the mask ", mask.sizes(),
               " at index ", j, " does not match the shape of the indexed tensor ", self_in.sizes(), " at index ",
               odim + j);
    Tensor nz = nonzero(mask);  // (n, mask.dim())
    for (int64_t j = 0; j < mask.dim(); ++j) {
      idx.push_back(nz.select(1, j));
      orig_dim.push_back(odim++);
    }
  }
  while (static_cast<int64_t>(idx.size()) < self.dim()) {
    idx.push_back(std::nullopt);
    orig_dim.push_back(odim++);
  }

  AdvancedIndex ai;
  IndexPlan& plan = ai.plan;
  plan.op = op;
  plan.wrap_negative = wrap_negative;
  plan.index_shape = broadcast_index_shapes(op, idx);

  std::vector<int64_t> adv;
  for (int64_t d = 0; d < self.dim(); ++d)
    if (idx[d]) adv.push_back(d);
  const bool adjacent = adv.empty() || adv.back() - adv.front() + 1 == static_cast<int64_t>(adv.size());
  const int64_t pre_end = adjacent && !adv.empty() ? adv.front() : 0;
  for (int64_t d = 0; d < self.dim(); ++d) {
    if (idx[d]) {
      plan.indices.push_back(idx[d]->expand(plan.index_shape));
      plan.indexed_sizes.push_back(self.size(d));
      plan.indexed_strides.push_back(self.stride(d));
      plan.indexed_dims.push_back(orig_dim[d]);
    } else if (d < pre_end) {
      plan.pre_sizes.push_back(self.size(d));
      plan.pre_strides.push_back(self.stride(d));
    } else {
      plan.post_sizes.push_back(self.size(d));
      plan.post_strides.push_back(self.stride(d));
    }
  }
  ai.result_sizes = plan.pre_sizes;
  ai.result_sizes.insert(ai.result_sizes.end(), plan.index_shape.begin(), plan.index_shape.end());
  ai.result_sizes.insert(ai.result_sizes.end(), plan.post_sizes.begin(), plan.post_sizes.end());
  ai.self = std::move(self);
  return ai;
}

// Note [Index output layout]: PyTorch's index runs a TensorIterator over self restrided to the result's
// dims (its strides on the kept dims, 0 on the index dims) and the index tensors restrided likewise (0
// on the kept dims), so the result's layout follows Note [Output layout] over those operands: the
// kept dims in self's order, the index dims in the first index tensor's order. x[idx] with a
// transposed idx is transposed, as in PyTorch, and a later view() succeeds or fails as it does there.
namespace {
Tensor make_index_output(const AdvancedIndex& ai, DType dtype, Device device) {
  const IndexPlan& p = ai.plan;
  const size_t npre = p.pre_sizes.size(), nidx = p.index_shape.size(), npost = p.post_sizes.size();
  Shape self_strides(npre + nidx + npost, 0);
  for (size_t i = 0; i < npre; ++i) self_strides[i] = p.pre_strides[i];
  for (size_t i = 0; i < npost; ++i) self_strides[npre + nidx + i] = p.post_strides[i];
  std::vector<Tensor> views = {ai.self.as_strided(ai.result_sizes, self_strides, ai.self.storage_offset())};
  for (const Tensor& idx : p.indices) {
    Shape st(npre + nidx + npost, 0);
    for (size_t i = 0; i < nidx; ++i) st[npre + i] = idx.stride(static_cast<int64_t>(i));
    views.push_back(idx.as_strided(ai.result_sizes, st, idx.storage_offset()));
  }
  std::vector<const Tensor*> ops;
  for (const Tensor& v : views) ops.push_back(&v);
  return make_empty_like_inputs(ai.result_sizes, dtype, device, ops);
}
}  // namespace

Tensor index(const Tensor& x, const std::vector<std::optional<Tensor>>& indices) {
  OpScope scope(OpId::index, {&x});
  check_defined("index", x, "self");
  Tensor out;
  {
    NoRecordScope no_record;
    AdvancedIndex ai = plan_advanced_index("index", x, indices, /*wrap_negative=*/true);
    out = make_index_output(ai, x.dtype(), x.device());
    if (out.is_contiguous()) {
      index_kernel(x.device(), out, ai.self, ai.plan);
    } else {  // the kernels write row-major
      Tensor dense = make_empty(ai.result_sizes, x.dtype(), x.device());
      index_kernel(x.device(), dense, ai.self, ai.plan);
      out.copy_(dense);
    }
  }
  if (should_record({&x})) record_op(OpId::index, {x}, {out}, index_attrs(indices));
  return out;
}

namespace {
Tensor index_put_fwd(const Tensor& x, const std::vector<std::optional<Tensor>>& indices, const Tensor& values,
                     bool accumulate) {
  const OpId id = OpId::index_put;
  const char* op = op_name(id);
  check_defined(op, x, "self");
  check_defined(op, values, "values");
  check_same_device(op, {&x, &values});
  TS_CHECK(values.dtype() == x.dtype(), DTypeError, op, ": index put requires the source and destination dtypes to match, got ",
           dtype_name(x.dtype()), " for the destination and ", dtype_name(values.dtype()), " for the source");
  NoRecordScope no_record;
  Tensor out = x.clone();
  AdvancedIndex ai = plan_advanced_index(op, out, indices, /*wrap_negative=*/true);
  // Leading size-1 dims of values beyond the result's rank are dropped, as x[i] = v does in PyTorch.
  Tensor v = values;
  while (v.dim() > static_cast<int64_t>(ai.result_sizes.size()) && v.size(0) == 1) v = v.squeeze(0);
  const Shape& rs = ai.result_sizes;
  bool fits = v.dim() <= static_cast<int64_t>(rs.size());
  for (int64_t i = 0; fits && i < v.dim(); ++i) {
    int64_t have = v.size(v.dim() - 1 - i), want = rs[rs.size() - 1 - i];
    fits = have == want || have == 1;
  }
  TS_CHECK(fits, ShapeError, op, ": shape mismatch: value tensor of shape ", values.sizes(),
           " cannot be broadcast to indexing result of shape ", rs);
  index_put_kernel(x.device(), ai.self, v.expand(rs), ai.plan, accumulate, Scalar(1));
  return out;
}

}  // namespace

Tensor index_put(const Tensor& x, const std::vector<std::optional<Tensor>>& indices, const Tensor& values,
                 bool accumulate) {
  if (autocast_pending()) [[unlikely]]
    if (AutocastArgs c(OpId::index_put, {&x, &values}); c) return index_put(c[0], indices, c[1], accumulate);
  OpScope scope(OpId::index_put, {&x, &values});
  Tensor out = index_put_fwd(x, indices, values, accumulate);
  if (should_record({&x, &values})) {
    OpAttrs attrs = index_attrs(indices);
    attrs.typed = IndexAttrs{.accumulate = accumulate};
    record_op(OpId::index_put, {x, values}, {out}, std::move(attrs));
  }
  return out;
}

}  // namespace tessera
