#include "autograd/accumulate_grad.h"

#include "tensor/tensor_impl.h"
#include "tessera/functions.h"

namespace tessera::autograd {

AccumulateGrad::AccumulateGrad(const Tensor& leaf) : leaf_(leaf) {
  slots.push_back({leaf.sizes(), leaf.dtype(), leaf.device()});
}

std::vector<Tensor> AccumulateGrad::apply(std::vector<Tensor>&& grads) {
  Tensor g = std::move(grads[0]);
  AutogradMeta& m = ensure_meta(leaf_);
  for (auto& [id, hook] : m.leaf_hooks) {
    Tensor r = hook(g);
    if (r.defined()) g = r;
  }
  if (!g.defined()) return {};
  if (!m.grad.defined()) {
    // A gradient nobody else holds can become .grad as it is; otherwise keep a private copy so that
    // later in-place accumulation does not write into someone else's tensor. "Nobody else" covers the
    // storage: a gradient may be a view over others' memory (a split's joined gradient, Note [Packed
    // attention gradients]; cat's gradient pieces). A view into a larger buffer is copied as well, so
    // that .grad does not keep the rest alive. A gradient that is not contiguous may be an expanded
    // view (sum's gradient), which in-place accumulation cannot write.
    const auto& storage = g.impl_ptr()->storage();
    const bool whole = storage->nbytes() == static_cast<size_t>(g.numel()) * element_size(g.dtype());
    if (is_grad_enabled()) m.grad = g;                    // create_graph: keep the gradient's history
    else if (g.impl_ptr().use_count() > 1 || storage.use_count() > 1 || !whole || !g.is_contiguous())
      m.grad = g.clone();
    else m.grad = g;
  } else if (is_grad_enabled()) {
    m.grad = add(m.grad, g);
  } else {
    m.grad.add_(g);
  }
  for (auto& [id, hook] : m.post_accumulate_hooks) hook(leaf_);
  return {};
}

}  // namespace tessera::autograd
