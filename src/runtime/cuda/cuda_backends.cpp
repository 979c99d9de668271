// cudaMalloc, cudaHostAlloc and events behind the caching allocators (cuda_backends.h). The allocators
// call these under their own locks; the event pool has a lock of its own because both allocators and
// every device share it.
//
// Out of memory is an answer here, not an error: the backend clears the CUDA error and returns nullptr so
// that the allocator can release its cache and retry (Note [CUDA caching allocator]).
#include "runtime/cuda/cuda_backends.h"

#include <array>
#include <mutex>
#include <vector>

#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/cuda_stream.h"
#include "tessera/error.h"

namespace tessera::cuda {
namespace {

constexpr int kMaxDevices = 64;

struct PooledEvent {
  cudaEvent_t event = nullptr;
  int device = 0;
};

// Events for the allocators' stream bookkeeping, recycled (cudaEventCreate is slow). Never destroyed:
// frees may run during static destruction.
class EventPool {
 public:
  static EventPool& get() {
    static auto* p = new EventPool();
    return *p;
  }
  PooledEvent* acquire(int device) {
    TS_CHECK(device >= 0 && device < kMaxDevices, DeviceError, "caching allocator: invalid device ", device);
    {
      std::lock_guard<std::mutex> g(mu_);
      auto& list = free_[device];
      if (!list.empty()) {
        PooledEvent* e = list.back();
        list.pop_back();
        return e;
      }
    }
    CurrentDevice g(device);
    auto* e = new PooledEvent();
    e->device = device;
    cudaError_t err = cudaEventCreateWithFlags(&e->event, cudaEventDisableTiming);
    if (err != cudaSuccess) {
      delete e;
      throw_cuda_error(err, "cudaEventCreateWithFlags", __FILE__, __LINE__);
    }
    return e;
  }
  void release(PooledEvent* e) {
    std::lock_guard<std::mutex> g(mu_);
    free_[e->device].push_back(e);
  }

 private:
  std::mutex mu_;
  std::array<std::vector<PooledEvent*>, kMaxDevices> free_;
};

// Shared by both backends: an event on the stream's own device.
void* record_on(void* stream) {
  auto s = static_cast<cudaStream_t>(stream);
  int device = 0;
  TS_CUDA_CHECK(cudaStreamGetDevice(s, &device));
  PooledEvent* e = EventPool::get().acquire(device);
  CurrentDevice g(device);
  cudaError_t err = cudaEventRecord(e->event, s);
  if (err != cudaSuccess) {
    EventPool::get().release(e);
    throw_cuda_error(err, "cudaEventRecord", __FILE__, __LINE__);
  }
  return e;
}

bool done(void* event) {
  cudaError_t err = cudaEventQuery(static_cast<PooledEvent*>(event)->event);
  if (err == cudaErrorNotReady) {
    (void)cudaGetLastError();
    return false;
  }
  TS_CUDA_CHECK(err);
  return true;
}

void wait(void* event) { TS_CUDA_CHECK(cudaEventSynchronize(static_cast<PooledEvent*>(event)->event)); }

// Frees may come from static destructors after the CUDA runtime has shut down (the process is ending
// and the memory goes with it): that is not an error. Anything else is.
bool unloading(cudaError_t err) {
  if (err == cudaSuccess) return false;
  if (err == cudaErrorCudartUnloading) {
    (void)cudaGetLastError();
    return true;
  }
  throw_cuda_error(err, "cudaFree", __FILE__, __LINE__);
}

class DeviceBackend final : public alloc::AllocBackend {
 public:
  explicit DeviceBackend(int device) : device_(device) {}
  void* raw_alloc(size_t nbytes) override {
    CurrentDevice g(device_);
    void* p = nullptr;
    // During a graph capture in global or thread-local mode cudaMalloc is an "unsafe" call; it is fine
    // here (the graph gets new addresses, nothing is freed before its replays): relaxed for the call, as
    // PyTorch's cudaMallocMaybeCapturing (Note [Graph private pools]).
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    TS_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
    const cudaError_t err = cudaMalloc(&p, nbytes);
    (void)cudaThreadExchangeStreamCaptureMode(&mode);
    if (err == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();  // not sticky: clear it so that the next call starts clean
      return nullptr;
    }
    if (err != cudaSuccess) throw_cuda_error(err, "cudaMalloc", __FILE__, __LINE__);
    return p;
  }
  void raw_free(void* ptr) override {
    // The device made current by hand: a failing cudaGetDevice at shutdown must not raise here.
    int cur = -1;
    if (cudaGetDevice(&cur) != cudaSuccess) {
      (void)cudaGetLastError();
      cur = -1;
    }
    if (cur >= 0 && cur != device_) (void)cudaSetDevice(device_);
    const cudaError_t err = cudaFree(ptr);
    if (cur >= 0 && cur != device_) (void)cudaSetDevice(cur);
    (void)unloading(err);
  }
  void* record_event(void* stream) override { return record_on(stream); }
  bool event_done(void* event) override { return done(event); }
  void event_wait(void* event) override { wait(event); }
  void release_event(void* event) override { EventPool::get().release(static_cast<PooledEvent*>(event)); }
  void mem_info(size_t* free_bytes, size_t* total_bytes) override {
    CurrentDevice g(device_);
    TS_CUDA_CHECK(cudaMemGetInfo(free_bytes, total_bytes));
  }

 private:
  const int device_;
};

class HostBackend final : public alloc::AllocBackend {
 public:
  void* raw_alloc(size_t nbytes) override {
    void* p = nullptr;
    const cudaError_t err = cudaHostAlloc(&p, nbytes, cudaHostAllocDefault);
    if (err == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      return nullptr;
    }
    if (err != cudaSuccess) throw_cuda_error(err, "cudaHostAlloc", __FILE__, __LINE__);
    return p;
  }
  void raw_free(void* ptr) override { (void)unloading(cudaFreeHost(ptr)); }
  void* record_event(void* stream) override { return record_on(stream); }
  bool event_done(void* event) override { return done(event); }
  void event_wait(void* event) override { wait(event); }
  void release_event(void* event) override { EventPool::get().release(static_cast<PooledEvent*>(event)); }
  void mem_info(size_t* free_bytes, size_t* total_bytes) override { *free_bytes = *total_bytes = 0; }
};

}  // namespace

std::unique_ptr<alloc::AllocBackend> make_device_backend(int device_index) {
  return std::make_unique<DeviceBackend>(device_index);
}
std::unique_ptr<alloc::AllocBackend> make_host_backend() { return std::make_unique<HostBackend>(); }

}  // namespace tessera::cuda
