// 1x1 convolutions as cuBLASLt GEMMs (conv_gemm.cu): the path the CUDA conv slots (conv.cu) try before
// cuDNN for a 1x1 kernel with padding 0, stride 1 and one group (any dilation: a 1x1 kernel has no taps
// to dilate). Each entry takes the slot's arguments (ops/conv_kernel.h) and returns false, having
// written nothing, where the path does not apply (the caller then runs cuDNN); the caller has checked
// the devices and made out's device current.
#pragma once
#include "ops/conv_kernel.h"
#include "tessera/tensor.h"

namespace tessera::cuda {

// Whether strides > 1 take the GEMM path too, through a gather of the strided positions (conv_gemm.cu
// says why they do not).
inline constexpr bool kConv1x1GemmStrided = false;

// out (N, K, OH, OW) = conv2d(x (N, C, H, W), w (K, C, 1, 1)) + bias (K).
bool conv1x1_forward_gemm(const Tensor& out, const Tensor& x, const Tensor& w, const Tensor& bias,
                          const ConvGeometry& g);
// out (N, C, H, W) = conv2d's input gradient of grad (N, K, gh, gw) + bias (C).
bool conv1x1_input_backward_gemm(const Tensor& out, const Tensor& grad, const Tensor& w, const Tensor& bias,
                                 const ConvGeometry& g);
// out (K, C, 1, 1) = conv2d's weight gradient of grad (N, K, gh, gw) against x (N, C, H, W).
bool conv1x1_weight_backward_gemm(const Tensor& out, const Tensor& grad, const Tensor& x, const ConvGeometry& g);

}  // namespace tessera::cuda
