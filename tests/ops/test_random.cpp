// The random family: the Philox core against Random123's known answers, the stream contract of
// Note [Philox stream] (exact bits of element i, independent of thread count and layout), generator
// bookkeeping (fresh numbers, offsets, manual_seed), statistics of every distribution (5-sigma bands
// and chi-square tests with a fixed seed), value ranges in every dtype, and the error cases.
#include <algorithm>
#include <cmath>
#include <set>

#include "common/test_util.h"
#include "ops/random_kernel.h"
#include "runtime/philox.h"

namespace ts = tessera;
using namespace tessera::testing;

namespace {

struct Moments {
  double mean, var;
};
Moments moments(const std::vector<double>& v) {
  double m = 0, s = 0;
  for (double x : v) m += x;
  m /= static_cast<double>(v.size());
  for (double x : v) s += (x - m) * (x - m);
  return {m, s / static_cast<double>(v.size() - 1)};
}

// Pearson's statistic of observed counts against equal expected counts.
double chi_square_uniform(const std::vector<int64_t>& counts) {
  double total = 0;
  for (int64_t c : counts) total += static_cast<double>(c);
  const double e = total / static_cast<double>(counts.size());
  double chi = 0;
  for (int64_t c : counts) chi += (static_cast<double>(c) - e) * (static_cast<double>(c) - e) / e;
  return chi;
}
// Above the 9-degree-of-freedom chi-square's 1e-6 upper quantile (about 42).
constexpr double kChi2Bound9 = 45.0;

// Restores the thread count at scope exit.
struct ThreadGuard {
  int saved = ts::get_num_threads();
  ~ThreadGuard() { ts::set_num_threads(saved); }
};

}  // namespace

// ---- Philox core ---------------------------------------------------------------------------------
TEST(Philox, Random123KnownAnswers) {
  struct Kat {
    uint32_t ctr[4], key[2], out[4];
  };
  const Kat kats[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (const Kat& k : kats) {
    ts::PhiloxBlock b = ts::philox4x32_10(k.ctr, k.key);
    for (int w = 0; w < 4; ++w) EXPECT_EQ(b.x[w], k.out[w]) << "word " << w;
  }
}

TEST(Philox, SixtyFourBitFormPutsCounterInWordsZeroAndOne) {
  const uint64_t seed = 0x0123456789abcdefull, ctr = 0xfedcba9876543210ull;
  const uint32_t c[4] = {0x76543210u, 0xfedcba98u, 0, 0}, k[2] = {0x89abcdefu, 0x01234567u};
  ts::PhiloxBlock a = ts::philox4x32_10(seed, ctr), b = ts::philox4x32_10(c, k);
  for (int w = 0; w < 4; ++w) EXPECT_EQ(a.x[w], b.x[w]);
}

// ---- the stream contract (Note [Philox stream]) ----------------------------------------------------
TEST(RandomStream, Float32UniformElementIUsesWordIMod4OfBlockIDiv4) {
  ts::Generator g(1234);
  g.set_offset(10);
  std::vector<float> v = ts::rand({1001}, {}, &g).tolist<float>();
  for (int64_t i = 0; i < 1001; ++i) {
    ts::PhiloxBlock b = ts::philox4x32_10(1234, 10 + i / 4);
    ASSERT_EQ(v[i], ts::uint_to_unit_float(b.x[i % 4])) << i;
  }
  EXPECT_EQ(g.offset(), 10u + 251u);  // ceil(1001 / 4) counters reserved
}

TEST(RandomStream, Float64UniformUsesTwoWordsPerElement) {
  ts::Generator g(99);
  std::vector<double> v = ts::rand({7}, ts::kFloat64, &g).tolist<double>();
  for (int64_t i = 0; i < 7; ++i) {
    ts::PhiloxBlock b = ts::philox4x32_10(99, i / 2);
    EXPECT_EQ(v[i], ts::uint2_to_unit_double(b.x[2 * (i % 2)], b.x[2 * (i % 2) + 1])) << i;
  }
  EXPECT_EQ(g.offset(), 4u);
}

TEST(RandomStream, NormalIsBoxMullerOfItsOwnWords) {
  ts::Generator g(5);
  std::vector<float> v = ts::randn({9}, {}, &g).tolist<float>();
  for (int64_t i = 0; i < 9; ++i) {
    ts::PhiloxBlock b = ts::philox4x32_10(5, i / 2);
    const double u1 = ts::uint_to_unit_float(b.x[2 * (i % 2)]), u2 = ts::uint_to_unit_float(b.x[2 * (i % 2) + 1]);
    const double z = std::sqrt(-2 * std::log1p(-u1)) * std::cos(2 * M_PI * u2);
    EXPECT_NEAR(v[i], z, 1e-5 * (1 + std::fabs(z))) << i;
  }
  EXPECT_EQ(g.offset(), 5u);
  ts::Generator g64(5);
  std::vector<double> d = ts::randn({3}, ts::kFloat64, &g64).tolist<double>();
  for (int64_t i = 0; i < 3; ++i) {
    ts::PhiloxBlock b = ts::philox4x32_10(5, i);
    const double u1 = ts::uint2_to_unit_double(b.x[0], b.x[1]), u2 = ts::uint2_to_unit_double(b.x[2], b.x[3]);
    EXPECT_NEAR(d[i], std::sqrt(-2 * std::log1p(-u1)) * std::cos(2 * M_PI * u2), 1e-12) << i;
  }
  EXPECT_EQ(g64.offset(), 3u);
}

TEST(RandomStream, RandintUsesModuloOf32Or64Bits) {
  ts::Generator g(77);
  std::vector<int64_t> v = ts::randint(-5, 1000, {10}, {}, &g).tolist<int64_t>();
  for (int64_t i = 0; i < 10; ++i)
    EXPECT_EQ(v[i], -5 + static_cast<int64_t>(ts::philox4x32_10(77, i / 4).x[i % 4] % 1005u)) << i;
  const int64_t lo = -(int64_t{1} << 40), hi = int64_t{1} << 40;
  ts::Generator g2(77);
  std::vector<int64_t> w = ts::randint(lo, hi, {5}, {}, &g2).tolist<int64_t>();
  for (int64_t i = 0; i < 5; ++i) {
    ts::PhiloxBlock b = ts::philox4x32_10(77, i / 2);
    const uint64_t bits = ts::uint2_to_u64(b.x[2 * (i % 2)], b.x[2 * (i % 2) + 1]);
    EXPECT_EQ(w[i], lo + static_cast<int64_t>(bits % static_cast<uint64_t>(hi - lo))) << i;
  }
  EXPECT_EQ(g2.offset(), 3u);
}

TEST(RandomStream, IndependentOfThreadCount) {
  ThreadGuard guard;
  auto draw = [] {
    ts::Generator g(2024);
    std::vector<std::vector<double>> r;
    r.push_back(ts::rand({1 << 20}, {}, &g).tolist<double>());
    r.push_back(ts::randn({300001}, ts::kFloat64, &g).tolist<double>());
    r.push_back(ts::randn({300001}, ts::kBFloat16, &g).tolist<double>());
    r.push_back(ts::randint(0, 1 << 30, {200003}, {}, &g).tolist<double>());
    r.push_back(ts::randperm(100000, ts::kInt64, &g).tolist<double>());
    ts::Tensor t = ts::empty({600, 700}).t();
    t.uniform_(-1, 1, &g);
    r.push_back(t.tolist<double>());
    r.push_back(ts::multinomial(ts::ones({50, 1000}), 100, false, &g).tolist<double>());
    r.push_back(ts::multinomial(ts::ones({50, 1000}), 100, true, &g).tolist<double>());
    return r;
  };
  ts::set_num_threads(1);
  auto one = draw();
  ts::set_num_threads(2);
  auto two = draw();
  ts::set_num_threads(3);
  auto three = draw();
  ASSERT_EQ(one.size(), two.size());
  for (size_t k = 0; k < one.size(); ++k) {
    EXPECT_EQ(one[k], two[k]) << "draw " << k;
    EXPECT_EQ(one[k], three[k]) << "draw " << k;
  }
}

TEST(RandomStream, NonContiguousOutputsFillInLogicalRowMajorOrder) {
  // Element i of a view is the i-th element of its logical row-major order, whatever its strides.
  for (const Layout& layout : layouts()) {
    ts::Tensor view = layout.apply(ts::zeros({37, 129}));
    ts::Generator g1(31), g2(31);
    view.uniform_(0, 1, &g1);
    EXPECT_EQ(view.tolist<float>(), ts::rand({37, 129}, {}, &g2).tolist<float>()) << layout.name;
    ts::Tensor iv = layout.apply(ts::zeros({40, 9000}, ts::kInt32));  // large enough to run in parallel
    ts::Generator g3(8), g4(8);
    iv.random_(-3, 3, &g3);
    EXPECT_EQ(iv.tolist<int32_t>(), ts::randint(-3, 3, {40, 9000}, ts::kInt32, &g4).tolist<int32_t>()) << layout.name;
    ts::Tensor nv = layout.apply(ts::zeros({5, 7}, ts::kFloat64));
    ts::Generator g5(9), g6(9);
    nv.normal_(0, 1, &g5);
    EXPECT_EQ(nv.tolist<double>(), ts::randn({5, 7}, ts::kFloat64, &g6).tolist<double>()) << layout.name;
  }
}

TEST(RandomStream, ZeroSizeAndScalarOutputs) {
  ts::Generator g(3);
  EXPECT_EQ(ts::rand({0, 4}, {}, &g).sizes(), (ts::Shape{0, 4}));
  EXPECT_EQ(ts::randint(5, {3, 0}, {}, &g).numel(), 0);
  EXPECT_EQ(g.offset(), 0u);
  ts::Tensor s = ts::randn({}, ts::kFloat64, &g);
  EXPECT_EQ(s.dim(), 0);
  ts::PhiloxBlock b = ts::philox4x32_10(3, 0);
  const double u1 = ts::uint2_to_unit_double(b.x[0], b.x[1]), u2 = ts::uint2_to_unit_double(b.x[2], b.x[3]);
  EXPECT_NEAR(s.item<double>(), std::sqrt(-2 * std::log1p(-u1)) * std::cos(2 * M_PI * u2), 1e-12);
  EXPECT_EQ(ts::randperm(0, ts::kInt64, &g).numel(), 0);
  EXPECT_EQ(ts::bernoulli(ts::zeros({0}), &g).numel(), 0);
  EXPECT_EQ(ts::bernoulli(ts::scalar_tensor(1.0, ts::kFloat32), &g).item<double>(), 1.0);
}

// ---- generator bookkeeping ------------------------------------------------------------------------
TEST(RandomGenerator, SameSeedSameNumbersAndFreshNumbersAfter) {
  ts::Generator a(42), b(42);
  ts::Tensor x1 = ts::randn({1000}, {}, &a), y1 = ts::randn({1000}, {}, &b);
  EXPECT_EQ(x1.tolist<float>(), y1.tolist<float>());
  ts::Tensor x2 = ts::randn({1000}, {}, &a);
  EXPECT_NE(x1.tolist<float>(), x2.tolist<float>());
  ts::Generator c(43);
  EXPECT_NE(ts::randn({1000}, {}, &c).tolist<float>(), y1.tolist<float>());
}

TEST(RandomGenerator, OffsetAdvancesByReservedCounters) {
  ts::Generator g(1);
  ts::rand({10}, {}, &g);  // 10 words -> 3 counters
  EXPECT_EQ(g.offset(), 3u);
  ts::rand({10}, ts::kFloat64, &g);  // 20 words -> 5
  EXPECT_EQ(g.offset(), 8u);
  ts::randn({3}, ts::kFloat16, &g);  // 6 words -> 2
  EXPECT_EQ(g.offset(), 10u);
  ts::randperm(5, ts::kInt64, &g);  // 10 words -> 3
  EXPECT_EQ(g.offset(), 13u);
  ts::multinomial(ts::ones({2, 4}), 3, true, &g);  // 6 samples, 12 words -> 3
  EXPECT_EQ(g.offset(), 16u);
  ts::multinomial(ts::ones({2, 4}), 3, false, &g);  // 8 categories, 16 words -> 4
  EXPECT_EQ(g.offset(), 20u);
  ts::rand({0}, {}, &g);
  EXPECT_EQ(g.offset(), 20u);
  ts::rand({2, 3}, ts::kMeta, &g);  // meta tensors draw nothing
  EXPECT_EQ(g.offset(), 20u);
}

TEST(RandomGenerator, ManualSeedResets) {
  ts::manual_seed(123);
  std::vector<float> first = ts::rand({100}).tolist<float>();
  std::vector<float> second = ts::rand({100}).tolist<float>();
  EXPECT_NE(first, second);
  ts::manual_seed(123);
  EXPECT_EQ(ts::rand({100}).tolist<float>(), first);
  ts::Generator g(123);
  EXPECT_EQ(ts::rand({100}, {}, &g).tolist<float>(), first);  // the default generator is a plain stream
  g.manual_seed(123);
  EXPECT_EQ(g.offset(), 0u);
  EXPECT_EQ(ts::rand({100}, {}, &g).tolist<float>(), first);
  ts::manual_seed(9);
  std::vector<float> r1 = ts::rand_like(ts::zeros({4, 5})).tolist<float>();
  ts::manual_seed(9);
  EXPECT_EQ(ts::rand({4, 5}).tolist<float>(), r1);
  ts::manual_seed(9);
  ts::Tensor r2 = ts::randn_like(ts::zeros({4, 5}, ts::kFloat64));
  EXPECT_EQ(r2.dtype(), ts::kFloat64);
  ts::manual_seed(9);
  EXPECT_EQ(ts::randn({4, 5}, ts::kFloat64).tolist<double>(), r2.tolist<double>());
}

// ---- statistics (fixed seeds: deterministic; bands of 5 sigma) -----------------------------------
TEST(RandomStats, UniformMeanVarianceAndChiSquare) {
  const int64_t n = 1 << 20;
  for (ts::DType dt : {ts::kFloat32, ts::kFloat64}) {
    ts::Generator g(11);
    std::vector<double> v = ts::rand({n}, dt, &g).tolist<double>();
    Moments m = moments(v);
    EXPECT_NEAR(m.mean, 0.5, 5 * std::sqrt(1.0 / 12 / n));
    EXPECT_NEAR(m.var, 1.0 / 12, 5 * std::sqrt((1.0 / 80 - 1.0 / 144) / n));
    std::vector<int64_t> bins(10);
    for (double x : v) bins[static_cast<int>(x * 10)]++;
    EXPECT_LT(chi_square_uniform(bins), kChi2Bound9);
  }
  ts::Generator g(12);
  ts::Tensor t = ts::empty({n}, ts::kFloat64);
  t.uniform_(-3, 5, &g);
  Moments m = moments(t.tolist<double>());
  EXPECT_NEAR(m.mean, 1.0, 5 * 8 * std::sqrt(1.0 / 12 / n));
  EXPECT_NEAR(m.var, 64.0 / 12, 5 * 64 * std::sqrt((1.0 / 80 - 1.0 / 144) / n));
}

TEST(RandomStats, NormalMeanAndVariance) {
  const int64_t n = 1 << 20;
  for (ts::DType dt : {ts::kFloat32, ts::kFloat64, ts::kBFloat16, ts::kFloat16}) {
    ts::Generator g(13);
    ts::Tensor t = ts::empty({n}, dt);
    t.normal_(2.0, 3.0, &g);
    Moments m = moments(t.tolist<double>());
    // bfloat16 rounding (relative 2^-9) adds a variance below 0.01 here: a band of its own.
    EXPECT_NEAR(m.mean, 2.0, 5 * 3 / std::sqrt(n)) << ts::dtype_name(dt);
    EXPECT_NEAR(m.var, 9.0, 5 * 9 * std::sqrt(2.0 / n) + (dt == ts::kBFloat16 ? 0.01 : 0)) << ts::dtype_name(dt);
  }
  // Tails: the fraction beyond 2 sigma is 4.55%.
  ts::Generator g(14);
  std::vector<double> v = ts::randn({n}, ts::kFloat64, &g).tolist<double>();
  const double beyond =
      static_cast<double>(std::count_if(v.begin(), v.end(), [](double x) { return std::fabs(x) > 2; })) / n;
  EXPECT_NEAR(beyond, 0.0455003, 5 * std::sqrt(0.0455 * 0.9545 / n));
}

TEST(RandomStats, RandintChiSquareAndBernoulliFrequency) {
  const int64_t n = 1 << 20;
  ts::Generator g(15);
  std::vector<int64_t> v = ts::randint(10, {n}, {}, &g).tolist<int64_t>();
  std::vector<int64_t> bins(10);
  for (int64_t x : v) bins[x]++;
  EXPECT_LT(chi_square_uniform(bins), kChi2Bound9);

  for (ts::DType dt : {ts::kFloat32, ts::kBool, ts::kInt64, ts::kBFloat16}) {
    ts::Tensor b = ts::empty({n}, dt);
    b.bernoulli_(0.3, &g);
    std::vector<double> bv = b.tolist<double>();
    const double ones = static_cast<double>(std::count(bv.begin(), bv.end(), 1.0));
    EXPECT_EQ(ones + static_cast<double>(std::count(bv.begin(), bv.end(), 0.0)), static_cast<double>(n));
    EXPECT_NEAR(ones / n, 0.3, 5 * std::sqrt(0.3 * 0.7 / n)) << ts::dtype_name(dt);
  }
  // Tensor p: each element with its own probability; the output has p's dtype.
  std::vector<double> probs(n);
  for (int64_t i = 0; i < n; ++i) probs[i] = i % 2 ? 0.8 : 0.1;
  ts::Tensor out = ts::bernoulli(ts::tensor(probs, {}, ts::kFloat64), &g);
  EXPECT_EQ(out.dtype(), ts::kFloat64);
  std::vector<double> bv = out.tolist<double>();
  double odd = 0, even = 0;
  for (int64_t i = 0; i < n; ++i) (i % 2 ? odd : even) += bv[i];
  EXPECT_NEAR(odd / (n / 2), 0.8, 5 * std::sqrt(0.16 / (n / 2)));
  EXPECT_NEAR(even / (n / 2), 0.1, 5 * std::sqrt(0.09 / (n / 2)));
  // p = 0 and p = 1 are exact; a transposed p is read in its logical order.
  ts::Tensor pm = ts::tensor({0., 1., 0., 1., 1., 0.}).view({2, 3}).t();  // [[0,1],[1,0],[0,1]] -> t
  EXPECT_EQ(ts::bernoulli(pm, &g).tolist<float>(), pm.tolist<float>());
  ts::Tensor zero = ts::zeros({1000});
  zero.bernoulli_(0.0, &g);
  EXPECT_EQ(zero.tolist<float>(), std::vector<float>(1000, 0.f));
  zero.bernoulli_(1.0, &g);
  EXPECT_EQ(zero.tolist<float>(), std::vector<float>(1000, 1.f));
}

TEST(RandomStats, MultinomialWithReplacementFollowsProbabilities) {
  const std::vector<double> p = {0.1, 0.0, 0.2, 0.3, 0.4};
  ts::Generator g(16);
  const int64_t n = 200000;
  ts::Tensor s = ts::multinomial(ts::tensor(p, {}, ts::kFloat64), n, true, &g);
  EXPECT_EQ(s.sizes(), (ts::Shape{n}));
  EXPECT_EQ(s.dtype(), ts::kInt64);
  std::vector<int64_t> counts(5);
  for (int64_t c : s.tolist<int64_t>()) counts[c]++;
  EXPECT_EQ(counts[1], 0);
  for (int c = 0; c < 5; ++c)
    EXPECT_NEAR(static_cast<double>(counts[c]) / n, p[c], 5 * std::sqrt(p[c] * (1 - p[c]) / n) + 1e-12) << c;
  // Unnormalized weights mean the same distribution.
  ts::Generator g2(16);
  ts::Tensor w = ts::tensor({1., 0., 2., 3., 4.});
  std::vector<int64_t> counts2(5);
  for (int64_t c : ts::multinomial(w, n, true, &g2).tolist<int64_t>()) counts2[c]++;
  for (int c = 0; c < 5; ++c)
    EXPECT_NEAR(static_cast<double>(counts2[c]) / n, p[c], 5 * std::sqrt(p[c] * (1 - p[c]) / n) + 1e-12) << c;
}

TEST(RandomStats, MultinomialWithoutReplacement) {
  ts::Generator g(17);
  // Each row: distinct categories, never a zero-probability one.
  ts::Tensor probs = ts::tensor({0.2, 0., 0.5, 0.3, 1., 1., 0., 1.}, ts::kFloat64).view({2, 4});
  for (int rep = 0; rep < 50; ++rep) {
    std::vector<int64_t> s = ts::multinomial(probs, 3, false, &g).tolist<int64_t>();
    ASSERT_EQ(s.size(), 6u);
    EXPECT_EQ(std::set<int64_t>(s.begin(), s.begin() + 3), (std::set<int64_t>{0, 2, 3}));
    EXPECT_EQ(std::set<int64_t>(s.begin() + 3, s.end()), (std::set<int64_t>{0, 1, 3}));
  }
  // The first draw follows the probabilities.
  const int64_t n = 100000;
  std::vector<int64_t> first(3);
  ts::Tensor many = ts::tensor({0.2, 0.5, 0.3}).view({1, 3}).expand({n, 3});
  std::vector<int64_t> s = ts::multinomial(many, 2, false, &g).tolist<int64_t>();
  for (int64_t r = 0; r < n; ++r) {
    first[s[2 * r]]++;
    EXPECT_NE(s[2 * r], s[2 * r + 1]);
  }
  const double p[3] = {0.2, 0.5, 0.3};
  for (int c = 0; c < 3; ++c) EXPECT_NEAR(static_cast<double>(first[c]) / n, p[c], 5 * std::sqrt(p[c] * (1 - p[c]) / n));
}

// ---- values in range, every dtype ----------------------------------------------------------------
TEST(RandomRange, UniformNeverReturnsTheUpperBound) {
  const int64_t n = 1 << 20;
  for (ts::DType dt : float_dtypes()) {
    for (auto [from, to] : {std::pair{0.0, 1.0}, std::pair{1.0, 2.0}, std::pair{-2.0, -1.0}, std::pair{3.0, 3.0}}) {
      ts::Generator g(18);
      ts::Tensor t = ts::empty({n}, dt);
      t.uniform_(from, to, &g);
      std::vector<double> v = t.tolist<double>();
      const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
      EXPECT_GE(*lo, from) << ts::dtype_name(dt) << " [" << from << ", " << to << ")";
      if (from < to) {
        EXPECT_LT(*hi, to) << ts::dtype_name(dt) << " [" << from << ", " << to << ")";
      } else {
        EXPECT_EQ(*hi, from);
      }
    }
    ts::Generator g(19);
    std::vector<double> r = ts::rand({4, 5}, dt, &g).tolist<double>();
    EXPECT_TRUE(std::all_of(r.begin(), r.end(), [](double x) { return x >= 0 && x < 1; }));
    EXPECT_EQ(ts::rand({2}, dt, &g).dtype(), dt);
  }
}

TEST(RandomRange, RandintAndRandomInEveryDtype) {
  struct Case {
    ts::DType dt;
    int64_t lo, hi;
  };
  const Case cases[] = {{ts::kUInt8, 0, 256},   {ts::kInt8, -128, 128},      {ts::kInt32, -7, 9},
                        {ts::kInt64, -100, -90}, {ts::kFloat32, -50, 50},     {ts::kFloat64, 0, 3},
                        {ts::kFloat16, -2048, 2049}, {ts::kBFloat16, -256, 257}, {ts::kBool, 0, 2},
                        {ts::kInt64, INT64_MIN, INT64_MAX}};
  for (const Case& c : cases) {
    ts::Generator g(20);
    ts::Tensor t = ts::randint(c.lo, c.hi, {20000}, c.dt, &g);
    EXPECT_EQ(t.dtype(), c.dt);
    std::vector<int64_t> v = t.tolist<int64_t>();
    std::set<int64_t> seen(v.begin(), v.end());
    EXPECT_GE(*seen.begin(), c.lo) << ts::dtype_name(c.dt);
    EXPECT_LE(*seen.rbegin(), c.hi - 1) << ts::dtype_name(c.dt);
    if (static_cast<uint64_t>(c.hi) - static_cast<uint64_t>(c.lo) <= 20) {
      EXPECT_EQ(static_cast<int64_t>(seen.size()), c.hi - c.lo) << ts::dtype_name(c.dt);  // every value hit
    }
    if (t.is_floating_point()) {
      for (double x : t.tolist<double>()) ASSERT_EQ(x, std::floor(x));
    }
  }
  ts::Generator g(21);
  ts::Tensor u = ts::zeros({1000}, ts::kUInt8);
  u.random_(250, 256, &g);
  std::vector<int64_t> v = u.tolist<int64_t>();
  EXPECT_TRUE(std::all_of(v.begin(), v.end(), [](int64_t x) { return x >= 250 && x <= 255; }));
  EXPECT_EQ(ts::randint(5, {3}).dtype(), ts::kInt64);
}

TEST(RandomRange, RandpermIsAPermutationAndDeterministic) {
  for (ts::DType dt : {ts::kInt64, ts::kInt32, ts::kFloat32, ts::kInt8, ts::kFloat64}) {
    ts::Generator g(22), g2(22), g3(23);
    const int64_t n = dt == ts::kInt8 ? 128 : 5000;
    ts::Tensor p = ts::randperm(n, dt, &g);
    EXPECT_EQ(p.dtype(), dt);
    std::vector<int64_t> v = p.tolist<int64_t>(), sorted = v;
    std::sort(sorted.begin(), sorted.end());
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(sorted[i], i) << ts::dtype_name(dt);
    EXPECT_EQ(ts::randperm(n, dt, &g2).tolist<int64_t>(), v);
    EXPECT_NE(ts::randperm(n, dt, &g3).tolist<int64_t>(), v);
  }
  // Every position is uniform: position 0 over many draws of randperm(4).
  ts::Generator g(24);
  std::vector<int64_t> counts(4);
  for (int k = 0; k < 4000; ++k) counts[ts::randperm(4, ts::kInt64, &g).tolist<int64_t>()[0]]++;
  for (int64_t c : counts) EXPECT_NEAR(c, 1000, 5 * std::sqrt(4000 * 0.25 * 0.75));
}

// ---- meta ------------------------------------------------------------------------------------------
TEST(RandomMeta, ShapesAndDtypesWithoutData) {
  ts::Tensor r = ts::randn({2, 3}, {ts::kFloat16, ts::kMeta});
  EXPECT_TRUE(r.is_meta());
  EXPECT_EQ(r.sizes(), (ts::Shape{2, 3}));
  EXPECT_EQ(r.dtype(), ts::kFloat16);
  EXPECT_EQ(ts::randint(0, 5, {4}, ts::kMeta).dtype(), ts::kInt64);
  EXPECT_EQ(ts::randperm(7, {ts::kInt32, ts::kMeta}).sizes(), (ts::Shape{7}));
  ts::Tensor pm = ts::empty({3, 5}, ts::kMeta);
  EXPECT_EQ(ts::multinomial(pm, 2).sizes(), (ts::Shape{3, 2}));
  EXPECT_EQ(ts::multinomial(ts::empty({5}, ts::kMeta), 4, true).sizes(), (ts::Shape{4}));
  EXPECT_EQ(ts::bernoulli(pm).sizes(), (ts::Shape{3, 5}));
  ts::Tensor m = ts::empty({4}, ts::kMeta);
  EXPECT_EQ(&m.uniform_(0, 1), &m);
  EXPECT_THROW(ts::rand({2}, {ts::kInt32, ts::kMeta}), ts::DTypeError);
}

// ---- errors ----------------------------------------------------------------------------------------
TEST(RandomErrors, ValueErrors) {
  ts::Tensor t = ts::zeros({4});
  EXPECT_THROW(t.uniform_(2, 1), ts::ValueError);
  EXPECT_THROW(t.uniform_(0, INFINITY), ts::ValueError);
  EXPECT_THROW(t.uniform_(NAN, 1), ts::ValueError);
  EXPECT_THROW(ts::zeros({2}, ts::kFloat16).uniform_(-60000, 60000), ts::ValueError);  // range overflows half
  EXPECT_THROW(t.normal_(0, -1), ts::ValueError);
  EXPECT_THROW(t.bernoulli_(1.5), ts::ValueError);
  EXPECT_THROW(t.bernoulli_(-0.1), ts::ValueError);
  EXPECT_THROW(t.bernoulli_(NAN), ts::ValueError);
  EXPECT_THROW(ts::bernoulli(ts::tensor({0.5, 1.5})), ts::ValueError);
  EXPECT_THROW(ts::bernoulli(ts::tensor({0.5, NAN})), ts::ValueError);
  EXPECT_THROW(ts::randint(5, 5, {2}), ts::ValueError);
  EXPECT_THROW(ts::randint(6, 5, {2}), ts::ValueError);
  EXPECT_THROW(ts::randint(0, {2}), ts::ValueError);
  EXPECT_THROW(ts::randint(0, 1000, {2}, ts::kInt8), ts::ValueError);    // out of int8's range
  EXPECT_THROW(ts::randint(-1, 3, {2}, ts::kUInt8), ts::ValueError);
  EXPECT_THROW(ts::randint(0, 3, {2}, ts::kBool), ts::ValueError);
  EXPECT_THROW(ts::randint(0, (1 << 24) + 2, {2}, ts::kFloat32), ts::ValueError);  // not exact in float32
  EXPECT_THROW(ts::randperm(-1), ts::ValueError);
  EXPECT_THROW(ts::randperm(300, ts::kInt8), ts::ValueError);
  // writing into an expanded tensor
  ts::Tensor e = ts::zeros({1}).expand({4});
  EXPECT_THROW(e.uniform_(), ts::ValueError);
  EXPECT_THROW(e.normal_(), ts::ValueError);
}

TEST(RandomErrors, MultinomialErrors) {
  ts::Tensor p = ts::tensor({0.5, 0.5, 0.0});
  EXPECT_THROW(ts::multinomial(p, 3, false), ts::ValueError);    // 2 nonzero categories
  EXPECT_THROW(ts::multinomial(p, 4, false), ts::ValueError);    // more than the categories
  EXPECT_THROW(ts::multinomial(p, 0, true), ts::ValueError);
  EXPECT_THROW(ts::multinomial(ts::tensor({0.5, -0.1}), 1), ts::ValueError);
  EXPECT_THROW(ts::multinomial(ts::tensor({0.5, INFINITY}), 1), ts::ValueError);
  EXPECT_THROW(ts::multinomial(ts::tensor({0.5, NAN}), 1), ts::ValueError);
  EXPECT_THROW(ts::multinomial(ts::zeros({2, 3}), 1, true), ts::ValueError);  // zero-sum rows
  EXPECT_THROW(ts::multinomial(ts::zeros({0}), 1, true), ts::ValueError);     // no categories
  EXPECT_THROW(ts::multinomial(ts::ones({2, 2, 2}), 1), ts::ShapeError);
  EXPECT_THROW(ts::multinomial(ts::ones({3}, ts::kInt64), 1), ts::DTypeError);
  EXPECT_NO_THROW(ts::multinomial(p, 2, false));
  EXPECT_NO_THROW(ts::multinomial(p, 10, true));
  EXPECT_EQ(ts::multinomial(ts::ones({0, 3}), 2).sizes(), (ts::Shape{0, 2}));
}

TEST(RandomErrors, DTypeErrors) {
  EXPECT_THROW(ts::randn({2}, ts::kBool), ts::DTypeError);
  EXPECT_THROW(ts::randn({2}, ts::kInt64), ts::DTypeError);
  EXPECT_THROW(ts::rand({2}, ts::kInt32), ts::DTypeError);
  EXPECT_THROW(ts::zeros({2}, ts::kInt64).uniform_(), ts::DTypeError);
  EXPECT_THROW(ts::zeros({2}, ts::kInt64).normal_(), ts::DTypeError);
  EXPECT_THROW(ts::bernoulli(ts::ones({2}, ts::kInt64)), ts::DTypeError);
  EXPECT_THROW(ts::randperm(3, ts::kBool), ts::DTypeError);
  EXPECT_THROW(ts::rand_like(ts::zeros({2}, ts::kInt64)), ts::DTypeError);
}

TEST(RandomErrors, MetaDoesNotCheckData) {
  // Data-dependent checks (bernoulli's p, multinomial's rows) need values; meta tensors have none.
  EXPECT_NO_THROW(ts::bernoulli(ts::empty({3}, ts::kMeta)));
  EXPECT_THROW(ts::multinomial(ts::empty({3}, ts::kMeta), 4, false), ts::ValueError);  // shape-level check
}
