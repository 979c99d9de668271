// The dispatcher's stages (DESIGN.md "One op call"). Every public op opens one OpScope, keyed by its
// OpId (ops/table/op_table.h); stages installed by the layers above ops see it:
//   * observers (the profiler's recorder, any number), in the order they were added;
//   * the tracer, one slot, installed by whoever wants a record of the ops that run (the compiler's
//     capture, the tests' recording stage). It sees each op after the observers, with its inputs.
// With nothing installed an OpScope costs one relaxed atomic load.
//
// Note [Scoped kernels]: while any stage is installed, each OpScope also counts its depth on the
// thread, and a kernel slot called at depth zero (a kernel run outside every op, which no stage
// could see) is reported to the stages as unscoped (KernelSlot::operator(), kernel_slot.h). The
// tests install a recording tracer over whole training steps and fail on any such report: that is
// how "no op bypasses the dispatch path" is checked rather than assumed.
#pragma once
#include <atomic>
#include <initializer_list>
#include <vector>

#include "ops/dispatch_depth.h"
#include "ops/table/op_table.h"
#include "tessera/tensor.h"

namespace tessera {

struct OpEvent {
  OpId op;
  const Tensor* const* inputs;
  int num_inputs;
  const char* name() const { return op_name(op); }
};

class OpObserver {
 public:
  virtual ~OpObserver() = default;
  virtual void on_enter(const OpEvent& e) = 0;
  virtual void on_exit(const OpEvent& e) = 0;
};

// The tracer slot. on_unscoped_kernel reports a kernel slot called outside every OpScope (Note
// [Scoped kernels]); `kernel` is the slot's name.
class TracerStage {
 public:
  virtual ~TracerStage() = default;
  virtual void on_enter(const OpEvent& e) = 0;
  virtual void on_exit(const OpEvent& e) = 0;
  virtual void on_unscoped_kernel(const char* kernel) = 0;
  // While this thread's program is captured (Note [Trace records] in ops/trace_hook.h): each op call
  // as the op recorded it, each kernel slot that ran, and each read of tensor data by the host.
  virtual void on_record(OpId op, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
                         const OpAttrs& attrs) {
    (void)op, (void)inputs, (void)outputs, (void)attrs;
  }
  virtual void on_kernel(const char* kernel) { (void)kernel; }
  virtual void on_host_read(const char* what) { (void)what; }
};

void add_op_observer(OpObserver* observer);
void remove_op_observer(OpObserver* observer);
// Installs `tracer` (nullptr removes it); returns the one it replaces.
TracerStage* set_tracer_stage(TracerStage* tracer);

namespace detail {
void notify_enter(const OpEvent& e);
void notify_exit(const OpEvent& e);
}  // namespace detail

class OpScope {
 public:
  OpScope(OpId op, std::initializer_list<const Tensor*> inputs)
      : event_{op, inputs.begin(), static_cast<int>(inputs.size())}, active_(detail::op_stages_installed()) {
    if (active_) enter();
  }
  // For ops that take a list of tensors (cat, stack, einsum, the foreach ops).
  OpScope(OpId op, const std::vector<Tensor>& inputs) : event_{op, nullptr, 0}, active_(detail::op_stages_installed()) {
    if (!active_) return;
    for (const Tensor& t : inputs) list_.push_back(&t);
    event_.inputs = list_.data();
    event_.num_inputs = static_cast<int>(list_.size());
    enter();
  }
  ~OpScope() {
    if (!active_) return;
    detail::notify_exit(event_);
    --detail::t_op_depth;
  }
  OpScope(const OpScope&) = delete;
  OpScope& operator=(const OpScope&) = delete;

 private:
  void enter() {
    ++detail::t_op_depth;
    detail::notify_enter(event_);
  }
  OpEvent event_;
  bool active_;
  std::vector<const Tensor*> list_;
};

}  // namespace tessera
