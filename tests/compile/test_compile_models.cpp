// Every model of the tree compiled (backend eager) against its eager run on the CPU: forwards
// bitwise, gradients bitwise (the graph runs the same ops in the same order, so autograd accumulates
// in the same order), and 20 training steps whose losses and final weights match bitwise.
#include <gtest/gtest.h>

#include <functional>
#include <memory>

#include "common/test_util.h"
#include "compile/bitwise.h"
#include "tessera/compile.h"
#include "tessera/models.h"
#include "tessera/optim.h"

namespace ts = tessera;

namespace {

using tessera::testing::bitwise;

ts::models::GPT2Config small_gpt() {
  ts::models::GPT2Config cfg;
  cfg.n_layer = 2, cfg.n_head = 2, cfg.n_embd = 32, cfg.n_positions = 16, cfg.vocab_size = 64;
  return cfg;
}

// Two copies of a model with the same weights: one runs compiled, one eagerly.
// joint: whether the backward must be a captured graph (Note [Joint graph]); otherwise autograd
// differentiates the replayed forward.
template <class M, class Make>
void expect_forward_and_gradients_equal(const char* name, Make make, const std::function<ts::Tensor()>& input,
                                        bool training, bool joint = true) {
  ts::manual_seed(7);
  M a = make();
  ts::manual_seed(7);
  M b = make();
  a.train(training);
  b.train(training);
  auto f = ts::compile(a);
  for (int call = 0; call < 3; ++call) {
    ts::Tensor x = input();
    ts::manual_seed(50 + call);  // dropout draws the same masks on both sides
    ts::Tensor ya = f(x);
    ts::manual_seed(50 + call);
    ts::Tensor yb = b.forward(x);
    ASSERT_TRUE(bitwise(ya, yb)) << name << " call " << call;
    ya.to(ts::kFloat32).pow(2).sum().backward();
    yb.to(ts::kFloat32).pow(2).sum().backward();
    auto pa = a.named_parameters(), pb = b.named_parameters();
    for (size_t i = 0; i < pa.size(); ++i) {
      if (!pb[i].second.grad().defined()) continue;
      ASSERT_TRUE(bitwise(pa[i].second.grad(), pb[i].second.grad())) << name << " call " << call << " " << pa[i].first;
    }
    a.zero_grad();
    b.zero_grad();
    auto ba = a.named_buffers(), bb = b.named_buffers();  // batch norm's running statistics
    for (size_t i = 0; i < ba.size(); ++i) ASSERT_TRUE(bitwise(ba[i].second, bb[i].second)) << name << " " << ba[i].first;
  }
  const ts::CompileStats s = f.stats();
  EXPECT_EQ(s.captures, 1) << name;
  EXPECT_EQ(s.graph_calls, 2) << name << ": " << (s.eager_calls ? "ran eagerly" : "");
  EXPECT_EQ(s.joint_variants, joint ? 1 : 0) << name << ": "
                                             << (s.no_backward_reasons.empty() ? "" : s.no_backward_reasons[0]);
}

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

// GPT2::loss compiled against eager on two copies of one model: `calls` calls of (1 or 2, T) tokens,
// the loss and every parameter gradient bitwise equal, with a captured backward graph.
void expect_gpt2_loss_equal(const ts::models::GPT2Config& cfg, int64_t batch, int64_t seq, int64_t chunk_rows,
                            int calls) {
  ts::manual_seed(9);
  ts::models::GPT2 a(cfg);
  ts::manual_seed(9);
  ts::models::GPT2 b(cfg);
  auto loss = ts::compile([&](const ts::Tensor& idx, const ts::Tensor& tgt) { return a.loss(idx, tgt, chunk_rows); });
  for (int call = 0; call < calls; ++call) {
    ts::Tensor idx = ts::randint(0, cfg.vocab_size, {batch, seq}, ts::kInt64);
    ts::Tensor tgt = ts::randint(0, cfg.vocab_size, {batch, seq}, ts::kInt64);
    ts::manual_seed(40 + call);  // dropout draws the same masks on both sides
    ts::Tensor la = loss(idx, tgt);
    ts::manual_seed(40 + call);
    ts::Tensor lb = b.loss(idx, tgt, chunk_rows);
    ASSERT_TRUE(bitwise(la, lb)) << "call " << call;
    la.backward();
    lb.backward();
    auto pa = a.named_parameters(), pb = b.named_parameters();
    for (size_t i = 0; i < pa.size(); ++i)
      ASSERT_TRUE(bitwise(pa[i].second.grad(), pb[i].second.grad())) << "call " << call << " " << pa[i].first;
    a.zero_grad();
    b.zero_grad();
  }
  const ts::CompileStats s = loss.stats();
  EXPECT_EQ(s.graph_calls, calls - 1);
  EXPECT_EQ(s.joint_variants, 1) << (s.no_backward_reasons.empty() ? "" : s.no_backward_reasons[0]);
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
