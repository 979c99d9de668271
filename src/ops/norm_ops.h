// The fused row-normalization ops, as PyTorch's native_layer_norm / native_layer_norm_backward and
// _fused_rms_norm (here native_rms_norm) with its backward. nn::functional::layer_norm and rms_norm
// call the forward ops; autograd/derivatives/norm.cpp calls the backward ops. Not part of the public
// API. The input x (*, normalized_shape) is normalized over its trailing normalized_shape dims
// (Note [Norm rows] in ops/norm_kernel.h); weight and bias have normalized_shape and are cast to x's
// dtype where they differ. mean and rstd have x's leading dims followed by ones (PyTorch's shape),
// float32 for 16-bit and float32 inputs, float64 for float64 inputs.
#pragma once
#include <array>
#include <optional>
#include <tuple>

#include "tessera/functions.h"

namespace tessera {

// -> (y, mean, rstd). weight and bias may be undefined.
std::tuple<Tensor, Tensor, Tensor> native_layer_norm(const Tensor& x, const Shape& normalized_shape,
                                                     const Tensor& weight, const Tensor& bias, double eps);

// -> (dx, dweight, dbias); each is computed only where output_mask says so (undefined otherwise, and
// dweight / dbias always undefined without weight / bias). Not recorded by autograd: the derivative
// of native_layer_norm uses a composite formula when the backward must be differentiable.
std::tuple<Tensor, Tensor, Tensor> native_layer_norm_backward(const Tensor& grad_out, const Tensor& x,
                                                              const Shape& normalized_shape, const Tensor& mean,
                                                              const Tensor& rstd, const Tensor& weight,
                                                              const Tensor& bias, std::array<bool, 3> output_mask);

// The residual add fused with layer norm (Note [Add + layer norm] in ops/norm_kernel.h): sum = x +
// residual (their promotion; same sizes, no broadcasting) and y = layer_norm(sum) in one pass. y is of
// sum's dtype, or of y_dtype when given (rounded once from the float32 result; autocast asks for its
// low dtype, Note [Mixed add + layer norm]). -> (sum, y, mean, rstd). Records "native_add_layer_norm"
// with inputs {x, residual, weight, bias}, outputs {sum, y}, attrs.tensors = {mean, rstd, weight, bias}.
std::tuple<Tensor, Tensor, Tensor, Tensor> native_add_layer_norm(const Tensor& x, const Tensor& residual,
                                                                 const Shape& normalized_shape, const Tensor& weight,
                                                                 const Tensor& bias, double eps,
                                                                 std::optional<DType> y_dtype = std::nullopt);

// -> (dsum, dsum_low, dweight, dbias): dsum = grad_sum + the layer norm backward of grad_y over the
// saved sum (the gradient of both x and residual), in sum's dtype; dsum_low the same rounded to
// low_dtype (the gradient of an input of that dtype; one pass with dsum, Note [Mixed add + layer
// norm]). grad_sum may be undefined (no gradient reached sum). output_mask asks for dsum, dsum_low
// (only with low_dtype), dweight, dbias.
std::tuple<Tensor, Tensor, Tensor, Tensor> native_add_layer_norm_backward(
    const Tensor& grad_y, const Tensor& grad_sum, const Tensor& sum, const Shape& normalized_shape, const Tensor& mean,
    const Tensor& rstd, const Tensor& weight, const Tensor& bias, std::array<bool, 4> output_mask,
    std::optional<DType> low_dtype = std::nullopt);

// RMS norm: y = x * rstd * weight with rstd = 1 / sqrt(mean(x^2) + eps). -> (y, rstd).
std::tuple<Tensor, Tensor> native_rms_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight,
                                           double eps);

// -> (dx, dweight), as native_layer_norm_backward.
std::tuple<Tensor, Tensor> native_rms_norm_backward(const Tensor& grad_out, const Tensor& x,
                                                    const Shape& normalized_shape, const Tensor& rstd,
                                                    const Tensor& weight, std::array<bool, 2> output_mask);

}  // namespace tessera
