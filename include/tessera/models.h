// Ready-made models built from nn: the MLP and CNN of the train command, ResNet, and GPT-2
// (tessera/models/gpt2.h).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/models/gpt2.h"
#include "tessera/nn.h"

namespace tessera::models {

// Flatten, then Linear-ReLU pairs through `hidden`, then a Linear to `num_classes`.
// MLP(784, {512, 512}, 10) has PyTorch's state_dict names "layers.0.weight", "layers.2.weight", ...
class MLP : public nn::Module {
 public:
  MLP(int64_t in_features, const std::vector<int64_t>& hidden, int64_t num_classes);
  Tensor forward(Tensor x) override;
  std::string name() const override { return "MLP"; }

  nn::Sequential layers;
};

// Two 3x3 convolutions (32 and 64 channels) each followed by ReLU and 2x2 max pooling, then
// Linear(64*5*5, 128), ReLU, Linear(128, num_classes): the CNN of API.md, for 28x28 inputs.
class CNN : public nn::Module {
 public:
  explicit CNN(int64_t in_channels = 1, int64_t num_classes = 10, int64_t image_size = 28);
  Tensor forward(Tensor x) override;
  std::string name() const override { return "CNN"; }

  nn::Conv2d conv1, conv2;
  nn::Linear fc1, fc2;
};

// torchvision's ResNet (He et al. 2015, "v1.5": a bottleneck's stride sits on its 3x3 convolution),
// with torchvision's state_dict names (conv1, bn1, layer1.0.conv1, layer1.0.downsample.0, ..., fc) so
// that its checkpoints load. Basic blocks (two 3x3 convs): resnet18 {2, 2, 2, 2}, resnet34 {3, 4, 6, 3};
// bottlenecks (1x1, 3x3, 1x1 with 4x expansion): resnet50 {3, 4, 6, 3}, resnet101 {3, 4, 23, 3}.
// Initialization as torchvision: kaiming normal (fan_out, relu) convolutions, BN (1, 0), fc as
// nn::Linear; zero_init_residual zeroes the last BN weight of each block (bn2 / bn3), so that every
// residual branch starts as the identity.
//
// Channels-last: give the input as x.contiguous(MemoryFormat::ChannelsLast) and it flows NHWC through
// the network: convolution, batch norm and pooling keep the layout (Note [Channels-last outputs]),
// and the ReLUs and residual adds run in place (Note [In-place activations] in resnet.cpp). The
// weights may stay in either layout. The result equals the NCHW one.
enum class ResNetBlock { Basic, Bottleneck };

struct ResNetOptions {
  int64_t num_classes = 1000;
  int64_t in_channels = 3;
  // Replaces the 7x7/2 stem and its max pool with a 3x3/1 convolution, the usual change for 28x28 or
  // 32x32 images.
  bool small_input = false;
  bool zero_init_residual = false;
};

class ResNet : public nn::Module {
 public:
  ResNet(ResNetBlock block, const std::vector<int64_t>& layers, const ResNetOptions& options = {});
  // Basic blocks (the resnet18 / resnet34 family).
  ResNet(const std::vector<int64_t>& blocks, int64_t num_classes = 1000, int64_t in_channels = 3,
         bool small_input = false);
  // x (N, in_channels, H, W) -> logits (N, num_classes).
  Tensor forward(Tensor x) override;
  std::string name() const override { return "ResNet"; }

  nn::Conv2d conv1;
  nn::BatchNorm2d bn1;
  nn::Sequential layer1, layer2, layer3, layer4;
  nn::Linear fc;

 private:
  bool small_input_;
};

ResNet resnet18(int64_t num_classes = 1000, int64_t in_channels = 3, bool small_input = false);
ResNet resnet34(int64_t num_classes = 1000, int64_t in_channels = 3, bool small_input = false);
ResNet resnet50(int64_t num_classes = 1000, int64_t in_channels = 3, bool small_input = false);
ResNet resnet101(int64_t num_classes = 1000, int64_t in_channels = 3, bool small_input = false);
// The same with every option, e.g. resnet50({.num_classes = 10, .zero_init_residual = true}).
ResNet resnet18(const ResNetOptions& options);
ResNet resnet34(const ResNetOptions& options);
ResNet resnet50(const ResNetOptions& options);
ResNet resnet101(const ResNetOptions& options);

}  // namespace tessera::models
