// The Tensor's autograd methods (tensor.h "autograd"), and the in-place checks the op layer calls.
#include "autograd/accumulate_grad.h"
#include "autograd/apply_context.h"
#include "autograd/graph.h"
#include "autograd/view_tracking.h"
#include "ops/autograd_hook.h"
#include "tessera/autograd.h"
#include "tessera/functions.h"

namespace tessera {

using autograd::AutogradMeta;
using autograd::ensure_meta;
using autograd::meta_of;

bool Tensor::requires_grad() const { return tessera::requires_grad(*this); }

Tensor& Tensor::requires_grad_(bool rg) {
  AutogradMeta* m = meta_of(*this);
  if (!rg) {
    TS_CHECK(!m || !m->grad_fn, ValueError, "requires_grad_: you can only change requires_grad flags of leaf variables. "
             "If you want to use a computed variable in a subgraph that doesn't require differentiation use "
             "var_no_grad = var.detach().");
    if (m) m->requires_grad = false;
    return *this;
  }
  TS_CHECK(is_floating_point(), DTypeError, "requires_grad_: only Tensors of floating point dtype can require "
           "gradients, got ", dtype_name(dtype()));
  ensure_meta(*this).requires_grad = true;
  return *this;
}

bool Tensor::is_leaf() const { return grad_fn() == nullptr; }

Tensor Tensor::grad() const {
  AutogradMeta* m = meta_of(*this);
  return m ? m->grad : Tensor();
}

void Tensor::set_grad(const Tensor& g) const {
  if (g.defined()) {
    TS_CHECK(g.sizes() == sizes(), ShapeError, "set_grad: assigned grad has data of shape ", g.sizes(),
             " but the tensor has shape ", sizes());
    TS_CHECK(g.dtype() == dtype() && g.device() == device(), DTypeError, "set_grad: assigned grad is ",
             dtype_name(g.dtype()), " on ", g.device().str(), " but the tensor is ", dtype_name(dtype()), " on ",
             device().str());
  }
  ensure_meta(*this).grad = g;
}

void Tensor::zero_grad(bool set_to_none) const {
  AutogradMeta* m = meta_of(*this);
  if (!m || !m->grad.defined()) return;
  if (set_to_none) m->grad = Tensor();
  else m->grad = zeros_like(m->grad);
}

void Tensor::backward(const Tensor& gradient, std::optional<bool> retain_graph, bool create_graph) const {
  autograd::backward({*this}, gradient.defined() ? std::vector<Tensor>{gradient} : std::vector<Tensor>{},
                     retain_graph, create_graph);
}

Tensor Tensor::detach() const { return make_view(*this, sizes(), strides(), storage_offset()); }

Tensor& Tensor::detach_() {
  if (AutogradMeta* m = meta_of(*this)) {
    TS_CHECK(!m->view_base, ValueError, "detach_: Can't detach views in-place. Use detach() instead.");
    m->grad_fn.reset();
    m->requires_grad = false;
    m->is_view = false;
  }
  return *this;
}

void Tensor::retain_grad() const {
  TS_CHECK(requires_grad(), ValueError, "retain_grad: can't retain_grad on a Tensor that has requires_grad=false");
  (void)grad_fn();  // a view's history is current first (Note [View tracking])
  AutogradMeta& m = ensure_meta(*this);
  if (!m.grad_fn || m.retains_grad) return;  // leaves keep their grad anyway
  m.retains_grad = true;
  autograd::note_user_code();  // Note [Fake data]
  m.retain_hook_id = autograd::next_hook_id();
  std::weak_ptr<TensorImpl> weak = impl_ptr();
  m.grad_fn->pre_hooks[m.output_nr].emplace_back(m.retain_hook_id, [weak](const Tensor& g) {
    if (auto impl = weak.lock()) {
      AutogradMeta& mm = static_cast<AutogradMeta&>(*impl->autograd_meta);
      Tensor copy = g.detach().clone();
      mm.grad = mm.grad.defined() ? tessera::add(mm.grad, copy) : copy;
    }
    return Tensor();
  });
}

bool Tensor::retains_grad() const {
  AutogradMeta* m = meta_of(*this);
  return m && m->retains_grad;
}

std::shared_ptr<Node> Tensor::grad_fn() const {
  AutogradMeta* m = meta_of(*this);
  if (!m) return nullptr;
  if (m->view_base) autograd::refresh_view(*this, *m);  // Note [View tracking]
  return m->grad_fn;
}

uint64_t Tensor::register_hook(std::function<Tensor(const Tensor&)> hook) const {
  TS_CHECK(requires_grad(), ValueError, "register_hook: cannot register a hook on a tensor that doesn't require gradient");
  (void)grad_fn();  // a view's history is current first (Note [View tracking])
  AutogradMeta& m = ensure_meta(*this);
  uint64_t id = autograd::next_hook_id();
  autograd::note_user_code();  // Note [Fake data]
  if (m.grad_fn) m.grad_fn->pre_hooks[m.output_nr].emplace_back(id, std::move(hook));
  else m.leaf_hooks.emplace_back(id, std::move(hook));
  return id;
}

uint64_t Tensor::register_post_accumulate_grad_hook(std::function<void(const Tensor&)> hook) const {
  TS_CHECK(requires_grad() && is_leaf(), ValueError,
           "register_post_accumulate_grad_hook: post accumulate grad hooks can only be registered on leaf tensors "
           "that require grad");
  uint64_t id = autograd::next_hook_id();
  ensure_meta(*this).post_accumulate_hooks.emplace_back(id, std::move(hook));
  return id;
}

void Tensor::remove_hook(uint64_t handle) const {
  AutogradMeta* m = meta_of(*this);
  if (!m) return;
  auto drop = [handle](auto& v) { std::erase_if(v, [handle](const auto& p) { return p.first == handle; }); };
  drop(m->leaf_hooks);
  drop(m->post_accumulate_hooks);
  if (m->grad_fn)
    for (auto& [slot, hooks] : m->grad_fn->pre_hooks) drop(hooks);
}

}  // namespace tessera
