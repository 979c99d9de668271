// The CUDA caching allocator's internal interface (the public statistics are in tessera/cuda.h).
// Storage of cuda tensors comes from here through the Allocator registered for DeviceType::CUDA.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>

#include "runtime/allocator.h"

namespace tessera::cuda {

// The Allocator for DeviceType::CUDA (the caching allocator, or plain cudaMalloc/cudaFree under
// TESSERA_CUDA_ALLOC_CONF=backend:cudaMalloc). Blocks belong to the stream current at allocation.
Allocator* cuda_allocator();

// Marks the block holding `ptr` as used by `stream`: when it is freed, it is reused only after the
// work queued on `stream` up to the free has finished (PyTorch's Tensor.record_stream). ValueError for
// a pointer that is not in a live block of the allocator; nullptr is ignored.
void record_stream(void* ptr, cudaStream_t stream);

// Scratch memory for one kernel or library call (cuBLASLt workspace, reduction partials), from the
// caching allocator on the current stream; freed when the DataPtr goes.
DataPtr allocate_workspace(size_t nbytes);

// The pinned (page-locked) caching host allocator behind Tensor::pin_memory(): freed blocks are reused
// only after the CUDA work that used them (recorded with record_host_use) has finished.
Allocator* pinned_host_allocator();
bool is_pinned(const void* ptr);
// An asynchronous copy queued on `stream` reads or writes the pinned block holding `ptr`: the block is
// not reused before that copy has run. Pointers not from pinned_host_allocator() are ignored.
void record_host_use(const void* ptr, cudaStream_t stream);

// Registers the CUDA allocator and the device hooks at start-up (called from tessera_init).
void register_cuda_runtime();

}  // namespace tessera::cuda
