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
}  // namespace

namespace detail {
std::atomic<int> g_num_op_observers{0};
void notify_enter(const OpEvent& e) {
  std::lock_guard<std::mutex> g(g_mu);
  for (OpObserver* o : observers()) o->on_enter(e);
}
void notify_exit(const OpEvent& e) {
  std::lock_guard<std::mutex> g(g_mu);
  for (OpObserver* o : observers()) o->on_exit(e);
}
}  // namespace detail

void add_op_observer(OpObserver* observer) {
  std::lock_guard<std::mutex> g(g_mu);
  observers().push_back(observer);
  detail::g_num_op_observers.store(static_cast<int>(observers().size()));
}

void remove_op_observer(OpObserver* observer) {
  std::lock_guard<std::mutex> g(g_mu);
  auto& v = observers();
  v.erase(std::remove(v.begin(), v.end(), observer), v.end());
  detail::g_num_op_observers.store(static_cast<int>(v.size()));
}

}  // namespace tessera
