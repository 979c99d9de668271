// The normalization modules (nn::LayerNorm, GroupNorm, RMSNorm, BatchNorm1d/2d/3d): parameters,
// running statistics and options around the functional forms, which are ops of the table
// (src/ops/norm_functional.cpp).
#include <algorithm>
#include <limits>

#include "tessera/autograd.h"
#include "tessera/functions.h"
#include "tessera/nn/functional.h"
#include "tessera/nn/init.h"
#include "tessera/nn/normalization.h"

namespace tessera::nn {

// ---- modules ----------------------------------------------------------------------------------------
namespace {
const char* py_bool(bool b) { return b ? "True" : "False"; }
std::string shape_tuple(const Shape& s) {
  std::string out = "(";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + (s.size() == 1 ? ",)" : ")");
}
}  // namespace

LayerNorm::LayerNorm(Shape normalized_shape, double eps, bool elementwise_affine, bool bias)
    : normalized_shape(std::move(normalized_shape)), eps(eps), elementwise_affine(elementwise_affine) {
  TS_CHECK(!this->normalized_shape.empty(), ValueError, "LayerNorm: normalized_shape must not be empty");
  if (elementwise_affine) {
    weight = empty(this->normalized_shape);
    if (bias) this->bias = empty(this->normalized_shape);
  }
  register_parameter("weight", weight);
  register_parameter("bias", this->bias);
  reset_parameters();
}
void LayerNorm::reset_parameters() {
  if (weight.defined()) init::ones_(weight);
  if (bias.defined()) init::zeros_(bias);
}
Tensor LayerNorm::forward(Tensor x) {
  return functional::layer_norm(x, normalized_shape, weight.defined() ? std::optional<Tensor>(weight) : std::nullopt,
                                bias.defined() ? std::optional<Tensor>(bias) : std::nullopt, eps);
}
std::string LayerNorm::extra_repr() const {
  return detail::str_cat(shape_tuple(normalized_shape), ", eps=", eps, ", elementwise_affine=", py_bool(elementwise_affine));
}

GroupNorm::GroupNorm(int64_t num_groups, int64_t num_channels, double eps, bool affine)
    : num_groups(num_groups), num_channels(num_channels), eps(eps), affine(affine) {
  TS_CHECK(num_groups > 0 && num_channels % num_groups == 0, ValueError,
           "GroupNorm: num_channels (", num_channels, ") must be divisible by num_groups (", num_groups, ")");
  if (affine) {
    weight = empty({num_channels});
    bias = empty({num_channels});
  }
  register_parameter("weight", weight);
  register_parameter("bias", bias);
  reset_parameters();
}
void GroupNorm::reset_parameters() {
  if (weight.defined()) init::ones_(weight);
  if (bias.defined()) init::zeros_(bias);
}
Tensor GroupNorm::forward(Tensor x) {
  TS_CHECK(x.dim() >= 2 && x.size(1) == num_channels, ShapeError, "GroupNorm: expected input of shape (N, ",
           num_channels, ", *), got ", x.sizes());
  return functional::group_norm(x, num_groups, affine ? std::optional<Tensor>(weight) : std::nullopt,
                                affine ? std::optional<Tensor>(bias) : std::nullopt, eps);
}
std::string GroupNorm::extra_repr() const {
  return detail::str_cat(num_groups, ", ", num_channels, ", eps=", eps, ", affine=", py_bool(affine));
}

RMSNorm::RMSNorm(Shape normalized_shape, std::optional<double> eps, bool elementwise_affine)
    : normalized_shape(std::move(normalized_shape)), eps(eps), elementwise_affine(elementwise_affine) {
  TS_CHECK(!this->normalized_shape.empty(), ValueError, "RMSNorm: normalized_shape must not be empty");
  if (elementwise_affine) weight = empty(this->normalized_shape);
  register_parameter("weight", weight);
  reset_parameters();
}
void RMSNorm::reset_parameters() {
  if (weight.defined()) init::ones_(weight);
}
Tensor RMSNorm::forward(Tensor x) {
  return functional::rms_norm(x, normalized_shape, weight.defined() ? std::optional<Tensor>(weight) : std::nullopt, eps);
}
std::string RMSNorm::extra_repr() const {
  return detail::str_cat(shape_tuple(normalized_shape), ", eps=", eps ? std::to_string(*eps) : std::string("None"),
                         ", elementwise_affine=", py_bool(elementwise_affine));
}

BatchNormBase::BatchNormBase(int64_t num_features, double eps, std::optional<double> momentum, bool affine,
                             bool track_running_stats)
    : num_features(num_features), eps(eps), momentum(momentum), affine(affine),
      track_running_stats(track_running_stats) {
  TS_CHECK(num_features > 0, ValueError, "BatchNorm: num_features must be positive, got ", num_features);
  if (affine) {
    weight = empty({num_features});
    bias = empty({num_features});
  }
  register_parameter("weight", weight);
  register_parameter("bias", bias);
  if (track_running_stats) {
    running_mean = zeros({num_features});
    running_var = ones({num_features});
    num_batches_tracked = zeros({}, kInt64);
  }
  register_buffer("running_mean", running_mean);
  register_buffer("running_var", running_var);
  register_buffer("num_batches_tracked", num_batches_tracked);
  reset_parameters();
}

void BatchNormBase::reset_running_stats() {
  if (!track_running_stats) return;
  NoGradGuard no_grad;
  running_mean.zero_();
  running_var.fill_(1);
  num_batches_tracked.zero_();
}

void BatchNormBase::reset_parameters() {
  reset_running_stats();
  if (weight.defined()) init::ones_(weight);
  if (bias.defined()) init::zeros_(bias);
}

Tensor BatchNormBase::forward(Tensor x) {
  check_input_dim(x);
  TS_CHECK(x.size(1) == num_features, ShapeError, name(), ": expected ", num_features, " channels (dim 1), got input of size ",
           x.sizes());
  double factor = momentum.value_or(0.0);
  if (is_training() && track_running_stats) {
    NoGradGuard no_grad;
    num_batches_tracked.add_(1);
    if (!momentum) factor = 1.0 / num_batches_tracked.item<double>();
  }
  // Batch statistics in training, and always without running stats; running stats in evaluation.
  const bool use_batch_stats = is_training() || !running_mean.defined();
  return functional::batch_norm(x, running_mean, running_var, affine ? std::optional<Tensor>(weight) : std::nullopt,
                                affine ? std::optional<Tensor>(bias) : std::nullopt, use_batch_stats, factor, eps);
}

std::string BatchNormBase::extra_repr() const {
  return detail::str_cat(num_features, ", eps=", eps, ", momentum=",
                         momentum ? detail::str_cat(*momentum) : std::string("None"), ", affine=", py_bool(affine),
                         ", track_running_stats=", py_bool(track_running_stats));
}

void BatchNorm1d::check_input_dim(const Tensor& x) const {
  TS_CHECK(x.dim() == 2 || x.dim() == 3, ShapeError, "BatchNorm1d: expected 2D or 3D input (got ", x.dim(), "D input)");
}
void BatchNorm2d::check_input_dim(const Tensor& x) const {
  TS_CHECK(x.dim() == 4, ShapeError, "BatchNorm2d: expected 4D input (got ", x.dim(), "D input)");
}

}  // namespace tessera::nn
