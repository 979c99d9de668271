// The foreach ops' internal entry, used by gradient clipping (src/nn/clip_grad.cpp). The public ops,
// _foreach_norm and _foreach_mul_, are declared in tessera/functions.h.
#pragma once
#include <vector>

#include "tessera/tensor.h"

namespace tessera {

// The norms of `tensors` (as _foreach_norm, same checks) as one tensor of shape (n) and dtype `acc`
// (float32 or float64), not rounded to each tensor's dtype: what a total norm is taken of, without a
// stack. Tensors on one device; an empty list gives an empty float tensor on the CPU.
Tensor foreach_norm_stacked(const std::vector<Tensor>& tensors, double ord, DType acc);

}  // namespace tessera
