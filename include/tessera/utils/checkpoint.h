// Activation checkpointing, as torch.utils.checkpoint (src/nn/checkpoint.cpp): trade compute for
// memory. The forward keeps only the inputs of `fn`, and the backward runs `fn` again to get the
// activations back.
//
//   ts::Tensor y = ts::utils::checkpoint([&](const ts::Tensor& x) { return block(x); }, x);
//   ts::Tensor y = ts::utils::checkpoint(fn, x, ts::utils::CheckpointOptions{.use_reentrant = false});
//   ts::Tensor z = ts::utils::checkpoint_sequential(seq, /*segments=*/4, x);
//
// Two forms, as PyTorch's use_reentrant:
// - Reentrant (use_reentrant = true, the default, as PyTorch's when the argument is not passed): the
//   forward runs `fn` without recording a graph (one CheckpointFunctionBackward node stands for it);
//   its backward recomputes `fn` with grad on and backpropagates through the recomputation with a
//   nested backward that accumulates into .grad. Gradients reach parameters used inside `fn` also when
//   no input requires grad (unlike PyTorch's reentrant checkpoint). The pass must be a backward()
//   (autograd::grad raises, PyTorch's message), and the result is differentiable once (a second order
//   raises, @once_differentiable).
// - Non-reentrant (use_reentrant = false, src/nn/checkpoint_non_reentrant.cpp): the forward records
//   the graph as usual under saved-tensor hooks (tessera/autograd/graph.h) that keep a placeholder
//   instead of each saved activation; the first unpack in a backward pass recomputes `fn` and hands
//   the recomputed values to the graph (Note [Non-reentrant checkpoint]). It works with
//   autograd::grad as with backward(), when no input requires grad, with create_graph (higher
//   orders), and nested (a checkpoint inside a checkpointed function).
//
// Note [Checkpoint replay]: the recomputation must see what the forward saw. The default generators'
// Philox states (CPU and CUDA: a seed and an offset each) are saved before the forward and restored
// around the recomputation, so dropout and other random ops draw the same numbers; the caller's
// generator state is put back afterwards. The autocast state of the forward (enabled and dtype per
// device type, the cache flag) is re-entered for the recomputation, whatever is open around the
// backward, and the engine's own autocast exclusion is lifted for it (src/nn/checkpoint_replay.h).
// The reentrant form saves its inputs like any saved tensor (modifying one in place before the
// backward raises the saved-tensor error); the non-reentrant form records its inputs' versions and
// raises if one changed before the recomputation.
#pragma once
#include <functional>
#include <string>
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

// torch.utils.checkpoint.checkpoint's keyword arguments.
struct CheckpointOptions {
  bool use_reentrant = true;
  // Note [Checkpoint replay] (false skips saving the generators, for functions that draw no random
  // numbers).
  bool preserve_rng_state = true;
  // Non-reentrant only: "default" compares the shape, dtype and device of every recomputed saved
  // tensor with the forward's (ValueError listing the differences); "none" does not.
  std::string determinism_check = "default";
};

// fn's outputs, computed without saving activations.
std::vector<Tensor> checkpoint(const CheckpointFn& fn, const std::vector<Tensor>& inputs,
                               const CheckpointOptions& options);
std::vector<Tensor> checkpoint(const CheckpointFn& fn, const std::vector<Tensor>& inputs,
                               bool preserve_rng_state = true);

namespace detail {
template <class T> inline constexpr bool is_options_v = std::is_same_v<std::decay_t<T>, CheckpointOptions>;
template <class... A> inline constexpr bool last_is_options_v = false;
template <class A> inline constexpr bool last_is_options_v<A> = is_options_v<A>;
template <class A, class B, class... R> inline constexpr bool last_is_options_v<A, B, R...> = last_is_options_v<B, R...>;
template <class... A> inline constexpr size_t n_tensor_args_v = sizeof...(A) - (last_is_options_v<A...> ? 1 : 0);

template <class F, class... A, size_t... I>
constexpr bool invocable_with_tensors(std::index_sequence<I...>) {
  return ((std::is_same_v<std::tuple_element_t<I, std::tuple<A...>>, Tensor>) && ...) &&
         std::is_invocable_r_v<Tensor, std::decay_t<F>&, const Tensor&, decltype(void(I), std::declval<const Tensor&>())...>;
}
template <class F, class... A>
inline constexpr bool checkpoint_args_v = invocable_with_tensors<F, A...>(std::make_index_sequence<n_tensor_args_v<A...>>{});
}  // namespace detail

// checkpoint(fn, x, y, ...) with fn(Tensor, Tensor, ...) returning one Tensor, optionally followed by
// CheckpointOptions: `checkpoint(fn, x, y, CheckpointOptions{.use_reentrant = false})`. fn is copied
// into the recomputation (backward calls it after this returns: a temporary lambda must not be
// referenced).
template <class F, class... A>
  requires detail::checkpoint_args_v<F, A...>
Tensor checkpoint(F&& fn, const Tensor& input, const A&... rest) {
  constexpr size_t n = detail::n_tensor_args_v<A...>;
  const auto args = std::forward_as_tuple(rest...);
  CheckpointOptions options;
  if constexpr (n < sizeof...(A)) options = std::get<n>(args);
  std::vector<Tensor> inputs{input};
  [&]<size_t... I>(std::index_sequence<I...>) { (inputs.push_back(std::get<I>(args)), ...); }(std::make_index_sequence<n>{});
  CheckpointFn wrapped = [fn = std::decay_t<F>(std::forward<F>(fn))](const std::vector<Tensor>& in) mutable {
    return [&]<size_t... I>(std::index_sequence<I...>) { return std::vector<Tensor>{fn(in[0], in[I + 1]...)}; }(
        std::make_index_sequence<n>{});
  };
  return checkpoint(wrapped, inputs, options)[0];
}

// As torch.utils.checkpoint.checkpoint_sequential: the modules in `segments` consecutive groups,
// each but the last checkpointed (the last runs as usual: its outputs are needed at once).
Tensor checkpoint_sequential(nn::Sequential& seq, int64_t segments, const Tensor& input, bool preserve_rng_state = true);
Tensor checkpoint_sequential(nn::Sequential& seq, int64_t segments, const Tensor& input,
                             const CheckpointOptions& options);

}  // namespace tessera::utils
