// The element arithmetic of the random family: how an element's Philox words become its value. Host
// and device functions, so that the CUDA kernels and kernels/cpu/random.cpp agree by construction
// and a host build can check the formulas against the CPU kernels. No kernels here.
//
// Note [Random rounding]: the CPU kernels are built with GCC at -O3 for x86-64-v3, which contracts
// `a + b * c` into one fused multiply-add (C++ allows it; the CPU file does not switch it off). So the
// CPU computes uniform's `from + range * u` and normal's `mean + std * z` with one rounding. The
// kernels here write those two as explicit fmas and every other product as a separately rounded
// multiply, so nvcc's own contraction cannot change a bit:
//   * uniform, bernoulli, random_int, randperm, multinomial with replacement: the same bits as the
//     CPU in every dtype (only IEEE add/multiply/fma/divide, comparisons and integer arithmetic).
//   * normal: sqrt is correctly rounded on both sides, but log1p and cos come from two libraries
//     (glibc and CUDA's libdevice, documented at 1-2 ulp): float32/float64 values agree to a few ulp
//     (most bit for bit); float16/bfloat16, rounded once from float, agree bit for bit except where
//     that float lands next to a rounding boundary (then one 16-bit ulp).
//   * multinomial without replacement: the keys p / -log1p(-u) agree to an ulp; the samples are the
//     same unless two keys of a row fall within an ulp of each other.
#pragma once
#include <cmath>
#include <cstdint>

#include "kernels/cuda/exact_arith.cuh"
#include "runtime/philox.h"

namespace tessera::cuda::rnd {

inline constexpr double kTwoPi = 6.283185307179586476925286766559;  // as kernels/cpu/random.cpp

using namespace exact;  // fma_rn, mul_rn, div_rn, sqrt_rn (exact_arith.cuh)

// The two library functions (Note [Random rounding]: not bit-identical across host and device).
TS_HOST_DEVICE double log1p_(double a) {
#if defined(__CUDA_ARCH__)
  return ::log1p(a);
#else
  return std::log1p(a);
#endif
}
TS_HOST_DEVICE float log1p_(float a) {
#if defined(__CUDA_ARCH__)
  return ::log1pf(a);
#else
  return std::log1p(a);
#endif
}
TS_HOST_DEVICE double cos_(double a) {
#if defined(__CUDA_ARCH__)
  return ::cos(a);
#else
  return std::cos(a);
#endif
}
TS_HOST_DEVICE float cos_(float a) {
#if defined(__CUDA_ARCH__)
  return ::cosf(a);
#else
  return std::cos(a);
#endif
}

// ---- the transforms (Note [Philox stream] for which words each element takes) ---------------------
// uniform_: from + range * u in float64, one rounding (Note [Random rounding]); the caller rounds the
// result to the output dtype and clamps below `to`.
TS_HOST_DEVICE double uniform_value(double from, double range, double u) { return fma_rn(range, u, from); }
TS_HOST_DEVICE double unit_uniform_1word(uint32_t w) { return static_cast<double>(uint_to_unit_float(w)); }
TS_HOST_DEVICE double unit_uniform_2words(uint32_t a, uint32_t b) { return uint2_to_unit_double(a, b); }

// Box-Muller, cosine branch, in float for every dtype but float64: sqrt(-2 ln(1 - u1)) cos(2 pi u2).
TS_HOST_DEVICE float standard_normal_float(uint32_t a, uint32_t b) {
  const float u1 = uint_to_unit_float(a), u2 = uint_to_unit_float(b);
  return mul_rn(sqrt_rn(mul_rn(-2.0f, log1p_(-u1))), cos_(mul_rn(static_cast<float>(kTwoPi), u2)));
}
TS_HOST_DEVICE float normal_float(float mean, float std, float z) { return fma_rn(std, z, mean); }

// The same in float64 from the whole block: u1 from words 0-1, u2 from words 2-3.
TS_HOST_DEVICE double standard_normal_double(const uint32_t* w) {
  const double u1 = uint2_to_unit_double(w[0], w[1]), u2 = uint2_to_unit_double(w[2], w[3]);
  return mul_rn(sqrt_rn(mul_rn(-2.0, log1p_(-u1))), cos_(mul_rn(kTwoPi, u2)));
}
TS_HOST_DEVICE double normal_double(double mean, double std, double z) { return fma_rn(std, z, mean); }

// bernoulli: word * 2^-32 < p, both sides exact in float64.
TS_HOST_DEVICE bool bernoulli_draw(uint32_t w, double p) { return static_cast<double>(w) * 0x1p-32 < p; }

// random_: the offset from `from`, bits mod range (range 0 means 2^64). One word when range <= 2^32:
// a 32-bit remainder when range fits in 32 bits (the same value as the 64-bit one, and cheaper).
TS_HOST_DEVICE uint64_t random_offset_1word(uint32_t w, uint64_t range) {
  return range <= 0xffffffffull ? static_cast<uint64_t>(w % static_cast<uint32_t>(range)) : static_cast<uint64_t>(w);
}
TS_HOST_DEVICE uint64_t random_offset_2words(uint32_t a, uint32_t b, uint64_t range) {
  const uint64_t bits = uint2_to_u64(a, b);
  return range == 0 ? bits : bits % range;
}
// from + offset with two's-complement wrap-around, as the CPU kernel.
TS_HOST_DEVICE int64_t random_value(int64_t from, uint64_t off) {
  return static_cast<int64_t>(static_cast<uint64_t>(from) + off);
}

// multinomial without replacement: p / E with E = -log1p(-u) exponential(1); -1 for p == 0, +inf
// when u == 0. Always >= -1 and never nan for a valid p (finite, >= 0).
TS_HOST_DEVICE double exponential_key(double p, double u) {
  const double e = -log1p_(-u);
  return p > 0 ? div_rn(p, e) : -1.0;
}

// A 64-bit key whose unsigned ascending order is the DESCENDING order of the (non-nan) double `d`:
// the usual sign-magnitude to two's-order flip, then inverted.
TS_HOST_DEVICE uint64_t descending_key(double d) {
  uint64_t bits;
#if defined(__CUDA_ARCH__)
  bits = static_cast<uint64_t>(__double_as_longlong(d));
#else
  static_assert(sizeof(double) == sizeof(uint64_t));
  __builtin_memcpy(&bits, &d, sizeof bits);
#endif
  const uint64_t ordered = (bits >> 63) ? ~bits : (bits | 0x8000000000000000ull);
  return ~ordered;
}

}  // namespace tessera::cuda::rnd
