// The stage registry behind OpScope (op_scope.h): the observers' list and the tracer slot, guarded by
// one mutex; g_num_op_stages is what OpScope reads on every call.
#include "ops/op_scope.h"
#include "ops/trace_hook.h"

#include <algorithm>
#include <mutex>
#include <vector>

namespace tessera {
namespace {
std::mutex g_mu;
std::vector<OpObserver*>& observers() {
  static std::vector<OpObserver*> v;
  return v;
}
TracerStage* g_tracer = nullptr;

void update_count() {
  detail::g_num_op_stages.store(static_cast<int>(observers().size()) + (g_tracer ? 1 : 0));
}
}  // namespace

namespace detail {
std::atomic<int> g_num_op_stages{0};
thread_local int t_op_depth = 0;
thread_local bool t_capturing = false;
thread_local int t_trace_suppress = 0;

void notify_enter(const OpEvent& e) {
  std::lock_guard<std::mutex> g(g_mu);
  for (OpObserver* o : observers()) o->on_enter(e);
  if (g_tracer) g_tracer->on_enter(e);
}
void notify_exit(const OpEvent& e) {
  std::lock_guard<std::mutex> g(g_mu);
  if (g_tracer) g_tracer->on_exit(e);
  for (auto it = observers().rbegin(); it != observers().rend(); ++it) (*it)->on_exit(e);
}
void notify_kernel_slot(const char* kernel) {
  if (t_op_depth > 0 && !t_capturing) return;
  std::lock_guard<std::mutex> g(g_mu);
  if (!g_tracer) return;
  if (t_op_depth == 0) g_tracer->on_unscoped_kernel(kernel);
  if (t_capturing && t_trace_suppress == 0) g_tracer->on_kernel(kernel);
}
void trace_record(OpId op, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
                  const OpAttrs& attrs) {
  std::lock_guard<std::mutex> g(g_mu);
  if (g_tracer) g_tracer->on_record(op, inputs, outputs, attrs);
}
void trace_host_read(const char* what) {
  std::lock_guard<std::mutex> g(g_mu);
  if (g_tracer) g_tracer->on_host_read(what);
}
}  // namespace detail

void add_op_observer(OpObserver* observer) {
  std::lock_guard<std::mutex> g(g_mu);
  observers().push_back(observer);
  update_count();
}

void remove_op_observer(OpObserver* observer) {
  std::lock_guard<std::mutex> g(g_mu);
  auto& v = observers();
  v.erase(std::remove(v.begin(), v.end(), observer), v.end());
  update_count();
}

TracerStage* set_tracer_stage(TracerStage* tracer) {
  std::lock_guard<std::mutex> g(g_mu);
  TracerStage* prev = g_tracer;
  g_tracer = tracer;
  update_count();
  return prev;
}

}  // namespace tessera
