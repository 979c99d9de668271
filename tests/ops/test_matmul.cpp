// Matrix products (mm, bmm, matmul, addmm, baddbmm, linear, dot, outer) against float64 references
// computed here with naive loops over tolist<double>() values, in every dtype they take, on contiguous,
// transposed and sliced-with-step operands, with broadcast batch dims, 1-D, zero-size and meta inputs,
// plus the error classes of each failure. The batched GEMM slot is also driven directly for output
// layouts the public ops never produce (transposed and strided C).
#include <cmath>
#include <limits>

#include "common/test_util.h"
#include "kernels/cpu/onednn/onednn.h"
#include "ops/gemm_kernel.h"

namespace ts = tessera;
using namespace tessera::testing;

namespace {

std::vector<ts::DType> gemm_dtypes() {
  return {ts::kFloat16, ts::kBFloat16, ts::kFloat32, ts::kFloat64, ts::kInt8, ts::kUInt8, ts::kInt32, ts::kInt64};
}

// A k-term sum of products in floating point carries a rounding error that grows like sqrt(k) for
// random data, relative to the magnitude of the terms rather than of the (possibly cancelling) result.
// So DESIGN.md's per-dtype tolerance is scaled by sqrt(k), and atol too, since a cancelling sum can end
// near zero where rtol alone says nothing. Reduced-precision dtypes accumulate in float32 and round
// once, so their DESIGN.md rtol (half/bfloat16 rounding of the result) already dominates.
Tolerance tol_k(ts::DType dt, int64_t k) {
  Tolerance t = tolerance_for(dt);
  const double f = std::sqrt(static_cast<double>(std::max<int64_t>(k, 1)));
  return {t.rtol * f, t.atol * f};
}

// Small integers so that no product of the tests overflows int8/uint8 (except where a test wants it).
ts::Tensor data(const ts::Shape& s, ts::DType dt, uint64_t seed) {
  return is_floating_point(dt) ? test_data(s, dt, seed) : test_data(s, dt, seed, -3, 3);
}

// Reference matmul with PyTorch's rules on the host: a vector becomes a 1-row / 1-column matrix, batch
// dims broadcast (materialized through expand + contiguous, i.e. views and copies only).
ts::Tensor ref_matmul(const ts::Tensor& a, const ts::Tensor& b) {
  ts::Tensor a2 = a.dim() == 1 ? a.unsqueeze(0) : a;
  ts::Tensor b2 = b.dim() == 1 ? b.unsqueeze(1) : b;
  const int64_t m = a2.size(-2), k = a2.size(-1), n = b2.size(-1);
  ts::Shape ba(a2.sizes().begin(), a2.sizes().end() - 2), bb(b2.sizes().begin(), b2.sizes().end() - 2);
  ts::Shape batch = ts::broadcast_shapes(ba, bb);
  ts::Shape sa = batch, sb = batch, sc = batch;
  sa.insert(sa.end(), {m, k});
  sb.insert(sb.end(), {k, n});
  std::vector<double> va = a2.expand(sa).contiguous().tolist<double>();
  std::vector<double> vb = b2.expand(sb).contiguous().tolist<double>();
  const int64_t nb = ts::numel_of(batch);
  std::vector<double> vc(nb * m * n, 0.0);
  for (int64_t q = 0; q < nb; ++q)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t p = 0; p < k; ++p) s += va[(q * m + i) * k + p] * vb[(q * k + p) * n + j];
        vc[(q * m + i) * n + j] = s;
      }
  if (a.dim() > 1) sc.push_back(m);
  if (b.dim() > 1) sc.push_back(n);
  // tensor() reads empty sizes as 1-D, so a 0-dim result is reshaped.
  return ts::tensor(vc, {static_cast<int64_t>(vc.size())}, ts::kFloat64).reshape(sc);
}

// beta * input + alpha * ref, with input broadcast to ref's shape.
ts::Tensor ref_add(const ts::Tensor& input, const ts::Tensor& prod, double beta, double alpha) {
  std::vector<double> vi = input.expand(prod.sizes()).contiguous().tolist<double>();
  std::vector<double> vp = prod.tolist<double>();
  for (size_t i = 0; i < vp.size(); ++i) vp[i] = (beta == 0 ? 0.0 : beta * vi[i]) + alpha * vp[i];
  return ts::tensor(vp, {static_cast<int64_t>(vp.size())}, ts::kFloat64).reshape(prod.sizes());
}

// Integer results are exact; floats within tol_k.
::testing::AssertionResult close_k(const ts::Tensor& actual, const ts::Tensor& expected, int64_t k) {
  return all_close(actual, expected, tol_k(actual.dtype(), k));
}

}  // namespace

// ---- mm -----------------------------------------------------------------------------------------
TEST(Matmul, MmEveryDtypeAndLayout) {
  for (ts::DType dt : gemm_dtypes())
    for (const Layout& la : layouts())
      for (const Layout& lb : layouts()) {
        SCOPED_TRACE(std::string(dtype_name(dt)) + " a " + la.name + " b " + lb.name);
        ts::Tensor a = la.apply(data({5, 7}, dt, 1)), b = lb.apply(data({7, 4}, dt, 2));
        ts::Tensor c = ts::mm(a, b);
        EXPECT_EQ(c.dtype(), dt);
        EXPECT_EQ(c.sizes(), (ts::Shape{5, 4}));
        EXPECT_TRUE(close_k(c, ref_matmul(a, b), 7));
        EXPECT_TRUE(close_k(a.mm(b), ref_matmul(a, b), 7));
      }
}

TEST(Matmul, MmTinyShapesEveryLayout) {
  // Sizes 1 and 2 are where a stride stops mattering (size 1) or nearly looks unit (size 2): the
  // layout choice between a BLAS leading dimension and a copy must still read the right elements.
  for (ts::DType dt : {ts::kFloat32, ts::kFloat64, ts::kFloat16, ts::kInt64})
    for (int64_t m : {1, 2, 3})
      for (int64_t k : {1, 2, 3})
        for (int64_t n : {1, 2, 3})
          for (const Layout& la : layouts())
            for (const Layout& lb : layouts()) {
              SCOPED_TRACE(std::string(dtype_name(dt)) + " " + la.name + " x " + lb.name + " m" + std::to_string(m) +
                           " k" + std::to_string(k) + " n" + std::to_string(n));
              ts::Tensor a = la.apply(data({m, k}, dt, 50)), b = lb.apply(data({k, n}, dt, 51));
              ASSERT_TRUE(close_k(ts::mm(a, b), ref_matmul(a, b), k));
              ts::Tensor a3 = la.apply(data({2, m, k}, dt, 52)), b3 = lb.apply(data({2, k, n}, dt, 53));
              ASSERT_TRUE(close_k(ts::bmm(a3, b3), ref_matmul(a3, b3), k));
            }
}

TEST(Matmul, MmLargeUsesBlasThreadsAndMatches) {
  for (ts::DType dt : {ts::kFloat32, ts::kFloat64, ts::kBFloat16, ts::kInt32})
    for (const Layout& la : layouts()) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " " + la.name);
      ts::Tensor a = la.apply(data({130, 150}, dt, 3)), b = data({150, 90}, dt, 4);
      EXPECT_TRUE(close_k(ts::mm(a, b), ref_matmul(a, b), 150));
      // Transposed operands read in place through BLAS's transpose flags.
      EXPECT_TRUE(close_k(ts::mm(b.t(), a.t()), ref_matmul(b.t(), a.t()), 150));
    }
}

TEST(Matmul, LargeProductsCutOverThreadsMatchAndIgnoreThreadCount) {
  // Products large enough for gemm_threaded to cut C over the threads (kernels/cpu/blas.h, Note [One
  // thread pool]): by rows (400x256 @ 256x260) and, in float32, by columns (40x1024 @ 1024x600), with
  // operands stored transposed and a column-major C (the GEMM slot); bitwise the same on 1, 2 and 3
  // threads, and close to the reference. The native kernel's property: oneDNN (bfloat16) off.
  ts::cpu::onednn::ScopedOnednn native(false);
  const int saved = ts::get_num_threads();
  for (ts::DType dt : {ts::kFloat32, ts::kFloat64, ts::kBFloat16})
    for (const ts::Shape& mkn : {ts::Shape{400, 256, 260}, ts::Shape{40, 1024, 600}}) {
      const int64_t m = mkn[0], k = mkn[1], n = mkn[2];
      SCOPED_TRACE(std::string(dtype_name(dt)) + " m" + std::to_string(m) + " k" + std::to_string(k) + " n" +
                   std::to_string(n));
      ts::Tensor a = data({m, k}, dt, 60), b = data({k, n}, dt, 61);
      ts::Tensor at = data({k, m}, dt, 62).t(), bt = data({n, k}, dt, 63).t();
      std::vector<ts::Tensor> first;
      for (int threads : {1, 2, 3}) {
        ts::set_num_threads(threads);
        ts::Tensor cm = ts::empty({1, n, m}, dt).transpose(1, 2);
        ts::gemm_kernel(cm.device(), ts::GemmParams{at.unsqueeze(0), b.unsqueeze(0), cm, 1, 0});
        std::vector<ts::Tensor> r = {ts::mm(a, b), ts::mm(at, bt), cm.select(0, 0)};
        if (first.empty()) {
          first = r;
          EXPECT_TRUE(close_k(r[0], ref_matmul(a, b), k));
          EXPECT_TRUE(close_k(r[1], ref_matmul(at, bt), k));
          EXPECT_TRUE(close_k(r[2], ref_matmul(at, b), k));
        } else {
          for (size_t i = 0; i < r.size(); ++i) EXPECT_TRUE(ts::equal(r[i], first[i])) << threads << " threads, " << i;
        }
      }
    }
  ts::set_num_threads(saved);
}

TEST(Matmul, MmColumnSlicesAndRowSteps) {
  ts::Tensor base = data({12, 10}, ts::kFloat32, 5);
  ts::Tensor a = base.slice(0, 1, 11, 2).slice(1, 2, 9);  // rows with a step: a BLAS leading dimension
  ts::Tensor b = base.slice(0, 0, 7).slice(1, 0, 10, 3);  // columns with a step: copied
  EXPECT_TRUE(close_k(ts::mm(a, b), ref_matmul(a, b), 7));
}

// ---- bmm and baddbmm ----------------------------------------------------------------------------
TEST(Matmul, BmmEveryDtypeAndLayout) {
  for (ts::DType dt : gemm_dtypes())
    for (const Layout& la : layouts())
      for (const Layout& lb : layouts()) {
        SCOPED_TRACE(std::string(dtype_name(dt)) + " a " + la.name + " b " + lb.name);
        ts::Tensor a = la.apply(data({3, 5, 6}, dt, 6)), b = lb.apply(data({3, 6, 4}, dt, 7));
        ts::Tensor c = ts::bmm(a, b);
        EXPECT_EQ(c.sizes(), (ts::Shape{3, 5, 4}));
        EXPECT_TRUE(close_k(c, ref_matmul(a, b), 6));
      }
}

TEST(Matmul, BmmLargeMatricesAndBroadcastBatch) {
  for (ts::DType dt : {ts::kFloat32, ts::kFloat64, ts::kFloat16}) {
    SCOPED_TRACE(dtype_name(dt));
    ts::Tensor a = data({2, 70, 80}, dt, 8), b = data({2, 80, 66}, dt, 9);
    EXPECT_TRUE(close_k(ts::bmm(a, b), ref_matmul(a, b), 80));
    // A batch stride of 0 (an expanded operand) is read, not materialized.
    ts::Tensor w = data({1, 6, 5}, dt, 10).expand({8, 6, 5});
    ts::Tensor x = data({8, 4, 6}, dt, 11);
    EXPECT_TRUE(close_k(ts::bmm(x, w), ref_matmul(x, w), 6));
    EXPECT_TRUE(close_k(ts::bmm(w.transpose(1, 2), x.transpose(1, 2)), ref_matmul(w.transpose(1, 2), x.transpose(1, 2)), 6));
  }
}

TEST(Matmul, BaddbmmBroadcastsInputAndScales) {
  for (ts::DType dt : {ts::kFloat32, ts::kFloat64, ts::kFloat16, ts::kBFloat16, ts::kInt64}) {
    SCOPED_TRACE(dtype_name(dt));
    ts::Tensor a = data({2, 3, 5}, dt, 12), b = data({2, 5, 4}, dt, 13);
    const bool fl = is_floating_point(dt);
    const ts::Scalar beta = fl ? ts::Scalar(0.5) : ts::Scalar(2), alpha = fl ? ts::Scalar(-1.5) : ts::Scalar(3);
    for (ts::Shape in_shape : {ts::Shape{2, 3, 4}, ts::Shape{4}, ts::Shape{3, 1}, ts::Shape{}}) {
      ts::Tensor input = data(in_shape, dt, 14);
      ts::Tensor r = ts::baddbmm(input, a, b, beta, alpha);
      EXPECT_EQ(r.sizes(), (ts::Shape{2, 3, 4}));
      EXPECT_TRUE(close_k(r, ref_add(input, ref_matmul(a, b), beta.to_double(), alpha.to_double()), 6));
    }
  }
}

// ---- matmul ---------------------------------------------------------------------------------------
TEST(Matmul, MatmulBroadcastingRules) {
  struct Case {
    ts::Shape a, b, out;
  };
  const std::vector<Case> cases = {
      {{3}, {3}, {}},                      // dot
      {{2, 3}, {3}, {2}},                  // matrix-vector
      {{3}, {3, 4}, {4}},                  // vector-matrix: the prepended dim is removed
      {{2, 3}, {3, 4}, {2, 4}},            // mm
      {{2, 5, 3}, {3}, {2, 5}},            // batched matrix-vector (folded)
      {{2, 5, 3}, {3, 4}, {2, 5, 4}},      // batched @ matrix (folded into one mm)
      {{3}, {2, 3, 4}, {2, 4}},            // vector @ batched
      {{5, 3}, {2, 3, 4}, {2, 5, 4}},      // matrix @ batched
      {{2, 5, 3}, {2, 3, 4}, {2, 5, 4}},   // bmm
      {{2, 1, 5, 3}, {4, 3, 2}, {2, 4, 5, 2}},  // broadcast batch dims
      {{1, 4, 5, 3}, {2, 1, 3, 2}, {2, 4, 5, 2}},
  };
  for (ts::DType dt : gemm_dtypes())
    for (const Case& c : cases)
      for (const Layout& l : layouts()) {
        SCOPED_TRACE(std::string(dtype_name(dt)) + " " + l.name + " a " + ::testing::PrintToString(c.a) + " b " +
                     ::testing::PrintToString(c.b));
        ts::Tensor a = l.apply(data(c.a, dt, 15)), b = data(c.b, dt, 16);
        ts::Tensor r = ts::matmul(a, b);
        EXPECT_EQ(r.sizes(), c.out);
        EXPECT_TRUE(close_k(r, ref_matmul(a, b), 3));
        ts::Tensor r2 = ts::matmul(a, l.apply(b));
        EXPECT_TRUE(close_k(r2, ref_matmul(a, b), 3));
      }
}

TEST(Matmul, MatmulNonFoldableBatchedInput) {
  // (B, m, k) transposed in its batch dims cannot fold into rows by a view; the batched path runs.
  ts::Tensor a = data({5, 2, 3}, ts::kFloat32, 17).transpose(0, 1);  // (2, 5, 3), strides (3, 6, 1)
  ts::Tensor b = data({3, 4}, ts::kFloat32, 18);
  ts::Tensor r = ts::matmul(a, b);
  EXPECT_EQ(r.sizes(), (ts::Shape{2, 5, 4}));
  EXPECT_TRUE(close_k(r, ref_matmul(a, b), 3));
  EXPECT_TRUE(close_k(a.matmul(b.slice(1, 0, 3)), ref_matmul(a, b.slice(1, 0, 3)), 3));
}

// ---- addmm ------------------------------------------------------------------------------------------
TEST(Matmul, AddmmEveryDtypeBroadcastInput) {
  for (ts::DType dt : gemm_dtypes())
    for (const Layout& l : layouts()) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " " + l.name);
      ts::Tensor a = l.apply(data({4, 6}, dt, 19)), b = l.apply(data({6, 3}, dt, 20));
      const bool fl = is_floating_point(dt);
      for (ts::Shape in_shape : {ts::Shape{4, 3}, ts::Shape{3}, ts::Shape{4, 1}, ts::Shape{}}) {
        ts::Tensor input = data(in_shape, dt, 21);
        EXPECT_TRUE(close_k(ts::addmm(input, a, b), ref_add(input, ref_matmul(a, b), 1, 1), 6));
        const ts::Scalar beta = fl ? ts::Scalar(0.25) : ts::Scalar(-1), alpha = fl ? ts::Scalar(2.0) : ts::Scalar(2);
        EXPECT_TRUE(close_k(ts::addmm(input, a, b, beta, alpha),
                            ref_add(input, ref_matmul(a, b), beta.to_double(), alpha.to_double()), 6));
      }
    }
}

TEST(Matmul, AddmmBetaZeroIgnoresNaN) {
  ts::Tensor input = ts::full({2, 3}, std::numeric_limits<double>::quiet_NaN());
  ts::Tensor a = data({2, 4}, ts::kFloat32, 22), b = data({4, 3}, ts::kFloat32, 23);
  ts::Tensor r = ts::addmm(input, a, b, 0, 1);
  EXPECT_TRUE(close_k(r, ref_matmul(a, b), 4));
  // beta != 0 propagates it.
  EXPECT_TRUE(std::isnan(ts::addmm(input, a, b, 1, 1).tolist<double>()[0]));
  ts::Tensor in3 = ts::full({2, 2, 3}, std::numeric_limits<double>::quiet_NaN(), ts::kFloat64);
  ts::Tensor a3 = data({2, 2, 4}, ts::kFloat64, 24), b3 = data({2, 4, 3}, ts::kFloat64, 25);
  EXPECT_TRUE(close_k(ts::baddbmm(in3, a3, b3, 0, 1), ref_matmul(a3, b3), 4));
}

TEST(Matmul, AddmmIntegerRejectsFloatFactors) {
  ts::Tensor a = ts::ones({2, 3}, ts::kInt32), b = ts::ones({3, 2}, ts::kInt32), in = ts::ones({2, 2}, ts::kInt32);
  EXPECT_THROW(ts::addmm(in, a, b, 2.5, 1), ts::ValueError);
  EXPECT_THROW(ts::addmm(in, a, b, 1, 0.5), ts::ValueError);
  EXPECT_EQ(ts::addmm(in, a, b, 2, 3).tolist<int32_t>(), (std::vector<int32_t>{11, 11, 11, 11}));
}

// ---- linear -----------------------------------------------------------------------------------------
TEST(Matmul, LinearAnyLeadingDimsWithAndWithoutBias) {
  for (ts::DType dt : gemm_dtypes())
    for (const Layout& l : layouts())
      for (ts::Shape xs : {ts::Shape{6}, ts::Shape{3, 6}, ts::Shape{2, 3, 6}, ts::Shape{2, 1, 3, 6}}) {
        SCOPED_TRACE(std::string(dtype_name(dt)) + " " + l.name + " " + ::testing::PrintToString(xs));
        ts::Tensor x = l.apply(data(xs, dt, 26)), w = l.apply(data({4, 6}, dt, 27)), bias = data({4}, dt, 28);
        ts::Tensor ref = ref_matmul(x, w.t());
        ts::Tensor y = ts::linear(x, w);
        ts::Shape want(xs.begin(), xs.end() - 1);
        want.push_back(4);
        EXPECT_EQ(y.sizes(), want);
        EXPECT_TRUE(close_k(y, ref, 6));
        EXPECT_TRUE(close_k(ts::linear(x, w, bias), ref_add(bias, ref, 1, 1), 6));
      }
}

// The bias reaches the gemm slot as a vector (ops/gemm_kernel.h): one of size 1 (broadcast), a sliced
// one (stride 2), a bias of the output's trailing shape (written in as the GEMM's input), and k == 0
// (the bias alone).
TEST(Matmul, LinearBiasShapesAndEmptySum) {
  for (ts::DType dt : {ts::kFloat32, ts::kFloat64, ts::kBFloat16, ts::kInt32}) {
    SCOPED_TRACE(dtype_name(dt));
    ts::Tensor x = data({2, 3, 6}, dt, 32), w = data({4, 6}, dt, 33);
    ts::Tensor ref = ref_matmul(x, w.t());
    ts::Tensor one = data({1}, dt, 34), sliced = data({8}, dt, 35).slice(0, 0, 8, 2), full = data({3, 4}, dt, 36);
    EXPECT_TRUE(close_k(ts::linear(x, w, one), ref_add(one, ref, 1, 1), 6));
    EXPECT_TRUE(close_k(ts::linear(x, w, sliced), ref_add(sliced, ref, 1, 1), 6));
    EXPECT_TRUE(close_k(ts::linear(x, w, full), ref_add(full, ref, 1, 1), 6));
    ts::Tensor x0 = ts::empty({5, 0}, dt), w0 = ts::empty({4, 0}, dt), b = data({4}, dt, 37);
    EXPECT_TRUE(close_k(ts::linear(x0, w0, b), b.unsqueeze(0).expand({5, 4}).to(ts::kFloat64), 1));
  }
}

// ---- dot and outer ------------------------------------------------------------------------------------
TEST(Matmul, DotAndOuter) {
  for (ts::DType dt : gemm_dtypes())
    for (const Layout& l : layouts()) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " " + l.name);
      ts::Tensor a = l.apply(data({9}, dt, 29)), b = l.apply(data({9}, dt, 30)), c = data({4}, dt, 31);
      ts::Tensor d = ts::dot(a, b);
      EXPECT_EQ(d.dim(), 0);
      EXPECT_TRUE(close_k(d, ref_matmul(a, b), 9));
      EXPECT_TRUE(close_k(a.dot(b), ref_matmul(a, b), 9));
      ts::Tensor o = ts::outer(a, c);
      EXPECT_EQ(o.sizes(), (ts::Shape{9, 4}));
      EXPECT_TRUE(close_k(o, ref_matmul(a.unsqueeze(1), c.unsqueeze(0)), 1));
      EXPECT_TRUE(close_k(a.outer(c), ref_matmul(a.unsqueeze(1), c.unsqueeze(0)), 1));
    }
  // outer promotes like a broadcasting multiply; bool is a logical and.
  ts::Tensor oi = ts::outer(ts::tensor(std::vector<int32_t>{1, 2}), ts::tensor({0.5, 1.5}));
  EXPECT_EQ(oi.dtype(), ts::kFloat32);
  EXPECT_EQ(oi.tolist<double>(), (std::vector<double>{0.5, 1.5, 1.0, 3.0}));
  ts::Tensor ob = ts::outer(ts::tensor(std::vector<bool>{true, false}), ts::tensor(std::vector<bool>{true, true}));
  EXPECT_EQ(ob.dtype(), ts::kBool);
  EXPECT_EQ(ob.tolist<bool>(), (std::vector<bool>{true, true, false, false}));
}

TEST(Matmul, IntegerProductsWrapLikeTorch) {
  // 100 * 2 + 50 * 1 = 250, which wraps to -6 in int8 (PyTorch's CPU integer mm wraps the same way).
  ts::Tensor a = ts::tensor(std::vector<int8_t>{100, 50}, {1, 2}), b = ts::tensor(std::vector<int8_t>{2, 1}, {2, 1});
  EXPECT_EQ(ts::mm(a, b).tolist<int8_t>(), (std::vector<int8_t>{-6}));
  ts::Tensor big = ts::tensor(std::vector<int64_t>{int64_t(1) << 40}, {1, 1});
  EXPECT_EQ(ts::mm(big, big).tolist<int64_t>(), (std::vector<int64_t>{0}));  // 2^80 mod 2^64
}

// ---- zero-size --------------------------------------------------------------------------------------
TEST(Matmul, ZeroSize) {
  for (ts::DType dt : gemm_dtypes()) {
    SCOPED_TRACE(dtype_name(dt));
    ts::Tensor z = ts::mm(data({2, 0}, dt, 1), data({0, 3}, dt, 2));  // k = 0: zeros
    EXPECT_EQ(z.sizes(), (ts::Shape{2, 3}));
    EXPECT_TRUE(all_close(z, ts::zeros({2, 3}, ts::kFloat64)));
    EXPECT_EQ(ts::mm(data({0, 4}, dt, 1), data({4, 3}, dt, 2)).sizes(), (ts::Shape{0, 3}));  // m = 0
    EXPECT_EQ(ts::mm(data({2, 4}, dt, 1), data({4, 0}, dt, 2)).sizes(), (ts::Shape{2, 0}));  // n = 0
    EXPECT_EQ(ts::bmm(data({0, 2, 4}, dt, 1), data({0, 4, 3}, dt, 2)).sizes(), (ts::Shape{0, 2, 3}));
    EXPECT_TRUE(all_close(ts::bmm(data({2, 2, 0}, dt, 1), data({2, 0, 3}, dt, 2)), ts::zeros({2, 2, 3}, ts::kFloat64)));
    EXPECT_TRUE(all_close(ts::dot(data({0}, dt, 1), data({0}, dt, 2)), ts::zeros({}, ts::kFloat64)));
    EXPECT_EQ(ts::matmul(data({0, 2, 3}, dt, 1), data({3, 4}, dt, 2)).sizes(), (ts::Shape{0, 2, 4}));
    EXPECT_EQ(ts::matmul(data({2, 0, 3}, dt, 1), data({2, 3, 4}, dt, 2)).sizes(), (ts::Shape{2, 0, 4}));
    EXPECT_EQ(ts::linear(data({0, 5}, dt, 1), data({3, 5}, dt, 2), data({3}, dt, 3)).sizes(), (ts::Shape{0, 3}));
    // k = 0 with an input: beta * input remains.
    ts::Tensor in = data({2, 3}, dt, 4);
    const ts::Scalar beta = is_floating_point(dt) ? ts::Scalar(0.5) : ts::Scalar(2);
    EXPECT_TRUE(all_close(ts::addmm(in, data({2, 0}, dt, 1), data({0, 3}, dt, 2), beta, 1),
                          ref_add(in, ts::zeros({2, 3}, ts::kFloat64), beta.to_double(), 1)));
    EXPECT_TRUE(all_close(ts::linear(data({2, 0}, dt, 1), data({3, 0}, dt, 2), data({3}, dt, 3)),
                          data({3}, dt, 3).to(ts::kFloat64).expand({2, 3})));
  }
}

// ---- meta --------------------------------------------------------------------------------------------
TEST(Matmul, MetaShapes) {
  auto meta = [](ts::Shape s, ts::DType dt = ts::kFloat32) { return ts::empty(s, ts::TensorOptions(dt, "meta")); };
  EXPECT_EQ(ts::mm(meta({2, 3}), meta({3, 5})).sizes(), (ts::Shape{2, 5}));
  ts::Tensor r = ts::matmul(meta({7, 1, 2, 3}, ts::kBFloat16), meta({4, 3, 5}, ts::kBFloat16));
  EXPECT_EQ(r.sizes(), (ts::Shape{7, 4, 2, 5}));
  EXPECT_TRUE(r.is_meta());
  EXPECT_EQ(r.dtype(), ts::kBFloat16);
  EXPECT_EQ(ts::matmul(meta({3}), meta({2, 3, 4})).sizes(), (ts::Shape{2, 4}));
  EXPECT_EQ(ts::bmm(meta({4, 2, 3}), meta({4, 3, 6})).sizes(), (ts::Shape{4, 2, 6}));
  EXPECT_EQ(ts::addmm(meta({5}), meta({2, 3}), meta({3, 5})).sizes(), (ts::Shape{2, 5}));
  EXPECT_EQ(ts::baddbmm(meta({1}), meta({4, 2, 3}), meta({4, 3, 5})).sizes(), (ts::Shape{4, 2, 5}));
  EXPECT_EQ(ts::linear(meta({8, 16, 32}), meta({64, 32}), meta({64})).sizes(), (ts::Shape{8, 16, 64}));
  EXPECT_EQ(ts::dot(meta({3}), meta({3})).sizes(), (ts::Shape{}));
  EXPECT_EQ(ts::outer(meta({3}), meta({4})).sizes(), (ts::Shape{3, 4}));
  EXPECT_THROW(ts::mm(meta({2, 3}), meta({4, 5})), ts::ShapeError);
}

// ---- errors ------------------------------------------------------------------------------------------
TEST(Matmul, ShapeErrors) {
  ts::Tensor a = ts::zeros({2, 3}), b = ts::zeros({4, 5});
  try {
    ts::mm(a, b);
    FAIL() << "expected ShapeError";
  } catch (const ts::ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("mm: mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)"),
              std::string::npos) << e.what();
  }
  EXPECT_THROW(ts::matmul(a, b), ts::ShapeError);
  EXPECT_THROW(ts::matmul(ts::zeros({2, 2, 3}), ts::zeros({3, 3, 4})), ts::ShapeError);  // batch 2 vs 3
  EXPECT_THROW(ts::matmul(ts::zeros({3}), ts::zeros({4})), ts::ShapeError);
  EXPECT_THROW(ts::matmul(ts::zeros({}), ts::zeros({3})), ts::ShapeError);
  EXPECT_THROW(ts::matmul(ts::zeros({2, 5, 3}), ts::zeros({4})), ts::ShapeError);
  // Wrong number of dims.
  EXPECT_THROW(ts::mm(ts::zeros({3}), ts::zeros({3, 2})), ts::ShapeError);
  EXPECT_THROW(ts::mm(ts::zeros({2, 2, 3}), ts::zeros({3, 2})), ts::ShapeError);
  EXPECT_THROW(ts::bmm(ts::zeros({2, 3}), ts::zeros({3, 2})), ts::ShapeError);
  EXPECT_THROW(ts::bmm(ts::zeros({2, 2, 3}), ts::zeros({3, 3, 2})), ts::ShapeError);  // batch mismatch
  EXPECT_THROW(ts::bmm(ts::zeros({2, 2, 3}), ts::zeros({2, 4, 2})), ts::ShapeError);
  EXPECT_THROW(ts::dot(ts::zeros({3}), ts::zeros({4})), ts::ShapeError);
  EXPECT_THROW(ts::dot(ts::zeros({3, 1}), ts::zeros({3})), ts::ShapeError);
  EXPECT_THROW(ts::outer(ts::zeros({3, 1}), ts::zeros({3})), ts::ShapeError);
  EXPECT_THROW(ts::addmm(ts::zeros({2, 3}), ts::zeros({2, 3}), ts::zeros({3, 5})), ts::ShapeError);
  EXPECT_THROW(ts::baddbmm(ts::zeros({3, 2, 5}), ts::zeros({2, 2, 3}), ts::zeros({2, 3, 5})), ts::ShapeError);
  EXPECT_THROW(ts::linear(ts::zeros({2, 3}), ts::zeros({4, 5})), ts::ShapeError);
  EXPECT_THROW(ts::linear(ts::zeros({2, 5}), ts::zeros({5})), ts::ShapeError);
  EXPECT_THROW(ts::linear(ts::zeros({2, 5}), ts::zeros({4, 5}), ts::zeros({3})), ts::ShapeError);
}

TEST(Matmul, DTypeErrors) {
  ts::Tensor f = ts::zeros({2, 3}), d = ts::zeros({3, 2}, ts::kFloat64);
  try {
    ts::mm(f, d);
    FAIL() << "expected DTypeError";
  } catch (const ts::DTypeError& e) {
    EXPECT_NE(std::string(e.what()).find("expected m1 and m2 to have the same dtype, but got: float32 != float64"),
              std::string::npos) << e.what();
  }
  EXPECT_THROW(ts::matmul(f, d), ts::DTypeError);
  EXPECT_THROW(ts::matmul(ts::zeros({2, 2, 3}), ts::zeros({3, 2}, ts::kFloat64)), ts::DTypeError);
  EXPECT_THROW(ts::bmm(ts::zeros({1, 2, 3}), ts::zeros({1, 3, 2}, ts::kInt64)), ts::DTypeError);
  EXPECT_THROW(ts::dot(ts::zeros({3}), ts::zeros({3}, ts::kFloat16)), ts::DTypeError);
  EXPECT_THROW(ts::addmm(ts::zeros({2, 2}, ts::kFloat64), f, f.t()), ts::DTypeError);
  EXPECT_THROW(ts::linear(f, ts::zeros({4, 3}), ts::zeros({4}, ts::kFloat64)), ts::DTypeError);
  // bool is not a matrix-product dtype (outer excepted: it is a logical and there).
  ts::Tensor bl = ts::ones({2, 2}, ts::kBool);
  EXPECT_THROW(ts::mm(bl, bl), ts::DTypeError);
  EXPECT_THROW(ts::matmul(bl, bl), ts::DTypeError);
  EXPECT_THROW(ts::mm(ts::empty({2, 2}, ts::TensorOptions(ts::kBool, "meta")),
                      ts::empty({2, 2}, ts::TensorOptions(ts::kBool, "meta"))), ts::DTypeError);
}

TEST(Matmul, DeviceErrors) {
  ts::Tensor c = ts::zeros({2, 3}), m = ts::empty({3, 2}, "meta");
  EXPECT_THROW(ts::mm(c, m), ts::DeviceError);
  EXPECT_THROW(ts::matmul(c, m), ts::DeviceError);
  EXPECT_THROW(ts::bmm(c.unsqueeze(0), m.unsqueeze(0)), ts::DeviceError);
  EXPECT_THROW(ts::addmm(ts::empty({2, 2}, "meta"), c, c.t()), ts::DeviceError);
  EXPECT_THROW(ts::dot(ts::zeros({3}), ts::empty({3}, "meta")), ts::DeviceError);
  EXPECT_THROW(ts::outer(ts::zeros({3}), ts::empty({3}, "meta")), ts::DeviceError);
  EXPECT_THROW(ts::linear(c, ts::empty({4, 3}, "meta")), ts::DeviceError);
}

// ---- the GEMM slot with output layouts the ops do not produce --------------------------------------
TEST(Matmul, GemmKernelTransposedAndStridedOutput) {
  for (ts::DType dt : {ts::kFloat32, ts::kFloat64, ts::kFloat16, ts::kInt32}) {
    SCOPED_TRACE(dtype_name(dt));
    ts::Tensor a = data({2, 4, 5}, dt, 40), b = data({2, 5, 3}, dt, 41), c0 = data({2, 4, 3}, dt, 42);
    const ts::Scalar beta = is_floating_point(dt) ? ts::Scalar(0.5) : ts::Scalar(2);
    ts::Tensor want = ref_add(c0, ref_matmul(a, b), beta.to_double(), 1);
    // Column-major C.
    ts::Tensor ct = c0.transpose(1, 2).contiguous().transpose(1, 2);
    ts::gemm_kernel(ct.device(), ts::GemmParams{a, b, ct, 1, beta});
    EXPECT_TRUE(close_k(ct, want, 5));
    // C with a step in its columns: neither layout, written through a temporary.
    ts::Tensor buf = ts::zeros({2, 4, 6}, dt);
    ts::Tensor cs = buf.slice(2, 0, 6, 2);
    cs.copy_(c0);
    ts::gemm_kernel(cs.device(), ts::GemmParams{a, b, cs, 1, beta});
    EXPECT_TRUE(close_k(cs, want, 5));
    EXPECT_TRUE(all_close(buf.slice(2, 1, 6, 2), ts::zeros({2, 4, 3}, ts::kFloat64)));  // gaps untouched
  }
}

TEST(Matmul, GemmKernelBetaZeroDoesNotReadOutput) {
  // BLAS must overwrite C when beta is 0, even where C holds NaN (fresh outputs hold garbage).
  for (ts::DType dt : {ts::kFloat32, ts::kFloat64, ts::kFloat16, ts::kBFloat16}) {
    SCOPED_TRACE(dtype_name(dt));
    ts::Tensor a = data({3, 4, 5}, dt, 43), b = data({3, 5, 2}, dt, 44);
    ts::Tensor c = ts::full({3, 4, 2}, std::numeric_limits<double>::quiet_NaN(), dt);
    ts::gemm_kernel(c.device(), ts::GemmParams{a, b, c, 1, 0});
    EXPECT_TRUE(close_k(c, ref_matmul(a, b), 5));
    ts::Tensor e = ts::full({3, 4, 2}, std::numeric_limits<double>::quiet_NaN(), dt);
    ts::gemm_kernel(e.device(), ts::GemmParams{a.slice(2, 0, 0), b.slice(1, 0, 0), e, 1, 0});  // k = 0
    EXPECT_TRUE(all_close(e, ts::zeros({3, 4, 2}, ts::kFloat64)));
  }
}
