// GPU softmax and log_softmax against the CPU kernel on the same inputs: every floating dtype; the
// last dim of sizes 1, 7, 32, 1000, 1024 (one warp per row), 1025, 4096, 4097, 10000 (one block per
// row, vector and element loads), 40000 (past the register path); inner > 1 (the softmax dim not
// last); many rows; NaN, -inf and +inf rows; empty and 0-dim inputs; the dtype argument; strided
// inputs (which the op makes contiguous).
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "common/test_util.h"

namespace ts = tessera;
using namespace tessera::testing;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// gpu (moved to the host) and cpu agree: same sizes and dtype, NaN where NaN, the same infinities,
// |gpu - cpu| <= atol + rtol * |cpu| elsewhere.
::testing::AssertionResult near(const ts::Tensor& gpu, const ts::Tensor& cpu, Tolerance tol) {
  if (!gpu.is_cuda()) return ::testing::AssertionFailure() << "the result is not on the GPU";
  if (gpu.dtype() != cpu.dtype())
    return ::testing::AssertionFailure() << "dtype " << ts::dtype_name(gpu.dtype()) << " vs " << ts::dtype_name(cpu.dtype());
  return all_close(gpu.cpu(), cpu, tol);
}

// float32 sums of up to 10^4 exponentials in a different order: a few more rounding units than the
// elementwise tolerance; the 16-bit floats round to within one unit of their own tolerance.
Tolerance softmax_tol(ts::DType dt) {
  Tolerance t = tolerance_for(dt);
  if (dt == ts::kFloat32) t.rtol *= 4;
  if (dt == ts::kFloat64) t.rtol = 1e-12;
  return t;
}

void check(const ts::Tensor& x_cpu, int64_t dim, const std::string& what) {
  SCOPED_TRACE(what + " " + ts::dtype_name(x_cpu.dtype()) + " dim " + std::to_string(dim));
  const ts::Tensor x_gpu = x_cpu.to("cuda");
  const Tolerance tol = softmax_tol(x_cpu.dtype());
  EXPECT_TRUE(near(ts::softmax(x_gpu, dim), ts::softmax(x_cpu, dim), tol));
  // log_softmax values reach tens: an absolute error of a few float32 units of log(sum) is fine.
  Tolerance ltol = tol;
  ltol.atol = std::max(ltol.atol, x_cpu.dtype() == ts::kFloat64 ? 1e-12 : 2e-5);
  EXPECT_TRUE(near(ts::log_softmax(x_gpu, dim), ts::log_softmax(x_cpu, dim), ltol));
}

}  // namespace

TEST(CudaSoftmax, LastDimEverySizeAndDtype) {
  TS_REQUIRE_GPU();
  for (ts::DType dt : float_dtypes())
    for (int64_t n : {1, 7, 32, 33, 1000, 1024, 1025, 4096, 4097, 10000, 40000}) {
      const int64_t rows = n >= 10000 ? 3 : 37;
      check(test_data({rows, n}, dt, static_cast<uint64_t>(n)) * 3, -1, "rows");
    }
  // Past the register capacity of float64 (16384 values per row) and of the others (32768).
  check(test_data({2, 20000}, ts::kFloat64, 5), 1, "long float64 rows");
}

TEST(CudaSoftmax, ManyRows) {
  TS_REQUIRE_GPU();
  for (ts::DType dt : {ts::kFloat32, ts::kBFloat16})
    for (int64_t n : {32, 100, 4096}) check(test_data({5000, n}, dt, 3), 1, "many rows");
  check(test_data({3, 70001}, ts::kFloat32, 4), 1, "few huge rows");
}

TEST(CudaSoftmax, InnerDimsGreaterThanOne) {
  TS_REQUIRE_GPU();
  for (ts::DType dt : float_dtypes()) {
    check(test_data({4, 1000, 3}, dt, 7), 1, "inner 3");
    check(test_data({2, 7, 33}, dt, 8), 1, "inner 33");
    check(test_data({1000, 64}, dt, 9), 0, "dim 0");
    check(test_data({3, 5, 2, 9}, dt, 10), 1, "4-D");
    check(test_data({2, 20000, 2}, dt, 11), 1, "long columns");
  }
}

TEST(CudaSoftmax, NaNAndInfinities) {
  TS_REQUIRE_GPU();
  // Rows: finite; one NaN; all -inf; one +inf; -inf among finite values; large values.
  const std::vector<double> v = {1, 2, 3, 4,  1, kNaN, 3, 4,  -kInf, -kInf, -kInf, -kInf,
                                 1, kInf, 3, 4,  -kInf, 0, 1, -kInf,  1000, 1001, 999, 998};
  for (ts::DType dt : float_dtypes()) {
    ts::Tensor x = ts::tensor(v, {6, 4}, ts::TensorOptions(ts::kFloat64)).to(dt);
    check(x, 1, "special rows");
    check(x.t().contiguous(), 0, "special columns");
  }
}

TEST(CudaSoftmax, EmptyScalarDtypeArgumentAndStridedInputs) {
  TS_REQUIRE_GPU();
  ts::Tensor e = ts::zeros({0, 5}).to("cuda");
  EXPECT_EQ(ts::softmax(e, 1).sizes(), ts::Shape({0, 5}));
  EXPECT_EQ(ts::log_softmax(e, 0).sizes(), ts::Shape({0, 5}));
  ts::Tensor s = ts::scalar_tensor(2.5);
  EXPECT_TRUE(near(ts::softmax(s.to("cuda"), 0), ts::softmax(s, 0), tolerance_for(ts::kFloat32)));
  EXPECT_TRUE(near(ts::log_softmax(s.to("cuda"), -1), ts::log_softmax(s, -1), tolerance_for(ts::kFloat32)));
  ts::Tensor h = test_data({9, 300}, ts::kFloat16, 12);
  EXPECT_TRUE(near(ts::softmax(h.to("cuda"), 1, ts::kFloat32), ts::softmax(h, 1, ts::kFloat32), softmax_tol(ts::kFloat32)));
  ts::Tensor t = test_data({300, 9}, ts::kFloat32, 13);
  EXPECT_TRUE(near(ts::log_softmax(t.to("cuda").t(), 1), ts::log_softmax(t.t(), 1), softmax_tol(ts::kFloat32)));
  EXPECT_TRUE(near(ts::softmax(t.to("cuda").slice(0, 0, std::nullopt, 3), 0), ts::softmax(t.slice(0, 0, std::nullopt, 3), 0),
                   softmax_tol(ts::kFloat32)));
  EXPECT_THROW(ts::softmax(ts::ones({3}, ts::kInt32).to("cuda"), 0), ts::DTypeError);
  EXPECT_THROW(ts::softmax(e, 2), ts::IndexError);
}
