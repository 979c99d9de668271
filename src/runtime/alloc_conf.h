// Settings of the CUDA caching allocator (Note [CUDA caching allocator] in block_pool.h), read from the
// environment variable TESSERA_CUDA_ALLOC_CONF: comma-separated `key:value` pairs, as PyTorch's
// PYTORCH_CUDA_ALLOC_CONF, e.g.
//
//   TESSERA_CUDA_ALLOC_CONF=max_split_size_mb:256,garbage_collection_threshold:0.8
//   TESSERA_CUDA_ALLOC_CONF=roundup_power2_divisions:4
//   TESSERA_CUDA_ALLOC_CONF=roundup_power2_divisions:[256:1,512:2,1024:4,>:8]
//   TESSERA_CUDA_ALLOC_CONF=backend:cudaMalloc        (no cache: for compute-sanitizer)
//
// Keys:
//   max_split_size_mb             blocks of this size (MiB, > 20) and more are never split; oversize
//                                 cached blocks serve only requests within max_split + 20 MiB of them.
//   garbage_collection_threshold  in (0, 1): when a new segment is needed and the reserved memory exceeds
//                                 this fraction of the allowed memory (set_per_process_memory_fraction
//                                 times the GPU's memory, or all of it), cached whole large segments are
//                                 released, the longest unused first, without waiting for any stream.
//   roundup_power2_divisions      N (a power of two; 0 or 1: off): requests are rounded up to one of N
//                                 equal steps between two powers of two. The bracket form gives N per
//                                 power-of-two size interval in MiB (`>` for every larger one).
//   backend                       native (the caching allocator) or cudaMalloc (plain cudaMalloc/cudaFree).
// Anything else raises ValueError naming the key or value. CUDA-free, so tests parse without a GPU.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string_view>

namespace tessera::alloc {

struct AllocConf {
  // Intervals of roundup_power2_divisions: [0, 2 MiB), [2, 4), [4, 8) MiB ... the last covers 32 GiB up.
  static constexpr size_t kRoundUpIntervals = 16;

  size_t max_split_size = std::numeric_limits<size_t>::max();  // bytes; max: every block may split
  double garbage_collection_threshold = 0.0;                   // 0: off
  std::array<size_t, kRoundUpIntervals> roundup_power2_divisions{};  // 0: plain 512-byte rounding
  bool use_cache = true;                                       // false under backend:cudaMalloc

  // The divisions that apply to a request of `size` bytes.
  size_t divisions_for(size_t size) const;
};

// Parses a configuration string (the variable's value). `source` names it in error messages.
AllocConf parse_alloc_conf(std::string_view text, std::string_view source = "TESSERA_CUDA_ALLOC_CONF");

// Parses TESSERA_CUDA_ALLOC_CONF (an unset or empty variable gives the defaults).
AllocConf alloc_conf_from_env();

}  // namespace tessera::alloc
