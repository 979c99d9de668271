// Derivatives of the elementwise ops: unary math, binary arithmetic, where / clamp / lerp / addcmul /
// addcdiv, softmax and log_softmax.
//
// Formulas and the choices at non-differentiable points follow PyTorch's derivatives.yaml: abs and
// sign-like kinks take the subgradient 0 (abs, relu at 0), floor/ceil/round/trunc/sign and div with a
// rounding mode have zero gradient, maximum/minimum split the gradient half/half at ties, clamp passes
// the gradient where min <= x <= max, pow masks the exponent-0 and base-0 cases.
// Invariants: every formula uses tessera ops only, so it runs on any device and records itself when
// the engine runs with create_graph (double backward). A Scalar operand reaches a derivative as a
// 0-dim tensor that needs no gradient (the op files record it so); gradients may keep the broadcast
// shape and the compute dtype, the engine reduces and casts them to each input.
#include <cmath>

#include "autograd/derivatives/derivatives.h"

namespace tessera::autograd {
namespace {

using V = std::vector<Tensor>;
using C = const BackwardContext&;

constexpr double kLn2 = 0.69314718055994530942;
constexpr double kTwoOverSqrtPi = 1.12837916709551257390;  // 2 / sqrt(pi)
constexpr double kSqrtHalf = 0.70710678118654752440;       // 1 / sqrt(2)

// g where `keep`, 0 elsewhere (where, not a product, so that an inf/nan gradient does not leak).
Tensor keep_where(const Tensor& keep, const Tensor& g) { return where(keep, g, Scalar(0.0)); }
Tensor zero_where(const Tensor& drop, const Tensor& g) { return where(drop, Scalar(0.0), g); }
Tensor rsub_one(const Tensor& t) { return neg(t) + 1; }  // 1 - t

// ---- unary ------------------------------------------------------------------------------------
V neg_back(C, const V& g) { return {neg(g[0])}; }
V abs_back(C c, const V& g) { return {g[0] * sign(c.inputs[0])}; }
V exp_back(C c, const V& g) { return {g[0] * c.outputs[0]}; }
V exp2_back(C c, const V& g) { return {g[0] * c.outputs[0] * kLn2}; }
V log_back(C c, const V& g) { return {g[0] / c.inputs[0]}; }
V log2_back(C c, const V& g) { return {g[0] / (c.inputs[0] * kLn2)}; }
V log1p_back(C c, const V& g) { return {g[0] / (c.inputs[0] + 1)}; }
V expm1_back(C c, const V& g) { return {g[0] * (c.outputs[0] + 1)}; }
V sqrt_back(C c, const V& g) { return {g[0] / (c.outputs[0] * 2)}; }
V rsqrt_back(C c, const V& g) {
  const Tensor& y = c.outputs[0];
  return {g[0] * (y * y * y) * -0.5};
}
V sin_back(C c, const V& g) { return {g[0] * cos(c.inputs[0])}; }
V cos_back(C c, const V& g) { return {g[0] * neg(sin(c.inputs[0]))}; }
V tan_back(C c, const V& g) {
  const Tensor& y = c.outputs[0];
  return {g[0] * (y * y + 1)};
}
V tanh_back(C c, const V& g) {
  const Tensor& y = c.outputs[0];
  return {g[0] * rsub_one(y * y)};
}
V sigmoid_back(C c, const V& g) {
  const Tensor& y = c.outputs[0];
  return {g[0] * y * rsub_one(y)};
}
V relu_back(C c, const V& g) { return {threshold_backward(g[0], c.outputs[0], Scalar(0))}; }
// d/d grad_output: the same mask on the incoming gradient; self gets none (the mask is piecewise
// constant in it), as PyTorch's threshold_backward derivative.
V threshold_backward_back(C c, const V& g) {
  V out(2);
  if (needs(c, 0)) out[0] = threshold_backward(g[0], c.inputs[1], c.attrs.scalars.at(0));
  return out;
}
V silu_back(C c, const V& g) {
  const Tensor& x = c.inputs[0];
  Tensor s = sigmoid(x);
  return {g[0] * s * (x * rsub_one(s) + 1)};
}
// hardswish: 0 up to -3, x / 3 + 1/2 strictly between -3 and 3, 1 from 3 on (a NaN passes the
// gradient). The ends are PyTorch 2's (2.11 on the GPU machine: 0 at -3 and 1 at 3); PyTorch 1.13's
// CPU kernel took the middle piece at both ends.
V hardswish_back(C c, const V& g) {
  const Tensor& x = c.inputs[0];
  Tensor mid = g[0] * (x / 3.0 + 0.5);
  return {where(le(x, -3.0), zeros_like(g[0]), where(lt(x, 3.0), mid, g[0]))};
}
V erf_back(C c, const V& g) {
  const Tensor& x = c.inputs[0];
  return {g[0] * exp(neg(x * x)) * kTwoOverSqrtPi};
}
V reciprocal_back(C c, const V& g) {
  const Tensor& y = c.outputs[0];
  return {neg(g[0] * (y * y))};
}
V zero_back(C, const V& g) { return {zeros_like(g[0])}; }  // floor, ceil, round, trunc, sign
V nan_to_num_back(C c, const V& g) { return {keep_where(isfinite(c.inputs[0]), g[0])}; }

V gelu_back(C c, const V& g) {
  const Tensor& x = c.inputs[0];
  if (c.attrs.str == "tanh") {
    // d/dx of 0.5 x (1 + tanh(k (x + 0.044715 x^3))), k = sqrt(2 / pi).
    constexpr double kBeta = kTwoOverSqrtPi * kSqrtHalf, kKappa = 0.044715;
    Tensor x2 = x * x;
    Tensor t = tanh((x + x2 * x * kKappa) * kBeta);
    Tensor left = (t + 1) * 0.5;
    Tensor right = x * 0.5 * rsub_one(t * t) * ((x2 * (3 * kKappa) + 1) * kBeta);
    return {g[0] * (left + right)};
  }
  Tensor cdf = (erf(x * kSqrtHalf) + 1) * 0.5;
  Tensor pdf = exp(x * x * -0.5) * (kTwoOverSqrtPi * kSqrtHalf * 0.5);
  return {g[0] * (cdf + x * pdf)};
}

// softplus(x) = log(1 + exp(beta x)) / beta, linear where beta x > threshold.
V softplus_back(C c, const V& g) {
  const double beta = c.attrs.scalars.at(0).to_double(), threshold = c.attrs.scalars.at(1).to_double();
  Tensor bx = c.inputs[0] * beta;
  return {where(gt(bx, Scalar(threshold)), g[0], g[0] * sigmoid(bx))};
}

// ---- binary -----------------------------------------------------------------------------------
Tensor times_alpha(const Tensor& g, const Scalar& alpha) { return alpha.to_double() == 1.0 ? g : g * alpha; }

V add_back(C c, const V& g) {
  V out(2);
  if (needs(c, 0)) out[0] = g[0];
  if (needs(c, 1)) out[1] = times_alpha(g[0], c.attrs.scalars.at(0));
  return out;
}
V sub_back(C c, const V& g) {
  V out(2);
  if (needs(c, 0)) out[0] = g[0];
  if (needs(c, 1)) out[1] = neg(times_alpha(g[0], c.attrs.scalars.at(0)));
  return out;
}
V mul_back(C c, const V& g) {
  V out(2);
  if (needs(c, 0)) out[0] = g[0] * c.inputs[1];
  if (needs(c, 1)) out[1] = g[0] * c.inputs[0];
  return out;
}
// With a rounding mode the quotient is piecewise constant: zero gradient, as PyTorch.
V div_back(C c, const V& g) {
  V out(2);
  const Tensor &a = c.inputs[0], &b = c.inputs[1];
  const bool rounding = !c.attrs.str.empty();
  if (needs(c, 0)) out[0] = rounding ? zeros_like(g[0]) : g[0] / b;
  if (needs(c, 1)) out[1] = rounding ? zeros_like(g[0]) : neg(g[0]) * ((a / b) / b);
  return out;
}
// PyTorch's masks: the base gets 0 where the exponent is 0 (so 0^0 gives no nan); the exponent gets 0
// where base == 0 and exponent >= 0 (where log(base) would give -inf times 0).
V pow_back(C c, const V& g) {
  V out(2);
  const Tensor &a = c.inputs[0], &b = c.inputs[1];
  if (needs(c, 0)) out[0] = zero_where(eq(b, Scalar(0)), g[0] * (b * pow(a, b - 1)));
  if (needs(c, 1)) {
    Tensor masked = logical_and(eq(a, Scalar(0)), ge(b, Scalar(0)));
    out[1] = zero_where(masked, g[0] * (pow(a, b) * log(a)));
  }
  return out;
}
// Ties split the gradient half/half; a nan on either side passes the gradient to both, as PyTorch.
V max_min_back(C c, const V& g, bool is_max) {
  V out(2);
  const Tensor &a = c.inputs[0], &b = c.inputs[1];
  Tensor shared = where(eq(a, b), g[0] * 0.5, g[0]);
  if (needs(c, 0)) out[0] = zero_where(is_max ? lt(a, b) : gt(a, b), shared);
  if (needs(c, 1)) out[1] = zero_where(is_max ? gt(a, b) : lt(a, b), shared);
  return out;
}
V maximum_back(C c, const V& g) { return max_min_back(c, g, true); }
V minimum_back(C c, const V& g) { return max_min_back(c, g, false); }
// fmod(a, b) = a - trunc(a / b) b, remainder(a, b) = a - floor(a / b) b.
V fmod_back(C c, const V& g) {
  V out(2);
  if (needs(c, 0)) out[0] = g[0];
  if (needs(c, 1)) out[1] = neg(g[0]) * div(c.inputs[0], c.inputs[1], "trunc");
  return out;
}
V remainder_back(C c, const V& g) {
  V out(2);
  if (needs(c, 0)) out[0] = g[0];
  if (needs(c, 1)) out[1] = neg(g[0]) * div(c.inputs[0], c.inputs[1], "floor");
  return out;
}
// logaddexp: d/da = 1 / (1 + exp(b - a)), d/db = 1 / (1 + exp(a - b)) (PyTorch's formula).
V logaddexp_back(C c, const V& g) {
  V out(2);
  const Tensor &a = c.inputs[0], &b = c.inputs[1];
  if (needs(c, 0)) out[0] = g[0] / (exp(b - a) + 1.0);
  if (needs(c, 1)) out[1] = g[0] / (exp(a - b) + 1.0);
  return out;
}
V atan2_back(C c, const V& g) {
  V out(2);
  const Tensor &a = c.inputs[0], &b = c.inputs[1];
  Tensor r = reciprocal(a * a + b * b);
  if (needs(c, 0)) out[0] = g[0] * b * r;
  if (needs(c, 1)) out[1] = g[0] * neg(a) * r;
  return out;
}

// ---- where, clamp, lerp, addcmul, addcdiv -----------------------------------------------------
V where_back(C c, const V& g) {
  const Tensor& cond = c.attrs.tensors.at(0);
  V out(2);
  if (needs(c, 0)) out[0] = keep_where(cond, g[0]);
  if (needs(c, 1)) out[1] = zero_where(cond, g[0]);
  return out;
}
// Inputs (x, min, max), an absent bound undefined. x gets the gradient where min <= x <= max; a
// tensor bound gets it where it is the value taken (min only while min < max, as PyTorch).
V clamp_back(C c, const V& g) {
  const Tensor &x = c.inputs[0], &lo = c.inputs[1], &hi = c.inputs[2];
  V out(3);
  if (needs(c, 0)) {
    Tensor keep;
    if (lo.defined()) keep = ge(x, lo);
    if (hi.defined()) keep = keep.defined() ? logical_and(keep, le(x, hi)) : le(x, hi);
    out[0] = keep_where(keep, g[0]);
  }
  if (needs(c, 1)) {
    Tensor take = lt(x, lo);
    if (hi.defined()) take = logical_and(take, lt(lo, hi));
    out[1] = keep_where(take, g[0]);
  }
  if (needs(c, 2)) {
    Tensor take = gt(x, hi);
    if (lo.defined()) take = logical_or(take, lt(hi, lo));
    out[2] = keep_where(take, g[0]);
  }
  return out;
}
// lerp(a, b, w) = a + w (b - a).
V lerp_back(C c, const V& g) {
  const Tensor &a = c.inputs[0], &b = c.inputs[1], &w = c.inputs[2];
  V out(3);
  if (needs(c, 0)) out[0] = g[0] * rsub_one(w);
  if (needs(c, 1)) out[1] = g[0] * w;
  if (needs(c, 2)) out[2] = g[0] * (b - a);
  return out;
}
V addcmul_back(C c, const V& g) {
  const Scalar& value = c.attrs.scalars.at(0);
  V out(3);
  if (needs(c, 0)) out[0] = g[0];
  if (needs(c, 1)) out[1] = g[0] * c.inputs[2] * value;
  if (needs(c, 2)) out[2] = g[0] * c.inputs[1] * value;
  return out;
}
V addcdiv_back(C c, const V& g) {
  const Scalar& value = c.attrs.scalars.at(0);
  const Tensor &t1 = c.inputs[1], &t2 = c.inputs[2];
  V out(3);
  if (needs(c, 0)) out[0] = g[0];
  if (needs(c, 1)) out[1] = g[0] * value / t2;
  if (needs(c, 2)) out[2] = neg(g[0]) * value * t1 / (t2 * t2);
  return out;
}

// ---- softmax ----------------------------------------------------------------------------------
// y = softmax(x): dx = y (g - sum(g y)); y = log_softmax(x): dx = g - exp(y) sum(g), sums over dim.
// The dim is counted from the end, so that a batched gradient's leading dim leaves it in place.
int64_t dim_from_end(const Tensor& y, int64_t dim) { return wrap_dim(dim, y.dim(), "softmax backward") - y.dim(); }
V softmax_back(C c, const V& g) {
  const Tensor& y = c.outputs[0];
  if (y.dim() == 0) return {zeros_like(g[0])};  // a single element: the output is constant
  const int64_t dim = dim_from_end(y, c.attrs.ints.at(0));
  return {y * (g[0] - sum(g[0] * y, dim, true))};
}
V log_softmax_back(C c, const V& g) {
  const Tensor& y = c.outputs[0];
  if (y.dim() == 0) return {zeros_like(g[0])};
  const int64_t dim = dim_from_end(y, c.attrs.ints.at(0));
  return {g[0] - exp(y) * sum(g[0], dim, true)};
}

}  // namespace

void register_elementwise_derivatives() {
  // Every formula here is pointwise (softmax's sums run over a dim counted from the end): batched
  // gradients broadcast through them as they come (Note [Batched gradients]).
  const bool in = true, out = true;
  register_batched_derivative(OpId::neg, {neg_back});
  register_batched_derivative(OpId::abs, {abs_back, in});
  register_batched_derivative(OpId::exp, {exp_back, false, out});
  register_batched_derivative(OpId::exp2, {exp2_back, false, out});
  register_batched_derivative(OpId::log, {log_back, in});
  register_batched_derivative(OpId::log2, {log2_back, in});
  register_batched_derivative(OpId::log1p, {log1p_back, in});
  register_batched_derivative(OpId::expm1, {expm1_back, false, out});
  register_batched_derivative(OpId::sqrt, {sqrt_back, false, out});
  register_batched_derivative(OpId::rsqrt, {rsqrt_back, false, out});
  register_batched_derivative(OpId::sin, {sin_back, in});
  register_batched_derivative(OpId::cos, {cos_back, in});
  register_batched_derivative(OpId::tan, {tan_back, false, out});
  register_batched_derivative(OpId::tanh, {tanh_back, false, out});
  register_batched_derivative(OpId::sigmoid, {sigmoid_back, false, out});
  register_batched_derivative(OpId::relu, {relu_back, false, out});
  register_batched_derivative(OpId::relu_, {relu_back, false, out});  // Note [In-place kernels]
  register_batched_derivative(OpId::threshold_backward, {threshold_backward_back, true, false});
  register_batched_derivative(OpId::gelu, {gelu_back, in});
  register_batched_derivative(OpId::silu, {silu_back, in});
  register_batched_derivative(OpId::hardswish, {hardswish_back, in});
  register_batched_derivative(OpId::softplus, {softplus_back, in});
  register_batched_derivative(OpId::erf, {erf_back, in});
  for (OpId op : {OpId::floor, OpId::ceil, OpId::round, OpId::trunc, OpId::sign}) register_batched_derivative(op, {zero_back});
  register_batched_derivative(OpId::reciprocal, {reciprocal_back, false, out});
  register_batched_derivative(OpId::nan_to_num, {nan_to_num_back, in});

  register_batched_derivative(OpId::add, {add_back});
  register_batched_derivative(OpId::sub, {sub_back});
  register_batched_derivative(OpId::mul, {mul_back, in});
  register_batched_derivative(OpId::add_, {add_back});
  register_batched_derivative(OpId::sub_, {sub_back});
  register_batched_derivative(OpId::mul_, {mul_back, in});
  register_batched_derivative(OpId::div, {div_back, in});
  register_batched_derivative(OpId::pow, {pow_back, in});
  register_batched_derivative(OpId::maximum, {maximum_back, in});
  register_batched_derivative(OpId::minimum, {minimum_back, in});
  register_batched_derivative(OpId::fmod, {fmod_back, in});
  register_batched_derivative(OpId::remainder, {remainder_back, in});
  register_batched_derivative(OpId::atan2, {atan2_back, in});
  register_batched_derivative(OpId::logaddexp, {logaddexp_back, in});

  register_batched_derivative(OpId::where, {where_back});
  register_batched_derivative(OpId::clamp, {clamp_back, in});
  register_batched_derivative(OpId::lerp, {lerp_back, in});
  register_batched_derivative(OpId::addcmul, {addcmul_back, in});
  register_batched_derivative(OpId::addcdiv, {addcdiv_back, in});
  register_batched_derivative(OpId::softmax, {softmax_back, false, out});
  register_batched_derivative(OpId::log_softmax, {log_softmax_back, false, out});
}

}  // namespace tessera::autograd
