// The fused layer norm and RMS norm ops (ops/norm_ops.h) and nn::functional::layer_norm / rms_norm on
// top of them: forward, statistics and the fused backward against a float64 reference computed on
// the host, over every float dtype, N = 1, odd N, N = 4096, 3-D inputs with a 2-D normalized_shape,
// with and without weight and bias; gradcheck and gradgradcheck in float64 (the first order runs the
// fused backward, the second the composite formula); dweight / dbias independent of the thread
// count; mixed 16-bit / float32 parameters; the errors.
#include <cmath>
#include <tuple>

#include "common/test_util.h"
#include "ops/norm_ops.h"
#include "tessera/nn/functional.h"

namespace ts = tessera;
using namespace tessera::testing;

namespace {

struct Case {
  ts::Shape x;
  ts::Shape normalized;
};

const std::vector<Case>& cases() {
  static const std::vector<Case> c = {
      {{4, 1}, {1}}, {{5, 7}, {7}}, {{3, 4096}, {4096}}, {{2, 3, 4, 5}, {4, 5}}, {{6}, {6}}, {{0, 3}, {3}},
  };
  return c;
}

std::vector<double> host(const ts::Tensor& t) { return t.to(ts::kFloat64).contiguous().tolist<double>(); }
ts::Tensor dev(const std::vector<double>& v, const ts::Shape& s) {
  return ts::tensor(v, {static_cast<int64_t>(v.size())}, ts::kFloat64).reshape(s);
}

// Everything of a float64 reference: y, mean, rstd, and (given dy) dx, dweight, dbias.
struct Ref {
  ts::Tensor y, mean, rstd, dx, dw, db;
};

// x (M, N) values; w, b (N) or undefined; rms: no mean subtraction.
Ref reference(const ts::Tensor& x, const ts::Shape& ns, const ts::Tensor& w, const ts::Tensor& b, double eps,
              bool rms, const ts::Tensor& dy = {}) {
  const int64_t n = ts::numel_of(ns), m = n > 0 ? x.numel() / n : 0;
  std::vector<double> xv = host(x), wv, bv, gv, y(xv.size()), mu(m), rs(m), dx(xv.size()), dw(n, 0.0), db(n, 0.0);
  if (w.defined()) wv = host(w);
  if (b.defined()) bv = host(b);
  if (dy.defined()) gv = host(dy);
  for (int64_t r = 0; r < m; ++r) {
    const double* xr = xv.data() + r * n;
    double mean = 0, var = 0;
    if (!rms) {
      for (int64_t i = 0; i < n; ++i) mean += xr[i];
      mean /= n;
    }
    for (int64_t i = 0; i < n; ++i) var += (xr[i] - mean) * (xr[i] - mean);
    var /= n;
    const double rstd = 1.0 / std::sqrt(var + eps);
    mu[r] = mean;
    rs[r] = rstd;
    double sg = 0, sgx = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double xh = (xr[i] - mean) * rstd;
      y[r * n + i] = xh * (wv.empty() ? 1.0 : wv[i]) + (bv.empty() ? 0.0 : bv[i]);
      if (gv.empty()) continue;
      const double g = gv[r * n + i] * (wv.empty() ? 1.0 : wv[i]);
      sg += g;
      sgx += g * xh;
      dw[i] += gv[r * n + i] * xh;
      db[i] += gv[r * n + i];
    }
    if (gv.empty()) continue;
    for (int64_t i = 0; i < n; ++i) {
      const double xh = (xr[i] - mean) * rstd;
      const double g = gv[r * n + i] * (wv.empty() ? 1.0 : wv[i]);
      dx[r * n + i] = rstd * (g - (rms ? 0.0 : sg / n) - xh * sgx / n);
    }
  }
  Ref out;
  out.y = dev(y, x.sizes());
  out.mean = dev(mu, {m});
  out.rstd = dev(rs, {m});
  out.dx = dev(dx, x.sizes());
  out.dw = dev(dw, ns);
  out.db = dev(db, ns);
  return out;
}

Tolerance tol(ts::DType d) {
  switch (d) {
    case ts::kFloat64: return {1e-10, 1e-10};
    case ts::kFloat32: return {2e-5, 2e-5};
    case ts::kFloat16: return {2e-3, 2e-3};
    default: return {1.6e-2, 1e-2};
  }
}
// dweight / dbias sum M rows: a looser absolute tolerance for the 16-bit outputs.
Tolerance sum_tol(ts::DType d) {
  Tolerance t = tol(d);
  if (d == ts::kFloat16 || d == ts::kBFloat16) t.atol = 5e-2;
  return t;
}

ts::Tensor flat(const ts::Tensor& t) { return t.reshape({t.numel()}); }

}  // namespace

TEST(OpsNorm, LayerNormForwardMatchesFloat64Reference) {
  for (ts::DType d : float_dtypes()) {
    for (const Case& c : cases()) {
      for (int affine = 0; affine < 4; ++affine) {
        ts::Tensor x = test_data(c.x, d, 1).reshape(c.x) * 2.0 + 3.0;
        ts::Tensor w = (affine & 1) ? test_data(c.normalized, d, 2).reshape(c.normalized) : ts::Tensor();
        ts::Tensor b = (affine & 2) ? test_data(c.normalized, d, 3).reshape(c.normalized) : ts::Tensor();
        auto [y, mean, rstd] = ts::native_layer_norm(x, c.normalized, w, b, 1e-5);
        Ref r = reference(x, c.normalized, w, b, 1e-5, false);
        const std::string what = ts::detail::str_cat(ts::dtype_name(d), " ", c.x, " affine ", affine);
        EXPECT_EQ(y.dtype(), d) << what;
        EXPECT_EQ(y.sizes(), x.sizes()) << what;
        const ts::DType sd = d == ts::kFloat64 ? ts::kFloat64 : ts::kFloat32;
        EXPECT_EQ(mean.dtype(), sd) << what;
        EXPECT_EQ(rstd.dtype(), sd) << what;
        ts::Shape stat = c.x;
        for (size_t i = c.x.size() - c.normalized.size(); i < c.x.size(); ++i) stat[i] = 1;
        EXPECT_EQ(mean.sizes(), stat) << what;
        EXPECT_TRUE(all_close(y, r.y, tol(d))) << what;
        EXPECT_TRUE(all_close(flat(mean), r.mean, tol(sd))) << what;
        EXPECT_TRUE(all_close(flat(rstd), r.rstd, {tol(sd).rtol * 10, tol(sd).atol})) << what;
      }
    }
  }
}

TEST(OpsNorm, RmsNormForwardMatchesFloat64Reference) {
  for (ts::DType d : float_dtypes()) {
    for (const Case& c : cases()) {
      for (int affine = 0; affine < 2; ++affine) {
        ts::Tensor x = test_data(c.x, d, 4).reshape(c.x);
        ts::Tensor w = affine ? test_data(c.normalized, d, 5).reshape(c.normalized) : ts::Tensor();
        auto [y, rstd] = ts::native_rms_norm(x, c.normalized, w, 1e-6);
        Ref r = reference(x, c.normalized, w, {}, 1e-6, true);
        const std::string what = ts::detail::str_cat(ts::dtype_name(d), " ", c.x, " affine ", affine);
        EXPECT_EQ(y.dtype(), d) << what;
        EXPECT_TRUE(all_close(y, r.y, tol(d))) << what;
        EXPECT_TRUE(all_close(flat(rstd), r.rstd, {tol(rstd.dtype()).rtol * 10, tol(rstd.dtype()).atol})) << what;
      }
    }
  }
}

TEST(OpsNorm, LayerNormIsStableForLargeOffsets) {
  // E[x^2] - E[x]^2 in float32 would lose every digit here; the two-pass variance does not.
  ts::Tensor x = test_data({4, 512}, ts::kFloat32, 7) * 0.01 + 1000.0;
  auto [y, mean, rstd] = ts::native_layer_norm(x, {512}, {}, {}, 1e-12);
  Ref r = reference(x, {512}, {}, {}, 1e-12, false);
  EXPECT_TRUE(all_close(y, r.y, {1e-2, 1e-2}));
  EXPECT_TRUE(all_close(flat(rstd), r.rstd, {1e-2, 0}));
}

TEST(OpsNorm, FusedBackwardMatchesFloat64Reference) {
  for (int rms = 0; rms < 2; ++rms) {
    for (ts::DType d : float_dtypes()) {
      for (const Case& c : cases()) {
        for (int affine = 0; affine < 4; ++affine) {
          if (rms && (affine & 2)) continue;
          ts::Tensor x = test_data(c.x, d, 11).reshape(c.x) + 1.0;
          ts::Tensor dy = test_data(c.x, d, 12).reshape(c.x);
          ts::Tensor w = (affine & 1) ? test_data(c.normalized, d, 13).reshape(c.normalized) : ts::Tensor();
          ts::Tensor b = (affine & 2) ? test_data(c.normalized, d, 14).reshape(c.normalized) : ts::Tensor();
          Ref r = reference(x, c.normalized, w, b, 1e-5, rms, dy);
          ts::Tensor dx, dw, db;
          if (rms) {
            auto [y, rstd] = ts::native_rms_norm(x, c.normalized, w, 1e-5);
            std::tie(dx, dw) = ts::native_rms_norm_backward(dy, x, c.normalized, rstd, w, {true, true});
          } else {
            auto [y, mean, rstd] = ts::native_layer_norm(x, c.normalized, w, b, 1e-5);
            std::tie(dx, dw, db) =
                ts::native_layer_norm_backward(dy, x, c.normalized, mean, rstd, w, b, {true, true, true});
          }
          const std::string what =
              ts::detail::str_cat(rms ? "rms " : "layer ", ts::dtype_name(d), " ", c.x, " affine ", affine);
          ASSERT_TRUE(dx.defined()) << what;
          EXPECT_EQ(dx.dtype(), d) << what;
          EXPECT_TRUE(all_close(dx, r.dx, sum_tol(d))) << what;
          EXPECT_EQ(dw.defined(), w.defined()) << what;
          if (dw.defined()) {
            EXPECT_TRUE(all_close(dw, r.dw, sum_tol(d))) << what;
          }
          EXPECT_EQ(db.defined(), b.defined()) << what;
          if (db.defined()) {
            EXPECT_TRUE(all_close(db, r.db, sum_tol(d))) << what;
          }
        }
      }
    }
  }
}

TEST(OpsNorm, BackwardOutputMaskSkipsOutputs) {
  ts::Tensor x = test_data({3, 5}, ts::kFloat32, 1).reshape({3, 5});
  ts::Tensor w = ts::ones({5}), b = ts::zeros({5});
  auto [y, mean, rstd] = ts::native_layer_norm(x, {5}, w, b, 1e-5);
  auto [dx, dw, db] = ts::native_layer_norm_backward(ts::ones_like(x), x, {5}, mean, rstd, w, b, {false, true, false});
  EXPECT_FALSE(dx.defined());
  EXPECT_TRUE(dw.defined());
  EXPECT_FALSE(db.defined());
  // dweight = sum over rows of xhat, which is about zero per column only by chance: compare to the reference.
  EXPECT_TRUE(all_close(dw, reference(x, {5}, w, b, 1e-5, false, ts::ones_like(x)).dw, {1e-5, 1e-5}));
}

TEST(OpsNorm, WeightGradientDoesNotDependOnThreadCount) {
  const int prev = ts::get_num_threads();
  ts::Tensor x = test_data({300, 67}, ts::kFloat32, 21).reshape({300, 67});
  ts::Tensor dy = test_data({300, 67}, ts::kFloat32, 22).reshape({300, 67});
  ts::Tensor w = test_data({67}, ts::kFloat32, 23), b = test_data({67}, ts::kFloat32, 24);
  auto run = [&] {
    auto [y, mean, rstd] = ts::native_layer_norm(x, {67}, w, b, 1e-5);
    return ts::native_layer_norm_backward(dy, x, {67}, mean, rstd, w, b, {true, true, true});
  };
  ts::set_num_threads(1);
  auto [dx1, dw1, db1] = run();
  ts::set_num_threads(2);
  auto [dx2, dw2, db2] = run();
  ts::set_num_threads(prev);
  EXPECT_TRUE(ts::equal(dx1, dx2));
  EXPECT_TRUE(ts::equal(dw1, dw2));
  EXPECT_TRUE(ts::equal(db1, db2));
}

TEST(OpsNorm, GradcheckAndGradgradcheckFloat64) {
  struct G {
    ts::Shape x, ns;
  };
  for (const G& c : std::vector<G>{{{3, 5}, {5}}, {{2, 3, 2, 2}, {2, 2}}, {{4, 1}, {1}}}) {
    for (int affine = 0; affine < 4; ++affine) {
      ts::Tensor x = test_data(c.x, ts::kFloat64, 31).reshape(c.x).requires_grad_();
      std::vector<ts::Tensor> in{x};
      if (affine & 1) in.push_back(test_data(c.ns, ts::kFloat64, 32).reshape(c.ns).requires_grad_());
      if (affine & 2) in.push_back(test_data(c.ns, ts::kFloat64, 33).reshape(c.ns).requires_grad_());
      const bool has_w = affine & 1, has_b = affine & 2;
      auto ln = [&](const std::vector<ts::Tensor>& v) -> std::vector<ts::Tensor> {
        std::optional<ts::Tensor> w, b;
        if (has_w) w = v[1];
        if (has_b) b = v[has_w ? 2 : 1];
        return {ts::nn::functional::layer_norm(v[0], c.ns, w, b, 1e-3)};
      };
      const std::string what = ts::detail::str_cat(c.x, " affine ", affine);
      std::string report;
      EXPECT_TRUE(ts::autograd::gradcheck(ln, in, {}, &report)) << "layer_norm " << what << "\n" << report;
      report.clear();
      EXPECT_TRUE(ts::autograd::gradgradcheck(ln, in, {}, &report)) << "layer_norm " << what << "\n" << report;
      if (has_b) continue;
      auto rms = [&](const std::vector<ts::Tensor>& v) -> std::vector<ts::Tensor> {
        std::optional<ts::Tensor> w;
        if (has_w) w = v[1];
        return {ts::nn::functional::rms_norm(v[0], c.ns, w, 1e-3)};
      };
      report.clear();
      EXPECT_TRUE(ts::autograd::gradcheck(rms, in, {}, &report)) << "rms_norm " << what << "\n" << report;
      report.clear();
      EXPECT_TRUE(ts::autograd::gradgradcheck(rms, in, {}, &report)) << "rms_norm " << what << "\n" << report;
    }
  }
}

TEST(OpsNorm, CompositeAndFusedBackwardAgree) {
  ts::Tensor x = test_data({6, 9}, ts::kFloat64, 41).reshape({6, 9}).requires_grad_();
  ts::Tensor w = test_data({9}, ts::kFloat64, 42).requires_grad_();
  ts::Tensor b = test_data({9}, ts::kFloat64, 43).requires_grad_();
  ts::Tensor dy = test_data({6, 9}, ts::kFloat64, 44).reshape({6, 9});
  ts::Tensor y = ts::nn::functional::layer_norm(x, {9}, w, b);
  auto fused = ts::autograd::grad({y}, {x, w, b}, {dy}, /*retain_graph=*/true, /*create_graph=*/false);
  auto composite = ts::autograd::grad({y}, {x, w, b}, {dy}, /*retain_graph=*/true, /*create_graph=*/true);
  for (size_t i = 0; i < 3; ++i) EXPECT_TRUE(all_close(composite[i].detach(), fused[i], {1e-12, 1e-12})) << i;
  EXPECT_TRUE(composite[0].requires_grad());
}

TEST(OpsNorm, MixedPrecisionParametersAndDtypes) {
  // bfloat16 input, float32 parameters: the output is bfloat16, the parameter gradients float32.
  ts::Tensor x = test_data({4, 16}, ts::kBFloat16, 51).reshape({4, 16}).requires_grad_();
  ts::Tensor w = test_data({16}, ts::kFloat32, 52).requires_grad_();
  ts::Tensor b = test_data({16}, ts::kFloat32, 53).requires_grad_();
  ts::Tensor y = ts::nn::functional::layer_norm(x, {16}, w, b);
  EXPECT_EQ(y.dtype(), ts::kBFloat16);
  Ref r = reference(x, {16}, w.to(ts::kBFloat16), b.to(ts::kBFloat16), 1e-5, false);
  EXPECT_TRUE(all_close(y, r.y, tol(ts::kBFloat16)));
  y.to(ts::kFloat32).sum().backward();
  EXPECT_EQ(x.grad().dtype(), ts::kBFloat16);
  EXPECT_EQ(w.grad().dtype(), ts::kFloat32);
  EXPECT_EQ(b.grad().dtype(), ts::kFloat32);
  EXPECT_TRUE(all_close(b.grad(), ts::full({16}, 4.0)));
  ts::Tensor h = ts::nn::functional::rms_norm(test_data({3, 8}, ts::kFloat16, 54).reshape({3, 8}), {8},
                                              ts::ones({8}));
  EXPECT_EQ(h.dtype(), ts::kFloat16);
}

TEST(OpsNorm, NonContiguousInputs) {
  for (const Layout& l : layouts()) {
    ts::Tensor base = test_data({6, 8}, ts::kFloat32, 61).reshape({6, 8});
    ts::Tensor x = l.apply(base);
    ts::Tensor y = ts::nn::functional::layer_norm(x, {8});
    EXPECT_TRUE(all_close(y, reference(base, {8}, {}, {}, 1e-5, false).y, tol(ts::kFloat32))) << l.name;
    ts::Tensor z = ts::nn::functional::rms_norm(x, {8}, std::nullopt, 1e-5);
    EXPECT_TRUE(all_close(z, reference(base, {8}, {}, {}, 1e-5, true).y, tol(ts::kFloat32))) << l.name;
  }
}

TEST(OpsNorm, EmptyRowsGiveNaNStatistics) {
  // N = 0: mean and rstd of nothing are NaN (0 / 0), y and dx are empty, dweight / dbias too.
  ts::Tensor x = ts::zeros({3, 0});
  auto [y, mean, rstd] = ts::native_layer_norm(x, {0}, ts::ones({0}), ts::zeros({0}), 1e-5);
  EXPECT_EQ(y.sizes(), x.sizes());
  EXPECT_TRUE(std::isnan(mean.reshape({3})[1].item<double>()));
  EXPECT_TRUE(std::isnan(rstd.reshape({3})[2].item<double>()));
  auto [dx, dw, db] = ts::native_layer_norm_backward(x, x, {0}, mean, rstd, ts::ones({0}), ts::zeros({0}),
                                                     {true, true, true});
  EXPECT_EQ(dx.sizes(), x.sizes());
  EXPECT_EQ(dw.numel(), 0);
  // M = 0: dweight and dbias are zeros.
  ts::Tensor e = ts::zeros({0, 4});
  auto [ye, me, re] = ts::native_layer_norm(e, {4}, ts::ones({4}), ts::ones({4}), 1e-5);
  auto [dxe, dwe, dbe] = ts::native_layer_norm_backward(e, e, {4}, me, re, ts::ones({4}), ts::ones({4}),
                                                        {true, true, true});
  EXPECT_TRUE(ts::equal(dwe, ts::zeros({4})));
  EXPECT_TRUE(ts::equal(dbe, ts::zeros({4})));
}

TEST(OpsNorm, Errors) {
  ts::Tensor x = ts::zeros({3, 4});
  EXPECT_THROW(ts::native_layer_norm(x, {5}, {}, {}, 1e-5), ts::ShapeError);
  EXPECT_THROW(ts::native_layer_norm(x, {2, 4}, {}, {}, 1e-5), ts::ShapeError);
  EXPECT_THROW(ts::native_layer_norm(x, {}, {}, {}, 1e-5), ts::ValueError);
  EXPECT_THROW(ts::native_layer_norm(x, {4}, ts::ones({3}), {}, 1e-5), ts::ShapeError);
  EXPECT_THROW(ts::native_layer_norm(x, {4}, {}, ts::ones({2, 2}), 1e-5), ts::ShapeError);
  EXPECT_THROW(ts::native_layer_norm(ts::zeros({3, 4}, ts::kInt64), {4}, {}, {}, 1e-5), ts::DTypeError);
  EXPECT_THROW(ts::native_rms_norm(x, {3}, {}, 1e-5), ts::ShapeError);
  EXPECT_THROW(ts::native_rms_norm(ts::zeros({4}, ts::kInt32), {4}, {}, 1e-5), ts::DTypeError);
  EXPECT_THROW(ts::native_layer_norm(ts::Tensor(), {4}, {}, {}, 1e-5), ts::ValueError);
  auto [y, mean, rstd] = ts::native_layer_norm(x, {4}, {}, {}, 1e-5);
  EXPECT_THROW(ts::native_layer_norm_backward(ts::zeros({3, 5}), x, {4}, mean, rstd, {}, {}, {true, false, false}),
               ts::ShapeError);
  EXPECT_THROW(ts::native_layer_norm_backward(ts::zeros({3, 4}), x, {4}, mean.to(ts::kFloat64), rstd, {}, {},
                                              {true, false, false}),
               ts::DTypeError);
  EXPECT_THROW(ts::native_layer_norm_backward(ts::zeros({3, 4}), x, {4}, ts::zeros({2}), rstd, {}, {},
                                              {true, false, false}),
               ts::ShapeError);
  EXPECT_THROW(ts::native_rms_norm_backward(ts::zeros({3, 4}), x, {4}, ts::Tensor(), {}, {true, false}),
               ts::ValueError);
  // The functional forms keep their messages.
  try {
    ts::nn::functional::layer_norm(x, {5});
    FAIL() << "no error";
  } catch (const ts::ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("layer_norm: Given normalized_shape=[5]"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ts::nn::functional::rms_norm(x, {4}, ts::ones({5})), ts::ShapeError);
}
