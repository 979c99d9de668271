// SavedTensor: a tensor a derivative needs, saved at forward time with the version of its storage.
// Unpacking checks the version, so a saved tensor modified in place since raises PyTorch's error.
// A saved *output* of the node keeps only a weak reference to the node (Note [Graph ownership]) and
// gets its history back on unpack, so that double backward through it works.
#pragma once
#include "autograd/graph.h"

namespace tessera::autograd {

class SavedTensor {
 public:
  SavedTensor() = default;
  SavedTensor(const Tensor& t, bool is_output_of_node);
  // `node_name` is used in the error message.
  Tensor unpack(const std::string& node_name) const;
  void reset() { data_ = Tensor(); }

 private:
  Tensor data_;                  // the tensor itself (inputs) or a history-free alias (outputs)
  uint64_t version_ = 0;
  bool was_defined_ = false;   // an optional argument (bias) may be saved undefined
  bool is_output_ = false;
  bool requires_grad_ = false;
  std::weak_ptr<GraphNode> grad_fn_;
  uint32_t output_nr_ = 0;
};

}  // namespace tessera::autograd
