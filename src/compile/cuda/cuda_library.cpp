// Generated CUDA kernels through NVRTC and the runtime's library API (compile/codegen/cuda_library.h).
#include "compile/codegen/cuda_library.h"

#include <cuda_runtime_api.h>
#include <nvrtc.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <numeric>
#include <vector>

#include "compile/codegen/kernel_cache.h"
#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/cuda_stream.h"
#include "tessera/error.h"

#ifndef TESSERA_VERSION_STRING
#define TESSERA_VERSION_STRING "unknown"
#endif

namespace tessera::compiler {

class CudaLibrary {
 public:
  explicit CudaLibrary(cudaLibrary_t lib) : lib_(lib) {}
  cudaLibrary_t lib_;
};

namespace {

#define TS_NVRTC_CHECK(expr, what)                                                                     \
  do {                                                                                                 \
    nvrtcResult ts_r_ = (expr);                                                                        \
    TS_CHECK(ts_r_ == NVRTC_SUCCESS, Error, "compile: ", #expr, " failed: ", nvrtcGetErrorString(ts_r_), \
             " (", what, ")");                                                                         \
  } while (0)

std::mutex g_mu;
std::map<std::string, std::shared_ptr<const CudaLibrary>>& loaded() {
  static std::map<std::string, std::shared_ptr<const CudaLibrary>> m;
  return m;
}

}  // namespace

bool cuda_codegen_available() { return true; }

std::string nvrtc_version() {
  int major = 0, minor = 0;
  TS_NVRTC_CHECK(nvrtcVersion(&major, &minor), "nvrtcVersion");
  return std::to_string(major) + "." + std::to_string(minor);
}

std::string nvrtc_compile(const std::string& source, const std::string& source_path, int arch) {
  nvrtcProgram prog = nullptr;
  TS_NVRTC_CHECK(nvrtcCreateProgram(&prog, source.c_str(), source_path.c_str(), 0, nullptr, nullptr), source_path);
  const std::string arch_opt = "--gpu-architecture=sm_" + std::to_string(arch);
  const char* opts[] = {arch_opt.c_str(), "--std=c++17"};
  const nvrtcResult r = nvrtcCompileProgram(prog, 2, opts);
  if (r != NVRTC_SUCCESS) {
    size_t n = 0;
    std::string log;
    if (nvrtcGetProgramLogSize(prog, &n) == NVRTC_SUCCESS && n > 1) {
      log.resize(n);
      nvrtcGetProgramLog(prog, log.data());
    }
    nvrtcDestroyProgram(&prog);
    if (log.size() > 8000) log = log.substr(0, 8000) + "\n[... log cut]";
    TS_THROW(Error, "compile: NVRTC failed on the generated kernels for sm_", arch, " (", nvrtcGetErrorString(r),
             "); source: ", source_path, "\n", log);
  }
  size_t size = 0;
  TS_NVRTC_CHECK(nvrtcGetCUBINSize(prog, &size), source_path);
  std::string cubin(size, '\0');
  TS_NVRTC_CHECK(nvrtcGetCUBIN(prog, cubin.data()), source_path);
  TS_NVRTC_CHECK(nvrtcDestroyProgram(&prog), source_path);
  return cubin;
}

int cuda_arch_of(int index) {
  int major = 0, minor = 0;
  TS_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, index));
  TS_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, index));
  return major * 10 + minor;
}

std::shared_ptr<const CudaLibrary> build_cuda_library(const std::string& source, int arch, int device_index) {
  const std::string key = cache_key({source, "sm_" + std::to_string(arch), "nvrtc " + nvrtc_version(), TESSERA_VERSION_STRING});
  {
    std::lock_guard<std::mutex> g(g_mu);
    if (auto it = loaded().find(key); it != loaded().end()) {
      count_cache(&KernelCacheStats::memory_hits);
      return it->second;
    }
  }
  std::string cubin;
  if (std::optional<std::string> hit = cache_read(key, ".cubin")) {
    count_cache(&KernelCacheStats::disk_hits);
    cubin = std::move(*hit);
  } else {
    const std::string src = cache_path(key, ".cu");
    write_file_atomic(src, source);
    cubin = nvrtc_compile(source, src, arch);  // outside the lock: kernels compile in parallel
    cache_write(key, ".cubin", cubin);
    count_cache(&KernelCacheStats::compiled);
  }
  cuda::CurrentDevice dev(device_index);
  cudaLibrary_t lib = nullptr;
  TS_CUDA_CHECK(cudaLibraryLoadData(&lib, cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
  auto l = std::make_shared<const CudaLibrary>(lib);
  std::lock_guard<std::mutex> g(g_mu);
  return loaded().emplace(key, l).first->second;
}

void* cuda_kernel(const CudaLibrary& lib, const std::string& name) {
  cudaKernel_t k = nullptr;
  TS_CUDA_CHECK(cudaLibraryGetKernel(&k, lib.lib_, name.c_str()));
  return reinterpret_cast<void*>(k);
}

void launch_cuda_kernel(void* kernel, int64_t numel, void** args, int device_index, const char* name, int64_t period) {
  if (numel <= 0) return;
  static std::vector<int> sms = [] {
    int n = 0;
    TS_CUDA_CHECK(cudaGetDeviceCount(&n));
    std::vector<int> v(n, 0);
    for (int i = 0; i < n; ++i) TS_CUDA_CHECK(cudaDeviceGetAttribute(&v[i], cudaDevAttrMultiProcessorCount, i));
    return v;
  }();
  constexpr int64_t kThreads = 256;
  const int64_t max_blocks = int64_t{16} * std::max(1, sms.at(device_index));
  int64_t blocks = std::min((numel + kThreads - 1) / kThreads, max_blocks);
  if (period > 1 && blocks * kThreads < numel) {  // the kernel strides: by a whole number of periods
    const int64_t m = period / std::gcd(period, kThreads);
    blocks = std::max(m, blocks / m * m);
  }
  cuda::CurrentDevice dev(device_index);
  TS_CUDA_CHECK(cudaLaunchKernel(kernel, dim3(static_cast<unsigned>(blocks)), dim3(kThreads), args, 0,
                                 cuda::current_raw_stream(device_index)));
  cuda::check_launch("compiled graph", name);
}

void launch_cuda_rows(void* kernel, int64_t rows, int rows_per_block, int row_threads, void** args, int device_index,
                      const char* name) {
  if (rows <= 0) return;
  const int64_t blocks = std::min<int64_t>((rows + rows_per_block - 1) / rows_per_block, int64_t{1} << 30);
  cuda::CurrentDevice dev(device_index);
  TS_CUDA_CHECK(cudaLaunchKernel(kernel, dim3(static_cast<unsigned>(blocks)), dim3(rows_per_block * row_threads), args, 0,
                                 cuda::current_raw_stream(device_index)));
  cuda::check_launch("compiled graph", name);
}

void forget_loaded_cuda_libraries() {
  std::lock_guard<std::mutex> g(g_mu);
  loaded().clear();
}

}  // namespace tessera::compiler
