// Module hooks (nn/module.h): forward pre-hooks and forward hooks around forward(), and full
// backward hooks, as PyTorch's, for calls with any number of tensor arguments and outputs.
//
// Note [Full backward hooks]: as PyTorch's BackwardHook, a call with backward hooks wraps its tensor
// arguments and its tensor outputs, each group in one identity autograd function
// (BackwardHookFunctionBackward) whose outputs that need no gradient are marked non-differentiable.
// In the backward, the outputs' identity runs first: it gathers grad_output (one entry per output,
// undefined where no gradient arrived: it does not materialize them), runs the backward pre-hooks
// (which may replace grad_output) and keeps grad_output; the arguments' identity runs once the
// module's own backward has produced their gradients, and runs the backward hooks with (grad_input,
// grad_output), which may replace grad_input. grad_input has one entry per argument: the identity
// materializes the gradient of an argument that requires none as zeros, as PyTorch 1.13's hook sees
// it. Where no argument requires grad, the backward hooks run at the outputs' identity with every
// grad_input undefined, as PyTorch's; where a gradient reaches the arguments without passing through
// the outputs (a double backward), the hooks do not run. The hooks are those registered when the
// module was called. Nothing is wrapped when grad mode is off or no tensor involved requires grad.
#include <algorithm>
#include <any>

#include "tessera/autograd.h"
#include "tessera/nn/module.h"

namespace tessera::nn {

using V = std::vector<Tensor>;

struct ModuleHookRegistry {
  uint64_t next_id = 1;
  std::vector<std::pair<uint64_t, ForwardPreHookArgs>> forward_pre;
  std::vector<std::pair<uint64_t, ForwardHookArgs>> forward;
  std::vector<std::pair<uint64_t, BackwardPreHook>> backward_pre;
  std::vector<std::pair<uint64_t, BackwardHook>> backward;

  bool empty() const { return forward_pre.empty() && forward.empty() && backward_pre.empty() && backward.empty(); }
  void remove(uint64_t id) {
    auto drop = [id](auto& v) { std::erase_if(v, [id](const auto& p) { return p.first == id; }); };
    drop(forward_pre);
    drop(forward);
    drop(backward_pre);
    drop(backward);
  }
};

namespace {

template <class H>
RemovableHandle add_hook(std::shared_ptr<ModuleHookRegistry>& hooks, std::vector<std::pair<uint64_t, H>>& list,
                         H hook, bool prepend) {
  const uint64_t id = hooks->next_id++;
  if (prepend) list.insert(list.begin(), {id, std::move(hook)});
  else list.emplace_back(id, std::move(hook));
  return RemovableHandle(hooks, id);
}

void check_single(const Module& m, const char* what, const char* seen, size_t n) {
  TS_CHECK(n == 1, ValueError, what, ": the hook registered on ", m.name(), " takes one ", seen, " tensor, but ",
           m.name(), " was called with ", n, " ", seen, " tensors; register a hook taking std::vector<Tensor> ",
           std::string(seen) == "input" ? "args" : "args and output", " instead");
}

// One call's backward-hook state (Note [Full backward hooks]).
struct CallState {
  Module* module = nullptr;
  std::vector<BackwardPreHook> pre_hooks;
  std::vector<BackwardHook> hooks;
  size_t n_args = 0, n_outputs = 0;
  std::vector<size_t> arg_index, out_index;  // where the wrapped tensors sit among args / outputs
  bool inputs_wrapped = false;
  std::optional<V> grad_output;  // set by the outputs' identity, taken by the arguments'
};

std::shared_ptr<CallState> state_of(const autograd::FunctionContext& ctx) {
  return std::any_cast<std::shared_ptr<CallState>>(ctx.values.at("state"));
}

void run_backward_hooks(CallState& st, V& grad_input) {
  for (const BackwardHook& hook : st.hooks) {
    std::optional<V> r = hook(*st.module, grad_input, *st.grad_output);
    if (!r) continue;
    TS_CHECK(r->size() == grad_input.size(), ValueError, "register_full_backward_hook: backward hook returned an "
             "invalid number of grad_input, got ", r->size(), ", but expected ", grad_input.size());
    grad_input = std::move(*r);
  }
}

// The identity over the wrapped tensors of one side; `spread` puts gradients back at the side's
// positions and `gather` takes them out again.
V spread(const V& grads, const std::vector<size_t>& index, size_t n) {
  V out(n);
  for (size_t k = 0; k < index.size() && k < grads.size(); ++k) out[index[k]] = grads[k];
  return out;
}
V gather(const V& all, const std::vector<size_t>& index) {
  V out;
  for (size_t i : index) out.push_back(i < all.size() ? all[i] : Tensor());
  return out;
}

V identity_forward(autograd::FunctionContext& ctx, const V& tensors, const std::shared_ptr<CallState>& st) {
  ctx.values["state"] = st;
  V nondiff;
  for (const Tensor& t : tensors)
    if (!t.requires_grad()) nondiff.push_back(t);
  if (!nondiff.empty()) ctx.mark_non_differentiable(nondiff);
  return tensors;
}

V inputs_backward(autograd::FunctionContext& ctx, const V& grads) {
  std::shared_ptr<CallState> st = state_of(ctx);
  if (!st->grad_output) return grads;  // the gradient did not pass through the outputs
  V grad_input = spread(grads, st->arg_index, st->n_args);
  run_backward_hooks(*st, grad_input);
  st->grad_output.reset();
  return gather(grad_input, st->arg_index);
}

V outputs_backward(autograd::FunctionContext& ctx, const V& grads) {
  std::shared_ptr<CallState> st = state_of(ctx);
  V grad_output = spread(grads, st->out_index, st->n_outputs);
  for (const BackwardPreHook& hook : st->pre_hooks) {
    std::optional<V> r = hook(*st->module, grad_output);
    if (!r) continue;
    TS_CHECK(r->size() == grad_output.size(), ValueError, "register_full_backward_pre_hook: backward pre hook "
             "returned an invalid number of grad_output, got ", r->size(), ", but expected ", grad_output.size());
    grad_output = std::move(*r);
  }
  st->grad_output = grad_output;
  if (!st->inputs_wrapped) {
    V grad_input(st->n_args);
    run_backward_hooks(*st, grad_input);
    st->grad_output.reset();
  }
  return gather(grad_output, st->out_index);
}

// Wraps the defined tensors of `side` in one identity function; returns the positions wrapped.
std::vector<size_t> wrap(V& side, const std::shared_ptr<CallState>& st, bool outputs) {
  std::vector<size_t> index;
  V tensors;
  bool any = false;
  for (size_t i = 0; i < side.size(); ++i) {
    if (!side[i].defined()) continue;
    index.push_back(i);
    tensors.push_back(side[i]);
    any = any || side[i].requires_grad();
  }
  if (!any) return {};
  V wrapped = autograd::detail::apply_custom_function(
      "BackwardHookFunctionBackward", tensors,
      [&](autograd::FunctionContext& ctx) {
        if (outputs) ctx.set_materialize_grads(false);  // grad_output: undefined where none arrived
        return identity_forward(ctx, tensors, st);
      },
      outputs ? &outputs_backward : &inputs_backward, /*once_differentiable=*/false);
  for (size_t k = 0; k < index.size(); ++k) side[index[k]] = wrapped[k];
  return index;
}

}  // namespace

void RemovableHandle::remove() {
  if (auto h = hooks_.lock()) h->remove(id_);
}

ModuleHookRegistry& Module::hooks() {
  if (!hooks_) hooks_ = std::make_shared<ModuleHookRegistry>();
  return *hooks_;
}

RemovableHandle Module::register_forward_pre_hook(ForwardPreHookArgs hook, bool prepend) {
  return add_hook(hooks_, hooks().forward_pre, std::move(hook), prepend);
}
RemovableHandle Module::register_forward_pre_hook(ForwardPreHook hook, bool prepend) {
  return register_forward_pre_hook(
      ForwardPreHookArgs([hook = std::move(hook)](Module& m, const V& args) -> std::optional<V> {
        check_single(m, "register_forward_pre_hook", "input", args.size());
        std::optional<Tensor> r = hook(m, args[0]);
        if (!r) return std::nullopt;
        return V{std::move(*r)};
      }),
      prepend);
}
RemovableHandle Module::register_forward_hook(ForwardHookArgs hook, bool prepend) {
  return add_hook(hooks_, hooks().forward, std::move(hook), prepend);
}
RemovableHandle Module::register_forward_hook(ForwardHook hook, bool prepend) {
  return register_forward_hook(
      ForwardHookArgs([hook = std::move(hook)](Module& m, const V& args, const V& output) -> std::optional<V> {
        check_single(m, "register_forward_hook", "input", args.size());
        check_single(m, "register_forward_hook", "output", output.size());
        std::optional<Tensor> r = hook(m, args[0], output[0]);
        if (!r) return std::nullopt;
        return V{std::move(*r)};
      }),
      prepend);
}
RemovableHandle Module::register_full_backward_pre_hook(BackwardPreHook hook, bool prepend) {
  return add_hook(hooks_, hooks().backward_pre, std::move(hook), prepend);
}
RemovableHandle Module::register_full_backward_hook(BackwardHook hook, bool prepend) {
  return add_hook(hooks_, hooks().backward, std::move(hook), prepend);
}

Tensor Module::operator()(Tensor input) {
  if (!hooks_ || hooks_->empty()) return forward(std::move(input));
  return call_with_hooks({std::move(input)}, [this](const V& args) { return V{forward(args[0])}; })[0];
}

V Module::call_with_hooks(V args, const std::function<V(const V&)>& forward) {
  if (!hooks_ || hooks_->empty()) return forward(args);
  std::shared_ptr<ModuleHookRegistry> h = hooks_;  // a hook may remove hooks (or itself) while running
  for (const auto& [id, hook] : std::vector(h->forward_pre)) {
    std::optional<V> r = hook(*this, args);
    if (!r) continue;
    TS_CHECK(r->size() == args.size(), ValueError, "register_forward_pre_hook: a forward pre-hook of ", name(),
             " returned ", r->size(), " arguments, but ", name(), " was called with ", args.size(),
             " (a pre-hook replaces every positional tensor argument)");
    args = std::move(*r);
  }

  std::shared_ptr<CallState> st;
  if ((!h->backward.empty() || !h->backward_pre.empty()) && is_grad_enabled()) {
    st = std::make_shared<CallState>();
    st->module = this;
    for (const auto& [id, hook] : h->backward_pre) st->pre_hooks.push_back(hook);
    for (const auto& [id, hook] : h->backward) st->hooks.push_back(hook);
    st->n_args = args.size();
    st->arg_index = wrap(args, st, /*outputs=*/false);
    st->inputs_wrapped = !st->arg_index.empty();
  }
  V output = forward(args);
  for (const auto& [id, hook] : std::vector(h->forward)) {
    std::optional<V> r = hook(*this, args, output);
    if (!r) continue;
    TS_CHECK(r->size() == output.size(), ValueError, "register_forward_hook: a forward hook of ", name(),
             " returned ", r->size(), " outputs, but ", name(), " returned ", output.size());
    output = std::move(*r);
  }
  if (st) {
    st->n_outputs = output.size();
    st->out_index = wrap(output, st, /*outputs=*/true);
  }
  return output;
}

}  // namespace tessera::nn
