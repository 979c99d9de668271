// Generated CUDA kernels: compiled by NVRTC to machine code for the GPU's architecture (no PTX left
// for the driver to compile), kept in the kernel cache (Note [Kernel cache]) and loaded through the
// runtime's library API (cudaLibraryLoadData: no link to the driver library, so a build with CUDA
// still loads on a machine without a GPU). The implementation is src/compile/cuda/ in a CUDA build and
// src/compile/no_cuda/ otherwise, where every call raises.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

namespace tessera::compiler {

bool cuda_codegen_available();  // a build with CUDA (NVRTC linked); says nothing of a GPU

// NVRTC's version, "13.0", for cache keys and messages.
std::string nvrtc_version();

// Compiles one translation unit to a cubin for sm_<arch> (90 for an H100/H200). Every NVRTC return
// code is checked; a compile error raises with NVRTC's log and `source_path`.
std::string nvrtc_compile(const std::string& source, const std::string& source_path, int arch);

// The compute capability of CUDA device `index` as one number (90).
int cuda_arch_of(int index);

class CudaLibrary;
// The loaded library of one translation unit for `arch`: from this process's, the disk cache or NVRTC.
std::shared_ptr<const CudaLibrary> build_cuda_library(const std::string& source, int arch, int device_index);
// The kernel `name` of a library (raises naming it when absent).
void* cuda_kernel(const CudaLibrary& lib, const std::string& name);
// Launches a generated elementwise kernel over `numel` elements on the current stream of `device_index`
// (256 threads a block, a grid of at most 16 blocks per multiprocessor; the kernel strides over the rest).
// Where it strides, the grid's threads are a multiple of `period` (KernelSpec::thread_period).
void launch_cuda_kernel(void* kernel, int64_t numel, void** args, int device_index, const char* name,
                        int64_t period = 1);

// Launches a generated reduction kernel over `rows` rows (Note [Reduction kernels]): blocks of
// rows_per_block * row_threads threads, one block per rows_per_block rows (the kernel strides over rows
// past the grid's limit).
void launch_cuda_rows(void* kernel, int64_t rows, int rows_per_block, int row_threads, void** args, int device_index,
                      const char* name);

void forget_loaded_cuda_libraries();

}  // namespace tessera::compiler
