// Binary ops: broadcasting, PyTorch's type promotion and each op's dtype rules, out= handling.
//
// A Scalar operand takes part in promotion as a wrapped number (`int32 tensor + 2.5` is float32,
// `float16 tensor + 2.5` stays float16) and is then made a 0-dim tensor of the compute dtype, which
// the iterator broadcasts with stride 0 (the kernels' scalar fast path). Both inputs are cast to the
// compute dtype before the kernel; predicates (comparisons, logical ops) write bool.
//
// Autograd (Note [Autograd stage]): the arithmetic ops (add through atan2) record themselves on their
// original inputs, a Scalar operand recorded as the 0-dim tensor the kernel saw (it takes no gradient,
// but a derivative can use it like a tensor); the casts made for the kernel are not recorded. Alpha
// and div's rounding mode go into the attrs; every div records as "div". Predicates and bitwise ops
// record nothing. The out= forms of the recorded ops refuse arguments that require grad while grad
// mode is on, as PyTorch does.
#include "ops/autocast_hook.h"
#include "ops/autograd_hook.h"
#include "ops/elementwise_kernel.h"
#include "ops/op_scope.h"
#include "ops/op_utils.h"
#include "tensor/dispatch_dtype.h"
#include "tensor/type_promotion.h"
#include "tessera/autograd.h"

namespace tessera {
namespace {

// One operand: a tensor, or a number (promoted as a wrapped number).
struct Operand {
  const Tensor* t = nullptr;
  const Scalar* s = nullptr;
  DType dtype() const { return t ? t->dtype() : s->dtype(); }
};

DType common_dtype(const Operand& a, const Operand& b) {
  ResultType r;
  for (const Operand* o : {&a, &b}) {
    if (o->t) r.add(*o->t);
    else r.add(*o->s);
  }
  return r.result();
}

// Validates the dtypes for `op` and returns the compute dtype (the output's too, unless a predicate).
DType binary_compute_dtype(const char* name, BinaryOp op, const Operand& a, const Operand& b, DType common,
                           const BinaryParams& p) {
  switch (op) {
    case BinaryOp::Add:
    case BinaryOp::Sub:
      if (op == BinaryOp::Sub) {
        TS_CHECK(a.dtype() != kBool && b.dtype() != kBool, DTypeError, name,
                 ": subtraction, the `-` operator, with a bool tensor is not supported. If you are trying to "
                 "invert a mask, use the `~` or `logical_not()` operator instead.");
      }
      TS_CHECK(!(is_integral(common, true) && p.alpha.is_floating_point()), DTypeError, name,
               ": for integral input tensors, argument alpha must not be a floating point number (got ", p.alpha,
               ")");
      TS_CHECK(!(common != kBool && p.alpha.is_bool()), DTypeError, name,
               ": boolean alpha only supported for boolean results");
      return common;
    case BinaryOp::Mul:
    case BinaryOp::Maximum:
    case BinaryOp::Minimum:
      return common;
    case BinaryOp::Div:
    case BinaryOp::Atan2:
      return is_floating_point(common) ? common : kFloat32;  // integer true division gives float32
    case BinaryOp::LogAddExp:  // floating only, as PyTorch's logaddexp
      if (!is_floating_point(common)) throw_unsupported_dtype(name, common);
      return common;
    case BinaryOp::DivTrunc:
    case BinaryOp::DivFloor:
    case BinaryOp::Pow:
    case BinaryOp::Fmod:
    case BinaryOp::Remainder:
      if (common == kBool) throw_unsupported_dtype(name, common);
      return common;
    case BinaryOp::BitwiseAnd:
    case BinaryOp::BitwiseOr:
    case BinaryOp::BitwiseXor:
      if (is_floating_point(common)) throw_unsupported_dtype(name, common);
      return common;
    case BinaryOp::LeftShift:
    case BinaryOp::RightShift:
      if (!is_integral(common, false)) throw_unsupported_dtype(name, common);
      return common;
    case BinaryOp::ThresholdBackward:
      if (common == kBool) throw_unsupported_dtype(name, common);
      return common;
    default:  // predicates compare in the common dtype
      return common;
  }
}

// Note [CPU scalars]: as in PyTorch, a 0-dim CPU tensor may meet tensors of another device in a
// binary op; the op runs on the other operands' device. A number operand of an op on the GPU becomes
// such a CPU scalar, whose value the GPU kernel takes as a kernel argument (kernels/cuda/elementwise.cuh):
// no fill kernel, no allocation on the device, no copy before the op.
bool is_cpu_scalar(const Tensor* t) { return t && t->defined() && t->device().is_cpu() && t->dim() == 0; }

// The device the op runs on: that of the operands which are not CPU scalars (checked to agree, with
// out), else the CPU.
Device op_device(const char* name, const Operand& a, const Operand& b, const Tensor* out) {
  const Tensor* ta = is_cpu_scalar(a.t) && b.t && !b.t->device().is_cpu() ? nullptr : a.t;
  const Tensor* tb = is_cpu_scalar(b.t) && a.t && !a.t->device().is_cpu() ? nullptr : b.t;
  check_same_device(name, {ta, tb, out});
  if (ta) return ta->device();
  if (tb) return tb->device();
  return a.t ? a.t->device() : b.t->device();
}

Tensor as_tensor(const Operand& o, DType dtype, Device device) {
  if (o.t) return cast_to(*o.t, dtype);
  return scalar_tensor(*o.s, TensorOptions(dtype, device.is_cuda() ? kCPU : device));
}

// add .. atan2: the ops with a derivative.
bool is_differentiable(BinaryOp op) { return op < BinaryOp::BitwiseAnd; }

OpAttrs binary_attrs(BinaryOp op, const BinaryParams& p) {
  OpAttrs attrs;
  if (op == BinaryOp::Add || op == BinaryOp::Sub) attrs.scalars = {p.alpha};
  if (op == BinaryOp::DivTrunc) attrs.str = "trunc";
  if (op == BinaryOp::DivFloor) attrs.str = "floor";
  return attrs;
}

Tensor binary_impl(OpId id, BinaryOp op, const Operand& a, const Operand& b, Tensor* out,
                   const BinaryParams& p = {}) {
  const char* name = op_name(id);
  // Note [Autocast stage]: the policy table decides by name (pow, atan2; never an _out form).
  if (autocast_pending() && out == nullptr) [[unlikely]] {
    if (AutocastArgs c(id, {a.t, b.t}); c) {
      return binary_impl(id, op, Operand{a.t ? &c[0] : nullptr, a.s}, Operand{b.t ? &c[1] : nullptr, b.s},
                         out, p);
    }
  }
  const Tensor* first = a.t ? a.t : b.t;
  OpScope scope(id, {first, b.t ? b.t : first});
  if (a.t) check_defined(name, *a.t, "input");
  if (b.t) check_defined(name, *b.t, "other");
  if (out && is_differentiable(op)) {
    TS_CHECK(!grad_recording({a.t, b.t, out}), ValueError, name, ": functions with out=... arguments don't support "
             "automatic differentiation, but one of the arguments requires grad.");
  }
  const Device device = op_device(name, a, b, out);  // Note [CPU scalars]
  const Shape shape = broadcast_shapes(a.t ? a.t->sizes() : Shape{}, b.t ? b.t->sizes() : Shape{}, name);
  const DType common = common_dtype(a, b);
  const DType compute = binary_compute_dtype(name, op, a, b, common, p);
  const DType result = is_predicate(op) ? kBool : compute;
  if (op == BinaryOp::Pow && is_integral(compute, false) && b.s && b.s->is_integral()) {
    TS_CHECK(b.s->to_int() >= 0, ValueError, name, ": integers to negative integer powers are not allowed (got ",
             *b.s, ")");
  }
  Tensor target;
  if (out) {
    prepare_out(name, *out, shape, result, device);
    check_writable(name, *out);
    target = out->dtype() == result ? *out : make_empty(shape, result, device);
  } else {
    target = make_empty_like_inputs(shape, result, device, {a.t, b.t});  // Note [Output layout]
  }
  Tensor ta, tb;
  {
    NoGradGuard no_record;  // the op records itself on its own inputs, not on these casts
    ta = as_tensor(a, compute, device);
    tb = as_tensor(b, compute, device);
  }
  binary_kernel(device, target, ta, tb, op, p);
  if (out) {
    if (target.is_same(*out)) out->impl()->bump_version();
    else write_out(*out, target);
    return *out;
  }
  if ((is_differentiable(op) || capturing()) && should_record({a.t, b.t})) {
    const OpId recorded = op == BinaryOp::DivTrunc || op == BinaryOp::DivFloor ? OpId::div : id;
    record_op(recorded, {a.t ? *a.t : ta, b.t ? *b.t : tb}, {target}, binary_attrs(op, p));
  }
  return target;
}

Tensor bin(OpId id, BinaryOp op, const Tensor& a, const Tensor& b, const BinaryParams& p = {}) {
  return binary_impl(id, op, Operand{&a, nullptr}, Operand{&b, nullptr}, nullptr, p);
}
Tensor bin(OpId id, BinaryOp op, const Tensor& a, const Scalar& b, const BinaryParams& p = {}) {
  return binary_impl(id, op, Operand{&a, nullptr}, Operand{nullptr, &b}, nullptr, p);
}
Tensor& bin_out(OpId id, BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out,
                const BinaryParams& p = {}) {
  binary_impl(id, op, Operand{&a, nullptr}, Operand{&b, nullptr}, &out, p);
  return out;
}

BinaryOp div_op(const char* name, const std::string& mode) {
  if (mode.empty()) return BinaryOp::Div;
  if (mode == "trunc") return BinaryOp::DivTrunc;
  if (mode == "floor") return BinaryOp::DivFloor;
  TS_THROW(ValueError, name, ": expected rounding_mode to be one of '', 'trunc' or 'floor' but found '", mode, "'");
}

BinaryParams with_alpha(const Scalar& alpha) {
  BinaryParams p;
  p.alpha = alpha;
  return p;
}

}  // namespace

Tensor add(const Tensor& a, const Tensor& b, const Scalar& alpha) { return bin(OpId::add, BinaryOp::Add, a, b, with_alpha(alpha)); }
Tensor add(const Tensor& a, const Scalar& b, const Scalar& alpha) { return bin(OpId::add, BinaryOp::Add, a, b, with_alpha(alpha)); }
Tensor& add_out(const Tensor& a, const Tensor& b, Tensor& out, const Scalar& alpha) {
  return bin_out(OpId::add_out, BinaryOp::Add, a, b, out, with_alpha(alpha));
}
Tensor sub(const Tensor& a, const Tensor& b, const Scalar& alpha) { return bin(OpId::sub, BinaryOp::Sub, a, b, with_alpha(alpha)); }
Tensor sub(const Tensor& a, const Scalar& b, const Scalar& alpha) { return bin(OpId::sub, BinaryOp::Sub, a, b, with_alpha(alpha)); }
Tensor& sub_out(const Tensor& a, const Tensor& b, Tensor& out, const Scalar& alpha) {
  return bin_out(OpId::sub_out, BinaryOp::Sub, a, b, out, with_alpha(alpha));
}
Tensor div(const Tensor& a, const Tensor& b, const std::string& mode) { return bin(OpId::div, div_op("div", mode), a, b); }
Tensor div(const Tensor& a, const Scalar& b, const std::string& mode) { return bin(OpId::div, div_op("div", mode), a, b); }
Tensor& div_out(const Tensor& a, const Tensor& b, Tensor& out, const std::string& mode) {
  return bin_out(OpId::div_out, div_op("div_out", mode), a, b, out);
}

#define TS_DEFINE_BINARY(name, OP)                                                                        \
  Tensor name(const Tensor& a, const Tensor& b) { return bin(OpId::name, BinaryOp::OP, a, b); }                \
  Tensor name(const Tensor& a, const Scalar& b) { return bin(OpId::name, BinaryOp::OP, a, b); }                \
  Tensor& name##_out(const Tensor& a, const Tensor& b, Tensor& out) {                                     \
    return bin_out(OpId::name##_out, BinaryOp::OP, a, b, out);                                                \
  }
TS_DEFINE_BINARY(mul, Mul) TS_DEFINE_BINARY(pow, Pow) TS_DEFINE_BINARY(maximum, Maximum)
TS_DEFINE_BINARY(minimum, Minimum) TS_DEFINE_BINARY(fmod, Fmod) TS_DEFINE_BINARY(remainder, Remainder)
TS_DEFINE_BINARY(atan2, Atan2) TS_DEFINE_BINARY(eq, Eq) TS_DEFINE_BINARY(ne, Ne) TS_DEFINE_BINARY(lt, Lt)
TS_DEFINE_BINARY(le, Le) TS_DEFINE_BINARY(gt, Gt) TS_DEFINE_BINARY(ge, Ge)
TS_DEFINE_BINARY(logical_and, LogicalAnd) TS_DEFINE_BINARY(logical_or, LogicalOr)
TS_DEFINE_BINARY(logical_xor, LogicalXor) TS_DEFINE_BINARY(bitwise_and, BitwiseAnd)
TS_DEFINE_BINARY(bitwise_or, BitwiseOr) TS_DEFINE_BINARY(bitwise_xor, BitwiseXor)
TS_DEFINE_BINARY(bitwise_left_shift, LeftShift) TS_DEFINE_BINARY(bitwise_right_shift, RightShift)
#undef TS_DEFINE_BINARY

Tensor pow(const Scalar& base, const Tensor& exponent) {
  return binary_impl(OpId::pow, BinaryOp::Pow, Operand{nullptr, &base}, Operand{&exponent, nullptr}, nullptr);
}

Tensor logaddexp(const Tensor& a, const Tensor& b) { return bin(OpId::logaddexp, BinaryOp::LogAddExp, a, b); }

// Not among the binary ops that record themselves (is_differentiable): its derivative takes the
// threshold, which goes into the attrs here.
Tensor threshold_backward(const Tensor& grad_output, const Tensor& self, const Scalar& threshold) {
  const OpId id = OpId::threshold_backward;
  const char* op = op_name(id);
  const DType d = result_type(grad_output, self);
  BinaryParams p;
  p.threshold = threshold.to_double();
  if (is_integral(d, false)) {  // the kernels convert the threshold to d: refuse what would wrap
    const auto [lo, hi] = exact_int_range(d);
    TS_CHECK(p.threshold >= static_cast<double>(lo) && p.threshold <= static_cast<double>(hi), ValueError, op,
             ": value cannot be converted to type ", dtype_name(d), " without overflow: ", threshold);
  }
  Tensor out = bin(id, BinaryOp::ThresholdBackward, grad_output, self, p);
  if (should_record({&grad_output, &self})) record_op(id, {grad_output, self}, {out}, OpAttrs{.scalars = {threshold}});
  return out;
}

}  // namespace tessera
