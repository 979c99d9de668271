// Gradient clipping. The total norm is the norm of the per-tensor norms, computed under no_grad and
// in at least float32; the scale is applied to each gradient in place (no host synchronization
// beyond the optional non-finite check).
//
// As PyTorch's foreach path: gradients are grouped by (device, accumulation dtype: float64 for float64
// gradients, else float32); each group's norms come from one multi-tensor call (a few launches on
// CUDA, not one per gradient) as one (n) tensor, the total is the norm of all of them, and each group
// is scaled by one _foreach_mul_ with the coefficient in its accumulation dtype. Unlike PyTorch, the
// norms of 16-bit gradients are taken and returned in float32 (PyTorch returns them in the gradients'
// dtype); norm_type -inf (min |g|) runs per gradient.
#include <cmath>

#include "ops/foreach_ops.h"
#include "tessera/autograd.h"
#include "tessera/functions.h"
#include "tessera/nn/utils.h"

namespace tessera::nn::utils {

namespace {

struct GradGroup {
  Device device;
  DType acc;
  std::vector<Tensor> grads;
};

}  // namespace

Tensor clip_grad_norm_(const std::vector<Tensor>& parameters, double max_norm, double norm_type,
                       bool error_if_nonfinite) {
  TS_CHECK(norm_type > 0 || std::isinf(norm_type), ValueError, "clip_grad_norm_: norm_type must be positive or inf, got ",
           norm_type);
  NoGradGuard no_grad;
  std::vector<GradGroup> groups;
  DType total_acc = kFloat32;
  for (const Tensor& p : parameters) {
    TS_CHECK(p.defined(), ValueError, "clip_grad_norm_: got an undefined parameter");
    Tensor g = p.grad();
    if (!g.defined()) continue;
    const DType acc = g.dtype() == kFloat64 ? kFloat64 : kFloat32;
    if (acc == kFloat64) total_acc = kFloat64;
    GradGroup* group = nullptr;
    for (GradGroup& gr : groups)
      if (gr.device == g.device() && gr.acc == acc) group = &gr;
    if (!group) group = &groups.emplace_back(GradGroup{g.device(), acc, {}});
    group->grads.push_back(g);
  }
  if (groups.empty()) return scalar_tensor(0.0, kFloat32);
  const Device first = groups[0].device;
  std::vector<Tensor> parts;  // per group: (n_group) norms, on the first device in total_acc
  for (const GradGroup& gr : groups) {
    if (norm_type < 0) {  // -inf: min |g| over every gradient (PyTorch's vector_norm), no kernel for it
      std::vector<Tensor> norms;
      for (const Tensor& g : gr.grads) norms.push_back(norm(g.to(gr.acc), norm_type));
      parts.push_back(stack(norms).to(first, total_acc));
    } else {
      parts.push_back(foreach_norm_stacked(gr.grads, norm_type, gr.acc).to(first, total_acc));
    }
  }
  Tensor all = parts.size() == 1 ? parts[0] : cat(parts);  // (number of gradients)
  Tensor total = norm(all, norm_type);
  if (error_if_nonfinite) {
    const double t = total.item<double>();
    TS_CHECK(std::isfinite(t), ValueError, "clip_grad_norm_: The total norm of order ", norm_type,
             " for gradients from `parameters` is non-finite, so it cannot be clipped. To disable this error and "
             "scale the gradients by the non-finite norm anyway, set `error_if_nonfinite=False`");
  }
  // Always multiplying by the clamped coefficient (instead of branching on it) keeps the step free
  // of a host read of the norm, as PyTorch does.
  Tensor coef = clamp(max_norm / (total + 1e-6), std::nullopt, Scalar(1.0));
  for (const GradGroup& gr : groups) _foreach_mul_(gr.grads, coef.to(gr.device, gr.acc));
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
