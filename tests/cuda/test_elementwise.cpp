// GPU elementwise kernels (unary, binary, ternary, allclose) against the CPU kernels on the same
// inputs: every op over the dtypes it takes, on the layouts the GPU iterator tells apart (contiguous
// and 16-byte aligned: the vector path; starting at element 1: the misaligned fallback; transposed and
// sliced with a step: the strided path), broadcast shapes including 0-dim operands, zero-size and odd
// sizes (partial tiles); special values (nan, inf, -0, halves); integer division by zero; in-place
// ops; and two tensors past 2^31 elements (contiguous, and strided through the 64-bit offsets).
#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "common/test_util.h"

namespace ts = tessera;
using namespace tessera::testing;

namespace {

// test_data gives a 1-D tensor for an empty shape; reshape makes it 0-dim.
ts::Tensor td(const ts::Shape& s, ts::DType dt, uint64_t seed, double lo = -5, double hi = 5) {
  return test_data(s, dt, seed, lo, hi).reshape(s);
}

// A GPU tensor with the values of the (contiguous, CPU) tensor `t`, stored in a given layout.
struct GpuLayout {
  std::string name;
  std::function<ts::Tensor(const ts::Tensor&)> make;
};
const std::vector<GpuLayout>& gpu_layouts() {
  static const std::vector<GpuLayout> l = {
      {"contiguous", [](const ts::Tensor& t) { return t.to("cuda"); }},
      {"offset1",  // contiguous but starting at element 1: not 16-byte aligned
       [](const ts::Tensor& t) {
         ts::Tensor buf = ts::zeros({t.numel() + 1}, {t.dtype(), "cuda"});
         ts::Tensor v = buf.narrow(0, 1, t.numel()).view(t.sizes());
         v.copy_(t);
         return v;
       }},
      {"transposed",
       [](const ts::Tensor& t) {
         if (t.dim() < 2) return t.to("cuda");
         return t.transpose(-1, -2).contiguous().to("cuda").transpose(-1, -2);
       }},
      {"sliced_step2",
       [](const ts::Tensor& t) {
         if (t.dim() == 0) return t.to("cuda");
         ts::Shape big = t.sizes();
         big.back() *= 2;
         ts::Tensor buf = ts::zeros(big, {t.dtype(), "cuda"});
         ts::Tensor v = buf.slice(-1, 0, std::nullopt, 2);
         v.copy_(t);
         return v;
       }},
  };
  return l;
}

// Shapes: odd sizes (partial vectors and tiles), several full tiles, 3-D, 0-dim, zero-size.
const std::vector<ts::Shape>& shapes() {
  static const std::vector<ts::Shape> s = {{3, 5}, {1037}, {33, 517}, {2, 3, 4}, {}, {0, 5}};
  return s;
}

::testing::AssertionResult same_as_cpu(const ts::Tensor& gpu, const ts::Tensor& cpu) {
  if (!gpu.is_cuda()) return ::testing::AssertionFailure() << "result is on " << gpu.device().str();
  if (gpu.dtype() != cpu.dtype())
    return ::testing::AssertionFailure() << "dtype " << ts::dtype_name(gpu.dtype()) << ", CPU gives " << ts::dtype_name(cpu.dtype());
  return all_close(gpu.cpu(), cpu);
}

std::vector<ts::DType> numeric() {
  return {ts::kUInt8, ts::kInt8, ts::kInt32, ts::kInt64, ts::kFloat16, ts::kBFloat16, ts::kFloat32, ts::kFloat64};
}
std::vector<ts::DType> ints_and_bool() { return {ts::kBool, ts::kUInt8, ts::kInt8, ts::kInt32, ts::kInt64}; }

// Values that stress the special cases, as float64 (cast to each float dtype).
ts::Tensor special_values() {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  return ts::tensor({nan, inf, -inf, 0.0, -0.0, 0.5, -0.5, 1.5, 2.5, -2.5, 1e-30, -1e-30, 1e30, -1e30, 3.0, -7.25, 88.0,
                     -100.0, 20.5, 1e-5},
                    ts::kFloat64);
}

// ---- unary ------------------------------------------------------------------------------------------
using UnFn = std::function<ts::Tensor(const ts::Tensor&)>;

void check_unary(const char* name, const UnFn& op, const std::vector<ts::DType>& dtypes, double lo = -5, double hi = 5) {
  for (ts::DType dt : dtypes) {
    for (const ts::Shape& s : shapes()) {
      const ts::Tensor x = td(s, dt, 21, lo, hi);
      const ts::Tensor expected = op(x);
      for (const GpuLayout& l : gpu_layouts()) {
        SCOPED_TRACE(::testing::Message() << name << " " << ts::dtype_name(dt) << " " << ::testing::PrintToString(s) << " "
                                          << l.name);
        EXPECT_TRUE(same_as_cpu(op(l.make(x)), expected));
      }
    }
    if (ts::is_floating_point(dt)) {
      const ts::Tensor x = special_values().to(dt);
      SCOPED_TRACE(::testing::Message() << name << " " << ts::dtype_name(dt) << " special values");
      EXPECT_TRUE(same_as_cpu(op(x.to("cuda")), op(x)));
    }
  }
}

// ---- binary -------------------------------------------------------------------------------------------
using BinFn = std::function<ts::Tensor(const ts::Tensor&, const ts::Tensor&)>;

struct ShapePair {
  ts::Shape a, b;
};
const std::vector<ShapePair>& shape_pairs() {
  static const std::vector<ShapePair> s = {{{3, 5}, {3, 5}},   {{33, 517}, {33, 517}}, {{1037}, {1037}}, {{33, 517}, {}},
                                           {{}, {33, 517}},    {{3, 5}, {5}},          {{4, 1, 5}, {3, 1}}, {{}, {}},
                                           {{0, 5}, {5}},      {{33, 517}, {33, 1}}};
  return s;
}

void check_binary(const char* name, const BinFn& op, const std::vector<ts::DType>& dtypes, double blo = -5, double bhi = 5,
                  double alo = -5, double ahi = 5) {
  for (ts::DType dt : dtypes) {
    for (const ShapePair& sp : shape_pairs()) {
      const ts::Tensor a = td(sp.a, dt, 31, alo, ahi), b = td(sp.b, dt, 32, blo, bhi);
      const ts::Tensor expected = op(a, b);
      for (const GpuLayout& la : gpu_layouts()) {
        // b in the same layout, and b always contiguous (mixed paths: one operand aligned, one not).
        for (int mixed = 0; mixed < 2; ++mixed) {
          const GpuLayout& lb = mixed ? gpu_layouts()[0] : la;
          SCOPED_TRACE(::testing::Message() << name << " " << ts::dtype_name(dt) << " a " << ::testing::PrintToString(sp.a)
                                            << " " << la.name << " b " << ::testing::PrintToString(sp.b) << " " << lb.name);
          EXPECT_TRUE(same_as_cpu(op(la.make(a), lb.make(b)), expected));
        }
      }
    }
    if (ts::is_floating_point(dt)) {
      const ts::Tensor x = special_values().to(dt);
      const ts::Tensor y = x.flip({0});
      SCOPED_TRACE(::testing::Message() << name << " " << ts::dtype_name(dt) << " special values");
      EXPECT_TRUE(same_as_cpu(op(x.to("cuda"), y.to("cuda")), op(x, y)));
      EXPECT_TRUE(same_as_cpu(op(x.to("cuda"), x.to("cuda")), op(x, x)));
    }
  }
}

}  // namespace

TEST(CudaUnary, FloatFunctions) {
  TS_REQUIRE_GPU();
  // Integer inputs promote to float32 (the op layer converts them with the GPU copy kernel).
  const std::vector<ts::DType> dts = {ts::kFloat16, ts::kBFloat16, ts::kFloat32, ts::kFloat64, ts::kInt32, ts::kBool};
  check_unary("exp", [](const ts::Tensor& x) { return ts::exp(x); }, dts);
  check_unary("exp2", [](const ts::Tensor& x) { return ts::exp2(x); }, dts);
  check_unary("log", [](const ts::Tensor& x) { return ts::log(x); }, dts);
  check_unary("log2", [](const ts::Tensor& x) { return ts::log2(x); }, dts);
  check_unary("log1p", [](const ts::Tensor& x) { return ts::log1p(x); }, dts);
  check_unary("expm1", [](const ts::Tensor& x) { return ts::expm1(x); }, dts);
  check_unary("sqrt", [](const ts::Tensor& x) { return ts::sqrt(x); }, dts);
  check_unary("rsqrt", [](const ts::Tensor& x) { return ts::rsqrt(x); }, dts);
  check_unary("sin", [](const ts::Tensor& x) { return ts::sin(x); }, dts);
  check_unary("cos", [](const ts::Tensor& x) { return ts::cos(x); }, dts);
  check_unary("tan", [](const ts::Tensor& x) { return ts::tan(x); }, dts);
  check_unary("tanh", [](const ts::Tensor& x) { return ts::tanh(x); }, dts);
  check_unary("sigmoid", [](const ts::Tensor& x) { return ts::sigmoid(x); }, dts);
  check_unary("erf", [](const ts::Tensor& x) { return ts::erf(x); }, dts);
  check_unary("reciprocal", [](const ts::Tensor& x) { return ts::reciprocal(x); }, dts);
}

TEST(CudaUnary, Activations) {
  TS_REQUIRE_GPU();
  check_unary("gelu", [](const ts::Tensor& x) { return ts::gelu(x); }, float_dtypes());
  check_unary("gelu_tanh", [](const ts::Tensor& x) { return ts::gelu(x, "tanh"); }, float_dtypes());
  check_unary("silu", [](const ts::Tensor& x) { return ts::silu(x); }, float_dtypes());
  check_unary("softplus", [](const ts::Tensor& x) { return ts::softplus(x); }, float_dtypes());
  check_unary("softplus_beta", [](const ts::Tensor& x) { return ts::softplus(x, 2.0, 3.0); }, float_dtypes());
  check_unary("relu", [](const ts::Tensor& x) { return ts::relu(x); }, numeric());
}

// The 16-bit activations over many full tiles and a partial last one, aligned and (a view starting
// one element in) not.
TEST(CudaUnary, ActivationsOverManyTiles) {
  TS_REQUIRE_GPU();
  const int64_t n = int64_t(9) * 1000 * 1000 + 1237;
  for (ts::DType dt : {ts::kBFloat16, ts::kFloat16}) {
    const ts::Tensor x = td({n}, dt, 43, -6, 6);
    const ts::Tensor g = x.to("cuda");
    SCOPED_TRACE(ts::dtype_name(dt));
    EXPECT_TRUE(same_as_cpu(ts::gelu(g), ts::gelu(x)));
    EXPECT_TRUE(same_as_cpu(ts::gelu(g, "tanh"), ts::gelu(x, "tanh")));
    EXPECT_TRUE(same_as_cpu(ts::silu(g), ts::silu(x)));
    EXPECT_TRUE(same_as_cpu(ts::gelu(g.narrow(0, 1, n - 1)), ts::gelu(x.narrow(0, 1, n - 1))));
  }
}

TEST(CudaUnary, IntegerKeepingOps) {
  TS_REQUIRE_GPU();
  check_unary("neg", [](const ts::Tensor& x) { return ts::neg(x); }, numeric());
  check_unary("abs", [](const ts::Tensor& x) { return ts::abs(x); }, numeric());
  check_unary("floor", [](const ts::Tensor& x) { return ts::floor(x); }, numeric());
  check_unary("ceil", [](const ts::Tensor& x) { return ts::ceil(x); }, numeric());
  check_unary("round", [](const ts::Tensor& x) { return ts::round(x); }, numeric());
  check_unary("trunc", [](const ts::Tensor& x) { return ts::trunc(x); }, numeric());
  check_unary("sign", [](const ts::Tensor& x) { return ts::sign(x); }, all_dtypes());
  check_unary("bitwise_not", [](const ts::Tensor& x) { return ts::bitwise_not(x); }, ints_and_bool());
  check_unary("nan_to_num", [](const ts::Tensor& x) { return ts::nan_to_num(x); }, all_dtypes());
  check_unary("nan_to_num_values", [](const ts::Tensor& x) { return ts::nan_to_num(x, 1.5, 100.0, -200.0); },
              float_dtypes());
  // Round half to even, on values the vector path carries.
  ts::Tensor h = ts::tensor({0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.5, 4.5});
  EXPECT_EQ(ts::round(h.to("cuda")).cpu().tolist<double>(), (std::vector<double>{0, 2, 2, -0.0, -2, -2, 4, 4}));
}

TEST(CudaUnary, Predicates) {
  TS_REQUIRE_GPU();
  check_unary("logical_not", [](const ts::Tensor& x) { return ts::logical_not(x); }, all_dtypes(), -2, 2);
  check_unary("isnan", [](const ts::Tensor& x) { return ts::isnan(x); }, all_dtypes());
  check_unary("isinf", [](const ts::Tensor& x) { return ts::isinf(x); }, all_dtypes());
  check_unary("isfinite", [](const ts::Tensor& x) { return ts::isfinite(x); }, all_dtypes());
}

TEST(CudaUnary, ManyDimsAndInPlace) {
  TS_REQUIRE_GPU();
  // A 5-D permutation: five merged dims for the strided path's divisions.
  const ts::Tensor x = td({2, 3, 4, 5, 6}, ts::kFloat32, 41);
  const ts::Tensor xp = x.permute({4, 2, 0, 3, 1});
  EXPECT_TRUE(same_as_cpu(ts::exp(x.to("cuda").permute({4, 2, 0, 3, 1})), ts::exp(xp)));
  EXPECT_TRUE(same_as_cpu(ts::neg(x.to("cuda").permute({4, 2, 0, 3, 1})), ts::neg(xp)));
  // In place, contiguous and strided.
  for (const GpuLayout& l : gpu_layouts()) {
    ts::Tensor g = l.make(td({33, 517}, ts::kBFloat16, 42));
    ts::Tensor c = td({33, 517}, ts::kBFloat16, 42);
    g.exp_();
    c.exp_();
    EXPECT_TRUE(same_as_cpu(g, c)) << l.name;
    ts::Tensor out = ts::empty({33, 517}, {ts::kBFloat16, "cuda"});
    ts::sqrt_out(g, out);
    EXPECT_TRUE(same_as_cpu(out, ts::sqrt(c))) << l.name;
  }
}

TEST(CudaBinary, Arithmetic) {
  TS_REQUIRE_GPU();
  check_binary("add", [](const ts::Tensor& a, const ts::Tensor& b) { return ts::add(a, b); }, all_dtypes());
  check_binary("add_alpha", [](const ts::Tensor& a, const ts::Tensor& b) { return ts::add(a, b, 3); }, numeric());
  check_binary("add_alpha_float", [](const ts::Tensor& a, const ts::Tensor& b) { return ts::add(a, b, 0.3); },
               float_dtypes());
  check_binary("sub", [](const ts::Tensor& a, const ts::Tensor& b) { return ts::sub(a, b); }, numeric());
  check_binary("sub_alpha", [](const ts::Tensor& a, const ts::Tensor& b) { return ts::sub(a, b, 2); }, numeric());
  check_binary("mul", [](const ts::Tensor& a, const ts::Tensor& b) { return ts::mul(a, b); }, all_dtypes());
  check_binary("div", [](const ts::Tensor& a, const ts::Tensor& b) { return ts::div(a, b); }, all_dtypes());
  check_binary("maximum", [](const ts::Tensor& a, const ts::Tensor& b) { return ts::maximum(a, b); }, all_dtypes());
  check_binary("minimum", [](const ts::Tensor& a, const ts::Tensor& b) { return ts::minimum(a, b); }, all_dtypes());
  check_binary("atan2", [](const ts::Tensor& a, const ts::Tensor& b) { return ts::atan2(a, b); }, all_dtypes());
  // Positive bases for floats (16-bit results stay finite), small exponents for integers.
  check_binary("pow", [](const ts::Tensor& a, const ts::Tensor& b) { return ts::pow(a, b); }, float_dtypes(), -3, 3, 0.1, 4);
  check_binary("pow_int", [](const ts::Tensor& a, const ts::Tensor& b) { return ts::pow(a, b); }, integral_dtypes(), 0, 5);
  check_binary("pow_int_negexp", [](const ts::Tensor& a, const ts::Tensor& b) { return ts::pow(a, b); },
               {ts::kInt8, ts::kInt32, ts::kInt64}, -3, 0, -2, 3);
}

TEST(CudaBinary, DivisionModes) {
  TS_REQUIRE_GPU();
  // Integer divisors stay away from 0 here (division by zero has its own test); both signs.
  const std::vector<ts::DType> signed_types = {ts::kInt8, ts::kInt32, ts::kInt64, ts::kFloat16, ts::kBFloat16,
                                               ts::kFloat32, ts::kFloat64};
  for (auto [lo, hi] : {std::pair{1.0, 6.0}, std::pair{-6.0, -1.0}}) {
    const std::vector<ts::DType> dts = lo > 0 ? numeric() : signed_types;
    check_binary("div_trunc", [](const ts::Tensor& a, const ts::Tensor& b) { return ts::div(a, b, "trunc"); }, dts, lo, hi);
    check_binary("div_floor", [](const ts::Tensor& a, const ts::Tensor& b) { return ts::div(a, b, "floor"); }, dts, lo, hi);
    check_binary("fmod", [](const ts::Tensor& a, const ts::Tensor& b) { return ts::fmod(a, b); }, dts, lo, hi);
    check_binary("remainder", [](const ts::Tensor& a, const ts::Tensor& b) { return ts::remainder(a, b); }, dts, lo, hi);
  }
  // Floats divide by zero without an error (inf, nan), as on the CPU.
  for (ts::DType dt : float_dtypes()) {
    ts::Tensor a = ts::tensor({1.0, -1.0, 0.0, 5.5}).to(dt), z = ts::zeros({4}, dt);
    for (const char* mode : {"", "trunc", "floor"})
      EXPECT_TRUE(same_as_cpu(ts::div(a.to("cuda"), z.to("cuda"), mode), ts::div(a, z, mode))) << mode;
    EXPECT_TRUE(same_as_cpu(ts::fmod(a.to("cuda"), z.to("cuda")), ts::fmod(a, z)));
    EXPECT_TRUE(same_as_cpu(ts::remainder(a.to("cuda"), z.to("cuda")), ts::remainder(a, z)));
  }
  // INT_MIN / -1 and friends wrap instead of trapping.
  ts::Tensor m = ts::tensor(std::vector<int64_t>{std::numeric_limits<int64_t>::min(), 7, -7}, {3});
  ts::Tensor n1 = ts::full({3}, -1, ts::kInt64);
  for (const char* mode : {"trunc", "floor"})
    EXPECT_TRUE(same_as_cpu(ts::div(m.to("cuda"), n1.to("cuda"), mode), ts::div(m, n1, mode))) << mode;
  EXPECT_TRUE(same_as_cpu(ts::remainder(m.to("cuda"), n1.to("cuda")), ts::remainder(m, n1)));
}

TEST(CudaBinary, IntegerDivisionByZeroRaises) {
  TS_REQUIRE_GPU();
  for (ts::DType dt : integral_dtypes()) {
    ts::Tensor a = ts::full({1000}, 7, {dt, "cuda"});
    ts::Tensor b = ts::full({1000}, 2, {dt, "cuda"});
    b.narrow(0, 999, 1).fill_(0);  // one zero, in the last element
    EXPECT_THROW(ts::div(a, b, "trunc"), ts::ValueError) << ts::dtype_name(dt);
    EXPECT_THROW(ts::div(a, b, "floor"), ts::ValueError) << ts::dtype_name(dt);
    EXPECT_THROW(ts::fmod(a, b), ts::ValueError) << ts::dtype_name(dt);
    EXPECT_THROW(ts::remainder(a, b), ts::ValueError) << ts::dtype_name(dt);
    EXPECT_THROW(ts::remainder(a, 0), ts::ValueError) << ts::dtype_name(dt);
    // The flag does not outlive the op: the next division is fine.
    EXPECT_EQ(ts::div(a, 2, "floor").cpu().tolist<int64_t>(), std::vector<int64_t>(1000, 3));
    // True division promotes to float: no error.
    EXPECT_NO_THROW(ts::div(a, b));
  }
}

TEST(CudaBinary, ScalarOperandsAndInPlace) {
  TS_REQUIRE_GPU();
  for (ts::DType dt : numeric()) {
    const ts::Tensor a = td({33, 517}, dt, 51);
    for (const GpuLayout& l : gpu_layouts()) {
      SCOPED_TRACE(::testing::Message() << ts::dtype_name(dt) << " " << l.name);
      const ts::Tensor g = l.make(a);
      EXPECT_TRUE(same_as_cpu(ts::add(g, 2), ts::add(a, 2)));
      EXPECT_TRUE(same_as_cpu(ts::add(g, 2.5), ts::add(a, 2.5)));
      EXPECT_TRUE(same_as_cpu(ts::mul(g, 3), ts::mul(a, 3)));
      EXPECT_TRUE(same_as_cpu(ts::sub(g, 1), ts::sub(a, 1)));
      EXPECT_TRUE(same_as_cpu(ts::div(g, 4), ts::div(a, 4)));
      EXPECT_TRUE(same_as_cpu(ts::pow(g, 2), ts::pow(a, 2)));
      EXPECT_TRUE(same_as_cpu(ts::lt(g, 1), ts::lt(a, 1)));
      ts::Tensor gi = l.make(a), ci = a.clone();
      gi.add_(g, 2);
      ci.add_(a, 2);
      EXPECT_TRUE(same_as_cpu(gi, ci));
      gi.mul_(3);
      ci.mul_(3);
      EXPECT_TRUE(same_as_cpu(gi, ci));
    }
  }
}

// Note [CPU scalars]: a 0-dim CPU tensor meets GPU tensors as in PyTorch; the op runs on the GPU and
// gradients reach the CPU scalar on the CPU. Any other CPU tensor is a device mismatch.
TEST(CudaBinary, CpuScalarTensorsMeetGpuTensors) {
  TS_REQUIRE_GPU();
  for (ts::DType dt : {ts::kFloat32, ts::kBFloat16, ts::kInt64}) {
    SCOPED_TRACE(ts::dtype_name(dt));
    const ts::Tensor a = td({7, 130}, dt, 61);
    const ts::Tensor s = td({}, dt, 62);
    for (const GpuLayout& l : gpu_layouts()) {
      SCOPED_TRACE(l.name);
      const ts::Tensor g = l.make(a);
      const ts::Tensor r = ts::mul(g, s);
      EXPECT_TRUE(r.is_cuda());
      EXPECT_TRUE(same_as_cpu(r, ts::mul(a, s)));
      EXPECT_TRUE(same_as_cpu(ts::sub(s, g), ts::sub(s, a)));
      EXPECT_TRUE(same_as_cpu(ts::maximum(g, s), ts::maximum(a, s)));
    }
  }
  // The gradient of the CPU scalar is summed on the GPU and arrives on the CPU.
  const ts::Tensor x = td({5, 9}, ts::kFloat32, 63).cuda().requires_grad_();
  const ts::Tensor w = ts::tensor({1.5}).reshape({}).requires_grad_();
  (x * w).sum().backward();
  ASSERT_TRUE(w.grad().defined());
  EXPECT_TRUE(w.grad().device().is_cpu());
  EXPECT_NEAR(w.grad().item().to_double(), x.detach().sum().item().to_double(), 1e-4);
  EXPECT_TRUE(all_close(x.grad().cpu(), ts::full({5, 9}, 1.5)));
  // A 1-element tensor that is not 0-dim, and out= on another device, are still mismatches.
  EXPECT_THROW(ts::add(x.detach(), ts::ones({1})), ts::DeviceError);
  ts::Tensor out = ts::empty({5, 9});
  EXPECT_THROW(ts::add_out(x.detach(), ts::ones({}), out), ts::DeviceError);
}

// where takes 0-dim CPU tensors as well, as condition or branch; pow's gradient with a CPU scalar
// exponent goes through it.
TEST(CudaBinary, WhereTakesCpuScalarTensors) {
  TS_REQUIRE_GPU();
  const ts::Tensor a = td({6, 33}, ts::kFloat32, 64), b = td({6, 33}, ts::kFloat32, 65);
  const ts::Tensor cond = ts::gt(a, b), s = ts::tensor({2.5}).reshape({}), yes = ts::tensor({1.0}).reshape({}).to(ts::kBool);
  EXPECT_TRUE(same_as_cpu(ts::where(cond.cuda(), a.cuda(), s), ts::where(cond, a, s)));
  EXPECT_TRUE(same_as_cpu(ts::where(cond.cuda(), s, b.cuda()), ts::where(cond, s, b)));
  EXPECT_TRUE(same_as_cpu(ts::where(yes, a.cuda(), b.cuda()), ts::where(yes, a, b)));
  EXPECT_THROW(ts::where(cond, a.cuda(), b.cuda()), ts::DeviceError);  // a CPU condition of (6, 33)
  const ts::Tensor x = ts::abs(a).add(0.5).cuda().requires_grad_();
  const ts::Tensor e = ts::tensor({3.0}).reshape({});
  ts::pow(x, e).sum().backward();
  ASSERT_TRUE(x.grad().defined());
  EXPECT_TRUE(all_close(x.grad().cpu(), ts::pow(x.detach().cpu(), 2.0) * 3.0, {1e-5, 1e-5}));
}

TEST(CudaBinary, ComparisonsAndLogical) {
  TS_REQUIRE_GPU();
  const std::vector<std::pair<const char*, BinFn>> ops = {
      {"eq", [](const ts::Tensor& a, const ts::Tensor& b) { return ts::eq(a, b); }},
      {"ne", [](const ts::Tensor& a, const ts::Tensor& b) { return ts::ne(a, b); }},
      {"lt", [](const ts::Tensor& a, const ts::Tensor& b) { return ts::lt(a, b); }},
      {"le", [](const ts::Tensor& a, const ts::Tensor& b) { return ts::le(a, b); }},
      {"gt", [](const ts::Tensor& a, const ts::Tensor& b) { return ts::gt(a, b); }},
      {"ge", [](const ts::Tensor& a, const ts::Tensor& b) { return ts::ge(a, b); }},
      {"logical_and", [](const ts::Tensor& a, const ts::Tensor& b) { return ts::logical_and(a, b); }},
      {"logical_or", [](const ts::Tensor& a, const ts::Tensor& b) { return ts::logical_or(a, b); }},
      {"logical_xor", [](const ts::Tensor& a, const ts::Tensor& b) { return ts::logical_xor(a, b); }},
  };
  for (const auto& [name, op] : ops) check_binary(name, op, all_dtypes(), -2, 2, -2, 2);
}

TEST(CudaBinary, BitwiseAndShifts) {
  TS_REQUIRE_GPU();
  check_binary("bitwise_and", [](const ts::Tensor& a, const ts::Tensor& b) { return ts::bitwise_and(a, b); }, ints_and_bool());
  check_binary("bitwise_or", [](const ts::Tensor& a, const ts::Tensor& b) { return ts::bitwise_or(a, b); }, ints_and_bool());
  check_binary("bitwise_xor", [](const ts::Tensor& a, const ts::Tensor& b) { return ts::bitwise_xor(a, b); }, ints_and_bool());
  // Shift counts past the width and negative ones (0, or the sign fill).
  check_binary("left_shift", [](const ts::Tensor& a, const ts::Tensor& b) { return ts::bitwise_left_shift(a, b); },
               integral_dtypes(), -2, 70);
  check_binary("right_shift", [](const ts::Tensor& a, const ts::Tensor& b) { return ts::bitwise_right_shift(a, b); },
               integral_dtypes(), -2, 70);
}

TEST(CudaTernary, WhereLerpAddcClamp) {
  TS_REQUIRE_GPU();
  const ts::Shape s = {33, 517};
  for (ts::DType dt : all_dtypes()) {
    const ts::Tensor c = td(s, ts::kBool, 61), a = td(s, dt, 62), b = td({517}, dt, 63);
    for (const GpuLayout& l : gpu_layouts()) {
      SCOPED_TRACE(::testing::Message() << ts::dtype_name(dt) << " " << l.name);
      EXPECT_TRUE(same_as_cpu(ts::where(l.make(c), l.make(a), l.make(b)), ts::where(c, a, b)));
      EXPECT_TRUE(same_as_cpu(ts::where(l.make(c), l.make(a), 2), ts::where(c, a, 2)));
      EXPECT_TRUE(same_as_cpu(ts::where(l.make(c).narrow(0, 0, 1).squeeze(0), 1, l.make(b)),
                              ts::where(c.narrow(0, 0, 1).squeeze(0), 1, b)));
    }
  }
  for (ts::DType dt : float_dtypes()) {
    const ts::Tensor x = td(s, dt, 64), y = td(s, dt, 65), w = test_data(s, dt, 66, 0, 1).reshape(s);
    const ts::Tensor wu = ts::div(ts::add(w, 1.5), 3).to(dt);  // weights on both sides of 0.5
    for (const GpuLayout& l : gpu_layouts()) {
      SCOPED_TRACE(::testing::Message() << ts::dtype_name(dt) << " " << l.name);
      EXPECT_TRUE(same_as_cpu(ts::lerp(l.make(x), l.make(y), 0.3), ts::lerp(x, y, 0.3)));
      EXPECT_TRUE(same_as_cpu(ts::lerp(l.make(x), l.make(y), 0.8), ts::lerp(x, y, 0.8)));
      EXPECT_TRUE(same_as_cpu(ts::lerp(l.make(x), l.make(y), l.make(wu)), ts::lerp(x, y, wu)));
      EXPECT_TRUE(same_as_cpu(ts::addcdiv(l.make(x), l.make(y), l.make(wu), 0.5), ts::addcdiv(x, y, wu, 0.5)));
    }
  }
  for (ts::DType dt : numeric()) {
    const ts::Tensor x = td(s, dt, 67), y = td(s, dt, 68), z = td({517}, dt, 69);
    const ts::Scalar v = ts::is_floating_point(dt) ? ts::Scalar(0.5) : ts::Scalar(2);
    for (const GpuLayout& l : gpu_layouts()) {
      SCOPED_TRACE(::testing::Message() << ts::dtype_name(dt) << " " << l.name);
      EXPECT_TRUE(same_as_cpu(ts::addcmul(l.make(x), l.make(y), l.make(z), v), ts::addcmul(x, y, z, v)));
      EXPECT_TRUE(same_as_cpu(ts::clamp(l.make(x), ts::Scalar(-2), ts::Scalar(3)), ts::clamp(x, ts::Scalar(-2), ts::Scalar(3))));
      EXPECT_TRUE(same_as_cpu(ts::clamp(l.make(x), ts::Scalar(1)), ts::clamp(x, ts::Scalar(1))));
      EXPECT_TRUE(same_as_cpu(ts::clamp(l.make(x), std::nullopt, ts::Scalar(1)), ts::clamp(x, std::nullopt, ts::Scalar(1))));
      const std::optional<ts::Tensor> lo = l.make(y), hi = l.make(z).add(3);
      EXPECT_TRUE(same_as_cpu(ts::clamp(l.make(x), lo, hi), ts::clamp(x, std::optional<ts::Tensor>(y), std::optional<ts::Tensor>(z.add(3)))));
    }
  }
  // NaN propagation in clamp and lerp.
  for (ts::DType dt : float_dtypes()) {
    const ts::Tensor x = special_values().to(dt), y = x.flip({0});
    EXPECT_TRUE(same_as_cpu(ts::clamp(x.to("cuda"), ts::Scalar(-1), ts::Scalar(1)), ts::clamp(x, ts::Scalar(-1), ts::Scalar(1))));
    EXPECT_TRUE(same_as_cpu(ts::lerp(x.to("cuda"), y.to("cuda"), 0.25), ts::lerp(x, y, 0.25)));
  }
}

TEST(CudaTernary, AllcloseAndEqual) {
  TS_REQUIRE_GPU();
  for (ts::DType dt : all_dtypes()) {
    const ts::Tensor a = td({33, 517}, dt, 71);
    for (const GpuLayout& l : gpu_layouts()) {
      SCOPED_TRACE(::testing::Message() << ts::dtype_name(dt) << " " << l.name);
      const ts::Tensor g = l.make(a);
      EXPECT_TRUE(ts::allclose(g, a.to("cuda")));
      EXPECT_TRUE(ts::equal(g, a.to("cuda")));
      ts::Tensor h = a.clone();
      h.select(0, 32).select(0, 516).fill_(dt == ts::kBool ? ts::Scalar(false) : ts::Scalar(100));
      h.select(0, 32).select(0, 515).fill_(dt == ts::kBool ? ts::Scalar(true) : ts::Scalar(100));
      EXPECT_EQ(ts::allclose(g, l.make(h)), ts::allclose(a, h));
      EXPECT_EQ(ts::equal(g, l.make(h)), ts::equal(a, h));
    }
  }
  const ts::Tensor x = special_values(), y = special_values().add(1e-9);
  for (bool equal_nan : {false, true}) {
    EXPECT_EQ(ts::allclose(x.to("cuda"), y.to("cuda"), 1e-5, 1e-8, equal_nan), ts::allclose(x, y, 1e-5, 1e-8, equal_nan));
    EXPECT_EQ(ts::allclose(x.to("cuda"), x.to("cuda"), 1e-5, 1e-8, equal_nan), ts::allclose(x, x, 1e-5, 1e-8, equal_nan));
  }
  // Broadcast: a row against a matrix of copies of it.
  const ts::Tensor r = td({517}, ts::kFloat32, 72);
  EXPECT_TRUE(ts::allclose(r.to("cuda"), r.expand({33, 517}).contiguous().to("cuda")));
  EXPECT_TRUE(ts::allclose(ts::zeros({0, 3}, {ts::kFloat32, "cuda"}), ts::zeros({0, 3}, {ts::kFloat32, "cuda"})));
}

// ---- past 2^31 elements ------------------------------------------------------------------------------------
// uint8 keeps each tensor near 2 GiB. The output is filled with 0 first (sums here are >= 3), so an
// element the kernel skips, or writes at a wrapped 32-bit offset, shows at the sampled positions.
namespace {

int64_t at(const ts::Tensor& t, std::initializer_list<int64_t> idx) {
  ts::Tensor v = t;
  for (int64_t i : idx) v = v.select(0, i);
  return v.item<int64_t>();
}

}  // namespace

TEST(CudaLargeTensor, AddContiguousPast2Pow31Elements) {
  TS_REQUIRE_GPU();
  const int64_t n = (int64_t(1) << 31) + 5;
  ts::Tensor a = ts::full({n}, 3, {ts::kUInt8, "cuda"});
  ts::Tensor b = ts::full({n}, 4, {ts::kUInt8, "cuda"});
  const std::vector<int64_t> marks = {0, 1, 4095, (int64_t(1) << 31) - 1, int64_t(1) << 31, n - 3, n - 1};
  for (size_t k = 0; k < marks.size(); ++k) {
    a.narrow(0, marks[k], 1).fill_(static_cast<int64_t>(10 + k));
    b.narrow(0, marks[k], 1).fill_(static_cast<int64_t>(20 + 2 * k));
  }
  ts::Tensor out = ts::zeros({n}, {ts::kUInt8, "cuda"});
  ts::add_out(a, b, out);
  for (size_t k = 0; k < marks.size(); ++k) EXPECT_EQ(at(out, {marks[k]}), 30 + 3 * int64_t(k)) << "at " << marks[k];
  for (int64_t i : {int64_t(2), int64_t(1) << 30, (int64_t(1) << 31) + 1, n - 2}) EXPECT_EQ(at(out, {i}), 7) << "at " << i;
  // The same through a broadcast 0-dim operand and in place.
  a.add_(ts::full({}, 1, {ts::kUInt8, "cuda"}));
  EXPECT_EQ(at(a, {n - 1}), 10 + 6 + 1);
  EXPECT_EQ(at(a, {n - 3}), 10 + 5 + 1);  // n - 3 = 2^31 + 2 is marked (k = 5)
  EXPECT_EQ(at(a, {(int64_t(1) << 31) + 1}), 3 + 1);
}

TEST(CudaLargeTensor, AddStridedPast2Pow31Elements) {
  TS_REQUIRE_GPU();
  // (C, R) stored, read transposed as (R, C): a strided operand over 46341^2 = 2^31 + 4633 elements,
  // so the iterator takes the 64-bit offsets.
  const int64_t R = 46341, C = 46341;
  ts::Tensor A = ts::full({C, R}, 1, {ts::kUInt8, "cuda"});
  const std::vector<std::pair<int64_t, int64_t>> marks = {{0, 0}, {0, 1}, {1, 0}, {C - 1, R - 1}, {C - 1, 0}, {0, R - 1}, {46340, 46339}, {12345, 40000}};
  for (size_t k = 0; k < marks.size(); ++k) A.select(0, marks[k].first).select(0, marks[k].second).fill_(static_cast<int64_t>(50 + k));
  ts::Tensor b = ts::full({R, C}, 2, {ts::kUInt8, "cuda"});
  ts::Tensor out = ts::zeros({R, C}, {ts::kUInt8, "cuda"});
  ts::add_out(A.t(), b, out);  // out[r][c] = A[c][r] + 2
  for (size_t k = 0; k < marks.size(); ++k) {
    const auto [c, r] = marks[k];
    EXPECT_EQ(at(out, {r, c}), 52 + int64_t(k)) << "at (" << r << ", " << c << ")";
  }
  for (auto [r, c] : {std::pair<int64_t, int64_t>{R - 1, C - 1}, {R - 1, C - 2}, {46340, 100}, {100, 46340}, {23170, 23171}}) {
    bool marked = false;
    for (auto [mc, mr] : marks) marked = marked || (mc == c && mr == r);
    if (!marked) {
      EXPECT_EQ(at(out, {r, c}), 3) << "at (" << r << ", " << c << ")";
    }
  }
}
