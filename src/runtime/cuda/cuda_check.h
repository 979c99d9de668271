// Checking every CUDA runtime return code (DESIGN.md "Conventions"). A failure raises a tessera Error
// whose message names what was being done (the op and kernel, or the runtime call), the CUDA error's
// name and text, and where; an out-of-memory code raises OutOfMemoryError. Included by runtime/cuda and
// kernels/cuda only (it pulls in cuda_runtime_api.h).
#pragma once
#include <cuda_runtime_api.h>

#include <string>

namespace tessera::cuda {

// Raises the Error for `err` (which is not cudaSuccess). `what` says what failed: "cudaMalloc",
// "add: binary_vec_kernel", ...
[[noreturn]] void throw_cuda_error(cudaError_t err, const char* what, const char* file, int line);

// "runtime/cuda/stream.cpp:42" from __FILE__ and __LINE__: the path from the source tree's src/ on, for
// the messages of CUDA, cuBLAS and cuDNN errors.
std::string source_location(const char* file, int line);

// After a kernel launch: raises, naming `op` and `kernel`, if the launch failed. Asynchronous errors
// of earlier kernels surface at the next synchronizing call, as in CUDA itself.
void check_launch(const char* op, const char* kernel);

}  // namespace tessera::cuda

// TS_CUDA_CHECK(cudaMemcpyAsync(...)): raises with the call's text when it does not return cudaSuccess.
#define TS_CUDA_CHECK(expr)                                                         \
  do {                                                                              \
    cudaError_t ts_cuda_err_ = (expr);                                              \
    if (ts_cuda_err_ != cudaSuccess) [[unlikely]]                                   \
      ::tessera::cuda::throw_cuda_error(ts_cuda_err_, #expr, __FILE__, __LINE__);   \
  } while (0)
