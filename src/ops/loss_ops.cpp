// cross_entropy_loss_rows and its backward: meta functions (ops/loss_ops.h) over the slots of
// ops/loss_kernel.h.
//
// The logits are brought to contiguous (M, C) rows with the class dim last ((N, C, d1, ...) is
// permuted to (N, d1, ..., C) first, as PyTorch treats K-dim inputs); targets to contiguous int64
// (M); weights to the accumulation dtype after a round trip through the logits' dtype (the composite
// multiplied by weight.to(input.dtype()), so a 16-bit input sees 16-bit weights, as in PyTorch).
// The backward writes its result in the same permuted layout and returns the view with the class
// dim back in place, so no (M, C) copy is made on the way out.
//
// Autograd (Note [Autograd stage]): the forward records "cross_entropy_loss_rows" with input
// {logits} and output {loss}; attrs.tensors = {target (int64, target's shape), weight (loss dtype,
// or undefined), lse}, attrs.ints = {ignore_index}, attrs.scalars = {label_smoothing}. The backward
// op records nothing (autograd/derivatives/loss.cpp calls it with grad mode off only).
#include "ops/autograd_hook.h"
#include "ops/loss_kernel.h"
#include "ops/loss_ops.h"
#include "tessera/autograd.h"
#include "ops/no_record.h"
#include "ops/op_scope.h"
#include "ops/op_utils.h"

namespace tessera {

KernelSlot<CrossEntropyForwardFn> cross_entropy_forward_kernel("cross_entropy");
KernelSlot<CrossEntropyBackwardFn> cross_entropy_backward_kernel("cross_entropy_backward");

namespace {

DType loss_dtype_of(DType d) { return d == kFloat64 ? kFloat64 : kFloat32; }

int64_t class_dim(const Tensor& logits) { return logits.dim() == 1 ? 0 : 1; }

// Validates logits, target, weight and label_smoothing; returns C.
int64_t check_args(const char* op, const Tensor& logits, const Tensor& target, const Tensor& weight,
                   double label_smoothing) {
  check_defined(op, logits, "input");
  check_defined(op, target, "target");
  check_same_device(op, {&logits, &target, &weight});
  TS_CHECK(is_floating_point(logits.dtype()), DTypeError, op, ": expected a floating-point input, got ",
           dtype_name(logits.dtype()));
  TS_CHECK(is_integral(target.dtype()), DTypeError, op,
           ": expected a target of class indices (an integer dtype), got ", dtype_name(target.dtype()));
  TS_CHECK(logits.dim() >= 1, ShapeError, op, ": input must have at least 1 dim (C), got a 0-D tensor");
  TS_CHECK(label_smoothing >= 0 && label_smoothing <= 1, ValueError, op,
           ": label_smoothing must be between 0.0 and 1.0. Got: ", label_smoothing);
  const int64_t cdim = class_dim(logits);
  const int64_t c = logits.size(cdim);
  Shape expected = logits.sizes();
  expected.erase(expected.begin() + cdim);
  TS_CHECK(target.sizes() == expected, ShapeError, op, ": expected target of shape ", expected,
           " for input of shape ", logits.sizes(), ", got ", target.sizes());
  if (weight.defined()) {
    TS_CHECK(is_floating_point(weight.dtype()), DTypeError, op, ": expected a floating-point weight, got ",
             dtype_name(weight.dtype()));
    TS_CHECK(weight.sizes() == Shape({c}), ShapeError, op, ": weight tensor should be defined either for all ", c,
             " classes or no classes but got weight tensor of shape: ", weight.sizes());
  }
  return c;
}

// The sizes of the logits with the class dim moved last: (N, d1, ..., C).
Shape class_last_sizes(const Tensor& logits) {
  Shape s = logits.sizes();
  if (logits.dim() >= 3) {
    const int64_t c = s[1];
    s.erase(s.begin() + 1);
    s.push_back(c);
  }
  return s;
}

// Contiguous (M, C) rows of the logits (call with grad mode off).
Tensor logits_rows(const Tensor& logits, int64_t m, int64_t c) {
  Tensor x = logits;
  if (x.dim() >= 3) {
    Shape perm{0};
    for (int64_t d = 2; d < x.dim(); ++d) perm.push_back(d);
    perm.push_back(1);
    x = x.permute(perm);
  }
  return x.contiguous().reshape({m, c});
}

// weight in the logits' dtype, then in the loss dtype, contiguous (call with grad mode off).
Tensor weight_rows(const Tensor& weight, DType xdt) {
  if (!weight.defined()) return Tensor();
  return cast_to(cast_to(weight.detach(), xdt), loss_dtype_of(xdt)).contiguous();
}

CrossEntropyParams params_of(const char* op, int64_t ignore_index, double label_smoothing, int64_t classes,
                             int64_t c) {
  TS_CHECK(classes >= -1 && classes <= c, ValueError, op, ": expected at most ", c, " classes (the logits' size), got ",
           classes);
  CrossEntropyParams p;
  p.ignore_index = ignore_index;
  p.label_smoothing = label_smoothing;
  p.classes = classes;
  return p;
}

}  // namespace

std::pair<Tensor, Tensor> cross_entropy_loss_rows(const Tensor& logits, const Tensor& target, const Tensor& weight,
                                                  int64_t ignore_index, double label_smoothing, int64_t classes) {
  const OpId id = OpId::cross_entropy;
  const char* op = op_name(id);
  OpScope scope(OpId::cross_entropy_loss_rows, {&logits, &target});
  const int64_t c = check_args(op, logits, target, weight, label_smoothing);
  const CrossEntropyParams cp = params_of(op, ignore_index, label_smoothing, classes, c);
  const bool record = should_record({&logits});
  const DType ldt = loss_dtype_of(logits.dtype());
  const int64_t m = target.numel();
  Tensor loss = make_empty(target.sizes(), ldt, logits.device());
  Tensor lse = make_empty(target.sizes(), ldt, logits.device());
  Tensor t64, w;
  {
    // Made by ops the capture sees (Note [Trace records]): the derivative saves them.
    NoGradGuard no_grad;
    t64 = cast_to(target.detach(), kInt64).contiguous();
    w = weight_rows(weight, logits.dtype());
  }
  {
    NoRecordScope no_record(record);
    Tensor x = logits_rows(logits.detach(), m, c);
    if (m > 0)
      cross_entropy_forward_kernel(logits.device(), loss.reshape({m}), lse.reshape({m}), x, t64.reshape({m}), w, cp);
  }
  if (capturing()) {  // the call as made (Note [Trace records]): t64 and w are made inside the op
    OpAttrs call = make_attrs({ignore_index, classes});
    call.scalars = {Scalar(label_smoothing)};
    // t64 and w ride along as inputs so that they stay values of the graph for the backward.
    detail::trace_record(OpId::cross_entropy_loss_rows, {logits, target, weight, t64, w}, {loss, lse}, call);
  }
  if (record) {
    OpAttrs attrs = make_attrs({ignore_index, classes}, {t64, w, lse});
    attrs.scalars = {Scalar(label_smoothing)};
    record_op_untraced(OpId::cross_entropy_loss_rows, {logits}, {loss}, std::move(attrs));
  }
  return {loss, lse};
}

Tensor cross_entropy_loss_rows_backward(const Tensor& grad, const Tensor& logits, const Tensor& target,
                                        const Tensor& weight, const Tensor& lse, int64_t ignore_index,
                                        double label_smoothing, int64_t classes) {
  const OpId id = OpId::cross_entropy_backward;
  const char* op = op_name(id);
  OpScope scope(id, {&grad, &logits, &target});
  const int64_t c = check_args(op, logits, target, weight, label_smoothing);
  const CrossEntropyParams cp = params_of(op, ignore_index, label_smoothing, classes, c);
  check_defined(op, grad, "grad");
  check_defined(op, lse, "lse");
  check_same_device(op, {&logits, &grad, &lse});
  TS_CHECK(grad.sizes() == target.sizes() && lse.sizes() == target.sizes(), ShapeError, op,
           ": expected grad and lse of the target's shape ", target.sizes(), ", got ", grad.sizes(), " and ",
           lse.sizes());
  const DType ldt = loss_dtype_of(logits.dtype());
  const int64_t m = target.numel();
  Tensor dx = make_empty(class_last_sizes(logits), logits.dtype(), logits.device());
  {
    NoRecordScope no_record;
    Tensor x = logits_rows(logits.detach(), m, c);
    Tensor t64 = cast_to(target.detach(), kInt64).contiguous().reshape({m});
    Tensor g = cast_to(grad.detach(), ldt).contiguous().reshape({m});
    Tensor l = cast_to(lse.detach(), ldt).contiguous().reshape({m});
    Tensor w = weight_rows(weight, logits.dtype());
    Tensor wsum = w.defined() && label_smoothing > 0 ? w.sum() : Tensor();
    if (m > 0 && c > 0)
      cross_entropy_backward_kernel(logits.device(), dx.reshape({m, c}), g, x, t64, w, wsum, l, cp);
  }
  if (capturing()) {  // Note [Trace records]: the call as made
    OpAttrs call = make_attrs({ignore_index, classes});
    call.scalars = {Scalar(label_smoothing)};
    detail::trace_record(id, {grad, logits, target, weight, lse}, {dx}, call);
  }
  return logits.dim() >= 3 ? dx.movedim(-1, 1) : dx;
}

}  // namespace tessera
