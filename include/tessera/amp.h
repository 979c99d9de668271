// Mixed precision (torch.amp): the autocast scope guard and the gradient scaler.
//
//   ts::amp::GradScaler scaler;
//   {
//     ts::amp::autocast guard("cuda", ts::kFloat16);   // matmuls and convolutions in float16
//     loss = ts::nn::functional::cross_entropy(net(x), y);   // the loss in float32
//   }
//   scaler.scale(loss).backward();
//   scaler.unscale_(opt);                 // optional: before gradient clipping
//   scaler.step(opt);                     // skipped when a gradient is inf or NaN
//   scaler.update();
//
// Autocast: inside the guard, ops on the guard's device type follow PyTorch's policy table: matrix
// products, convolutions, linear and attention run in the low precision (float16 or bfloat16);
// softmax, log_softmax, layer / group / RMS norm, losses and overflow-prone math (exp, log, pow, sum,
// prod, cumsum, logsumexp, norm, ...) run in float32; ops with mixed float inputs (cat, stack,
// addcmul, ...) promote to the widest. Only floating inputs on that device type are cast, never
// float64. The state is per thread and per device type; guards nest (the inner one wins until it
// closes). Low-precision casts of the same leaf that requires grad (a weight) are cached until the
// outermost guard of the thread closes. The casts are differentiable: gradients of float32
// parameters are float32.
//
// GradScaler: as torch.amp.GradScaler. The scale lives on the device of the first scaled loss; the
// inf/NaN check and the unscaling of every gradient of a device run fused on that device, and the
// host reads the result once, in step().
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tessera/device.h"
#include "tessera/dtype.h"
#include "tessera/optim/optimizer.h"
#include "tessera/tensor.h"

namespace tessera::amp {

// ---- autocast -------------------------------------------------------------------------------------

class autocast {  // NOLINT(readability-identifier-naming): PyTorch's name
 public:
  // dtype defaults to bfloat16 on the CPU and float16 on CUDA. Only float16 and bfloat16 are
  // accepted (ValueError otherwise); the meta device has no autocast (ValueError).
  explicit autocast(Device device, std::optional<DType> dtype = std::nullopt, bool enabled = true,
                    bool cache_enabled = true);
  ~autocast();
  autocast(const autocast&) = delete;
  autocast& operator=(const autocast&) = delete;

 private:
  DeviceType type_;
  bool prev_enabled_;
  DType prev_dtype_;
  bool prev_cache_enabled_;
};

bool is_autocast_enabled(DeviceType type);
bool is_autocast_enabled(Device device);
// The dtype autocast casts to on `type` (the innermost guard's, or the default when none is open).
DType get_autocast_dtype(DeviceType type);
DType get_autocast_dtype(Device device);
bool is_autocast_cache_enabled();
void clear_autocast_cache();  // of this thread
size_t autocast_cache_size();   // entries in this thread's cast cache

enum class CastPolicy { LowerPrecision, Float32, Promote };
// The policy of an op name ("mm", "softmax", "cat", ...); nullopt for an op that runs as it is.
std::optional<CastPolicy> autocast_policy(const std::string& op);

// ---- GradScaler -----------------------------------------------------------------------------------

struct GradScalerOptions {
  double init_scale = 65536.0;
  double growth_factor = 2.0;   // > 1
  double backoff_factor = 0.5;  // < 1
  int64_t growth_interval = 2000;
  bool enabled = true;
};

class GradScaler {
 public:
  explicit GradScaler(GradScalerOptions options = {});
  GradScaler(const GradScaler&) = delete;
  GradScaler& operator=(const GradScaler&) = delete;

  // loss * scale (a float32 result for a 16-bit loss, as PyTorch); the loss itself when disabled.
  Tensor scale(const Tensor& outputs);
  std::vector<Tensor> scale(const std::vector<Tensor>& outputs);

  // Divides the optimizer's gradients by the scale in place and records, per device, whether any of
  // them is inf or NaN. At most once per optimizer between update()s (ValueError otherwise).
  void unscale_(optim::Optimizer& optimizer) {
    if (!enabled_) return;
    unscale_params(&optimizer, optimizer.parameters());
  }
  // Unscales (unless unscale_ ran already), then steps the optimizer unless a gradient was not
  // finite. Returns whether it stepped. Once per optimizer between update()s (ValueError otherwise).
  bool step(optim::Optimizer& optimizer) {
    if (!enabled_) {
      optimizer.step();
      return true;
    }
    if (!prepare_step(&optimizer, optimizer.parameters())) return false;
    optimizer.step();
    return true;
  }
  // Backs the scale off if any step of this iteration found an inf/NaN, grows it after
  // growth_interval clean iterations; or sets `new_scale`. Ends the iteration for every optimizer.
  void update(std::optional<double> new_scale = std::nullopt);

  double get_scale() const;  // reads the device (a sync); init_scale before the first scale()
  double get_growth_factor() const { return growth_factor_; }
  void set_growth_factor(double v) { growth_factor_ = v; }
  double get_backoff_factor() const { return backoff_factor_; }
  void set_backoff_factor(double v) { backoff_factor_ = v; }
  int64_t get_growth_interval() const { return growth_interval_; }
  void set_growth_interval(int64_t v) { growth_interval_ = v; }
  bool is_enabled() const { return enabled_; }
  // The scale tensor (float32, 0-dim) on its device; undefined before the first scale().
  const Tensor& scale_tensor() const { return scale_; }

  // PyTorch's keys: "scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker";
  // empty when disabled. load_state_dict of an empty dict raises ValueError.
  std::map<std::string, double> state_dict() const;
  void load_state_dict(const std::map<std::string, double>& state);

 private:
  enum class Stage { Ready, Unscaled, Stepped };
  struct PerOptimizer {
    Stage stage = Stage::Ready;
    std::vector<std::pair<Device, Tensor>> found_inf_per_device;  // float32 0-dim, 1 = not finite
  };
  void unscale_params(const void* key, const std::vector<Tensor>& params);
  bool prepare_step(const void* key, const std::vector<Tensor>& params);
  PerOptimizer& state_of(const void* key);
  void check_scale(const char* fn) const;
  int64_t growth_tracker() const;

  bool enabled_;
  double init_scale_, growth_factor_, backoff_factor_;
  int64_t growth_interval_;
  int64_t init_growth_tracker_ = 0;
  Tensor scale_;           // float32 0-dim
  Tensor growth_tracker_;  // int32 0-dim
  std::vector<std::pair<const void*, PerOptimizer>> per_optimizer_;
};

}  // namespace tessera::amp
