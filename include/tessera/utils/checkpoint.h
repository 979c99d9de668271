// Activation checkpointing, as torch.utils.checkpoint (src/nn/checkpoint.cpp): trade compute for
// memory. The forward runs without recording a graph, so it saves no activations (only the inputs);
// the backward runs the forward again with grad on and backpropagates through that recomputation.
//
//   ts::Tensor y = ts::utils::checkpoint([&](const ts::Tensor& x) { return block(x); }, x);
//   ts::Tensor z = ts::utils::checkpoint_sequential(seq, /*segments=*/4, x);
//
// Note [Checkpoint replay]: the recomputation must see what the forward saw. The default generators'
// Philox states (CPU and CUDA: a seed and an offset each) are saved before the forward and restored
// around the recomputation, so dropout and other random ops draw the same numbers; the caller's
// generator state is put back afterwards. The autocast state of the forward (enabled and dtype per
// device type, the cache flag) is re-entered for the recomputation, whatever is open around the
// backward, and the engine's own autocast exclusion is lifted for it. As PyTorch's reentrant
// checkpoint: gradients reach parameters used inside `fn` through a nested backward that accumulates
// into their .grad (also when no input requires grad, unlike PyTorch's reentrant checkpoint), so the
// pass must be a backward() (autograd::grad raises), and the result is
// differentiable once (a second order raises, @once_differentiable). The inputs are saved and
// version-checked like any saved tensor: modifying one in place before the backward raises.
#pragma once
#include <functional>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "tessera/tensor.h"

namespace tessera::nn {
class Sequential;
}

namespace tessera::utils {

using CheckpointFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

// fn's outputs, computed without saving activations. preserve_rng_state: Note [Checkpoint replay]
// (false skips saving the generators, for functions that draw no random numbers).
std::vector<Tensor> checkpoint(const CheckpointFn& fn, const std::vector<Tensor>& inputs,
                               bool preserve_rng_state = true);

// checkpoint(fn, x, y, ...) with fn(Tensor, Tensor, ...) returning one Tensor. fn is copied into the
// recomputation (backward calls it after this returns: a temporary lambda must not be referenced).
template <class F, class... Ts>
  requires(std::is_same_v<Ts, Tensor> && ...) && std::is_invocable_r_v<Tensor, std::decay_t<F>&, const Tensor&, const Ts&...>
Tensor checkpoint(F&& fn, const Tensor& input, const Ts&... inputs) {
  CheckpointFn wrapped = [fn = std::decay_t<F>(std::forward<F>(fn))](const std::vector<Tensor>& in) mutable {
    return [&]<size_t... I>(std::index_sequence<I...>) { return std::vector<Tensor>{fn(in[0], in[I + 1]...)}; }(
        std::index_sequence_for<Ts...>{});
  };
  return checkpoint(wrapped, std::vector<Tensor>{input, inputs...})[0];
}

// As torch.utils.checkpoint.checkpoint_sequential: the modules in `segments` consecutive groups,
// each but the last checkpointed (the last runs as usual: its outputs are needed at once).
Tensor checkpoint_sequential(nn::Sequential& seq, int64_t segments, const Tensor& input, bool preserve_rng_state = true);

}  // namespace tessera::utils
