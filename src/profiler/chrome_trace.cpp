// export_chrome_trace: the Chrome trace-event JSON that Perfetto and chrome://tracing open, in the shape
// PyTorch's profiler writes (Kineto's):
//  * CPU ops and user ranges: complete events ("ph": "X") on pid = the process id, tid = the profiler's
//    thread index; ts and dur in microseconds from the start of the profile; args hold "External id"
//    (the event id), "Input Dims" and "Input type" (with record_shapes).
//  * GPU kernels, copies and memsets: complete events on pid = kGpuPidBase + device, tid = the stream,
//    with args device, stream, correlation and the launching op's External id.
//  * A flow arrow from each op to each of its GPU events: "s" at the op's start on its thread, "f"
//    (binding to the enclosing slice, "bp": "e") at the GPU event's start; id = the correlation id.
//  * Memory: an instant event "[memory]" per allocation and free (args as PyTorch's: Device Type,
//    Device Id, Addr, Bytes, Total Allocated, Total Reserved) and counter tracks of allocated and
//    reserved bytes per device.
//  * Metadata events name the processes and threads.
#include <unistd.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <unordered_map>

#include "profiler/export.h"
#include "tessera/error.h"

namespace tessera::profiler::detail {
namespace {

using nlohmann::json;

constexpr int64_t kGpuPidBase = 1 << 30;  // far above real process ids

double us(int64_t ns) { return static_cast<double>(ns) / 1000.0; }

json metadata(const char* what, int64_t pid, int64_t tid, const std::string& name) {
  json m = {{"ph", "M"}, {"name", what}, {"pid", pid}, {"args", {{"name", name}}}};
  if (tid >= 0) m["tid"] = tid;
  return m;
}

}  // namespace

void write_chrome_trace(const SessionResult& r, const std::string& path) {
  const int64_t pid = static_cast<int64_t>(::getpid());
  json events = json::array();
  std::unordered_map<int64_t, const Event*> by_id;
  std::set<int64_t> cpu_threads;
  std::set<std::pair<int, int64_t>> gpu_streams;
  for (const Event& e : r.events) by_id.emplace(e.id, &e);

  for (const Event& e : r.events) {
    json x = {{"ph", "X"}, {"cat", event_kind_name(e.kind)}, {"name", e.name},
              {"ts", us(e.start_ns)}, {"dur", us(e.duration_ns())}};
    if (is_gpu_kind(e.kind)) {
      const int64_t gpid = kGpuPidBase + e.device;
      x["pid"] = gpid;
      x["tid"] = e.stream;
      x["args"] = {{"device", e.device}, {"stream", e.stream}, {"correlation", e.correlation},
                   {"External id", e.op}};
      gpu_streams.insert({e.device, e.stream});
      auto op = by_id.find(e.op);
      if (e.op != 0 && op != by_id.end()) {
        const Event& o = *op->second;
        events.push_back({{"ph", "s"}, {"id", e.correlation}, {"pid", pid}, {"tid", o.thread},
                          {"ts", us(o.start_ns)}, {"cat", "ac2g"}, {"name", "ac2g"}});
        events.push_back({{"ph", "f"}, {"id", e.correlation}, {"pid", gpid}, {"tid", e.stream},
                          {"ts", us(e.start_ns)}, {"cat", "ac2g"}, {"name", "ac2g"}, {"bp", "e"}});
      }
    } else {
      x["pid"] = pid;
      x["tid"] = e.thread;
      json args = {{"External id", e.id}};
      if (!e.input_shapes.empty() || !e.input_dtypes.empty()) {
        args["Input Dims"] = e.input_shapes;
        args["Input type"] = e.input_dtypes;
      }
      if (r.with_cuda) {
        args["cuda time (us)"] = us(e.cuda_total_ns);
      }
      x["args"] = std::move(args);
      cpu_threads.insert(e.thread);
    }
    events.push_back(std::move(x));
  }

  std::set<std::string> counters;
  for (const MemoryEvent& m : r.memory) {
    const int64_t mpid = m.device.is_cuda() ? kGpuPidBase + m.device.index() : pid;
    events.push_back({{"ph", "i"}, {"s", "t"}, {"cat", "cpu_instant_event"}, {"name", "[memory]"}, {"pid", pid},
                      {"tid", m.thread}, {"ts", us(m.time_ns)},
                      {"args", {{"Device Type", static_cast<int>(m.device.type())}, {"Device Id", m.device.index()},
                                {"Addr", m.address}, {"Bytes", m.bytes}, {"Total Allocated", m.total_allocated},
                                {"Total Reserved", m.total_reserved}, {"Op stack", m.op_stack}}}});
    events.push_back({{"ph", "C"}, {"name", "Memory " + m.device.str()}, {"pid", mpid}, {"ts", us(m.time_ns)},
                      {"args", {{"allocated", m.total_allocated}, {"reserved", m.total_reserved}}}});
    if (m.thread > 0) cpu_threads.insert(m.thread);
    if (m.device.is_cuda()) gpu_streams.insert({m.device.index(), -1});
  }

  events.push_back(metadata("process_name", pid, -1, "CPU (pid " + std::to_string(pid) + ")"));
  events.push_back({{"ph", "M"}, {"name", "process_sort_index"}, {"pid", pid}, {"args", {{"sort_index", 0}}}});
  for (int64_t t : cpu_threads) events.push_back(metadata("thread_name", pid, t, "thread " + std::to_string(t)));
  std::set<int> devices;
  for (auto& [d, s] : gpu_streams) {
    devices.insert(d);
    if (s >= 0) events.push_back(metadata("thread_name", kGpuPidBase + d, s, "stream " + std::to_string(s)));
  }
  for (int d : devices) {
    events.push_back(metadata("process_name", kGpuPidBase + d, -1, "GPU " + std::to_string(d)));
    events.push_back({{"ph", "M"}, {"name", "process_sort_index"}, {"pid", kGpuPidBase + d},
                      {"args", {{"sort_index", 1 + d}}}});
  }

  json doc = {{"schemaVersion", 1}, {"displayTimeUnit", "ms"}, {"traceEvents", std::move(events)},
              {"traceName", path}, {"deviceProperties", json::array()},
              {"profileDurationUs", us(r.stop_ns - r.start_ns)}};
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  TS_CHECK(f.good(), IOError, "export_chrome_trace: cannot open '", path, "' for writing");
  f << doc.dump() << "\n";
  f.close();
  TS_CHECK(!f.fail(), IOError, "export_chrome_trace: writing '", path, "' failed");
}

}  // namespace tessera::profiler::detail
