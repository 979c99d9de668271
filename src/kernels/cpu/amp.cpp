// CPU kernels of the amp family (ops/amp_kernel.h): the gradient scaler's inf/NaN check with the
// unscale fused into one pass over each gradient, and the scale update.
//
// The product is computed in float (double for float64) and rounded once, as the CUDA kernel and
// PyTorch's do; found_inf is only ever set, never cleared, so several calls (several optimizers,
// several dtypes) accumulate into one flag. Large gradients are split over OpenMP threads.
#include <cmath>
#include <cstdint>

#include "kernels/cpu/cpu_kernels.h"
#include "ops/amp_kernel.h"
#include "tensor/dispatch_dtype.h"

namespace tessera::cpu::inline TS_CPU_ISA {  // Note [ISA namespaces]
namespace {

constexpr int64_t kParallelGrain = 32768;

template <class T>
bool unscale_loop(T* __restrict g, int64_t n, acc_t<T> inv_scale) {
  using C = acc_t<T>;
  bool bad = false;
  const bool scale = inv_scale != C(1);
#pragma omp parallel for reduction(|| : bad) schedule(static) if (n >= kParallelGrain)
  for (int64_t i = 0; i < n; ++i) {
    const C v = static_cast<C>(g[i]);
    if (!std::isfinite(v)) bad = true;
    if (scale) g[i] = static_cast<T>(v * inv_scale);
  }
  return bad;
}

void unscale_cpu(const TensorList& grads, const Tensor& found_inf, const Tensor& inv_scale) {
  const float inv = *inv_scale.data_ptr<float>();
  bool bad = false;
  for (const Tensor& g : grads) {
    if (g.numel() == 0) continue;
    dispatch_floating(g.dtype(), "_amp_foreach_non_finite_check_and_unscale_", [&]<class T>(TypeTag<T>) {
      bad |= unscale_loop(g.data_ptr<T>(), g.numel(), static_cast<acc_t<T>>(inv));
    });
  }
  if (bad) *found_inf.data_ptr<float>() = 1.0f;
}

void update_scale_cpu(const Tensor& scale, const Tensor& growth_tracker, const Tensor& found_inf,
                      double growth_factor, double backoff_factor, int64_t growth_interval) {
  float* s = scale.data_ptr<float>();
  int32_t* tracker = growth_tracker.data_ptr<int32_t>();
  if (*found_inf.data_ptr<float>() != 0.0f) {
    *s = static_cast<float>(*s * backoff_factor);
    *tracker = 0;
    return;
  }
  const int64_t successful = static_cast<int64_t>(*tracker) + 1;
  if (successful == growth_interval) {
    const float grown = static_cast<float>(*s * growth_factor);
    if (std::isfinite(grown)) *s = grown;
    *tracker = 0;
  } else {
    *tracker = static_cast<int32_t>(successful);
  }
}

}  // namespace

void register_amp() {
  amp_unscale_kernel.set(DeviceType::CPU, &unscale_cpu);
  amp_update_scale_kernel.set(DeviceType::CPU, &update_scale_cpu);
}

}  // namespace tessera::cpu::TS_CPU_ISA
