// Host-side 16-bit floating types: IEEE binary16 (`Half`) and bfloat16 (`BFloat16`).
// Storage is the raw 16-bit pattern; arithmetic goes through float. Conversions from float round to
// nearest even, as the hardware does, so CPU results match the GPU's bit for bit.
#pragma once
#include <bit>
#include <cstdint>
#include <cstring>
#include <limits>

namespace tessera {

struct FromBits {};

struct Half {
  uint16_t x = 0;
  Half() = default;
  constexpr Half(uint16_t bits, FromBits) : x(bits) {}
  Half(float f) : x(from_float(f)) {}  // NOLINT: implicit as in PyTorch
  operator float() const { return to_float(x); }

  static uint16_t from_float(float f) {
    uint32_t u = std::bit_cast<uint32_t>(f);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t abs = u & 0x7fffffffu;
    if (abs >= 0x7f800000u) {  // inf or nan
      return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u | ((abs >> 13) & 0x3ffu) : 0u));
    }
    if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to inf
    if (abs < 0x38800000u) {                                              // subnormal or zero in half
      // Add 0.5 (as float) so the FPU's round-to-nearest-even places the bits, then take the mantissa.
      float r = std::bit_cast<float>(abs) + 0.5f;
      return static_cast<uint16_t>(sign | (std::bit_cast<uint32_t>(r) - 0x3f000000u));
    }
    uint32_t mant_odd = (abs >> 13) & 1u;
    abs += 0xc8000fffu + mant_odd;  // rebias exponent (-112 << 23) and round to nearest even
    return static_cast<uint16_t>(sign | (abs >> 13));
  }
  static float to_float(uint16_t h) {
    uint32_t sign = (uint32_t(h) & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    uint32_t u;
    if (exp == 0x1f) {
      u = sign | 0x7f800000u | (mant << 13);
    } else if (exp == 0) {
      if (mant == 0) return std::bit_cast<float>(sign);
      float f = static_cast<float>(mant) * 5.9604644775390625e-8f;  // mant * 2^-24
      return sign ? -f : f;
    } else {
      u = sign | ((exp + 112u) << 23) | (mant << 13);
    }
    return std::bit_cast<float>(u);
  }
};

struct BFloat16 {
  uint16_t x = 0;
  BFloat16() = default;
  constexpr BFloat16(uint16_t bits, FromBits) : x(bits) {}
  BFloat16(float f) : x(from_float(f)) {}  // NOLINT
  operator float() const { return to_float(x); }

  static uint16_t from_float(float f) {
    uint32_t u = std::bit_cast<uint32_t>(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // quiet nan
    u += 0x7fffu + ((u >> 16) & 1u);
    return static_cast<uint16_t>(u >> 16);
  }
  static float to_float(uint16_t b) { return std::bit_cast<float>(uint32_t(b) << 16); }
};

}  // namespace tessera

template <>
class std::numeric_limits<tessera::Half> {
 public:
  static constexpr bool is_specialized = true;
  static constexpr bool is_signed = true;
  static constexpr bool is_integer = false;
  static constexpr bool has_infinity = true;
  static constexpr bool has_quiet_NaN = true;
  static constexpr int digits = 11;
  static tessera::Half lowest() { return {0xfbff, tessera::FromBits{}}; }
  static tessera::Half max() { return {0x7bff, tessera::FromBits{}}; }
  static tessera::Half min() { return {0x0400, tessera::FromBits{}}; }
  static tessera::Half epsilon() { return {0x1400, tessera::FromBits{}}; }
  static tessera::Half infinity() { return {0x7c00, tessera::FromBits{}}; }
  static tessera::Half quiet_NaN() { return {0x7e00, tessera::FromBits{}}; }
};

template <>
class std::numeric_limits<tessera::BFloat16> {
 public:
  static constexpr bool is_specialized = true;
  static constexpr bool is_signed = true;
  static constexpr bool is_integer = false;
  static constexpr bool has_infinity = true;
  static constexpr bool has_quiet_NaN = true;
  static constexpr int digits = 8;
  static tessera::BFloat16 lowest() { return {0xff7f, tessera::FromBits{}}; }
  static tessera::BFloat16 max() { return {0x7f7f, tessera::FromBits{}}; }
  static tessera::BFloat16 min() { return {0x0080, tessera::FromBits{}}; }
  static tessera::BFloat16 epsilon() { return {0x3c00, tessera::FromBits{}}; }
  static tessera::BFloat16 infinity() { return {0x7f80, tessera::FromBits{}}; }
  static tessera::BFloat16 quiet_NaN() { return {0x7fc0, tessera::FromBits{}}; }
};
