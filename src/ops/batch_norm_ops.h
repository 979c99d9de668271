// Batch normalization as ops of their own (PyTorch's native_batch_norm and native_batch_norm_backward),
// so that the forward runs one fused kernel per device (cuDNN on the GPU) and the backward one more.
// Not part of the public API: nn::functional::batch_norm is the user's entry point. Semantics, dtypes
// and layouts: ops/batch_norm_kernel.h.
#pragma once
#include <array>
#include <tuple>

#include "tessera/tensor.h"

namespace tessera {

// x (N, C, *) with 2 to 5 dims. weight, bias (C) may be undefined. running_mean / running_var (C) are
// both defined or both undefined; with training they are updated in place (momentum, unbiased
// variance), without it they normalize (and must be defined). Returns (y, save_mean, save_invstd):
// y has x's sizes, dtype and memory format (channels-last stays channels-last); the saved stats are
// (C) of the parameter dtype in training, empty (0) in evaluation.
// Records "native_batch_norm" for autograd: inputs {x, weight, bias}, output {y}.
std::tuple<Tensor, Tensor, Tensor> native_batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias,
                                                     const Tensor& running_mean, const Tensor& running_var,
                                                     bool training, double momentum, double eps);

// The gradients (dx, dweight, dbias) of native_batch_norm for grad_out (x's sizes). training: the
// saved batch statistics are used (and dx carries the statistics' own gradient); otherwise the running
// statistics. output_mask says which results are wanted (the others come back undefined). dweight /
// dbias come back even when weight is undefined (the gradient for a weight of ones / bias of zeros).
// `reserve` is the backend's saved state of the forward call (may be undefined).
// Not differentiable itself: the derivative of native_batch_norm uses a composite formula when a
// graph of the backward is wanted.
std::tuple<Tensor, Tensor, Tensor> native_batch_norm_backward(const Tensor& grad_out, const Tensor& x,
                                                              const Tensor& weight, const Tensor& running_mean,
                                                              const Tensor& running_var, const Tensor& save_mean,
                                                              const Tensor& save_invstd, bool training, double eps,
                                                              std::array<bool, 3> output_mask,
                                                              const Tensor& reserve = Tensor());

}  // namespace tessera
