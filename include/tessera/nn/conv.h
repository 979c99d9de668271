// Convolution and pooling layers over the functional ops of functions.h (conv1d, conv2d,
// conv_transpose2d, max_pool2d, avg_pool2d, adaptive_avg_pool2d). Weights are PyTorch's shapes and
// initialization: kaiming_uniform(a = sqrt(5)) and a bias U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
#pragma once
#include <optional>
#include <string>

#include "tessera/functions.h"
#include "tessera/nn/module.h"

namespace tessera::nn {

// x (N, C_in, L) -> (N, C_out, L_out). weight (C_out, C_in / groups, K), bias (C_out).
class Conv1d : public Module {
 public:
  Conv1d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, int64_t stride = 1, int64_t padding = 0,
         int64_t dilation = 1, int64_t groups = 1, bool bias = true);
  Tensor forward(Tensor x) override;
  void reset_parameters();
  std::string extra_repr() const override;

  int64_t in_channels, out_channels, kernel_size, stride, padding, dilation, groups;
  Tensor weight, bias;
};

// x (N, C_in, H, W) -> (N, C_out, H_out, W_out). weight (C_out, C_in / groups, KH, KW), bias (C_out).
class Conv2d : public Module {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, IntPair kernel_size, IntPair stride = 1, IntPair padding = 0,
         IntPair dilation = 1, int64_t groups = 1, bool bias = true);
  Tensor forward(Tensor x) override;
  void reset_parameters();
  std::string extra_repr() const override;

  int64_t in_channels, out_channels;
  IntPair kernel_size, stride, padding, dilation;
  int64_t groups;
  Tensor weight, bias;
};

// The adjoint of Conv2d. weight (C_in, C_out / groups, KH, KW), bias (C_out).
class ConvTranspose2d : public Module {
 public:
  ConvTranspose2d(int64_t in_channels, int64_t out_channels, IntPair kernel_size, IntPair stride = 1,
                  IntPair padding = 0, IntPair output_padding = 0, int64_t groups = 1, bool bias = true,
                  IntPair dilation = 1);
  Tensor forward(Tensor x) override;
  void reset_parameters();
  std::string extra_repr() const override;

  int64_t in_channels, out_channels;
  IntPair kernel_size, stride, padding, output_padding;
  int64_t groups;
  IntPair dilation;
  Tensor weight, bias;
};

// stride defaults to kernel_size.
class MaxPool2d : public Module {
 public:
  explicit MaxPool2d(IntPair kernel_size, std::optional<IntPair> stride = std::nullopt, IntPair padding = 0,
                     IntPair dilation = 1, bool ceil_mode = false);
  Tensor forward(Tensor x) override;
  std::string extra_repr() const override;

  IntPair kernel_size, stride, padding, dilation;
  bool ceil_mode;
};

class AvgPool2d : public Module {
 public:
  explicit AvgPool2d(IntPair kernel_size, std::optional<IntPair> stride = std::nullopt, IntPair padding = 0,
                     bool ceil_mode = false, bool count_include_pad = true);
  Tensor forward(Tensor x) override;
  std::string extra_repr() const override;

  IntPair kernel_size, stride, padding;
  bool ceil_mode, count_include_pad;
};

class AdaptiveAvgPool2d : public Module {
 public:
  explicit AdaptiveAvgPool2d(IntPair output_size) : output_size(output_size) {}
  Tensor forward(Tensor x) override;
  std::string extra_repr() const override;

  IntPair output_size;
};

}  // namespace tessera::nn
