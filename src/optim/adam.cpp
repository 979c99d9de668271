// Adam and AdamW (amsgrad, maximize, L2 or decoupled weight decay), as torch.optim.Adam / AdamW.
//
// One implementation serves both: AdamW differs only in decaying the parameter by (1 - lr * wd)
// before the update instead of adding wd * param to the gradient. Fused path: one adam_kernel call
// per device over the group's contiguous float32/float64 parameters; composite path: PyTorch's
// _single_tensor_adam(w) with tessera ops. The step count is kept per parameter, as PyTorch's.
#include <cmath>

#include "ops/optim_ops.h"
#include "optim/optim_common.h"
#include "tessera/cuda_graph.h"
#include "tessera/functions.h"
#include "tessera/optim/optimizers.h"

namespace tessera::optim {

namespace {

constexpr const char* kExpAvg = "exp_avg";
constexpr const char* kExpAvgSq = "exp_avg_sq";
constexpr const char* kMaxExpAvgSq = "max_exp_avg_sq";

template <class Options>
std::vector<OptionRef> adam_refs(Options& o) {
  return {detail::number("lr", o.lr),
          detail::numbers("betas", o.betas.data(), 2),
          detail::number("eps", o.eps),
          detail::number("weight_decay", o.weight_decay),
          detail::flag("amsgrad", o.amsgrad),
          detail::flag("maximize", o.maximize),
          detail::flag("fused", o.fused)};
}

template <class Options>
void adam_validate(const Options& o, const char* opt) {
  TS_CHECK(o.lr >= 0, ValueError, opt, ": invalid learning rate: ", o.lr, " (expected lr >= 0)");
  TS_CHECK(o.eps >= 0, ValueError, opt, ": invalid epsilon value: ", o.eps, " (expected eps >= 0)");
  TS_CHECK(o.betas[0] >= 0 && o.betas[0] < 1, ValueError, opt, ": invalid beta parameter at index 0: ", o.betas[0],
           " (expected a value in [0, 1))");
  TS_CHECK(o.betas[1] >= 0 && o.betas[1] < 1, ValueError, opt, ": invalid beta parameter at index 1: ", o.betas[1],
           " (expected a value in [0, 1))");
  TS_CHECK(o.weight_decay >= 0, ValueError, opt, ": invalid weight_decay value: ", o.weight_decay,
           " (expected weight_decay >= 0)");
}

void adam_composite(Tensor param, const Tensor& grad, ParamState& st, const AdamKernelParams& o) {
  Tensor g = o.maximize ? grad.neg() : grad;
  const int64_t step = st.step;
  if (o.decoupled_weight_decay) param.mul_(1 - o.lr * o.weight_decay);
  else if (o.weight_decay != 0) g = g.add(param, o.weight_decay);
  Tensor& exp_avg = st.buffers.at(kExpAvg);
  Tensor& exp_avg_sq = st.buffers.at(kExpAvgSq);
  exp_avg.mul_(o.beta1).add_(g, 1 - o.beta1);
  exp_avg_sq.mul_(o.beta2).addcmul_(g, g, 1 - o.beta2);
  const double bias_correction1 = 1 - std::pow(o.beta1, static_cast<double>(step));
  const double bias_correction2 = 1 - std::pow(o.beta2, static_cast<double>(step));
  const double step_size = o.lr / bias_correction1;
  const double bias_correction2_sqrt = std::sqrt(bias_correction2);
  Tensor denom;
  if (o.amsgrad) {
    Tensor& vmax = st.buffers.at(kMaxExpAvgSq);
    vmax.copy_(maximum(vmax, exp_avg_sq));
    denom = vmax.sqrt().div(bias_correction2_sqrt).add_(o.eps);
  } else {
    denom = exp_avg_sq.sqrt().div(bias_correction2_sqrt).add_(o.eps);
  }
  param.addcdiv_(exp_avg, denom, -step_size);
}

// The group step of Adam and AdamW.
template <class Options>
void adam_step_group(const std::string& name, const std::vector<Tensor>& group_params, std::vector<ParamState>& states,
                     const Options& o, bool decoupled) {
  const AdamKernelParams kp{o.lr, o.betas[0], o.betas[1], o.eps, o.weight_decay, decoupled, o.amsgrad, o.maximize};
  // Before any state changes: a capture refused here leaves the optimizer as it was.
  cuda::check_capturable((name + ".step").c_str(),
                         "its step count and bias corrections are host numbers, which a replay would repeat from "
                         "the captured step (PyTorch's capturable=True keeps them on the device; tessera's Adam does "
                         "not have it yet): keep the optimizer step out of the graph");
  TensorList params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs;
  std::vector<int64_t> steps;
  std::vector<Device> devices;
  for (auto& e : detail::params_with_grad(name, group_params)) {
    ParamState& st = states[e.index];
    if (!st.initialized) {
      st.initialized = true;
      st.step = 0;
      st.buffers[kExpAvg] = zeros_like(e.param);
      st.buffers[kExpAvgSq] = zeros_like(e.param);
    }
    if (o.amsgrad && !st.buffers.count(kMaxExpAvgSq)) st.buffers[kMaxExpAvgSq] = zeros_like(e.param);
    st.step += 1;
    if (!(o.fused && fused_adam_supported(e.param))) {
      adam_composite(e.param, e.grad, st, kp);
      continue;
    }
    params.push_back(e.param);
    grads.push_back(e.grad.contiguous());
    exp_avgs.push_back(detail::contiguous_buffer(st, kExpAvg));
    exp_avg_sqs.push_back(detail::contiguous_buffer(st, kExpAvgSq));
    if (o.amsgrad) max_exp_avg_sqs.push_back(detail::contiguous_buffer(st, kMaxExpAvgSq));
    steps.push_back(st.step);
    devices.push_back(e.param.device());
  }
  for (const auto& idx : detail::by_device(devices)) {
    TensorList p, g, m, v, vmax;
    std::vector<int64_t> s;
    for (size_t i : idx) {
      p.push_back(params[i]);
      g.push_back(grads[i]);
      m.push_back(exp_avgs[i]);
      v.push_back(exp_avg_sqs[i]);
      if (o.amsgrad) vmax.push_back(max_exp_avg_sqs[i]);
      s.push_back(steps[i]);
    }
    fused_adam_(p, g, m, v, vmax, s, kp);
  }
}

// A loaded state must hold both moments (max_exp_avg_sq is created on demand).
void adam_after_load(const std::string& name, const std::vector<ParamState>& states) {
  for (size_t i = 0; i < states.size(); ++i) {
    if (!states[i].initialized) continue;
    for (const char* k : {kExpAvg, kExpAvgSq})
      TS_CHECK(states[i].buffers.count(k), ValueError, name, ": load_state_dict: the state of parameter ", i,
               " of its group has no '", k, "'");
  }
}

}  // namespace

std::vector<OptionRef> AdamOptions::refs() { return adam_refs(*this); }
void AdamOptions::validate(const char* opt) const { adam_validate(*this, opt); }
std::vector<OptionRef> AdamWOptions::refs() { return adam_refs(*this); }
void AdamWOptions::validate(const char* opt) const { adam_validate(*this, opt); }

Adam::Adam(std::vector<Tensor> params, AdamOptions options)
    : OptimizerOf("Adam", /*counts_steps=*/true, one_group(std::move(params), options), options) {}
Adam::Adam(std::vector<ParamGroup> groups, AdamOptions defaults)
    : OptimizerOf("Adam", /*counts_steps=*/true, std::move(groups), defaults) {}
void Adam::step_group(size_t group) {
  adam_step_group(name(), params_[group], state_[group], options_[group], /*decoupled=*/false);
}
void Adam::after_load(size_t group) { adam_after_load(name(), state_[group]); }

AdamW::AdamW(std::vector<Tensor> params, AdamWOptions options)
    : OptimizerOf("AdamW", /*counts_steps=*/true, one_group(std::move(params), options), options) {}
AdamW::AdamW(std::vector<ParamGroup> groups, AdamWOptions defaults)
    : OptimizerOf("AdamW", /*counts_steps=*/true, std::move(groups), defaults) {}
void AdamW::step_group(size_t group) {
  adam_step_group(name(), params_[group], state_[group], options_[group], /*decoupled=*/true);
}
void AdamW::after_load(size_t group) { adam_after_load(name(), state_[group]); }

}  // namespace tessera::optim
