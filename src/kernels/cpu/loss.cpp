// CPU cross-entropy fused with log_softmax: the slots of ops/loss_kernel.h (formulas and invariants
// there). x is contiguous (M, C); one row per iteration, rows in parallel. Each row is computed by one
// thread with a fixed order of operations, so results do not depend on the thread count.
//
// Forward, per row (A = float, or double for float64 logits): m = max_c x_c; s = sum_c e^(x_c - m);
// lse = m + log(s); the nll term is (m - x_t) + log(s) rather than lse - x_t, which would round
// log(s) at lse's scale; the smoothing sum is W * log(s) + sum_c w_c (m - x_c), a sum of non-negative
// terms. Three passes over the row (max; exp-sum; the smoothing sum only when ls > 0), all from cache.
// Backward, per row: dx_c = a * e^(x_c - lse) - b * w_c, with a = g ((1 - ls) w_t + (ls / C) W) and
// b = g ls / C, minus g (1 - ls) w_t at c == t.
// A NaN in a row makes its loss NaN; a row of -inf gives NaN (as log_softmax does).
#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/vec_math.h"
#include "ops/loss_kernel.h"
#include "tensor/dispatch_dtype.h"

namespace tessera::cpu::inline TS_CPU_ISA {  // Note [ISA namespaces]
namespace {

inline float k_exp(float v) { return vec::exp(v); }
inline double k_exp(double v) { return vec::exp(v); }

// Parallel only when the work pays for the threads.
bool worth_parallel(int64_t m, int64_t c) { return m > 1 && m * c > 16384; }

template <class T>
void ce_forward_rows(acc_t<T>* loss, acc_t<T>* lse, const T* x, const int64_t* target, const acc_t<T>* w,
                     int64_t M, int64_t C, const CrossEntropyParams& p) {
  using A = acc_t<T>;
  const double ls = p.label_smoothing;
  const A keep = static_cast<A>(1.0 - ls);
  const A smooth = C > 0 ? static_cast<A>(ls / static_cast<double>(C)) : A(0);
  int64_t first_bad = std::numeric_limits<int64_t>::max();
#pragma omp parallel for schedule(static) reduction(min : first_bad) if (worth_parallel(M, C))
  for (int64_t r = 0; r < M; ++r) {
    const T* xr = x + r * C;
    A m = -std::numeric_limits<A>::infinity();
#pragma omp simd reduction(max : m)
    for (int64_t i = 0; i < C; ++i) m = std::max(m, static_cast<A>(xr[i]));
    A s = 0;
#pragma omp simd reduction(+ : s)
    for (int64_t i = 0; i < C; ++i) s += k_exp(static_cast<A>(xr[i]) - m);
    const A log_s = std::log(s);
    lse[r] = m + log_s;
    const int64_t t = target[r];
    if (t == p.ignore_index) {
      loss[r] = 0;
      continue;
    }
    if (t < 0 || t >= (p.classes < 0 ? C : p.classes)) {
      first_bad = std::min(first_bad, r);
      loss[r] = 0;
      continue;
    }
    const A wt = w != nullptr ? w[t] : A(1);
    A l = keep * wt * ((m - static_cast<A>(xr[t])) + log_s);
    if (ls > 0) {
      A sum = 0, wsum = 0;
      if (w != nullptr) {
#pragma omp simd reduction(+ : sum, wsum)
        for (int64_t i = 0; i < C; ++i) {
          sum += w[i] * (m - static_cast<A>(xr[i]));
          wsum += w[i];
        }
      } else {
#pragma omp simd reduction(+ : sum)
        for (int64_t i = 0; i < C; ++i) sum += m - static_cast<A>(xr[i]);
        wsum = static_cast<A>(C);
      }
      l += smooth * (wsum * log_s + sum);
    }
    loss[r] = l;
  }
  if (first_bad != std::numeric_limits<int64_t>::max())
    TS_THROW(IndexError, "cross_entropy: Target ", target[first_bad], " is out of bounds.");
}

template <class T>
void ce_backward_rows(T* dx, const acc_t<T>* grad, const T* x, const int64_t* target, const acc_t<T>* w,
                      const acc_t<T>* weight_sum, const acc_t<T>* lse, int64_t M, int64_t C,
                      const CrossEntropyParams& p) {
  using A = acc_t<T>;
  const double ls = p.label_smoothing;
  const A keep = static_cast<A>(1.0 - ls);
  const A smooth = static_cast<A>(ls / static_cast<double>(C));  // C > 0 (the op skips C == 0)
  const A wtotal = ls > 0 ? (w != nullptr ? *weight_sum : static_cast<A>(C)) : A(0);
#pragma omp parallel for schedule(static) if (worth_parallel(M, C))
  for (int64_t r = 0; r < M; ++r) {
    const T* xr = x + r * C;
    T* dr = dx + r * C;
    const int64_t t = target[r];
    if (t == p.ignore_index || t < 0 || t >= (p.classes < 0 ? C : p.classes)) {
#pragma omp simd
      for (int64_t i = 0; i < C; ++i) dr[i] = static_cast<T>(A(0));
      continue;
    }
    const A g = grad[r], L = lse[r];
    const A wt = w != nullptr ? w[t] : A(1);
    const A a = g * (keep * wt + (ls > 0 ? smooth * wtotal : A(0)));
    const A b = ls > 0 ? g * smooth : A(0);
    if (w != nullptr && ls > 0) {
#pragma omp simd
      for (int64_t i = 0; i < C; ++i) dr[i] = static_cast<T>(a * k_exp(static_cast<A>(xr[i]) - L) - b * w[i]);
    } else {
#pragma omp simd
      for (int64_t i = 0; i < C; ++i) dr[i] = static_cast<T>(a * k_exp(static_cast<A>(xr[i]) - L) - b);
    }
    const A bt = w != nullptr ? b * wt : b;
    dr[t] = static_cast<T>(a * k_exp(static_cast<A>(xr[t]) - L) - bt - g * keep * wt);
  }
}

void cross_entropy_forward_cpu(const Tensor& loss, const Tensor& lse, const Tensor& x, const Tensor& target,
                               const Tensor& weight, const CrossEntropyParams& p) {
  const int64_t M = x.size(0), C = x.size(1);
  if (M == 0) return;
  dispatch_floating(x.dtype(), "cross_entropy", [&]<class T>(TypeTag<T>) {
    using A = acc_t<T>;
    ce_forward_rows<T>(static_cast<A*>(loss.data_ptr()), static_cast<A*>(lse.data_ptr()),
                       static_cast<const T*>(x.data_ptr()), static_cast<const int64_t*>(target.data_ptr()),
                       weight.defined() ? static_cast<const A*>(weight.data_ptr()) : nullptr, M, C, p);
  });
}

void cross_entropy_backward_cpu(const Tensor& dx, const Tensor& grad, const Tensor& x, const Tensor& target,
                                const Tensor& weight, const Tensor& weight_sum, const Tensor& lse,
                                const CrossEntropyParams& p) {
  const int64_t M = x.size(0), C = x.size(1);
  if (M == 0 || C == 0) return;
  dispatch_floating(x.dtype(), "cross_entropy_backward", [&]<class T>(TypeTag<T>) {
    using A = acc_t<T>;
    ce_backward_rows<T>(static_cast<T*>(dx.data_ptr()), static_cast<const A*>(grad.data_ptr()),
                        static_cast<const T*>(x.data_ptr()), static_cast<const int64_t*>(target.data_ptr()),
                        weight.defined() ? static_cast<const A*>(weight.data_ptr()) : nullptr,
                        weight_sum.defined() ? static_cast<const A*>(weight_sum.data_ptr()) : nullptr,
                        static_cast<const A*>(lse.data_ptr()), M, C, p);
  });
}

}  // namespace

void register_loss() {
  cross_entropy_forward_kernel.set(DeviceType::CPU, &cross_entropy_forward_cpu);
  cross_entropy_backward_kernel.set(DeviceType::CPU, &cross_entropy_backward_cpu);
}

}  // namespace tessera::cpu::TS_CPU_ISA
