// Normalization layers: LayerNorm, GroupNorm, RMSNorm, BatchNorm1d, BatchNorm2d. Variances are
// biased and eps sits inside the square root, as PyTorch. BatchNorm keeps running statistics as
// buffers (running_mean, running_var, num_batches_tracked), updated in training mode.
#pragma once
#include <optional>
#include <string>

#include "tessera/nn/module.h"

namespace tessera::nn {

// Normalizes over the trailing dims `normalized_shape`; weight ones, bias zeros (normalized_shape).
class LayerNorm : public Module {
 public:
  explicit LayerNorm(Shape normalized_shape, double eps = 1e-5, bool elementwise_affine = true, bool bias = true);
  Tensor forward(Tensor x) override;
  void reset_parameters();
  std::string extra_repr() const override;

  Shape normalized_shape;
  double eps;
  bool elementwise_affine;
  Tensor weight, bias;
};

// x (N, C, *): statistics per sample over each group of C / num_groups channels; weight, bias (C).
class GroupNorm : public Module {
 public:
  GroupNorm(int64_t num_groups, int64_t num_channels, double eps = 1e-5, bool affine = true);
  Tensor forward(Tensor x) override;
  void reset_parameters();
  std::string extra_repr() const override;

  int64_t num_groups, num_channels;
  double eps;
  bool affine;
  Tensor weight, bias;
};

// x / sqrt(mean(x^2) + eps) * weight over the trailing dims; eps defaults to the input dtype's
// machine epsilon (PyTorch's torch.nn.RMSNorm).
class RMSNorm : public Module {
 public:
  explicit RMSNorm(Shape normalized_shape, std::optional<double> eps = std::nullopt, bool elementwise_affine = true);
  Tensor forward(Tensor x) override;
  void reset_parameters();
  std::string extra_repr() const override;

  Shape normalized_shape;
  std::optional<double> eps;
  bool elementwise_affine;
  Tensor weight;
};

// The shared part of BatchNorm1d and BatchNorm2d. momentum: the running stats' update factor, or
// nullopt for a cumulative average (1 / num_batches_tracked).
class BatchNormBase : public Module {
 public:
  Tensor forward(Tensor x) override;
  void reset_running_stats();
  void reset_parameters();
  std::string extra_repr() const override;

  int64_t num_features;
  double eps;
  std::optional<double> momentum;
  bool affine, track_running_stats;
  Tensor weight, bias;
  Tensor running_mean, running_var, num_batches_tracked;

 protected:
  BatchNormBase(int64_t num_features, double eps, std::optional<double> momentum, bool affine,
                bool track_running_stats);
  virtual void check_input_dim(const Tensor& x) const = 0;
};

// x (N, C) or (N, C, L).
class BatchNorm1d : public BatchNormBase {
 public:
  explicit BatchNorm1d(int64_t num_features, double eps = 1e-5, std::optional<double> momentum = 0.1,
                       bool affine = true, bool track_running_stats = true)
      : BatchNormBase(num_features, eps, momentum, affine, track_running_stats) {}

 protected:
  void check_input_dim(const Tensor& x) const override;
};

// x (N, C, H, W).
class BatchNorm2d : public BatchNormBase {
 public:
  explicit BatchNorm2d(int64_t num_features, double eps = 1e-5, std::optional<double> momentum = 0.1,
                       bool affine = true, bool track_running_stats = true)
      : BatchNormBase(num_features, eps, momentum, affine, track_running_stats) {}

 protected:
  void check_input_dim(const Tensor& x) const override;
};

}  // namespace tessera::nn
