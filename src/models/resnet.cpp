// ResNet with basic blocks, laid out as torchvision's so that its state_dict names load.
#include "tessera/functions.h"
#include "tessera/models.h"

namespace tessera::models {
namespace {

// torchvision's BasicBlock: conv-bn-relu-conv-bn, plus the (downsampled) input, then relu.
class BasicBlock : public nn::Module {
 public:
  BasicBlock(int64_t in_planes, int64_t planes, int64_t stride)
      : conv1(in_planes, planes, 3, stride, 1, 1, 1, false), bn1(planes), conv2(planes, planes, 3, 1, 1, 1, 1, false),
        bn2(planes) {
    register_modules({{"conv1", conv1}, {"bn1", bn1}, {"conv2", conv2}, {"bn2", bn2}});
    if (stride != 1 || in_planes != planes) {
      downsample = std::make_shared<nn::Sequential>(nn::Conv2d(in_planes, planes, 1, stride, 0, 1, 1, false),
                                                    nn::BatchNorm2d(planes));
      register_module("downsample", downsample);
    }
  }
  Tensor forward(Tensor x) override {
    Tensor out = bn1(conv1(x)).relu();
    out = bn2(conv2(out));
    Tensor identity = downsample ? (*downsample)(x) : x;
    return (out + identity).relu();
  }
  std::string name() const override { return "BasicBlock"; }

  nn::Conv2d conv1;
  nn::BatchNorm2d bn1;
  nn::Conv2d conv2;
  nn::BatchNorm2d bn2;
  std::shared_ptr<nn::Sequential> downsample;
};

nn::Sequential make_layer(int64_t& in_planes, int64_t planes, int64_t blocks, int64_t stride) {
  nn::Sequential layer;
  for (int64_t i = 0; i < blocks; ++i) {
    layer.push_back(BasicBlock(in_planes, planes, i == 0 ? stride : 1));
    in_planes = planes;
  }
  return layer;
}

}  // namespace

ResNet::ResNet(const std::vector<int64_t>& blocks, int64_t num_classes, int64_t in_channels, bool small_input)
    : conv1(in_channels, 64, small_input ? 3 : 7, small_input ? 1 : 2, small_input ? 1 : 3, 1, 1, false),
      bn1(64),
      fc(512, num_classes),
      small_input_(small_input) {
  TS_CHECK(blocks.size() == 4, ValueError, "ResNet: expected 4 stage sizes, got ", blocks.size());
  int64_t in_planes = 64;
  layer1 = make_layer(in_planes, 64, blocks[0], 1);
  layer2 = make_layer(in_planes, 128, blocks[1], 2);
  layer3 = make_layer(in_planes, 256, blocks[2], 2);
  layer4 = make_layer(in_planes, 512, blocks[3], 2);
  register_modules({{"conv1", conv1}, {"bn1", bn1}, {"layer1", layer1}, {"layer2", layer2}, {"layer3", layer3},
                    {"layer4", layer4}, {"fc", fc}});
  // torchvision's initialization: kaiming normal (fan_out, relu) for convolutions, BN weight 1 bias 0.
  apply([](nn::Module& m) {
    if (auto* c = dynamic_cast<nn::Conv2d*>(&m)) nn::init::kaiming_normal_(c->weight, 0, "fan_out", "relu");
  });
}

Tensor ResNet::forward(Tensor x) {
  x = bn1(conv1(x)).relu();
  if (!small_input_) x = max_pool2d(x, 3, 2, 1);
  x = layer4(layer3(layer2(layer1(x))));
  x = adaptive_avg_pool2d(x, 1).flatten(1);
  return fc(x);
}

ResNet resnet18(int64_t num_classes, int64_t in_channels, bool small_input) {
  return ResNet({2, 2, 2, 2}, num_classes, in_channels, small_input);
}

}  // namespace tessera::models
