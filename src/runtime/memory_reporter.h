// Allocation reporting for the profiler's memory events. The allocators (runtime/allocator.cpp for the
// CPU, runtime/cuda/caching_allocator.cpp for CUDA) call report_memory on every block they hand out and
// every block they take back; the profiler, a layer above, installs the reporter while a profile with
// profile_memory runs. Off, a report costs one relaxed atomic load.
#pragma once
#include <atomic>
#include <cstdint>

#include "tessera/device.h"

namespace tessera {

struct MemoryReport {
  const void* ptr;          // the address tensors see
  int64_t bytes;            // > 0: allocated; < 0: freed; 0: freed, size unknown to the allocator
  Device device;
  int64_t total_allocated;  // the device's totals after this event; -1 where the allocator keeps none
  int64_t total_reserved;
};
using MemoryReporter = void (*)(const MemoryReport&);

namespace detail {
extern std::atomic<MemoryReporter> g_memory_reporter;
}

inline bool memory_reporting_on() {
  return detail::g_memory_reporter.load(std::memory_order_relaxed) != nullptr;
}
// Calls the reporter, if any. The reporter must not allocate through tessera's allocators.
inline void report_memory(const MemoryReport& r) {
  if (MemoryReporter f = detail::g_memory_reporter.load(std::memory_order_relaxed)) [[unlikely]] f(r);
}
// nullptr removes it.
void set_memory_reporter(MemoryReporter reporter);

}  // namespace tessera
