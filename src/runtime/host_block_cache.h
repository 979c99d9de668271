// The caching allocator of pinned (page-locked) host memory behind Tensor::pin_memory(), free of CUDA:
// the CUDA layer plugs in cudaHostAlloc/cudaFreeHost and events through AllocBackend (block_pool.h).
//
// Note [Pinned host cache]: page-locking memory is slow (cudaHostAlloc maps and pins every page), so
// freed pinned blocks are kept for reuse, by size rounded up to a power of two. A copy from pinned memory
// (cudaMemcpyAsync) may still be reading a block when its tensor is freed; whoever queues such a copy
// calls record_use(ptr, stream), and freeing the block then records an event on each of those streams:
// the block is reused only after every event has completed (polled at the next allocation). Interior
// pointers (views) are found through an address-ordered map of the live blocks.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "runtime/block_pool.h"

namespace tessera::alloc {

struct HostBlock;

struct HostStats {
  int64_t allocated_bytes = 0;  // in blocks handed out (rounded sizes)
  int64_t reserved_bytes = 0;   // all pinned blocks, cached ones included
  int64_t num_host_alloc = 0;   // cudaHostAlloc calls
  int64_t num_host_free = 0;
  int64_t pending_events = 0;
};

class HostBlockCache {
 public:
  explicit HostBlockCache(std::unique_ptr<AllocBackend> backend);
  ~HostBlockCache();  // returns every block to the backend
  HostBlockCache(const HostBlockCache&) = delete;
  HostBlockCache& operator=(const HostBlockCache&) = delete;

  // At least `nbytes` of pinned memory (nullptr for 0). On failure the cache is emptied and the
  // allocation retried once before OutOfMemoryError.
  HostBlock* allocate(size_t nbytes);
  void free(HostBlock* block);
  static void* address(const HostBlock* block);
  static size_t block_size(const HostBlock* block);

  // Whether `ptr` lies in a block of this cache (allocated or cached).
  bool contains(const void* ptr);
  // The work queued on `stream` up to now may use the allocated block holding `ptr`; returns false when
  // `ptr` is not in an allocated block of this cache.
  bool record_use(const void* ptr, void* stream);
  // Returns the cached free blocks to the backend (blocks awaiting events stay).
  void empty_cache();
  HostStats stats();

 private:
  void process_events();
  void release(HostBlock* b);

  std::unique_ptr<AllocBackend> backend_;
  std::mutex mu_;
  std::map<uintptr_t, HostBlock*> blocks_;           // every block, by address
  std::array<std::vector<HostBlock*>, 64> free_{};   // cached free blocks by log2(size)
  std::vector<std::pair<void*, HostBlock*>> events_;  // pending, in record order
  HostStats stats_;
};

}  // namespace tessera::alloc
