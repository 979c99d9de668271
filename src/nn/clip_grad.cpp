// Gradient clipping. The total norm is the norm of the per-tensor norms, computed under no_grad and
// in at least float32; the scale is applied to each gradient in place (no host synchronization
// beyond the optional non-finite check).
#include <cmath>

#include "tessera/autograd.h"
#include "tessera/functions.h"
#include "tessera/nn/utils.h"

namespace tessera::nn::utils {

Tensor clip_grad_norm_(const std::vector<Tensor>& parameters, double max_norm, double norm_type,
                       bool error_if_nonfinite) {
  TS_CHECK(norm_type > 0 || std::isinf(norm_type), ValueError, "clip_grad_norm_: norm_type must be positive or inf, got ",
           norm_type);
  NoGradGuard no_grad;
  std::vector<Tensor> grads;
  for (const Tensor& p : parameters) {
    TS_CHECK(p.defined(), ValueError, "clip_grad_norm_: got an undefined parameter");
    Tensor g = p.grad();
    if (g.defined()) grads.push_back(g);
  }
  if (grads.empty()) return scalar_tensor(0.0, kFloat32);
  DType acc = kFloat32;
  for (const Tensor& g : grads)
    if (g.dtype() == kFloat64) acc = kFloat64;
  std::vector<Tensor> norms;
  for (const Tensor& g : grads) {
    Tensor ga = g.to(acc);
    norms.push_back(std::isinf(norm_type) ? ga.abs().amax() : norm(ga, norm_type));
  }
  Tensor all = stack(norms);
  Tensor total = std::isinf(norm_type) ? all.amax() : norm(all, norm_type);
  if (error_if_nonfinite) {
    const double t = total.item<double>();
    TS_CHECK(std::isfinite(t), ValueError, "clip_grad_norm_: The total norm of order ", norm_type,
             " for gradients from `parameters` is non-finite, so it cannot be clipped. To disable this error and "
             "scale the gradients by the non-finite norm anyway, set `error_if_nonfinite=False`");
  }
  // Always multiplying by the clamped coefficient (instead of branching on it) keeps the step free
  // of a host read of the norm, as PyTorch does.
  Tensor coef = clamp(max_norm / (total + 1e-6), std::nullopt, Scalar(1.0));
  for (Tensor& g : grads) g.mul_(coef.to(g.dtype()));
  return total;
}

void clip_grad_value_(const std::vector<Tensor>& parameters, double clip_value) {
  TS_CHECK(clip_value >= 0, ValueError, "clip_grad_value_: clip_value must be non-negative, got ", clip_value);
  NoGradGuard no_grad;
  for (const Tensor& p : parameters) {
    TS_CHECK(p.defined(), ValueError, "clip_grad_value_: got an undefined parameter");
    Tensor g = p.grad();
    if (g.defined()) g.clamp_(-clip_value, clip_value);
  }
}

}  // namespace tessera::nn::utils
