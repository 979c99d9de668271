// Derivatives of the convolution and pooling ops: gradcheck and gradgradcheck in float64 on small
// sizes for every op and configuration (stride, padding, dilation, groups, output_padding, 1x1,
// ceil_mode, count_include_pad), on contiguous, transposed and sliced inputs; gradients against
// PyTorch 1.13 (tests/ops/conv_reference_data.h); graph node names.
//
// The bias gradient is sum(grad) over (N, H, W): its second derivative needs sum's own derivative,
// so gradgradcheck covers the bias only where sum is differentiable in this build.
#include "ops/conv_ref.h"
#include "ops/conv_reference_data.h"

namespace ts = tessera;
using namespace tessera::testing;
using conv_ref::ref_values;

namespace {

ts::Tensor leaf(const ts::Shape& s, uint64_t seed, const Layout* layout = nullptr) {
  ts::Tensor t = test_data(s, ts::kFloat64, seed);
  if (layout) t = layout->apply(t);
  return t.requires_grad_();
}

bool sum_is_differentiable() {
  ts::Tensor t = ts::ones({2}, ts::kFloat64).requires_grad_();
  return ts::sum(t).requires_grad();
}

void check(const ts::autograd::GradcheckFn& fn, const std::vector<ts::Tensor>& inputs, const std::string& what,
           bool second_order = true) {
  std::string report;
  EXPECT_TRUE(ts::autograd::gradcheck(fn, inputs, {}, &report)) << what << "\n" << report;
  if (!second_order) return;
  report.clear();
  EXPECT_TRUE(ts::autograd::gradgradcheck(fn, inputs, {}, &report)) << what << " (second order)\n" << report;
}

// A bias for gradgradcheck: requiring grad only where sum's derivative exists.
ts::Tensor second_order_bias(const ts::Tensor& b) {
  return sum_is_differentiable() ? b : b.detach();
}

struct Conv2dCase {
  std::string name;
  ts::Shape x;
  int64_t co, kh, kw;
  conv_ref::Conv p;
};

}  // namespace

TEST(GradConv, Conv2dEveryConfiguration) {
  const std::vector<Conv2dCase> cases = {
      {"basic", {2, 2, 5, 4}, 3, 3, 2, {}},
      {"stride2_pad1", {1, 2, 6, 5}, 2, 3, 3, {2, 2, 1, 1}},
      {"dilation_groups", {2, 4, 5, 5}, 4, 2, 2, {1, 1, 1, 1, 2, 2, 2}},
      {"depthwise", {1, 3, 5, 5}, 3, 3, 3, {1, 1, 1, 1, 1, 1, 3}},
      {"pointwise", {2, 3, 3, 4}, 2, 1, 1, {}},
      {"strided_rect", {1, 2, 7, 8}, 2, 2, 3, {3, 2, 1, 0, 1, 2}},
  };
  for (const Conv2dCase& k : cases) {
    const conv_ref::Conv p = k.p;
    auto fn = [p](const std::vector<ts::Tensor>& in) {
      std::optional<ts::Tensor> b;
      if (in[2].defined()) b = in[2];
      return std::vector<ts::Tensor>{
          ts::conv2d(in[0], in[1], b, {p.sh, p.sw}, {p.ph, p.pw}, {p.dh, p.dw}, p.groups)};
    };
    ts::Tensor x = leaf(k.x, 1), w = leaf({k.co, k.x[1] / p.groups, k.kh, k.kw}, 2), b = leaf({k.co}, 3);
    check(fn, {x, w, b}, k.name, false);
    check(fn, {x, w, second_order_bias(b)}, k.name);
    check(fn, {x, w, ts::Tensor()}, k.name + " no bias", false);
  }
}

TEST(GradConv, Conv2dStridedInputs) {
  for (const Layout& l : layouts()) {
    auto fn = [](const std::vector<ts::Tensor>& in) {
      return std::vector<ts::Tensor>{ts::conv2d(in[0], in[1], std::nullopt, 2, 1)};
    };
    check(fn, {leaf({2, 2, 5, 4}, 4, &l), leaf({3, 2, 2, 3}, 5, &l)}, l.name);
  }
  // Only one of the inputs requiring grad.
  auto fn = [](const std::vector<ts::Tensor>& in) { return std::vector<ts::Tensor>{ts::conv2d(in[0], in[1])}; };
  check(fn, {leaf({1, 2, 4, 4}, 6), test_data({2, 2, 3, 3}, ts::kFloat64, 7)}, "input only");
  check(fn, {test_data({1, 2, 4, 4}, ts::kFloat64, 6), leaf({2, 2, 3, 3}, 7)}, "weight only");
}

TEST(GradConv, Conv2dUnbatchedAndConv1d) {
  auto unbatched = [](const std::vector<ts::Tensor>& in) {
    return std::vector<ts::Tensor>{ts::conv2d(in[0], in[1], std::nullopt, 1, 1)};
  };
  check(unbatched, {leaf({2, 4, 3}, 8), leaf({2, 2, 2, 2}, 9)}, "unbatched");
  struct Case {
    ts::Shape x;
    int64_t co, k, s, p, d, g;
  };
  for (const Case& k : std::vector<Case>{{{2, 2, 7}, 3, 3, 2, 1, 1, 1}, {{1, 4, 6}, 2, 2, 1, 0, 2, 2}, {{3, 5}, 2, 2, 1, 1, 1, 1}}) {
    auto fn = [k](const std::vector<ts::Tensor>& in) {
      std::optional<ts::Tensor> b;
      if (in[2].defined()) b = in[2];
      return std::vector<ts::Tensor>{ts::conv1d(in[0], in[1], b, k.s, k.p, k.d, k.g)};
    };
    const int64_t c = k.x[k.x.size() - 2];
    ts::Tensor x = leaf(k.x, 10), w = leaf({k.co, c / k.g, k.k}, 11), b = leaf({k.co}, 12);
    check(fn, {x, w, b}, "conv1d", false);
    check(fn, {x, w, second_order_bias(b)}, "conv1d");
  }
}

TEST(GradConv, ConvTranspose2dEveryConfiguration) {
  struct Case {
    std::string name;
    ts::Shape x;
    int64_t cog, kh, kw;
    conv_ref::Conv p;
    int64_t oph, opw;
  };
  const std::vector<Case> cases = {
      {"stride2_op1", {2, 3, 3, 4}, 2, 3, 3, {2, 2, 1, 1}, 1, 1},
      {"groups_dilation", {1, 4, 3, 3}, 1, 2, 2, {1, 1, 0, 0, 2, 2, 2}, 0, 0},
      {"op_not_below_stride", {1, 2, 3, 3}, 2, 3, 3, {1, 1, 0, 0, 2, 2}, 1, 1},
      {"rect", {1, 2, 3, 2}, 2, 2, 3, {2, 3, 1, 0}, 1, 2},
      {"pointwise", {1, 2, 2, 3}, 3, 1, 1, {}, 0, 0},
  };
  for (const Case& k : cases) {
    const conv_ref::Conv p = k.p;
    const int64_t oph = k.oph, opw = k.opw;
    auto fn = [p, oph, opw](const std::vector<ts::Tensor>& in) {
      std::optional<ts::Tensor> b;
      if (in[2].defined()) b = in[2];
      return std::vector<ts::Tensor>{ts::conv_transpose2d(in[0], in[1], b, {p.sh, p.sw}, {p.ph, p.pw}, {oph, opw},
                                                          p.groups, {p.dh, p.dw})};
    };
    ts::Tensor x = leaf(k.x, 13), w = leaf({k.x[1], k.cog, k.kh, k.kw}, 14), b = leaf({k.cog * p.groups}, 15);
    check(fn, {x, w, b}, k.name, false);
    check(fn, {x, w, second_order_bias(b)}, k.name);
  }
  const std::vector<Layout> all = layouts();  // layouts() returns by value: hold it while its elements are used
  auto fn = [](const std::vector<ts::Tensor>& in) {
    return std::vector<ts::Tensor>{ts::conv_transpose2d(in[0], in[1], std::nullopt, 2)};
  };
  check(fn, {leaf({1, 2, 2, 3}, 16, &all[2]), leaf({2, 2, 2, 2}, 17, &all[1])}, "strided");
}

TEST(GradPool, MaxPool2d) {
  struct Case {
    ts::Shape x;
    conv_ref::Pool p;
  };
  for (const Case& k : std::vector<Case>{{{1, 2, 5, 6}, {3, 3, 2, 2, 1, 1, 1, 1, true}},
                                         {{2, 1, 4, 6}, {2, 2, 2, 2}},
                                         {{1, 2, 7, 7}, {2, 3, 2, 1, 1, 1, 2, 2}},
                                         {{2, 4, 4}, {2, 2, 1, 1}}})
    for (const Layout& l : layouts()) {
      const conv_ref::Pool p = k.p;
      auto fn = [p](const std::vector<ts::Tensor>& in) {
        return std::vector<ts::Tensor>{
            ts::max_pool2d(in[0], {p.kh, p.kw}, ts::IntPair(p.sh, p.sw), {p.ph, p.pw}, {p.dh, p.dw}, p.ceil)};
      };
      check(fn, {leaf(k.x, 20, &l)}, "max_pool2d " + l.name);
    }
}

TEST(GradPool, AvgPool2d) {
  for (bool ceil : {false, true})
    for (bool cip : {false, true})
      for (const Layout& l : layouts()) {
        auto fn = [ceil, cip](const std::vector<ts::Tensor>& in) {
          return std::vector<ts::Tensor>{ts::avg_pool2d(in[0], {3, 2}, ts::IntPair(2, 1), {1, 1}, ceil, cip)};
        };
        check(fn, {leaf({1, 2, 6, 5}, 21, &l)}, "avg_pool2d " + l.name);
      }
  auto unbatched = [](const std::vector<ts::Tensor>& in) {
    return std::vector<ts::Tensor>{ts::avg_pool2d(in[0], 2)};
  };
  check(unbatched, {leaf({2, 4, 4}, 22)}, "avg_pool2d unbatched");
}

TEST(GradPool, AdaptiveAvgPool2d) {
  for (auto [h, w, oh, ow] : std::vector<std::array<int64_t, 4>>{{5, 7, 3, 4}, {3, 5, 6, 7}, {4, 4, 1, 1}})
    for (const Layout& l : layouts()) {
      const int64_t a = oh, b = ow;
      auto fn = [a, b](const std::vector<ts::Tensor>& in) {
        return std::vector<ts::Tensor>{ts::adaptive_avg_pool2d(in[0], {a, b})};
      };
      check(fn, {leaf({2, 1, h, w}, 23, &l)}, "adaptive_avg_pool2d " + l.name);
    }
}

// ---- PyTorch 1.13 gradients -----------------------------------------------------------------------

namespace {
// Gradients of sum(out * gout) with gout = ref_values(out shape, 0.5), as conv_reference.py.
std::vector<ts::Tensor> grads_of(const ts::Tensor& out, const std::vector<ts::Tensor>& inputs) {
  return ts::autograd::grad({out}, inputs, {ref_values(out.sizes(), 0.5)});
}
void expect_values(const ts::Tensor& t, const std::vector<double>& want, const char* what) {
  EXPECT_TRUE(all_close(t, conv_ref::from(want, t.sizes()))) << what;
}
ts::Tensor ref_leaf(const ts::Shape& s, double salt) { return ref_values(s, salt).requires_grad_(); }
}  // namespace

TEST(GradTorch, ConvolutionsMatchPyTorch) {
  {
    ts::Tensor x = ref_leaf({2, 3, 5, 5}, 0.1), w = ref_leaf({4, 3, 3, 3}, 0.2), b = ref_leaf({4}, 0.3);
    auto g = grads_of(ts::conv2d(x, w, b, 2, 1), {x, w, b});
    expect_values(g[0], kConv2dStridePad_gx, "conv2d gx");
    expect_values(g[1], kConv2dStridePad_gw, "conv2d gw");
    expect_values(g[2], kConv2dStridePad_gb, "conv2d gb");
  }
  {
    ts::Tensor x = ref_leaf({1, 4, 6, 7}, 0.1), w = ref_leaf({4, 2, 3, 2}, 0.2);
    auto g = grads_of(ts::conv2d(x, w, std::nullopt, {1, 2}, 2, {2, 1}, 2), {x, w});
    expect_values(g[0], kConv2dGroupsDilation_gx, "grouped conv2d gx");
    expect_values(g[1], kConv2dGroupsDilation_gw, "grouped conv2d gw");
  }
  {
    ts::Tensor x = ref_leaf({2, 4, 3, 4}, 0.1), w = ref_leaf({4, 3, 3, 3}, 0.2), b = ref_leaf({6}, 0.3);
    auto g = grads_of(ts::conv_transpose2d(x, w, b, 2, 1, 1, 2), {x, w, b});
    expect_values(g[0], kConvTranspose2d_gx, "conv_transpose2d gx");
    expect_values(g[1], kConvTranspose2d_gw, "conv_transpose2d gw");
    expect_values(g[2], kConvTranspose2d_gb, "conv_transpose2d gb");
  }
  {
    ts::Tensor x = ref_leaf({1, 2, 4, 3}, 0.1), w = ref_leaf({2, 2, 2, 3}, 0.2), b = ref_leaf({2}, 0.3);
    auto g = grads_of(ts::conv_transpose2d(x, w, b, {1, 2}, {0, 1}, {1, 0}, 1, {2, 1}), {x, w, b});
    expect_values(g[0], kConvTranspose2dDilation_gx, "dilated conv_transpose2d gx");
    expect_values(g[1], kConvTranspose2dDilation_gw, "dilated conv_transpose2d gw");
    expect_values(g[2], kConvTranspose2dDilation_gb, "dilated conv_transpose2d gb");
  }
  {
    ts::Tensor x = ref_leaf({2, 3, 9}, 0.1), w = ref_leaf({2, 3, 3}, 0.2), b = ref_leaf({2}, 0.3);
    auto g = grads_of(ts::conv1d(x, w, b, 2, 1), {x, w, b});
    expect_values(g[0], kConv1d_gx, "conv1d gx");
    expect_values(g[1], kConv1d_gw, "conv1d gw");
    expect_values(g[2], kConv1d_gb, "conv1d gb");
  }
}

TEST(GradTorch, PoolingMatchesPyTorch) {
  ts::Tensor x = ref_leaf({2, 2, 7, 8}, 0.1);
  expect_values(grads_of(ts::max_pool2d(x, 3, 2, 1, 1, true), {x})[0], kMaxPool2dCeil_gx, "max_pool2d");
  x = ref_leaf({1, 2, 9, 8}, 0.1);
  expect_values(grads_of(ts::max_pool2d(x, {2, 3}, ts::IntPair(2, 1), 1, 2), {x})[0], kMaxPool2dDilation_gx,
                "dilated max_pool2d");
  x = ref_leaf({1, 2, 7, 8}, 0.1);
  expect_values(grads_of(ts::avg_pool2d(x, 3, 2, 1, true, false), {x})[0], kAvgPool2dCeilNoPad_gx, "avg_pool2d");
  x = ref_leaf({2, 1, 6, 7}, 0.1);
  expect_values(grads_of(ts::avg_pool2d(x, {2, 3}, ts::IntPair(1, 2), 1), {x})[0], kAvgPool2dRect_gx, "avg_pool2d");
  x = ref_leaf({2, 3, 7, 5}, 0.1);
  expect_values(grads_of(ts::adaptive_avg_pool2d(x, {3, 2}), {x})[0], kAdaptiveAvgPool2d_gx, "adaptive_avg_pool2d");
}

TEST(GradConv, EmptyBatchGivesZeroWeightGradient) {
  ts::Tensor x = ts::zeros({0, 2, 5, 5}, ts::kFloat64), w = leaf({3, 2, 3, 3}, 30);
  ts::Tensor y = ts::conv2d(x, w, std::nullopt, 1, 1);
  auto g = ts::autograd::grad({y}, {w}, {ts::zeros(y.sizes(), ts::kFloat64)});
  EXPECT_EQ(g[0].sizes(), w.sizes());
  EXPECT_EQ(g[0].tolist<double>(), std::vector<double>(w.numel(), 0.0));
}

TEST(GradConv, HalfPrecisionBackwardRuns) {
  // float16 / bfloat16 gradients compute in float32 and round once; compare with float64 on the same
  // rounded inputs.
  for (ts::DType dt : {ts::kFloat16, ts::kBFloat16}) {
    ts::Tensor x = test_data({2, 3, 6, 5}, ts::kFloat64, 31).to(dt), w = test_data({4, 3, 3, 3}, ts::kFloat64, 32).to(dt);
    ts::Tensor gy = test_data({2, 4, 3, 3}, ts::kFloat64, 33).to(dt);
    ts::Tensor xl = x.clone().requires_grad_(), wl = w.clone().requires_grad_();
    auto g = ts::autograd::grad({ts::conv2d(xl, wl, std::nullopt, 2, 1)}, {xl, wl}, {gy});
    ts::Tensor xd = x.to(ts::kFloat64).requires_grad_(), wd = w.to(ts::kFloat64).requires_grad_();
    auto gd = ts::autograd::grad({ts::conv2d(xd, wd, std::nullopt, 2, 1)}, {xd, wd}, {gy.to(ts::kFloat64)});
    EXPECT_EQ(g[0].dtype(), dt);
    EXPECT_TRUE(all_close(g[0], gd[0])) << ts::dtype_name(dt);
    EXPECT_TRUE(all_close(g[1], gd[1])) << ts::dtype_name(dt);
  }
}

TEST(GradConv, NodeNamesAndNoGrad) {
  ts::Tensor x = ref_leaf({1, 2, 4, 4}, 0.1), w = ref_leaf({2, 2, 3, 3}, 0.2);
  EXPECT_EQ(ts::conv2d(x, w).grad_fn()->name(), "Conv2dBackward0");
  EXPECT_EQ(ts::conv_transpose2d(x, w).grad_fn()->name(), "ConvTranspose2dBackward0");
  EXPECT_EQ(ts::max_pool2d(x, 2).grad_fn()->name(), "MaxPool2dWithIndicesBackward0");
  EXPECT_EQ(ts::avg_pool2d(x, 2).grad_fn()->name(), "AvgPool2dBackward0");
  auto [out, idx] = ts::max_pool2d_with_indices(x, 2);
  EXPECT_FALSE(idx.requires_grad());
  ts::NoGradGuard guard;
  EXPECT_FALSE(ts::conv2d(x, w).requires_grad());
}
