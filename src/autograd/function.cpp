// Custom autograd functions (autograd::Function<Derived>, declared in tessera/autograd.h): runs the
// user's forward under no_grad and, when an input requires grad, records a CustomFunctionNode whose
// apply() calls the user's backward.
//
// Invariants: the saved tensors live in the context's Impl as SavedTensors (so an in-place change
// after saving is reported when backward unpacks them); the saved *output* is kept as a node output
// (weak reference to the node, Note [Graph ownership]) so the ctx -> output -> node cycle never forms.
#include <cxxabi.h>

#include <cstdlib>

#include "autograd/apply_context.h"
#include "autograd/saved_tensor.h"
#include "autograd/view_tracking.h"

namespace tessera::autograd {

struct FunctionContext::Impl {
  std::vector<Tensor> pending;       // saved during forward, before the node exists
  std::vector<SavedTensor> saved;    // after forward, when a node was recorded
  std::vector<Tensor> unpacked;      // what saved_tensors() last handed out
  bool recorded = false;
  std::vector<bool> needs_input_grad;
  std::string node_name;
  std::vector<Tensor> dirty, non_differentiable;
  bool materialize_grads = true;
};

FunctionContext::FunctionContext() : impl_(std::make_shared<Impl>()) {}

void FunctionContext::save_for_backward(std::vector<Tensor> tensors) { impl_->pending = std::move(tensors); }

const std::vector<Tensor>& FunctionContext::saved_tensors() const {
  if (!impl_->recorded) return impl_->pending;
  std::vector<Tensor> out;
  out.reserve(impl_->saved.size());
  for (const SavedTensor& s : impl_->saved) out.push_back(s.unpack(impl_->node_name));  // checks versions
  impl_->unpacked = std::move(out);
  return impl_->unpacked;
}

const std::vector<bool>& FunctionContext::needs_input_grad() const { return impl_->needs_input_grad; }

void FunctionContext::mark_dirty(std::vector<Tensor> tensors) { impl_->dirty = std::move(tensors); }
void FunctionContext::mark_non_differentiable(std::vector<Tensor> tensors) {
  impl_->non_differentiable = std::move(tensors);
}
void FunctionContext::set_materialize_grads(bool value) { impl_->materialize_grads = value; }

namespace {

using BackwardFn = detail::CustomBackward;

bool contains(const std::vector<Tensor>& v, const Tensor& t) {
  for (const Tensor& x : v)
    if (x.is_same(t)) return true;
  return false;
}

// The grad_fn of the gradients a once-differentiable backward returned under create_graph:
// differentiating them raises, as PyTorch's DelayedError.
class OnceDifferentiableError final : public GraphNode {
 public:
  explicit OnceDifferentiableError(std::string fn) : fn_(std::move(fn)) {}
  std::string name() const override { return "DelayedError"; }
  std::vector<Tensor> apply(std::vector<Tensor>&&) override {
    TS_THROW(ValueError, fn_, ": trying to differentiate twice a function that was marked with @once_differentiable");
  }

 private:
  std::string fn_;
};

class CustomFunctionNode final : public GraphNode {
 public:
  CustomFunctionNode(std::string name, std::shared_ptr<FunctionContext> ctx, BackwardFn backward, bool once)
      : name_(std::move(name)), ctx_(std::move(ctx)), backward_(backward), once_(once) {}

  std::string name() const override { return name_; }
  bool materialize_grads() const override { return ctx_->impl_->materialize_grads; }

  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    std::vector<Tensor> out;
    if (once_) {
      NoGradGuard no_grad;
      out = backward_(*ctx_, grads);
    } else {
      out = backward_(*ctx_, grads);
    }
    ctx_->impl_->unpacked.clear();  // the references handed to backward end with it
    TS_CHECK(out.size() <= next_edges.size(), ValueError, "function ", name_,
             " returned an incorrect number of gradients (expected ", next_edges.size(), ", got ", out.size(), ")");
    out.resize(next_edges.size());
    for (size_t i = 0; i < out.size(); ++i)
      if (!next_edges[i].valid()) out[i] = Tensor();  // an input that takes no gradient
    if (once_ && is_grad_enabled()) guard_second_order(grads, out);
    return out;
  }

  void release_saved() override {
    for (SavedTensor& s : ctx_->impl_->saved) s.reset();
  }

 private:
  // Under create_graph, the gradients get a history that raises when it is differentiated.
  void guard_second_order(const std::vector<Tensor>& grads, std::vector<Tensor>& out) const {
    bool any = false;
    for (const Tensor& g : grads) any = any || (g.defined() && g.requires_grad());
    if (!any) return;
    auto err = std::make_shared<OnceDifferentiableError>(name_);
    for (const Tensor& g : grads) err->next_edges.push_back(gradient_edge(g));
    for (Tensor& o : out) {
      if (!o.defined() || !is_floating_point(o.dtype())) continue;
      o = o.detach();
      AutogradMeta& m = ensure_meta(o);
      m.requires_grad = true;
      m.grad_fn = err;
      m.output_nr = static_cast<uint32_t>(err->slots.size());
      err->slots.push_back(SlotMeta{o.sizes(), o.dtype(), o.device()});
    }
  }

  std::string name_;
  std::shared_ptr<FunctionContext> ctx_;
  BackwardFn backward_;
  bool once_;
};

}  // namespace

namespace detail {

std::string custom_node_name(const char* mangled) {
  int status = 0;
  char* d = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  if (status != 0 || d == nullptr) return "CustomFunctionBackward";
  std::string full(d);
  std::free(d);
  // Unqualified name: the part after the last "::" outside template arguments.
  const size_t lt = full.find('<');
  const size_t cut = full.rfind("::", lt == std::string::npos ? std::string::npos : lt);
  std::string base = cut == std::string::npos ? full : full.substr(cut + 2);
  if (base.empty()) return "CustomFunctionBackward";
  return base + "Backward";
}

std::vector<Tensor> apply_custom_function(std::string node_name, const std::vector<Tensor>& inputs,
                                          const CustomForward& forward, CustomBackward backward,
                                          bool once_differentiable) {
  TS_CHECK(!inputs.empty(), ValueError, "autograd::Function ", node_name,
           ": apply() needs at least one Tensor argument");
  auto ctx = std::make_shared<FunctionContext>();
  const bool grad_mode = is_grad_enabled();
  bool any = false;
  for (const Tensor& in : inputs) {
    const bool need = grad_mode && in.defined() && in.requires_grad();
    ctx->impl_->needs_input_grad.push_back(need);
    any = any || need;
  }
  std::vector<Tensor> outs;
  {
    NoGradGuard no_grad;
    outs = forward(*ctx);
  }
  FunctionContext::Impl& impl = *ctx->impl_;
  TS_CHECK(!outs.empty(), ValueError, "autograd::Function ", node_name, ": forward returned no tensor");
  for (size_t i = 0; i < outs.size(); ++i)
    TS_CHECK(outs[i].defined(), ValueError, "autograd::Function ", node_name, ": forward returned an undefined tensor "
             "as output ", i);
  for (const Tensor& d : impl.dirty) {
    TS_CHECK(contains(inputs, d), ValueError, "autograd::Function ", node_name, ": mark_dirty: only inputs of the "
             "function can be marked dirty (modified in place)");
    TS_CHECK(contains(outs, d), ValueError, "autograd::Function ", node_name, ": Some elements marked as dirty during "
             "the forward method were not returned as output. The inputs that are modified inplace must all be outputs "
             "of the Function.");
  }
  if (!any || !grad_mode) return outs;

  // Before an in-place write is recorded: PyTorch's refusals (leaves, views that cannot be written).
  for (const Tensor& d : impl.dirty) {
    AutogradMeta* m = meta_of(d);
    TS_CHECK(!(m && m->requires_grad && !m->grad_fn && !m->view_base), ValueError, node_name,
             ": a leaf Variable that requires grad has been used in an in-place operation.");
    if (is_tracked_view(d)) {
      check_inplace_view(node_name.c_str(), d);
      TS_CHECK(outs.size() == 1, NotImplementedError, node_name, ": mark_dirty on a view is supported for a "
               "function with one output only (got ", outs.size(), " outputs)");
    }
  }

  note_user_code();  // Note [Fake data]: its backward is user code
  auto node = std::make_shared<CustomFunctionNode>(node_name, ctx, backward, once_differentiable);
  for (const Tensor& in : inputs) node->next_edges.push_back(gradient_edge(in));  // the inputs' histories before
  for (size_t i = 0; i < outs.size(); ++i) {
    Tensor& out = outs[i];
    const bool dirty = contains(impl.dirty, out);
    const bool differentiable = is_floating_point(out.dtype()) && !contains(impl.non_differentiable, out);
    // An input returned as is (not dirty), or a tensor with a history of its own, gets its own alias.
    if (!dirty && (contains(inputs, out) || (meta_of(out) && meta_of(out)->grad_fn))) out = out.detach();
    node->slots.push_back(SlotMeta{out.sizes(), out.dtype(), out.device()});
    if (!differentiable) continue;
    if (dirty && is_tracked_view(out)) {
      std::vector<size_t> self_inputs;
      for (size_t k = 0; k < inputs.size(); ++k)
        if (inputs[k].is_same(out)) self_inputs.push_back(k);
      rebase_view(out, node, self_inputs);  // Note [View tracking]
      continue;
    }
    set_history(ensure_meta(out), node, static_cast<uint32_t>(i));
  }

  impl.node_name = node_name;
  for (const Tensor& t : impl.pending) impl.saved.emplace_back(t, t.defined() && contains(outs, t));
  impl.pending.clear();
  impl.dirty.clear();
  impl.non_differentiable.clear();
  impl.recorded = true;
  return outs;
}

}  // namespace detail
}  // namespace tessera::autograd
