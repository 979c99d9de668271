// The profiler, with PyTorch's names (torch.profiler): a `profile` scope records every op (name, input
// shapes and dtypes, thread, CPU time, nesting), user ranges (`record_function`), GPU kernels, copies and
// memsets (through CUPTI, linked to the op that launched them) and every allocation and free; then
// `key_averages()` aggregates per op name into PyTorch's table, `export_chrome_trace` writes the trace
// that Perfetto and chrome://tracing open, and `export_memory_timeline` plots memory over time as SVG.
//
//   {
//     ts::profiler::profile prof({.activities = {ts::profiler::CPU, ts::profiler::CUDA},
//                                 .record_shapes = true, .profile_memory = true});
//     { ts::profiler::record_function r("forward"); y = net(x); }
//     prof.stop();
//     std::cout << prof.key_averages().table("self_cpu_time_total", 10);
//     prof.export_chrome_trace("trace.json");
//   }
//
// `emit_nvtx` (as torch.autograd.profiler.emit_nvtx) wraps every op in an NVTX range for Nsight Systems
// without recording anything itself. One `profile` may be active at a time in the process.
// With nothing on, an op pays one relaxed atomic load for all of this (Note [Profiler recording]).
// The header holds no CUDA types.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tessera/device.h"

namespace tessera::profiler {

enum class ProfilerActivity { CPU, CUDA };
inline constexpr ProfilerActivity CPU = ProfilerActivity::CPU;
inline constexpr ProfilerActivity CUDA = ProfilerActivity::CUDA;

struct ProfileOptions {
  // What to record: CPU (ops and user ranges on the host) and CUDA (kernels, memcpy, memset). CUDA is
  // ignored, with a note on stderr, where no GPU is available.
  std::vector<ProfilerActivity> activities = {CPU};
  bool record_shapes = false;   // input shapes and dtypes of each op
  bool profile_memory = false;  // every allocation and free (MemoryEvent)
  bool start = true;            // start at construction; otherwise call start()
};

enum class EventKind { Op, UserRange, Kernel, Memcpy, Memset };
const char* event_kind_name(EventKind k);  // "op", "user_annotation", "kernel", "gpu_memcpy", "gpu_memset"

// One recorded interval. Times are nanoseconds since the profile started.
struct Event {
  int64_t id = 0;            // unique within a profile; CPU events and GPU events share the space
  EventKind kind = EventKind::Op;
  std::string name;
  int64_t start_ns = 0, end_ns = 0;
  int64_t duration_ns() const { return end_ns - start_ns; }
  // CPU events: a small per-thread index (1, 2, ... in order of first appearance) and the enclosing
  // event on the same thread (0 at the top).
  int64_t thread = 0;
  int64_t parent = 0;
  int depth = 0;
  std::vector<std::vector<int64_t>> input_shapes;  // with record_shapes; {} for a non-tensor slot
  std::vector<std::string> input_dtypes;
  // Filled when the profile stops. For CPU events: self CPU time (duration minus the children's), the
  // GPU time of the kernels it launched itself (self) and with its descendants (total).
  int64_t self_cpu_ns = 0;
  int64_t self_cuda_ns = 0, cuda_total_ns = 0;
  // GPU events: device, stream, CUPTI correlation id and the CPU event that launched it (0: none).
  int device = -1;
  int64_t stream = -1;
  uint64_t correlation = 0;
  int64_t op = 0;
};

// One allocation (bytes > 0) or free (bytes < 0), with the device's totals after it and the names of the
// ops and ranges open on the calling thread, outermost first.
struct MemoryEvent {
  int64_t time_ns = 0;
  Device device;
  uint64_t address = 0;
  int64_t bytes = 0;
  int64_t total_allocated = 0;
  int64_t total_reserved = 0;  // for the CPU: equal to total_allocated (the CPU cache is not counted)
  int64_t thread = 0;
  std::vector<std::string> op_stack;
};

// One row of key_averages(): the events of one name (and input shapes, when grouped by them).
struct KeyAverage {
  std::string key;
  std::string input_shapes;  // "[[2, 3], [3]]" when grouped by input shape, else ""
  bool is_gpu = false;       // a kernel, memcpy or memset row
  int64_t count = 0;
  int64_t cpu_time_total_ns = 0, self_cpu_time_total_ns = 0;
  int64_t cuda_time_total_ns = 0, self_cuda_time_total_ns = 0;
  double cpu_time_avg_ns() const { return count ? double(cpu_time_total_ns) / double(count) : 0.0; }
  double cuda_time_avg_ns() const { return count ? double(cuda_time_total_ns) / double(count) : 0.0; }
};

class KeyAverages {
 public:
  KeyAverages(std::vector<KeyAverage> rows, bool with_cuda, bool with_shapes)
      : rows_(std::move(rows)), with_cuda_(with_cuda), with_shapes_(with_shapes) {}
  const std::vector<KeyAverage>& rows() const { return rows_; }
  size_t size() const { return rows_.size(); }
  const KeyAverage& operator[](size_t i) const { return rows_[i]; }
  // The row of a name (the first one when grouped by shapes); nullptr when absent.
  const KeyAverage* find(const std::string& key) const;
  // PyTorch's table: Name, Self CPU %, Self CPU, CPU total %, CPU total, CPU time avg, [Self CUDA,
  // Self CUDA %, CUDA total, CUDA time avg,] [Input Shapes,] # of Calls; then the totals. sort_by is
  // one of "self_cpu_time_total", "cpu_time_total", "self_cuda_time_total", "cuda_time_total",
  // "cpu_time", "cuda_time", "count", or "" (the order of first appearance); descending. ValueError
  // for anything else. row_limit < 0: all rows.
  std::string table(const std::string& sort_by = "", int64_t row_limit = 100) const;

 private:
  std::vector<KeyAverage> rows_;
  bool with_cuda_, with_shapes_;
};

class profile {
 public:
  explicit profile(ProfileOptions options = {});
  ~profile();  // stops if still running
  profile(const profile&) = delete;
  profile& operator=(const profile&) = delete;

  // ValueError when this profile already ran, or another one is active.
  void start();
  void stop();
  bool running() const;

  // Valid after stop(): CPU events in start order, then GPU events in start order.
  const std::vector<Event>& events() const;
  const std::vector<MemoryEvent>& memory_events() const;
  KeyAverages key_averages(bool group_by_input_shape = false) const;
  void export_chrome_trace(const std::string& path) const;
  // An SVG plot of allocated and reserved bytes over time, one panel per device.
  void export_memory_timeline(const std::string& path) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// A user range: recorded like an op (it nests with ops and shows in key_averages and the trace).
class record_function {
 public:
  explicit record_function(const std::string& name);
  ~record_function();
  record_function(const record_function&) = delete;
  record_function& operator=(const record_function&) = delete;

 private:
  bool active_;
};

// NVTX ranges around every op while alive (Nsight Systems shows them); nothing is recorded. A no-op in
// a build without CUDA.
class emit_nvtx {
 public:
  explicit emit_nvtx(bool enabled = true);
  ~emit_nvtx();
  emit_nvtx(const emit_nvtx&) = delete;
  emit_nvtx& operator=(const emit_nvtx&) = delete;

 private:
  bool enabled_;
};

}  // namespace tessera::profiler
