// softmax and log_softmax against a float64 reference computed on the host: every float dtype (16-bit
// floats computed in float32 and returned in their dtype), every dim of 1-D to 3-D inputs (the
// last-dim fast path and the strided path), layouts, zero-size and 0-dim inputs, the dtype argument,
// numerical stability (large logits, -inf, nan) and the errors.
#include <cmath>

#include "common/test_util.h"

namespace ts = tessera;
using namespace tessera::testing;

namespace {

// test_data gives a 1-D tensor for an empty shape; reshape makes it 0-dim.
ts::Tensor td(const ts::Shape& s, ts::DType dt, uint64_t seed, double lo = -5, double hi = 5) {
  return test_data(s, dt, seed, lo, hi).reshape(s);
}

// Softmax over `dim` of x (values read as float64), computed the naive stable way.
ts::Tensor reference(const ts::Tensor& x, int64_t dim, bool log) {
  ts::Tensor c = x.to(ts::kFloat64).contiguous();
  std::vector<double> v = c.tolist<double>();
  const int64_t nd = x.dim();
  if (nd == 0) return ts::scalar_tensor(log ? 0.0 : 1.0, ts::kFloat64);
  dim = dim < 0 ? dim + nd : dim;
  int64_t outer = 1, n = x.size(dim), inner = 1;
  for (int64_t i = 0; i < dim; ++i) outer *= x.size(i);
  for (int64_t i = dim + 1; i < nd; ++i) inner *= x.size(i);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t j = 0; j < inner; ++j) {
      double m = -INFINITY, s = 0;
      for (int64_t k = 0; k < n; ++k) m = std::max(m, v[(o * n + k) * inner + j]);
      for (int64_t k = 0; k < n; ++k) s += std::exp(v[(o * n + k) * inner + j] - m);
      for (int64_t k = 0; k < n; ++k) {
        double& e = v[(o * n + k) * inner + j];
        e = log ? e - m - std::log(s) : std::exp(e - m) / s;
      }
    }
  }
  return ts::tensor(v, {static_cast<int64_t>(v.size())}, ts::kFloat64).reshape(x.sizes());
}

}  // namespace

TEST(Softmax, AllDimsDtypesLayouts) {
  const std::vector<ts::Shape> shapes = {{7}, {3, 5}, {2, 3, 4}, {4, 1, 6}, {0, 3}, {3, 0}, {2, 1030}, {600, 2, 3}};
  for (ts::DType dt : float_dtypes()) {
    for (const ts::Shape& shape : shapes) {
      for (const Layout& l : layouts()) {
        ts::Tensor x = l.apply(ts::mul(td(shape, dt, 21), 3).to(dt));
        for (int64_t d = -static_cast<int64_t>(shape.size()); d < static_cast<int64_t>(shape.size()); ++d) {
          for (bool log : {false, true}) {
            ts::Tensor y = log ? ts::log_softmax(x, d) : ts::softmax(x, d);
            EXPECT_EQ(y.dtype(), dt);
            EXPECT_EQ(y.sizes(), shape);
            EXPECT_TRUE(all_close(y, reference(x, d, log)))
                << (log ? "log_softmax " : "softmax ") << ts::dtype_name(dt) << " " << ::testing::PrintToString(shape)
                << " dim " << d << " " << l.name;
          }
        }
      }
    }
  }
}

TEST(Softmax, LargeLastDimParallel) {
  ts::Tensor x = ts::mul(td({257, 1024}, ts::kFloat32, 4), 10);
  EXPECT_TRUE(all_close(ts::softmax(x, 1), reference(x, 1, false)));
  EXPECT_TRUE(all_close(ts::log_softmax(x, -1), reference(x, 1, true)));
  EXPECT_TRUE(all_close(ts::softmax(x, 0), reference(x, 0, false)));
}

TEST(Softmax, DtypeArgumentAndIntegers) {
  ts::Tensor i = ts::tensor(std::vector<int64_t>{1, -2, 3}, {3});
  EXPECT_THROW(ts::softmax(i, 0), ts::DTypeError);
  ts::Tensor y = ts::softmax(i, 0, ts::kFloat64);
  EXPECT_EQ(y.dtype(), ts::kFloat64);
  EXPECT_TRUE(all_close(y, reference(i.to(ts::kFloat64), 0, false)));
  ts::Tensor h = td({4, 5}, ts::kFloat16, 2);
  ts::Tensor yf = ts::log_softmax(h, 1, ts::kFloat32);
  EXPECT_EQ(yf.dtype(), ts::kFloat32);
  EXPECT_TRUE(all_close(yf, reference(h, 1, true)));
  EXPECT_THROW(ts::softmax(ts::ones({3}), 0, ts::kInt32), ts::DTypeError);
}

TEST(Softmax, ScalarAndStability) {
  ts::Tensor s = ts::scalar_tensor(3.0);
  EXPECT_EQ(ts::softmax(s, 0).item<double>(), 1.0);
  EXPECT_EQ(ts::softmax(s, -1).item<double>(), 1.0);
  EXPECT_EQ(ts::log_softmax(s, 0).item<double>(), 0.0);
  EXPECT_THROW(ts::softmax(s, 1), ts::IndexError);
  // Large logits do not overflow.
  ts::Tensor big = ts::tensor({1000.0, 1001.0, 999.0});
  EXPECT_TRUE(all_close(ts::softmax(big, 0), reference(big, 0, false)));
  EXPECT_TRUE(all_close(ts::log_softmax(big, 0), reference(big, 0, true)));
  // -inf entries get 0 (log: -inf); a nan makes its row nan; other rows are unaffected.
  ts::Tensor x = ts::tensor({0.0, -INFINITY, 1.0, NAN, 1.0, 2.0}, ts::kFloat32).view({2, 3});
  std::vector<double> p = ts::softmax(x, 1).tolist<double>();
  EXPECT_EQ(p[1], 0.0);
  EXPECT_NEAR(p[0] + p[2], 1.0, 1e-6);
  EXPECT_TRUE(std::isnan(p[3]) && std::isnan(p[4]) && std::isnan(p[5]));
  EXPECT_EQ(ts::log_softmax(x, 1).tolist<double>()[1], -INFINITY);
  std::vector<double> q = ts::softmax(x, 0).tolist<double>();
  EXPECT_TRUE(std::isnan(q[0]) && std::isnan(q[3]));
  EXPECT_NEAR(q[2] + q[5], 1.0, 1e-6);
}

TEST(Softmax, ErrorsAndMeta) {
  EXPECT_THROW(ts::softmax(ts::ones({2, 3}), 2), ts::IndexError);
  EXPECT_THROW(ts::log_softmax(ts::ones({2, 3}), -3), ts::IndexError);
  ts::Tensor m = ts::empty({2, 3}, ts::TensorOptions(ts::kFloat16, "meta"));
  ts::Tensor y = ts::softmax(m, 1);
  EXPECT_TRUE(y.is_meta());
  EXPECT_EQ(y.dtype(), ts::kFloat16);
  EXPECT_EQ(ts::log_softmax(m, 0, ts::kFloat32).dtype(), ts::kFloat32);
}
