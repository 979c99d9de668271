// Derivative of native_batch_norm (ops/batch_norm_ops.h). Recorded call: inputs {x, weight, bias}
// (weight / bias may be undefined), output {y}; BatchNormAttrs{training, eps},
// attrs.tensors = {save_mean, save_invstd, running_mean, running_var, reserve} (the last three may be
// undefined).
//
// Without a graph of the backward (grad mode off while it runs, the usual case) the gradient comes
// from the fused native_batch_norm_backward op, one kernel. When create_graph asks for a graph, the
// same formulas are written with tessera ops, recomputing the batch statistics from x so that their
// own dependence on x is differentiated too (gradgradcheck):
//   training: xhat = (x - mean) * invstd,  dx = w * invstd * (g - mean(g) - xhat * mean(g * xhat))
//   eval:     xhat = (x - running_mean) * invstd_running,  dx = w * invstd_running * g
//   both:     dweight = sum(g * xhat),  dbias = sum(g)     (sums and means over every dim but 1)
// 16-bit inputs are computed in float32, as the kernels do.
#include "autograd/derivatives/derivatives.h"
#include "ops/batch_norm_ops.h"
#include "runtime/grad_mode.h"

namespace tessera::autograd {
namespace {

using V = std::vector<Tensor>;

V batch_norm_back(const BackwardContext& c, const V& g) {
  const Tensor& x = c.inputs[0];
  const Tensor& w = c.inputs[1];
  const std::vector<Tensor>& t = c.attrs.tensors;
  const bool training = c.attrs.as<BatchNormAttrs>().training;
  const double eps = c.attrs.as<BatchNormAttrs>().eps;
  const Tensor go = g[0].dtype() == x.dtype() ? g[0] : g[0].to(x.dtype());
  V out(3);
  if (!is_grad_enabled()) {
    auto [dx, dw, db] = native_batch_norm_backward(go, x, w, t.at(2), t.at(3), t.at(0), t.at(1), training, eps,
                                                   {needs(c, 0), needs(c, 1), needs(c, 2)}, t.at(4));
    out[0] = dx;
    out[1] = dw;
    out[2] = db;
    return out;
  }
  const DType p = x.dtype() == kFloat16 || x.dtype() == kBFloat16 ? kFloat32 : x.dtype();
  Shape view(static_cast<size_t>(x.dim()), 1);
  view[1] = x.size(1);
  std::vector<int64_t> dims{0};
  for (int64_t d = 2; d < x.dim(); ++d) dims.push_back(d);
  const Tensor xc = x.to(p), gc = go.to(p);
  Tensor invstd, xhat;
  if (training) {
    Tensor mu = mean(xc, dims, /*keepdim=*/true);
    Tensor d = xc - mu;
    invstd = rsqrt(mean(d * d, dims, /*keepdim=*/true) + eps);
    xhat = d * invstd;
  } else {
    invstd = rsqrt(t.at(3).detach() + eps).reshape(view);
    xhat = (xc - t.at(2).detach().reshape(view)) * invstd;
  }
  if (needs(c, 0)) {
    Tensor k = w.defined() ? invstd * w.reshape(view) : invstd;
    Tensor dx = training ? k * (gc - mean(gc, dims, true) - xhat * mean(gc * xhat, dims, true)) : k * gc;
    out[0] = dx.to(x.dtype());
  }
  if (needs(c, 1)) out[1] = sum(gc * xhat, dims);
  if (needs(c, 2)) out[2] = sum(gc, dims);
  return out;
}

}  // namespace

void register_batch_norm_derivatives() { register_derivative(OpId::native_batch_norm, {batch_norm_back, true}); }

}  // namespace tessera::autograd
