// Derivatives of the indexing ops (ops/indexing.cpp, ops/advanced_index.cpp).
//
// Each derivative is the op's sibling applied to the gradient, so that it is differentiable again
// (gradgradcheck): gather <-> scatter_add, index_select <-> index_add, index <-> index_put with
// accumulation, masked_select <-> index_put through the mask. Positions an op overwrote (scatter,
// masked_fill, index_put without accumulation) get no gradient for self: the gradient is written over
// with zeros by the same op. Index tensors and masks come from attrs.tensors (never differentiated);
// the wrapped dim and the other arguments from IndexAttrs. Gradients may keep a broadcast shape: the
// engine sums them down to the input's (masked_fill, index_put values).
#include "autograd/derivatives/derivatives.h"

namespace tessera::autograd {
namespace {

using V = std::vector<Tensor>;

Tensor zeros_of(const SlotMeta& m, const Tensor& like) { return zeros(m.sizes, TensorOptions(like.dtype(), m.device)); }

// The index list of index / index_put as recorded (an undefined tensor stands for a full slice).
std::vector<std::optional<Tensor>> index_list(const OpAttrs& a) {
  std::vector<std::optional<Tensor>> out;
  for (const Tensor& t : a.tensors) out.push_back(t.defined() ? std::optional<Tensor>(t) : std::nullopt);
  return out;
}

// `t` (index's shape, as gather returns it) placed at the start of zeros of `sizes`: src of scatter may
// be larger than index in any dim, and only its leading index-shaped block was read. The zeros come
// from a constant pad, which keeps this differentiable.
Tensor zero_extend(Tensor t, const Shape& sizes) {
  if (t.sizes() == sizes) return t;
  // 0-dim tensors count as 1-dim of size 1 in gather/scatter.
  if (t.dim() == 0 && sizes.size() == 1) t = t.reshape({1});
  if (sizes.empty()) return t.reshape({});
  std::vector<int64_t> pads;
  for (int64_t d = t.dim() - 1; d >= 0; --d) pads.insert(pads.end(), {0, sizes[d] - t.size(d)});
  return pad(t, pads);
}

// ---- one-dim ops: index_select, gather, scatter, scatter_add, index_add ----------------------------

V index_select_back(const BackwardContext& c, const V& g) {
  const int64_t d = c.attrs.as<IndexAttrs>().dim;
  return {index_add(zeros_of(c.input_meta[0], g[0]), d, c.attrs.tensors.at(0), g[0])};
}

V gather_back(const BackwardContext& c, const V& g) {
  const int64_t d = c.attrs.as<IndexAttrs>().dim;
  return {scatter_add(zeros_of(c.input_meta[0], g[0]), d, c.attrs.tensors.at(0), g[0])};
}

// scatter (inputs {self, src}, or {self} when a value was scattered): the scattered positions of self
// were overwritten; src's read block receives the gradient at the positions it was written to.
V scatter_back(const BackwardContext& c, const V& g) {
  const int64_t d = c.attrs.as<IndexAttrs>().dim;
  const Tensor& index = c.attrs.tensors.at(0);
  V out(c.input_meta.size());
  if (needs(c, 0)) out[0] = scatter(g[0], d, index, Scalar(0));
  if (needs(c, 1)) out[1] = zero_extend(gather(g[0], d, index), c.input_meta[1].sizes);
  return out;
}

V scatter_add_back(const BackwardContext& c, const V& g) {
  const int64_t d = c.attrs.as<IndexAttrs>().dim;
  V out(2);
  if (needs(c, 0)) out[0] = g[0];
  if (needs(c, 1)) out[1] = zero_extend(gather(g[0], d, c.attrs.tensors.at(0)), c.input_meta[1].sizes);
  return out;
}

V index_add_back(const BackwardContext& c, const V& g) {
  const int64_t d = c.attrs.as<IndexAttrs>().dim;
  const double alpha = c.attrs.as<IndexAttrs>().alpha;
  V out(2);
  if (needs(c, 0)) out[0] = g[0];
  if (needs(c, 1)) {
    Tensor s = index_select(g[0], d, c.attrs.tensors.at(0));
    // A 0-dim source of a 0-dim self: index_select keeps the 0 dims.
    if (c.input_meta[1].sizes.empty() && s.dim() == 1) s = s.reshape({});
    out[1] = alpha == 1.0 ? s : mul(s, alpha);
  }
  return out;
}

// ---- advanced indexing: index, index_put -----------------------------------------------------------

// Repeated indices read one element several times: accumulating puts their gradients together.
V index_back(const BackwardContext& c, const V& g) {
  return {index_put(zeros_of(c.input_meta[0], g[0]), index_list(c.attrs), g[0], /*accumulate=*/true)};
}

// index_put (inputs {self, values}; IndexAttrs::accumulate).
V index_put_back(const BackwardContext& c, const V& g) {
  const auto indices = index_list(c.attrs);
  V out(2);
  if (needs(c, 0)) {
    out[0] = c.attrs.as<IndexAttrs>().accumulate ? g[0]
                          : index_put(g[0], indices, zeros({}, TensorOptions(g[0].dtype(), g[0].device())), false);
  }
  if (needs(c, 1)) {
    // index(g) has the indexing result's shape; values broadcast to it after dropping leading size-1
    // dims beyond its rank (as the forward does), so reduce to that shape, then restore those dims.
    Tensor v = index(g[0], indices);
    const Shape& vs = c.input_meta[1].sizes;
    Shape squeezed = vs;
    while (squeezed.size() > static_cast<size_t>(v.dim()) && squeezed.front() == 1) squeezed.erase(squeezed.begin());
    out[1] = sum_to(v, squeezed).reshape(vs);
  }
  return out;
}

// ---- masks ----------------------------------------------------------------------------------------

V masked_fill_back(const BackwardContext& c, const V& g) {
  return {masked_fill(g[0], c.attrs.tensors.at(0), Scalar(0))};
}

// masked_select read the mask's true positions of x broadcast with the mask, in row-major order:
// index_put through the (expanded) mask writes the gradient back to those positions.
V masked_select_back(const BackwardContext& c, const V& g) {
  const Tensor& mask = c.attrs.tensors.at(0);
  const Shape shape = broadcast_shapes(c.input_meta[0].sizes, mask.sizes(), "masked_select");
  Tensor base = zeros(shape, TensorOptions(g[0].dtype(), g[0].device()));
  return {index_put(base, {mask.expand(shape)}, g[0], /*accumulate=*/false)};
}

// ---- embedding --------------------------------------------------------------------------------------

// Rows picked several times accumulate; lookups of padding_idx (IndexAttrs, -1: none) send no
// gradient to their row, as PyTorch's embedding_backward.
V embedding_back(const BackwardContext& c, const V& g) {
  const SlotMeta& w = c.input_meta[0];
  const int64_t dim = w.sizes.at(1);
  Tensor idx = c.attrs.tensors.at(0).reshape({-1});
  Tensor rows = g[0].reshape({-1, dim});
  const int64_t pad = c.attrs.as<IndexAttrs>().padding_idx;
  if (pad >= 0) rows = masked_fill(rows, eq(idx, Scalar(pad)).unsqueeze(1), Scalar(0));
  return {index_add(zeros_of(w, g[0]), 0, idx, rows)};
}

}  // namespace

void register_index_derivatives() {
  register_derivative(OpId::index_select, {index_select_back});
  register_derivative(OpId::gather, {gather_back});
  register_derivative(OpId::scatter, {scatter_back});
  register_derivative(OpId::scatter_add, {scatter_add_back});
  register_derivative(OpId::index_add, {index_add_back});
  register_derivative(OpId::index, {index_back});
  register_derivative(OpId::index_put, {index_put_back});
  register_derivative(OpId::masked_fill, {masked_fill_back});
  register_derivative(OpId::masked_select, {masked_select_back});
  register_derivative(OpId::embedding, {embedding_back});
}

}  // namespace tessera::autograd
