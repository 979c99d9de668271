// Every model of the tree compiled (backend eager) against its eager run on the CPU: forwards
// bitwise, gradients bitwise (the graph runs the same ops in the same order, so autograd accumulates
// in the same order), and 20 training steps whose losses and final weights match bitwise. With the
// default options, so the backward graphs recompute what the min-cut partition chooses (Note
// [Min-cut partition]); the helpers are model_testing.h's.
#include <gtest/gtest.h>

#include <functional>
#include <memory>

#include "common/test_util.h"
#include "compile/bitwise.h"
#include "compile/model_testing.h"
#include "tessera/compile.h"
#include "tessera/models.h"
#include "tessera/optim.h"

namespace ts = tessera;

namespace {

using tessera::testing::bitwise;
using tessera::testing::expect_forward_and_gradients_equal;
using tessera::testing::expect_gpt2_loss_equal;
using tessera::testing::small_gpt;

TEST(CompileModels, MLP) {
  expect_forward_and_gradients_equal<ts::models::MLP>(
      "mlp", [] { return ts::models::MLP(20, {32, 16}, 5); }, [] { return ts::randn({8, 20}); }, true);
}

TEST(CompileModels, CNN) {
  expect_forward_and_gradients_equal<ts::models::CNN>(
      "cnn", [] { return ts::models::CNN(1, 10, 28); }, [] { return ts::randn({2, 1, 28, 28}); }, true);
}

TEST(CompileModels, ResNet18TrainAndEval) {
  auto make = [] { return ts::models::resnet18(10, 3, true); };
  auto input = [] { return ts::randn({2, 3, 16, 16}); };
  expect_forward_and_gradients_equal<ts::models::ResNet>("resnet18 train", make, input, true);
  expect_forward_and_gradients_equal<ts::models::ResNet>("resnet18 eval", make, input, false);
}

TEST(CompileModels, ResNet50) {
  expect_forward_and_gradients_equal<ts::models::ResNet>(
      "resnet50", [] { return ts::models::resnet50(10, 3, true); }, [] { return ts::randn({1, 3, 16, 16}); }, true);
}

TEST(CompileModels, GPT2SmallConfigWithDropout) {
  expect_forward_and_gradients_equal<ts::models::GPT2>(
      "gpt2", [] { return ts::models::GPT2(small_gpt()); }, [] { return ts::randint(0, 64, {2, 12}, ts::kInt64); },
      true);
}

TEST(CompileModels, GPT2UnfusedPath) {
  expect_forward_and_gradients_equal<ts::models::GPT2>(
      "gpt2 unfused",
      [] {
        ts::models::GPT2Config c = small_gpt();
        c.fused = false;
        return ts::models::GPT2(c);
      },
      [] { return ts::randint(0, 64, {2, 12}, ts::kInt64); }, true);
}

TEST(CompileModels, GPT2LossThroughTheChunkedClassifier) {
  // GPT2::loss: the chunked classifier + cross-entropy (linear_cross_entropy), whose forward computes
  // the gradients that its backward scales; with the joint graph they are outputs of the forward graph.
  expect_gpt2_loss_equal(small_gpt(), 2, 12, /*chunk_rows=*/8, 3);
}

TEST(CompileModels, GPT2_124MConfigAtASmallBatch) {
  // The full GPT-2 small configuration (124M parameters, dropout 0.1) on (1, 8) tokens: the capture
  // and one graph call (11 s on two cores).
  expect_gpt2_loss_equal(ts::models::GPT2Config{}, 1, 8, /*chunk_rows=*/16384, 2);
}

TEST(CompileModels, TwentyTrainingStepsFollowEagerBitwise) {
  ts::manual_seed(3);
  ts::models::MLP a(20, {32}, 5);
  ts::manual_seed(3);
  ts::models::MLP b(20, {32}, 5);
  ts::optim::SGD oa(a.parameters(), ts::optim::SGDOptions{.lr = 0.05, .momentum = 0.9});
  ts::optim::SGD ob(b.parameters(), ts::optim::SGDOptions{.lr = 0.05, .momentum = 0.9});
  auto loss_a = ts::compile([&](const ts::Tensor& x, const ts::Tensor& y) {
    return ts::nn::functional::cross_entropy(a.forward(x), y);
  });
  for (int step = 0; step < 20; ++step) {
    ts::Tensor x = ts::randn({16, 20}), y = ts::randint(0, 5, {16}, ts::kInt64);
    oa.zero_grad();
    ob.zero_grad();
    ts::Tensor la = loss_a(x, y);
    ts::Tensor lb = ts::nn::functional::cross_entropy(b.forward(x), y);
    ASSERT_TRUE(bitwise(la, lb)) << "step " << step;
    la.backward();
    lb.backward();
    oa.step();
    ob.step();
  }
  auto pa = a.parameters(), pb = b.parameters();
  for (size_t i = 0; i < pa.size(); ++i) EXPECT_TRUE(bitwise(pa[i], pb[i])) << "parameter " << i;
  EXPECT_EQ(loss_a.stats().graph_calls, 19);
}

}  // namespace
