// The fused layer norm and RMS norm ops (ops/norm_ops.h): meta checks with PyTorch's messages, the
// (M, N) row view of Note [Norm rows], output allocation and one call of a slot of
// ops/norm_kernel.h. The forward ops record {x, weight, bias} -> {y} with the statistics in
// attrs.tensors (mean, rstd; rstd only for RMS norm) and NormAttrs{normalized_shape, eps}. Kernels
// receive detached, contiguous aliases of the inputs in x's dtype: those conversions are
// implementation and are not recorded. native_add_layer_norm records {x, residual,
// weight, bias} -> {sum, y} with the same attrs plus weight and bias in attrs.tensors (its derivative
// saves the output sum and no input: x and the residual are not kept alive for the backward).
#include <string>

#include "ops/autograd_hook.h"
#include "ops/norm_kernel.h"
#include "ops/norm_ops.h"
#include "ops/op_scope.h"
#include "ops/op_utils.h"
#include "tensor/tensor_impl.h"
#include "tensor/type_promotion.h"

namespace tessera {

KernelSlot<NormForwardFn> norm_forward_kernel("native_layer_norm");
KernelSlot<NormBackwardFn> norm_backward_kernel("native_layer_norm_backward");
KernelSlot<AddNormForwardFn> add_norm_forward_kernel("add_layer_norm");
KernelSlot<AddNormBackwardFn> add_norm_backward_kernel("add_layer_norm_backward");

namespace {

struct RowView {
  int64_t rows = 1, cols = 1;
  Shape stat_shape;  // x's leading dims, then a 1 per normalized dim
};

std::string expected_shape(const Shape& normalized_shape) {
  std::string s = "[*";
  for (int64_t v : normalized_shape) s += ", " + std::to_string(v);
  return s + "]";
}

DType stat_dtype(DType x) { return x == kFloat64 ? kFloat64 : kFloat32; }

// Validates x against normalized_shape and returns its (M, N) view.
RowView row_view(const char* op, const Tensor& x, const Shape& normalized_shape) {
  check_defined(op, x, "input");
  TS_CHECK(is_floating_point(x.dtype()), DTypeError, op, ": expected a floating-point input, got ",
           dtype_name(x.dtype()));
  const int64_t k = static_cast<int64_t>(normalized_shape.size());
  TS_CHECK(k >= 1, ValueError, op, ": normalized_shape must have at least one dim, got ", normalized_shape);
  bool ok = x.dim() >= k;
  for (int64_t i = 0; ok && i < k; ++i) ok = x.size(x.dim() - k + i) == normalized_shape[i];
  TS_CHECK(ok, ShapeError, op, ": Given normalized_shape=", normalized_shape, ", expected input with shape ",
           expected_shape(normalized_shape), ", but got input of size ", x.sizes());
  RowView v;
  const int64_t lead = x.dim() - k;
  for (int64_t i = 0; i < lead; ++i) {
    v.rows *= x.size(i);
    v.stat_shape.push_back(x.size(i));
  }
  v.cols = numel_of(normalized_shape);
  for (int64_t i = 0; i < k; ++i) v.stat_shape.push_back(1);
  return v;
}

void check_param(const char* op, const char* what, const Tensor& t, const Shape& normalized_shape) {
  if (!t.defined()) return;
  TS_CHECK(is_floating_point(t.dtype()), DTypeError, op, ": expected a floating-point ", what, ", got ",
           dtype_name(t.dtype()));
  TS_CHECK(t.sizes() == normalized_shape, ShapeError, op, ": expected ", what, " of shape ", normalized_shape,
           " (normalized_shape), got ", t.sizes());
}

// A statistic (mean or rstd) handed back to a backward op: rows elements of the statistics dtype.
void check_stat(const char* op, const char* what, const Tensor& t, const RowView& v, DType x_dtype) {
  check_defined(op, t, what);
  TS_CHECK(t.numel() == v.rows, ShapeError, op, ": expected ", what, " with ", v.rows, " elements (shape ",
           v.stat_shape, "), got ", what, " of size ", t.sizes());
  TS_CHECK(t.dtype() == stat_dtype(x_dtype), DTypeError, op, ": expected ", what, " of dtype ",
           dtype_name(stat_dtype(x_dtype)), " for an input of dtype ", dtype_name(x_dtype), ", got ",
           dtype_name(t.dtype()));
}

void check_grad(const char* op, const Tensor& grad, const Tensor& x) {
  check_defined(op, grad, "grad_out");
  TS_CHECK(grad.sizes() == x.sizes(), ShapeError, op, ": expected grad_out of the input's size ", x.sizes(),
           ", got ", grad.sizes());
  TS_CHECK(is_floating_point(grad.dtype()), DTypeError, op, ": expected a floating-point grad_out, got ",
           dtype_name(grad.dtype()));
}

// A detached, contiguous alias of t in dtype d (undefined stays undefined).
Tensor kernel_arg(const Tensor& t, DType d) {
  if (!t.defined()) return {};
  return cast_to(t.detach(), d).contiguous();
}

OpAttrs norm_attrs(const Shape& normalized_shape, double eps, std::vector<Tensor> stats) {
  return OpAttrs{.tensors = std::move(stats), .typed = NormAttrs{.normalized_shape = normalized_shape, .eps = eps}};
}

}  // namespace

std::tuple<Tensor, Tensor, Tensor> native_layer_norm(const Tensor& x, const Shape& normalized_shape,
                                                     const Tensor& weight, const Tensor& bias, double eps) {
  const OpId id = OpId::native_layer_norm;
  const char* op = op_name(id);
  OpScope scope(id, {&x, &weight, &bias});
  const RowView v = row_view(op, x, normalized_shape);
  check_param(op, "weight", weight, normalized_shape);
  check_param(op, "bias", bias, normalized_shape);
  check_same_device(op, {&x, &weight, &bias});
  const DType d = x.dtype();
  Tensor xc = kernel_arg(x, d), w = kernel_arg(weight, d), b = kernel_arg(bias, d);
  Tensor y = make_empty(x.sizes(), d, x.device());
  Tensor mean = make_empty(v.stat_shape, stat_dtype(d), x.device());
  Tensor rstd = make_empty(v.stat_shape, stat_dtype(d), x.device());
  norm_forward_kernel(x.device(), y, mean, rstd, xc, w, b, NormParams{v.rows, v.cols, eps, false});
  if (should_record({&x, &weight, &bias}))
    record_op(id, {x, weight, bias}, {y}, norm_attrs(normalized_shape, eps, {mean, rstd}));
  return {y, mean, rstd};
}

std::tuple<Tensor, Tensor, Tensor> native_layer_norm_backward(const Tensor& grad_out, const Tensor& x,
                                                              const Shape& normalized_shape, const Tensor& mean,
                                                              const Tensor& rstd, const Tensor& weight,
                                                              const Tensor& bias, std::array<bool, 3> output_mask) {
  const OpId id = OpId::native_layer_norm_backward;
  const char* op = op_name(id);
  OpScope scope(id, {&grad_out, &x, &mean, &rstd, &weight, &bias});
  const RowView v = row_view(op, x, normalized_shape);
  check_grad(op, grad_out, x);
  check_stat(op, "mean", mean, v, x.dtype());
  check_stat(op, "rstd", rstd, v, x.dtype());
  check_param(op, "weight", weight, normalized_shape);
  check_param(op, "bias", bias, normalized_shape);
  check_same_device(op, {&x, &grad_out, &mean, &rstd, &weight, &bias});
  const DType d = x.dtype();
  Tensor dx = output_mask[0] ? make_empty(x.sizes(), d, x.device()) : Tensor();
  Tensor dw = output_mask[1] && weight.defined() ? make_empty(normalized_shape, d, x.device()) : Tensor();
  Tensor db = output_mask[2] && bias.defined() ? make_empty(normalized_shape, d, x.device()) : Tensor();
  if (!dx.defined() && !dw.defined() && !db.defined()) return {dx, dw, db};
  norm_backward_kernel(x.device(), dx, dw, db, kernel_arg(grad_out, d), kernel_arg(x, d), kernel_arg(mean, mean.dtype()),
                       kernel_arg(rstd, rstd.dtype()), kernel_arg(weight, d), NormParams{v.rows, v.cols, 0.0, false});
  if (capturing())  // Note [Trace records]: the call as made
    detail::trace_record(id, {grad_out, x, mean, rstd, weight, bias}, defined_only({dx, dw, db}),
                         OpAttrs{.ints = {output_mask[0], output_mask[1], output_mask[2]},
                                 .typed = NormAttrs{.normalized_shape = normalized_shape}});
  return {dx, dw, db};
}

namespace {
bool is_16bit_float(DType d) { return d == kBFloat16 || d == kFloat16; }
}  // namespace

std::tuple<Tensor, Tensor, Tensor, Tensor> native_add_layer_norm(const Tensor& x, const Tensor& residual,
                                                                 const Shape& normalized_shape, const Tensor& weight,
                                                                 const Tensor& bias, double eps,
                                                                 std::optional<DType> y_dtype) {
  const OpId id = OpId::add_layer_norm;
  const char* op = op_name(id);
  OpScope scope(OpId::native_add_layer_norm, {&x, &residual, &weight, &bias});
  const RowView v = row_view(op, x, normalized_shape);
  check_defined(op, residual, "residual");
  TS_CHECK(is_floating_point(residual.dtype()), DTypeError, op, ": expected a floating-point residual, got ",
           dtype_name(residual.dtype()));
  TS_CHECK(residual.sizes() == x.sizes(), ShapeError, op, ": expected residual of the input's size ", x.sizes(),
           ", got ", residual.sizes());
  check_param(op, "weight", weight, normalized_shape);
  check_param(op, "bias", bias, normalized_shape);
  check_same_device(op, {&x, &residual, &weight, &bias});
  const DType d = result_type(x, residual);
  const DType yd = y_dtype.value_or(d);
  TS_CHECK(is_floating_point(yd), DTypeError, op, ": expected a floating-point dtype for y, got ", dtype_name(yd));
  // Note [Mixed add + layer norm]: a float32 sum with a 16-bit y of the dtype of one operand reads that
  // operand in its own dtype (as the kernel's x: the sum commutes) and rounds y once in the kernel.
  const bool mixed = d == kFloat32 && is_16bit_float(yd) && (x.dtype() == yd || residual.dtype() == yd);
  const bool swap = mixed && x.dtype() != yd;
  const Tensor& a = swap ? residual : x;
  const Tensor& r = swap ? x : residual;
  Tensor xc = kernel_arg(a, mixed ? yd : d), rc = kernel_arg(r, d), w = kernel_arg(weight, d), b = kernel_arg(bias, d);
  Tensor sum = make_empty(x.sizes(), d, x.device());
  Tensor y = make_empty(x.sizes(), mixed ? yd : d, x.device());
  Tensor mean = make_empty(v.stat_shape, stat_dtype(d), x.device());
  Tensor rstd = make_empty(v.stat_shape, stat_dtype(d), x.device());
  add_norm_forward_kernel(x.device(), sum, y, mean, rstd, xc, rc, w, b, NormParams{v.rows, v.cols, eps, false});
  if (y.dtype() != yd) y = cast_to(y, yd);
  if (should_record({&x, &residual, &weight, &bias}))
    record_op(OpId::native_add_layer_norm, {x, residual, weight, bias}, {sum, y},
              norm_attrs(normalized_shape, eps, {mean, rstd, weight, bias}));
  return {sum, y, mean, rstd};
}

std::tuple<Tensor, Tensor, Tensor, Tensor> native_add_layer_norm_backward(
    const Tensor& grad_y, const Tensor& grad_sum, const Tensor& sum, const Shape& normalized_shape, const Tensor& mean,
    const Tensor& rstd, const Tensor& weight, const Tensor& bias, std::array<bool, 4> output_mask,
    std::optional<DType> low_dtype) {
  const OpId id = OpId::add_layer_norm_backward;
  const char* op = op_name(id);
  OpScope scope(id, {&grad_y, &grad_sum, &sum, &mean, &rstd, &weight, &bias});
  const RowView v = row_view(op, sum, normalized_shape);
  check_grad(op, grad_y, sum);
  if (grad_sum.defined()) check_grad(op, grad_sum, sum);
  check_stat(op, "mean", mean, v, sum.dtype());
  check_stat(op, "rstd", rstd, v, sum.dtype());
  check_param(op, "weight", weight, normalized_shape);
  check_param(op, "bias", bias, normalized_shape);
  check_same_device(op, {&sum, &grad_y, &grad_sum, &mean, &rstd, &weight, &bias});
  TS_CHECK(!output_mask[1] || low_dtype.has_value(), ValueError, op,
           ": the low-precision gradient was asked for without its dtype");
  TS_CHECK(!low_dtype || is_floating_point(*low_dtype), DTypeError, op,
           ": expected a floating-point dtype for the low-precision gradient, got ", dtype_name(*low_dtype));
  const DType d = sum.dtype();
  // Note [Mixed add + layer norm]: the kernel reads a 16-bit grad_y and writes the low gradient itself.
  const bool mixed = output_mask[1] && d == kFloat32 && is_16bit_float(*low_dtype) && grad_y.dtype() == *low_dtype;
  Tensor dx = output_mask[0] ? make_empty(sum.sizes(), d, sum.device()) : Tensor();
  Tensor dx_low = mixed ? make_empty(sum.sizes(), *low_dtype, sum.device()) : Tensor();
  // Otherwise the low gradient is dx cast.
  Tensor dx_full = !dx.defined() && output_mask[1] && !mixed ? make_empty(sum.sizes(), d, sum.device()) : dx;
  Tensor dw = output_mask[2] && weight.defined() ? make_empty(normalized_shape, d, sum.device()) : Tensor();
  Tensor db = output_mask[3] && bias.defined() ? make_empty(normalized_shape, d, sum.device()) : Tensor();
  if (!dx_full.defined() && !dx_low.defined() && !dw.defined() && !db.defined()) return {dx, dx_low, dw, db};
  Tensor dadd = dx_full.defined() || dx_low.defined() ? kernel_arg(grad_sum, d) : Tensor();
  add_norm_backward_kernel(sum.device(), dx_full, dx_low, dw, db, kernel_arg(grad_y, mixed ? *low_dtype : d), dadd,
                           kernel_arg(sum, d), kernel_arg(mean, mean.dtype()), kernel_arg(rstd, rstd.dtype()),
                           kernel_arg(weight, d), NormParams{v.rows, v.cols, 0.0, false});
  if (output_mask[1] && !mixed) dx_low = cast_to(dx_full, *low_dtype);
  if (capturing()) {  // Note [Trace records]: the call as made (ints: the mask, then the low dtype or -1)
    const int64_t low = low_dtype ? static_cast<int64_t>(*low_dtype) : -1;
    detail::trace_record(id, {grad_y, grad_sum, sum, mean, rstd, weight, bias}, defined_only({dx, dx_low, dw, db}),
                         OpAttrs{.ints = {output_mask[0], output_mask[1], output_mask[2], output_mask[3], low},
                                 .typed = NormAttrs{.normalized_shape = normalized_shape}});
  }
  return {dx, dx_low, dw, db};
}

std::tuple<Tensor, Tensor> native_rms_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight,
                                           double eps) {
  const OpId id = OpId::native_rms_norm;
  const char* op = op_name(id);
  OpScope scope(id, {&x, &weight});
  const RowView v = row_view(op, x, normalized_shape);
  check_param(op, "weight", weight, normalized_shape);
  check_same_device(op, {&x, &weight});
  const DType d = x.dtype();
  Tensor xc = kernel_arg(x, d), w = kernel_arg(weight, d);
  Tensor y = make_empty(x.sizes(), d, x.device());
  Tensor rstd = make_empty(v.stat_shape, stat_dtype(d), x.device());
  norm_forward_kernel(x.device(), y, Tensor(), rstd, xc, w, Tensor(), NormParams{v.rows, v.cols, eps, true});
  if (should_record({&x, &weight})) record_op(id, {x, weight}, {y}, norm_attrs(normalized_shape, eps, {rstd}));
  return {y, rstd};
}

std::tuple<Tensor, Tensor> native_rms_norm_backward(const Tensor& grad_out, const Tensor& x,
                                                    const Shape& normalized_shape, const Tensor& rstd,
                                                    const Tensor& weight, std::array<bool, 2> output_mask) {
  const OpId id = OpId::native_rms_norm_backward;
  const char* op = op_name(id);
  OpScope scope(id, {&grad_out, &x, &rstd, &weight});
  const RowView v = row_view(op, x, normalized_shape);
  check_grad(op, grad_out, x);
  check_stat(op, "rstd", rstd, v, x.dtype());
  check_param(op, "weight", weight, normalized_shape);
  check_same_device(op, {&x, &grad_out, &rstd, &weight});
  const DType d = x.dtype();
  Tensor dx = output_mask[0] ? make_empty(x.sizes(), d, x.device()) : Tensor();
  Tensor dw = output_mask[1] && weight.defined() ? make_empty(normalized_shape, d, x.device()) : Tensor();
  if (!dx.defined() && !dw.defined()) return {dx, dw};
  norm_backward_kernel(x.device(), dx, dw, Tensor(), kernel_arg(grad_out, d), kernel_arg(x, d), Tensor(),
                       kernel_arg(rstd, rstd.dtype()), kernel_arg(weight, d), NormParams{v.rows, v.cols, 0.0, true});
  if (capturing())  // Note [Trace records]: the call as made
    detail::trace_record(id, {grad_out, x, rstd, weight}, defined_only({dx, dw}),
                         OpAttrs{.ints = {output_mask[0], output_mask[1]},
                                 .typed = NormAttrs{.normalized_shape = normalized_shape}});
  return {dx, dw};
}

}  // namespace tessera
