// The gradient scaler's fused ops: validation with PyTorch's messages, then the amp kernel slots
// (ops/amp_kernel.h). Neither op records autograd: they write gradients and the scaler's state.
#include "ops/amp_ops.h"

#include "ops/amp_kernel.h"
#include "ops/autograd_hook.h"
#include "ops/op_scope.h"
#include "ops/op_utils.h"
#include "tessera/autograd.h"
#include "tensor/tensor_impl.h"

namespace tessera {
namespace {

void check_one_element(const char* op, const Tensor& t, const char* what, DType dtype) {
  TS_CHECK(t.defined(), ValueError, op, ": ", what, " is undefined");
  TS_CHECK(t.numel() == 1, ShapeError, op, ": ", what, " must be a 1-element tensor, got shape ", t.sizes());
  TS_CHECK(t.dtype() == dtype, DTypeError, op, ": ", what, " must be a ", dtype_name(dtype), " tensor, got ",
           dtype_name(t.dtype()));
}

}  // namespace

void _amp_foreach_non_finite_check_and_unscale_(const std::vector<Tensor>& grads, Tensor& found_inf,
                                                const Tensor& inv_scale) {
  const OpId id = OpId::_amp_foreach_non_finite_check_and_unscale_;
  const char* op = op_name(id);
  OpScope scope(id, grads);
  check_one_element(op, found_inf, "found_inf", kFloat32);
  check_one_element(op, inv_scale, "inv_scale", kFloat32);
  TS_CHECK(found_inf.device() == inv_scale.device(), DeviceError, op,
           ": found_inf and inv_scale must be on the same device, got ", found_inf.device().str(), " and ",
           inv_scale.device().str());
  for (size_t i = 0; i < grads.size(); ++i) {
    const Tensor& g = grads[i];
    TS_CHECK(g.defined(), ValueError, op, ": scaled_grads[", i, "] is undefined");
    TS_CHECK(g.device() == inv_scale.device(), DeviceError, op, ": scaled_grads[", i, "] is on ", g.device().str(),
             " but inv_scale and found_inf are on ", inv_scale.device().str(), "; all tensors must be on one device");
    TS_CHECK(is_floating_point(g.dtype()), DTypeError, op, ": scaled_grads[", i,
             "] must be a floating-point tensor, got ", dtype_name(g.dtype()));
  }
  {
    std::vector<Tensor> written = grads;
    written.push_back(found_inf);
    refuse_untracked_inplace(op, written, {inv_scale});
  }
  if (grads.empty()) return;
  NoGradGuard no_grad;
  // The kernels take dense contiguous tensors; the rare strided gradient goes through a copy.
  std::vector<Tensor> work;
  std::vector<std::pair<Tensor, Tensor>> write_back;  // (gradient, its contiguous copy)
  work.reserve(grads.size());
  for (const Tensor& g : grads) {
    if (g.is_contiguous()) {
      work.push_back(g);
    } else {
      Tensor c = g.contiguous();
      write_back.emplace_back(g, c);
      work.push_back(c);
    }
  }
  amp_unscale_kernel(found_inf.device(), work, found_inf, inv_scale);
  for (auto& [g, c] : write_back) const_cast<Tensor&>(g).copy_(c);
  for (const Tensor& g : grads)
    if (g.is_contiguous()) g.impl()->bump_version();
  found_inf.impl()->bump_version();
}

Tensor& _amp_update_scale_(Tensor& scale, Tensor& growth_tracker, const Tensor& found_inf, double growth_factor,
                           double backoff_factor, int64_t growth_interval) {
  const OpId id = OpId::_amp_update_scale_;
  const char* op = op_name(id);
  OpScope scope(id, {&scale, &growth_tracker, &found_inf});
  check_one_element(op, scale, "current_scale", kFloat32);
  check_one_element(op, growth_tracker, "growth_tracker", kInt32);
  check_one_element(op, found_inf, "found_inf", kFloat32);
  check_same_device(op, {&scale, &growth_tracker, &found_inf});
  TS_CHECK(growth_interval > 0, ValueError, op, ": growth_interval must be positive, got ", growth_interval);
  refuse_untracked_inplace(op, {scale, growth_tracker}, {found_inf});
  amp_update_scale_kernel(scale.device(), scale, growth_tracker, found_inf, growth_factor, backoff_factor,
                          growth_interval);
  scale.impl()->bump_version();
  growth_tracker.impl()->bump_version();
  return scale;
}

}  // namespace tessera
