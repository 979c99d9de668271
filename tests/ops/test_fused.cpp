// The fused ops of a transformer step against their unfused compositions on the CPU:
// add_layer_norm (x + residual, then layer_norm), linear_gelu (gelu(linear(..), "tanh")), the fused
// weight + bias gradient of linear, and linear_cross_entropy (cross_entropy(linear(..))) over chunk
// sizes, ignore_index and both reductions: forward values and gradients in float64 (tight) and
// float32 / bfloat16, gradcheck and gradgradcheck in float64, autocast dtypes, and the errors.
#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "common/test_util.h"
#include "ops/fused_ops.h"
#include "ops/norm_ops.h"
#include "tessera/amp.h"
#include "tessera/autograd.h"
#include "tessera/nn/functional.h"

namespace ts = tessera;
namespace F = tessera::nn::functional;
using namespace tessera::testing;

namespace {

std::optional<ts::Tensor> opt(const ts::Tensor& t) { return t.defined() ? std::optional<ts::Tensor>(t) : std::nullopt; }

ts::Tensor leaf(const ts::Tensor& t) { return t.defined() ? t.detach().clone().requires_grad_() : ts::Tensor(); }

// The gradients of sum(out_i * seed_i) in the defined inputs (undefined for the others).
std::vector<ts::Tensor> grads_of(const std::vector<ts::Tensor>& outs, const std::vector<ts::Tensor>& ins,
                                 uint64_t seed) {
  ts::Tensor loss;
  for (size_t i = 0; i < outs.size(); ++i) {
    ts::Tensor g = test_data(outs[i].sizes(), outs[i].dtype(), seed + i).reshape(outs[i].sizes());
    ts::Tensor term = (outs[i] * g).to(ts::kFloat64).sum();
    loss = loss.defined() ? loss + term : term;
  }
  std::vector<ts::Tensor> defined;
  for (const ts::Tensor& t : ins)
    if (t.defined()) defined.push_back(t);
  std::vector<ts::Tensor> g = ts::autograd::grad({loss}, defined);
  std::vector<ts::Tensor> out;
  size_t j = 0;
  for (const ts::Tensor& t : ins) out.push_back(t.defined() ? g[j++] : ts::Tensor());
  return out;
}

void expect_close(const std::vector<ts::Tensor>& a, const std::vector<ts::Tensor>& b, Tolerance tol,
                  const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].defined(), b[i].defined()) << what << " #" << i;
    if (a[i].defined()) {
      EXPECT_TRUE(all_close(a[i], b[i], tol)) << what << " #" << i;
    }
  }
}

// ---- add_layer_norm -------------------------------------------------------------------------------

// {sum, y, dx, dresidual, dweight, dbias} fused or composed.
std::vector<ts::Tensor> add_ln(bool fused, const ts::Tensor& x0, const ts::Tensor& r0, const ts::Tensor& w0,
                               const ts::Tensor& b0, const ts::Shape& ns) {
  ts::Tensor x = leaf(x0), r = leaf(r0), w = leaf(w0), b = leaf(b0);
  ts::Tensor s, y;
  if (fused) {
    std::tie(s, y) = F::add_layer_norm(x, r, ns, opt(w), opt(b), 1e-5);
  } else {
    s = x + r;
    y = F::layer_norm(s, ns, opt(w), opt(b), 1e-5);
  }
  std::vector<ts::Tensor> out{s, y};
  for (const ts::Tensor& g : grads_of({s, y}, {x, r, w, b}, 71)) out.push_back(g);
  return out;
}

TEST(OpsFused, AddLayerNormMatchesCompositeFloat64) {
  struct C {
    ts::Shape x, ns;
  };
  for (const C& c : std::vector<C>{{{4, 1}, {1}}, {{5, 7}, {7}}, {{3, 4096}, {4096}}, {{2, 3, 4, 5}, {4, 5}},
                                   {{6}, {6}}, {{0, 3}, {3}}}) {
    for (int affine = 0; affine < 4; ++affine) {
      ts::Tensor x = test_data(c.x, ts::kFloat64, 1).reshape(c.x);
      ts::Tensor r = test_data(c.x, ts::kFloat64, 2).reshape(c.x);
      ts::Tensor w = affine & 1 ? test_data(c.ns, ts::kFloat64, 3).reshape(c.ns) : ts::Tensor();
      ts::Tensor b = affine & 2 ? test_data(c.ns, ts::kFloat64, 4).reshape(c.ns) : ts::Tensor();
      expect_close(add_ln(true, x, r, w, b, c.ns), add_ln(false, x, r, w, b, c.ns), {1e-10, 1e-10},
                   ts::detail::str_cat("add_layer_norm ", c.x, " affine ", affine));
    }
  }
}

TEST(OpsFused, AddLayerNormLowPrecisionAndPromotion) {
  for (ts::DType d : {ts::kFloat32, ts::kBFloat16, ts::kFloat16}) {
    ts::Tensor x = test_data({6, 33}, d, 5).reshape({6, 33});
    ts::Tensor r = test_data({6, 33}, d, 6).reshape({6, 33});
    ts::Tensor w = test_data({33}, d, 7), b = test_data({33}, d, 8);
    // The sum is rounded to d before the statistics: the composite's values.
    auto fused = add_ln(true, x, r, w, b, {33});
    auto comp = add_ln(false, x, r, w, b, {33});
    EXPECT_TRUE(ts::equal(fused[0], comp[0])) << ts::dtype_name(d);
    Tolerance tol = tolerance_for(d);
    tol.atol = std::max(tol.atol, d == ts::kFloat32 ? 1e-5 : 2e-2);
    expect_close(fused, comp, tol, ts::dtype_name(d));
  }
  // float32 + bfloat16 -> float32, as x + residual.
  ts::Tensor x = test_data({3, 8}, ts::kFloat32, 9).reshape({3, 8});
  ts::Tensor r = test_data({3, 8}, ts::kBFloat16, 10).reshape({3, 8});
  auto [s, y] = F::add_layer_norm(x, r, {8});
  EXPECT_EQ(s.dtype(), ts::kFloat32);
  EXPECT_EQ(y.dtype(), ts::kFloat32);
  EXPECT_TRUE(all_close(y, F::layer_norm(x + r, {8}), {1e-6, 1e-6}));
}

// Note [Mixed add + layer norm]: {sum, y, dx, dresidual, dweight, dbias} of the mixed form (a 16-bit
// branch x, float32 residual and parameters, under autocast: y in the low dtype) or of the float32 op
// between explicit casts (what autocast ran before).
// stream_first: the float32 operand passed first (GPT-2's x + attn(...)).
std::vector<ts::Tensor> add_ln_mixed(bool mixed, bool stream_first, ts::DType low, const ts::Tensor& x0,
                                     const ts::Tensor& r0, const ts::Tensor& w0, const ts::Tensor& b0,
                                     const ts::Shape& ns) {
  ts::Tensor x = leaf(x0), r = leaf(r0), w = leaf(w0), b = leaf(b0);
  ts::Tensor s, y;
  if (mixed) {
    ts::amp::autocast guard(ts::Device("cpu"), low);
    std::tie(s, y) = stream_first ? F::add_layer_norm(r, x, ns, opt(w), opt(b), 1e-5)
                                  : F::add_layer_norm(x, r, ns, opt(w), opt(b), 1e-5);
  } else {
    std::tie(s, y) = stream_first ? F::add_layer_norm(r, x.to(ts::kFloat32), ns, opt(w), opt(b), 1e-5)
                                  : F::add_layer_norm(x.to(ts::kFloat32), r, ns, opt(w), opt(b), 1e-5);
    y = y.to(low);
  }
  std::vector<ts::Tensor> out{s, y};
  for (const ts::Tensor& g : grads_of({s, y}, {x, r, w, b}, 81)) out.push_back(g);
  return out;
}

TEST(OpsFused, AddLayerNormMixedEqualsCastsBitwise) {
  for (ts::DType low : {ts::kBFloat16, ts::kFloat16}) {
    for (const ts::Shape& sz : std::vector<ts::Shape>{{6, 33}, {3, 4096}, {4, 1}, {2, 3, 8}}) {
      const ts::Shape ns{sz.back()};
      for (int affine = 0; affine < 4; ++affine) {
        ts::Tensor x = test_data(sz, low, 21).reshape(sz);
        ts::Tensor r = test_data(sz, ts::kFloat32, 22).reshape(sz);
        ts::Tensor w = affine & 1 ? test_data(ns, ts::kFloat32, 23).reshape(ns) : ts::Tensor();
        ts::Tensor b = affine & 2 ? test_data(ns, ts::kFloat32, 24).reshape(ns) : ts::Tensor();
        const bool stream_first = affine == 3;
        const std::string what =
            ts::detail::str_cat(ts::dtype_name(low), " ", sz, " affine ", affine, stream_first ? " stream first" : "");
        auto m = add_ln_mixed(true, stream_first, low, x, r, w, b, ns);
        auto ref = add_ln_mixed(false, stream_first, low, x, r, w, b, ns);
        const ts::DType want[6] = {ts::kFloat32, low, low, ts::kFloat32, ts::kFloat32, ts::kFloat32};
        for (size_t i = 0; i < m.size(); ++i) {
          ASSERT_EQ(m[i].defined(), ref[i].defined()) << what << " #" << i;
          if (!m[i].defined()) continue;
          EXPECT_EQ(m[i].dtype(), want[i]) << what << " #" << i;
          EXPECT_TRUE(ts::equal(m[i], ref[i])) << what << " #" << i;
        }
      }
    }
  }
}

TEST(OpsFused, AddLayerNormAutocast) {
  // Both bfloat16: the residual goes to float32, the branch is read as it is, y comes out in bfloat16.
  ts::Tensor x = test_data({4, 16}, ts::kBFloat16, 11).reshape({4, 16});
  ts::Tensor r = test_data({4, 16}, ts::kBFloat16, 12).reshape({4, 16});
  ts::Tensor s, y;
  {
    ts::amp::autocast guard(ts::Device("cpu"), ts::kBFloat16);
    std::tie(s, y) = F::add_layer_norm(x, r, {16});
  }
  EXPECT_EQ(s.dtype(), ts::kFloat32);
  EXPECT_EQ(y.dtype(), ts::kBFloat16);
  auto [s32, y32] = F::add_layer_norm(x.to(ts::kFloat32), r.to(ts::kFloat32), {16});
  EXPECT_TRUE(ts::equal(s, s32));
  EXPECT_TRUE(ts::equal(y, y32.to(ts::kBFloat16)));
  // Both float32 under autocast: y is cast from the float32 result inside the op; its gradient flows
  // back as through an explicit cast.
  {
    ts::Tensor a = test_data({4, 16}, ts::kFloat32, 13).reshape({4, 16}).requires_grad_();
    ts::Tensor c = test_data({4, 16}, ts::kFloat32, 14).reshape({4, 16}).requires_grad_();
    std::vector<ts::Tensor> out[2];
    for (int ac = 0; ac < 2; ++ac) {
      ts::Tensor sa, ya;
      if (ac) {
        ts::amp::autocast guard(ts::Device("cpu"), ts::kBFloat16);
        std::tie(sa, ya) = F::add_layer_norm(a, c, {16});
      } else {
        std::tie(sa, ya) = F::add_layer_norm(a, c, {16});
        ya = ya.to(ts::kBFloat16);
      }
      out[ac] = {sa, ya};
      for (const ts::Tensor& g : grads_of({sa, ya}, {a, c}, 91)) out[ac].push_back(g);
    }
    EXPECT_EQ(out[1][1].dtype(), ts::kBFloat16);
    for (size_t i = 0; i < 4; ++i) EXPECT_TRUE(ts::equal(out[1][i], out[0][i])) << "#" << i;
  }
  // A float16 branch under bfloat16 autocast is widened first; float64 stays float64 (no y dtype).
  {
    ts::amp::autocast guard(ts::Device("cpu"), ts::kBFloat16);
    auto [s16, y16] = F::add_layer_norm(x.to(ts::kFloat16), r, {16});
    EXPECT_EQ(s16.dtype(), ts::kFloat32);
    EXPECT_EQ(y16.dtype(), ts::kBFloat16);
    auto [s64, y64] = F::add_layer_norm(x.to(ts::kFloat64), r, {16});
    EXPECT_EQ(s64.dtype(), ts::kFloat64);
    EXPECT_EQ(y64.dtype(), ts::kFloat64);
  }
}

TEST(OpsFused, AddLayerNormOpYDtypeAndLowGradient) {
  ts::Tensor x = test_data({3, 8}, ts::kFloat64, 31).reshape({3, 8});
  ts::Tensor r = test_data({3, 8}, ts::kFloat64, 32).reshape({3, 8});
  // A y dtype the kernel does not write itself: y is cast from sum's dtype.
  auto [s, y, mean, rstd] = ts::native_add_layer_norm(x, r, {8}, ts::Tensor(), ts::Tensor(), 1e-5, ts::kFloat32);
  auto [s64, y64, m64, r64] = ts::native_add_layer_norm(x, r, {8}, ts::Tensor(), ts::Tensor(), 1e-5);
  EXPECT_EQ(y.dtype(), ts::kFloat32);
  EXPECT_TRUE(ts::equal(y, y64.to(ts::kFloat32)));
  // The low gradient of a float64 sum: dsum cast.
  ts::Tensor gy = test_data({3, 8}, ts::kFloat64, 33).reshape({3, 8});
  auto [d, dl, dw, db] = ts::native_add_layer_norm_backward(gy, ts::Tensor(), s64, {8}, m64, r64, ts::Tensor(),
                                                            ts::Tensor(), {true, true, false, false}, ts::kFloat16);
  EXPECT_EQ(dl.dtype(), ts::kFloat16);
  EXPECT_TRUE(ts::equal(dl, d.to(ts::kFloat16)));
  EXPECT_THROW(ts::native_add_layer_norm_backward(gy, ts::Tensor(), s64, {8}, m64, r64, ts::Tensor(), ts::Tensor(),
                                                  {false, true, false, false}),
               ts::ValueError);
  EXPECT_THROW(ts::native_add_layer_norm(x, r, {8}, ts::Tensor(), ts::Tensor(), 1e-5, ts::kInt32), ts::DTypeError);
}

TEST(OpsFused, AddLayerNormGradcheckFloat64) {
  for (int affine = 0; affine < 4; ++affine) {
    std::vector<ts::Tensor> in{test_data({3, 5}, ts::kFloat64, 13).reshape({3, 5}).requires_grad_(),
                               test_data({3, 5}, ts::kFloat64, 14).reshape({3, 5}).requires_grad_()};
    const bool has_w = affine & 1, has_b = affine & 2;
    if (has_w) in.push_back(test_data({5}, ts::kFloat64, 15).requires_grad_());
    if (has_b) in.push_back(test_data({5}, ts::kFloat64, 16).requires_grad_());
    auto fn = [&](const std::vector<ts::Tensor>& v) -> std::vector<ts::Tensor> {
      std::optional<ts::Tensor> w, b;
      if (has_w) w = v[2];
      if (has_b) b = v[has_w ? 3 : 2];
      auto [s, y] = F::add_layer_norm(v[0], v[1], {5}, w, b, 1e-3);
      return {s, y};
    };
    std::string report;
    EXPECT_TRUE(ts::autograd::gradcheck(fn, in, {}, &report)) << "affine " << affine << "\n" << report;
    report.clear();
    EXPECT_TRUE(ts::autograd::gradgradcheck(fn, in, {}, &report)) << "affine " << affine << "\n" << report;
  }
}

TEST(OpsFused, AddLayerNormErrors) {
  ts::Tensor x = ts::randn({2, 4});
  EXPECT_THROW(F::add_layer_norm(x, ts::randn({2, 3}), {4}), ts::ShapeError);
  EXPECT_THROW(F::add_layer_norm(x, ts::randn({1, 4}), {4}), ts::ShapeError);  // no broadcasting
  EXPECT_THROW(F::add_layer_norm(x, ts::randn({2, 4}), {3}), ts::ShapeError);
  EXPECT_THROW(F::add_layer_norm(x, ts::ones({2, 4}, ts::kInt64), {4}), ts::DTypeError);
  EXPECT_THROW(F::add_layer_norm(x, ts::randn({2, 4}), {4}, ts::randn({3})), ts::ShapeError);
}

// ---- linear_gelu ------------------------------------------------------------------------------------

std::vector<ts::Tensor> lin_gelu(bool fused, const ts::Tensor& x0, const ts::Tensor& w0, const ts::Tensor& b0) {
  ts::Tensor x = leaf(x0), w = leaf(w0), b = leaf(b0);
  ts::Tensor y = fused ? F::linear_gelu(x, w, opt(b)) : F::gelu(F::linear(x, w, opt(b)), "tanh");
  std::vector<ts::Tensor> out{y};
  for (const ts::Tensor& g : grads_of({y}, {x, w, b}, 81)) out.push_back(g);
  return out;
}

TEST(OpsFused, LinearGeluMatchesCompositeFloat64) {
  for (const ts::Shape& xs : std::vector<ts::Shape>{{5, 7}, {2, 3, 7}, {7}, {0, 7}}) {
    for (bool bias : {true, false}) {
      ts::Tensor x = test_data(xs, ts::kFloat64, 21).reshape(xs);
      ts::Tensor w = test_data({9, 7}, ts::kFloat64, 22).reshape({9, 7}) * 0.3;
      ts::Tensor b = bias ? test_data({9}, ts::kFloat64, 23) : ts::Tensor();
      expect_close(lin_gelu(true, x, w, b), lin_gelu(false, x, w, b), {1e-10, 1e-10},
                   ts::detail::str_cat("linear_gelu ", xs, " bias ", bias));
    }
  }
}

TEST(OpsFused, LinearGeluFloat32AndAutocast) {
  ts::Tensor x = test_data({6, 16}, ts::kFloat32, 24).reshape({6, 16});
  ts::Tensor w = test_data({8, 16}, ts::kFloat32, 25).reshape({8, 16}) * 0.2;
  ts::Tensor b = test_data({8}, ts::kFloat32, 26);
  expect_close(lin_gelu(true, x, w, b), lin_gelu(false, x, w, b), {1e-5, 1e-5}, "float32");
  ts::Tensor wl = leaf(w);
  ts::Tensor y;
  {
    ts::amp::autocast guard(ts::Device("cpu"), ts::kBFloat16);
    y = F::linear_gelu(x, wl, b);
  }
  EXPECT_EQ(y.dtype(), ts::kBFloat16);
  y.to(ts::kFloat32).sum().backward();
  EXPECT_EQ(wl.grad().dtype(), ts::kFloat32);
}

TEST(OpsFused, LinearGeluGradcheckFloat64) {
  for (bool bias : {true, false}) {
    std::vector<ts::Tensor> in{test_data({2, 3, 4}, ts::kFloat64, 27).reshape({2, 3, 4}).requires_grad_(),
                               (test_data({5, 4}, ts::kFloat64, 28).reshape({5, 4}) * 0.5).detach().requires_grad_()};
    if (bias) in.push_back(test_data({5}, ts::kFloat64, 29).requires_grad_());
    auto fn = [&](const std::vector<ts::Tensor>& v) -> std::vector<ts::Tensor> {
      return {F::linear_gelu(v[0], v[1], bias ? std::optional<ts::Tensor>(v[2]) : std::nullopt)};
    };
    std::string report;
    EXPECT_TRUE(ts::autograd::gradcheck(fn, in, {}, &report)) << report;
    report.clear();
    EXPECT_TRUE(ts::autograd::gradgradcheck(fn, in, {}, &report)) << report;
  }
}

TEST(OpsFused, LinearGeluErrors) {
  EXPECT_THROW(F::linear_gelu(ts::randn({2, 3}), ts::randn({4, 5})), ts::ShapeError);
  EXPECT_THROW(F::linear_gelu(ts::randn({2, 3}), ts::randn({4, 3}), ts::randn({5})), ts::ShapeError);
  EXPECT_THROW(F::linear_gelu(ts::randn({2, 3}), ts::randn({4, 3}, ts::kFloat64)), ts::DTypeError);
  EXPECT_THROW(F::linear_gelu(ts::ones({2, 3}, ts::kInt64), ts::ones({4, 3}, ts::kInt64)), ts::DTypeError);
}

TEST(OpsFused, GeluTanhBackwardMatchesDerivative) {
  for (ts::DType d : {ts::kFloat64, ts::kFloat32, ts::kBFloat16}) {
    ts::Tensor pre = test_data({5, 9}, d, 30).reshape({5, 9});
    ts::Tensor g = test_data({5, 9}, d, 31).reshape({5, 9});
    ts::Tensor p = leaf(pre.to(ts::kFloat64));
    ts::Tensor ref = ts::autograd::grad({(F::gelu(p, "tanh") * g.to(ts::kFloat64)).sum()}, {p})[0];
    Tolerance tol = tolerance_for(d);
    tol.atol = std::max(tol.atol, 1e-6);
    EXPECT_TRUE(all_close(ts::gelu_tanh_backward(g, pre), ref.to(d), tol)) << ts::dtype_name(d);
  }
}

// ---- mlp_gelu -----------------------------------------------------------------------------------------

std::vector<ts::Tensor> mlp(bool fused, const ts::Tensor& x0, const ts::Tensor& w10, const ts::Tensor& b10,
                            const ts::Tensor& w20, const ts::Tensor& b20) {
  ts::Tensor x = leaf(x0), w1 = leaf(w10), b1 = leaf(b10), w2 = leaf(w20), b2 = leaf(b20);
  ts::Tensor y = fused ? F::mlp_gelu(x, w1, opt(b1), w2, opt(b2))
                       : F::linear(F::gelu(F::linear(x, w1, opt(b1)), "tanh"), w2, opt(b2));
  std::vector<ts::Tensor> out{y};
  for (const ts::Tensor& g : grads_of({y}, {x, w1, b1, w2, b2}, 91)) out.push_back(g);
  return out;
}

TEST(OpsFused, MlpGeluMatchesCompositeFloat64) {
  for (const ts::Shape& xs : std::vector<ts::Shape>{{5, 7}, {2, 3, 7}, {7}, {0, 7}}) {
    for (int biases = 0; biases < 4; ++biases) {
      ts::Tensor x = test_data(xs, ts::kFloat64, 61).reshape(xs);
      ts::Tensor w1 = test_data({9, 7}, ts::kFloat64, 62).reshape({9, 7}) * 0.3;
      ts::Tensor b1 = biases & 1 ? test_data({9}, ts::kFloat64, 63) : ts::Tensor();
      ts::Tensor w2 = test_data({4, 9}, ts::kFloat64, 64).reshape({4, 9}) * 0.3;
      ts::Tensor b2 = biases & 2 ? test_data({4}, ts::kFloat64, 65) : ts::Tensor();
      expect_close(mlp(true, x, w1, b1, w2, b2), mlp(false, x, w1, b1, w2, b2), {1e-10, 1e-10},
                   ts::detail::str_cat("mlp_gelu ", xs, " biases ", biases));
    }
  }
}

TEST(OpsFused, MlpGeluGradcheckAutocastAndErrors) {
  std::vector<ts::Tensor> in{test_data({2, 3, 4}, ts::kFloat64, 66).reshape({2, 3, 4}).requires_grad_(),
                             (test_data({5, 4}, ts::kFloat64, 67).reshape({5, 4}) * 0.5).detach().requires_grad_(),
                             test_data({5}, ts::kFloat64, 68).requires_grad_(),
                             (test_data({3, 5}, ts::kFloat64, 69).reshape({3, 5}) * 0.5).detach().requires_grad_(),
                             test_data({3}, ts::kFloat64, 70).requires_grad_()};
  auto fn = [](const std::vector<ts::Tensor>& v) -> std::vector<ts::Tensor> {
    return {F::mlp_gelu(v[0], v[1], v[2], v[3], v[4])};
  };
  std::string report;
  EXPECT_TRUE(ts::autograd::gradcheck(fn, in, {}, &report)) << report;
  report.clear();
  EXPECT_TRUE(ts::autograd::gradgradcheck(fn, in, {}, &report)) << report;
  {
    ts::amp::autocast guard(ts::Device("cpu"), ts::kBFloat16);
    ts::Tensor y = F::mlp_gelu(ts::randn({3, 4}), ts::randn({5, 4}), ts::randn({5}), ts::randn({2, 5}), std::nullopt);
    EXPECT_EQ(y.dtype(), ts::kBFloat16);
  }
  EXPECT_THROW(F::mlp_gelu(ts::randn({3, 4}), ts::randn({5, 4}), std::nullopt, ts::randn({2, 6}), std::nullopt),
               ts::ShapeError);
  EXPECT_THROW(F::mlp_gelu(ts::randn({3, 4}), ts::randn({5, 4}), ts::randn({4}), ts::randn({2, 5}), std::nullopt),
               ts::ShapeError);
  EXPECT_THROW(F::mlp_gelu(ts::randn({3, 4}), ts::randn({5, 4}), std::nullopt, ts::randn({2, 5}, ts::kFloat64),
                           std::nullopt),
               ts::DTypeError);
  // The backward helper alone.
  ts::Tensor g = test_data({6, 3}, ts::kFloat64, 71).reshape({6, 3});
  ts::Tensor w2 = test_data({3, 8}, ts::kFloat64, 72).reshape({3, 8});
  ts::Tensor pre = test_data({6, 8}, ts::kFloat64, 73).reshape({6, 8});
  auto [dpre, db] = ts::linear_dgelu_bgrad(g, w2, pre, true);
  ts::Tensor ref = ts::gelu_tanh_backward(ts::mm(g, w2), pre);
  EXPECT_TRUE(all_close(dpre, ref, {1e-12, 1e-12}));
  EXPECT_TRUE(all_close(db, ref.sum(0), {1e-12, 1e-12}));
}

// ---- linear's weight + bias gradient ------------------------------------------------------------

TEST(OpsFused, LinearWeightBiasGradMatchesMmAndSum) {
  ts::Tensor g = test_data({7, 5}, ts::kFloat64, 32).reshape({7, 5});
  ts::Tensor x = test_data({7, 3}, ts::kFloat64, 33).reshape({7, 3});
  auto [dw, db] = ts::linear_weight_bias_grad(g, x, {true, true});
  EXPECT_TRUE(all_close(dw, ts::mm(g.t(), x), {1e-12, 1e-12}));
  EXPECT_TRUE(all_close(db, g.sum(0), {1e-12, 1e-12}));
  auto [dw2, db2] = ts::linear_weight_bias_grad(g, x, {false, true});
  EXPECT_FALSE(dw2.defined());
  EXPECT_TRUE(db2.defined());
  // Through linear's derivative, 3-D input.
  ts::Tensor xi = leaf(test_data({2, 3, 4}, ts::kFloat64, 34).reshape({2, 3, 4}));
  ts::Tensor w = leaf(test_data({5, 4}, ts::kFloat64, 35).reshape({5, 4}));
  ts::Tensor b = leaf(test_data({5}, ts::kFloat64, 36));
  ts::Tensor gy = test_data({2, 3, 5}, ts::kFloat64, 37).reshape({2, 3, 5});
  auto gr = ts::autograd::grad({(F::linear(xi, w, b) * gy).sum()}, {w, b});
  EXPECT_TRUE(all_close(gr[0], ts::mm(gy.reshape({6, 5}).t(), xi.detach().reshape({6, 4})), {1e-12, 1e-12}));
  EXPECT_TRUE(all_close(gr[1], gy.sum(std::vector<int64_t>{0, 1}), {1e-12, 1e-12}));
}

// ---- linear_cross_entropy -------------------------------------------------------------------------

// {loss, dx, dweight} fused (chunk rows) or composed; the loss scaled by 1.5 before backward.
std::vector<ts::Tensor> lin_ce(int64_t chunk, const ts::Tensor& x0, const ts::Tensor& w0, const ts::Tensor& t,
                               const std::string& reduction) {
  ts::Tensor x = leaf(x0), w = leaf(w0);
  ts::Tensor loss = chunk > 0 ? F::linear_cross_entropy(x, w, t, -100, reduction, chunk)
                              : F::cross_entropy(F::linear(x, w), t, std::nullopt, -100, reduction);
  auto g = ts::autograd::grad({loss * 1.5}, {x, w});
  return {loss, g[0], g[1]};
}

TEST(OpsFused, LinearCrossEntropyMatchesCompositeFloat64) {
  const int64_t n = 11, c = 6, v = 13;
  ts::Tensor x = test_data({n, c}, ts::kFloat64, 41).reshape({n, c});
  ts::Tensor w = test_data({v, c}, ts::kFloat64, 42).reshape({v, c});
  ts::Tensor t = test_data({n}, ts::kInt64, 43, 0, v);
  ts::Tensor ti = t.clone();
  ti.index_put_({ts::tensor(std::vector<int64_t>{1, 4, 5}, {3}, ts::kInt64)}, ts::scalar_tensor(-100, ts::kInt64));
  for (const char* red : {"mean", "sum"}) {
    for (const ts::Tensor& tt : {t, ti}) {
      const auto ref = lin_ce(0, x, w, tt, red);
      for (int64_t chunk : {1, 3, 4, 11, 4096})
        expect_close(lin_ce(chunk, x, w, tt, red), ref, {1e-10, 1e-12},
                     ts::detail::str_cat("linear_cross_entropy ", red, " chunk ", chunk));
    }
  }
}

TEST(OpsFused, LinearCrossEntropyFloat32AndInt32Targets) {
  ts::Tensor x = test_data({9, 8}, ts::kFloat32, 44).reshape({9, 8});
  ts::Tensor w = test_data({20, 8}, ts::kFloat32, 45).reshape({20, 8});
  ts::Tensor t = test_data({9}, ts::kInt32, 46, 0, 20);
  expect_close(lin_ce(4, x, w, t, "mean"), lin_ce(0, x, w, t.to(ts::kInt64), "mean"), {1e-5, 1e-6}, "float32");
  // bfloat16 inputs: dW accumulates over chunks in float32.
  ts::Tensor xb = x.to(ts::kBFloat16), wb = w.to(ts::kBFloat16);
  expect_close(lin_ce(2, xb, wb, t, "sum"), lin_ce(0, xb, wb, t, "sum"), {2e-2, 2e-2}, "bfloat16");
}

TEST(OpsFused, LinearCrossEntropyNoGradAndAllIgnored) {
  ts::Tensor x = test_data({5, 4}, ts::kFloat64, 47).reshape({5, 4});
  ts::Tensor w = test_data({7, 4}, ts::kFloat64, 48).reshape({7, 4});
  ts::Tensor t = test_data({5}, ts::kInt64, 49, 0, 7);
  ts::Tensor loss = F::linear_cross_entropy(x, w, t, -100, "mean", 2);
  EXPECT_FALSE(loss.requires_grad());
  EXPECT_EQ(loss.dim(), 0);
  EXPECT_TRUE(all_close(loss, F::cross_entropy(F::linear(x, w), t), {1e-12, 1e-12}));
  ts::Tensor none = ts::full({5}, -100, ts::TensorOptions(ts::kInt64));
  EXPECT_TRUE(std::isnan(F::linear_cross_entropy(x, w, none).item<double>()));
  EXPECT_EQ(F::linear_cross_entropy(x, w, none, -100, "sum").item<double>(), 0.0);
}

TEST(OpsFused, LinearCrossEntropyGradcheckFloat64) {
  ts::Tensor t = ts::tensor(std::vector<int64_t>{2, -100, 0, 4}, {4}, ts::kInt64);
  for (const char* red : {"mean", "sum"}) {
    std::vector<ts::Tensor> in{test_data({4, 3}, ts::kFloat64, 50).reshape({4, 3}).requires_grad_(),
                               test_data({5, 3}, ts::kFloat64, 51).reshape({5, 3}).requires_grad_()};
    auto fn = [&](const std::vector<ts::Tensor>& v) -> std::vector<ts::Tensor> {
      return {F::linear_cross_entropy(v[0], v[1], t, -100, red, 3)};
    };
    std::string report;
    EXPECT_TRUE(ts::autograd::gradcheck(fn, in, {}, &report)) << red << "\n" << report;
    report.clear();
    EXPECT_TRUE(ts::autograd::gradgradcheck(fn, in, {}, &report)) << red << "\n" << report;
  }
}

TEST(OpsFused, LinearCrossEntropyErrors) {
  ts::Tensor x = ts::randn({3, 4}), w = ts::randn({5, 4});
  ts::Tensor t = ts::zeros({3}, ts::TensorOptions(ts::kInt64));
  EXPECT_THROW(F::linear_cross_entropy(x, w, t, -100, "none"), ts::ValueError);
  EXPECT_THROW(F::linear_cross_entropy(x, w, t, -100, "mean", 0), ts::ValueError);
  EXPECT_THROW(F::linear_cross_entropy(x, ts::randn({5, 3}), t), ts::ShapeError);
  EXPECT_THROW(F::linear_cross_entropy(x, w, ts::zeros({2}, ts::TensorOptions(ts::kInt64))), ts::ShapeError);
  EXPECT_THROW(F::linear_cross_entropy(x, w, ts::zeros({3})), ts::DTypeError);
  EXPECT_THROW(F::linear_cross_entropy(x, w, ts::full({3}, 5, ts::TensorOptions(ts::kInt64))), ts::IndexError);
}

}  // namespace
