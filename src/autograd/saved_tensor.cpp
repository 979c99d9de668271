// SavedTensor (saved_tensor.h): version-checked saved tensors, and the packed form under saved-tensor
// hooks (Note [Saved tensor hooks]).
#include "autograd/saved_tensor.h"

#include "autograd/apply_context.h"

#include "autograd/accumulate_grad.h"

namespace tessera::autograd {

namespace {
Tensor alias_without_history(const Tensor& t) { return make_view(t, t.sizes(), t.strides(), t.storage_offset()); }

[[noreturn]] void throw_backward_twice(const std::string& node_name) {
  TS_THROW(ValueError, "Trying to backward through the graph a second time (or directly access saved tensors "
           "after they have already been freed) in ", node_name,
           ". Specify retain_graph=true if you need to backward through the graph a second time.");
}
}  // namespace

SavedTensor::SavedTensor(const Tensor& t, bool is_output_of_node) : version_(t.defined() ? t.version() : 0), is_output_(is_output_of_node) {
  if (!t.defined()) return;
  was_defined_ = true;
  if (const SavedTensorHooks* hooks = current_saved_tensor_hooks()) {
    // Note [Saved tensor hooks]: the graph keeps what pack returns and where the tensor stood.
    hooked_ = true;
    note_user_code();  // Note [Fake data]
    if (AutogradMeta* m = meta_of(t)) {
      requires_grad_ = t.requires_grad();
      output_nr_ = m->output_nr;
      if (is_output_) {
        grad_fn_ = m->grad_fn;
      } else if (requires_grad_) {
        Edge e = gradient_edge(t);  // the input's grad_fn, or its leaf accumulator
        input_fn_ = e.fn;
        output_nr_ = e.input_nr;
      }
    }
    unpack_hook_ = hooks->unpack;
    const uint64_t before = t.version();
    {
      NoGradGuard no_grad;
      packed_ = hooks->pack(t);
    }
    // An output packed as itself would hold its own grad_fn, which holds this: a cycle that nothing
    // frees once the graph is dropped without a backward, or when a backward stops at an error (C++ has
    // no collector to find it, as Python's finds PyTorch's). Keep an alias without history instead: the
    // same storage and version, and unpack gives the history back from grad_fn_ as for any output.
    if (is_output_)
      if (const Tensor* p = std::any_cast<Tensor>(&packed_); p && p->is_same(t)) packed_ = alias_without_history(t);
    TS_CHECK(t.version() == before, ValueError, "A saved tensor pack hook is modifying its input in place. Tensors "
             "provided as input to pack hook can not be modified by in-place operations as this can lead to "
             "unexpected side-effects. Please open an issue if you need to perform in-place operations on the input "
             "to a pack hook.");
    return;
  }
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

void SavedTensor::reset() {
  data_ = Tensor();
  packed_.reset();
  unpack_hook_.reset();
  input_fn_.reset();
}

Tensor SavedTensor::unpack(const std::string& node_name) const {
  if (!was_defined_) return Tensor();
  if (hooked_) return unpack_hooked(node_name);
  if (!data_.defined()) throw_backward_twice(node_name);
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

Tensor SavedTensor::unpack_hooked(const std::string& node_name) const {
  if (!unpack_hook_) throw_backward_twice(node_name);
  Tensor d = (*unpack_hook_)(packed_);
  TS_CHECK(d.defined(), ValueError, "saved_tensors_hooks: Output of saved tensor unpack_hook expected to be a "
           "Tensor but got an undefined tensor (unpacking a tensor saved by ", node_name, ")");
  Tensor t = alias_without_history(d);
  if (!requires_grad_) return t;
  AutogradMeta& m = ensure_meta(t);
  m.requires_grad = true;
  if (is_output_) {
    m.grad_fn = grad_fn_.lock();
    m.output_nr = output_nr_;
  } else if (dynamic_cast<const AccumulateGrad*>(input_fn_.get()) != nullptr) {
    m.grad_accumulator = input_fn_;  // the leaf it was: gradients reach the leaf's .grad
  } else {
    m.grad_fn = input_fn_;
    m.output_nr = output_nr_;
  }
  return t;
}

}  // namespace tessera::autograd
