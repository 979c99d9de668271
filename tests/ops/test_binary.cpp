// Binary ops against float64 references computed on the host: every op in every dtype it takes, on
// contiguous / transposed / sliced layouts, broadcast shapes, zero-size and 0-dim inputs, tensor and
// Scalar second operands; PyTorch's type promotion; division modes and integer division by zero;
// out= and in-place rules; the errors (broadcast mismatch, device mismatch, unsupported dtypes).
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

using BinFn = std::function<ts::Tensor(const ts::Tensor&, const ts::Tensor&)>;
using BinScalarFn = std::function<ts::Tensor(const ts::Tensor&, const ts::Scalar&)>;
using RefFn = std::function<double(double, double)>;

ts::Tensor from_values(const std::vector<double>& v, const ts::Shape& shape) {
  return ts::tensor(v, {static_cast<int64_t>(v.size())}, ts::kFloat64).reshape(shape);
}

// Wraps an integer result to the dtype's range, as the kernels' integer arithmetic does.
double wrap(ts::DType dt, double v) {
  if (std::isnan(v) || std::isinf(v)) return v;
  auto i = static_cast<int64_t>(v);
  switch (dt) {
    case ts::kUInt8: return static_cast<uint8_t>(i);
    case ts::kInt8: return static_cast<int8_t>(i);
    case ts::kInt32: return static_cast<int32_t>(i);
    case ts::kBool: return i != 0;
    default: return v;
  }
}

ts::Tensor reference(const ts::Tensor& a, const ts::Tensor& b, const RefFn& ref, ts::DType out_dt) {
  ts::Shape shape = ts::broadcast_shapes(a.sizes(), b.sizes());
  std::vector<double> x = a.expand(shape).tolist<double>(), y = b.expand(shape).tolist<double>();
  for (size_t i = 0; i < x.size(); ++i) x[i] = ts::is_floating_point(out_dt) ? ref(x[i], y[i]) : wrap(out_dt, ref(x[i], y[i]));
  return from_values(x, shape);
}

struct Shapes { ts::Shape a, b; };
const std::vector<Shapes>& shape_pairs() {
  static const std::vector<Shapes> s = {{{3, 5}, {3, 5}}, {{3, 5}, {5}}, {{4, 1, 5}, {3, 1}}, {{2, 3}, {}},
                                        {{}, {2, 3}}, {{}, {}}, {{0, 5}, {5}}, {{0, 5}, {0, 5}}};
  return s;
}

// Runs op over every dtype, layout and shape pair. `out_rule` gives the result dtype from the input's.
void check_binary(const char* name, const BinFn& op, const RefFn& ref, const std::vector<ts::DType>& dtypes,
                  const std::function<ts::DType(ts::DType)>& out_rule, double blo = -5, double bhi = 5) {
  for (ts::DType dt : dtypes) {
    for (const Shapes& sp : shape_pairs()) {
      for (const Layout& layout : layouts()) {
        ts::Tensor a = layout.apply(td(sp.a, dt, 11));
        ts::Tensor b = layout.apply(td(sp.b, dt, 12, blo, bhi));
        SCOPED_TRACE(::testing::Message() << name << " dtype " << ts::dtype_name(dt) << " a " << ::testing::PrintToString(sp.a)
                                          << " b " << ::testing::PrintToString(sp.b) << " layout " << layout.name);
        ts::Tensor y = op(a, b);
        const ts::DType odt = out_rule(dt);
        EXPECT_EQ(y.dtype(), odt);
        EXPECT_TRUE(all_close(y, reference(a, b, ref, odt)));
      }
    }
  }
}

ts::DType same(ts::DType d) { return d; }
ts::DType to_bool(ts::DType) { return ts::kBool; }
ts::DType true_div(ts::DType d) { return ts::is_floating_point(d) ? d : ts::kFloat32; }

std::vector<ts::DType> numeric() { return {ts::kUInt8, ts::kInt8, ts::kInt32, ts::kInt64, ts::kFloat16, ts::kBFloat16, ts::kFloat32, ts::kFloat64}; }
std::vector<ts::DType> ints_and_bool() { return {ts::kBool, ts::kUInt8, ts::kInt8, ts::kInt32, ts::kInt64}; }

double py_floor_div(double a, double b) { return std::floor(a / b); }
double py_mod(double a, double b) {
  double m = std::fmod(a, b);
  if (m != 0 && ((b < 0) != (m < 0))) m += b;
  return m;
}
double nan_max(double a, double b) { return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b); }
double nan_min(double a, double b) { return std::isnan(a) || std::isnan(b) ? NAN : std::min(a, b); }

}  // namespace

TEST(Binary, ArithmeticAllDtypes) {
  check_binary("add", [](auto& a, auto& b) { return ts::add(a, b); }, [](double x, double y) { return x + y; }, numeric(), same);
  check_binary("add_alpha", [](auto& a, auto& b) { return ts::add(a, b, 3); }, [](double x, double y) { return x + 3 * y; },
               numeric(), same);
  check_binary("sub", [](auto& a, auto& b) { return ts::sub(a, b); }, [](double x, double y) { return x - y; }, numeric(), same);
  check_binary("sub_alpha", [](auto& a, auto& b) { return ts::sub(a, b, 2); }, [](double x, double y) { return x - 2 * y; },
               numeric(), same);
  check_binary("mul", [](auto& a, auto& b) { return ts::mul(a, b); }, [](double x, double y) { return x * y; }, numeric(), same);
  check_binary("div", [](auto& a, auto& b) { return ts::div(a, b); }, [](double x, double y) { return x / y; }, all_dtypes(),
               true_div);
  check_binary("maximum", [](auto& a, auto& b) { return ts::maximum(a, b); }, nan_max, all_dtypes(), same);
  check_binary("minimum", [](auto& a, auto& b) { return ts::minimum(a, b); }, nan_min, all_dtypes(), same);
  check_binary("atan2", [](auto& a, auto& b) { return ts::atan2(a, b); }, [](double x, double y) { return std::atan2(x, y); },
               all_dtypes(), true_div);
  // Integer divisors stay away from 0 here; division by zero has its own test.
  check_binary("div_trunc", [](auto& a, auto& b) { return ts::div(a, b, "trunc"); },
               [](double x, double y) { return std::trunc(x / y); }, numeric(), same, 1, 6);
  check_binary("div_floor", [](auto& a, auto& b) { return ts::div(a, b, "floor"); }, py_floor_div, numeric(), same, 1, 6);
  check_binary("fmod", [](auto& a, auto& b) { return ts::fmod(a, b); }, [](double x, double y) { return std::fmod(x, y); },
               numeric(), same, 1, 6);
  check_binary("remainder", [](auto& a, auto& b) { return ts::remainder(a, b); }, py_mod, numeric(), same, 1, 6);
  // Negative divisors for the signed types.
  for (ts::DType dt : {ts::kInt8, ts::kInt32, ts::kInt64, ts::kFloat32, ts::kFloat64}) {
    check_binary("div_floor_neg", [](auto& a, auto& b) { return ts::div(a, b, "floor"); }, py_floor_div, {dt}, same, -6, -1);
    check_binary("remainder_neg", [](auto& a, auto& b) { return ts::remainder(a, b); }, py_mod, {dt}, same, -6, -1);
    check_binary("fmod_neg", [](auto& a, auto& b) { return ts::fmod(a, b); }, [](double x, double y) { return std::fmod(x, y); },
                 {dt}, same, -6, -1);
  }
}

TEST(Binary, Pow) {
  // Floats: positive bases (so that 16-bit results stay in range), any exponent.
  for (ts::DType dt : float_dtypes()) {
    ts::Tensor a = ts::add(ts::abs(td({3, 4}, dt, 3)), 0.5).to(dt);
    for (const Layout& l : layouts()) {
      ts::Tensor b = l.apply(td({3, 4}, dt, 4));
      EXPECT_TRUE(all_close(ts::pow(a, b), reference(a, b, [](double x, double y) { return std::pow(x, y); }, dt)))
          << ts::dtype_name(dt) << " " << l.name;
    }
    ts::Tensor p = ts::pow(a, 2);
    EXPECT_EQ(p.dtype(), dt);
    EXPECT_TRUE(all_close(p, reference(a, ts::scalar_tensor(2.0, ts::kFloat64), [](double x, double y) { return std::pow(x, y); }, dt)));
  }
  check_binary("pow_int", [](auto& a, auto& b) { return ts::pow(a, b); }, [](double x, double y) { return std::pow(x, y); },
               {ts::kInt32, ts::kInt64}, same, 0, 4);
  // Integer base and negative integer exponent tensor: 1, -1 -> +-1, others -> 0 (PyTorch).
  ts::Tensor base = ts::tensor(std::vector<int64_t>{1, -1, -1, 2, -3}, {5});
  ts::Tensor ex = ts::tensor(std::vector<int64_t>{-2, -1, -2, -1, -3}, {5});
  EXPECT_EQ(ts::pow(base, ex).tolist<int64_t>(), (std::vector<int64_t>{1, -1, 1, 0, 0}));
  EXPECT_THROW(ts::pow(base, -1), ts::ValueError);
  EXPECT_EQ(ts::pow(base, 0.5).dtype(), ts::kFloat32);
  // Scalar base.
  ts::Tensor e = ts::tensor(std::vector<int64_t>{0, 1, 3}, {3});
  EXPECT_EQ(ts::pow(2, e).dtype(), ts::kInt64);
  EXPECT_EQ(ts::pow(2, e).tolist<int64_t>(), (std::vector<int64_t>{1, 2, 8}));
  ts::Tensor pf = ts::pow(2.5, e);
  EXPECT_EQ(pf.dtype(), ts::kFloat32);
  EXPECT_EQ(pf.tolist<double>(), (std::vector<double>{1.0, 2.5, 15.625}));
  EXPECT_EQ(ts::pow(ts::ones({2}, ts::kBool), 2).dtype(), ts::kInt64);
  EXPECT_THROW(ts::pow(ts::ones({2}, ts::kBool), ts::ones({2}, ts::kBool)), ts::DTypeError);
}

TEST(Binary, ComparisonsAndLogical) {
  struct Case { const char* name; BinFn op; RefFn ref; };
  const std::vector<Case> cases = {
      {"eq", [](auto& a, auto& b) { return ts::eq(a, b); }, [](double x, double y) { return double(x == y); }},
      {"ne", [](auto& a, auto& b) { return ts::ne(a, b); }, [](double x, double y) { return double(x != y); }},
      {"lt", [](auto& a, auto& b) { return ts::lt(a, b); }, [](double x, double y) { return double(x < y); }},
      {"le", [](auto& a, auto& b) { return ts::le(a, b); }, [](double x, double y) { return double(x <= y); }},
      {"gt", [](auto& a, auto& b) { return ts::gt(a, b); }, [](double x, double y) { return double(x > y); }},
      {"ge", [](auto& a, auto& b) { return ts::ge(a, b); }, [](double x, double y) { return double(x >= y); }},
      {"logical_and", [](auto& a, auto& b) { return ts::logical_and(a, b); }, [](double x, double y) { return double(x != 0 && y != 0); }},
      {"logical_or", [](auto& a, auto& b) { return ts::logical_or(a, b); }, [](double x, double y) { return double(x != 0 || y != 0); }},
      {"logical_xor", [](auto& a, auto& b) { return ts::logical_xor(a, b); }, [](double x, double y) { return double((x != 0) != (y != 0)); }},
  };
  // Small integer ranges so that equality happens.
  for (const Case& c : cases) check_binary(c.name, c.op, c.ref, all_dtypes(), to_bool, -2, 2);
  ts::Tensor x = ts::tensor({1.0, NAN, 3.0});
  EXPECT_EQ(ts::eq(x, x).tolist<int64_t>(), (std::vector<int64_t>{1, 0, 1}));
  EXPECT_EQ(ts::ne(x, x).tolist<int64_t>(), (std::vector<int64_t>{0, 1, 0}));
  EXPECT_EQ(ts::lt(x, 2.5).tolist<int64_t>(), (std::vector<int64_t>{1, 0, 0}));
  // Compared in the promoted dtype: int tensor vs 2.5 compares as float.
  ts::Tensor i = ts::tensor(std::vector<int64_t>{2, 3}, {2});
  EXPECT_EQ(ts::eq(i, 2.5).tolist<int64_t>(), (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(ts::lt(i, 2.5).tolist<int64_t>(), (std::vector<int64_t>{1, 0}));
  // float16 vs 0.1: the number is converted to float16 first (PyTorch).
  EXPECT_TRUE(ts::eq(ts::tensor({0.1}).to(ts::kFloat16), 0.1).item<bool>());
  EXPECT_EQ(ts::logical_and(i, 0).tolist<int64_t>(), (std::vector<int64_t>{0, 0}));
}

TEST(Binary, Bitwise) {
  auto as_int = [](double v) { return static_cast<int64_t>(v); };
  check_binary("bitwise_and", [](auto& a, auto& b) { return ts::bitwise_and(a, b); },
               [&](double x, double y) { return double(as_int(x) & as_int(y)); }, ints_and_bool(), same);
  check_binary("bitwise_or", [](auto& a, auto& b) { return ts::bitwise_or(a, b); },
               [&](double x, double y) { return double(as_int(x) | as_int(y)); }, ints_and_bool(), same);
  check_binary("bitwise_xor", [](auto& a, auto& b) { return ts::bitwise_xor(a, b); },
               [&](double x, double y) { return double(as_int(x) ^ as_int(y)); }, ints_and_bool(), same);
  check_binary("left_shift", [](auto& a, auto& b) { return ts::bitwise_left_shift(a, b); },
               [&](double x, double y) { return double(static_cast<int64_t>(static_cast<uint64_t>(as_int(x)) << as_int(y))); },
               integral_dtypes(), same, 0, 8);
  check_binary("right_shift", [](auto& a, auto& b) { return ts::bitwise_right_shift(a, b); },
               [&](double x, double y) { return double(as_int(x) >> as_int(y)); }, integral_dtypes(), same, 0, 8);
  // Shifts past the width: 0 for left, sign fill for right (PyTorch).
  ts::Tensor v = ts::tensor(std::vector<int64_t>{1, -2, 3}, {3});
  ts::Tensor s = ts::tensor(std::vector<int64_t>{70, -1, 2}, {3});
  EXPECT_EQ(ts::bitwise_left_shift(v, s).tolist<int64_t>(), (std::vector<int64_t>{0, 0, 12}));
  EXPECT_EQ(ts::bitwise_right_shift(v, s).tolist<int64_t>(), (std::vector<int64_t>{0, -1, 0}));
  EXPECT_EQ(ts::bitwise_left_shift(ts::tensor(std::vector<int8_t>{3}, {1}), 7).tolist<int64_t>(), (std::vector<int64_t>{-128}));
  // Floats are refused; so is bool for the shifts.
  ts::Tensor f = ts::ones({2});
  EXPECT_THROW(ts::bitwise_and(f, f), ts::DTypeError);
  EXPECT_THROW(ts::bitwise_or(v, 2.5), ts::DTypeError);
  EXPECT_THROW(ts::bitwise_xor(ts::ones({3}), v), ts::DTypeError);
  EXPECT_THROW(ts::bitwise_left_shift(f, 1), ts::DTypeError);
  EXPECT_THROW(ts::bitwise_right_shift(ts::ones({2}, ts::kBool), ts::ones({2}, ts::kBool)), ts::DTypeError);
}

TEST(Binary, TypePromotion) {
  ts::Tensor i32 = ts::tensor(std::vector<int32_t>{1, 2}, {2});
  ts::Tensor r = ts::add(i32, 2.5);
  EXPECT_EQ(r.dtype(), ts::kFloat32);
  EXPECT_EQ(r.tolist<double>(), (std::vector<double>{3.5, 4.5}));
  EXPECT_EQ(ts::add(i32, 2).dtype(), ts::kInt32);
  ts::Tensor h = ts::ones({2}, ts::kFloat16);
  EXPECT_EQ(ts::add(h, 2.5).dtype(), ts::kFloat16);
  EXPECT_EQ(ts::add(h, 2.5).tolist<double>(), (std::vector<double>{3.5, 3.5}));
  EXPECT_EQ(ts::mul(h, ts::ones({2}, ts::kBFloat16)).dtype(), ts::kFloat32);
  ts::Tensor b = ts::tensor(std::vector<bool>{true, false}, {2});
  ts::Tensor ib = ts::add(i32, b);
  EXPECT_EQ(ib.dtype(), ts::kInt32);
  EXPECT_EQ(ib.tolist<int64_t>(), (std::vector<int64_t>{2, 2}));
  ts::Tensor u8 = ts::tensor(std::vector<uint8_t>{200, 1}, {2});
  ts::Tensor i8 = ts::tensor(std::vector<int8_t>{-100, 1}, {2});
  // uint8 + int8 promotes to int16 in PyTorch, which tessera does not have: its promotion gives
  // the next signed type it has.
  ts::Tensor ui = ts::add(u8, i8);
  EXPECT_EQ(ui.dtype(), ts::promote_types(ts::kUInt8, ts::kInt8));
  EXPECT_EQ(ui.tolist<int64_t>(), (std::vector<int64_t>{100, 2}));
  // A 0-dim tensor ranks below a dimensioned one of the same category.
  EXPECT_EQ(ts::add(i32, ts::scalar_tensor(5, ts::kInt64)).dtype(), ts::kInt32);
  // ... unless it is of a higher category: then its own dtype counts (a number would give float32).
  EXPECT_EQ(ts::add(i32, ts::scalar_tensor(5.0, ts::kFloat64)).dtype(), ts::kFloat64);
  EXPECT_EQ(ts::add(i32, 5.0).dtype(), ts::kFloat32);
  EXPECT_EQ(ts::mul(ts::ones({2}, ts::kFloat32), ts::ones({2}, ts::kFloat64)).dtype(), ts::kFloat64);
  // Integer true division gives float32; int8 + 300 wraps in int8.
  EXPECT_EQ(ts::div(i32, 2).dtype(), ts::kFloat32);
  EXPECT_EQ(ts::div(i32, 2).tolist<double>(), (std::vector<double>{0.5, 1.0}));
  EXPECT_EQ(ts::add(ts::tensor(std::vector<int8_t>{1}, {1}), 300).tolist<int64_t>(), (std::vector<int64_t>{45}));
  // Bool arithmetic.
  EXPECT_EQ(ts::add(b, b).dtype(), ts::kBool);
  EXPECT_EQ(ts::mul(b, b).tolist<int64_t>(), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(ts::add(b, 1, 2).tolist<int64_t>(), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(ts::maximum(b, ts::logical_not(b)).tolist<int64_t>(), (std::vector<int64_t>{1, 1}));
}

TEST(Binary, DivisionModesAndZero) {
  ts::Tensor a = ts::tensor({-7.0, 7.0, -7.5, 0.0, 1.0, -1.0});
  ts::Tensor b = ts::tensor({2.0, -2.0, 2.0, -3.0, 0.0, 0.0});
  EXPECT_EQ(ts::div(a, b, "floor").tolist<double>(), (std::vector<double>{-4, -4, -4, -0.0, INFINITY, -INFINITY}));
  EXPECT_EQ(ts::div(a, b, "trunc").tolist<double>(), (std::vector<double>{-3, -3, -3, -0.0, INFINITY, -INFINITY}));
  EXPECT_TRUE(std::signbit(ts::div(a, b, "floor").tolist<double>()[3]));
  EXPECT_TRUE(std::isnan(ts::div(ts::zeros({1}), 0.0, "floor").item<double>()));
  EXPECT_EQ(ts::remainder(ts::tensor({-3.0, 3.0, -4.0}), 2).tolist<double>(), (std::vector<double>{1, 1, -0.0}));
  EXPECT_EQ(ts::fmod(ts::tensor({-3.0, 3.0}), 2).tolist<double>(), (std::vector<double>{-1, 1}));
  ts::Tensor i = ts::tensor(std::vector<int64_t>{5, -5, 7}, {3});
  ts::Tensor j = ts::tensor(std::vector<int64_t>{-3, 3, 0}, {3});
  // Integer true division by zero is IEEE; with a rounding mode, fmod and remainder it raises.
  EXPECT_EQ(ts::div(i, j).tolist<double>()[2], INFINITY);
  for (auto fn : {+[](const ts::Tensor& x, const ts::Tensor& y) { return ts::div(x, y, "floor"); },
                  +[](const ts::Tensor& x, const ts::Tensor& y) { return ts::div(x, y, "trunc"); },
                  +[](const ts::Tensor& x, const ts::Tensor& y) { return ts::fmod(x, y); },
                  +[](const ts::Tensor& x, const ts::Tensor& y) { return ts::remainder(x, y); }}) {
    try {
      fn(i, j);
      ADD_FAILURE() << "expected ValueError";
    } catch (const ts::ValueError& e) {
      EXPECT_NE(std::string(e.what()).find("ZeroDivisionError"), std::string::npos);
    }
  }
  EXPECT_THROW(ts::div(i, 0, "floor"), ts::ValueError);
  EXPECT_EQ(ts::div(i, -2, "floor").tolist<int64_t>(), (std::vector<int64_t>{-3, 2, -4}));
  EXPECT_EQ(ts::remainder(i, -3).tolist<int64_t>(), (std::vector<int64_t>{-1, -2, -2}));
  // INT_MIN / -1 wraps instead of trapping.
  ts::Tensor m = ts::tensor(std::vector<int8_t>{-128}, {1});
  EXPECT_EQ(ts::div(m, -1, "floor").tolist<int64_t>(), (std::vector<int64_t>{-128}));
  EXPECT_EQ(ts::remainder(m, -1).tolist<int64_t>(), (std::vector<int64_t>{0}));
  EXPECT_THROW(ts::div(i, j, "round"), ts::ValueError);
  ts::Tensor bb = ts::ones({2}, ts::kBool);
  EXPECT_THROW(ts::div(bb, bb, "floor"), ts::DTypeError);
  EXPECT_THROW(ts::remainder(bb, bb), ts::DTypeError);
  EXPECT_EQ(ts::div(bb, bb).dtype(), ts::kFloat32);
}

TEST(Binary, MaximumMinimumNan) {
  ts::Tensor a = ts::tensor({NAN, 1.0, 2.0});
  ts::Tensor b = ts::tensor({1.0, NAN, 3.0});
  std::vector<double> mx = ts::maximum(a, b).tolist<double>(), mn = ts::minimum(a, b).tolist<double>();
  EXPECT_TRUE(std::isnan(mx[0]) && std::isnan(mx[1]) && mx[2] == 3.0);
  EXPECT_TRUE(std::isnan(mn[0]) && std::isnan(mn[1]) && mn[2] == 2.0);
}

TEST(Binary, SubAndAlphaRules) {
  ts::Tensor b = ts::ones({2}, ts::kBool);
  ts::Tensor i = ts::ones({2}, ts::kInt64);
  EXPECT_THROW(ts::sub(b, b), ts::DTypeError);
  EXPECT_THROW(ts::sub(b, i), ts::DTypeError);
  EXPECT_THROW(ts::sub(i, b), ts::DTypeError);
  EXPECT_THROW(ts::sub(b, 1), ts::DTypeError);
  EXPECT_THROW(ts::add(i, i, 2.5), ts::DTypeError);
  EXPECT_EQ(ts::add(ts::ones({2}), ts::ones({2}), 2.5).tolist<double>(), (std::vector<double>{3.5, 3.5}));
  EXPECT_EQ(ts::sub(ts::ones({2}), 3.0, 2).tolist<double>(), (std::vector<double>{-5, -5}));
}

TEST(Binary, OutAndInPlace) {
  ts::Tensor a = td({3, 4}, ts::kFloat32, 1), b = td({4}, ts::kFloat32, 2);
  ts::Tensor out = ts::empty({3, 4});
  ts::Tensor& r = ts::add_out(a, b, out);
  EXPECT_TRUE(r.is_same(out));
  EXPECT_TRUE(all_close(out, reference(a, b, [](double x, double y) { return x + y; }, ts::kFloat32)));
  // A transposed out is written through its strides.
  ts::Tensor outT = ts::empty({4, 3}).t();
  ts::mul_out(a, b, outT);
  EXPECT_TRUE(all_close(outT, reference(a, b, [](double x, double y) { return x * y; }, ts::kFloat32)));
  // Out of a wider dtype; empty out is resized; comparisons into a float out.
  ts::Tensor o64 = ts::empty({0}, ts::kFloat64);
  ts::sub_out(a, b, o64, 2);
  EXPECT_EQ(o64.sizes(), (ts::Shape{3, 4}));
  EXPECT_TRUE(all_close(o64, reference(a, b, [](double x, double y) { return x - 2 * y; }, ts::kFloat64), {1.3e-6, 1e-5}));
  ts::Tensor of = ts::empty({3, 4});
  ts::lt_out(a, b, of);
  EXPECT_TRUE(all_close(of, reference(a, b, [](double x, double y) { return double(x < y); }, ts::kFloat32)));
  ts::Tensor bad = ts::empty({3, 5});
  EXPECT_THROW(ts::add_out(a, b, bad), ts::ShapeError);
  ts::Tensor iout = ts::empty({3, 4}, ts::kInt32);
  EXPECT_THROW(ts::add_out(a, b, iout), ts::DTypeError);
  ts::Tensor ii = ts::ones({3, 4}, ts::kInt32);
  EXPECT_THROW(ts::div_out(ii, ii, iout), ts::DTypeError);
  ts::div_out(ii, ii, iout, "floor");
  EXPECT_EQ(iout.tolist<int64_t>(), std::vector<int64_t>(12, 1));
  // In place: an integer tensor cannot take a float result; a float one can take an int operand.
  ts::Tensor iv = ts::tensor(std::vector<int64_t>{1, 2}, {2});
  EXPECT_THROW(iv.add_(1.5), ts::DTypeError);
  EXPECT_THROW(iv.div_(2), ts::DTypeError);
  EXPECT_THROW(iv.mul_(ts::ones({2})), ts::DTypeError);
  iv.add_(ts::tensor(std::vector<int64_t>{10, 20}, {2}), 2);
  EXPECT_EQ(iv.tolist<int64_t>(), (std::vector<int64_t>{21, 42}));
  ts::Tensor fv = ts::tensor({1.0, 2.0});
  fv.mul_(ts::tensor(std::vector<int64_t>{3, 4}, {2}));
  fv += 1;
  fv /= 2;
  EXPECT_EQ(fv.tolist<double>(), (std::vector<double>{2.0, 4.5}));
  // In place whose broadcast shape is larger than self fails.
  EXPECT_THROW(ts::ones({4}).add_(ts::ones({3, 4})), ts::ShapeError);
}

TEST(Binary, ThresholdBackward) {
  for (ts::DType dt : {ts::kFloat32, ts::kFloat64, ts::kFloat16, ts::kBFloat16}) {
    SCOPED_TRACE(ts::dtype_name(dt));
    ts::Tensor g = td({3, 4}, dt, 1), self = td({4}, dt, 2, -1, 1);
    ts::Tensor r = ts::threshold_backward(g, self, 0.25);
    EXPECT_EQ(r.dtype(), dt);
    EXPECT_TRUE(all_close(r, reference(g, self, [](double x, double y) { return y <= 0.25 ? 0.0 : x; }, dt)));
  }
  ts::Tensor nan_self = ts::tensor({NAN, 0.0, 1.0});
  EXPECT_EQ(ts::threshold_backward(ts::ones({3}), nan_self, 0).tolist<double>(), (std::vector<double>{1, 0, 1}));
  ts::Tensor ig = ts::tensor(std::vector<int64_t>{1, 2, 3}, {3}), is = ts::tensor(std::vector<int64_t>{-1, 0, 1}, {3});
  EXPECT_EQ(ts::threshold_backward(ig, is, 0).tolist<int64_t>(), (std::vector<int64_t>{0, 0, 3}));
  ts::Tensor i8 = ts::ones({3}, ts::kInt8);
  EXPECT_THROW(ts::threshold_backward(i8, i8, 300), ts::ValueError);  // would wrap to 44
  ts::Tensor bools = ts::ones({3}, ts::kBool);
  EXPECT_THROW(ts::threshold_backward(bools, bools, 0), ts::DTypeError);
  EXPECT_THROW(ts::threshold_backward(ts::ones({3}), ts::ones({4}), 0), ts::ShapeError);
}

// Note [In-place kernels]: the direct path must give what the out-of-place op gives, including when
// the other operand is self, a broadcast, or overlaps self only in part (which takes the general path).
TEST(Binary, InPlaceKernelsMatchOutOfPlace) {
  ts::Tensor base = td({4, 6}, ts::kFloat32, 3);
  ts::Tensor t = base.clone();
  t.add_(td({6}, ts::kFloat32, 4), 0.5);
  EXPECT_TRUE(ts::equal(t, ts::add(base, td({6}, ts::kFloat32, 4), 0.5)));
  ts::Tensor s = base.clone();
  s.add_(s);
  EXPECT_TRUE(ts::equal(s, base * 2.0));
  ts::Tensor r = base.clone().t();  // a transposed self keeps its strides
  r.relu_();
  EXPECT_TRUE(ts::equal(r, ts::relu(base.t())));
  EXPECT_EQ(r.strides(), (ts::Shape{1, 6}));
  // Partial overlap: row i += row i - 1 must read the old rows (computed out of place first).
  ts::Tensor p = base.clone();
  ts::Tensor expected = base.narrow(0, 1, 3) + base.narrow(0, 0, 3);
  p.narrow(0, 1, 3).add_(p.narrow(0, 0, 3));
  EXPECT_TRUE(ts::equal(p.narrow(0, 1, 3), expected));
  // A float16 self with a float32 operand promotes to float32: the general path casts back.
  ts::Tensor h = base.to(ts::kFloat16);
  h.mul_(ts::full({6}, 3.0));
  EXPECT_TRUE(ts::equal(h, (base.to(ts::kFloat16).to(ts::kFloat32) * 3.0).to(ts::kFloat16)));
  ts::Tensor e = ts::zeros({1, 6}).expand({4, 6});
  EXPECT_THROW(e.relu_(), ts::ValueError);  // writing into an expanded tensor
  // A self whose elements share addresses (sliding windows) keeps the general path: each element is
  // computed from the old values and written once, [1, 1, 1, 1] here.
  ts::Tensor w = ts::zeros({4});
  w.as_strided({3, 2}, {1, 1}).add_(1.0);
  EXPECT_EQ(w.tolist<double>(), (std::vector<double>{1, 1, 1, 1}));
  // Subtracting a bool raises as the out-of-place op does (PyTorch's rule); adding one is allowed.
  ts::Tensor f = ts::ones({3});
  EXPECT_THROW(f.sub_(ts::Scalar(true)), ts::DTypeError);
  EXPECT_THROW(f.sub_(ts::ones({3}, ts::kBool)), ts::DTypeError);
  f.add_(ts::Scalar(true));
  EXPECT_EQ(f.tolist<double>(), (std::vector<double>{2, 2, 2}));
}

TEST(Binary, ScalarOperandsAndOperators) {
  ts::Tensor x = td({5, 3}, ts::kFloat32, 5);
  auto ref = [&](const RefFn& f) { return reference(x, ts::scalar_tensor(1.5, ts::kFloat64), f, ts::kFloat32); };
  EXPECT_TRUE(all_close(x + 1.5, ref([](double a, double b) { return a + b; })));
  EXPECT_TRUE(all_close(x - 1.5, ref([](double a, double b) { return a - b; })));
  EXPECT_TRUE(all_close(x * 1.5, ref([](double a, double b) { return a * b; })));
  EXPECT_TRUE(all_close(x / 1.5, ref([](double a, double b) { return a / b; })));
  EXPECT_TRUE(all_close(1.5 - x, ref([](double a, double b) { return b - a; })));
  EXPECT_TRUE(all_close(1.5 / x, ref([](double a, double b) { return b / a; })));
  EXPECT_TRUE(all_close(ts::maximum(x, 1.5), ref([](double a, double b) { return std::max(a, b); })));
  EXPECT_TRUE(all_close(ts::pow(x, 2), ref([](double a, double) { return a * a; })));
  EXPECT_TRUE(all_close(ts::remainder(x, 1.5), ref(py_mod)));
  EXPECT_TRUE(all_close(-x, ref([](double a, double) { return -a; })));
  EXPECT_TRUE(all_close(x > 0.5, reference(x, ts::scalar_tensor(0.5, ts::kFloat64), [](double a, double b) { return double(a > b); }, ts::kBool)));
}

TEST(Binary, Errors) {
  ts::Tensor a = ts::ones({3, 4}), b = ts::ones({5});
  try {
    ts::add(a, b);
    ADD_FAILURE() << "expected ShapeError";
  } catch (const ts::ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("must match the size"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ts::mul(a, b), ts::ShapeError);
  EXPECT_THROW(ts::eq(a, b), ts::ShapeError);
  ts::Tensor m = ts::ones({3, 4}, ts::TensorOptions("meta"));
  EXPECT_THROW(ts::add(a, m), ts::DeviceError);
  EXPECT_THROW(ts::eq(m, a), ts::DeviceError);
  ts::Tensor out = ts::empty({3, 4});
  EXPECT_THROW(ts::add_out(m, m, out), ts::DeviceError);
  EXPECT_THROW(ts::add(ts::Tensor(), a), ts::ValueError);
}

TEST(Binary, MetaTensors) {
  ts::Tensor a = ts::empty({2, 1, 3}, ts::TensorOptions(ts::kInt32, "meta"));
  ts::Tensor b = ts::empty({4, 1}, ts::TensorOptions(ts::kFloat16, "meta"));
  ts::Tensor y = ts::add(a, b);
  EXPECT_TRUE(y.is_meta());
  EXPECT_EQ(y.sizes(), (ts::Shape{2, 4, 3}));
  EXPECT_EQ(y.dtype(), ts::kFloat16);
  EXPECT_EQ(ts::div(a, 2).dtype(), ts::kFloat32);
  EXPECT_EQ(ts::lt(a, b).dtype(), ts::kBool);
  EXPECT_THROW(ts::bitwise_and(b, b), ts::DTypeError);
}
