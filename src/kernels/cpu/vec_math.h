// Branch-free float32 exp, log, tanh, erf, sigmoid, gelu (and a float64 exp) that GCC vectorizes inside
// `#pragma omp simd` loops. libm's scalar calls stop the vectorizer, and PyTorch's CPU kernels use
// SLEEF vectors; these close that gap without a dependency.
//
// Method: Cephes-style range reduction and minimax polynomials. Every special case (nan, +-inf,
// overflow, underflow to denormals and zero, denormal inputs to log) is handled with selects computed
// alongside the main path, never with branches, so a loop calling these is if-converted.
// Accuracy: exp, log, tanh, erf within 1.1 ulp and sigmoid within 2.7 ulp of the correctly rounded
// result over the whole float range; gelu within 1.5e-7 absolute on 1 + erf (see there). Checked
// against float64 in tests/ops/test_unary.cpp.
#pragma once
#include <bit>
#include <cstdint>

// Forced inlining: the vectorizer only sees through calls that are inlined, and these bodies are
// large enough that GCC's heuristics would otherwise keep some as calls. TS_LAMBDA_INLINE goes after
// a lambda's parameter list, for the per-element lambdas of the kernels.
#if defined(__GNUC__)
#define TS_VEC_INLINE inline __attribute__((always_inline))
#define TS_LAMBDA_INLINE __attribute__((always_inline))
#else
#define TS_VEC_INLINE inline
#define TS_LAMBDA_INLINE
#endif

// Note [ISA namespaces] (kernels/cpu/isa_namespace.h): in a dispatched kernel file these are the
// level's own copies. Generated kernels include this text without the build's definitions.
#if defined(TS_CPU_ISA)
namespace tessera::cpu::inline TS_CPU_ISA::vec {
#else
namespace tessera::cpu::vec {
#endif

// Round to nearest even as an integer-valued float, for |x| < 2^22 (the reduced arguments here).
TS_VEC_INLINE float round_magic(float x) {
  const float magic = 12582912.0f;  // 1.5 * 2^23
  return (x + magic) - magic;
}

// 2^k as a float for integer-valued k in [-126, 127].
TS_VEC_INLINE float pow2i(int32_t k) { return std::bit_cast<float>(static_cast<int32_t>((k + 127) << 23)); }

// e^x. Overflows to inf above 88.72, underflows through the denormals to 0 below -103.97.
TS_VEC_INLINE float exp(float x) {
  // Clamp so that n stays in [-150, 128]; the result still over/underflows where it should.
  float xc = x < -104.0f ? -104.0f : x;
  xc = xc > 89.0f ? 89.0f : xc;
  const float n = round_magic(xc * 1.44269504088896341f);
  float r = xc - n * 0.693359375f;  // ln2 split in two so n * hi is exact
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float er = p * (r * r) + r + 1.0f;
  // 2^n in two factors: one factor alone cannot reach the denormals or 2^128.
  const int32_t ni = static_cast<int32_t>(n);
  const int32_t n1 = ni >> 1;
  const float y = er * pow2i(n1) * pow2i(ni - n1);
  return x != x ? x : y;
}

// Natural log. log(0) = -inf, log(x < 0) = nan, log(inf) = inf, log(nan) = nan; denormals are exact.
TS_VEC_INLINE float log(float x) {
  // Scale denormals into the normal range and correct the exponent afterwards.
  const bool tiny = x < 1.17549435e-38f;
  const float xs = tiny ? x * 8388608.0f : x;  // 2^23
  const int32_t bits = std::bit_cast<int32_t>(xs);
  int32_t e = ((bits >> 23) & 0xff) - 126;
  // Mantissa in [0.5, 1).
  float m = std::bit_cast<float>((bits & 0x007fffff) | 0x3f000000);
  const bool small = m < 0.707106781186547524f;
  e = small ? e - 1 : e;
  m = small ? m + m - 1.0f : m - 1.0f;
  const float fe = static_cast<float>(e) - (tiny ? 23.0f : 0.0f);
  const float z = m * m;
  float y = 7.0376836292e-2f;
  y = y * m - 1.1514610310e-1f;
  y = y * m + 1.1676998740e-1f;
  y = y * m - 1.2420140846e-1f;
  y = y * m + 1.4249322787e-1f;
  y = y * m - 1.6668057665e-1f;
  y = y * m + 2.0000714765e-1f;
  y = y * m - 2.4999993993e-1f;
  y = y * m + 3.3333331174e-1f;
  y = y * m * z;
  y = y + fe * -2.12194440e-4f;
  y = y - 0.5f * z;
  float r = m + y + fe * 0.693359375f;
  const float inf = std::bit_cast<float>(0x7f800000);
  r = x == inf ? inf : r;
  r = x == 0.0f ? -inf : r;
  r = (x < 0.0f || x != x) ? std::bit_cast<float>(0x7fc00000) : r;
  return r;
}

// tanh: odd polynomial near 0 (where 1 - 2/(e^2x + 1) would cancel), the exp form elsewhere.
TS_VEC_INLINE float tanh(float x) {
  const float ax = x < 0.0f ? -x : x;
  const float z = x * x;
  float p = -5.70498872745e-3f;
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  const float small = p * z * x + x;
  const float e = exp(2.0f * (ax > 20.0f ? 20.0f : ax));  // tanh(20) is 1 in float
  float large = 1.0f - 2.0f / (e + 1.0f);
  large = x < 0.0f ? -large : large;
  const float r = ax < 0.625f ? small : large;
  return x != x ? x : r;
}

// 1 / (1 + e^-x), as e^x / (1 + e^x) for x < 0 so tiny results keep their relative accuracy.
// 0 at -inf, 1 at inf, nan at nan.
TS_VEC_INLINE float sigmoid(float x) {
  const float e = exp(x < 0.0f ? x : -x);
  const float r = 1.0f / (1.0f + e);
  return x < 0.0f ? e * r : r;
}

// erf: odd polynomial in x for |x| < 0.9277, 1 - e^(poly(|x|)) with the sign of x beyond.
TS_VEC_INLINE float erf(float x) {
  const float t0 = x < 0.0f ? -x : x;
  const float t = t0 > 10.0f ? 10.0f : t0;  // erf is 1 in float well before 10; keeps inf out of the poly
  const float s = x * x;
  // |x| >= 0.9277
  float r = -1.72853470e-5f * t + 3.83197126e-4f;
  const float u = -3.88396438e-3f * t + 2.42546219e-2f;
  r = r * (t * t) + u;
  r = r * t - 1.06777877e-1f;
  r = r * t - 6.34846687e-1f;
  r = r * t - 1.28717512e-1f;
  r = r * t - t;
  float big = 1.0f - exp(r);
  big = x < 0.0f ? -big : big;
  // |x| < 0.9277
  float q = -5.96761703e-4f;
  q = q * s + 4.99119423e-3f;
  q = q * s - 2.67681349e-2f;
  q = q * s + 1.12819925e-1f;
  q = q * s - 3.76125336e-1f;
  q = q * s + 1.28379166e-1f;
  const float small = q * x + x;
  const float res = t0 > 0.927734375f ? big : small;
  return x != x ? x : res;
}

// e^r for r in [-87.3, 0] (no overflow, no nan, no denormal results): the core of exp without its
// special-case selects, for callers that bound the argument themselves.
TS_VEC_INLINE float exp_bounded(float r0) {
  const float xc = r0 < -87.3f ? -87.3f : r0;
  const float n = round_magic(xc * 1.44269504088896341f);
  float r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float er = p * (r * r) + r + 1.0f;
  return er * pow2i(static_cast<int32_t>(n));
}

// gelu(x) = x/2 * (1 + erf(x / sqrt 2)), with 1 + erf written through erfc(|a|) = k * P(k) * e^(-a^2),
// k = 1 / (1 + p|a|) (Abramowitz & Stegun 7.1.26, the form PyTorch's vectorized GELU uses): 1 + erf
// is erfc(|a|) for a < 0 and 2 - erfc(|a|) otherwise, so negative x has no cancellation. Absolute
// error of 1 + erf is below 1.5e-7, so gelu is within 1e-5 + 1.3e-6 |gelu| everywhere (checked over
// the float range) at 60% of the cost of going through erf() above. nan propagates; +inf gives inf
// and -inf nan, as in PyTorch.
TS_VEC_INLINE float gelu(float x) {
  const float a = x * 0.70710678118654752440f;
  const float t0 = a < 0.0f ? -a : a;
  const float k = 1.0f / (1.0f + 0.3275911f * t0);
  float p = 1.061405429f * k - 1.453152027f;
  p = p * k + 1.421413741f;
  p = p * k - 0.284496736f;
  p = p * k + 0.254829592f;
  p = p * k;
  const float e = p * exp_bounded(-(a * a));  // erfc(|a|); exp_bounded's floor leaves it below 1e-38
  return 0.5f * x * (a < 0.0f ? e : 2.0f - e);
}

// Cephes exp for float64 (Pade form), same special-case handling as the float version.
TS_VEC_INLINE double exp(double x) {
  double xc = x < -745.2 ? -745.2 : x;
  xc = xc > 709.9 ? 709.9 : xc;
  const double magic = 6755399441055744.0;  // 1.5 * 2^52
  const double n = ((xc * 1.4426950408889634074) + magic) - magic;
  double r = xc - n * 6.93145751953125e-1;
  r = r - n * 1.42860682030941723212e-6;
  const double rr = r * r;
  double p = 1.26177193074810590878e-4;
  p = p * rr + 3.02994407707441961300e-2;
  p = p * rr + 9.99999999999999999910e-1;
  p = p * r;
  double q = 3.00198505138664455042e-6;
  q = q * rr + 2.52448340349684104192e-3;
  q = q * rr + 2.27265548208155028766e-1;
  q = q * rr + 2.00000000000000000009e0;
  const double er = 1.0 + 2.0 * p / (q - p);
  const int64_t ni = static_cast<int64_t>(n);
  const int64_t n1 = ni >> 1;
  const double f1 = std::bit_cast<double>(static_cast<int64_t>((n1 + 1023) << 52));
  const double f2 = std::bit_cast<double>(static_cast<int64_t>((ni - n1 + 1023) << 52));
  const double y = er * f1 * f2;
  return x != x ? x : y;
}

}  // namespace tessera::cpu::vec
