// models::ResNet: parameter counts of torchvision's resnet18/34/50/101, state_dict names and shapes
// generated here from torchvision's definition (so its checkpoints load), forward in train and eval
// mode, channels-last inputs, zero_init_residual.
#include <map>

#include "common/test_util.h"

namespace ts = tessera;

namespace {

int64_t count(const ts::nn::Module& m) {
  int64_t n = 0;
  for (const ts::Tensor& p : m.parameters()) n += p.numel();
  return n;
}

// torchvision.models.resnet: the state_dict of ResNet(block, layers, num_classes), names and shapes,
// written out from its definition (conv1x1/conv3x3 without bias; BN with weight, bias, running_mean,
// running_var, num_batches_tracked; the first block of a stage downsamples when the stride or width
// changes; Bottleneck.expansion = 4).
std::map<std::string, ts::Shape> torchvision_state_dict(bool bottleneck, const std::vector<int64_t>& layers,
                                                        int64_t num_classes) {
  std::map<std::string, ts::Shape> sd;
  auto bn = [&](const std::string& p, int64_t c) {
    sd[p + ".weight"] = {c};
    sd[p + ".bias"] = {c};
    sd[p + ".running_mean"] = {c};
    sd[p + ".running_var"] = {c};
    sd[p + ".num_batches_tracked"] = {};
  };
  sd["conv1.weight"] = {64, 3, 7, 7};
  bn("bn1", 64);
  const int64_t expansion = bottleneck ? 4 : 1;
  int64_t inplanes = 64;
  for (int s = 0; s < 4; ++s) {
    const int64_t planes = 64 << s, stride = s == 0 ? 1 : 2;
    for (int64_t b = 0; b < layers[s]; ++b) {
      std::string p = "layer" + std::to_string(s + 1) + "." + std::to_string(b) + ".";
      if (bottleneck) {
        sd[p + "conv1.weight"] = {planes, inplanes, 1, 1};
        bn(p + "bn1", planes);
        sd[p + "conv2.weight"] = {planes, planes, 3, 3};
        bn(p + "bn2", planes);
        sd[p + "conv3.weight"] = {planes * 4, planes, 1, 1};
        bn(p + "bn3", planes * 4);
      } else {
        sd[p + "conv1.weight"] = {planes, inplanes, 3, 3};
        bn(p + "bn1", planes);
        sd[p + "conv2.weight"] = {planes, planes, 3, 3};
        bn(p + "bn2", planes);
      }
      if (b == 0 && (stride != 1 || inplanes != planes * expansion)) {
        sd[p + "downsample.0.weight"] = {planes * expansion, inplanes, 1, 1};
        bn(p + "downsample.1", planes * expansion);
      }
      inplanes = planes * expansion;
    }
  }
  sd["fc.weight"] = {num_classes, 512 * expansion};
  sd["fc.bias"] = {num_classes};
  return sd;
}

// torchvision's Bottleneck forward, out of place, through the model's own submodules.
ts::Tensor bottleneck_reference(ts::nn::Module& b, const ts::Tensor& x) {
  auto m = [&](const char* n) -> ts::nn::Module& { return b.get_submodule(n); };
  ts::Tensor out = m("bn1")(m("conv1")(x)).relu();
  out = m("bn2")(m("conv2")(out)).relu();
  out = m("bn3")(m("conv3")(out));
  bool has_down = false;
  for (auto& [name, child] : b.named_children()) has_down |= name == "downsample";
  return (out + (has_down ? m("downsample")(x) : x)).relu();
}

ts::Tensor resnet_reference(ts::models::ResNet& r, ts::Tensor x) {
  x = ts::max_pool2d(r.bn1(r.conv1(x)).relu(), 3, 2, 1);
  for (ts::nn::Sequential* layer : {&r.layer1, &r.layer2, &r.layer3, &r.layer4})
    for (const auto& block : *layer) x = bottleneck_reference(*block, x);
  return r.fc(ts::adaptive_avg_pool2d(x, 1).flatten(1));
}

std::map<std::string, ts::Shape> shapes_of(const ts::nn::Module& m) {
  std::map<std::string, ts::Shape> out;
  for (auto& [name, t] : m.state_dict()) out[name] = t.sizes();
  return out;
}

}  // namespace

TEST(ResNet, ParameterCountsAreTorchvisions) {
  EXPECT_EQ(count(ts::models::resnet18()), 11'689'512);
  EXPECT_EQ(count(ts::models::resnet34()), 21'797'672);
  EXPECT_EQ(count(ts::models::resnet50()), 25'557'032);
  EXPECT_EQ(count(ts::models::resnet101()), 44'549'160);
}

TEST(ResNet, StateDictNamesAndShapesAreTorchvisions) {
  ts::models::ResNet r50 = ts::models::resnet50();
  std::map<std::string, ts::Shape> expected = torchvision_state_dict(true, {3, 4, 6, 3}, 1000);
  EXPECT_EQ(expected.size(), 320u);  // len(torchvision.models.resnet50().state_dict())
  EXPECT_EQ(shapes_of(r50), expected);
  // A few by hand.
  ts::nn::StateDict sd = r50.state_dict();
  EXPECT_EQ(sd.at("layer2.0.conv2.weight").sizes(), ts::Shape({128, 128, 3, 3}));  // v1.5: stride here
  EXPECT_EQ(sd.at("layer3.0.downsample.0.weight").sizes(), ts::Shape({1024, 512, 1, 1}));
  EXPECT_EQ(sd.at("layer4.2.bn3.running_var").sizes(), ts::Shape({2048}));
  EXPECT_EQ(sd.at("fc.weight").sizes(), ts::Shape({1000, 2048}));
  EXPECT_EQ(sd.at("bn1.num_batches_tracked").dtype(), ts::kInt64);

  EXPECT_EQ(shapes_of(ts::models::resnet101(10)), torchvision_state_dict(true, {3, 4, 23, 3}, 10));
  EXPECT_EQ(shapes_of(ts::models::resnet34()), torchvision_state_dict(false, {3, 4, 6, 3}, 1000));
  EXPECT_EQ(shapes_of(ts::models::resnet18()), torchvision_state_dict(false, {2, 2, 2, 2}, 1000));
}

TEST(ResNet, StrideSitsOnTheThreeByThreeConvolution) {
  ts::models::ResNet r = ts::models::resnet50();
  auto& block = r.layer2[0];
  auto stride = [&](const char* n) {
    const ts::IntPair& s = block.get_submodule(n).as<ts::nn::Conv2d>().stride;
    return std::pair<int64_t, int64_t>{s.h, s.w};
  };
  EXPECT_EQ(stride("conv1"), (std::pair<int64_t, int64_t>{1, 1}));
  EXPECT_EQ(stride("conv2"), (std::pair<int64_t, int64_t>{2, 2}));
  EXPECT_EQ(stride("conv3"), (std::pair<int64_t, int64_t>{1, 1}));
  EXPECT_EQ(stride("downsample.0"), (std::pair<int64_t, int64_t>{2, 2}));
}

TEST(ResNet, ZeroInitResidualZeroesTheLastNormOfEachBlock) {
  ts::models::ResNet r = ts::models::resnet50({.num_classes = 10, .zero_init_residual = true});
  int zeroed = 0;
  for (auto& [name, t] : r.state_dict()) {
    if (name.ends_with("bn3.weight")) {
      EXPECT_EQ(t.abs().max().item<double>(), 0.0) << name;
      ++zeroed;
    } else if (name.ends_with("bn1.weight") || name.ends_with("bn2.weight") || name.ends_with("downsample.1.weight")) {
      EXPECT_EQ(t.min().item<double>(), 1.0) << name;
    }
  }
  EXPECT_EQ(zeroed, 16);
  ts::models::ResNet r18 = ts::models::resnet18({.zero_init_residual = true});
  EXPECT_EQ(r18.state_dict().at("layer3.1.bn2.weight").abs().max().item<double>(), 0.0);
  EXPECT_EQ(ts::models::resnet50().state_dict().at("layer1.0.bn3.weight").min().item<double>(), 1.0);
}

TEST(ResNet, Resnet50ForwardInTrainAndEvalModeAndChannelsLast) {
  ts::manual_seed(0);
  ts::models::ResNet r = ts::models::resnet50(10);
  ts::Tensor x = ts::randn({2, 3, 64, 64});
  ts::Tensor x_cl = x.contiguous(ts::MemoryFormat::ChannelsLast);
  ASSERT_TRUE(x_cl.is_contiguous(ts::MemoryFormat::ChannelsLast));
  ASSERT_FALSE(x_cl.is_contiguous());

  r.eval();
  ts::Tensor y_eval = r(x);
  ASSERT_EQ(y_eval.sizes(), ts::Shape({2, 10}));
  EXPECT_TRUE(y_eval.isfinite().all().item<bool>());
  EXPECT_TRUE(ts::testing::all_close(r(x_cl), y_eval, {1e-4, 1e-4}));

  // Training mode: batch statistics, and the running statistics move. Run NCHW and NHWC from the same
  // starting state.
  ts::nn::StateDict start;
  for (auto& [k, t] : r.state_dict()) start[k] = t.clone();
  r.train();
  ts::Tensor y_train = r(x);
  ASSERT_EQ(y_train.sizes(), ts::Shape({2, 10}));
  EXPECT_TRUE(y_train.isfinite().all().item<bool>());
  EXPECT_FALSE(ts::allclose(y_train, y_eval, 1e-3, 1e-3));
  EXPECT_FALSE(ts::equal(r.bn1.running_mean, start.at("bn1.running_mean")));
  ts::nn::StateDict after_nchw = r.state_dict();
  ts::Tensor rm_nchw = after_nchw.at("layer3.2.bn2.running_mean").clone();
  r.load_state_dict(start);
  ts::Tensor y_train_cl = r(x_cl);
  // Batch statistics of as few as 8 values per channel (layer4 at 2x2, batch 2), 53 batch norms deep,
  // amplify the last bits: oneDNN's float32 statistics (Note [oneDNN where it wins]) summed in another
  // order per layout part the two by up to ~2e-4 here, where a layout bug would part them by O(1).
  EXPECT_TRUE(ts::testing::all_close(y_train_cl, y_train, {1e-3, 1e-3}));
  EXPECT_TRUE(ts::testing::all_close(r.state_dict().at("layer3.2.bn2.running_mean"), rm_nchw, {1e-4, 1e-5}));
}

// The in-place ReLUs and residual adds (Note [In-place activations]) give the gradients of the
// out-of-place composition: NCHW and channels-last inputs take different memory paths through them.
TEST(ResNet, Resnet50BackwardReachesEveryParameterAndIsLayoutIndependent) {
  ts::manual_seed(1);
  ts::models::ResNet r = ts::models::resnet50(5);
  r.to(ts::kFloat64);
  r.train();
  ts::Tensor x = ts::randn({2, 3, 64, 64}, ts::kFloat64);
  ts::Tensor y = ts::tensor(std::vector<int64_t>{1, 3});
  std::map<std::string, ts::Tensor> grads[2];
  for (int cl = 0; cl < 2; ++cl) {
    r.zero_grad();
    ts::Tensor input = cl ? x.contiguous(ts::MemoryFormat::ChannelsLast) : x;
    ts::nn::functional::cross_entropy(r(input), y).backward();
    for (auto& [name, p] : r.named_parameters()) {
      ASSERT_TRUE(p.grad().defined()) << name;
      grads[cl][name] = p.grad().clone();
    }
  }
  // The out-of-place composition, from the same starting state (the forwards above moved the running
  // statistics, which training mode does not read).
  r.zero_grad();
  ts::Tensor ref_out = resnet_reference(r, x);
  ts::nn::functional::cross_entropy(ref_out, y).backward();
  {
    ts::NoGradGuard ng;
    r.eval();
    EXPECT_TRUE(ts::testing::all_close(r(x), resnet_reference(r, x), {1e-10, 1e-10}));
  }
  for (auto& [name, p] : r.named_parameters())
    EXPECT_TRUE(ts::testing::all_close(grads[0][name], p.grad(), {1e-7, 1e-9})) << name << " against out-of-place";
  for (auto& [name, g] : grads[0]) {
    EXPECT_TRUE(g.isfinite().all().item<bool>()) << name;
    EXPECT_TRUE(ts::testing::all_close(grads[1][name], g, {1e-7, 1e-9})) << name;
  }
  EXPECT_GT(grads[0]["conv1.weight"].abs().sum().item<double>(), 0);
}

TEST(ResNet, ChannelsLastInputStaysChannelsLastThroughTheBlocks) {
  ts::manual_seed(2);
  ts::models::ResNet r = ts::models::resnet50(10);
  r.eval();
  ts::Tensor x = ts::randn({2, 3, 64, 64}).contiguous(ts::MemoryFormat::ChannelsLast);
  ts::Tensor h = ts::max_pool2d(r.bn1(r.conv1(x)).relu_(), 3, 2, 1);
  EXPECT_TRUE(h.is_contiguous(ts::MemoryFormat::ChannelsLast));
  for (ts::nn::Sequential* layer : {&r.layer1, &r.layer2, &r.layer3, &r.layer4}) {
    h = (*layer)(h);
    EXPECT_TRUE(h.is_contiguous(ts::MemoryFormat::ChannelsLast)) << "after a stage of output channels " << h.size(1);
  }
}

TEST(ResNet, BasicBlockConstructorKeepsItsMeaning) {
  // ResNet(blocks, num_classes, in_channels, small_input) is the basic-block family.
  ts::models::ResNet r({1, 1, 1, 1}, 7, 1, true);
  EXPECT_EQ(r.fc.in_features, 512);
  EXPECT_EQ(r.conv1.weight.sizes(), ts::Shape({64, 1, 3, 3}));
  r.eval();
  EXPECT_EQ(r(ts::randn({2, 1, 28, 28})).sizes(), ts::Shape({2, 7}));
  EXPECT_THROW(ts::models::ResNet({2, 2, 2}), ts::ValueError);
}
