// The determinism switch (tessera/determinism.h): its state and, on the CPU, two training runs with it on giving bitwise-equal losses and weights.
#include <gtest/gtest.h>

#include <vector>

#include "common/test_util.h"
#include "tessera/tessera.h"

namespace ts = tessera;
using namespace tessera::testing;

namespace {

TEST(Determinism, SwitchRoundTrips) {
  const bool before = ts::is_deterministic();
  ts::set_deterministic(true);
  EXPECT_TRUE(ts::is_deterministic());
  ts::set_deterministic(false);
  EXPECT_FALSE(ts::is_deterministic());
  ts::set_deterministic(before);
}

std::vector<double> train(uint64_t seed) {
  ts::manual_seed(seed);
  ts::nn::Sequential net(ts::nn::Linear(20, 32), ts::nn::ReLU(), ts::nn::Linear(32, 5));
  ts::optim::SGD opt(net.parameters(), {.lr = 0.1, .momentum = 0.9});
  const ts::Tensor x = test_data({64, 20}, ts::kFloat32, 3);
  const ts::Tensor y = ts::randint(0, 5, {64});
  std::vector<double> losses;
  for (int step = 0; step < 5; ++step) {
    opt.zero_grad();
    ts::Tensor loss = ts::nn::functional::cross_entropy(net.forward(x), y);
    loss.backward();
    opt.step();
    losses.push_back(loss.item<double>());
  }
  for (const ts::Tensor& p : net.parameters()) losses.push_back(p.sum().item<double>());
  return losses;
}

TEST(Determinism, TwoTrainingRunsGiveBitwiseEqualLosses) {
  ts::set_deterministic(true);
  const std::vector<double> a = train(7), b = train(7);
  ts::set_deterministic(false);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i], b[i]) << "at " << i;
}

}  // namespace
