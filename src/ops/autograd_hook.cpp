#include "ops/autograd_hook.h"

#include <atomic>

namespace tessera {
namespace {
std::atomic<AutogradStage*> g_stage{nullptr};
}
void set_autograd_stage(AutogradStage* stage) { g_stage.store(stage); }
AutogradStage* autograd_stage() { return g_stage.load(std::memory_order_relaxed); }

void check_inplace(const char* op, const Tensor& self, std::initializer_list<const Tensor*> others) {
  if (!is_grad_enabled() || autograd_stage() == nullptr || !self.defined() || !self.impl()->autograd_meta) return;
  bool involved = requires_grad(self);
  for (const Tensor* t : others) involved = involved || (t && requires_grad(*t));
  if (involved) autograd_stage()->check_inplace(op, self);
}

void record_inplace(OpId op, const Tensor& self, const std::vector<Tensor>& inputs, OpAttrs attrs) {
  if (capturing()) [[unlikely]]
    detail::trace_record(op, inputs, {self}, attrs);
  record_inplace_untraced(op, self, inputs, std::move(attrs));
}

void refuse_untracked_inplace(const char* op, const std::vector<Tensor>& written, const std::vector<Tensor>& read) {
  if (!grad_recording(written) && !grad_recording(read)) return;
  for (const Tensor& t : written)
    if (t.defined() && t.impl()->autograd_meta) autograd_stage()->check_inplace(op, t);
  TS_THROW(NotImplementedError, op, ": the derivative of this op is not implemented, and a tensor it writes or reads "
           "requires grad while grad mode is on; call it under no_grad (as the optimizers and the gradient scaler do)");
}

void record_inplace_untraced(OpId op, const Tensor& self, const std::vector<Tensor>& inputs, OpAttrs attrs) {
  if (!is_grad_enabled() || autograd_stage() == nullptr) return;
  // Self's history continues from this op even when no input requires grad (the write cuts it).
  if (!requires_grad(self) && !grad_recording(inputs)) return;
  autograd_stage()->record(op, inputs, {self}, std::move(attrs));
}
}  // namespace tessera
