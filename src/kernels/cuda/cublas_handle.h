// cuBLASLt for the kernels: one handle per (device, thread), pooled across threads (handle_pool.h), and
// the status check that every cuBLAS call goes through (DESIGN.md "Conventions").
#pragma once
#include <cublasLt.h>

namespace tessera::cuda {

// The cuBLASLt handle of the current device for the calling thread.
cublasLtHandle_t cublaslt_handle();

// Raises the Error for a failed cuBLAS status: OutOfMemoryError for CUBLAS_STATUS_ALLOC_FAILED,
// NotImplementedError for CUBLAS_STATUS_NOT_SUPPORTED, DeviceError otherwise.
[[noreturn]] void throw_cublas_error(cublasStatus_t status, const char* what, const char* file, int line);

}  // namespace tessera::cuda

#define TS_CUBLAS_CHECK(expr)                                                          \
  do {                                                                                 \
    cublasStatus_t ts_cublas_st_ = (expr);                                             \
    if (ts_cublas_st_ != CUBLAS_STATUS_SUCCESS) [[unlikely]]                           \
      ::tessera::cuda::throw_cublas_error(ts_cublas_st_, #expr, __FILE__, __LINE__);   \
  } while (0)
