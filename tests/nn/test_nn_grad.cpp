// Gradients through nn: gradcheck (float64 central differences) of every module, functional and
// loss with respect to inputs and parameters, on contiguous, strided (transposed, sliced with a step)
// and broadcast inputs; gradgradcheck where PyTorch's passes; and an end-to-end backward through a
// small model. These need the derivatives of the ops nn is composed of (linear, matmul, softmax,
// log_softmax, reductions, elementwise, gather, where, masked_fill, embedding, ...).
#include "nn/nn_test_util.h"

namespace ts = tessera;
namespace nn = tessera::nn;
namespace F = tessera::nn::functional;
using ts::testing::test_data;

namespace {

using Inputs = std::vector<ts::Tensor>;

::testing::AssertionResult grad_ok(const std::function<ts::Tensor(const Inputs&)>& fn, const Inputs& inputs,
                                   bool second_order = false) {
  auto wrapped = [&](const Inputs& in) { return Inputs{fn(in)}; };
  std::string report;
  if (!ts::autograd::gradcheck(wrapped, inputs, {}, &report))
    return ::testing::AssertionFailure() << "gradcheck: " << report;
  if (second_order && !ts::autograd::gradgradcheck(wrapped, inputs, {}, &report))
    return ::testing::AssertionFailure() << "gradgradcheck: " << report;
  return ::testing::AssertionSuccess();
}

ts::Tensor leaf(const ts::Shape& s, uint64_t seed, double scale = 1.0) {
  return (test_data(s, ts::kFloat64, seed) * scale).detach().requires_grad_();
}
// The same values laid out transposed in memory (last two dims), requiring grad.
ts::Tensor strided_leaf(const ts::Shape& s, uint64_t seed) {
  ts::Shape t = s;
  std::swap(t[t.size() - 1], t[t.size() - 2]);
  return test_data(t, ts::kFloat64, seed).transpose(-1, -2).detach().requires_grad_();
}
// Every other row of a taller buffer.
ts::Tensor sliced_leaf(const ts::Shape& s, uint64_t seed) {
  ts::Shape t = s;
  t[0] *= 2;
  return test_data(t, ts::kFloat64, seed).slice(0, 0, std::nullopt, 2).detach().requires_grad_();
}

template <class M> M in_float64(M m) {
  m.to(ts::kFloat64);
  return m;
}

}  // namespace

TEST(NNGrad, LinearAndBilinear) {
  auto lin = in_float64(nn::Linear(4, 3));
  for (const ts::Tensor& x : {leaf({5, 4}, 1), strided_leaf({5, 4}, 2), sliced_leaf({5, 4}, 3)})
    EXPECT_TRUE(grad_ok([&](const Inputs& in) { return lin(in[0]); }, {x, lin.weight, lin.bias}));
  auto bil = in_float64(nn::Bilinear(3, 2, 2));
  EXPECT_TRUE(grad_ok([&](const Inputs& in) { return bil(in[0], in[1]); },
                      {leaf({4, 3}, 4), strided_leaf({4, 2}, 5), bil.weight, bil.bias}));
}

TEST(NNGrad, EmbeddingPaddingRowGetsNoGradient) {
  auto emb = in_float64(nn::Embedding(6, 3, 1));
  ts::Tensor idx = ts::tensor(std::vector<int64_t>{0, 1, 5, 1, 2}, {5});
  // The padding row's gradient is zero by definition (PyTorch's too), so finite differences disagree
  // there; gradcheck the lookup without the padding index instead.
  ts::Tensor plain = ts::tensor(std::vector<int64_t>{0, 3, 5, 3, 2}, {5});
  EXPECT_TRUE(grad_ok([&](const Inputs&) { return emb(plain); }, {emb.weight}));
  emb(idx).sum().backward();
  EXPECT_EQ(emb.weight.grad().select(0, 1).abs().sum().item<double>(), 0.0);
  EXPECT_EQ(emb.weight.grad().select(0, 5).sum().item<double>(), 3.0);
}

TEST(NNGrad, Activations) {
  ts::Tensor x = strided_leaf({3, 4}, 6);
  EXPECT_TRUE(grad_ok([](const Inputs& in) { return nn::GELU("tanh")(in[0]); }, {x}, true));
  EXPECT_TRUE(grad_ok([](const Inputs& in) { return nn::SiLU()(in[0]); }, {x}, true));
  EXPECT_TRUE(grad_ok([](const Inputs& in) { return nn::Softmax(0)(in[0]); }, {x}, true));
}

TEST(NNGrad, Norms) {
  auto ln = in_float64(nn::LayerNorm(ts::Shape{4}));
  nn::init::normal_(ln.weight);
  for (const ts::Tensor& x : {leaf({3, 4}, 7, 2.0), strided_leaf({3, 4}, 8)})
    EXPECT_TRUE(grad_ok([&](const Inputs& in) { return ln(in[0]); }, {x, ln.weight, ln.bias}, true));
  auto gn = in_float64(nn::GroupNorm(2, 4));
  EXPECT_TRUE(grad_ok([&](const Inputs& in) { return gn(in[0]); }, {leaf({2, 4, 3}, 9), gn.weight, gn.bias}));
  auto rms = in_float64(nn::RMSNorm(ts::Shape{4}));
  EXPECT_TRUE(grad_ok([&](const Inputs& in) { return rms(in[0]); }, {sliced_leaf({3, 4}, 10), rms.weight}, true));
  auto bn = in_float64(nn::BatchNorm1d(3));
  EXPECT_TRUE(grad_ok([&](const Inputs& in) { return bn(in[0]); }, {leaf({5, 3}, 11), bn.weight, bn.bias}));
  bn.eval();
  EXPECT_TRUE(grad_ok([&](const Inputs& in) { return bn(in[0]); }, {leaf({5, 3}, 12), bn.weight, bn.bias}));
  // The running statistics never take part in the graph.
  EXPECT_FALSE(bn.running_mean.requires_grad());
}

TEST(NNGrad, DropoutWithAFixedMask) {
  ts::Generator gen;
  EXPECT_TRUE(grad_ok(
      [&](const Inputs& in) {
        gen.manual_seed(3);  // the same mask on every evaluation
        return F::dropout(in[0], 0.4, true, &gen);
      },
      {leaf({4, 5}, 13)}));
}

TEST(NNGrad, CrossEntropyAndNll) {
  ts::Tensor x = strided_leaf({5, 4}, 14);
  ts::Tensor t = ts::tensor(std::vector<int64_t>{0, 3, -100, 2, 1}, {5});
  ts::Tensor w = ts::tensor({0.5, 1.0, 2.0, 1.5}, ts::kFloat64);
  EXPECT_TRUE(grad_ok([&](const Inputs& in) { return F::cross_entropy(in[0], t, w, -100, "mean", 0.1); }, {x}, true));
  EXPECT_TRUE(grad_ok([&](const Inputs& in) { return F::cross_entropy(in[0], t, std::nullopt, -100, "none"); }, {x}));
  ts::Tensor p = ts::softmax(test_data({5, 4}, ts::kFloat64, 15), 1).requires_grad_();
  EXPECT_TRUE(grad_ok([&](const Inputs& in) { return F::cross_entropy(in[0], in[1], w, -100, "sum", 0.2); }, {x, p}));
  ts::Tensor x3 = leaf({2, 4, 3}, 16);
  ts::Tensor t3 = ts::tensor(std::vector<int64_t>{0, 1, 3, 2, -100, 1}, {2, 3});
  EXPECT_TRUE(grad_ok([&](const Inputs& in) { return F::nll_loss(in[0].log_softmax(1), t3, w); }, {x3}));
}

TEST(NNGrad, RegressionLossesIncludingBroadcastTargets) {
  ts::Tensor a = leaf({3, 4}, 17, 2.0);
  ts::Tensor b = leaf({4}, 18, 2.0);  // broadcast over the rows
  EXPECT_TRUE(grad_ok([](const Inputs& in) { return F::mse_loss(in[0], in[1]); }, {a, b}, true));
  // Away from the kinks at |a - b| = 0 and = beta.
  ts::Tensor c = (a.detach() + 0.37).requires_grad_();
  EXPECT_TRUE(grad_ok([](const Inputs& in) { return F::l1_loss(in[0], in[1], "sum"); }, {a, c}));
  EXPECT_TRUE(grad_ok([](const Inputs& in) { return F::smooth_l1_loss(in[0], in[1], "mean", 0.1); }, {a, c}));
  EXPECT_TRUE(grad_ok([](const Inputs& in) { return F::huber_loss(in[0], in[1], "none", 1.0); }, {a, c}));
}

TEST(NNGrad, BinaryLossesAndKl) {
  ts::Tensor p = (ts::sigmoid(test_data({3, 4}, ts::kFloat64, 19)) * 0.8 + 0.1).detach().requires_grad_();
  ts::Tensor t = ts::rand({3, 4}, ts::kFloat64);
  ts::Tensor w = ts::rand({3, 4}, ts::kFloat64) + 0.5;
  EXPECT_TRUE(grad_ok([&](const Inputs& in) { return F::binary_cross_entropy(in[0], t, w); }, {p}));
  ts::Tensor logits = strided_leaf({3, 4}, 20);
  ts::Tensor pw = ts::tensor({0.5, 1.0, 2.0, 3.0}, ts::kFloat64);
  EXPECT_TRUE(grad_ok([&](const Inputs& in) { return F::binary_cross_entropy_with_logits(in[0], t, w, "mean", pw); },
                      {logits}, true));
  ts::Tensor lp = ts::log_softmax(test_data({3, 5}, ts::kFloat64, 21), 1).detach().requires_grad_();
  ts::Tensor q = ts::softmax(test_data({3, 5}, ts::kFloat64, 22), 1).detach().requires_grad_();
  EXPECT_TRUE(grad_ok([](const Inputs& in) { return F::kl_div(in[0], in[1], "batchmean"); }, {lp, q}));
  EXPECT_TRUE(grad_ok([](const Inputs& in) { return F::kl_div(in[0], in[1].log(), "sum", true); }, {lp, q}));
}

TEST(NNGrad, Attention) {
  ts::Tensor q = leaf({2, 3, 4}, 23), k = strided_leaf({2, 5, 4}, 24), v = leaf({2, 5, 2}, 25);
  ts::Tensor mask = ts::tensor(std::vector<double>{1, 1, 0, 1, 1}, {5}).to(ts::kBool);
  EXPECT_TRUE(grad_ok([&](const Inputs& in) { return F::scaled_dot_product_attention(in[0], in[1], in[2], mask); },
                      {q, k, v}, true));
  ts::Tensor kc = leaf({2, 3, 4}, 26), vc = leaf({2, 3, 2}, 27);
  EXPECT_TRUE(grad_ok(
      [&](const Inputs& in) { return F::scaled_dot_product_attention(in[0], in[1], in[2], std::nullopt, 0.0, true); },
      {q, kc, vc}));
  auto mha = in_float64(nn::MultiheadAttention(4, 2));
  nn::init::normal_(mha.in_proj_bias, 0.0, 0.1);
  ts::Tensor x = leaf({3, 2, 4}, 28);
  ts::Tensor kpm = ts::tensor(std::vector<double>{0, 0, 1, 0, 0, 0}, {2, 3}).to(ts::kBool);
  EXPECT_TRUE(grad_ok([&](const Inputs& in) { return std::get<0>(mha(in[0], in[0], in[0], kpm)); },
                      {x, mha.in_proj_weight, mha.in_proj_bias, mha.out_proj.weight, mha.out_proj.bias}));
}

TEST(NNGrad, EndToEndBackwardThroughAModel) {
  nn::Sequential net(nn::Linear(4, 8), nn::LayerNorm(ts::Shape{8}), nn::GELU(), nn::Dropout(0.1), nn::Linear(8, 3));
  ts::Tensor x = ts::randn({6, 4});
  ts::Tensor y = ts::tensor(std::vector<int64_t>{0, 2, 1, 1, 0, 2}, {6});
  ts::Tensor loss = F::cross_entropy(net(x), y);
  ASSERT_TRUE(loss.requires_grad());
  loss.backward();
  for (auto& [name, p] : net.named_parameters()) {
    ASSERT_TRUE(p.grad().defined()) << name;
    EXPECT_EQ(p.grad().sizes(), p.sizes()) << name;
  }
  ts::Tensor total = nn::utils::clip_grad_norm_(net.parameters(), 1e-3);
  EXPECT_GT(total.item<double>(), 0.0);
  net.zero_grad();
  EXPECT_FALSE(net.parameters()[0].grad().defined());
}
