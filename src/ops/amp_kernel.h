// Kernel slots of the amp family: the fused parts of the gradient scaler (PyTorch's
// _amp_foreach_non_finite_check_and_unscale_ and _amp_update_scale_).
//
// Contracts (the ops in ops/amp_ops.cpp validate and prepare; kernels hold no checks of their own):
// - unscale: every grads[i] is contiguous, floating (float16, bfloat16, float32 or float64; the list
//   may mix them) and on one device with found_inf and inv_scale, which are float32 one-element
//   tensors. For every element g: found_inf = 1 if g is inf or NaN (found_inf is never cleared);
//   g = g * inv_scale computed in float (double for float64), rounded once, skipped when inv_scale is
//   exactly 1. No host synchronization: the host reads found_inf later, once. Empty tensors take no
//   work. A backend may run the whole list in a few launches (multi-tensor apply).
// - update_scale: scale float32 and growth_tracker int32, one element each, found_inf float32, all on
//   one device; on the device, without a host read:
//     found_inf != 0: scale *= backoff_factor, growth_tracker = 0;
//     else if growth_tracker + 1 == growth_interval: scale *= growth_factor (kept only if finite,
//       computed in float), growth_tracker = 0;
//     else growth_tracker += 1.
#pragma once
#include <cstdint>

#include "ops/kernel_slot.h"
#include "tessera/tensor.h"

namespace tessera {

using AmpUnscaleKernelFn = void(const TensorList& grads, const Tensor& found_inf, const Tensor& inv_scale);
inline KernelSlot<AmpUnscaleKernelFn> amp_unscale_kernel("_amp_foreach_non_finite_check_and_unscale_");

using AmpUpdateScaleKernelFn = void(const Tensor& scale, const Tensor& growth_tracker, const Tensor& found_inf,
                                    double growth_factor, double backoff_factor, int64_t growth_interval);
inline KernelSlot<AmpUpdateScaleKernelFn> amp_update_scale_kernel("_amp_update_scale_");

}  // namespace tessera
