// Every op of the foundation: one or more cases against PyTorch. Inputs are deterministic (Philox);
// variants cover dtypes, broadcasting and strided layouts. Random ops compare sizes and dtype only
// (their values are tested statistically in tests/ops/test_random.cpp). Cases are device-agnostic
// (Note [Case device] in cases.h): the same list runs on the CPU and, moved there, on a GPU.
#include "conformance/cases.h"

#include <cmath>

#include "runtime/philox.h"
#include "tessera/amp.h"

namespace tessera::conformance {
namespace {

using V = std::vector<Tensor>;
using testing::test_data;

Tensor randu(const Shape& s, double lo, double hi, DType d = kFloat32, uint64_t seed = 3) {
  int64_t n = numel_of(s);
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) {
    PhiloxBlock b = philox4x32_10(seed * 104729 + 5, static_cast<uint64_t>(i));
    v[i] = lo + (hi - lo) * (b.x[0] / 4294967296.0);
  }
  return tensor(v, s, kFloat64).to(d);
}
Tensor N(const Shape& s, DType d = kFloat32, uint64_t seed = 1) { return test_data(s, d, seed); }
Tensor I(const Shape& s, int64_t lo, int64_t hi, uint64_t seed = 7, DType d = kInt64) { return test_data(s, d, seed, lo, hi); }
// A transposed view with the same logical values as N(s) would have after transposing its last two dims.
Tensor NT(const Shape& s, DType d = kFloat32, uint64_t seed = 1) { return N(s, d, seed).transpose(-1, -2).contiguous().transpose(-1, -2); }
Tensor stepped(const Tensor& t) {  // same values, stored with step 2 in the last dim
  Shape big = t.sizes();
  big.back() *= 2;
  Tensor buf = zeros(big, t.dtype());
  Tensor v = buf.slice(-1, 0, std::nullopt, 2);
  v.copy_(t);
  return v;
}

struct Builder {
  std::vector<Case> cases;
  void add(std::string op, std::string variant, V in, std::string expr,
           std::function<V(const V&)> fn, std::optional<testing::Tolerance> tol = std::nullopt, bool values = true) {
    cases.push_back(Case{op, op + "__" + variant, std::move(in), std::move(expr), std::move(fn), tol, values});
  }
  // Marks the case added last as one whose output takes no gradient of its inputs (a factory shaped
  // like its input, sorting indices, a conversion to an integer dtype, a host number).
  void no_gradient() { cases.back().differentiable = false; }
  void add_error(std::string op, std::string variant, V in, std::string expr, std::function<V(const V&)> fn) {
    add(std::move(op), std::move(variant), std::move(in), std::move(expr), std::move(fn));
    cases.back().expect_error = true;
  }
};

const char* torch_dtype(DType d) {
  switch (d) {
    case DType::Float16: return "torch.float16";
    case DType::BFloat16: return "torch.bfloat16";
    case DType::Float32: return "torch.float32";
    case DType::Float64: return "torch.float64";
    case DType::Int64: return "torch.int64";
    case DType::Int32: return "torch.int32";
    case DType::Int8: return "torch.int8";
    case DType::UInt8: return "torch.uint8";
    case DType::Bool: return "torch.bool";
  }
  return "?";
}
std::string dn(DType d) { return dtype_name(d); }

void creation(Builder& b) {
  b.add("zeros", "f32", {}, "torch.zeros(3, 4)", [](const V&) { return V{zeros({3, 4}, case_device())}; });
  b.add("ones", "i32", {}, "torch.ones(2, 5, dtype=torch.int32)", [](const V&) { return V{ones({2, 5}, {kInt32, case_device()})}; });
  b.add("full", "int", {}, "torch.full((2, 3), 7)", [](const V&) { return V{full({2, 3}, 7, case_device())}; });
  b.add("full", "float", {}, "torch.full((2, 3), 2.5)", [](const V&) { return V{full({2, 3}, 2.5, case_device())}; });
  b.add("empty", "shape", {}, "torch.empty(2, 3, dtype=torch.float16)", [](const V&) { return V{empty({2, 3}, {kFloat16, case_device()})}; }, {}, false);
  b.add("arange", "int", {}, "torch.arange(10)", [](const V&) { return V{arange(10, case_device())}; });
  b.add("arange", "float_step", {}, "torch.arange(0.5, 3.2, 0.3)", [](const V&) { return V{arange(0.5, 3.2, 0.3, case_device())}; });
  b.add("arange", "neg_step", {}, "torch.arange(10, 0, -3)", [](const V&) { return V{arange(10, 0, -3, case_device())}; });
  b.add("linspace", "f32", {}, "torch.linspace(-1, 2, 7)", [](const V&) { return V{linspace(-1, 2, 7, case_device())}; });
  b.add("linspace", "one_step", {}, "torch.linspace(-2, 3, 1)", [](const V&) { return V{linspace(-2, 3, 1, case_device())}; });
  b.add("linspace", "f64", {}, "torch.linspace(0, 1, 11, dtype=torch.float64)", [](const V&) { return V{linspace(0, 1, 11, {kFloat64, case_device()})}; });
  b.add("eye", "rect", {}, "torch.eye(3, 5)", [](const V&) { return V{eye(3, 5, case_device())}; });
  b.add("zeros_like", "f16", {N({2, 3}, kFloat16)}, "torch.zeros_like(x[0])", [](const V& x) { return V{zeros_like(x[0])}; });
  b.no_gradient();
  b.add("ones_like", "i64", {I({4}, 0, 5)}, "torch.ones_like(x[0])", [](const V& x) { return V{ones_like(x[0])}; });
  b.add("full_like", "f32", {N({3})}, "torch.full_like(x[0], 4.0)", [](const V& x) { return V{full_like(x[0], 4.0)}; });
  b.no_gradient();
  b.add("empty_like", "f32", {N({3, 2})}, "torch.empty_like(x[0])", [](const V& x) { return V{empty_like(x[0])}; }, {}, false);
  // Random ops: PyTorch's generator differs, so sizes and dtypes only.
  b.add("rand", "shape", {}, "torch.rand(3, 4)", [](const V&) { return V{rand({3, 4}, case_device())}; }, {}, false);
  b.add("randn", "shape", {}, "torch.randn(2, 5, dtype=torch.float64)", [](const V&) { return V{randn({2, 5}, {kFloat64, case_device()})}; }, {}, false);
  b.add("randint", "shape", {}, "torch.randint(0, 10, (6,))", [](const V&) { return V{randint(0, 10, {6}, case_device())}; }, {}, false);
  b.add("rand_like", "shape", {N({2, 2}, kFloat16)}, "torch.rand_like(x[0])", [](const V& x) { return V{rand_like(x[0])}; }, {}, false);
  b.add("randn_like", "shape", {N({2, 2})}, "torch.randn_like(x[0])", [](const V& x) { return V{randn_like(x[0])}; }, {}, false);
  b.add("uniform_", "shape", {N({5})}, "x[0].clone().uniform_(-1, 1)", [](const V& x) { Tensor t = x[0].clone(); t.uniform_(-1, 1); return V{t}; }, {}, false);
  b.add("normal_", "shape", {N({5})}, "x[0].clone().normal_(2, 3)", [](const V& x) { Tensor t = x[0].clone(); t.normal_(2, 3); return V{t}; }, {}, false);
  b.add("bernoulli", "shape", {randu({4, 4}, 0, 1)}, "torch.bernoulli(x[0])", [](const V& x) { return V{bernoulli(x[0])}; }, {}, false);
  b.add("randperm", "shape", {}, "torch.randperm(9)", [](const V&) { return V{randperm(9, {kInt64, case_device()})}; }, {}, false);
}

void unary(Builder& b) {
  struct U { const char* op; const char* expr; double lo, hi; Tensor (*fn)(const Tensor&); };
  const U ops[] = {
      {"neg", "torch.neg(x[0])", -3, 3, &neg}, {"abs", "torch.abs(x[0])", -3, 3, &abs},
      {"exp", "torch.exp(x[0])", -5, 5, &exp}, {"exp2", "torch.exp2(x[0])", -5, 5, &exp2},
      {"log", "torch.log(x[0])", 0.01, 10, &log}, {"log2", "torch.log2(x[0])", 0.01, 10, &log2},
      {"log1p", "torch.log1p(x[0])", -0.9, 5, &log1p}, {"expm1", "torch.expm1(x[0])", -3, 3, &expm1},
      {"sqrt", "torch.sqrt(x[0])", 0, 9, &sqrt}, {"rsqrt", "torch.rsqrt(x[0])", 0.01, 9, &rsqrt},
      {"sin", "torch.sin(x[0])", -6, 6, &sin}, {"cos", "torch.cos(x[0])", -6, 6, &cos},
      {"tan", "torch.tan(x[0])", -1.2, 1.2, &tan}, {"tanh", "torch.tanh(x[0])", -5, 5, &tanh},
      {"sigmoid", "torch.sigmoid(x[0])", -8, 8, &sigmoid}, {"relu", "torch.relu(x[0])", -3, 3, &relu},
      {"silu", "F.silu(x[0])", -5, 5, &silu}, {"erf", "torch.erf(x[0])", -3, 3, &erf},
      {"floor", "torch.floor(x[0])", -5, 5, &floor}, {"ceil", "torch.ceil(x[0])", -5, 5, &ceil},
      {"round", "torch.round(x[0])", -5, 5, &round}, {"trunc", "torch.trunc(x[0])", -5, 5, &trunc},
      {"sign", "torch.sign(x[0])", -3, 3, &sign}, {"reciprocal", "torch.reciprocal(x[0])", 0.1, 5, &reciprocal},
      {"hardswish", "F.hardswish(x[0])", -5, 5, &hardswish},
  };
  for (const U& u : ops) {
    for (DType d : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
      Tensor in = randu({4, 33}, u.lo, u.hi, d, 11);
      b.add(u.op, dn(d), {in}, u.expr, [f = u.fn](const V& x) { return V{f(x[0])}; });
    }
    b.add(u.op, "f32_transposed", {randu({33, 4}, u.lo, u.hi, kFloat32, 12).t()}, u.expr, [f = u.fn](const V& x) { return V{f(x[0])}; });
  }
  b.add("exp", "int_promotes", {I({5}, -3, 3)}, "torch.exp(x[0])", [](const V& x) { return V{exp(x[0])}; });
  b.add("abs", "int32", {I({7}, -9, 9, 7, kInt32)}, "torch.abs(x[0])", [](const V& x) { return V{abs(x[0])}; });
  b.add("gelu", "none", {N({64})}, "F.gelu(x[0])", [](const V& x) { return V{gelu(x[0])}; });
  b.add("gelu", "tanh", {N({64})}, "F.gelu(x[0], approximate='tanh')", [](const V& x) { return V{gelu(x[0], "tanh")}; });
  b.add("gelu", "bf16", {N({64}, kBFloat16)}, "F.gelu(x[0])", [](const V& x) { return V{gelu(x[0])}; });
  b.add("softplus", "beta2", {randu({50}, -15, 15)}, "F.softplus(x[0], beta=2, threshold=5)", [](const V& x) { return V{softplus(x[0], 2, 5)}; });
  b.add("logical_not", "f32", {tensor({0.0, 1.0, -1.0, 0.0, 2.5, -0.0, NAN, 0.5, 0.0}, kFloat32)}, "torch.logical_not(x[0])", [](const V& x) { return V{logical_not(x[0])}; });
  b.add("bitwise_not", "i64", {I({9}, -100, 100)}, "torch.bitwise_not(x[0])", [](const V& x) { return V{bitwise_not(x[0])}; });
  Tensor special = tensor({0.0, -0.0, 1.0, INFINITY, -INFINITY, NAN, 1e30, -1e-30}, kFloat32);
  b.add("isnan", "special", {special}, "torch.isnan(x[0])", [](const V& x) { return V{isnan(x[0])}; });
  b.add("isinf", "special", {special}, "torch.isinf(x[0])", [](const V& x) { return V{isinf(x[0])}; });
  b.add("isfinite", "special", {special}, "torch.isfinite(x[0])", [](const V& x) { return V{isfinite(x[0])}; });
  b.add("nan_to_num", "default", {special}, "torch.nan_to_num(x[0])", [](const V& x) { return V{nan_to_num(x[0])}; });
  b.add("nan_to_num", "values", {special}, "torch.nan_to_num(x[0], nan=1.5, posinf=9.0, neginf=-9.0)",
        [](const V& x) { return V{nan_to_num(x[0], 1.5, 9.0, -9.0)}; });
  b.add("exp", "special", {special}, "torch.exp(x[0])", [](const V& x) { return V{exp(x[0])}; });
  b.add("sigmoid", "special", {special}, "torch.sigmoid(x[0])", [](const V& x) { return V{sigmoid(x[0])}; });
}

void binary(Builder& b) {
  struct B2 { const char* op; const char* expr; Tensor (*fn)(const Tensor&, const Tensor&); double lo, hi; };
  const B2 ops[] = {
      {"mul", "torch.mul(x[0], x[1])", &mul, -3, 3},
      {"pow", "torch.pow(x[0].abs() + 0.5, x[1])", nullptr, -2, 2},
      {"maximum", "torch.maximum(x[0], x[1])", &maximum, -3, 3},
      {"minimum", "torch.minimum(x[0], x[1])", &minimum, -3, 3},
      {"fmod", "torch.fmod(x[0], x[1])", &fmod, -5, 5},
      {"remainder", "torch.remainder(x[0], x[1])", &remainder, -5, 5},
      {"atan2", "torch.atan2(x[0], x[1])", &atan2, -3, 3},
      {"logaddexp", "torch.logaddexp(x[0], x[1])", &logaddexp, -30, 30},
      {"eq", "torch.eq(x[0], x[1])", &eq, -2, 2}, {"ne", "torch.ne(x[0], x[1])", &ne, -2, 2},
      {"lt", "torch.lt(x[0], x[1])", &lt, -2, 2}, {"le", "torch.le(x[0], x[1])", &le, -2, 2},
      {"gt", "torch.gt(x[0], x[1])", &gt, -2, 2}, {"ge", "torch.ge(x[0], x[1])", &ge, -2, 2},
      {"logical_and", "torch.logical_and(x[0], x[1])", &logical_and, -1, 2},
      {"logical_or", "torch.logical_or(x[0], x[1])", &logical_or, -1, 2},
      {"logical_xor", "torch.logical_xor(x[0], x[1])", &logical_xor, -1, 2},
  };
  for (const B2& o : ops) {
    bool integral = std::string(o.op).rfind("logical", 0) == 0 || o.op[1] == 'q' || o.op[1] == 'e' || o.op[1] == 't';
    auto mk = [&](const Shape& s, uint64_t seed, DType d) {
      return integral ? randu(s, o.lo, o.hi, kFloat64, seed).floor().to(d) : randu(s, o.lo, o.hi, d, seed);
    };
    std::function<V(const V&)> fn;
    if (o.fn) fn = [f = o.fn](const V& x) { return V{f(x[0], x[1])}; };
    else fn = [](const V& x) { return V{pow(x[0].abs() + 0.5, x[1])}; };
    for (DType d : {kFloat32, kFloat64, kFloat16, kBFloat16})
      b.add(o.op, dn(d), {mk({5, 6}, 21, d), mk({5, 6}, 22, d)}, o.expr, fn);
    b.add(o.op, "broadcast", {mk({4, 1, 3}, 23, kFloat32), mk({5, 3}, 24, kFloat32)}, o.expr, fn);
    b.add(o.op, "strided", {stepped(mk({3, 7}, 25, kFloat32)), mk({7, 3}, 26, kFloat32).t()}, o.expr, fn);
  }
  // logaddexp at equal and unequal infinities, a NaN, and a gap wide enough that exp(-gap) underflows.
  b.add("logaddexp", "special",
        {tensor({INFINITY, -INFINITY, -INFINITY, INFINITY, 1.0, NAN, 100.0, -1e30}, kFloat32),
         tensor({INFINITY, -INFINITY, 1.0, -INFINITY, -INFINITY, 0.0, -100.0, -1e30}, kFloat32)},
        "torch.logaddexp(x[0], x[1])", [](const V& x) { return V{logaddexp(x[0], x[1])}; });
  // Near its kinks, not on them: the gradient at exactly -3 and 3 changed between PyTorch 1.13 (Debian's,
  // the CPU oracle) and 2.x (tests/autograd/test_grad_elementwise.cpp pins 2.x's).
  b.add("hardswish", "ends", {tensor({-4.0, -3.01, -2.99, 0.0, 2.99, 3.01, 4.0, NAN}, kFloat32)}, "F.hardswish(x[0])",
        [](const V& x) { return V{hardswish(x[0])}; });
  for (const char* op : {"add", "sub"}) {
    bool is_add = op[0] == 'a';
    auto fn = [is_add](const V& x) { return V{is_add ? add(x[0], x[1], 2) : sub(x[0], x[1], 2)}; };
    std::string expr = std::string("torch.") + op + "(x[0], x[1], alpha=2)";
    for (DType d : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32, kUInt8})
      b.add(op, dn(d), {N({6, 5}, d, 31), N({6, 5}, d, 32)}, expr, fn);
    b.add(op, "broadcast_strided", {N({3, 1, 4}).transpose(0, 2), stepped(N({5, 3}))}, expr, fn);
    b.add(op, "promote_int_float", {I({4, 3}, -5, 5, 7, kInt32), N({3}, kFloat16)}, expr, fn);
    b.add(op, "scalar_float", {I({4}, -5, 5, 7, kInt32)}, std::string("torch.") + op + "(x[0], 2.5)",
          [is_add](const V& x) { return V{is_add ? add(x[0], 2.5) : sub(x[0], 2.5)}; });
  }
  // relu's gradient (Note [In-place kernels] uses it on the GPU): at, above and below the threshold,
  // a NaN input, the integer and 16-bit types, a broadcast input.
  {
    auto fn = [](const V& x) { return V{threshold_backward(x[0], x[1], 0.5)}; };
    const std::string expr = "torch.ops.aten.threshold_backward(x[0], x[1], 0.5)";
    for (DType d : {kFloat32, kFloat64, kFloat16, kBFloat16})
      b.add("threshold_backward", dn(d), {N({6, 7}, d, 41), randu({6, 7}, -1, 2, d, 42).mul(4).round().div(4)}, expr, fn);
    b.add("threshold_backward", "int32", {I({12}, -9, 9, 7, kInt32), I({12}, -2, 3, 8, kInt32)}, expr, fn);
    // (4, 5) against (3, 7): no broadcast exists, and both refuse it.
    b.add_error("threshold_backward", "broadcast_strided", {N({5, 4}).t(), stepped(N({3, 7}))}, expr, fn);
    b.add("threshold_backward", "nan", {N({6}), tensor({NAN, 0.5, 0.25, 1.0, -INFINITY, INFINITY}, kFloat32)}, expr, fn);
  }
  // In-place forms that write straight into self (Note [In-place kernels]), on a channels-last and a
  // transposed self, with broadcast and exactly aliased operands.
  {
    Tensor cl = N({2, 3, 4, 5}, kBFloat16, 43).contiguous(MemoryFormat::ChannelsLast);
    b.add("relu_", "bf16_channels_last", {cl}, "x[0].clone().relu_()", [](const V& x) { Tensor t = x[0].clone(); t.relu_(); return V{t}; });
    b.add("add_", "broadcast_alpha", {N({4, 5}, kFloat32, 44).t(), N({4}, kFloat32, 45)}, "x[0].clone().add_(x[1], alpha=2)",
          [](const V& x) { Tensor t = x[0].clone(); t.add_(x[1], 2); return V{t}; });
    b.add("add_", "aliased", {N({3, 5}, kFloat16, 46)}, "x[0].clone().add_(x[0].clone())",
          [](const V& x) { Tensor t = x[0].clone(); t.add_(t); return V{t}; });
    b.add("sub_", "scalar", {N({3, 5}, kBFloat16, 47)}, "x[0].clone().sub_(0.75, alpha=2)",
          [](const V& x) { Tensor t = x[0].clone(); t.sub_(0.75, 2); return V{t}; });
    b.add("mul_", "promoting_other", {N({3, 5}, kFloat32, 48), N({5}, kFloat64, 49)}, "x[0].clone().mul_(x[1])",
          [](const V& x) { Tensor t = x[0].clone(); t.mul_(x[1]); return V{t}; });
  }
  // In-place writes through views of a tensor in the graph (CopySlices, Note [View tracking]): the
  // base's values and the gradients of the base's inputs and of the written operands against PyTorch.
  {
    b.add("relu_", "through_slice", {N({4, 5}, kFloat32, 50)}, "(lambda t: (t[1:3].relu_(), t)[1])(x[0] * 1)",
          [](const V& x) { Tensor t = x[0] * 1; t.slice(0, 1, 3).relu_(); return V{t}; });
    b.add("add_", "through_transposed_slice", {N({4, 5}, kFloat32, 51), N({3, 4}, kFloat32, 52)},
          "(lambda t: (t.t()[1:4].add_(x[1], alpha=2), t)[1])(x[0] * 1)",
          [](const V& x) { Tensor t = x[0] * 1; t.t().slice(0, 1, 4).add_(x[1], 2); return V{t}; });
    b.add("sub_", "through_select", {N({3, 5}, kFloat32, 53)}, "(lambda t: (t[1].sub_(0.75, alpha=2), t)[1])(x[0] * 1)",
          [](const V& x) { Tensor t = x[0] * 1; t.select(0, 1).sub_(0.75, 2); return V{t}; });
    b.add("mul_", "through_diagonal", {N({4, 4}, kFloat32, 54), N({4}, kFloat32, 55)},
          "(lambda t: (t.diagonal().mul_(x[1]), t)[1])(x[0] * 1)",
          [](const V& x) { Tensor t = x[0] * 1; t.diagonal().mul_(x[1]); return V{t}; });
    b.add("fill_", "through_narrow", {N({4, 5}, kFloat32, 56)}, "(lambda t: (t.narrow(1, 1, 2).fill_(0.5), t)[1])(x[0] * 1)",
          [](const V& x) { Tensor t = x[0] * 1; t.narrow(1, 1, 2).fill_(0.5); return V{t}; });
    b.add("copy_", "into_a_buffer_view", {N({2, 3}, kFloat32, 57)},
          "(lambda t: (t[1:3].copy_(x[0]), t)[1])(torch.zeros(4, 3, dtype=x[0].dtype, device=x[0].device))",
          [](const V& x) {
            Tensor t = zeros({4, 3}, TensorOptions(x[0].dtype(), x[0].device()));
            t.slice(0, 1, 3).copy_(x[0]);
            return V{t};
          });
    b.add("index_put", "through_view", {N({3, 5}, kFloat32, 58), N({2, 3}, kFloat32, 59), tensor(std::vector<int64_t>{2, 0}, {2})},
          "(lambda t: (t[:, 1:4].index_put_((x[2],), x[1]), t)[1])(x[0] * 1)",
          [](const V& x) { Tensor t = x[0] * 1; t.slice(1, 1, 4).index_put_({x[2]}, x[1]); return V{t}; });
    // The random fills, with arguments that make the values certain (an empty range, no deviation, a
    // sure draw) so that the values and the gradients (zero where the fill wrote) compare.
    b.add("uniform_", "through_slice", {N({4, 5}, kFloat32, 60)},
          "(lambda t: (t[1:3, 2:].uniform_(0.5, 0.5), t)[1])(x[0] * 1)",
          [](const V& x) { Tensor t = x[0] * 1; t.slice(0, 1, 3).slice(1, 2, 5).uniform_(0.5, 0.5); return V{t}; });
    b.add("normal_", "through_transposed_select", {N({4, 5}, kFloat32, 61)},
          "(lambda t: (t.t()[1].normal_(2.0, 0.0), t)[1])(x[0] * 1)",
          [](const V& x) { Tensor t = x[0] * 1; t.t().select(0, 1).normal_(2.0, 0.0); return V{t}; });
    b.add("bernoulli_", "through_diagonal", {N({4, 5}, kFloat32, 62)},
          "(lambda t: (t[:, :4].diagonal().bernoulli_(1.0), t)[1])(x[0] * 1)",
          [](const V& x) { Tensor t = x[0] * 1; t.slice(1, 0, 4).diagonal().bernoulli_(1.0); return V{t}; });
    b.add("random_", "through_narrow", {N({4, 5}, kFloat32, 63)},
          "(lambda t: (t.narrow(1, 1, 2).random_(3, 4), t)[1])(x[0] * 1)",
          [](const V& x) { Tensor t = x[0] * 1; t.narrow(1, 1, 2).random_(3, 4); return V{t}; });
  }
  b.add("add", "zero_dim_and_empty", {N({}), N({0, 3})}, "torch.add(x[0], x[1])", [](const V& x) { return V{add(x[0], x[1])}; });
  b.add("add", "bool", {I({6}, 0, 2).to(kBool), I({6}, 0, 2, 8).to(kBool)}, "torch.add(x[0], x[1])", [](const V& x) { return V{add(x[0], x[1])}; });
  b.add("mul", "half_scalar", {N({8}, kFloat16)}, "torch.mul(x[0], 2.5)", [](const V& x) { return V{mul(x[0], 2.5)}; });
  for (const char* mode : {"", "trunc", "floor"}) {
    std::string m(mode);
    std::string expr = m.empty() ? "torch.div(x[0], x[1])" : "torch.div(x[0], x[1], rounding_mode='" + m + "')";
    auto fn = [m](const V& x) { return V{div(x[0], x[1], m)}; };
    b.add("div", "f32_" + (m.empty() ? std::string("true") : m), {N({4, 5}), randu({5}, 0.5, 2)}, expr, fn);
    b.add("div", "i64_" + (m.empty() ? std::string("true") : m), {I({9}, -20, 20), I({9}, 1, 6, 9)}, expr, fn);
    b.add("div", "neg_i64_" + (m.empty() ? std::string("true") : m), {I({9}, -20, 20), I({9}, -6, -1, 9)}, expr, fn);
  }
  b.add("fmod", "int", {I({10}, -20, 20), I({10}, 1, 7, 9)}, "torch.fmod(x[0], x[1])", [](const V& x) { return V{fmod(x[0], x[1])}; });
  b.add("remainder", "int", {I({10}, -20, 20), I({10}, -7, -1, 9)}, "torch.remainder(x[0], x[1])", [](const V& x) { return V{remainder(x[0], x[1])}; });
  b.add("pow", "scalar_exp", {randu({9}, 0.1, 3)}, "torch.pow(x[0], 2.5)", [](const V& x) { return V{pow(x[0], 2.5)}; });
  b.add("pow", "int", {I({9}, -4, 4), I({9}, 0, 4, 9)}, "torch.pow(x[0], x[1])", [](const V& x) { return V{pow(x[0], x[1])}; });
  b.add("pow", "scalar_base", {randu({9}, -2, 2)}, "torch.pow(2.0, x[0])", [](const V& x) { return V{pow(Scalar(2.0), x[0])}; });
  for (const char* op : {"bitwise_and", "bitwise_or", "bitwise_xor"}) {
    std::string o(op);
    auto fn = [o](const V& x) {
      if (o == "bitwise_and") return V{bitwise_and(x[0], x[1])};
      if (o == "bitwise_or") return V{bitwise_or(x[0], x[1])};
      return V{bitwise_xor(x[0], x[1])};
    };
    b.add(op, "i32", {I({12}, -100, 100, 7, kInt32), I({12}, -100, 100, 8, kInt32)}, "torch." + o + "(x[0], x[1])", fn);
    b.add(op, "bool", {I({12}, 0, 2).to(kBool), I({12}, 0, 2, 8).to(kBool)}, "torch." + o + "(x[0], x[1])", fn);
  }
  b.add("bitwise_left_shift", "i64", {I({8}, -50, 50), I({8}, 0, 5, 9)}, "torch.bitwise_left_shift(x[0], x[1])",
        [](const V& x) { return V{bitwise_left_shift(x[0], x[1])}; });
  b.add("bitwise_right_shift", "i64", {I({8}, -50, 50), I({8}, 0, 5, 9)}, "torch.bitwise_right_shift(x[0], x[1])",
        [](const V& x) { return V{bitwise_right_shift(x[0], x[1])}; });
  b.add("where", "broadcast", {I({4, 1}, 0, 2).to(kBool), N({4, 5}), N({5}, kFloat64)}, "torch.where(x[0], x[1], x[2])",
        [](const V& x) { return V{where(x[0], x[1], x[2])}; });
  b.add("where", "scalar", {I({6}, 0, 2).to(kBool), N({6})}, "torch.where(x[0], x[1], 0.5)",
        [](const V& x) { return V{where(x[0], x[1], Scalar(0.5))}; });
  b.add("clamp", "scalars", {N({20})}, "torch.clamp(x[0], -0.5, 0.7)", [](const V& x) { return V{clamp(x[0], Scalar(-0.5), Scalar(0.7))}; });
  b.add("clamp", "min_only_int", {I({20}, -9, 9)}, "torch.clamp(x[0], min=2)", [](const V& x) { return V{clamp(x[0], Scalar(2))}; });
  b.add("clamp", "tensors", {N({4, 5}), N({5}, kFloat32, 5) - 1.0, N({4, 1}, kFloat32, 6) + 1.0}, "torch.clamp(x[0], x[1], x[2])",
        [](const V& x) { return V{clamp(x[0], std::optional<Tensor>(x[1]), std::optional<Tensor>(x[2]))}; });
  b.add("lerp", "scalar", {N({10}), N({10}, kFloat32, 2)}, "torch.lerp(x[0], x[1], 0.3)", [](const V& x) { return V{lerp(x[0], x[1], 0.3)}; });
  b.add("lerp", "tensor", {N({10}), N({10}, kFloat32, 2), randu({10}, 0, 1)}, "torch.lerp(x[0], x[1], x[2])",
        [](const V& x) { return V{lerp(x[0], x[1], x[2])}; });
  b.add("addcmul", "f32", {N({3, 4}), N({4}, kFloat32, 2), N({3, 1}, kFloat32, 3)}, "torch.addcmul(x[0], x[1], x[2], value=0.5)",
        [](const V& x) { return V{addcmul(x[0], x[1], x[2], 0.5)}; });
  b.add("addcdiv", "f32", {N({3, 4}), N({4}, kFloat32, 2), randu({3, 1}, 1, 2)}, "torch.addcdiv(x[0], x[1], x[2], value=-2)",
        [](const V& x) { return V{addcdiv(x[0], x[1], x[2], -2)}; });
}

void reductions(Builder& b) {
  testing::Tolerance sum_tol{1e-5, 1e-5};
  for (DType d : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
    // PyTorch 1.13's CPU reductions round 16-bit partial results to the input dtype; tessera keeps
    // them in float32 (closer to the float64 value), so the two may differ by two 16-bit ulps.
    testing::Tolerance t = d == kFloat16 ? testing::Tolerance{2.5e-3, 1e-5} : sum_tol;
    b.add("sum", "all_" + dn(d), {N({7, 9}, d)}, "torch.sum(x[0])", [](const V& x) { return V{sum(x[0])}; }, t);
    b.add("mean", "dims_" + dn(d), {N({4, 5, 6}, d)}, "torch.mean(x[0], (0, 2))", [](const V& x) { return V{mean(x[0], {0, 2})}; }, t);
  }
  b.add("sum", "keepdim_strided", {NT({6, 8})}, "torch.sum(x[0], 1, keepdim=True)", [](const V& x) { return V{sum(x[0], 1, true)}; }, sum_tol);
  b.add("sum", "int", {I({5, 6}, -9, 9, 7, kInt32)}, "torch.sum(x[0], 0)", [](const V& x) { return V{sum(x[0], 0)}; });
  b.add("sum", "bool", {I({5, 6}, 0, 2).to(kBool)}, "torch.sum(x[0])", [](const V& x) { return V{sum(x[0])}; });
  b.add("sum", "empty", {N({0, 4})}, "torch.sum(x[0], 0)", [](const V& x) { return V{sum(x[0], 0)}; });
  b.add("sum", "dtype_f64", {N({10}, kFloat16)}, "torch.sum(x[0], dtype=torch.float64)", [](const V& x) { return V{sum(x[0], std::vector<int64_t>{}, false, kFloat64)}; });
  b.add("prod", "dim", {randu({4, 6}, 0.5, 1.5)}, "torch.prod(x[0], 1)", [](const V& x) { return V{prod(x[0], 1)}; }, sum_tol);
  b.add("prod", "int", {I({3, 4}, -3, 4)}, "torch.prod(x[0])", [](const V& x) { return V{prod(x[0])}; });
  b.add("amax", "dims", {N({3, 4, 5})}, "torch.amax(x[0], (0, 2))", [](const V& x) { return V{amax(x[0], {0, 2})}; });
  b.add("amin", "keepdim", {N({3, 4, 5}, kBFloat16)}, "torch.amin(x[0], -1, keepdim=True)", [](const V& x) { return V{amin(x[0], -1, true)}; });
  b.add("max", "dim", {N({5, 7})}, "torch.max(x[0], 1)", [](const V& x) { auto [v, i] = max(x[0], 1); return V{v, i}; });
  b.add("max", "all", {N({5, 7}, kFloat16)}, "torch.max(x[0])", [](const V& x) { return V{max(x[0])}; });
  b.add("max", "nan", {tensor({1.0, NAN, 3.0})}, "torch.max(x[0], 0)", [](const V& x) { auto [v, i] = max(x[0], 0); return V{v, i}; });
  b.add("min", "dim_keepdim", {NT({5, 7})}, "torch.min(x[0], 0, keepdim=True)", [](const V& x) { auto [v, i] = min(x[0], 0, true); return V{v, i}; });
  b.add("min", "all_int", {I({9}, -9, 9)}, "torch.min(x[0])", [](const V& x) { return V{min(x[0])}; });
  b.add("argmax", "dim", {N({4, 9})}, "torch.argmax(x[0], 1)", [](const V& x) { return V{argmax(x[0], 1)}; });
  b.add("argmax", "flat", {N({4, 9})}, "torch.argmax(x[0])", [](const V& x) { return V{argmax(x[0])}; });
  b.add("argmin", "dim_keepdim", {N({4, 9}, kFloat64)}, "torch.argmin(x[0], 0, keepdim=True)", [](const V& x) { return V{argmin(x[0], 0, true)}; });
  for (double c : {0.0, 1.0}) {
    std::string cs = c == 0 ? "0" : "1";
    b.add("var", "c" + cs, {N({6, 7})}, "torch.var(x[0], 1, correction=" + cs + ")", [c](const V& x) { return V{var(x[0], Dims(1), c)}; }, sum_tol);
    b.add("std", "c" + cs, {N({6, 7})}, "torch.std(x[0], 0, correction=" + cs + ")", [c](const V& x) { return V{tessera::std(x[0], Dims(0), c)}; }, sum_tol);
  }
  b.add("var", "all_bf16", {N({30}, kBFloat16)}, "torch.var(x[0])", [](const V& x) { return V{var(x[0])}; });
  b.add("var_mean", "dims", {N({4, 5, 6})}, "torch.var_mean(x[0], (1, 2), keepdim=True)",
        [](const V& x) { auto [v, m] = var_mean(x[0], Dims({1, 2}), 1, true); return V{v, m}; }, sum_tol);
  for (double p : {1.0, 2.0, 3.0, double(INFINITY)}) {
    std::string ps = std::isinf(p) ? "inf" : std::to_string(int(p));
    b.add("norm", "p" + ps, {N({5, 6})}, "torch.norm(x[0], p=" + ps + ", dim=1)", [p](const V& x) { return V{norm(x[0], p, Dims(1))}; }, sum_tol);
  }
  b.add("norm", "fro", {N({5, 6})}, "torch.norm(x[0], p='fro')", [](const V& x) { return V{norm(x[0], "fro")}; }, sum_tol);
  // A list of mixed dtypes; ord 3 runs the composite. The empty tensor stays out of the inf case: its inf
  // norm is 0 in tessera and in PyTorch's CUDA kernel, an error in PyTorch's CPU loop.
  for (const char* ord : {"1", "2", "inf", "3"}) {
    const bool inf = std::string(ord) == "inf";
    const double p = inf ? double(INFINITY) : std::stod(ord);
    V in{N({5, 6}), N({70}, kBFloat16, 2), N({3, 2}, kFloat64, 3)};
    if (!inf) in.push_back(N({0}));
    b.add("_foreach_norm", std::string("p") + ord, in,
          std::string("tuple(torch._foreach_norm(list(x), ") + ord + "))",
          [p](const V& x) { return _foreach_norm(x, p); }, sum_tol);
  }
  // The scalar's gradient sums bf16 products: bf16's tolerance.
  b.add("_foreach_mul_", "tensor_scalar", {N({5, 6}), N({70}, kBFloat16, 2), N({1}, kFloat32, 3).reshape({})},
        "[x[0] * x[2], x[1] * x[2]]", [](const V& x) {
          V ts{x[0].clone(), x[1].clone()};
          _foreach_mul_(ts, x[2]);
          return ts;
        }, testing::tolerance_for(kBFloat16));
  // Through views of tensors in the graph (a transposed slice, a slice): mul_ on each, as PyTorch's.
  b.add("_foreach_mul_", "through_views", {N({4, 5}, kFloat32, 64), N({6}, kFloat32, 65), N({1}, kFloat32, 66).reshape({})},
        "(lambda t, u: (t.t()[1:3].mul_(x[2]), u[1:].mul_(x[2]), t, u)[2:])(x[0] * 1, x[1] * 1)", [](const V& x) {
          Tensor t = x[0] * 1, u = x[1] * 1;
          _foreach_mul_({t.t().slice(0, 1, 3), u.slice(0, 1, 6)}, x[2]);
          return V{t, u};
        });
  b.add("logsumexp", "dim", {N({4, 8}) * 10.0}, "torch.logsumexp(x[0], 1)", [](const V& x) { return V{logsumexp(x[0], 1)}; }, sum_tol);
  b.add("logsumexp", "inf", {tensor({-INFINITY, -INFINITY, 1.0, INFINITY}).view({2, 2})}, "torch.logsumexp(x[0], 1)",
        [](const V& x) { return V{logsumexp(x[0], 1)}; });
  b.add("any", "dim", {I({4, 5}, 0, 2, 3).to(kFloat32) * 0.0 + I({4, 5}, -8, 2).to(kFloat32).clamp(Scalar(0))}, "torch.any(x[0], 1)",
        [](const V& x) { return V{any(x[0], 1)}; });
  b.add("all", "dim", {I({4, 5}, -1, 6)}, "torch.all(x[0], 0)", [](const V& x) { return V{all(x[0], 0)}; });
  b.add("cumsum", "f32", {N({4, 6})}, "torch.cumsum(x[0], 1)", [](const V& x) { return V{cumsum(x[0], 1)}; }, sum_tol);
  b.add("cumsum", "int_dim0", {I({4, 6}, -5, 5, 7, kInt32)}, "torch.cumsum(x[0], 0)", [](const V& x) { return V{cumsum(x[0], 0)}; });
  b.add("cumprod", "f64", {randu({3, 5}, 0.5, 1.5, kFloat64)}, "torch.cumprod(x[0], -1)", [](const V& x) { return V{cumprod(x[0], -1)}; });
  b.add("softmax", "last", {N({6, 33}) * 3.0}, "torch.softmax(x[0], -1)", [](const V& x) { return V{softmax(x[0], -1)}; });
  b.add("softmax", "dim0_bf16", {N({6, 5}, kBFloat16)}, "torch.softmax(x[0], 0)", [](const V& x) { return V{softmax(x[0], 0)}; });
  b.add("softmax", "dtype", {N({3, 7}, kFloat16)}, "torch.softmax(x[0], 1, dtype=torch.float32)", [](const V& x) { return V{softmax(x[0], 1, kFloat32)}; });
  b.add("log_softmax", "last", {N({6, 33}) * 3.0}, "torch.log_softmax(x[0], -1)", [](const V& x) { return V{log_softmax(x[0], -1)}; });
  b.add("log_softmax", "strided", {NT({5, 9})}, "torch.log_softmax(x[0], 0)", [](const V& x) { return V{log_softmax(x[0], 0)}; });
}

void linalg(Builder& b) {
  testing::Tolerance mm32{2e-5, 2e-5}, mm16{2e-2, 2e-2};
  b.add("matmul", "2d", {N({17, 33}), N({33, 9}, kFloat32, 2)}, "torch.matmul(x[0], x[1])", [](const V& x) { return V{matmul(x[0], x[1])}; }, mm32);
  b.add("matmul", "1d_1d", {N({33}), N({33}, kFloat32, 2)}, "torch.matmul(x[0], x[1])", [](const V& x) { return V{matmul(x[0], x[1])}; }, mm32);
  b.add("matmul", "1d_2d", {N({5}), N({5, 4}, kFloat32, 2)}, "torch.matmul(x[0], x[1])", [](const V& x) { return V{matmul(x[0], x[1])}; }, mm32);
  b.add("matmul", "2d_1d", {N({4, 5}), N({5}, kFloat32, 2)}, "torch.matmul(x[0], x[1])", [](const V& x) { return V{matmul(x[0], x[1])}; }, mm32);
  b.add("matmul", "batched_broadcast", {N({2, 1, 4, 5}), N({3, 5, 6}, kFloat32, 2)}, "torch.matmul(x[0], x[1])",
        [](const V& x) { return V{matmul(x[0], x[1])}; }, mm32);
  b.add("matmul", "transposed", {NT({8, 6}), N({8, 6}, kFloat32, 2).t()}, "torch.matmul(x[0], x[1])", [](const V& x) { return V{matmul(x[0], x[1])}; }, mm32);
  b.add("matmul", "f64", {N({7, 8}, kFloat64), N({8, 3}, kFloat64, 2)}, "torch.matmul(x[0], x[1])", [](const V& x) { return V{matmul(x[0], x[1])}; });
  b.add("matmul", "bf16", {N({7, 8}, kBFloat16), N({8, 3}, kBFloat16, 2)}, "torch.matmul(x[0], x[1])", [](const V& x) { return V{matmul(x[0], x[1])}; }, mm16);
  b.add("matmul", "f16", {N({7, 8}, kFloat16), N({8, 3}, kFloat16, 2)}, "torch.matmul(x[0], x[1])", [](const V& x) { return V{matmul(x[0], x[1])}; }, mm16);
  b.add("matmul", "int64", {I({4, 5}, -5, 5), I({5, 3}, -5, 5, 8)}, "torch.matmul(x[0], x[1])", [](const V& x) { return V{matmul(x[0], x[1])}; });
  b.add("mm", "f32", {N({6, 7}), N({7, 5}, kFloat32, 2)}, "torch.mm(x[0], x[1])", [](const V& x) { return V{mm(x[0], x[1])}; }, mm32);
  b.add("bmm", "f32", {N({3, 6, 7}), N({3, 7, 5}, kFloat32, 2)}, "torch.bmm(x[0], x[1])", [](const V& x) { return V{bmm(x[0], x[1])}; }, mm32);
  b.add("addmm", "beta_alpha", {N({5}), N({4, 6}), N({6, 5}, kFloat32, 2)}, "torch.addmm(x[0], x[1], x[2], beta=0.5, alpha=2)",
        [](const V& x) { return V{addmm(x[0], x[1], x[2], 0.5, 2)}; }, mm32);
  b.add("baddbmm", "f32", {N({2, 4, 5}), N({2, 4, 6}), N({2, 6, 5}, kFloat32, 2)}, "torch.baddbmm(x[0], x[1], x[2], beta=2, alpha=0.5)",
        [](const V& x) { return V{baddbmm(x[0], x[1], x[2], 2, 0.5)}; }, mm32);
  b.add("linear", "bias", {N({2, 3, 8}), N({5, 8}, kFloat32, 2), N({5}, kFloat32, 3)}, "F.linear(x[0], x[1], x[2])",
        [](const V& x) { return V{linear(x[0], x[1], x[2])}; }, mm32);
  b.add("linear", "nobias", {N({4, 8}), N({5, 8}, kFloat32, 2)}, "F.linear(x[0], x[1])", [](const V& x) { return V{linear(x[0], x[1])}; }, mm32);
  b.add("dot", "f32", {N({50}), N({50}, kFloat32, 2)}, "torch.dot(x[0], x[1])", [](const V& x) { return V{dot(x[0], x[1])}; }, mm32);
  b.add("outer", "f32", {N({5}), N({4}, kFloat32, 2)}, "torch.outer(x[0], x[1])", [](const V& x) { return V{outer(x[0], x[1])}; });
  struct E { const char* name; const char* eq; std::vector<Shape> shapes; };
  const E es[] = {
      {"matmul", "ij,jk->ik", {{4, 5}, {5, 3}}},
      {"attn_scores", "bhqd,bhkd->bhqk", {{2, 3, 4, 8}, {2, 3, 5, 8}}},
      {"attn_values", "bhqk,bhkd->bhqd", {{2, 3, 4, 5}, {2, 3, 5, 8}}},
      {"ellipsis", "...ij,...jk->...ik", {{2, 4, 5}, {2, 5, 3}}},
      {"transpose", "ij->ji", {{3, 4}}},
      {"trace", "ii", {{4, 4}}},
      {"diag", "ii->i", {{4, 4}}},
      {"rowsum", "ij->i", {{3, 5}}},
      {"outer", "i,j->ij", {{3}, {4}}},
      {"implicit", "ij,jk", {{4, 5}, {5, 3}}},
      {"three", "ij,jk,kl->il", {{3, 4}, {4, 5}, {5, 2}}},
      {"bilinear", "bn,anm,bm->ba", {{2, 3}, {4, 3, 5}, {2, 5}}},
  };
  for (const E& e : es) {
    V in;
    std::string args;
    for (size_t i = 0; i < e.shapes.size(); ++i) {
      in.push_back(N(e.shapes[i], kFloat32, 40 + i));
      args += ", x[" + std::to_string(i) + "]";
    }
    std::string eq = e.eq;
    b.add("einsum", e.name, in, "torch.einsum('" + eq + "'" + args + ")", [eq](const V& x) { return V{einsum(eq, x)}; }, mm32);
  }
}

void indexing(Builder& b) {
  b.add("index_select", "dim1", {N({4, 6}), I({5}, 0, 6)}, "torch.index_select(x[0], 1, x[1])", [](const V& x) { return V{index_select(x[0], 1, x[1])}; });
  b.add("index_select", "strided_f16", {NT({5, 4}, kFloat16), I({3}, 0, 5)}, "torch.index_select(x[0], 0, x[1])", [](const V& x) { return V{index_select(x[0], 0, x[1])}; });
  b.add("gather", "dim1", {N({3, 5}), I({3, 4}, 0, 5)}, "torch.gather(x[0], 1, x[1])", [](const V& x) { return V{gather(x[0], 1, x[1])}; });
  b.add("gather", "dim0", {N({4, 3}, kFloat64), I({2, 3}, 0, 4)}, "torch.gather(x[0], 0, x[1])", [](const V& x) { return V{gather(x[0], 0, x[1])}; });
  Tensor perm = tensor(std::vector<int64_t>{3, 0, 4, 1, 2, 2, 0, 4, 1, 3}, {2, 5});
  b.add("scatter", "src", {N({2, 5}), perm, N({2, 5}, kFloat32, 2)}, "torch.scatter(x[0], 1, x[1][:, :5].argsort(1), x[2])",
        [](const V& x) { return V{scatter(x[0], 1, x[1].slice(1, 0, 5).argsort(1), x[2])}; });
  b.add("scatter", "value", {N({3, 4}), I({3, 1}, 0, 4)}, "torch.scatter(x[0], 1, x[1], 9.0)", [](const V& x) { return V{scatter(x[0], 1, x[1], Scalar(9.0))}; });
  b.add("scatter_add", "dups", {N({3, 4}), I({3, 6}, 0, 4), N({3, 6}, kFloat32, 2)}, "torch.scatter_add(x[0], 1, x[1], x[2])",
        [](const V& x) { return V{scatter_add(x[0], 1, x[1], x[2])}; });
  b.add("index_add", "dups", {N({5, 3}), I({6}, 0, 5), N({6, 3}, kFloat32, 2)}, "torch.index_add(x[0], 0, x[1], x[2], alpha=2)",
        [](const V& x) { return V{index_add(x[0], 0, x[1], x[2], 2)}; });
  b.add("index", "two_tensors", {N({4, 5, 6}), I({3}, -4, 4), I({3}, 0, 5, 8)}, "x[0][x[1], x[2]]",
        [](const V& x) { return V{index(x[0], {x[1], x[2]})}; });
  b.add("index", "separated", {N({4, 5, 6}), I({2}, 0, 4), I({2}, 0, 6, 8)}, "x[0][x[1], :, x[2]]",
        [](const V& x) { return V{index(x[0], {x[1], std::nullopt, x[2]})}; });
  b.add("index", "bool_mask", {N({4, 5}), I({4}, 0, 2).to(kBool)}, "x[0][x[1]]", [](const V& x) { return V{index(x[0], {x[1]})}; });
  b.add("index", "slice_then_index", {N({4, 5}), I({3}, 0, 5)}, "x[0][:, x[1]]", [](const V& x) { return V{index(x[0], {std::nullopt, x[1]})}; });
  b.add("index_put", "accumulate", {N({5, 3}), I({7}, 0, 5), N({7, 3}, kFloat32, 2)}, "x[0].index_put((x[1],), x[2], accumulate=True)",
        [](const V& x) { return V{index_put(x[0], {x[1]}, x[2], true)}; });
  b.add("index_put", "set_broadcast", {N({5, 3}), tensor(std::vector<int64_t>{4, 0, 2}), N({3}, kFloat32, 2)},
        "x[0].index_put((x[1],), x[2])", [](const V& x) { return V{index_put(x[0], {x[1]}, x[2])}; });
  b.add("masked_fill", "broadcast", {N({3, 4}), I({4}, 0, 2).to(kBool)}, "x[0].masked_fill(x[1], -1.5)", [](const V& x) { return V{masked_fill(x[0], x[1], -1.5)}; });
  b.add("masked_select", "broadcast", {N({3, 4}), I({4}, 0, 2).to(kBool)}, "torch.masked_select(x[0], x[1])", [](const V& x) { return V{masked_select(x[0], x[1])}; });
  b.add("nonzero", "int", {I({3, 4}, -1, 2)}, "torch.nonzero(x[0])", [](const V& x) { return V{nonzero(x[0])}; });
  b.add("embedding", "2d_idx", {N({10, 4}), I({2, 3}, 0, 10)}, "F.embedding(x[1], x[0])", [](const V& x) { return V{embedding(x[0], x[1])}; });
  b.add("one_hot", "auto", {I({6}, 0, 4)}, "F.one_hot(x[0])", [](const V& x) { return V{one_hot(x[0])}; });
  b.add("one_hot", "classes", {I({2, 3}, 0, 4)}, "F.one_hot(x[0], 6)", [](const V& x) { return V{one_hot(x[0], 6)}; });
}

void shape_ops(Builder& b) {
  b.add("cat", "dim1_promote", {N({2, 3}), N({2, 4}, kFloat64), N({2, 1}, kFloat16)}, "torch.cat([x[0], x[1], x[2]], 1)",
        [](const V& x) { return V{cat({x[0], x[1], x[2]}, 1)}; });
  b.add("cat", "strided", {NT({3, 4}), stepped(N({2, 4}))}, "torch.cat([x[0], x[1]])", [](const V& x) { return V{cat({x[0], x[1]})}; });
  b.add("stack", "dim_last", {N({2, 3}), N({2, 3}, kFloat32, 2)}, "torch.stack([x[0], x[1]], -1)", [](const V& x) { return V{stack({x[0], x[1]}, -1)}; });
  b.add("split", "sizes", {N({7, 2})}, "torch.split(x[0], [2, 5])", [](const V& x) { return x[0].split(std::vector<int64_t>{2, 5}); });
  b.add("split", "even", {N({7, 2})}, "torch.split(x[0], 3)", [](const V& x) { return split(x[0], 3); });
  b.add("chunk", "dim1", {N({2, 7})}, "torch.chunk(x[0], 3, 1)", [](const V& x) { return chunk(x[0], 3, 1); });
  b.add("pad", "constant", {N({2, 3, 4})}, "F.pad(x[0], (1, 2, 0, 1), value=0.5)", [](const V& x) { return V{pad(x[0], {1, 2, 0, 1}, "constant", 0.5)}; });
  b.add("pad", "constant_crop", {N({2, 5})}, "F.pad(x[0], (-1, 2))", [](const V& x) { return V{pad(x[0], {-1, 2})}; });
  b.add("pad", "reflect", {N({1, 2, 5})}, "F.pad(x[0], (2, 3), mode='reflect')", [](const V& x) { return V{pad(x[0], {2, 3}, "reflect")}; });
  b.add("pad", "reflect2d", {N({1, 2, 4, 5})}, "F.pad(x[0], (1, 2, 2, 1), mode='reflect')", [](const V& x) { return V{pad(x[0], {1, 2, 2, 1}, "reflect")}; });
  b.add("pad", "replicate", {N({1, 2, 4, 5})}, "F.pad(x[0], (2, 1, 0, 3), mode='replicate')", [](const V& x) { return V{pad(x[0], {2, 1, 0, 3}, "replicate")}; });
  b.add("flip", "dims", {N({3, 4, 5})}, "torch.flip(x[0], (0, 2))", [](const V& x) { return V{flip(x[0], {0, 2})}; });
  b.add("roll", "dims", {N({3, 4})}, "torch.roll(x[0], (1, -2), (0, 1))", [](const V& x) { return V{roll(x[0], {1, -2}, {0, 1})}; });
  b.add("roll", "flat", {N({3, 4})}, "torch.roll(x[0], 5)", [](const V& x) { return V{roll(x[0], {5})}; });
  b.add("repeat", "lead", {N({2, 3})}, "x[0].repeat(2, 1, 3)", [](const V& x) { return V{repeat(x[0], {2, 1, 3})}; });
  b.add("repeat_interleave", "int_dim", {N({2, 3})}, "torch.repeat_interleave(x[0], 2, 1)", [](const V& x) { return V{repeat_interleave(x[0], 2, 1)}; });
  b.add("repeat_interleave", "tensor_flat", {N({3}), tensor(std::vector<int64_t>{1, 0, 3})}, "torch.repeat_interleave(x[0], x[1])",
        [](const V& x) { return V{repeat_interleave(x[0], x[1])}; });
  b.add("tril", "offset", {N({4, 5})}, "torch.tril(x[0], 1)", [](const V& x) { return V{tril(x[0], 1)}; });
  b.add("triu", "batched", {N({2, 4, 5})}, "torch.triu(x[0], -1)", [](const V& x) { return V{triu(x[0], -1)}; });
  b.add("topk", "largest", {N({4, 9})}, "torch.topk(x[0], 3)", [](const V& x) { auto [v, i] = topk(x[0], 3); return V{v, i}; });
  b.add("topk", "smallest_dim0", {N({9, 4})}, "torch.topk(x[0], 2, 0, largest=False)", [](const V& x) { auto [v, i] = topk(x[0], 2, 0, false); return V{v, i}; });
  b.add("sort", "asc", {N({4, 9})}, "torch.sort(x[0])", [](const V& x) { auto [v, i] = sort(x[0]); return V{v, i}; });
  b.add("sort", "desc_stable_ties", {I({3, 8}, 0, 3)}, "torch.sort(x[0], dim=1, descending=True, stable=True)",
        [](const V& x) { auto [v, i] = sort(x[0], 1, true, true); return V{v, i}; });
  b.add("sort", "nan", {tensor({3.0, NAN, -1.0, 2.0})}, "torch.sort(x[0])", [](const V& x) { auto [v, i] = sort(x[0]); return V{v, i}; });
  b.add("argsort", "dim0", {N({6, 3})}, "torch.argsort(x[0], 0)", [](const V& x) { return V{argsort(x[0], 0)}; });
  b.no_gradient();
  b.add("unique", "inverse_counts", {I({12}, 0, 5)}, "torch.unique(x[0], return_inverse=True, return_counts=True)",
        [](const V& x) { auto [u, inv, cnt] = unique(x[0], true, true, true); return V{u, inv, cnt}; });
  b.add("unique", "float", {I({3, 4}, 0, 4).to(kFloat32)}, "torch.unique(x[0])", [](const V& x) { return V{std::get<0>(unique(x[0]))}; });
}

void views_and_copies(Builder& b) {
  b.add("view", "infer", {N({4, 6})}, "x[0].view(3, -1)", [](const V& x) { return V{x[0].view({3, -1})}; });
  b.add("reshape", "noncontig", {NT({4, 6})}, "x[0].reshape(-1)", [](const V& x) { return V{x[0].reshape({-1})}; });
  b.add("permute", "3d", {N({2, 3, 4})}, "x[0].permute(2, 0, 1)", [](const V& x) { return V{x[0].permute({2, 0, 1})}; });
  b.add("transpose", "neg", {N({2, 3, 4})}, "x[0].transpose(-1, 0)", [](const V& x) { return V{x[0].transpose(-1, 0)}; });
  b.add("expand", "lead", {N({3, 1})}, "x[0].expand(2, 3, 4)", [](const V& x) { return V{x[0].expand({2, 3, 4})}; });
  b.add("squeeze", "all", {N({1, 3, 1})}, "x[0].squeeze()", [](const V& x) { return V{x[0].squeeze()}; });
  b.add("unsqueeze", "neg", {N({3, 2})}, "x[0].unsqueeze(-2)", [](const V& x) { return V{x[0].unsqueeze(-2)}; });
  b.add("narrow", "dim1", {N({3, 6})}, "x[0].narrow(1, 2, 3)", [](const V& x) { return V{x[0].narrow(1, 2, 3)}; });
  b.add("slice", "step", {N({10, 3})}, "x[0][1:9:3]", [](const V& x) { return V{x[0].slice(0, 1, 9, 3)}; });
  b.add("select", "neg", {N({4, 5})}, "x[0][:, -2]", [](const V& x) { return V{x[0].select(1, -2)}; });
  b.add("as_strided", "window", {N({12})}, "x[0].as_strided((3, 4), (2, 1), 1)", [](const V& x) { return V{x[0].as_strided({3, 4}, {2, 1}, 1)}; });
  b.add("flatten", "range", {N({2, 3, 4, 5})}, "x[0].flatten(1, 2)", [](const V& x) { return V{x[0].flatten(1, 2)}; });
  b.add("unflatten", "infer", {N({2, 12})}, "x[0].unflatten(1, (3, -1))", [](const V& x) { return V{x[0].unflatten(1, {3, -1})}; });
  b.add("diagonal", "offset", {N({2, 4, 5})}, "torch.diagonal(x[0], -1, 1, 2)", [](const V& x) { return V{x[0].diagonal(-1, 1, 2)}; });
  b.add("contiguous", "transposed", {NT({3, 5})}, "x[0].contiguous()", [](const V& x) { return V{x[0].contiguous()}; });
  b.add("clone", "strided", {stepped(N({3, 5}))}, "x[0].clone()", [](const V& x) { return V{x[0].clone()}; });
  for (DType to : {kFloat16, kBFloat16, kInt32, kUInt8, kBool, kFloat64}) {
    // Negative floats to uint8 are undefined in C++ and differ between libraries: keep them positive.
    Tensor src = to == kUInt8 ? randu({20}, 0, 250) : N({20}) * 100.0;
    b.add("to", std::string("f32_to_") + dn(to), {src}, std::string("x[0].to(") + torch_dtype(to) + ")",
          [to](const V& x) { return V{x[0].to(to)}; });
    if (!is_floating_point(to)) b.no_gradient();
  }
  b.add("to", "f64_to_f16_rounding", {randu({50}, -70000, 70000, kFloat64)}, "x[0].to(torch.float16)", [](const V& x) { return V{x[0].to(kFloat16)}; });
  b.add("to", "bf16_to_i64", {N({20}, kBFloat16) * 50.0}, "x[0].to(torch.int64)", [](const V& x) { return V{x[0].to(kInt64)}; });
  b.no_gradient();
  b.add("item", "f16", {N({}, kFloat16)}, "torch.tensor(x[0].item(), dtype=torch.float64)", [](const V& x) { return V{scalar_tensor(x[0].item(), {kFloat64, x[0].device()})}; });
  b.no_gradient();
  b.add("allclose", "close", {N({5}), N({5}) + 1e-7}, "torch.allclose(x[0], x[1])", [](const V& x) { return V{scalar_tensor(allclose(x[0], x[1]), x[0].device())}; });
  b.add("equal", "diff", {N({5}), N({5}, kFloat32, 2)}, "torch.equal(x[0], x[1])", [](const V& x) { return V{scalar_tensor(equal(x[0], x[1]), x[0].device())}; });
}

// layer_norm and rms_norm (the fused norm ops), forward and gradients of x, weight and bias.
void normalization(Builder& b) {
  namespace F = nn::functional;
  const testing::Tolerance red{1e-5, 1e-5};  // row sums in a different order than PyTorch's
  b.add("layer_norm", "affine", {N({4, 3, 10}) * 2.0 + 1.0, N({10}, kFloat32, 2), N({10}, kFloat32, 3)},
        "F.layer_norm(x[0], (10,), x[1], x[2])", [](const V& x) { return V{F::layer_norm(x[0], {10}, x[1], x[2])}; }, red);
  b.add("layer_norm", "2d_shape_noaffine", {N({3, 4, 5})}, "F.layer_norm(x[0], (4, 5), eps=1e-3)",
        [](const V& x) { return V{F::layer_norm(x[0], {4, 5}, std::nullopt, std::nullopt, 1e-3)}; }, red);
  b.add("layer_norm", "strided_f64", {NT({6, 7}, kFloat64), N({7}, kFloat64, 2), N({7}, kFloat64, 3)},
        "F.layer_norm(x[0], (7,), x[1], x[2])", [](const V& x) { return V{F::layer_norm(x[0], {7}, x[1], x[2])}; });
  // PyTorch 1.13's CPU kernel rounds xhat to bfloat16 before the affine step, tessera rounds once (within
  // one rounding of float64): an absolute tolerance of a few bfloat16 units at |y| ~ 1 covers the cancellation.
  b.add("layer_norm", "bf16", {N({8, 64}, kBFloat16), N({64}, kBFloat16, 2), N({64}, kBFloat16, 3)},
        "F.layer_norm(x[0], (64,), x[1], x[2])", [](const V& x) { return V{F::layer_norm(x[0], {64}, x[1], x[2])}; },
        testing::Tolerance{1.6e-2, 5e-3});
  // PyTorch's own definition (F.rms_norm is newer than some oracles), in float32 for 16-bit inputs.
  b.add("rms_norm", "weight", {N({5, 12}), N({12}, kFloat32, 2)},
        "x[0] * torch.rsqrt(x[0].pow(2).mean(-1, keepdim=True) + 1e-6) * x[1]",
        [](const V& x) { return V{F::rms_norm(x[0], {12}, x[1], 1e-6)}; }, red);
  b.add("rms_norm", "2d_shape_default_eps", {N({2, 3, 4})},
        "x[0] * torch.rsqrt(x[0].pow(2).mean((-2, -1), keepdim=True) + torch.finfo(x[0].dtype).eps)",
        [](const V& x) { return V{F::rms_norm(x[0], {3, 4})}; }, red);
  b.add("rms_norm", "f16", {N({6, 32}, kFloat16), N({32}, kFloat16, 2)},
        "(x[0].float() * torch.rsqrt(x[0].float().pow(2).mean(-1, keepdim=True) + 1e-5) * x[1].float()).half()",
        [](const V& x) { return V{F::rms_norm(x[0], {32}, x[1], 1e-5)}; });
  // The fused ops of a transformer step against PyTorch's unfused composition.
  b.add("add_layer_norm", "affine", {N({4, 3, 10}), N({4, 3, 10}, kFloat32, 2), N({10}, kFloat32, 3), N({10}, kFloat32, 4)},
        "(x[0] + x[1], F.layer_norm(x[0] + x[1], (10,), x[2], x[3]))", [](const V& x) {
          auto [s, y] = F::add_layer_norm(x[0], x[1], {10}, x[2], x[3]);
          return V{s, y};
        }, red);
  // Under autocast (Note [Mixed add + layer norm]): a bfloat16 branch, the float32 stream, y in bfloat16.
  b.add("add_layer_norm", "autocast_bf16",
        {N({4, 3, 10}, kBFloat16), N({4, 3, 10}, kFloat32, 2), N({10}, kFloat32, 3), N({10}, kFloat32, 4)},
        "(x[0].float() + x[1], F.layer_norm(x[0].float() + x[1], (10,), x[2], x[3]).bfloat16())", [](const V& x) {
          amp::autocast guard(x[0].device(), kBFloat16);
          auto [s, y] = F::add_layer_norm(x[0], x[1], {10}, x[2], x[3]);
          return V{s, y};
        }, red);
  b.add("linear_gelu", "bias", {N({2, 5, 6}), N({8, 6}, kFloat32, 2), N({8}, kFloat32, 3)},
        "F.gelu(F.linear(x[0], x[1], x[2]), approximate='tanh')",
        [](const V& x) { return V{F::linear_gelu(x[0], x[1], x[2])}; }, red);
  b.add("mlp_gelu", "biases", {N({2, 5, 6}), N({8, 6}, kFloat32, 2), N({8}, kFloat32, 3), N({4, 8}, kFloat32, 4),
                               N({4}, kFloat32, 5)},
        "F.linear(F.gelu(F.linear(x[0], x[1], x[2]), approximate='tanh'), x[3], x[4])",
        [](const V& x) { return V{F::mlp_gelu(x[0], x[1], x[2], x[3], x[4])}; }, red);
  b.add("linear_cross_entropy", "mean_chunked", {N({9, 6}), N({11, 6}, kFloat32, 2), I({9}, 0, 11)},
        "F.cross_entropy(F.linear(x[0], x[1]), x[2])",
        [](const V& x) { return V{F::linear_cross_entropy(x[0], x[1], x[2], -100, "mean", 4)}; }, red);
}

thread_local Device g_case_device = kCPU;  // Note [Case device]

}  // namespace

Device case_device() { return g_case_device; }
CaseDevice::CaseDevice(Device d) : prev_(g_case_device) { g_case_device = d; }
CaseDevice::~CaseDevice() { g_case_device = prev_; }

// scaled_dot_product_attention, causal (top-left aligned when L != S): bfloat16 with head dim 64, so
// that the GPU run takes the flash attention kernels and the CPU run the composite. The oracle computes
// in float32 from the bfloat16 inputs (PyTorch 1.13 has no scaled_dot_product_attention).
void attention(Builder& b) {
  namespace F = nn::functional;
  const testing::Tolerance tol{3e-2, 3e-2};  // scores and probabilities rounded to bfloat16 on the way
  const char* expr =
      "(torch.softmax((x[0].float() @ x[1].float().transpose(-2, -1) * 0.125).masked_fill("
      "torch.ones(x[0].shape[-2], x[1].shape[-2], dtype=torch.bool).triu(1), float('-inf')), -1) @ x[2].float())"
      ".bfloat16()";
  const auto run = [](const V& x) { return V{F::scaled_dot_product_attention(x[0], x[1], x[2], std::nullopt, 0.0, true)}; };
  b.add("scaled_dot_product_attention", "causal_bf16_d64",
        {N({1, 2, 17, 64}, kBFloat16, 1), N({1, 2, 17, 64}, kBFloat16, 2), N({1, 2, 17, 64}, kBFloat16, 3)}, expr, run, tol);
  b.add("scaled_dot_product_attention", "causal_bf16_d64_l5_s9",
        {N({2, 1, 5, 64}, kBFloat16, 4), N({2, 1, 9, 64}, kBFloat16, 5), N({2, 1, 9, 64}, kBFloat16, 6)}, expr, run, tol);
}

// Inputs PyTorch refuses: tessera must refuse them too, with the error class that answers PyTorch's
// (test_torch.cpp, same_error_class).
void errors(Builder& b) {
  b.add_error("add", "error_shapes", {N({3, 4}), N({5})}, "torch.add(x[0], x[1])", [](const V& x) { return V{add(x[0], x[1])}; });
  b.add_error("mm", "error_inner_sizes", {N({3, 4}), N({5, 2})}, "torch.mm(x[0], x[1])", [](const V& x) { return V{mm(x[0], x[1])}; });
  b.add_error("cat", "error_sizes", {N({2, 3}), N({2, 4})}, "torch.cat([x[0], x[1]], 0)",
        [](const V& x) { return V{cat({x[0], x[1]}, 0)}; });
  b.add_error("index_select", "error_out_of_range", {N({4, 3}), tensor(std::vector<int64_t>{0, 4}, {2})},
        "torch.index_select(x[0], 0, x[1])", [](const V& x) { return V{index_select(x[0], 0, x[1])}; });
  b.add_error("softmax", "error_dim", {N({2, 3})}, "torch.softmax(x[0], 2)", [](const V& x) { return V{softmax(x[0], 2)}; });
  b.add_error("sub", "error_bool", {I({4}, 0, 2).to(kBool), I({4}, 0, 2, 9).to(kBool)}, "torch.sub(x[0], x[1])",
        [](const V& x) { return V{sub(x[0], x[1])}; });
}

std::vector<Case> all_cases() {
  Builder b;
  errors(b);
  creation(b);
  unary(b);
  binary(b);
  reductions(b);
  linalg(b);
  indexing(b);
  shape_ops(b);
  views_and_copies(b);
  normalization(b);
  attention(b);
  return std::move(b.cases);
}

}  // namespace tessera::conformance
