// Unary ops against float64 references computed with std:: math on the host, in every dtype each op
// takes, on contiguous / transposed / sliced layouts, zero-size and 0-dim inputs; PyTorch's dtype rules
// (integers promote to float32 for the float functions), edge values (inf, nan, -0, denormals, overflow),
// out= and in-place rules, meta tensors and the errors.
#include <cmath>
#include <functional>
#include <limits>

#include "common/test_util.h"

namespace ts = tessera;
using namespace tessera::testing;

namespace {

// test_data gives a 1-D tensor for an empty shape; reshape makes it 0-dim.
ts::Tensor td(const ts::Shape& s, ts::DType dt, uint64_t seed, double lo = -5, double hi = 5) {
  return test_data(s, dt, seed, lo, hi).reshape(s);
}

using UnaryFn = std::function<ts::Tensor(const ts::Tensor&)>;
using RefFn = std::function<double(double)>;
enum class Rule { FloatFn, Keep, Bool };  // result dtype: float32 for non-floats / same / bool

ts::Tensor from_values(const std::vector<double>& v, const ts::Shape& shape) {
  return ts::tensor(v, {static_cast<int64_t>(v.size())}, ts::kFloat64).reshape(shape);
}

ts::Tensor reference(const ts::Tensor& x, const RefFn& ref) {
  std::vector<double> v = x.tolist<double>();
  for (double& e : v) e = ref(e);
  return from_values(v, x.sizes());
}

ts::DType result_dtype(Rule r, ts::DType in) {
  if (r == Rule::Bool) return ts::kBool;
  if (r == Rule::FloatFn && !ts::is_floating_point(in)) return ts::kFloat32;
  return in;
}

const std::vector<ts::Shape>& shapes() {
  static const std::vector<ts::Shape> s = {{3, 5}, {2, 3, 4}, {0, 4}, {}, {7}};
  return s;
}

void check_unary(const char* name, const UnaryFn& op, const RefFn& ref, const std::vector<ts::DType>& dtypes, Rule rule,
                 double lo = -5, double hi = 5) {
  for (ts::DType dt : dtypes) {
    for (const ts::Shape& shape : shapes()) {
      for (const Layout& layout : layouts()) {
        ts::Tensor x = layout.apply(td(shape, dt, 7, lo, hi));
        ts::Tensor y = op(x);
        SCOPED_TRACE(::testing::Message() << name << " dtype " << ts::dtype_name(dt) << " shape " << ::testing::PrintToString(shape)
                                          << " layout " << layout.name);
        EXPECT_EQ(y.dtype(), result_dtype(rule, dt));
        EXPECT_EQ(y.sizes(), shape);
        EXPECT_TRUE(all_close(y, reference(x, ref)));
      }
    }
  }
}

std::vector<ts::DType> no_bool() { return {ts::kUInt8, ts::kInt8, ts::kInt32, ts::kInt64, ts::kFloat16, ts::kBFloat16, ts::kFloat32, ts::kFloat64}; }
std::vector<ts::DType> signed_no_bool() { return {ts::kInt8, ts::kInt32, ts::kInt64, ts::kFloat16, ts::kBFloat16, ts::kFloat32, ts::kFloat64}; }

double sigmoid_ref(double v) { return 1.0 / (1.0 + std::exp(-v)); }
double gelu_ref(double v) { return 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0))); }
double gelu_tanh_ref(double v) { return 0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v))); }
double silu_ref(double v) { return v / (1.0 + std::exp(-v)); }
double softplus_ref(double v, double beta = 1, double threshold = 20) {
  return v * beta > threshold ? v : std::log1p(std::exp(v * beta)) / beta;
}
double sign_ref(double v) { return v > 0 ? 1.0 : (v < 0 ? -1.0 : 0.0); }

}  // namespace

TEST(Unary, FloatFunctionsAllDtypes) {
  struct Case { const char* name; UnaryFn op; RefFn ref; };
  const std::vector<Case> cases = {
      {"exp", [](auto& x) { return ts::exp(x); }, [](double v) { return std::exp(v); }},
      {"exp2", [](auto& x) { return ts::exp2(x); }, [](double v) { return std::exp2(v); }},
      {"log", [](auto& x) { return ts::log(x); }, [](double v) { return std::log(v); }},
      {"log2", [](auto& x) { return ts::log2(x); }, [](double v) { return std::log2(v); }},
      {"log1p", [](auto& x) { return ts::log1p(x); }, [](double v) { return std::log1p(v); }},
      {"expm1", [](auto& x) { return ts::expm1(x); }, [](double v) { return std::expm1(v); }},
      {"sqrt", [](auto& x) { return ts::sqrt(x); }, [](double v) { return std::sqrt(v); }},
      {"rsqrt", [](auto& x) { return ts::rsqrt(x); }, [](double v) { return 1.0 / std::sqrt(v); }},
      {"sin", [](auto& x) { return ts::sin(x); }, [](double v) { return std::sin(v); }},
      {"cos", [](auto& x) { return ts::cos(x); }, [](double v) { return std::cos(v); }},
      {"tan", [](auto& x) { return ts::tan(x); }, [](double v) { return std::tan(v); }},
      {"tanh", [](auto& x) { return ts::tanh(x); }, [](double v) { return std::tanh(v); }},
      {"sigmoid", [](auto& x) { return ts::sigmoid(x); }, sigmoid_ref},
      {"erf", [](auto& x) { return ts::erf(x); }, [](double v) { return std::erf(v); }},
      {"reciprocal", [](auto& x) { return ts::reciprocal(x); }, [](double v) { return 1.0 / v; }},
  };
  for (const Case& c : cases) check_unary(c.name, c.op, c.ref, all_dtypes(), Rule::FloatFn);
}

TEST(Unary, ActivationsFloatOnly) {
  check_unary("gelu", [](auto& x) { return ts::gelu(x); }, gelu_ref, float_dtypes(), Rule::Keep);
  check_unary("gelu_tanh", [](auto& x) { return ts::gelu(x, "tanh"); }, gelu_tanh_ref, float_dtypes(), Rule::Keep);
  check_unary("silu", [](auto& x) { return ts::silu(x); }, silu_ref, float_dtypes(), Rule::Keep);
  check_unary("softplus", [](auto& x) { return ts::softplus(x); }, [](double v) { return softplus_ref(v); },
              float_dtypes(), Rule::Keep);
  check_unary("softplus_beta", [](auto& x) { return ts::softplus(x, 2.0, 3.0); },
              [](double v) { return softplus_ref(v, 2.0, 3.0); }, float_dtypes(), Rule::Keep);
  for (ts::DType dt : {ts::kInt32, ts::kInt64, ts::kBool}) {
    ts::Tensor x = ts::zeros({3}, dt);
    EXPECT_THROW(ts::gelu(x), ts::DTypeError);
    EXPECT_THROW(ts::silu(x), ts::DTypeError);
    EXPECT_THROW(ts::softplus(x), ts::DTypeError);
  }
  EXPECT_THROW(ts::gelu(ts::zeros({3}), "fast"), ts::ValueError);
}

TEST(Unary, IntegerKeepingOps) {
  check_unary("neg", [](auto& x) { return ts::neg(x); }, [](double v) { return -v; }, signed_no_bool(), Rule::Keep);
  check_unary("abs", [](auto& x) { return ts::abs(x); }, [](double v) { return std::fabs(v); }, no_bool(), Rule::Keep);
  check_unary("relu", [](auto& x) { return ts::relu(x); }, [](double v) { return v < 0 ? 0.0 : v; }, no_bool(), Rule::Keep);
  check_unary("floor", [](auto& x) { return ts::floor(x); }, [](double v) { return std::floor(v); }, no_bool(), Rule::Keep);
  check_unary("ceil", [](auto& x) { return ts::ceil(x); }, [](double v) { return std::ceil(v); }, no_bool(), Rule::Keep);
  check_unary("round", [](auto& x) { return ts::round(x); }, [](double v) { return std::nearbyint(v); }, no_bool(), Rule::Keep);
  check_unary("trunc", [](auto& x) { return ts::trunc(x); }, [](double v) { return std::trunc(v); }, no_bool(), Rule::Keep);
  check_unary("sign", [](auto& x) { return ts::sign(x); }, sign_ref, all_dtypes(), Rule::Keep);
  // Scaled so that rounding sees fractions, not only normal(0, 1) values.
  check_unary("round_scaled", [](auto& x) { return ts::round(ts::mul(x, 3.7)); },
              [](double v) { return std::nearbyint(static_cast<double>(static_cast<float>(v * 3.7f))); },
              {ts::kFloat32}, Rule::Keep);
  for (auto fn : {+[](const ts::Tensor& x) { return ts::neg(x); }, +[](const ts::Tensor& x) { return ts::abs(x); },
                  +[](const ts::Tensor& x) { return ts::relu(x); }, +[](const ts::Tensor& x) { return ts::floor(x); },
                  +[](const ts::Tensor& x) { return ts::round(x); }}) {
    EXPECT_THROW(fn(ts::ones({2}, ts::kBool)), ts::DTypeError);
  }
}

TEST(Unary, RoundHalfToEvenAndUint8Neg) {
  ts::Tensor x = ts::tensor({0.5, 1.5, 2.5, -0.5, -2.5, 3.5, -3.5});
  EXPECT_EQ(ts::round(x).tolist<double>(), (std::vector<double>{0, 2, 2, -0.0, -2, 4, -4}));
  EXPECT_TRUE(std::signbit(ts::round(x).tolist<float>()[3]));
  // abs of int8 -128 wraps, as in PyTorch.
  EXPECT_EQ(ts::abs(ts::tensor(std::vector<int8_t>{-128, -3}, {2})).tolist<int64_t>(), (std::vector<int64_t>{-128, 3}));
  EXPECT_EQ(ts::neg(ts::tensor(std::vector<uint8_t>{1, 0}, {2})).tolist<int64_t>(), (std::vector<int64_t>{255, 0}));
}

TEST(Unary, PredicatesAndBitwiseNot) {
  check_unary("logical_not", [](auto& x) { return ts::logical_not(x); }, [](double v) { return v == 0 ? 1.0 : 0.0; },
              all_dtypes(), Rule::Bool);
  check_unary("isnan", [](auto& x) { return ts::isnan(x); }, [](double v) { return std::isnan(v) ? 1.0 : 0.0; },
              all_dtypes(), Rule::Bool);
  check_unary("isinf", [](auto& x) { return ts::isinf(x); }, [](double v) { return std::isinf(v) ? 1.0 : 0.0; },
              all_dtypes(), Rule::Bool);
  check_unary("isfinite", [](auto& x) { return ts::isfinite(x); }, [](double v) { return std::isfinite(v) ? 1.0 : 0.0; },
              all_dtypes(), Rule::Bool);
  for (ts::DType dt : {ts::kBool, ts::kUInt8, ts::kInt8, ts::kInt32, ts::kInt64}) {
    check_unary("bitwise_not", [](auto& x) { return ts::bitwise_not(x); },
                [dt](double v) { return dt == ts::kBool ? (v == 0 ? 1.0 : 0.0) : dt == ts::kUInt8 ? 255 - v : -v - 1; },
                {dt}, Rule::Keep);
  }
  EXPECT_THROW(ts::bitwise_not(ts::zeros({2})), ts::DTypeError);
  ts::Tensor e = ts::tensor({INFINITY, -INFINITY, NAN, 0.0, 1.0});
  EXPECT_EQ(ts::isnan(e).tolist<int64_t>(), (std::vector<int64_t>{0, 0, 1, 0, 0}));
  EXPECT_EQ(ts::isinf(e).tolist<int64_t>(), (std::vector<int64_t>{1, 1, 0, 0, 0}));
  EXPECT_EQ(ts::isfinite(e).tolist<int64_t>(), (std::vector<int64_t>{0, 0, 0, 1, 1}));
  EXPECT_EQ(ts::logical_not(e).tolist<int64_t>(), (std::vector<int64_t>{0, 0, 0, 1, 0}));
}

TEST(Unary, NanToNum) {
  for (ts::DType dt : float_dtypes()) {
    ts::Tensor x = ts::tensor({NAN, INFINITY, -INFINITY, 1.5}).to(dt);
    double big = dt == ts::kFloat16 ? 65504.0 : dt == ts::kBFloat16 ? 3.3895313892515355e38
               : dt == ts::kFloat32 ? std::numeric_limits<float>::max() : std::numeric_limits<double>::max();
    std::vector<double> expect{0, big, -big, 1.5};
    EXPECT_EQ(ts::nan_to_num(x).tolist<double>(), expect) << ts::dtype_name(dt);
    EXPECT_EQ(ts::nan_to_num(x, 2.0, 3.0, -4.0).tolist<double>(), (std::vector<double>{2, 3, -4, 1.5}));
  }
  ts::Tensor i = ts::tensor(std::vector<int32_t>{1, -2}, {2});
  EXPECT_EQ(ts::nan_to_num(i).dtype(), ts::kInt32);
  EXPECT_EQ(ts::nan_to_num(i).tolist<int64_t>(), (std::vector<int64_t>{1, -2}));
}

// Edge values through the vectorized float32 paths and the float64 paths: inf, -inf, nan, +-0,
// denormals, values that overflow or underflow the result, large and small magnitudes.
TEST(Unary, EdgeValues) {
  const std::vector<double> edge = {INFINITY, -INFINITY, NAN, 0.0, -0.0, 1e-40, -1e-40, 1e-30, -1e-30, 1e-7, -1e-7,
                                    0.3, -0.3, 0.62, -0.64, 0.93, -0.95, 2.5, -2.5, 9.0, -9.0, 15.0, -15.0, 20.5, -20.5,
                                    87.0, -87.0, 88.7, 88.8, 89.5, -88.8, -100.0, -103.9, -104.5, 700.0, -745.0,
                                    1e30, -1e30, 3.4e38, -3.4e38};
  struct Case { const char* name; UnaryFn op; RefFn ref; };
  const std::vector<Case> cases = {
      {"exp", [](auto& x) { return ts::exp(x); }, [](double v) { return std::exp(v); }},
      {"log", [](auto& x) { return ts::log(x); }, [](double v) { return std::log(v); }},
      {"tanh", [](auto& x) { return ts::tanh(x); }, [](double v) { return std::tanh(v); }},
      {"erf", [](auto& x) { return ts::erf(x); }, [](double v) { return std::erf(v); }},
      {"sigmoid", [](auto& x) { return ts::sigmoid(x); }, sigmoid_ref},
      {"softplus", [](auto& x) { return ts::softplus(x); }, [](double v) { return softplus_ref(v); }},
      {"gelu", [](auto& x) { return ts::gelu(x); }, gelu_ref},
      {"gelu_tanh", [](auto& x) { return ts::gelu(x, "tanh"); }, gelu_tanh_ref},
      {"silu", [](auto& x) { return ts::silu(x); }, silu_ref},
      {"expm1", [](auto& x) { return ts::expm1(x); }, [](double v) { return std::expm1(v); }},
      {"log1p", [](auto& x) { return ts::log1p(x); }, [](double v) { return std::log1p(v); }},
      {"relu", [](auto& x) { return ts::relu(x); }, [](double v) { return v < 0 ? 0.0 : v; }},
      {"sign", [](auto& x) { return ts::sign(x); }, sign_ref},
  };
  for (ts::DType dt : {ts::kFloat32, ts::kFloat64}) {
    // Longer than one vector so both the vector body and the tail run; also a strided copy.
    std::vector<double> many;
    for (int r = 0; r < 3; ++r) many.insert(many.end(), edge.begin(), edge.end());
    ts::Tensor x = ts::tensor(many, {static_cast<int64_t>(many.size())}, dt);
    for (ts::Tensor in : {x, x.slice(0, 0, std::nullopt, 3)}) {
      for (const Case& c : cases) {
        ts::Tensor y = c.op(in);
        // The reference is rounded to the result dtype first so that overflow to inf matches.
        ts::Tensor ref = reference(in, c.ref).to(dt);
        EXPECT_TRUE(all_close(y, ref)) << c.name << " " << ts::dtype_name(dt);
      }
    }
  }
}

TEST(Unary, LargeContiguousFloat32UsesFastPathCorrectly) {
  // Big enough to run in parallel chunks through the vectorized loops.
  ts::Tensor x = ts::linspace(-30, 30, 100003);
  for (auto [name, op, ref] : std::vector<std::tuple<const char*, UnaryFn, RefFn>>{
           {"exp", [](auto& t) { return ts::exp(t); }, [](double v) { return std::exp(v); }},
           {"tanh", [](auto& t) { return ts::tanh(t); }, [](double v) { return std::tanh(v); }},
           {"sigmoid", [](auto& t) { return ts::sigmoid(t); }, sigmoid_ref},
           {"gelu", [](auto& t) { return ts::gelu(t); }, gelu_ref},
           {"silu", [](auto& t) { return ts::silu(t); }, silu_ref},
           {"erf", [](auto& t) { return ts::erf(t); }, [](double v) { return std::erf(v); }}}) {
    EXPECT_TRUE(all_close(op(x), reference(x, ref))) << name;
  }
}

TEST(Unary, OutAndInPlace) {
  ts::Tensor x = td({4, 3}, ts::kFloat32, 3);
  ts::Tensor out = ts::empty({4, 3});
  ts::Tensor& r = ts::exp_out(x, out);
  EXPECT_TRUE(r.is_same(out));
  EXPECT_TRUE(all_close(out, reference(x, [](double v) { return std::exp(v); })));
  // Float result into a float64 out converts; an empty out is resized.
  ts::Tensor out64 = ts::empty({0}, ts::kFloat64);
  ts::sin_out(x, out64);
  EXPECT_EQ(out64.sizes(), (ts::Shape{4, 3}));
  EXPECT_TRUE(all_close(out64, reference(x, [](double v) { return std::sin(v); }), {1.3e-6, 1e-5}));
  // Wrong shape non-empty out; float result into an int out; out on another device.
  ts::Tensor bad = ts::empty({5});
  EXPECT_THROW(ts::exp_out(x, bad), ts::ShapeError);
  ts::Tensor iout = ts::empty({4, 3}, ts::kInt32);
  EXPECT_THROW(ts::exp_out(x, iout), ts::DTypeError);
  ts::Tensor mout = ts::empty({4, 3}, ts::TensorOptions("meta"));
  EXPECT_THROW(ts::exp_out(x, mout), ts::DeviceError);
  // abs of int into int out is fine; in place on a strided view writes through the view.
  ts::Tensor i = ts::tensor(std::vector<int32_t>{-1, 2, -3, 4}, {2, 2});
  ts::Tensor iout2 = ts::empty({2, 2}, ts::kInt64);
  ts::abs_out(i, iout2);
  EXPECT_EQ(iout2.tolist<int64_t>(), (std::vector<int64_t>{1, 2, 3, 4}));
  ts::Tensor y = x.clone();
  ts::Tensor col = y.select(1, 1);
  col.neg_();
  EXPECT_TRUE(all_close(y.select(1, 1), ts::neg(x.select(1, 1))));
  EXPECT_TRUE(all_close(y.select(1, 0), x.select(1, 0)));
  // In place on an integer tensor with a float result is refused.
  ts::Tensor iv = ts::tensor(std::vector<int64_t>{1, 2}, {2});
  EXPECT_THROW(iv.exp_(), ts::DTypeError);
  EXPECT_THROW(iv.sqrt_(), ts::DTypeError);
  iv.neg_();
  EXPECT_EQ(iv.tolist<int64_t>(), (std::vector<int64_t>{-1, -2}));
  ts::Tensor xx = ts::tensor({1.0, 4.0});
  xx.sqrt_();
  EXPECT_EQ(xx.tolist<double>(), (std::vector<double>{1.0, 2.0}));
}

TEST(Unary, MetaTensors) {
  ts::Tensor m = ts::empty({2, 3}, ts::TensorOptions(ts::kInt32, "meta"));
  ts::Tensor y = ts::exp(m);
  EXPECT_TRUE(y.is_meta());
  EXPECT_EQ(y.dtype(), ts::kFloat32);
  EXPECT_EQ(y.sizes(), (ts::Shape{2, 3}));
  EXPECT_EQ(ts::isnan(m).dtype(), ts::kBool);
  EXPECT_EQ(ts::abs(m).dtype(), ts::kInt32);
  EXPECT_THROW(ts::gelu(m), ts::DTypeError);
}
