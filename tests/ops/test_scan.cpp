// cumsum and cumprod against float64 running totals computed on the host: every dtype, every dim
// (negative too), contiguous/transposed/step-sliced inputs, 0-dim and zero-size inputs, long scans
// for accuracy, the dtype argument, errors and meta-device shapes.
#include <cmath>
#include <functional>

#include "common/test_util.h"

namespace ts = tessera;
using namespace tessera::testing;

namespace {

ts::Tensor from_values(const std::vector<double>& v, const ts::Shape& sizes) {
  return ts::tensor(v, {static_cast<int64_t>(v.size())}, ts::TensorOptions(ts::kFloat64)).reshape(sizes);
}

// Values in [lo, hi): integers floored in every dtype when `ints`, bool alternates by a hash.
ts::Tensor data(const ts::Shape& sizes, ts::DType dt, double lo, double hi, bool ints, uint64_t seed = 3) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  std::vector<double> v(static_cast<size_t>(n));
  uint64_t state = seed * 0x9E3779B97F4A7C15ull + 99;
  for (auto& x : v) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    double u = static_cast<double>(state >> 11) / 9007199254740992.0;
    x = dt == ts::kBool ? double((state >> 40) & 1) : lo + (hi - lo) * u;
    if (ints || !ts::is_floating_point(dt)) x = std::floor(x);
    if (dt == ts::kUInt8) x = std::fabs(x);  // negative doubles do not convert to uint8
  }
  return from_values(v, sizes).to(dt);
}

// The float64 running sum/product of x along dim.
ts::Tensor reference(const ts::Tensor& x, int64_t dim, bool prod) {
  std::vector<double> v = x.tolist<double>();
  if (x.dim() == 0) return from_values(v, {});
  dim = (dim + x.dim()) % x.dim();
  int64_t outer = 1, len = x.size(dim), inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= x.size(d);
  for (int64_t d = dim + 1; d < x.dim(); ++d) inner *= x.size(d);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      double acc = prod ? 1 : 0;
      for (int64_t l = 0; l < len; ++l) {
        double& e = v[(o * len + l) * inner + i];
        acc = prod ? acc * e : acc + e;
        e = acc;
      }
    }
  return from_values(v, x.sizes());
}

void check_scan(bool prod, const ts::Shape& shape, double lo, double hi, bool ints) {
  for (ts::DType dt : all_dtypes()) {
    ts::Tensor base = data(shape, dt, lo, hi, ints);
    for (const Layout& lay : layouts()) {
      ts::Tensor x = lay.apply(base);
      for (int64_t dim = -static_cast<int64_t>(shape.size()); dim < static_cast<int64_t>(shape.size()); ++dim) {
        SCOPED_TRACE(std::string(prod ? "cumprod " : "cumsum ") + ts::dtype_name(dt) + " " + lay.name + " dim " +
                     std::to_string(dim));
        ts::Tensor got = prod ? ts::cumprod(x, dim) : ts::cumsum(x, dim);
        EXPECT_EQ(got.dtype(), ts::is_integral(dt, true) ? ts::kInt64 : dt);
        EXPECT_TRUE(all_close(got, reference(base, dim, prod)));
      }
    }
  }
}

}  // namespace

TEST(Scan, CumsumAllDtypesLayoutsDims) {
  check_scan(false, {3, 4, 5}, -5, 5, false);
  check_scan(false, {2, 300}, -5, 5, false);  // inner tiles and long rows
}

TEST(Scan, CumprodAllDtypesLayoutsDims) {
  check_scan(true, {3, 4, 5}, 0.5, 1.5, false);
  check_scan(true, {4, 3, 6}, -1, 3, true);  // integer-valued: exact in every dtype
}

TEST(Scan, ZeroDimAndZeroSize) {
  for (ts::DType dt : all_dtypes()) {
    ts::Tensor s = ts::full({}, 3, dt);
    for (int64_t d : {0, -1}) {
      ts::Tensor c = ts::cumsum(s, d);
      EXPECT_EQ(c.dim(), 0);
      EXPECT_EQ(c.item<double>(), dt == ts::kBool ? 1 : 3);
      EXPECT_EQ(ts::cumprod(s, d).item<double>(), dt == ts::kBool ? 1 : 3);
    }
    EXPECT_THROW(ts::cumsum(s, 1), ts::IndexError);
    ts::Tensor e = ts::zeros({0, 4}, dt);
    EXPECT_EQ(ts::cumsum(e, 0).sizes(), (ts::Shape{0, 4}));
    EXPECT_EQ(ts::cumprod(e, 1).sizes(), (ts::Shape{0, 4}));
    EXPECT_EQ(ts::cumsum(ts::zeros({3, 0}, dt), 0).sizes(), (ts::Shape{3, 0}));
  }
}

TEST(Scan, DtypeArgument) {
  ts::Tensor f = from_values({1.5, 2.5, -0.5}, {3}).to(ts::kFloat32);
  ts::Tensor c = ts::cumsum(f, 0, ts::kInt32);  // the input is cast first
  EXPECT_EQ(c.dtype(), ts::kInt32);
  EXPECT_EQ(c.tolist<int64_t>(), (std::vector<int64_t>{1, 3, 3}));
  ts::Tensor i = from_values({1, 2, 3}, {3}).to(ts::kInt8);
  EXPECT_EQ(ts::cumprod(i, 0, ts::kFloat64).dtype(), ts::kFloat64);
  EXPECT_EQ(ts::cumsum(i, 0, ts::kFloat16).tolist<double>(), (std::vector<double>{1, 3, 6}));
  // int8 input accumulates as int64 (no wrap at 127)
  ts::Tensor big = from_values({100, 100, 100}, {3}).to(ts::kInt8);
  EXPECT_EQ(ts::cumsum(big, 0).tolist<int64_t>(), (std::vector<int64_t>{100, 200, 300}));
  // with dtype int8 the result wraps as PyTorch's
  EXPECT_EQ(ts::cumsum(big, 0, ts::kInt8).tolist<int64_t>(), (std::vector<int64_t>{100, -56, 44}));
  ts::Tensor b = from_values({1, 0, 1, 1}, {4}).to(ts::kBool);
  EXPECT_EQ(b.cumsum(0).tolist<int64_t>(), (std::vector<int64_t>{1, 1, 2, 3}));
  EXPECT_EQ(b.cumprod(0).tolist<int64_t>(), (std::vector<int64_t>{1, 0, 0, 0}));
}

TEST(Scan, LongScansAreAccurate) {
  const int64_t n = 1 << 21;
  ts::Tensor x = data({n}, ts::kFloat32, 0, 1, false);
  EXPECT_TRUE(all_close(ts::cumsum(x, 0), reference(x, 0, false)));
  ts::Tensor h = data({1 << 16}, ts::kFloat16, 0, 1, false);
  EXPECT_TRUE(all_close(ts::cumsum(h, 0), reference(h, 0, false)));
  ts::Tensor wide = data({64, 1 << 14}, ts::kFloat32, -1, 1, false);
  EXPECT_TRUE(all_close(ts::cumsum(wide, 0), reference(wide, 0, false)));
}

TEST(Scan, NaNAndInf) {
  const double inf = std::numeric_limits<double>::infinity();
  ts::Tensor x = from_values({1, std::nan(""), 2, inf, -inf}, {5});
  std::vector<double> c = ts::cumsum(x, 0).tolist<double>();
  EXPECT_EQ(c[0], 1);
  EXPECT_TRUE(std::isnan(c[1]) && std::isnan(c[4]));
  ts::Tensor y = from_values({2, inf, 0, 3}, {4});
  std::vector<double> p = ts::cumprod(y, 0).tolist<double>();
  EXPECT_EQ(p[1], inf);
  EXPECT_TRUE(std::isnan(p[2]));
}

TEST(Scan, Errors) {
  ts::Tensor x = ts::zeros({2, 3});
  EXPECT_THROW(ts::cumsum(x, 2), ts::IndexError);
  EXPECT_THROW(ts::cumprod(x, -3), ts::IndexError);
  EXPECT_THROW(ts::cumsum(x, 0, ts::kBool), ts::DTypeError);
  EXPECT_THROW(ts::cumprod(x.to(ts::kBool), 0, ts::kBool), ts::DTypeError);
  EXPECT_THROW(ts::cumsum(ts::Tensor(), 0), ts::ValueError);
}

TEST(Scan, MetaDevice) {
  ts::Tensor m = ts::empty({2, 3}, ts::TensorOptions(ts::kInt32, "meta"));
  ts::Tensor c = ts::cumsum(m, 1);
  EXPECT_TRUE(c.is_meta());
  EXPECT_EQ(c.sizes(), (ts::Shape{2, 3}));
  EXPECT_EQ(c.dtype(), ts::kInt64);
  EXPECT_EQ(ts::cumprod(m.transpose(0, 1), 0, ts::kFloat16).dtype(), ts::kFloat16);
  EXPECT_THROW(ts::cumsum(m, 2), ts::IndexError);
}
