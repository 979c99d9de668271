// Device math of the elementwise ops on the accumulate type A (float for float16/bfloat16/float32,
// double for float64, the integer type itself for integers), one function per formula so that
// unary.cu, binary.cu and ternary.cu compute exactly what the CPU kernels compute (kernels/cpu/
// unary.cpp, binary.cpp, ternary.cpp are the reference: same formulas, same NaN and sign rules).
// The precise CUDA math functions are used throughout (no fast-math), except where noted.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <limits>
#include <type_traits>

namespace tessera::cuda::dm {

#define TS_DM_FN1(name, ffn, dfn)                                           \
  __device__ __forceinline__ float name(float x) { return ffn(x); }        \
  __device__ __forceinline__ double name(double x) { return dfn(x); }
TS_DM_FN1(exp, expf, ::exp)
TS_DM_FN1(exp2, exp2f, ::exp2)
TS_DM_FN1(log, logf, ::log)
TS_DM_FN1(log2, log2f, ::log2)
TS_DM_FN1(log1p, log1pf, ::log1p)
TS_DM_FN1(expm1, expm1f, ::expm1)
TS_DM_FN1(sqrt, sqrtf, ::sqrt)
TS_DM_FN1(sin, sinf, ::sin)
TS_DM_FN1(cos, cosf, ::cos)
TS_DM_FN1(tan, tanf, ::tan)
TS_DM_FN1(tanh, tanhf, ::tanh)
TS_DM_FN1(erf, erff, ::erf)
TS_DM_FN1(fabs, fabsf, ::fabs)
TS_DM_FN1(floor, floorf, ::floor)
TS_DM_FN1(ceil, ceilf, ::ceil)
TS_DM_FN1(rint, rintf, ::rint)  // round half to even, as the CPU's nearbyint in the default mode
TS_DM_FN1(trunc, truncf, ::trunc)
#undef TS_DM_FN1
#define TS_DM_FN2(name, ffn, dfn)                                                     \
  __device__ __forceinline__ float name(float x, float y) { return ffn(x, y); }      \
  __device__ __forceinline__ double name(double x, double y) { return dfn(x, y); }
TS_DM_FN2(pow, powf, ::pow)
TS_DM_FN2(fmod, fmodf, ::fmod)
TS_DM_FN2(atan2, atan2f, ::atan2)
TS_DM_FN2(copysign, copysignf, ::copysign)
#undef TS_DM_FN2

template <class A>
__device__ __forceinline__ A inf() {
  return std::numeric_limits<A>::infinity();
}

// 1 / (1 + e^-x), as e^x / (1 + e^x) for x < 0 so that tiny results keep their relative accuracy.
template <class A>
__device__ __forceinline__ A sigmoid(A x) {
  const A e = exp(x < A(0) ? x : -x);
  const A r = A(1) / (A(1) + e);
  return x < A(0) ? e * r : r;
}

// gelu(x) = x Phi(x), Phi(x) = (1 + erf(x / sqrt 2)) / 2. float: the CPU's float formula (vec_math.h
// gelu: erfc(|a|) = k P(k) e^(-a^2), k = 1 / (1 + p|a|), a = x / sqrt 2, Abramowitz & Stegun 7.1.26;
// Phi = erfc(|a|) / 2 for x < 0, 1 - erfc(|a|) / 2 otherwise), branch-free and without cancellation for
// x < 0; its own error is below 1.5e-7 absolute on 1 + erf. Arranged for few instructions, since a
// bfloat16 gelu reads and writes two bytes per element and the erf must hide behind that (about 15
// instructions, 2 of them MUFU): with b = |x| sqrt(log2(e) / 2), e^(-a^2) = 2^(-b^2) and p|a| = p'b;
// the 1/2 of Phi is folded into P's coefficients; the reciprocal and the power of 2 are the
// hardware's approximations (rcp.approx, ex2.approx: relative errors ~2^-22, small against the
// formula's). -inf gives nan and +inf gives inf, as on the CPU.
// double: the erf form, as the CPU's double gelu.
namespace gelu_detail {
constexpr double kC = 0.84932180028801904272;         // sqrt(log2(e) / 2)
constexpr double kP = 0.3275911 / (kC * 1.41421356237309504880);  // p' = p / (c sqrt 2)
}  // namespace gelu_detail
__device__ __forceinline__ float rcp_approx(float x) {
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}
__device__ __forceinline__ float exp2_approx(float x) {
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}
__device__ __forceinline__ float gelu(float x) {
  const float b = fabsf(x) * static_cast<float>(gelu_detail::kC);
  const float k = rcp_approx(fmaf(static_cast<float>(gelu_detail::kP), b, 1.0f));
  float q = fmaf(0.5f * 1.061405429f, k, 0.5f * -1.453152027f);  // P / 2, Horner in k
  q = fmaf(q, k, 0.5f * 1.421413741f);
  q = fmaf(q, k, 0.5f * -0.284496736f);
  q = fmaf(q, k, 0.5f * 0.254829592f);
  const float h = q * (k * exp2_approx(-(b * b)));  // erfc(|a|) / 2
  return x * (x < 0.0f ? h : 1.0f - h);
}
__device__ __forceinline__ double gelu(double x) { return 0.5 * x * (1.0 + ::erf(x * 0.70710678118654752440)); }

template <class A>
__device__ __forceinline__ A gelu_tanh(A v) {
  const A inner = A(0.79788456080286535588) * (v + A(0.044715) * v * v * v);
  return A(0.5) * v * (A(1) + tanh(inner));
}

// NaN-propagating maximum and minimum (the first NaN wins), as the CPU's.
template <class A>
__device__ __forceinline__ A nan_max(A x, A y) {
  if constexpr (std::is_floating_point_v<A>) return x != x ? x : (y != y ? y : (x > y ? x : y));
  else return x > y ? x : y;
}
template <class A>
__device__ __forceinline__ A nan_min(A x, A y) {
  if constexpr (std::is_floating_point_v<A>) return x != x ? x : (y != y ? y : (x < y ? x : y));
  else return x < y ? x : y;
}

// Python's floor division for floats, as PyTorch's div_floor_floating (exact where a / b rounds).
template <class A>
__device__ __forceinline__ A div_floor_float(A a, A b) {
  if (b == A(0)) return a / b;
  const A mod = fmod(a, b);
  A div = (a - mod) / b;
  if (mod != A(0) && (b < A(0)) != (mod < A(0))) div -= A(1);
  if (div == A(0)) return copysign(A(0), a / b);
  A fl = floor(div);
  if (div - fl > A(0.5)) fl += A(1);
  return fl;
}

// Python's remainder for floats: the sign of the divisor.
template <class A>
__device__ __forceinline__ A remainder_float(A x, A y) {
  A m = fmod(x, y);
  if (m != A(0) && ((y < A(0)) != (m < A(0)))) m += y;
  return m;
}

// Integer power by squaring, wrapping on overflow; negative exponents give 1, +-1 or 0 (PyTorch).
template <class T>
__device__ __forceinline__ T int_pow(T base, T exp) {
  if constexpr (std::is_signed_v<T>) {
    if (exp < 0) {
      if (base == 1) return 1;
      if (base == -1) return (exp & 1) ? T(-1) : T(1);
      return 0;
    }
  }
  using U = std::make_unsigned_t<T>;
  U r = 1, bb = static_cast<U>(base);
  T e = exp;
  while (e) {
    if (e & 1) r = static_cast<U>(r * bb);
    e = static_cast<T>(e >> 1);
    bb = static_cast<U>(bb * bb);
  }
  return static_cast<T>(r);
}

// PyTorch's lerp: exact at weight 0 and at weight 1.
template <class A>
__device__ __forceinline__ A lerp(A s, A e, A w) {
  return (w < A(0) ? -w : w) < A(0.5) ? s + w * (e - s) : e - (e - s) * (A(1) - w);
}

}  // namespace tessera::cuda::dm
