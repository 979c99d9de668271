// Non-reentrant activation checkpointing (utils::checkpoint with use_reentrant = false), after
// PyTorch's _checkpoint_without_reentrant, built on saved-tensor hooks (tessera/autograd/graph.h).
//
// Note [Non-reentrant checkpoint]: the forward runs `fn` with grad mode as it is, so the graph is
// recorded as usual, under a saved_tensors_hooks scope whose pack hook keeps a Holder (an index into
// the checkpoint's Frame, with the saved tensor's shape, dtype and device) instead of the tensor: the
// activations are freed as soon as the forward no longer needs them, and the Frame keeps only `fn`,
// its inputs and the state to replay (Note [Checkpoint replay]). The graph's nodes keep their edges,
// so gradients flow through the region as through any other: to parameters used inside `fn` when no
// input requires grad, to autograd::grad's inputs, and again under create_graph.
// The first unpack of one of the Frame's holders in a backward pass (keyed by the pass's id,
// current_graph_task_id) reruns `fn` on the same inputs under an inner pair of hooks whose pack hook
// stores the i-th tensor saved into slot i (detached: the recomputation's own graph is dropped); the
// unpack then hands out slot i and clears it, so each recomputed activation is freed once its node
// has run, and a second unpack in the same pass raises PyTorch's error. Another pass (a second
// backward with retain_graph, a double backward) recomputes again. In a batched backward (functional
// autograd's vectorize, Note [Batched gradients]) a node may unpack once per sample, so the slots are
// kept until the pass ends. A pass's leftovers are dropped by a final callback (Note [Final
// callbacks]). The recomputation is checked against the forward: the same number of saved tensors
// and (determinism_check "default") the same metadata, with PyTorch's messages, and the inputs at the
// versions they had (an in-place write to one since would make it compute something else).
// Nesting works without special cases: a checkpoint inside `fn` opens its own scope, so the tensors
// it saves never reach the outer Frame, in the forward as in the outer recomputation (which builds an
// inner Frame of its own that nothing unpacks); the inner Frame of the forward recomputes from the
// inputs it kept when the backward reaches it. Unlike PyTorch 2 the recomputation runs all of `fn`
// (no early stop once the needed tensors are back).
#include "nn/checkpoint_non_reentrant.h"

#include <any>
#include <atomic>
#include <map>
#include <memory>
#include <sstream>

#include "autograd/engine_state.h"
#include "nn/checkpoint_replay.h"
#include "tessera/autograd.h"
#include "tessera/autograd/callbacks.h"
#include "tessera/autograd/graph.h"

namespace tessera::utils::detail {
namespace {

using V = std::vector<Tensor>;

struct SavedMeta {
  Shape sizes;
  DType dtype = kFloat32;
  Device device;
  bool operator==(const SavedMeta&) const = default;
};

SavedMeta meta_of(const Tensor& t) { return {t.sizes(), t.dtype(), t.device()}; }

std::string describe(const SavedMeta& m) {
  std::ostringstream os;
  os << "{'shape': " << m.sizes << ", 'dtype': " << dtype_name(m.dtype) << ", 'device': " << m.device.str() << "}";
  return os.str();
}

struct Holder;

struct Frame {
  CheckpointFn fn;
  V inputs;
  std::vector<uint64_t> versions;  // of the inputs, before the forward
  ReplayState replay;
  bool determinism_check = true;
  std::vector<std::weak_ptr<Holder>> holders;  // in the order the forward saved them
  std::vector<SavedMeta> metas;
  std::map<int64_t, V> recomputed;  // by backward pass
};

// What the graph stores in place of a saved activation (its SavedTensor owns it: when the graph
// releases its saved tensors, the holder dies and its slot is not refilled by a recomputation).
struct Holder {
  std::shared_ptr<Frame> frame;
  size_t index = 0;
};

// An id for an unpack outside any backward pass (each recomputes, as PyTorch's uuid there).
std::atomic<int64_t> g_outside{-2};

void check_input_versions(const Frame& f) {
  for (size_t i = 0; i < f.inputs.size(); ++i) {
    const Tensor& t = f.inputs[i];
    if (!t.defined() || t.version() == f.versions[i]) continue;
    TS_THROW(ValueError, "checkpoint: input ", i, " of the checkpointed function ([", dtype_name(t.dtype()), " ",
             t.sizes(), "]) has been modified by an inplace operation since the forward: it is at version ",
             t.version(), "; expected version ", f.versions[i], " instead. The recomputation would not give the "
             "forward's values.");
  }
}

void recompute(Frame& f, int64_t gid) {
  check_input_versions(f);
  V slots(f.holders.size());
  size_t count = 0;
  std::string mismatches;
  {
    ReplayScope replay(f.replay);
    autograd::graph::saved_tensors_hooks inner(
        [&](const Tensor& t) -> std::any {
          const size_t i = count++;
          TS_CHECK(i < f.holders.size(), ValueError, "checkpoint: trying to save more tensors during recomputation "
                   "than during the original forward pass.");
          if (f.determinism_check && !(meta_of(t) == f.metas[i]))
            mismatches += "tensor at position " + std::to_string(i) + ":\nsaved metadata: " + describe(f.metas[i]) +
                          "\nrecomputed metadata: " + describe(meta_of(t)) + "\n";
          if (!f.holders[i].expired()) slots[i] = t.detach();
          return {};
        },
        [](const std::any&) -> Tensor {
          TS_THROW(ValueError, "checkpoint: You are calling backwards on a tensor that is never exposed.");
        });
    f.fn(f.inputs);
  }
  TS_CHECK(mismatches.empty(), ValueError, "checkpoint: Recomputed values for the following tensors have different "
           "metadata than during the forward pass.\n", mismatches);
  TS_CHECK(count == f.holders.size(), ValueError, "checkpoint: A different number of tensors was saved during the "
           "original forward and recomputation.\nNumber of tensors saved during forward: ", f.holders.size(),
           "\nNumber of tensors saved during recomputation: ", count);
  f.recomputed[gid] = std::move(slots);
}

Tensor unpack(const Holder& h) {
  Frame& f = *h.frame;
  int64_t gid = autograd::current_graph_task_id();
  if (gid < 0) gid = g_outside.fetch_sub(1, std::memory_order_relaxed);
  const bool batched = autograd::in_batched_backward();
  auto it = f.recomputed.find(gid);
  if (it == f.recomputed.end()) {
    recompute(f, gid);
    it = f.recomputed.find(gid);
    if (autograd::in_backward_pass()) {
      std::weak_ptr<Frame> weak = h.frame;
      autograd::queue_callback([weak, gid] {
        if (auto frame = weak.lock()) frame->recomputed.erase(gid);
      });
    }
  }
  Tensor& slot = it->second.at(h.index);
  TS_CHECK(slot.defined(), ValueError, "checkpoint: Unpack is being triggered for a tensor that was already unpacked "
           "once. If you are calling ctx.saved_tensors in backward, make sure to do so only once. Otherwise please "
           "open an issue with details on your use case.");
  Tensor t = slot;
  if (!batched) slot = Tensor();
  return t;
}

}  // namespace

std::vector<Tensor> checkpoint_non_reentrant(const CheckpointFn& fn, const std::vector<Tensor>& inputs,
                                             const CheckpointOptions& options) {
  auto f = std::make_shared<Frame>();
  f->fn = fn;
  f->inputs = inputs;
  for (const Tensor& t : inputs) f->versions.push_back(t.defined() ? t.version() : 0);
  f->replay = ReplayState::capture(options.preserve_rng_state);
  f->determinism_check = options.determinism_check == "default";
  autograd::graph::saved_tensors_hooks hooks(
      [f](const Tensor& t) -> std::any {
        auto h = std::make_shared<Holder>();
        h->frame = f;
        h->index = f->holders.size();
        f->holders.push_back(h);
        f->metas.push_back(meta_of(t));
        return h;
      },
      [](const std::any& packed) { return unpack(*std::any_cast<const std::shared_ptr<Holder>&>(packed)); });
  return f->fn(inputs);
}

}  // namespace tessera::utils::detail
