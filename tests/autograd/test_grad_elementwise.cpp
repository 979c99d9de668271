// Derivatives of the elementwise ops: gradcheck and gradgradcheck (float64) of every differentiable
// unary, binary and ternary op and of softmax/log_softmax, on contiguous, transposed, sliced-with-step
// and broadcast inputs kept away from non-differentiable points; PyTorch's rules at those points
// (ties, bounds, zeros) against values PyTorch 1.13 gives; type promotion; in-place ops and saved
// tensors; anomaly mode; no_grad and out=.
#include <cmath>
#include <limits>

#include "common/test_util.h"

namespace ts = tessera;
using namespace tessera::testing;

namespace {

using Fn = std::function<ts::Tensor(const std::vector<ts::Tensor>&)>;

// Where an input's values lie, so that each op is checked away from its non-differentiable points.
enum class Domain { Any, Positive, AwayFromZero, Unit };

ts::Tensor values(const ts::Shape& s, uint64_t seed, Domain d) {
  ts::Tensor x = test_data(s, ts::kFloat64, seed);
  switch (d) {
    case Domain::Any: return x;
    case Domain::Positive: return x.abs() + 0.5;                          // log, sqrt, pow's base
    case Domain::AwayFromZero: return x.sign() * (x.abs() + 0.3);         // abs, relu, divisors
    case Domain::Unit: return x.tanh();                                   // tan
  }
  return x;
}

// A leaf of `s` in `layout` (see test_util.h) holding values of domain `d`.
ts::Tensor leaf(const ts::Shape& s, uint64_t seed, Domain d = Domain::Any, const Layout* layout = nullptr) {
  ts::Tensor v = values(s, seed, d);
  ts::Tensor t = layout ? layout->apply(v) : v;
  return t.requires_grad_();
}

ts::Tensor f64(std::initializer_list<double> v) { return ts::tensor(v, ts::kFloat64); }

// gradcheck and gradgradcheck of f(inputs), the first failure reported with `what`.
void check(const std::string& what, const Fn& f, const std::vector<ts::Tensor>& inputs, bool second = true) {
  ts::autograd::GradcheckFn fn = [f](const std::vector<ts::Tensor>& in) { return std::vector<ts::Tensor>{f(in)}; };
  std::string report;
  EXPECT_TRUE(ts::autograd::gradcheck(fn, inputs, {}, &report)) << what << ": gradcheck\n" << report;
  if (!second) return;
  report.clear();
  EXPECT_TRUE(ts::autograd::gradgradcheck(fn, inputs, {}, &report)) << what << ": gradgradcheck\n" << report;
}

// Double backward through broadcasting (the engine sums gradients to the input's shape) and through
// softmax's formula needs sum to be differentiable; that derivative belongs to the reductions.
bool sum_is_differentiable() {
  ts::Tensor x = ts::zeros({2}, ts::kFloat64).requires_grad_();
  try {
    return ts::sum(x, 0, true).requires_grad();
  } catch (const ts::Error&) {
    return false;
  }
}

struct UnaryCase {
  const char* name;
  std::function<ts::Tensor(const ts::Tensor&)> f;
  Domain domain;
};

std::vector<UnaryCase> unary_cases() {
  return {
      {"neg", [](const ts::Tensor& x) { return ts::neg(x); }, Domain::Any},
      {"abs", [](const ts::Tensor& x) { return ts::abs(x); }, Domain::AwayFromZero},
      {"exp", [](const ts::Tensor& x) { return ts::exp(x); }, Domain::Any},
      {"exp2", [](const ts::Tensor& x) { return ts::exp2(x); }, Domain::Any},
      {"log", [](const ts::Tensor& x) { return ts::log(x); }, Domain::Positive},
      {"log2", [](const ts::Tensor& x) { return ts::log2(x); }, Domain::Positive},
      {"log1p", [](const ts::Tensor& x) { return ts::log1p(x); }, Domain::Positive},
      {"expm1", [](const ts::Tensor& x) { return ts::expm1(x); }, Domain::Any},
      {"sqrt", [](const ts::Tensor& x) { return ts::sqrt(x); }, Domain::Positive},
      {"rsqrt", [](const ts::Tensor& x) { return ts::rsqrt(x); }, Domain::Positive},
      {"sin", [](const ts::Tensor& x) { return ts::sin(x); }, Domain::Any},
      {"cos", [](const ts::Tensor& x) { return ts::cos(x); }, Domain::Any},
      {"tan", [](const ts::Tensor& x) { return ts::tan(x); }, Domain::Unit},
      {"tanh", [](const ts::Tensor& x) { return ts::tanh(x); }, Domain::Any},
      {"sigmoid", [](const ts::Tensor& x) { return ts::sigmoid(x); }, Domain::Any},
      {"relu", [](const ts::Tensor& x) { return ts::relu(x); }, Domain::AwayFromZero},
      {"gelu", [](const ts::Tensor& x) { return ts::gelu(x); }, Domain::Any},
      {"gelu_tanh", [](const ts::Tensor& x) { return ts::gelu(x, "tanh"); }, Domain::Any},
      {"silu", [](const ts::Tensor& x) { return ts::silu(x); }, Domain::Any},
      {"hardswish", [](const ts::Tensor& x) { return ts::hardswish(x); }, Domain::Any},
      {"softplus", [](const ts::Tensor& x) { return ts::softplus(x); }, Domain::Any},
      // beta 2, threshold 1.5: the linear branch is taken for x > 0.75.
      {"softplus_beta", [](const ts::Tensor& x) { return ts::softplus(x, 2.0, 1.5); }, Domain::Any},
      {"erf", [](const ts::Tensor& x) { return ts::erf(x); }, Domain::Any},
      {"floor", [](const ts::Tensor& x) { return ts::floor(x); }, Domain::Any},
      {"ceil", [](const ts::Tensor& x) { return ts::ceil(x); }, Domain::Any},
      {"round", [](const ts::Tensor& x) { return ts::round(x); }, Domain::Any},
      {"trunc", [](const ts::Tensor& x) { return ts::trunc(x); }, Domain::Any},
      {"sign", [](const ts::Tensor& x) { return ts::sign(x); }, Domain::AwayFromZero},
      {"reciprocal", [](const ts::Tensor& x) { return ts::reciprocal(x); }, Domain::AwayFromZero},
      {"nan_to_num", [](const ts::Tensor& x) { return ts::nan_to_num(x); }, Domain::Any},
      // Tensor-Scalar forms: the number is recorded as a 0-dim tensor that takes no gradient.
      {"add_scalar", [](const ts::Tensor& x) { return ts::add(x, 2.0, 3.0); }, Domain::Any},
      {"sub_scalar", [](const ts::Tensor& x) { return ts::sub(x, 1.5, -2.0); }, Domain::Any},
      {"rsub_scalar", [](const ts::Tensor& x) { return 2.0 - x; }, Domain::Any},
      {"mul_scalar", [](const ts::Tensor& x) { return ts::mul(x, 2.5); }, Domain::Any},
      {"div_scalar", [](const ts::Tensor& x) { return ts::div(x, -3.0); }, Domain::Any},
      {"rdiv_scalar", [](const ts::Tensor& x) { return 1.5 / x; }, Domain::AwayFromZero},
      {"pow_scalar_exponent", [](const ts::Tensor& x) { return ts::pow(x, 2.5); }, Domain::Positive},
      {"pow_integer_exponent", [](const ts::Tensor& x) { return ts::pow(x, 3); }, Domain::Any},
      {"pow_scalar_base", [](const ts::Tensor& x) { return ts::pow(2.0, x); }, Domain::Any},
      {"maximum_scalar", [](const ts::Tensor& x) { return ts::maximum(x, 0.3); }, Domain::Any},
      {"minimum_scalar", [](const ts::Tensor& x) { return ts::minimum(x, 0.3); }, Domain::Any},
      {"fmod_scalar", [](const ts::Tensor& x) { return ts::fmod(x, 1.5); }, Domain::Any},
      {"remainder_scalar", [](const ts::Tensor& x) { return ts::remainder(x, 1.5); }, Domain::Any},
      {"atan2_scalar", [](const ts::Tensor& x) { return ts::atan2(x, 2.0); }, Domain::Any},
      {"clamp_both", [](const ts::Tensor& x) { return ts::clamp(x, ts::Scalar(-0.5), ts::Scalar(0.7)); }, Domain::Any},
      {"clamp_min", [](const ts::Tensor& x) { return ts::clamp(x, ts::Scalar(-0.5)); }, Domain::Any},
      {"clamp_max", [](const ts::Tensor& x) { return ts::clamp(x, std::nullopt, ts::Scalar(0.7)); }, Domain::Any},
  };
}

TEST(GradElementwise, UnaryOpsOnEveryLayout) {
  for (const UnaryCase& c : unary_cases()) {
    for (const Layout& layout : layouts()) {
      ts::Tensor x = leaf({3, 4}, 11, c.domain, &layout);
      auto f = c.f;
      check(std::string(c.name) + " " + layout.name, [f](const std::vector<ts::Tensor>& in) { return f(in[0]); }, {x});
    }
  }
}

TEST(GradElementwise, UnaryOpsOnZeroDimAndEmpty) {
  for (const UnaryCase& c : unary_cases()) {
    ts::Tensor x = leaf({}, 12, c.domain);
    auto f = c.f;
    check(std::string(c.name) + " 0-dim", [f](const std::vector<ts::Tensor>& in) { return f(in[0]); }, {x});
    ts::Tensor e = ts::zeros({0, 3}, ts::kFloat64).requires_grad_();
    ts::Tensor y = f(e);
    y.backward(ts::zeros({0, 3}, ts::kFloat64));
    ASSERT_TRUE(e.grad().defined()) << c.name;
    EXPECT_EQ(e.grad().sizes(), (ts::Shape{0, 3})) << c.name;
  }
}

struct BinaryCase {
  const char* name;
  std::function<ts::Tensor(const ts::Tensor&, const ts::Tensor&)> f;
  Domain a, b;
};

std::vector<BinaryCase> binary_cases() {
  return {
      {"add", [](const ts::Tensor& a, const ts::Tensor& b) { return ts::add(a, b); }, Domain::Any, Domain::Any},
      {"add_alpha", [](const ts::Tensor& a, const ts::Tensor& b) { return ts::add(a, b, 2.5); }, Domain::Any, Domain::Any},
      {"sub_alpha", [](const ts::Tensor& a, const ts::Tensor& b) { return ts::sub(a, b, -1.5); }, Domain::Any, Domain::Any},
      {"mul", [](const ts::Tensor& a, const ts::Tensor& b) { return ts::mul(a, b); }, Domain::Any, Domain::Any},
      {"div", [](const ts::Tensor& a, const ts::Tensor& b) { return ts::div(a, b); }, Domain::Any, Domain::AwayFromZero},
      {"div_trunc", [](const ts::Tensor& a, const ts::Tensor& b) { return ts::div(a, b, "trunc"); }, Domain::Any,
       Domain::AwayFromZero},
      {"div_floor", [](const ts::Tensor& a, const ts::Tensor& b) { return ts::div(a, b, "floor"); }, Domain::Any,
       Domain::AwayFromZero},
      {"pow", [](const ts::Tensor& a, const ts::Tensor& b) { return ts::pow(a, b); }, Domain::Positive, Domain::Any},
      {"maximum", [](const ts::Tensor& a, const ts::Tensor& b) { return ts::maximum(a, b); }, Domain::Any, Domain::Any},
      {"minimum", [](const ts::Tensor& a, const ts::Tensor& b) { return ts::minimum(a, b); }, Domain::Any, Domain::Any},
      {"fmod", [](const ts::Tensor& a, const ts::Tensor& b) { return ts::fmod(a, b); }, Domain::Any,
       Domain::AwayFromZero},
      {"remainder", [](const ts::Tensor& a, const ts::Tensor& b) { return ts::remainder(a, b); }, Domain::Any,
       Domain::AwayFromZero},
      {"atan2", [](const ts::Tensor& a, const ts::Tensor& b) { return ts::atan2(a, b); }, Domain::Any, Domain::Any},
      {"logaddexp", [](const ts::Tensor& a, const ts::Tensor& b) { return ts::logaddexp(a, b); }, Domain::Any,
       Domain::Any},
      {"lerp_scalar", [](const ts::Tensor& a, const ts::Tensor& b) { return ts::lerp(a, b, 0.3); }, Domain::Any,
       Domain::Any},
      {"where_tensors",
       [](const ts::Tensor& a, const ts::Tensor& b) {
         ts::Tensor cond = ts::gt(test_data(a.sizes(), ts::kFloat64, 99), 0.0);
         return ts::where(cond, a, b);
       },
       Domain::Any, Domain::Any},
  };
}

Fn binary_fn(const BinaryCase& c) {
  auto f = c.f;
  return [f](const std::vector<ts::Tensor>& in) { return f(in[0], in[1]); };
}

TEST(GradElementwise, BinaryOpsOnEveryLayout) {
  for (const BinaryCase& c : binary_cases()) {
    for (const Layout& layout : layouts()) {
      ts::Tensor a = leaf({3, 4}, 21, c.a, &layout), b = leaf({3, 4}, 22, c.b, &layout);
      check(std::string(c.name) + " " + layout.name, binary_fn(c), {a, b});
    }
  }
}

TEST(GradElementwise, BinaryOpsOnBroadcastInputs) {
  const bool second = sum_is_differentiable();
  const Layout transposed = layouts()[1];
  for (const BinaryCase& c : binary_cases()) {
    ts::Tensor a = leaf({3, 1, 4}, 31, c.a), b = leaf({5, 4}, 32, c.b, &transposed);
    check(std::string(c.name) + " (3,1,4) with (5,4)", binary_fn(c), {a, b}, second);
    check(std::string(c.name) + " (5,4) with 0-dim", binary_fn(c), {leaf({5, 4}, 33, c.a), leaf({}, 34, c.b)}, second);
  }
  if (!second) GTEST_SKIP() << "sum is not differentiable in this build: gradgradcheck through broadcasting skipped";
}

TEST(GradElementwise, OneInputRequiringGrad) {
  // Only the input that requires grad gets an edge; the other is still read by the formula.
  for (const BinaryCase& c : binary_cases()) {
    ts::Tensor a = leaf({2, 3}, 41, c.a);
    ts::Tensor b = values({2, 3}, 42, c.b);
    check(std::string(c.name) + " first only", binary_fn(c), {a, b});
    check(std::string(c.name) + " second only", binary_fn(c), {values({2, 3}, 41, c.a), leaf({2, 3}, 42, c.b)});
  }
}

// ---- ternary ops ----------------------------------------------------------------------------
struct TernaryCase {
  const char* name;
  Fn f;
  Domain domains[3];
};

std::vector<TernaryCase> ternary_cases() {
  return {
      {"where",
       [](const std::vector<ts::Tensor>& in) {
         ts::Tensor cond = ts::gt(test_data(ts::broadcast_shapes(in[0].sizes(), in[1].sizes()), ts::kFloat64, 98), 0.0);
         return ts::where(cond, in[0], in[1]).mul(in[2]);
       },
       {Domain::Any, Domain::Any, Domain::Any}},
      {"where_scalar_other",
       [](const std::vector<ts::Tensor>& in) {
         ts::Tensor cond = ts::gt(in[1].detach(), 0.0);
         return ts::where(cond, in[0], 0.5) + ts::where(cond, -1.5, in[2]);
       },
       {Domain::Any, Domain::Any, Domain::Any}},
      // Independent bounds: where min > max the result is max, whose gradient PyTorch passes to max.
      {"clamp_tensors", [](const std::vector<ts::Tensor>& in) { return ts::clamp(in[0], in[1], in[2]); },
       {Domain::Any, Domain::Any, Domain::Any}},
      {"clamp_tensor_min",
       [](const std::vector<ts::Tensor>& in) { return ts::clamp(in[0], in[1], std::nullopt).mul(in[2]); },
       {Domain::Any, Domain::Any, Domain::Any}},
      {"clamp_tensor_max",
       [](const std::vector<ts::Tensor>& in) { return ts::clamp(in[0], std::nullopt, in[1]).mul(in[2]); },
       {Domain::Any, Domain::Any, Domain::Any}},
      {"lerp", [](const std::vector<ts::Tensor>& in) { return ts::lerp(in[0], in[1], in[2]); },
       {Domain::Any, Domain::Any, Domain::Any}},
      {"addcmul", [](const std::vector<ts::Tensor>& in) { return ts::addcmul(in[0], in[1], in[2], 0.5); },
       {Domain::Any, Domain::Any, Domain::Any}},
      {"addcdiv", [](const std::vector<ts::Tensor>& in) { return ts::addcdiv(in[0], in[1], in[2], -0.5); },
       {Domain::Any, Domain::Any, Domain::AwayFromZero}},
  };
}

TEST(GradElementwise, TernaryOpsOnEveryLayout) {
  for (const TernaryCase& c : ternary_cases()) {
    for (const Layout& layout : layouts()) {
      std::vector<ts::Tensor> in;
      for (int i = 0; i < 3; ++i) in.push_back(leaf({3, 4}, 51 + i, c.domains[i], &layout));
      check(std::string(c.name) + " " + layout.name, c.f, in);
    }
  }
}

TEST(GradElementwise, TernaryOpsOnBroadcastInputs) {
  const bool second = sum_is_differentiable();
  for (const TernaryCase& c : ternary_cases()) {
    std::vector<ts::Tensor> in = {leaf({3, 1, 4}, 61, c.domains[0]), leaf({5, 4}, 62, c.domains[1]),
                                  leaf({4}, 63, c.domains[2])};
    check(std::string(c.name) + " (3,1,4), (5,4), (4)", c.f, in, second);
  }
  if (!second) GTEST_SKIP() << "sum is not differentiable in this build: gradgradcheck through broadcasting skipped";
}

// ---- softmax --------------------------------------------------------------------------------
TEST(GradElementwise, SoftmaxAndLogSoftmax) {
  const bool second = sum_is_differentiable();
  for (int64_t dim : {0, 1, -1}) {
    for (const Layout& layout : layouts()) {
      ts::Tensor x = leaf({3, 4}, 71, Domain::Any, &layout);
      const std::string where = " dim " + std::to_string(dim) + " " + layout.name;
      check("softmax" + where, [dim](const std::vector<ts::Tensor>& in) { return ts::softmax(in[0], dim); }, {x},
            second);
      check("log_softmax" + where, [dim](const std::vector<ts::Tensor>& in) { return ts::log_softmax(in[0], dim); },
            {x}, second);
    }
  }
  ts::Tensor x3 = leaf({2, 3, 4}, 72);
  check("softmax 3-d dim 1", [](const std::vector<ts::Tensor>& in) { return ts::softmax(in[0], 1); }, {x3}, second);
  if (!second) GTEST_SKIP() << "sum is not differentiable in this build: gradgradcheck of softmax skipped";
}

TEST(GradElementwise, SoftmaxWithDtypeGivesTheInputDtypeGradient) {
  // softmax(x float32, dtype=float64): the gradient comes back in float32, equal to the float64 one.
  ts::Tensor v = test_data({3, 5}, ts::kFloat64, 73);
  ts::Tensor g = test_data({3, 5}, ts::kFloat64, 74);
  for (bool log : {false, true}) {
    ts::Tensor x32 = v.to(ts::kFloat32).requires_grad_();
    ts::Tensor x64 = v.to(ts::kFloat32).to(ts::kFloat64).requires_grad_();
    ts::Tensor y32 = log ? ts::log_softmax(x32, 1, ts::kFloat64) : ts::softmax(x32, 1, ts::kFloat64);
    ts::Tensor y64 = log ? ts::log_softmax(x64, 1) : ts::softmax(x64, 1);
    EXPECT_EQ(y32.dtype(), ts::kFloat64);
    y32.backward(g);
    y64.backward(g);
    ASSERT_TRUE(x32.grad().defined());
    EXPECT_EQ(x32.grad().dtype(), ts::kFloat32);
    EXPECT_TRUE(all_close(x32.grad(), x64.grad().to(ts::kFloat32)));
  }
}

// ---- PyTorch's rules at non-differentiable points (values from PyTorch 1.13) -----------------
std::vector<double> grad_of(const ts::Tensor& y, const ts::Tensor& x) {
  auto g = ts::autograd::grad({y}, {x}, {ts::ones_like(y)}, std::nullopt, false, true);
  return g[0].defined() ? g[0].tolist<double>() : std::vector<double>{};
}

TEST(GradElementwise, MaximumMinimumSplitTiesHalfHalf) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  ts::Tensor a = f64({1, 2, 3, nan}).requires_grad_(), b = f64({1, 3, 2, 1}).requires_grad_();
  EXPECT_EQ(grad_of(ts::maximum(a, b), a), (std::vector<double>{0.5, 0, 1, 1}));
  EXPECT_EQ(grad_of(ts::maximum(a, b), b), (std::vector<double>{0.5, 1, 0, 1}));
  EXPECT_EQ(grad_of(ts::minimum(a, b), a), (std::vector<double>{0.5, 1, 0, 1}));
  EXPECT_EQ(grad_of(ts::minimum(a, b), b), (std::vector<double>{0.5, 0, 1, 1}));
  ts::Tensor x = f64({0.3, 1}).requires_grad_();
  EXPECT_EQ(grad_of(ts::maximum(x, 0.3), x), (std::vector<double>{0.5, 1}));
}

TEST(GradElementwise, ClampPassesTheGradientAtItsBounds) {
  ts::Tensor x = f64({-1, 0, 0.5, 1, 2, 3}).requires_grad_();
  ts::Tensor lo = f64({0, 0, 0, 0, 0, 4}).requires_grad_(), hi = f64({1, 1, 1, 1, 1, 2}).requires_grad_();
  ts::Tensor y = ts::clamp(x, lo, hi);
  auto g = ts::autograd::grad({y}, {x, lo, hi}, {ts::ones_like(y)});
  EXPECT_EQ(g[0].tolist<double>(), (std::vector<double>{0, 1, 1, 1, 0, 0}));
  EXPECT_EQ(g[1].tolist<double>(), (std::vector<double>{1, 0, 0, 0, 0, 0}));
  EXPECT_EQ(g[2].tolist<double>(), (std::vector<double>{0, 0, 0, 0, 1, 1}));
  EXPECT_EQ(grad_of(ts::clamp(x, ts::Scalar(0), ts::Scalar(1)), x), (std::vector<double>{0, 1, 1, 1, 0, 0}));
  EXPECT_EQ(grad_of(ts::clamp(x, ts::Scalar(0)), x), (std::vector<double>{0, 1, 1, 1, 1, 1}));
}

// hardswish at and around its kinks, as PyTorch 2.11 computes it on the GPU machine (0 at -3, 1 at 3,
// x / 3 + 1/2 in between; a NaN passes the gradient); logaddexp's gradient splits by softmax weights.
TEST(GradElementwise, HardswishKinksAndLogaddexpWeights) {
  ts::Tensor x = f64({-4, -3, -2.5, 0, 2.5, 3, 4, NAN}).requires_grad_();
  const std::vector<double> g = grad_of(ts::hardswish(x), x);
  const std::vector<double> want = {0, 0, -2.5 / 3 + 0.5, 0.5, 2.5 / 3 + 0.5, 1, 1, 1};
  ASSERT_EQ(g.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_DOUBLE_EQ(g[i], want[i]) << "at x = " << x.tolist<double>()[i];
  ts::Tensor a = f64({0.0, 1.0, -1000.0}).requires_grad_(), b = f64({0.0, 0.0, 0.0}).requires_grad_();
  auto gab = ts::autograd::grad({ts::logaddexp(a, b)}, {a, b}, {ts::ones_like(a)});
  const double e = 1.0 / (1.0 + std::exp(-1.0));
  EXPECT_DOUBLE_EQ(gab[0].tolist<double>()[0], 0.5);
  EXPECT_DOUBLE_EQ(gab[0].tolist<double>()[1], e);
  EXPECT_DOUBLE_EQ(gab[1].tolist<double>()[1], 1.0 - e);
  EXPECT_DOUBLE_EQ(gab[0].tolist<double>()[2], 0.0);  // exp(1000) overflows to inf: the weight is 0
  EXPECT_DOUBLE_EQ(gab[1].tolist<double>()[2], 1.0);
}

TEST(GradElementwise, PowMasksZeroBaseAndZeroExponent) {
  ts::Tensor x = f64({0, 0, 2, -2}).requires_grad_(), e = f64({2, 0, 0, -1}).requires_grad_();
  ts::Tensor y = ts::pow(x, e);
  auto g = ts::autograd::grad({y}, {x, e}, {ts::ones_like(y)});
  EXPECT_EQ(g[0].tolist<double>(), (std::vector<double>{0, 0, 0, -0.25}));
  std::vector<double> ge = g[1].tolist<double>();
  EXPECT_EQ(ge[0], 0);
  EXPECT_EQ(ge[1], 0);
  EXPECT_NEAR(ge[2], std::log(2.0), 1e-15);
  EXPECT_TRUE(std::isnan(ge[3]));
  ts::Tensor e2 = f64({0, -1, 2}).requires_grad_();
  EXPECT_EQ(grad_of(ts::pow(0.0, e2), e2), (std::vector<double>{0, -INFINITY, 0}));
  ts::Tensor z = f64({0, 1}).requires_grad_();
  EXPECT_EQ(grad_of(ts::pow(z, 0), z), (std::vector<double>{0, 0}));
}

// relu's derivative is threshold_backward (one kernel); its own derivative masks the incoming
// gradient the same way and gives self none. A NaN input passes its gradient, as PyTorch.
TEST(GradElementwise, ThresholdBackwardIsReluGradientAndDifferentiable) {
  ts::Tensor x = f64({-1, 0, 1, NAN}).requires_grad_();
  ts::Tensor y = ts::relu(x);
  ts::Tensor g = f64({1, 2, 3, 4}).requires_grad_();
  ts::Tensor dx = ts::autograd::grad({y}, {x}, {g}, /*retain_graph=*/true, /*create_graph=*/true)[0];
  EXPECT_EQ(dx.grad_fn()->name(), "ThresholdBackwardBackward0");
  EXPECT_EQ(dx.tolist<double>(), (std::vector<double>{0, 0, 3, 4}));
  // Second order: d(sum(dx * w))/dg = threshold_backward(w, relu(x), 0).
  ts::Tensor w = f64({5, 6, 7, 8});
  EXPECT_EQ(grad_of(ts::sum(dx * w), g), (std::vector<double>{0, 0, 7, 8}));
  std::string report;
  ts::Tensor self = f64({-1.5, 0.25, 0.75, 2});
  EXPECT_TRUE(ts::autograd::gradcheck(
      [&](const std::vector<ts::Tensor>& in) { return std::vector<ts::Tensor>{ts::threshold_backward(in[0], self, 0.5)}; },
      {f64({1, -2, 3, 4}).requires_grad_()}, {}, &report))
      << report;
}

// relu_ and add_ write into self (Note [In-place kernels]) and keep the gradients of their
// out-of-place forms; mul_ while recording computes from a copy of self.
TEST(GradElementwise, InPlaceKernelsKeepGradients) {
  ts::Tensor a = f64({-2, -0.5, 0.5, 2}).requires_grad_(), b = f64({1, 2, 3, 4}).requires_grad_();
  ts::Tensor t = a * 3.0;
  const void* storage = t.data_ptr();
  const uint64_t version = t.version();
  t.add_(b, 2).relu_();
  EXPECT_EQ(t.data_ptr(), storage);  // written in place, no new tensor behind it
  EXPECT_EQ(t.version(), version + 2);
  EXPECT_EQ(t.grad_fn()->name(), "ReluBackward0");
  ts::sum(t * f64({1, 10, 100, 1000})).backward();
  // t = relu(3a + 2b) = relu({-4, 2.5, 7.5, 14}): the first element is masked.
  EXPECT_EQ(a.grad().tolist<double>(), (std::vector<double>{0, 30, 300, 3000}));
  EXPECT_EQ(b.grad().tolist<double>(), (std::vector<double>{0, 20, 200, 2000}));
  ts::Tensor c = f64({1, 2}).requires_grad_();
  ts::Tensor u = c * 1.0;
  u.mul_(c);  // the derivative reads self before the write: the general path
  EXPECT_EQ(grad_of(ts::sum(u), c), (std::vector<double>{2, 4}));
  ts::Tensor v = c * 1.0;
  v.sub_(0.5, 2);
  EXPECT_EQ(v.tolist<double>(), (std::vector<double>{0, 1}));
  EXPECT_EQ(grad_of(ts::sum(v), c), (std::vector<double>{1, 1}));
}

TEST(GradElementwise, KinksTakeZeroAndRoundingGivesZero) {
  ts::Tensor x = f64({-1, 0, 1}).requires_grad_();
  EXPECT_EQ(grad_of(ts::abs(x), x), (std::vector<double>{-1, 0, 1}));
  EXPECT_EQ(grad_of(ts::relu(x), x), (std::vector<double>{0, 0, 1}));
  ts::Tensor v = f64({0.5, 1.5, -2.5}).requires_grad_();
  for (auto f : {ts::floor, ts::ceil, ts::round, ts::trunc, ts::sign}) {
    ts::Tensor y = f(v);
    EXPECT_TRUE(y.requires_grad());  // recorded, with a zero gradient, as PyTorch
    EXPECT_EQ(grad_of(y, v), (std::vector<double>{0, 0, 0}));
  }
  ts::Tensor d = f64({2, 4, -3}).requires_grad_();
  for (const char* mode : {"trunc", "floor"}) {
    ts::Tensor y = ts::div(v, d, mode);
    auto g = ts::autograd::grad({y}, {v, d}, {ts::ones_like(y)});
    EXPECT_EQ(g[0].tolist<double>(), (std::vector<double>{0, 0, 0})) << mode;
    EXPECT_EQ(g[1].tolist<double>(), (std::vector<double>{0, 0, 0})) << mode;
    EXPECT_EQ(y.grad_fn()->name(), "DivBackward0");
  }
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  ts::Tensor n = f64({1, inf, nan, -inf}).requires_grad_();
  EXPECT_EQ(grad_of(ts::nan_to_num(n), n), (std::vector<double>{1, 0, 0, 0}));
}

TEST(GradElementwise, NodesAreNamedAsPyTorch) {
  ts::Tensor x = leaf({2}, 81, Domain::Positive);
  EXPECT_EQ(ts::exp(x).grad_fn()->name(), "ExpBackward0");
  EXPECT_EQ((x + x).grad_fn()->name(), "AddBackward0");
  EXPECT_EQ(ts::log_softmax(x, 0).grad_fn()->name(), "LogSoftmaxBackward0");
  EXPECT_EQ(ts::nan_to_num(x).grad_fn()->name(), "NanToNumBackward0");
  EXPECT_EQ(ts::addcdiv(x, x, x).grad_fn()->name(), "AddcdivBackward0");
}

// ---- type promotion ---------------------------------------------------------------------------
TEST(GradElementwise, MixedDtypesGetGradientsInTheirOwnDtype) {
  ts::Tensor va = values({2, 3}, 91, Domain::Positive).to(ts::kFloat32);
  ts::Tensor vb = values({2, 3}, 92, Domain::AwayFromZero);
  using Op = std::function<ts::Tensor(const ts::Tensor&, const ts::Tensor&)>;
  const std::vector<std::pair<const char*, Op>> ops = {
      {"add", [](const ts::Tensor& a, const ts::Tensor& b) { return ts::add(a, b, 2); }},
      {"mul", [](const ts::Tensor& a, const ts::Tensor& b) { return a * b; }},
      {"div", [](const ts::Tensor& a, const ts::Tensor& b) { return a / b; }},
      {"pow", [](const ts::Tensor& a, const ts::Tensor& b) { return ts::pow(a, b); }},
      {"maximum", [](const ts::Tensor& a, const ts::Tensor& b) { return ts::maximum(a, b); }},
      {"atan2", [](const ts::Tensor& a, const ts::Tensor& b) { return ts::atan2(a, b); }},
      {"addcmul", [](const ts::Tensor& a, const ts::Tensor& b) { return ts::addcmul(b, a, b, 0.5); }},
      {"clamp", [](const ts::Tensor& a, const ts::Tensor& b) { return ts::clamp(a, b, std::nullopt); }},
  };
  for (const auto& [name, op] : ops) {
    ts::Tensor a = va.clone().requires_grad_(), b = vb.clone().requires_grad_();
    ts::Tensor a64 = va.to(ts::kFloat64).requires_grad_(), b64 = vb.clone().requires_grad_();
    ts::Tensor y = op(a, b);
    EXPECT_EQ(y.dtype(), ts::kFloat64) << name;
    auto g = ts::autograd::grad({y}, {a, b}, {ts::ones_like(y)});
    ts::Tensor y64 = op(a64, b64);
    auto g64 = ts::autograd::grad({y64}, {a64, b64}, {ts::ones_like(y64)});
    EXPECT_EQ(g[0].dtype(), ts::kFloat32) << name;
    EXPECT_EQ(g[1].dtype(), ts::kFloat64) << name;
    EXPECT_TRUE(all_close(g[0], g64[0].to(ts::kFloat32))) << name;
    // pow and atan2 read the float32 input in float32 in their derivative for b too, as PyTorch does.
    EXPECT_TRUE(all_close(g[1], g64[1], tolerance_for(ts::kFloat32))) << name;
  }
  // where over float32 and float64 branches.
  ts::Tensor a = va.clone().requires_grad_(), b = vb.clone().requires_grad_();
  ts::Tensor cond = ts::gt(vb, 0.0);
  auto g = ts::autograd::grad({ts::where(cond, a, b)}, {a, b}, {ts::ones({2, 3}, ts::kFloat64)});
  EXPECT_EQ(g[0].dtype(), ts::kFloat32);
  EXPECT_EQ(g[1].dtype(), ts::kFloat64);
  EXPECT_TRUE(all_close(g[0], cond.to(ts::kFloat32)));
  EXPECT_TRUE(all_close(g[1], ts::logical_not(cond).to(ts::kFloat64)));
}

// ---- in-place ops and saved tensors -------------------------------------------------------------
TEST(GradElementwise, SavedTensorModifiedInPlaceIsDetected) {
  auto expect_inplace_error = [](const std::function<void()>& f) {
    try {
      f();
      ADD_FAILURE() << "expected ValueError";
    } catch (const ts::ValueError& e) {
      EXPECT_NE(std::string(e.what()).find("modified by an inplace operation"), std::string::npos) << e.what();
    }
  };
  ts::Tensor x = leaf({3}, 101);
  expect_inplace_error([&] {
    ts::Tensor y = x.exp();  // saves its output
    y.add_(1);
    y.backward(ts::ones({3}, ts::kFloat64));
  });
  expect_inplace_error([&] {
    ts::Tensor x2 = x * 1;
    ts::Tensor z = x2 * x2;  // saves its inputs
    x2.mul_(2);
    z.backward(ts::ones({3}, ts::kFloat64));
  });
  // An op that saves nothing does not care.
  ts::Tensor y = x + 1;
  ts::Tensor z = y + y;
  y.mul_(3);
  EXPECT_NO_THROW(z.backward(ts::ones({3}, ts::kFloat64)));
}

TEST(GradElementwise, BackwardThroughInPlaceOpsOnNonLeaves) {
  ts::Tensor v = test_data({4}, ts::kFloat64, 102);
  ts::Tensor x = v.clone().requires_grad_();
  ts::Tensor y = x * 2;
  y.add_(1);
  y.mul_(3);
  y.exp_();
  y.backward(ts::ones({4}, ts::kFloat64));
  // y = exp(3 (2x + 1)), dy/dx = 6 y
  EXPECT_TRUE(all_close(x.grad(), ts::exp((v * 2 + 1) * 3) * 6));
  EXPECT_THROW(x.exp_(), ts::ValueError);  // in-place on a leaf that requires grad
  ts::Tensor w = x * 1;
  w += x;  // a tensor argument of an in-place op gets its gradient too
  w.backward(ts::ones({4}, ts::kFloat64));
  EXPECT_TRUE(all_close(x.grad(), ts::exp((v * 2 + 1) * 3) * 6 + 2));
}

TEST(GradElementwise, InPlaceOpsWhoseDerivativeReadsSelf) {
  // mul_, div_, pow_, log_, clamp_, addcmul_ compute from a copy of self when autograd records them,
  // so the value their derivative saved is not the one the copy back overwrites.
  ts::Tensor v = values({4}, 105, Domain::Positive);
  ts::Tensor x = v.clone().requires_grad_(), w = values({4}, 106, Domain::Positive).requires_grad_();
  ts::Tensor y = x * 1;
  y.mul_(w);
  y.div_(2.0);
  y.pow_(2);
  y.log_();
  y.clamp_(ts::Scalar(-100.0));
  y.addcmul_(w, w, 0.5);
  ts::autograd::backward({y}, {ts::ones({4}, ts::kFloat64)});
  // y = log((x w / 2)^2) + w^2 / 2: dy/dx = 2 / x, dy/dw = 2 / w + w
  EXPECT_TRUE(all_close(x.grad(), ts::reciprocal(v) * 2));
  EXPECT_TRUE(all_close(w.grad(), ts::reciprocal(w.detach()) * 2 + w.detach()));
  // self needs no grad, the other operand does
  ts::Tensor z = ts::ones({4}, ts::kFloat64);
  z.mul_(w);
  z.backward(ts::ones({4}, ts::kFloat64));
  EXPECT_TRUE(all_close(w.grad(), ts::reciprocal(w.detach()) * 2 + w.detach() + 1));
}

TEST(GradElementwise, InPlaceOpsGradcheck) {
  check("in-place chain",
        [](const std::vector<ts::Tensor>& in) {
          ts::Tensor y = in[0] * 1;
          y.mul_(in[1]);
          y.sigmoid_();
          y.sub_(in[1], 0.5);
          return y;
        },
        {leaf({2, 3}, 103), leaf({2, 3}, 104)});
}

// ---- anomaly mode, no_grad, out= ---------------------------------------------------------------
TEST(GradElementwise, AnomalyModeNamesTheNode) {
  ts::Tensor x = f64({0, 1}).requires_grad_();
  EXPECT_NO_THROW(ts::sqrt(x).backward(ts::ones({2}, ts::kFloat64)));  // inf, but nobody asked
  ts::autograd::DetectAnomalyGuard anomaly;
  try {
    ts::sqrt(x).backward(ts::ones({2}, ts::kFloat64));
    ADD_FAILURE() << "expected ValueError";
  } catch (const ts::ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("SqrtBackward0"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("inf"), std::string::npos) << e.what();
  }
  ts::Tensor n = f64({-1, 1}).requires_grad_();
  try {
    ts::sqrt(n).backward(ts::ones({2}, ts::kFloat64));
    ADD_FAILURE() << "expected ValueError";
  } catch (const ts::ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("SqrtBackward0"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("nan"), std::string::npos) << e.what();
  }
}

TEST(GradElementwise, NoGradStopsRecording) {
  ts::Tensor x = leaf({3}, 111);
  {
    ts::NoGradGuard g;
    for (const UnaryCase& c : unary_cases()) {
      ts::Tensor y = c.f(x);
      EXPECT_FALSE(y.requires_grad()) << c.name;
      EXPECT_EQ(y.grad_fn(), nullptr) << c.name;
    }
    EXPECT_FALSE(ts::softmax(x, 0).requires_grad());
    EXPECT_FALSE(ts::where(ts::gt(x, 0.0), x, x).requires_grad());
  }
  EXPECT_TRUE(ts::exp(x).requires_grad());
}

TEST(GradElementwise, ComparisonsAndPredicatesAreNotRecorded) {
  ts::Tensor x = leaf({3}, 112), y = leaf({3}, 113);
  for (const ts::Tensor& r : {ts::gt(x, y), ts::eq(x, 0.5), ts::le(x, y), ts::logical_and(x, y), ts::isnan(x),
                              ts::isfinite(x), ts::logical_not(x)}) {
    EXPECT_EQ(r.dtype(), ts::kBool);
    EXPECT_FALSE(r.requires_grad());
    EXPECT_EQ(r.grad_fn(), nullptr);
  }
}

TEST(GradElementwise, OutArgumentsRefuseAutograd) {
  ts::Tensor x = leaf({3}, 121, Domain::Positive), c = values({3}, 122, Domain::Positive);
  ts::Tensor out = ts::empty({3}, ts::kFloat64);
  EXPECT_THROW(ts::exp_out(x, out), ts::ValueError);
  EXPECT_THROW(ts::add_out(x, c, out), ts::ValueError);
  EXPECT_THROW(ts::div_out(c, x, out), ts::ValueError);
  try {
    ts::mul_out(c, x, out);
    ADD_FAILURE() << "expected ValueError";
  } catch (const ts::ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("don't support automatic differentiation"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ts::floor_out(x, out), ts::ValueError);  // differentiable (zero gradient) in PyTorch too
  ts::Tensor mask = ts::empty({3}, ts::kBool);
  EXPECT_NO_THROW(ts::eq_out(x, c, mask));        // predicates are not differentiable: out= is fine
  EXPECT_NO_THROW(ts::logical_not_out(x, mask));
  ts::Tensor out_rg = ts::empty({3}, ts::kFloat64).requires_grad_();
  EXPECT_THROW(ts::log_out(c, out_rg), ts::ValueError);
  {
    ts::NoGradGuard g;
    EXPECT_NO_THROW(ts::exp_out(x, out));
    EXPECT_NO_THROW(ts::add_out(x, c, out));
  }
  EXPECT_TRUE(all_close(out, x.detach() + c));
  EXPECT_NO_THROW(ts::exp_out(c, out));  // nothing requires grad
  EXPECT_FALSE(out.requires_grad());
}

}  // namespace
