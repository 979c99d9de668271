// Module hooks (nn/module.h): forward pre-hooks and forward hooks around forward(), and full
// backward hooks, as PyTorch's.
//
// Note [Full backward hooks]: as PyTorch's BackwardHook, a call with backward hooks wraps its input
// and its output in identity autograd functions (BackwardHookFunctionBackward). In the backward, the
// output's identity runs first: it runs the backward pre-hooks (which may replace grad_output) and
// keeps grad_output; the input's identity runs once the module's own backward has produced the
// input's gradient, and runs the backward hooks with (grad_input, grad_output), which may replace
// grad_input. Where the input takes no gradient, the backward hooks run at the output's identity with
// an undefined grad_input, as PyTorch's. The hooks are those registered when the module was called.
// Nothing is wrapped when grad mode is off or no tensor involved requires grad.
#include <algorithm>
#include <any>

#include "tessera/autograd.h"
#include "tessera/nn/module.h"

namespace tessera::nn {

struct ModuleHookRegistry {
  uint64_t next_id = 1;
  std::vector<std::pair<uint64_t, ForwardPreHook>> forward_pre;
  std::vector<std::pair<uint64_t, ForwardHook>> forward;
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

// One call's backward-hook state (Note [Full backward hooks]).
struct CallState {
  Module* module = nullptr;
  std::vector<BackwardPreHook> pre_hooks;
  std::vector<BackwardHook> hooks;
  std::vector<Tensor> grad_output;
  bool input_takes_grad = false;
};

std::shared_ptr<CallState> state_of(const autograd::FunctionContext& ctx) {
  return std::any_cast<std::shared_ptr<CallState>>(ctx.values.at("state"));
}

void run_backward_hooks(CallState& st, std::vector<Tensor>& grad_input) {
  for (const BackwardHook& hook : st.hooks) {
    std::optional<std::vector<Tensor>> r = hook(*st.module, grad_input, st.grad_output);
    if (!r) continue;
    TS_CHECK(r->size() == grad_input.size(), ValueError, "register_full_backward_hook: backward hook returned an "
             "invalid number of grad_input, got ", r->size(), ", but expected ", grad_input.size());
    grad_input = std::move(*r);
  }
}

struct HookedInput : autograd::Function<HookedInput> {
  static constexpr const char* name = "BackwardHookFunctionBackward";
  static Tensor forward(autograd::FunctionContext& ctx, const Tensor& x, const std::shared_ptr<CallState>& st) {
    ctx.values["state"] = st;
    return x;
  }
  static std::vector<Tensor> backward(autograd::FunctionContext& ctx, const std::vector<Tensor>& grads) {
    std::shared_ptr<CallState> st = state_of(ctx);
    std::vector<Tensor> grad_input = {grads[0]};
    run_backward_hooks(*st, grad_input);
    return grad_input;
  }
};

struct HookedOutput : autograd::Function<HookedOutput> {
  static constexpr const char* name = "BackwardHookFunctionBackward";
  static Tensor forward(autograd::FunctionContext& ctx, const Tensor& y, const std::shared_ptr<CallState>& st) {
    ctx.values["state"] = st;
    return y;
  }
  static std::vector<Tensor> backward(autograd::FunctionContext& ctx, const std::vector<Tensor>& grads) {
    std::shared_ptr<CallState> st = state_of(ctx);
    std::vector<Tensor> grad_output = {grads[0]};
    for (const BackwardPreHook& hook : st->pre_hooks) {
      std::optional<std::vector<Tensor>> r = hook(*st->module, grad_output);
      if (!r) continue;
      TS_CHECK(r->size() == grad_output.size(), ValueError, "register_full_backward_pre_hook: backward pre hook "
               "returned an invalid number of grad_output, got ", r->size(), ", but expected ", grad_output.size());
      grad_output = std::move(*r);
    }
    st->grad_output = grad_output;
    if (!st->input_takes_grad) {
      std::vector<Tensor> grad_input = {Tensor()};
      run_backward_hooks(*st, grad_input);
    }
    return grad_output;
  }
};

}  // namespace

void RemovableHandle::remove() {
  if (auto h = hooks_.lock()) h->remove(id_);
}

ModuleHookRegistry& Module::hooks() {
  if (!hooks_) hooks_ = std::make_shared<ModuleHookRegistry>();
  return *hooks_;
}

RemovableHandle Module::register_forward_pre_hook(ForwardPreHook hook, bool prepend) {
  return add_hook(hooks_, hooks().forward_pre, std::move(hook), prepend);
}
RemovableHandle Module::register_forward_hook(ForwardHook hook, bool prepend) {
  return add_hook(hooks_, hooks().forward, std::move(hook), prepend);
}
RemovableHandle Module::register_full_backward_pre_hook(BackwardPreHook hook, bool prepend) {
  return add_hook(hooks_, hooks().backward_pre, std::move(hook), prepend);
}
RemovableHandle Module::register_full_backward_hook(BackwardHook hook, bool prepend) {
  return add_hook(hooks_, hooks().backward, std::move(hook), prepend);
}

Tensor Module::operator()(Tensor input) {
  if (!hooks_ || hooks_->empty()) return forward(std::move(input));
  std::shared_ptr<ModuleHookRegistry> h = hooks_;  // a hook may remove hooks (or itself) while running
  for (const auto& [id, hook] : std::vector(h->forward_pre))
    if (std::optional<Tensor> r = hook(*this, input)) input = std::move(*r);

  std::shared_ptr<CallState> st;
  if ((!h->backward.empty() || !h->backward_pre.empty()) && is_grad_enabled()) {
    st = std::make_shared<CallState>();
    st->module = this;
    for (const auto& [id, hook] : h->backward_pre) st->pre_hooks.push_back(hook);
    for (const auto& [id, hook] : h->backward) st->hooks.push_back(hook);
    st->input_takes_grad = input.defined() && input.requires_grad();
    if (st->input_takes_grad) input = HookedInput::apply(input, st);
  }
  Tensor output = forward(input);
  for (const auto& [id, hook] : std::vector(h->forward))
    if (std::optional<Tensor> r = hook(*this, input, output)) output = std::move(*r);
  if (st && output.defined() && output.requires_grad()) output = HookedOutput::apply(output, st);
  return output;
}

}  // namespace tessera::nn
