// CUDA batch norm (cuDNN, src/kernels/cuda/batch_norm.cu) against the CPU kernel on the same inputs:
// native_batch_norm in training (output, saved mean / inverse std, running-stat updates with the
// unbiased variance) and evaluation, native_batch_norm_backward in both, through cuDNN's persistent
// mode (channels-last 16-bit training, with its reserve space) and its spatial mode; every float
// dtype (16-bit with float32 parameters), 2-D (N, C), 3-D, 4-D NCHW and channels-last, 5-D; without
// weight / bias / running statistics; the functional + autograd path end to end (bfloat16
// channels-last, as in ResNet-50 training); a tensor past 2^31 elements (the fallback); errors.
#include <cmath>
#include <string>
#include <tuple>

#include "common/test_util.h"
#include "ops/batch_norm_ops.h"
#include "tessera/autograd.h"
#include "tessera/nn.h"

namespace ts = tessera;
namespace F = tessera::nn::functional;
using namespace tessera::testing;
using ts::Tensor;

namespace {

constexpr ts::MemoryFormat kCL = ts::MemoryFormat::ChannelsLast;

ts::DType param_dtype(ts::DType d) { return d == ts::kFloat16 || d == ts::kBFloat16 ? ts::kFloat32 : d; }

Tensor gpu(const Tensor& t) {
  if (!t.defined()) return t;
  Tensor g = t.to("cuda");
  return t.dim() == 4 && !t.is_contiguous() && t.is_contiguous(kCL) ? g.contiguous(kCL) : g;
}

// Elementwise results: float32 statistics from different summation orders, then one rounding to the
// dtype; 16-bit results are compared relative to the output's scale (an element near zero is the
// difference of terms of that scale).
Tolerance elem_tol(ts::DType d) {
  switch (d) {
    case ts::kFloat64: return {1e-10, 1e-10};
    case ts::kFloat32: return {2e-5, 2e-5};
    case ts::kFloat16: return {2e-3, 2e-3};
    default: return {1.6e-2, 1.6e-2};
  }
}
// Per-channel sums over M values (dweight, dbias) and statistics.
Tolerance sum_tol(ts::DType d, int64_t m) {
  if (d == ts::kFloat64) return {1e-9, 1e-9};
  const double f = std::sqrt(static_cast<double>(std::max<int64_t>(m, 1)));
  return {1e-4, 1e-4 * f};
}

::testing::AssertionResult near(const Tensor& g, const Tensor& c, Tolerance t) {
  if (!g.defined() && !c.defined()) return ::testing::AssertionSuccess();
  if (g.defined() != c.defined()) return ::testing::AssertionFailure() << "one result is undefined";
  if (!g.is_cuda()) return ::testing::AssertionFailure() << "the result is not on the GPU";
  if (g.dtype() != c.dtype())
    return ::testing::AssertionFailure() << "dtype " << ts::dtype_name(g.dtype()) << " vs " << ts::dtype_name(c.dtype());
  if (g.is_contiguous(kCL) != c.is_contiguous(kCL) || g.is_contiguous() != c.is_contiguous())
    return ::testing::AssertionFailure() << "memory formats differ";
  if ((c.dtype() == ts::kFloat16 || c.dtype() == ts::kBFloat16) && c.numel() > 0)
    t.atol = std::max(t.atol, t.rtol * c.abs().max().to(ts::kFloat64).item<double>());
  return all_close(g.cpu(), c, t);
}

struct Case {
  ts::Shape sizes;
  bool channels_last;
};
std::string name(const Case& k, ts::DType d) {
  return std::string(ts::dtype_name(d)) + " " + ::testing::PrintToString(k.sizes) + (k.channels_last ? " NHWC" : "");
}
std::vector<Case> cases() {
  return {{{8, 5}, false},          {{4, 3, 7}, false},        {{2, 3, 4, 5}, false},  {{2, 3, 4, 5}, true},
          {{16, 64, 14, 14}, true}, {{16, 64, 14, 14}, false}, {{2, 3, 2, 3, 4}, false}, {{3, 130, 5, 3}, true}};
}
Tensor make_x(const Case& k, ts::DType d, uint64_t seed, double offset = 0.0) {
  Tensor x = (test_data(k.sizes, ts::kFloat64, seed) * 2.0 + offset).to(d);
  return k.channels_last ? x.contiguous(kCL) : x;
}

}  // namespace

TEST(CudaBatchNorm, TrainingForwardMatchesCpu) {
  TS_REQUIRE_GPU();
  for (ts::DType d : float_dtypes())
    for (const Case& k : cases())
      for (bool affine : {true, false})
        for (bool stats : {true, false}) {
          SCOPED_TRACE(name(k, d) + (affine ? " affine" : "") + (stats ? " running" : ""));
          const int64_t c = k.sizes[1], m = ts::numel_of(k.sizes) / c;
          const ts::DType p = param_dtype(d);
          Tensor x = make_x(k, d, 1, d == ts::kFloat16 || d == ts::kBFloat16 ? 0.0 : 10.0);
          Tensor w = affine ? test_data({c}, p, 2) : Tensor(), b = affine ? test_data({c}, p, 3) : Tensor();
          Tensor rm = stats ? test_data({c}, p, 4) : Tensor(), rv = stats ? test_data({c}, p, 5).abs() + 0.5 : Tensor();
          Tensor grm = gpu(rm), grv = gpu(rv);
          auto [y, sm, si] = ts::native_batch_norm(x, w, b, rm, rv, true, 0.1, 1e-5);
          auto [gy, gsm, gsi] = ts::native_batch_norm(gpu(x), gpu(w), gpu(b), grm, grv, true, 0.1, 1e-5);
          EXPECT_TRUE(near(gy, y, elem_tol(d)));
          EXPECT_TRUE(near(gsm, sm, sum_tol(d, m)));
          EXPECT_TRUE(near(gsi, si, sum_tol(d, m)));
          if (stats) {
            EXPECT_TRUE(near(grm, rm, sum_tol(d, m)));
            EXPECT_TRUE(near(grv, rv, sum_tol(d, m)));  // unbiased variance, momentum as PyTorch
          }
        }
}

TEST(CudaBatchNorm, EvalForwardMatchesCpu) {
  TS_REQUIRE_GPU();
  for (ts::DType d : float_dtypes())
    for (const Case& k : cases())
      for (bool affine : {true, false}) {
        SCOPED_TRACE(name(k, d) + (affine ? " affine" : ""));
        const int64_t c = k.sizes[1];
        const ts::DType p = param_dtype(d);
        Tensor x = make_x(k, d, 6);
        Tensor w = affine ? test_data({c}, p, 2) : Tensor(), b = affine ? test_data({c}, p, 3) : Tensor();
        Tensor rm = test_data({c}, p, 4), rv = test_data({c}, p, 5).abs() + 0.5;
        Tensor grm = gpu(rm), grv = gpu(rv);
        Tensor y = std::get<0>(ts::native_batch_norm(x, w, b, rm, rv, false, 0.1, 1e-3));
        Tensor gy = std::get<0>(ts::native_batch_norm(gpu(x), gpu(w), gpu(b), grm, grv, false, 0.1, 1e-3));
        EXPECT_TRUE(near(gy, y, elem_tol(d)));
        EXPECT_TRUE(ts::equal(grm.cpu(), rm));
        EXPECT_TRUE(ts::equal(grv.cpu(), rv));
      }
}

TEST(CudaBatchNorm, BackwardMatchesCpu) {
  TS_REQUIRE_GPU();
  for (ts::DType d : float_dtypes())
    for (const Case& k : cases())
      for (bool training : {true, false})
        for (bool affine : {true, false}) {
          SCOPED_TRACE(name(k, d) + (training ? " training" : " eval") + (affine ? " affine" : ""));
          const int64_t c = k.sizes[1], m = ts::numel_of(k.sizes) / c;
          const ts::DType p = param_dtype(d);
          Tensor x = make_x(k, d, 7);
          Tensor g = test_data(k.sizes, d, 8);
          Tensor w = affine ? test_data({c}, p, 2) : Tensor();
          Tensor rm = test_data({c}, p, 4), rv = test_data({c}, p, 5).abs() + 0.5;
          // Saved statistics from the CPU forward, so that both backwards see the same ones (the
          // backward without a reserve space: cuDNN's plain spatial backward on NHWC 16-bit).
          Tensor sm, si;
          if (training) std::tie(std::ignore, sm, si) = ts::native_batch_norm(x, w, Tensor(), Tensor(), Tensor(), true, 0.1, 1e-5);
          auto [dx, dw, db] = ts::native_batch_norm_backward(g, x, w, rm, rv, sm, si, training, 1e-5, {true, true, true});
          auto [gdx, gdw, gdb] = ts::native_batch_norm_backward(gpu(g), gpu(x), gpu(w), gpu(rm), gpu(rv), gpu(sm),
                                                                gpu(si), training, 1e-5, {true, true, true});
          Tolerance t = elem_tol(d);
          if (d == ts::kFloat32) t = {1e-4, 1e-4};
          EXPECT_TRUE(near(gdx, dx, t));
          EXPECT_TRUE(near(gdw, dw, sum_tol(d, m)));
          EXPECT_TRUE(near(gdb, db, sum_tol(d, m)));
          auto [gdx2, gdw2, gdb2] = ts::native_batch_norm_backward(gpu(g), gpu(x), gpu(w), gpu(rm), gpu(rv), gpu(sm),
                                                                   gpu(si), training, 1e-5, {false, true, false});
          EXPECT_FALSE(gdx2.defined());
          EXPECT_FALSE(gdb2.defined());
          EXPECT_TRUE(near(gdw2, dw, sum_tol(d, m)));
        }
}

// The functional + autograd path: the forward's reserve space goes to the fused backward.
TEST(CudaBatchNorm, AutogradThroughFunctionalMatchesCpu) {
  TS_REQUIRE_GPU();
  for (ts::DType d : {ts::kBFloat16, ts::kFloat16, ts::kFloat32})
    for (const Case& k : {Case{{32, 64, 28, 28}, true}, Case{{8, 24, 9, 9}, true}, Case{{8, 24, 9, 9}, false},
                          Case{{64, 40}, false}, Case{{4, 6, 33}, false}})
      for (bool training : {true, false}) {
        SCOPED_TRACE(name(k, d) + (training ? " training" : " eval"));
        const int64_t c = k.sizes[1], m = ts::numel_of(k.sizes) / c;
        Tensor x = make_x(k, d, 9);
        Tensor g = make_x(k, d, 10);
        Tensor w = test_data({c}, ts::kFloat32, 11), b = test_data({c}, ts::kFloat32, 12);
        Tensor rm = ts::zeros({c}), rv = ts::ones({c});
        Tensor gx = gpu(x).requires_grad_(), gw = gpu(w).requires_grad_(), gb = gpu(b).requires_grad_();
        Tensor grm = gpu(rm), grv = gpu(rv);
        x.requires_grad_();
        w.requires_grad_();
        b.requires_grad_();
        Tensor y = F::batch_norm(x, rm, rv, w, b, training, 0.1, 1e-5);
        Tensor gy = F::batch_norm(gx, grm, grv, gw, gb, training, 0.1, 1e-5);
        EXPECT_TRUE(near(gy, y, elem_tol(d)));
        EXPECT_TRUE(near(grm, rm, sum_tol(d, m)));
        EXPECT_TRUE(near(grv, rv, sum_tol(d, m)));
        y.backward(g);
        gy.backward(gpu(g));
        Tolerance t = elem_tol(d);
        if (d == ts::kFloat32) t = {1e-4, 1e-4};
        EXPECT_TRUE(near(gx.grad(), x.grad(), t));
        EXPECT_TRUE(near(gw.grad(), w.grad(), sum_tol(d, m)));
        EXPECT_TRUE(near(gb.grad(), b.grad(), sum_tol(d, m)));
      }
}

// Running statistics over several steps, momentum and the cumulative average (momentum = None).
TEST(CudaBatchNorm, BatchNorm2dModuleRunningStatsMatchCpu) {
  TS_REQUIRE_GPU();
  for (std::optional<double> momentum : {std::optional<double>(0.1), std::optional<double>()}) {
    ts::nn::BatchNorm2d cpu(16, 1e-5, momentum), dev(16, 1e-5, momentum);
    dev.to("cuda");
    for (int step = 0; step < 3; ++step) {
      Tensor x = make_x({{8, 16, 6, 6}, true}, ts::kFloat32, 20 + step, double(step));
      Tensor y = cpu(x), gy = dev(gpu(x));
      EXPECT_TRUE(near(gy, y, elem_tol(ts::kFloat32)));
    }
    EXPECT_TRUE(near(dev.running_mean, cpu.running_mean, {1e-5, 1e-5}));
    EXPECT_TRUE(near(dev.running_var, cpu.running_var, {1e-5, 1e-5}));
    cpu.eval();
    dev.eval();
    Tensor x = make_x({{4, 16, 5, 5}, false}, ts::kFloat32, 30);
    EXPECT_TRUE(near(dev(gpu(x)), cpu(x), elem_tol(ts::kFloat32)));
  }
}

TEST(CudaBatchNorm, EmptyBatchAndErrors) {
  TS_REQUIRE_GPU();
  Tensor x = ts::zeros({0, 3, 4}, {ts::kFloat32, "cuda"});
  Tensor rm = ts::zeros({3}, {ts::kFloat32, "cuda"}), rv = ts::ones({3}, {ts::kFloat32, "cuda"});
  Tensor y = std::get<0>(ts::native_batch_norm(x, Tensor(), Tensor(), rm, rv, false, 0.1, 1e-5));
  EXPECT_EQ(y.sizes(), x.sizes());
  EXPECT_TRUE(y.is_cuda());
  Tensor xg = ts::ones({4, 3, 2}, {ts::kFloat32, "cuda"});
  EXPECT_THROW(ts::native_batch_norm(xg, ts::ones({3}), Tensor(), Tensor(), Tensor(), true, 0.1, 1e-5), ts::DeviceError);
  EXPECT_THROW(ts::native_batch_norm(xg.to(ts::kBFloat16), ts::ones({3}, {ts::kBFloat16, "cuda"}), Tensor(), Tensor(),
                                     Tensor(), true, 0.1, 1e-5),
               ts::DTypeError);
}

// Past 2^31 elements cuDNN's 32-bit descriptors do not reach: the fallback runs. Its statistics are
// checked against var_mean on the device, and y against its definition on a slice. Needs ~40 GB.
TEST(CudaBatchNorm, TensorPast2Pow31ElementsUsesTheFallback) {
  TS_REQUIRE_GPU();
  const int64_t l = (int64_t(1) << 30) + 64;  // (1, 2, l): 2^31 + 128 elements
  Tensor x = ts::randn({1, 2, l}, {ts::kBFloat16, "cuda"});
  Tensor rm = ts::zeros({2}, {ts::kFloat32, "cuda"}), rv = ts::ones({2}, {ts::kFloat32, "cuda"});
  auto [y, sm, si] = ts::native_batch_norm(x, Tensor(), Tensor(), rm, rv, true, 1.0, 1e-5);
  auto [var, mean] = ts::var_mean(x.to(ts::kFloat32), std::vector<int64_t>{0, 2}, /*correction=*/0);
  EXPECT_TRUE(all_close(sm.cpu(), mean.cpu(), {1e-4, 1e-4}));
  EXPECT_TRUE(all_close(si.cpu(), ts::rsqrt(var + 1e-5).cpu(), {1e-4, 1e-4}));
  EXPECT_TRUE(all_close(rm.cpu(), mean.cpu(), {1e-4, 1e-4}));
  const double m = static_cast<double>(l);
  EXPECT_TRUE(all_close(rv.cpu(), (var * (m / (m - 1))).cpu(), {1e-4, 1e-4}));
  for (int64_t ch = 0; ch < 2; ++ch)
    for (int64_t at : {int64_t(0), l - 4096}) {
      Tensor xs = x.select(1, ch).narrow(1, at, 4096).to(ts::kFloat32).cpu();
      Tensor want = (xs - sm.cpu()[ch]) * si.cpu()[ch];
      EXPECT_TRUE(all_close(y.select(1, ch).narrow(1, at, 4096).cpu(), want, {1.6e-2, 2e-2}));
    }
}
