// MultiheadAttention against PyTorch 1.13 (fixed weights, masks, batch_first, unbatched) and
// scaled_dot_product_attention against its documented definition (tests/nn/torch_reference.py).
#include "nn/nn_test_util.h"

namespace ts = tessera;
namespace nn = tessera::nn;
using namespace tessera::nn_testing;

namespace {
nn::MultiheadAttention loaded(const std::string& c, int64_t e, int64_t h, bool bias, bool batch_first) {
  nn::MultiheadAttention m(e, h, 0.0, bias, batch_first);
  m.to(ts::kFloat64);
  m.load_state_dict(state(c));
  return m;
}
}  // namespace

TEST(NNAttention, MultiheadAttentionNamesAndInit) {
  nn::MultiheadAttention m(8, 2);
  std::vector<std::string> got;
  for (auto& [n, t] : m.named_parameters()) got.push_back(n);
  EXPECT_EQ(got, (std::vector<std::string>{"in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"}));
  EXPECT_EQ(m.in_proj_bias.abs().sum().item<double>(), 0.0);
  EXPECT_EQ(m.out_proj.bias.abs().sum().item<double>(), 0.0);
  const double bound = std::sqrt(6.0 / (8 + 24));  // xavier_uniform on (24, 8)
  EXPECT_LE(m.in_proj_weight.abs().max().item<double>(), bound);
  EXPECT_THROW(nn::MultiheadAttention(8, 3), ts::ValueError);
}

TEST(NNAttention, MultiheadAttentionMatchesTorch) {
  nn::MultiheadAttention m = loaded("mha", 8, 2, true, false);
  ts::Tensor q = in("mha", "q"), k = in("mha", "k"), v = in("mha", "v");
  auto [y, w] = m(q, k, v);
  EXPECT_TRUE(close64(y, out("mha", "y")));
  EXPECT_TRUE(close64(w, out("mha", "w")));
  auto [ym, wm] = m(q, k, v, in("mha", "kpm"), true, in("mha", "am"), /*average_attn_weights=*/false);
  EXPECT_TRUE(close64(ym, out("mha", "y_masked")));
  EXPECT_TRUE(close64(wm, out("mha", "w_masked")));
  auto [ys, ws] = m(q, q, q, std::nullopt, /*need_weights=*/false);
  EXPECT_TRUE(close64(ys, out("mha", "y_self")));
  EXPECT_FALSE(ws.defined());
  auto [yf, wf] = m(q, k, v, std::nullopt, true, in("mha", "float_mask"));
  EXPECT_TRUE(close64(yf, out("mha", "y_float_mask")));
  // Errors: wrong embedding size, wrong mask shape.
  EXPECT_THROW(m(q.slice(2, 0, 4), k, v), ts::ShapeError);
  EXPECT_THROW(m(q, k, v, std::nullopt, true, ts::zeros({3, 3}, ts::kBool)), ts::ShapeError);
}

TEST(NNAttention, MultiheadAttentionBatchFirstAndUnbatched) {
  nn::MultiheadAttention m = loaded("mha_bf", 8, 4, false, true);
  EXPECT_EQ(m.parameters().size(), 2u);  // no biases
  ts::Tensor q = in("mha_bf", "q"), k = in("mha_bf", "k");
  auto [y, w] = m(q, k, k);
  EXPECT_TRUE(close64(y, out("mha_bf", "y")));
  EXPECT_TRUE(close64(w, out("mha_bf", "w")));
  auto [yu, wu] = m(q[0], k[0], k[0]);
  EXPECT_TRUE(close64(yu, out("mha_bf", "y_unbatched")));
  EXPECT_TRUE(close64(wu, out("mha_bf", "w_unbatched")));
}

TEST(NNAttention, MultiheadAttentionCausalEqualsExplicitMask) {
  nn::MultiheadAttention m = loaded("mha", 8, 2, true, false);
  ts::Tensor q = in("mha", "q");
  ts::Tensor blocked = ts::ones({3, 3}).triu(1).to(ts::kBool);  // true = may not attend
  auto [a, wa] = m(q, q, q, std::nullopt, true, std::nullopt, true, /*is_causal=*/true);
  auto [b, wb] = m(q, q, q, std::nullopt, true, blocked);
  EXPECT_TRUE(close64(a, b));
  EXPECT_EQ(wa.select(1, 0).select(1, 2).abs().sum().item<double>(), 0.0);  // query 0 never sees key 2
}

TEST(NNAttention, MultiheadAttentionDropoutOnlyInTraining) {
  nn::MultiheadAttention m(8, 2, /*dropout=*/0.5);
  ts::Tensor q = ts::randn({3, 2, 8});
  m.eval();
  auto [a, wa] = m(q, q, q);
  auto [b, wb] = m(q, q, q);
  EXPECT_TRUE(ts::equal(a, b));
  m.train();
  auto [c, wc] = m(q, q, q);
  EXPECT_FALSE(ts::equal(a, c));
}

TEST(NNAttention, ScaledDotProductAttentionMatchesDefinition) {
  ts::Tensor q = in("sdpa", "q"), k = in("sdpa", "k"), v = in("sdpa", "v");
  namespace F = nn::functional;
  EXPECT_TRUE(close64(F::scaled_dot_product_attention(q, k, v), out("sdpa", "plain")));
  EXPECT_TRUE(close64(F::scaled_dot_product_attention(q, k.slice(2, 0, 5), v.slice(2, 0, 5), std::nullopt, 0.0, true),
                      out("sdpa", "causal")));
  EXPECT_TRUE(close64(F::scaled_dot_product_attention(q, k, v, in("sdpa", "bool_mask")), out("sdpa", "bool_mask")));
  EXPECT_TRUE(close64(F::scaled_dot_product_attention(q, k, v, in("sdpa", "float_mask"), 0.0, false, 0.3),
                      out("sdpa", "float_mask")));
  EXPECT_THROW(F::scaled_dot_product_attention(q, k, v, in("sdpa", "bool_mask"), 0.0, true), ts::ValueError);
  EXPECT_THROW(F::scaled_dot_product_attention(q, k.slice(3, 0, 3), v), ts::ShapeError);
  // Dropout: same generator state, same result; p = 1 drops everything.
  ts::Generator g1(5), g2(5);
  ts::Tensor d1 = F::scaled_dot_product_attention(q, k, v, std::nullopt, 0.3, false, std::nullopt, &g1);
  ts::Tensor d2 = F::scaled_dot_product_attention(q, k, v, std::nullopt, 0.3, false, std::nullopt, &g2);
  EXPECT_TRUE(ts::equal(d1, d2));
  EXPECT_FALSE(ts::allclose(d1, out("sdpa", "plain")));
}
