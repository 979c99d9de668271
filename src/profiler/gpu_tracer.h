// The GPU side of the profiler, behind an interface free of CUDA types: profiler/cuda/ implements it
// with CUPTI's activity API (or with CUDA events where CUPTI is missing) and NVTX; profiler/no_cuda/
// provides the build without CUDA, where there is no tracer and NVTX calls do nothing.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/profiler.h"

namespace tessera::profiler::detail {

struct GpuActivity {
  EventKind kind = EventKind::Kernel;
  std::string name;
  int64_t start_ns = 0, end_ns = 0;  // steady clock, as now_ns()
  int device = -1;
  int64_t stream = -1;
  uint64_t correlation = 0;
  uint64_t external_id = 0;  // the CPU event open when it was launched (0: none)
};

class GpuTracer {
 public:
  virtual ~GpuTracer() = default;
  // Begins collecting; false (with a note on stderr) when no GPU or the tracing library is unavailable.
  virtual bool start() = 0;
  // Waits for the devices' queued work, stops collecting and returns what was collected.
  virtual std::vector<GpuActivity> stop() = 0;
  // The calling thread enters / leaves the CPU event `id` (launches in between are linked to it).
  virtual void push(uint64_t id) = 0;
  virtual void pop() = 0;
};

// The process's tracer (never destroyed), or nullptr in a build without CUDA.
GpuTracer* gpu_tracer();
void nvtx_push(const char* name);
void nvtx_pop();

}  // namespace tessera::profiler::detail
