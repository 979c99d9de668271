// Kernel slots of the row-normalization family: layer norm and RMS norm, forward and backward
// (ops/norm_ops.cpp holds the ops, autograd/derivatives/norm.cpp their derivatives).
//
// Note [Norm rows]: the op layer views the input as (M, N) rows, N = prod(normalized_shape), and
// hands the kernels:
//  - x (and dy for the backward) contiguous (M, N), one floating dtype T;
//  - weight / bias contiguous (N) of dtype T, or undefined (no affine term); RMS norm has no bias;
//  - mean / rstd contiguous (M) in the statistics dtype S: float32 for float16/bfloat16/float32
//    inputs, float64 for float64 inputs. RMS norm has no mean (undefined);
//  - outputs freshly allocated and contiguous: y and dx (M, N) of dtype T, dweight / dbias (N) of
//    dtype T. An undefined backward output is not wanted and is not computed.
// M or N may be 0: the kernels then write nothing but zeroed dweight / dbias (M == 0), and, when
// N == 0, NaN statistics (0/0, as PyTorch's mean of nothing).
//
// One slot pair serves both norms; NormParams::rms selects RMS norm (no mean subtraction, mean
// undefined, no bias). Statistics accumulate in S: mean = sum(x) / N, then the biased variance
// var = sum((x - mean)^2) / N over the row again (two passes: no E[x^2] - E[x]^2 cancellation), or
// ms = sum(x^2) / N for RMS norm; rstd = 1 / sqrt(var + eps). With xhat = (x - mean) * rstd (x * rstd
// for RMS norm) and g = dy * weight (dy without weight):
//   y       = xhat * weight + bias
//   dx      = rstd * (g - mean(g) - xhat * mean(g * xhat))      (RMS norm: without the mean(g) term)
//   dweight = sum over rows of dy * xhat,  dbias = sum over rows of dy
// dweight and dbias are reduced in S in an order that depends on M and N only (never on the thread
// count or on atomics), so they are deterministic.
#pragma once
#include <cstdint>

#include "ops/kernel_slot.h"
#include "tessera/tensor.h"

namespace tessera {

struct NormParams {
  int64_t rows = 0;  // M
  int64_t cols = 0;  // N
  double eps = 1e-5;
  bool rms = false;  // RMS norm: no mean subtraction, no mean output, no bias
};

// y (M, N) T; mean (M) S or undefined (RMS norm); rstd (M) S. weight, bias (N) T or undefined.
using NormForwardFn = void(const Tensor& y, const Tensor& mean, const Tensor& rstd, const Tensor& x,
                           const Tensor& weight, const Tensor& bias, const NormParams& p);
// dx (M, N) T, dweight (N) T, dbias (N) T, each undefined when not wanted (dbias always for RMS
// norm; dweight whenever weight is undefined); from dy, x (M, N) T, mean (M) S (undefined for RMS
// norm), rstd (M) S and weight (N) T or undefined.
using NormBackwardFn = void(const Tensor& dx, const Tensor& dweight, const Tensor& dbias, const Tensor& dy,
                            const Tensor& x, const Tensor& mean, const Tensor& rstd, const Tensor& weight,
                            const NormParams& p);

extern KernelSlot<NormForwardFn> norm_forward_kernel;
extern KernelSlot<NormBackwardFn> norm_backward_kernel;

// Note [Add + layer norm]: the residual add fused with layer norm (ops add_layer_norm). The forward
// reads x and residual once and writes sum = x + residual (rounded once to T, the value the unfused
// add stores) and y = layer_norm(sum): the statistics are those of the rounded sum, so the result is
// the unfused composition's. The backward is the layer norm backward of dy over the saved sum, plus
// the incoming gradient of sum (dsum, added in S before the one rounding of dx):
//   dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) + dsum
// Layer norm only (NormParams::rms is false). Same invariants as above; x, residual, dsum (M, N)
// contiguous; sum (M, N) T fresh.
// Note [Mixed add + layer norm]: the form autocast runs in a transformer block, where x is the block's
// 16-bit branch (the output of a matmul), residual and sum the float32 stream, and y the input of the
// next matmul. With T = float32, x and y may both be of a 16-bit dtype L (bfloat16 or float16): x is
// widened as it is read, y rounded once to L as it is stored (the value of the float32 y cast to L),
// and in the backward dy may be of L, and dx_low (L) receives dx rounded to L, the gradient of x (the
// float32 dx stays the residual's). One pass over the rows replaces four casts of (M, N) tensors per
// norm: the branch up to float32, y down to L, and their gradients back.
using AddNormForwardFn = void(const Tensor& sum, const Tensor& y, const Tensor& mean, const Tensor& rstd,
                              const Tensor& x, const Tensor& residual, const Tensor& weight, const Tensor& bias,
                              const NormParams& p);
// As NormBackwardFn with x the saved sum; dsum (M, N) T, or undefined (nothing added); dx (T) and
// dx_low (L, Note [Mixed add + layer norm]) each undefined when not wanted; dsum undefined when both are.
using AddNormBackwardFn = void(const Tensor& dx, const Tensor& dx_low, const Tensor& dweight, const Tensor& dbias,
                               const Tensor& dy, const Tensor& dsum, const Tensor& x, const Tensor& mean,
                               const Tensor& rstd, const Tensor& weight, const NormParams& p);

extern KernelSlot<AddNormForwardFn> add_norm_forward_kernel;
extern KernelSlot<AddNormBackwardFn> add_norm_backward_kernel;

}  // namespace tessera
