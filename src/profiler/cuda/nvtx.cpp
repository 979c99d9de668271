// NVTX ranges for Nsight Systems (NVTX3 is header-only; without a tool attached each call is a cheap
// no-op). Pushed and popped on the op's thread, as NVTX's range stack is per thread.
#include <nvtx3/nvToolsExt.h>

#include "profiler/gpu_tracer.h"

namespace tessera::profiler::detail {

void nvtx_push(const char* name) { nvtxRangePushA(name); }
void nvtx_pop() { nvtxRangePop(); }

}  // namespace tessera::profiler::detail
