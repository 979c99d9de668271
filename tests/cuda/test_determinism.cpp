// The determinism switch on the GPU (tessera/determinism.h): with it on, max_pool2d's backward over
// overlapping windows gathers in a fixed order (bitwise equal to the CPU in float32, any layout), cuDNN
// convolutions keep to deterministic algorithms (two runs bitwise equal), and two GPU training runs of
// a small CNN give bitwise-equal losses. Without a GPU every test skips.
#include <gtest/gtest.h>

#include <vector>

#include "common/test_util.h"
#include "tessera/tessera.h"

namespace ts = tessera;
using namespace tessera::testing;

namespace {

// Sets the switch for one scope.
struct Deterministic {
  bool before = ts::is_deterministic();
  Deterministic() { ts::set_deterministic(true); }
  ~Deterministic() { ts::set_deterministic(before); }
};

bool bitwise_equal(const ts::Tensor& a, const ts::Tensor& b) {
  return a.sizes() == b.sizes() && a.dtype() == b.dtype() &&
         ts::equal(a.cpu().contiguous(), b.cpu().contiguous());
}

TEST(CudaDeterminism, MaxPoolBackwardGathersLikeTheCpu) {
  TS_REQUIRE_GPU();
  Deterministic on;
  for (bool channels_last : {false, true}) {
    for (ts::DType d : {ts::kFloat32, ts::kBFloat16}) {
      SCOPED_TRACE(std::string(channels_last ? "channels-last " : "NCHW ") + ts::dtype_name(d));
      ts::Tensor x = test_data({2, 5, 17, 13}, d, 3);
      if (channels_last) x = x.contiguous(ts::MemoryFormat::ChannelsLast);
      // 3x3 windows at stride 2 with padding overlap, as ResNet's stem; dilation 2 in the second case.
      for (int64_t dil : {1, 2}) {
        ts::Tensor xc = x.clone().requires_grad_(), xg = x.cuda().requires_grad_();
        ts::Tensor yc = ts::max_pool2d(xc, 3, ts::IntPair(2), 1, dil);
        ts::Tensor yg = ts::max_pool2d(xg, 3, ts::IntPair(2), 1, dil);
        const ts::Tensor g = test_data(yc.sizes(), d, 5);
        const ts::Tensor dc = ts::autograd::grad({yc}, {xc}, {g})[0];
        const ts::Tensor dg1 = ts::autograd::grad({yg}, {xg}, {g.cuda()}, /*retain_graph=*/true)[0];
        const ts::Tensor dg2 = ts::autograd::grad({yg}, {xg}, {g.cuda()})[0];
        EXPECT_TRUE(bitwise_equal(dg1, dg2));
        if (d == ts::kFloat32) EXPECT_TRUE(bitwise_equal(dg1, dc));
        else EXPECT_TRUE(all_close(dg1.cpu(), dc, tolerance_for(d)));
      }
    }
  }
}

TEST(CudaDeterminism, ConvolutionGradientsRepeatBitwise) {
  TS_REQUIRE_GPU();
  Deterministic on;
  const ts::Tensor x = test_data({8, 16, 20, 20}, ts::kFloat32, 7).cuda();
  const ts::Tensor w = test_data({32, 16, 3, 3}, ts::kFloat32, 8).cuda();
  auto run = [&] {
    ts::Tensor xi = x.clone().requires_grad_(), wi = w.clone().requires_grad_();
    ts::Tensor y = ts::conv2d(xi, wi, std::nullopt, {1, 1}, {1, 1});
    return ts::autograd::grad({(y * y).sum()}, {xi, wi});
  };
  const std::vector<ts::Tensor> a = run(), b = run();
  EXPECT_TRUE(bitwise_equal(a[0], b[0]));
  EXPECT_TRUE(bitwise_equal(a[1], b[1]));
}

std::vector<double> train_cnn() {
  ts::manual_seed(11);
  ts::models::CNN net(1, 10, 28);
  net.to(ts::Device("cuda"));
  ts::optim::SGD opt(net.parameters(), {.lr = 0.05, .momentum = 0.9});
  const ts::Tensor x = test_data({32, 1, 28, 28}, ts::kFloat32, 12).cuda();
  const ts::Tensor y = ts::randint(0, 10, {32}).cuda();
  std::vector<double> losses;
  for (int step = 0; step < 5; ++step) {
    opt.zero_grad();
    ts::Tensor loss = ts::nn::functional::cross_entropy(net.forward(x), y);
    loss.backward();
    opt.step();
    losses.push_back(loss.item<double>());
  }
  return losses;
}

TEST(CudaDeterminism, TwoCnnTrainingRunsGiveBitwiseEqualLosses) {
  TS_REQUIRE_GPU();
  Deterministic on;
  const std::vector<double> a = train_cnn(), b = train_cnn();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i], b[i]) << "step " << i;
}

}  // namespace
