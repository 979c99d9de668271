// The gradient scaler's fused ops (PyTorch's private torch._amp_* ops), used by src/amp.
#pragma once
#include <cstdint>
#include <vector>

#include "tessera/tensor.h"

namespace tessera {

// For every gradient: found_inf = 1 where an element is inf or NaN, then grad *= inv_scale in place.
// grads: floating tensors on one device (any layout; non-contiguous ones go through a contiguous
// copy); found_inf and inv_scale: float32 one-element tensors on that device. No host sync.
void _amp_foreach_non_finite_check_and_unscale_(const std::vector<Tensor>& grads, Tensor& found_inf,
                                                const Tensor& inv_scale);

// The scale's update on its device (ops/amp_kernel.h); returns `scale`. scale float32 and
// growth_tracker int32 (one element each), found_inf float32 one element, all on one device.
Tensor& _amp_update_scale_(Tensor& scale, Tensor& growth_tracker, const Tensor& found_inf, double growth_factor,
                           double backoff_factor, int64_t growth_interval);

}  // namespace tessera
