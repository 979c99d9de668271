// cuDNN handles per (device, thread) and cuDNN status errors (cudnn_handle.h).
#include "kernels/cuda/cudnn_handle.h"

#include <mutex>
#include <string>
#include <vector>

#include "tessera/cuda.h"
#include "tessera/error.h"

namespace tessera::cuda {
namespace {

// Handles of threads that have ended, per device, for the next thread to take. Leaked on purpose so
// that thread-local destructors running at exit still find it.
struct FreeHandles {
  std::mutex mu;
  std::vector<std::vector<cudnnHandle_t>> by_device;
};
FreeHandles& free_handles() {
  static FreeHandles* f = new FreeHandles;
  return *f;
}

struct ThreadHandles {
  std::vector<cudnnHandle_t> by_device;
  ~ThreadHandles() {
    FreeHandles& f = free_handles();
    std::lock_guard<std::mutex> lock(f.mu);
    for (size_t d = 0; d < by_device.size(); ++d) {
      if (!by_device[d]) continue;
      if (f.by_device.size() <= d) f.by_device.resize(d + 1);
      f.by_device[d].push_back(by_device[d]);
    }
  }
};
thread_local ThreadHandles t_handles;

}  // namespace

cudnnHandle_t cudnn_handle(cudaStream_t stream) {
  const size_t d = static_cast<size_t>(current_device());
  std::vector<cudnnHandle_t>& mine = t_handles.by_device;
  if (mine.size() <= d) mine.resize(d + 1, nullptr);
  if (!mine[d]) {
    {
      FreeHandles& f = free_handles();
      std::lock_guard<std::mutex> lock(f.mu);
      if (f.by_device.size() > d && !f.by_device[d].empty()) {
        mine[d] = f.by_device[d].back();
        f.by_device[d].pop_back();
      }
    }
    if (!mine[d]) TS_CUDNN_CHECK(cudnnCreate(&mine[d]));
  }
  TS_CUDNN_CHECK(cudnnSetStream(mine[d], stream));
  return mine[d];
}

void throw_cudnn_error(cudnnStatus_t status, const char* what, const char* file, int line) {
  std::string where = file;
  auto slash = where.rfind("/src/");
  if (slash != std::string::npos) where = where.substr(slash + 1);
  const char* text = cudnnGetErrorString(status);
  if (status == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED ||
      status == CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED)
    TS_THROW(OutOfMemoryError, what, ": cuDNN could not allocate memory (", text, ") at ", where, ":", line);
  if (cudnn_not_supported(status))
    TS_THROW(NotImplementedError, what, ": not supported by cuDNN (", text, ") at ", where, ":", line);
  TS_THROW(DeviceError, what, ": cuDNN error ", static_cast<int>(status), " (", text, ") at ", where, ":", line);
}

}  // namespace tessera::cuda
