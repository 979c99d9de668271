// Internal pieces of runtime/cuda shared between its files: the CUDA side of the caching allocators
// (block_pool.h, host_block_cache.h) — segments from cudaMalloc / cudaHostAlloc and events from a
// shared pool, recorded on the device of the stream they mark, whichever device the memory is on — and
// the architecture check that a device's first use runs (build_info.cpp).
#pragma once
#include <memory>

#include "runtime/block_pool.h"

namespace tessera::cuda {

// Device memory of one GPU (cudaMalloc/cudaFree), cudaMemGetInfo for the OOM message.
std::unique_ptr<alloc::AllocBackend> make_device_backend(int device_index);
// Page-locked host memory (cudaHostAlloc/cudaFreeHost).
std::unique_ptr<alloc::AllocBackend> make_host_backend();

// Raises DeviceError when the GPU's compute capability cannot run the architectures compiled in
// (Note in runtime/cuda_arch.h). Checked once per device, at its first use: its default stream, a
// stream created on it, its first allocation.
void check_device_architecture(int device_index);

}  // namespace tessera::cuda
