// BOOTSTRAP (replaced by the caching allocator): plain cudaMalloc/cudaFree so that the backend links
// while the caching allocator is written. Not part of any release.
#include <map>
#include <string>
#include <vector>

#include "runtime/cuda/cuda_allocator.h"
#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/cuda_stream.h"
#include "tessera/cuda.h"
#include "tessera/error.h"

namespace tessera::cuda {
namespace {

void free_cuda(void* p) { (void)cudaFree(p); }

class PlainAllocator final : public Allocator {
 public:
  DataPtr allocate(size_t nbytes, Device device) override {
    if (nbytes == 0) return DataPtr(nullptr, nullptr, nullptr);
    CurrentDevice g(device.index());
    void* p = nullptr;
    TS_CUDA_CHECK(cudaMalloc(&p, nbytes));
    return DataPtr(p, p, free_cuda);
  }
};

void free_host(void* p) { (void)cudaFreeHost(p); }
class PinnedAllocator final : public Allocator {
 public:
  DataPtr allocate(size_t nbytes, Device) override {
    if (nbytes == 0) return DataPtr(nullptr, nullptr, nullptr);
    void* p = nullptr;
    TS_CUDA_CHECK(cudaMallocHost(&p, nbytes));
    return DataPtr(p, p, free_host);
  }
};

}  // namespace

Allocator* cuda_allocator() {
  static PlainAllocator a;
  return &a;
}
void record_stream(void*, cudaStream_t) {}
DataPtr allocate_workspace(size_t nbytes) { return cuda_allocator()->allocate(nbytes, Device::cuda(current_device())); }
Allocator* pinned_host_allocator() {
  static PinnedAllocator a;
  return &a;
}
bool is_pinned(const void* ptr) {
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, ptr) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return attr.type == cudaMemoryTypeHost;
}
void record_host_use(const void*, cudaStream_t) {}

void register_cuda_runtime() { set_allocator(DeviceType::CUDA, cuda_allocator()); }

std::map<std::string, int64_t> memory_stats(int) { return {}; }
int64_t memory_allocated(int) { return 0; }
int64_t max_memory_allocated(int) { return 0; }
int64_t memory_reserved(int) { return 0; }
int64_t max_memory_reserved(int) { return 0; }
void reset_peak_memory_stats(int) {}
std::string memory_summary(int) { return ""; }
std::vector<SegmentInfo> memory_snapshot() { return {}; }
void empty_cache() {}
void set_per_process_memory_fraction(double, int) {}
BuildInfo build_info() { return {}; }

}  // namespace tessera::cuda
