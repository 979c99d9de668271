// cuDNN for the kernels: one handle per (device, thread), pooled across threads (handle_pool.h) and
// bound to the current stream on each use; the status check that every cuDNN call goes through
// (DESIGN.md "Conventions"); owning wrappers of the legacy descriptors.
#pragma once
#include <cudnn.h>

#include <cstdint>

#include "tessera/dtype.h"

namespace tessera::cuda {

// cuDNN's data type for a floating dtype; DTypeError naming `op` for any other.
cudnnDataType_t cudnn_dtype(DType dtype, const char* op);

// The cuDNN handle of the current device for the calling thread, set to run on `stream`.
cudnnHandle_t cudnn_handle(cudaStream_t stream);

// Raises the Error for a failed cuDNN status: OutOfMemoryError for allocation failures,
// NotImplementedError for the CUDNN_STATUS_NOT_SUPPORTED category, DeviceError otherwise.
[[noreturn]] void throw_cudnn_error(cudnnStatus_t status, const char* what, const char* file, int line);

// Whether a status is in the "not supported" category (an algorithm that does not apply to a
// configuration: the caller tries the next one).
inline bool cudnn_not_supported(cudnnStatus_t s) {
  return s == CUDNN_STATUS_NOT_SUPPORTED || CUDNN_STATUS_CATEGORY(s) == CUDNN_STATUS_NOT_SUPPORTED;
}

}  // namespace tessera::cuda

#define TS_CUDNN_CHECK(expr)                                                         \
  do {                                                                               \
    cudnnStatus_t ts_cudnn_st_ = (expr);                                             \
    if (ts_cudnn_st_ != CUDNN_STATUS_SUCCESS) [[unlikely]]                           \
      ::tessera::cuda::throw_cudnn_error(ts_cudnn_st_, #expr, __FILE__, __LINE__);   \
  } while (0)

namespace tessera::cuda {

// Owning legacy descriptors (created on construction, destroyed with the object).
class CudnnTensorDesc {
 public:
  CudnnTensorDesc() { TS_CUDNN_CHECK(cudnnCreateTensorDescriptor(&d_)); }
  ~CudnnTensorDesc() { (void)cudnnDestroyTensorDescriptor(d_); }
  CudnnTensorDesc(const CudnnTensorDesc&) = delete;
  CudnnTensorDesc& operator=(const CudnnTensorDesc&) = delete;
  cudnnTensorDescriptor_t get() const { return d_; }

 private:
  cudnnTensorDescriptor_t d_ = nullptr;
};

class CudnnFilterDesc {
 public:
  CudnnFilterDesc() { TS_CUDNN_CHECK(cudnnCreateFilterDescriptor(&d_)); }
  ~CudnnFilterDesc() { (void)cudnnDestroyFilterDescriptor(d_); }
  CudnnFilterDesc(const CudnnFilterDesc&) = delete;
  CudnnFilterDesc& operator=(const CudnnFilterDesc&) = delete;
  cudnnFilterDescriptor_t get() const { return d_; }

 private:
  cudnnFilterDescriptor_t d_ = nullptr;
};

class CudnnConvDesc {
 public:
  CudnnConvDesc() { TS_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&d_)); }
  ~CudnnConvDesc() { (void)cudnnDestroyConvolutionDescriptor(d_); }
  CudnnConvDesc(const CudnnConvDesc&) = delete;
  CudnnConvDesc& operator=(const CudnnConvDesc&) = delete;
  cudnnConvolutionDescriptor_t get() const { return d_; }

 private:
  cudnnConvolutionDescriptor_t d_ = nullptr;
};

}  // namespace tessera::cuda
