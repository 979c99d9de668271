// GPU layer norm and RMS norm against the CPU kernels on the same inputs: every floating dtype; row
// lengths N = 1, 7, 32, 33, 1000, 1024, 1025, 4096, 4097, 8192, 8193, 10000, 16384 (the register
// kernels: one warp per row up to a block of 512 threads per row, 16-byte and element loads) and
// 16385, 65537 (the looped kernels); many short rows; with and without weight / bias; forward
// outputs and statistics, the fused backward (dx, dweight, dbias, each alone too); misaligned
// (storage offset 1) and strided inputs; empty inputs (M = 0: zero dweight; N = 0: NaN statistics);
// autograd through nn::functional on the GPU; reproducible dweight; device errors; and, named
// *Large*, inputs past 2^31 elements on both kernel families.
#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "common/test_util.h"
#include "ops/norm_ops.h"
#include "tessera/nn/functional.h"

namespace ts = tessera;
using namespace tessera::testing;

namespace {

// GPU (moved to the host) and CPU agree within tol; `scaled`: atol grows to rtol * max|cpu| (results
// with cancellation, and sums over rows, rounded to a 16-bit dtype).
::testing::AssertionResult near(const ts::Tensor& gpu, const ts::Tensor& cpu, Tolerance tol, bool scaled = false) {
  if (gpu.defined() != cpu.defined()) return ::testing::AssertionFailure() << "defined: " << gpu.defined() << " vs " << cpu.defined();
  if (!gpu.defined()) return ::testing::AssertionSuccess();
  if (!gpu.is_cuda()) return ::testing::AssertionFailure() << "the result is not on the GPU";
  if (gpu.dtype() != cpu.dtype())
    return ::testing::AssertionFailure() << "dtype " << ts::dtype_name(gpu.dtype()) << " vs " << ts::dtype_name(cpu.dtype());
  if (scaled && cpu.numel() > 0) {
    const double m = cpu.to(ts::kFloat64).abs().max().item<double>();
    if (std::isfinite(m)) tol.atol = std::max(tol.atol, tol.rtol * m);
  }
  return all_close(gpu.cpu(), cpu, tol);
}

Tolerance out_tol(ts::DType d) {
  switch (d) {
    case ts::kFloat64: return {1e-12, 1e-12};
    case ts::kFloat32: return {2e-5, 2e-5};
    case ts::kFloat16: return {2e-3, 1e-4};
    default: return {1.6e-2, 1e-3};
  }
}
Tolerance stat_tol(ts::DType d) { return d == ts::kFloat64 ? Tolerance{1e-12, 1e-12} : Tolerance{2e-5, 2e-6}; }

struct Inputs {
  ts::Tensor x, dy, w, b;
};

Inputs make_inputs(int64_t m, int64_t n, ts::DType d, bool w, bool b, uint64_t seed) {
  Inputs in;
  in.x = test_data({m, n}, d, seed).reshape({m, n}) * 2.0 + 0.5;
  in.dy = test_data({m, n}, d, seed + 1).reshape({m, n});
  if (w) in.w = test_data({n}, d, seed + 2);
  if (b) in.b = test_data({n}, d, seed + 3);
  return in;
}

ts::Tensor gpu(const ts::Tensor& t) { return t.defined() ? t.to("cuda") : ts::Tensor(); }

// Forward and backward of layer norm (rms = false) or RMS norm on `dev`, mask as the backward ops'.
struct Result {
  ts::Tensor y, mean, rstd, dx, dw, db;
};
Result run(const Inputs& in, const ts::Shape& ns, bool rms, std::array<bool, 3> mask) {
  Result r;
  if (rms) {
    std::tie(r.y, r.rstd) = ts::native_rms_norm(in.x, ns, in.w, 1e-5);
    std::tie(r.dx, r.dw) = ts::native_rms_norm_backward(in.dy, in.x, ns, r.rstd, in.w, {mask[0], mask[1]});
  } else {
    std::tie(r.y, r.mean, r.rstd) = ts::native_layer_norm(in.x, ns, in.w, in.b, 1e-5);
    std::tie(r.dx, r.dw, r.db) = ts::native_layer_norm_backward(in.dy, in.x, ns, r.mean, r.rstd, in.w, in.b, mask);
  }
  return r;
}

void compare(const Inputs& cpu_in, const Inputs& gpu_in, const ts::Shape& ns, bool rms, const std::string& what,
             std::array<bool, 3> mask = {true, true, true}) {
  SCOPED_TRACE(what + (rms ? " rms " : " layer ") + ts::dtype_name(cpu_in.x.dtype()));
  const Result c = run(cpu_in, ns, rms, mask), g = run(gpu_in, ns, rms, mask);
  const ts::DType d = cpu_in.x.dtype();
  EXPECT_TRUE(near(g.y, c.y, out_tol(d))) << "y";
  EXPECT_TRUE(near(g.mean, c.mean, stat_tol(d))) << "mean";
  EXPECT_TRUE(near(g.rstd, c.rstd, stat_tol(d))) << "rstd";
  Tolerance gt = out_tol(d);
  if (d == ts::kFloat32) gt = {1e-4, 1e-5};
  if (d == ts::kFloat64) gt = {1e-10, 1e-11};
  // dx = rstd * (g - mean(g) - ...) cancels: its rounding error grows with rstd (N = 1 rows have var 0,
  // rstd = 1 / sqrt(eps), and an exact dx of 0 that the CPU's fused multiply-adds miss by an ulp of g).
  Tolerance dxt = gt;
  if (c.dx.defined() && c.dx.numel() > 0 && d != ts::kFloat64) {
    const double ulp = d == ts::kFloat32 ? 1.2e-7 : d == ts::kFloat16 ? 9.8e-4 : 7.8e-3;
    const double g_max = (cpu_in.w.defined() ? cpu_in.dy * cpu_in.w : cpu_in.dy).to(ts::kFloat64).abs().max().item<double>();
    dxt.atol = std::max(dxt.atol, 8 * ulp * c.rstd.to(ts::kFloat64).max().item<double>() * g_max);
  }
  EXPECT_TRUE(near(g.dx, c.dx, dxt, true)) << "dx";
  EXPECT_TRUE(near(g.dw, c.dw, gt, true)) << "dweight";
  EXPECT_TRUE(near(g.db, c.db, gt, true)) << "dbias";
}

void compare_shape(int64_t m, int64_t n, ts::DType d, uint64_t seed) {
  for (int affine = 0; affine < 4; ++affine) {
    const Inputs c = make_inputs(m, n, d, affine & 1, affine & 2, seed);
    const Inputs g{gpu(c.x), gpu(c.dy), gpu(c.w), gpu(c.b)};
    const std::string what = ts::detail::str_cat("(", m, ", ", n, ") affine ", affine);
    compare(c, g, {n}, false, what);
    if (!(affine & 2)) compare(c, g, {n}, true, what);
  }
}

}  // namespace

TEST(CudaNorm, EveryRowLengthAndDtype) {
  TS_REQUIRE_GPU();
  for (ts::DType d : float_dtypes())
    for (int64_t n : {1, 7, 32, 33, 1000, 1024, 1025, 4096, 4097, 8192, 8193, 10000, 16384, 16385, 65537})
      compare_shape(n >= 8192 ? 5 : 37, n, d, static_cast<uint64_t>(n));
}

TEST(CudaNorm, ManyShortRows) {
  TS_REQUIRE_GPU();
  // More rows than the backward's resident blocks: every partial row sums many rows.
  for (ts::DType d : {ts::kFloat32, ts::kBFloat16}) {
    compare_shape(20000, 64, d, 3);
    compare_shape(3000, 768, d, 4);
    compare_shape(2000, 4096, d, 5);
  }
}

TEST(CudaNorm, BackwardOutputsAlone) {
  TS_REQUIRE_GPU();
  for (int64_t n : {256, 20000}) {  // register and looped kernels
    const Inputs c = make_inputs(50, n, ts::kFloat32, true, true, 9);
    const Inputs g{gpu(c.x), gpu(c.dy), gpu(c.w), gpu(c.b)};
    for (std::array<bool, 3> mask : {std::array<bool, 3>{true, false, false}, {false, true, false},
                                     {false, false, true}, {false, true, true}})
      compare(c, g, {n}, false, ts::detail::str_cat("n ", n, " mask ", mask[0], mask[1], mask[2]), mask);
  }
}

TEST(CudaNorm, MisalignedAndStridedInputs) {
  TS_REQUIRE_GPU();
  for (ts::DType d : {ts::kFloat32, ts::kBFloat16, ts::kFloat16}) {
    const int64_t m = 9, n = 1024;
    const Inputs c = make_inputs(m, n, d, true, true, 21);
    // Storage offset 1: contiguous, but no 16-byte alignment (element loads in the register kernel).
    auto misaligned = [&](const ts::Tensor& t) {
      ts::Tensor buf = ts::zeros({t.numel() + 1}, ts::TensorOptions(t.dtype(), ts::Device("cuda")));
      ts::Tensor v = buf.slice(0, 1, std::nullopt).reshape(t.sizes());
      v.copy_(t.to("cuda"));
      return v;
    };
    Inputs g{misaligned(c.x), misaligned(c.dy), misaligned(c.w), misaligned(c.b)};
    ASSERT_TRUE(g.x.is_contiguous());
    compare(c, g, {n}, false, "misaligned");
    compare(c, g, {n}, true, "misaligned");
    // Transposed inputs: the op makes them contiguous.
    ts::Tensor xt = gpu(c.x).t().contiguous().t();
    ASSERT_FALSE(xt.is_contiguous());
    compare(c, Inputs{xt, gpu(c.dy), gpu(c.w), gpu(c.b)}, {n}, false, "transposed");
  }
  // A 3-D input normalized over its last two dims.
  const ts::Tensor x = test_data({4, 6, 10}, ts::kFloat32, 31).reshape({4, 6, 10});
  const ts::Tensor dy = test_data({4, 6, 10}, ts::kFloat32, 32).reshape({4, 6, 10});
  const ts::Tensor w = test_data({6, 10}, ts::kFloat32, 33).reshape({6, 10});
  const Inputs c{x, dy, w, w * 0.5};
  compare(c, Inputs{gpu(c.x), gpu(c.dy), gpu(c.w), gpu(c.b)}, {6, 10}, false, "3-D");
}

TEST(CudaNorm, EmptyInputs) {
  TS_REQUIRE_GPU();
  for (ts::DType d : {ts::kFloat32, ts::kBFloat16}) {
    const Inputs c = make_inputs(0, 16, d, true, true, 41);
    compare(c, Inputs{gpu(c.x), gpu(c.dy), gpu(c.w), gpu(c.b)}, {16}, false, "M = 0");
    const Inputs z = make_inputs(3, 0, d, true, true, 42);
    compare(z, Inputs{gpu(z.x), gpu(z.dy), gpu(z.w), gpu(z.b)}, {0}, false, "N = 0");
  }
}

TEST(CudaNorm, AutogradMatchesCpu) {
  TS_REQUIRE_GPU();
  for (ts::DType d : float_dtypes()) {
    SCOPED_TRACE(ts::dtype_name(d));
    const Inputs c = make_inputs(12, 96, d, true, true, 51);
    std::vector<ts::Tensor> grads[2];
    ts::Tensor ys[2];
    for (int dev = 0; dev < 2; ++dev) {
      ts::Tensor x = (dev ? gpu(c.x) : c.x).detach().clone().requires_grad_();
      // Mixed precision: float32 parameters.
      ts::Tensor w = (dev ? gpu(c.w) : c.w).to(ts::kFloat32).detach().clone().requires_grad_();
      ts::Tensor b = (dev ? gpu(c.b) : c.b).to(ts::kFloat32).detach().clone().requires_grad_();
      ts::Tensor y = ts::nn::functional::layer_norm(x, {96}, w, b);
      ts::Tensor z = ts::nn::functional::rms_norm(y, {96}, w);
      ys[dev] = z;
      grads[dev] = ts::autograd::grad({z}, {x, w, b}, {dev ? gpu(c.dy) : c.dy});
    }
    EXPECT_TRUE(near(ys[1], ys[0], out_tol(d)));
    for (int i = 0; i < 3; ++i) EXPECT_TRUE(near(grads[1][i], grads[0][i], out_tol(d), true)) << "grad " << i;
  }
}

TEST(CudaNorm, SecondOrderOnGpu) {
  TS_REQUIRE_GPU();
  // gradcheck perturbs host inputs: the function moves them to the GPU (first order: the fused CUDA
  // backward; second order: the composite formula on the GPU) and its result back.
  const Inputs c = make_inputs(4, 8, ts::kFloat64, true, true, 61);
  std::vector<ts::Tensor> in{c.x.clone().requires_grad_(), c.w.clone().requires_grad_(), c.b.clone().requires_grad_()};
  auto fn = [](const std::vector<ts::Tensor>& v) -> std::vector<ts::Tensor> {
    return {ts::nn::functional::layer_norm(v[0].to("cuda"), {8}, v[1].to("cuda"), v[2].to("cuda"), 1e-3).cpu()};
  };
  auto rms = [](const std::vector<ts::Tensor>& v) -> std::vector<ts::Tensor> {
    return {ts::nn::functional::rms_norm(v[0].to("cuda"), {8}, v[1].to("cuda"), 1e-3).cpu()};
  };
  std::string report;
  EXPECT_TRUE(ts::autograd::gradcheck(fn, in, {}, &report)) << report;
  EXPECT_TRUE(ts::autograd::gradgradcheck(fn, in, {}, &report)) << report;
  const std::vector<ts::Tensor> in2{in[0], in[1]};
  EXPECT_TRUE(ts::autograd::gradcheck(rms, in2, {}, &report)) << report;
  EXPECT_TRUE(ts::autograd::gradgradcheck(rms, in2, {}, &report)) << report;
}

TEST(CudaNorm, WeightGradientIsReproducible) {
  TS_REQUIRE_GPU();
  for (int64_t n : {512, 30000}) {
    const Inputs c = make_inputs(4000, n, ts::kFloat32, true, true, 71);
    const Inputs g{gpu(c.x), gpu(c.dy), gpu(c.w), gpu(c.b)};
    const Result a = run(g, {n}, false, {true, true, true}), b = run(g, {n}, false, {true, true, true});
    EXPECT_TRUE(ts::equal(a.dw, b.dw)) << n;
    EXPECT_TRUE(ts::equal(a.db, b.db)) << n;
    EXPECT_TRUE(ts::equal(a.dx, b.dx)) << n;
  }
}

TEST(CudaNorm, Errors) {
  TS_REQUIRE_GPU();
  ts::Tensor x = ts::zeros({3, 4}, ts::TensorOptions(ts::kFloat32, ts::Device("cuda")));
  EXPECT_THROW(ts::native_layer_norm(x, {4}, ts::ones({4}), {}, 1e-5), ts::DeviceError);
  EXPECT_THROW(ts::native_rms_norm(x, {4}, ts::ones({4}), 1e-5), ts::DeviceError);
  EXPECT_THROW(ts::native_layer_norm(x, {5}, {}, {}, 1e-5), ts::ShapeError);
}

// Rows past 2^31 elements in all (row offsets in int64): rows repeat with period 8, so dweight and
// dbias are (M / 8) times the CPU's over those 8 rows, and any row's output is the CPU's of its class.
void check_large(int64_t m, int64_t n) {
  ASSERT_GT(m * n, int64_t(1) << 31);
  ASSERT_EQ(m % 8, 0);
  const ts::DType d = ts::kBFloat16;
  const Inputs small = make_inputs(8, n, d, true, true, 81);
  const ts::Tensor x = gpu(small.x).expand({m / 8, 8, n}).reshape({m, n}).contiguous();
  const ts::Tensor dy = gpu(small.dy).expand({m / 8, 8, n}).reshape({m, n}).contiguous();
  const Inputs g{x, dy, gpu(small.w), gpu(small.b)};
  const Result r = run(g, {n}, false, {true, true, true});
  const Result c = run(small, {n}, false, {true, true, true});
  for (int64_t row : {int64_t(0), m / 2 + 3, m - 8, m - 1}) {
    SCOPED_TRACE(row);
    EXPECT_TRUE(near(r.y.select(0, row), c.y.select(0, row % 8), out_tol(d)));
    EXPECT_TRUE(near(r.dx.select(0, row), c.dx.select(0, row % 8), out_tol(d), true));
    EXPECT_TRUE(near(r.rstd.reshape({m}).slice(0, row, row + 1), c.rstd.reshape({8}).slice(0, row % 8, row % 8 + 1),
                     stat_tol(d)));
  }
  const double k = static_cast<double>(m / 8);
  EXPECT_TRUE(near(r.dw, (c.dw.to(ts::kFloat64) * k).to(d), {2e-2, 1e-2}, true));
  EXPECT_TRUE(near(r.db, (c.db.to(ts::kFloat64) * k).to(d), {2e-2, 1e-2}, true));
}

TEST(CudaNorm, LargeRowsPast2To31RegisterKernels) {
  TS_REQUIRE_GPU();
  check_large(524296, 4096);  // 2^31 + 32768 elements, ~4.3 GB per (M, N) bfloat16 tensor
}

TEST(CudaNorm, LargeRowsPast2To31LoopedKernels) {
  TS_REQUIRE_GPU();
  check_large(32768, 65537);  // 2^31 + 32768 elements
}
