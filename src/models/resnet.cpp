// ResNet laid out as torchvision's (include/tessera/models.h), so that its state_dict names load:
// basic blocks for resnet18/34, bottlenecks (torchvision's v1.5: stride on the 3x3 convolution) for
// resnet50/101. Shapes: x (N, C, H, W); each stage after the first halves H and W.
#include "tessera/functions.h"
#include "tessera/models.h"

// Note [In-place activations]: as torchvision (ReLU(inplace=True), `out += identity`), the ReLUs and
// the residual add write into the batch norm's output. That saves one activation tensor per op, and
// it keeps a channels-last input channels-last: an in-place op keeps its tensor's layout, whereas
// out-of-place elementwise ops return row-major results. Autograd allows it because neither batch
// norm's nor the add's derivative needs its output.
namespace tessera::models {
namespace {

nn::Conv2d conv3x3(int64_t in, int64_t out, int64_t stride) { return nn::Conv2d(in, out, 3, stride, 1, 1, 1, false); }
nn::Conv2d conv1x1(int64_t in, int64_t out, int64_t stride = 1) { return nn::Conv2d(in, out, 1, stride, 0, 1, 1, false); }

// The shortcut when the block changes the shape: "downsample.0" (1x1 conv, stride) and ".1" (BN).
std::shared_ptr<nn::Sequential> make_downsample(int64_t in, int64_t out, int64_t stride) {
  if (stride == 1 && in == out) return nullptr;
  return std::make_shared<nn::Sequential>(conv1x1(in, out, stride), nn::BatchNorm2d(out));
}

// torchvision's BasicBlock: conv-bn-relu-conv-bn, plus the (downsampled) input, then relu.
class BasicBlock : public nn::Module {
 public:
  static constexpr int64_t kExpansion = 1;
  BasicBlock(int64_t in_planes, int64_t planes, int64_t stride)
      : conv1(conv3x3(in_planes, planes, stride)), bn1(planes), conv2(conv3x3(planes, planes, 1)), bn2(planes),
        downsample(make_downsample(in_planes, planes, stride)) {
    register_modules({{"conv1", conv1}, {"bn1", bn1}, {"conv2", conv2}, {"bn2", bn2}});
    if (downsample) register_module("downsample", downsample);
  }
  Tensor forward(Tensor x) override {
    Tensor out = bn1(conv1(x)).relu_();
    out = bn2(conv2(out));
    out += downsample ? (*downsample)(x) : x;
    return out.relu_();  // Note [In-place activations]
  }
  std::string name() const override { return "BasicBlock"; }
  nn::BatchNorm2d& last_bn() { return bn2; }

  nn::Conv2d conv1;
  nn::BatchNorm2d bn1;
  nn::Conv2d conv2;
  nn::BatchNorm2d bn2;
  std::shared_ptr<nn::Sequential> downsample;
};

// torchvision's Bottleneck: 1x1 (planes) - 3x3 (planes, stride) - 1x1 (4 planes), BN after each,
// ReLU after the first two and after the residual add.
class Bottleneck : public nn::Module {
 public:
  static constexpr int64_t kExpansion = 4;
  Bottleneck(int64_t in_planes, int64_t planes, int64_t stride)
      : conv1(conv1x1(in_planes, planes)), bn1(planes), conv2(conv3x3(planes, planes, stride)), bn2(planes),
        conv3(conv1x1(planes, planes * kExpansion)), bn3(planes * kExpansion),
        downsample(make_downsample(in_planes, planes * kExpansion, stride)) {
    register_modules({{"conv1", conv1}, {"bn1", bn1}, {"conv2", conv2}, {"bn2", bn2}, {"conv3", conv3}, {"bn3", bn3}});
    if (downsample) register_module("downsample", downsample);
  }
  Tensor forward(Tensor x) override {
    Tensor out = bn1(conv1(x)).relu_();
    out = bn2(conv2(out)).relu_();
    out = bn3(conv3(out));
    out += downsample ? (*downsample)(x) : x;
    return out.relu_();  // Note [In-place activations]
  }
  std::string name() const override { return "Bottleneck"; }
  nn::BatchNorm2d& last_bn() { return bn3; }

  nn::Conv2d conv1;
  nn::BatchNorm2d bn1;
  nn::Conv2d conv2;
  nn::BatchNorm2d bn2;
  nn::Conv2d conv3;
  nn::BatchNorm2d bn3;
  std::shared_ptr<nn::Sequential> downsample;
};

template <class Block>
nn::Sequential make_layer(int64_t& in_planes, int64_t planes, int64_t blocks, int64_t stride) {
  nn::Sequential layer;
  for (int64_t i = 0; i < blocks; ++i) {
    layer.push_back(Block(in_planes, planes, i == 0 ? stride : 1));
    in_planes = planes * Block::kExpansion;
  }
  return layer;
}

int64_t expansion(ResNetBlock b) { return b == ResNetBlock::Basic ? BasicBlock::kExpansion : Bottleneck::kExpansion; }

}  // namespace

ResNet::ResNet(ResNetBlock block, const std::vector<int64_t>& blocks, const ResNetOptions& o)
    : conv1(o.in_channels, 64, o.small_input ? 3 : 7, o.small_input ? 1 : 2, o.small_input ? 1 : 3, 1, 1, false),
      bn1(64),
      fc(512 * expansion(block), o.num_classes),
      small_input_(o.small_input) {
  TS_CHECK(blocks.size() == 4, ValueError, "ResNet: expected 4 stage sizes, got ", blocks.size());
  for (int64_t n : blocks) TS_CHECK(n > 0, ValueError, "ResNet: every stage needs at least one block, got ", n);
  int64_t in_planes = 64;
  const int64_t planes[4] = {64, 128, 256, 512};
  nn::Sequential* layers[4] = {&layer1, &layer2, &layer3, &layer4};
  for (int i = 0; i < 4; ++i) {
    *layers[i] = block == ResNetBlock::Basic ? make_layer<BasicBlock>(in_planes, planes[i], blocks[i], i == 0 ? 1 : 2)
                                             : make_layer<Bottleneck>(in_planes, planes[i], blocks[i], i == 0 ? 1 : 2);
  }
  register_modules({{"conv1", conv1}, {"bn1", bn1}, {"layer1", layer1}, {"layer2", layer2}, {"layer3", layer3},
                    {"layer4", layer4}, {"fc", fc}});
  // torchvision's initialization: kaiming normal (fan_out, relu) for convolutions, BN weight 1 bias 0
  // (BatchNorm2d's own), the residual branches' last BN weight 0 with zero_init_residual.
  apply([&](nn::Module& m) {
    if (auto* c = dynamic_cast<nn::Conv2d*>(&m)) nn::init::kaiming_normal_(c->weight, 0, "fan_out", "relu");
    if (!o.zero_init_residual) return;
    if (auto* b = dynamic_cast<BasicBlock*>(&m)) nn::init::zeros_(b->last_bn().weight);
    if (auto* b = dynamic_cast<Bottleneck*>(&m)) nn::init::zeros_(b->last_bn().weight);
  });
}

ResNet::ResNet(const std::vector<int64_t>& blocks, int64_t num_classes, int64_t in_channels, bool small_input)
    : ResNet(ResNetBlock::Basic, blocks,
             ResNetOptions{.num_classes = num_classes, .in_channels = in_channels, .small_input = small_input}) {}

Tensor ResNet::forward(Tensor x) {
  x = bn1(conv1(x)).relu_();
  if (!small_input_) x = max_pool2d(x, 3, 2, 1);
  x = layer4(layer3(layer2(layer1(x))));
  x = adaptive_avg_pool2d(x, 1).flatten(1);  // (N, 512 * expansion)
  return fc(x);
}

namespace {
ResNetOptions options(int64_t num_classes, int64_t in_channels, bool small_input) {
  return {.num_classes = num_classes, .in_channels = in_channels, .small_input = small_input};
}
}  // namespace

ResNet resnet18(const ResNetOptions& o) { return ResNet(ResNetBlock::Basic, {2, 2, 2, 2}, o); }
ResNet resnet34(const ResNetOptions& o) { return ResNet(ResNetBlock::Basic, {3, 4, 6, 3}, o); }
ResNet resnet50(const ResNetOptions& o) { return ResNet(ResNetBlock::Bottleneck, {3, 4, 6, 3}, o); }
ResNet resnet101(const ResNetOptions& o) { return ResNet(ResNetBlock::Bottleneck, {3, 4, 23, 3}, o); }
ResNet resnet18(int64_t num_classes, int64_t in_channels, bool small_input) {
  return resnet18(options(num_classes, in_channels, small_input));
}
ResNet resnet34(int64_t num_classes, int64_t in_channels, bool small_input) {
  return resnet34(options(num_classes, in_channels, small_input));
}
ResNet resnet50(int64_t num_classes, int64_t in_channels, bool small_input) {
  return resnet50(options(num_classes, in_channels, small_input));
}
ResNet resnet101(int64_t num_classes, int64_t in_channels, bool small_input) {
  return resnet101(options(num_classes, in_channels, small_input));
}

}  // namespace tessera::models
