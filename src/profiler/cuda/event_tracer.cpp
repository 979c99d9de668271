// The profiler's GPU tracer where CUPTI is missing: CUDA events recorded on the current stream of the
// current device around each outermost op of a thread (nested ops run inside it on the same stream, so
// timing them too would count the same GPU work twice). Each pair becomes one GPU activity named
// "<gpu time>" linked to that op, so key_averages still gets CUDA time per top-level op; kernels are
// not seen one by one.
//
// Timeline: at start an anchor event is recorded on each device's current stream and waited for, at a
// known steady-clock time; an event's time is the anchor's plus cudaEventElapsedTime(anchor, event).
// Events come from a pool and are reused across profiles (never destroyed while in use). stop() waits
// for every device, the profiler's only host synchronization.
#if !defined(TESSERA_HAVE_CUPTI)

#include <cuda_runtime_api.h>

#include <cstdio>
#include <mutex>

#include "profiler/gpu_tracer.h"
#include "profiler/recorder.h"
#include "runtime/cuda/cuda_stream.h"
#include "tessera/cuda.h"

namespace tessera::profiler::detail {
namespace {

struct Range {
  uint64_t id = 0;
  int device = -1;
  cudaEvent_t begin = nullptr, end = nullptr;
};

struct Open {
  uint64_t id;
  bool timed;  // an outermost range with its begin event recorded
  Range range;
};
thread_local std::vector<Open> t_open;

class EventTracer final : public GpuTracer {
 public:
  bool start() override {
    if (!cuda::is_available()) {
      std::fprintf(stderr, "tessera profiler: CUDA activity requested but no GPU is available; recording the CPU only\n");
      return false;
    }
    std::lock_guard<std::mutex> g(mu_);
    done_.clear();
    anchors_.assign(static_cast<size_t>(cuda::device_count()), {nullptr, 0});
    for (int d = 0; d < cuda::device_count(); ++d) {
      cuda::CurrentDevice cd(d);
      cudaEvent_t e = take_locked(d);
      if (!e || cudaEventRecord(e, cuda::current_raw_stream(d)) != cudaSuccess || cudaEventSynchronize(e) != cudaSuccess) {
        std::fprintf(stderr, "tessera profiler: CUDA events failed on cuda:%d; recording the CPU only\n", d);
        return false;
      }
      anchors_[static_cast<size_t>(d)] = {e, now_ns()};
    }
    return true;
  }

  std::vector<GpuActivity> stop() override {
    for (int d = 0; d < cuda::device_count(); ++d) {
      try {
        cuda::synchronize(d);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "tessera profiler: waiting for cuda:%d failed: %s\n", d, e.what());
      }
    }
    std::lock_guard<std::mutex> g(mu_);
    std::vector<GpuActivity> out;
    for (const Range& r : done_) {
      const auto& [anchor, t0] = anchors_[static_cast<size_t>(r.device)];
      float b = 0, e = 0;
      if (cudaEventElapsedTime(&b, anchor, r.begin) == cudaSuccess && cudaEventElapsedTime(&e, anchor, r.end) == cudaSuccess) {
        GpuActivity a;
        a.kind = EventKind::Kernel;
        a.name = "<gpu time>";
        a.start_ns = t0 + static_cast<int64_t>(double(b) * 1e6);
        a.end_ns = t0 + static_cast<int64_t>(double(e) * 1e6);
        a.device = r.device;
        a.stream = 0;
        a.correlation = r.id;
        a.external_id = r.id;
        out.push_back(std::move(a));
      }
      give_locked(r.device, r.begin);
      give_locked(r.device, r.end);
    }
    done_.clear();
    cudaGetLastError();  // an elapsed-time query on an unfinished event leaves an error behind
    for (size_t d = 0; d < anchors_.size(); ++d)
      if (anchors_[d].first) give_locked(static_cast<int>(d), anchors_[d].first);
    anchors_.clear();
    return out;
  }

  void push(uint64_t id) override {
    Open o{id, false, {}};
    if (t_open.empty()) {
      int d = 0;
      if (cudaGetDevice(&d) == cudaSuccess) {
        std::lock_guard<std::mutex> g(mu_);
        if (static_cast<size_t>(d) < anchors_.size()) {
          o.range = {id, d, take_locked(d), take_locked(d)};
          o.timed = o.range.begin && o.range.end &&
                    cudaEventRecord(o.range.begin, cuda::current_raw_stream(d)) == cudaSuccess;
          if (!o.timed) {
            give_locked(d, o.range.begin);
            give_locked(d, o.range.end);
          }
        }
      }
    }
    t_open.push_back(o);
  }

  void pop() override {
    if (t_open.empty()) return;
    Open o = t_open.back();
    t_open.pop_back();
    if (!o.timed) return;
    cuda::CurrentDevice cd(o.range.device);
    std::lock_guard<std::mutex> g(mu_);
    if (cudaEventRecord(o.range.end, cuda::current_raw_stream(o.range.device)) == cudaSuccess) {
      done_.push_back(o.range);
    } else {
      give_locked(o.range.device, o.range.begin);
      give_locked(o.range.device, o.range.end);
    }
  }

 private:
  // Events belong to the device current at their creation: one pool per device.
  cudaEvent_t take_locked(int device) {
    if (pools_.size() <= static_cast<size_t>(device)) pools_.resize(static_cast<size_t>(device) + 1);
    std::vector<cudaEvent_t>& pool = pools_[static_cast<size_t>(device)];
    if (!pool.empty()) {
      cudaEvent_t e = pool.back();
      pool.pop_back();
      return e;
    }
    cuda::CurrentDevice cd(device);
    cudaEvent_t e = nullptr;
    return cudaEventCreate(&e) == cudaSuccess ? e : nullptr;
  }
  void give_locked(int device, cudaEvent_t e) {
    if (e) pools_[static_cast<size_t>(device)].push_back(e);
  }

  std::mutex mu_;
  std::vector<std::vector<cudaEvent_t>> pools_;
  std::vector<Range> done_;
  std::vector<std::pair<cudaEvent_t, int64_t>> anchors_;  // per device: event, steady-clock time
};

}  // namespace

GpuTracer* gpu_tracer() {
  static EventTracer* t = new EventTracer();  // never destroyed: ranges may end after static destruction
  return t;
}

}  // namespace tessera::profiler::detail

#endif  // !TESSERA_HAVE_CUPTI
