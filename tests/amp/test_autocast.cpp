// Autocast on the CPU with bfloat16 (and float16): the policy table (low-precision matrix products
// and convolutions, float32 softmax / norms / losses / overflow-prone math, promotion of mixed
// inputs), float64 and integer inputs left alone, nesting and disabling, per-thread state, the cast
// cache (one cast per weight per outermost scope), gradients through the casts, and errors.
#include <thread>

#include "common/test_util.h"
#include "ops/autocast_hook.h"
#include "tessera/amp.h"

namespace ts = tessera;
namespace F = tessera::nn::functional;
using namespace tessera::testing;

namespace {

ts::Tensor leaf(const ts::Shape& s, uint64_t seed = 1, ts::DType d = ts::kFloat32) {
  return test_data(s, d, seed).requires_grad_();
}

TEST(Autocast, StateAndDefaults) {
  EXPECT_FALSE(ts::amp::is_autocast_enabled(ts::DeviceType::CPU));
  EXPECT_EQ(ts::amp::get_autocast_dtype(ts::DeviceType::CPU), ts::kBFloat16);
  EXPECT_EQ(ts::amp::get_autocast_dtype(ts::DeviceType::CUDA), ts::kFloat16);
  {
    ts::amp::autocast guard("cpu");
    EXPECT_TRUE(ts::amp::is_autocast_enabled(ts::DeviceType::CPU));
    EXPECT_TRUE(ts::amp::is_autocast_enabled("cpu"));
    EXPECT_FALSE(ts::amp::is_autocast_enabled(ts::DeviceType::CUDA));
    EXPECT_EQ(ts::amp::get_autocast_dtype(ts::DeviceType::CPU), ts::kBFloat16);
  }
  EXPECT_FALSE(ts::amp::is_autocast_enabled(ts::DeviceType::CPU));
}

TEST(Autocast, PolicyTable) {
  EXPECT_EQ(ts::amp::autocast_policy("mm"), ts::amp::CastPolicy::LowerPrecision);
  EXPECT_EQ(ts::amp::autocast_policy("conv2d"), ts::amp::CastPolicy::LowerPrecision);
  EXPECT_EQ(ts::amp::autocast_policy("softmax"), ts::amp::CastPolicy::Float32);
  EXPECT_EQ(ts::amp::autocast_policy("cross_entropy"), ts::amp::CastPolicy::Float32);
  EXPECT_EQ(ts::amp::autocast_policy("cat"), ts::amp::CastPolicy::Promote);
  EXPECT_FALSE(ts::amp::autocast_policy("add").has_value());
  EXPECT_FALSE(ts::amp::autocast_policy("relu").has_value());
}

TEST(Autocast, LowPrecisionOps) {
  ts::Tensor a = test_data({4, 5}, ts::kFloat32, 1), b = test_data({5, 3}, ts::kFloat32, 2);
  ts::Tensor w = test_data({3, 5}, ts::kFloat32, 3), bias = test_data({3}, ts::kFloat32, 4);
  ts::Tensor a3 = test_data({2, 4, 5}, ts::kFloat32, 5), b3 = test_data({2, 5, 3}, ts::kFloat32, 6);
  ts::Tensor img = test_data({1, 2, 6, 6}, ts::kFloat32, 7), k = test_data({3, 2, 3, 3}, ts::kFloat32, 8);
  ts::amp::autocast guard("cpu", ts::kBFloat16);
  EXPECT_EQ(ts::mm(a, b).dtype(), ts::kBFloat16);
  EXPECT_EQ(ts::matmul(a, b).dtype(), ts::kBFloat16);
  EXPECT_EQ(ts::bmm(a3, b3).dtype(), ts::kBFloat16);
  EXPECT_EQ(ts::matmul(a3, b).dtype(), ts::kBFloat16);
  EXPECT_EQ(ts::addmm(test_data({4, 3}, ts::kFloat32), a, b).dtype(), ts::kBFloat16);
  EXPECT_EQ(ts::linear(a, w, bias).dtype(), ts::kBFloat16);
  EXPECT_EQ(F::linear(a, w).dtype(), ts::kBFloat16);
  EXPECT_EQ(ts::conv2d(img, k).dtype(), ts::kBFloat16);
  EXPECT_EQ(ts::einsum("ij,jk->ik", {a, b}).dtype(), ts::kBFloat16);
  ts::Tensor q = test_data({2, 4, 8}, ts::kFloat32, 9);
  EXPECT_EQ(F::scaled_dot_product_attention(q, q, q).dtype(), ts::kBFloat16);
  // Values: the bfloat16 product of the bfloat16-rounded inputs.
  ts::Tensor expect = ts::mm(a.to(ts::kBFloat16), b.to(ts::kBFloat16));
  EXPECT_TRUE(all_close(ts::mm(a, b), expect, {0, 0}));
}

TEST(Autocast, Float32Ops) {
  ts::Tensor x = test_data({4, 6}, ts::kBFloat16, 1);
  ts::Tensor y = test_data({4, 6}, ts::kBFloat16, 2);
  ts::Tensor target = ts::tensor(std::vector<int64_t>{0, 5, 2, 3}, {4});
  ts::amp::autocast guard("cpu");
  EXPECT_EQ(ts::softmax(x, 1).dtype(), ts::kFloat32);
  EXPECT_EQ(ts::log_softmax(x, 1).dtype(), ts::kFloat32);
  EXPECT_EQ(F::softmax(x, -1).dtype(), ts::kFloat32);
  EXPECT_EQ(F::layer_norm(x, {6}).dtype(), ts::kFloat32);
  EXPECT_EQ(F::group_norm(x.reshape({2, 4, 3}), 2).dtype(), ts::kFloat32);
  EXPECT_EQ(F::rms_norm(x, {6}).dtype(), ts::kFloat32);
  EXPECT_EQ(F::cross_entropy(x, target).dtype(), ts::kFloat32);
  EXPECT_EQ(F::nll_loss(ts::log_softmax(x, 1), target).dtype(), ts::kFloat32);
  EXPECT_EQ(F::mse_loss(x, y).dtype(), ts::kFloat32);
  EXPECT_EQ(F::l1_loss(x, y).dtype(), ts::kFloat32);
  EXPECT_EQ(F::smooth_l1_loss(x, y).dtype(), ts::kFloat32);
  EXPECT_EQ(F::binary_cross_entropy_with_logits(x, ts::sigmoid(y)).dtype(), ts::kFloat32);
  EXPECT_EQ(ts::exp(x).dtype(), ts::kFloat32);
  EXPECT_EQ(ts::log(ts::abs(x)).dtype(), ts::kFloat32);
  EXPECT_EQ(ts::pow(x, 2.0).dtype(), ts::kFloat32);
  EXPECT_EQ(ts::sum(x).dtype(), ts::kFloat32);
  EXPECT_EQ(x.sum().dtype(), ts::kFloat32);
  EXPECT_EQ(ts::cumsum(x, 1).dtype(), ts::kFloat32);
  EXPECT_EQ(ts::logsumexp(x, {1}).dtype(), ts::kFloat32);
  EXPECT_EQ(ts::norm(x).dtype(), ts::kFloat32);
  // An explicit dtype wins (PyTorch's fp32_set_opt_dtype only fills a missing one).
  EXPECT_EQ(ts::sum(x, {}, false, ts::kBFloat16).dtype(), ts::kBFloat16);
  EXPECT_EQ(ts::softmax(x, 1, ts::kBFloat16).dtype(), ts::kBFloat16);
  // Ops without a policy run as they are.
  EXPECT_EQ(ts::relu(x).dtype(), ts::kBFloat16);
  EXPECT_EQ((x + y).dtype(), ts::kBFloat16);
  EXPECT_EQ(ts::mean(x).dtype(), ts::kBFloat16);
  // The float32 value is the op on the widened input.
  EXPECT_TRUE(all_close(ts::softmax(x, 1), ts::softmax(x.to(ts::kFloat32), 1), {0, 0}));
}

TEST(Autocast, PromoteMixedInputs) {
  ts::Tensor h = test_data({2, 3}, ts::kBFloat16, 1), f = test_data({2, 3}, ts::kFloat32, 2);
  ts::amp::autocast guard("cpu");
  EXPECT_EQ(ts::cat({h, f}).dtype(), ts::kFloat32);
  EXPECT_EQ(ts::stack({h, f}).dtype(), ts::kFloat32);
  EXPECT_EQ(ts::cat({h, h}).dtype(), ts::kBFloat16);
  EXPECT_EQ(ts::addcmul(h, f, h).dtype(), ts::kFloat32);
  EXPECT_EQ(ts::atan2(h, f).dtype(), ts::kFloat32);
  ts::Tensor idx = ts::tensor(std::vector<int64_t>{0, 1, 0}, {1, 3});
  EXPECT_EQ(ts::scatter_add(h, 0, idx, f.narrow(0, 0, 1)).dtype(), ts::kFloat32);
}

TEST(Autocast, Float64AndIntegersUntouched) {
  ts::Tensor a = test_data({3, 4}, ts::kFloat64, 1), b = test_data({4, 2}, ts::kFloat64, 2);
  ts::Tensor i = test_data({3, 4}, ts::kInt64, 3);
  ts::amp::autocast guard("cpu");
  EXPECT_EQ(ts::mm(a, b).dtype(), ts::kFloat64);
  EXPECT_EQ(ts::softmax(a, 1).dtype(), ts::kFloat64);
  EXPECT_EQ(ts::sum(i).dtype(), ts::kInt64);
  EXPECT_EQ(ts::cat({a, a}).dtype(), ts::kFloat64);
  // float64 is not promoted to: a float64 + bfloat16 cat is the op's own promotion (float64).
  EXPECT_EQ(ts::cat({a, test_data({3, 4}, ts::kBFloat16)}).dtype(), ts::kFloat64);
}

TEST(Autocast, NestingAndDisabling) {
  ts::Tensor a = test_data({4, 5}, ts::kFloat32, 1), b = test_data({5, 3}, ts::kFloat32, 2);
  {
    ts::amp::autocast outer("cpu", ts::kBFloat16);
    EXPECT_EQ(ts::mm(a, b).dtype(), ts::kBFloat16);
    {
      ts::amp::autocast inner("cpu", ts::kFloat16);
      EXPECT_EQ(ts::mm(a, b).dtype(), ts::kFloat16);
      {
        ts::amp::autocast off("cpu", std::nullopt, /*enabled=*/false);
        EXPECT_FALSE(ts::amp::is_autocast_enabled(ts::DeviceType::CPU));
        EXPECT_EQ(ts::mm(a, b).dtype(), ts::kFloat32);
      }
      EXPECT_EQ(ts::mm(a, b).dtype(), ts::kFloat16);
      EXPECT_EQ(ts::amp::get_autocast_dtype(ts::DeviceType::CPU), ts::kFloat16);
    }
    EXPECT_EQ(ts::mm(a, b).dtype(), ts::kBFloat16);
  }
  EXPECT_EQ(ts::mm(a, b).dtype(), ts::kFloat32);
}

TEST(Autocast, OtherDeviceTypeOnly) {
  // A CUDA scope does not touch CPU tensors.
  ts::Tensor a = test_data({4, 5}, ts::kFloat32, 1), b = test_data({5, 3}, ts::kFloat32, 2);
  ts::amp::autocast guard("cuda", ts::kFloat16);
  EXPECT_TRUE(ts::amp::is_autocast_enabled(ts::DeviceType::CUDA));
  EXPECT_EQ(ts::mm(a, b).dtype(), ts::kFloat32);
  EXPECT_EQ(ts::softmax(a.to(ts::kBFloat16), 1).dtype(), ts::kBFloat16);
}

TEST(Autocast, ThreadLocal) {
  ts::Tensor a = test_data({4, 5}, ts::kFloat32, 1), b = test_data({5, 3}, ts::kFloat32, 2);
  ts::amp::autocast guard("cpu");
  ts::DType other = ts::kBFloat16;
  bool other_enabled = true;
  std::thread t([&] {
    other_enabled = ts::amp::is_autocast_enabled(ts::DeviceType::CPU);
    other = ts::mm(a, b).dtype();
  });
  t.join();
  EXPECT_FALSE(other_enabled);
  EXPECT_EQ(other, ts::kFloat32);
  EXPECT_EQ(ts::mm(a, b).dtype(), ts::kBFloat16);
}

TEST(Autocast, CompositeWithoutPolicyAutocastsItsParts) {
  // bilinear is a Promote op in PyTorch's table; with float32 inputs its body runs with autocast
  // excluded, so its matmuls stay float32 ...
  ts::Tensor x1 = test_data({3, 4}, ts::kFloat32, 1), x2 = test_data({3, 5}, ts::kFloat32, 2);
  ts::Tensor w = test_data({2, 4, 5}, ts::kFloat32, 3);
  ts::amp::autocast guard("cpu");
  EXPECT_EQ(F::bilinear(x1, x2, w).dtype(), ts::kFloat32);
  // ... while a composite without a policy (dropout, an MLP written by hand) sees its parts cast.
  ts::nn::Linear lin(4, 3);
  ts::Tensor h = ts::relu(lin.forward(x1));
  EXPECT_EQ(h.dtype(), ts::kBFloat16);
  EXPECT_EQ(F::dropout(h, 0.5, true).dtype(), ts::kBFloat16);
  EXPECT_EQ(F::log_softmax(h, 1).dtype(), ts::kFloat32);
}

TEST(Autocast, CastCache) {
  ts::Tensor w = leaf({3, 5}, 1);
  ts::Tensor x = test_data({4, 5}, ts::kFloat32, 2);
  ts::Tensor no_grad_w = test_data({3, 5}, ts::kFloat32, 3);
  {
    ts::amp::autocast guard("cpu");
    ts::Tensor y1 = ts::linear(x, w);
    EXPECT_EQ(ts::amp::autocast_cache_size(), 1u);
    ts::Tensor y2 = ts::linear(x * 2, w);
    EXPECT_EQ(ts::amp::autocast_cache_size(), 1u);  // the same weight: a hit
    {
      ts::amp::autocast inner("cpu");  // a nested scope keeps the cache
      ts::linear(x, w);
      EXPECT_EQ(ts::amp::autocast_cache_size(), 1u);
    }
    EXPECT_EQ(ts::amp::autocast_cache_size(), 1u);
    // Inputs (not leaves that require grad) are not cached.
    ts::linear(x, no_grad_w);
    EXPECT_EQ(ts::amp::autocast_cache_size(), 1u);
    EXPECT_EQ(y1.dtype(), ts::kBFloat16);
    EXPECT_EQ(y2.dtype(), ts::kBFloat16);
  }
  EXPECT_EQ(ts::amp::autocast_cache_size(), 0u);  // cleared at the outermost exit
}

TEST(Autocast, CastCacheIdentity) {
  // The stage's casts seen through AutocastArgs, as an op sees them: within one scope the same
  // weight gives the same tensor (same storage), after the scope a fresh one.
  ts::Tensor w = leaf({3, 5}, 1);
  ts::Tensor x = test_data({4, 5}, ts::kFloat32, 2);
  ts::Tensor first_cast;
  {
    ts::amp::autocast guard("cpu");
    ts::Tensor y = ts::linear(x, w);  // fills the cache
    ts::AutocastArgs a(ts::OpId::mm, {&x, &w});
    ASSERT_TRUE(static_cast<bool>(a));
    EXPECT_EQ(a[1].dtype(), ts::kBFloat16);
    ts::AutocastArgs b(ts::OpId::linear, {&x, &w, nullptr});
    EXPECT_TRUE(b[1].is_same(a[1]));
    EXPECT_EQ(b[1].data_ptr(), a[1].data_ptr());
    EXPECT_FALSE(b[0].is_same(a[0]));  // x is no leaf that requires grad: cast each time
    EXPECT_FALSE(b.opt(2).has_value());
    first_cast = a[1];
  }
  {
    ts::amp::autocast guard("cpu");
    ts::AutocastArgs c(ts::OpId::mm, {&x, &w});
    EXPECT_FALSE(c[1].is_same(first_cast));
    EXPECT_NE(c[1].data_ptr(), first_cast.data_ptr());
  }
}

TEST(Autocast, CacheDisabled) {
  ts::Tensor w = leaf({3, 5}, 1);
  ts::Tensor x = test_data({4, 5}, ts::kFloat32, 2);
  ts::amp::autocast guard("cpu", std::nullopt, true, /*cache_enabled=*/false);
  ts::linear(x, w);
  EXPECT_EQ(ts::amp::autocast_cache_size(), 0u);
}

TEST(Autocast, GradientsOfFloat32ParamsAreFloat32) {
  ts::nn::Linear l1(5, 8), l2(8, 3);
  ts::Tensor x = test_data({4, 5}, ts::kFloat32, 2);
  ts::Tensor target = ts::tensor(std::vector<int64_t>{0, 2, 1, 2}, {4});
  ts::Tensor loss;
  {
    ts::amp::autocast guard("cpu");
    ts::Tensor h = ts::relu(l1.forward(x));
    EXPECT_EQ(h.dtype(), ts::kBFloat16);
    ts::Tensor out = l2.forward(h);
    loss = F::cross_entropy(out, target);
    EXPECT_EQ(loss.dtype(), ts::kFloat32);
  }
  loss.backward();
  for (ts::Tensor p : {l1.weight, l1.bias, l2.weight, l2.bias}) {
    ASSERT_TRUE(p.grad().defined());
    EXPECT_EQ(p.grad().dtype(), ts::kFloat32);
  }
  // Against the float32 computation: the same gradients to bfloat16 accuracy.
  ts::nn::Linear c1(5, 8), c2(8, 3);
  {
    ts::NoGradGuard ng;
    c1.weight.copy_(l1.weight);
    c1.bias.copy_(l1.bias);
    c2.weight.copy_(l2.weight);
    c2.bias.copy_(l2.bias);
  }
  F::cross_entropy(c2.forward(ts::relu(c1.forward(x))), target).backward();
  EXPECT_TRUE(all_close(l1.weight.grad(), c1.weight.grad(), {5e-2, 2e-2}));
  EXPECT_TRUE(all_close(l2.weight.grad(), c2.weight.grad(), {5e-2, 2e-2}));
}

TEST(Autocast, SharedWeightGradientThroughCache) {
  // A weight used twice in one scope: one cached cast, both uses' gradients reach it.
  ts::Tensor w = leaf({4, 4}, 1);
  ts::Tensor x = test_data({2, 4}, ts::kFloat32, 2);
  ts::Tensor loss;
  {
    ts::amp::autocast guard("cpu");
    loss = ts::linear(ts::linear(x, w), w).to(ts::kFloat32).sum();
  }
  loss.backward();
  ts::Tensor wc = w.detach().clone().requires_grad_();
  ts::linear(ts::linear(x, wc), wc).sum().backward();
  EXPECT_EQ(w.grad().dtype(), ts::kFloat32);
  EXPECT_TRUE(all_close(w.grad(), wc.grad(), {5e-2, 5e-2}));
}

TEST(Autocast, BackwardInsideScope) {
  ts::Tensor w = leaf({3, 5}, 1);
  ts::Tensor x = test_data({4, 5}, ts::kFloat32, 2);
  ts::amp::autocast guard("cpu");
  ts::Tensor y = ts::linear(x, w).sum();
  y.backward();
  EXPECT_EQ(w.grad().dtype(), ts::kFloat32);
}

TEST(Autocast, Errors) {
  EXPECT_THROW(ts::amp::autocast("cpu", ts::kFloat32), ts::ValueError);
  EXPECT_THROW(ts::amp::autocast("cuda", ts::kFloat64), ts::ValueError);
  EXPECT_THROW(ts::amp::autocast("meta"), ts::ValueError);
  EXPECT_FALSE(ts::amp::is_autocast_enabled(ts::DeviceType::CPU));
  // A disabled scope takes any dtype.
  EXPECT_NO_THROW(ts::amp::autocast("cpu", ts::kFloat32, false));
}

}  // namespace
