// nn::init: bounds and moments of every initializer on large tensors (tolerances from the sampling
// error of 10^5 draws), fans and gains, the modules' default initializations, and gradient clipping.
#include "nn/nn_test_util.h"

namespace ts = tessera;
namespace nn = tessera::nn;
namespace init = tessera::nn::init;
using namespace tessera::nn_testing;

namespace {
struct Moments {
  double mean, std, min, max;
};
Moments moments(const ts::Tensor& t) {
  ts::Tensor d = t.to(ts::kFloat64);
  return {d.mean().item<double>(), d.std().item<double>(), d.min().item<double>(), d.max().item<double>()};
}
}  // namespace

TEST(NNInit, FansAndGains) {
  ts::Tensor w = ts::empty({16, 8, 3, 5});
  auto [fan_in, fan_out] = init::calculate_fan_in_and_fan_out(w);
  EXPECT_EQ(fan_in, 8 * 15);
  EXPECT_EQ(fan_out, 16 * 15);
  EXPECT_THROW(init::calculate_fan_in_and_fan_out(ts::empty({4})), ts::ValueError);
  EXPECT_DOUBLE_EQ(init::calculate_gain("relu"), std::sqrt(2.0));
  EXPECT_DOUBLE_EQ(init::calculate_gain("tanh"), 5.0 / 3.0);
  EXPECT_DOUBLE_EQ(init::calculate_gain("leaky_relu", std::sqrt(5.0)), std::sqrt(2.0 / 6.0));
  EXPECT_DOUBLE_EQ(init::calculate_gain("conv2d"), 1.0);
  EXPECT_THROW(init::calculate_gain("swish"), ts::ValueError);
}

TEST(NNInit, KaimingUniformBoundsAndVariance) {
  ts::Tensor w = ts::empty({400, 250});
  init::kaiming_uniform_(w);  // a = 0, leaky_relu: gain sqrt(2), bound sqrt(6 / fan_in)
  const double bound = std::sqrt(6.0 / 250);
  Moments m = moments(w);
  EXPECT_LE(m.max, bound);
  EXPECT_GE(m.min, -bound);
  EXPECT_GT(m.max, 0.99 * bound);
  EXPECT_NEAR(m.mean, 0.0, 5 * bound / std::sqrt(3.0 * 1e5));
  EXPECT_NEAR(m.std, bound / std::sqrt(3.0), 0.01 * bound);
  init::kaiming_uniform_(w, 0, "fan_out", "relu");
  EXPECT_LE(moments(w).max, std::sqrt(6.0 / 400));
  EXPECT_THROW(init::kaiming_uniform_(w, 0, "fan_avg"), ts::ValueError);
}

TEST(NNInit, KaimingNormalXavierNormalUniform) {
  ts::Tensor w = ts::empty({500, 200});
  init::kaiming_normal_(w, 0, "fan_in", "relu");
  EXPECT_NEAR(moments(w).std, std::sqrt(2.0 / 200), 0.01 * std::sqrt(2.0 / 200));
  init::xavier_normal_(w, 2.0);
  EXPECT_NEAR(moments(w).std, 2.0 * std::sqrt(2.0 / 700), 0.01 * 2.0 * std::sqrt(2.0 / 700));
  init::xavier_uniform_(w);
  const double b = std::sqrt(6.0 / 700);
  Moments m = moments(w);
  EXPECT_LE(m.max, b);
  EXPECT_GE(m.min, -b);
  EXPECT_NEAR(m.std, b / std::sqrt(3.0), 0.01 * b);
  init::uniform_(w, 2.0, 3.0);
  m = moments(w);
  EXPECT_GE(m.min, 2.0);
  EXPECT_LE(m.max, 3.0);
  EXPECT_NEAR(m.mean, 2.5, 0.005);
  init::normal_(w, -1.0, 0.5);
  m = moments(w);
  EXPECT_NEAR(m.mean, -1.0, 0.005);
  EXPECT_NEAR(m.std, 0.5, 0.005);
}

TEST(NNInit, TruncNormalStaysInBoundsWithTheTruncatedMoments) {
  ts::Tensor w = ts::empty({100000}, ts::kFloat64);
  init::trunc_normal_(w, 0.5, 1.0, -0.5, 1.0);  // [mean - 1 std, mean + 0.5 std]
  Moments m = moments(w);
  EXPECT_GE(m.min, -0.5);
  EXPECT_LE(m.max, 1.0);
  // Truncated normal on [alpha, beta] = [-1, 0.5]: mean mu + s (phi(a) - phi(b)) / Z.
  auto phi = [](double x) { return std::exp(-x * x / 2) / std::sqrt(2 * M_PI); };
  auto cdf = [](double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); };
  const double z = cdf(0.5) - cdf(-1.0);
  const double want_mean = 0.5 + (phi(-1.0) - phi(0.5)) / z;
  const double want_var = 1 + (-1.0 * phi(-1.0) - 0.5 * phi(0.5)) / z - std::pow((phi(-1.0) - phi(0.5)) / z, 2);
  EXPECT_NEAR(m.mean, want_mean, 0.006);
  EXPECT_NEAR(m.std, std::sqrt(want_var), 0.006);
  // Default bounds [-2, 2] around N(0, 0.02) (the ViT / GPT spelling): nothing is clipped.
  ts::Tensor v = ts::empty({1000});
  init::trunc_normal_(v, 0.0, 0.02);
  EXPECT_NEAR(moments(v).std, 0.02, 0.003);
  EXPECT_THROW(init::trunc_normal_(v, 0, 1, 2, -2), ts::ValueError);
}

TEST(NNInit, ConstantsAndGradFreeFill) {
  ts::Tensor p = ts::empty({3, 3}).requires_grad_();
  init::ones_(p);  // a leaf that requires grad: only possible under no_grad
  EXPECT_TRUE(ts::equal(p, ts::ones({3, 3})));
  EXPECT_TRUE(p.is_leaf());
  init::zeros_(p);
  init::constant_(p.slice(0, 0, 1), 4.0);  // rvalue views work too
  EXPECT_EQ(p.sum().item<double>(), 12.0);
}

TEST(NNInit, ModuleDefaultInitializations) {
  nn::Linear lin(300, 200);
  const double b = 1.0 / std::sqrt(300.0);  // kaiming_uniform(a = sqrt(5)) on fan_in 300
  Moments w = moments(lin.weight), bias = moments(lin.bias);
  EXPECT_LE(w.max, b);
  EXPECT_GE(w.min, -b);
  EXPECT_GT(w.max, 0.99 * b);
  EXPECT_NEAR(w.std, b / std::sqrt(3.0), 0.02 * b);
  EXPECT_LE(bias.max, b);
  EXPECT_GE(bias.min, -b);
  nn::Bilinear bil(50, 20, 30);
  EXPECT_LE(moments(bil.weight).max, 1.0 / std::sqrt(50.0));
  nn::Embedding emb(1000, 64);
  EXPECT_NEAR(moments(emb.weight).std, 1.0, 0.02);
  nn::Linear zero_in(0, 4);
  EXPECT_EQ(zero_in.bias.abs().sum().item<double>(), 0.0);
}

TEST(NNClipGrad, ClipGradNormByHand) {
  ts::Tensor a = ts::zeros({2}, ts::kFloat64).requires_grad_(), b = ts::zeros({3}, ts::kFloat64).requires_grad_();
  ts::Tensor c = ts::zeros({1}, ts::kFloat64).requires_grad_();  // no grad: skipped
  a.set_grad(ts::tensor({3.0, 0.0}, ts::kFloat64));
  b.set_grad(ts::tensor({0.0, 4.0, 0.0}, ts::kFloat64));
  ts::Tensor total = nn::utils::clip_grad_norm_({a, b, c}, 1.0);
  EXPECT_NEAR(total.item<double>(), 5.0, 1e-12);
  const double s = 1.0 / (5.0 + 1e-6);
  EXPECT_TRUE(close64(a.grad(), ts::tensor({3.0 * s, 0.0}, ts::kFloat64)));
  EXPECT_TRUE(close64(b.grad(), ts::tensor({0.0, 4.0 * s, 0.0}, ts::kFloat64)));
  // Under the limit: unchanged (scaled by 1).
  ts::Tensor g = a.grad().clone();
  EXPECT_NEAR(nn::utils::clip_grad_norm_({a}, 10.0).item<double>(), 0.6, 1e-6);
  EXPECT_TRUE(ts::equal(a.grad(), g));
  // p = 1 and p = inf.
  a.set_grad(ts::tensor({-3.0, 1.0}, ts::kFloat64));
  b.set_grad(ts::tensor({0.0, -6.0, 2.0}, ts::kFloat64));
  EXPECT_NEAR(nn::utils::clip_grad_norm_({a, b}, 100.0, 1.0).item<double>(), 12.0, 1e-12);
  EXPECT_NEAR(nn::utils::clip_grad_norm_({a, b}, 3.0, INFINITY).item<double>(), 6.0, 1e-12);
  EXPECT_NEAR(b.grad().abs().max().item<double>(), 3.0, 1e-5);
  // Non-finite norms raise on request, leaving the gradients alone.
  a.set_grad(ts::tensor({NAN, 1.0}, ts::kFloat64));
  EXPECT_THROW(nn::utils::clip_grad_norm_({a}, 1.0, 2.0, true), ts::ValueError);
  EXPECT_EQ(a.grad().tolist<double>()[1], 1.0);
  EXPECT_EQ(nn::utils::clip_grad_norm_({c}, 1.0).item<double>(), 0.0);
}

TEST(NNClipGrad, ClipGradNormFloat32AndModules) {
  nn::Sequential m(nn::Linear(3, 4), nn::Linear(4, 2));
  double sq = 0;
  for (const ts::Tensor& p : m.parameters()) {
    p.set_grad(ts::full_like(p, 2.0));
    sq += 4.0 * p.numel();
  }
  ts::Tensor total = nn::utils::clip_grad_norm_(m.parameters(), 0.5);
  EXPECT_EQ(total.dtype(), ts::kFloat32);
  EXPECT_NEAR(total.item<double>(), std::sqrt(sq), 1e-4);
  double after = 0;
  for (const ts::Tensor& p : m.parameters()) after += p.grad().to(ts::kFloat64).pow(2).sum().item<double>();
  EXPECT_NEAR(std::sqrt(after), 0.5, 1e-5);
}

TEST(NNClipGrad, ClipGradValue) {
  ts::Tensor a = ts::zeros({4}, ts::kFloat64).requires_grad_();
  a.set_grad(ts::tensor({-3.0, -0.5, 0.2, 9.0}, ts::kFloat64));
  nn::utils::clip_grad_value_({a}, 1.0);
  EXPECT_EQ(a.grad().tolist<double>(), (std::vector<double>{-1.0, -0.5, 0.2, 1.0}));
  EXPECT_THROW(nn::utils::clip_grad_value_({a}, -1.0), ts::ValueError);
}
