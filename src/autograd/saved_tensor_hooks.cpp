// The saved-tensor hook scopes of tessera/autograd/graph.h: a per-thread stack of pack / unpack pairs
// whose top SavedTensor consults (Note [Saved tensor hooks] in saved_tensor.h), and the disabling
// scope. Scopes are strictly nested (they are C++ objects with automatic lifetime), so popping the
// top always pops the scope's own pair.
#include <optional>
#include <vector>

#include "autograd/saved_tensor.h"
#include "tessera/functions.h"

namespace tessera::autograd {
namespace {
thread_local std::vector<SavedTensorHooks> t_hooks;
thread_local std::optional<std::string> t_disabled;  // disable_saved_tensors_hooks' message
}  // namespace

const SavedTensorHooks* current_saved_tensor_hooks() { return t_hooks.empty() ? nullptr : &t_hooks.back(); }

namespace graph {

saved_tensors_hooks::saved_tensors_hooks(PackHook pack_hook, UnpackHook unpack_hook) {
  if (t_disabled) TS_THROW(ValueError, *t_disabled);
  TS_CHECK(pack_hook && unpack_hook, ValueError, "saved_tensors_hooks: expected a pack hook and an unpack hook, got ",
           pack_hook ? "" : "no pack hook", !pack_hook && !unpack_hook ? " and " : "",
           unpack_hook ? "" : "no unpack hook");
  t_hooks.push_back({std::move(pack_hook), std::make_shared<const UnpackHook>(std::move(unpack_hook))});
}

saved_tensors_hooks::~saved_tensors_hooks() { t_hooks.pop_back(); }

namespace {
// (the tensor's device, its CPU copy): torch.autograd.graph.save_on_cpu's packed form.
struct OnCpu {
  Device device;
  Tensor data;
};
}  // namespace

save_on_cpu::save_on_cpu(bool pin_memory)
    : saved_tensors_hooks(
          [pin_memory](const Tensor& t) -> std::any {
            if (t.device().is_cpu()) return OnCpu{t.device(), t.detach()};  // no copy; no history (no cycle)
            Tensor host = t.to(kCPU, /*non_blocking=*/false, /*copy=*/true);
            if (pin_memory) host = host.pin_memory();
            return OnCpu{t.device(), host};
          },
          [pin_memory](const std::any& packed) {
            const OnCpu& p = std::any_cast<const OnCpu&>(packed);
            return p.device.is_cpu() ? p.data : p.data.to(p.device, /*non_blocking=*/pin_memory);
          }) {}

disable_saved_tensors_hooks::disable_saved_tensors_hooks(std::string error_message) : prev_(t_disabled) {
  t_disabled = std::move(error_message);
}
disable_saved_tensors_hooks::~disable_saved_tensors_hooks() { t_disabled = prev_; }

}  // namespace graph
}  // namespace tessera::autograd
