// The raw side of streams, for kernels and library calls: the cudaStream_t that the current thread's
// current stream of a device is. Every launch and every cuBLAS/cuDNN call takes its stream from here
// (Note [Current stream]).
//
// Note [Current stream]: each device has a default stream that tessera creates (non-blocking, so it
// never serializes with the legacy NULL stream) and, per thread, a current stream that starts as that
// default and is changed by set_current_stream / StreamGuard. Kernels never synchronize; ordering
// between streams is by events (Event::wait, record_stream in the caching allocator).
#pragma once
#include <cuda_runtime_api.h>

#include "tessera/cuda.h"

namespace tessera::cuda {

cudaStream_t current_raw_stream(int device_index = -1);

// The device a tensor's kernels run on made current for the scope (cheap when it already is).
class CurrentDevice {
 public:
  explicit CurrentDevice(int index);
  ~CurrentDevice();
  CurrentDevice(const CurrentDevice&) = delete;
  CurrentDevice& operator=(const CurrentDevice&) = delete;

 private:
  int prev_;
};

}  // namespace tessera::cuda
