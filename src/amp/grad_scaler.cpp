// GradScaler (include/tessera/amp.h): PyTorch's torch.amp.GradScaler.
//
// Per iteration: scale(loss) multiplies by the scale (a float32 0-dim tensor on the loss's device,
// made at the first call); unscale_ (explicit, or inside step) runs the fused
// _amp_foreach_non_finite_check_and_unscale_ once per device over all of an optimizer's gradients,
// with inv_scale = 1 / scale computed on the device in float64, and keeps one found_inf flag per
// device; step() reads those flags (the one host read of the iteration) and steps the optimizer only
// when all are 0; update() folds every optimizer's flags into one on the scale's device and runs
// _amp_update_scale_ there, then forgets the per-optimizer state.
//
// The optimizer side is in the header (the optimizer layer sits above amp): it passes the
// optimizer's address as a key and its parameters here.
#include <utility>

#include "ops/amp_ops.h"
#include "tessera/amp.h"
#include "tessera/autograd.h"
#include "tessera/functions.h"

namespace tessera::amp {

GradScaler::GradScaler(GradScalerOptions o)
    : enabled_(o.enabled),
      init_scale_(o.init_scale),
      growth_factor_(o.growth_factor),
      backoff_factor_(o.backoff_factor),
      growth_interval_(o.growth_interval) {
  if (!enabled_) return;
  TS_CHECK(o.growth_factor > 1.0, ValueError, "GradScaler: the growth factor must be > 1.0, got ", o.growth_factor);
  TS_CHECK(o.backoff_factor < 1.0, ValueError, "GradScaler: the backoff factor must be < 1.0, got ",
           o.backoff_factor);
  TS_CHECK(o.growth_interval > 0, ValueError, "GradScaler: growth_interval must be a positive integer, got ",
           o.growth_interval);
  TS_CHECK(o.init_scale > 0, ValueError, "GradScaler: init_scale must be positive, got ", o.init_scale);
}

void GradScaler::check_scale(const char* fn) const {
  TS_CHECK(scale_.defined(), ValueError, "GradScaler: attempted ", fn,
           " but the scale is not set. This may indicate your script did not use scaler.scale(loss or outputs) "
           "earlier in the iteration.");
}

Tensor GradScaler::scale(const Tensor& outputs) {
  if (!enabled_) return outputs;
  TS_CHECK(outputs.defined(), ValueError, "GradScaler.scale: got an undefined tensor");
  if (!scale_.defined()) {
    NoGradGuard no_grad;
    scale_ = full({}, init_scale_, TensorOptions(kFloat32, outputs.device()));
    growth_tracker_ = full({}, init_growth_tracker_, TensorOptions(kInt32, outputs.device()));
  }
  Tensor s = scale_.device() == outputs.device() ? scale_ : scale_.to(outputs.device(), /*non_blocking=*/true);
  return outputs * s;
}

std::vector<Tensor> GradScaler::scale(const std::vector<Tensor>& outputs) {
  if (!enabled_) return outputs;
  std::vector<Tensor> out;
  out.reserve(outputs.size());
  for (const Tensor& t : outputs) out.push_back(scale(t));
  return out;
}

GradScaler::PerOptimizer& GradScaler::state_of(const void* key) {
  for (auto& [k, st] : per_optimizer_)
    if (k == key) return st;
  per_optimizer_.emplace_back(key, PerOptimizer{});
  return per_optimizer_.back().second;
}

void GradScaler::unscale_params(const void* key, const std::vector<Tensor>& params) {
  check_scale("unscale_");
  PerOptimizer& st = state_of(key);
  TS_CHECK(st.stage != Stage::Unscaled, ValueError,
           "GradScaler.unscale_: unscale_() has already been called on this optimizer since the last update().");
  TS_CHECK(st.stage != Stage::Stepped, ValueError,
           "GradScaler.unscale_: unscale_() is being called after step().");
  NoGradGuard no_grad;
  // Gradients grouped by device: one fused call (a few launches) per device.
  std::vector<std::pair<Device, std::vector<Tensor>>> groups;
  for (const Tensor& p : params) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    TS_CHECK(g.dtype() != kFloat16, ValueError,
             "GradScaler.unscale_: attempting to unscale FP16 gradients (keep the parameters in float32 and let "
             "autocast cast them)");
    auto it = groups.begin();
    while (it != groups.end() && !(it->first == g.device())) ++it;
    if (it == groups.end()) {
      groups.emplace_back(g.device(), std::vector<Tensor>{});
      it = groups.end() - 1;
    }
    it->second.push_back(g);
  }
  // 1 / scale in float64, rounded to float32, on the scale's device: no host read.
  const Tensor inv_scale = scale_.to(kFloat64).reciprocal().to(kFloat32);
  st.found_inf_per_device.clear();
  for (auto& [device, grads] : groups) {
    Tensor found_inf = zeros({}, TensorOptions(kFloat32, device));
    Tensor inv = inv_scale.device() == device ? inv_scale : inv_scale.to(device, /*non_blocking=*/true);
    _amp_foreach_non_finite_check_and_unscale_(grads, found_inf, inv);
    st.found_inf_per_device.emplace_back(device, found_inf);
  }
  st.stage = Stage::Unscaled;
}

bool GradScaler::prepare_step(const void* key, const std::vector<Tensor>& params) {
  PerOptimizer* st = &state_of(key);
  TS_CHECK(st->stage != Stage::Stepped, ValueError,
           "GradScaler.step: step() has already been called since the last update().");
  if (st->stage == Stage::Ready) {
    unscale_params(key, params);
    st = &state_of(key);
  }
  TS_CHECK(!st->found_inf_per_device.empty(), ValueError,
           "GradScaler.step: no inf checks were recorded for this optimizer (none of its parameters has a "
           "gradient).");
  double found = 0;
  for (auto& [device, f] : st->found_inf_per_device) found += f.item<double>();
  st->stage = Stage::Stepped;
  return found == 0;
}

void GradScaler::update(std::optional<double> new_scale) {
  if (!enabled_) return;
  check_scale("update");
  NoGradGuard no_grad;
  if (new_scale) {
    scale_.fill_(*new_scale);
  } else {
    Tensor combined;
    for (auto& [key, st] : per_optimizer_) {
      for (auto& [device, f] : st.found_inf_per_device) {
        Tensor here = f.device() == scale_.device() ? f : f.to(scale_.device(), /*non_blocking=*/true);
        combined = combined.defined() ? combined + here : here;
      }
    }
    TS_CHECK(combined.defined(), ValueError, "GradScaler.update: no inf checks were recorded prior to update().");
    _amp_update_scale_(scale_, growth_tracker_, combined, growth_factor_, backoff_factor_, growth_interval_);
  }
  per_optimizer_.clear();
}

double GradScaler::get_scale() const {
  if (!enabled_) return 1.0;
  return scale_.defined() ? scale_.item<double>() : init_scale_;
}

int64_t GradScaler::growth_tracker() const {
  return growth_tracker_.defined() ? growth_tracker_.item<int64_t>() : init_growth_tracker_;
}

std::map<std::string, double> GradScaler::state_dict() const {
  if (!enabled_) return {};
  return {{"scale", get_scale()},
          {"growth_factor", growth_factor_},
          {"backoff_factor", backoff_factor_},
          {"growth_interval", static_cast<double>(growth_interval_)},
          {"_growth_tracker", static_cast<double>(growth_tracker())}};
}

void GradScaler::load_state_dict(const std::map<std::string, double>& state) {
  if (!enabled_) return;
  TS_CHECK(!state.empty(), ValueError,
           "GradScaler.load_state_dict: the source state dict is empty, possibly because it was saved from a "
           "disabled instance of GradScaler.");
  auto get = [&](const char* key) {
    auto it = state.find(key);
    TS_CHECK(it != state.end(), ValueError, "GradScaler.load_state_dict: the state dict has no '", key, "'");
    return it->second;
  };
  init_scale_ = get("scale");
  growth_factor_ = get("growth_factor");
  backoff_factor_ = get("backoff_factor");
  growth_interval_ = static_cast<int64_t>(get("growth_interval"));
  init_growth_tracker_ = static_cast<int64_t>(get("_growth_tracker"));
  NoGradGuard no_grad;
  if (scale_.defined()) scale_.fill_(init_scale_);
  if (growth_tracker_.defined()) growth_tracker_.fill_(init_growth_tracker_);
}

}  // namespace tessera::amp
