// Derivatives of the fused normalization ops (ops/norm_ops.h). Recorded inputs {x, weight, bias}
// ({x, weight} for RMS norm), output {y}; attrs.ints = normalized_shape, attrs.scalars = {eps},
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

// The composite (differentiable) gradient of layer norm (rms = false) or RMS norm.
V composite_back(const BackwardContext& c, const V& g, bool rms) {
  const Tensor& x = c.inputs[0];
  const Tensor& w = c.inputs[1];
  const Shape& ns = c.attrs.ints;
  const double eps = c.attrs.scalars.at(0).to_double();
  const NormDims d = norm_dims(x.dim(), ns);
  const DType cd = compute_dtype(x.dtype());
  const Tensor xc = x.to(cd), gy = g[0].to(cd);
  Tensor xhat, rstd;
  if (rms) {
    rstd = rsqrt(mean(xc * xc, d.normalized, /*keepdim=*/true) + eps);
    xhat = xc * rstd;
  } else {
    Tensor centered = xc - mean(xc, d.normalized, /*keepdim=*/true);
    rstd = rsqrt(mean(centered * centered, d.normalized, /*keepdim=*/true) + eps);
    xhat = centered * rstd;
  }
  V out(c.inputs.size());
  if (needs(c, 0)) {
    Tensor gw = w.defined() ? gy * w.to(cd) : gy;
    Tensor inner = gw - xhat * mean(gw * xhat, d.normalized, /*keepdim=*/true);
    if (!rms) inner = inner - mean(gw, d.normalized, /*keepdim=*/true);
    out[0] = rstd * inner;
  }
  if (needs(c, 1)) out[1] = sum_leading(gy * xhat, d);
  if (!rms && needs(c, 2)) out[2] = sum_leading(gy, d);
  return out;
}

V layer_norm_back(const BackwardContext& c, const V& g) {
  if (is_grad_enabled()) return composite_back(c, g, /*rms=*/false);
  auto [dx, dw, db] = native_layer_norm_backward(g[0], c.inputs[0], c.attrs.ints, c.attrs.tensors.at(0),
                                                 c.attrs.tensors.at(1), c.inputs[1], c.inputs[2],
                                                 {needs(c, 0), needs(c, 1), needs(c, 2)});
  return {dx, dw, db};
}

V rms_norm_back(const BackwardContext& c, const V& g) {
  if (is_grad_enabled()) return composite_back(c, g, /*rms=*/true);
  auto [dx, dw] = native_rms_norm_backward(g[0], c.inputs[0], c.attrs.ints, c.attrs.tensors.at(0), c.inputs[1],
                                           {needs(c, 0), needs(c, 1)});
  return {dx, dw};
}

}  // namespace

void register_norm_derivatives() {
  register_derivative("native_layer_norm", {layer_norm_back, true});
  register_derivative("native_rms_norm", {rms_norm_back, true});
}

}  // namespace tessera::autograd
