// Unary ops: meta functions (dtype rules, output allocation, out=) and the public functions.
//
// Dtype rules follow PyTorch: the float functions (exp, sin, sqrt, sigmoid, ...) promote integer and
// bool inputs to float32; abs/neg/relu/floor/ceil/round/trunc keep integer dtypes and refuse bool;
// gelu/silu/softplus take floats only; predicates return bool. The input is cast to the compute dtype
// before the kernel runs, so the kernel sees one dtype. Also defines the slots of the family.
//
// Autograd (Note [Autograd stage]): the out-of-place functions record themselves under their own name
// (gelu's approximation and softplus's beta/threshold go into the attrs); predicates produce bool and
// record nothing. The out= forms of the differentiable ops refuse inputs or outputs that require grad
// while grad mode is on, as PyTorch does; in-place methods record through copy_.
#include <cmath>
#include <limits>

#include "ops/autocast_hook.h"
#include "ops/autograd_hook.h"
#include "ops/elementwise_kernel.h"
#include "ops/op_scope.h"
#include "ops/op_utils.h"
#include "tensor/dispatch_dtype.h"

namespace tessera {

KernelSlot<UnaryKernelFn> unary_kernel("unary");
KernelSlot<BinaryKernelFn> binary_kernel("binary");
KernelSlot<TernaryKernelFn> ternary_kernel("ternary");
KernelSlot<SoftmaxKernelFn> softmax_kernel("softmax");
KernelSlot<AllCloseKernelFn> allclose_kernel("allclose");

namespace {

enum class Kind { FloatFn, FloatOnly, NoBool, Any, IntegralAndBool, Predicate };

Kind kind_of(UnaryOp op) {
  switch (op) {
    case UnaryOp::Neg: case UnaryOp::Abs: case UnaryOp::Relu: case UnaryOp::Floor: case UnaryOp::Ceil:
    case UnaryOp::Round: case UnaryOp::Trunc:
      return Kind::NoBool;
    case UnaryOp::Gelu: case UnaryOp::GeluTanh: case UnaryOp::Silu: case UnaryOp::Softplus: case UnaryOp::HardSwish:
      return Kind::FloatOnly;
    case UnaryOp::Sign: case UnaryOp::NanToNum:
      return Kind::Any;
    case UnaryOp::BitwiseNot:
      return Kind::IntegralAndBool;
    case UnaryOp::LogicalNot: case UnaryOp::IsNan: case UnaryOp::IsInf: case UnaryOp::IsFinite:
      return Kind::Predicate;
    default:
      return Kind::FloatFn;
  }
}

// The dtype the kernel computes in (and writes, except for predicates, which write bool).
DType unary_compute_dtype(const char* name, UnaryOp op, DType in) {
  switch (kind_of(op)) {
    case Kind::FloatFn: return is_floating_point(in) ? in : kFloat32;
    case Kind::FloatOnly:
      if (!is_floating_point(in)) throw_unsupported_dtype(name, in);
      return in;
    case Kind::NoBool:
      if (in == kBool) {
        TS_CHECK(op != UnaryOp::Neg, DTypeError, name,
                 ": negation, the `-` operator, on a bool tensor is not supported. If you are trying to invert "
                 "a mask, use the `~` or `logical_not()` operator instead.");
        throw_unsupported_dtype(name, in);
      }
      return in;
    case Kind::IntegralAndBool:
      if (is_floating_point(in)) throw_unsupported_dtype(name, in);
      return in;
    case Kind::Any:
    case Kind::Predicate:
      return in;
  }
  return in;
}

OpAttrs unary_attrs(UnaryOp op, const UnaryParams& p) {
  OpAttrs a;
  if (op == UnaryOp::Gelu) a.str = "none";
  if (op == UnaryOp::GeluTanh) a.str = "tanh";
  if (op == UnaryOp::Softplus) a.scalars = {p.beta, p.threshold};
  return a;
}

Tensor unary_impl(OpId id, UnaryOp op, const Tensor& x, Tensor* out, const UnaryParams& p = {}) {
  const char* name = op_name(id);
  // Note [Autocast stage]: the policy table decides by name (exp, log, rsqrt, ...; never an _out form).
  if (autocast_pending() && out == nullptr) [[unlikely]]
    if (AutocastArgs c(id, {&x}); c) return unary_impl(id, op, c[0], out, p);
  OpScope scope(id, {&x});
  check_defined(name, x, "input");
  if (out && !is_predicate(op)) {
    TS_CHECK(!grad_recording({&x, out}), ValueError, name, ": functions with out=... arguments don't support "
             "automatic differentiation, but one of the arguments requires grad.");
  }
  const DType compute = unary_compute_dtype(name, op, x.dtype());
  const DType result = is_predicate(op) ? kBool : compute;
  Tensor target;
  if (out) {
    check_same_device(name, {&x, out});
    prepare_out(name, *out, x.sizes(), result, x.device());
    check_writable(name, *out);
    // Write straight into out when it has the result dtype; otherwise compute, then convert.
    target = out->dtype() == result ? *out : make_empty(x.sizes(), result, x.device());
  } else {
    target = make_empty_like_inputs(x.sizes(), result, x.device(), {&x});  // Note [Output layout]
  }
  unary_kernel(x.device(), target, cast_to(x, compute), op, p);
  if (out) {
    if (target.is_same(*out)) out->impl()->bump_version();
    else write_out(*out, target);
    return *out;
  }
  if ((!is_predicate(op) || capturing()) && should_record({&x})) record_op(id, {x}, {target}, unary_attrs(op, p));
  return target;
}

}  // namespace

#define TS_DEFINE_UNARY(name, OP)                                                              \
  Tensor name(const Tensor& x) { return unary_impl(OpId::name, UnaryOp::OP, x, nullptr); }          \
  Tensor& name##_out(const Tensor& x, Tensor& out) {                                           \
    unary_impl(OpId::name##_out, UnaryOp::OP, x, &out);                                            \
    return out;                                                                                \
  }
TS_DEFINE_UNARY(neg, Neg) TS_DEFINE_UNARY(abs, Abs) TS_DEFINE_UNARY(exp, Exp) TS_DEFINE_UNARY(exp2, Exp2)
TS_DEFINE_UNARY(log, Log) TS_DEFINE_UNARY(log2, Log2) TS_DEFINE_UNARY(log1p, Log1p) TS_DEFINE_UNARY(expm1, Expm1)
TS_DEFINE_UNARY(sqrt, Sqrt) TS_DEFINE_UNARY(rsqrt, Rsqrt) TS_DEFINE_UNARY(sin, Sin) TS_DEFINE_UNARY(cos, Cos)
TS_DEFINE_UNARY(tan, Tan) TS_DEFINE_UNARY(tanh, Tanh) TS_DEFINE_UNARY(sigmoid, Sigmoid) TS_DEFINE_UNARY(relu, Relu)
TS_DEFINE_UNARY(silu, Silu) TS_DEFINE_UNARY(erf, Erf) TS_DEFINE_UNARY(floor, Floor) TS_DEFINE_UNARY(ceil, Ceil)
TS_DEFINE_UNARY(round, Round) TS_DEFINE_UNARY(trunc, Trunc) TS_DEFINE_UNARY(sign, Sign)
TS_DEFINE_UNARY(reciprocal, Reciprocal) TS_DEFINE_UNARY(logical_not, LogicalNot)
TS_DEFINE_UNARY(bitwise_not, BitwiseNot)
#undef TS_DEFINE_UNARY

Tensor gelu(const Tensor& x, const std::string& approximate) {
  TS_CHECK(approximate == "none" || approximate == "tanh", ValueError,
           "gelu: approximate must be 'none' or 'tanh', got '", approximate, "'");
  return unary_impl(OpId::gelu, approximate == "tanh" ? UnaryOp::GeluTanh : UnaryOp::Gelu, x, nullptr);
}

Tensor softplus(const Tensor& x, double beta, double threshold) {
  UnaryParams p;
  p.beta = beta;
  p.threshold = threshold;
  return unary_impl(OpId::softplus, UnaryOp::Softplus, x, nullptr, p);
}

Tensor hardswish(const Tensor& x) { return unary_impl(OpId::hardswish, UnaryOp::HardSwish, x, nullptr); }

Tensor isnan(const Tensor& x) { return unary_impl(OpId::isnan, UnaryOp::IsNan, x, nullptr); }
Tensor isinf(const Tensor& x) { return unary_impl(OpId::isinf, UnaryOp::IsInf, x, nullptr); }
Tensor isfinite(const Tensor& x) { return unary_impl(OpId::isfinite, UnaryOp::IsFinite, x, nullptr); }

Tensor nan_to_num(const Tensor& x, std::optional<double> nan, std::optional<double> posinf,
                  std::optional<double> neginf) {
  // PyTorch's defaults: nan -> 0, +-inf -> the dtype's largest / lowest finite value.
  UnaryParams p;
  p.nan = nan.value_or(0.0);
  double hi = std::numeric_limits<double>::max();
  if (is_floating_point(x.dtype())) {
    dispatch_floating(x.dtype(), "nan_to_num", [&]<class T>(TypeTag<T>) {
      hi = static_cast<double>(static_cast<acc_t<T>>(std::numeric_limits<T>::max()));
    });
  }
  p.posinf = posinf.value_or(hi);
  p.neginf = neginf.value_or(-hi);
  return unary_impl(OpId::nan_to_num, UnaryOp::NanToNum, x, nullptr, p);
}

}  // namespace tessera
