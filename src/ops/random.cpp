// The random family's meta functions and public ops: rand, randn, randint, bernoulli, randperm,
// multinomial and the in-place fills uniform_, normal_, bernoulli_, random_.
//
// Every op validates its arguments, allocates its output, then reserves its Philox counters from the
// Generator (the one given, else default_generator(device)) BEFORE launching the kernel, so that two
// successive calls never share numbers and the kernel needs no generator of its own
// (Note [Philox stream], runtime/philox.h). Meta tensors draw nothing and reserve nothing.
// Checks that need the data (bernoulli's p, multinomial's rows) are the kernels' (ops never loop).
#include <cmath>
#include <limits>

#include "ops/autograd_hook.h"
#include "ops/op_scope.h"
#include "ops/trace_hook.h"
#include "ops/op_utils.h"
#include "ops/random_kernel.h"
#include "runtime/philox_capture.h"
#include "tensor/tensor_impl.h"
#include "tessera/functions.h"

namespace tessera {

KernelSlot<UniformKernelFn> uniform_kernel("uniform_");
KernelSlot<NormalKernelFn> normal_kernel("normal_");
KernelSlot<BernoulliScalarKernelFn> bernoulli_scalar_kernel("bernoulli_");
KernelSlot<BernoulliTensorKernelFn> bernoulli_tensor_kernel("bernoulli");
KernelSlot<RandomIntKernelFn> random_int_kernel("random_");
KernelSlot<RandpermKernelFn> randperm_kernel("randperm");
KernelSlot<MultinomialKernelFn> multinomial_kernel("multinomial");

namespace {

// Reserves the counters of `n` elements of `words` words each (Note [Philox stream]).
PhiloxParams reserve_counters(Generator* gen, Device device, int64_t n, int words) {
  if (device.is_meta()) return {};
  Generator& g = gen ? *gen : default_generator(device);
  const uint64_t counters = (static_cast<uint64_t>(n) * static_cast<uint64_t>(words) + 3) / 4;
  if (device.is_cuda()) {
    CapturedPhilox c;
    if (philox_reserve_captured(g, counters, &c)) return {0, c.offset, c.seed_ptr, c.offset_ptr};
  }
  auto [seed, offset] = g.reserve(counters);
  return {seed, offset};
}

void check_floating(const char* op, DType t) {
  TS_CHECK(is_floating_point(t), DTypeError, op, ": expected a floating-point dtype (float16, bfloat16, float32, "
           "float64) but got ", dtype_name(t));
}

// Largest finite value of a floating dtype.
double dtype_max(DType t) {
  switch (t) {
    case DType::Float16: return 65504.0;
    case DType::BFloat16: return 3.3895313892515355e38;
    case DType::Float32: return std::numeric_limits<float>::max();
    default: return std::numeric_limits<double>::max();
  }
}

void bump(const Tensor& t) { t.impl()->bump_version(); }

// A random fill overwrites self: autograd's refusals of in-place writes apply before it (a leaf that
// requires grad, views that cannot be written through), and self's history restarts after it (its
// old value gets no gradient; a view's base gets CopySlices). The capture has its own record.
void record_fill(OpId op, const Tensor& self, const OpAttrs& attrs) { record_inplace_untraced(op, self, {}, attrs); }

}  // namespace

// ---- in-place fills ------------------------------------------------------------------------------
Tensor& Tensor::uniform_(double from, double to, Generator* gen) {
  OpScope scope(OpId::uniform_, {this});
  check_defined("uniform_", *this, "self");
  check_floating("uniform_", dtype());
  TS_CHECK(std::isfinite(from) && std::isfinite(to), ValueError, "uniform_: expects from and to to be finite, got from=",
           from, " and to=", to);
  TS_CHECK(from <= to, ValueError, "uniform_: expects to return a [from, to) range, but found from=", from,
           " > to=", to);
  TS_CHECK(to - from <= dtype_max(dtype()), ValueError, "uniform_: expects to-from <= the largest ",
           dtype_name(dtype()), " (", dtype_max(dtype()), "), but found to=", to, " and from=", from);
  check_inplace("uniform_", *this);
  check_writable("uniform_", *this);
  const PhiloxParams p = reserve_counters(gen, device(), numel(), uniform_words(dtype()));
  uniform_kernel(device(), *this, from, to, p);
  if (capturing() && gen == nullptr) detail::trace_record(OpId::uniform_, {}, {*this}, OpAttrs{.scalars = {from, to}});
  bump(*this);
  record_fill(OpId::uniform_, *this, OpAttrs{.scalars = {from, to}});
  return *this;
}

Tensor& Tensor::normal_(double mean, double std, Generator* gen) {
  OpScope scope(OpId::normal_, {this});
  check_defined("normal_", *this, "self");
  check_floating("normal_", dtype());
  TS_CHECK(std::isfinite(mean), ValueError, "normal_: expects mean to be finite, got ", mean);
  TS_CHECK(std::isfinite(std) && std >= 0.0, ValueError, "normal_: expects std >= 0.0 and finite, but found std ", std);
  check_inplace("normal_", *this);
  check_writable("normal_", *this);
  const PhiloxParams p = reserve_counters(gen, device(), numel(), normal_words(dtype()));
  normal_kernel(device(), *this, mean, std, p);
  if (capturing() && gen == nullptr) detail::trace_record(OpId::normal_, {}, {*this}, OpAttrs{.scalars = {mean, std}});
  bump(*this);
  record_fill(OpId::normal_, *this, OpAttrs{.scalars = {mean, std}});
  return *this;
}

Tensor& Tensor::bernoulli_(double prob, Generator* gen) {
  OpScope scope(OpId::bernoulli_, {this});
  check_defined("bernoulli_", *this, "self");
  TS_CHECK(prob >= 0.0 && prob <= 1.0, ValueError, "bernoulli_: expected p in [0, 1], but got p=", prob);
  check_inplace("bernoulli_", *this);
  check_writable("bernoulli_", *this);
  const PhiloxParams p = reserve_counters(gen, device(), numel(), kBernoulliWords);
  bernoulli_scalar_kernel(device(), *this, prob, p);
  if (capturing() && gen == nullptr) detail::trace_record(OpId::bernoulli_, {}, {*this}, OpAttrs{.scalars = {prob}});
  bump(*this);
  record_fill(OpId::bernoulli_, *this, OpAttrs{.scalars = {prob}});
  return *this;
}

Tensor& Tensor::random_(int64_t from, int64_t to, Generator* gen) {
  OpScope scope(OpId::random_, {this});
  check_defined("random_", *this, "self");
  TS_CHECK(from < to, ValueError, "random_: expects 'from' to be less than 'to', but got from=", from, " >= to=", to);
  const auto [lo, hi] = exact_int_range(dtype());
  TS_CHECK(from >= lo, ValueError, "random_: from=", from, " is out of bounds for dtype ", dtype_name(dtype()),
           " (expected from >= ", lo, ")");
  TS_CHECK(to - 1 <= hi, ValueError, "random_: to - 1 = ", to - 1, " is out of bounds for dtype ", dtype_name(dtype()),
           " (expected to - 1 <= ", hi, ")");
  check_inplace("random_", *this);
  check_writable("random_", *this);
  const uint64_t range = static_cast<uint64_t>(to) - static_cast<uint64_t>(from);
  const PhiloxParams p = reserve_counters(gen, device(), numel(), random_int_words(range));
  random_int_kernel(device(), *this, from, range, p);
  if (capturing() && gen == nullptr) detail::trace_record(OpId::random_, {}, {*this}, OpAttrs{.scalars = {from, to}});
  bump(*this);
  record_fill(OpId::random_, *this, OpAttrs{.scalars = {from, to}});
  return *this;
}

// ---- factories -----------------------------------------------------------------------------------
Tensor rand(const Shape& sizes, TensorOptions opts, Generator* gen) {
  OpScope scope(OpId::rand, {});
  const DType dtype = opts.dtype_or(kFloat32);
  check_floating("rand", dtype);
  Tensor out = make_empty(sizes, dtype, opts.device);
  out.uniform_(0.0, 1.0, gen);
  return out;
}

Tensor randn(const Shape& sizes, TensorOptions opts, Generator* gen) {
  OpScope scope(OpId::randn, {});
  const DType dtype = opts.dtype_or(kFloat32);
  check_floating("randn", dtype);
  Tensor out = make_empty(sizes, dtype, opts.device);
  out.normal_(0.0, 1.0, gen);
  return out;
}

Tensor randint(int64_t low, int64_t high, const Shape& sizes, TensorOptions opts, Generator* gen) {
  OpScope scope(OpId::randint, {});
  TS_CHECK(low < high, ValueError, "randint: expects 'low' to be less than 'high', but got low=", low,
           " >= high=", high);
  Tensor out = make_empty(sizes, opts.dtype_or(kInt64), opts.device);
  out.random_(low, high, gen);
  return out;
}

Tensor randint(int64_t high, const Shape& sizes, TensorOptions opts, Generator* gen) {
  return randint(0, high, sizes, opts, gen);
}

Tensor bernoulli(const Tensor& probs, Generator* gen) {
  OpScope scope(OpId::bernoulli, {&probs});
  check_defined("bernoulli", probs, "p");
  check_floating("bernoulli", probs.dtype());
  Tensor out = make_empty(probs.sizes(), probs.dtype(), probs.device());
  const PhiloxParams p = reserve_counters(gen, probs.device(), out.numel(), kBernoulliWords);
  bernoulli_tensor_kernel(probs.device(), out, probs.contiguous(), p);
  return out;
}

Tensor randperm(int64_t n, TensorOptions opts, Generator* gen) {
  OpScope scope(OpId::randperm, {});
  TS_CHECK(n >= 0, ValueError, "randperm: n must be non-negative, got ", n);
  const DType dtype = opts.dtype_or(kInt64);
  TS_CHECK(dtype != kBool, DTypeError, "randperm: not implemented for dtype bool");
  TS_CHECK(n == 0 || n - 1 <= exact_int_range(dtype).second, ValueError, "randperm: n=", n,
           " is too large for result tensor type ", dtype_name(dtype));
  Tensor out = make_empty({n}, dtype, opts.device);
  const PhiloxParams p = reserve_counters(gen, opts.device, n, kRandpermWords);
  randperm_kernel(opts.device, out, p);
  return out;
}

Tensor multinomial(const Tensor& probs, int64_t num_samples, bool replacement, Generator* gen) {
  OpScope scope(OpId::multinomial, {&probs});
  check_defined("multinomial", probs, "input");
  TS_CHECK(probs.dim() == 1 || probs.dim() == 2, ShapeError, "multinomial: prob_dist must be 1 or 2 dim, got ",
           probs.dim(), " dims (sizes ", probs.sizes(), ")");
  check_floating("multinomial", probs.dtype());
  TS_CHECK(num_samples > 0, ValueError, "multinomial: cannot sample n_sample <= 0 samples, got ", num_samples);
  const int64_t k = probs.size(-1);
  TS_CHECK(k > 0, ValueError, "multinomial: prob_dist has no categories (size of the last dim is 0)");
  TS_CHECK(replacement || num_samples <= k, ValueError, "multinomial: cannot sample n_sample > prob_dist.size(-1) "
           "samples without replacement (n_sample ", num_samples, ", categories ", k, ")");
  const int64_t rows = probs.dim() == 2 ? probs.size(0) : 1;
  Tensor out = make_empty({rows, num_samples}, kInt64, probs.device());
  const PhiloxParams p =
      reserve_counters(gen, probs.device(), rows * (replacement ? num_samples : k), kMultinomialWords);
  if (!probs.is_meta()) {
    Tensor p2 = probs.reshape({rows, k}).to(kFloat64).contiguous();
    multinomial_kernel(probs.device(), out, p2, replacement, p);
  }
  return probs.dim() == 1 ? out.view({num_samples}) : out;
}

}  // namespace tessera
