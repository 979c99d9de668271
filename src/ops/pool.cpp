// Pooling: max_pool2d(_with_indices), avg_pool2d, adaptive_avg_pool2d and their backward ops
// (conv_ops.h). Meta functions follow PyTorch's pool2d_shape_check and pooling_output_shape: output
// sizes with ceil_mode (the last window must start inside the input or its left padding), padding at
// most half the kernel, non-empty planes (an empty batch is allowed).
//
// Unbatched (C, H, W) inputs run as a batch of one, as in conv.cpp, so recorded nodes see 4-D
// tensors. Max pooling indices are flat positions h * W + w within each plane, int64, as PyTorch's.
// Results (and max pooling's indices) are channels-last when the input (grad for the backward ops) is,
// row-major contiguous otherwise (Note [Channels-last outputs] in op_utils.h), on every device.
#include <string>

#include "ops/autograd_hook.h"
#include "ops/conv_kernel.h"
#include "ops/conv_ops.h"
#include "ops/no_record.h"
#include "ops/op_scope.h"
#include "ops/op_utils.h"
#include "tensor/tensor_impl.h"
#include "tessera/functions.h"

namespace tessera {

KernelSlot<MaxPool2dFn> max_pool2d_kernel("max_pool2d");
KernelSlot<MaxPool2dBackwardFn> max_pool2d_backward_kernel("max_pool2d_backward");
KernelSlot<AvgPool2dFn> avg_pool2d_kernel("avg_pool2d");
KernelSlot<AvgPool2dBackwardFn> avg_pool2d_backward_kernel("avg_pool2d_backward");
KernelSlot<AdaptiveAvgPool2dFn> adaptive_avg_pool2d_kernel("adaptive_avg_pool2d");
KernelSlot<AdaptiveAvgPool2dBackwardFn> adaptive_avg_pool2d_backward_kernel("adaptive_avg_pool2d_backward");

namespace {

int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

// PyTorch's pooling_output_shape.
int64_t pooled_size(int64_t in, int64_t k, int64_t pad, int64_t stride, int64_t dil, bool ceil_mode) {
  int64_t out = floor_div(in + 2 * pad - dil * (k - 1) - 1 + (ceil_mode ? stride - 1 : 0), stride) + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

void check_input(const char* op, const Tensor& x) {
  check_defined(op, x, "input");
  const bool planes_ok = (x.dim() == 3 && x.size(0) > 0 && x.size(1) > 0 && x.size(2) > 0) ||
                         (x.dim() == 4 && x.size(1) > 0 && x.size(2) > 0 && x.size(3) > 0);
  TS_CHECK(planes_ok, ShapeError, op,
           ": expected a 3-D or 4-D (batch mode) input with non-zero sizes except an optional zero batch, but got "
           "input of size ", x.sizes());
  TS_CHECK(is_floating_point(x.dtype()), DTypeError, op, ": \"", op, "\" not implemented for '",
           dtype_name(x.dtype()), "' (expected a floating-point input)");
}

Tensor as_4d(const Tensor& x) { return x.dim() == 3 ? x.unsqueeze(0) : x; }
Tensor from_4d(const Tensor& t, bool unbatched) { return unbatched ? t.squeeze(0) : t; }

PoolGeometry pool_geometry(const char* op, const Shape& in, IntPair kernel, IntPair stride, IntPair padding,
                           IntPair dilation, bool ceil_mode) {
  TS_CHECK(kernel.h > 0 && kernel.w > 0, ValueError, op, ": kernel size should be greater than zero, but got kH: ",
           kernel.h, " kW: ", kernel.w);
  TS_CHECK(stride.h > 0 && stride.w > 0, ValueError, op, ": stride should be greater than zero, but got dH: ",
           stride.h, " dW: ", stride.w);
  TS_CHECK(dilation.h > 0 && dilation.w > 0, ValueError, op,
           ": dilation should be greater than zero, but got dilationH: ", dilation.h, " dilationW: ", dilation.w);
  TS_CHECK(padding.h >= 0 && padding.w >= 0 && kernel.w / 2 >= padding.w && kernel.h / 2 >= padding.h, ValueError, op,
           ": pad should be non-negative and at most half of kernel size, but got padW = ", padding.w,
           ", padH = ", padding.h, ", kW = ", kernel.w, ", kH = ", kernel.h);
  PoolGeometry g;
  g.planes = in[0] * in[1];
  g.in_h = in[2];
  g.in_w = in[3];
  g.kernel_h = kernel.h;
  g.kernel_w = kernel.w;
  g.stride_h = stride.h;
  g.stride_w = stride.w;
  g.pad_h = padding.h;
  g.pad_w = padding.w;
  g.dil_h = dilation.h;
  g.dil_w = dilation.w;
  g.out_h = pooled_size(g.in_h, kernel.h, padding.h, stride.h, dilation.h, ceil_mode);
  g.out_w = pooled_size(g.in_w, kernel.w, padding.w, stride.w, dilation.w, ceil_mode);
  TS_CHECK(g.out_h >= 1 && g.out_w >= 1, ShapeError, op, ": Given input size: (", in[1], "x", g.in_h, "x", g.in_w,
           "). Calculated output size: (", in[1], "x", g.out_h, "x", g.out_w, "). Output size is too small");
  return g;
}

// The grad of a backward op must be 4-D with the pooled sizes of `input_sizes`.
void check_backward_grad(const char* op, const Tensor& grad, const Shape& input_sizes, int64_t out_h, int64_t out_w) {
  check_defined(op, grad, "grad_output");
  TS_CHECK(input_sizes.size() == 4, ShapeError, op, ": expected 4-D input sizes, got ", input_sizes);
  const Shape want{input_sizes[0], input_sizes[1], out_h, out_w};
  TS_CHECK(grad.sizes() == want, ShapeError, op, ": expected grad_output of size ", want, " for input of size ",
           input_sizes, ", got ", grad.sizes());
  TS_CHECK(is_floating_point(grad.dtype()), DTypeError, op, ": \"", op, "\" not implemented for '",
           dtype_name(grad.dtype()), "'");
}

}  // namespace

std::tuple<Tensor, Tensor> max_pool2d_with_indices(const Tensor& x, IntPair kernel_size, std::optional<IntPair> stride,
                                                   IntPair padding, IntPair dilation, bool ceil_mode) {
  const OpId id = OpId::max_pool2d;
  const char* op = op_name(id);
  OpScope scope(OpId::max_pool2d_with_indices, {&x});
  check_input(op, x);
  const bool unbatched = x.dim() == 3;
  Tensor x4 = as_4d(x);
  PoolGeometry g = pool_geometry(op, x4.sizes(), kernel_size, stride.value_or(kernel_size), padding, dilation, ceil_mode);
  const Shape out_sizes{x4.size(0), x4.size(1), g.out_h, g.out_w};
  const bool cl = suggests_channels_last(x4);
  Tensor out = make_empty_in_format(out_sizes, x.dtype(), x.device(), cl);
  Tensor indices = make_empty_in_format(out_sizes, kInt64, x.device(), cl);
  max_pool2d_kernel(out.device(), out, indices, x4.detach(), g);
  if (should_record({&x4}))
    record_op(OpId::max_pool2d_with_indices, {x4}, {out},
              OpAttrs{.tensors = {indices},
                      .typed = PoolAttrs{.kernel = {kernel_size.h, kernel_size.w}, .stride = {g.stride_h, g.stride_w},
                                         .padding = {padding.h, padding.w}, .dilation = {dilation.h, dilation.w},
                                         .ceil_mode = ceil_mode}});
  return {from_4d(out, unbatched), from_4d(indices, unbatched)};
}

Tensor max_pool2d(const Tensor& x, IntPair kernel_size, std::optional<IntPair> stride, IntPair padding,
                  IntPair dilation, bool ceil_mode) {
  return std::get<0>(max_pool2d_with_indices(x, kernel_size, stride, padding, dilation, ceil_mode));
}

Tensor avg_pool2d(const Tensor& x, IntPair kernel_size, std::optional<IntPair> stride, IntPair padding,
                  bool ceil_mode, bool count_include_pad) {
  const OpId id = OpId::avg_pool2d;
  const char* op = op_name(id);
  OpScope scope(id, {&x});
  check_input(op, x);
  const bool unbatched = x.dim() == 3;
  Tensor x4 = as_4d(x);
  const IntPair s = stride.value_or(kernel_size);
  PoolGeometry g = pool_geometry(op, x4.sizes(), kernel_size, s, padding, 1, ceil_mode);
  g.count_include_pad = count_include_pad;
  Tensor out = make_empty_in_format({x4.size(0), x4.size(1), g.out_h, g.out_w}, x.dtype(), x.device(),
                                    suggests_channels_last(x4));
  avg_pool2d_kernel(out.device(), out, x4.detach(), g);
  if (should_record({&x4}))
    record_op(id, {x4}, {out},
              OpAttrs{.typed = PoolAttrs{.kernel = {kernel_size.h, kernel_size.w}, .stride = {s.h, s.w},
                                         .padding = {padding.h, padding.w}, .ceil_mode = ceil_mode,
                                         .count_include_pad = count_include_pad}});
  return from_4d(out, unbatched);
}

Tensor adaptive_avg_pool2d(const Tensor& x, IntPair output_size) {
  const OpId id = OpId::adaptive_avg_pool2d;
  const char* op = op_name(id);
  OpScope scope(id, {&x});
  check_input(op, x);
  TS_CHECK(output_size.h >= 0 && output_size.w >= 0, ValueError, op,
           ": elements of output_size must be greater than or equal to 0 but received (", output_size.h, ", ",
           output_size.w, ")");
  const bool unbatched = x.dim() == 3;
  Tensor x4 = as_4d(x);
  PoolGeometry g;
  g.planes = x4.size(0) * x4.size(1);
  g.in_h = x4.size(2);
  g.in_w = x4.size(3);
  g.out_h = output_size.h;
  g.out_w = output_size.w;
  Tensor out = make_empty_in_format({x4.size(0), x4.size(1), g.out_h, g.out_w}, x.dtype(), x.device(),
                                    suggests_channels_last(x4));
  adaptive_avg_pool2d_kernel(out.device(), out, x4.detach(), g);
  if (should_record({&x4})) record_op(id, {x4}, {out});
  return from_4d(out, unbatched);
}

Tensor max_pool2d_backward(const Tensor& grad, const Tensor& indices, const Shape& input_sizes, IntPair kernel_size,
                           IntPair stride, IntPair padding, IntPair dilation, bool ceil_mode) {
  const OpId id = OpId::max_pool2d_backward;
  const char* op = op_name(id);
  OpScope scope(id, {&grad, &indices});
  check_defined(op, indices, "indices");
  check_same_device(op, {&grad, &indices});
  TS_CHECK(grad.dim() == 4, ShapeError, op, ": expected a 4-D grad_output, got size ", grad.sizes());
  check_backward_grad(op, grad, input_sizes, grad.size(2), grad.size(3));
  TS_CHECK(indices.dtype() == kInt64 && indices.sizes() == grad.sizes(), ShapeError, op,
           ": expected int64 indices of size ", grad.sizes(), ", got ", dtype_name(indices.dtype()), " of size ",
           indices.sizes());
  // The window is needed by the deterministic gather (which windows can cover an input position); the
  // scatter reads the indices alone. The gradient must have the size this window gives.
  const PoolGeometry g = pool_geometry(op, input_sizes, kernel_size, stride, padding, dilation, ceil_mode);
  TS_CHECK(grad.size(2) == g.out_h && grad.size(3) == g.out_w, ShapeError, op, ": grad_output of spatial size (",
           grad.size(2), ", ", grad.size(3), ") does not match the window's output (", g.out_h, ", ", g.out_w,
           ") for an input of size ", input_sizes);
  Tensor out = make_empty_in_format(input_sizes, grad.dtype(), grad.device(),
                                    suggests_channels_last(grad) || suggests_channels_last(indices));
  max_pool2d_backward_kernel(out.device(), out, grad.detach(), indices, g);
  if (should_record({&grad}))
    record_op(id, {grad}, {out},
              OpAttrs{.tensors = {indices},
                      .typed = PoolAttrs{.kernel = {kernel_size.h, kernel_size.w}, .stride = {stride.h, stride.w},
                                         .padding = {padding.h, padding.w}, .dilation = {dilation.h, dilation.w},
                                         .ceil_mode = ceil_mode}});
  return out;
}

Tensor avg_pool2d_backward(const Tensor& grad, const Shape& input_sizes, IntPair kernel_size, IntPair stride,
                           IntPair padding, bool ceil_mode, bool count_include_pad) {
  const OpId id = OpId::avg_pool2d_backward;
  const char* op = op_name(id);
  OpScope scope(id, {&grad});
  TS_CHECK(input_sizes.size() == 4, ShapeError, op, ": expected 4-D input sizes, got ", input_sizes);
  PoolGeometry g = pool_geometry(op, input_sizes, kernel_size, stride, padding, 1, ceil_mode);
  g.count_include_pad = count_include_pad;
  check_backward_grad(op, grad, input_sizes, g.out_h, g.out_w);
  Tensor out = make_empty_in_format(input_sizes, grad.dtype(), grad.device(), suggests_channels_last(grad));
  avg_pool2d_backward_kernel(out.device(), out, grad.detach(), g);
  if (should_record({&grad}))
    record_op(id, {grad}, {out},
              OpAttrs{.typed = PoolAttrs{.kernel = {kernel_size.h, kernel_size.w}, .stride = {stride.h, stride.w},
                        .padding = {padding.h, padding.w}, .ceil_mode = ceil_mode,
                        .count_include_pad = count_include_pad}});
  return out;
}

Tensor adaptive_avg_pool2d_backward(const Tensor& grad, const Shape& input_sizes) {
  const OpId id = OpId::adaptive_avg_pool2d_backward;
  const char* op = op_name(id);
  OpScope scope(id, {&grad});
  check_defined(op, grad, "grad_output");
  TS_CHECK(grad.dim() == 4, ShapeError, op, ": expected a 4-D grad_output, got size ", grad.sizes());
  check_backward_grad(op, grad, input_sizes, grad.size(2), grad.size(3));
  PoolGeometry g;
  g.planes = input_sizes[0] * input_sizes[1];
  g.in_h = input_sizes[2];
  g.in_w = input_sizes[3];
  g.out_h = grad.size(2);
  g.out_w = grad.size(3);
  Tensor out = make_empty_in_format(input_sizes, grad.dtype(), grad.device(), suggests_channels_last(grad));
  adaptive_avg_pool2d_backward_kernel(out.device(), out, grad.detach(), g);
  if (should_record({&grad})) record_op(id, {grad}, {out});
  return out;
}

}  // namespace tessera
