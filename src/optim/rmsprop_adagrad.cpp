// RMSprop (centered, momentum) and Adagrad (lr_decay, initial accumulator), as torch.optim's
// single-tensor algorithms, written with tessera ops: they run on any device that has the ops, and
// their per-op rounding is PyTorch's.
#include <cmath>

#include "optim/optim_common.h"
#include "tessera/cuda_graph.h"
#include "tessera/functions.h"
#include "tessera/optim/optimizers.h"

namespace tessera::optim {

// ---- RMSprop ----------------------------------------------------------------------------------------

std::vector<OptionRef> RMSpropOptions::refs() {
  return {detail::number("lr", lr),
          detail::number("alpha", alpha),
          detail::number("eps", eps),
          detail::number("weight_decay", weight_decay),
          detail::number("momentum", momentum),
          detail::flag("centered", centered),
          detail::flag("maximize", maximize)};
}

void RMSpropOptions::validate(const char* opt) const {
  TS_CHECK(lr >= 0, ValueError, opt, ": invalid learning rate: ", lr, " (expected lr >= 0)");
  TS_CHECK(eps >= 0, ValueError, opt, ": invalid epsilon value: ", eps, " (expected eps >= 0)");
  TS_CHECK(momentum >= 0, ValueError, opt, ": invalid momentum value: ", momentum, " (expected momentum >= 0)");
  TS_CHECK(weight_decay >= 0, ValueError, opt, ": invalid weight_decay value: ", weight_decay,
           " (expected weight_decay >= 0)");
  TS_CHECK(alpha >= 0, ValueError, opt, ": invalid alpha value: ", alpha, " (expected alpha >= 0)");
}

RMSprop::RMSprop(std::vector<Tensor> params, RMSpropOptions options)
    : OptimizerOf("RMSprop", /*counts_steps=*/true, one_group(std::move(params), options), options) {}
RMSprop::RMSprop(std::vector<ParamGroup> groups, RMSpropOptions defaults)
    : OptimizerOf("RMSprop", /*counts_steps=*/true, std::move(groups), defaults) {}

void RMSprop::step_group(size_t group) {
  const RMSpropOptions& o = options_[group];
  for (auto& e : detail::params_with_grad(name(), params_[group])) {
    ParamState& st = state_[group][e.index];
    auto buffer = [&](const char* key) -> Tensor& {
      auto it = st.buffers.find(key);
      if (it == st.buffers.end()) it = st.buffers.emplace(key, zeros_like(e.param)).first;
      return it->second;
    };
    if (!st.initialized) {
      st.initialized = true;
      st.step = 0;
    }
    st.step += 1;
    Tensor param = e.param;
    Tensor g = o.maximize ? e.grad.neg() : e.grad;
    if (o.weight_decay != 0) g = g.add(param, o.weight_decay);
    Tensor& square_avg = buffer("square_avg");
    square_avg.mul_(o.alpha).addcmul_(g, g, 1 - o.alpha);
    Tensor avg;
    if (o.centered) {
      Tensor& grad_avg = buffer("grad_avg");
      grad_avg.mul_(o.alpha).add_(g, 1 - o.alpha);
      avg = square_avg.addcmul(grad_avg, grad_avg, -1).sqrt_();
    } else {
      avg = square_avg.sqrt();
    }
    avg.add_(o.eps);
    if (o.momentum > 0) {
      Tensor& buf = buffer("momentum_buffer");
      buf.mul_(o.momentum).addcdiv_(g, avg);
      param.add_(buf, -o.lr);
    } else {
      param.addcdiv_(g, avg, -o.lr);
    }
  }
}

// ---- Adagrad ----------------------------------------------------------------------------------------

std::vector<OptionRef> AdagradOptions::refs() {
  return {detail::number("lr", lr),
          detail::number("lr_decay", lr_decay),
          detail::number("weight_decay", weight_decay),
          detail::number("initial_accumulator_value", initial_accumulator_value),
          detail::number("eps", eps),
          detail::flag("maximize", maximize)};
}

void AdagradOptions::validate(const char* opt) const {
  TS_CHECK(lr >= 0, ValueError, opt, ": invalid learning rate: ", lr, " (expected lr >= 0)");
  TS_CHECK(lr_decay >= 0, ValueError, opt, ": invalid lr_decay value: ", lr_decay, " (expected lr_decay >= 0)");
  TS_CHECK(weight_decay >= 0, ValueError, opt, ": invalid weight_decay value: ", weight_decay,
           " (expected weight_decay >= 0)");
  TS_CHECK(initial_accumulator_value >= 0, ValueError, opt, ": invalid initial_accumulator_value value: ",
           initial_accumulator_value, " (expected initial_accumulator_value >= 0)");
  TS_CHECK(eps >= 0, ValueError, opt, ": invalid epsilon value: ", eps, " (expected eps >= 0)");
}

Adagrad::Adagrad(std::vector<Tensor> params, AdagradOptions options)
    : OptimizerOf("Adagrad", /*counts_steps=*/true, one_group(std::move(params), options), options) {
  // The base constructor added the groups before this object's on_add_group existed.
  for (size_t g = 0; g < params_.size(); ++g) on_add_group(g);
}
Adagrad::Adagrad(std::vector<ParamGroup> groups, AdagradOptions defaults)
    : OptimizerOf("Adagrad", /*counts_steps=*/true, std::move(groups), defaults) {
  for (size_t g = 0; g < params_.size(); ++g) on_add_group(g);
}

void Adagrad::on_add_group(size_t group) {
  for (size_t i = 0; i < params_[group].size(); ++i) {
    ParamState& st = state_[group][i];
    if (st.initialized) continue;
    st.initialized = true;
    st.step = 0;
    st.buffers["sum"] = full_like(params_[group][i], options_[group].initial_accumulator_value);
  }
}

void Adagrad::step_group(size_t group) {
  const AdagradOptions& o = options_[group];
  if (o.lr_decay != 0)
    cuda::check_capturable("Adagrad.step", "with lr_decay its learning rate follows a host step count, which a "
                                           "replay would repeat from the captured step");
  for (auto& e : detail::params_with_grad(name(), params_[group])) {
    ParamState& st = state_[group][e.index];
    if (!st.initialized || !st.buffers.count("sum")) {  // e.g. a state dict that lacked it
      st.initialized = true;
      st.buffers["sum"] = full_like(e.param, o.initial_accumulator_value);
    }
    st.step += 1;
    Tensor param = e.param;
    Tensor g = o.maximize ? e.grad.neg() : e.grad;
    if (o.weight_decay != 0) g = g.add(param, o.weight_decay);
    const double clr = o.lr / (1 + (static_cast<double>(st.step) - 1) * o.lr_decay);
    Tensor& sum = st.buffers.at("sum");
    sum.addcmul_(g, g, 1);
    Tensor std = sum.sqrt().add_(o.eps);
    param.addcdiv_(g, std, -clr);
  }
}

}  // namespace tessera::optim
