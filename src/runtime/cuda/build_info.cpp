// What this build of the CUDA backend holds and whether a GPU can run it: build_info() (library
// versions, architectures) and the architecture check at a device's first use (runtime/cuda_arch.h).
// TESSERA_CUDA_ARCHS is CMAKE_CUDA_ARCHITECTURES with commas, set by CMake on this target.
#include <cublasLt.h>
#include <cudnn.h>
#include <dlfcn.h>

#include <array>
#include <mutex>
#include <string>

#include "runtime/cuda/cuda_backends.h"
#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda_arch.h"
#include "tessera/cuda.h"
#include "tessera/error.h"

#ifndef TESSERA_CUDA_ARCHS
#define TESSERA_CUDA_ARCHS ""
#endif

namespace tessera::cuda {
namespace {

const cuda_arch::ArchList& compiled_archs() {
  static const cuda_arch::ArchList list = cuda_arch::parse(TESSERA_CUDA_ARCHS);
  return list;
}

// "13.0" from CUDA's 1000 * major + 10 * minor.
std::string cuda_version(int v) { return v > 0 ? std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10) : ""; }

// "9.19.0" from 10000 * major + 100 * minor + patch (cuDNN 9, cuBLAS, NCCL >= 2.9), or the older
// 1000 * major + 100 * minor + patch.
std::string dotted(size_t v, size_t major_unit) {
  if (v == 0) return "";
  return std::to_string(v / major_unit) + "." + std::to_string(v % major_unit / 100) + "." + std::to_string(v % 100);
}

// NCCL is not a link dependency of the runtime: its version is read from the library if the process has
// it or can load it.
std::string nccl_version() {
  void* h = dlopen("libnccl.so.2", RTLD_LAZY | RTLD_NOLOAD);
  if (!h) h = dlopen("libnccl.so.2", RTLD_LAZY | RTLD_LOCAL);
  if (!h) {
    (void)dlerror();
    return "";
  }
  using Fn = int (*)(int*);
  auto fn = reinterpret_cast<Fn>(dlsym(h, "ncclGetVersion"));
  int v = 0;
  std::string out;
  if (fn && fn(&v) == 0 && v > 0) out = dotted(static_cast<size_t>(v), v >= 20900 ? 10000 : 1000);
  dlclose(h);
  return out;
}

}  // namespace

void check_device_architecture(int device_index) {
  static std::array<std::once_flag, 64> once;
  if (device_index < 0 || device_index >= 64) return;
  // A failed check leaves the flag unset: every later first-use raises again.
  std::call_once(once[device_index], [device_index] {
    const DeviceProperties p = get_device_properties(device_index);
    const cuda_arch::ArchList& list = compiled_archs();
    if (cuda_arch::supports(list, p.major, p.minor)) return;
    TS_THROW(DeviceError, "cuda:", device_index, " (", p.name, ") is sm_", p.major, p.minor,
             ", which cannot run this build of tessera: it holds code for ", cuda_arch::describe(list),
             " only; rebuild with -DCMAKE_CUDA_ARCHITECTURES=", p.major, p.minor);
  });
}

BuildInfo build_info() {
  BuildInfo b;
  int v = 0;
  if (cudaRuntimeGetVersion(&v) == cudaSuccess) b.cuda_runtime = cuda_version(v);
  v = 0;
  if (cudaDriverGetVersion(&v) == cudaSuccess) b.driver = cuda_version(v);
  (void)cudaGetLastError();
  const size_t dnn = cudnnGetVersion();
  b.cudnn = dotted(dnn, dnn >= 90000 ? 10000 : 1000);
  b.cublas = dotted(cublasLtGetVersion(), 10000);
  b.nccl = nccl_version();
  b.architectures = cuda_arch::sass_numbers(compiled_archs());
  b.ptx_architectures = cuda_arch::ptx_numbers(compiled_archs());
  return b;
}

}  // namespace tessera::cuda
