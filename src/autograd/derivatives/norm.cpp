// Derivatives of the fused normalization ops (ops/norm_ops.h). Recorded inputs {x, weight, bias}
// ({x, weight} for RMS norm), output {y}; NormAttrs{normalized_shape, eps} (Note [Typed attributes]),
// attrs.tensors = {mean, rstd} ({rstd} for RMS norm), the statistics the forward kernel computed.
//
// A plain backward calls the fused backward op (one kernel family, using the saved statistics). When
// the backward must itself be differentiable (grad mode on during backward: create_graph), the
// gradient is written with tessera ops instead, recomputing the statistics from x so that their
// dependence on x is part of the new graph (the saved statistics are constants to autograd):
//   xhat = (x - mean) * rstd  (x * rstd for RMS norm),  g = dy * weight
//   dx = rstd * (g - mean(g) - xhat * mean(g * xhat))   (RMS norm: without mean(g))
//   dweight = sum over leading dims of dy * xhat,  dbias = sum over leading dims of dy
// 16-bit inputs are differentiated in float32; the engine casts each gradient to its input's dtype.
//
// native_add_layer_norm (inputs {x, residual, weight, bias}, outputs {sum, y}; only the output sum
// is saved, weight and bias come from attrs.tensors = {mean, rstd, weight, bias}): x and residual both
// get dsum = g_sum + the layer norm gradient of g_y over sum; the fused backward op adds g_sum in the
// kernel, and rounds it to the dtype of a 16-bit input there too (Note [Mixed add + layer norm]).
// The composite path differentiates through the saved sum, whose history (this node) carries
// the second-order gradient on to x and residual.
#include <array>
#include <optional>
#include <tuple>

#include "autograd/derivatives/derivatives.h"
#include "ops/norm_ops.h"
#include "runtime/grad_mode.h"

namespace tessera::autograd {
namespace {

using V = std::vector<Tensor>;

struct NormDims {
  std::vector<int64_t> normalized;  // the trailing dims, negative
  std::vector<int64_t> leading;     // the dims dweight / dbias sum over
};

NormDims norm_dims(int64_t x_dim, const Shape& normalized_shape) {
  const int64_t k = static_cast<int64_t>(normalized_shape.size());
  NormDims d;
  for (int64_t i = -k; i < 0; ++i) d.normalized.push_back(i);
  for (int64_t i = 0; i < x_dim - k; ++i) d.leading.push_back(i);
  return d;
}

DType compute_dtype(DType t) { return t == kFloat16 || t == kBFloat16 ? kFloat32 : t; }

Tensor sum_leading(const Tensor& t, const NormDims& d) { return d.leading.empty() ? t : sum(t, d.leading); }

// The composite (differentiable) gradient of layer norm (rms = false) or RMS norm of x (already in
// the compute dtype cd) -> {dx, dweight, dbias}, each where need[i].
V composite_grads(const Tensor& xc, const Tensor& w, const Tensor& gy_in, const Shape& ns, double eps, bool rms,
                  std::array<bool, 3> need) {
  const NormDims d = norm_dims(xc.dim(), ns);
  const DType cd = xc.dtype();
  const Tensor gy = gy_in.to(cd);
  Tensor xhat, rstd;
  if (rms) {
    rstd = rsqrt(mean(xc * xc, d.normalized, /*keepdim=*/true) + eps);
    xhat = xc * rstd;
  } else {
    Tensor centered = xc - mean(xc, d.normalized, /*keepdim=*/true);
    rstd = rsqrt(mean(centered * centered, d.normalized, /*keepdim=*/true) + eps);
    xhat = centered * rstd;
  }
  V out(3);
  if (need[0]) {
    Tensor gw = w.defined() ? gy * w.to(cd) : gy;
    Tensor inner = gw - xhat * mean(gw * xhat, d.normalized, /*keepdim=*/true);
    if (!rms) inner = inner - mean(gw, d.normalized, /*keepdim=*/true);
    out[0] = rstd * inner;
  }
  if (need[1] && w.defined()) out[1] = sum_leading(gy * xhat, d);
  if (!rms && need[2]) out[2] = sum_leading(gy, d);
  return out;
}

V composite_back(const BackwardContext& c, const V& g, bool rms) {
  const Tensor& x = c.inputs[0];
  const double eps = c.attrs.as<NormAttrs>().eps;
  V out = composite_grads(x.to(compute_dtype(x.dtype())), c.inputs[1], g[0], c.attrs.as<NormAttrs>().normalized_shape, eps, rms,
                          {needs(c, 0), needs(c, 1), needs(c, 2)});
  out.resize(c.inputs.size());
  return out;
}

V layer_norm_back(const BackwardContext& c, const V& g) {
  if (is_grad_enabled()) return composite_back(c, g, /*rms=*/false);
  auto [dx, dw, db] = native_layer_norm_backward(g[0], c.inputs[0], c.attrs.as<NormAttrs>().normalized_shape, c.attrs.tensors.at(0),
                                                 c.attrs.tensors.at(1), c.inputs[1], c.inputs[2],
                                                 {needs(c, 0), needs(c, 1), needs(c, 2)});
  return {dx, dw, db};
}

V rms_norm_back(const BackwardContext& c, const V& g) {
  if (is_grad_enabled()) return composite_back(c, g, /*rms=*/true);
  auto [dx, dw] = native_rms_norm_backward(g[0], c.inputs[0], c.attrs.as<NormAttrs>().normalized_shape, c.attrs.tensors.at(0), c.inputs[1],
                                           {needs(c, 0), needs(c, 1)});
  return {dx, dw};
}

V add_layer_norm_back(const BackwardContext& c, const V& g) {
  const bool need_x = needs(c, 0), need_r = needs(c, 1);
  const Tensor& sum = c.outputs[0];
  const Tensor& weight = c.attrs.tensors.at(2);
  const Tensor& bias = c.attrs.tensors.at(3);
  if (is_grad_enabled()) {
    const DType cd = compute_dtype(sum.dtype());
    V d = composite_grads(sum.to(cd), weight, g[1], c.attrs.as<NormAttrs>().normalized_shape, c.attrs.as<NormAttrs>().eps, false,
                          {need_x || need_r, needs(c, 2), needs(c, 3)});
    Tensor dsum = need_x || need_r ? d[0] + g[0].to(cd) : Tensor();
    return {need_x ? dsum : Tensor(), need_r ? dsum : Tensor(), d[1], d[2]};
  }
  // An input of another dtype than sum (the 16-bit branch under autocast) gets its gradient rounded to
  // its dtype in the same kernel (Note [Mixed add + layer norm]); the engine casts any other.
  const DType sd = sum.dtype(), dx_dtype = c.input_meta[0].dtype, dr_dtype = c.input_meta[1].dtype;
  std::optional<DType> low;
  if (need_x && dx_dtype != sd) low = dx_dtype;
  else if (need_r && dr_dtype != sd) low = dr_dtype;
  const bool x_low = need_x && low && dx_dtype == *low, r_low = need_r && low && dr_dtype == *low;
  auto [dsum, dsum_low, dw, db] = native_add_layer_norm_backward(
      g[1], g[0], sum, c.attrs.as<NormAttrs>().normalized_shape, c.attrs.tensors.at(0), c.attrs.tensors.at(1), weight, bias,
      {(need_x && !x_low) || (need_r && !r_low), x_low || r_low, needs(c, 2), needs(c, 3)}, low);
  return {need_x ? (x_low ? dsum_low : dsum) : Tensor(), need_r ? (r_low ? dsum_low : dsum) : Tensor(), dw, db};
}

}  // namespace

void register_norm_derivatives() {
  register_derivative(OpId::native_add_layer_norm, {add_layer_norm_back, /*save_inputs=*/false, /*save_outputs=*/true});
  register_derivative(OpId::native_layer_norm, {layer_norm_back, true});
  register_derivative(OpId::native_rms_norm, {rms_norm_back, true});
}

}  // namespace tessera::autograd
