// Devices: count, properties, the current device and its guards (tessera/cuda.h). The count is
// queried once; a machine without a GPU (or without a driver) has zero devices and is_available()
// false, without raising.
#include <mutex>
#include <vector>

#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/deferred_check.h"
#include "runtime/cuda/cuda_stream.h"
#include "runtime/cuda/graph_capture.h"
#include "tessera/cuda.h"
#include "tessera/error.h"

namespace tessera::cuda {
namespace {

int query_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

}  // namespace

bool is_built() { return true; }

int device_count() {
  static const int n = query_count();
  return n;
}

bool is_available() { return device_count() > 0; }

static void check_index(int index, const char* what) {
  TS_CHECK(device_count() > 0, DeviceError, what, ": no CUDA GPU was found (cudaGetDeviceCount reports none)");
  TS_CHECK(index >= 0 && index < device_count(), DeviceError, what, ": invalid device cuda:", index, " (", device_count(),
           " device", device_count() == 1 ? "" : "s", " found)");
}

int current_device() {
  TS_CHECK(device_count() > 0, DeviceError, "current_device: no CUDA GPU was found");
  int d = 0;
  TS_CUDA_CHECK(cudaGetDevice(&d));
  return d;
}

void set_device(int index) {
  check_index(index, "set_device");
  TS_CUDA_CHECK(cudaSetDevice(index));
}

DeviceProperties get_device_properties(int index) {
  if (index < 0) index = current_device();
  check_index(index, "get_device_properties");
  static std::mutex mu;
  static std::vector<DeviceProperties> cache(device_count());
  static std::vector<bool> have(device_count(), false);
  std::lock_guard<std::mutex> g(mu);
  if (!have[index]) {
    cudaDeviceProp p{};
    TS_CUDA_CHECK(cudaGetDeviceProperties(&p, index));
    DeviceProperties& d = cache[index];
    d.name = p.name;
    d.major = p.major;
    d.minor = p.minor;
    d.total_memory = static_cast<int64_t>(p.totalGlobalMem);
    d.multi_processor_count = p.multiProcessorCount;
    d.l2_cache_size = p.l2CacheSize;
    d.memory_bus_width = p.memoryBusWidth;
    int clock = 0;
    if (cudaDeviceGetAttribute(&clock, cudaDevAttrMemoryClockRate, index) == cudaSuccess) d.memory_clock_khz = clock;
    (void)cudaGetLastError();
    have[index] = true;
  }
  return cache[index];
}

DeviceGuard::DeviceGuard(int index) {
  check_index(index, "DeviceGuard");
  TS_CUDA_CHECK(cudaGetDevice(&prev_));
  if (prev_ != index) TS_CUDA_CHECK(cudaSetDevice(index));
}
DeviceGuard::DeviceGuard(Device device) : DeviceGuard(device.is_cuda() ? device.index() : -1) {}
DeviceGuard::~DeviceGuard() {
  int cur = -1;
  if (cudaGetDevice(&cur) == cudaSuccess && cur != prev_) (void)cudaSetDevice(prev_);
}

CurrentDevice::CurrentDevice(int index) : prev_(-1) {
  int cur = 0;
  TS_CUDA_CHECK(cudaGetDevice(&cur));
  if (index >= 0 && cur != index) {
    check_index(index, "CurrentDevice");
    TS_CUDA_CHECK(cudaSetDevice(index));
    prev_ = cur;
  }
}
CurrentDevice::~CurrentDevice() {
  if (prev_ >= 0) (void)cudaSetDevice(prev_);
}

void synchronize(int index) {
  if (index < 0) index = current_device();
  CurrentDevice g(index);
  check_not_capturing("synchronize", current_raw_stream(index));
  TS_CUDA_CHECK(cudaDeviceSynchronize());
  poll_deferred_checks();  // Note [Deferred device checks]
}

}  // namespace tessera::cuda
