// The check that ops which bring device values back to the host make first (tessera/cuda_graph.h): a
// CUDA graph being captured on the current stream cannot take a host read, so the op raises
// "<op>: cannot synchronize the device while a CUDA graph is being captured (...)" instead of
// invalidating the capture. Free for CPU tensors; without a CUDA runtime registered, a no-op.
#pragma once
#include "runtime/device_hooks.h"
#include "tessera/tensor.h"

namespace tessera {

inline void check_not_capturing(const char* op, const Tensor& t) {
  if (!t.is_cuda()) return;
  const CudaHooks* h = cuda_hooks();
  if (h && h->check_not_capturing) h->check_not_capturing(op);
}

}  // namespace tessera
