// Derivatives of the reductions and scans (src/ops/reduce.cpp, reduce_stats.cpp), after PyTorch's
// derivatives.yaml / FunctionsManual.cpp. Written with tessera ops only, so each is differentiable
// again (gradgradcheck).
//
// The recorded calls carry ReduceAttrs (Note [Typed attributes]): dims as the caller gave them (empty:
// every dim; negative allowed; a scan's one dim), keepdim, var/std/var_mean's correction, norm's p;
// max/min over a dim pass their indices in attrs.tensors.
// A gradient may come back in the op's compute dtype (sum/mean/prod/cumsum with a dtype argument):
// the engine casts it to the input's dtype.
//
// Subgradient choices, as PyTorch: amax/amin and max()/min() over all dims split the gradient evenly
// among ties; max/min over a dim send it to the returned index; norm(p = 2) and std give 0 where
// the result is 0; prod and cumprod are exact with zeros in the input (no division by them).
#include <cmath>

#include "autograd/derivatives/derivatives.h"

namespace tessera::autograd {
namespace {

using V = std::vector<Tensor>;

const ReduceAttrs& ra(const BackwardContext& c) { return c.attrs.as<ReduceAttrs>(); }

// The input's sizes with the reduced dims set to 1 (dims empty: every dim).
Shape keepdim_shape(const Shape& in, const std::vector<int64_t>& dims) {
  Shape s = in;
  const int64_t nd = static_cast<int64_t>(in.size());
  if (dims.empty()) {
    for (int64_t& v : s) v = 1;
  } else if (nd > 0) {
    for (int64_t d : dims) s[wrap_dim(d, nd, "reduce backward")] = 1;
  }
  return s;
}

int64_t reduced_numel(const Shape& in, const std::vector<int64_t>& dims) {
  int64_t n = 1;
  const int64_t nd = static_cast<int64_t>(in.size());
  if (dims.empty()) return numel_of(in);
  if (nd == 0) return 1;
  for (int64_t d : dims) n *= in[wrap_dim(d, nd, "reduce backward")];
  return n;
}

// A reduction's output (or its gradient) with the reduced dims back as size 1, so that it
// broadcasts against the input.
Tensor unreduce(const Tensor& t, const BackwardContext& c) {
  return ra(c).keepdim ? t : t.reshape(batched(c, keepdim_shape(c.input_meta[0].sizes, ra(c).dims)));
}

// The saved input in the dtype of the gradient (an op given a dtype computed in it).
Tensor input_as(const BackwardContext& c, const Tensor& g) {
  const Tensor& x = c.inputs[0];
  return x.dtype() == g.dtype() ? x : x.to(g.dtype());
}

TensorOptions opts_of(const Tensor& t) { return TensorOptions(t.dtype(), t.device()); }

// num / den, and 0 where `zero`. The division sees 1 there, so that the derivative of the result is
// 0 there too, not 0 * inf = NaN (a where() over a plain division would give NaN second derivatives).
Tensor div_or_zero(const Tensor& num, const Tensor& den, const Tensor& zero) {
  return where(zero, Scalar(0.0), div(num, where(zero, Scalar(1.0), den)));
}

// ---- sum, mean, prod -------------------------------------------------------------------------

// sum and mean take batched gradients (Note [Batched gradients]).
V sum_back(const BackwardContext& c, const V& g) {
  return {unreduce(g[0], c).expand(batched(c, c.input_meta[0].sizes))};
}

V mean_back(const BackwardContext& c, const V& g) {
  const Shape& in = c.input_meta[0].sizes;
  const int64_t n = reduced_numel(in, ra(c).dims);
  return {div(unreduce(g[0], c), Scalar(n)).expand(batched(c, in))};
}

// prod over the last dim of `x` (..., n) without dividing: the product of the elements before
// each position times the product of those after it (PyTorch's prod_safe_zeros_backward).
Tensor prod_others_last(const Tensor& x) {
  const int64_t n = x.size(-1), last = x.dim() - 1;
  Shape one = x.sizes();
  one.back() = 1;
  Tensor ones1 = ones(one, opts_of(x));
  if (n == 1) return ones1;
  Tensor before = cat({ones1, x.narrow(last, 0, n - 1)}, last).cumprod(last);
  Tensor after = cat({ones1, x.narrow(last, 1, n - 1).flip({last})}, last).cumprod(last).flip({last});
  return mul(before, after);
}

V prod_back(const BackwardContext& c, const V& g) {
  const Tensor x = input_as(c, g[0]);
  const Shape& in = c.input_meta[0].sizes;
  if (x.dim() == 0) return {g[0]};
  const Tensor gk = unreduce(g[0], c);
  if (x.numel() == 0) return {gk.expand(in)};
  // Without zeros, d prod / d x_i = prod / x_i. This branch is taken on values, as PyTorch does.
  if (!any(eq(x, 0)).item<bool>()) return {mul(gk, div(unreduce(c.outputs[0], c), x))};
  // With zeros: fold the reduced dims into one last dim and take the products of the others.
  const int64_t nd = x.dim();
  Shape perm, kept_sizes, permuted_sizes;
  std::vector<bool> reduced(static_cast<size_t>(nd), ra(c).dims.empty());
  for (int64_t d : ra(c).dims) reduced[wrap_dim(d, nd, "prod backward")] = true;
  int64_t r = 1;
  for (int64_t d = 0; d < nd; ++d)
    if (!reduced[d]) perm.push_back(d), kept_sizes.push_back(in[d]);
  for (int64_t d = 0; d < nd; ++d)
    if (reduced[d]) perm.push_back(d), r *= in[d];
  for (int64_t d : perm) permuted_sizes.push_back(in[d]);
  Shape rows = kept_sizes;
  rows.push_back(r);
  Tensor others = prod_others_last(x.permute(perm).reshape(rows)).reshape(permuted_sizes);
  Shape inverse(static_cast<size_t>(nd));
  for (int64_t i = 0; i < nd; ++i) inverse[perm[i]] = i;
  return {mul(gk, others.permute(inverse))};
}

// ---- amax, amin, max, min ----------------------------------------------------------------------

// amax/amin: the gradient is split evenly among the elements equal to the result.
V amax_back(const BackwardContext& c, const V& g) {
  const Tensor& x = c.inputs[0];
  Tensor mask = eq(x, unreduce(c.outputs[0], c));
  Tensor count = mask.sum(ra(c).dims, /*keepdim=*/true);
  return {mul(div(unreduce(g[0], c), count), mask)};
}

// max()/min() over every dim: likewise, and a NaN result sends the gradient to the NaNs.
V max_all_back(const BackwardContext& c, const V& g) {
  const Tensor& x = c.inputs[0];
  const Tensor& y = c.outputs[0];
  Tensor mask = logical_or(eq(x, y), logical_and(isnan(x), isnan(y)));
  return {mul(mask, div(g[0], mask.sum()))};
}

// max/min over a dim: the gradient goes to the returned index.
V max_dim_back(const BackwardContext& c, const V& g) {
  const Shape& in = c.input_meta[0].sizes;
  if (in.empty()) return {g[0]};
  const int64_t d = wrap_dim(ra(c).dims.at(0), static_cast<int64_t>(in.size()), "max backward");
  Tensor idx = c.attrs.tensors.at(0), gk = g[0];
  if (!ra(c).keepdim) {
    idx = idx.unsqueeze(d);
    gk = gk.unsqueeze(d);
  }
  return {zeros(in, opts_of(gk)).scatter(d, idx, gk)};
}

// ---- var, std, var_mean ----------------------------------------------------------------------

// d var / d x = 2 (x - mean) / (N - correction), with `gk` already in the keepdim shape.
Tensor var_grad(const BackwardContext& c, const Tensor& gk) {
  const Tensor& x = c.inputs[0];
  const double dof = static_cast<double>(reduced_numel(c.input_meta[0].sizes, ra(c).dims)) - ra(c).correction;
  return mul(mul(gk, 2.0 / dof), sub(x, x.mean(ra(c).dims, /*keepdim=*/true)));
}

V var_back(const BackwardContext& c, const V& g) { return {var_grad(c, unreduce(g[0], c))}; }

V std_back(const BackwardContext& c, const V& g) {
  Tensor y = unreduce(c.outputs[0], c);
  // d std = d var / (2 std); 0 where std is 0 (a constant slice), as PyTorch.
  Tensor gvar = div_or_zero(unreduce(g[0], c), mul(y, 2.0), eq(y, 0));
  return {var_grad(c, gvar)};
}

V var_mean_back(const BackwardContext& c, const V& g) {
  const Shape& in = c.input_meta[0].sizes;
  const int64_t n = reduced_numel(in, ra(c).dims);
  Tensor from_mean = div(unreduce(g[1], c), Scalar(n));
  return {add(var_grad(c, unreduce(g[0], c)), from_mean)};
}

// ---- norm, logsumexp ---------------------------------------------------------------------------

V norm_back(const BackwardContext& c, const V& g) {
  const Tensor& x = c.inputs[0];
  const double p = ra(c).p;
  Tensor gk = unreduce(g[0], c), y = unreduce(c.outputs[0], c);
  if (p == 0) return {zeros_like(x, opts_of(gk))};  // a count: piecewise constant
  if (p == 1) return {mul(sign(x), gk)};
  if (p == 2) return {mul(gk, div_or_zero(x, y, eq(y, 0)))};
  if (std::isinf(p)) {
    // The gradient of amax(abs(x)) (split among ties), NaNs included.
    Tensor ax = abs(x);
    Tensor mask = logical_or(eq(ax, y), isnan(ax));
    return {mul(sign(x), mul(div(gk, mask.sum(ra(c).dims, /*keepdim=*/true)), mask))};
  }
  if (p < 1) {
    Tensor zero = eq(x, 0);
    Tensor scaled = mul(sign(x), where(zero, Scalar(0.0), pow(where(zero, Scalar(1.0), abs(x)), p - 1)));
    return {mul(mul(scaled, gk), pow(y, 1 - p))};
  }
  Tensor scale = div_or_zero(gk, pow(y, p - 1), eq(y, 0));
  Tensor scaled = p < 2 ? mul(sign(x), pow(abs(x), p - 1)) : mul(x, pow(abs(x), p - 2));
  return {mul(scaled, scale)};
}

V logsumexp_back(const BackwardContext& c, const V& g) {
  return {mul(unreduce(g[0], c), exp(sub(c.inputs[0], unreduce(c.outputs[0], c))))};
}

// ---- cumsum, cumprod ---------------------------------------------------------------------------

// sum_{j >= i} t_j along `d`.
Tensor reversed_cumsum(const Tensor& t, int64_t d) { return t.flip({d}).cumsum(d).flip({d}); }

V cumsum_back(const BackwardContext& c, const V& g) {
  const int64_t nd = static_cast<int64_t>(c.input_meta[0].sizes.size());
  if (nd == 0) return {g[0]};
  return {reversed_cumsum(g[0], wrap_dim(ra(c).dims.at(0), nd, "cumsum backward"))};
}

// d L / d x_k = sum_{j >= k} g_j prod_{i <= j, i != k} x_i, one k at a time: exact to every order, and
// O(n^2) per slice. Used only for a differentiable gradient at inputs with zeros (PyTorch does the same).
Tensor cumprod_grad_exact(const Tensor& x, const Tensor& g, int64_t d) {
  const int64_t n = x.size(d);
  Shape one = x.sizes();
  one[d] = 1;
  Tensor ones1 = ones(one, opts_of(x));
  std::vector<Tensor> pieces;
  for (int64_t k = 0; k < n; ++k) {
    // prod_{k < i <= j} x_i for j = k..n-1 (1 at j = k)
    Tensor after = k + 1 < n ? cat({ones1, x.narrow(d, k + 1, n - k - 1).cumprod(d)}, d) : ones1;
    Tensor gk = mul(g.narrow(d, k, n - k), after).sum(d, /*keepdim=*/true);
    if (k > 0) gk = mul(gk, x.narrow(d, 0, k).prod(d, /*keepdim=*/true));
    pieces.push_back(gk);
  }
  return cat(pieces, d);
}

// The same gradient in O(n) for inputs with zeros. With z the first zero of a slice: positions
// before z get reversed_cumsum(y g) / x (x nonzero there); z gets prod(x before z) *
// sum_{j >= z} g_j prod_{z < i <= j} x_i (the products vanish from the second zero on); positions
// after z get 0. Its own derivative is not the second derivative of cumprod (a zero turned nonzero
// would change which branch applies), hence cumprod_grad_exact when a graph is being built.
Tensor cumprod_grad_first_order(const Tensor& x, const Tensor& y, const Tensor& g, int64_t d) {
  Tensor is_zero = eq(x, 0);
  Tensor nz = is_zero.cumsum(d);  // zeros up to and including each position (int64)
  Tensor before = eq(nz, 0);
  Tensor first = logical_and(is_zero, eq(nz, 1));
  Tensor x_before = where(before, x, Scalar(1.0));
  Tensor part_before = where(before, div(reversed_cumsum(mul(y, g), d), x_before), Scalar(0.0));
  Tensor prefix = x_before.prod(d, /*keepdim=*/true);
  Tensor from_first = where(logical_or(before, first), Scalar(1.0), x).cumprod(d);
  Tensor tail = where(before, Scalar(0.0), mul(g, from_first)).sum(d, /*keepdim=*/true);
  return add(part_before, where(first, mul(prefix, tail), Scalar(0.0)));
}

V cumprod_back(const BackwardContext& c, const V& g) {
  const Tensor x = input_as(c, g[0]);
  if (x.dim() == 0 || x.numel() <= 1) return {g[0]};
  const int64_t d = wrap_dim(ra(c).dims.at(0), x.dim(), "cumprod backward");
  if (x.size(d) == 1) return {g[0]};
  const Tensor& y = c.outputs[0];
  if (!any(eq(x, 0)).item<bool>()) return {div(reversed_cumsum(mul(y, g[0]), d), x)};
  if (is_grad_enabled()) return {cumprod_grad_exact(x, g[0], d)};
  return {cumprod_grad_first_order(x, y, g[0], d)};
}

}  // namespace

void register_reduce_derivatives() {
  register_batched_derivative(OpId::sum, {sum_back});
  register_batched_derivative(OpId::mean, {mean_back});
  register_derivative(OpId::prod, {prod_back, /*save_inputs=*/true, /*save_outputs=*/true});
  for (OpId op : {OpId::amax, OpId::amin}) register_derivative(op, {amax_back, true, true});
  for (OpId op : {OpId::max, OpId::min}) register_derivative(op, {max_all_back, true, true});
  for (OpId op : {OpId::max_dim, OpId::min_dim}) register_derivative(op, {max_dim_back});
  register_derivative(OpId::var, {var_back, /*save_inputs=*/true});
  register_derivative(OpId::std, {std_back, true, true});
  register_derivative(OpId::var_mean, {var_mean_back, /*save_inputs=*/true});
  register_derivative(OpId::norm, {norm_back, true, true});
  register_derivative(OpId::logsumexp, {logsumexp_back, true, true});
  register_derivative(OpId::cumsum, {cumsum_back});
  register_derivative(OpId::cumprod, {cumprod_back, true, true});
}

}  // namespace tessera::autograd
