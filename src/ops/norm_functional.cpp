// Normalization: functional layer_norm, add_layer_norm, group_norm, rms_norm and batch_norm, ops of the
// table (each opens its OpScope; the modules are in src/nn/normalization.cpp).
// layer_norm and rms_norm run the fused ops of ops/norm_ops.h (output in x's dtype, weight and bias
// cast to it, float32 statistics for 16-bit inputs), batch_norm the op of ops/batch_norm_ops.h (cuDNN
// on the GPU); group_norm is a composition.
// Statistics are computed as mean((x - mean)^2) (biased, two passes, so no cancellation), then
// (x - mean) * rsqrt(var + eps); 16-bit inputs are normalized in float32 and cast back, as PyTorch's
// kernels accumulate in float32. The compositions are built from differentiable tessera ops.
#include <algorithm>
#include <limits>

#include "tessera/autograd.h"
#include "tessera/functions.h"
#include "tessera/amp.h"
#include "ops/autocast_hook.h"
#include "ops/batch_norm_ops.h"
#include "ops/norm_ops.h"
#include "ops/nn_functional_ops.h"
#include "ops/op_scope.h"
#include "tensor/type_promotion.h"

namespace tessera::op {
namespace {

bool is_16bit(DType t) { return t == kFloat16 || t == kBFloat16; }
DType compute_dtype(const Tensor& x) { return is_16bit(x.dtype()) ? kFloat32 : x.dtype(); }

void check_input(const char* op, const Tensor& x) {
  TS_CHECK(x.defined(), ValueError, op, ": got an undefined input");
  TS_CHECK(x.is_floating_point(), DTypeError, op, ": expected a floating-point input, got ", dtype_name(x.dtype()));
}

// The trailing dims normalized_shape covers, checked against the input's shape.
std::vector<int64_t> trailing_dims(const char* op, const Tensor& x, const Shape& normalized_shape) {
  const int64_t k = static_cast<int64_t>(normalized_shape.size());
  bool ok = k >= 1 && x.dim() >= k;
  for (int64_t i = 0; ok && i < k; ++i) ok = x.size(x.dim() - k + i) == normalized_shape[i];
  if (!ok) {
    std::string expected = "[*";
    for (int64_t v : normalized_shape) expected += ", " + std::to_string(v);
    TS_THROW(ShapeError, op, ": Given normalized_shape=", normalized_shape, ", expected input with shape ", expected,
             "], but got input of size ", x.sizes());
  }
  std::vector<int64_t> dims;
  for (int64_t i = -k; i < 0; ++i) dims.push_back(i);
  return dims;
}

void check_affine(const char* op, const char* what, const std::optional<Tensor>& t, const Shape& expected) {
  if (!t || !t->defined()) return;
  TS_CHECK(t->sizes() == expected, ShapeError, op, ": expected ", what, " of shape ", expected, ", got ", t->sizes());
}

// (x - mean) / sqrt(var + eps) over dims, in x's (compute) dtype.
Tensor normalize(const Tensor& x, const std::vector<int64_t>& dims, double eps) {
  Tensor mu = mean(x, dims, /*keepdim=*/true);
  Tensor d = x - mu;
  Tensor var = mean(d * d, dims, /*keepdim=*/true);
  return d * rsqrt(var + eps);
}

Tensor or_undefined(const std::optional<Tensor>& t) { return t ? *t : Tensor(); }

Tensor affine(Tensor y, const std::optional<Tensor>& weight, const std::optional<Tensor>& bias, const Shape& view) {
  if (weight && weight->defined()) y = y * weight->to(y.dtype()).reshape(view);
  if (bias && bias->defined()) y = y + bias->to(y.dtype()).reshape(view);
  return y;
}

}  // namespace

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const std::optional<Tensor>& weight,
                  const std::optional<Tensor>& bias, double eps) {
  if (autocast_pending()) [[unlikely]]
    if (AutocastArgs c(OpId::layer_norm, {&x, weight ? &*weight : nullptr, bias ? &*bias : nullptr}); c) return layer_norm(c[0], normalized_shape, c.opt(1), c.opt(2), eps);
  OpScope scope(OpId::layer_norm, {&x, weight ? &*weight : nullptr, bias ? &*bias : nullptr});
  const char* op = "layer_norm";
  check_input(op, x);
  trailing_dims(op, x, normalized_shape);
  check_affine(op, "weight", weight, normalized_shape);
  check_affine(op, "bias", bias, normalized_shape);
  return std::get<0>(native_layer_norm(x, normalized_shape, or_undefined(weight), or_undefined(bias), eps));
}

namespace {
std::tuple<Tensor, Tensor> add_layer_norm_impl(const Tensor& x, const Tensor& residual, const Shape& normalized_shape,
                                               const std::optional<Tensor>& weight, const std::optional<Tensor>& bias,
                                               double eps, std::optional<DType> y_dtype) {
  OpScope scope(OpId::add_layer_norm, {&x, &residual, weight ? &*weight : nullptr, bias ? &*bias : nullptr});
  const char* op = op_name(OpId::add_layer_norm);
  check_input(op, x);
  check_input(op, residual);
  trailing_dims(op, x, normalized_shape);
  check_affine(op, "weight", weight, normalized_shape);
  check_affine(op, "bias", bias, normalized_shape);
  auto [sum, y, mean, rstd] = native_add_layer_norm(x, residual, normalized_shape, or_undefined(weight),
                                                    or_undefined(bias), eps, y_dtype);
  return {sum, y};
}
}  // namespace

std::tuple<Tensor, Tensor> add_layer_norm(const Tensor& x, const Tensor& residual, const Shape& normalized_shape,
                                          const std::optional<Tensor>& weight, const std::optional<Tensor>& bias,
                                          double eps) {
  if (autocast_pending() && x.defined() && residual.defined() && amp::is_autocast_enabled(x.device())) [[unlikely]] {
    // Note [Mixed add + layer norm] (ops/norm_kernel.h): the op's float32 policy, except for one operand
    // in the autocast dtype (the branch; x when both are), which is read as it is and widened in the
    // kernel (the sum commutes); y comes out in the autocast dtype, rounded once, as the next matmul
    // would cast it.
    const DType low = amp::get_autocast_dtype(x.device());
    const bool keep_x = x.dtype() == low, keep_r = !keep_x && residual.dtype() == low;
    if (AutocastArgs c(OpId::add_layer_norm, {keep_x ? nullptr : &x, keep_r ? nullptr : &residual,
                                          weight ? &*weight : nullptr, bias ? &*bias : nullptr});
        c) {
      const Tensor& xa = keep_x ? x : c[0];
      const Tensor& ra = keep_r ? residual : c[1];
      std::optional<DType> y_dtype;
      if (result_type(xa, ra) == kFloat32) y_dtype = low;  // not with a float64 operand
      return add_layer_norm_impl(xa, ra, normalized_shape, c.opt(2), c.opt(3), eps, y_dtype);
    }
  }
  return add_layer_norm_impl(x, residual, normalized_shape, weight, bias, eps, std::nullopt);
}

Tensor group_norm(const Tensor& x, int64_t num_groups, const std::optional<Tensor>& weight,
                  const std::optional<Tensor>& bias, double eps) {
  if (autocast_pending()) [[unlikely]]
    if (AutocastArgs c(OpId::group_norm, {&x, weight ? &*weight : nullptr, bias ? &*bias : nullptr}); c) return group_norm(c[0], num_groups, c.opt(1), c.opt(2), eps);
  OpScope scope(OpId::group_norm, {&x, weight ? &*weight : nullptr, bias ? &*bias : nullptr});
  const char* op = "group_norm";
  check_input(op, x);
  TS_CHECK(x.dim() >= 2, ShapeError, op, ": expected at least 2 dims (N, C, *), got input of size ", x.sizes());
  const int64_t n = x.size(0), c = x.size(1);
  TS_CHECK(num_groups > 0 && c % num_groups == 0, ValueError, op, ": Expected number of channels in input (", c,
           ") to be divisible by num_groups (", num_groups, ")");
  check_affine(op, "weight", weight, {c});
  check_affine(op, "bias", bias, {c});
  Shape grouped{n, num_groups, numel_of(x.sizes()) / std::max<int64_t>(n * num_groups, 1)};  // (N, G, C/G * rest)
  Tensor y = normalize(x.to(compute_dtype(x)).reshape(grouped), {2}, eps).reshape(x.sizes());
  Shape view(static_cast<size_t>(x.dim()), 1);
  view[1] = c;
  return affine(y, weight, bias, view).to(x.dtype());
}

Tensor rms_norm(const Tensor& x, const Shape& normalized_shape, const std::optional<Tensor>& weight,
                std::optional<double> eps) {
  if (autocast_pending()) [[unlikely]]
    if (AutocastArgs c(OpId::rms_norm, {&x, weight ? &*weight : nullptr}); c) return rms_norm(c[0], normalized_shape, c.opt(1), eps);
  OpScope scope(OpId::rms_norm, {&x, weight ? &*weight : nullptr});
  const char* op = "rms_norm";
  check_input(op, x);
  trailing_dims(op, x, normalized_shape);
  check_affine(op, "weight", weight, normalized_shape);
  double e = eps.value_or(0.0);
  if (!eps) {
    switch (x.dtype()) {
      case kFloat64: e = std::numeric_limits<double>::epsilon(); break;
      case kFloat32: e = std::numeric_limits<float>::epsilon(); break;
      case kFloat16: e = 0.0009765625; break;  // 2^-10
      default: e = 0.0078125; break;           // bfloat16: 2^-7
    }
  }
  return std::get<0>(native_rms_norm(x, normalized_shape, or_undefined(weight), e));
}

Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const std::optional<Tensor>& weight, const std::optional<Tensor>& bias, bool training,
                  double momentum, double eps) {
  const char* op = op_name(OpId::batch_norm);
  OpScope scope(OpId::batch_norm,
                {&x, &running_mean, &running_var, weight ? &*weight : nullptr, bias ? &*bias : nullptr});
  check_input(op, x);
  TS_CHECK(x.dim() >= 2, ShapeError, op, ": expected at least 2 dims (N, C, *), got input of size ", x.sizes());
  const int64_t c = x.size(1);
  check_affine(op, "weight", weight, {c});
  check_affine(op, "bias", bias, {c});
  TS_CHECK(running_mean.defined() == running_var.defined(), ValueError, op,
           ": running_mean and running_var must both be given or both be undefined");
  if (running_mean.defined()) {
    check_affine(op, "running_mean", running_mean, {c});
    check_affine(op, "running_var", running_var, {c});
  }
  const bool batch_stats = training || !running_mean.defined();
  if (batch_stats) {
    const int64_t per_channel = c > 0 ? x.numel() / c : 0;
    TS_CHECK(per_channel > 1, ValueError, op, ": Expected more than 1 value per channel when training, got input size ",
             x.sizes());
  }
  // native_batch_norm takes parameters and running statistics in the parameter dtype (float32 for a
  // 16-bit input); others are converted (differentiably for weight / bias) and running statistics of
  // another dtype are updated through a converted copy written back.
  const DType p = compute_dtype(x);
  auto param = [&](const std::optional<Tensor>& t) {
    if (!t || !t->defined()) return Tensor();
    return t->dtype() == p ? *t : t->to(p);
  };
  const bool update = training && running_mean.defined();
  auto stat = [&](const Tensor& t) {
    if (!t.defined() || t.dtype() == p) return t;
    return t.detach().to(p);
  };
  Tensor rm = stat(running_mean), rv = stat(running_var);
  // The op takes 2-D to 5-D inputs; more trailing dims are one (N, C, L) for it.
  const Tensor xn = x.dim() > 5 ? x.reshape({x.size(0), c, -1}) : x;
  Tensor y = std::get<0>(native_batch_norm(xn, param(weight), param(bias), batch_stats ? (update ? rm : Tensor()) : rm,
                                           batch_stats ? (update ? rv : Tensor()) : rv, batch_stats, momentum, eps));
  if (x.dim() > 5) y = y.reshape(x.sizes());
  if (update && rm.impl() != running_mean.impl()) {
    NoGradGuard no_grad;
    Tensor(running_mean).copy_(rm);
    Tensor(running_var).copy_(rv);
  }
  return y;
}

}  // namespace tessera::op
