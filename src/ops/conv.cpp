// Convolutions: conv1d, conv2d, conv_transpose2d and conv2d's weight gradient (conv_ops.h). Each op
// validates devices, dtypes and shapes with PyTorch's messages, computes the output size, allocates
// the result and calls one slot of ops/conv_kernel.h with a ConvGeometry in conv2d terms.
// The result is channels-last when an input (x or weight; grad or x for the weight gradient) is, and
// row-major contiguous otherwise (Note [Channels-last outputs] in op_utils.h), on every device.
//
// Unbatched (C, H, W) inputs run as a batch of one: the op unsqueezes, calls its 4-D form (which is
// what autograd records) and squeezes the result, so every recorded conv node sees 4-D tensors.
// conv1d is conv2d over an (N, C, 1, L) view, as PyTorch lowers it.
// Kernels receive detached aliases of the inputs: the layout or dtype conversions they make must not
// be recorded by autograd.
#include <string>

#include "ops/autocast_hook.h"
#include "ops/autograd_hook.h"
#include "ops/conv_kernel.h"
#include "ops/conv_ops.h"
#include "ops/no_record.h"
#include "ops/op_scope.h"
#include "ops/op_utils.h"
#include "tensor/tensor_impl.h"
#include "tessera/functions.h"

namespace tessera {

KernelSlot<Conv2dForwardFn> conv2d_forward_kernel("conv2d");
KernelSlot<Conv2dInputBackwardFn> conv2d_input_backward_kernel("conv_transpose2d");
KernelSlot<Conv2dWeightBackwardFn> conv2d_weight_backward_kernel("conv2d_backward_weight");

namespace {

std::string pair_str(int64_t a, int64_t b) { return detail::str_cat("(", a, " x ", b, ")"); }

void check_params(const char* op, IntPair stride, IntPair padding, IntPair dilation, int64_t groups) {
  TS_CHECK(stride.h > 0 && stride.w > 0, ValueError, op, ": non-positive stride is not supported, got stride ",
           pair_str(stride.h, stride.w));
  TS_CHECK(padding.h >= 0 && padding.w >= 0, ValueError, op, ": negative padding is not supported, got padding ",
           pair_str(padding.h, padding.w));
  TS_CHECK(dilation.h > 0 && dilation.w > 0, ValueError, op, ": dilation should be greater than zero, got dilation ",
           pair_str(dilation.h, dilation.w));
  TS_CHECK(groups > 0, ValueError, op, ": non-positive groups is not supported, got groups=", groups);
}

// Floating inputs only (PyTorch's CPU convolutions take no integers); weight and bias of x's dtype.
void check_dtypes(const char* op, const Tensor& x, const Tensor& w, const Tensor& bias, const char* xn = "input",
                  const char* wn = "weight") {
  TS_CHECK(is_floating_point(x.dtype()), DTypeError, op, ": \"", op, "\" not implemented for '",
           dtype_name(x.dtype()), "' (expected a floating-point ", xn, ")");
  TS_CHECK(w.dtype() == x.dtype(), DTypeError, op, ": expected ", xn, " and ", wn,
           " to have the same dtype, but got ", xn, " of dtype ", dtype_name(x.dtype()), " and ", wn, " of dtype ",
           dtype_name(w.dtype()));
  if (bias.defined())
    TS_CHECK(bias.dtype() == x.dtype(), DTypeError, op, ": expected ", xn, " and bias to have the same dtype, but got ",
             xn, " of dtype ", dtype_name(x.dtype()), " and bias of dtype ", dtype_name(bias.dtype()));
}

void check_bias(const char* op, const Tensor& w, const Tensor& bias, int64_t channels) {
  if (!bias.defined()) return;
  TS_CHECK(bias.dim() == 1 && bias.size(0) == channels, ShapeError, op, ": Given weight of size ", w.sizes(),
           ", expected bias to be 1-dimensional with ", channels, " elements, but got bias of size ", bias.sizes(),
           " instead");
}

void check_input_dims(const char* op, const Tensor& x, int64_t batched_dims) {
  TS_CHECK(x.dim() == batched_dims - 1 || x.dim() == batched_dims, ShapeError, op, ": expected input with ",
           batched_dims - 1, " (unbatched) or ", batched_dims, " (batched) dims, got ", x.dim(),
           " (input of size ", x.sizes(), ")");
}

void check_weight_dims(const char* op, const Tensor& w, int64_t dims) {
  TS_CHECK(w.dim() == dims, ShapeError, op, ": expected weight with ", dims, " dims, got ", w.dim(),
           " (weight of size ", w.sizes(), ")");
}

// The conv2d geometry of x4 (N, C_in, H, W) and w (C_out, C_in/G, KH, KW), with PyTorch's checks.
ConvGeometry conv2d_geometry(const char* op, const Tensor& x, const Tensor& w, IntPair stride, IntPair padding,
                             IntPair dilation, int64_t groups) {
  check_params(op, stride, padding, dilation, groups);
  TS_CHECK(w.size(0) % groups == 0, ShapeError, op, ": Given groups=", groups,
           ", expected weight to be divisible by ", groups, " at dimension 0, but got weight of size ", w.sizes(),
           " instead");
  TS_CHECK(x.size(1) == w.size(1) * groups, ShapeError, op, ": Given groups=", groups, ", weight of size ", w.sizes(),
           ", expected input", x.sizes(), " to have ", w.size(1) * groups, " channels, but got ", x.size(1),
           " channels instead");
  ConvGeometry g;
  g.batch = x.size(0);
  g.groups = groups;
  g.in_channels = x.size(1);
  g.in_h = x.size(2);
  g.in_w = x.size(3);
  g.out_channels = w.size(0);
  g.kernel_h = w.size(2);
  g.kernel_w = w.size(3);
  g.stride_h = stride.h;
  g.stride_w = stride.w;
  g.pad_h = padding.h;
  g.pad_w = padding.w;
  g.dil_h = dilation.h;
  g.dil_w = dilation.w;
  const int64_t eff_kh = dilation.h * (g.kernel_h - 1) + 1, eff_kw = dilation.w * (g.kernel_w - 1) + 1;
  const int64_t padded_h = g.in_h + 2 * padding.h, padded_w = g.in_w + 2 * padding.w;
  TS_CHECK(padded_h >= eff_kh && padded_w >= eff_kw, ShapeError, op, ": Calculated padded input size per channel: ",
           pair_str(padded_h, padded_w), ". Kernel size: ", pair_str(eff_kh, eff_kw),
           ". Kernel size can't be greater than actual input size");
  g.out_h = (padded_h - eff_kh) / stride.h + 1;
  g.out_w = (padded_w - eff_kw) / stride.w + 1;
  return g;
}

const Tensor& bias_or_undefined(const std::optional<Tensor>& bias) {
  static const Tensor undefined;
  return bias ? *bias : undefined;
}

Tensor detached(const Tensor& t) { return t.defined() ? t.detach() : Tensor(); }

Tensor conv2d_4d(const Tensor& x, const Tensor& w, const Tensor& bias, IntPair stride, IntPair padding,
                 IntPair dilation, int64_t groups) {
  const OpId id = OpId::conv2d;
  const char* op = op_name(id);
  ConvGeometry g = conv2d_geometry(op, x, w, stride, padding, dilation, groups);
  check_bias(op, w, bias, g.out_channels);
  const bool cl = suggests_channels_last(x) || suggests_channels_last(w);
  Tensor out = make_empty_in_format({g.batch, g.out_channels, g.out_h, g.out_w}, x.dtype(), x.device(), cl);
  conv2d_forward_kernel(out.device(), out, x.detach(), w.detach(), detached(bias), g);
  if (should_record({&x, &w, &bias}))
    record_op(id, {x, w, bias}, {out},
              OpAttrs{.typed = ConvAttrs{.stride = {stride.h, stride.w}, .padding = {padding.h, padding.w},
                        .dilation = {dilation.h, dilation.w}, .groups = groups}});
  return out;
}

Tensor conv_transpose2d_4d(const Tensor& x, const Tensor& w, const Tensor& bias, IntPair stride, IntPair padding,
                           IntPair output_padding, int64_t groups, IntPair dilation) {
  const OpId id = OpId::conv_transpose2d;
  const char* op = op_name(id);
  check_params(op, stride, padding, dilation, groups);
  TS_CHECK(output_padding.h >= 0 && output_padding.w >= 0, ValueError, op,
           ": negative output_padding is not supported, got output_padding ",
           pair_str(output_padding.h, output_padding.w));
  TS_CHECK((output_padding.h < stride.h || output_padding.h < dilation.h) &&
               (output_padding.w < stride.w || output_padding.w < dilation.w),
           ValueError, op, ": output padding must be smaller than either stride or dilation, but got ",
           "output_padding_height: ", output_padding.h, " output_padding_width: ", output_padding.w,
           " stride_height: ", stride.h, " stride_width: ", stride.w, " dilation_height: ", dilation.h,
           " dilation_width: ", dilation.w);
  TS_CHECK(w.size(0) % groups == 0, ShapeError, op, ": Given groups=", groups,
           ", expected weight to be divisible by ", groups, " at dimension 0, but got weight of size ", w.sizes(),
           " instead");
  TS_CHECK(x.size(1) == w.size(0), ShapeError, op, ": Given transposed=1, weight of size ", w.sizes(),
           ", expected input", x.sizes(), " to have ", w.size(0), " channels, but got ", x.size(1),
           " channels instead");
  // The conv2d this op is the adjoint of: its output is x, its image is this op's result.
  ConvGeometry g;
  g.batch = x.size(0);
  g.groups = groups;
  g.out_channels = x.size(1);
  g.out_h = x.size(2);
  g.out_w = x.size(3);
  g.in_channels = w.size(1) * groups;
  g.kernel_h = w.size(2);
  g.kernel_w = w.size(3);
  g.stride_h = stride.h;
  g.stride_w = stride.w;
  g.pad_h = padding.h;
  g.pad_w = padding.w;
  g.dil_h = dilation.h;
  g.dil_w = dilation.w;
  g.in_h = (g.out_h - 1) * stride.h - 2 * padding.h + dilation.h * (g.kernel_h - 1) + output_padding.h + 1;
  g.in_w = (g.out_w - 1) * stride.w - 2 * padding.w + dilation.w * (g.kernel_w - 1) + output_padding.w + 1;
  TS_CHECK(g.in_h > 0 && g.in_w > 0, ShapeError, op, ": Given input size per channel: ", pair_str(g.out_h, g.out_w),
           ". Calculated output size per channel: ", pair_str(g.in_h, g.in_w), ". Output size is too small");
  check_bias(op, w, bias, g.in_channels);
  const bool cl = suggests_channels_last(x) || suggests_channels_last(w);
  Tensor out = make_empty_in_format({g.batch, g.in_channels, g.in_h, g.in_w}, x.dtype(), x.device(), cl);
  conv2d_input_backward_kernel(out.device(), out, x.detach(), w.detach(), detached(bias), g);
  if (should_record({&x, &w, &bias}))
    record_op(id, {x, w, bias}, {out},
              OpAttrs{.typed = ConvAttrs{.stride = {stride.h, stride.w}, .padding = {padding.h, padding.w},
                        .dilation = {dilation.h, dilation.w}, .output_padding = {output_padding.h, output_padding.w},
                        .groups = groups}});
  return out;
}

}  // namespace

Tensor conv2d(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias, IntPair stride,
              IntPair padding, IntPair dilation, int64_t groups) {
  if (autocast_pending()) [[unlikely]]
    if (AutocastArgs c(OpId::conv2d, {&x, &weight, bias ? &*bias : nullptr}); c)
      return conv2d(c[0], c[1], c.opt(2), stride, padding, dilation, groups);
  const Tensor& b = bias_or_undefined(bias);
  OpScope scope(OpId::conv2d, {&x, &weight, &b});
  check_defined("conv2d", x, "input");
  check_defined("conv2d", weight, "weight");
  check_same_device("conv2d", {&x, &weight, &b});
  check_input_dims("conv2d", x, 4);
  check_weight_dims("conv2d", weight, 4);
  check_dtypes("conv2d", x, weight, b);
  if (x.dim() == 3) return conv2d_4d(x.unsqueeze(0), weight, b, stride, padding, dilation, groups).squeeze(0);
  return conv2d_4d(x, weight, b, stride, padding, dilation, groups);
}

Tensor conv1d(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias, int64_t stride,
              int64_t padding, int64_t dilation, int64_t groups) {
  if (autocast_pending()) [[unlikely]]
    if (AutocastArgs c(OpId::conv1d, {&x, &weight, bias ? &*bias : nullptr}); c)
      return conv1d(c[0], c[1], c.opt(2), stride, padding, dilation, groups);
  const Tensor& b = bias_or_undefined(bias);
  OpScope scope(OpId::conv1d, {&x, &weight, &b});
  check_defined("conv1d", x, "input");
  check_defined("conv1d", weight, "weight");
  check_same_device("conv1d", {&x, &weight, &b});
  check_input_dims("conv1d", x, 3);
  check_weight_dims("conv1d", weight, 3);
  check_dtypes("conv1d", x, weight, b);
  TS_CHECK(stride > 0, ValueError, "conv1d: non-positive stride is not supported, got stride ", stride);
  TS_CHECK(padding >= 0, ValueError, "conv1d: negative padding is not supported, got padding ", padding);
  TS_CHECK(dilation > 0, ValueError, "conv1d: dilation should be greater than zero, got dilation ", dilation);
  TS_CHECK(groups > 0, ValueError, "conv1d: non-positive groups is not supported, got groups=", groups);
  const bool unbatched = x.dim() == 2;
  Tensor x3 = unbatched ? x.unsqueeze(0) : x;
  // Shape errors are reported in conv1d's own terms before the 2-D lowering.
  TS_CHECK(weight.size(0) % groups == 0, ShapeError, "conv1d: Given groups=", groups,
           ", expected weight to be divisible by ", groups, " at dimension 0, but got weight of size ",
           weight.sizes(), " instead");
  TS_CHECK(x3.size(1) == weight.size(1) * groups, ShapeError, "conv1d: Given groups=", groups, ", weight of size ",
           weight.sizes(), ", expected input", x3.sizes(), " to have ", weight.size(1) * groups,
           " channels, but got ", x3.size(1), " channels instead");
  const int64_t eff_k = dilation * (weight.size(2) - 1) + 1, padded = x3.size(2) + 2 * padding;
  TS_CHECK(padded >= eff_k, ShapeError, "conv1d: Calculated padded input size per channel: (", padded,
           "). Kernel size: (", eff_k, "). Kernel size can't be greater than actual input size");
  Tensor out = conv2d_4d(x3.unsqueeze(2), weight.unsqueeze(2), b, IntPair(1, stride), IntPair(0, padding),
                         IntPair(1, dilation), groups)
                   .squeeze(2);
  return unbatched ? out.squeeze(0) : out;
}

Tensor conv_transpose2d(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias, IntPair stride,
                        IntPair padding, IntPair output_padding, int64_t groups, IntPair dilation) {
  if (autocast_pending()) [[unlikely]]
    if (AutocastArgs c(OpId::conv_transpose2d, {&x, &weight, bias ? &*bias : nullptr}); c)
      return conv_transpose2d(c[0], c[1], c.opt(2), stride, padding, output_padding, groups, dilation);
  const Tensor& b = bias_or_undefined(bias);
  OpScope scope(OpId::conv_transpose2d, {&x, &weight, &b});
  check_defined("conv_transpose2d", x, "input");
  check_defined("conv_transpose2d", weight, "weight");
  check_same_device("conv_transpose2d", {&x, &weight, &b});
  check_input_dims("conv_transpose2d", x, 4);
  check_weight_dims("conv_transpose2d", weight, 4);
  check_dtypes("conv_transpose2d", x, weight, b);
  if (x.dim() == 3)
    return conv_transpose2d_4d(x.unsqueeze(0), weight, b, stride, padding, output_padding, groups, dilation)
        .squeeze(0);
  return conv_transpose2d_4d(x, weight, b, stride, padding, output_padding, groups, dilation);
}

Tensor conv2d_backward_weight(const Tensor& grad, const Tensor& x, IntPair kernel_size, IntPair stride,
                              IntPair padding, IntPair dilation, int64_t groups) {
  const OpId id = OpId::conv2d_backward_weight;
  const char* op = op_name(id);
  OpScope scope(id, {&grad, &x});
  check_defined(op, grad, "grad_output");
  check_defined(op, x, "input");
  check_same_device(op, {&grad, &x});
  TS_CHECK(grad.dim() == 4 && x.dim() == 4, ShapeError, op, ": expected 4-D grad_output and input, got grad_output of size ",
           grad.sizes(), " and input of size ", x.sizes());
  check_dtypes(op, x, grad, Tensor(), "input", "grad_output");
  check_params(op, stride, padding, dilation, groups);
  TS_CHECK(kernel_size.h > 0 && kernel_size.w > 0, ValueError, op, ": kernel size should be greater than zero, got ",
           pair_str(kernel_size.h, kernel_size.w));
  TS_CHECK(x.size(1) % groups == 0 && grad.size(1) % groups == 0, ShapeError, op, ": Given groups=", groups,
           ", expected input channels (", x.size(1), ") and grad_output channels (", grad.size(1),
           ") to be divisible by ", groups);
  // The geometry of the forward conv2d, checked against grad's sizes.
  Tensor w_meta = make_empty({grad.size(1), x.size(1) / groups, kernel_size.h, kernel_size.w}, x.dtype(),
                             Device::meta());
  ConvGeometry g = conv2d_geometry(op, x, w_meta, stride, padding, dilation, groups);
  // grad may cover only the leading rows / columns of conv2d's output (the rest count as zeros): the
  // weight gradient of a conv_transpose2d whose output_padding reaches past the stride needs that.
  TS_CHECK(grad.size(0) == g.batch && grad.size(2) <= g.out_h && grad.size(3) <= g.out_w, ShapeError, op,
           ": expected grad_output of size ", Shape{g.batch, g.out_channels, g.out_h, g.out_w},
           " for input of size ", x.sizes(), ", got ", grad.sizes());
  g.out_h = grad.size(2);
  g.out_w = grad.size(3);
  const bool cl = suggests_channels_last(grad) || suggests_channels_last(x);
  Tensor out = make_empty_in_format(w_meta.sizes(), x.dtype(), x.device(), cl);
  conv2d_weight_backward_kernel(out.device(), out, grad.detach(), x.detach(), g);
  if (should_record({&grad, &x}))
    record_op(id, {grad, x}, {out},
              OpAttrs{.typed = ConvAttrs{.stride = {stride.h, stride.w}, .padding = {padding.h, padding.w},
                        .dilation = {dilation.h, dilation.w}, .groups = groups,
                        .kernel = {kernel_size.h, kernel_size.w}}});
  return out;
}

}  // namespace tessera
