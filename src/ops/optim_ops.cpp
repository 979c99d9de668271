// The fused optimizer steps (optim_ops.h): argument checks, one OpScope, one kernel call.
#include "ops/optim_ops.h"

#include "ops/autograd_hook.h"
#include "ops/op_scope.h"
#include "ops/op_utils.h"

namespace tessera {
namespace {

// A defined, contiguous float32 or float64 parameter whose device type has the kernel.
template <class Fn>
bool fusable(const KernelSlot<Fn>& slot, const Tensor& p) {
  return p.defined() && slot.has(p.device().type()) && p.is_contiguous() &&
         (p.dtype() == kFloat32 || p.dtype() == kFloat64);
}

// `list` has one entry per parameter, each contiguous with the parameter's sizes, dtype and device.
void check_list(const char* op, const char* what, const TensorList& list, const TensorList& params) {
  TS_CHECK(list.size() == params.size(), ValueError, op, ": expected ", params.size(), " ", what, " (one per param), got ",
           list.size());
  for (size_t i = 0; i < list.size(); ++i) {
    const Tensor& t = list[i];
    const Tensor& p = params[i];
    check_defined(op, t, what);
    TS_CHECK(t.sizes() == p.sizes() && t.dtype() == p.dtype() && t.device() == p.device() && t.is_contiguous(),
             ValueError, op, ": ", what, "[", i, "] must be a contiguous ", dtype_name(p.dtype()), " tensor of shape ",
             p.sizes(), " on ", p.device().str(), " like params[", i, "], got a ",
             t.is_contiguous() ? "" : "non-contiguous ", dtype_name(t.dtype()), " tensor of shape ", t.sizes(), " on ",
             t.device().str());
  }
}

void check_params(const char* op, const TensorList& params) {
  for (size_t i = 0; i < params.size(); ++i) {
    check_defined(op, params[i], "params");
    TS_CHECK(params[i].device() == params[0].device(), DeviceError, op,
             ": expected all params on one device, got params[0] on ", params[0].device().str(), " and params[", i,
             "] on ", params[i].device().str());
    check_writable(op, params[i]);
  }
}

void bump_versions(const TensorList& tensors) {
  for (const Tensor& t : tensors) t.impl()->bump_version();
}

}  // namespace

bool fused_sgd_supported(const Tensor& p) { return fusable(sgd_kernel, p); }
bool fused_adam_supported(const Tensor& p) { return fusable(adam_kernel, p); }

void fused_sgd_(const TensorList& params, const TensorList& grads, const TensorList& momentum_buffers,
                const std::vector<uint8_t>& new_buffer, const SGDKernelParams& p) {
  const char* op = op_name(OpId::_fused_sgd_);
  OpScope scope(OpId::_fused_sgd_, params);
  if (params.empty()) return;
  check_params(op, params);
  check_list(op, "grads", grads, params);
  if (p.momentum != 0) {
    check_list(op, "momentum_buffers", momentum_buffers, params);
    TS_CHECK(new_buffer.size() == params.size(), ValueError, op, ": expected ", params.size(),
             " new-buffer flags, got ", new_buffer.size());
  } else {
    TS_CHECK(momentum_buffers.empty(), ValueError, op, ": momentum is 0 but ", momentum_buffers.size(),
             " momentum buffers were given");
  }
  {
    TensorList written = params;
    written.insert(written.end(), momentum_buffers.begin(), momentum_buffers.end());
    refuse_untracked_inplace(op, written, grads);
  }
  sgd_kernel(params[0].device(), params, grads, momentum_buffers, new_buffer, p);
  bump_versions(params);
  bump_versions(momentum_buffers);
}

void fused_adam_(const TensorList& params, const TensorList& grads, const TensorList& exp_avgs,
                 const TensorList& exp_avg_sqs, const TensorList& max_exp_avg_sqs, const std::vector<int64_t>& steps,
                 const AdamKernelParams& p) {
  const char* op = op_name(OpId::_fused_adam_);
  OpScope scope(OpId::_fused_adam_, params);
  if (params.empty()) return;
  check_params(op, params);
  check_list(op, "grads", grads, params);
  check_list(op, "exp_avgs", exp_avgs, params);
  check_list(op, "exp_avg_sqs", exp_avg_sqs, params);
  if (p.amsgrad) check_list(op, "max_exp_avg_sqs", max_exp_avg_sqs, params);
  TS_CHECK(steps.size() == params.size(), ValueError, op, ": expected ", params.size(), " step counts, got ",
           steps.size());
  for (size_t i = 0; i < steps.size(); ++i)
    TS_CHECK(steps[i] >= 1, ValueError, op, ": steps[", i, "] must be at least 1 (the count after this step), got ",
             steps[i]);
  {
    TensorList written = params;
    for (const TensorList* t : {&exp_avgs, &exp_avg_sqs, &max_exp_avg_sqs}) written.insert(written.end(), t->begin(), t->end());
    refuse_untracked_inplace(op, written, grads);
  }
  adam_kernel(params[0].device(), params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, p);
  for (const TensorList* t : {&params, &exp_avgs, &exp_avg_sqs, &max_exp_avg_sqs}) bump_versions(*t);
}

}  // namespace tessera
