// Derivatives of the fused linear-layer ops (ops/fused_ops.h).
//
// linear_gelu (inputs {x, weight, bias}, output {y}, attrs.tensors = {pre (M, N)}): with g the
// gradient of y as (M, N) rows, dpre = g * gelu_tanh'(pre), dx = dpre @ W, and dW, db from one call
// of linear_weight_bias_grad (cuBLASLt's BGRADB epilogue on CUDA).
//
// linear_cross_entropy (inputs {x, weight}, output {loss}, attrs.tensors = {dx, dW, target},
// ints = {ignore_index}, str = reduction): the forward already computed the gradients of the loss
// (Note [Chunked classifier loss] in ops/fused_ops.cpp); the backward scales them by the incoming
// 0-dim gradient.
//
// With create_graph (grad mode on while the derivative runs) both are written with tessera ops on the
// saved inputs instead (the pre-activation and the logits recomputed), so that the result is
// differentiable again; linear_cross_entropy then materializes the (N, V) logits.
#include <tuple>

#include "autograd/derivatives/derivatives.h"
#include "ops/fused_ops.h"
#include "runtime/grad_mode.h"

namespace tessera::autograd {
namespace {

using V = std::vector<Tensor>;

DType compute_dtype(DType d) { return d == kFloat16 || d == kBFloat16 ? kFloat32 : d; }

// g * gelu_tanh'(v), with tessera ops (differentiable).
Tensor gelu_tanh_grad_composite(const Tensor& g, const Tensor& v) {
  constexpr double kBeta = 0.7978845608028654, kKappa = 0.044715;
  const Tensor v2 = v * v;
  const Tensor t = tanh((v + v2 * v * kKappa) * kBeta);
  const Tensor left = (t + 1) * 0.5;
  const Tensor right = v * 0.5 * (1.0 - t * t) * ((v2 * (3 * kKappa) + 1) * kBeta);
  return g * (left + right);
}

V linear_gelu_back(const BackwardContext& c, const V& g) {
  const Tensor& x = c.inputs[0];
  const Tensor& w = c.inputs[1];
  const Tensor& b = c.inputs[2];
  const int64_t k = w.size(1), n = w.size(0);
  const int64_t rows = numel_of(Shape(x.sizes().begin(), x.sizes().end() - 1));
  const Tensor x2 = x.reshape({rows, k});
  const Tensor g2 = g[0].reshape({rows, n});
  V out(3);
  Tensor dpre;
  if (is_grad_enabled()) {
    const DType cd = compute_dtype(x.dtype());
    Tensor pre = linear(x2, w, b.defined() ? std::optional<Tensor>(b) : std::nullopt).to(cd);
    dpre = gelu_tanh_grad_composite(g2.to(cd), pre).to(x.dtype());
    if (needs(c, 1)) out[1] = mm(dpre.t(), x2);
    if (needs(c, 2)) out[2] = sum(dpre, std::vector<int64_t>{0});
  } else {
    const Tensor& pre = c.attrs.tensors.at(0);
    dpre = gelu_tanh_backward(g2.to(pre.dtype()), pre);
    std::tie(out[1], out[2]) = linear_weight_bias_grad(dpre, x2, {needs(c, 1), needs(c, 2)});
  }
  if (needs(c, 0)) out[0] = mm(dpre, w).reshape(x.sizes());
  return out;
}

// mlp_gelu: inputs {x, w1, b1, w2, b2}, attrs.tensors = {pre, h}; g the gradient of y as (M, N2).
V mlp_gelu_back(const BackwardContext& c, const V& g) {
  const Tensor& x = c.inputs[0];
  const Tensor& w1 = c.inputs[1];
  const Tensor& b1 = c.inputs[2];
  const Tensor& w2 = c.inputs[3];
  const int64_t k = w1.size(1), n2 = w2.size(0);
  const int64_t rows = numel_of(Shape(x.sizes().begin(), x.sizes().end() - 1));
  const Tensor x2 = x.reshape({rows, k});
  const Tensor g2 = g[0].reshape({rows, n2});
  const bool need_pre = needs(c, 0) || needs(c, 1) || needs(c, 2);
  V out(5);
  Tensor dpre;
  if (is_grad_enabled()) {
    const DType cd = compute_dtype(x.dtype());
    const Tensor pre = linear(x2, w1, b1.defined() ? std::optional<Tensor>(b1) : std::nullopt);
    const Tensor h = gelu(pre, "tanh");
    if (needs(c, 3)) out[3] = mm(g2.t(), h);
    if (needs(c, 4)) out[4] = sum(g2, std::vector<int64_t>{0});
    if (need_pre) dpre = gelu_tanh_grad_composite(mm(g2, w2).to(cd), pre.to(cd)).to(x.dtype());
    if (needs(c, 2)) out[2] = sum(dpre, std::vector<int64_t>{0});
  } else {
    const Tensor& pre = c.attrs.tensors.at(0);
    const Tensor& h = c.attrs.tensors.at(1);
    const Tensor gd = g2.to(pre.dtype());
    std::tie(out[3], out[4]) = linear_weight_bias_grad(gd, h, {needs(c, 3), needs(c, 4)});
    // dpre from a plain GEMM and the GELU derivative pass, then c_fc's weight and bias gradients from
    // one GEMM (the bias gradient in its epilogue). linear_dgelu_bgrad (the derivative and the bias
    // gradient in the data-gradient GEMM's epilogue) measured slower on an H200: cuBLASLt runs that
    // epilogue as a separate kernel (0.44 ms against 0.24 ms at GPT-2's 16384 x 768 x 3072).
    if (need_pre) dpre = gelu_tanh_backward(mm(gd, w2), pre);
    if (needs(c, 1) || needs(c, 2))
      std::tie(out[1], out[2]) = linear_weight_bias_grad(dpre, x2.to(pre.dtype()), {needs(c, 1), needs(c, 2)});
  }
  if (needs(c, 0)) out[0] = mm(dpre, w1).reshape(x.sizes());
  if (needs(c, 1) && !out[1].defined()) out[1] = mm(dpre.t(), x2);
  return out;
}

// The gradient of the loss in x and weight with tessera ops (create_graph).
V linear_cross_entropy_composite(const BackwardContext& c, const Tensor& g) {
  const Tensor& x = c.inputs[0];
  const Tensor& w = c.inputs[1];
  const Tensor& target = c.attrs.tensors.at(2);
  const int64_t ignore_index = c.attrs.ints.at(0);
  const DType cd = compute_dtype(x.dtype());
  const Tensor valid = target != ignore_index;
  const Tensor safe = where(valid, target, Scalar(int64_t(0)));
  const Tensor logits = mm(x, w.t()).to(cd);  // (N, V)
  const int64_t v = w.size(0);
  const Tensor classes = arange(Scalar(v), TensorOptions(kInt64, x.device())).unsqueeze(0);
  const Tensor onehot = (safe.unsqueeze(1) == classes).to(cd);
  Tensor row_scale = valid.to(cd);
  if (c.attrs.str == "mean") row_scale = row_scale / valid.to(cd).sum();
  const Tensor dlogits = ((softmax(logits, 1) - onehot) * (row_scale * g.to(cd)).unsqueeze(1)).to(x.dtype());
  V out(2);
  if (needs(c, 0)) out[0] = mm(dlogits, w);
  if (needs(c, 1)) out[1] = mm(dlogits.t(), x);
  return out;
}

V linear_cross_entropy_back(const BackwardContext& c, const V& g) {
  if (is_grad_enabled()) return linear_cross_entropy_composite(c, g[0]);
  V out(2);
  const Tensor& dx = c.attrs.tensors.at(0);
  const Tensor& dw = c.attrs.tensors.at(1);
  if (needs(c, 0) && dx.defined()) out[0] = dx * g[0].to(dx.dtype());
  if (needs(c, 1) && dw.defined()) out[1] = dw * g[0].to(dw.dtype());
  return out;
}

}  // namespace

void register_fused_derivatives() {
  register_derivative(OpId::linear_gelu, {linear_gelu_back, /*save_inputs=*/true});
  register_derivative(OpId::mlp_gelu, {mlp_gelu_back, /*save_inputs=*/true});
  register_derivative(OpId::linear_cross_entropy, {linear_cross_entropy_back, /*save_inputs=*/true});
}

}  // namespace tessera::autograd
