// CPU kernels of the optim family (ops/optim_kernel.h): fused SGD and Adam/AdamW updates.
//
// One pass over each parameter: every element reads param, grad and its state once and writes param
// and state once. The arithmetic is done in the parameter's dtype T, op by op in PyTorch's order, each
// hyperparameter rounded to T as PyTorch's tensor-scalar ops round it. PyTorch's CPU add(alpha=) and
// addcmul compute a * b + c with one fused multiply-add (vec::fmadd, and the compiler's contraction in
// its scalar path); this file does those two explicitly with std::fma and lets no other expression be
// contracted, so float32 and float64 results are PyTorch 1.13's bit for bit (the conformance test,
// tests/optim/test_torch_reference.cpp, reports the differences). Large tensors are split over
// OpenMP threads in static chunks, each chunk a vectorized loop.
#include <cmath>
#include <cstdint>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/vec_math.h"
#include "ops/optim_kernel.h"
#include "tessera/error.h"

// Every multiply and add rounds on its own unless written as std::fma (see above).
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

namespace tessera::cpu::inline TS_CPU_ISA {  // Note [ISA namespaces]
namespace {

// Elements below which a tensor is updated by one thread (a fork costs more than the work).
constexpr int64_t kParallelGrain = 32768;

void check_entry(const char* op, const Tensor& param, const Tensor& other, const char* what) {
  TS_CHECK(other.dtype() == param.dtype() && other.sizes() == param.sizes() && other.is_contiguous(), ValueError,
           op, " kernel: ", what, " must be a contiguous tensor of the parameter's dtype (", dtype_name(param.dtype()),
           ") and sizes ", param.sizes(), ", got dtype ", dtype_name(other.dtype()), " and sizes ", other.sizes());
}

// Runs f(i) over [0, n), over threads when n is large. f is inlined into a loop the compiler
// vectorizes: the flags that select a variant are template parameters, not branches in the loop.
template <class F>
inline void for_each_element(int64_t n, const F& f) {
#pragma omp parallel if (n >= kParallelGrain)
  {
    // Each thread's own copy keeps the captured pointers and scalars in registers: loads through the
    // shared closure inside the loop would block vectorization.
    const F local = f;
#pragma omp for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) local(i);
  }
}

// PyTorch's self.add(other, alpha=alpha): one fused multiply-add.
template <class T>
inline T add_scaled(T self, T other, T alpha) {
  return std::fma(other, alpha, self);
}

template <class T, bool kMomentum, bool kNewBuffer>
void sgd_loop(T* __restrict p, const T* __restrict g, T* __restrict b, int64_t n, const SGDKernelParams& o) {
  const T wd = static_cast<T>(o.weight_decay), mom = static_cast<T>(o.momentum);
  const T damp1 = static_cast<T>(1 - o.dampening), neg_lr = static_cast<T>(-o.lr);
  const bool use_wd = o.weight_decay != 0, maximize = o.maximize, nesterov = o.nesterov;
  for_each_element(n, [=](int64_t i) TS_LAMBDA_INLINE {
    T d = maximize ? -g[i] : g[i];
    if (use_wd) d = add_scaled(d, p[i], wd);
    if constexpr (kMomentum) {
      // The first step copies d into the buffer (PyTorch's clone), without the dampening.
      T buf;
      if constexpr (kNewBuffer) buf = d;
      else buf = add_scaled(b[i] * mom, d, damp1);
      b[i] = buf;
      d = nesterov ? add_scaled(d, buf, mom) : buf;
    }
    p[i] = add_scaled(p[i], d, neg_lr);
  });
}

template <class T>
void sgd_one(const Tensor& param, const Tensor& grad, const Tensor* buffer, bool new_buffer, const SGDKernelParams& o) {
  T* p = param.data_ptr<T>();
  const T* g = grad.data_ptr<T>();
  const int64_t n = param.numel();
  if (!buffer) sgd_loop<T, false, false>(p, g, nullptr, n, o);
  else if (new_buffer) sgd_loop<T, true, true>(p, g, buffer->data_ptr<T>(), n, o);
  else sgd_loop<T, true, false>(p, g, buffer->data_ptr<T>(), n, o);
}

void sgd_cpu(const TensorList& params, const TensorList& grads, const TensorList& buffers,
             const std::vector<uint8_t>& new_buffer, const SGDKernelParams& o) {
  const bool momentum = o.momentum != 0;
  TS_CHECK(grads.size() == params.size() && (!momentum || (buffers.size() == params.size() &&
                                                           new_buffer.size() == params.size())),
           ValueError, "sgd kernel: expected one gradient", momentum ? " and one momentum buffer" : "",
           " per parameter (", params.size(), " parameters)");
  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor& p = params[i];
    TS_CHECK(p.is_contiguous(), ValueError, "sgd kernel: the parameter must be contiguous");
    check_entry("sgd", p, grads[i], "the gradient");
    const Tensor* buf = momentum ? &buffers[i] : nullptr;
    if (buf) check_entry("sgd", p, *buf, "the momentum buffer");
    const bool fresh = momentum && new_buffer[i] != 0;
    switch (p.dtype()) {
      case DType::Float32: sgd_one<float>(p, grads[i], buf, fresh, o); break;
      case DType::Float64: sgd_one<double>(p, grads[i], buf, fresh, o); break;
      default: TS_THROW(DTypeError, "sgd kernel: expected float32 or float64 parameters, got ", dtype_name(p.dtype()));
    }
  }
}

template <class T, bool kAmsgrad, bool kDecoupled>
void adam_loop(T* __restrict p, const T* __restrict g, T* __restrict m, T* __restrict v, T* __restrict vmax, int64_t n,
               int64_t step, const AdamKernelParams& o) {
  // Scalars as PyTorch's Python side computes them (float64), then rounded to T by the tensor ops.
  const double bias_correction1 = 1 - std::pow(o.beta1, static_cast<double>(step));
  const double bias_correction2 = 1 - std::pow(o.beta2, static_cast<double>(step));
  const T neg_step_size = static_cast<T>(-(o.lr / bias_correction1));
  const T bc2_sqrt = static_cast<T>(std::sqrt(bias_correction2));
  const T b1 = static_cast<T>(o.beta1), one_minus_b1 = static_cast<T>(1 - o.beta1);
  const T b2 = static_cast<T>(o.beta2), one_minus_b2 = static_cast<T>(1 - o.beta2);
  const T eps = static_cast<T>(o.eps), wd = static_cast<T>(o.weight_decay);
  const T decay = static_cast<T>(1 - o.lr * o.weight_decay);
  const bool l2 = !kDecoupled && o.weight_decay != 0, maximize = o.maximize;
  for_each_element(n, [=](int64_t i) TS_LAMBDA_INLINE {
    T pi = p[i];
    T gi = maximize ? -g[i] : g[i];
    if constexpr (kDecoupled) pi = pi * decay;
    if (l2) gi = add_scaled(gi, pi, wd);
    const T mi = add_scaled(m[i] * b1, gi, one_minus_b1);
    const T vi = std::fma(one_minus_b2 * gi, gi, v[i] * b2);  // addcmul: self + (value * t1) * t2
    m[i] = mi;
    v[i] = vi;
    T s = vi;
    if constexpr (kAmsgrad) {
      // torch.maximum: a NaN in either operand wins.
      const T prev = vmax[i];
      s = (vi > prev || vi != vi) ? vi : prev;
      vmax[i] = s;
    }
    const T denom = std::sqrt(s) / bc2_sqrt + eps;
    p[i] = pi + neg_step_size * mi / denom;
  });
}

template <class T>
void adam_one(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
              const Tensor* max_exp_avg_sq, int64_t step, const AdamKernelParams& o) {
  T* p = param.data_ptr<T>();
  const T* g = grad.data_ptr<T>();
  T* m = exp_avg.data_ptr<T>();
  T* v = exp_avg_sq.data_ptr<T>();
  T* vmax = max_exp_avg_sq ? max_exp_avg_sq->data_ptr<T>() : nullptr;
  const int64_t n = param.numel();
  const bool decoupled = o.decoupled_weight_decay;
  if (vmax && decoupled) adam_loop<T, true, true>(p, g, m, v, vmax, n, step, o);
  else if (vmax) adam_loop<T, true, false>(p, g, m, v, vmax, n, step, o);
  else if (decoupled) adam_loop<T, false, true>(p, g, m, v, vmax, n, step, o);
  else adam_loop<T, false, false>(p, g, m, v, vmax, n, step, o);
}

void adam_cpu(const TensorList& params, const TensorList& grads, const TensorList& exp_avgs,
              const TensorList& exp_avg_sqs, const TensorList& max_exp_avg_sqs, const std::vector<int64_t>& steps,
              const AdamKernelParams& o) {
  const size_t n = params.size();
  TS_CHECK(grads.size() == n && exp_avgs.size() == n && exp_avg_sqs.size() == n && steps.size() == n &&
               (!o.amsgrad || max_exp_avg_sqs.size() == n),
           ValueError, "adam kernel: expected one gradient, exp_avg, exp_avg_sq",
           o.amsgrad ? ", max_exp_avg_sq" : "", " and step per parameter (", n, " parameters)");
  for (size_t i = 0; i < n; ++i) {
    const Tensor& p = params[i];
    TS_CHECK(p.is_contiguous(), ValueError, "adam kernel: the parameter must be contiguous");
    TS_CHECK(steps[i] >= 1, ValueError, "adam kernel: expected a step count >= 1, got ", steps[i]);
    check_entry("adam", p, grads[i], "the gradient");
    check_entry("adam", p, exp_avgs[i], "exp_avg");
    check_entry("adam", p, exp_avg_sqs[i], "exp_avg_sq");
    const Tensor* vmax = o.amsgrad ? &max_exp_avg_sqs[i] : nullptr;
    if (vmax) check_entry("adam", p, *vmax, "max_exp_avg_sq");
    switch (p.dtype()) {
      case DType::Float32: adam_one<float>(p, grads[i], exp_avgs[i], exp_avg_sqs[i], vmax, steps[i], o); break;
      case DType::Float64: adam_one<double>(p, grads[i], exp_avgs[i], exp_avg_sqs[i], vmax, steps[i], o); break;
      default: TS_THROW(DTypeError, "adam kernel: expected float32 or float64 parameters, got ", dtype_name(p.dtype()));
    }
  }
}

}  // namespace

void register_optim() {
  sgd_kernel.set(DeviceType::CPU, &sgd_cpu);
  adam_kernel.set(DeviceType::CPU, &adam_cpu);
}

}  // namespace tessera::cpu::TS_CPU_ISA
