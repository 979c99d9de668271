// Derivatives of the matrix products (src/ops/matmul.cpp): mm, bmm, addmm, baddbmm, dot, outer and
// linear. matmul and einsum record nothing of their own: they are views and copies around these.
// Each gradient is itself a product of recorded ops, so it is differentiable again.
//
// Invariants of the recorded calls: addmm/baddbmm record inputs (input, mat1, mat2) and
// attrs.scalars = {beta, alpha}; linear records (x, weight, bias) with bias undefined when absent.
// The `input` of addmm/baddbmm and the bias of linear broadcast to the product's shape: their
// gradient is returned in the product's shape and the engine sums it down (sum_to). outer promotes
// its operands' dtypes, so its saved operands are cast to the gradient's dtype first.
#include <tuple>

#include "autograd/derivatives/derivatives.h"
#include "ops/fused_ops.h"
#include "runtime/grad_mode.h"

namespace tessera::autograd {
namespace {

using V = std::vector<Tensor>;

// t * s, skipping the multiply (and a graph node) for the common s == 1.
Tensor scaled(const Tensor& t, const Scalar& s) { return s.to_double() == 1.0 ? t : mul(t, s); }

Tensor as_dtype(const Tensor& t, const Tensor& like) { return t.dtype() == like.dtype() ? t : t.to(like.dtype()); }

// c = a @ b: da = g @ b^T, db = a^T @ g.
// mm and linear take batched gradients (Note [Batched gradients]): matmul broadcasts the samples.
V mm_back(const BackwardContext& c, const V& g) {
  V out(2);
  if (c.batch >= 0) {
    if (needs(c, 0)) out[0] = matmul(g[0], c.inputs[1].t());
    if (needs(c, 1)) out[1] = matmul(c.inputs[0].t(), g[0]);
    return out;
  }
  if (needs(c, 0)) out[0] = mm(g[0], c.inputs[1].t());
  if (needs(c, 1)) out[1] = mm(c.inputs[0].t(), g[0]);
  return out;
}

V bmm_back(const BackwardContext& c, const V& g) {
  V out(2);
  if (needs(c, 0)) out[0] = bmm(g[0], c.inputs[1].transpose(1, 2));
  if (needs(c, 1)) out[1] = bmm(c.inputs[0].transpose(1, 2), g[0]);
  return out;
}

// c = beta * input + alpha * a @ b (addmm, and baddbmm with bmm for `prod`).
template <Tensor (*prod)(const Tensor&, const Tensor&), bool batched>
V add_product_back(const BackwardContext& c, const V& g) {
  const Scalar& beta = c.attrs.scalars.at(0);
  const Scalar& alpha = c.attrs.scalars.at(1);
  const Tensor& a = c.inputs[1];
  const Tensor& b = c.inputs[2];
  V out(3);
  if (needs(c, 0)) out[0] = scaled(g[0], beta);
  if (needs(c, 1)) out[1] = scaled(prod(g[0], batched ? b.transpose(1, 2) : b.t()), alpha);
  if (needs(c, 2)) out[2] = scaled(prod(batched ? a.transpose(1, 2) : a.t(), g[0]), alpha);
  return out;
}

// c = a . b (0-dim): da = g b, db = g a.
V dot_back(const BackwardContext& c, const V& g) {
  V out(2);
  if (needs(c, 0)) out[0] = mul(c.inputs[1], g[0]);
  if (needs(c, 1)) out[1] = mul(c.inputs[0], g[0]);
  return out;
}

// c = a b^T (n, m): da = g @ b, db = g^T @ a.
V outer_back(const BackwardContext& c, const V& g) {
  V out(2);
  if (needs(c, 0)) out[0] = matmul(g[0], as_dtype(c.inputs[1], g[0]));
  if (needs(c, 1)) out[1] = matmul(g[0].t(), as_dtype(c.inputs[0], g[0]));
  return out;
}

// c = x W^T + bias, x (..., in), W (out, in), c (..., out). The leading dims fold into rows, so
// both gradients are single mm calls (a matmul of g against W would broadcast W over the batch).
// A (out_features) bias with a weight gradient to compute takes its gradient from the weight
// gradient's GEMM (linear_weight_bias_grad: cuBLASLt's BGRADB epilogue on CUDA) when the derivative
// need not be differentiable; otherwise g is returned and the engine sums it down.
V linear_back(const BackwardContext& c, const V& g) {
  const Tensor& x = c.inputs[0];
  const Tensor& w = c.inputs[1];
  const int64_t in = w.size(1), out_f = w.size(0);
  const int64_t rows = numel_of(Shape(x.sizes().begin(), x.sizes().end() - 1));
  if (c.batch >= 0) {
    V out(3);
    Tensor g3 = g[0].reshape({c.batch, rows, out_f});  // (B, rows, out)
    if (needs(c, 0)) out[0] = matmul(g3, w).reshape(batched(c, x.sizes()));
    if (needs(c, 1)) out[1] = matmul(g3.transpose(1, 2), x.reshape({rows, in}));  // (B, out, in)
    if (needs(c, 2)) out[2] = g[0];
    return out;
  }
  Tensor g2 = g[0].reshape({rows, out_f});
  V out(3);
  if (needs(c, 0)) out[0] = mm(g2, w).reshape(x.sizes());
  const bool fused_bias = needs(c, 1) && needs(c, 2) && !is_grad_enabled() && c.input_meta.size() > 2 &&
                          c.input_meta[2].sizes == Shape{out_f} && g2.dtype() == x.dtype() && g2.dtype() == w.dtype();
  if (fused_bias) {
    std::tie(out[1], out[2]) = linear_weight_bias_grad(g2, x.reshape({rows, in}), {true, true});
    return out;
  }
  if (needs(c, 1)) out[1] = mm(g2.t(), x.reshape({rows, in}));
  if (needs(c, 2)) out[2] = g[0];
  return out;
}

}  // namespace

void register_linalg_derivatives() {
  register_batched_derivative(OpId::mm, {mm_back, /*save_inputs=*/true});
  register_derivative(OpId::bmm, {bmm_back, /*save_inputs=*/true});
  register_derivative(OpId::addmm, {add_product_back<mm, false>, /*save_inputs=*/true});
  register_derivative(OpId::baddbmm, {add_product_back<bmm, true>, /*save_inputs=*/true});
  register_derivative(OpId::dot, {dot_back, /*save_inputs=*/true});
  register_derivative(OpId::outer, {outer_back, /*save_inputs=*/true});
  register_batched_derivative(OpId::linear, {linear_back, /*save_inputs=*/true});
}

}  // namespace tessera::autograd
