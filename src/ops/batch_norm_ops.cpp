// native_batch_norm and native_batch_norm_backward (ops/batch_norm_ops.h): validation with PyTorch-like
// messages, the parameter dtype, the memory format of the results, and the autograd record. The math
// lives in the kernels (ops/batch_norm_kernel.h).
//
// Layout: x that is channels-last (Note [Channels-last outputs] in op_utils.h) is passed as is and y
// is allocated channels-last; any other x is made row-major contiguous. The backward brings grad_out
// to x's layout first, so a kernel sees two tensors of one layout.
// Running statistics that are not contiguous are updated through a contiguous copy written back.
// An empty x (M = N * L = 0 or C = 0) calls no kernel: y is empty, the batch statistics are NaN (0 / 0)
// and the running statistics stay as they are.
#include <cmath>
#include <limits>

#include "ops/autograd_hook.h"
#include "ops/batch_norm_kernel.h"
#include "ops/batch_norm_ops.h"
#include "ops/op_scope.h"
#include "ops/op_utils.h"
#include "tensor/tensor_impl.h"
#include "tessera/functions.h"

namespace tessera {

KernelSlot<BatchNormForwardTrainingFn> batch_norm_forward_training_kernel("native_batch_norm");
KernelSlot<BatchNormForwardInferenceFn> batch_norm_forward_inference_kernel("native_batch_norm (inference)");
KernelSlot<BatchNormBackwardFn> batch_norm_backward_kernel("native_batch_norm_backward");

namespace {

bool is_16bit(DType t) { return t == kFloat16 || t == kBFloat16; }
DType param_dtype(DType x) { return is_16bit(x) ? kFloat32 : x; }

void check_input(const char* op, const Tensor& x) {
  check_defined(op, x, "input");
  TS_CHECK(is_floating_point(x.dtype()), DTypeError, op, ": \"", op, "\" not implemented for '",
           dtype_name(x.dtype()), "' (expected a floating-point input)");
  TS_CHECK(x.dim() >= 2 && x.dim() <= 5, ShapeError, op, ": expected a 2-D to 5-D input (N, C, *), got input of size ",
           x.sizes());
}

// A per-channel tensor: undefined is allowed; else (C) of the parameter dtype, on x's device.
void check_channel_tensor(const char* op, const char* what, const Tensor& t, const Tensor& x) {
  if (!t.defined()) return;
  const int64_t c = x.size(1);
  TS_CHECK(t.dim() == 1 && t.size(0) == c, ShapeError, op, ": expected ", what, " of shape [", c,
           "] (the input's channels), got ", what, " of size ", t.sizes());
  const DType p = param_dtype(x.dtype());
  TS_CHECK(t.dtype() == p, DTypeError, op, ": expected ", what, " of dtype ", dtype_name(p), " for an input of dtype ",
           dtype_name(x.dtype()), ", got ", dtype_name(t.dtype()));
}

BatchNormShape shape_of(const Tensor& x, bool channels_last) {
  BatchNormShape s;
  s.n = x.size(0);
  s.c = x.size(1);
  s.l = 1;
  for (int64_t d = 2; d < x.dim(); ++d) s.l *= x.size(d);
  s.channels_last = channels_last;
  return s;
}

// x in the layout a kernel takes: channels-last as is, anything else row-major contiguous.
Tensor in_kernel_layout(const Tensor& x, bool channels_last) {
  return channels_last ? x.contiguous(MemoryFormat::ChannelsLast) : x.contiguous();
}

Tensor detached(const Tensor& t) { return t.defined() ? t.detach() : Tensor(); }

// A contiguous tensor the kernel can update in place; `t` itself when it already is one.
Tensor inplace_target(const Tensor& t) { return !t.defined() || t.is_contiguous() ? detached(t) : t.contiguous(); }

void write_back(const Tensor& dst, const Tensor& tmp) {
  if (!dst.defined()) return;
  if (dst.impl() == tmp.impl()) {
    dst.impl()->bump_version();
    return;
  }
  dst.detach().copy_(tmp);
  dst.impl()->bump_version();
}

}  // namespace

std::tuple<Tensor, Tensor, Tensor> native_batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias,
                                                     const Tensor& running_mean, const Tensor& running_var,
                                                     bool training, double momentum, double eps) {
  const OpId id = OpId::native_batch_norm;
  const char* op = op_name(id);
  OpScope scope(id, {&x, &weight, &bias, &running_mean, &running_var});
  check_input(op, x);
  check_same_device(op, {&x, &weight, &bias, &running_mean, &running_var});
  check_channel_tensor(op, "weight", weight, x);
  check_channel_tensor(op, "bias", bias, x);
  check_channel_tensor(op, "running_mean", running_mean, x);
  check_channel_tensor(op, "running_var", running_var, x);
  TS_CHECK(running_mean.defined() == running_var.defined(), ValueError, op,
           ": running_mean and running_var must both be given or both be undefined");
  TS_CHECK(training || running_mean.defined(), ValueError, op,
           ": running_mean and running_var must be defined in evaluation mode (training=false)");
  TS_CHECK(std::isfinite(eps) && eps >= 0, ValueError, op, ": expected a non-negative finite eps, got ", eps);

  const bool cl = suggests_channels_last(x);
  const Tensor xk = in_kernel_layout(x.detach(), cl);
  const BatchNormShape s = shape_of(x, cl);
  const DType p = param_dtype(x.dtype());
  Tensor y = make_empty_in_format(x.sizes(), x.dtype(), x.device(), cl);
  Tensor save_mean = make_empty({training ? s.c : 0}, p, x.device());
  Tensor save_invstd = make_empty({training ? s.c : 0}, p, x.device());
  Tensor reserve;
  if (x.numel() == 0) {
    if (training && s.c > 0) {
      save_mean.fill_(std::numeric_limits<double>::quiet_NaN());
      save_invstd.fill_(std::numeric_limits<double>::quiet_NaN());
    }
  } else if (training) {
    Tensor rm = inplace_target(running_mean), rv = inplace_target(running_var);
    batch_norm_forward_training_kernel(x.device(), y, save_mean, save_invstd, reserve, xk, detached(weight),
                                       detached(bias), rm, rv, s, momentum, eps);
    write_back(running_mean, rm);
    write_back(running_var, rv);
  } else {
    batch_norm_forward_inference_kernel(x.device(), y, xk, detached(weight), detached(bias),
                                        running_mean.contiguous().detach(), running_var.contiguous().detach(), s, eps);
  }
  if (capturing())  // the call as made (Note [Trace records]), momentum included
    detail::trace_record(id, {x, weight, bias, running_mean, running_var}, {y, save_mean, save_invstd},
                         OpAttrs{.scalars = {momentum}, .typed = BatchNormAttrs{.training = training, .eps = eps}});
  if (should_record({&x, &weight, &bias}))
    record_op_untraced(id, {x, weight, bias}, {y},
              OpAttrs{.tensors = {save_mean, save_invstd, detached(running_mean), detached(running_var), reserve},
                      .typed = BatchNormAttrs{.training = training, .eps = eps}});
  return {y, save_mean, save_invstd};
}

std::tuple<Tensor, Tensor, Tensor> native_batch_norm_backward(const Tensor& grad_out, const Tensor& x,
                                                              const Tensor& weight, const Tensor& running_mean,
                                                              const Tensor& running_var, const Tensor& save_mean,
                                                              const Tensor& save_invstd, bool training, double eps,
                                                              std::array<bool, 3> output_mask, const Tensor& reserve) {
  const OpId id = OpId::native_batch_norm_backward;
  const char* op = op_name(id);
  OpScope scope(id, {&grad_out, &x, &weight});
  check_input(op, x);
  check_defined(op, grad_out, "grad_out");
  check_same_device(op, {&grad_out, &x, &weight, &running_mean, &running_var, &save_mean, &save_invstd});
  TS_CHECK(grad_out.sizes() == x.sizes(), ShapeError, op, ": expected grad_out of the input's size ", x.sizes(),
           ", got ", grad_out.sizes());
  TS_CHECK(grad_out.dtype() == x.dtype(), DTypeError, op, ": expected grad_out of the input's dtype ",
           dtype_name(x.dtype()), ", got ", dtype_name(grad_out.dtype()));
  check_channel_tensor(op, "weight", weight, x);
  Tensor mean, invstd;
  if (training) {
    TS_CHECK(save_mean.defined() && save_invstd.defined(), ValueError, op,
             ": save_mean and save_invstd must be defined when training=true");
    check_channel_tensor(op, "save_mean", save_mean, x);
    check_channel_tensor(op, "save_invstd", save_invstd, x);
    mean = save_mean.detach().contiguous();
    invstd = save_invstd.detach().contiguous();
  } else {
    TS_CHECK(running_mean.defined() && running_var.defined(), ValueError, op,
             ": running_mean and running_var must be defined when training=false");
    check_channel_tensor(op, "running_mean", running_mean, x);
    check_channel_tensor(op, "running_var", running_var, x);
    mean = running_mean.detach().contiguous();
    invstd = rsqrt(running_var.detach() + eps).contiguous();
  }

  const bool cl = suggests_channels_last(x);
  const BatchNormShape s = shape_of(x, cl);
  const DType p = param_dtype(x.dtype());
  Tensor dx = output_mask[0] ? make_empty_in_format(x.sizes(), x.dtype(), x.device(), cl) : Tensor();
  Tensor dw = output_mask[1] ? make_empty({s.c}, p, x.device()) : Tensor();
  Tensor db = output_mask[2] ? make_empty({s.c}, p, x.device()) : Tensor();
  if (x.numel() == 0) {
    if (dw.defined()) dw.zero_();
    if (db.defined()) db.zero_();
  } else if (dx.defined() || dw.defined() || db.defined()) {
    const Tensor xk = in_kernel_layout(x.detach(), cl);
    const Tensor gk = in_kernel_layout(grad_out.detach(), cl);
    batch_norm_backward_kernel(x.device(), dx, dw, db, gk, xk, detached(weight), mean, invstd, reserve, s, training, eps);
  }
  if (capturing())  // Note [Trace records]: the call as made
    detail::trace_record(id, {grad_out, x, weight, running_mean, running_var, save_mean, save_invstd, reserve},
                         defined_only({dx, dw, db}),
                         OpAttrs{.ints = {output_mask[0], output_mask[1], output_mask[2]},
                                 .typed = BatchNormAttrs{.training = training, .eps = eps}});
  return {dx, dw, db};
}

}  // namespace tessera
