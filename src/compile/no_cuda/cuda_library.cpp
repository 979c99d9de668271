// A build without CUDA: generated CUDA kernels cannot be compiled or run (compile/codegen/cuda_library.h).
#include "compile/codegen/cuda_library.h"

#include "tessera/error.h"

namespace tessera::compiler {

class CudaLibrary {};

namespace {
[[noreturn]] void no_cuda() {
  TS_THROW(NotImplementedError, "compile: this build of tessera has no CUDA (NVRTC): generated CUDA kernels are unavailable");
}
}  // namespace

bool cuda_codegen_available() { return false; }
std::string nvrtc_version() { no_cuda(); }
std::string nvrtc_compile(const std::string&, const std::string&, int) { no_cuda(); }
int cuda_arch_of(int) { no_cuda(); }
std::shared_ptr<const CudaLibrary> build_cuda_library(const std::string&, int, int) { no_cuda(); }
void* cuda_kernel(const CudaLibrary&, const std::string&) { no_cuda(); }
void launch_cuda_kernel(void*, int64_t, void**, int, const char*, int64_t) { no_cuda(); }
void launch_cuda_rows(void*, int64_t, int, int, void**, int, const char*) { no_cuda(); }
void forget_loaded_cuda_libraries() {}

}  // namespace tessera::compiler
