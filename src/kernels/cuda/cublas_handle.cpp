// cuBLASLt handles per (device, thread) and cuBLAS status errors (cublas_handle.h).
#include "kernels/cuda/cublas_handle.h"

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
  std::vector<std::vector<cublasLtHandle_t>> by_device;
};
FreeHandles& free_handles() {
  static FreeHandles* f = new FreeHandles;
  return *f;
}

struct ThreadHandles {
  std::vector<cublasLtHandle_t> by_device;
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

cublasLtHandle_t cublaslt_handle() {
  const size_t d = static_cast<size_t>(current_device());
  std::vector<cublasLtHandle_t>& mine = t_handles.by_device;
  if (mine.size() <= d) mine.resize(d + 1, nullptr);
  if (mine[d]) [[likely]] return mine[d];
  {
    FreeHandles& f = free_handles();
    std::lock_guard<std::mutex> lock(f.mu);
    if (f.by_device.size() > d && !f.by_device[d].empty()) {
      mine[d] = f.by_device[d].back();
      f.by_device[d].pop_back();
    }
  }
  if (!mine[d]) TS_CUBLAS_CHECK(cublasLtCreate(&mine[d]));
  return mine[d];
}

void throw_cublas_error(cublasStatus_t status, const char* what, const char* file, int line) {
  std::string where = file;
  auto slash = where.rfind("/src/");
  if (slash != std::string::npos) where = where.substr(slash + 1);
  const char* name = cublasLtGetStatusName(status);
  const char* text = cublasLtGetStatusString(status);
  if (status == CUBLAS_STATUS_ALLOC_FAILED)
    TS_THROW(OutOfMemoryError, what, ": cuBLAS could not allocate memory (", name, ") at ", where, ":", line);
  if (status == CUBLAS_STATUS_NOT_SUPPORTED)
    TS_THROW(NotImplementedError, what, ": not supported by cuBLAS (", name, ": ", text, ") at ", where, ":", line);
  TS_THROW(DeviceError, what, ": cuBLAS error ", name, " (", text, ") at ", where, ":", line);
}

}  // namespace tessera::cuda
