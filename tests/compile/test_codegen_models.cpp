// Every model of the tree through the codegen backend (fusion, decompositions, conv + batch-norm
// folding, generated CPU kernels) against its eager run: forwards and gradients within the dtype's
// tolerance (tessera::testing::close; generated kernels round and add in their own order), three calls
// (the capture, then the graph twice), batch-norm running statistics after each, and inference under
// no_grad, where the fused plan runs every call.
#include <gtest/gtest.h>

#include <functional>

#include "common/test_util.h"
#include "compile/codegen_testing.h"
#include "tessera/compile.h"
#include "tessera/models.h"

namespace ts = tessera;
using ts::testing::close;

namespace {

ts::models::GPT2Config small_gpt(bool fused) {
  ts::models::GPT2Config cfg;
  cfg.n_layer = 2, cfg.n_head = 2, cfg.n_embd = 32, cfg.n_positions = 16, cfg.vocab_size = 64, cfg.fused = fused;
  return cfg;
}

template <class M, class Make>
void expect_close_to_eager(const char* name, Make make, const std::function<ts::Tensor()>& input, bool training,
                           bool kernels = true) {
  ts::manual_seed(7);
  M a = make();
  ts::manual_seed(7);
  M b = make();
  a.train(training);
  b.train(training);
  auto f = ts::compile(a, ts::testing::codegen_options());
  for (int call = 0; call < 3; ++call) {
    ts::Tensor x = input();
    ts::manual_seed(50 + call);  // dropout draws the same masks on both sides
    ts::Tensor ya = f(x);
    ts::manual_seed(50 + call);
    ts::Tensor yb = b.forward(x);
    ASSERT_TRUE(close(ya, yb)) << name << " call " << call;
    ya.to(ts::kFloat32).pow(2).mean().backward();
    yb.to(ts::kFloat32).pow(2).mean().backward();
    auto pa = a.named_parameters(), pb = b.named_parameters();
    for (size_t i = 0; i < pa.size(); ++i) {
      if (!pb[i].second.grad().defined()) continue;
      ASSERT_TRUE(pa[i].second.grad().defined()) << name << " " << pa[i].first;
      EXPECT_TRUE(close(pa[i].second.grad(), pb[i].second.grad())) << name << " call " << call << " " << pa[i].first;
    }
    a.zero_grad();
    b.zero_grad();
    auto ba = a.named_buffers(), bb = b.named_buffers();
    for (size_t i = 0; i < ba.size(); ++i)
      if (ba[i].second.is_floating_point()) EXPECT_TRUE(close(ba[i].second, bb[i].second)) << name << " " << ba[i].first;
  }
  // The MLP has nothing to fuse: a ReLU between two library GEMMs (with their bias epilogues).
  EXPECT_EQ(f.stats().kernels > 0, kernels) << name;
  EXPECT_EQ(f.stats().eager_calls, 0) << name;
  // Inference: the fused plan on every call.
  a.eval();
  b.eval();
  ts::NoGradGuard no_grad;
  auto g = ts::compile(a, ts::testing::codegen_options());
  ts::Tensor x = input();
  g(x);
  EXPECT_TRUE(close(g(x), b.forward(x))) << name << " inference";
}

TEST(CodegenModels, MLP) {
  expect_close_to_eager<ts::models::MLP>("mlp", [] { return ts::models::MLP(20, {32, 16}, 5); },
                                         [] { return ts::randn({8, 20}); }, true, /*kernels=*/false);
}

TEST(CodegenModels, CNN) {
  expect_close_to_eager<ts::models::CNN>("cnn", [] { return ts::models::CNN(1, 10, 28); },
                                         [] { return ts::randn({2, 1, 28, 28}); }, true);
}

TEST(CodegenModels, ResNet18) {
  expect_close_to_eager<ts::models::ResNet>("resnet18", [] { return ts::models::resnet18(10, 3, true); },
                                            [] { return ts::randn({2, 3, 16, 16}); }, true);
}

TEST(CodegenModels, ResNet50) {
  expect_close_to_eager<ts::models::ResNet>("resnet50", [] { return ts::models::resnet50(10, 3, true); },
                                            [] { return ts::randn({1, 3, 16, 16}); }, true);
}

TEST(CodegenModels, GPT2FusedAndUnfusedWithDropout) {
  for (bool fused : {true, false})
    expect_close_to_eager<ts::models::GPT2>(fused ? "gpt2" : "gpt2 unfused",
                                            [fused] { return ts::models::GPT2(small_gpt(fused)); },
                                            [] { return ts::randint(0, 64, {2, 12}, ts::kInt64); }, true);
}

}  // namespace
