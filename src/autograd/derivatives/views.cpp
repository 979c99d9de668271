// Derivatives of the view ops, of copies and fills, and of as_strided_scatter.
#include "autograd/derivatives/derivatives.h"

namespace tessera::autograd {
namespace {

using V = std::vector<Tensor>;

struct Geometry {
  Shape sizes, strides;
  int64_t offset;
};
// attrs.ints = [ndim, sizes..., strides..., offset] (views.cpp, recorded_strided).
Geometry geometry(const OpAttrs& a) {
  const int64_t n = a.ints.at(0);
  Geometry g;
  g.sizes.assign(a.ints.begin() + 1, a.ints.begin() + 1 + n);
  g.strides.assign(a.ints.begin() + 1 + n, a.ints.begin() + 1 + 2 * n);
  g.offset = a.ints.at(1 + 2 * n);
  return g;
}

// reshape, permute, transpose and expand take batched gradients (Note [Batched gradients]).
V reshape_back(const BackwardContext& c, const V& g) { return {g[0].reshape(batched(c, c.input_meta[0].sizes))}; }

V permute_back(const BackwardContext& c, const V& g) {
  const int64_t n = static_cast<int64_t>(c.attrs.ints.size());
  const int64_t b = c.batch >= 0 ? 1 : 0;
  Shape inverse(n + b);
  if (b) inverse[0] = 0;
  for (int64_t i = 0; i < n; ++i) inverse[wrap_dim(c.attrs.ints[i], n, "permute") + b] = i + b;
  return {g[0].permute(inverse)};
}

V transpose_back(const BackwardContext& c, const V& g) {
  const int64_t n = static_cast<int64_t>(c.input_meta[0].sizes.size());
  return {g[0].transpose(batched_dim(c, c.attrs.ints[0], n), batched_dim(c, c.attrs.ints[1], n))};
}

V expand_back(const BackwardContext&, const V& g) { return {g[0]}; }  // the engine sums to the input shape

// slice, select, diagonal, as_strided: scatter the gradient into zeros of the input's shape.
V strided_view_back(const BackwardContext& c, const V& g) {
  Geometry geo = geometry(c.attrs);
  const SlotMeta& in = c.input_meta[0];
  Tensor base = zeros(in.sizes, TensorOptions(g[0].dtype(), in.device));
  return {as_strided_scatter(base, g[0], geo.sizes, geo.strides, geo.offset)};
}

// as_strided may overlap itself (sliding windows): every view element adds its gradient to the base
// element it reads, so the gradient is an accumulating index_put at the elements' flat positions.
V as_strided_back(const BackwardContext& c, const V& g) {
  Geometry geo = geometry(c.attrs);
  const SlotMeta& in = c.input_meta[0];
  const int64_t n = numel_of(in.sizes);
  Tensor positions = arange(n, TensorOptions(kInt64, in.device)).as_strided(geo.sizes, geo.strides, geo.offset);
  Tensor base = zeros({n}, TensorOptions(g[0].dtype(), in.device));
  return {index_put(base, {positions.reshape({-1})}, g[0].reshape({-1}), true).view(in.sizes)};
}

V as_strided_scatter_back(const BackwardContext& c, const V& g) {
  Geometry geo = geometry(c.attrs);
  V out(2);
  if (needs(c, 0)) {
    Tensor hole = zeros(geo.sizes, TensorOptions(g[0].dtype(), g[0].device()));
    out[0] = as_strided_scatter(g[0], hole, geo.sizes, geo.strides, geo.offset);
  }
  if (needs(c, 1)) {
    const Tensor gc = g[0].contiguous();  // may itself sit at an offset in its storage
    out[1] = gc.as_strided(geo.sizes, geo.strides, gc.storage_offset() + geo.offset);
  }
  return out;
}

// self.copy_(src): self's old value is overwritten entirely; src receives the gradient (the engine
// reduces broadcasting and casts to src's dtype).
V copy_back(const BackwardContext&, const V& g) { return {g[0]}; }
V fill_back(const BackwardContext&, const V&) { return {}; }

}  // namespace

void register_view_derivatives() {
  register_batched_derivative(OpId::view, {reshape_back});
  register_batched_derivative(OpId::permute, {permute_back});
  register_batched_derivative(OpId::transpose, {transpose_back});
  register_batched_derivative(OpId::expand, {expand_back});
  for (OpId op : {OpId::slice, OpId::select, OpId::diagonal}) register_derivative(op, {strided_view_back});
  register_derivative(OpId::as_strided, {as_strided_back});
  register_derivative(OpId::as_strided_scatter, {as_strided_scatter_back});
  register_derivative(OpId::copy_, {copy_back});
  register_derivative(OpId::fill_, {fill_back});
  // The random fills overwrite self as fill_ does: no gradient reaches what it held (PyTorch's
  // zeros_like(grad)), and writing a view of a graph tensor rewrites the base's history.
  for (OpId op : {OpId::uniform_, OpId::normal_, OpId::bernoulli_, OpId::random_}) register_derivative(op, {fill_back});
}

}  // namespace tessera::autograd
