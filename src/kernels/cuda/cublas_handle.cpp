// cuBLASLt handles per (device, thread) and cuBLAS status errors (cublas_handle.h).
#include "kernels/cuda/cublas_handle.h"

#include <string>

#include "kernels/cuda/handle_pool.h"
#include "runtime/cuda/cuda_check.h"
#include "tessera/cuda.h"
#include "tessera/error.h"

namespace tessera::cuda {

cublasLtHandle_t cublaslt_handle() {
  return HandlePool<cublasLtHandle_t>::get(static_cast<size_t>(current_device()), [] {
    cublasLtHandle_t h = nullptr;
    TS_CUBLAS_CHECK(cublasLtCreate(&h));
    return h;
  });
}

void throw_cublas_error(cublasStatus_t status, const char* what, const char* file, int line) {
  const std::string where = source_location(file, line);
  const char* name = cublasLtGetStatusName(status);
  const char* text = cublasLtGetStatusString(status);
  if (status == CUBLAS_STATUS_ALLOC_FAILED)
    TS_THROW(OutOfMemoryError, what, ": cuBLAS could not allocate memory (", name, ") at ", where);
  if (status == CUBLAS_STATUS_NOT_SUPPORTED)
    TS_THROW(NotImplementedError, what, ": not supported by cuBLAS (", name, ": ", text, ") at ", where);
  TS_THROW(DeviceError, what, ": cuBLAS error ", name, " (", text, ") at ", where);
}

}  // namespace tessera::cuda
