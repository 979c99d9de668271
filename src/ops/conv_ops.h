// The backward ops of the convolution and pooling family, as PyTorch's convolution_backward,
// max_pool2d_with_indices_backward, avg_pool2d_backward and _adaptive_avg_pool2d_backward. They are
// ops of their own (meta function, kernel, autograd record) so that the derivatives in
// autograd/derivatives/conv.cpp run through kernels made for them and are differentiable again.
// Not part of the public API; every tensor here is 4-D (N, C, H, W).
#pragma once
#include "tessera/functions.h"

namespace tessera {

// conv2d's weight gradient: grad (N, C_out, OH, OW) against x (N, C_in, H, W) ->
// (C_out, C_in / groups, KH, KW). Bilinear in (grad, x).
Tensor conv2d_backward_weight(const Tensor& grad, const Tensor& x, IntPair kernel_size, IntPair stride,
                              IntPair padding, IntPair dilation, int64_t groups);

// The gradient of max_pool2d_with_indices: zeros of input_sizes with grad (N, C, OH, OW) added at the
// flat plane positions `indices` (int64, grad's shape). The window (as given to max_pool2d, stride
// resolved) lets the deterministic kernels gather instead of scatter.
Tensor max_pool2d_backward(const Tensor& grad, const Tensor& indices, const Shape& input_sizes, IntPair kernel_size,
                           IntPair stride, IntPair padding, IntPair dilation, bool ceil_mode = false);

// The adjoint of avg_pool2d for an input of input_sizes; grad has avg_pool2d's output shape.
Tensor avg_pool2d_backward(const Tensor& grad, const Shape& input_sizes, IntPair kernel_size, IntPair stride,
                           IntPair padding, bool ceil_mode, bool count_include_pad);

// The adjoint of adaptive_avg_pool2d for an input of input_sizes.
Tensor adaptive_avg_pool2d_backward(const Tensor& grad, const Shape& input_sizes);

}  // namespace tessera
