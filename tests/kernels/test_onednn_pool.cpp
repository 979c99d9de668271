// oneDNN's pooling against the native CPU kernels and float64 references (kernels/cpu/onednn/pool.cpp,
// Note [oneDNN max pooling indices]): max_pool2d's values, PyTorch's indices and input gradient,
// avg_pool2d and adaptive_avg_pool2d forward and backward, float32 and bfloat16, NCHW and
// channels-last, over odd sizes, padding, strides, dilation, ceil_mode and count_include_pad. Each
// comparison checks how many calls oneDNN took, so that the agreement cannot come from the native
// kernel twice, and that the calls oneDNN cannot run as PyTorch would (a NaN in the input, an index
// off its window, a window wholly in the padding, count_include_pad over ceil_mode's overhang, a
// bfloat16 backward of overlapping windows) went native. In a build without oneDNN the tests skip.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "common/test_util.h"
#include "kernels/onednn_compare.h"
#include "ops/conv_ops.h"
#include "ops/conv_ref.h"
#include "tessera/tessera.h"

namespace ts = tessera;
using namespace onednn_compare;

namespace {

const ts::MemoryFormat kCl = ts::MemoryFormat::ChannelsLast;

struct PoolCase {
  std::string name;
  ts::Shape x;
  conv_ref::Pool p;
  bool channels_last;
};

const std::vector<PoolCase>& max_cases() {
  static const std::vector<PoolCase> cases = {
      {"k2_s2", {2, 16, 12, 12}, {2, 2, 2, 2}, false},
      {"k2_s2_cl", {2, 16, 12, 12}, {2, 2, 2, 2}, true},
      {"k3_s2_p1_odd", {2, 5, 11, 13}, {3, 3, 2, 2, 1, 1}, false},
      {"k3_s2_p1_odd_cl", {2, 5, 11, 13}, {3, 3, 2, 2, 1, 1}, true},
      {"rect_s21_p1_d2", {1, 3, 9, 9}, {2, 3, 2, 1, 1, 1, 2, 2}, false},
      {"rect_s21_p1_d2_cl", {2, 3, 9, 10}, {2, 3, 2, 1, 1, 1, 2, 2}, true},
      {"k3_s2_p1_ceil", {2, 4, 7, 8}, {3, 3, 2, 2, 1, 1, 1, 1, true}, false},
      {"k3_s2_p1_ceil_cl", {2, 4, 7, 8}, {3, 3, 2, 2, 1, 1, 1, 1, true}, true},
      {"k2_s2_ceil_partial", {2, 3, 5, 5}, {2, 2, 2, 2, 0, 0, 1, 1, true}, false},
      {"k3_s3_p1_d2_ceil", {1, 2, 8, 8}, {3, 3, 3, 3, 1, 1, 2, 2, true}, false},
      {"global", {3, 2, 4, 5}, {4, 5, 1, 1}, false},
      {"k3_s1_p1_c20_cl", {2, 20, 6, 7}, {3, 3, 1, 1, 1, 1}, true},
  };
  return cases;
}

std::string name(const PoolCase& k, ts::DType dt) { return k.name + " " + ts::dtype_name(dt); }

ts::Tensor input(const PoolCase& k, ts::DType dt, uint64_t seed) {
  ts::Tensor x = data(k.x, dt, seed);
  return k.channels_last ? x.contiguous(kCl) : x;
}

bool is_cl(const ts::Tensor& t) { return t.is_contiguous(kCl) && !t.is_contiguous(); }

ts::Tensor like_layout(const ts::Tensor& t, bool channels_last) { return channels_last ? t.contiguous(kCl) : t; }

// The gradient of max pooling by definition: grad scattered (added) at the reference's indices.
ts::Tensor max_backward_ref(const ts::Tensor& grad, const ts::Tensor& idx, const ts::Shape& in) {
  const std::vector<double> g = grad.to(ts::kFloat64).contiguous().tolist<double>();
  const std::vector<double> ix = idx.to(ts::kFloat64).contiguous().tolist<double>();
  const int64_t plane = in[2] * in[3], out_plane = grad.size(2) * grad.size(3);
  std::vector<double> dx(ts::numel_of(in), 0.0);
  for (size_t i = 0; i < g.size(); ++i) dx[(int64_t(i) / out_plane) * plane + int64_t(ix[i])] += g[i];
  return conv_ref::from(dx, in);
}

// The gradient of average pooling by definition: each window's gradient over its divisor, added to
// its in-bounds taps (the divisors of conv_ref::avg_pool2d).
ts::Tensor avg_backward_ref(const ts::Tensor& grad, const ts::Shape& in, const conv_ref::Pool& p) {
  const int64_t H = in[2], W = in[3], OH = grad.size(2), OW = grad.size(3);
  const std::vector<double> g = grad.to(ts::kFloat64).contiguous().tolist<double>();
  std::vector<double> dx(ts::numel_of(in), 0.0);
  for (int64_t pl = 0; pl < in[0] * in[1]; ++pl)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        int64_t inside = 0, padded = 0;
        for (int64_t kh = 0; kh < p.kh; ++kh)
          for (int64_t kw = 0; kw < p.kw; ++kw) {
            const int64_t ih = oh * p.sh - p.ph + kh, iw = ow * p.sw - p.pw + kw;
            if (ih < H + p.ph && iw < W + p.pw) ++padded;
            if (ih >= 0 && ih < H && iw >= 0 && iw < W) ++inside;
          }
        const double v = g[(pl * OH + oh) * OW + ow] / double(p.count_include_pad ? padded : inside);
        for (int64_t kh = 0; kh < p.kh; ++kh)
          for (int64_t kw = 0; kw < p.kw; ++kw) {
            const int64_t ih = oh * p.sh - p.ph + kh, iw = ow * p.sw - p.pw + kw;
            if (ih >= 0 && ih < H && iw >= 0 && iw < W) dx[pl * H * W + ih * W + iw] += v;
          }
      }
  return conv_ref::from(dx, in);
}

// Whether windows overlap in either dimension: a bfloat16 backward then goes native (oneDNN rounds
// between the windows' additions to an input, PyTorch once).
bool overlap(const PoolCase& k) {
  const int64_t oh = conv_ref::pooled(k.x[2], k.p.kh, k.p.ph, k.p.sh, k.p.dh, k.p.ceil);
  const int64_t ow = conv_ref::pooled(k.x[3], k.p.kw, k.p.pw, k.p.sw, k.p.dw, k.p.ceil);
  return (oh > 1 && k.p.sh < (k.p.kh - 1) * k.p.dh + 1) || (ow > 1 && k.p.sw < (k.p.kw - 1) * k.p.dw + 1);
}
int64_t backward_taken(const PoolCase& k, ts::DType dt) { return dt == ts::kBFloat16 && overlap(k) ? 0 : 1; }

// Float64 tolerance of a result in dt computed from dt inputs: the inputs are exact in float64.
ts::testing::Tolerance ref_tol(ts::DType dt) {
  return dt == ts::kBFloat16 ? ts::testing::Tolerance{1.6e-2, 1e-2} : ts::testing::Tolerance{2e-6, 1e-5};
}

// Max pooling forward and backward, through the autograd graph: {values, indices, input gradient}.
std::vector<ts::Tensor> max_fwd_bwd(const ts::Tensor& x, const PoolCase& k, ts::DType dt) {
  ts::Tensor xg = x.detach().requires_grad_();
  auto [y, idx] = ts::max_pool2d_with_indices(xg, {k.p.kh, k.p.kw}, ts::IntPair(k.p.sh, k.p.sw), {k.p.ph, k.p.pw},
                                              {k.p.dh, k.p.dw}, k.p.ceil);
  ts::Tensor gy = like_layout(data(y.sizes(), dt, 4), k.channels_last);
  std::vector<ts::Tensor> g = ts::autograd::grad({y}, {xg}, {gy});
  return {y.detach(), idx, g[0], gy};
}

void check_max(const PoolCase& k, ts::DType dt, const ts::Tensor& x, int64_t want_taken) {
  Both both = run_both([&] { return max_fwd_bwd(x, k, dt); });
  EXPECT_EQ(both.taken, want_taken);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(is_cl(both.on[i]), is_cl(both.off[i])) << "result " << i << "'s layout";
  EXPECT_EQ(is_cl(both.on[0]), k.channels_last);
  // Values are a selection: exact. Indices: PyTorch's, exactly (NaN compares equal to NaN here).
  EXPECT_TRUE(ts::testing::all_close(both.on[0], both.off[0], {0, 0})) << "values";
  EXPECT_TRUE(ts::equal(both.on[1], both.off[1])) << "indices";
  EXPECT_TRUE(agree(both.on[2], both.off[2], tol_for(dt))) << "input gradient";
  if (!overlap(k)) {
    EXPECT_TRUE(ts::equal(both.on[2], both.off[2])) << "each input gradient a copy of one";
  }
  auto [want, want_idx] = conv_ref::max_pool2d(x.to(ts::kFloat64).contiguous(), k.p);
  EXPECT_TRUE(ts::testing::all_close(both.on[0], want, {0, 0})) << "values against float64";
  EXPECT_EQ(both.on[1].contiguous().tolist<double>(), want_idx.tolist<double>()) << "indices against float64";
  EXPECT_TRUE(ts::testing::all_close(both.on[2], max_backward_ref(both.on[3], want_idx, k.x), ref_tol(dt)))
      << "input gradient against float64";
}

TEST(OnednnPool, MaxPoolValuesIndicesAndGradientAgree) {
  if (!ts::cpu::onednn_built()) GTEST_SKIP() << "built without oneDNN";
  ScopedEverywhere all(true);
  for (ts::DType dt : {ts::kFloat32, ts::kBFloat16})
    for (const PoolCase& k : max_cases()) {
      SCOPED_TRACE(name(k, dt));
      check_max(k, dt, input(k, dt, 1), 1 + backward_taken(k, dt));
    }
}

// NaN: oneDNN skips it, PyTorch's max is NaN with the last NaN's index, so an input holding one runs
// the native forward; its backward (valid indices) still goes through oneDNN.
TEST(OnednnPool, MaxPoolWithNaNRunsTheNativeForward) {
  if (!ts::cpu::onednn_built()) GTEST_SKIP() << "built without oneDNN";
  ScopedEverywhere all(true);
  const double nan = std::nan("");
  for (ts::DType dt : {ts::kFloat32, ts::kBFloat16})
    for (bool cl : {false, true}) {
      const PoolCase k{"nan", {2, 3, 6, 7}, {3, 3, 2, 2, 1, 1}, cl};
      SCOPED_TRACE(name(k, dt) + (cl ? " cl" : ""));
      ts::Tensor x = data(k.x, ts::kFloat64, 2);
      x.select(0, 0).select(0, 1).select(0, 2).select(0, 3).fill_(nan);  // one NaN
      x.select(0, 1).select(0, 2).slice(0, 0, 2).fill_(nan);             // two rows: windows of several
      x = like_layout(x.to(dt), cl);
      check_max(k, dt, x, backward_taken(k, dt));
      ts::Tensor y = ts::max_pool2d(x, 3, 2, 1);
      EXPECT_TRUE(std::isnan(y.select(0, 0).select(0, 1).select(0, 1).select(0, 1).item<double>()));
    }
}

// A window of -inf only: oneDNN reports the lowest finite value (and tap 0, here padding); the index
// pass does it again by definition (-inf at the first in-bounds tap). A window whose maximum is the
// lowest finite value itself takes the same path and keeps it.
TEST(OnednnPool, MaxPoolInfiniteWindowsAreRedoneAsPyTorch) {
  if (!ts::cpu::onednn_built()) GTEST_SKIP() << "built without oneDNN";
  ScopedEverywhere all(true);
  const double inf = std::numeric_limits<double>::infinity();
  for (ts::DType dt : {ts::kFloat32, ts::kBFloat16})
    for (bool cl : {false, true}) {
      const PoolCase k{"inf", {2, 17, 6, 7}, {3, 3, 2, 2, 1, 1}, cl};
      SCOPED_TRACE(name(k, dt) + (cl ? " cl" : ""));
      const double lowest = dt == ts::kFloat32 ? -double(std::numeric_limits<float>::max()) : -3.38953139e38;
      ts::Tensor x = data(k.x, ts::kFloat64, 3);
      x.select(0, 0).select(0, 4).slice(0, 0, 2).slice(1, 0, 2).fill_(-inf);  // window (0, 0), padded
      x.select(0, 1).select(0, 16).slice(0, 2, 6).fill_(-inf);                // windows of rows 1 and 2
      x.select(0, 1).select(0, 16).select(0, 5).select(0, 6).fill_(lowest);   // a finite maximum among -inf
      x = like_layout(x.to(dt), cl);
      check_max(k, dt, x, 1 + backward_taken(k, dt));
      ScopedOnednn on(true);
      auto [y, idx] = ts::max_pool2d_with_indices(x, 3, 2, 1);
      EXPECT_EQ(y.select(0, 0).select(0, 4).select(0, 0).select(0, 0).item<double>(), -inf);
      EXPECT_EQ(idx.select(0, 0).select(0, 4).select(0, 0).select(0, 0).item<int64_t>(), 0);
      EXPECT_EQ(y.select(0, 1).select(0, 16).select(0, 2).select(0, 2).item<double>(), -inf);
      EXPECT_EQ(idx.select(0, 1).select(0, 16).select(0, 2).select(0, 2).item<int64_t>(), 3 * 7 + 3);
      EXPECT_EQ(y.select(0, 1).select(0, 16).select(0, 2).select(0, 3).item<double>(),
                x.select(0, 1).select(0, 16).select(0, 5).select(0, 6).item<double>());
      EXPECT_EQ(idx.select(0, 1).select(0, 16).select(0, 2).select(0, 3).item<int64_t>(), 5 * 7 + 6);
    }
}

// A window wholly in the padding (dilation 2 over a one-row input): PyTorch's index then points
// outside the window, which the native kernel reproduces; oneDNN declines.
TEST(OnednnPool, MaxPoolWindowInThePaddingStaysNative) {
  if (!ts::cpu::onednn_built()) GTEST_SKIP() << "built without oneDNN";
  ScopedEverywhere all(true);
  ts::Tensor x = data({1, 2, 1, 5}, ts::kFloat32, 5);
  Both both = run_both([&] {
    auto [y, idx] = ts::max_pool2d_with_indices(x, {2, 1}, ts::IntPair(1, 1), {1, 0}, {2, 1});
    return std::vector<ts::Tensor>{y, idx};
  });
  EXPECT_EQ(both.taken, 0);
  EXPECT_TRUE(ts::testing::all_close(both.on[0], both.off[0], {0, 0}));
  EXPECT_TRUE(ts::equal(both.on[1], both.off[1]));
}

// max_pool2d_backward of indices a caller made: those on their window's in-bounds taps go through
// oneDNN; one elsewhere in the plane is scattered natively; one outside the plane raises the native
// kernel's error, the same with oneDNN on.
TEST(OnednnPool, MaxPoolBackwardOfGivenIndices) {
  if (!ts::cpu::onednn_built()) GTEST_SKIP() << "built without oneDNN";
  ScopedEverywhere all(true);
  for (bool cl : {false, true}) {
    SCOPED_TRACE(cl ? "channels-last" : "nchw");
    const ts::Shape in{2, 3, 7, 7};
    ts::Tensor x = like_layout(data(in, ts::kFloat32, 6), cl);
    auto [y, idx] = ts::max_pool2d_with_indices(x, 3, 2, 1);
    ts::Tensor g = like_layout(data(y.sizes(), ts::kFloat32, 7), cl);
    auto back = [&](const ts::Tensor& i) {
      return std::vector<ts::Tensor>{ts::max_pool2d_backward(g, i, in, 3, 2, 1, 1)};
    };
    Both valid = run_both([&] { return back(idx); });
    EXPECT_EQ(valid.taken, 1);
    EXPECT_TRUE(agree(valid.on[0], valid.off[0], tol_for(ts::kFloat32)));
    // Another in-window tap than the maximum is still a tap: oneDNN.
    ts::Tensor moved = idx.clone();
    moved.select(0, 1).select(0, 2).select(0, 1).select(0, 1).fill_(2 * 7 + 2);  // window (1, 1) starts at (1, 1)
    Both tap = run_both([&] { return back(moved); });
    EXPECT_EQ(tap.taken, 1);
    EXPECT_TRUE(agree(tap.on[0], tap.off[0], tol_for(ts::kFloat32)));
    // In the plane, off the window: native.
    ts::Tensor off = idx.clone();
    off.select(0, 0).select(0, 0).select(0, 0).select(0, 0).fill_(48);
    Both far = run_both([&] { return back(off); });
    EXPECT_EQ(far.taken, 0);
    EXPECT_TRUE(agree(far.on[0], far.off[0], tol_for(ts::kFloat32)));
    // At a padded tap's offset from the window's start: window (1, 0) starts at (1, -1), and its tap
    // (1, 0), at (2, -1), has the flat position of (1, 6), which is in no way that window's: native.
    ts::Tensor pad = idx.clone();
    pad.select(0, 0).select(0, 0).select(0, 1).select(0, 0).fill_(1 * 7 + 6);
    Both padded = run_both([&] { return back(pad); });
    EXPECT_EQ(padded.taken, 0);
    EXPECT_TRUE(agree(padded.on[0], padded.off[0], tol_for(ts::kFloat32)));
    // Outside the plane: the native error, with oneDNN on as off.
    ts::Tensor bad = idx.clone();
    bad.select(0, 1).select(0, 1).select(0, 0).select(0, 0).fill_(49);
    std::string msg_on, msg_off;
    {
      ScopedOnednn on(true);
      msg_on = ts::testing::message_of<ts::IndexError>([&] { back(bad); });
    }
    {
      ScopedOnednn off(false);
      msg_off = ts::testing::message_of<ts::IndexError>([&] { back(bad); });
    }
    EXPECT_NE(msg_off.find("index 49 is out of bounds"), std::string::npos) << msg_off;
    EXPECT_EQ(msg_on, msg_off);
  }
}

const std::vector<PoolCase>& avg_cases() {
  static const std::vector<PoolCase> cases = {
      {"k2_s2", {2, 16, 12, 12}, {2, 2, 2, 2}, false},
      {"k2_s2_cl", {2, 16, 12, 12}, {2, 2, 2, 2}, true},
      {"k3_s2_p1_odd", {2, 5, 11, 13}, {3, 3, 2, 2, 1, 1}, false},
      {"k3_s2_p1_odd_cl", {2, 5, 11, 13}, {3, 3, 2, 2, 1, 1}, true},
      {"rect_s12_p1", {2, 3, 6, 7}, {2, 3, 1, 2, 1, 1}, false},
      {"k3_s2_p1_ceil", {2, 4, 7, 7}, {3, 3, 2, 2, 1, 1, 1, 1, true}, true},       // overhang within the padding
      {"k3_s2_p1_ceil_past", {2, 4, 7, 8}, {3, 3, 2, 2, 1, 1, 1, 1, true}, false},  // columns past it
      {"k2_s2_ceil_partial", {2, 3, 5, 5}, {2, 2, 2, 2, 0, 0, 1, 1, true}, false},  // past it (no padding)
      {"k3_s1_p1_c20_cl", {2, 20, 6, 7}, {3, 3, 1, 1, 1, 1}, true},
  };
  return cases;
}

// Whether oneDNN's divisor is PyTorch's: count_include_pad stops at the padding, oneDNN's at the
// kernel, which differ where ceil_mode's last window reaches past the right padding.
bool avg_in_onednn(const PoolCase& k, bool include_pad) {
  if (!include_pad) return true;
  auto past = [](int64_t in, int64_t out, int64_t kk, int64_t s, int64_t p) { return (out - 1) * s + kk - in - p > p; };
  const int64_t oh = conv_ref::pooled(k.x[2], k.p.kh, k.p.ph, k.p.sh, 1, k.p.ceil);
  const int64_t ow = conv_ref::pooled(k.x[3], k.p.kw, k.p.pw, k.p.sw, 1, k.p.ceil);
  return !past(k.x[2], oh, k.p.kh, k.p.sh, k.p.ph) && !past(k.x[3], ow, k.p.kw, k.p.sw, k.p.pw);
}

TEST(OnednnPool, AvgPoolForwardAndBackwardAgree) {
  if (!ts::cpu::onednn_built()) GTEST_SKIP() << "built without oneDNN";
  ScopedEverywhere all(true);
  for (ts::DType dt : {ts::kFloat32, ts::kBFloat16})
    for (const PoolCase& k0 : avg_cases())
      for (bool include_pad : {true, false}) {
        PoolCase k = k0;
        k.p.count_include_pad = include_pad;
        SCOPED_TRACE(name(k, dt) + (include_pad ? " count_include_pad" : ""));
        ts::Tensor x = input(k, dt, 8);
        Both both = run_both([&] {
          ts::Tensor xg = x.detach().requires_grad_();
          ts::Tensor y = ts::avg_pool2d(xg, {k.p.kh, k.p.kw}, ts::IntPair(k.p.sh, k.p.sw), {k.p.ph, k.p.pw}, k.p.ceil,
                                        include_pad);
          ts::Tensor gy = like_layout(data(y.sizes(), dt, 9), k.channels_last);
          std::vector<ts::Tensor> g = ts::autograd::grad({y}, {xg}, {gy});
          return std::vector<ts::Tensor>{y.detach(), g[0], gy};
        });
        EXPECT_EQ(both.taken, avg_in_onednn(k, include_pad) ? 1 + backward_taken(k, dt) : 0);
        EXPECT_EQ(is_cl(both.on[0]), k.channels_last);
        EXPECT_EQ(is_cl(both.on[1]), is_cl(both.off[1]));
        EXPECT_TRUE(agree(both.on[0], both.off[0], tol_for(dt))) << "output";
        EXPECT_TRUE(agree(both.on[1], both.off[1], tol_for(dt))) << "input gradient";
        const ts::Tensor x64 = x.to(ts::kFloat64).contiguous();
        EXPECT_TRUE(ts::testing::all_close(both.on[0], conv_ref::avg_pool2d(x64, k.p), ref_tol(dt)));
        EXPECT_TRUE(ts::testing::all_close(both.on[1], avg_backward_ref(both.on[2], k.x, k.p), ref_tol(dt)));
      }
}

// adaptive_avg_pool2d: through oneDNN where its windows are a regular pooling (the output's sizes
// dividing the input's), native otherwise.
TEST(OnednnPool, AdaptiveAvgPoolAgrees) {
  if (!ts::cpu::onednn_built()) GTEST_SKIP() << "built without oneDNN";
  ScopedEverywhere all(true);
  struct Case {
    ts::Shape x;
    int64_t oh, ow;
    bool cl, regular;
  };
  const std::vector<Case> cases = {
      {{2, 6, 8, 12}, 4, 3, false, true}, {{2, 6, 8, 12}, 4, 3, true, true},    {{3, 20, 7, 7}, 1, 1, true, true},
      {{3, 5, 7, 7}, 1, 1, false, true},  {{2, 4, 7, 5}, 3, 2, false, false}, {{2, 4, 7, 5}, 3, 2, true, false},
  };
  for (ts::DType dt : {ts::kFloat32, ts::kBFloat16})
    for (const Case& k : cases) {
      SCOPED_TRACE(std::string(ts::dtype_name(dt)) + " " + ::testing::PrintToString(k.x) + " -> " +
                   std::to_string(k.oh) + "x" + std::to_string(k.ow) + (k.cl ? " cl" : ""));
      ts::Tensor x = like_layout(data(k.x, dt, 10), k.cl);
      Both both = run_both([&] {
        ts::Tensor xg = x.detach().requires_grad_();
        ts::Tensor y = ts::adaptive_avg_pool2d(xg, {k.oh, k.ow});
        ts::Tensor gy = like_layout(data(y.sizes(), dt, 11), k.cl);
        std::vector<ts::Tensor> g = ts::autograd::grad({y}, {xg}, {gy});
        return std::vector<ts::Tensor>{y.detach(), g[0], gy};
      });
      EXPECT_EQ(both.taken, k.regular ? 2 : 0);
      EXPECT_EQ(is_cl(both.on[0]), k.cl && !(k.oh == 1 && k.ow == 1));
      EXPECT_TRUE(agree(both.on[0], both.off[0], tol_for(dt)));
      EXPECT_TRUE(agree(both.on[1], both.off[1], tol_for(dt)));
      const ts::Tensor x64 = x.to(ts::kFloat64).contiguous();
      EXPECT_TRUE(ts::testing::all_close(both.on[0], conv_ref::adaptive_avg_pool2d(x64, k.oh, k.ow), ref_tol(dt)));
      if (k.regular) {
        const int64_t kh = k.x[2] / k.oh, kw = k.x[3] / k.ow;
        EXPECT_TRUE(ts::testing::all_close(both.on[1], avg_backward_ref(both.on[2], k.x, {kh, kw, kh, kw}), ref_tol(dt)));
      }
    }
}

// The shipped rule (Note [oneDNN where it wins]): the classes it sends to oneDNN, one call each.
TEST(OnednnPool, TheRuleTakesTheClassesWhereOnednnMeasuredFaster) {
  if (!ts::cpu::onednn_built()) GTEST_SKIP() << "built without oneDNN";
  ScopedEverywhere rule(false);
  ScopedOnednn on(true);
  const auto& taken = calls_taken_by;
  for (ts::DType dt : {ts::kFloat32, ts::kBFloat16})
    for (bool cl : {false, true}) {
      SCOPED_TRACE(std::string(ts::dtype_name(dt)) + (cl ? " channels-last" : " nchw"));
      const ts::Shape in{2, 16, 12, 12};
      const ts::Tensor x = like_layout(data(in, dt, 12), cl);
      // Max pooling 2x2 (windows inside the plane) and 3x3 stride 2 padded (the native general path).
      ts::Tensor y2, i2, y3, i3;
      EXPECT_EQ(taken([&] { std::tie(y2, i2) = ts::max_pool2d_with_indices(x, 2); }), cl || dt == ts::kBFloat16 ? 1 : 0);
      EXPECT_EQ(taken([&] { std::tie(y3, i3) = ts::max_pool2d_with_indices(x, 3, 2, 1); }), 1);
      const ts::Tensor g2 = like_layout(data(y2.sizes(), dt, 13), cl), g3 = like_layout(data(y3.sizes(), dt, 14), cl);
      EXPECT_EQ(taken([&] { ts::max_pool2d_backward(g2, i2, in, 2, 2, 0, 1); }), cl ? 1 : 0);
      EXPECT_EQ(taken([&] { ts::max_pool2d_backward(g3, i3, in, 3, 2, 1, 1); }), cl && dt == ts::kFloat32 ? 1 : 0);
      // Average and adaptive average pooling: everywhere (a bfloat16 backward of overlapping windows
      // aside).
      EXPECT_EQ(taken([&] { ts::avg_pool2d(x, 2); }), 1);
      EXPECT_EQ(taken([&] { ts::avg_pool2d_backward(g2, in, 2, 2, 0, false, true); }), 1);
      EXPECT_EQ(taken([&] { ts::avg_pool2d_backward(g3, in, 3, 2, 1, false, true); }), dt == ts::kFloat32 ? 1 : 0);
      EXPECT_EQ(taken([&] { ts::adaptive_avg_pool2d(x, 1); }), 1);
      EXPECT_EQ(taken([&] { ts::adaptive_avg_pool2d_backward(like_layout(data({2, 16, 1, 1}, dt, 15), cl), in); }), 1);
    }
}

// The ops' errors are raised before any kernel runs: the same with oneDNN on.
TEST(OnednnPool, ErrorsAreUnchanged) {
  if (!ts::cpu::onednn_built()) GTEST_SKIP() << "built without oneDNN";
  ScopedEverywhere all(true);
  ts::Tensor x = ts::ones({2, 3, 6, 6});
  auto messages = [&] {
    return std::vector<std::string>{
        ts::testing::message_of<ts::ValueError>([&] { ts::max_pool2d(x, 2, 2, 2); }),
        ts::testing::message_of<ts::ShapeError>([&] { ts::max_pool2d(x, 7); }),
        ts::testing::message_of<ts::ValueError>([&] { ts::avg_pool2d(x, 3, 1, 2); }),
        ts::testing::message_of<ts::DTypeError>([&] { ts::max_pool2d(x.to(ts::kInt64), 2); }),
        ts::testing::message_of<ts::ShapeError>([&] { ts::adaptive_avg_pool2d_backward(ts::ones({2, 3, 2, 2}), {2, 4, 6, 6}); }),
    };
  };
  expect_same_errors_either_way(messages);
}

}  // namespace
