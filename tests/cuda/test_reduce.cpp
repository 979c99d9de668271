// GPU reductions and scans against the CPU kernels on the same inputs: sum, mean, prod, amax/amin,
// max/min with indices, argmax/argmin, any/all, the norms, var/std/var_mean, logsumexp, cumsum and
// cumprod; every dtype each op takes; contiguous, transposed, step-sliced and broadcast inputs; the
// reduced dims last, first, in the middle, several at once and all, with and without keepdim; empty
// and 0-dim inputs; NaN and infinities; long rows that split over blocks and many short ones; tensors
// with more dims than the GPU offset calculator holds; and tensors past 2^31 elements (64-bit
// indexing). Floating sums may differ from the CPU's by reassociation: they are compared within a
// bound proportional to the sum of |x| that each result folds (see near()).
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "common/test_util.h"

namespace ts = tessera;
using namespace tessera::testing;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// The same values on both devices, in the same layout.
struct Pair {
  ts::Tensor cpu, gpu;
};

const std::vector<std::string> kLayouts = {"contiguous", "transposed", "sliced", "broadcast"};

// Makes the CPU values of a given shape (the layout's buffer, before any view is taken).
using Gen = std::function<ts::Tensor(const ts::Shape&)>;

// test_data in dtype dt; `shift` and `scale` map the values (floating dtypes only): x * scale + shift.
Gen data(ts::DType dt, uint64_t seed, double lo = -5, double hi = 5, double scale = 1, double shift = 0) {
  return [=](const ts::Shape& s) {
    ts::Tensor t = test_data(s, dt, seed, lo, hi);
    if (ts::is_floating_point(dt) && (scale != 1 || shift != 0)) t = t * scale + shift;
    return t;
  };
}

// `layout`: contiguous; transposed (the last two dims swapped in memory); sliced (every other element
// of a buffer twice as long in the last dim); broadcast (dim 0 expanded from size 1, stride 0).
Pair make_pair(const ts::Shape& sizes, const std::string& layout, const Gen& gen) {
  if (layout == "transposed" && sizes.size() >= 2) {
    ts::Shape s = sizes;
    std::swap(s[s.size() - 1], s[s.size() - 2]);
    ts::Tensor base = gen(s);
    return {base.transpose(-1, -2), base.to("cuda").transpose(-1, -2)};
  }
  if (layout == "sliced" && !sizes.empty()) {
    ts::Shape s = sizes;
    s.back() *= 2;
    ts::Tensor base = gen(s);
    return {base.slice(-1, 0, std::nullopt, 2), base.to("cuda").slice(-1, 0, std::nullopt, 2)};
  }
  if (layout == "broadcast" && !sizes.empty()) {
    ts::Shape s = sizes;
    s[0] = 1;
    ts::Tensor base = gen(s);
    return {base.expand(sizes), base.to("cuda").expand(sizes)};
  }
  ts::Tensor c = gen(sizes);
  return {c, c.to("cuda")};
}

Pair make_pair(const ts::Shape& sizes, ts::DType dt, const std::string& layout, uint64_t seed = 1, double lo = -5,
               double hi = 5) {
  return make_pair(sizes, layout, data(dt, seed, lo, hi));
}

// Exact values (NaN and infinities allowed) in dtype dt on both devices.
Pair from_values(const std::vector<double>& v, const ts::Shape& sizes, ts::DType dt) {
  ts::Tensor c = ts::tensor(v, {static_cast<int64_t>(v.size())}, ts::TensorOptions(ts::kFloat64)).to(dt).reshape(sizes);
  return {c, c.to("cuda")};
}

// The rounding unit of the type a dtype accumulates in on the GPU (0 for exact integer math).
double acc_eps(ts::DType dt) {
  if (dt == ts::kFloat64) return 2.3e-16;
  if (ts::is_floating_point(dt)) return 1.2e-7;
  return 0;
}

// gpu (moved to the host) and cpu agree elementwise: same sizes and dtype, NaN where NaN, the same
// infinities, and |gpu - cpu| <= atol + rtol * |cpu| + slack[i] (slack: a tensor of cpu's sizes, or
// undefined).
::testing::AssertionResult near(const ts::Tensor& gpu, const ts::Tensor& cpu, double rtol, double atol,
                                const ts::Tensor& slack = ts::Tensor()) {
  if (!gpu.is_cuda()) return ::testing::AssertionFailure() << "the result is not on the GPU";
  if (gpu.dtype() != cpu.dtype())
    return ::testing::AssertionFailure() << "dtype " << ts::dtype_name(gpu.dtype()) << " vs " << ts::dtype_name(cpu.dtype());
  if (gpu.sizes() != cpu.sizes())
    return ::testing::AssertionFailure() << "sizes differ: dims " << gpu.dim() << " vs " << cpu.dim() << ", numel "
                                         << gpu.numel() << " vs " << cpu.numel();
  const std::vector<double> a = gpu.cpu().tolist<double>(), e = cpu.tolist<double>();
  const std::vector<double> s = slack.defined() ? slack.tolist<double>() : std::vector<double>(e.size(), 0.0);
  int bad = 0;
  std::string msg;
  for (size_t i = 0; i < a.size(); ++i) {
    bool ok;
    if (std::isnan(e[i])) ok = std::isnan(a[i]);
    else if (std::isinf(e[i])) ok = a[i] == e[i];
    else ok = std::fabs(a[i] - e[i]) <= atol + rtol * std::fabs(e[i]) + s[i];
    if (!ok && bad++ < 5)
      msg += "\n  at " + std::to_string(i) + ": gpu " + std::to_string(a[i]) + " cpu " + std::to_string(e[i]);
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << a.size() << " differ (" << ts::dtype_name(cpu.dtype())
                                       << ")" << msg;
}

::testing::AssertionResult exact(const ts::Tensor& gpu, const ts::Tensor& cpu) { return near(gpu, cpu, 0, 0); }

// Within the dtype's tolerance plus 4 rounding units of the accumulator times the sum of |x| folded
// into each result (a bound on the reassociation error of a sum).
::testing::AssertionResult sum_near(const ts::Tensor& gpu, const ts::Tensor& cpu, const ts::Tensor& x_cpu,
                                    const std::vector<int64_t>& dims, bool keepdim, double scale = 1) {
  const double eps = acc_eps(x_cpu.dtype());
  const Tolerance tol = tolerance_for(cpu.dtype());
  ts::Tensor slack = ts::sum(x_cpu.to(ts::kFloat64).abs(), dims, keepdim) * (4 * eps * scale);
  return near(gpu, cpu, tol.rtol, tol.atol, eps == 0 ? ts::Tensor() : slack.to(ts::kFloat64));
}

std::string what(ts::DType dt, const std::string& layout, const std::vector<int64_t>& dims, bool keepdim) {
  std::string s = std::string(ts::dtype_name(dt)) + " " + layout + " dims {";
  for (int64_t d : dims) s += std::to_string(d) + ",";
  return s + "} keepdim " + std::to_string(keepdim);
}

const std::vector<std::vector<int64_t>> kDims = {{}, {-1}, {0}, {1}, {0, 2}, {2, 0, 1}};
// The last dim of 128 lets column reductions use vector loads; 129 makes them go element by element.
const std::vector<ts::Shape> kShapes = {{6, 37, 129}, {5, 33, 128}};

}  // namespace

TEST(CudaReduce, SumAndMeanEveryDtypeLayoutAndDims) {
  TS_REQUIRE_GPU();
  for (const ts::Shape& shape : kShapes)
    for (ts::DType dt : all_dtypes())
      for (const std::string& layout : kLayouts) {
        Pair x = make_pair(shape, dt, layout, 3);
        for (const auto& dims : kDims)
          for (bool keepdim : {false, true}) {
            SCOPED_TRACE(what(dt, layout, dims, keepdim));
            EXPECT_TRUE(sum_near(ts::sum(x.gpu, dims, keepdim), ts::sum(x.cpu, dims, keepdim), x.cpu, dims, keepdim));
            if (ts::is_floating_point(dt)) {
              const int64_t n = x.cpu.numel() / std::max<int64_t>(1, ts::sum(x.cpu, dims, keepdim).numel());
              EXPECT_TRUE(sum_near(ts::mean(x.gpu, dims, keepdim), ts::mean(x.cpu, dims, keepdim), x.cpu, dims, keepdim,
                                   1.0 / static_cast<double>(n)));
            }
          }
      }
}

TEST(CudaReduce, ProdEveryDtypeLayoutAndDims) {
  TS_REQUIRE_GPU();
  const ts::Shape shape{5, 6, 7};
  for (ts::DType dt : all_dtypes())
    for (const std::string& layout : kLayouts) {
      // Floats near 1, so that 210 factors neither vanish nor overflow.
      Pair x = make_pair(shape, layout, data(dt, 5, -3, 4, 0.1, 1));
      for (const auto& dims : kDims)
        for (bool keepdim : {false, true}) {
          SCOPED_TRACE(what(dt, layout, dims, keepdim));
          ts::Tensor c = ts::prod(x.cpu, dims, keepdim), g = ts::prod(x.gpu, dims, keepdim);
          if (ts::is_floating_point(dt)) EXPECT_TRUE(near(g, c, tolerance_for(dt).rtol + 420 * acc_eps(dt), 1e-6));
          else EXPECT_TRUE(exact(g, c));  // integers wrap identically
        }
    }
}

TEST(CudaReduce, AmaxAminMaxMinArgmaxArgminEveryDtype) {
  TS_REQUIRE_GPU();
  for (const ts::Shape& shape : kShapes)
    for (ts::DType dt : all_dtypes())
      for (const std::string& layout : kLayouts) {
        // A narrow integer range makes ties common: the first index must win.
        Pair x = make_pair(shape, dt, layout, 7, -2, 3);
        for (const auto& dims : kDims)
          for (bool keepdim : {false, true}) {
            SCOPED_TRACE(what(dt, layout, dims, keepdim));
            EXPECT_TRUE(exact(ts::amax(x.gpu, dims, keepdim), ts::amax(x.cpu, dims, keepdim)));
            EXPECT_TRUE(exact(ts::amin(x.gpu, dims, keepdim), ts::amin(x.cpu, dims, keepdim)));
          }
        for (int64_t d = -3; d < 3; ++d)
          for (bool keepdim : {false, true}) {
            SCOPED_TRACE(what(dt, layout, {d}, keepdim));
            auto [gv, gi] = ts::max(x.gpu, d, keepdim);
            auto [cv, ci] = ts::max(x.cpu, d, keepdim);
            EXPECT_TRUE(exact(gv, cv));
            EXPECT_TRUE(exact(gi, ci));
            auto [gv2, gi2] = ts::min(x.gpu, d, keepdim);
            auto [cv2, ci2] = ts::min(x.cpu, d, keepdim);
            EXPECT_TRUE(exact(gv2, cv2));
            EXPECT_TRUE(exact(gi2, ci2));
            if (dt != ts::kBool) {
              EXPECT_TRUE(exact(ts::argmax(x.gpu, d, keepdim), ts::argmax(x.cpu, d, keepdim)));
              EXPECT_TRUE(exact(ts::argmin(x.gpu, d, keepdim), ts::argmin(x.cpu, d, keepdim)));
            }
          }
        EXPECT_TRUE(exact(ts::max(x.gpu), ts::max(x.cpu)));
        EXPECT_TRUE(exact(ts::min(x.gpu), ts::min(x.cpu)));
        if (dt != ts::kBool) {
          EXPECT_TRUE(exact(ts::argmax(x.gpu), ts::argmax(x.cpu)));
          EXPECT_TRUE(exact(ts::argmin(x.gpu, std::nullopt, true), ts::argmin(x.cpu, std::nullopt, true)));
        }
      }
}

TEST(CudaReduce, NaNPropagatesAndTheFirstNaNWins) {
  TS_REQUIRE_GPU();
  // Rows: no NaN; NaN in the middle; two NaNs; all NaN; NaN first; ties of the maximum.
  const std::vector<double> v = {1, 5, 3, 5,  2, kNaN, 7, 1,  kNaN, 2, kNaN, 9,  kNaN, kNaN, kNaN, kNaN,
                                 kNaN, 1, 2, 3,  -kInf, 4, 4, kInf};
  for (ts::DType dt : float_dtypes()) {
    SCOPED_TRACE(ts::dtype_name(dt));
    Pair x = from_values(v, {6, 4}, dt);
    for (int64_t d : {0, 1}) {
      EXPECT_TRUE(exact(ts::amax(x.gpu, d), ts::amax(x.cpu, d)));
      EXPECT_TRUE(exact(ts::amin(x.gpu, d), ts::amin(x.cpu, d)));
      auto [gv, gi] = ts::max(x.gpu, d);
      auto [cv, ci] = ts::max(x.cpu, d);
      EXPECT_TRUE(exact(gv, cv));
      EXPECT_TRUE(exact(gi, ci));
      EXPECT_TRUE(exact(ts::argmin(x.gpu, d), ts::argmin(x.cpu, d)));
      EXPECT_TRUE(exact(ts::any(x.gpu, d), ts::any(x.cpu, d)));
      EXPECT_TRUE(exact(ts::all(x.gpu, d), ts::all(x.cpu, d)));
      for (double p : {1.0, 2.0, kInf, -kInf, 0.0})
        EXPECT_TRUE(near(ts::norm(x.gpu, p, d), ts::norm(x.cpu, p, d), tolerance_for(dt).rtol, tolerance_for(dt).atol));
    }
    EXPECT_TRUE(exact(ts::argmax(x.gpu), ts::argmax(x.cpu)));
    // Known answers, not only agreement: the first NaN of row 2 is at index 0, of row 1 at index 1.
    auto [gv, gi] = ts::max(x.gpu, 1);
    const std::vector<int64_t> idx = gi.cpu().tolist<int64_t>();
    EXPECT_EQ(idx[0], 1);  // 5 at 1 and 3: the first
    EXPECT_EQ(idx[1], 1);
    EXPECT_EQ(idx[2], 0);
    EXPECT_EQ(idx[3], 0);
    EXPECT_EQ(idx[5], 3);
  }
}

TEST(CudaReduce, AnyAllEveryDtypeAndLayout) {
  TS_REQUIRE_GPU();
  for (ts::DType dt : all_dtypes())
    for (const std::string& layout : kLayouts) {
      // 0/1 values with a reduced dim of 3: both outcomes occur for any and for all.
      Pair x = make_pair({40, 3, 5}, layout, [dt](const ts::Shape& s) { return test_data(s, ts::kInt64, 11, 0, 2).to(dt); });
      for (const auto& dims : kDims)
        for (bool keepdim : {false, true}) {
          SCOPED_TRACE(what(dt, layout, dims, keepdim));
          EXPECT_TRUE(exact(ts::any(x.gpu, dims, keepdim), ts::any(x.cpu, dims, keepdim)));
          EXPECT_TRUE(exact(ts::all(x.gpu, dims, keepdim), ts::all(x.cpu, dims, keepdim)));
        }
    }
}

TEST(CudaReduce, NormsEveryOrder) {
  TS_REQUIRE_GPU();
  for (ts::DType dt : float_dtypes())
    for (const std::string& layout : kLayouts) {
      Pair x = make_pair({6, 37, 128}, dt, layout, 13);
      for (const auto& dims : kDims)
        for (double p : {0.0, 1.0, 2.0, 3.0, 0.5, kInf, -kInf}) {
          SCOPED_TRACE(what(dt, layout, dims, false) + " p " + std::to_string(p));
          ts::Tensor c = ts::norm(x.cpu, p, ts::Dims(dims)), g = ts::norm(x.gpu, p, ts::Dims(dims));
          // Sums of non-negative terms: relative error of a few rounding units of the accumulator.
          const double rtol = 2 * tolerance_for(dt).rtol + 64 * acc_eps(dt);
          EXPECT_TRUE(near(g, c, rtol, tolerance_for(dt).atol));
        }
      EXPECT_TRUE(near(ts::norm(x.gpu, "fro", ts::Dims({0, 1}), true), ts::norm(x.cpu, "fro", ts::Dims({0, 1}), true),
                       2 * tolerance_for(dt).rtol + 64 * acc_eps(dt), tolerance_for(dt).atol));
    }
}

TEST(CudaReduce, VarStdVarMean) {
  TS_REQUIRE_GPU();
  for (ts::DType dt : float_dtypes())
    for (const std::string& layout : kLayouts) {
      Pair x = make_pair({6, 37, 129}, layout, data(dt, 17, -5, 5, 1, 3));  // a mean away from 0
      const double rtol = dt == ts::kFloat64 ? 1e-10 : 2 * tolerance_for(dt).rtol;
      for (const auto& dims : kDims)
        for (double corr : {0.0, 1.0, 2.5}) {
          SCOPED_TRACE(what(dt, layout, dims, true) + " correction " + std::to_string(corr));
          EXPECT_TRUE(near(ts::var(x.gpu, dims, corr, true), ts::var(x.cpu, dims, corr, true), rtol, tolerance_for(dt).atol));
          EXPECT_TRUE(near(ts::std(x.gpu, dims, corr), ts::std(x.cpu, dims, corr), rtol, tolerance_for(dt).atol));
          auto [gv, gm] = ts::var_mean(x.gpu, dims, corr);
          auto [cv, cm] = ts::var_mean(x.cpu, dims, corr);
          EXPECT_TRUE(near(gv, cv, rtol, tolerance_for(dt).atol));
          EXPECT_TRUE(near(gm, cm, rtol, tolerance_for(dt).atol));
        }
    }
  // One element with correction 1: 0/0. Constant rows: exactly 0. NaN and infinities: NaN.
  Pair s = from_values({1, 2, 2, 2, 2, kNaN, 1, kInf, 1, kInf, -kInf, 1}, {4, 3}, ts::kFloat32);
  EXPECT_TRUE(exact(ts::var(s.gpu, 1), ts::var(s.cpu, 1)));
  EXPECT_TRUE(exact(ts::var(s.gpu.narrow(1, 0, 1), 1), ts::var(s.cpu.narrow(1, 0, 1), 1)));
  EXPECT_EQ(ts::var(s.gpu.narrow(0, 1, 1).narrow(1, 0, 2), 1).cpu().item<double>(), 0.0);
}

TEST(CudaReduce, LogSumExpStableWithInfinitiesAndNaN) {
  TS_REQUIRE_GPU();
  for (ts::DType dt : float_dtypes())
    for (const std::string& layout : kLayouts) {
      Pair x = make_pair({6, 37, 129}, dt, layout, 19);
      for (const auto& dims : kDims) {
        if (dims.empty()) continue;  // logsumexp takes explicit dims
        SCOPED_TRACE(what(dt, layout, dims, false));
        EXPECT_TRUE(near(ts::logsumexp(x.gpu, dims), ts::logsumexp(x.cpu, dims), 2 * tolerance_for(dt).rtol,
                         tolerance_for(dt).atol));
      }
    }
  const std::vector<double> v = {1000, 1001, 999,  -kInf, -kInf, -kInf,  -kInf, 2, 3,
                                 kInf, 1, 2,       kNaN, 1, kInf,        -1000, -1001, -1002};
  for (ts::DType dt : {ts::kFloat32, ts::kFloat64}) {
    Pair x = from_values(v, {6, 3}, dt);
    EXPECT_TRUE(near(ts::logsumexp(x.gpu, 1), ts::logsumexp(x.cpu, 1), 2 * tolerance_for(dt).rtol, 1e-5));
  }
}

TEST(CudaReduce, IntegerSumsWidenAndWrapLikeTheCpu) {
  TS_REQUIRE_GPU();
  const int64_t big = std::numeric_limits<int64_t>::max();
  ts::Tensor w = ts::tensor(std::vector<int64_t>{big, 1, 5, big, big, 3}, {2, 3});
  for (int64_t d : {0, 1}) {
    EXPECT_TRUE(exact(ts::sum(w.to("cuda"), d), ts::sum(w, d)));
    EXPECT_TRUE(exact(ts::prod(w.to("cuda"), d), ts::prod(w, d)));
  }
  Pair u = make_pair({300, 70}, ts::kUInt8, "contiguous", 23, 200, 256);  // sums far past 255
  EXPECT_TRUE(exact(ts::sum(u.gpu, 0), ts::sum(u.cpu, 0)));
  EXPECT_TRUE(exact(ts::sum(u.gpu), ts::sum(u.cpu)));
  EXPECT_EQ(ts::sum(u.gpu).dtype(), ts::kInt64);
  // An explicit dtype casts first, then reduces (and wraps) in it.
  Pair i8 = make_pair({70, 300}, ts::kInt8, "contiguous", 29, 100, 128);
  EXPECT_TRUE(exact(ts::sum(i8.gpu, -1, false, ts::kInt32), ts::sum(i8.cpu, -1, false, ts::kInt32)));
  EXPECT_TRUE(exact(ts::sum(i8.gpu, -1, false, ts::kInt8), ts::sum(i8.cpu, -1, false, ts::kInt8)));
  EXPECT_TRUE(near(ts::mean(i8.gpu, 0, false, ts::kFloat32), ts::mean(i8.cpu, 0, false, ts::kFloat32), 1e-6, 1e-5));
  Pair b = make_pair({33, 65}, ts::kBool, "transposed", 31);
  EXPECT_TRUE(exact(ts::sum(b.gpu, 0), ts::sum(b.cpu, 0)));
  EXPECT_TRUE(exact(ts::prod(b.gpu, 1), ts::prod(b.cpu, 1)));
}

TEST(CudaReduce, LongRowsSplitOverBlocksAndManyShortRows) {
  TS_REQUIRE_GPU();
  struct Shape2 {
    ts::Shape sizes;
    int64_t dim;
  };
  // Few long rows (split over grid.y), few long columns narrow and wide (split; element-wise and
  // vector loads), many short rows and columns, one very long 1-D reduction.
  const std::vector<Shape2> shapes = {{{3, 70001}, 1}, {{70001, 3}, 0}, {{70001, 8}, 0}, {{16384, 1000}, 1},
                                      {{16384, 1000}, 0}, {{1000, 3}, 1}, {{(1 << 22) + 3}, 0}};
  for (const Shape2& s : shapes)
    for (ts::DType dt : {ts::kFloat32, ts::kBFloat16, ts::kFloat64, ts::kInt32}) {
      SCOPED_TRACE(std::string(ts::dtype_name(dt)) + " " + std::to_string(s.sizes[0]) + " dim " + std::to_string(s.dim));
      Pair x = make_pair(s.sizes, dt, "contiguous", 37);
      EXPECT_TRUE(sum_near(ts::sum(x.gpu, s.dim), ts::sum(x.cpu, s.dim), x.cpu, {s.dim}, false));
      EXPECT_TRUE(exact(ts::amax(x.gpu, s.dim), ts::amax(x.cpu, s.dim)));
      EXPECT_TRUE(exact(ts::argmin(x.gpu, s.dim), ts::argmin(x.cpu, s.dim)));
      if (ts::is_floating_point(dt)) {
        const double rtol = dt == ts::kFloat64 ? 1e-10 : 2 * tolerance_for(dt).rtol;
        EXPECT_TRUE(near(ts::var(x.gpu, s.dim), ts::var(x.cpu, s.dim), rtol, tolerance_for(dt).atol));
        EXPECT_TRUE(near(ts::logsumexp(x.gpu, s.dim), ts::logsumexp(x.cpu, s.dim), 2 * tolerance_for(dt).rtol,
                         tolerance_for(dt).atol));
        EXPECT_TRUE(near(ts::norm(x.gpu, 2, s.dim), ts::norm(x.cpu, 2, s.dim), 2 * tolerance_for(dt).rtol + 64 * acc_eps(dt),
                         tolerance_for(dt).atol));
      }
    }
  // The maximum twice, late in a long row: the first of the two.
  std::vector<double> v(300001, 0.0);
  v[250000] = v[290000] = 5;
  Pair x = from_values(v, {300001}, ts::kFloat32);
  EXPECT_EQ(ts::argmax(x.gpu).cpu().item<int64_t>(), 250000);
}

TEST(CudaReduce, ShortRowsStartingOffA16ByteBoundary) {
  TS_REQUIRE_GPU();
  // Rows shorter than a 16-byte vector's worth of elements reduced by few threads each: row o starts
  // o * n elements in, so most rows open with an unaligned head of up to 15 elements, all of which count.
  for (ts::DType dt : all_dtypes())
    for (int64_t n : {2, 3, 5, 6, 7, 9, 15, 17, 31, 37}) {
      SCOPED_TRACE(std::string(ts::dtype_name(dt)) + " rows of " + std::to_string(n));
      Pair x = make_pair({9, n}, "contiguous", data(dt, 41, -3, 4, 0.1, 1));
      EXPECT_TRUE(sum_near(ts::sum(x.gpu, 1), ts::sum(x.cpu, 1), x.cpu, {1}, false));
      ts::Tensor c = ts::prod(x.cpu, 1), g = ts::prod(x.gpu, 1);
      if (ts::is_floating_point(dt)) EXPECT_TRUE(near(g, c, tolerance_for(dt).rtol + 80 * acc_eps(dt), 1e-6));
      else EXPECT_TRUE(exact(g, c));
      EXPECT_TRUE(exact(ts::amax(x.gpu, 1), ts::amax(x.cpu, 1)));
      EXPECT_TRUE(exact(ts::amin(x.gpu, 1), ts::amin(x.cpu, 1)));
      EXPECT_TRUE(exact(ts::any(x.gpu, 1), ts::any(x.cpu, 1)));
      EXPECT_TRUE(exact(ts::all(x.gpu, 1), ts::all(x.cpu, 1)));
    }
}

TEST(CudaReduce, EmptyAndZeroDimInputs) {
  TS_REQUIRE_GPU();
  Pair e = make_pair({0, 5}, ts::kFloat32, "contiguous");
  for (int64_t d : {0, 1}) {
    SCOPED_TRACE(d);
    EXPECT_TRUE(exact(ts::sum(e.gpu, d), ts::sum(e.cpu, d)));  // zeros / empty
    EXPECT_TRUE(exact(ts::prod(e.gpu, d), ts::prod(e.cpu, d)));
    EXPECT_TRUE(exact(ts::mean(e.gpu, d), ts::mean(e.cpu, d)));  // NaN
    EXPECT_TRUE(exact(ts::any(e.gpu, d), ts::any(e.cpu, d)));
    EXPECT_TRUE(exact(ts::all(e.gpu, d), ts::all(e.cpu, d)));
    for (double p : {0.0, 1.0, 2.0, 3.0, kInf, -kInf}) EXPECT_TRUE(exact(ts::norm(e.gpu, p, d), ts::norm(e.cpu, p, d)));
    EXPECT_TRUE(exact(ts::var(e.gpu, d), ts::var(e.cpu, d)));
    EXPECT_TRUE(exact(ts::logsumexp(e.gpu, d), ts::logsumexp(e.cpu, d)));
  }
  EXPECT_TRUE(exact(ts::sum(e.gpu), ts::sum(e.cpu)));
  EXPECT_EQ(ts::sum(e.gpu).cpu().item<double>(), 0.0);
  EXPECT_EQ(ts::prod(e.gpu).cpu().item<double>(), 1.0);
  EXPECT_THROW(ts::amax(e.gpu, 0), ts::IndexError);
  EXPECT_THROW(ts::amax(e.gpu), ts::ValueError);
  EXPECT_THROW(ts::max(e.gpu), ts::ValueError);
  EXPECT_THROW(ts::min(e.gpu, 0), ts::IndexError);
  EXPECT_THROW(ts::argmax(e.gpu), ts::IndexError);
  EXPECT_THROW(ts::argmin(e.gpu, 0), ts::IndexError);
  EXPECT_THROW(ts::mean(ts::ones({3}, ts::kInt32).to("cuda")), ts::DTypeError);
  EXPECT_THROW(ts::var(ts::ones({3}, ts::kInt32).to("cuda")), ts::DTypeError);
  EXPECT_THROW(ts::argmax(ts::ones({3}, ts::kBool).to("cuda")), ts::DTypeError);
  EXPECT_THROW(ts::sum(e.gpu, 2), ts::IndexError);
  // 0-dim inputs: every reduction of one element.
  Pair z = from_values({-2.5}, {}, ts::kFloat32);
  EXPECT_TRUE(exact(ts::sum(z.gpu), ts::sum(z.cpu)));
  EXPECT_TRUE(exact(ts::amax(z.gpu, 0, true), ts::amax(z.cpu, 0, true)));
  EXPECT_TRUE(exact(ts::argmax(z.gpu), ts::argmax(z.cpu)));
  EXPECT_TRUE(exact(ts::norm(z.gpu, 3.0), ts::norm(z.cpu, 3.0)));
  EXPECT_TRUE(exact(ts::var(z.gpu, std::nullopt, 0), ts::var(z.cpu, std::nullopt, 0)));
  EXPECT_TRUE(exact(ts::logsumexp(z.gpu, 0), ts::logsumexp(z.cpu, 0)));
}

TEST(CudaReduce, MoreDimsThanTheOffsetCalculatorHolds) {
  TS_REQUIRE_GPU();
  // 24 dims of size 2 seen in reverse order: no two neighbours merge, so either side of the reduction
  // has 12 dims (the GPU falls back to a dense copy).
  ts::Shape sizes(24, 2), perm;
  for (int64_t d = 23; d >= 0; --d) perm.push_back(d);
  ts::Tensor base = test_data(sizes, ts::kFloat32, 41);
  Pair x{base.permute(perm), base.to("cuda").permute(perm)};
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < 24; d += 2) dims.push_back(d);
  EXPECT_TRUE(sum_near(ts::sum(x.gpu, dims), ts::sum(x.cpu, dims), x.cpu, dims, false));
  EXPECT_TRUE(exact(ts::amax(x.gpu, dims), ts::amax(x.cpu, dims)));
  EXPECT_TRUE(near(ts::var(x.gpu, dims), ts::var(x.cpu, dims), 2.6e-6, 1e-5));
  EXPECT_TRUE(exact(ts::argmax(x.gpu, 5), ts::argmax(x.cpu, 5)));
}

TEST(CudaReduce, CumsumCumprodEveryDtypeDimAndLength) {
  TS_REQUIRE_GPU();
  struct Case {
    ts::Shape sizes;
    int64_t dim;
  };
  // Rows (inner == 1): short (one thread per row), one tile, several tiles, few long rows (chunked).
  // Columns (inner > 1): short, and few long columns (chunked).
  const std::vector<Case> cases = {{{4, 5, 1000}, 2}, {{4, 5, 1000}, 1}, {{4, 5, 1000}, 0}, {{300, 10}, 1},
                                   {{3, 5000}, 1},    {{2, 100003}, 1},  {{100003, 3}, 0},  {{40000}, 0}};
  for (const Case& c : cases)
    for (ts::DType dt : all_dtypes()) {
      SCOPED_TRACE(std::string(ts::dtype_name(dt)) + " " + std::to_string(c.sizes[0]) + " dim " + std::to_string(c.dim));
      Pair x = make_pair(c.sizes, dt, "contiguous", 43, -3, 4);
      ts::Tensor gc = ts::cumsum(x.gpu, c.dim), cc = ts::cumsum(x.cpu, c.dim);
      if (ts::is_floating_point(dt)) {
        // A bound on the reassociation error of each running sum.
        ts::Tensor slack = ts::cumsum(x.cpu.to(ts::kFloat64).abs(), c.dim) * (4 * acc_eps(dt == ts::kFloat64 ? dt : ts::kFloat16));
        if (dt == ts::kFloat32) slack = slack * 1e-9;  // float32 accumulates in float64 on both devices
        EXPECT_TRUE(near(gc, cc, tolerance_for(dt).rtol, tolerance_for(dt).atol, slack));
      } else {
        EXPECT_TRUE(exact(gc, cc));  // int64 accumulation, wrapping alike
      }
      // cumprod: factors near 1 (floats) or in {-1, 1, 2} (integers, which overflow and wrap alike).
      if (ts::is_floating_point(dt)) {
        Pair f = make_pair(c.sizes, "contiguous", data(dt, 47, -5, 5, 0.001, 1));
        const double len = static_cast<double>(c.sizes[c.dim]);
        const double eps = dt == ts::kFloat32 ? 0 : acc_eps(dt == ts::kFloat64 ? dt : ts::kFloat16);
        EXPECT_TRUE(near(ts::cumprod(f.gpu, c.dim), ts::cumprod(f.cpu, c.dim), tolerance_for(dt).rtol + 4 * len * eps,
                         tolerance_for(dt).atol));
      } else {
        ts::Tensor fc = test_data(c.sizes, ts::kInt64, 47, -1, 3);
        fc = fc.where(fc != 0, ts::full_like(fc, 2)).to(dt);  // no zeros: keep the products informative
        EXPECT_TRUE(exact(ts::cumprod(fc.to("cuda"), c.dim), ts::cumprod(fc, c.dim)));
      }
    }
  // An explicit dtype, 0-dim and empty inputs.
  Pair h = make_pair({7, 300}, ts::kFloat16, "contiguous", 53);
  EXPECT_TRUE(near(ts::cumsum(h.gpu, 1, ts::kFloat64), ts::cumsum(h.cpu, 1, ts::kFloat64), 1e-12, 1e-12));
  Pair z = from_values({3.5}, {}, ts::kFloat32);
  EXPECT_TRUE(exact(ts::cumsum(z.gpu, 0), ts::cumsum(z.cpu, 0)));
  Pair e = make_pair({0, 4}, ts::kInt32, "contiguous");
  EXPECT_TRUE(exact(ts::cumprod(e.gpu, 1), ts::cumprod(e.cpu, 1)));
  EXPECT_THROW(ts::cumsum(e.gpu, 0, ts::kBool), ts::DTypeError);
}

// ---- past 2^31 elements: 64-bit indexing (about 2 GB of input, 36 GB for the scan) ------------------
TEST(CudaReduce, Huge2Pow31Plus5ElementsSumAnyArgmaxUint8Int8Bool) {
  TS_REQUIRE_GPU();
  const int64_t n = (int64_t{1} << 31) + 5;
  {
    ts::Tensor h = ts::ones({n}, ts::kUInt8);
    h.narrow(0, n - 1, 1).fill_(7);
    h.narrow(0, n - 3, 1).fill_(7);
    ts::Tensor g = h.to("cuda");
    EXPECT_EQ(ts::sum(g).cpu().item<int64_t>(), n + 12);
    EXPECT_EQ(ts::amax(g).cpu().item<int64_t>(), 7);
    EXPECT_EQ(ts::argmax(g).cpu().item<int64_t>(), n - 3);
    EXPECT_EQ(ts::argmin(g).cpu().item<int64_t>(), 0);
    // The same bytes as int8 rows and columns: (2, (n - 1) / 2) after dropping one element.
    ts::Tensor m = g.view(ts::kInt8).narrow(0, 0, n - 1).view({2, (n - 1) / 2});
    std::vector<int64_t> rows = ts::sum(m, 1).cpu().tolist<int64_t>();
    EXPECT_EQ(rows[0], (n - 1) / 2);
    EXPECT_EQ(rows[1], (n - 1) / 2 + 6);  // the 7 at n - 3 is in the second row
    ts::Tensor t = g.narrow(0, 0, n - 1).view({(n - 1) / 2, 2});
    std::vector<int64_t> cols = ts::sum(t, 0).cpu().tolist<int64_t>();
    EXPECT_EQ(cols[0] + cols[1], n - 1 + 6);
  }
  {
    ts::Tensor b = ts::zeros({n}, ts::kBool);
    b.narrow(0, n - 2, 1).fill_(true);
    ts::Tensor g = b.to("cuda");
    EXPECT_TRUE(ts::any(g).cpu().item<bool>());
    EXPECT_FALSE(ts::all(g).cpu().item<bool>());
    EXPECT_EQ(ts::sum(g).cpu().item<int64_t>(), 1);
  }
}

TEST(CudaReduce, Huge2Pow31Plus5ElementsCumsumInt8) {
  TS_REQUIRE_GPU();
  const int64_t n = (int64_t{1} << 31) + 5;
  ts::Tensor g = ts::ones({n}, ts::kInt8).to("cuda");
  ts::Tensor c = ts::cumsum(g, 0);  // int64
  EXPECT_EQ(c.dtype(), ts::kInt64);
  EXPECT_EQ(c.narrow(0, 0, 3).cpu().tolist<int64_t>(), (std::vector<int64_t>{1, 2, 3}));
  const int64_t mid = int64_t{1} << 31;
  EXPECT_EQ(c.narrow(0, mid - 1, 2).cpu().tolist<int64_t>(), (std::vector<int64_t>{mid, mid + 1}));
  EXPECT_EQ(c.narrow(0, n - 1, 1).cpu().item<int64_t>(), n);
}
