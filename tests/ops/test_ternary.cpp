// where, clamp, lerp, addcmul, addcdiv, allclose and equal against float64 references computed on the
// host: every dtype they take, layouts, broadcast, zero-size and 0-dim inputs, type promotion, NaN
// and min > max rules, and the errors PyTorch raises.
#include <cmath>
#include <functional>

#include "common/test_util.h"

namespace ts = tessera;
using namespace tessera::testing;

namespace {

// test_data gives a 1-D tensor for an empty shape; reshape makes it 0-dim.
ts::Tensor td(const ts::Shape& s, ts::DType dt, uint64_t seed, double lo = -5, double hi = 5) {
  return test_data(s, dt, seed, lo, hi).reshape(s);
}

using Ref3 = std::function<double(double, double, double)>;

ts::Tensor reference3(const ts::Tensor& a, const ts::Tensor& b, const ts::Tensor& c, const Ref3& f) {
  ts::Shape shape = ts::broadcast_shapes(ts::broadcast_shapes(a.sizes(), b.sizes()), c.sizes());
  std::vector<double> x = a.expand(shape).tolist<double>(), y = b.expand(shape).tolist<double>(),
                      z = c.expand(shape).tolist<double>();
  for (size_t i = 0; i < x.size(); ++i) x[i] = f(x[i], y[i], z[i]);
  return ts::tensor(x, {static_cast<int64_t>(x.size())}, ts::kFloat64).reshape(shape);
}

struct Shapes3 { ts::Shape a, b, c; };
const std::vector<Shapes3>& shape_triples() {
  static const std::vector<Shapes3> s = {{{3, 4}, {3, 4}, {3, 4}}, {{3, 4}, {4}, {3, 1}}, {{}, {2, 3}, {3}},
                                         {{}, {}, {}}, {{0, 4}, {4}, {1, 4}}};
  return s;
}

double nmax(double a, double b) { return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b); }
double nmin(double a, double b) { return std::isnan(a) || std::isnan(b) ? NAN : std::min(a, b); }
double lerp_ref(double s, double e, double w) { return s + w * (e - s); }

}  // namespace

TEST(Ternary, WhereAllDtypesLayoutsBroadcast) {
  for (ts::DType dt : all_dtypes()) {
    for (const Shapes3& sp : shape_triples()) {
      for (const Layout& l : layouts()) {
        ts::Tensor cond = l.apply(td(sp.a, ts::kBool, 3));
        ts::Tensor a = l.apply(td(sp.b, dt, 4)), b = l.apply(td(sp.c, dt, 5));
        ts::Tensor y = ts::where(cond, a, b);
        EXPECT_EQ(y.dtype(), dt);
        EXPECT_TRUE(all_close(y, reference3(cond, a, b, [](double c, double x, double z) { return c != 0 ? x : z; })))
            << ts::dtype_name(dt) << " " << l.name;
      }
    }
  }
  ts::Tensor c = ts::tensor(std::vector<bool>{true, false, true}, {3});
  ts::Tensor i = ts::tensor(std::vector<int64_t>{1, -2, 3}, {3});
  ts::Tensor r = ts::where(c, i, 2.5);
  EXPECT_EQ(r.dtype(), ts::kFloat32);
  EXPECT_EQ(r.tolist<double>(), (std::vector<double>{1, 2.5, 3}));
  EXPECT_EQ(ts::where(c, 7, i).tolist<int64_t>(), (std::vector<int64_t>{7, -2, 7}));
  EXPECT_EQ(ts::where(c, i.to(ts::kInt8), 2).dtype(), ts::kInt8);
  EXPECT_EQ(ts::where(c, i, i.to(ts::kFloat32)).dtype(), ts::kFloat32);
  EXPECT_EQ(i.where(c, ts::zeros({3}, ts::kInt64)).tolist<int64_t>(), (std::vector<int64_t>{1, 0, 3}));
  // uint8 conditions are accepted (as PyTorch still does); others are not.
  EXPECT_EQ(ts::where(ts::tensor(std::vector<uint8_t>{0, 2, 1}, {3}), i, 0).tolist<int64_t>(), (std::vector<int64_t>{0, -2, 3}));
  EXPECT_THROW(ts::where(i, i, i), ts::DTypeError);
  EXPECT_THROW(ts::where(c, i, ts::ones({4})), ts::ShapeError);
  EXPECT_THROW(ts::where(c, i, ts::ones({3}, ts::TensorOptions("meta"))), ts::DeviceError);
}

TEST(Ternary, ClampScalarAndTensorBounds) {
  for (ts::DType dt : {ts::kUInt8, ts::kInt8, ts::kInt32, ts::kInt64, ts::kFloat16, ts::kBFloat16, ts::kFloat32, ts::kFloat64}) {
    for (const Layout& l : layouts()) {
      ts::Tensor x = l.apply(td({4, 5}, dt, 9));
      const int64_t lo_b = dt == ts::kUInt8 ? 1 : -1;  // -1 would wrap to 255 in uint8, as in PyTorch
      ts::Tensor y = ts::clamp(x, lo_b, 2);
      EXPECT_EQ(y.dtype(), dt);
      EXPECT_TRUE(all_close(y, reference3(x, x, x, [lo_b](double v, double, double) { return std::min(std::max(v, double(lo_b)), 2.0); })))
          << ts::dtype_name(dt) << " " << l.name;
      EXPECT_TRUE(all_close(ts::clamp(x, std::nullopt, 1), reference3(x, x, x, [](double v, double, double) { return std::min(v, 1.0); })));
      EXPECT_TRUE(all_close(ts::clamp(x, 0), reference3(x, x, x, [](double v, double, double) { return std::max(v, 0.0); })));
      ts::Tensor lo = l.apply(td({4, 1}, dt, 10)), hi = td({5}, dt, 11);
      ts::Tensor yt = ts::clamp(x, std::optional<ts::Tensor>(lo), std::optional<ts::Tensor>(hi));
      EXPECT_TRUE(all_close(yt, reference3(x, lo, hi, [](double v, double a, double b) { return nmin(nmax(v, a), b); })));
    }
  }
  // min > max gives max; NaN propagates from the input and from a bound; int + 1.5 bound -> float32.
  EXPECT_EQ(ts::clamp(ts::tensor({1.0, 5.0, 10.0}), 6, 3).tolist<double>(), (std::vector<double>{3, 3, 3}));
  std::vector<double> n = ts::clamp(ts::tensor({NAN, 1.0}), 0, 3).tolist<double>();
  EXPECT_TRUE(std::isnan(n[0]) && n[1] == 1.0);
  std::vector<double> nb = ts::clamp(ts::tensor({0.0, 1.0}), std::optional<ts::Tensor>(ts::scalar_tensor(NAN)),
                                     std::optional<ts::Tensor>()).tolist<double>();
  EXPECT_TRUE(std::isnan(nb[0]) && std::isnan(nb[1]));
  ts::Tensor i = ts::tensor(std::vector<int64_t>{1, -2, 3}, {3});
  ts::Tensor f = ts::clamp(i, 1.5);
  EXPECT_EQ(f.dtype(), ts::kFloat32);
  EXPECT_EQ(f.tolist<double>(), (std::vector<double>{1.5, 1.5, 3}));
  EXPECT_EQ(ts::clamp(ts::ones({2}, ts::kBool), 0).dtype(), ts::kInt64);
  EXPECT_THROW(ts::clamp(i, std::optional<ts::Scalar>(), std::optional<ts::Scalar>()), ts::ValueError);
  EXPECT_THROW(ts::clamp(ts::ones({2}, ts::kBool), false, true), ts::DTypeError);
  EXPECT_THROW(ts::clamp(ts::ones({3}), std::optional<ts::Tensor>(ts::ones({4})), std::nullopt), ts::ShapeError);
  ts::Tensor iv = ts::tensor(std::vector<int64_t>{-5, 5}, {2});
  iv.clamp_(-1, 1);
  EXPECT_EQ(iv.tolist<int64_t>(), (std::vector<int64_t>{-1, 1}));
  EXPECT_THROW(iv.clamp_(0.5), ts::DTypeError);
  ts::Tensor z = ts::clamp(ts::empty({0, 3}), 0, 1);
  EXPECT_EQ(z.sizes(), (ts::Shape{0, 3}));
}

TEST(Ternary, Lerp) {
  for (ts::DType dt : float_dtypes()) {
    for (const Shapes3& sp : shape_triples()) {
      for (const Layout& l : layouts()) {
        ts::Tensor s = l.apply(td(sp.a, dt, 1)), e = l.apply(td(sp.b, dt, 2));
        ts::Tensor w = l.apply(td(sp.c, dt, 3));
        EXPECT_TRUE(all_close(ts::lerp(s, e, w), reference3(s, e, w, lerp_ref))) << ts::dtype_name(dt) << " " << l.name;
        for (double ws : {0.0, 0.3, 0.7, 1.0}) {
          ts::Tensor y = ts::lerp(s, e, ws);
          EXPECT_EQ(y.dtype(), dt);
          EXPECT_TRUE(all_close(y, reference3(s, e, s, [ws](double a, double b, double) { return lerp_ref(a, b, ws); })));
        }
      }
    }
  }
  // Exact at weight 1 even where start + w * (end - start) would round.
  ts::Tensor s = ts::tensor({1e8, -3.0}), e = ts::tensor({1.0, 1e-7});
  EXPECT_EQ(ts::lerp(s, e, 1.0).tolist<float>(), e.tolist<float>());
  EXPECT_EQ(ts::lerp(s, e, ts::ones({2})).tolist<float>(), e.tolist<float>());
  EXPECT_EQ(s.lerp(e, 0.0).tolist<float>(), s.tolist<float>());
  EXPECT_THROW(ts::lerp(ts::ones({2}, ts::kInt64), ts::ones({2}, ts::kInt64), 0.5), ts::DTypeError);
  EXPECT_THROW(ts::lerp(ts::ones({2}), ts::ones({2}, ts::kFloat64), 0.5), ts::DTypeError);
  EXPECT_THROW(ts::lerp(ts::ones({2}), ts::ones({2}), ts::ones({2}, ts::kFloat16)), ts::DTypeError);
  EXPECT_THROW(ts::lerp(ts::ones({2}), ts::ones({3}), 0.5), ts::ShapeError);
}

TEST(Ternary, AddcmulAddcdiv) {
  for (ts::DType dt : {ts::kUInt8, ts::kInt8, ts::kInt32, ts::kInt64, ts::kFloat16, ts::kBFloat16, ts::kFloat32, ts::kFloat64}) {
    for (const Shapes3& sp : shape_triples()) {
      for (const Layout& l : layouts()) {
        ts::Tensor a = l.apply(td(sp.a, dt, 1, -3, 3)), b = l.apply(td(sp.b, dt, 2, -3, 3));
        ts::Tensor c = l.apply(td(sp.c, dt, 3, -3, 3));
        ts::Tensor y = ts::addcmul(a, b, c, 2);
        EXPECT_EQ(y.dtype(), dt);
        EXPECT_TRUE(all_close(y, reference3(a, b, c, [](double x, double p, double q) { return x + 2 * p * q; })))
            << ts::dtype_name(dt) << " " << l.name;
        if (ts::is_floating_point(dt)) {
          EXPECT_TRUE(all_close(ts::addcdiv(a, b, c, 0.5),
                                reference3(a, b, c, [](double x, double p, double q) { return x + 0.5 * (p / q); })))
              << ts::dtype_name(dt) << " " << l.name;
        }
      }
    }
  }
  ts::Tensor i = ts::tensor(std::vector<int64_t>{1, -2, 3}, {3});
  EXPECT_EQ(ts::addcmul(i, i.to(ts::kFloat32), i).dtype(), ts::kFloat32);
  EXPECT_EQ(ts::addcmul(i, i, i, 2.5).tolist<int64_t>(), (std::vector<int64_t>{3, 6, 21}));  // value cast to int
  EXPECT_THROW(ts::addcdiv(i, i, i), ts::DTypeError);
  EXPECT_THROW(ts::addcdiv(i.to(ts::kFloat32), i, i), ts::DTypeError);
  EXPECT_EQ(ts::addcdiv(i, i.to(ts::kFloat32), i).tolist<double>(), (std::vector<double>{2, -1, 4}));
  EXPECT_THROW(ts::addcmul(ts::ones({2}, ts::kBool), ts::ones({2}, ts::kBool), ts::ones({2}, ts::kBool)), ts::DTypeError);
  EXPECT_THROW(ts::addcmul(ts::ones({2}), ts::ones({3}), ts::ones({2})), ts::ShapeError);
  EXPECT_THROW(ts::addcmul(ts::ones({2}), ts::ones({2}, ts::TensorOptions("meta")), ts::ones({2})), ts::DeviceError);
  ts::Tensor f = ts::ones({2});
  f.addcmul_(ts::ones({2}), ts::full({2}, 3.0), 2);
  f.addcdiv_(ts::ones({2}), ts::full({2}, 4.0));
  EXPECT_EQ(f.tolist<double>(), (std::vector<double>{7.25, 7.25}));
}

TEST(Ternary, AllcloseAndEqual) {
  ts::Tensor a = ts::tensor({1.0, 2.0, NAN, INFINITY});
  ts::Tensor b = ts::tensor({1.0 + 1e-6, 2.0, NAN, INFINITY});
  EXPECT_FALSE(ts::allclose(a, b));
  EXPECT_TRUE(ts::allclose(a, b, 1e-5, 1e-8, true));
  EXPECT_FALSE(ts::allclose(a, ts::tensor({1.1, 2.0, NAN, INFINITY}), 1e-5, 1e-8, true));
  EXPECT_FALSE(ts::allclose(ts::tensor({INFINITY}), ts::tensor({-INFINITY})));
  EXPECT_TRUE(ts::allclose(ts::ones({2, 3}), ts::ones({3})));  // broadcasts
  EXPECT_THROW(ts::allclose(ts::ones({2}), ts::ones({2}, ts::kInt64)), ts::DTypeError);
  EXPECT_THROW(ts::allclose(ts::ones({2}), ts::ones({3})), ts::ShapeError);
  EXPECT_THROW(ts::allclose(ts::ones({2}), ts::ones({2}, ts::TensorOptions("meta"))), ts::DeviceError);
  for (ts::DType dt : all_dtypes()) {
    ts::Tensor x = td({3, 4}, dt, 5);
    EXPECT_TRUE(ts::equal(x, x.t().contiguous().t()));
    EXPECT_TRUE(ts::allclose(x, x.clone()));
  }
  EXPECT_TRUE(ts::equal(ts::tensor(std::vector<int64_t>{1, 2}, {2}), ts::tensor({1.0, 2.0})));
  EXPECT_FALSE(ts::equal(ts::tensor({1.0, 2.0}), ts::tensor({1.0, 2.5})));
  EXPECT_FALSE(ts::equal(ts::ones({2}), ts::ones({2, 1})));
  EXPECT_FALSE(ts::equal(ts::tensor({NAN}), ts::tensor({NAN})));
  EXPECT_TRUE(ts::equal(ts::empty({0, 3}), ts::empty({0, 3})));
  EXPECT_THROW(ts::equal(ts::ones({2}), ts::ones({2}, ts::TensorOptions("meta"))), ts::DeviceError);
}

TEST(Ternary, MetaTensors) {
  ts::Tensor m = ts::empty({2, 3}, ts::TensorOptions(ts::kFloat32, "meta"));
  ts::Tensor c = ts::empty({3}, ts::TensorOptions(ts::kBool, "meta"));
  EXPECT_EQ(ts::where(c, m, 1).sizes(), (ts::Shape{2, 3}));
  EXPECT_TRUE(ts::clamp(m, 0, 1).is_meta());
  EXPECT_EQ(ts::lerp(m, m, 0.5).sizes(), (ts::Shape{2, 3}));
  EXPECT_EQ(ts::addcmul(m, m, m).dtype(), ts::kFloat32);
  EXPECT_THROW(ts::allclose(m, m), ts::NotImplementedError);
}
