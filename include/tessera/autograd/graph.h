// Hooks on the tensors that the graph saves for backward, as torch.autograd.graph
// (src/autograd/saved_tensor_hooks.cpp): how an intermediate result is stored between the forward
// and the backward (moved to the CPU, compressed, or dropped and recomputed, as non-reentrant
// activation checkpointing does).
//
//   {
//     ts::autograd::graph::saved_tensors_hooks hooks(
//         [](const ts::Tensor& t) -> std::any { return t.cpu(); },                        // pack
//         [](const std::any& p) { return std::any_cast<ts::Tensor>(p).to("cuda"); });     // unpack
//     y = (a * b).sin();  // a, b and a * b are saved packed
//   }
//   y.sum().backward();   // unpacked when the backward needs them
//
// PyTorch's semantics (Note [Saved tensor hooks] in saved_tensor.h):
// - pack runs (under no_grad) each time an op or a custom function saves a tensor for backward while
//   the hooks are in scope; what it returns is stored in the graph instead of the tensor. It must not
//   modify its argument in place.
// - unpack runs each time the backward (or a custom function's saved_tensors()) needs the tensor,
//   with what pack returned; it returns a tensor of the same value, shape, dtype and device. The
//   result is given the saved tensor's place in the graph (its grad_fn, or the leaf it was), so a
//   double backward through it works. Tensors that pass through the hooks are not version-checked
//   (the hooks decide what is stored).
// - Scopes nest: only the innermost pair applies. They are per thread.
#pragma once
#include <any>
#include <functional>
#include <optional>
#include <string>

#include "tessera/tensor.h"

namespace tessera::autograd::graph {

using PackHook = std::function<std::any(const Tensor&)>;
using UnpackHook = std::function<Tensor(const std::any&)>;

// The scope of a pack / unpack pair (torch.autograd.graph.saved_tensors_hooks). ValueError inside a
// disable_saved_tensors_hooks scope, with its message.
class saved_tensors_hooks {
 public:
  saved_tensors_hooks(PackHook pack_hook, UnpackHook unpack_hook);
  ~saved_tensors_hooks();
  saved_tensors_hooks(const saved_tensors_hooks&) = delete;
  saved_tensors_hooks& operator=(const saved_tensors_hooks&) = delete;
};

// Saved tensors are stored on the CPU and copied back to their device when the backward needs them
// (torch.autograd.graph.save_on_cpu); pin_memory: into pinned host memory, copied back without
// blocking. On the CPU nothing is copied.
class save_on_cpu : public saved_tensors_hooks {
 public:
  explicit save_on_cpu(bool pin_memory = false);
};

// While in scope, entering saved_tensors_hooks raises ValueError(error_message), for code that
// cannot work with them (torch.autograd.graph.disable_saved_tensors_hooks).
class disable_saved_tensors_hooks {
 public:
  explicit disable_saved_tensors_hooks(std::string error_message);
  ~disable_saved_tensors_hooks();
  disable_saved_tensors_hooks(const disable_saved_tensors_hooks&) = delete;
  disable_saved_tensors_hooks& operator=(const disable_saved_tensors_hooks&) = delete;

 private:
  std::optional<std::string> prev_;
};

}  // namespace tessera::autograd::graph
