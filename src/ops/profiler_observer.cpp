// The OpObserver that forwards ops to the profiler's recording API (Note [Profiler recording] in
// profiler/recorder.h: the profiler sits below ops, so ops provides the observer and the profiler only
// switches it on and off). Input shapes and dtypes are read at on_enter only: OpEvent's inputs point
// into the op's argument list, which may be gone by on_exit.
#include "ops/profiler_observer.h"

#include "ops/op_scope.h"
#include "profiler/recorder.h"

namespace tessera {
namespace {

class ProfilerObserver final : public OpObserver {
 public:
  void on_enter(const OpEvent& e) override {
    if (!profiler::detail::record_shapes_on()) {
      profiler::detail::range_begin(e.name(), profiler::EventKind::Op);
      return;
    }
    std::vector<std::vector<int64_t>> shapes;
    std::vector<std::string> dtypes;
    shapes.reserve(static_cast<size_t>(e.num_inputs));
    dtypes.reserve(static_cast<size_t>(e.num_inputs));
    for (int i = 0; i < e.num_inputs; ++i) {
      const Tensor* t = e.inputs[i];
      if (t && t->defined()) {
        shapes.emplace_back(t->sizes().begin(), t->sizes().end());
        dtypes.emplace_back(dtype_name(t->dtype()));
      } else {
        shapes.emplace_back();
        dtypes.emplace_back("");
      }
    }
    profiler::detail::range_begin(e.name(), profiler::EventKind::Op, &shapes, &dtypes);
  }
  void on_exit(const OpEvent&) override { profiler::detail::range_end(); }
};

ProfilerObserver g_observer;

void switch_observer(bool on) {
  if (on) add_op_observer(&g_observer);
  else remove_op_observer(&g_observer);
}

}  // namespace

void register_profiler_stage() { profiler::detail::set_op_observer_switch(&switch_observer); }

}  // namespace tessera
