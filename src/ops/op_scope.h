// The dispatcher's stages (DESIGN.md "One op call"). Layers above ops (the profiler, autocast,
// autograd, the compiler's tracer) register observers at start-up; every public op opens an OpScope,
// which costs one relaxed atomic load when no observer is registered.
#pragma once
#include <atomic>
#include <initializer_list>
#include <vector>

#include "tessera/tensor.h"

namespace tessera {

struct OpEvent {
  const char* op;
  const Tensor* const* inputs;
  int num_inputs;
};

class OpObserver {
 public:
  virtual ~OpObserver() = default;
  virtual void on_enter(const OpEvent& e) = 0;
  virtual void on_exit(const OpEvent& e) = 0;
};

void add_op_observer(OpObserver* observer);
void remove_op_observer(OpObserver* observer);

namespace detail {
extern std::atomic<int> g_num_op_observers;
void notify_enter(const OpEvent& e);
void notify_exit(const OpEvent& e);
}  // namespace detail

class OpScope {
 public:
  OpScope(const char* op, std::initializer_list<const Tensor*> inputs)
      : event_{op, inputs.begin(), static_cast<int>(inputs.size())},
        active_(detail::g_num_op_observers.load(std::memory_order_relaxed) > 0) {
    if (active_) detail::notify_enter(event_);
  }
  // For ops that take a list of tensors (cat, stack, einsum).
  OpScope(const char* op, const std::vector<Tensor>& inputs)
      : event_{op, nullptr, 0}, active_(detail::g_num_op_observers.load(std::memory_order_relaxed) > 0) {
    if (!active_) return;
    for (const Tensor& t : inputs) list_.push_back(&t);
    event_.inputs = list_.data();
    event_.num_inputs = static_cast<int>(list_.size());
    detail::notify_enter(event_);
  }
  ~OpScope() {
    if (active_) detail::notify_exit(event_);
  }
  OpScope(const OpScope&) = delete;
  OpScope& operator=(const OpScope&) = delete;

 private:
  OpEvent event_;
  bool active_;
  std::vector<const Tensor*> list_;
};

}  // namespace tessera
