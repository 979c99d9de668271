// Kernel slots of batch normalization (ops/batch_norm_ops.cpp holds the ops, kernels/cpu/batch_norm.cpp
// the reference kernel, kernels/cuda/batch_norm.cu the cuDNN one).
//
// x is (N, C, *) with 2 to 5 dims; a kernel sees it as (N, C, L), L = the product of the trailing dims,
// in one of two dense layouts (BatchNormShape::channels_last):
//   contiguous     element (n, c, l) at n * C * L + c * L + l      (NCHW and its 2-D / 3-D / 5-D kin)
//   channels-last  element (n, c, l) at n * L * C + l * C + c      (4-D NHWC, MemoryFormat::ChannelsLast)
// Per channel c, over the M = N * L values of that channel:
//   training:  mean_c = sum(x) / M,  var_c = sum((x - mean_c)^2) / M  (biased, two passes),
//              invstd_c = 1 / sqrt(var_c + eps);  save_mean = mean, save_invstd = invstd;
//              when running stats are given, in place (PyTorch's semantics, unbiased variance):
//                running_mean = (1 - momentum) * running_mean + momentum * mean_c
//                running_var  = (1 - momentum) * running_var  + momentum * var_c * M / (M - 1)
//   inference: mean_c = running_mean, invstd_c = 1 / sqrt(running_var + eps)
//   y = (x - mean_c) * invstd_c * weight_c + bias_c
// Backward, g = dy, xhat = (x - mean_c) * invstd_c, w = weight (1 when undefined):
//   dbias_c = sum(g),  dweight_c = sum(g * xhat)
//   training:  dx = w * invstd_c * (g - sum(g) / M - xhat * sum(g * xhat) / M)
//   eval:      dx = w * invstd_c * g          (mean / invstd are constants: the running stats)
//
// Invariants the ops guarantee before calling a slot:
//  - x is float16, bfloat16, float32 or float64; y / dx are freshly allocated with x's dtype, sizes and
//    layout; dy has been brought to x's layout; x and dy are dense in the layout the shape names.
//  - "parameter dtype" P = float32 for 16-bit x, x's dtype otherwise. weight, bias, running_mean,
//    running_var, save_mean, save_invstd, mean, invstd, dweight, dbias are 1-D (C), contiguous, of
//    dtype P. weight / bias may be undefined (affine=False: weight 1, bias 0); running_mean and
//    running_var are both defined or both undefined (training without running stats).
//  - dx, dweight, dbias may each be undefined: that result is not wanted.
//  - all tensors on one device; M may be 0 (empty batch) only in inference and backward; training with
//    M <= 1 gives NaN statistics (as PyTorch; nn::functional::batch_norm refuses it before).
#pragma once
#include "ops/kernel_slot.h"
#include "tessera/tensor.h"

namespace tessera {

struct BatchNormShape {
  int64_t n = 0, c = 0, l = 1;
  bool channels_last = false;
};

// y, save_mean, save_invstd <- batch statistics of x; running stats (if defined) updated in place.
// reserve: state a backend keeps for its backward (cuDNN's reserve space), left undefined by the CPU;
// the op saves it for the backward call of the same forward.
using BatchNormForwardTrainingFn = void(const Tensor& y, const Tensor& save_mean, const Tensor& save_invstd,
                                        Tensor& reserve, const Tensor& x, const Tensor& weight, const Tensor& bias,
                                        const Tensor& running_mean, const Tensor& running_var,
                                        const BatchNormShape& s, double momentum, double eps);
// y <- x normalized with the running statistics (both defined).
using BatchNormForwardInferenceFn = void(const Tensor& y, const Tensor& x, const Tensor& weight, const Tensor& bias,
                                         const Tensor& running_mean, const Tensor& running_var,
                                         const BatchNormShape& s, double eps);
// dx, dweight, dbias <- the gradients above. mean / invstd: the saved batch statistics when training,
// else running_mean and 1 / sqrt(running_var + eps) (computed by the op). reserve: the forward's (may
// be undefined, also when training; a kernel then works without it). eps: the forward's.
using BatchNormBackwardFn = void(const Tensor& dx, const Tensor& dweight, const Tensor& dbias, const Tensor& dy,
                                 const Tensor& x, const Tensor& weight, const Tensor& mean, const Tensor& invstd,
                                 const Tensor& reserve, const BatchNormShape& s, bool training, double eps);

extern KernelSlot<BatchNormForwardTrainingFn> batch_norm_forward_training_kernel;
extern KernelSlot<BatchNormForwardInferenceFn> batch_norm_forward_inference_kernel;
extern KernelSlot<BatchNormBackwardFn> batch_norm_backward_kernel;

}  // namespace tessera
