// The profiler's GPU tracer on CUPTI's activity API (built where the toolkit has CUPTI): kernels
// (concurrent kernel records), memcpy and memset with start, end, device, stream and correlation id.
//
// Linking GPU work to ops: push(id) calls cuptiActivityPushExternalCorrelationId(CUSTOM0, id) on the
// calling thread and pop() pops it, so every CUDA API call made inside the innermost open range yields
// an EXTERNAL_CORRELATION record (CUPTI correlation id -> our event id); the kernel, copy or memset
// record carries the same correlation id. Both runtime and driver API records are enabled, since
// libraries (cuBLAS, cuDNN) may launch through the driver API; their records are otherwise ignored.
//
// Clocks: CUPTI timestamps are converted to the profiler's steady clock with an offset sampled at
// start (cuptiGetTimestamp against now_ns()).
//
// Buffers: CUPTI asks for buffers (8 MiB, 8-byte aligned) and hands them back full, on its own thread
// or inside cuptiActivityFlushAll; records are parsed at once into the collector under its mutex.
// stop() waits for every device (a host synchronization, the profiler's only one) so that all queued
// work has records, flushes, and disables the kinds.
#if defined(TESSERA_HAVE_CUPTI)

#include <cupti.h>
#include <cxxabi.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>

#include "profiler/gpu_tracer.h"
#include "profiler/recorder.h"
#include "tessera/cuda.h"

namespace tessera::profiler::detail {
namespace {

constexpr size_t kBufferSize = size_t(8) << 20;
constexpr size_t kAlign = 8;  // ACTIVITY_RECORD_ALIGNMENT
constexpr CUpti_ExternalCorrelationKind kExternalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;

struct Collector {
  std::mutex mu;
  std::vector<GpuActivity> activities;
  std::unordered_map<uint32_t, uint64_t> external;  // CUPTI correlation id -> our event id
  int64_t offset_ns = 0;                             // steady clock - CUPTI clock
  size_t dropped = 0;
};
Collector g_collector;

std::string demangle(const char* name) {
  if (!name) return "<unnamed kernel>";
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> d(abi::__cxa_demangle(name, nullptr, nullptr, &status), std::free);
  return status == 0 && d ? std::string(d.get()) : std::string(name);
}

const char* memcpy_kind_name(uint8_t kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return "Memcpy HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return "Memcpy DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return "Memcpy DtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH: return "Memcpy HtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP: return "Memcpy PtoP";
    default: return "Memcpy";
  }
}

const char* result_string(CUptiResult r) {
  const char* s = nullptr;
  if (cuptiGetResultString(r, &s) != CUPTI_SUCCESS || !s) return "unknown CUPTI error";
  return s;
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(kAlign, kBufferSize));
  *size = *buffer ? kBufferSize : 0;
  *max_records = 0;  // as many as fit
}

// The fields every timed record (kernel, memcpy, memset) has, under the same names.
template <class Record>
GpuActivity timed_activity(const Record* r, EventKind kind, std::string name, int64_t offset) {
  GpuActivity a;
  a.kind = kind;
  a.name = std::move(name);
  a.start_ns = static_cast<int64_t>(r->start) + offset;
  a.end_ns = static_cast<int64_t>(r->end) + offset;
  a.device = static_cast<int>(r->deviceId);
  a.stream = r->streamId;
  a.correlation = r->correlationId;
  return a;
}

void parse_record(const CUpti_Activity* rec, int64_t offset, Collector& c) {
  GpuActivity a;
  switch (rec->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
      a = timed_activity(k, EventKind::Kernel, demangle(k->name), offset);
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(rec);
      a = timed_activity(m, EventKind::Memcpy, memcpy_kind_name(m->copyKind), offset);
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(rec);
      a = timed_activity(m, EventKind::Memset, "Memset (Device)", offset);
      break;
    }
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
      const auto* x = reinterpret_cast<const CUpti_ActivityExternalCorrelation*>(rec);
      if (x->externalKind == kExternalKind) c.external[x->correlationId] = x->externalId;
      return;
    }
    default:
      return;  // runtime / driver API records: enabled for the correlation records only
  }
  c.activities.push_back(std::move(a));
}

void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream_id, uint8_t* buffer, size_t, size_t valid_size) {
  {
    std::lock_guard<std::mutex> g(g_collector.mu);
    const int64_t offset = g_collector.offset_ns;
    CUpti_Activity* rec = nullptr;
    while (cuptiActivityGetNextRecord(buffer, valid_size, &rec) == CUPTI_SUCCESS) parse_record(rec, offset, g_collector);
    size_t dropped = 0;
    if (cuptiActivityGetNumDroppedRecords(ctx, stream_id, &dropped) == CUPTI_SUCCESS) g_collector.dropped += dropped;
  }
  std::free(buffer);
}

constexpr CUpti_ActivityKind kKinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                         CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
                                         CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER};

class CuptiTracer final : public GpuTracer {
 public:
  bool start() override {
    if (!cuda::is_available()) {
      std::fprintf(stderr, "tessera profiler: CUDA activity requested but no GPU is available; recording the CPU only\n");
      return false;
    }
    {
      std::lock_guard<std::mutex> g(g_collector.mu);
      g_collector.activities.clear();
      g_collector.external.clear();
      g_collector.dropped = 0;
    }
    // Registered once per process; later profiles reuse the callbacks.
    static const CUptiResult registered = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
    CUptiResult r = registered;
    if (r != CUPTI_SUCCESS) {
      std::fprintf(stderr, "tessera profiler: CUPTI is unavailable (%s); recording the CPU only\n", result_string(r));
      return false;
    }
    // The clock offset, from a CUPTI timestamp taken between two steady-clock readings.
    uint64_t cupti_ts = 0;
    const int64_t before = now_ns();
    r = cuptiGetTimestamp(&cupti_ts);
    const int64_t after = now_ns();
    if (r != CUPTI_SUCCESS) {
      std::fprintf(stderr, "tessera profiler: cuptiGetTimestamp failed (%s); recording the CPU only\n", result_string(r));
      return false;
    }
    {
      std::lock_guard<std::mutex> g(g_collector.mu);
      g_collector.offset_ns = before + (after - before) / 2 - static_cast<int64_t>(cupti_ts);
    }
    enabled_.clear();
    for (CUpti_ActivityKind k : kKinds) {
      r = cuptiActivityEnable(k);
      if (r == CUPTI_SUCCESS) {
        enabled_.push_back(k);
      } else if (k == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || k == CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION) {
        std::fprintf(stderr, "tessera profiler: enabling CUPTI activity %d failed (%s); recording the CPU only\n",
                     static_cast<int>(k), result_string(r));
        disable();
        return false;
      }
    }
    return true;
  }

  std::vector<GpuActivity> stop() override {
    const int n = cuda::device_count();
    for (int d = 0; d < n; ++d) {
      try {
        cuda::synchronize(d);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "tessera profiler: waiting for cuda:%d failed: %s\n", d, e.what());
      }
    }
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    disable();
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    std::lock_guard<std::mutex> g(g_collector.mu);
    std::vector<GpuActivity> out = std::move(g_collector.activities);
    g_collector.activities.clear();
    for (GpuActivity& a : out) {
      auto it = g_collector.external.find(static_cast<uint32_t>(a.correlation));
      if (it != g_collector.external.end()) a.external_id = it->second;
    }
    g_collector.external.clear();
    if (g_collector.dropped > 0)
      std::fprintf(stderr, "tessera profiler: CUPTI dropped %zu activity records\n", g_collector.dropped);
    return out;
  }

  // Hot path while profiling: return codes are not checked (a failure only loses the link to the op).
  void push(uint64_t id) override { cuptiActivityPushExternalCorrelationId(kExternalKind, id); }
  void pop() override {
    uint64_t last = 0;
    cuptiActivityPopExternalCorrelationId(kExternalKind, &last);
  }

 private:
  void disable() {
    for (CUpti_ActivityKind k : enabled_) cuptiActivityDisable(k);
    enabled_.clear();
  }
  std::vector<CUpti_ActivityKind> enabled_;
};

}  // namespace

GpuTracer* gpu_tracer() {
  static CuptiTracer* t = new CuptiTracer();  // never destroyed: ranges may end after static destruction
  return t;
}

}  // namespace tessera::profiler::detail

#endif  // TESSERA_HAVE_CUPTI
