// The profiler's GPU side in a build without CUDA: no tracer (a CUDA activity is reported and ignored)
// and NVTX ranges do nothing.
#include "profiler/gpu_tracer.h"

namespace tessera::profiler::detail {

GpuTracer* gpu_tracer() { return nullptr; }
void nvtx_push(const char*) {}
void nvtx_pop() {}

}  // namespace tessera::profiler::detail
