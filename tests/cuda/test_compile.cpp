// ts::compile on the GPU (backend eager): the CPU suite's model checks (tests/compile/) run on CUDA.
// The graph replays the same CUDA kernels in the same order as the eager run, so forwards and
// gradients are compared bitwise; the joint graph's backward (Note [Joint graph]) too.
#include <gtest/gtest.h>

#include "common/test_util.h"
#include "compile/bitwise.h"
#include "tessera/compile.h"
#include "tessera/models.h"

namespace ts = tessera;

namespace {

using tessera::testing::bitwise;

template <class M, class Make>
void expect_equal_on_cuda(const char* name, Make make, const std::function<ts::Tensor()>& input, bool joint) {
  ts::manual_seed(11);
  M a = make();
  ts::manual_seed(11);
  M b = make();
  a.to(ts::Device::cuda());
  b.to(ts::Device::cuda());
  a.train(true);
  b.train(true);
  auto f = ts::compile(a);
  for (int call = 0; call < 3; ++call) {
    ts::Tensor x = input().to(ts::Device::cuda());
    ts::manual_seed(70 + call);
    ts::Tensor ya = f(x);
    ts::manual_seed(70 + call);
    ts::Tensor yb = b.forward(x);
    ASSERT_TRUE(bitwise(ya, yb)) << name << " call " << call;
    ya.to(ts::kFloat32).pow(2).sum().backward();
    yb.to(ts::kFloat32).pow(2).sum().backward();
    auto pa = a.named_parameters(), pb = b.named_parameters();
    for (size_t i = 0; i < pa.size(); ++i)
      if (pb[i].second.grad().defined())
        ASSERT_TRUE(bitwise(pa[i].second.grad(), pb[i].second.grad())) << name << " " << pa[i].first;
    a.zero_grad();
    b.zero_grad();
  }
  EXPECT_EQ(f.stats().graph_calls, 2) << name;
  EXPECT_EQ(f.stats().joint_variants, joint ? 1 : 0) << name;
}

TEST(CudaCompile, MLP) {
  TS_REQUIRE_GPU();
  expect_equal_on_cuda<ts::models::MLP>(
      "mlp", [] { return ts::models::MLP(64, {128, 64}, 10); }, [] { return ts::randn({32, 64}); }, true);
}

TEST(CudaCompile, ResNet18) {
  TS_REQUIRE_GPU();
  expect_equal_on_cuda<ts::models::ResNet>(
      "resnet18", [] { return ts::models::resnet18(10, 3, true); }, [] { return ts::randn({4, 3, 32, 32}); }, true);
}

TEST(CudaCompile, GPT2Unfused) {
  TS_REQUIRE_GPU();
  expect_equal_on_cuda<ts::models::GPT2>(
      "gpt2",
      [] {
        ts::models::GPT2Config c;
        c.n_layer = 2, c.n_head = 4, c.n_embd = 64, c.n_positions = 64, c.vocab_size = 128, c.fused = false;
        return ts::models::GPT2(c);
      },
      [] { return ts::randint(0, 128, {2, 32}, ts::kInt64); }, true);
}

}  // namespace
