// conv1d, conv2d, conv_transpose2d: values against direct float64 convolutions (tests/ops/conv_ref.h)
// over many configurations (stride, padding, dilation, groups, depthwise, 1x1, non-square kernels,
// batch 1 and 3, unbatched), every float dtype and input layout; values and gradients against PyTorch
// 1.13 (hard-coded in conv_reference_data.h by conv_reference.py); errors with their classes.
#include <string>

#include "kernels/cpu/onednn/onednn.h"
#include "ops/conv_ops.h"
#include "ops/conv_ref.h"
#include "ops/conv_reference_data.h"

namespace ts = tessera;
using namespace tessera::testing;
using conv_ref::ref_values;

namespace {

struct Conv2dCase {
  std::string name;
  int64_t n, c, h, w, co, kh, kw;
  conv_ref::Conv p;
  bool bias;
};

std::vector<Conv2dCase> conv2d_cases() {
  return {
      {"basic3x3", 2, 3, 7, 6, 4, 3, 3, {}, true},
      {"stride2_pad1", 3, 2, 9, 8, 5, 3, 3, {2, 2, 1, 1}, true},
      {"nonsquare", 1, 3, 8, 10, 2, 2, 4, {2, 1, 1, 2}, false},
      {"dilation", 2, 2, 9, 9, 3, 3, 3, {1, 1, 2, 2, 2, 1}, true},
      {"groups2", 2, 4, 6, 6, 6, 3, 3, {1, 1, 1, 1, 1, 1, 2}, true},
      {"depthwise_x2", 2, 4, 7, 7, 8, 3, 3, {1, 1, 1, 1, 1, 1, 4}, false},
      {"pointwise", 3, 5, 4, 5, 6, 1, 1, {}, true},
      {"pointwise_stride2", 2, 3, 6, 7, 4, 1, 1, {2, 2}, false},
      {"pointwise_pad", 1, 2, 3, 3, 2, 1, 1, {1, 1, 1, 1}, true},
      {"kernel_is_input", 1, 2, 5, 5, 3, 5, 5, {}, true},
      {"batch1_groups3", 1, 6, 5, 6, 3, 2, 2, {1, 1, 0, 1, 1, 1, 3}, true},
      {"everything", 3, 4, 11, 10, 6, 3, 2, {3, 2, 2, 1, 2, 3, 2}, true},
  };
}

ts::Tensor cast(const ts::Tensor& t, ts::DType d) { return t.to(d); }

// The reference sees the inputs after rounding to the tested dtype; the op computes in at least
// float32, so only the final rounding (and float32 accumulation) separates the two.
void expect_conv2d(const Conv2dCase& k, ts::DType dt, const Layout& layout) {
  ts::Tensor x = cast(test_data({k.n, k.c, k.h, k.w}, ts::kFloat64, 1), dt);
  ts::Tensor w = cast(test_data({k.co, k.c / k.p.groups, k.kh, k.kw}, ts::kFloat64, 2), dt);
  ts::Tensor b = k.bias ? cast(test_data({k.co}, ts::kFloat64, 3), dt) : ts::Tensor();
  ts::Tensor expected = conv_ref::conv2d(x, w, b, k.p);
  std::optional<ts::Tensor> bias;
  if (k.bias) bias = layout.apply(b);
  ts::Tensor out = ts::conv2d(layout.apply(x), layout.apply(w), bias, {k.p.sh, k.p.sw}, {k.p.ph, k.p.pw},
                              {k.p.dh, k.p.dw}, k.p.groups);
  EXPECT_EQ(out.dtype(), dt);
  EXPECT_TRUE(all_close(out, expected)) << k.name << " " << ts::dtype_name(dt) << " " << layout.name;
}

}  // namespace

TEST(Conv2d, MatchesDirectConvolutionEveryConfigDtypeAndLayout) {
  for (const Conv2dCase& k : conv2d_cases())
    for (ts::DType dt : float_dtypes())
      for (const Layout& l : layouts()) expect_conv2d(k, dt, l);
}

TEST(Conv2d, ChannelsLastAndStridedBatchInputs) {
  ts::Tensor x = test_data({3, 4, 6, 5}, ts::kFloat32, 4);
  ts::Tensor w = test_data({2, 4, 3, 3}, ts::kFloat32, 5);
  ts::Tensor expected = conv_ref::conv2d(x, w, ts::Tensor(), {1, 1, 1, 1});
  ts::Tensor nhwc = x.permute({0, 2, 3, 1}).contiguous().permute({0, 3, 1, 2});
  EXPECT_TRUE(all_close(ts::conv2d(nhwc, w, std::nullopt, 1, 1), expected));
  // Every other sample of a larger batch.
  ts::Tensor big = ts::zeros({6, 4, 6, 5});
  big.slice(0, 0, std::nullopt, 2).copy_(x);
  EXPECT_TRUE(all_close(ts::conv2d(big.slice(0, 0, std::nullopt, 2), w, std::nullopt, 1, 1), expected));
}

TEST(Conv2d, UnbatchedInputIsABatchOfOne) {
  ts::Tensor x = test_data({3, 6, 5}, ts::kFloat64, 6);
  ts::Tensor w = test_data({4, 3, 2, 3}, ts::kFloat64, 7);
  ts::Tensor b = test_data({4}, ts::kFloat64, 8);
  ts::Tensor out = ts::conv2d(x, w, b, 1, {1, 0});
  ts::Tensor expected = conv_ref::conv2d(x.unsqueeze(0), w, b, {1, 1, 1, 0}).select(0, 0);
  EXPECT_EQ(out.sizes(), (ts::Shape{4, 7, 3}));
  EXPECT_TRUE(all_close(out, expected));
}

TEST(Conv2d, EmptyBatchAndMetaShapes) {
  ts::Tensor out = ts::conv2d(ts::zeros({0, 3, 5, 5}), ts::ones({4, 3, 3, 3}), ts::ones({4}), 2, 1);
  EXPECT_EQ(out.sizes(), (ts::Shape{0, 4, 3, 3}));
  ts::Tensor m = ts::conv2d(ts::empty({2, 6, 28, 28}, "meta"), ts::empty({8, 3, 5, 3}, "meta"), std::nullopt, {2, 1},
                            {2, 1}, {1, 2}, 2);
  EXPECT_TRUE(m.is_meta());
  EXPECT_EQ(m.sizes(), (ts::Shape{2, 8, 14, 26}));
}

TEST(Conv2d, LargeBatchSplitsAcrossThreadsDeterministically) {
  // More samples than threads, a non-trivial group count and the im2col path.
  ts::Tensor x = test_data({7, 4, 10, 9}, ts::kFloat32, 9);
  ts::Tensor w = test_data({6, 2, 3, 3}, ts::kFloat32, 10);
  ts::Tensor b = test_data({6}, ts::kFloat32, 11);
  ts::Tensor a = ts::conv2d(x, w, b, 1, 1, 1, 2);
  EXPECT_TRUE(all_close(a, conv_ref::conv2d(x, w, b, {1, 1, 1, 1, 1, 1, 2})));
  EXPECT_TRUE(ts::equal(a, ts::conv2d(x, w, b, 1, 1, 1, 2)));
}

TEST(Conv2d, BlocksOfSamplesMatchPerSampleResultsAndIgnoreThreadCount) {
  // 37 samples of 90 output positions: several GEMM blocks of samples, the last one short, and
  // several weight-gradient partials (kernels/cpu/conv.cpp, Note [Conv blocks]). Forward, input and
  // weight gradients: bitwise the same on 1 and 2 threads, and close to the sample-by-sample results.
  // The native kernel's property: oneDNN's sums may differ between thread counts (Note [oneDNN where
  // it wins] in kernels/cpu/onednn/onednn.h).
  ts::cpu::onednn::ScopedOnednn native(false);
  const int64_t n = 37;
  ts::Tensor x = test_data({n, 4, 10, 9}, ts::kFloat32, 12).requires_grad_();
  ts::Tensor w = test_data({6, 2, 3, 3}, ts::kFloat32, 13).requires_grad_();
  ts::Tensor b = test_data({6}, ts::kFloat32, 14).requires_grad_();
  ts::Tensor gy = test_data({n, 6, 10, 9}, ts::kFloat32, 15);
  auto run = [&](int threads) {
    ts::set_num_threads(threads);
    ts::Tensor y = ts::conv2d(x, w, b, 1, 1, 1, 2);
    std::vector<ts::Tensor> g = ts::autograd::grad({y}, {x, w, b}, {gy});
    return std::vector<ts::Tensor>{y.detach(), g[0], g[1], g[2]};
  };
  const int saved = ts::get_num_threads();
  std::vector<ts::Tensor> one = run(1), two = run(2);
  ts::set_num_threads(saved);
  for (size_t i = 0; i < one.size(); ++i) EXPECT_TRUE(ts::equal(one[i], two[i])) << "result " << i;
  EXPECT_TRUE(all_close(one[0], conv_ref::conv2d(x.detach(), w.detach(), b.detach(), {1, 1, 1, 1, 1, 1, 2})));
  ts::Tensor dw = ts::zeros_like(w);
  for (int64_t s = 0; s < n; ++s) {
    ts::Tensor xs = x.detach().narrow(0, s, 1).requires_grad_();
    std::vector<ts::Tensor> g = ts::autograd::grad({ts::conv2d(xs, w, b, 1, 1, 1, 2)}, {xs, w}, {gy.narrow(0, s, 1)});
    EXPECT_TRUE(all_close(one[1].narrow(0, s, 1), g[0])) << "input gradient of sample " << s;
    dw = dw + g[1];
  }
  // A sum of 37 * 90 products per element, in another order: float32 rounding of the sum's size.
  EXPECT_TRUE(all_close(one[2], dw, {1e-5, 1e-4}));
}

TEST(Conv1d, MatchesDirectConvolution) {
  struct Case {
    int64_t n, c, l, co, k, s, p, d, g;
    bool bias;
  };
  for (const Case& k : std::vector<Case>{{2, 3, 9, 4, 3, 1, 0, 1, 1, true},
                                         {3, 4, 12, 6, 3, 2, 2, 2, 2, false},
                                         {1, 2, 5, 2, 1, 1, 0, 1, 1, true},
                                         {2, 4, 8, 4, 4, 3, 1, 1, 4, true}})
    for (ts::DType dt : float_dtypes()) {
      ts::Tensor x = test_data({k.n, k.c, k.l}, ts::kFloat64, 1).to(dt);
      ts::Tensor w = test_data({k.co, k.c / k.g, k.k}, ts::kFloat64, 2).to(dt);
      ts::Tensor b = k.bias ? test_data({k.co}, ts::kFloat64, 3).to(dt) : ts::Tensor();
      ts::Tensor expected =
          conv_ref::conv2d(x.unsqueeze(2), w.unsqueeze(2), b, {1, k.s, 0, k.p, 1, k.d, k.g}).squeeze(2);
      std::optional<ts::Tensor> bias;
      if (k.bias) bias = b;
      for (const Layout& l : layouts())
        EXPECT_TRUE(all_close(ts::conv1d(l.apply(x), w, bias, k.s, k.p, k.d, k.g), expected)) << l.name;
      // Unbatched (C, L).
      EXPECT_TRUE(all_close(ts::conv1d(x.select(0, 0), w, bias, k.s, k.p, k.d, k.g), expected.select(0, 0)));
    }
}

TEST(ConvTranspose2d, MatchesScatteringReference) {
  struct Case {
    std::string name;
    int64_t n, ci, h, w, cog, kh, kw;
    conv_ref::Conv p;
    int64_t oph, opw;
    bool bias;
  };
  const std::vector<Case> cases = {
      {"basic", 2, 3, 4, 5, 2, 3, 3, {}, 0, 0, true},
      {"stride2_op1_groups2", 2, 4, 3, 4, 3, 3, 3, {2, 2, 1, 1, 1, 1, 2}, 1, 1, true},
      {"rect", 1, 2, 5, 3, 3, 2, 4, {2, 3, 1, 0}, 1, 2, false},
      {"dilation", 2, 2, 4, 4, 3, 3, 3, {1, 1, 1, 1, 2, 2}, 0, 0, true},
      {"op_below_dilation", 1, 2, 4, 4, 2, 3, 3, {1, 1, 0, 0, 2, 2}, 1, 1, false},
      {"pointwise", 3, 4, 5, 5, 2, 1, 1, {}, 0, 0, true},
      {"depthwise", 2, 3, 4, 4, 1, 3, 3, {2, 2, 0, 0, 1, 1, 3}, 0, 1, true},
  };
  for (const Case& k : cases)
    for (ts::DType dt : float_dtypes())
      for (const Layout& l : layouts()) {
        ts::Tensor x = test_data({k.n, k.ci, k.h, k.w}, ts::kFloat64, 1).to(dt);
        ts::Tensor w = test_data({k.ci, k.cog, k.kh, k.kw}, ts::kFloat64, 2).to(dt);
        ts::Tensor b = k.bias ? test_data({k.cog * k.p.groups}, ts::kFloat64, 3).to(dt) : ts::Tensor();
        ts::Tensor expected = conv_ref::conv_transpose2d(x, w, b, k.p, k.oph, k.opw);
        std::optional<ts::Tensor> bias;
        if (k.bias) bias = b;
        ts::Tensor out = ts::conv_transpose2d(l.apply(x), l.apply(w), bias, {k.p.sh, k.p.sw}, {k.p.ph, k.p.pw},
                                              {k.oph, k.opw}, k.p.groups, {k.p.dh, k.p.dw});
        EXPECT_TRUE(all_close(out, expected)) << k.name << " " << ts::dtype_name(dt) << " " << l.name;
      }
  // Unbatched.
  ts::Tensor x = test_data({2, 3, 3}, ts::kFloat64, 4), w = test_data({2, 3, 2, 2}, ts::kFloat64, 5);
  EXPECT_TRUE(all_close(ts::conv_transpose2d(x, w, std::nullopt, 2),
                        conv_ref::conv_transpose2d(x.unsqueeze(0), w, ts::Tensor(), {2, 2}, 0, 0).select(0, 0)));
}

// ---- PyTorch 1.13 values ---------------------------------------------------------------------------

TEST(ConvTorch, Conv2dMatchesPyTorch) {
  {
    ts::Tensor x = ref_values({2, 3, 5, 5}, 0.1), w = ref_values({4, 3, 3, 3}, 0.2), b = ref_values({4}, 0.3);
    ts::Tensor out = ts::conv2d(x, w, b, 2, 1);
    EXPECT_TRUE(all_close(out, conv_ref::from(kConv2dStridePad_out, out.sizes())));
  }
  {
    ts::Tensor x = ref_values({1, 4, 6, 7}, 0.1), w = ref_values({4, 2, 3, 2}, 0.2);
    ts::Tensor out = ts::conv2d(x, w, std::nullopt, {1, 2}, 2, {2, 1}, 2);
    EXPECT_TRUE(all_close(out, conv_ref::from(kConv2dGroupsDilation_out, out.sizes())));
  }
  {
    ts::Tensor x = ref_values({2, 3, 9}, 0.1), w = ref_values({2, 3, 3}, 0.2), b = ref_values({2}, 0.3);
    ts::Tensor out = ts::conv1d(x, w, b, 2, 1);
    EXPECT_TRUE(all_close(out, conv_ref::from(kConv1d_out, out.sizes())));
  }
}

TEST(ConvTorch, ConvTranspose2dMatchesPyTorch) {
  {
    ts::Tensor x = ref_values({2, 4, 3, 4}, 0.1), w = ref_values({4, 3, 3, 3}, 0.2), b = ref_values({6}, 0.3);
    ts::Tensor out = ts::conv_transpose2d(x, w, b, 2, 1, 1, 2);
    EXPECT_TRUE(all_close(out, conv_ref::from(kConvTranspose2d_out, out.sizes())));
  }
  {
    ts::Tensor x = ref_values({1, 2, 4, 3}, 0.1), w = ref_values({2, 2, 2, 3}, 0.2), b = ref_values({2}, 0.3);
    ts::Tensor out = ts::conv_transpose2d(x, w, b, {1, 2}, {0, 1}, {1, 0}, 1, {2, 1});
    EXPECT_TRUE(all_close(out, conv_ref::from(kConvTranspose2dDilation_out, out.sizes())));
  }
}

// ---- errors -------------------------------------------------------------------------------------------

TEST(ConvErrors, Shapes) {
  ts::Tensor x = ts::ones({2, 3, 5, 5}), w = ts::ones({4, 3, 3, 3});
  EXPECT_THROW(ts::conv2d(ts::ones({3, 5}), w), ts::ShapeError);
  EXPECT_THROW(ts::conv2d(ts::ones({1, 2, 3, 5, 5}), w), ts::ShapeError);
  EXPECT_THROW(ts::conv2d(x, ts::ones({4, 3, 3})), ts::ShapeError);
  try {
    ts::conv2d(x, ts::ones({4, 4, 3, 3}));
    ADD_FAILURE() << "channel mismatch accepted";
  } catch (const ts::ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("Given groups=1, weight of size [4, 4, 3, 3], expected input[2, 3, 5, 5] to "
                                         "have 4 channels, but got 3 channels instead"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(ts::conv2d(ts::ones({2, 4, 5, 5}), ts::ones({3, 2, 3, 3}), std::nullopt, 1, 0, 1, 2),
               ts::ShapeError);  // groups do not divide the output channels
  EXPECT_THROW(ts::conv2d(ts::ones({2, 5, 5, 5}), ts::ones({4, 2, 3, 3}), std::nullopt, 1, 0, 1, 2),
               ts::ShapeError);  // nor the input channels
  try {
    ts::conv2d(ts::ones({1, 3, 2, 2}), w);
    ADD_FAILURE() << "kernel larger than the input accepted";
  } catch (const ts::ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("Kernel size can't be greater than actual input size"), std::string::npos);
  }
  EXPECT_NO_THROW(ts::conv2d(ts::ones({1, 3, 2, 2}), w, std::nullopt, 1, 1));  // padding makes room
  EXPECT_THROW(ts::conv2d(ts::ones({1, 3, 3, 3}), w, std::nullopt, 1, 0, 2), ts::ShapeError);  // dilated 5x5
  EXPECT_THROW(ts::conv2d(x, w, ts::ones({3})), ts::ShapeError);
  EXPECT_THROW(ts::conv1d(ts::ones({2, 3, 2}), ts::ones({4, 3, 3})), ts::ShapeError);
  EXPECT_THROW(ts::conv1d(ts::ones({2, 2, 5}), ts::ones({4, 3, 3})), ts::ShapeError);
  EXPECT_THROW(ts::conv1d(ts::ones({2, 3, 5}), ts::ones({4, 3, 3, 3})), ts::ShapeError);
  EXPECT_THROW(ts::conv_transpose2d(x, ts::ones({4, 2, 3, 3})), ts::ShapeError);
  EXPECT_THROW(ts::conv_transpose2d(ts::ones({1, 3, 1, 1}), ts::ones({3, 2, 1, 1}), std::nullopt, 1, 1),
               ts::ShapeError);  // output size 1 - 2 < 1
}

TEST(ConvErrors, Values) {
  ts::Tensor x = ts::ones({2, 3, 5, 5}), w = ts::ones({4, 3, 3, 3});
  EXPECT_THROW(ts::conv2d(x, w, std::nullopt, 0), ts::ValueError);
  EXPECT_THROW(ts::conv2d(x, w, std::nullopt, 1, -1), ts::ValueError);
  EXPECT_THROW(ts::conv2d(x, w, std::nullopt, 1, 0, {1, 0}), ts::ValueError);
  EXPECT_THROW(ts::conv2d(x, w, std::nullopt, 1, 0, 1, 0), ts::ValueError);
  EXPECT_THROW(ts::conv1d(ts::ones({2, 3, 5}), ts::ones({4, 3, 3}), std::nullopt, 0), ts::ValueError);
  EXPECT_THROW(ts::conv_transpose2d(ts::ones({1, 4, 3, 3}), ts::ones({4, 2, 3, 3}), std::nullopt, 2, 0, 2),
               ts::ValueError);  // output_padding not below stride nor dilation
  EXPECT_NO_THROW(ts::conv_transpose2d(ts::ones({1, 4, 3, 3}), ts::ones({4, 2, 3, 3}), std::nullopt, 1, 0, 1, 1, 2));
}

TEST(ConvErrors, DTypes) {
  ts::Tensor x = ts::ones({2, 3, 5, 5}), w = ts::ones({4, 3, 3, 3});
  EXPECT_THROW(ts::conv2d(x.to(ts::kFloat64), w), ts::DTypeError);
  EXPECT_THROW(ts::conv2d(x, w, ts::ones({4}, ts::kFloat64)), ts::DTypeError);
  EXPECT_THROW(ts::conv2d(x.to(ts::kInt64), w.to(ts::kInt64)), ts::DTypeError);
  EXPECT_THROW(ts::conv1d(ts::ones({2, 3, 5}, ts::kFloat16), ts::ones({4, 3, 3})), ts::DTypeError);
  EXPECT_THROW(ts::conv_transpose2d(ts::ones({1, 4, 3, 3}), ts::ones({4, 2, 3, 3}, ts::kBFloat16)), ts::DTypeError);
}

TEST(ConvErrors, Devices) {
  ts::Tensor x = ts::ones({2, 3, 5, 5}), w = ts::ones({4, 3, 3, 3});
  EXPECT_THROW(ts::conv2d(ts::empty({2, 3, 5, 5}, "meta"), w), ts::DeviceError);
  EXPECT_THROW(ts::conv2d(x, w, ts::empty({4}, "meta")), ts::DeviceError);
  EXPECT_THROW(ts::conv1d(ts::ones({2, 3, 5}), ts::empty({4, 3, 3}, "meta")), ts::DeviceError);
  EXPECT_THROW(ts::conv_transpose2d(ts::empty({1, 4, 3, 3}, "meta"), ts::ones({4, 2, 3, 3})), ts::DeviceError);
}

TEST(ConvChannelsLast, ResultsKeepTheLayoutAndValues) {
  const ts::MemoryFormat cl = ts::MemoryFormat::ChannelsLast;
  for (ts::DType dt : float_dtypes()) {
    SCOPED_TRACE(dtype_name(dt));
    ts::Tensor x = test_data({2, 4, 7, 6}, dt, 80), w = test_data({6, 2, 3, 3}, dt, 81), b = test_data({6}, dt, 82);
    ts::Tensor y = ts::conv2d(x, w, b, 2, 1, 1, 2);
    EXPECT_TRUE(y.is_contiguous());
    // An input or a weight in channels-last gives a channels-last result of the same values.
    for (const auto& [xi, wi] : {std::pair{x.contiguous(cl), w}, std::pair{x, w.contiguous(cl)}}) {
      ts::Tensor yc = ts::conv2d(xi, wi, b, 2, 1, 1, 2);
      EXPECT_TRUE(yc.is_contiguous(cl) && !yc.is_contiguous());
      EXPECT_TRUE(all_close(yc, y, {0, 0}));
    }
    ts::Tensor t = ts::conv_transpose2d(y.contiguous(cl), w, std::nullopt, 2, 1, 1, 2);
    EXPECT_TRUE(t.is_contiguous(cl) && !t.is_contiguous());
    EXPECT_TRUE(all_close(t, ts::conv_transpose2d(y, w, std::nullopt, 2, 1, 1, 2), {0, 0}));
    ts::Tensor dw = ts::conv2d_backward_weight(y.contiguous(cl), x, {3, 3}, 2, 1, 1, 2);
    EXPECT_TRUE(dw.is_contiguous(cl) && !dw.is_contiguous());
    EXPECT_TRUE(all_close(dw, ts::conv2d_backward_weight(y, x, {3, 3}, 2, 1, 1, 2), {0, 0}));
  }
}
