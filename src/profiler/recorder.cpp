// The live recording state: the one running session, the per-thread stacks of open ranges, the memory
// reporter. Note [Profiler recording] in profiler/recorder.h says how ops reach it.
//
// Invariants: g_mu guards g_session and everything in it; g_flags is non-zero exactly while a session
// runs or an emit_nvtx scope is alive (then ops' observer is registered); thread stacks are touched only
// by their own thread.
#include "profiler/recorder.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "profiler/gpu_tracer.h"
#include "runtime/memory_reporter.h"
#include "tessera/error.h"

namespace tessera::profiler::detail {

std::atomic<uint32_t> g_flags{0};

namespace {

struct OpenRange {
  int64_t id = 0;
  std::string name;
  EventKind kind = EventKind::Op;
  int64_t start_ns = 0;
  std::vector<std::vector<int64_t>> shapes;
  std::vector<std::string> dtypes;
  bool recorded = false, nvtx = false, gpu = false;
};

struct ThreadState {
  uint64_t session = 0;  // the session the stack and tid belong to
  int64_t tid = 0;
  std::vector<OpenRange> stack;
};
thread_local ThreadState t_state;

struct Session {
  uint64_t id = 0;
  ProfileOptions options;
  int64_t start_ns = 0;
  int64_t next_tid = 1;
  std::vector<Event> events;
  std::vector<MemoryEvent> memory;
  std::unordered_map<const void*, int64_t> cpu_sizes;  // live CPU allocations seen by this session
  int64_t cpu_allocated = 0;
  bool with_cuda = false;
};

std::mutex g_mu;
std::unique_ptr<Session> g_session;    // guarded by g_mu
std::atomic<uint64_t> g_session_id{0};  // id of the running session (0: none)
std::atomic<int64_t> g_next_event_id{1};
ObserverSwitch g_switch = nullptr;      // guarded by g_mu
std::mutex g_state_mu;                  // serializes starts, stops and emit_nvtx scopes
int g_nvtx_scopes = 0;                  // guarded by g_state_mu
bool g_observer_on = false;             // guarded by g_state_mu

// Brings the calling thread's state to the running session (ids and stacks of an older one are dropped).
// Returns the session id, 0 when none runs.
uint64_t sync_thread(ThreadState& ts) {
  const uint64_t sid = g_session_id.load(std::memory_order_acquire);
  if (sid != 0 && ts.session != sid) {
    std::lock_guard<std::mutex> g(g_mu);
    if (g_session && g_session->id == sid) {
      ts.stack.clear();
      ts.session = sid;
      ts.tid = g_session->next_tid++;
    }
  }
  return sid;
}

// Flags follow the session and the emit_nvtx scopes; ops' observer is registered while any flag is on.
// Called with g_state_mu held and g_mu not held: ops calls into the recorder (taking g_mu) with its
// observer lock held, and the switch takes that lock, so the order is g_state_mu, ops', g_mu.
void apply_flags_locked(const Session* s) {
  uint32_t f = 0;
  if (s) {
    f |= kFlagRecord | kFlagNvtx;
    if (s->options.record_shapes) f |= kFlagShapes;
    if (s->with_cuda) f |= kFlagGpu;
  }
  if (g_nvtx_scopes > 0) f |= kFlagNvtx;
  ObserverSwitch sw;
  {
    std::lock_guard<std::mutex> g(g_mu);
    sw = g_switch;
  }
  const bool want_observer = f != 0 && sw != nullptr;
  if (want_observer && !g_observer_on) sw(true);
  g_flags.store(f, std::memory_order_release);
  if (!want_observer && g_observer_on && sw) sw(false);
  g_observer_on = want_observer;
}

std::vector<std::string> op_stack_names(const ThreadState& ts, uint64_t sid) {
  std::vector<std::string> names;
  if (ts.session != sid) return names;
  names.reserve(ts.stack.size());
  for (const OpenRange& r : ts.stack)
    if (r.recorded) names.push_back(r.name);
  return names;
}

// The allocators' reporter (runtime/memory_reporter.h), installed while profile_memory is on.
void on_memory(const MemoryReport& r) {
  ThreadState& ts = t_state;
  const uint64_t sid = sync_thread(ts);
  if (sid == 0) return;
  const int64_t t = now_ns();
  std::lock_guard<std::mutex> g(g_mu);
  Session* s = g_session.get();
  if (!s || s->id != sid) return;
  MemoryEvent e;
  e.time_ns = t;
  e.device = r.device;
  e.address = reinterpret_cast<uintptr_t>(r.ptr);
  e.thread = ts.tid;
  if (r.device.is_cpu()) {
    // The CPU allocator keeps no totals: count the allocations made while profiling. A free of a block
    // allocated before the profile started is not known here and is skipped.
    if (r.bytes > 0) {
      s->cpu_sizes[r.ptr] = r.bytes;
      s->cpu_allocated += r.bytes;
      e.bytes = r.bytes;
    } else {
      auto it = s->cpu_sizes.find(r.ptr);
      if (it == s->cpu_sizes.end()) return;
      e.bytes = -it->second;
      s->cpu_allocated -= it->second;
      s->cpu_sizes.erase(it);
    }
    e.total_allocated = e.total_reserved = s->cpu_allocated;
  } else {
    e.bytes = r.bytes;
    e.total_allocated = r.total_allocated;
    e.total_reserved = r.total_reserved;
  }
  e.op_stack = op_stack_names(ts, sid);
  s->memory.push_back(std::move(e));
}

}  // namespace

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void range_begin(std::string_view name, EventKind kind, std::vector<std::vector<int64_t>>* shapes,
                 std::vector<std::string>* dtypes) {
  const uint32_t flags = g_flags.load(std::memory_order_acquire);
  if (flags == 0) return;
  ThreadState& ts = t_state;
  const uint64_t sid = sync_thread(ts);
  OpenRange r;
  r.kind = kind;
  r.name.assign(name.data(), name.size());
  if ((flags & kFlagRecord) && sid != 0) {
    r.recorded = true;
    r.id = g_next_event_id.fetch_add(1, std::memory_order_relaxed);
    if (shapes) r.shapes = std::move(*shapes);
    if (dtypes) r.dtypes = std::move(*dtypes);
    if (flags & kFlagGpu) {
      if (GpuTracer* tr = gpu_tracer()) {
        tr->push(static_cast<uint64_t>(r.id));
        r.gpu = true;
      }
    }
  }
  if (flags & kFlagNvtx) {
    nvtx_push(r.name.c_str());
    r.nvtx = true;
  }
  r.start_ns = now_ns();
  ts.stack.push_back(std::move(r));
}

void range_end() {
  ThreadState& ts = t_state;
  if (ts.stack.empty()) return;
  const int64_t end = now_ns();
  OpenRange r = std::move(ts.stack.back());
  ts.stack.pop_back();
  if (r.gpu) gpu_tracer()->pop();
  if (r.nvtx) nvtx_pop();
  if (!r.recorded) return;
  Event e;
  e.id = r.id;
  e.kind = r.kind;
  e.name = std::move(r.name);
  e.start_ns = r.start_ns;
  e.end_ns = end;
  e.thread = ts.tid;
  e.depth = 0;
  for (auto it = ts.stack.rbegin(); it != ts.stack.rend(); ++it) {
    if (!it->recorded) continue;
    if (e.parent == 0) e.parent = it->id;
    ++e.depth;
  }
  e.input_shapes = std::move(r.shapes);
  e.input_dtypes = std::move(r.dtypes);
  std::lock_guard<std::mutex> g(g_mu);
  if (g_session && g_session->id == ts.session) g_session->events.push_back(std::move(e));
}

void set_op_observer_switch(ObserverSwitch s) {
  std::lock_guard<std::mutex> g(g_mu);
  g_switch = s;
}

void start_session(const ProfileOptions& options) {
  std::lock_guard<std::mutex> state(g_state_mu);
  {
    std::lock_guard<std::mutex> g(g_mu);
    TS_CHECK(!g_session, ValueError, "profiler: another profile is already running (one at a time)");
  }
  static std::atomic<uint64_t> next_session{1};
  auto s = std::make_unique<Session>();
  s->id = next_session.fetch_add(1);
  s->options = options;
  const bool want_cuda =
      std::find(options.activities.begin(), options.activities.end(), CUDA) != options.activities.end();
  if (want_cuda) {
    GpuTracer* tr = gpu_tracer();
    if (!tr) {
      std::fprintf(stderr, "tessera profiler: CUDA activity requested but tessera was built without CUDA\n");
    } else {
      s->with_cuda = tr->start();
    }
  }
  const Session* sp = s.get();
  g_next_event_id.store(1);
  s->start_ns = now_ns();
  {
    std::lock_guard<std::mutex> g(g_mu);
    g_session = std::move(s);
    g_session_id.store(sp->id, std::memory_order_release);
  }
  if (options.profile_memory) set_memory_reporter(&on_memory);
  apply_flags_locked(sp);
}

SessionResult stop_session() {
  std::lock_guard<std::mutex> state(g_state_mu);
  std::unique_ptr<Session> s;
  {
    std::lock_guard<std::mutex> g(g_mu);
    TS_CHECK(g_session, ValueError, "profiler: no profile is running");
  }
  set_memory_reporter(nullptr);
  apply_flags_locked(nullptr);  // ops' observer is gone once this returns
  {
    std::lock_guard<std::mutex> g(g_mu);
    s = std::move(g_session);
    g_session_id.store(0, std::memory_order_release);
  }
  SessionResult out;
  out.start_ns = s->start_ns;
  out.stop_ns = now_ns();
  out.with_cuda = s->with_cuda;
  out.events = std::move(s->events);
  out.memory = std::move(s->memory);
  std::stable_sort(out.events.begin(), out.events.end(),
                   [](const Event& a, const Event& b) { return a.start_ns < b.start_ns; });
  if (s->with_cuda) {
    std::vector<GpuActivity> acts = gpu_tracer()->stop();
    std::stable_sort(acts.begin(), acts.end(),
                     [](const GpuActivity& a, const GpuActivity& b) { return a.start_ns < b.start_ns; });
    int64_t next_id = g_next_event_id.load();
    for (GpuActivity& a : acts) {
      Event e;
      e.id = next_id++;
      e.kind = a.kind;
      e.name = std::move(a.name);
      e.start_ns = a.start_ns;
      e.end_ns = a.end_ns;
      e.device = a.device;
      e.stream = a.stream;
      e.correlation = a.correlation;
      e.op = static_cast<int64_t>(a.external_id);
      out.events.push_back(std::move(e));
    }
  }
  return out;
}

void nvtx_scope_enter() {
  std::lock_guard<std::mutex> state(g_state_mu);
  ++g_nvtx_scopes;
  const Session* s;
  {
    std::lock_guard<std::mutex> g(g_mu);
    s = g_session.get();  // only read for its options; sessions change only under g_state_mu
  }
  apply_flags_locked(s);
}

void nvtx_scope_exit() {
  std::lock_guard<std::mutex> state(g_state_mu);
  --g_nvtx_scopes;
  const Session* s;
  {
    std::lock_guard<std::mutex> g(g_mu);
    s = g_session.get();
  }
  apply_flags_locked(s);
}

}  // namespace tessera::profiler::detail
