// nn::utils: gradient clipping over a list of parameters, as torch.nn.utils.
#pragma once
#include <vector>

#include "tessera/tensor.h"

namespace tessera::nn::utils {

// Scales every defined .grad() in place by min(1, max_norm / (total_norm + 1e-6)), where total_norm is
// the norm_type-norm of all gradients together (INFINITY: the largest |g|). Returns total_norm (a
// scalar tensor, float32 or the gradients' dtype if wider; 0 when no parameter has a gradient).
// error_if_nonfinite: ValueError when total_norm is NaN or infinite (the gradients are left as they are).
Tensor clip_grad_norm_(const std::vector<Tensor>& parameters, double max_norm, double norm_type = 2.0,
                       bool error_if_nonfinite = false);
// Clamps every defined .grad() in place to [-clip_value, clip_value].
void clip_grad_value_(const std::vector<Tensor>& parameters, double clip_value);

}  // namespace tessera::nn::utils
