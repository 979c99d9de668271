// SGD with momentum, dampening, Nesterov momentum, weight decay and maximize, as torch.optim.SGD.
//
// Fused path: one _fused_sgd_ op (ops/optim_ops.h) per device over the group's contiguous float32/float64 parameters.
// Composite path (other dtypes, strided parameters, devices without the kernel, .fused = false):
// PyTorch's _single_tensor_sgd written with tessera ops. Both create the momentum buffer on a
// parameter's first step as a copy of the (decayed) gradient.
#include <cmath>

#include "ops/optim_ops.h"
#include "optim/optim_common.h"
#include "tessera/functions.h"
#include "tessera/optim/optimizers.h"

namespace tessera::optim {

std::vector<OptionRef> SGDOptions::refs() {
  return {detail::number("lr", lr),
          detail::number("momentum", momentum),
          detail::number("dampening", dampening),
          detail::number("weight_decay", weight_decay),
          detail::flag("nesterov", nesterov),
          detail::flag("maximize", maximize),
          detail::flag("fused", fused)};
}

void SGDOptions::validate(const char* opt) const {
  TS_CHECK(lr >= 0, ValueError, opt, ": invalid learning rate: ", lr, " (expected lr >= 0)");
  TS_CHECK(momentum >= 0, ValueError, opt, ": invalid momentum value: ", momentum, " (expected momentum >= 0)");
  TS_CHECK(weight_decay >= 0, ValueError, opt, ": invalid weight_decay value: ", weight_decay,
           " (expected weight_decay >= 0)");
  TS_CHECK(std::isfinite(dampening), ValueError, opt, ": invalid dampening value: ", dampening);
  TS_CHECK(!nesterov || (momentum > 0 && dampening == 0), ValueError, opt,
           ": Nesterov momentum requires a momentum and zero dampening (got momentum ", momentum, " and dampening ",
           dampening, ")");
}

SGD::SGD(std::vector<Tensor> params, SGDOptions options)
    : OptimizerOf("SGD", /*counts_steps=*/false, one_group(std::move(params), options), options) {}

SGD::SGD(std::vector<ParamGroup> groups, SGDOptions defaults)
    : OptimizerOf("SGD", /*counts_steps=*/false, std::move(groups), defaults) {}

namespace {

constexpr const char* kBuffer = "momentum_buffer";

void sgd_composite(Tensor param, const Tensor& grad, ParamState& st, const SGDOptions& o) {
  Tensor d = o.maximize ? grad.neg() : grad;
  if (o.weight_decay != 0) d = d.add(param, o.weight_decay);
  if (o.momentum != 0) {
    auto it = st.buffers.find(kBuffer);
    Tensor buf;
    if (it == st.buffers.end()) {
      buf = d.clone();
      st.buffers[kBuffer] = buf;
    } else {
      buf = it->second;
      buf.mul_(o.momentum).add_(d, 1 - o.dampening);
    }
    d = o.nesterov ? d.add(buf, o.momentum) : buf;
  }
  param.add_(d, -o.lr);
}

}  // namespace

void SGD::step_group(size_t group) {
  const SGDOptions& o = options_[group];
  const bool momentum = o.momentum != 0;
  TensorList params, grads, buffers;
  std::vector<uint8_t> fresh;
  std::vector<Device> devices;
  for (auto& e : detail::params_with_grad(name(), params_[group])) {
    ParamState& st = state_[group][e.index];
    st.initialized = true;
    if (!(o.fused && fused_sgd_supported(e.param))) {
      sgd_composite(e.param, e.grad, st, o);
      continue;
    }
    params.push_back(e.param);
    grads.push_back(e.grad.contiguous());
    devices.push_back(e.param.device());
    if (momentum) {
      const bool is_new = st.buffers.count(kBuffer) == 0;
      if (is_new) st.buffers[kBuffer] = empty_like(e.param);
      buffers.push_back(detail::contiguous_buffer(st, kBuffer));
      fresh.push_back(is_new ? 1 : 0);
    }
  }
  if (params.empty()) return;
  const SGDKernelParams kp{o.lr, o.momentum, o.dampening, o.weight_decay, o.nesterov, o.maximize};
  for (const auto& idx : detail::by_device(devices)) {
    TensorList p, g, b;
    std::vector<uint8_t> f;
    for (size_t i : idx) {
      p.push_back(params[i]);
      g.push_back(grads[i]);
      if (momentum) {
        b.push_back(buffers[i]);
        f.push_back(fresh[i]);
      }
    }
    fused_sgd_(p, g, b, f, kp);
  }
}

}  // namespace tessera::optim
