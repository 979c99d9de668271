// CUDA error reporting (cuda_check.h): every failed runtime call or launch becomes a tessera Error
// naming what was done; the out-of-memory code becomes OutOfMemoryError.
#include <string>

#include "runtime/cuda/cuda_check.h"
#include "tessera/error.h"

namespace tessera::cuda {

std::string source_location(const char* file, int line) {
  std::string where = file;
  const auto src = where.rfind("/src/");
  if (src != std::string::npos) where = where.substr(src + 1);
  return where + ":" + std::to_string(line);
}

void throw_cuda_error(cudaError_t err, const char* what, const char* file, int line) {
  (void)cudaGetLastError();  // clear a sticky-free error so that the next call starts clean
  const std::string where = source_location(file, line);
  if (err == cudaErrorMemoryAllocation)
    TS_THROW(OutOfMemoryError, what, ": CUDA out of memory (", cudaGetErrorName(err), ": ", cudaGetErrorString(err),
             ") at ", where);
  if (err == cudaErrorNoKernelImageForDevice)
    TS_THROW(DeviceError, what, ": ", cudaGetErrorString(err),
             " — tessera was not built for this GPU's architecture; rebuild with -DCMAKE_CUDA_ARCHITECTURES=<its sm> (",
             where, ")");
  TS_THROW(DeviceError, what, ": CUDA error ", cudaGetErrorName(err), " (", cudaGetErrorString(err), ") at ", where);
}

void check_launch(const char* op, const char* kernel) {
  cudaError_t err = cudaGetLastError();
  if (err == cudaSuccess) [[likely]] return;
  std::string what = std::string(op) + ": kernel " + kernel;
  throw_cuda_error(err, what.c_str(), __FILE__, __LINE__);
}

}  // namespace tessera::cuda
