// The autocast stage's registration point and thread-local state (Note [Autocast stage]).
#include "ops/autocast_hook.h"

#include <atomic>

namespace tessera {
namespace {
std::atomic<AutocastStage*> g_autocast_stage{nullptr};
}

namespace detail {
constinit thread_local uint32_t t_autocast_state = 0;
}

void set_autocast_stage(AutocastStage* stage) { g_autocast_stage.store(stage); }
AutocastStage* autocast_stage() { return g_autocast_stage.load(std::memory_order_relaxed); }

uint32_t autocast_device_mask() { return detail::t_autocast_state & 0xFFFFu; }
void set_autocast_device_mask(uint32_t mask) {
  detail::t_autocast_state = (detail::t_autocast_state & ~0xFFFFu) | (mask & 0xFFFFu);
}

AutocastArgs::AutocastArgs(OpId op, std::initializer_list<const Tensor*> inputs) {
  tensors_.reserve(inputs.size());
  for (const Tensor* t : inputs) tensors_.push_back(t ? *t : Tensor());
  run(op);
}

AutocastArgs::AutocastArgs(OpId op, const std::vector<Tensor>& inputs) : tensors_(inputs) { run(op); }

void AutocastArgs::run(OpId op) {
  AutocastStage* stage = autocast_stage();
  if (stage == nullptr || autocast_policy(op) == AutocastPolicy::None) return;
  {
    // The casts (Tensor::to) are not policy ops, but a stage written with other ops must not recurse.
    AutocastExcludeGuard no_autocast;
    active_ = stage->cast_inputs(op, tensors_);
  }
  if (active_) detail::t_autocast_state += detail::kAutocastExcludeOne;
}

}  // namespace tessera
