// GPU cross-entropy (fused with log_softmax) against the CPU kernel on the same inputs: every floating
// dtype; C = 1, odd, a multiple of the vector width, 1000, 50257 (GPT-2's vocabulary); class weights,
// ignore_index, label smoothing, every reduction; K-dim and unbatched inputs; logits whose rows start
// off 16-byte boundaries; NaN and -inf logits; the gradient; an out-of-range target raising
// IndexError on the GPU; a tensor past 2^31 elements. Also embedding on the GPU: an out-of-range id
// raises IndexError (never a silent zero).
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "ops/loss_ops.h"

namespace ts = tessera;
namespace F = tessera::nn::functional;
using namespace tessera::testing;

namespace {

const ts::Device kCuda("cuda");

::testing::AssertionResult near(const ts::Tensor& gpu, const ts::Tensor& cpu, Tolerance tol) {
  if (!gpu.is_cuda()) return ::testing::AssertionFailure() << "the result is not on the GPU";
  if (gpu.dtype() != cpu.dtype())
    return ::testing::AssertionFailure() << "dtype " << ts::dtype_name(gpu.dtype()) << " vs " << ts::dtype_name(cpu.dtype());
  return all_close(gpu.cpu(), cpu, tol);
}

// Losses of up to 50257 exponentials summed in another order: float32 agrees to a few units of
// 1e-6 relative; the 16-bit results round once, to within their own tolerance.
Tolerance loss_tol(ts::DType dt) {
  if (dt == ts::kFloat64) return {1e-12, 1e-12};
  if (dt == ts::kFloat32) return {2e-5, 2e-5};
  Tolerance t = tolerance_for(dt);
  t.atol = 1e-3;
  return t;
}

// The gradient: g times softmax values (<= 1) minus the target's share; lse differs by float32
// rounding, so each probability by a few 1e-7 relative.
Tolerance grad_tol(ts::DType dt) {
  if (dt == ts::kFloat64) return {1e-12, 1e-13};
  if (dt == ts::kFloat32) return {1e-5, 1e-5};
  Tolerance t = tolerance_for(dt);
  t.atol = 1e-4;
  return t;
}

ts::Tensor targets(const ts::Shape& s, int64_t c, uint64_t seed, bool ignore_some) {
  ts::Tensor t = test_data(s, ts::kInt64, seed, 0, static_cast<double>(c)).reshape(s);
  if (ignore_some && t.numel() > 1) {
    ts::Tensor flat = t.flatten().clone();
    for (int64_t i = 0; i < flat.numel(); i += 3) flat[i].fill_(-100);
    t = flat.reshape(s);
  }
  return t;
}

// Forward (every reduction) and backward on the GPU against the CPU.
void check(const ts::Tensor& x, const ts::Tensor& t, const std::optional<ts::Tensor>& w, int64_t ignore, double ls,
           const std::string& what) {
  SCOPED_TRACE(what + " " + ts::dtype_name(x.dtype()) + " ls " + std::to_string(ls) + (w ? " weighted" : ""));
  const ts::Tensor xg = x.to(kCuda), tg = t.to(kCuda);
  const std::optional<ts::Tensor> wg = w ? std::optional<ts::Tensor>(w->to(kCuda)) : std::nullopt;
  for (const std::string r : {"none", "mean", "sum"})
    EXPECT_TRUE(near(F::cross_entropy(xg, tg, wg, ignore, r, ls), F::cross_entropy(x, t, w, ignore, r, ls),
                     loss_tol(x.dtype())))
        << r;
  // Per-element losses and lse in float32 (or float64), before any rounding to x's dtype.
  auto [lg, lseg] = ts::cross_entropy_loss_rows(xg, tg, wg ? *wg : ts::Tensor(), ignore, ls);
  auto [lc, lsec] = ts::cross_entropy_loss_rows(x, t, w ? *w : ts::Tensor(), ignore, ls);
  const Tolerance acc = x.dtype() == ts::kFloat64 ? Tolerance{1e-12, 1e-12} : Tolerance{2e-5, 2e-5};
  EXPECT_TRUE(near(lg, lc, acc));
  EXPECT_TRUE(near(lseg, lsec, acc));
  // The gradient (the fused backward), with a non-uniform incoming gradient.
  const ts::Tensor g = test_data(t.sizes(), ts::kFloat64, 99).reshape(t.sizes());
  ts::Tensor xc1 = x.detach().requires_grad_(), xg1 = xg.detach().requires_grad_();
  (F::cross_entropy(xc1, t, w, ignore, "none", ls).to(ts::kFloat64) * g).sum().backward();
  (F::cross_entropy(xg1, tg, wg, ignore, "none", ls).to(ts::kFloat64) * g.to(kCuda)).sum().backward();
  ASSERT_TRUE(xg1.grad().defined());
  EXPECT_TRUE(near(xg1.grad(), xc1.grad(), grad_tol(x.dtype())));
}

}  // namespace

TEST(CudaLoss, CrossEntropyMatchesCpuEveryDtypeAndSize) {
  TS_REQUIRE_GPU();
  for (ts::DType dt : float_dtypes())
    for (int64_t c : {1, 3, 7, 8, 9, 33, 1000, 1025, 50257}) {
      const int64_t rows = c >= 1000 ? 5 : 37;
      const ts::Tensor x = (test_data({rows, c}, ts::kFloat64, static_cast<uint64_t>(c)) * 4).to(dt);
      const ts::Tensor t = targets({rows}, c, 7, /*ignore_some=*/true);
      const ts::Tensor w = (test_data({c}, ts::kFloat64, 8).abs() + 0.5).to(dt);
      for (double ls : {0.0, 0.1}) {
        check(x, t, std::nullopt, -100, ls, "C " + std::to_string(c));
        check(x, t, w, -100, ls, "C " + std::to_string(c));
      }
    }
}

TEST(CudaLoss, CrossEntropyKDimUnbatchedAndIgnoreIndexInRange) {
  TS_REQUIRE_GPU();
  for (ts::DType dt : {ts::kFloat32, ts::kBFloat16, ts::kFloat64}) {
    const ts::Tensor w = (test_data({5}, ts::kFloat64, 9).abs() + 0.5).to(dt);
    check(test_data({3, 5, 4, 2}, dt, 10), targets({3, 4, 2}, 5, 11, true), w, -100, 0.2, "4-D");
    check(test_data({5}, dt, 12), targets({}, 5, 13, false), w, -100, 0.2, "unbatched");
    check(test_data({6, 5}, dt, 14), targets({6}, 5, 15, false), w, 2, 0.0, "ignore_index 2");
    check(test_data({6, 5}, dt, 16), targets({6}, 5, 17, false), std::nullopt, 0, 1.0, "ls 1");
  }
}

TEST(CudaLoss, CrossEntropyUnalignedRowsAndStridedInput) {
  TS_REQUIRE_GPU();
  for (ts::DType dt : float_dtypes()) {
    // Rows that start off 16-byte boundaries: a contiguous view at an odd element offset (the backward
    // then sees x and dx with different alignments).
    const int64_t rows = 6, c = 1001;
    const ts::Tensor big = test_data({rows * c + 3}, dt, 18);
    const ts::Tensor x = big.slice(0, 3, 3 + rows * c).reshape({rows, c});
    const ts::Tensor xg = big.to(kCuda).slice(0, 3, 3 + rows * c).reshape({rows, c});
    const ts::Tensor t = targets({rows}, c, 19, false);
    EXPECT_TRUE(near(F::cross_entropy(xg, t.to(kCuda), std::nullopt, -100, "none", 0.1),
                     F::cross_entropy(x, t, std::nullopt, -100, "none", 0.1), loss_tol(dt)));
    ts::Tensor xl = xg.detach().requires_grad_();
    F::cross_entropy(xl, t.to(kCuda), std::nullopt, -100, "sum", 0.1).backward();
    ts::Tensor xcl = x.detach().requires_grad_();
    F::cross_entropy(xcl, t, std::nullopt, -100, "sum", 0.1).backward();
    EXPECT_TRUE(near(xl.grad(), xcl.grad(), grad_tol(dt)));
    // A transposed input (made contiguous by the op).
    const ts::Tensor xt = test_data({c, rows}, dt, 20);
    check(xt.t(), t, std::nullopt, -100, 0.0, "transposed");
  }
}

TEST(CudaLoss, CrossEntropySpecialValuesAndAllIgnored) {
  TS_REQUIRE_GPU();
  const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
  const ts::Tensor x = ts::tensor(std::vector<double>{1, nan, 2, 0, -inf, 3, -inf, 5, 1, 1e4, 1e4 + 1, -1e4}).reshape({4, 3});
  const ts::Tensor t = ts::tensor(std::vector<int64_t>{0, 2, 1, 1});
  for (ts::DType dt : float_dtypes())
    for (double ls : {0.0, 0.3}) {
      SCOPED_TRACE(std::string(ts::dtype_name(dt)) + " ls " + std::to_string(ls));
      const ts::Tensor xd = x.to(dt);
      EXPECT_TRUE(near(F::cross_entropy(xd.to(kCuda), t.to(kCuda), std::nullopt, -100, "none", ls),
                       F::cross_entropy(xd, t, std::nullopt, -100, "none", ls), loss_tol(dt)));
    }
  const ts::Tensor all_ignored = ts::full({4}, -100, ts::kInt64).to(kCuda);
  const ts::Tensor xg = test_data({4, 3}, ts::kFloat32, 21).to(kCuda);
  EXPECT_TRUE(std::isnan(F::cross_entropy(xg, all_ignored).item<double>()));
  EXPECT_EQ(F::cross_entropy(xg, all_ignored, std::nullopt, -100, "sum").item<double>(), 0.0);
  // Empty batch.
  const ts::Tensor e = F::cross_entropy(ts::zeros({0, 3}, {ts::kFloat32, kCuda}), ts::zeros({0}, {ts::kInt64, kCuda}),
                                        std::nullopt, -100, "none");
  EXPECT_EQ(e.sizes(), ts::Shape({0}));
}

TEST(CudaLoss, CrossEntropyOutOfRangeTargetRaisesIndexError) {
  TS_REQUIRE_GPU();
  for (ts::DType dt : {ts::kFloat32, ts::kBFloat16}) {
    const ts::Tensor x = test_data({6, 50257}, dt, 22).to(kCuda);
    // The first bad row is reported, as on the CPU.
    std::string msg = message_of<ts::IndexError>([&] {
      F::cross_entropy(x, ts::tensor(std::vector<int64_t>{0, 1, 50257, 3, -2, 5}).to(kCuda));
      ts::cuda::synchronize();
    });
    EXPECT_NE(msg.find("cross_entropy: Target 50257 is out of bounds."), std::string::npos) << msg;
    msg = message_of<ts::IndexError>([&] { F::cross_entropy(x, ts::tensor(std::vector<int64_t>{0, 1, 2, 3, -2, 5}).to(kCuda)); ts::cuda::synchronize(); });
    EXPECT_NE(msg.find("cross_entropy: Target -2 is out of bounds."), std::string::npos) << msg;
    // ignore_index is not out of range; anything else negative is.
    EXPECT_NO_THROW({
      F::cross_entropy(x, ts::tensor(std::vector<int64_t>{0, -100, 2, 3, 4, 5}).to(kCuda));
      ts::cuda::synchronize();
    });
    EXPECT_THROW(
        {
          F::cross_entropy(x, ts::tensor(std::vector<int64_t>{0, -100, 2, 3, 4, 5}).to(kCuda), std::nullopt, -1);
          ts::cuda::synchronize();
        },
        ts::IndexError);
  }
  // The stream is usable afterwards.
  const ts::Tensor y = ts::ones({4}, {ts::kFloat32, kCuda}) * 2;
  EXPECT_EQ(y.sum().item<double>(), 8.0);
}

TEST(CudaLoss, CrossEntropyGpt2VocabularyBFloat16) {
  TS_REQUIRE_GPU();
  // (B*T, 50257) bf16 logits as GPT-2 has them; the rows compared on the CPU are a sample.
  const int64_t rows = 512, c = 50257;
  const ts::Tensor xg = (ts::randn({rows, c}, {ts::kFloat32, kCuda}) * 3).to(ts::kBFloat16);
  const ts::Tensor tg = ts::randint(0, c, {rows}, {ts::kInt64, kCuda});
  ts::Tensor xl = xg.detach().requires_grad_();
  ts::Tensor loss = F::cross_entropy(xl, tg);
  EXPECT_EQ(loss.dtype(), ts::kBFloat16);
  loss.backward();
  const ts::Tensor xs = xg.slice(0, 0, 64).cpu(), ts_ = tg.slice(0, 0, 64).cpu();
  auto [lg, lseg] = ts::cross_entropy_loss_rows(xg.slice(0, 0, 64), tg.slice(0, 0, 64), ts::Tensor(), -100, 0.0);
  auto [lc, lsec] = ts::cross_entropy_loss_rows(xs, ts_, ts::Tensor(), -100, 0.0);
  EXPECT_TRUE(near(lg, lc, {2e-5, 2e-5}));
  EXPECT_TRUE(near(lseg, lsec, {2e-5, 2e-5}));
  ts::Tensor xcl = xs.detach().requires_grad_();
  (F::cross_entropy(xcl, ts_, std::nullopt, -100, "sum") / static_cast<double>(rows)).backward();
  EXPECT_TRUE(near(xl.grad().slice(0, 0, 64), xcl.grad(), grad_tol(ts::kBFloat16)));
}

TEST(CudaLoss, CrossEntropyPastTwoToThe31Elements) {
  TS_REQUIRE_GPU();
  // 43000 x 50257 bf16 = 2.16e9 elements (4.3 GB; its gradient as much again): row offsets pass 2^31.
  const int64_t rows = 43000, c = 50257;
  ts::Tensor xg = ts::empty({rows, c}, {ts::kBFloat16, kCuda});
  xg.uniform_(-4, 4);
  const ts::Tensor tg = ts::randint(0, c, {rows}, {ts::kInt64, kCuda});
  ts::Tensor xl = xg.detach().requires_grad_();
  ts::Tensor loss = F::cross_entropy(xl, tg, std::nullopt, -100, "none");
  loss.sum().backward();
  // The last rows, on the CPU.
  const ts::Tensor xs = xg.slice(0, rows - 3, rows).cpu(), ts_ = tg.slice(0, rows - 3, rows).cpu();
  EXPECT_TRUE(near(loss.slice(0, rows - 3, rows), F::cross_entropy(xs, ts_, std::nullopt, -100, "none"),
                   loss_tol(ts::kBFloat16)));
  ts::Tensor xcl = xs.detach().requires_grad_();
  F::cross_entropy(xcl, ts_, std::nullopt, -100, "none").sum().backward();
  EXPECT_TRUE(near(xl.grad().slice(0, rows - 3, rows), xcl.grad(), grad_tol(ts::kBFloat16)));
}

// ---- embedding --------------------------------------------------------------------------------------

TEST(CudaLoss, EmbeddingOutOfRangeIdRaisesIndexError) {
  TS_REQUIRE_GPU();
  const ts::Tensor w = test_data({10, 4}, ts::kFloat32, 23).to(kCuda);
  const ts::Tensor ok = ts::tensor(std::vector<int64_t>{1, 9, 0}).to(kCuda);
  EXPECT_TRUE(near(F::embedding(ok, w), F::embedding(ok.cpu(), w.cpu()), tolerance_for(ts::kFloat32)));
  std::string msg = message_of<ts::IndexError>([&] { F::embedding(ts::tensor(std::vector<int64_t>{1, 10, 2}).to(kCuda), w); ts::cuda::synchronize(); });
  EXPECT_NE(msg.find("embedding: index 10 is out of bounds"), std::string::npos) << msg;
  EXPECT_THROW({ F::embedding(ts::tensor(std::vector<int64_t>{-1}).to(kCuda), w); ts::cuda::synchronize(); }, ts::IndexError);
  // The module, with a (B, T) batch of token ids.
  ts::nn::Embedding emb(10, 4);
  emb.to(kCuda);
  EXPECT_THROW({ emb(ts::tensor(std::vector<int64_t>{0, 3, 12, 1}).reshape({2, 2}).to(kCuda)); ts::cuda::synchronize(); }, ts::IndexError);
  EXPECT_EQ(emb(ts::tensor(std::vector<int64_t>{0, 3, 9, 1}).reshape({2, 2}).to(kCuda)).sizes(), ts::Shape({2, 2, 4}));
}
