// Custom autograd functions (autograd::Function<Derived>, declared in tessera/autograd.h): runs the
// user's forward under no_grad and, when an input requires grad, records a CustomFunctionNode whose
// apply() calls the user's backward.
//
// Invariants: the saved tensors live in the context's Impl as SavedTensors (so an in-place change
// after saving is reported when backward unpacks them); the saved *output* is kept as a node output
// (weak reference to the node, Note [Graph ownership]) so the ctx -> output -> node cycle never forms.
#include <cxxabi.h>

#include <cstdlib>

#include "autograd/saved_tensor.h"

namespace tessera::autograd {

struct FunctionContext::Impl {
  std::vector<Tensor> pending;       // saved during forward, before the node exists
  std::vector<SavedTensor> saved;    // after forward, when a node was recorded
  std::vector<Tensor> unpacked;      // what saved_tensors() last handed out
  bool recorded = false;
  std::vector<bool> needs_input_grad;
  std::string node_name;
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

namespace {

using BackwardFn = detail::CustomBackward;

class CustomFunctionNode final : public GraphNode {
 public:
  CustomFunctionNode(std::string name, std::shared_ptr<FunctionContext> ctx, BackwardFn backward)
      : name_(std::move(name)), ctx_(std::move(ctx)), backward_(backward) {}

  std::string name() const override { return name_; }

  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    std::vector<Tensor> out = backward_(*ctx_, grads);
    ctx_->impl_->unpacked.clear();  // the references handed to backward end with it
    TS_CHECK(out.size() <= next_edges.size(), ValueError, "function ", name_,
             " returned an incorrect number of gradients (expected ", next_edges.size(), ", got ", out.size(), ")");
    out.resize(next_edges.size());
    for (size_t i = 0; i < out.size(); ++i)
      if (!next_edges[i].valid()) out[i] = Tensor();  // an input that takes no gradient
    return out;
  }

  void release_saved() override {
    for (SavedTensor& s : ctx_->impl_->saved) s.reset();
  }

 private:
  std::string name_;
  std::shared_ptr<FunctionContext> ctx_;
  BackwardFn backward_;
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

Tensor apply_custom_function(std::string node_name, const std::vector<Tensor>& inputs, const CustomForward& forward,
                             CustomBackward backward) {
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
  Tensor out;
  {
    NoGradGuard no_grad;
    out = forward(*ctx);
  }
  TS_CHECK(out.defined(), ValueError, "autograd::Function ", node_name, ": forward returned an undefined tensor");
  if (!any || !is_floating_point(out.dtype())) return out;

  // An input returned as is would get the node as its grad_fn: give the output its own alias.
  for (const Tensor& in : inputs)
    if (in.defined() && out.is_same(in)) out = out.detach();
  if (AutogradMeta* m = meta_of(out); m && m->grad_fn) out = out.detach();

  auto node = std::make_shared<CustomFunctionNode>(node_name, ctx, backward);
  for (const Tensor& in : inputs) node->next_edges.push_back(gradient_edge(in));
  node->slots.push_back(SlotMeta{out.sizes(), out.dtype(), out.device()});
  AutogradMeta& m = ensure_meta(out);
  m.requires_grad = true;
  m.grad_fn = node;
  m.output_nr = 0;

  FunctionContext::Impl& impl = *ctx->impl_;
  impl.node_name = node_name;
  for (const Tensor& t : impl.pending) impl.saved.emplace_back(t, t.defined() && t.is_same(out));
  impl.pending.clear();
  impl.recorded = true;
  return out;
}

}  // namespace detail
}  // namespace tessera::autograd
