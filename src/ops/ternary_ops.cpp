// where, clamp, lerp, addcmul, addcdiv, allclose, equal, softmax and log_softmax: meta functions and
// public functions.
//
// Result dtypes follow PyTorch: where/clamp/addcmul/addcdiv promote over all their operands (numbers
// as wrapped numbers); lerp requires one floating dtype for all tensors; softmax computes in the input
// dtype (or `dtype` when given), the 16-bit floats accumulating in float32 inside the kernel.
//
// Autograd (Note [Autograd stage]): where, clamp, lerp, addcmul, addcdiv, softmax and log_softmax
// record themselves on their original inputs (the casts made for the kernel are not recorded). A
// Scalar operand (where's branch, a clamp bound, lerp's weight) is recorded as the 0-dim tensor the
// kernel saw, an absent clamp bound as an undefined tensor, so each op has one derivative; where's
// condition goes into attrs.tensors, addcmul/addcdiv's value into attrs.scalars, softmax's dim into
// attrs.ints. allclose and equal return bools and record nothing.
#include "ops/autocast_hook.h"
#include "ops/autograd_hook.h"
#include "ops/elementwise_kernel.h"
#include "ops/op_scope.h"
#include "ops/capture_check.h"
#include "ops/op_utils.h"
#include "tensor/dispatch_dtype.h"
#include "tensor/type_promotion.h"
#include "tessera/autograd.h"

namespace tessera {
namespace {

Shape broadcast3(const char* name, const Shape& a, const Shape& b, const Shape& c) {
  return broadcast_shapes(broadcast_shapes(a, b, name), c, name);
}

Tensor run_ternary(TernaryOp op, DType dtype, const Shape& shape, const Tensor& a, const Tensor& b,
                   const Tensor& c, const TernaryParams& p) {
  Tensor out = make_empty_like_inputs(shape, dtype, a.device(), {&a, &b, &c});  // Note [Output layout]
  ternary_kernel(a.device(), out, a, b, c, op, p);
  return out;
}

Tensor scalar_as(const Scalar& s, DType d, const Tensor& like) { return scalar_tensor(s, TensorOptions(d, like.device())); }

// Records `op` when an input requires grad; `inputs` may hold undefined tensors (absent operands).
void record_if_needed(OpId id, const std::vector<Tensor>& inputs, const Tensor& out) {
  if (should_record(inputs)) record_op(id, inputs, {out});
}

}  // namespace

// Note [CPU scalars] for where: a 0-dim CPU tensor among tensors of another device acts as a number
// (as in PyTorch): it becomes a 0-dim tensor on that device, filled from its value read on the host
// (no copy, no synchronization). `ops` may hold nulls; returns `t` itself where it stays.
namespace {
bool is_cpu_scalar(const Tensor* t) { return t && t->defined() && t->device().is_cpu() && t->dim() == 0; }

Tensor on_op_device(const Tensor& t, std::initializer_list<const Tensor*> ops) {
  if (!is_cpu_scalar(&t)) return t;
  for (const Tensor* o : ops)
    if (o && o->defined() && !o->device().is_cpu()) return scalar_tensor(t.item(), TensorOptions(t.dtype(), o->device()));
  return t;
}
}  // namespace

// ---- where ----------------------------------------------------------------------------------------
static Tensor where_impl(const Tensor& cond0, const Tensor* a0, const Scalar* as, const Tensor* b0, const Scalar* bs) {
  OpScope scope(OpId::where, {&cond0, a0 ? a0 : &cond0, b0 ? b0 : &cond0});
  check_defined("where", cond0, "condition");
  const Tensor cond = on_op_device(cond0, {a0, b0});
  const Tensor a_dev = a0 ? on_op_device(*a0, {&cond0, b0}) : Tensor();
  const Tensor b_dev = b0 ? on_op_device(*b0, {&cond0, a0}) : Tensor();
  const Tensor* a = a0 ? &a_dev : nullptr;
  const Tensor* b = b0 ? &b_dev : nullptr;
  check_same_device("where", {&cond, a, b});
  TS_CHECK(cond.dtype() == kBool || cond.dtype() == kUInt8, DTypeError,
           "where: expected condition to be a boolean tensor, but got a tensor with dtype ", dtype_name(cond.dtype()));
  ResultType rt;
  if (a) rt.add(*a); else rt.add(*as);
  if (b) rt.add(*b); else rt.add(*bs);
  const DType d = rt.result();
  const Shape shape = broadcast3("where", cond.sizes(), a ? a->sizes() : Shape{}, b ? b->sizes() : Shape{});
  Tensor ta, tb, tc;
  {
    NoGradGuard no_record;  // the op records itself on its own inputs, not on these casts
    ta = a ? cast_to(*a, d) : scalar_as(*as, d, cond);
    tb = b ? cast_to(*b, d) : scalar_as(*bs, d, cond);
    tc = cast_to(cond, kBool);
  }
  Tensor out = run_ternary(TernaryOp::Where, d, shape, tc, ta, tb, {});
  if (should_record({a0, b0})) {
    OpAttrs attrs;
    attrs.tensors = {tc};
    record_op(OpId::where, {a0 ? *a0 : ta, b0 ? *b0 : tb}, {out}, std::move(attrs));
  }
  return out;
}

Tensor where(const Tensor& c, const Tensor& a, const Tensor& b) { return where_impl(c, &a, nullptr, &b, nullptr); }
Tensor where(const Tensor& c, const Tensor& a, const Scalar& b) { return where_impl(c, &a, nullptr, nullptr, &b); }
Tensor where(const Tensor& c, const Scalar& a, const Tensor& b) { return where_impl(c, nullptr, &a, &b, nullptr); }

// ---- clamp ----------------------------------------------------------------------------------------
Tensor clamp(const Tensor& x, std::optional<Scalar> lo, std::optional<Scalar> hi) {
  OpScope scope(OpId::clamp, {&x});
  check_defined("clamp", x, "input");
  TS_CHECK(lo || hi, ValueError, "clamp: at least one of 'min' or 'max' must not be None");
  ResultType rt;
  rt.add(x);
  if (lo) rt.add(*lo);
  if (hi) rt.add(*hi);
  const DType d = rt.result();
  if (d == kBool) throw_unsupported_dtype("clamp", d);
  TernaryParams p;
  p.has_min = lo.has_value();
  p.has_max = hi.has_value();
  Tensor xc;
  {
    NoGradGuard no_record;
    xc = cast_to(x, d);
  }
  Tensor tl = lo ? scalar_as(*lo, d, x) : xc, th = hi ? scalar_as(*hi, d, x) : xc;
  Tensor out = run_ternary(TernaryOp::Clamp, d, x.sizes(), xc, tl, th, p);
  record_if_needed(OpId::clamp, {x, lo ? tl : Tensor(), hi ? th : Tensor()}, out);
  return out;
}

Tensor clamp(const Tensor& x, const std::optional<Tensor>& lo, const std::optional<Tensor>& hi) {
  OpScope scope(OpId::clamp, {&x, lo ? &*lo : &x, hi ? &*hi : &x});
  check_defined("clamp", x, "input");
  TS_CHECK(lo || hi, ValueError, "clamp: at least one of 'min' or 'max' must not be None");
  check_same_device("clamp", {&x, lo ? &*lo : nullptr, hi ? &*hi : nullptr});
  ResultType rt;
  rt.add(x);
  if (lo) rt.add(*lo);
  if (hi) rt.add(*hi);
  const DType d = rt.result();
  if (d == kBool) throw_unsupported_dtype("clamp", d);
  const Shape shape = broadcast3("clamp", x.sizes(), lo ? lo->sizes() : Shape{}, hi ? hi->sizes() : Shape{});
  TernaryParams p;
  p.has_min = lo.has_value();
  p.has_max = hi.has_value();
  Tensor xc, tl, th;
  {
    NoGradGuard no_record;
    xc = cast_to(x, d);
    tl = lo ? cast_to(*lo, d) : xc;
    th = hi ? cast_to(*hi, d) : xc;
  }
  Tensor out = run_ternary(TernaryOp::Clamp, d, shape, xc, tl, th, p);
  record_if_needed(OpId::clamp, {x, lo ? *lo : Tensor(), hi ? *hi : Tensor()}, out);
  return out;
}

// ---- lerp -----------------------------------------------------------------------------------------
static void check_lerp(const Tensor& start, const Tensor& end, const Tensor* weight) {
  check_defined("lerp", start, "input");
  check_defined("lerp", end, "end");
  check_same_device("lerp", {&start, &end, weight});
  TS_CHECK(start.dtype() == end.dtype(), DTypeError, "lerp: expected dtype ", dtype_name(start.dtype()),
           " for `end` but got dtype ", dtype_name(end.dtype()));
  if (weight)
    TS_CHECK(weight->dtype() == start.dtype(), DTypeError, "lerp: expected dtype ", dtype_name(start.dtype()),
             " for `weight` but got dtype ", dtype_name(weight->dtype()));
  if (!is_floating_point(start.dtype())) throw_unsupported_dtype("lerp", start.dtype());
}

Tensor lerp(const Tensor& start, const Tensor& end, const Scalar& weight) {
  OpScope scope(OpId::lerp, {&start, &end});
  check_lerp(start, end, nullptr);
  TernaryParams p;
  p.value = weight;
  p.value_weight = true;
  const Shape shape = broadcast_shapes(start.sizes(), end.sizes(), "lerp");
  Tensor out = run_ternary(TernaryOp::Lerp, start.dtype(), shape, start, end, start, p);
  if (should_record({&start, &end}))
    record_op(OpId::lerp, {start, end, scalar_as(weight, start.dtype(), start)}, {out});
  return out;
}

Tensor lerp(const Tensor& start, const Tensor& end, const Tensor& weight) {
  OpScope scope(OpId::lerp, {&start, &end, &weight});
  check_lerp(start, end, &weight);
  const Shape shape = broadcast3("lerp", start.sizes(), end.sizes(), weight.sizes());
  Tensor out = run_ternary(TernaryOp::Lerp, start.dtype(), shape, start, end, weight, {});
  record_if_needed(OpId::lerp, {start, end, weight}, out);
  return out;
}

// ---- addcmul / addcdiv ------------------------------------------------------------------------------
static Tensor addc_impl(OpId id, TernaryOp op, const Tensor& self, const Tensor& t1, const Tensor& t2,
                        const Scalar& value) {
  const char* name = op_name(id);
  if (autocast_pending()) [[unlikely]]
    if (AutocastArgs c(id, {&self, &t1, &t2}); c) return addc_impl(id, op, c[0], c[1], c[2], value);
  OpScope scope(id, {&self, &t1, &t2});
  check_defined(name, self, "input");
  check_defined(name, t1, "tensor1");
  check_defined(name, t2, "tensor2");
  check_same_device(name, {&self, &t1, &t2});
  if (op == TernaryOp::Addcdiv) {
    TS_CHECK(!(is_integral(t1.dtype(), true) && is_integral(t2.dtype(), true)), DTypeError, name,
             ": integer division with addcdiv is not supported (tensor1 is ", dtype_name(t1.dtype()), ", tensor2 is ",
             dtype_name(t2.dtype()), "); use a floating-point tensor1 or tensor2");
  }
  const DType d = ResultType().add(self).add(t1).add(t2).result();
  if (d == kBool) throw_unsupported_dtype(name, d);
  const Shape shape = broadcast3(name, self.sizes(), t1.sizes(), t2.sizes());
  TernaryParams p;
  p.value = value;
  Tensor a, b, c;
  {
    NoGradGuard no_record;
    a = cast_to(self, d);
    b = cast_to(t1, d);
    c = cast_to(t2, d);
  }
  Tensor out = run_ternary(op, d, shape, a, b, c, p);
  if (should_record({&self, &t1, &t2})) {
    OpAttrs attrs;
    attrs.scalars = {value};
    record_op(id, {self, t1, t2}, {out}, std::move(attrs));
  }
  return out;
}

Tensor addcmul(const Tensor& self, const Tensor& t1, const Tensor& t2, const Scalar& value) {
  return addc_impl(OpId::addcmul, TernaryOp::Addcmul, self, t1, t2, value);
}
Tensor addcdiv(const Tensor& self, const Tensor& t1, const Tensor& t2, const Scalar& value) {
  return addc_impl(OpId::addcdiv, TernaryOp::Addcdiv, self, t1, t2, value);
}

// ---- allclose / equal -------------------------------------------------------------------------------
bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol, bool equal_nan) {
  OpScope scope(OpId::allclose, {&a, &b});
  check_defined("allclose", a, "input");
  check_defined("allclose", b, "other");
  check_same_device("allclose", {&a, &b});
  TS_CHECK(a.dtype() == b.dtype(), DTypeError, "allclose: ", dtype_name(a.dtype()), " did not match ",
           dtype_name(b.dtype()));
  TS_CHECK(!a.is_meta(), NotImplementedError, "allclose: meta tensors have no values to compare");
  const Shape shape = broadcast_shapes(a.sizes(), b.sizes(), "allclose");
  bool result = true;
  check_not_capturing("allclose", a);
  allclose_kernel(a.device(), a.expand(shape), b.expand(shape), rtol, atol, equal_nan, &result);
  return result;
}

bool equal(const Tensor& a, const Tensor& b) {
  OpScope scope(OpId::equal, {&a, &b});
  check_defined("equal", a, "input");
  check_defined("equal", b, "other");
  check_same_device("equal", {&a, &b});
  TS_CHECK(!a.is_meta(), NotImplementedError, "equal: meta tensors have no values to compare");
  if (a.sizes() != b.sizes()) return false;
  const DType d = promote_types(a.dtype(), b.dtype());
  bool result = true;
  check_not_capturing("equal", a);
  allclose_kernel(a.device(), cast_to(a, d), cast_to(b, d), 0.0, 0.0, false, &result);
  return result;
}

// ---- softmax ----------------------------------------------------------------------------------------
static Tensor softmax_impl(OpId id, const Tensor& x, int64_t dim, std::optional<DType> dtype, bool log) {
  const char* name = op_name(id);
  if (autocast_pending() && !dtype) [[unlikely]]
    if (AutocastArgs c(id, {&x}); c) return softmax_impl(id, c[0], dim, dtype, log);
  OpScope scope(id, {&x});
  check_defined(name, x, "input");
  const DType d = dtype.value_or(x.dtype());
  if (!is_floating_point(d)) throw_unsupported_dtype(name, d);
  const int64_t nd = x.dim();
  const int64_t wd = wrap_dim(dim, nd == 0 ? 1 : nd, name);
  Tensor xc;
  {
    NoGradGuard no_record;
    xc = cast_to(x, d).contiguous();
  }
  Tensor out = make_empty(x.sizes(), d, x.device());
  int64_t outer = 1, size = 1, inner = 1;
  for (int64_t i = 0; i < nd; ++i) {
    if (i < wd) outer *= x.size(i);
    else if (i == wd) size = x.size(i);
    else inner *= x.size(i);
  }
  softmax_kernel(x.device(), out, xc, outer, size, inner, log);
  if (should_record({&x})) {
    OpAttrs attrs;
    attrs.ints = {wd};
    record_op(id, {x}, {out}, std::move(attrs));
  }
  return out;
}

Tensor softmax(const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  return softmax_impl(OpId::softmax, x, dim, dtype, false);
}
Tensor log_softmax(const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  return softmax_impl(OpId::log_softmax, x, dim, dtype, true);
}

}  // namespace tessera
