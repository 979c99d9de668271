// The flash attention ops (ops/attention_ops.h) on the CPU: forward (out and lse) against the
// composite scaled_dot_product_attention in float64, causal and not, L == S, L < S, L > S, one-row
// and one-key cases, every float dtype, strided (transposed) inputs; the fused backward against the
// composite's autograd gradients; gradcheck and gradgradcheck in float64 (first order through the
// fused backward, second order through the composite formula); the errors.
#include <cmath>
#include <tuple>

#include "common/test_util.h"
#include "ops/attention_ops.h"
#include "tessera/nn/functional.h"

namespace ts = tessera;
using namespace tessera::testing;

namespace {

struct Case {
  int64_t b, h, l, s, d;
};

const std::vector<Case>& cases() {
  static const std::vector<Case> c = {{2, 3, 5, 5, 4}, {1, 2, 7, 3, 8}, {2, 1, 3, 9, 5},
                                      {1, 1, 1, 1, 3}, {1, 2, 1, 6, 4}, {1, 1, 17, 17, 16}};
  return c;
}

ts::Tensor data(const ts::Shape& s, ts::DType dt, uint64_t seed) { return test_data(s, dt, seed).reshape(s); }

// The composite reference: out and lse = logsumexp of the masked, scaled scores.
std::tuple<ts::Tensor, ts::Tensor> reference(const ts::Tensor& q, const ts::Tensor& k, const ts::Tensor& v, bool causal,
                                             double scale) {
  ts::Tensor out = ts::nn::functional::scaled_dot_product_attention(q, k, v, std::nullopt, 0.0, causal, scale);
  ts::Tensor scores = ts::matmul(q, k.transpose(-2, -1)) * scale;
  if (causal) {
    const ts::TensorOptions o(ts::kInt64, q.device());
    scores = scores.masked_fill(ts::arange(k.size(-2), o).unsqueeze(0) > ts::arange(q.size(-2), o).unsqueeze(1),
                                -INFINITY);
  }
  return {out, ts::logsumexp(scores, std::vector<int64_t>{-1})};
}

}  // namespace

TEST(OpsAttention, ForwardMatchesCompositeFloat64) {
  for (const Case& c : cases()) {
    for (bool causal : {false, true}) {
      const ts::Tensor q = data({c.b, c.h, c.l, c.d}, ts::kFloat64, 1);
      const ts::Tensor k = data({c.b, c.h, c.s, c.d}, ts::kFloat64, 2);
      const ts::Tensor v = data({c.b, c.h, c.s, c.d}, ts::kFloat64, 3);
      const double scale = 1.0 / std::sqrt(static_cast<double>(c.d));
      auto [out, lse] = ts::flash_attention_forward(q, k, v, causal, scale);
      auto [ro, rl] = reference(q, k, v, causal, scale);
      EXPECT_EQ(out.sizes(), ts::Shape({c.b, c.h, c.l, c.d}));
      EXPECT_EQ(lse.sizes(), ts::Shape({c.b, c.h, c.l}));
      EXPECT_EQ(lse.dtype(), ts::kFloat64);
      EXPECT_TRUE(all_close(out, ro, {1e-12, 1e-12})) << "causal " << causal << " L " << c.l << " S " << c.s;
      EXPECT_TRUE(all_close(lse, rl, {1e-12, 1e-12})) << "causal " << causal << " L " << c.l << " S " << c.s;
    }
  }
}

TEST(OpsAttention, ForwardEveryFloatDtype) {
  const Case c{2, 2, 9, 11, 8};
  for (ts::DType dt : float_dtypes()) {
    for (bool causal : {false, true}) {
      const ts::Tensor q = data({c.b, c.h, c.l, c.d}, dt, 4);
      const ts::Tensor k = data({c.b, c.h, c.s, c.d}, dt, 5);
      const ts::Tensor v = data({c.b, c.h, c.s, c.d}, dt, 6);
      auto [out, lse] = ts::flash_attention_forward(q, k, v, causal, 0.3);
      EXPECT_EQ(out.dtype(), dt);
      EXPECT_EQ(lse.dtype(), dt == ts::kFloat64 ? ts::kFloat64 : ts::kFloat32);
      auto [ro, rl] = reference(q.to(ts::kFloat64), k.to(ts::kFloat64), v.to(ts::kFloat64), causal, 0.3);
      const Tolerance tol = dt == ts::kFloat64 ? Tolerance{1e-12, 1e-12}
                            : dt == ts::kFloat32 ? Tolerance{1e-5, 1e-5}
                                                 : Tolerance{2e-2, 2e-2};
      EXPECT_TRUE(all_close(out.to(ts::kFloat64), ro, tol)) << ts::dtype_name(dt) << " causal " << causal;
      EXPECT_TRUE(all_close(lse.to(ts::kFloat64), rl, {1e-5, 1e-5})) << ts::dtype_name(dt) << " causal " << causal;
    }
  }
}

TEST(OpsAttention, TransposedViewsNeedNoCopyAndMatch) {
  // GPT-2's layout: (B, T, H, D) buffers seen as (B, H, T, D).
  const int64_t b = 2, t = 6, h = 3, d = 4;
  const ts::Tensor qb = data({b, t, h, d}, ts::kFloat64, 7), kb = data({b, t, h, d}, ts::kFloat64, 8),
                   vb = data({b, t, h, d}, ts::kFloat64, 9);
  const ts::Tensor q = qb.transpose(1, 2), k = kb.transpose(1, 2), v = vb.transpose(1, 2);
  ASSERT_FALSE(q.is_contiguous());
  for (bool causal : {false, true}) {
    auto [out, lse] = ts::flash_attention_forward(q, k, v, causal, 0.5);
    auto [oc, lc] = ts::flash_attention_forward(q.contiguous(), k.contiguous(), v.contiguous(), causal, 0.5);
    // Note [Flash attention layout]: the output has q's (B, T, H, D) memory, so that the transpose back
    // and the merge of the heads are views.
    EXPECT_TRUE(out.transpose(1, 2).is_contiguous());
    EXPECT_TRUE(oc.is_contiguous());
    EXPECT_TRUE(all_close(out, oc, {0, 0}));
    EXPECT_TRUE(all_close(lse, lc, {0, 0}));
  }
}

TEST(OpsAttention, BackwardMatchesCompositeAutogradFloat64) {
  for (const Case& c : cases()) {
    for (bool causal : {false, true}) {
      const double scale = 0.7;
      ts::Tensor q = data({c.b, c.h, c.l, c.d}, ts::kFloat64, 11).requires_grad_();
      ts::Tensor k = data({c.b, c.h, c.s, c.d}, ts::kFloat64, 12).requires_grad_();
      ts::Tensor v = data({c.b, c.h, c.s, c.d}, ts::kFloat64, 13).requires_grad_();
      const ts::Tensor g = data({c.b, c.h, c.l, c.d}, ts::kFloat64, 14);
      ts::Tensor out = std::get<0>(ts::flash_attention_forward(q, k, v, causal, scale));
      out.backward(g);
      const ts::Tensor dq = q.grad(), dk = k.grad(), dv = v.grad();
      ts::Tensor q2 = q.detach().requires_grad_(), k2 = k.detach().requires_grad_(), v2 = v.detach().requires_grad_();
      ts::nn::functional::scaled_dot_product_attention(q2, k2, v2, std::nullopt, 0.0, causal, scale).backward(g);
      const std::string what = ts::detail::str_cat("causal ", causal, " L ", c.l, " S ", c.s, " D ", c.d);
      EXPECT_TRUE(all_close(dq, q2.grad(), {1e-10, 1e-10})) << "dq " << what;
      EXPECT_TRUE(all_close(dk, k2.grad(), {1e-10, 1e-10})) << "dk " << what;
      EXPECT_TRUE(all_close(dv, v2.grad(), {1e-10, 1e-10})) << "dv " << what;
    }
  }
}

TEST(OpsAttention, BackwardOpOnStridedInputsFloat32) {
  const int64_t b = 2, t = 7, h = 2, d = 8;
  const ts::Tensor q = data({b, t, h, d}, ts::kFloat32, 21).transpose(1, 2);
  const ts::Tensor k = data({b, t, h, d}, ts::kFloat32, 22).transpose(1, 2);
  const ts::Tensor v = data({b, t, h, d}, ts::kFloat32, 23).transpose(1, 2);
  const ts::Tensor g = data({b, h, t, d}, ts::kFloat32, 24);
  auto [out, lse] = ts::flash_attention_forward(q, k, v, true, 0.35);
  auto [dq, dk, dv] = ts::flash_attention_backward(g, q, k, v, out, lse, true, 0.35);
  auto [dq2, dk2, dv2] = ts::flash_attention_backward(g, q.contiguous(), k.contiguous(), v.contiguous(), out, lse, true,
                                                      0.35);
  EXPECT_TRUE(all_close(dq, dq2, {0, 0}));
  EXPECT_TRUE(all_close(dk, dk2, {0, 0}));
  EXPECT_TRUE(all_close(dv, dv2, {0, 0}));
  // Against float64.
  auto [o64, l64] = ts::flash_attention_forward(q.to(ts::kFloat64), k.to(ts::kFloat64), v.to(ts::kFloat64), true, 0.35);
  auto [rq, rk, rv] = ts::flash_attention_backward(g.to(ts::kFloat64), q.to(ts::kFloat64), k.to(ts::kFloat64),
                                                   v.to(ts::kFloat64), o64, l64, true, 0.35);
  EXPECT_TRUE(all_close(dq.to(ts::kFloat64), rq, {1e-4, 1e-5}));
  EXPECT_TRUE(all_close(dk.to(ts::kFloat64), rk, {1e-4, 1e-5}));
  EXPECT_TRUE(all_close(dv.to(ts::kFloat64), rv, {1e-4, 1e-5}));
}

TEST(OpsAttention, GradcheckAndGradgradcheckFloat64) {
  for (const Case& c : std::vector<Case>{{1, 2, 3, 3, 2}, {1, 1, 4, 2, 3}, {2, 1, 2, 5, 2}}) {
    for (bool causal : {false, true}) {
      std::vector<ts::Tensor> in{data({c.b, c.h, c.l, c.d}, ts::kFloat64, 31).requires_grad_(),
                                 data({c.b, c.h, c.s, c.d}, ts::kFloat64, 32).requires_grad_(),
                                 data({c.b, c.h, c.s, c.d}, ts::kFloat64, 33).requires_grad_()};
      auto fn = [&](const std::vector<ts::Tensor>& x) -> std::vector<ts::Tensor> {
        return {std::get<0>(ts::flash_attention_forward(x[0], x[1], x[2], causal, 0.8))};
      };
      const std::string what = ts::detail::str_cat("causal ", causal, " L ", c.l, " S ", c.s);
      std::string report;
      EXPECT_TRUE(ts::autograd::gradcheck(fn, in, {}, &report)) << what << "\n" << report;
      report.clear();
      EXPECT_TRUE(ts::autograd::gradgradcheck(fn, in, {}, &report)) << what << "\n" << report;
    }
  }
}

TEST(OpsAttention, EmptyQuery) {
  const ts::Tensor q = ts::zeros({2, 3, 0, 4}, ts::kFloat64), k = data({2, 3, 5, 4}, ts::kFloat64, 1);
  auto [out, lse] = ts::flash_attention_forward(q, k, k, true, 1.0);
  EXPECT_EQ(out.sizes(), ts::Shape({2, 3, 0, 4}));
  EXPECT_EQ(lse.sizes(), ts::Shape({2, 3, 0}));
  auto [dq, dk, dv] = ts::flash_attention_backward(q, q, k, k, out, lse, true, 1.0);
  EXPECT_EQ(dk.sizes(), k.sizes());
  EXPECT_EQ(dk.abs().sum().item<double>(), 0.0);
  EXPECT_EQ(dv.abs().sum().item<double>(), 0.0);
}

TEST(OpsAttention, Errors) {
  const ts::Tensor q = data({1, 2, 3, 4}, ts::kFloat32, 1), k = data({1, 2, 5, 4}, ts::kFloat32, 2);
  const auto fwd = [](const ts::Tensor& a, const ts::Tensor& b, const ts::Tensor& c) {
    return ts::flash_attention_forward(a, b, c, false, 1.0);
  };
  EXPECT_NE(message_of<ts::ShapeError>([&] { fwd(q.view({2, 3, 4}), k, k); }).find("flash_attention_forward: expected 4-D"),
            std::string::npos);
  EXPECT_THROW(fwd(q, k.to(ts::kFloat64), k), ts::DTypeError);
  EXPECT_THROW(fwd(q.to(ts::kInt64), k.to(ts::kInt64), k.to(ts::kInt64)), ts::DTypeError);
  EXPECT_NE(message_of<ts::ShapeError>([&] { fwd(q, data({1, 2, 5, 3}, ts::kFloat32, 3), k); }).find("one head dim"),
            std::string::npos);
  EXPECT_THROW(fwd(q, k, data({1, 2, 4, 4}, ts::kFloat32, 4)), ts::ShapeError);  // S of key != S of value
  EXPECT_THROW(fwd(q, data({2, 2, 5, 4}, ts::kFloat32, 5), data({2, 2, 5, 4}, ts::kFloat32, 5)), ts::ShapeError);
  EXPECT_THROW(fwd(q, ts::zeros({1, 2, 0, 4}), ts::zeros({1, 2, 0, 4})), ts::ShapeError);  // no key
  EXPECT_THROW(fwd(ts::Tensor(), k, k), ts::ValueError);
  auto [out, lse] = fwd(q, k, k);
  EXPECT_THROW(ts::flash_attention_backward(q, q, k, k, out, lse.to(ts::kFloat64), false, 1.0), ts::DTypeError);
  EXPECT_THROW(ts::flash_attention_backward(q, q, k, k, out, lse.view({1, 6}), false, 1.0), ts::ShapeError);
  EXPECT_THROW(ts::flash_attention_backward(q.view({1, 2, 4, 3}), q, k, k, out, lse, false, 1.0), ts::ShapeError);
}

TEST(OpsAttention, CpuScaledDotProductAttentionKeepsTheComposite) {
  // The functional API on the CPU gives the composite's result (also for float16 inputs), equal to the
  // flash op up to rounding.
  const ts::Tensor q = data({1, 2, 5, 8}, ts::kFloat64, 41), k = data({1, 2, 5, 8}, ts::kFloat64, 42);
  ts::Tensor a = ts::nn::functional::scaled_dot_product_attention(q, k, k, std::nullopt, 0.0, true);
  ts::Tensor b = std::get<0>(ts::flash_attention_forward(q, k, k, true, 1.0 / std::sqrt(8.0)));
  EXPECT_TRUE(all_close(a, b, {1e-12, 1e-12}));
}
