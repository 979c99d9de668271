// Derivatives of the joining, rearranging and ordering ops (ops/shape_ops.cpp, ops/sort_ops.cpp).
//
// Permutations undo themselves (flip by flip, roll by rolling back, tril/triu by the same mask);
// joins split the gradient back into views (cat, stack); copies that read an element several times
// sum the gradient over the copies: repeat and repeat_interleave with one count by reshape + sum,
// the index-map ops (pad reflect/replicate/circular, repeat_interleave with per-element counts) by
// index_add through the very map the forward used. sort and topk scatter the values' gradient to the
// indices. Each of these is differentiable again. What each forward left in attrs is described where
// it records (ops/shape_ops.cpp, ops/sort_ops.cpp).
#include "autograd/derivatives/derivatives.h"
#include "runtime/grad_mode.h"
#include "tensor/tensor_impl.h"

namespace tessera::autograd {
namespace {

using V = std::vector<Tensor>;

// ---- cat / stack ----------------------------------------------------------------------------------

// attrs.ints = [d, size of each input along d (-1: a legacy-empty input, which gets no gradient)].
V cat_back(const BackwardContext& c, const V& g) {
  const int64_t d = c.attrs.ints.at(0);
  V out(c.input_meta.size());
  int64_t offset = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    const int64_t len = c.attrs.ints.at(i + 1);
    if (len < 0) continue;
    if (needs(c, i)) out[i] = g[0].narrow(d, offset, len);
    offset += len;
  }
  return out;
}

// The pieces' gradients as one view where they already lie side by side (Note [Packed attention
// gradients], ops/attention_ops.cpp): one storage, one dtype and strides, each piece starting where the
// one before ends along d, and the union contiguous. Undefined otherwise.
Tensor adjacent_union(const V& g, int64_t d) {
  if (g.empty() || !g[0].defined()) return Tensor();
  const Tensor& first = g[0];
  Shape sizes = first.sizes();
  int64_t next = first.storage_offset() + first.size(d) * first.stride(d);
  for (size_t i = 1; i < g.size(); ++i) {
    const Tensor& t = g[i];
    if (!t.defined() || t.impl_ptr()->storage() != first.impl_ptr()->storage() || t.dtype() != first.dtype() ||
        t.strides() != first.strides() || t.dim() != first.dim() || t.storage_offset() != next)
      return Tensor();
    for (int64_t k = 0; k < t.dim(); ++k)
      if (k != d && t.size(k) != first.size(k)) return Tensor();
    sizes[d] += t.size(d);
    next += t.size(d) * t.stride(d);
  }
  if (!is_contiguous_layout(sizes, first.strides())) return Tensor();
  return first.as_strided(sizes, first.strides(), first.storage_offset());
}

// split / unbind (Note [Split into pieces], ops/views.cpp): the pieces' gradients joined again (a view
// where they are adjacent already). The engine passes zeros for a piece that received no gradient.
V split_back(const BackwardContext& c, const V& g) {
  if (!needs(c, 0)) return {Tensor()};
  const int64_t d = c.attrs.ints.at(0);
  if (!is_grad_enabled())
    if (Tensor u = adjacent_union(g, d); u.defined()) return {u};
  return {cat(g, d)};
}
V unbind_back(const BackwardContext& c, const V& g) {
  if (!needs(c, 0)) return {Tensor()};
  return {stack(g, c.attrs.ints.at(0))};
}

V stack_back(const BackwardContext& c, const V& g) {
  const int64_t d = c.attrs.ints.at(0);
  V out(c.input_meta.size());
  for (size_t i = 0; i < out.size(); ++i)
    if (needs(c, i)) out[i] = g[0].select(d, static_cast<int64_t>(i));
  return out;
}

// ---- repeat / repeat_interleave -------------------------------------------------------------------

// attrs.ints = repeats (n >= x.dim() entries). The output viewed as (r0, s0, r1, s1, ...) holds the
// copies; summing over the r dims leaves x (with the leading size-1 dims repeat added).
V repeat_back(const BackwardContext& c, const V& g) {
  const Shape& reps = c.attrs.ints;
  const Shape& xs = c.input_meta[0].sizes;
  const int64_t n = static_cast<int64_t>(reps.size());
  Shape padded(n - static_cast<int64_t>(xs.size()), 1);
  padded.insert(padded.end(), xs.begin(), xs.end());
  Shape split;
  std::vector<int64_t> copy_dims;
  for (int64_t i = 0; i < n; ++i) {
    copy_dims.push_back(static_cast<int64_t>(split.size()));
    split.insert(split.end(), {reps[i], padded[i]});
  }
  if (n == 0) return {g[0]};
  return {sum(g[0].reshape(split), copy_dims).reshape(xs)};
}

// attrs.ints = [d, or -1 when x was flattened; repeats]: output position i * r + k is copy k of i.
V repeat_interleave_back(const BackwardContext& c, const V& g) {
  const int64_t d = c.attrs.ints.at(0), r = c.attrs.ints.at(1);
  const Shape& xs = c.input_meta[0].sizes;
  Shape split = d < 0 ? Shape{numel_of(xs)} : xs;
  const int64_t dd = d < 0 ? 0 : d;
  split.insert(split.begin() + dd + 1, r);
  return {sum(g[0].reshape(split), {dd + 1}).reshape(xs)};
}

// attrs.ints = [d or -1 (flattened)]; attrs.tensors = [source position of every output position].
V repeat_interleave_map_back(const BackwardContext& c, const V& g) {
  const int64_t d = c.attrs.ints.at(0);
  const Shape& xs = c.input_meta[0].sizes;
  Shape in = d < 0 ? Shape{numel_of(xs)} : xs;
  Tensor base = zeros(in, TensorOptions(g[0].dtype(), g[0].device()));
  return {index_add(base, d < 0 ? 0 : d, c.attrs.tensors.at(0), g[0]).reshape(xs)};
}

// ---- flip / roll / tril / triu ----------------------------------------------------------------------

V flip_back(const BackwardContext& c, const V& g) { return {flip(g[0], c.attrs.ints)}; }

// attrs.ints = the net shift of every dim.
V roll_back(const BackwardContext& c, const V& g) {
  Shape shifts, dims;
  for (size_t d = 0; d < c.attrs.ints.size(); ++d)
    if (c.attrs.ints[d] != 0) {
      shifts.push_back(-c.attrs.ints[d]);
      dims.push_back(static_cast<int64_t>(d));
    }
  if (dims.empty()) return {g[0]};
  return {roll(g[0], shifts, dims)};
}

V tril_back(const BackwardContext& c, const V& g) { return {tril(g[0], c.attrs.ints.at(0))}; }
V triu_back(const BackwardContext& c, const V& g) { return {triu(g[0], c.attrs.ints.at(0))}; }

// ---- pad ----------------------------------------------------------------------------------------------

// Constant padding by the negated pads: crops what was added and puts zeros where x was cropped.
V constant_pad_back(const BackwardContext& c, const V& g) {
  std::vector<int64_t> neg;
  for (int64_t p : c.attrs.ints) neg.push_back(-p);
  return {pad(g[0], neg, "constant", 0.0)};
}

// reflect / replicate / circular: out[..., o, ...] = x[..., map_d[o], ...] in each padded dim d
// (attrs.ints = the dims, attrs.tensors = their maps), so the gradient is accumulated through each
// map in turn (PyTorch's reflection/replication pad backward).
V pad_map_back(const BackwardContext& c, const V& g) {
  const Shape& xs = c.input_meta[0].sizes;
  Tensor r = g[0];
  for (size_t i = 0; i < c.attrs.ints.size(); ++i) {
    const int64_t d = c.attrs.ints[i];
    Shape s = r.sizes();
    s[d] = xs[d];
    r = index_add(zeros(s, TensorOptions(r.dtype(), r.device())), d, c.attrs.tensors.at(i), r);
  }
  return {r};
}

// ---- sort / topk -----------------------------------------------------------------------------------

// The values are x's elements at `indices` along d (attrs.ints[0], attrs.tensors[0]); the indices
// along d are distinct, so a plain scatter into zeros routes each gradient to its element.
V selection_back(const BackwardContext& c, const V& g) {
  const SlotMeta& x = c.input_meta[0];
  Tensor base = zeros(x.sizes, TensorOptions(g[0].dtype(), x.device));
  return {scatter(base, c.attrs.as<IndexAttrs>().dim, c.attrs.tensors.at(0), g[0])};
}

}  // namespace

void register_shape_ops_derivatives() {
  register_derivative(OpId::cat, {cat_back});
  register_derivative(OpId::split, {split_back});
  register_derivative(OpId::unbind, {unbind_back});
  register_derivative(OpId::stack, {stack_back});
  register_derivative(OpId::repeat, {repeat_back});
  register_derivative(OpId::repeat_interleave, {repeat_interleave_back});
  register_derivative(OpId::repeat_interleave_map, {repeat_interleave_map_back});
  register_derivative(OpId::flip, {flip_back});
  register_derivative(OpId::roll, {roll_back});
  register_derivative(OpId::tril, {tril_back});
  register_derivative(OpId::triu, {triu_back});
  register_derivative(OpId::constant_pad, {constant_pad_back});
  register_derivative(OpId::pad_map, {pad_map_back});
  register_derivative(OpId::sort, {selection_back});
  register_derivative(OpId::topk, {selection_back});
}

}  // namespace tessera::autograd
