// Conv1d, Conv2d, ConvTranspose2d and the pooling modules against PyTorch
// (tests/nn/torch_reference.py). They run over the functional convolution and pooling ops; where
// those are not built into the library yet (they raise NotImplementedError), these tests skip.
#include "nn/nn_test_util.h"

namespace ts = tessera;
namespace nn = tessera::nn;
using namespace tessera::nn_testing;

namespace {
bool conv_ops_available() {
  try {
    ts::conv2d(ts::zeros({1, 1, 2, 2}), ts::zeros({1, 1, 1, 1}));
    ts::max_pool2d(ts::zeros({1, 1, 2, 2}), 2);
    return true;
  } catch (const ts::NotImplementedError&) {
    return false;
  }
}
#define REQUIRE_CONV_OPS() \
  if (!conv_ops_available()) GTEST_SKIP() << "the convolution and pooling ops are not implemented in this build"
}  // namespace

TEST(NNConvModules, ParameterShapesNamesAndInit) {
  // Construction needs no conv op: these run in every build.
  nn::Conv2d c(4, 6, {3, 2}, 1, 0, 1, /*groups=*/2);
  EXPECT_EQ(c.weight.sizes(), (ts::Shape{6, 2, 3, 2}));
  EXPECT_EQ(c.bias.sizes(), (ts::Shape{6}));
  const double bound = 1.0 / std::sqrt(2.0 * 3 * 2);  // fan_in = C_in / groups * KH * KW
  EXPECT_LE(c.weight.abs().max().item<double>(), bound);
  EXPECT_LE(c.bias.abs().max().item<double>(), bound);
  nn::ConvTranspose2d t(4, 6, 3, 2, 1, 1, /*groups=*/2);
  EXPECT_EQ(t.weight.sizes(), (ts::Shape{4, 3, 3, 3}));
  nn::Conv1d c1(4, 6, 3, 2, 1, 1, 2, /*bias=*/false);
  EXPECT_EQ(c1.weight.sizes(), (ts::Shape{6, 2, 3}));
  EXPECT_EQ(c1.parameters().size(), 1u);
  EXPECT_THROW(nn::Conv2d(3, 4, 3, 1, 0, 1, 2), ts::ValueError);  // 3 channels, 2 groups
  EXPECT_THROW(nn::ConvTranspose2d(2, 2, 3, 1, 0, /*output_padding=*/1), ts::ValueError);
  EXPECT_EQ(c.repr(), "Conv2d(4, 6, kernel_size=(3, 2), stride=(1, 1), groups=2)");
  EXPECT_EQ(nn::MaxPool2d(2).stride.h, 2);
}

TEST(NNConvModules, ConvolutionsMatchTorch) {
  REQUIRE_CONV_OPS();
  nn::Conv1d c1(4, 6, 3, 2, 1, 1, 2);
  c1.to(ts::kFloat64);
  c1.load_state_dict(state("conv1d"));
  EXPECT_TRUE(close64(c1(in("conv1d", "x")), out("conv1d", "y")));
  nn::Conv2d c2(3, 4, {3, 2}, {2, 1}, 1, {1, 2});
  c2.to(ts::kFloat64);
  c2.load_state_dict(state("conv2d"));
  EXPECT_TRUE(close64(c2(in("conv2d", "x")), out("conv2d", "y")));
  nn::ConvTranspose2d ct(4, 6, 3, 2, 1, 1, 2);
  ct.to(ts::kFloat64);
  ct.load_state_dict(state("conv_t2d"));
  EXPECT_TRUE(close64(ct(in("conv_t2d", "x")), out("conv_t2d", "y")));
}

TEST(NNConvModules, PoolingMatchesTorch) {
  REQUIRE_CONV_OPS();
  ts::Tensor x = in("pool", "x");
  EXPECT_TRUE(close64(nn::MaxPool2d(3, 2, 1)(x), out("pool", "max")));
  EXPECT_TRUE(close64(nn::MaxPool2d(2, std::nullopt, 0, 1, /*ceil_mode=*/true)(x), out("pool", "max_ceil")));
  EXPECT_TRUE(close64(nn::AvgPool2d(3, 2, 1, false, /*count_include_pad=*/false)(x), out("pool", "avg")));
  EXPECT_TRUE(close64(nn::AvgPool2d(2, 1, 1)(x), out("pool", "avg_pad")));
  EXPECT_TRUE(close64(nn::AdaptiveAvgPool2d({3, 5})(x), out("pool", "adaptive")));
}

TEST(NNConvModules, SmallCnnOfTheApiSketch) {
  REQUIRE_CONV_OPS();
  struct Net : nn::Module {
    nn::Conv2d conv1{1, 4, 3}, conv2{4, 8, 3};
    nn::Linear fc1{8 * 5 * 5, 16}, fc2{16, 10};
    Net() { register_modules({{"conv1", conv1}, {"conv2", conv2}, {"fc1", fc1}, {"fc2", fc2}}); }
    ts::Tensor forward(ts::Tensor x) override {
      x = ts::max_pool2d(conv1(x).relu(), 2);
      x = ts::max_pool2d(conv2(x).relu(), 2);
      return fc2(fc1(x.flatten(1)).relu());
    }
  } net;
  EXPECT_EQ(net(ts::randn({2, 1, 28, 28})).sizes(), (ts::Shape{2, 10}));
  EXPECT_EQ(net.state_dict().size(), 8u);
}
