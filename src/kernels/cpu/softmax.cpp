// CPU softmax and log_softmax over the middle dim of a contiguous (outer, dim_size, inner) view.
//
// Numerically stable: the row maximum is subtracted before exponentiating, so no finite input
// overflows. Accumulation is in acc_t<T> (float for the 16-bit floats). Two paths:
// - inner == 1 (softmax over the last dim): one row per iteration, parallel over rows, each pass a
//   `#pragma omp simd` loop; float32 stores e^(x - max) once and rescales it in place.
// - inner > 1: a strided loop over the reduced dim that keeps per-column max and sum for a block of
//   contiguous columns, so the innermost loop still runs over contiguous memory and vectorizes.
// A row containing nan gives nan; a row of all -inf gives nan, as in PyTorch.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/elementwise_register.h"
#include "kernels/cpu/vec_math.h"
#include "ops/elementwise_kernel.h"
#include "tensor/dispatch_dtype.h"

namespace tessera::cpu::inline TS_CPU_ISA {  // Note [ISA namespaces]
namespace {

inline float k_exp(float v) { return vec::exp(v); }
inline double k_exp(double v) { return vec::exp(v); }

template <class T>
void softmax_lastdim(T* out, const T* x, int64_t rows, int64_t n, bool log) {
  using A = acc_t<T>;
  const bool parallel = rows > 1 && rows * n > 16384;
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * n;
    T* o = out + r * n;
    A m = -std::numeric_limits<A>::infinity();
#pragma omp simd reduction(max : m)
    for (int64_t i = 0; i < n; ++i) m = std::max(m, static_cast<A>(xr[i]));
    A s = 0;
    if constexpr (std::is_same_v<T, A>) {
      if (!log) {
#pragma omp simd reduction(+ : s)
        for (int64_t i = 0; i < n; ++i) {
          const A e = k_exp(xr[i] - m);
          o[i] = e;
          s += e;
        }
        const A inv = A(1) / s;
#pragma omp simd
        for (int64_t i = 0; i < n; ++i) o[i] = o[i] * inv;
        continue;
      }
    }
#pragma omp simd reduction(+ : s)
    for (int64_t i = 0; i < n; ++i) s += k_exp(static_cast<A>(xr[i]) - m);
    if (log) {
      // (x - max) - log(sum), not x - (max + log(sum)): the latter rounds log(sum) at max's scale.
      const A lse = std::log(s);
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) o[i] = static_cast<T>((static_cast<A>(xr[i]) - m) - lse);
    } else {
      const A inv = A(1) / s;
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) o[i] = static_cast<T>(k_exp(static_cast<A>(xr[i]) - m) * inv);
    }
  }
}

template <class T>
void softmax_strided(T* out, const T* x, int64_t outer, int64_t dim, int64_t inner, bool log) {
  using A = acc_t<T>;
  constexpr int64_t kBlock = 512;
  const int64_t blocks = (inner + kBlock - 1) / kBlock;
  const int64_t tasks = outer * blocks;
  const bool parallel = tasks > 1 && outer * dim * inner > 16384;
#pragma omp parallel if (parallel)
  {
    std::vector<A> mx(kBlock), sum(kBlock);
#pragma omp for schedule(static)
    for (int64_t t = 0; t < tasks; ++t) {
      const int64_t o = t / blocks, j0 = (t % blocks) * kBlock, nj = std::min(kBlock, inner - j0);
      const T* xb = x + o * dim * inner + j0;
      T* ob = out + o * dim * inner + j0;
      A* m = mx.data();
      A* s = sum.data();
      for (int64_t j = 0; j < nj; ++j) m[j] = -std::numeric_limits<A>::infinity(), s[j] = 0;
      for (int64_t k = 0; k < dim; ++k) {
        const T* xr = xb + k * inner;
#pragma omp simd
        for (int64_t j = 0; j < nj; ++j) m[j] = std::max(m[j], static_cast<A>(xr[j]));
      }
      for (int64_t k = 0; k < dim; ++k) {
        const T* xr = xb + k * inner;
#pragma omp simd
        for (int64_t j = 0; j < nj; ++j) s[j] += k_exp(static_cast<A>(xr[j]) - m[j]);
      }
      if (log) {
        for (int64_t j = 0; j < nj; ++j) s[j] = std::log(s[j]);
      } else {
        for (int64_t j = 0; j < nj; ++j) s[j] = A(1) / s[j];
      }
      for (int64_t k = 0; k < dim; ++k) {
        const T* xr = xb + k * inner;
        T* orow = ob + k * inner;
        if (log) {
#pragma omp simd
          for (int64_t j = 0; j < nj; ++j) orow[j] = static_cast<T>((static_cast<A>(xr[j]) - m[j]) - s[j]);
        } else {
#pragma omp simd
          for (int64_t j = 0; j < nj; ++j) orow[j] = static_cast<T>(k_exp(static_cast<A>(xr[j]) - m[j]) * s[j]);
        }
      }
    }
  }
}

void softmax_cpu(const Tensor& out, const Tensor& x, int64_t outer, int64_t dim, int64_t inner, bool log) {
  if (out.numel() == 0) return;
  dispatch_floating(x.dtype(), log ? "log_softmax" : "softmax", [&]<class T>(TypeTag<T>) {
    const T* xp = static_cast<const T*>(x.data_ptr());
    T* op = static_cast<T*>(out.data_ptr());
    if (inner == 1) softmax_lastdim<T>(op, xp, outer, dim, log);
    else softmax_strided<T>(op, xp, outer, dim, inner, log);
  });
}

}  // namespace

void register_softmax() { softmax_kernel.set(DeviceType::CPU, &softmax_cpu); }

void register_elementwise() {
  register_unary();
  register_binary();
  register_ternary();
  register_softmax();
}

}  // namespace tessera::cpu::TS_CPU_ISA
