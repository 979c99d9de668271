// Activation checkpointing (tessera/utils/checkpoint.h): the entry points, and the reentrant form,
// a custom autograd function whose forward runs `fn` without a graph and whose backward recomputes
// it (Note [Checkpoint replay]) and backpropagates through the recomputation with a nested backward
// pass. The non-reentrant form is checkpoint_non_reentrant.cpp.
#include "tessera/utils/checkpoint.h"

#include <any>

#include "autograd/engine_state.h"
#include "nn/checkpoint_non_reentrant.h"
#include "nn/checkpoint_replay.h"
#include "tessera/autograd.h"
#include "tessera/functions.h"
#include "tessera/nn/containers.h"

namespace tessera::utils {
namespace {

using V = std::vector<Tensor>;
using autograd::FunctionContext;
using detail::ReplayScope;
using detail::ReplayState;

struct Checkpoint {
  CheckpointFn fn;
  ReplayState replay;
  std::vector<bool> requires_grad;  // per input
  size_t n_inputs = 0;              // fn's; a placeholder input may follow (checkpoint())
};

V checkpoint_backward(FunctionContext& ctx, const V& grads) {
  TS_CHECK(!autograd::in_grad_call(), ValueError, "checkpoint: Checkpointing is not compatible with .grad() or when "
           "an `inputs` parameter is passed to .backward(). Please use .backward() and do not pass its `inputs` "
           "argument.");
  auto c = std::any_cast<std::shared_ptr<Checkpoint>>(ctx.values.at("checkpoint"));
  const V& saved = ctx.saved_tensors();
  V inputs;
  for (size_t i = 0; i < saved.size(); ++i) {
    Tensor d = saved[i].detach();
    if (c->requires_grad[i]) d.requires_grad_();
    inputs.push_back(d);
  }
  V outputs;
  {
    ReplayScope replay(c->replay);
    outputs = c->fn(V(inputs.begin(), inputs.begin() + static_cast<std::ptrdiff_t>(c->n_inputs)));
  }
  V roots, root_grads;
  for (size_t i = 0; i < outputs.size() && i < grads.size(); ++i) {
    if (!outputs[i].defined() || !outputs[i].requires_grad() || !grads[i].defined()) continue;
    roots.push_back(outputs[i]);
    root_grads.push_back(grads[i]);
  }
  TS_CHECK(!roots.empty(), ValueError, "checkpoint: none of output has requires_grad=True, this checkpoint() is not "
           "necessary");
  autograd::backward(roots, root_grads);
  V out;
  for (const Tensor& in : inputs) out.push_back(in.requires_grad() ? in.grad() : Tensor());
  return out;
}

// The reentrant form: a custom function whose backward recomputes and runs a nested backward.
V checkpoint_reentrant(const CheckpointFn& fn, const V& inputs, bool preserve_rng_state) {
  auto c = std::make_shared<Checkpoint>();
  c->fn = fn;
  c->n_inputs = inputs.size();
  V all = inputs;
  // Where no input requires grad (the first block of a network, fed data), the parameters inside fn
  // still do: a placeholder input that requires grad makes the function record its node, so that the
  // backward reaches them (PyTorch's reentrant checkpoint would leave their gradients None).
  bool any = false;
  for (const Tensor& t : inputs) any = any || (t.defined() && t.requires_grad());
  if (!any && is_grad_enabled()) all.push_back(zeros({0}).requires_grad_());
  for (const Tensor& t : all) c->requires_grad.push_back(t.defined() && t.requires_grad());
  c->replay = ReplayState::capture(preserve_rng_state);
  return autograd::detail::apply_custom_function(
      "CheckpointFunctionBackward", all,
      [&](FunctionContext& ctx) {
        ctx.save_for_backward(all);
        ctx.values["checkpoint"] = c;
        return c->fn(inputs);  // under no_grad: nothing inside is recorded
      },
      &checkpoint_backward, /*once_differentiable=*/true);
}

}  // namespace

std::vector<Tensor> checkpoint(const CheckpointFn& fn, const std::vector<Tensor>& inputs, bool preserve_rng_state) {
  return checkpoint(fn, inputs, CheckpointOptions{.preserve_rng_state = preserve_rng_state});
}

std::vector<Tensor> checkpoint(const CheckpointFn& fn, const std::vector<Tensor>& inputs,
                               const CheckpointOptions& options) {
  TS_CHECK(!inputs.empty(), ValueError, "checkpoint: needs at least one tensor input");
  TS_CHECK(options.determinism_check == "default" || options.determinism_check == "none", ValueError,
           "checkpoint: determinism_check should be one of \"default\", \"none\", but got ",
           options.determinism_check);
  if (options.use_reentrant) {
    TS_CHECK(options.determinism_check == "default", ValueError, "checkpoint: Passing `determinism_check` is "
             "currently only supported for non-reentrant checkpoint (use_reentrant=false)");
    return checkpoint_reentrant(fn, inputs, options.preserve_rng_state);
  }
  return detail::checkpoint_non_reentrant(fn, inputs, options);
}

Tensor checkpoint_sequential(nn::Sequential& seq, int64_t segments, const Tensor& input, bool preserve_rng_state) {
  return checkpoint_sequential(seq, segments, input, CheckpointOptions{.preserve_rng_state = preserve_rng_state});
}

Tensor checkpoint_sequential(nn::Sequential& seq, int64_t segments, const Tensor& input,
                             const CheckpointOptions& options) {
  TS_CHECK(segments > 0, ValueError, "checkpoint_sequential: segments must be positive, got ", segments);
  const int64_t n = static_cast<int64_t>(seq.size());
  if (n == 0) return input;
  const int64_t per = std::max<int64_t>(n / segments, 1);
  Tensor x = input;
  int64_t start = 0;
  for (; start + per < n; start += per) {
    const int64_t end = start + per;
    x = checkpoint(
        [&seq, start, end](const V& in) {
          Tensor h = in[0];
          for (int64_t i = start; i < end; ++i) h = seq[i](h);
          return V{h};
        },
        {x}, options)[0];
  }
  for (int64_t i = start; i < n; ++i) x = seq[i](x);  // the last segment runs as usual
  return x;
}

}  // namespace tessera::utils
