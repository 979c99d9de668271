// Contiguous output loops with optional streaming (non-temporal) stores.
//
// Note [Streaming stores]: an elementwise kernel whose output is larger than the last-level cache
// gains nothing from caching the output, and a normal store first reads each output line into the
// cache (read-for-ownership): a third of the memory traffic of `out = a + b`. Streaming stores skip
// that read. Elements are computed into a small L1-resident buffer by the vectorized loop, then the
// buffer is streamed out in stores of the level's vector width (16 bytes at baseline, 32 with AVX2,
// 64 with AVX-512); each thread fences its own stores before returning, so
// the results are visible after the parallel region as with normal stores. Outputs below
// kStreamBytes keep normal stores so that a consumer finds them in cache.
#pragma once
#include "kernels/cpu/isa_namespace.h"
#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <immintrin.h>
#endif

namespace tessera::cpu {
TS_CPU_ISA_BEGIN  // Note [ISA namespaces] in kernels/cpu/isa_namespace.h

inline constexpr int64_t kStreamBytes = int64_t(32) << 20;

inline bool use_streaming_stores(int64_t numel, int64_t elem_size) { return numel * elem_size >= kStreamBytes; }

// o[i] = f(i) for i in [0, n); f must be inlinable and free of side effects.
template <class Out, class F>
inline void store_contiguous(Out* o, int64_t n, bool stream, F&& f) {
#if defined(__SSE2__)
  if (stream && (sizeof(Out) == 4 || sizeof(Out) == 8)) {
#if defined(__AVX512F__)
    constexpr int64_t kVec = 64;
#elif defined(__AVX__)
    constexpr int64_t kVec = 32;
#else
    constexpr int64_t kVec = 16;
#endif
    constexpr int64_t kBlock = 1024 / sizeof(Out);  // 1 KiB: stays in L1
    alignas(64) Out buf[kBlock];
    int64_t i = 0;
    while (i < n && (reinterpret_cast<uintptr_t>(o + i) & (kVec - 1)) != 0) {
      o[i] = f(i);
      ++i;
    }
    for (; i + kBlock <= n; i += kBlock) {
#pragma omp simd
      for (int64_t j = 0; j < kBlock; ++j) buf[j] = f(i + j);
      char* dst = reinterpret_cast<char*>(o + i);
      const char* src = reinterpret_cast<const char*>(buf);
      for (int64_t j = 0; j < kBlock * int64_t(sizeof(Out)); j += kVec) {
#if defined(__AVX512F__)
        _mm512_stream_si512(reinterpret_cast<__m512i*>(dst + j), _mm512_load_si512(src + j));
#elif defined(__AVX__)
        _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + j), _mm256_load_si256(reinterpret_cast<const __m256i*>(src + j)));
#else
        _mm_stream_si128(reinterpret_cast<__m128i*>(dst + j), _mm_load_si128(reinterpret_cast<const __m128i*>(src + j)));
#endif
      }
    }
    for (; i < n; ++i) o[i] = f(i);
    _mm_sfence();
    return;
  }
#endif
  (void)stream;
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) o[i] = f(i);
}

TS_CPU_ISA_END
}  // namespace tessera::cpu
