// Kernel slots of the loss family: cross-entropy fused with log_softmax over the rows of logits.
//
// Per row i of logits x (M, C) with class-index target t_i, class weights w (C) (all 1 without
// weights), label smoothing ls, lse_i = log(sum_c exp(x_ic)):
//   loss_i = (1 - ls) * w[t_i] * (lse_i - x_i[t_i]) + (ls / C) * sum_c w[c] * (lse_i - x_ic)
// (the smoothing term only when ls > 0), and loss_i = 0 where t_i == ignore_index. This is PyTorch's
// cross_entropy with class-index targets before its reduction (nn/loss.cpp, which also divides a
// 'mean' by the sum of w[t_i] over the non-ignored rows). The gradient of loss_i, scaled by the
// incoming per-row gradient g_i, is, with p_ic = exp(x_ic - lse_i) and W = sum_c w[c]:
//   dx_ic = g_i * ((1 - ls) * w[t_i] * (p_ic - [c == t_i]) + (ls / C) * (W * p_ic - w[c])),
// 0 on ignored rows. The backward reads x once and writes dx once per element: nothing of size
// (M, C) is kept between forward and backward except the logits themselves.
//
// Invariants the ops (ops/loss_ops.cpp) guarantee before calling a slot:
//  - x is contiguous (M, C) of one floating dtype (float16, bfloat16, float32, float64); target is
//    contiguous int64 (M); M * C may exceed 2^31;
//  - loss and lse are contiguous (M) of the accumulation dtype: float64 for float64 logits, float32
//    otherwise; dx is contiguous (M, C) of x's dtype; grad is contiguous (M) of the loss dtype;
//  - weight is undefined (no class weights) or contiguous (C) of the loss dtype; weight_sum is a
//    0-dim tensor of the loss dtype holding sum(weight), defined only when weight is and ls > 0;
//  - 0 <= label_smoothing <= 1.
// Bad data: the forward raises IndexError "cross_entropy: Target <v> is out of bounds." for the
// first row (lowest index) whose target is neither ignore_index nor in [0, C), as the composite did.
// The CPU kernel checks directly; the CUDA kernel sets a device-side flag that the entry reads back
// at its end with one small copy and one stream synchronization (Note [Bad index flag] in
// kernels/cuda/index_common.cuh). The backward gets targets the forward already checked; a row with
// an out-of-range target gets a zero gradient there (never an out-of-bounds read).
#pragma once
#include <cstdint>

#include "ops/kernel_slot.h"
#include "tessera/tensor.h"

namespace tessera {

struct CrossEntropyParams {
  int64_t ignore_index = -100;
  double label_smoothing = 0.0;
  // Targets must lie in [0, classes); -1: [0, C). A row padded past its classes (Note [Padded logits
  // rows] in ops/fused_ops.cpp) passes its true class count, so that a target among the pad columns
  // still raises IndexError.
  int64_t classes = -1;
};

// loss (M), lse (M) <- x (M, C), target (M), weight (C) or undefined.
using CrossEntropyForwardFn = void(const Tensor& loss, const Tensor& lse, const Tensor& x, const Tensor& target,
                                   const Tensor& weight, const CrossEntropyParams& p);
// dx (M, C) <- grad (M), x (M, C), target (M), weight (C) or undefined, weight_sum () or undefined,
// lse (M) saved by the forward.
using CrossEntropyBackwardFn = void(const Tensor& dx, const Tensor& grad, const Tensor& x, const Tensor& target,
                                    const Tensor& weight, const Tensor& weight_sum, const Tensor& lse,
                                    const CrossEntropyParams& p);

extern KernelSlot<CrossEntropyForwardFn> cross_entropy_forward_kernel;
extern KernelSlot<CrossEntropyBackwardFn> cross_entropy_backward_kernel;

}  // namespace tessera
