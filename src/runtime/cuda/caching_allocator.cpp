// The CUDA caching allocator: one CachingBlockAllocator (Note [CUDA caching allocator] in
// runtime/block_pool.h) per device, created at the device's first allocation with the settings of
// TESSERA_CUDA_ALLOC_CONF, and the memory statistics of tessera/cuda.h.
//
// Invariants: a DataPtr from here carries its Block as context, so freeing needs no lookup; the
// allocators are never destroyed (tensors may be freed during static destruction); a block belongs to
// the stream that was current on its device when it was allocated.
#include <array>
#include <atomic>
#include <cstdio>
#include <mutex>

#include "runtime/alloc_conf.h"
#include "runtime/block_pool.h"
#include "runtime/cuda/cuda_allocator.h"
#include "runtime/cuda/cuda_backends.h"
#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/cuda_stream.h"
#include "runtime/cuda/graph_capture.h"
#include "runtime/device_hooks.h"
#include "runtime/memory_reporter.h"
#include "tessera/cuda.h"
#include "tessera/error.h"

namespace tessera::cuda {
namespace {

using alloc::Block;
using alloc::CachingBlockAllocator;

constexpr int kMaxDevices = 64;
std::array<std::atomic<CachingBlockAllocator*>, kMaxDevices> g_allocators{};
std::mutex g_init_mu;

CachingBlockAllocator& create_allocator(int d) {
  TS_CHECK(d >= 0 && d < device_count() && d < kMaxDevices, DeviceError, "CUDA allocator: invalid device cuda:", d,
           " (", device_count(), " found)");
  std::lock_guard<std::mutex> g(g_init_mu);
  if (CachingBlockAllocator* a = g_allocators[d].load(std::memory_order_acquire)) return *a;
  check_device_architecture(d);
  static const alloc::AllocConf conf = alloc::alloc_conf_from_env();  // raises ValueError on a bad setting
  auto* a = new CachingBlockAllocator(d, make_device_backend(d), conf);
  g_allocators[d].store(a, std::memory_order_release);
  return *a;
}

CachingBlockAllocator& device_allocator(int d) {
  if (d >= 0 && d < kMaxDevices) [[likely]] {
    if (CachingBlockAllocator* a = g_allocators[d].load(std::memory_order_acquire)) [[likely]] return *a;
  }
  return create_allocator(d);
}

// The allocator of a device if it has allocated anything yet (queries do not create one).
CachingBlockAllocator* existing_allocator(int d) {
  return d >= 0 && d < kMaxDevices ? g_allocators[d].load(std::memory_order_acquire) : nullptr;
}

int resolve_device(int index, const char* what) {
  if (index < 0) index = current_device();
  TS_CHECK(index < device_count(), DeviceError, what, ": invalid device cuda:", index, " (", device_count(),
           " device", device_count() == 1 ? "" : "s", " found)");
  return index;
}

// Memory events for the profiler (runtime/memory_reporter.h); only while a reporter is installed. The
// totals are read right after the event, so another thread's event may be included in them.
void report(CachingBlockAllocator& a, const void* ptr, int64_t bytes) {
  const alloc::DeviceStats s = a.stats();
  report_memory({ptr, bytes, Device::cuda(a.device()), s.allocated_bytes[alloc::kAllPools].current,
                 s.reserved_bytes[alloc::kAllPools].current});
}
void report_free(Block* b) {
  CachingBlockAllocator* a = CachingBlockAllocator::owner(b);
  const void* ptr = CachingBlockAllocator::address(b);
  const auto bytes = static_cast<int64_t>(CachingBlockAllocator::block_size(b));
  a->free(b);
  report(*a, ptr, -bytes);
}

// DataPtr deleter. A destructor cannot raise: a device error while freeing is reported and the block
// leaks (the device is unusable by then anyway).
void free_block(void* ctx) {
  auto* b = static_cast<Block*>(ctx);
  try {
    if (memory_reporting_on()) [[unlikely]] {
      report_free(b);
      return;
    }
    CachingBlockAllocator::owner(b)->free(b);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tessera: freeing CUDA memory failed: %s\n", e.what());
  }
}

class CudaCachingAllocator final : public Allocator {
 public:
  DataPtr allocate(size_t nbytes, Device device) override {
    if (nbytes == 0) return DataPtr();
    const int d = device.index();
    CachingBlockAllocator& a = device_allocator(d);
    Block* b = a.malloc(nbytes, current_raw_stream(d));
    if (memory_reporting_on()) [[unlikely]] report(a, CachingBlockAllocator::address(b), static_cast<int64_t>(CachingBlockAllocator::block_size(b)));
    return DataPtr(CachingBlockAllocator::address(b), b, &free_block);
  }
};

alloc::DeviceStats device_stats(int device_index, const char* what) {
  const int d = resolve_device(device_index, what);
  CachingBlockAllocator* a = existing_allocator(d);
  return a ? a->stats() : alloc::DeviceStats{};
}

void hook_record_stream(void* ptr, void* stream) { record_stream(ptr, static_cast<cudaStream_t>(stream)); }

}  // namespace

Allocator* cuda_allocator() {
  static CudaCachingAllocator a;
  return &a;
}

void record_stream(void* ptr, cudaStream_t stream) {
  if (!ptr) return;  // an empty tensor's storage
  for (int d = 0; d < kMaxDevices; ++d) {
    CachingBlockAllocator* a = existing_allocator(d);
    if (a && a->record_stream(ptr, stream)) return;
  }
  TS_THROW(ValueError, "record_stream: the pointer ", ptr, " is not memory allocated by tessera's CUDA allocator");
}

DataPtr allocate_workspace(size_t nbytes) {
  return cuda_allocator()->allocate(nbytes, Device::cuda(current_device()));
}

void register_cuda_runtime() {
  set_allocator(DeviceType::CUDA, cuda_allocator());
  CudaHooks h;
  h.pinned_allocator = &pinned_host_allocator;
  h.is_pinned = &is_pinned;
  h.record_stream = &hook_record_stream;
  h.check_not_capturing = &check_not_capturing;
  set_cuda_hooks(h);
}

// ---- tessera/cuda.h: statistics ------------------------------------------------------------------

std::map<std::string, int64_t> memory_stats(int device_index) {
  return alloc::stats_as_map(device_stats(device_index, "memory_stats"));
}
int64_t memory_allocated(int device_index) {
  return device_stats(device_index, "memory_allocated").allocated_bytes[alloc::kAllPools].current;
}
int64_t max_memory_allocated(int device_index) {
  return device_stats(device_index, "max_memory_allocated").allocated_bytes[alloc::kAllPools].peak;
}
int64_t memory_reserved(int device_index) {
  return device_stats(device_index, "memory_reserved").reserved_bytes[alloc::kAllPools].current;
}
int64_t max_memory_reserved(int device_index) {
  return device_stats(device_index, "max_memory_reserved").reserved_bytes[alloc::kAllPools].peak;
}

void reset_peak_memory_stats(int device_index) {
  if (CachingBlockAllocator* a = existing_allocator(resolve_device(device_index, "reset_peak_memory_stats")))
    a->reset_peak_stats();
}

void reset_accumulated_memory_stats(int device_index) {
  if (CachingBlockAllocator* a = existing_allocator(resolve_device(device_index, "reset_accumulated_memory_stats")))
    a->reset_accumulated_stats();
}

std::string memory_summary(int device_index) {
  const int d = resolve_device(device_index, "memory_summary");
  return alloc::memory_summary_table(device_stats(d, "memory_summary"), d);
}

std::vector<SegmentInfo> memory_snapshot() {
  std::vector<SegmentInfo> out;
  for (int d = 0; d < kMaxDevices; ++d) {
    if (CachingBlockAllocator* a = existing_allocator(d)) {
      std::vector<SegmentInfo> s = a->snapshot();
      out.insert(out.end(), std::make_move_iterator(s.begin()), std::make_move_iterator(s.end()));
    }
  }
  return out;
}

void empty_cache() {
  if (device_count() > 0) check_not_capturing("empty_cache");
  for (int d = 0; d < kMaxDevices; ++d)
    if (CachingBlockAllocator* a = existing_allocator(d)) a->empty_cache();
}

void set_per_process_memory_fraction(double fraction, int device_index) {
  const int d = resolve_device(device_index, "set_per_process_memory_fraction");
  device_allocator(d).set_memory_fraction(fraction);
}

}  // namespace tessera::cuda

// ---- graph private pools (graph_capture.h) -------------------------------------------------------

namespace tessera::cuda {

void begin_allocate_to_pool(int device, alloc::MempoolId id, alloc::StreamFilter filter) {
  device_allocator(device).begin_allocate_to_pool(id, std::move(filter));
}
void end_allocate_to_pool(int device, alloc::MempoolId id) { device_allocator(device).end_allocate_to_pool(id); }
void release_pool(int device, alloc::MempoolId id) { device_allocator(device).release_pool(id); }
void release_freeable_pools(int device) {
  if (CachingBlockAllocator* a = existing_allocator(device)) a->release_freeable_pools();
}

}  // namespace tessera::cuda
