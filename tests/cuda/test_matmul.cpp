// CUDA matrix products (cuBLASLt for floating dtypes, the tiled kernel for integers) against the CPU
// kernel on the same inputs: every dtype, m / n / k of 1, k == 0, odd sizes, batched and broadcast
// batches, transposed and sliced operands, beta != 0 (and beta == 0 over NaN), integer wrap-around,
// float32 with TF32 off (float32 tolerance) and on (rtol 1e-2), the gemm slot with C layouts the ops
// never produce, linear's bias vector (cuBLASLt's BIAS epilogue or the bias written into C), the fused
// bias + activation epilogue against the unfused ops, and the errors.
#include <cmath>
#include <limits>

#include "common/test_util.h"
#include "kernels/cuda/matmul_lt.h"
#include "ops/gemm_kernel.h"

namespace ts = tessera;
using namespace tessera::testing;

namespace {

std::vector<ts::DType> gemm_dtypes() {
  return {ts::kFloat16, ts::kBFloat16, ts::kFloat32, ts::kFloat64, ts::kInt8, ts::kUInt8, ts::kInt32, ts::kInt64};
}

// TF32 for float32 matmuls set for a scope (restored after).
class Tf32Scope {
 public:
  explicit Tf32Scope(bool on) : prev_(ts::cuda::allow_tf32()) { ts::cuda::set_allow_tf32(on); }
  ~Tf32Scope() { ts::cuda::set_allow_tf32(prev_); }

 private:
  bool prev_;
};

// A k-term sum's rounding grows like sqrt(k) (as tests/ops/test_matmul.cpp); the GPU and the CPU
// each round, so the per-dtype tolerance is doubled. TF32 rounds the operands to 10 mantissa bits.
Tolerance tol_k(ts::DType dt, int64_t k, bool tf32 = false) {
  Tolerance t = tolerance_for(dt);
  if (tf32 && dt == ts::kFloat32) t = {1e-2, 1e-2};
  const double f = 2.0 * std::sqrt(static_cast<double>(std::max<int64_t>(k, 1)));
  return {t.rtol * f, t.atol * f};
}

// 16-bit results come from cuDNN / cuBLASLt algorithms whose summation order (and, for Winograd or
// fused epilogues, whose intermediate roundings) differ from the float32 CPU reference: an element
// that nearly cancels differs by an ulp of its terms, not of itself, so 16-bit outputs are compared
// relative to the output's scale (atol = rtol * max |want|).
::testing::AssertionResult all_close_scaled(const ts::Tensor& got, const ts::Tensor& want, Tolerance t) {
  if ((got.dtype() == ts::kFloat16 || got.dtype() == ts::kBFloat16) && want.numel() > 0)
    t.atol = std::max(t.atol, t.rtol * want.abs().max().to(ts::kFloat64).item<double>());
  return all_close(got, want, t);
}
::testing::AssertionResult all_close_scaled(const ts::Tensor& got, const ts::Tensor& want) {
  return all_close_scaled(got, want, tolerance_for(got.dtype()));
}

// Small integers so that no product overflows int8 / uint8 unless a test wants it.
ts::Tensor data(const ts::Shape& s, ts::DType dt, uint64_t seed) {
  return is_floating_point(dt) ? test_data(s, dt, seed) : test_data(s, dt, seed, -3, 3);
}

ts::Tensor gpu(const ts::Tensor& t) { return t.to("cuda"); }

// The same layout as `t` (strides included) on the GPU: a layout() applied to a GPU copy.
ts::Tensor gpu_like(const ts::Tensor& value, const Layout& l) { return l.apply(gpu(value)); }

}  // namespace

TEST(CudaMatmul, MmMatchesCpuEveryDtypeAndShape) {
  TS_REQUIRE_GPU();
  Tf32Scope tf32(false);
  const std::vector<std::array<int64_t, 3>> shapes = {{1, 1, 1},   {1, 7, 5},   {7, 1, 5},    {5, 7, 1},
                                                      {17, 33, 65}, {64, 64, 64}, {33, 129, 7}, {130, 3, 257}};
  for (ts::DType dt : gemm_dtypes())
    for (auto [m, n, k] : shapes) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " m=" + std::to_string(m) + " n=" + std::to_string(n) +
                   " k=" + std::to_string(k));
      ts::Tensor a = data({m, k}, dt, 1), b = data({k, n}, dt, 2);
      ts::Tensor want = ts::mm(a, b);
      ts::Tensor got = ts::mm(gpu(a), gpu(b));
      EXPECT_TRUE(got.is_cuda());
      EXPECT_TRUE(all_close_scaled(got.cpu(), want, tol_k(dt, k)));
    }
}

TEST(CudaMatmul, TransposedAndSlicedOperands) {
  TS_REQUIRE_GPU();
  Tf32Scope tf32(false);
  for (ts::DType dt : gemm_dtypes())
    for (const Layout& la : layouts())
      for (const Layout& lb : layouts()) {
        SCOPED_TRACE(std::string(dtype_name(dt)) + " a " + la.name + " b " + lb.name);
        ts::Tensor a = data({9, 13}, dt, 3), b = data({13, 11}, dt, 4);
        ts::Tensor want = ts::mm(la.apply(a), lb.apply(b));
        ts::Tensor got = ts::mm(gpu_like(a, la), gpu_like(b, lb));
        EXPECT_TRUE(all_close_scaled(got.cpu(), want, tol_k(dt, 13)));
        // Batched: (3, 9, 13) @ (3, 13, 11) in the same layouts.
        ts::Tensor a3 = data({3, 9, 13}, dt, 5), b3 = data({3, 13, 11}, dt, 6);
        EXPECT_TRUE(all_close_scaled(ts::bmm(gpu_like(a3, la), gpu_like(b3, lb)).cpu(), ts::bmm(la.apply(a3), lb.apply(b3)),
                              tol_k(dt, 13)));
      }
}

TEST(CudaMatmul, BatchedAndBroadcastBatches) {
  TS_REQUIRE_GPU();
  Tf32Scope tf32(false);
  for (ts::DType dt : gemm_dtypes()) {
    SCOPED_TRACE(dtype_name(dt));
    // matmul broadcasting a matrix over a batch, and a batch of 1 expanded (batch stride 0).
    ts::Tensor a = data({4, 6, 5}, dt, 7), b = data({5, 3}, dt, 8);
    EXPECT_TRUE(all_close_scaled(ts::matmul(gpu(a), gpu(b)).cpu(), ts::matmul(a, b), tol_k(dt, 5)));
    EXPECT_TRUE(all_close_scaled(ts::matmul(gpu(b.t()), gpu(a.transpose(1, 2))).cpu(), ts::matmul(b.t(), a.transpose(1, 2)),
                          tol_k(dt, 5)));
    ts::Tensor one = data({1, 6, 5}, dt, 9), bb = data({4, 5, 3}, dt, 10);
    EXPECT_TRUE(all_close_scaled(ts::bmm(gpu(one).expand({4, 6, 5}), gpu(bb)).cpu(), ts::bmm(one.expand({4, 6, 5}), bb),
                          tol_k(dt, 5)));
    // Broadcast batch dims on both sides: (2, 1, 6, 5) @ (3, 5, 4) -> (2, 3, 6, 4).
    ts::Tensor x = data({2, 1, 6, 5}, dt, 11), y = data({3, 5, 4}, dt, 12);
    EXPECT_TRUE(all_close_scaled(ts::matmul(gpu(x), gpu(y)).cpu(), ts::matmul(x, y), tol_k(dt, 5)));
    // Vectors: dot, matrix-vector, outer.
    ts::Tensor v = data({5}, dt, 13), w = data({5}, dt, 14);
    EXPECT_TRUE(all_close_scaled(ts::dot(gpu(v), gpu(w)).cpu(), ts::dot(v, w), tol_k(dt, 5)));
    EXPECT_TRUE(all_close_scaled(ts::matmul(gpu(a[0]), gpu(v)).cpu(), ts::matmul(a[0], v), tol_k(dt, 5)));
    EXPECT_TRUE(all_close_scaled(ts::outer(gpu(v), gpu(w)).cpu(), ts::outer(v, w), tol_k(dt, 1)));
  }
}

TEST(CudaMatmul, AddmmBaddbmmBetaAndAlpha) {
  TS_REQUIRE_GPU();
  Tf32Scope tf32(false);
  for (ts::DType dt : gemm_dtypes()) {
    SCOPED_TRACE(dtype_name(dt));
    const bool fl = is_floating_point(dt);
    const ts::Scalar beta = fl ? ts::Scalar(0.5) : ts::Scalar(int64_t(2));
    const ts::Scalar alpha = fl ? ts::Scalar(-1.5) : ts::Scalar(int64_t(-3));
    ts::Tensor in = data({7, 9}, dt, 15), a = data({7, 4}, dt, 16), b = data({4, 9}, dt, 17);
    EXPECT_TRUE(all_close_scaled(ts::addmm(gpu(in), gpu(a), gpu(b), beta, alpha).cpu(), ts::addmm(in, a, b, beta, alpha),
                          tol_k(dt, 4)));
    // A broadcast input row.
    ts::Tensor row = data({9}, dt, 18);
    EXPECT_TRUE(all_close_scaled(ts::addmm(gpu(row), gpu(a), gpu(b), beta, alpha).cpu(), ts::addmm(row, a, b, beta, alpha),
                          tol_k(dt, 4)));
    ts::Tensor in3 = data({2, 7, 9}, dt, 19), a3 = data({2, 7, 4}, dt, 20), b3 = data({2, 4, 9}, dt, 21);
    EXPECT_TRUE(all_close_scaled(ts::baddbmm(gpu(in3), gpu(a3), gpu(b3), beta, alpha).cpu(),
                          ts::baddbmm(in3, a3, b3, beta, alpha), tol_k(dt, 4)));
  }
}

TEST(CudaMatmul, BetaZeroDoesNotReadTheOutput) {
  TS_REQUIRE_GPU();
  for (ts::DType dt : {ts::kFloat16, ts::kBFloat16, ts::kFloat32, ts::kFloat64}) {
    SCOPED_TRACE(dtype_name(dt));
    ts::Tensor a = data({3, 4, 5}, dt, 22), b = data({3, 5, 2}, dt, 23);
    ts::Tensor want = ts::bmm(a, b);
    ts::Tensor c = ts::full({3, 4, 2}, std::numeric_limits<double>::quiet_NaN(), {dt, "cuda"});
    ts::gemm_kernel(c.device(), ts::GemmParams{gpu(a), gpu(b), c, 1, 0});
    EXPECT_TRUE(all_close_scaled(c.cpu(), want, tol_k(dt, 5)));
    // addmm with beta = 0 over a NaN input.
    ts::Tensor nan_in = ts::full({4, 2}, std::numeric_limits<double>::quiet_NaN(), dt);
    EXPECT_TRUE(all_close_scaled(ts::addmm(gpu(nan_in), gpu(a[0]), gpu(b[0]), 0, 1).cpu(), ts::mm(a[0], b[0]), tol_k(dt, 5)));
  }
}

TEST(CudaMatmul, EmptySumKIsZero) {
  TS_REQUIRE_GPU();
  for (ts::DType dt : gemm_dtypes()) {
    SCOPED_TRACE(dtype_name(dt));
    ts::Tensor a = data({3, 0}, dt, 24), b = data({0, 4}, dt, 25);
    ts::Tensor got = ts::mm(gpu(a), gpu(b));
    EXPECT_EQ(got.sizes(), (ts::Shape{3, 4}));
    EXPECT_TRUE(all_close_scaled(got.cpu(), ts::zeros({3, 4}, dt)));
    ts::Tensor in = data({3, 4}, dt, 26);
    const ts::Scalar beta = is_floating_point(dt) ? ts::Scalar(2.0) : ts::Scalar(int64_t(2));
    EXPECT_TRUE(all_close_scaled(ts::addmm(gpu(in), gpu(a), gpu(b), beta, 1).cpu(), ts::addmm(in, a, b, beta, 1)));
    // Zero-size results.
    EXPECT_EQ(ts::mm(gpu(data({0, 5}, dt, 27)), gpu(data({5, 4}, dt, 28))).sizes(), (ts::Shape{0, 4}));
    EXPECT_EQ(ts::bmm(gpu(data({0, 2, 5}, dt, 29)), gpu(data({0, 5, 4}, dt, 30))).sizes(), (ts::Shape{0, 2, 4}));
  }
}

TEST(CudaMatmul, IntegerProductsWrapAsTheCpu) {
  TS_REQUIRE_GPU();
  // Values whose products and sums overflow int8 / uint8 / int32: the 64-bit sum wraps to the dtype.
  for (ts::DType dt : {ts::kInt8, ts::kUInt8, ts::kInt32, ts::kInt64}) {
    SCOPED_TRACE(dtype_name(dt));
    const double lo = dt == ts::kUInt8 ? 0 : -120, hi = dt == ts::kUInt8 ? 255 : 120;
    ts::Tensor a = test_data({19, 37}, dt, 31, lo, hi), b = test_data({37, 23}, dt, 32, lo, hi);
    if (dt == ts::kInt32 || dt == ts::kInt64) {
      a = a.mul(ts::Scalar(int64_t(1) << 20));
      b = b.mul(ts::Scalar(int64_t(1) << 20));
    }
    EXPECT_TRUE(all_close_scaled(ts::mm(gpu(a), gpu(b)).cpu(), ts::mm(a, b), {0, 0}));
    ts::Tensor in = test_data({19, 23}, dt, 33, lo, hi);
    EXPECT_TRUE(all_close_scaled(ts::addmm(gpu(in), gpu(a), gpu(b), int64_t(3), int64_t(-2)).cpu(),
                          ts::addmm(in, a, b, int64_t(3), int64_t(-2)), {0, 0}));
    // Tiles at the edges of the grid: sizes past one 16 x 16 tile in every dim, batched.
    ts::Tensor a3 = test_data({3, 33, 17}, dt, 34, lo, hi), b3 = test_data({3, 17, 35}, dt, 35, lo, hi);
    EXPECT_TRUE(all_close_scaled(ts::bmm(gpu(a3), gpu(b3)).cpu(), ts::bmm(a3, b3), {0, 0}));
  }
}

TEST(CudaMatmul, Tf32OnIsCloseAtOnePercent) {
  TS_REQUIRE_GPU();
  Tf32Scope tf32(true);
  ts::Tensor a = data({128, 256}, ts::kFloat32, 36), b = data({256, 96}, ts::kFloat32, 37);
  ts::Tensor want = ts::mm(a.to(ts::kFloat64), b.to(ts::kFloat64));
  // TF32 keeps 10 mantissa bits: each product errs by ~2^-11 relative, the sum like sqrt(k) of that.
  EXPECT_TRUE(all_close_scaled(ts::mm(gpu(a), gpu(b)).cpu(), want, {1e-2, 1e-2 * std::sqrt(256.0)}));
}

TEST(CudaMatmul, Tf32OffIsFloat32Exact) {
  TS_REQUIRE_GPU();
  Tf32Scope tf32(false);
  // Values with 20 significant bits: TF32 would round them, full float32 keeps every product exact
  // (the k-term sums still round, hence the k-scaled float32 tolerance).
  ts::Tensor a = data({64, 128}, ts::kFloat32, 38).mul(1.0 + 1.0 / 1024 + 1.0 / (1 << 19));
  ts::Tensor b = data({128, 32}, ts::kFloat32, 39);
  EXPECT_TRUE(all_close_scaled(ts::mm(gpu(a), gpu(b)).cpu(), ts::mm(a, b), tol_k(ts::kFloat32, 128)));
}

TEST(CudaMatmul, GemmSlotWritesTransposedAndSteppedOutputs) {
  TS_REQUIRE_GPU();
  Tf32Scope tf32(false);
  for (ts::DType dt : gemm_dtypes()) {
    SCOPED_TRACE(dtype_name(dt));
    const bool fl = is_floating_point(dt);
    const ts::Scalar beta = fl ? ts::Scalar(0.25) : ts::Scalar(int64_t(2));
    ts::Tensor a = data({2, 4, 5}, dt, 40), b = data({2, 5, 3}, dt, 41), c0 = data({2, 4, 3}, dt, 42);
    ts::Tensor want = c0.clone();
    ts::gemm_kernel(want.device(), ts::GemmParams{a, b, want, 1, beta});
    // Column-major C.
    ts::Tensor ct = gpu(c0).transpose(1, 2).contiguous().transpose(1, 2);
    ts::gemm_kernel(ct.device(), ts::GemmParams{gpu(a), gpu(b), ct, 1, beta});
    EXPECT_TRUE(all_close_scaled(ct.cpu(), want, tol_k(dt, 5)));
    // C with a step in its columns: written through a temporary, the gaps untouched.
    ts::Tensor buf = ts::zeros({2, 4, 6}, {dt, "cuda"});
    ts::Tensor cs = buf.slice(2, 0, 6, 2);
    cs.copy_(gpu(c0));
    ts::gemm_kernel(cs.device(), ts::GemmParams{gpu(a), gpu(b), cs, 1, beta});
    EXPECT_TRUE(all_close_scaled(cs.cpu(), want, tol_k(dt, 5)));
    EXPECT_TRUE(all_close_scaled(buf.slice(2, 1, 6, 2).cpu(), ts::zeros({2, 4, 3}, dt)));
    // Operands with a step in both dims (copied first) and a broadcast row (stride 0).
    ts::Tensor big = data({2, 8, 10}, dt, 43);
    ts::Tensor as = big.slice(1, 0, 8, 2).slice(2, 0, 10, 2);  // (2, 4, 5), steps in both dims
    ts::Tensor brow = data({2, 1, 3}, dt, 44).expand({2, 5, 3});
    ts::Tensor want2 = ts::zeros({2, 4, 3}, dt);
    ts::gemm_kernel(want2.device(), ts::GemmParams{as, brow, want2, 1, 0});
    ts::Tensor got2 = ts::zeros({2, 4, 3}, {dt, "cuda"});
    ts::Tensor gbig = gpu(big);
    ts::gemm_kernel(got2.device(), ts::GemmParams{gbig.slice(1, 0, 8, 2).slice(2, 0, 10, 2),
                                                  gpu(data({2, 1, 3}, dt, 44)).expand({2, 5, 3}), got2, 1, 0});
    EXPECT_TRUE(all_close_scaled(got2.cpu(), want2, tol_k(dt, 5)));
  }
}

TEST(CudaMatmul, LargeShapeMatchesFloat64) {
  TS_REQUIRE_GPU();
  Tf32Scope tf32(false);
  // Big enough for split-K or multi-wave kernels; the reference in float64.
  ts::Tensor a = data({1024, 2048}, ts::kFloat32, 45), b = data({2048, 512}, ts::kFloat32, 46);
  ts::Tensor want = ts::mm(a.to(ts::kFloat64), b.to(ts::kFloat64));
  EXPECT_TRUE(all_close_scaled(ts::mm(gpu(a), gpu(b)).cpu(), want, tol_k(ts::kFloat32, 2048)));
  for (ts::DType dt : {ts::kFloat16, ts::kBFloat16}) {
    SCOPED_TRACE(dtype_name(dt));
    ts::Tensor a16 = a.to(dt), b16 = b.to(dt);
    ts::Tensor ref = ts::mm(a16.to(ts::kFloat64), b16.to(ts::kFloat64));
    EXPECT_TRUE(all_close_scaled(ts::mm(gpu(a16), gpu(b16)).cpu(), ref, tol_k(dt, 2048)));
  }
}

// Note [Aligned GEMM staging]: in 16-bit types these products are large enough against their matrices
// of 1003 columns (no whole number of 16-byte vectors) to be staged in padded buffers: as C (N = 1003),
// as A and B (K = 1003), as a transposed A (M = 1003), batched with beta != 0 and a broadcast batch;
// float32 runs them unstaged (fewer flops per byte). Against float64.
TEST(CudaMatmul, RaggedDimsOfLargeProductsAreStaged) {
  TS_REQUIRE_GPU();
  Tf32Scope tf32(false);
  const int64_t m = 2048, k = 768, n = 1003;
  for (ts::DType dt : {ts::kFloat32, ts::kFloat16, ts::kBFloat16}) {
    SCOPED_TRACE(dtype_name(dt));
    const ts::Tensor a = data({m, k}, dt, 50), w = data({n, k}, dt, 51), g = data({m, n}, dt, 52);
    auto ref = [](const ts::Tensor& x, const ts::Tensor& y) { return ts::mm(x.to(ts::kFloat64), y.to(ts::kFloat64)); };
    // The logits: C (m, 1003) written through an aligned buffer.
    EXPECT_TRUE(all_close_scaled(ts::mm(gpu(a), gpu(w).t()).cpu(), ref(a, w.t()), tol_k(dt, k)));
    // Their gradients: A (m, 1003) read with K = 1003, and A^T (1003, m) stored transposed.
    EXPECT_TRUE(all_close_scaled(ts::mm(gpu(g), gpu(w)).cpu(), ref(g, w), tol_k(dt, n)));
    EXPECT_TRUE(all_close_scaled(ts::mm(gpu(g).t(), gpu(a)).cpu(), ref(g.t(), a), tol_k(dt, m)));
    // Batched, with beta (baddbmm reads C), and a broadcast batch operand.
    const ts::Tensor a3 = data({2, m, k}, dt, 53), c3 = data({2, m, n}, dt, 54);
    const ts::Tensor want3 = ts::baddbmm(c3.to(ts::kFloat64), a3.to(ts::kFloat64), w.t().to(ts::kFloat64).expand({2, k, n}),
                                         0.5, 2.0);
    const ts::Tensor got3 = ts::baddbmm(gpu(c3), gpu(a3), gpu(w).t().expand({2, k, n}), 0.5, 2.0);
    EXPECT_TRUE(all_close_scaled(got3.cpu(), want3, tol_k(dt, k)));
    const ts::Tensor g3 = data({2, m, n}, dt, 55);
    EXPECT_TRUE(all_close_scaled(ts::bmm(gpu(g3), gpu(w).expand({2, n, k})).cpu(),
                                 ts::bmm(g3.to(ts::kFloat64), w.to(ts::kFloat64).expand({2, n, k})), tol_k(dt, n)));
  }
}

// linear's bias vector through the gemm slot (ops/gemm_kernel.h): cuBLASLt's BIAS epilogue where the
// product is aligned (64 x 32 @ 32 x 48), the bias written into C elsewhere (ragged dims, one row,
// k == 0, integers); a bias of size 1 and a sliced one; all against the CPU.
TEST(CudaMatmul, LinearBiasVectorMatchesCpu) {
  TS_REQUIRE_GPU();
  Tf32Scope tf32(false);
  struct Case { int64_t m, k, n; };
  for (ts::DType dt : gemm_dtypes())
    for (Case c : {Case{64, 32, 48}, Case{13, 24, 17}, Case{1, 32, 48}, Case{64, 0, 48}})
      for (int bias_kind : {0, 1, 2}) {
        SCOPED_TRACE(std::string(dtype_name(dt)) + " m " + std::to_string(c.m) + " k " + std::to_string(c.k) +
                     " n " + std::to_string(c.n) + " bias " + std::to_string(bias_kind));
        ts::Tensor x = data({c.m, c.k}, dt, 52), w = data({c.n, c.k}, dt, 53);
        ts::Tensor bias = bias_kind == 0 ? data({c.n}, dt, 54)
                          : bias_kind == 1 ? data({1}, dt, 55)
                                           : data({2 * c.n}, dt, 56).slice(0, 0, 2 * c.n, 2);
        ts::Tensor want = ts::linear(x, w, bias);
        ts::Tensor got = ts::linear(gpu(x), gpu(w), bias_kind == 2 ? gpu(data({2 * c.n}, dt, 56)).slice(0, 0, 2 * c.n, 2)
                                                                   : gpu(bias));
        ASSERT_EQ(got.sizes(), want.sizes());
        EXPECT_TRUE(all_close_scaled(got.cpu(), want, tol_k(dt, c.k)));
      }
}

// ---- the fused epilogue (an internal entry of the CUDA backend: only in a CUDA build) ------------------
#if defined(TESSERA_WITH_CUDA)
namespace {

ts::Tensor unfused(const ts::Tensor& a, const ts::Tensor& b, const ts::Tensor& bias, ts::cuda::Activation act) {
  ts::Tensor y = ts::matmul(a.to(ts::kFloat64), b.to(ts::kFloat64));
  if (bias.defined()) y = y + bias.to(ts::kFloat64);
  if (act == ts::cuda::Activation::Relu) y = y.relu();
  if (act == ts::cuda::Activation::Gelu) y = y.gelu("tanh");
  return y;
}

}  // namespace

TEST(CudaMatmul, GemmBiasActMatchesUnfused) {
  TS_REQUIRE_GPU();
  Tf32Scope tf32(false);
  using ts::cuda::Activation;
  for (ts::DType dt : {ts::kFloat16, ts::kBFloat16, ts::kFloat32, ts::kFloat64})
    for (Activation act : {Activation::None, Activation::Relu, Activation::Gelu})
      for (bool with_bias : {true, false})
        for (int64_t k : {int64_t(0), int64_t(1), int64_t(24)}) {
          SCOPED_TRACE(std::string(dtype_name(dt)) + " act " + std::to_string(int(act)) + " bias " +
                       std::to_string(with_bias) + " k " + std::to_string(k));
          ts::Tensor a = data({13, k}, dt, 47), b = data({k, 17}, dt, 48);
          ts::Tensor bias = with_bias ? data({17}, dt, 49) : ts::Tensor();
          ts::Tensor out = ts::empty({13, 17}, {dt, "cuda"});
          ts::cuda::gemm_bias_act(out, gpu(a), gpu(b), with_bias ? gpu(bias) : ts::Tensor(), act);
          EXPECT_TRUE(all_close_scaled(out.cpu(), unfused(a, b, bias, act), tol_k(dt, k)));
          // Batched (3-D), with a transposed b and a column-major out (written through a copy).
          ts::Tensor a3 = data({2, 13, k}, dt, 50), b3_rows = data({2, 17, k}, dt, 51);
          ts::Tensor b3 = b3_rows.transpose(1, 2);  // (2, k, 17), unit stride along k
          ts::Tensor out3 = ts::empty({2, 17, 13}, {dt, "cuda"}).transpose(1, 2);
          ts::cuda::gemm_bias_act(out3, gpu(a3), gpu(b3_rows).transpose(1, 2), with_bias ? gpu(bias) : ts::Tensor(),
                                  act);
          EXPECT_TRUE(all_close_scaled(out3.cpu(), unfused(a3, b3, bias, act), tol_k(dt, k)));
        }
}

TEST(CudaMatmul, GemmBiasActErrors) {
  TS_REQUIRE_GPU();
  using ts::cuda::Activation;
  ts::Tensor a = ts::ones({4, 3}, {ts::kFloat32, "cuda"}), b = ts::ones({3, 5}, {ts::kFloat32, "cuda"});
  ts::Tensor out = ts::empty({4, 5}, {ts::kFloat32, "cuda"});
  EXPECT_THROW(ts::cuda::gemm_bias_act(out, a, b, ts::ones({4}, {ts::kFloat32, "cuda"}), Activation::Relu),
               ts::ShapeError);
  EXPECT_THROW(ts::cuda::gemm_bias_act(ts::empty({4, 6}, {ts::kFloat32, "cuda"}), a, b, ts::Tensor(), Activation::None),
               ts::ShapeError);
  EXPECT_THROW(ts::cuda::gemm_bias_act(out, a, b.to(ts::kFloat64), ts::Tensor(), Activation::None), ts::DTypeError);
  EXPECT_THROW(ts::cuda::gemm_bias_act(out, a.cpu(), b, ts::Tensor(), Activation::None), ts::DeviceError);
}
#endif  // TESSERA_WITH_CUDA

TEST(CudaMatmul, Errors) {
  TS_REQUIRE_GPU();
  ts::Tensor a = ts::ones({4, 3}, {ts::kFloat32, "cuda"});
  EXPECT_THROW(ts::mm(a, ts::ones({3, 5}, {ts::kFloat64, "cuda"})), ts::DTypeError);
  EXPECT_THROW(ts::mm(a, ts::ones({3, 5})), ts::DeviceError);
  EXPECT_THROW(ts::mm(a, ts::ones({4, 5}, {ts::kFloat32, "cuda"})), ts::ShapeError);
  EXPECT_THROW(ts::mm(ts::ones({4, 3}, {ts::kBool, "cuda"}), ts::ones({3, 5}, {ts::kBool, "cuda"})), ts::DTypeError);
}
