// tessera/profiler.h: the profile scope, record_function and emit_nvtx. Recording itself is in
// profiler/recorder.cpp; the outputs (table, trace, SVG) in profiler/key_averages.cpp,
// chrome_trace.cpp and memory_timeline.cpp.
//
// When a profile stops, its events get times relative to its start and their derived times:
//   self_cpu   = duration - sum of the durations of the children (events whose parent it is);
//   self_cuda  = sum of the durations of the GPU events linked to it (launched while it was the
//                innermost open range of its thread);
//   cuda_total = self_cuda + the children's cuda_total.
#include <algorithm>
#include <unordered_map>

#include "profiler/export.h"
#include "profiler/recorder.h"
#include "tessera/error.h"
#include "tessera/profiler.h"

namespace tessera::profiler {

const char* event_kind_name(EventKind k) {
  switch (k) {
    case EventKind::Op: return "cpu_op";
    case EventKind::UserRange: return "user_annotation";
    case EventKind::Kernel: return "kernel";
    case EventKind::Memcpy: return "gpu_memcpy";
    case EventKind::Memset: return "gpu_memset";
  }
  return "?";
}

namespace {

enum class State { Idle, Running, Stopped };

}  // namespace

namespace detail {

// Times relative to the start, self and CUDA times (see the top of this file).
void finish_events(SessionResult& r) {
  const int64_t t0 = r.start_ns;
  std::unordered_map<int64_t, size_t> index;
  index.reserve(r.events.size());
  for (size_t i = 0; i < r.events.size(); ++i) {
    Event& e = r.events[i];
    e.start_ns -= t0;
    e.end_ns -= t0;
    if (e.end_ns < e.start_ns) e.end_ns = e.start_ns;
    e.self_cpu_ns = (e.kind == EventKind::Op || e.kind == EventKind::UserRange) ? e.duration_ns() : 0;
    index.emplace(e.id, i);
  }
  for (MemoryEvent& m : r.memory) m.time_ns -= t0;
  auto find = [&](int64_t id) -> Event* {
    auto it = index.find(id);
    return it == index.end() ? nullptr : &r.events[it->second];
  };
  for (Event& e : r.events) {
    const bool gpu = e.kind == EventKind::Kernel || e.kind == EventKind::Memcpy || e.kind == EventKind::Memset;
    if (gpu) {
      if (Event* op = e.op ? find(e.op) : nullptr) op->self_cuda_ns += e.duration_ns();
      e.self_cuda_ns = e.cuda_total_ns = e.duration_ns();
    } else if (Event* p = e.parent ? find(e.parent) : nullptr) {
      p->self_cpu_ns -= e.duration_ns();
    }
  }
  // cuda_total bottom-up: children are deeper than their parent.
  std::vector<Event*> cpu;
  for (Event& e : r.events)
    if (e.kind == EventKind::Op || e.kind == EventKind::UserRange) {
      e.cuda_total_ns = e.self_cuda_ns;
      cpu.push_back(&e);
    }
  std::stable_sort(cpu.begin(), cpu.end(), [](const Event* a, const Event* b) { return a->depth > b->depth; });
  for (Event* e : cpu)
    if (Event* p = e->parent ? find(e->parent) : nullptr) p->cuda_total_ns += e->cuda_total_ns;
  for (Event* e : cpu) e->self_cpu_ns = std::max<int64_t>(e->self_cpu_ns, 0);
}

}  // namespace detail

struct profile::Impl {
  ProfileOptions options;
  State state = State::Idle;
  detail::SessionResult result;
};

profile::profile(ProfileOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
  if (impl_->options.start) start();
}

profile::~profile() {
  if (impl_ && impl_->state == State::Running) {
    try {
      stop();
    } catch (...) {
      // A destructor cannot raise; the session is gone either way.
    }
  }
}

void profile::start() {
  TS_CHECK(impl_->state == State::Idle, ValueError, "profile.start: this profile has already ",
           impl_->state == State::Running ? "started" : "run (use a new profile)");
  detail::start_session(impl_->options);
  impl_->state = State::Running;
}

void profile::stop() {
  TS_CHECK(impl_->state == State::Running, ValueError, "profile.stop: the profile is not running");
  impl_->state = State::Stopped;
  impl_->result = detail::stop_session();
  detail::finish_events(impl_->result);
}

bool profile::running() const { return impl_->state == State::Running; }

const std::vector<Event>& profile::events() const {
  TS_CHECK(impl_->state != State::Running, ValueError, "profile.events: stop the profile first");
  return impl_->result.events;
}

const std::vector<MemoryEvent>& profile::memory_events() const {
  TS_CHECK(impl_->state != State::Running, ValueError, "profile.memory_events: stop the profile first");
  return impl_->result.memory;
}

KeyAverages profile::key_averages(bool group_by_input_shape) const {
  TS_CHECK(impl_->state != State::Running, ValueError, "profile.key_averages: stop the profile first");
  return detail::compute_key_averages(impl_->result.events, group_by_input_shape, impl_->result.with_cuda);
}

void profile::export_chrome_trace(const std::string& path) const {
  TS_CHECK(impl_->state != State::Running, ValueError, "profile.export_chrome_trace: stop the profile first");
  detail::write_chrome_trace(impl_->result, path);
}

void profile::export_memory_timeline(const std::string& path) const {
  TS_CHECK(impl_->state != State::Running, ValueError, "profile.export_memory_timeline: stop the profile first");
  detail::write_memory_timeline(impl_->result, path);
}

record_function::record_function(const std::string& name) : active_(detail::recording_on()) {
  if (active_) detail::range_begin(name, EventKind::UserRange);
}

record_function::~record_function() {
  if (active_) detail::range_end();
}

emit_nvtx::emit_nvtx(bool enabled) : enabled_(enabled) {
  if (enabled_) detail::nvtx_scope_enter();
}

emit_nvtx::~emit_nvtx() {
  if (enabled_) detail::nvtx_scope_exit();
}

}  // namespace tessera::profiler
