#include "ops/autograd_hook.h"

#include <atomic>

namespace tessera {
namespace {
std::atomic<AutogradStage*> g_stage{nullptr};
}
void set_autograd_stage(AutogradStage* stage) { g_stage.store(stage); }
AutogradStage* autograd_stage() { return g_stage.load(std::memory_order_relaxed); }

void check_inplace(const char* op, const Tensor& self) {
  if (!is_grad_enabled() || !requires_grad(self)) return;
  TS_CHECK(!self.is_leaf(), ValueError, op, ": a leaf Variable that requires grad is being used in an in-place "
           "operation.");
  // Writing through a view would have to rewrite its base's history as well (PyTorch's CopySlices);
  // until that exists, refuse rather than let the base's gradient come out wrong.
  TS_CHECK(!self.impl()->autograd_meta->is_view, NotImplementedError, op,
           ": in-place modification of a view of a tensor that requires grad is not supported; modify the "
           "base tensor, or clone() the view first");
}

void record_inplace(OpId op, const Tensor& self, const std::vector<Tensor>& inputs, OpAttrs attrs) {
  if (capturing()) [[unlikely]]
    detail::trace_record(op, inputs, {self}, attrs);
  if (!is_grad_enabled() || autograd_stage() == nullptr) return;
  // Self's history continues from this op even when no input requires grad (the write cuts it).
  if (!requires_grad(self) && !grad_recording(inputs)) return;
  autograd_stage()->record(op, inputs, {self}, std::move(attrs));
}
}  // namespace tessera
