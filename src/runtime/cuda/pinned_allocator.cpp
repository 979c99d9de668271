// Pinned host memory (Note [Pinned host cache] in runtime/host_block_cache.h): the allocator behind
// Tensor::pin_memory(), is_pinned, and record_host_use for asynchronous copies that read or write it.
// The cache is never destroyed (pinned tensors may be freed during static destruction).
#include <cstdio>

#include "runtime/cuda/cuda_allocator.h"
#include "runtime/cuda/cuda_backends.h"
#include "runtime/cuda/graph_capture.h"
#include "runtime/host_block_cache.h"
#include "tessera/cuda.h"
#include "tessera/error.h"

namespace tessera::cuda {
namespace {

using alloc::HostBlock;
using alloc::HostBlockCache;

HostBlockCache& host_cache() {
  static auto* c = new HostBlockCache(make_host_backend());
  return *c;
}

void free_host_block(void* ctx) {
  try {
    host_cache().free(static_cast<HostBlock*>(ctx));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tessera: freeing pinned host memory failed: %s\n", e.what());
  }
}

class PinnedAllocator final : public Allocator {
 public:
  DataPtr allocate(size_t nbytes, Device) override {
    if (nbytes == 0) return DataPtr();
    TS_CHECK(is_available(), DeviceError, "pin_memory: no CUDA GPU was found (pinned memory needs the CUDA driver)");
    HostBlock* b = host_cache().allocate(nbytes);
    return DataPtr(HostBlockCache::address(b), b, &free_host_block);
  }
};

}  // namespace

Allocator* pinned_host_allocator() {
  static PinnedAllocator a;
  return &a;
}

bool is_pinned(const void* ptr) {
  if (!ptr) return false;
  if (host_cache().contains(ptr)) return true;
  if (!is_available()) return false;
  // Page-locked by someone else (cudaHostRegister, another library).
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, ptr) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return attr.type == cudaMemoryTypeHost;
}

void record_host_use(const void* ptr, cudaStream_t stream) {
  // Memory not from the cache (pageable, or pinned elsewhere) is not tracked: nothing to do. Nor is a use
  // by a stream being captured into a CUDA graph: the event that a free would record there could never
  // be queried; the graph's replays read the memory later, so whoever captured the copy keeps the block
  // (a static input the user holds, or the graph itself: keep_for_graph).
  if (!ptr || stream_is_captured(stream)) return;
  (void)host_cache().record_use(ptr, stream);
}

}  // namespace tessera::cuda
