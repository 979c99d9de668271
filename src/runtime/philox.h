// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3"), the counter-based
// generator behind every random op. Header-only and host/device so that the CPU and CUDA kernels
// produce the same bits.
//
// Note [Philox stream]: a random op with n elements reserves ceil(n / 4) counters from its Generator
// (offset .. offset + ceil(n/4) - 1); element i takes 32-bit word (i % 4) of block (offset + i / 4),
// keyed by the seed. Ops that need two words per element (float64, Box-Muller normals) reserve
// ceil(n / 2) counters and element i takes words 2*(i%2), 2*(i%2)+1 of block (offset + i / 2).
// The result is independent of thread count, chunking and device.
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

// The four words of counter block `counter` under key `seed`.
TS_HOST_DEVICE PhiloxBlock philox4x32_10(uint64_t seed, uint64_t counter) {
  uint32_t c0 = static_cast<uint32_t>(counter), c1 = static_cast<uint32_t>(counter >> 32), c2 = 0, c3 = 0;
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
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

// Uniform in [0, 1): 24 random bits for float, 53 for double (from two words).
TS_HOST_DEVICE float uint_to_unit_float(uint32_t u) { return static_cast<float>(u >> 8) * (1.0f / 16777216.0f); }
TS_HOST_DEVICE double uint2_to_unit_double(uint32_t a, uint32_t b) {
  uint64_t v = (static_cast<uint64_t>(a) << 32 | b) >> 11;
  return static_cast<double>(v) * (1.0 / 9007199254740992.0);
}

}  // namespace tessera
