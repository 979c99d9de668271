#include "autograd/saved_tensor.h"

namespace tessera::autograd {

namespace {
Tensor alias_without_history(const Tensor& t) { return make_view(t, t.sizes(), t.strides(), t.storage_offset()); }
}  // namespace

SavedTensor::SavedTensor(const Tensor& t, bool is_output_of_node) : version_(t.defined() ? t.version() : 0), is_output_(is_output_of_node) {
  if (!t.defined()) return;
  was_defined_ = true;
  if (!is_output_) {
    data_ = t;
    return;
  }
  data_ = alias_without_history(t);
  if (AutogradMeta* m = meta_of(t)) {
    requires_grad_ = m->requires_grad;
    grad_fn_ = m->grad_fn;
    output_nr_ = m->output_nr;
  }
}

Tensor SavedTensor::unpack(const std::string& node_name) const {
  if (!was_defined_) return Tensor();
  if (!data_.defined()) {
    TS_THROW(ValueError, "Trying to backward through the graph a second time (or directly access saved tensors "
             "after they have already been freed) in ", node_name,
             ". Specify retain_graph=true if you need to backward through the graph a second time.");
  }
  if (data_.version() != version_) {
    TS_THROW(ValueError, "one of the variables needed for gradient computation has been modified by an inplace "
             "operation: [", dtype_name(data_.dtype()), " ", data_.sizes(), "], which is ",
             is_output_ ? "output" : "an input", " of ", node_name, ", is at version ", data_.version(),
             "; expected version ", version_, " instead.");
  }
  if (!is_output_ || !requires_grad_) return data_;
  // Reattach the history of a saved output so that derivatives using it are differentiable again.
  Tensor t = alias_without_history(data_);
  auto node = grad_fn_.lock();
  AutogradMeta& m = ensure_meta(t);
  m.requires_grad = true;
  m.grad_fn = node;
  m.output_nr = output_nr_;
  return t;
}

}  // namespace tessera::autograd
