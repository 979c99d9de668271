// The stage registry behind OpScope (op_scope.h): the observers' list and the tracer slot, guarded by
// one mutex; g_num_op_stages is what OpScope reads on every call.
#include "ops/op_scope.h"

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
void notify_unscoped_kernel(const char* kernel) {
  std::lock_guard<std::mutex> g(g_mu);
  if (g_tracer) g_tracer->on_unscoped_kernel(kernel);
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
