// The random family on CUDA against the CPU kernels: the same PhiloxParams must give the same numbers
// (Note [Philox stream]). Bit for bit for uniform, bernoulli (scalar and tensor p, and so dropout),
// random_, randperm and multinomial; normal within a few ulp in float32/float64 and one ulp in the
// 16-bit types, because log1p and cos come from different libraries on the two sides (Note [Random
// rounding], src/kernels/cuda/random_transforms.cuh). Also: non-contiguous outputs, sizes that are not
// multiples of 4, empty and scalar outputs, every dtype each op takes, the error cases with the CPU's
// messages, generator offsets, statistics of large draws, and outputs past 2^31 elements.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <iostream>
#include <limits>
#include <numeric>
#include <sstream>

#include "common/test_util.h"
#include "ops/random_kernel.h"
#include "runtime/philox.h"
#include "tessera/nn/functional.h"

namespace ts = tessera;
using namespace tessera::testing;
using tessera::operator<<;  // Shape (a std::vector) prints through tessera's operator

namespace {

ts::Device gpu() { return ts::Device::cuda(); }

std::string shape_str(const ts::Shape& s) {
  std::ostringstream os;
  os << s;
  return os.str();
}

// Bitwise equality of two tensors of one dtype and sizes (any devices, any layouts).
::testing::AssertionResult same_bits(const ts::Tensor& actual, const ts::Tensor& expected) {
  if (actual.sizes() != expected.sizes() || actual.dtype() != expected.dtype()) {
    std::ostringstream os;
    os << "sizes/dtype differ: " << actual.sizes() << " " << ts::dtype_name(actual.dtype()) << " vs "
       << expected.sizes() << " " << ts::dtype_name(expected.dtype());
    return ::testing::AssertionFailure() << os.str();
  }
  const ts::Tensor a = actual.cpu().contiguous(), e = expected.cpu().contiguous();
  const size_t es = ts::element_size(a.dtype());
  const auto* pa = static_cast<const unsigned char*>(a.data_ptr());
  const auto* pe = static_cast<const unsigned char*>(e.data_ptr());
  int64_t bad = 0, first = -1;
  for (int64_t i = 0; i < a.numel(); ++i) {
    if (std::memcmp(pa + i * es, pe + i * es, es) != 0) {
      if (first < 0) first = i;
      ++bad;
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  const double va = a.reshape({-1}).slice(0, first, first + 1).tolist<double>()[0];
  const double ve = e.reshape({-1}).slice(0, first, first + 1).tolist<double>()[0];
  return ::testing::AssertionFailure() << bad << " of " << a.numel() << " elements differ; first at flat index "
                                       << first << ": " << va << " vs " << ve;
}

// The bits of a floating element as an integer whose order is the values' order.
int64_t ordered_bits(const unsigned char* p, ts::DType t) {
  int64_t v = 0, sign = 0;
  switch (t) {
    case ts::DType::Float64: {
      uint64_t b;
      std::memcpy(&b, p, 8);
      sign = static_cast<int64_t>(b >> 63);
      v = static_cast<int64_t>(b & 0x7fffffffffffffffull);
      break;
    }
    case ts::DType::Float32: {
      uint32_t b;
      std::memcpy(&b, p, 4);
      sign = b >> 31;
      v = b & 0x7fffffffu;
      break;
    }
    default: {
      uint16_t b;
      std::memcpy(&b, p, 2);
      sign = b >> 15;
      v = b & 0x7fff;
    }
  }
  return sign ? -v : v;
}

struct UlpStats {
  int64_t max_ulp = 0;
  int64_t exact = 0;
  int64_t n = 0;
};
UlpStats ulp_stats(const ts::Tensor& actual, const ts::Tensor& expected) {
  const ts::Tensor a = actual.cpu().contiguous(), e = expected.cpu().contiguous();
  const size_t es = ts::element_size(a.dtype());
  const auto* pa = static_cast<const unsigned char*>(a.data_ptr());
  const auto* pe = static_cast<const unsigned char*>(e.data_ptr());
  UlpStats s;
  s.n = a.numel();
  for (int64_t i = 0; i < s.n; ++i) {
    const int64_t d = std::llabs(ordered_bits(pa + i * es, a.dtype()) - ordered_bits(pe + i * es, a.dtype()));
    s.max_ulp = std::max(s.max_ulp, d);
    s.exact += d == 0;
  }
  return s;
}

// A cuda output of `sizes` in a given layout: contiguous, transposed (last two dims) or sliced with
// step 2 along the last dim; its elements are uninitialized (every one is written by the op).
ts::Tensor cuda_output(const ts::Shape& sizes, ts::DType dtype, const std::string& layout) {
  if (layout == "transposed" && sizes.size() >= 2) {
    ts::Shape s = sizes;
    std::swap(s[s.size() - 1], s[s.size() - 2]);
    return ts::empty(s, {dtype, gpu()}).transpose(-1, -2);
  }
  if (layout == "sliced_step2" && !sizes.empty()) {
    ts::Shape s = sizes;
    s.back() *= 2;
    return ts::empty(s, {dtype, gpu()}).slice(-1, 0, std::nullopt, 2);
  }
  return ts::empty(sizes, {dtype, gpu()});
}
const char* const kLayouts[] = {"contiguous", "transposed", "sliced_step2"};

// Shapes with element counts that are not multiples of 4 (and one that is), incl. a scalar.
const std::vector<ts::Shape>& shapes() {
  static const std::vector<ts::Shape> s = {{}, {1}, {3}, {1001}, {37, 129}, {5, 7, 9}, {64, 64}, {3, 1, 100003}};
  return s;
}

// Runs fill(tensor, generator) on a CPU tensor and a cuda tensor of each layout, both from generators
// seeded alike and offset alike, and checks the bits and the generators' offsets.
template <class Fill>
void expect_same_as_cpu(ts::DType dtype, Fill fill, const char* what) {
  for (const ts::Shape& sizes : shapes()) {
    for (const char* layout : kLayouts) {
      SCOPED_TRACE(std::string(what) + " " + ts::dtype_name(dtype) + " layout " + layout);
      ts::Generator gc(20261130), gg(20261130);
      gc.set_offset(5);
      gg.set_offset(5);
      ts::Tensor c = ts::empty(sizes, dtype);
      ts::Tensor g = cuda_output(sizes, dtype, layout);
      fill(c, gc);
      fill(g, gg);
      EXPECT_TRUE(same_bits(g, c)) << "sizes " << shape_str(sizes);
      EXPECT_EQ(gg.offset(), gc.offset());
    }
  }
}

}  // namespace

// ---- uniform_ ----------------------------------------------------------------------------------------
TEST(CudaRandom, UniformBitwiseEqualsCpuInEveryFloatingDtypeAndLayout) {
  TS_REQUIRE_GPU();
  for (ts::DType dt : float_dtypes()) {
    expect_same_as_cpu(dt, [](ts::Tensor& t, ts::Generator& g) { t.uniform_(0, 1, &g); }, "uniform_(0, 1)");
    expect_same_as_cpu(dt, [](ts::Tensor& t, ts::Generator& g) { t.uniform_(-1.3, 2.7, &g); }, "uniform_(-1.3, 2.7)");
    // A range whose product with u is inexact in float64 (the fused multiply-add matters), and a
    // narrow range near a large value (the clamp below `to` matters in the 16-bit types).
    expect_same_as_cpu(dt, [](ts::Tensor& t, ts::Generator& g) { t.uniform_(-3e-5, 7.1, &g); }, "uniform_(-3e-5, 7.1)");
    expect_same_as_cpu(dt, [](ts::Tensor& t, ts::Generator& g) { t.uniform_(100.25, 100.5, &g); }, "uniform_(100.25, 100.5)");
  }
}

TEST(CudaRandom, RandFactoryMatchesCpuAndNeverReturnsTheUpperBound) {
  TS_REQUIRE_GPU();
  for (ts::DType dt : float_dtypes()) {
    ts::Generator gc(7), gg(7);
    ts::Tensor c = ts::rand({1 << 20}, dt, &gc);
    ts::Tensor g = ts::rand({1 << 20}, {dt, gpu()}, &gg);
    EXPECT_TRUE(g.is_cuda());
    EXPECT_TRUE(same_bits(g, c)) << ts::dtype_name(dt);
    ts::Tensor narrow = ts::empty({1 << 16}, {dt, gpu()});
    narrow.uniform_(1.0, 1.0009765625, &gg);  // one float16 ulp wide: most draws round up to `to`
    const std::vector<double> v = narrow.tolist<double>();
    EXPECT_LT(*std::max_element(v.begin(), v.end()), 1.0009765625) << ts::dtype_name(dt);
    EXPECT_GE(*std::min_element(v.begin(), v.end()), 1.0) << ts::dtype_name(dt);
  }
}

// ---- normal_ -----------------------------------------------------------------------------------------------
TEST(CudaRandom, NormalWithinFewUlpOfCpu) {
  TS_REQUIRE_GPU();
  for (ts::DType dt : float_dtypes()) {
    ts::Generator gc(42), gg(42);
    ts::Tensor c = ts::randn({(1 << 20) + 3}, dt, &gc);
    ts::Tensor g = ts::randn({(1 << 20) + 3}, {dt, gpu()}, &gg);
    EXPECT_EQ(gg.offset(), gc.offset());
    const UlpStats s = ulp_stats(g, c);
    // log1p/cos: glibc vs libdevice (1-2 ulp each); the 16-bit types round that float once.
    const int64_t bound = (dt == ts::kFloat32 || dt == ts::kFloat64) ? 16 : 1;
    EXPECT_LE(s.max_ulp, bound) << ts::dtype_name(dt);
    std::cout << "normal " << ts::dtype_name(dt) << ": " << s.exact << " of " << s.n
              << " bit-identical to the CPU, max difference " << s.max_ulp << " ulp\n";
  }
}

TEST(CudaRandom, NormalWithMeanAndStdInEveryLayout) {
  TS_REQUIRE_GPU();
  for (ts::DType dt : float_dtypes()) {
    for (const ts::Shape& sizes : shapes()) {
      for (const char* layout : kLayouts) {
        ts::Generator gc(3), gg(3);
        ts::Tensor c = ts::empty(sizes, dt);
        c.normal_(2.0, 3.0, &gc);
        ts::Tensor g = cuda_output(sizes, dt, layout);
        g.normal_(2.0, 3.0, &gg);
        EXPECT_EQ(gg.offset(), gc.offset());
        // Absolute error ~ std * |z| * a few ulp, plus one rounding of the result.
        Tolerance tol = tolerance_for(dt);
        if (dt == ts::kFloat32) tol = {4e-6, 4e-6 * 3.0};
        if (dt == ts::kFloat64) tol = {1e-14, 1e-14 * 3.0};
        EXPECT_TRUE(all_close(g.cpu(), c, tol)) << ts::dtype_name(dt) << " " << layout << " " << shape_str(sizes);
      }
    }
  }
}

TEST(CudaRandom, LargeNormalAndUniformStatistics) {
  TS_REQUIRE_GPU();
  const int64_t n = int64_t{1} << 24;
  ts::Generator g(11);
  for (ts::DType dt : {ts::kFloat32, ts::kFloat64, ts::kBFloat16}) {
    const std::vector<double> z = ts::randn({n}, {dt, gpu()}, &g).tolist<double>();
    double m = 0, v = 0;
    for (double x : z) m += x;
    m /= static_cast<double>(n);
    for (double x : z) v += (x - m) * (x - m);
    v /= static_cast<double>(n - 1);
    const double tol16 = dt == ts::kBFloat16 ? 4e-3 : 0;  // bfloat16 rounding biases the variance slightly
    EXPECT_NEAR(m, 0.0, 5.0 / std::sqrt(static_cast<double>(n))) << ts::dtype_name(dt);
    EXPECT_NEAR(v, 1.0, 5.0 * std::sqrt(2.0 / static_cast<double>(n)) + tol16) << ts::dtype_name(dt);
    const std::vector<double> u = ts::rand({n}, {dt, gpu()}, &g).tolist<double>();
    double mu = 0;
    for (double x : u) mu += x;
    mu /= static_cast<double>(n);
    EXPECT_NEAR(mu, 0.5, 5.0 * std::sqrt(1.0 / 12.0 / static_cast<double>(n)) + (dt == ts::kBFloat16 ? 2e-3 : 0))
        << ts::dtype_name(dt);
  }
}

// ---- bernoulli and dropout ------------------------------------------------------------------------------------
TEST(CudaRandom, BernoulliScalarBitwiseEqualsCpuInEveryDtype) {
  TS_REQUIRE_GPU();
  for (ts::DType dt : all_dtypes()) {
    for (double p : {0.0, 0.3, 0.5, 1.0}) {
      expect_same_as_cpu(dt, [p](ts::Tensor& t, ts::Generator& g) { t.bernoulli_(p, &g); }, "bernoulli_");
    }
  }
}

TEST(CudaRandom, BernoulliTensorBitwiseEqualsCpu) {
  TS_REQUIRE_GPU();
  for (ts::DType pt : float_dtypes()) {
    for (const ts::Shape& sizes : shapes()) {
      ts::Generator gp(1);
      const ts::Tensor p = ts::rand(sizes, pt, &gp);
      ts::Generator gc(9), gg(9);
      const ts::Tensor c = ts::bernoulli(p, &gc);
      const ts::Tensor g = ts::bernoulli(p.to(gpu()), &gg);
      EXPECT_TRUE(g.is_cuda());
      EXPECT_TRUE(same_bits(g, c)) << ts::dtype_name(pt) << " " << shape_str(sizes);
      EXPECT_EQ(gg.offset(), gc.offset());
    }
  }
}

TEST(CudaRandom, BernoulliTensorKernelWritesAnyDtypeAndLayout) {
  TS_REQUIRE_GPU();
  // The slot itself: p of one floating dtype, out of another dtype, strided.
  const ts::Tensor p = ts::rand({37, 129}, ts::kFloat32, nullptr);
  const ts::Tensor p64 = p.to(ts::kFloat64);
  const ts::PhiloxParams params{77, 1000};
  for (ts::DType dt : all_dtypes()) {
    for (const char* layout : kLayouts) {
      for (const ts::Tensor& prob : {p, p64}) {
        ts::Tensor c = ts::empty({37, 129}, dt);
        ts::bernoulli_tensor_kernel(ts::kCPU, c, prob, params);
        ts::Tensor g = cuda_output({37, 129}, dt, layout);
        ts::bernoulli_tensor_kernel(gpu(), g, prob.to(gpu()), params);
        EXPECT_TRUE(same_bits(g, c)) << ts::dtype_name(dt) << " p " << ts::dtype_name(prob.dtype()) << " " << layout;
      }
    }
  }
}

TEST(CudaRandom, BernoulliRejectsBadProbabilitiesWithTheCpuMessage) {
  TS_REQUIRE_GPU();
  for (double bad : {1.5, -0.25, std::nan("")}) {
    std::vector<double> v(1000, 0.5);
    v[617] = bad;
    v[900] = 2.0;
    for (ts::DType pt : {ts::kFloat32, ts::kFloat64, ts::kFloat16}) {
      const ts::Tensor p = ts::tensor(v, {1000}, ts::kFloat64).to(pt);
      std::string cpu_msg, gpu_msg;
      try {
        ts::bernoulli(p);
      } catch (const ts::ValueError& e) {
        cpu_msg = e.what();
      }
      try {
        ts::bernoulli(p.to(gpu()));
      } catch (const ts::ValueError& e) {
        gpu_msg = e.what();
      }
      EXPECT_FALSE(cpu_msg.empty());
      EXPECT_EQ(gpu_msg, cpu_msg);
      EXPECT_NE(gpu_msg.find("p[617]"), std::string::npos) << gpu_msg;
    }
  }
}

TEST(CudaRandom, DropoutMaskEqualsCpuForTheSameSeed) {
  TS_REQUIRE_GPU();
  for (ts::DType dt : float_dtypes()) {
    const ts::Tensor x = test_data({64, 1001}, dt);
    for (double p : {0.1, 0.5, 0.9}) {
      ts::Generator gc(123), gg(123);
      const ts::Tensor yc = ts::nn::functional::dropout(x, p, true, &gc);
      const ts::Tensor yg = ts::nn::functional::dropout(x.to(gpu()), p, true, &gg);
      EXPECT_TRUE(yg.is_cuda());
      // The kept set is the same, element for element ...
      const std::vector<double> vc = yc.tolist<double>(), vg = yg.cpu().tolist<double>(), vx = x.tolist<double>();
      int64_t differ = 0, kept = 0;
      for (size_t i = 0; i < vc.size(); ++i) {
        if (vx[i] == 0) continue;
        differ += (vc[i] != 0) != (vg[i] != 0);
        kept += vg[i] != 0;
      }
      EXPECT_EQ(differ, 0) << ts::dtype_name(dt) << " p " << p;
      EXPECT_NEAR(static_cast<double>(kept) / static_cast<double>(vc.size()), 1 - p, 0.02);
      // ... and the outputs agree (the scaling is the elementwise kernels' business).
      EXPECT_TRUE(all_close(yg.cpu(), yc)) << ts::dtype_name(dt) << " p " << p;
      EXPECT_EQ(gg.offset(), gc.offset());
    }
  }
}

// ---- random_ -------------------------------------------------------------------------------------------------
TEST(CudaRandom, RandomIntBitwiseEqualsCpuInEveryDtype) {
  TS_REQUIRE_GPU();
  for (ts::DType dt : all_dtypes()) {
    expect_same_as_cpu(dt, [](ts::Tensor& t, ts::Generator& g) { t.random_(0, 2, &g); }, "random_(0, 2)");
    if (dt == ts::kBool) continue;
    expect_same_as_cpu(dt, [](ts::Tensor& t, ts::Generator& g) { t.random_(0, 100, &g); }, "random_(0, 100)");
    if (dt != ts::kUInt8)
      expect_same_as_cpu(dt, [](ts::Tensor& t, ts::Generator& g) { t.random_(-7, 120, &g); }, "random_(-7, 120)");
  }
  using L = std::numeric_limits<int64_t>;
  // Ranges of 2^32 (still one word), above 2^32 (two words) and nearly 2^64.
  expect_same_as_cpu(ts::kInt64, [](ts::Tensor& t, ts::Generator& g) { t.random_(0, int64_t{1} << 32, &g); }, "2^32");
  expect_same_as_cpu(ts::kInt64, [](ts::Tensor& t, ts::Generator& g) { t.random_(-(int64_t{1} << 40), int64_t{1} << 40, &g); },
                     "2^41");
  expect_same_as_cpu(ts::kInt64, [](ts::Tensor& t, ts::Generator& g) { t.random_(L::min(), L::max(), &g); }, "2^64 - 1");
  expect_same_as_cpu(ts::kInt32, [](ts::Tensor& t, ts::Generator& g) {
    t.random_(std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max(), &g);
  }, "int32 range");
  expect_same_as_cpu(ts::kFloat32, [](ts::Tensor& t, ts::Generator& g) { t.random_(-(1 << 24), 1 << 24, &g); }, "float32 exact range");
}

TEST(CudaRandom, RandomIntKernelFullSixtyFourBitRange) {
  TS_REQUIRE_GPU();
  // range 0 means 2^64 (only the slot can ask for it).
  const ts::PhiloxParams params{5, 17};
  ts::Tensor c = ts::empty({1001}, ts::kInt64), g = ts::empty({1001}, {ts::kInt64, gpu()});
  ts::random_int_kernel(ts::kCPU, c, std::numeric_limits<int64_t>::min(), 0, params);
  ts::random_int_kernel(gpu(), g, std::numeric_limits<int64_t>::min(), 0, params);
  EXPECT_TRUE(same_bits(g, c));
}

TEST(CudaRandom, RandintFactoryMatchesCpu) {
  TS_REQUIRE_GPU();
  for (ts::DType dt : {ts::kInt64, ts::kInt32, ts::kUInt8, ts::kFloat16}) {
    ts::Generator gc(8), gg(8);
    const ts::Tensor c = ts::randint(0, 200, {40, 9001}, dt, &gc);
    const ts::Tensor g = ts::randint(0, 200, {40, 9001}, {dt, gpu()}, &gg);
    EXPECT_TRUE(same_bits(g, c)) << ts::dtype_name(dt);
    EXPECT_EQ(gg.offset(), gc.offset());
  }
}

// ---- randperm -------------------------------------------------------------------------------------------------
TEST(CudaRandom, RandpermIsAPermutationAndEqualsCpu) {
  TS_REQUIRE_GPU();
  for (int64_t n : {int64_t{1}, int64_t{2}, int64_t{5}, int64_t{1000}, int64_t{100003}, int64_t{1} << 20}) {
    ts::Generator gc(31), gg(31);
    gc.set_offset(3);
    gg.set_offset(3);
    const ts::Tensor c = ts::randperm(n, ts::kInt64, &gc);
    const ts::Tensor g = ts::randperm(n, {ts::kInt64, gpu()}, &gg);
    EXPECT_TRUE(g.is_cuda());
    EXPECT_TRUE(same_bits(g, c)) << n;
    EXPECT_EQ(gg.offset(), gc.offset());
    std::vector<int64_t> v = g.cpu().tolist<int64_t>();
    std::sort(v.begin(), v.end());
    std::vector<int64_t> iota(static_cast<size_t>(n));
    std::iota(iota.begin(), iota.end(), int64_t{0});
    EXPECT_EQ(v, iota) << n;
  }
  for (ts::DType dt : {ts::kInt32, ts::kUInt8, ts::kInt8, ts::kFloat32, ts::kFloat16, ts::kBFloat16, ts::kFloat64}) {
    const int64_t n = dt == ts::kInt8 ? 128 : dt == ts::kUInt8 || dt == ts::kBFloat16 ? 256 : 2049;
    ts::Generator gc(4), gg(4);
    EXPECT_TRUE(same_bits(ts::randperm(n, {dt, gpu()}, &gg), ts::randperm(n, dt, &gc))) << ts::dtype_name(dt);
  }
  ts::Generator g0(1);
  EXPECT_EQ(ts::randperm(0, {ts::kInt64, gpu()}, &g0).numel(), 0);
  EXPECT_EQ(g0.offset(), 0u);
}

TEST(CudaRandom, RandpermKernelWritesAStridedOutput) {
  TS_REQUIRE_GPU();
  const ts::PhiloxParams params{12, 34};
  ts::Tensor c = ts::empty({999}, ts::kInt64);
  ts::randperm_kernel(ts::kCPU, c, params);
  ts::Tensor g = ts::empty({999 * 3}, {ts::kInt64, gpu()}).slice(0, 0, std::nullopt, 3);
  ts::randperm_kernel(gpu(), g, params);
  EXPECT_TRUE(same_bits(g, c));
}

// ---- multinomial ----------------------------------------------------------------------------------------------
namespace {
// Rows of random weights with some zero categories (every 7th from k = 3 on, and the upper half of
// row 0 from k = 10 on).
ts::Tensor multinomial_probs(int64_t rows, int64_t k, ts::DType dt) {
  ts::Generator g(2);
  std::vector<double> v = ts::rand({rows, k}, ts::kFloat64, &g).tolist<double>();
  if (k >= 3)
    for (int64_t i = 0; i < rows * k; i += 7) v[i] = 0;
  if (k >= 10)
    for (int64_t c = k / 2; c < k; ++c) v[c] = 0;
  return ts::tensor(v, {rows, k}, ts::kFloat64).to(dt);
}
}  // namespace

TEST(CudaRandom, MultinomialWithReplacementEqualsCpu) {
  TS_REQUIRE_GPU();
  for (auto [rows, k, s] : std::vector<std::array<int64_t, 3>>{{1, 1, 5}, {7, 1000, 2001}, {3, 5000, 17}, {64, 3, 1000}}) {
    for (ts::DType dt : {ts::kFloat64, ts::kFloat32, ts::kFloat16}) {
      const ts::Tensor p = multinomial_probs(rows, k, dt);
      ts::Generator gc(17), gg(17);
      const ts::Tensor c = ts::multinomial(p, s, true, &gc);
      const ts::Tensor g = ts::multinomial(p.to(gpu()), s, true, &gg);
      EXPECT_TRUE(same_bits(g, c)) << rows << "x" << k << " s " << s << " " << ts::dtype_name(dt);
      EXPECT_EQ(gg.offset(), gc.offset());
    }
  }
  // 1-D input, and a row whose cumulative sum rounds (many tiny and one huge weight).
  std::vector<double> w(3000, 1e-17);
  w[1500] = 1e3;
  const ts::Tensor p = ts::tensor(w, {3000}, ts::kFloat64);
  ts::Generator gc(5), gg(5);
  EXPECT_TRUE(same_bits(ts::multinomial(p.to(gpu()), 4000, true, &gg), ts::multinomial(p, 4000, true, &gc)));
}

TEST(CudaRandom, MultinomialWithoutReplacementEqualsCpu) {
  TS_REQUIRE_GPU();
  // Same samples as the CPU unless two exponential keys of a row fall within an ulp (p ~ 1e-12 here).
  for (auto [rows, k, s] : std::vector<std::array<int64_t, 3>>{{1, 1, 1}, {7, 1000, 100}, {3, 5000, 2000}, {64, 40, 17}}) {
    const ts::Tensor p = multinomial_probs(rows, k, ts::kFloat64);
    ts::Generator gc(19), gg(19);
    const ts::Tensor c = ts::multinomial(p, s, false, &gc);
    const ts::Tensor g = ts::multinomial(p.to(gpu()), s, false, &gg);
    EXPECT_TRUE(same_bits(g, c)) << rows << "x" << k << " s " << s;
    EXPECT_EQ(gg.offset(), gc.offset());
    // Distinct categories, all with p > 0.
    const std::vector<int64_t> v = g.cpu().tolist<int64_t>();
    const std::vector<double> pv = p.tolist<double>();
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<int64_t> row(v.begin() + r * s, v.begin() + (r + 1) * s);
      for (int64_t c : row) EXPECT_GT(pv[r * k + c], 0.0);
      std::sort(row.begin(), row.end());
      EXPECT_EQ(std::adjacent_find(row.begin(), row.end()), row.end()) << "row " << r;
    }
  }
  // Uniform weights: every key tie-free, samples of a row distinct; all categories when s == k.
  ts::Generator g1(3);
  std::vector<int64_t> all = ts::multinomial(ts::ones({1, 500}, {ts::kFloat64, gpu()}), 500, false, &g1).cpu().tolist<int64_t>();
  std::sort(all.begin(), all.end());
  for (int64_t i = 0; i < 500; ++i) EXPECT_EQ(all[i], i);
}

TEST(CudaRandom, MultinomialFrequenciesFollowTheWeights) {
  TS_REQUIRE_GPU();
  const std::vector<double> w = {0.1, 0.0, 0.2, 0.3, 0.4};
  const int64_t n = 1 << 20;
  ts::Generator g(99);
  const std::vector<int64_t> v =
      ts::multinomial(ts::tensor(w, {5}, ts::kFloat64).to(gpu()), n, true, &g).cpu().tolist<int64_t>();
  std::vector<int64_t> count(5, 0);
  for (int64_t c : v) ++count[static_cast<size_t>(c)];
  EXPECT_EQ(count[1], 0);
  for (int c = 0; c < 5; ++c) {
    const double e = w[c] * static_cast<double>(n), sd = std::sqrt(e * (1 - w[c])) + 1;
    EXPECT_NEAR(static_cast<double>(count[c]), e, 5 * sd) << "category " << c;
  }
}

TEST(CudaRandom, MultinomialRejectsBadRowsWithTheCpuMessage) {
  TS_REQUIRE_GPU();
  auto message = [](const ts::Tensor& p, int64_t s, bool repl) {
    try {
      ts::multinomial(p, s, repl);
    } catch (const ts::ValueError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  std::vector<std::pair<std::vector<double>, int64_t>> cases = {
      {{0.5, 0.5, 0.5, 0.5, 1, 2, -1, 0, 0.5, 0.5, 0.5, 0.5}, 2},                  // negative in row 1
      {{0.5, 0.5, 0.5, 0.5, 1, 2, std::nan(""), 3, 0.5, 0.5, -1, 0.5}, 2},          // nan in row 1 first
      {{0.5, 0.5, 0.5, 0.5, 0, 0, 0, 0, 0.5, 0.5, 0.5, 0.5}, 2},                    // zero row
      {{0.5, 0.5, 0.5, 0.5, 0, 0, 0, 1, 0.5, std::numeric_limits<double>::infinity(), 0.5, 0.5}, 2},
      {{0.5, 0.5, 0.5, 0.5, 1, 0, 0, 2, 0.5, 0.5, 0.5, 0.5}, 3},                    // 2 nonzero < 3 samples
  };
  for (const auto& [v, s] : cases) {
    const ts::Tensor p = ts::tensor(v, {3, 4}, ts::kFloat64);
    for (bool repl : {true, false}) {
      const std::string cpu = message(p, s, repl), cuda = message(p.to(gpu()), s, repl);
      EXPECT_EQ(cuda, cpu) << "replacement " << repl;
    }
  }
}

// ---- generator bookkeeping, empty and scalar outputs ------------------------------------------------------
TEST(CudaRandom, OffsetsAdvanceAsOnTheCpuAndDrawsDoNotRepeat) {
  TS_REQUIRE_GPU();
  ts::Generator gc(1), gg(1);
  auto draws = [](ts::Generator& g, ts::Device d) {
    std::vector<ts::Tensor> r;
    r.push_back(ts::rand({1001}, {ts::kFloat32, d}, &g));
    r.push_back(ts::rand({1001}, {ts::kFloat32, d}, &g));  // fresh numbers, not the previous ones
    r.push_back(ts::randn({77}, {ts::kFloat64, d}, &g));
    r.push_back(ts::randint(0, 10, {13}, {ts::kInt64, d}, &g));
    r.push_back(ts::randperm(10, {ts::kInt64, d}, &g));
    r.push_back(ts::bernoulli(ts::full({9}, 0.5, {ts::kFloat32, d}), &g));
    r.push_back(ts::multinomial(ts::ones({2, 8}, {ts::kFloat64, d}), 3, false, &g));
    r.push_back(ts::rand({0, 5}, {ts::kFloat32, d}, &g));
    r.push_back(ts::rand({}, {ts::kFloat32, d}, &g));
    return r;
  };
  const std::vector<ts::Tensor> c = draws(gc, ts::kCPU), g = draws(gg, gpu());
  EXPECT_EQ(gg.offset(), gc.offset());
  EXPECT_EQ(gg.seed(), gc.seed());
  for (size_t i = 0; i < c.size(); ++i) {
    EXPECT_TRUE(g[i].is_cuda());
    if (c[i].dtype() == ts::kFloat64 && i == 2) {  // normal: log1p/cos differ by an ulp or two (see above)
      EXPECT_LE(ulp_stats(g[i], c[i]).max_ulp, 16) << "draw " << i;
      continue;
    }
    EXPECT_TRUE(same_bits(g[i], c[i])) << "draw " << i;
  }
  EXPECT_FALSE(same_bits(g[0], g[1]));
  EXPECT_EQ(g[7].numel(), 0);
  EXPECT_EQ(g[8].dim(), 0);
}

TEST(CudaRandom, DefaultCudaGeneratorIsSeededByManualSeed) {
  TS_REQUIRE_GPU();
  ts::manual_seed(2024);
  const ts::Tensor a = ts::rand({100}, {ts::kFloat32, gpu()});
  ts::manual_seed(2024);
  const ts::Tensor b = ts::rand({100}, {ts::kFloat32, gpu()});
  EXPECT_TRUE(same_bits(a, b));
  ts::Generator g(2024);  // the same stream as the seeded default generator
  EXPECT_TRUE(same_bits(ts::rand({100}, ts::kFloat32, &g), a));
}

// ---- past 2^31 elements (about 2.2 GB of GPU memory each) -------------------------------------------------
TEST(CudaRandom, LargeContiguousOutputPast2To31Elements) {
  TS_REQUIRE_GPU();
  const int64_t n = (int64_t{1} << 31) + 7;
  ts::Generator g(314);
  g.set_offset(1);
  ts::Tensor t = ts::empty({n}, {ts::kUInt8, gpu()});
  t.bernoulli_(0.25, &g);
  EXPECT_EQ(g.offset(), 1u + static_cast<uint64_t>((n + 3) / 4));
  for (int64_t start : {int64_t{0}, (int64_t{1} << 31) - 1000, n - 1000}) {
    const std::vector<int64_t> v = t.slice(0, start, start + 1000).cpu().tolist<int64_t>();
    for (int64_t j = 0; j < 1000; ++j) {
      const int64_t i = start + j;
      const ts::PhiloxBlock b = ts::philox4x32_10(314, 1 + static_cast<uint64_t>(i / 4));
      ASSERT_EQ(v[j], static_cast<double>(b.x[i % 4]) * 0x1p-32 < 0.25 ? 1 : 0) << "element " << i;
    }
  }
}

TEST(CudaRandom, LargeStridedOutputPast2To31Elements) {
  TS_REQUIRE_GPU();
  const int64_t r = 46341, c = 46342;  // r * c > 2^31: the 64-bit strided path
  ts::Tensor t = ts::empty({c, r}, {ts::kInt8, gpu()}).t();  // (r, c), column-major
  ts::Generator g(27);
  t.random_(-100, 100, &g);
  for (int64_t row : {int64_t{0}, int64_t{23170}, r - 1}) {
    const std::vector<int64_t> v = t.slice(0, row, row + 1).slice(1, c - 500, c).cpu().tolist<int64_t>();
    for (int64_t j = 0; j < 500; ++j) {
      const int64_t i = row * c + (c - 500 + j);  // logical row-major index
      const ts::PhiloxBlock b = ts::philox4x32_10(27, static_cast<uint64_t>(i / 4));
      ASSERT_EQ(v[j], -100 + static_cast<int64_t>(b.x[i % 4] % 200u)) << "element " << i;
    }
  }
}
