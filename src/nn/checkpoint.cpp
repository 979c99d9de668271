// Activation checkpointing (tessera/utils/checkpoint.h): a custom autograd function whose forward
// runs `fn` without a graph and whose backward recomputes it (Note [Checkpoint replay]) and
// backpropagates through the recomputation with a nested backward pass.
#include "tessera/utils/checkpoint.h"

#include <any>
#include <optional>

#include "autograd/engine_state.h"
#include "ops/autocast_hook.h"
#include "tessera/amp.h"
#include "tessera/autograd.h"
#include "tessera/functions.h"
#include "tessera/generator.h"
#include "tessera/nn/containers.h"

namespace tessera::utils {
namespace {

using V = std::vector<Tensor>;
using autograd::FunctionContext;

struct GeneratorState {
  uint64_t seed = 0, offset = 0;
};

GeneratorState state_of(Generator& g) { return {g.seed(), g.offset()}; }
void restore(Generator& g, const GeneratorState& s) {
  g.manual_seed(s.seed);
  g.set_offset(s.offset);
}

struct AutocastState {
  bool enabled = false;
  DType dtype = kBFloat16;
};

constexpr DeviceType kAutocastTypes[] = {DeviceType::CPU, DeviceType::CUDA};

struct Checkpoint {
  CheckpointFn fn;
  bool preserve_rng = true;
  GeneratorState cpu_rng, cuda_rng;
  AutocastState autocast[2];
  bool autocast_cache = true;
  std::vector<bool> requires_grad;  // per input
  size_t n_inputs = 0;              // fn's; a placeholder input may follow (checkpoint())
};

// The forward's generator states, set for the recomputation and the caller's put back after.
class ForkRng {
 public:
  explicit ForkRng(const Checkpoint& c) : active_(c.preserve_rng) {
    if (!active_) return;
    cpu_ = state_of(default_generator(kCPU));
    cuda_ = state_of(default_generator(Device::cuda()));
    restore(default_generator(kCPU), c.cpu_rng);
    restore(default_generator(Device::cuda()), c.cuda_rng);
  }
  ~ForkRng() {
    if (!active_) return;
    restore(default_generator(kCPU), cpu_);
    restore(default_generator(Device::cuda()), cuda_);
  }
  ForkRng(const ForkRng&) = delete;
  ForkRng& operator=(const ForkRng&) = delete;

 private:
  bool active_;
  GeneratorState cpu_, cuda_;
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
    ForkRng rng(*c);
    EnableGradGuard grad_on;
    AutocastIncludeGuard lift;  // the engine excludes autocast for derivatives; the forward ran under it
    std::optional<amp::autocast> guards[2];
    for (int k = 0; k < 2; ++k) {
      const DeviceType t = kAutocastTypes[k];
      if (c->autocast[k].enabled || amp::is_autocast_enabled(t))
        guards[k].emplace(Device(t), c->autocast[k].dtype, c->autocast[k].enabled, c->autocast_cache);
    }
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

}  // namespace

std::vector<Tensor> checkpoint(const CheckpointFn& fn, const std::vector<Tensor>& inputs, bool preserve_rng_state) {
  TS_CHECK(!inputs.empty(), ValueError, "checkpoint: needs at least one tensor input");
  auto c = std::make_shared<Checkpoint>();
  c->fn = fn;
  c->preserve_rng = preserve_rng_state;
  c->n_inputs = inputs.size();
  V all = inputs;
  // Where no input requires grad (the first block of a network, fed data), the parameters inside fn
  // still do: a placeholder input that requires grad makes the function record its node, so that the
  // backward reaches them (PyTorch's reentrant checkpoint would leave their gradients None).
  bool any = false;
  for (const Tensor& t : inputs) any = any || (t.defined() && t.requires_grad());
  if (!any && is_grad_enabled()) all.push_back(zeros({0}).requires_grad_());
  for (const Tensor& t : all) c->requires_grad.push_back(t.defined() && t.requires_grad());
  if (preserve_rng_state) {
    c->cpu_rng = state_of(default_generator(kCPU));
    c->cuda_rng = state_of(default_generator(Device::cuda()));
  }
  for (int k = 0; k < 2; ++k)
    c->autocast[k] = {amp::is_autocast_enabled(kAutocastTypes[k]), amp::get_autocast_dtype(kAutocastTypes[k])};
  c->autocast_cache = amp::is_autocast_cache_enabled();
  return autograd::detail::apply_custom_function(
      "CheckpointFunctionBackward", all,
      [&](FunctionContext& ctx) {
        ctx.save_for_backward(all);
        ctx.values["checkpoint"] = c;
        return c->fn(inputs);  // under no_grad: nothing inside is recorded
      },
      &checkpoint_backward, /*once_differentiable=*/true);
}

Tensor checkpoint_sequential(nn::Sequential& seq, int64_t segments, const Tensor& input, bool preserve_rng_state) {
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
        {x}, preserve_rng_state)[0];
  }
  for (int64_t i = start; i < n; ++i) x = seq[i](x);  // the last segment runs as usual
  return x;
}

}  // namespace tessera::utils
