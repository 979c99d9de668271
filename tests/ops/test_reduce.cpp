// Reductions against float64 references computed on the host from tolist<double>(): every op in
// every dtype it takes, on contiguous, transposed and step-sliced inputs, over single and multiple
// (negative) dims with and without keepdim, 0-dim and zero-size inputs, long reductions for accuracy,
// NaN handling, errors and meta-device shapes.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>

#include "common/test_util.h"

namespace ts = tessera;
using namespace tessera::testing;

namespace {

const std::vector<int64_t> kAll{};  // every dim
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Deterministic values uniform in [lo, hi) (integral dtypes: floored; bool: 0/1).
ts::Tensor uniform(const ts::Shape& sizes, ts::DType dt, double lo, double hi, uint64_t seed = 1) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  std::vector<double> v(static_cast<size_t>(n));
  uint64_t state = seed * 0x9E3779B97F4A7C15ull + 12345;
  for (auto& x : v) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    double u = static_cast<double>(state >> 11) / 9007199254740992.0;
    if (dt == ts::kBool) x = (state >> 40) & 1;
    else if (ts::is_floating_point(dt)) x = lo + (hi - lo) * u;
    else x = std::floor(lo + (hi - lo) * u);
    if (dt == ts::kUInt8) x = std::fabs(x);  // negative doubles do not convert to uint8
  }
  return ts::tensor(v, {n}, ts::TensorOptions(ts::kFloat64)).to(dt).reshape(sizes);
}

ts::Tensor from_values(const std::vector<double>& v, const ts::Shape& sizes) {
  return ts::tensor(v, {static_cast<int64_t>(v.size())}, ts::TensorOptions(ts::kFloat64)).reshape(sizes);
}

// The float64 reference of a reduction: groups x's values by output position (row-major over the
// kept dims) and applies `fn` to each group.
ts::Tensor reference(const ts::Tensor& x, std::vector<int64_t> dims, bool keepdim,
                     const std::function<double(const std::vector<double>&)>& fn) {
  const int64_t nd = x.dim();
  std::vector<bool> red(static_cast<size_t>(nd), dims.empty());
  for (int64_t d : dims) if (nd > 0) red[(d + nd) % nd] = true;
  ts::Shape out_sizes, kept;
  for (int64_t d = 0; d < nd; ++d) {
    if (red[d]) {
      if (keepdim) out_sizes.push_back(1);
    } else {
      out_sizes.push_back(x.size(d));
      kept.push_back(d);
    }
  }
  int64_t nout = 1;
  for (int64_t d : kept) nout *= x.size(d);
  std::vector<std::vector<double>> groups(static_cast<size_t>(nout));
  std::vector<double> vals = x.tolist<double>();
  std::vector<int64_t> idx(static_cast<size_t>(nd), 0);
  for (size_t i = 0; i < vals.size(); ++i) {
    int64_t o = 0;
    for (int64_t d : kept) o = o * x.size(d) + idx[d];
    groups[o].push_back(vals[i]);
    for (int64_t d = nd - 1; d >= 0; --d) {
      if (++idx[d] < x.size(d)) break;
      idx[d] = 0;
    }
  }
  std::vector<double> out;
  for (auto& g : groups) out.push_back(fn(g));
  return from_values(out, out_sizes);
}

double ref_sum(const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0); }
double ref_prod(const std::vector<double>& v) {
  return std::accumulate(v.begin(), v.end(), 1.0, std::multiplies<>());
}
// NaN propagates: the first NaN ends the search.
double ref_max(const std::vector<double>& v) {
  double m = -kInf;
  for (double x : v) {
    if (std::isnan(m)) break;
    if (std::isnan(x) || x > m) m = x;
  }
  return m;
}
double ref_min(const std::vector<double>& v) {
  double m = kInf;
  for (double x : v) {
    if (std::isnan(m)) break;
    if (std::isnan(x) || x < m) m = x;
  }
  return m;
}
double ref_var(const std::vector<double>& v, double correction) {
  double mu = ref_sum(v) / v.size(), m2 = 0;
  for (double x : v) m2 += (x - mu) * (x - mu);
  return m2 / std::max(0.0, v.size() - correction);
}
double ref_pnorm(const std::vector<double>& v, double p) {
  if (p == kInf || p == -kInf) {
    if (v.empty()) return 0;
    double m = std::fabs(v[0]);
    for (double x : v) m = p > 0 ? std::max(m, std::fabs(x)) : std::min(m, std::fabs(x));
    return m;
  }
  double s = 0;
  for (double x : v) s += p == 0 ? (x != 0) : std::pow(std::fabs(x), p);
  return p == 0 ? s : std::pow(s, 1 / p);
}
double ref_lse(const std::vector<double>& v) {
  double m = ref_max(v);
  if (std::isinf(m)) m = 0;
  double s = 0;
  for (double x : v) s += std::exp(x - m);
  return std::log(s) + m;
}

using RunFn = std::function<ts::Tensor(const ts::Tensor&, std::vector<int64_t>, bool)>;
struct Case {
  std::string name;
  RunFn run;
  std::function<double(const std::vector<double>&)> ref;
  std::vector<ts::DType> dtypes;
  std::function<ts::DType(ts::DType)> out_dtype;
  double lo, hi;        // data range (floats: uniform; integers: floored)
  bool ints = false;    // integer-valued data in every dtype (so floats hold exact zeros)
};

ts::DType same(ts::DType d) { return d; }
ts::DType int64_if_integral(ts::DType d) { return ts::is_integral(d, true) ? ts::kInt64 : d; }

std::vector<Case> cases() {
  auto fl = float_dtypes();
  auto all = all_dtypes();
  std::vector<ts::DType> no_bool = {ts::kUInt8, ts::kInt8, ts::kInt32, ts::kInt64, ts::kFloat16, ts::kBFloat16, ts::kFloat32, ts::kFloat64};
  auto norm = [](double p) {
    return [p](const ts::Tensor& x, std::vector<int64_t> d, bool k) { return ts::norm(x, p, ts::Dims(d), k); };
  };
  auto pref = [](double p) { return [p](const std::vector<double>& v) { return ref_pnorm(v, p); }; };
  auto var = [](double c, bool sq) {
    return [c, sq](const ts::Tensor& x, std::vector<int64_t> d, bool k) {
      return sq ? ts::std(x, ts::Dims(d), c, k) : ts::var(x, ts::Dims(d), c, k);
    };
  };
  auto vref = [](double c, bool sq) {
    return [c, sq](const std::vector<double>& v) { return sq ? std::sqrt(ref_var(v, c)) : ref_var(v, c); };
  };
  return {
      // Float sums of positive data: with cancellation a float32 sum's error is bounded relative to
      // sum |x|, not to the result, so signed float data would test the data rather than the kernel.
      {"sum", [](const ts::Tensor& x, auto d, bool k) { return ts::sum(x, d, k); }, ref_sum, fl, same, 0, 5},
      {"sum_int", [](const ts::Tensor& x, auto d, bool k) { return ts::sum(x, d, k); }, ref_sum,
       {ts::kBool, ts::kUInt8, ts::kInt8, ts::kInt32, ts::kInt64}, int64_if_integral, -50, 50},
      {"mean", [](const ts::Tensor& x, auto d, bool k) { return ts::mean(x, d, k); },
       [](const std::vector<double>& v) { return ref_sum(v) / v.size(); }, fl, same, 0, 5},
      {"prod", [](const ts::Tensor& x, auto d, bool k) { return ts::prod(x, d, k); }, ref_prod, no_bool, int64_if_integral, -1, 3},
      {"prod_f", [](const ts::Tensor& x, auto d, bool k) { return ts::prod(x, d, k); }, ref_prod, fl, same, 0.5, 1.5},
      {"prod_bool", [](const ts::Tensor& x, auto d, bool k) { return ts::prod(x, d, k); }, ref_prod, {ts::kBool}, int64_if_integral, 0, 2},
      {"amax", [](const ts::Tensor& x, auto d, bool k) { return ts::amax(x, d, k); }, ref_max, all, same, -50, 50},
      {"amin", [](const ts::Tensor& x, auto d, bool k) { return ts::amin(x, d, k); }, ref_min, all, same, -50, 50},
      {"any", [](const ts::Tensor& x, auto d, bool k) { return ts::any(x, d, k); },
       [](const std::vector<double>& v) { return double(std::any_of(v.begin(), v.end(), [](double a) { return a != 0; })); },
       all, [](ts::DType) { return ts::kBool; }, -1, 1.2, true},
      {"all", [](const ts::Tensor& x, auto d, bool k) { return ts::all(x, d, k); },
       [](const std::vector<double>& v) { return double(std::all_of(v.begin(), v.end(), [](double a) { return a != 0; })); },
       all, [](ts::DType) { return ts::kBool; }, -0.05, 4, true},
      {"norm2", norm(2), pref(2), fl, same, -3, 3},
      {"norm1", norm(1), pref(1), fl, same, -3, 3},
      {"norm0", norm(0), pref(0), fl, same, -1, 2, true},
      {"norm_inf", norm(kInf), pref(kInf), fl, same, -3, 3},
      {"norm_neginf", norm(-kInf), pref(-kInf), fl, same, -3, 3},
      {"norm3", norm(3), pref(3), fl, same, -3, 3},
      {"norm0.5", norm(0.5), pref(0.5), fl, same, -3, 3},
      {"norm_fro", [](const ts::Tensor& x, auto d, bool k) { return ts::norm(x, "fro", ts::Dims(d), k); }, pref(2), fl, same, -3, 3},
      {"var", var(1, false), vref(1, false), fl, same, -3, 3},
      {"var_c0", var(0, false), vref(0, false), fl, same, -3, 3},
      {"std", var(1, true), vref(1, true), fl, same, -3, 3},
      {"std_c2.5", var(2.5, true), vref(2.5, true), fl, same, -3, 3},
      {"logsumexp", [](const ts::Tensor& x, auto d, bool k) { return ts::logsumexp(x, d, k); }, ref_lse, fl, same, -5, 5},
      {"logsumexp_int", [](const ts::Tensor& x, auto d, bool k) { return ts::logsumexp(x, d, k); }, ref_lse,
       {ts::kBool, ts::kUInt8, ts::kInt8, ts::kInt32, ts::kInt64}, [](ts::DType) { return ts::kFloat32; }, -5, 5},
  };
}

void check_case(const Case& c, const ts::Shape& shape, const std::vector<std::vector<int64_t>>& dim_sets) {
  for (ts::DType dt : c.dtypes) {
    ts::Tensor base = c.ints && dt != ts::kBool ? uniform(shape, ts::kInt64, c.lo, c.hi, 7).to(dt)
                                                : uniform(shape, dt, c.lo, c.hi, 7);
    for (const Layout& lay : layouts()) {
      ts::Tensor x = lay.apply(base);
      for (const auto& dims : dim_sets) {
        for (bool keepdim : {false, true}) {
          SCOPED_TRACE(c.name + " " + ts::dtype_name(dt) + " " + lay.name + " dims " +
                       ::testing::PrintToString(dims) + (keepdim ? " keepdim" : ""));
          ts::Tensor got = c.run(x, dims, keepdim);
          ASSERT_EQ(got.dtype(), c.out_dtype(dt));
          ts::Tensor want = reference(base, dims, keepdim, c.ref);
          EXPECT_TRUE(all_close(got, want));
        }
      }
    }
  }
}

}  // namespace

TEST(Reduce, AllOpsDtypesLayoutsDims3D) {
  std::vector<std::vector<int64_t>> dims = {{}, {0}, {1}, {2}, {-1}, {0, 2}, {-1, 1}, {0, 1}, {2, 0, 1}};
  for (const Case& c : cases()) check_case(c, {3, 4, 5}, dims);
}

TEST(Reduce, AllOpsDtypesLayoutsDims4D) {
  std::vector<std::vector<int64_t>> dims = {{1, 3}, {0, 2}, {-1, -3}, {3}, {0}};
  for (const Case& c : cases()) check_case(c, {2, 3, 4, 5}, dims);
}

TEST(Reduce, WideRowsBothTraversals) {
  // 130 columns exceed one output tile of the outer traversal; 300 rows exceed a leaf of rows.
  std::vector<std::vector<int64_t>> dims = {{0}, {1}};  // (a full float16 sum would overflow)
  for (const Case& c : cases())
    if (c.name == "sum" || c.name == "sum_int" || c.name == "amax" || c.name == "norm2" || c.name == "any" || c.name == "var")
      check_case(c, {300, 130}, dims);
}

TEST(Reduce, NarrowColumns) {
  // Outputs 2..16 wide over contiguous rows take the lane-per-column traversal.
  for (const Case& c : cases()) {
    if (c.name == "norm0.5") continue;  // overflows float16 over 1000 rows
    check_case(c, {1000, 4}, {{0}, {-2}});
    check_case(c, {3, 200, 8}, {{1}});
    check_case(c, {2, 3, 2}, {{1}, {0, 1}});
  }
}

TEST(Reduce, ZeroDimInputs) {
  for (ts::DType dt : all_dtypes()) {
    ts::Tensor x = ts::full({}, 3, dt);
    for (std::vector<int64_t> d : {std::vector<int64_t>{}, {0}, {-1}}) {
      for (bool k : {false, true}) {
        ts::Tensor s = ts::sum(x, d, k);
        EXPECT_EQ(s.dim(), 0);
        EXPECT_EQ(s.item<double>(), dt == ts::kBool ? 1 : 3);
        EXPECT_EQ(ts::amax(x, d, k).item<double>(), dt == ts::kBool ? 1 : 3);
        EXPECT_EQ(ts::prod(x, d, k).dim(), 0);
        EXPECT_TRUE(ts::any(x, d, k).item<bool>());
      }
    }
    if (dt != ts::kBool) {
      EXPECT_EQ(ts::argmax(x).item<int64_t>(), 0);
      EXPECT_EQ(ts::argmin(x, 0).item<int64_t>(), 0);
    }
    auto [v, i] = ts::max(x, -1);
    EXPECT_EQ(v.dim(), 0);
    EXPECT_EQ(i.item<int64_t>(), 0);
  }
  ts::Tensor f = ts::full({}, 2.5, ts::kFloat64);
  EXPECT_EQ(ts::mean(f, 0).item<double>(), 2.5);
  EXPECT_TRUE(std::isnan(ts::var(f).item<double>()));
  EXPECT_EQ(ts::var(f, std::nullopt, 0).item<double>(), 0);
  EXPECT_EQ(ts::norm(f).item<double>(), 2.5);
  EXPECT_EQ(ts::logsumexp(f, 0).item<double>(), 2.5);
  EXPECT_THROW(ts::sum(f, 1), ts::IndexError);
}

TEST(Reduce, ZeroSizeInputs) {
  ts::Tensor e = ts::zeros({0, 3});
  EXPECT_EQ(ts::sum(e).item<double>(), 0);
  EXPECT_EQ(ts::prod(e).item<double>(), 1);
  EXPECT_TRUE(std::isnan(ts::mean(e).item<double>()));
  EXPECT_TRUE(all_close(ts::sum(e, 0), ts::zeros({3})));
  EXPECT_TRUE(all_close(ts::prod(e, 0, true), ts::ones({1, 3})));
  EXPECT_EQ(ts::sum(e, 1).sizes(), (ts::Shape{0}));
  EXPECT_EQ(ts::amax(e, 1).sizes(), (ts::Shape{0}));  // the reduced dim is not the empty one
  EXPECT_EQ(std::get<1>(ts::max(e, 1)).sizes(), (ts::Shape{0}));
  EXPECT_EQ(ts::argmax(e, 1).sizes(), (ts::Shape{0}));
  EXPECT_FALSE(ts::any(e).item<bool>());
  EXPECT_TRUE(ts::all(e).item<bool>());
  EXPECT_EQ(ts::norm(e).item<double>(), 0);
  EXPECT_EQ(ts::norm(e, kInf).item<double>(), 0);
  EXPECT_EQ(ts::norm(e, -kInf).item<double>(), 0);
  EXPECT_TRUE(std::isnan(ts::var(e).item<double>()));
  auto [vv, vm] = ts::var_mean(ts::zeros({3, 0}), 1);
  EXPECT_EQ(vv.sizes(), (ts::Shape{3}));
  EXPECT_TRUE(std::isnan(vv.tolist<double>()[0]) && std::isnan(vm.tolist<double>()[2]));
  EXPECT_TRUE(all_close(ts::logsumexp(ts::zeros({3, 0}), 1), from_values({-kInf, -kInf, -kInf}, {3}).to(ts::kFloat32)));
  EXPECT_EQ(ts::sum(ts::zeros({0}, ts::kInt32)).dtype(), ts::kInt64);
  // Reductions without an identity refuse an empty reduced dim.
  EXPECT_THROW(ts::amax(e, 0), ts::IndexError);
  EXPECT_THROW(ts::amin(e, {0, 1}), ts::IndexError);
  EXPECT_THROW(ts::amax(e), ts::ValueError);
  EXPECT_THROW(ts::max(e), ts::ValueError);
  EXPECT_THROW(ts::min(e, 0), ts::IndexError);
  EXPECT_THROW(ts::argmax(e), ts::IndexError);
  EXPECT_THROW(ts::argmin(e, 0), ts::IndexError);
}

TEST(Reduce, DtypeArgumentAndResultDtypes) {
  ts::Tensor u = from_values({200, 100}, {2}).to(ts::kUInt8);
  EXPECT_EQ(ts::sum(u).item<int64_t>(), 300);
  EXPECT_EQ(ts::sum(u).dtype(), ts::kInt64);
  EXPECT_EQ(ts::sum(u, kAll, false, ts::kUInt8).item<int64_t>(), 44);  // wraps as PyTorch
  EXPECT_TRUE(ts::sum(u, kAll, false, ts::kBool).item<bool>());
  ts::Tensor f = from_values({1.5, 2.5, 2.0}, {3}).to(ts::kFloat32);
  EXPECT_EQ(ts::sum(f, kAll, false, ts::kInt32).item<int64_t>(), 5);  // cast first: 1 + 2 + 2
  EXPECT_EQ(ts::sum(f, kAll, false, ts::kInt32).dtype(), ts::kInt32);
  EXPECT_EQ(ts::prod(f, kAll, false, ts::kInt64).item<int64_t>(), 4);
  ts::Tensor i = ts::arange(6).view({2, 3});
  ts::Tensor m = ts::mean(i, {1}, false, ts::kFloat64);
  EXPECT_EQ(m.dtype(), ts::kFloat64);
  EXPECT_EQ(m.tolist<double>(), (std::vector<double>{1, 4}));
  EXPECT_EQ(ts::mean(i.to(ts::kFloat32), kAll, false, ts::kFloat16).dtype(), ts::kFloat16);
  ts::Tensor b = from_values({1, 0, 1}, {3}).to(ts::kBool);
  EXPECT_EQ(ts::sum(b).item<int64_t>(), 2);
  EXPECT_EQ(ts::prod(b).dtype(), ts::kInt64);
  EXPECT_EQ(ts::amax(b).dtype(), ts::kBool);
  EXPECT_EQ(ts::any(ts::arange(3).to(ts::kUInt8)).dtype(), ts::kBool);
  // Integer sums wrap in int64 rather than saturate or trap.
  ts::Tensor big = from_values({9.0e18, 9.0e18}, {2}).to(ts::kInt64);
  EXPECT_EQ(ts::sum(big).item<int64_t>(), static_cast<int64_t>(static_cast<uint64_t>(9000000000000000000ll) * 2));
  // Tensor methods forward to the same ops.
  EXPECT_EQ(i.sum().item<int64_t>(), 15);
  EXPECT_EQ(i.prod(1).tolist<int64_t>(), (std::vector<int64_t>{0, 60}));
  EXPECT_EQ(i.any(1, true).sizes(), (ts::Shape{2, 1}));
}

TEST(Reduce, MaxMinWithIndices) {
  // ties: the first occurrence; every layout; keepdim
  ts::Tensor base = from_values({3, 1, 3, 2, 5, 5, 0, 5, -1, -1, 4, -1}, {3, 4});
  for (ts::DType dt : {ts::kInt8, ts::kInt32, ts::kInt64, ts::kFloat16, ts::kBFloat16, ts::kFloat32, ts::kFloat64}) {
    for (const Layout& lay : layouts()) {
      ts::Tensor x = lay.apply(base.to(dt));
      SCOPED_TRACE(std::string(ts::dtype_name(dt)) + " " + lay.name);
      auto [v1, i1] = ts::max(x, 1);
      EXPECT_EQ(v1.dtype(), dt);
      EXPECT_EQ(v1.tolist<double>(), (std::vector<double>{3, 5, 4}));
      EXPECT_EQ(i1.tolist<int64_t>(), (std::vector<int64_t>{0, 0, 2}));
      auto [v0, i0] = ts::min(x, 0, true);
      EXPECT_EQ(v0.sizes(), (ts::Shape{1, 4}));
      EXPECT_EQ(v0.tolist<double>(), (std::vector<double>{-1, -1, 0, -1}));
      EXPECT_EQ(i0.tolist<int64_t>(), (std::vector<int64_t>{2, 2, 1, 2}));
      EXPECT_EQ(ts::argmax(x, -1).tolist<int64_t>(), (std::vector<int64_t>{0, 0, 2}));
      EXPECT_EQ(ts::argmin(x, 1).tolist<int64_t>(), (std::vector<int64_t>{1, 2, 0}));
      EXPECT_EQ(ts::argmax(x).item<int64_t>(), 4);   // flattened, first of the 5s
      EXPECT_EQ(ts::argmin(x).item<int64_t>(), 8);
      EXPECT_EQ(ts::argmax(x, std::nullopt, true).sizes(), (ts::Shape{1, 1}));
      EXPECT_EQ(ts::max(x).item<double>(), 5);
      EXPECT_EQ(ts::min(x).item<double>(), -1);
    }
  }
  ts::Tensor u = from_values({2, 7, 7}, {3}).to(ts::kUInt8);
  EXPECT_EQ(ts::argmax(u).item<int64_t>(), 1);
  ts::Tensor b = from_values({0, 1, 1}, {3}).to(ts::kBool);
  auto [bv, bi] = ts::max(b, 0);
  EXPECT_TRUE(bv.item<bool>());
  EXPECT_EQ(bi.item<int64_t>(), 1);
  EXPECT_EQ(std::get<1>(ts::min(b, 0)).item<int64_t>(), 0);
  EXPECT_THROW(ts::argmax(b), ts::DTypeError);
  // Tensor methods
  auto [mv, mi] = base.max(0);
  EXPECT_EQ(mi.tolist<int64_t>(), (std::vector<int64_t>{1, 1, 2, 1}));
}

TEST(Reduce, NaNPropagatesAndWins) {
  for (ts::DType dt : float_dtypes()) {
    SCOPED_TRACE(ts::dtype_name(dt));
    ts::Tensor x = from_values({1, kNaN, 7, kNaN, -3, 2}, {2, 3}).to(dt);
    EXPECT_TRUE(std::isnan(ts::max(x).item<double>()));
    EXPECT_TRUE(std::isnan(ts::min(x).item<double>()));
    EXPECT_TRUE(all_close(ts::amax(x, 1), from_values({kNaN, kNaN}, {2}).to(dt)));
    EXPECT_TRUE(all_close(ts::amin(x, 0), from_values({kNaN, kNaN, 2}, {3}).to(dt)));
    auto [v, i] = ts::max(x, 1);
    EXPECT_EQ(i.tolist<int64_t>(), (std::vector<int64_t>{1, 0}));
    auto [v2, i2] = ts::min(x, 0);
    EXPECT_EQ(i2.tolist<int64_t>(), (std::vector<int64_t>{1, 0, 1}));
    EXPECT_TRUE(std::isnan(v2.tolist<double>()[0]));
    EXPECT_EQ(ts::argmax(x).item<int64_t>(), 1);
    EXPECT_EQ(ts::argmin(x).item<int64_t>(), 1);
    EXPECT_TRUE(std::isnan(ts::sum(x).item<double>()));
    EXPECT_TRUE(std::isnan(ts::norm(x, kInf).item<double>()));
    EXPECT_EQ(ts::norm(x, 0).item<double>(), 6);  // NaN counts as non-zero
    EXPECT_TRUE(ts::all(x).item<bool>());
    EXPECT_TRUE(std::isnan(ts::logsumexp(x, 1).tolist<double>()[0]));
  }
  // A NaN late in a long row, found through the chunked parallel path.
  std::vector<double> v(3000000, 1.0);
  v[123] = 5;
  v[2000001] = kNaN;
  v[2500000] = kNaN;
  ts::Tensor big = from_values(v, {3000000}).to(ts::kFloat32);
  EXPECT_EQ(ts::argmax(big).item<int64_t>(), 2000001);
  EXPECT_EQ(ts::argmin(big).item<int64_t>(), 2000001);
  EXPECT_TRUE(std::isnan(ts::amax(big).item<double>()));
  v[2000001] = v[2500000] = 1;
  v[2900000] = 5;
  EXPECT_EQ(ts::argmax(from_values(v, {3000000}).to(ts::kFloat32)).item<int64_t>(), 123);
}

TEST(Reduce, LogSumExpIsStable) {
  ts::Tensor x = from_values({1000, 1000, -1000, -1000, -kInf, -kInf, kInf, 1, kInf, -kInf}, {5, 2});
  ts::Tensor got = ts::logsumexp(x, 1);
  std::vector<double> g = got.tolist<double>();
  EXPECT_NEAR(g[0], 1000 + std::log(2.0), 1e-9);
  EXPECT_NEAR(g[1], -1000 + std::log(2.0), 1e-9);
  EXPECT_EQ(g[2], -kInf);
  EXPECT_EQ(g[3], kInf);
  EXPECT_EQ(g[4], kInf);
  // Shifted exponents across the whole float64 range, down to subnormal and underflowing terms.
  ts::Tensor wide = uniform({4, 1000}, ts::kFloat64, -760, 20, 9);
  EXPECT_TRUE(all_close(ts::logsumexp(wide, 1), reference(wide, {1}, false, ref_lse)));
  EXPECT_TRUE(all_close(ts::logsumexp(wide.t(), 0), reference(wide, {1}, false, ref_lse)));  // columns
  ts::Tensor spread = from_values({0, -1e-3, -0.5, -1, -2, -20, -700, -740, -744, -746, -1e300}, {11});
  EXPECT_TRUE(all_close(ts::logsumexp(spread, 0), reference(spread, {0}, false, ref_lse)));
  ts::Tensor f = from_values({88, 88, 88}, {3}).to(ts::kFloat32);  // exp(88) * 3 overflows float32
  EXPECT_NEAR(ts::logsumexp(f, 0).item<double>(), 88 + std::log(3.0), 1e-4);
}

TEST(Reduce, VarCorrectionsAndVarMean) {
  ts::Tensor x = from_values({1, 2, 4, 8, 1, 1}, {2, 3});
  // correction larger than N: inf, or nan when every value is equal, as PyTorch
  EXPECT_EQ(ts::var(x.select(0, 0), 0, 3).item<double>(), kInf);
  EXPECT_TRUE(std::isnan(ts::var(from_values({1, 1}, {2}), 0, 3).item<double>()));
  EXPECT_TRUE(std::isnan(ts::var(from_values({4}, {1})).item<double>()));
  EXPECT_EQ(ts::std(x.select(0, 0), 0, 3).item<double>(), kInf);
  for (ts::DType dt : float_dtypes()) {
    for (const Layout& lay : layouts()) {
      ts::Tensor xd = lay.apply(x.to(dt));
      for (std::vector<int64_t> dims : {std::vector<int64_t>{1}, {0}, {0, 1}}) {
        auto [v, m] = ts::var_mean(xd, dims, 0.5, true);
        EXPECT_EQ(v.dtype(), dt);
        EXPECT_TRUE(all_close(v, reference(x, dims, true, [](const std::vector<double>& a) { return ref_var(a, 0.5); })));
        EXPECT_TRUE(all_close(m, reference(x, dims, true, [](const std::vector<double>& a) { return ref_sum(a) / a.size(); })));
      }
    }
  }
  // Two-pass/Welford stability: a large offset does not swamp a small spread.
  std::vector<double> off(100000);
  for (size_t i = 0; i < off.size(); ++i) off[i] = 1.0e4 + (i % 2 ? 0.5 : -0.5);
  ts::Tensor o = from_values(off, {100000}).to(ts::kFloat32);
  EXPECT_NEAR(ts::var(o, 0, 0).item<double>(), 0.25, 1e-6);
  EXPECT_NEAR(ts::std(o).item<double>(), std::sqrt(0.25 * 100000 / 99999), 1e-6);
}

TEST(Reduce, LongSumsAreAccurate) {
  const int64_t n = 16 * 1024 * 1024;
  ts::Tensor x = uniform({n}, ts::kFloat32, 0, 1, 3);
  std::vector<float> h = x.tolist<float>();
  double ref = 0;
  for (float v : h) ref += v;
  double got = ts::sum(x).item<double>();
  EXPECT_LE(std::fabs(got - ref), 1.3e-6 * std::fabs(ref)) << got << " vs " << ref;
  EXPECT_NEAR(ts::mean(x).item<double>(), ref / n, 1.3e-6 * ref / n);
  // The same values as (4M, 4) summed over dim 0 (reduced-outer traversal, chunked) and as (4, 4M)
  // over dim 1 (few long rows, chunked).
  ts::Tensor cols = ts::sum(x.view({n / 4, 4}), 0);
  ts::Tensor rows = ts::sum(x.view({4, n / 4}), 1);
  std::vector<double> rc(4, 0), rr(4, 0);
  for (int64_t i = 0; i < n; ++i) {
    rc[i % 4] += h[i];
    rr[i / (n / 4)] += h[i];
  }
  EXPECT_TRUE(all_close(cols, from_values(rc, {4})));
  EXPECT_TRUE(all_close(rows, from_values(rr, {4})));
  // float16 input accumulates in float32
  ts::Tensor xh = uniform({1 << 20}, ts::kFloat16, 0, 1, 5);
  std::vector<double> hv = xh.tolist<double>();
  double rh = std::accumulate(hv.begin(), hv.end(), 0.0);
  EXPECT_TRUE(all_close(ts::mean(xh), from_values({rh / hv.size()}, {}).to(ts::kFloat64), tolerance_for(ts::kFloat16)));
  double n2 = 0;
  for (double v : hv) n2 += v * v;
  EXPECT_TRUE(all_close(ts::norm(xh), from_values({std::sqrt(n2)}, {}), tolerance_for(ts::kFloat16)));
  EXPECT_NEAR(ts::var(x).item<double>(), 1.0 / 12, 1e-3);
}

TEST(Reduce, ResultsDoNotDependOnThreadCount) {
  ts::Tensor x = uniform({3, 1 << 20}, ts::kFloat32, -1, 1, 11);
  int saved = ts::get_num_threads();
  ts::set_num_threads(1);
  std::vector<float> s1 = ts::sum(x).tolist<float>(), r1 = ts::sum(x, 1).tolist<float>(),
                     c1 = ts::sum(x.view({-1, 3}), 0).tolist<float>(), v1 = ts::var(x, 1).tolist<float>();
  ts::set_num_threads(2);
  EXPECT_EQ(ts::sum(x).tolist<float>(), s1);
  EXPECT_EQ(ts::sum(x, 1).tolist<float>(), r1);
  EXPECT_EQ(ts::sum(x.view({-1, 3}), 0).tolist<float>(), c1);
  EXPECT_EQ(ts::var(x, 1).tolist<float>(), v1);
  ts::set_num_threads(saved);
}

TEST(Reduce, Errors) {
  ts::Tensor x = ts::zeros({2, 3});
  ts::Tensor i = ts::zeros({2, 3}, ts::kInt32);
  EXPECT_THROW(ts::sum(x, 2), ts::IndexError);
  EXPECT_THROW(ts::sum(x, -3), ts::IndexError);
  EXPECT_THROW(ts::amax(x, {0, 5}), ts::IndexError);
  EXPECT_THROW(ts::max(x, 2), ts::IndexError);
  EXPECT_THROW(ts::argmax(x, -3), ts::IndexError);
  EXPECT_THROW(ts::var(x, 2), ts::IndexError);
  EXPECT_THROW(ts::logsumexp(x, 4), ts::IndexError);
  EXPECT_THROW(ts::sum(x, {0, 0}), ts::ValueError);
  EXPECT_THROW(ts::amax(x, {0, -2}), ts::ValueError);
  EXPECT_THROW(ts::norm(x, 2, ts::Dims({1, -1})), ts::ValueError);
  EXPECT_THROW(ts::mean(i), ts::DTypeError);
  EXPECT_THROW(ts::mean(x.to(ts::kBool)), ts::DTypeError);
  EXPECT_THROW(ts::mean(x, kAll, false, ts::kInt64), ts::DTypeError);
  EXPECT_THROW(ts::var(i), ts::DTypeError);
  EXPECT_THROW(ts::std(i), ts::DTypeError);
  EXPECT_THROW(ts::var_mean(i), ts::DTypeError);
  EXPECT_THROW(ts::norm(i), ts::DTypeError);
  EXPECT_THROW(ts::argmin(x.to(ts::kBool), 0), ts::DTypeError);
  EXPECT_THROW(ts::norm(x, "nuc"), ts::NotImplementedError);
  EXPECT_THROW(ts::norm(x, "fr"), ts::ValueError);
  EXPECT_THROW(ts::sum(ts::Tensor()), ts::ValueError);
  try {
    ts::amax(ts::zeros({3, 0}), 1);
    FAIL() << "expected IndexError";
  } catch (const ts::IndexError& e) {
    EXPECT_NE(std::string(e.what()).find("amax: Expected reduction dim 1 to have non-zero size"), std::string::npos) << e.what();
  }
  try {
    ts::sum(x, {1, 1});
    FAIL() << "expected ValueError";
  } catch (const ts::ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("sum: dim 1 appears multiple times"), std::string::npos) << e.what();
  }
}

TEST(Reduce, MetaDevice) {
  ts::Tensor m = ts::empty({2, 3, 4}, ts::TensorOptions(ts::kFloat16, "meta"));
  ts::Tensor s = ts::sum(m, {0, 2}, true);
  EXPECT_TRUE(s.is_meta());
  EXPECT_EQ(s.sizes(), (ts::Shape{1, 3, 1}));
  EXPECT_EQ(s.dtype(), ts::kFloat16);
  EXPECT_EQ(ts::sum(ts::empty({2, 3}, ts::TensorOptions(ts::kInt8, "meta"))).dtype(), ts::kInt64);
  EXPECT_EQ(ts::mean(m, -1).sizes(), (ts::Shape{2, 3}));
  auto [v, i] = ts::max(m, 1);
  EXPECT_EQ(v.sizes(), (ts::Shape{2, 4}));
  EXPECT_EQ(i.dtype(), ts::kInt64);
  EXPECT_TRUE(i.is_meta());
  EXPECT_EQ(ts::argmax(m).sizes(), (ts::Shape{}));
  EXPECT_EQ(ts::any(m, 2).dtype(), ts::kBool);
  auto [vv, vm] = ts::var_mean(m.transpose(0, 2), ts::Dims({1}), 1, true);
  EXPECT_EQ(vv.sizes(), (ts::Shape{4, 1, 2}));
  EXPECT_EQ(vm.sizes(), (ts::Shape{4, 1, 2}));
  EXPECT_EQ(ts::norm(m, 3, ts::Dims({0})).sizes(), (ts::Shape{3, 4}));
  EXPECT_EQ(ts::logsumexp(m, {0, 1}).sizes(), (ts::Shape{4}));
  EXPECT_THROW(ts::amax(ts::empty({0, 2}, ts::TensorOptions(ts::kFloat32, "meta")), 0), ts::IndexError);
  EXPECT_THROW(ts::mean(ts::empty({2}, ts::TensorOptions(ts::kInt32, "meta"))), ts::DTypeError);
}
