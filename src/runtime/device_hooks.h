// The few CUDA services that layers above runtime need without depending on runtime/cuda (a target
// that exists only in CUDA builds): pinned host memory and stream bookkeeping of device memory. The
// CUDA runtime fills the table at start-up (register_cuda_runtime); in a build without CUDA it stays
// empty and callers raise DeviceError.
#pragma once
#include "runtime/allocator.h"

namespace tessera {

struct CudaHooks {
  // The caching allocator of page-locked host memory (Tensor::pin_memory).
  Allocator* (*pinned_allocator)() = nullptr;
  // Whether host memory at `ptr` is page-locked.
  bool (*is_pinned)(const void* ptr) = nullptr;
  // The device memory at `ptr` is used by `stream` (a cudaStream_t): Tensor::record_stream.
  void (*record_stream)(void* ptr, void* stream) = nullptr;
  // Raises "<op>: cannot synchronize the device while a CUDA graph is being captured" when the current
  // stream is being captured (cuda::check_not_capturing).
  void (*check_not_capturing)(const char* op) = nullptr;
};

// The registered hooks, or nullptr when no CUDA runtime registered any.
const CudaHooks* cuda_hooks();
void set_cuda_hooks(const CudaHooks& hooks);

}  // namespace tessera
