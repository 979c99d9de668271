// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3"), the counter-based
// generator behind every random op. Header-only and host/device so that the CPU and CUDA kernels
// produce the same bits. `philox4x32_10(ctr[4], key[2])` is the Random123 function itself (checked
// against its known-answer vectors); the 64-bit form is what the random ops call.
//
// Note [Philox stream]: the numbers of a random op depend only on (seed, offset), never on thread
// count, chunking or device. The op reserves its counters from its Generator before launching
// (Generator::reserve), then element i -- the i-th element in row-major order of the output's
// LOGICAL shape, whatever its strides -- takes its bits from block (offset + i / E) keyed by the seed,
// where E is the number of elements per block:
//   * one word per element (E = 4; float32/float16/bfloat16 uniform, bernoulli, integers whose range
//     fits in 32 bits): word (i % 4). The op reserves ceil(n / 4) counters.
//   * two words per element (E = 2; float64 uniform, float32/16-bit normals, integers whose range
//     exceeds 2^32, randperm and multinomial keys): words 2*(i%2) and 2*(i%2)+1. ceil(n / 2) counters.
//   * four words per element (E = 1; float64 normals, which need two 53-bit uniforms): the whole
//     block. n counters.
// A normal is one Box-Muller draw from its element's words (u1 from the first half, u2 from the
// second): z = sqrt(-2 ln(1 - u1)) * cos(2 pi u2). The sine branch is not used, so no element
// depends on its neighbour's words.
#pragma once
#include <cstdint>

#if defined(__CUDACC__)
#define TS_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define TS_HOST_DEVICE inline
#endif

namespace tessera {

struct PhiloxBlock {
  uint32_t x[4];
};

TS_HOST_DEVICE uint32_t mulhilo32(uint32_t a, uint32_t b, uint32_t* hi) {
  uint64_t p = static_cast<uint64_t>(a) * b;
  *hi = static_cast<uint32_t>(p >> 32);
  return static_cast<uint32_t>(p);
}

// Random123's philox4x32_10: ten rounds over a 128-bit counter under a 64-bit key.
TS_HOST_DEVICE PhiloxBlock philox4x32_10(const uint32_t ctr[4], const uint32_t key[2]) {
  uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
  uint32_t k0 = key[0], k1 = key[1];
  for (int r = 0; r < 10; ++r) {
    uint32_t hi0, hi1;
    uint32_t lo0 = mulhilo32(0xD2511F53u, c0, &hi0);
    uint32_t lo1 = mulhilo32(0xCD9E8D57u, c2, &hi1);
    uint32_t n0 = hi1 ^ c1 ^ k0, n1 = lo1, n2 = hi0 ^ c3 ^ k1, n3 = lo0;
    c0 = n0; c1 = n1; c2 = n2; c3 = n3;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return PhiloxBlock{{c0, c1, c2, c3}};
}

// The four words of counter block `counter` under key `seed`: the counter fills words 0-1 (low word
// first), words 2-3 are zero; the seed's low word is key[0].
TS_HOST_DEVICE PhiloxBlock philox4x32_10(uint64_t seed, uint64_t counter) {
  const uint32_t ctr[4] = {static_cast<uint32_t>(counter), static_cast<uint32_t>(counter >> 32), 0u, 0u};
  const uint32_t key[2] = {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)};
  return philox4x32_10(ctr, key);
}

// Uniform in [0, 1): 24 random bits for float, 53 for double (from two words, `a` high).
TS_HOST_DEVICE float uint_to_unit_float(uint32_t u) { return static_cast<float>(u >> 8) * (1.0f / 16777216.0f); }
TS_HOST_DEVICE double uint2_to_unit_double(uint32_t a, uint32_t b) {
  uint64_t v = (static_cast<uint64_t>(a) << 32 | b) >> 11;
  return static_cast<double>(v) * (1.0 / 9007199254740992.0);
}
// 64 random bits from two words, `a` high.
TS_HOST_DEVICE uint64_t uint2_to_u64(uint32_t a, uint32_t b) { return static_cast<uint64_t>(a) << 32 | b; }

}  // namespace tessera
