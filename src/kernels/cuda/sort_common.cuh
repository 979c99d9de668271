// Radix-sortable keys and the sort primitives (cub, instantiated once in sort.cu) that sort.cu,
// unique.cu, index.cu and gather_scatter.cu share.
//
// Note [Ordered keys]: every dtype maps to an unsigned key whose unsigned order is Note [Sort order]
// (ops/sort_ops.cpp): integers with the sign bit flipped; floats with -0.0 made +0.0 (they compare
// equal, so a stable sort keeps their input order), negatives bit-inverted, positives with the sign bit
// set, and every NaN (any sign, any payload) made all ones: larger than +inf. Equal keys are equal
// values, except that all NaNs share one key (unique tells them apart itself). 8- and 16-bit dtypes
// use the low bits of a uint32_t key; descending order is the key XOR its width's all-ones mask.
#pragma once
#include <cstdint>
#include <type_traits>

#include "kernels/cuda/cuda_common.cuh"

namespace tessera::cuda {

// Significant bits of a dtype's key, and the key type holding them.
template <class T> inline constexpr int key_bits_v = std::is_same_v<T, bool> ? 8 : 8 * int(sizeof(T));
template <class T> using sort_key_t = std::conditional_t<(sizeof(T) == 8), uint64_t, uint32_t>;

template <class T>
__device__ __forceinline__ sort_key_t<T> ordered_key(T v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v ? 1u : 0u;
  } else if constexpr (std::is_same_v<T, uint8_t>) {
    return v;
  } else if constexpr (std::is_same_v<T, int8_t>) {
    return static_cast<uint32_t>(static_cast<uint8_t>(v) ^ 0x80u);
  } else if constexpr (std::is_same_v<T, int32_t>) {
    return static_cast<uint32_t>(v) ^ 0x80000000u;
  } else if constexpr (std::is_same_v<T, int64_t>) {
    return static_cast<uint64_t>(v) ^ 0x8000000000000000ull;
  } else if constexpr (std::is_same_v<T, float>) {
    uint32_t u = __float_as_uint(v);
    if ((u & 0x7fffffffu) > 0x7f800000u) return 0xffffffffu;  // NaN
    if ((u & 0x7fffffffu) == 0) u = 0;                         // -0.0 -> +0.0
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
  } else if constexpr (std::is_same_v<T, double>) {
    uint64_t u = static_cast<uint64_t>(__double_as_longlong(v));
    if ((u & 0x7fffffffffffffffull) > 0x7ff0000000000000ull) return 0xffffffffffffffffull;
    if ((u & 0x7fffffffffffffffull) == 0) u = 0;
    return (u & 0x8000000000000000ull) ? ~u : (u | 0x8000000000000000ull);
  } else {  // __half (exponent 0x7c00) and __nv_bfloat16 (0x7f80)
    constexpr uint32_t kInf = std::is_same_v<T, __half> ? 0x7c00u : 0x7f80u;
    uint32_t u;
    if constexpr (std::is_same_v<T, __half>) u = __half_as_ushort(v);
    else u = __bfloat16_as_ushort(v);
    if ((u & 0x7fffu) > kInf) return 0xffffu;
    if ((u & 0x7fffu) == 0) u = 0;
    return (u & 0x8000u) ? (~u & 0xffffu) : (u | 0x8000u);
  }
}

// The all-ones key of T's width: NaN's key for floats, and the XOR mask of descending order.
template <class T>
__host__ __device__ constexpr sort_key_t<T> key_mask() {
  if constexpr (key_bits_v<T> == 64) return ~uint64_t(0);
  else return static_cast<uint32_t>((uint64_t(1) << key_bits_v<T>) - 1);
}

// Bits needed to write v (at least 1).
inline int bit_width(uint64_t v) {
  int b = 1;
  while (b < 64 && (v >> b) != 0) ++b;
  return b;
}

// ---- sort primitives (sort.cu) -------------------------------------------------------------------------
// Stable ascending sorts of (key, value) pairs on `stream`, comparing bits [0, end_bit) of the keys;
// out-of-place (in and out must not overlap). Temporary storage comes from allocate_workspace.
void radix_sort_pairs(const uint32_t* keys_in, uint32_t* keys_out, const uint32_t* values_in, uint32_t* values_out,
                      int64_t n, int end_bit, cudaStream_t stream);
void radix_sort_pairs(const uint64_t* keys_in, uint64_t* keys_out, const uint32_t* values_in, uint32_t* values_out,
                      int64_t n, int end_bit, cudaStream_t stream);
// The same for `rows` consecutive segments of `len` pairs each, every segment sorted on its own.
void segmented_sort_pairs(const uint32_t* keys_in, uint32_t* keys_out, const uint32_t* values_in,
                          uint32_t* values_out, int64_t rows, int64_t len, int end_bit, cudaStream_t stream);
void segmented_sort_pairs(const uint64_t* keys_in, uint64_t* keys_out, const uint32_t* values_in,
                          uint32_t* values_out, int64_t rows, int64_t len, int end_bit, cudaStream_t stream);

}  // namespace tessera::cuda
