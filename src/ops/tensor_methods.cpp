// Tensor methods and operators: each forwards to the free function of the same name (functions.h),
// so the two spellings can never disagree. In-place forms compute out of place, check that the result
// dtype can be cast back (PyTorch's rule: no float result into an integer tensor), and write back;
// relu_, add_, sub_ and mul_ write straight into self where they can (Note [In-place kernels]).
#include <algorithm>
#include <type_traits>
#include <vector>

#include "ops/autograd_hook.h"
#include "ops/op_scope.h"
#include "ops/op_utils.h"
#include "tensor/tensor_impl.h"
#include "tensor/type_promotion.h"
#include "tessera/autograd.h"
#include "tessera/functions.h"

namespace tessera {

namespace {
// The value an in-place method computes from. The out-of-place op records its derivative, and the
// copy back then bumps self's version; where that derivative saves self (the ops below whose
// derivative reads an input: abs_, log_, mul_, div_, pow_, clamp_, addcmul_, ...), saving self would
// make every later backward raise. Those compute from a copy of self instead, as PyTorch saves the
// original self of an in-place op; a copy is made only while autograd records the call.
Tensor source_of(const Tensor& self, std::initializer_list<const Tensor*> others = {}) {
  bool record = should_record({&self});
  for (const Tensor* t : others) record = record || should_record({t});
  return record ? self.clone() : self;
}

Tensor& assign_inplace(const char* op, Tensor& self, const Tensor& result) {
  TS_CHECK(can_cast(result.dtype(), self.dtype()), DTypeError, op, ": result type ", dtype_name(result.dtype()),
           " can't be cast to the desired output type ", dtype_name(self.dtype()));
  TS_CHECK(result.sizes() == self.sizes(), ShapeError, op, ": output with shape ", self.sizes(),
           " doesn't match the broadcast shape ", result.sizes());
  check_inplace(op, self, {&result});  // under the op's own name, before copy_ repeats it
  self.copy_(result);
  return self;
}

// Note [In-place kernels]: relu_, add_, sub_ and mul_ on a floating tensor, the in-place forms that
// training loops run on whole activations (torchvision's ReLU(inplace=True), `out += identity`), run
// their kernel straight into self through the out= form instead of computing out of place and
// copying back: one pass instead of two, and no second activation-sized tensor. Taken when the result
// has self's dtype and shape and the other operand is a CPU number or does not partly overlap self
// (an exact alias, x.add_(x), is fine elementwise); otherwise the general path above. Autograd records
// the out-of-place op's derivative on self: relu's reads its output (self after the write), add's and
// sub's read nothing; mul's reads self before the write, so mul_ takes this path only while nothing
// records. relu's node saves self itself as its output, so a later in-place write to that tensor makes
// the backward raise the saved-tensor version error, as in PyTorch. Self must not overlap itself
// (as_strided windows keep the general path); a bool operand keeps it too.
bool broadcasts_to(const Shape& from, const Shape& to) {
  if (from.size() > to.size()) return false;
  for (size_t i = 0; i < from.size(); ++i) {
    const int64_t f = from[from.size() - 1 - i];
    if (f != 1 && f != to[to.size() - 1 - i]) return false;
  }
  return true;
}

// No two elements of t share an address (sufficient test: each dim, by increasing stride, steps past
// everything the smaller-stride dims span). Views such as as_strided windows fail it; writing those
// element by element would store to one address several times.
bool non_overlapping(const Tensor& t) {
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < t.dim(); ++d)
    if (t.size(d) > 1) dims.push_back(d);
  std::sort(dims.begin(), dims.end(), [&](int64_t a, int64_t b) { return t.stride(a) < t.stride(b); });
  int64_t span = 1;  // elements the dims so far reach, from the first
  for (int64_t d : dims) {
    if (t.stride(d) < span) return false;
    span += t.stride(d) * (t.size(d) - 1);
  }
  return true;
}

bool in_place_kernel_ok(const Tensor& self, const Tensor* other = nullptr) {
  if (!self.defined() || !is_floating_point(self.dtype()) || !non_overlapping(self)) return false;
  if (!other) return true;
  // A bool operand keeps the general path, whose op raises for sub (PyTorch's rule) under its own name.
  if (!other->defined() || other->dtype() == kBool || result_type(self, *other) != self.dtype() ||
      !broadcasts_to(other->sizes(), self.sizes()))
    return false;
  if (other->impl()->storage() != self.impl()->storage()) return true;
  return other->storage_offset() == self.storage_offset() && other->sizes() == self.sizes() &&
         other->strides() == self.strides();
}
bool in_place_kernel_ok(const Tensor& self, const Scalar& other) {
  return self.defined() && is_floating_point(self.dtype()) && non_overlapping(self) && !other.is_bool() &&
         result_type(self, other) == self.dtype();
}

// Runs in-place op `op` (relu_, add_, sub_, mul_) as `kernel` (an out= call writing self, which bumps
// self's version) inside the op's own scope, and records `op` on (inputs) -> self; its derivative is
// the out-of-place op's.
template <class Kernel>
Tensor& run_in_place(OpId op, Tensor& self, const std::vector<Tensor>& inputs, OpAttrs attrs, Kernel&& kernel) {
  OpScope scope(op, inputs);
  check_inplace(op_name(op), self, {inputs.size() > 1 ? &inputs[1] : nullptr});
  {
    NoGradGuard no_record;  // the out= forms refuse recording; this op records itself below
    kernel();
  }
  record_inplace(op, self, inputs, std::move(attrs));
  return self;
}

// A number operand as the 0-dim CPU tensor of self's dtype that the out-of-place op would make of it
// (binary_ops.cpp: a Scalar is converted to the compute dtype, here self's).
Tensor number_operand(const Tensor& self, const Scalar& s) { return scalar_tensor(s, TensorOptions(self.dtype(), kCPU)); }

OpAttrs alpha_attrs(const Scalar& alpha) {
  OpAttrs a;
  a.scalars = {alpha};
  return a;
}

// add_ and sub_: self + alpha * o or self - alpha * o, o a tensor or a number.
template <class O>
Tensor& add_or_sub_(bool sub, Tensor& self, const O& o, const Scalar& alpha) {
  const char* op = sub ? "sub_" : "add_";
  Tensor other;
  bool direct;
  if constexpr (std::is_same_v<O, Tensor>) {
    direct = in_place_kernel_ok(self, &o);
    other = o;
  } else {
    direct = in_place_kernel_ok(self, o);
    if (direct) other = number_operand(self, o);
  }
  if (!direct) return assign_inplace(op, self, sub ? tessera::sub(self, o, alpha) : tessera::add(self, o, alpha));
  return run_in_place(sub ? OpId::sub_ : OpId::add_, self, {self, other}, alpha_attrs(alpha), [&] {
    if (sub) tessera::sub_out(self, other, self, alpha);
    else tessera::add_out(self, other, self, alpha);
  });
}
}  // namespace

Tensor Tensor::neg() const { return tessera::neg(*this); }
Tensor& Tensor::neg_() { return assign_inplace("neg_", *this, tessera::neg(*this)); }
Tensor Tensor::abs() const { return tessera::abs(*this); }
Tensor& Tensor::abs_() { return assign_inplace("abs_", *this, tessera::abs(source_of(*this))); }
Tensor Tensor::exp() const { return tessera::exp(*this); }
Tensor& Tensor::exp_() { return assign_inplace("exp_", *this, tessera::exp(*this)); }
Tensor Tensor::exp2() const { return tessera::exp2(*this); }
Tensor& Tensor::exp2_() { return assign_inplace("exp2_", *this, tessera::exp2(*this)); }
Tensor Tensor::log() const { return tessera::log(*this); }
Tensor& Tensor::log_() { return assign_inplace("log_", *this, tessera::log(source_of(*this))); }
Tensor Tensor::log2() const { return tessera::log2(*this); }
Tensor& Tensor::log2_() { return assign_inplace("log2_", *this, tessera::log2(source_of(*this))); }
Tensor Tensor::log1p() const { return tessera::log1p(*this); }
Tensor& Tensor::log1p_() { return assign_inplace("log1p_", *this, tessera::log1p(source_of(*this))); }
Tensor Tensor::expm1() const { return tessera::expm1(*this); }
Tensor& Tensor::expm1_() { return assign_inplace("expm1_", *this, tessera::expm1(*this)); }
Tensor Tensor::sqrt() const { return tessera::sqrt(*this); }
Tensor& Tensor::sqrt_() { return assign_inplace("sqrt_", *this, tessera::sqrt(*this)); }
Tensor Tensor::rsqrt() const { return tessera::rsqrt(*this); }
Tensor& Tensor::rsqrt_() { return assign_inplace("rsqrt_", *this, tessera::rsqrt(*this)); }
Tensor Tensor::sin() const { return tessera::sin(*this); }
Tensor& Tensor::sin_() { return assign_inplace("sin_", *this, tessera::sin(source_of(*this))); }
Tensor Tensor::cos() const { return tessera::cos(*this); }
Tensor& Tensor::cos_() { return assign_inplace("cos_", *this, tessera::cos(source_of(*this))); }
Tensor Tensor::tan() const { return tessera::tan(*this); }
Tensor& Tensor::tan_() { return assign_inplace("tan_", *this, tessera::tan(*this)); }
Tensor Tensor::tanh() const { return tessera::tanh(*this); }
Tensor& Tensor::tanh_() { return assign_inplace("tanh_", *this, tessera::tanh(*this)); }
Tensor Tensor::sigmoid() const { return tessera::sigmoid(*this); }
Tensor& Tensor::sigmoid_() { return assign_inplace("sigmoid_", *this, tessera::sigmoid(*this)); }
Tensor Tensor::relu() const { return tessera::relu(*this); }
Tensor& Tensor::relu_() {
  // relu's node saves its output; on a view in the graph the output's history is the base's
  // (CopySlices, Note [View tracking]), so the write goes through copy_ there.
  const bool graph_view = tessera::requires_grad(*this) && impl()->autograd_meta->is_view;
  if (graph_view || !in_place_kernel_ok(*this)) return assign_inplace("relu_", *this, tessera::relu(*this));
  return run_in_place(OpId::relu_, *this, {*this}, {}, [&] { tessera::relu_out(*this, *this); });
}
Tensor Tensor::silu() const { return tessera::silu(*this); }
Tensor& Tensor::silu_() { return assign_inplace("silu_", *this, tessera::silu(source_of(*this))); }
Tensor Tensor::erf() const { return tessera::erf(*this); }
Tensor& Tensor::erf_() { return assign_inplace("erf_", *this, tessera::erf(source_of(*this))); }
Tensor Tensor::floor() const { return tessera::floor(*this); }
Tensor& Tensor::floor_() { return assign_inplace("floor_", *this, tessera::floor(*this)); }
Tensor Tensor::ceil() const { return tessera::ceil(*this); }
Tensor& Tensor::ceil_() { return assign_inplace("ceil_", *this, tessera::ceil(*this)); }
Tensor Tensor::round() const { return tessera::round(*this); }
Tensor& Tensor::round_() { return assign_inplace("round_", *this, tessera::round(*this)); }
Tensor Tensor::trunc() const { return tessera::trunc(*this); }
Tensor& Tensor::trunc_() { return assign_inplace("trunc_", *this, tessera::trunc(*this)); }
Tensor Tensor::sign() const { return tessera::sign(*this); }
Tensor& Tensor::sign_() { return assign_inplace("sign_", *this, tessera::sign(*this)); }
Tensor Tensor::reciprocal() const { return tessera::reciprocal(*this); }
Tensor& Tensor::reciprocal_() { return assign_inplace("reciprocal_", *this, tessera::reciprocal(*this)); }
Tensor Tensor::logical_not() const { return tessera::logical_not(*this); }
Tensor& Tensor::logical_not_() { return assign_inplace("logical_not_", *this, tessera::logical_not(*this)); }
Tensor Tensor::bitwise_not() const { return tessera::bitwise_not(*this); }
Tensor& Tensor::bitwise_not_() { return assign_inplace("bitwise_not_", *this, tessera::bitwise_not(*this)); }
Tensor Tensor::gelu(const std::string& approximate) const { return tessera::gelu(*this, approximate); }
Tensor Tensor::softplus(double beta, double threshold) const { return tessera::softplus(*this, beta, threshold); }
Tensor Tensor::isnan() const { return tessera::isnan(*this); }
Tensor Tensor::isinf() const { return tessera::isinf(*this); }
Tensor Tensor::isfinite() const { return tessera::isfinite(*this); }
Tensor Tensor::nan_to_num(std::optional<double> nan, std::optional<double> posinf, std::optional<double> neginf) const {
  return tessera::nan_to_num(*this, nan, posinf, neginf);
}

Tensor Tensor::add(const Tensor& o, const Scalar& alpha) const { return tessera::add(*this, o, alpha); }
Tensor Tensor::add(const Scalar& o, const Scalar& alpha) const { return tessera::add(*this, o, alpha); }
Tensor& Tensor::add_(const Tensor& o, const Scalar& alpha) { return add_or_sub_(false, *this, o, alpha); }
Tensor& Tensor::add_(const Scalar& o, const Scalar& alpha) { return add_or_sub_(false, *this, o, alpha); }
Tensor Tensor::sub(const Tensor& o, const Scalar& alpha) const { return tessera::sub(*this, o, alpha); }
Tensor Tensor::sub(const Scalar& o, const Scalar& alpha) const { return tessera::sub(*this, o, alpha); }
Tensor& Tensor::sub_(const Tensor& o, const Scalar& alpha) { return add_or_sub_(true, *this, o, alpha); }
Tensor& Tensor::sub_(const Scalar& o, const Scalar& alpha) { return add_or_sub_(true, *this, o, alpha); }
Tensor Tensor::div(const Tensor& o, const std::string& m) const { return tessera::div(*this, o, m); }
Tensor Tensor::div(const Scalar& o, const std::string& m) const { return tessera::div(*this, o, m); }
Tensor& Tensor::div_(const Tensor& o, const std::string& m) { return assign_inplace("div_", *this, tessera::div(source_of(*this, {&o}), o, m)); }
Tensor& Tensor::div_(const Scalar& o, const std::string& m) { return assign_inplace("div_", *this, tessera::div(source_of(*this), o, m)); }
Tensor Tensor::mul(const Tensor& o) const { return tessera::mul(*this, o); }
Tensor Tensor::mul(const Scalar& o) const { return tessera::mul(*this, o); }
Tensor& Tensor::mul_(const Tensor& o) {
  if (should_record({this, &o}) || !in_place_kernel_ok(*this, &o))
    return assign_inplace("mul_", *this, tessera::mul(source_of(*this, {&o}), o));
  return run_in_place(OpId::mul_, *this, {*this, o}, {}, [&] { tessera::mul_out(*this, o, *this); });
}
Tensor& Tensor::mul_(const Scalar& o) {
  if (should_record({this}) || !in_place_kernel_ok(*this, o))
    return assign_inplace("mul_", *this, tessera::mul(source_of(*this), o));
  const Tensor n = number_operand(*this, o);
  return run_in_place(OpId::mul_, *this, {*this, n}, {}, [&] { tessera::mul_out(*this, n, *this); });
}
Tensor Tensor::pow(const Tensor& o) const { return tessera::pow(*this, o); }
Tensor Tensor::pow(const Scalar& o) const { return tessera::pow(*this, o); }
Tensor& Tensor::pow_(const Tensor& o) { return assign_inplace("pow_", *this, tessera::pow(source_of(*this, {&o}), o)); }
Tensor& Tensor::pow_(const Scalar& o) { return assign_inplace("pow_", *this, tessera::pow(source_of(*this), o)); }
Tensor Tensor::maximum(const Tensor& o) const { return tessera::maximum(*this, o); }
Tensor Tensor::maximum(const Scalar& o) const { return tessera::maximum(*this, o); }
Tensor& Tensor::maximum_(const Tensor& o) { return assign_inplace("maximum_", *this, tessera::maximum(source_of(*this, {&o}), o)); }
Tensor& Tensor::maximum_(const Scalar& o) { return assign_inplace("maximum_", *this, tessera::maximum(source_of(*this), o)); }
Tensor Tensor::minimum(const Tensor& o) const { return tessera::minimum(*this, o); }
Tensor Tensor::minimum(const Scalar& o) const { return tessera::minimum(*this, o); }
Tensor& Tensor::minimum_(const Tensor& o) { return assign_inplace("minimum_", *this, tessera::minimum(source_of(*this, {&o}), o)); }
Tensor& Tensor::minimum_(const Scalar& o) { return assign_inplace("minimum_", *this, tessera::minimum(source_of(*this), o)); }
Tensor Tensor::fmod(const Tensor& o) const { return tessera::fmod(*this, o); }
Tensor Tensor::fmod(const Scalar& o) const { return tessera::fmod(*this, o); }
Tensor& Tensor::fmod_(const Tensor& o) { return assign_inplace("fmod_", *this, tessera::fmod(source_of(*this, {&o}), o)); }
Tensor& Tensor::fmod_(const Scalar& o) { return assign_inplace("fmod_", *this, tessera::fmod(source_of(*this), o)); }
Tensor Tensor::remainder(const Tensor& o) const { return tessera::remainder(*this, o); }
Tensor Tensor::remainder(const Scalar& o) const { return tessera::remainder(*this, o); }
Tensor& Tensor::remainder_(const Tensor& o) { return assign_inplace("remainder_", *this, tessera::remainder(source_of(*this, {&o}), o)); }
Tensor& Tensor::remainder_(const Scalar& o) { return assign_inplace("remainder_", *this, tessera::remainder(source_of(*this), o)); }
Tensor Tensor::atan2(const Tensor& o) const { return tessera::atan2(*this, o); }
Tensor Tensor::atan2(const Scalar& o) const { return tessera::atan2(*this, o); }
Tensor& Tensor::atan2_(const Tensor& o) { return assign_inplace("atan2_", *this, tessera::atan2(source_of(*this, {&o}), o)); }
Tensor& Tensor::atan2_(const Scalar& o) { return assign_inplace("atan2_", *this, tessera::atan2(source_of(*this), o)); }
Tensor Tensor::eq(const Tensor& o) const { return tessera::eq(*this, o); }
Tensor Tensor::eq(const Scalar& o) const { return tessera::eq(*this, o); }
Tensor& Tensor::eq_(const Tensor& o) { return assign_inplace("eq_", *this, tessera::eq(*this, o)); }
Tensor& Tensor::eq_(const Scalar& o) { return assign_inplace("eq_", *this, tessera::eq(*this, o)); }
Tensor Tensor::ne(const Tensor& o) const { return tessera::ne(*this, o); }
Tensor Tensor::ne(const Scalar& o) const { return tessera::ne(*this, o); }
Tensor& Tensor::ne_(const Tensor& o) { return assign_inplace("ne_", *this, tessera::ne(*this, o)); }
Tensor& Tensor::ne_(const Scalar& o) { return assign_inplace("ne_", *this, tessera::ne(*this, o)); }
Tensor Tensor::lt(const Tensor& o) const { return tessera::lt(*this, o); }
Tensor Tensor::lt(const Scalar& o) const { return tessera::lt(*this, o); }
Tensor& Tensor::lt_(const Tensor& o) { return assign_inplace("lt_", *this, tessera::lt(*this, o)); }
Tensor& Tensor::lt_(const Scalar& o) { return assign_inplace("lt_", *this, tessera::lt(*this, o)); }
Tensor Tensor::le(const Tensor& o) const { return tessera::le(*this, o); }
Tensor Tensor::le(const Scalar& o) const { return tessera::le(*this, o); }
Tensor& Tensor::le_(const Tensor& o) { return assign_inplace("le_", *this, tessera::le(*this, o)); }
Tensor& Tensor::le_(const Scalar& o) { return assign_inplace("le_", *this, tessera::le(*this, o)); }
Tensor Tensor::gt(const Tensor& o) const { return tessera::gt(*this, o); }
Tensor Tensor::gt(const Scalar& o) const { return tessera::gt(*this, o); }
Tensor& Tensor::gt_(const Tensor& o) { return assign_inplace("gt_", *this, tessera::gt(*this, o)); }
Tensor& Tensor::gt_(const Scalar& o) { return assign_inplace("gt_", *this, tessera::gt(*this, o)); }
Tensor Tensor::ge(const Tensor& o) const { return tessera::ge(*this, o); }
Tensor Tensor::ge(const Scalar& o) const { return tessera::ge(*this, o); }
Tensor& Tensor::ge_(const Tensor& o) { return assign_inplace("ge_", *this, tessera::ge(*this, o)); }
Tensor& Tensor::ge_(const Scalar& o) { return assign_inplace("ge_", *this, tessera::ge(*this, o)); }
Tensor Tensor::logical_and(const Tensor& o) const { return tessera::logical_and(*this, o); }
Tensor Tensor::logical_and(const Scalar& o) const { return tessera::logical_and(*this, o); }
Tensor& Tensor::logical_and_(const Tensor& o) { return assign_inplace("logical_and_", *this, tessera::logical_and(*this, o)); }
Tensor& Tensor::logical_and_(const Scalar& o) { return assign_inplace("logical_and_", *this, tessera::logical_and(*this, o)); }
Tensor Tensor::logical_or(const Tensor& o) const { return tessera::logical_or(*this, o); }
Tensor Tensor::logical_or(const Scalar& o) const { return tessera::logical_or(*this, o); }
Tensor& Tensor::logical_or_(const Tensor& o) { return assign_inplace("logical_or_", *this, tessera::logical_or(*this, o)); }
Tensor& Tensor::logical_or_(const Scalar& o) { return assign_inplace("logical_or_", *this, tessera::logical_or(*this, o)); }
Tensor Tensor::logical_xor(const Tensor& o) const { return tessera::logical_xor(*this, o); }
Tensor Tensor::logical_xor(const Scalar& o) const { return tessera::logical_xor(*this, o); }
Tensor& Tensor::logical_xor_(const Tensor& o) { return assign_inplace("logical_xor_", *this, tessera::logical_xor(*this, o)); }
Tensor& Tensor::logical_xor_(const Scalar& o) { return assign_inplace("logical_xor_", *this, tessera::logical_xor(*this, o)); }
Tensor Tensor::bitwise_and(const Tensor& o) const { return tessera::bitwise_and(*this, o); }
Tensor Tensor::bitwise_and(const Scalar& o) const { return tessera::bitwise_and(*this, o); }
Tensor& Tensor::bitwise_and_(const Tensor& o) { return assign_inplace("bitwise_and_", *this, tessera::bitwise_and(*this, o)); }
Tensor& Tensor::bitwise_and_(const Scalar& o) { return assign_inplace("bitwise_and_", *this, tessera::bitwise_and(*this, o)); }
Tensor Tensor::bitwise_or(const Tensor& o) const { return tessera::bitwise_or(*this, o); }
Tensor Tensor::bitwise_or(const Scalar& o) const { return tessera::bitwise_or(*this, o); }
Tensor& Tensor::bitwise_or_(const Tensor& o) { return assign_inplace("bitwise_or_", *this, tessera::bitwise_or(*this, o)); }
Tensor& Tensor::bitwise_or_(const Scalar& o) { return assign_inplace("bitwise_or_", *this, tessera::bitwise_or(*this, o)); }
Tensor Tensor::bitwise_xor(const Tensor& o) const { return tessera::bitwise_xor(*this, o); }
Tensor Tensor::bitwise_xor(const Scalar& o) const { return tessera::bitwise_xor(*this, o); }
Tensor& Tensor::bitwise_xor_(const Tensor& o) { return assign_inplace("bitwise_xor_", *this, tessera::bitwise_xor(*this, o)); }
Tensor& Tensor::bitwise_xor_(const Scalar& o) { return assign_inplace("bitwise_xor_", *this, tessera::bitwise_xor(*this, o)); }
Tensor Tensor::bitwise_left_shift(const Tensor& o) const { return tessera::bitwise_left_shift(*this, o); }
Tensor Tensor::bitwise_left_shift(const Scalar& o) const { return tessera::bitwise_left_shift(*this, o); }
Tensor& Tensor::bitwise_left_shift_(const Tensor& o) { return assign_inplace("bitwise_left_shift_", *this, tessera::bitwise_left_shift(*this, o)); }
Tensor& Tensor::bitwise_left_shift_(const Scalar& o) { return assign_inplace("bitwise_left_shift_", *this, tessera::bitwise_left_shift(*this, o)); }
Tensor Tensor::bitwise_right_shift(const Tensor& o) const { return tessera::bitwise_right_shift(*this, o); }
Tensor Tensor::bitwise_right_shift(const Scalar& o) const { return tessera::bitwise_right_shift(*this, o); }
Tensor& Tensor::bitwise_right_shift_(const Tensor& o) { return assign_inplace("bitwise_right_shift_", *this, tessera::bitwise_right_shift(*this, o)); }
Tensor& Tensor::bitwise_right_shift_(const Scalar& o) { return assign_inplace("bitwise_right_shift_", *this, tessera::bitwise_right_shift(*this, o)); }
Tensor Tensor::clamp(std::optional<Scalar> lo, std::optional<Scalar> hi) const { return tessera::clamp(*this, lo, hi); }
Tensor Tensor::clamp(const Tensor& lo, const Tensor& hi) const {
  return tessera::clamp(*this, std::optional<Tensor>(lo), std::optional<Tensor>(hi));
}
Tensor& Tensor::clamp_(std::optional<Scalar> lo, std::optional<Scalar> hi) {
  return assign_inplace("clamp_", *this, tessera::clamp(source_of(*this), lo, hi));
}
Tensor Tensor::lerp(const Tensor& end, const Scalar& w) const { return tessera::lerp(*this, end, w); }
Tensor Tensor::lerp(const Tensor& end, const Tensor& w) const { return tessera::lerp(*this, end, w); }
Tensor Tensor::addcmul(const Tensor& a, const Tensor& b, const Scalar& v) const { return tessera::addcmul(*this, a, b, v); }
Tensor Tensor::addcdiv(const Tensor& a, const Tensor& b, const Scalar& v) const { return tessera::addcdiv(*this, a, b, v); }
Tensor& Tensor::addcmul_(const Tensor& a, const Tensor& b, const Scalar& v) {
  return assign_inplace("addcmul_", *this, tessera::addcmul(source_of(*this, {&a, &b}), a, b, v));
}
Tensor& Tensor::addcdiv_(const Tensor& a, const Tensor& b, const Scalar& v) {
  return assign_inplace("addcdiv_", *this, tessera::addcdiv(source_of(*this, {&a, &b}), a, b, v));
}
Tensor Tensor::where(const Tensor& cond, const Tensor& other) const { return tessera::where(cond, *this, other); }

Tensor Tensor::sum(std::optional<DType> dt) const { return tessera::sum(*this, std::vector<int64_t>{}, false, dt); }
Tensor Tensor::sum(Dims d, bool k, std::optional<DType> dt) const { return tessera::sum(*this, std::move(d), k, dt); }
Tensor Tensor::mean(std::optional<DType> dt) const { return tessera::mean(*this, std::vector<int64_t>{}, false, dt); }
Tensor Tensor::mean(Dims d, bool k, std::optional<DType> dt) const { return tessera::mean(*this, std::move(d), k, dt); }
Tensor Tensor::prod(std::optional<DType> dt) const { return tessera::prod(*this, std::vector<int64_t>{}, false, dt); }
Tensor Tensor::prod(int64_t d, bool k, std::optional<DType> dt) const { return tessera::prod(*this, d, k, dt); }
Tensor Tensor::max() const { return tessera::max(*this); }
std::tuple<Tensor, Tensor> Tensor::max(int64_t d, bool k) const { return tessera::max(*this, d, k); }
Tensor Tensor::min() const { return tessera::min(*this); }
std::tuple<Tensor, Tensor> Tensor::min(int64_t d, bool k) const { return tessera::min(*this, d, k); }
Tensor Tensor::amax(Dims d, bool k) const { return tessera::amax(*this, std::move(d), k); }
Tensor Tensor::amin(Dims d, bool k) const { return tessera::amin(*this, std::move(d), k); }
Tensor Tensor::argmax(std::optional<int64_t> d, bool k) const { return tessera::argmax(*this, d, k); }
Tensor Tensor::argmin(std::optional<int64_t> d, bool k) const { return tessera::argmin(*this, d, k); }
Tensor Tensor::var(std::optional<Dims> d, double c, bool k) const { return tessera::var(*this, std::move(d), c, k); }
Tensor Tensor::std(std::optional<Dims> d, double c, bool k) const { return tessera::std(*this, std::move(d), c, k); }
Tensor Tensor::norm(double p, std::optional<Dims> d, bool k) const { return tessera::norm(*this, p, std::move(d), k); }
Tensor Tensor::logsumexp(Dims d, bool k) const { return tessera::logsumexp(*this, std::move(d), k); }
Tensor Tensor::any() const { return tessera::any(*this); }
Tensor Tensor::any(int64_t d, bool k) const { return tessera::any(*this, d, k); }
Tensor Tensor::all() const { return tessera::all(*this); }
Tensor Tensor::all(int64_t d, bool k) const { return tessera::all(*this, d, k); }
Tensor Tensor::cumsum(int64_t d, std::optional<DType> dt) const { return tessera::cumsum(*this, d, dt); }
Tensor Tensor::cumprod(int64_t d, std::optional<DType> dt) const { return tessera::cumprod(*this, d, dt); }

Tensor Tensor::matmul(const Tensor& o) const { return tessera::matmul(*this, o); }
Tensor Tensor::mm(const Tensor& o) const { return tessera::mm(*this, o); }
Tensor Tensor::bmm(const Tensor& o) const { return tessera::bmm(*this, o); }
Tensor Tensor::dot(const Tensor& o) const { return tessera::dot(*this, o); }
Tensor Tensor::outer(const Tensor& o) const { return tessera::outer(*this, o); }
Tensor Tensor::softmax(int64_t d, std::optional<DType> dt) const { return tessera::softmax(*this, d, dt); }
Tensor Tensor::log_softmax(int64_t d, std::optional<DType> dt) const { return tessera::log_softmax(*this, d, dt); }

Tensor Tensor::index_select(int64_t d, const Tensor& i) const { return tessera::index_select(*this, d, i); }
Tensor Tensor::gather(int64_t d, const Tensor& i) const { return tessera::gather(*this, d, i); }
Tensor Tensor::scatter(int64_t d, const Tensor& i, const Tensor& s) const { return tessera::scatter(*this, d, i, s); }
Tensor Tensor::scatter(int64_t d, const Tensor& i, const Scalar& v) const { return tessera::scatter(*this, d, i, v); }
Tensor& Tensor::scatter_(int64_t d, const Tensor& i, const Tensor& s) {
  return assign_inplace("scatter_", *this, tessera::scatter(*this, d, i, s));
}
Tensor Tensor::scatter_add(int64_t d, const Tensor& i, const Tensor& s) const { return tessera::scatter_add(*this, d, i, s); }
Tensor& Tensor::scatter_add_(int64_t d, const Tensor& i, const Tensor& s) {
  return assign_inplace("scatter_add_", *this, tessera::scatter_add(*this, d, i, s));
}
Tensor Tensor::index_add(int64_t d, const Tensor& i, const Tensor& s, const Scalar& a) const {
  return tessera::index_add(*this, d, i, s, a);
}
Tensor& Tensor::index_add_(int64_t d, const Tensor& i, const Tensor& s, const Scalar& a) {
  return assign_inplace("index_add_", *this, tessera::index_add(*this, d, i, s, a));
}
Tensor Tensor::index(const std::vector<std::optional<Tensor>>& idx) const { return tessera::index(*this, idx); }
Tensor Tensor::index_put(const std::vector<std::optional<Tensor>>& idx, const Tensor& v, bool acc) const {
  return tessera::index_put(*this, idx, v, acc);
}
Tensor& Tensor::index_put_(const std::vector<std::optional<Tensor>>& idx, const Tensor& v, bool acc) {
  return assign_inplace("index_put_", *this, tessera::index_put(*this, idx, v, acc));
}
Tensor Tensor::masked_fill(const Tensor& m, const Scalar& v) const { return tessera::masked_fill(*this, m, v); }
Tensor& Tensor::masked_fill_(const Tensor& m, const Scalar& v) {
  return assign_inplace("masked_fill_", *this, tessera::masked_fill(*this, m, v));
}
Tensor Tensor::masked_select(const Tensor& m) const { return tessera::masked_select(*this, m); }
Tensor Tensor::nonzero() const { return tessera::nonzero(*this); }
Tensor Tensor::flip(const Shape& d) const { return tessera::flip(*this, d); }
Tensor Tensor::roll(const Shape& s, const Shape& d) const { return tessera::roll(*this, s, d); }
Tensor Tensor::repeat(const Shape& r) const { return tessera::repeat(*this, r); }
Tensor Tensor::repeat_interleave(int64_t r, std::optional<int64_t> d) const { return tessera::repeat_interleave(*this, r, d); }
Tensor Tensor::repeat_interleave(const Tensor& r, std::optional<int64_t> d) const { return tessera::repeat_interleave(*this, r, d); }
Tensor Tensor::tril(int64_t d) const { return tessera::tril(*this, d); }
Tensor Tensor::triu(int64_t d) const { return tessera::triu(*this, d); }
std::tuple<Tensor, Tensor> Tensor::topk(int64_t k, int64_t d, bool l, bool s) const { return tessera::topk(*this, k, d, l, s); }
std::tuple<Tensor, Tensor> Tensor::sort(int64_t d, bool desc, bool st) const { return tessera::sort(*this, d, desc, st); }
Tensor Tensor::argsort(int64_t d, bool desc, bool st) const { return tessera::argsort(*this, d, desc, st); }

Tensor operator-(const Tensor& a) { return neg(a); }
Tensor operator~(const Tensor& a) { return a.dtype() == kBool ? logical_not(a) : bitwise_not(a); }
Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator+(const Tensor& a, const Scalar& b) { return add(a, b); }
Tensor operator+(const Scalar& a, const Tensor& b) { return add(b, a); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator-(const Tensor& a, const Scalar& b) { return sub(a, b); }
Tensor operator-(const Scalar& a, const Tensor& b) { return sub(scalar_tensor(a, TensorOptions(a.dtype(), b.device())), b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator*(const Tensor& a, const Scalar& b) { return mul(a, b); }
Tensor operator*(const Scalar& a, const Tensor& b) { return mul(b, a); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator/(const Tensor& a, const Scalar& b) { return div(a, b); }
Tensor operator/(const Scalar& a, const Tensor& b) { return div(scalar_tensor(a, TensorOptions(a.dtype(), b.device())), b); }
Tensor operator%(const Tensor& a, const Tensor& b) { return remainder(a, b); }
Tensor operator%(const Tensor& a, const Scalar& b) { return remainder(a, b); }
Tensor operator%(const Scalar& a, const Tensor& b) { return remainder(scalar_tensor(a, TensorOptions(a.dtype(), b.device())), b); }
Tensor operator&(const Tensor& a, const Tensor& b) { return bitwise_and(a, b); }
Tensor operator&(const Tensor& a, const Scalar& b) { return bitwise_and(a, b); }
Tensor operator&(const Scalar& a, const Tensor& b) { return bitwise_and(b, a); }
Tensor operator|(const Tensor& a, const Tensor& b) { return bitwise_or(a, b); }
Tensor operator|(const Tensor& a, const Scalar& b) { return bitwise_or(a, b); }
Tensor operator|(const Scalar& a, const Tensor& b) { return bitwise_or(b, a); }
Tensor operator^(const Tensor& a, const Tensor& b) { return bitwise_xor(a, b); }
Tensor operator^(const Tensor& a, const Scalar& b) { return bitwise_xor(a, b); }
Tensor operator^(const Scalar& a, const Tensor& b) { return bitwise_xor(b, a); }
Tensor operator==(const Tensor& a, const Tensor& b) { return eq(a, b); }
Tensor operator==(const Tensor& a, const Scalar& b) { return eq(a, b); }
Tensor operator==(const Scalar& a, const Tensor& b) { return eq(b, a); }
Tensor operator!=(const Tensor& a, const Tensor& b) { return ne(a, b); }
Tensor operator!=(const Tensor& a, const Scalar& b) { return ne(a, b); }
Tensor operator!=(const Scalar& a, const Tensor& b) { return ne(b, a); }
Tensor operator<(const Tensor& a, const Tensor& b) { return lt(a, b); }
Tensor operator<(const Tensor& a, const Scalar& b) { return lt(a, b); }
Tensor operator<(const Scalar& a, const Tensor& b) { return gt(b, a); }
Tensor operator<=(const Tensor& a, const Tensor& b) { return le(a, b); }
Tensor operator<=(const Tensor& a, const Scalar& b) { return le(a, b); }
Tensor operator<=(const Scalar& a, const Tensor& b) { return ge(b, a); }
Tensor operator>(const Tensor& a, const Tensor& b) { return gt(a, b); }
Tensor operator>(const Tensor& a, const Scalar& b) { return gt(a, b); }
Tensor operator>(const Scalar& a, const Tensor& b) { return lt(b, a); }
Tensor operator>=(const Tensor& a, const Tensor& b) { return ge(a, b); }
Tensor operator>=(const Tensor& a, const Scalar& b) { return ge(a, b); }
Tensor operator>=(const Scalar& a, const Tensor& b) { return le(b, a); }
Tensor& operator+=(Tensor& a, const Tensor& b) { return a.add_(b); }
Tensor& operator+=(Tensor& a, const Scalar& b) { return a.add_(b); }
Tensor& operator-=(Tensor& a, const Tensor& b) { return a.sub_(b); }
Tensor& operator-=(Tensor& a, const Scalar& b) { return a.sub_(b); }
Tensor& operator*=(Tensor& a, const Tensor& b) { return a.mul_(b); }
Tensor& operator*=(Tensor& a, const Scalar& b) { return a.mul_(b); }
Tensor& operator/=(Tensor& a, const Tensor& b) { return a.div_(b); }
Tensor& operator/=(Tensor& a, const Scalar& b) { return a.div_(b); }

}  // namespace tessera
