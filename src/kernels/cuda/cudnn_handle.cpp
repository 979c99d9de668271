// cuDNN handles per (device, thread) and cuDNN status errors (cudnn_handle.h).
#include "kernels/cuda/cudnn_handle.h"

#include <string>

#include "kernels/cuda/handle_pool.h"
#include "runtime/cuda/cuda_check.h"
#include "tessera/cuda.h"
#include "tessera/error.h"

namespace tessera::cuda {

cudnnHandle_t cudnn_handle(cudaStream_t stream) {
  cudnnHandle_t h = HandlePool<cudnnHandle_t>::get(static_cast<size_t>(current_device()), [] {
    cudnnHandle_t created = nullptr;
    TS_CUDNN_CHECK(cudnnCreate(&created));
    return created;
  });
  TS_CUDNN_CHECK(cudnnSetStream(h, stream));
  return h;
}

cudnnDataType_t cudnn_dtype(DType dtype, const char* op) {
  switch (dtype) {
    case DType::Float16: return CUDNN_DATA_HALF;
    case DType::BFloat16: return CUDNN_DATA_BFLOAT16;
    case DType::Float32: return CUDNN_DATA_FLOAT;
    case DType::Float64: return CUDNN_DATA_DOUBLE;
    default: break;
  }
  TS_THROW(DTypeError, op, ": cuDNN takes float16, bfloat16, float32 and float64, got ", dtype_name(dtype));
}

void throw_cudnn_error(cudnnStatus_t status, const char* what, const char* file, int line) {
  const std::string where = source_location(file, line);
  const char* text = cudnnGetErrorString(status);
  if (status == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED ||
      status == CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED)
    TS_THROW(OutOfMemoryError, what, ": cuDNN could not allocate memory (", text, ") at ", where);
  if (cudnn_not_supported(status))
    TS_THROW(NotImplementedError, what, ": not supported by cuDNN (", text, ") at ", where);
  TS_THROW(DeviceError, what, ": cuDNN error ", static_cast<int>(status), " (", text, ") at ", where);
}

}  // namespace tessera::cuda
