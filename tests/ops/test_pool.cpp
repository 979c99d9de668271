// max_pool2d(_with_indices), avg_pool2d, adaptive_avg_pool2d and their backward ops: values and
// indices against direct float64 pooling (tests/ops/conv_ref.h) over kernel / stride / padding /
// dilation / ceil_mode / count_include_pad configurations, every float dtype and layout, unbatched
// inputs, NaN and -inf windows; values and gradients against PyTorch 1.13 (conv_reference_data.h);
// errors with their classes.
#include <cmath>
#include <limits>
#include <string>

#include "ops/conv_ops.h"
#include "ops/conv_ref.h"
#include "ops/conv_reference_data.h"

namespace ts = tessera;
using namespace tessera::testing;
using conv_ref::ref_values;

namespace {

struct PoolCase {
  std::string name;
  ts::Shape x;
  conv_ref::Pool p;
  bool default_stride = false;
};

ts::Tensor run_max(const ts::Tensor& x, const PoolCase& k, ts::Tensor* indices = nullptr) {
  std::optional<ts::IntPair> stride;
  if (!k.default_stride) stride = ts::IntPair(k.p.sh, k.p.sw);
  auto [out, idx] = ts::max_pool2d_with_indices(x, {k.p.kh, k.p.kw}, stride, {k.p.ph, k.p.pw}, {k.p.dh, k.p.dw},
                                                k.p.ceil);
  if (indices) *indices = idx;
  return out;
}

ts::Tensor run_avg(const ts::Tensor& x, const PoolCase& k) {
  std::optional<ts::IntPair> stride;
  if (!k.default_stride) stride = ts::IntPair(k.p.sh, k.p.sw);
  return ts::avg_pool2d(x, {k.p.kh, k.p.kw}, stride, {k.p.ph, k.p.pw}, k.p.ceil, k.p.count_include_pad);
}

}  // namespace

TEST(MaxPool2d, MatchesDirectPoolingWithIndices) {
  const std::vector<PoolCase> cases = {
      {"k2_default_stride", {2, 3, 6, 7}, {2, 2, 2, 2}, true},
      {"k3_s2_p1", {1, 2, 7, 7}, {3, 3, 2, 2, 1, 1}},
      {"k3_s2_p1_ceil", {2, 2, 7, 8}, {3, 3, 2, 2, 1, 1, 1, 1, true}},
      {"rect_dilation", {1, 3, 9, 9}, {2, 3, 2, 1, 1, 1, 2, 2}},
      {"ceil_partial_last", {2, 1, 5, 5}, {2, 2, 2, 2, 0, 0, 1, 1, true}},
      {"k3_s3_p1_d2_ceil", {1, 1, 8, 8}, {3, 3, 3, 3, 1, 1, 2, 2, true}},
      {"global", {3, 2, 4, 5}, {4, 5, 1, 1}},
  };
  for (const PoolCase& k : cases)
    for (ts::DType dt : float_dtypes())
      for (const Layout& l : layouts()) {
        ts::Tensor x = test_data(k.x, ts::kFloat64, 3).to(dt);
        auto [want, want_idx] = conv_ref::max_pool2d(x, k.p);
        ts::Tensor idx;
        ts::Tensor out = run_max(l.apply(x), k, &idx);
        EXPECT_TRUE(all_close(out, want)) << k.name << " " << ts::dtype_name(dt) << " " << l.name;
        EXPECT_EQ(idx.dtype(), ts::kInt64);
        // 16-bit inputs may tie after rounding; the first maximum wins in both.
        EXPECT_EQ(idx.tolist<double>(), want_idx.tolist<double>()) << k.name << " " << ts::dtype_name(dt);
        EXPECT_TRUE(ts::equal(ts::max_pool2d(l.apply(x), {k.p.kh, k.p.kw},
                                             k.default_stride ? std::nullopt : std::optional<ts::IntPair>({k.p.sh, k.p.sw}),
                                             {k.p.ph, k.p.pw}, {k.p.dh, k.p.dw}, k.p.ceil),
                              out));
      }
}

TEST(MaxPool2d, NaNWinsAndInfiniteWindows) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
  ts::Tensor x = ts::tensor(std::vector<double>{1, nan, 3, 4, -inf, -inf, -inf, -inf, 5, 5, 2, 5}, {1, 1, 3, 4},
                            ts::kFloat64);
  auto [out, idx] = ts::max_pool2d_with_indices(x, {1, 2}, ts::IntPair(1, 2));
  std::vector<double> o = out.tolist<double>();
  EXPECT_TRUE(std::isnan(o[0]));
  EXPECT_EQ(o[1], 4);
  EXPECT_EQ(o[2], -inf);
  EXPECT_EQ(o[3], -inf);
  EXPECT_EQ(o[4], 5);
  EXPECT_EQ(o[5], 5);
  EXPECT_EQ(idx.tolist<int64_t>(), (std::vector<int64_t>{1, 3, 4, 6, 8, 11}));  // ties: the first
  // 2x2 windows with stride 2 (their own fast path): as PyTorch, every NaN met replaces the maximum,
  // so two NaNs report the later one.
  const float fi = std::numeric_limits<float>::infinity(), fn = std::nanf("");
  ts::Tensor y = ts::tensor(std::vector<float>{1, fn, 2, 3, fn, 0, 4, 4, -fi, -fi, 7, 6, -fi, -fi, 6, 7}, {1, 1, 4, 4});
  auto [yo, yi] = ts::max_pool2d_with_indices(y, 2);
  std::vector<float> yv = yo.tolist<float>();
  EXPECT_TRUE(std::isnan(yv[0]));
  EXPECT_EQ(yv[1], 4);
  EXPECT_EQ(yv[2], -inf);
  EXPECT_EQ(yv[3], 7);
  EXPECT_EQ(yi.tolist<int64_t>(), (std::vector<int64_t>{4, 6, 8, 10}));
}

TEST(MaxPool2d, UnbatchedAndEmptyBatch) {
  ts::Tensor x = test_data({3, 6, 5}, ts::kFloat32, 4);
  auto [out, idx] = ts::max_pool2d_with_indices(x, 2, 1, 1);
  auto [want, want_idx] = conv_ref::max_pool2d(x.unsqueeze(0), {2, 2, 1, 1, 1, 1});
  EXPECT_EQ(out.sizes(), (ts::Shape{3, 7, 6}));
  EXPECT_TRUE(all_close(out, want.select(0, 0)));
  EXPECT_EQ(idx.tolist<double>(), want_idx.select(0, 0).tolist<double>());
  EXPECT_EQ(ts::max_pool2d(ts::zeros({0, 2, 4, 4}), 2).sizes(), (ts::Shape{0, 2, 2, 2}));
  EXPECT_EQ(ts::max_pool2d(ts::empty({2, 3, 9, 9}, "meta"), 3, 2, 1, 1, true).sizes(), (ts::Shape{2, 3, 5, 5}));
}

TEST(MaxPool2d, BackwardScattersToTheArgmax) {
  ts::Tensor x = test_data({2, 2, 5, 6}, ts::kFloat64, 5);
  auto [out, idx] = ts::max_pool2d_with_indices(x, 3, 1, 1);  // overlapping windows share maxima
  ts::Tensor g = test_data(out.sizes(), ts::kFloat64, 6);
  const std::vector<double> iv = idx.tolist<double>();
  const int64_t plane = 30, oplane = out.size(2) * out.size(3);
  for (ts::DType dt : float_dtypes()) {
    // The reference sums the gradient as rounded to dt; the kernel accumulates in float32 at least.
    ts::Tensor gd = g.to(dt);
    std::vector<double> want(x.numel(), 0.0), gv = gd.tolist<double>();
    for (int64_t i = 0; i < g.numel(); ++i) want[(i / oplane) * plane + int64_t(iv[i])] += gv[i];
    ts::Tensor gx = ts::max_pool2d_backward(gd, idx, x.sizes(), 3, 1, 1, 1);
    EXPECT_EQ(gx.dtype(), dt);
    EXPECT_TRUE(all_close(gx, conv_ref::from(want, x.sizes()))) << ts::dtype_name(dt);
  }
}

TEST(AvgPool2d, MatchesDirectPooling) {
  const std::vector<PoolCase> cases = {
      {"k3_s2_p1", {2, 2, 7, 8}, {3, 3, 2, 2, 1, 1}},
      {"k3_s2_p1_nopad", {2, 2, 7, 8}, {3, 3, 2, 2, 1, 1, 1, 1, false, false}},
      {"k2_default", {1, 3, 6, 6}, {2, 2, 2, 2}, true},
      {"ceil", {1, 2, 7, 8}, {3, 3, 2, 2, 1, 1, 1, 1, true, true}},
      {"ceil_nopad", {1, 2, 7, 8}, {3, 3, 2, 2, 1, 1, 1, 1, true, false}},
      {"rect_ceil_nopad", {2, 1, 6, 7}, {2, 3, 1, 2, 1, 1, 1, 1, true, false}},
      {"ceil_window_in_padding", {1, 1, 5, 5}, {2, 2, 3, 3, 1, 1, 1, 1, true, true}},
  };
  for (const PoolCase& k : cases)
    for (ts::DType dt : float_dtypes())
      for (const Layout& l : layouts()) {
        ts::Tensor x = test_data(k.x, ts::kFloat64, 7).to(dt);
        EXPECT_TRUE(all_close(run_avg(l.apply(x), k), conv_ref::avg_pool2d(x, k.p)))
            << k.name << " " << ts::dtype_name(dt) << " " << l.name;
      }
  ts::Tensor x = test_data({2, 5, 4}, ts::kFloat64, 8);
  EXPECT_TRUE(all_close(ts::avg_pool2d(x, 2, 1, 1, false, false),
                        conv_ref::avg_pool2d(x.unsqueeze(0), {2, 2, 1, 1, 1, 1, 1, 1, false, false}).select(0, 0)));
}

TEST(AvgPool2d, BackwardIsTheAdjoint) {
  // <avg_pool2d(x), g> == <x, avg_pool2d_backward(g)> for every configuration.
  for (bool ceil : {false, true})
    for (bool cip : {false, true}) {
      ts::Tensor x = test_data({2, 3, 7, 6}, ts::kFloat64, 9);
      ts::Tensor y = ts::avg_pool2d(x, {3, 2}, ts::IntPair(2, 2), {1, 1}, ceil, cip);
      ts::Tensor g = test_data(y.sizes(), ts::kFloat64, 10);
      ts::Tensor gx = ts::avg_pool2d_backward(g, x.sizes(), {3, 2}, {2, 2}, {1, 1}, ceil, cip);
      const double lhs = ts::sum(ts::mul(y, g)).item<double>(), rhs = ts::sum(ts::mul(x, gx)).item<double>();
      EXPECT_NEAR(lhs, rhs, 1e-10 * std::fabs(lhs) + 1e-12) << ceil << cip;
    }
}

TEST(AdaptiveAvgPool2d, MatchesDirectPooling) {
  struct Case {
    ts::Shape x;
    int64_t oh, ow;
  };
  for (const Case& k : std::vector<Case>{{{2, 3, 5, 7}, 3, 4},
                                         {{1, 2, 6, 6}, 2, 3},
                                         {{2, 1, 4, 4}, 4, 4},
                                         {{1, 2, 3, 5}, 6, 7},
                                         {{3, 2, 5, 5}, 1, 1}})
    for (ts::DType dt : float_dtypes())
      for (const Layout& l : layouts()) {
        ts::Tensor x = test_data(k.x, ts::kFloat64, 11).to(dt);
        EXPECT_TRUE(all_close(ts::adaptive_avg_pool2d(l.apply(x), {k.oh, k.ow}),
                              conv_ref::adaptive_avg_pool2d(x, k.oh, k.ow)))
            << ts::dtype_name(dt) << " " << l.name;
        ts::Tensor y = ts::adaptive_avg_pool2d(x.to(ts::kFloat64), {k.oh, k.ow});
        ts::Tensor g = test_data(y.sizes(), ts::kFloat64, 12);
        ts::Tensor gx = ts::adaptive_avg_pool2d_backward(g, x.sizes());
        const double lhs = ts::sum(ts::mul(y, g)).item<double>();
        const double rhs = ts::sum(ts::mul(x.to(ts::kFloat64), gx)).item<double>();
        EXPECT_NEAR(lhs, rhs, 1e-10 * std::fabs(lhs) + 1e-12);
      }
  ts::Tensor x = test_data({3, 5, 4}, ts::kFloat32, 13);
  EXPECT_TRUE(all_close(ts::adaptive_avg_pool2d(x, 2), conv_ref::adaptive_avg_pool2d(x.unsqueeze(0), 2, 2).select(0, 0)));
  EXPECT_EQ(ts::adaptive_avg_pool2d(x, {0, 3}).sizes(), (ts::Shape{3, 0, 3}));
}

// ---- PyTorch 1.13 values (forward; the gradients are checked in test_grad_conv) ---------------------

TEST(PoolTorch, MatchesPyTorch) {
  {
    ts::Tensor x = ref_values({2, 2, 7, 8}, 0.1);
    auto [out, idx] = ts::max_pool2d_with_indices(x, 3, 2, 1, 1, true);
    EXPECT_TRUE(all_close(out, conv_ref::from(kMaxPool2dCeil_out, out.sizes())));
    EXPECT_EQ(idx.tolist<double>(), kMaxPool2dCeil_indices);
  }
  {
    ts::Tensor x = ref_values({1, 2, 9, 8}, 0.1);
    auto [out, idx] = ts::max_pool2d_with_indices(x, {2, 3}, ts::IntPair(2, 1), 1, 2);
    EXPECT_TRUE(all_close(out, conv_ref::from(kMaxPool2dDilation_out, out.sizes())));
    EXPECT_EQ(idx.tolist<double>(), kMaxPool2dDilation_indices);
  }
  {
    ts::Tensor out = ts::avg_pool2d(ref_values({1, 2, 7, 8}, 0.1), 3, 2, 1, true, false);
    EXPECT_TRUE(all_close(out, conv_ref::from(kAvgPool2dCeilNoPad_out, out.sizes())));
  }
  {
    ts::Tensor out = ts::avg_pool2d(ref_values({2, 1, 6, 7}, 0.1), {2, 3}, ts::IntPair(1, 2), 1);
    EXPECT_TRUE(all_close(out, conv_ref::from(kAvgPool2dRect_out, out.sizes())));
  }
  {
    ts::Tensor out = ts::adaptive_avg_pool2d(ref_values({2, 3, 7, 5}, 0.1), {3, 2});
    EXPECT_TRUE(all_close(out, conv_ref::from(kAdaptiveAvgPool2d_out, out.sizes())));
  }
}

// ---- errors -------------------------------------------------------------------------------------------

TEST(PoolErrors, ShapesValuesDTypesDevices) {
  ts::Tensor x = ts::ones({2, 3, 6, 6});
  EXPECT_THROW(ts::max_pool2d(ts::ones({6, 6}), 2), ts::ShapeError);
  EXPECT_THROW(ts::max_pool2d(ts::ones({1, 2, 3, 6, 6}), 2), ts::ShapeError);
  EXPECT_THROW(ts::max_pool2d(ts::ones({2, 0, 6, 6}), 2), ts::ShapeError);
  EXPECT_THROW(ts::avg_pool2d(ts::ones({6, 6}), 2), ts::ShapeError);
  EXPECT_THROW(ts::adaptive_avg_pool2d(ts::ones({6, 6}), 2), ts::ShapeError);
  EXPECT_THROW(ts::adaptive_avg_pool2d(ts::ones({2, 3, 0, 6}), 2), ts::ShapeError);
  EXPECT_THROW(ts::max_pool2d(x, 7), ts::ShapeError);  // output size 0
  EXPECT_THROW(ts::avg_pool2d(ts::ones({1, 1, 2, 2}), 3), ts::ShapeError);
  EXPECT_THROW(ts::max_pool2d(x, 0), ts::ValueError);
  EXPECT_THROW(ts::max_pool2d(x, 2, 0), ts::ValueError);
  EXPECT_THROW(ts::max_pool2d(x, 2, 2, 2), ts::ValueError);  // padding above half the kernel
  EXPECT_THROW(ts::max_pool2d(x, 2, 2, 0, 0), ts::ValueError);
  EXPECT_THROW(ts::avg_pool2d(x, 3, 1, 2), ts::ValueError);
  EXPECT_THROW(ts::adaptive_avg_pool2d(x, {-1, 2}), ts::ValueError);
  EXPECT_THROW(ts::max_pool2d(x.to(ts::kInt64), 2), ts::DTypeError);
  EXPECT_THROW(ts::avg_pool2d(x.to(ts::kInt32), 2), ts::DTypeError);
  EXPECT_THROW(ts::adaptive_avg_pool2d(x.to(ts::kBool), 2), ts::DTypeError);
  // Backward ops: mismatched gradient shapes and devices.
  auto [out, idx] = ts::max_pool2d_with_indices(x, 2);
  EXPECT_THROW(ts::max_pool2d_backward(ts::ones({2, 3, 2, 2}), idx, x.sizes(), 2, 2, 0, 1), ts::ShapeError);
  EXPECT_THROW(ts::max_pool2d_backward(ts::ones(out.sizes()), ts::empty(out.sizes(), {ts::kInt64, "meta"}), x.sizes(), 2, 2, 0, 1), ts::DeviceError);
  EXPECT_THROW(ts::max_pool2d_backward(ts::ones(out.sizes()), ts::full_like(idx, -1), x.sizes(), 2, 2, 0, 1), ts::IndexError);
  EXPECT_THROW(ts::max_pool2d_backward(ts::ones(out.sizes()), ts::full_like(idx, 36), x.sizes(), 2, 2, 0, 1), ts::IndexError);
  // A window that does not give the gradient's size.
  EXPECT_THROW(ts::max_pool2d_backward(ts::ones(out.sizes()), idx, x.sizes(), 3, 1, 1, 1), ts::ShapeError);
  // The rounding of the forward is part of the window: ceil_mode's extra row is not floor's.
  auto [oc, ic] = ts::max_pool2d_with_indices(ts::ones({1, 1, 6, 6}), 3, 2, 0, 1, true);  // 3x3 (floor: 2x2)
  EXPECT_THROW(ts::max_pool2d_backward(ts::ones(oc.sizes()), ic, {1, 1, 6, 6}, 3, 2, 0, 1, false), ts::ShapeError);
  EXPECT_NO_THROW(ts::max_pool2d_backward(ts::ones(oc.sizes()), ic, {1, 1, 6, 6}, 3, 2, 0, 1, true));
  EXPECT_THROW(ts::avg_pool2d_backward(ts::ones({2, 3, 2, 2}), x.sizes(), 2, 2, 0, false, true), ts::ShapeError);
  EXPECT_THROW(ts::adaptive_avg_pool2d_backward(ts::ones({2, 3, 2, 2}), {2, 4, 6, 6}), ts::ShapeError);
}

TEST(PoolChannelsLast, ResultsKeepTheLayoutAndValues) {
  const ts::MemoryFormat cl = ts::MemoryFormat::ChannelsLast;
  for (ts::DType dt : float_dtypes()) {
    SCOPED_TRACE(dtype_name(dt));
    ts::Tensor x = test_data({2, 3, 9, 8}, dt, 70);
    ts::Tensor xc = x.contiguous(cl);
    auto [m, idx] = ts::max_pool2d_with_indices(x, 3, 2, 1);
    auto [mc, idxc] = ts::max_pool2d_with_indices(xc, 3, 2, 1);
    EXPECT_TRUE(mc.is_contiguous(cl) && !mc.is_contiguous());
    EXPECT_TRUE(idxc.is_contiguous(cl) && !idxc.is_contiguous());
    EXPECT_TRUE(all_close(mc, m, {0, 0}));
    EXPECT_TRUE(all_close(idxc, idx, {0, 0}));
    ts::Tensor a = ts::avg_pool2d(xc, 3, 2, 1, true, false);
    EXPECT_TRUE(a.is_contiguous(cl) && !a.is_contiguous());
    EXPECT_TRUE(all_close(a, ts::avg_pool2d(x, 3, 2, 1, true, false), {0, 0}));
    ts::Tensor ad = ts::adaptive_avg_pool2d(xc, {4, 3});
    EXPECT_TRUE(ad.is_contiguous(cl) && !ad.is_contiguous());
    EXPECT_TRUE(all_close(ad, ts::adaptive_avg_pool2d(x, {4, 3}), {0, 0}));
    // Backward ops follow their gradient's layout.
    ts::Tensor g = test_data(m.sizes(), dt, 71);
    ts::Tensor d = ts::max_pool2d_backward(g.contiguous(cl), idx, x.sizes(), 3, 2, 1, 1);
    EXPECT_TRUE(d.is_contiguous(cl) && !d.is_contiguous());
    EXPECT_TRUE(all_close(d, ts::max_pool2d_backward(g, idx, x.sizes(), 3, 2, 1, 1), {0, 0}));
    ts::Tensor ga = test_data(a.sizes(), dt, 72);
    ts::Tensor da = ts::avg_pool2d_backward(ga.contiguous(cl), x.sizes(), 3, 2, 1, true, false);
    EXPECT_TRUE(da.is_contiguous(cl) && !da.is_contiguous());
    EXPECT_TRUE(all_close(da, ts::avg_pool2d_backward(ga, x.sizes(), 3, 2, 1, true, false), {0, 0}));
    ts::Tensor gd = test_data(ad.sizes(), dt, 73);
    ts::Tensor dd = ts::adaptive_avg_pool2d_backward(gd.contiguous(cl), x.sizes());
    EXPECT_TRUE(dd.is_contiguous(cl) && !dd.is_contiguous());
    EXPECT_TRUE(all_close(dd, ts::adaptive_avg_pool2d_backward(gd, x.sizes()), {0, 0}));
  }
}
