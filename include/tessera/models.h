// Ready-made models built from nn: the MLP and CNN of the train command, and ResNet.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

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

// torchvision's ResNet with basic blocks (resnet18: {2, 2, 2, 2}, resnet34: {3, 4, 6, 3}), same
// state_dict names (conv1, bn1, layer1.0.conv1, ..., fc). `small_input` replaces the 7x7/2 stem and
// its max pool with a 3x3/1 convolution, the usual change for 28x28 or 32x32 images.
class ResNet : public nn::Module {
 public:
  ResNet(const std::vector<int64_t>& blocks, int64_t num_classes = 1000, int64_t in_channels = 3,
         bool small_input = false);
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

}  // namespace tessera::models
