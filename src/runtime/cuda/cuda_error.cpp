// CUDA error reporting (cuda_check.h): every failed runtime call or launch becomes a tessera Error
// naming what was done; the out-of-memory code becomes OutOfMemoryError.
#include <string>

#include "runtime/cuda/cuda_check.h"
#include "tessera/error.h"

namespace tessera::cuda {

void throw_cuda_error(cudaError_t err, const char* what, const char* file, int line) {
  (void)cudaGetLastError();  // clear a sticky-free error so that the next call starts clean
  std::string where = file;
  auto slash = where.rfind("/src/");
  if (slash != std::string::npos) where = where.substr(slash + 1);
  if (err == cudaErrorMemoryAllocation)
    TS_THROW(OutOfMemoryError, what, ": CUDA out of memory (", cudaGetErrorName(err), ": ", cudaGetErrorString(err),
             ") at ", where, ":", line);
  if (err == cudaErrorNoKernelImageForDevice)
    TS_THROW(DeviceError, what, ": ", cudaGetErrorString(err),
             " — tessera was not built for this GPU's architecture; rebuild with -DCMAKE_CUDA_ARCHITECTURES=<its sm> (",
             where, ":", line, ")");
  TS_THROW(DeviceError, what, ": CUDA error ", cudaGetErrorName(err), " (", cudaGetErrorString(err), ") at ", where,
           ":", line);
}

void check_launch(const char* op, const char* kernel) {
  cudaError_t err = cudaGetLastError();
  if (err == cudaSuccess) [[likely]] return;
  std::string what = std::string(op) + ": kernel " + kernel;
  throw_cuda_error(err, what.c_str(), __FILE__, __LINE__);
}

}  // namespace tessera::cuda
