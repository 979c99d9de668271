// Kernel slots of the convolution and pooling family ((N, C, H, W) sizes, any memory order).
//
// Every convolution kernel works in the terms of one conv2d, described by ConvGeometry: an "image"
// (N, C_in, H, W), a weight (C_out, C_in / groups, KH, KW) and the conv2d output (N, C_out, OH, OW).
//   conv2d_forward_kernel        image, weight        -> output             (conv2d)
//   conv2d_input_backward_kernel output-shaped grad   -> image-shaped result (conv2d's input gradient
//                                                        = conv_transpose2d's forward)
//   conv2d_weight_backward_kernel output grad, image  -> weight-shaped result
// conv_transpose2d(x, w) is conv2d_input_backward of the conv2d whose output is x, so all three ops
// and their derivatives share one geometry and one im2col / col2im implementation.
//
// Invariants the meta functions (ops/conv.cpp, ops/pool.cpp) guarantee before calling a slot:
//  - all tensors are on one device, with one floating dtype, 4-D (bias 1-D), sizes consistent with
//    the geometry; inputs may have any strides; results are freshly allocated and dense, either
//    row-major contiguous or channels-last (Note [Channels-last outputs] in ops/op_utils.h); a kernel
//    that computes in one layout writes the other through a copy.
//  - the geometry's output sizes follow from its input sizes by the conv / pooling formula.
//  - a bias argument may be undefined (no bias).
#pragma once
#include "ops/kernel_slot.h"
#include "tessera/tensor.h"

namespace tessera {

struct ConvGeometry {
  int64_t batch = 0, groups = 1;
  int64_t in_channels = 0, in_h = 0, in_w = 0;     // the image side
  int64_t out_channels = 0, out_h = 0, out_w = 0;  // the conv2d output side
  int64_t kernel_h = 1, kernel_w = 1;
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_h = 0, pad_w = 0;
  int64_t dil_h = 1, dil_w = 1;
};

// out (N, C_out, OH, OW) = conv2d(x (N, C_in, H, W), w (C_out, C_in/G, KH, KW)) + bias (C_out).
using Conv2dForwardFn = void(const Tensor& out, const Tensor& x, const Tensor& w, const Tensor& bias,
                             const ConvGeometry& g);
// out (N, C_in, H, W) = the adjoint of conv2d applied to grad (N, C_out, OH, OW), plus bias (C_in).
using Conv2dInputBackwardFn = void(const Tensor& out, const Tensor& grad, const Tensor& w, const Tensor& bias,
                                   const ConvGeometry& g);
// out (C_out, C_in/G, KH, KW) = sum over the batch of grad (N, C_out, OH, OW) against x's patches.
using Conv2dWeightBackwardFn = void(const Tensor& out, const Tensor& grad, const Tensor& x, const ConvGeometry& g);

extern KernelSlot<Conv2dForwardFn> conv2d_forward_kernel;
extern KernelSlot<Conv2dInputBackwardFn> conv2d_input_backward_kernel;
extern KernelSlot<Conv2dWeightBackwardFn> conv2d_weight_backward_kernel;

// Pooling over the (H, W) planes of a (N, C, H, W) tensor, seen as N*C independent planes.
// Window (oh, ow) starts at (oh * stride - pad, ow * stride - pad) and spans kernel taps spaced by
// dilation (max pooling; average pooling uses dilation 1).
struct PoolGeometry {
  int64_t planes = 0;  // N * C
  int64_t in_h = 0, in_w = 0, out_h = 0, out_w = 0;
  int64_t kernel_h = 1, kernel_w = 1;
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_h = 0, pad_w = 0;
  int64_t dil_h = 1, dil_w = 1;
  bool count_include_pad = true;  // average pooling only
};

// out, indices (int64, flat h * W + w within the plane) = max over each window; NaN wins.
using MaxPool2dFn = void(const Tensor& out, const Tensor& indices, const Tensor& x, const PoolGeometry& g);
// out (input-shaped) = zeros with grad scattered (added) to the positions in indices.
using MaxPool2dBackwardFn = void(const Tensor& out, const Tensor& grad, const Tensor& indices, const PoolGeometry& g);
// out = window sums divided by PyTorch's divisor (count_include_pad, windows clipped at the padding).
using AvgPool2dFn = void(const Tensor& out, const Tensor& x, const PoolGeometry& g);
// out (input-shaped) = the adjoint of avg_pool2d applied to grad.
using AvgPool2dBackwardFn = void(const Tensor& out, const Tensor& grad, const PoolGeometry& g);
// Adaptive average pooling: window o spans [floor(o * I / O), ceil((o + 1) * I / O)); kernel, stride
// and padding of the geometry are unused.
using AdaptiveAvgPool2dFn = void(const Tensor& out, const Tensor& x, const PoolGeometry& g);
using AdaptiveAvgPool2dBackwardFn = void(const Tensor& out, const Tensor& grad, const PoolGeometry& g);

extern KernelSlot<MaxPool2dFn> max_pool2d_kernel;
extern KernelSlot<MaxPool2dBackwardFn> max_pool2d_backward_kernel;
extern KernelSlot<AvgPool2dFn> avg_pool2d_kernel;
extern KernelSlot<AvgPool2dBackwardFn> avg_pool2d_backward_kernel;
extern KernelSlot<AdaptiveAvgPool2dFn> adaptive_avg_pool2d_kernel;
extern KernelSlot<AdaptiveAvgPool2dBackwardFn> adaptive_avg_pool2d_backward_kernel;

}  // namespace tessera
