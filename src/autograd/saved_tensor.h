// SavedTensor: a tensor a derivative needs, saved at forward time with the version of its storage.
// Unpacking checks the version, so a saved tensor modified in place since raises PyTorch's error.
// A saved *output* of the node keeps only a weak reference to the node (Note [Graph ownership]) and
// gets its history back on unpack, so that double backward through it works.
//
// Note [Saved tensor hooks]: while a saved_tensors_hooks scope is open on the thread
// (tessera/autograd/graph.h), a tensor being saved is handed to the innermost pack hook (under
// no_grad; the hook must leave its version alone: an op's saved inputs and outputs and the tensors its
// attributes carry for the derivative, a custom function's save_for_backward) and only what the hook
// returned is kept, with the
// unpack hook and the tensor's place in the graph: its grad_fn and output number (weakly for an
// output of the saving node, as above), or, for a leaf that requires grad, its gradient accumulator.
// Unpacking calls the unpack hook and gives a fresh alias of its result that place, as PyTorch's
// SavedVariable does; no version check is made (the hooks decide what is stored). Releasing the saved
// tensor (a backward without retain_graph) drops the packed value, so a second backward raises.
#pragma once
#include <any>

#include "autograd/graph.h"
#include "tessera/autograd/graph.h"

namespace tessera::autograd {

class SavedTensor {
 public:
  SavedTensor() = default;
  SavedTensor(const Tensor& t, bool is_output_of_node);
  // `node_name` is used in the error message.
  Tensor unpack(const std::string& node_name) const;
  void reset();

 private:
  Tensor unpack_hooked(const std::string& node_name) const;

  Tensor data_;                  // the tensor itself (inputs) or a history-free alias (outputs)
  uint64_t version_ = 0;
  bool was_defined_ = false;   // an optional argument (bias) may be saved undefined
  bool is_output_ = false;
  bool requires_grad_ = false;
  std::weak_ptr<GraphNode> grad_fn_;
  uint32_t output_nr_ = 0;
  // Note [Saved tensor hooks]: set when the tensor went through a pack hook.
  bool hooked_ = false;
  std::any packed_;
  std::shared_ptr<const graph::UnpackHook> unpack_hook_;
  std::shared_ptr<GraphNode> input_fn_;  // a saved input's grad_fn, or its leaf accumulator
};

// The innermost pack / unpack pair open on this thread, or null (saved_tensor_hooks.cpp).
struct SavedTensorHooks {
  graph::PackHook pack;
  std::shared_ptr<const graph::UnpackHook> unpack;
};
const SavedTensorHooks* current_saved_tensor_hooks();

}  // namespace tessera::autograd
