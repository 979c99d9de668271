// The backward graph: nodes, the edges between them, and what autograd keeps per tensor.
//
// Note [Graph ownership]: a tensor's AutogradMeta owns its grad_fn (shared_ptr); a node owns the
// nodes of its inputs through its edges. Saved outputs hold only a weak reference to the node that
// made them, so no tensor-node cycle keeps a graph alive (see saved_tensor.h). A leaf's
// AccumulateGrad node is shared by every graph that uses the leaf, through a weak_ptr in its meta.
#pragma once
#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tensor/tensor_impl.h"
#include "tessera/autograd.h"

namespace tessera::autograd {

class GraphNode;

struct Edge {
  std::shared_ptr<GraphNode> fn;  // null: this input takes no gradient
  uint32_t input_nr = 0;          // which gradient slot of fn this edge feeds
  bool valid() const { return fn != nullptr; }
};

// Shape, dtype and device of one forward output of a node (= one gradient slot), used to check,
// reduce (broadcast) and cast incoming gradients and to make zeros for slots nobody fed.
struct SlotMeta {
  Shape sizes;
  DType dtype = kFloat32;
  Device device;
};

using TensorHook = std::function<Tensor(const Tensor&)>;
using PostAccumulateHook = std::function<void(const Tensor&)>;

class GraphNode : public Node, public std::enable_shared_from_this<GraphNode> {
 public:
  GraphNode();
  // grads[i] is the gradient of forward output i (already summed over all users); returns one
  // gradient per edge (undefined where an edge needs none).
  virtual std::vector<Tensor> apply(std::vector<Tensor>&& grads) = 0;
  // Drops saved tensors after a backward without retain_graph.
  virtual void release_saved() {}
  // Whether the engine hands apply() zeros for slots nobody fed (custom functions may opt out).
  virtual bool materialize_grads() const { return true; }
  // Note [Batched gradients]: in a batched backward (autograd::grad with is_grads_batched) every
  // gradient carries a leading batch dim of `batch` samples: grads[i] is (batch, *slot i's sizes),
  // and so is what this returns for each edge (or a shape that reduces to it, as apply()'s).
  // This default runs apply() once per sample and stacks the results; a node whose formulas take the
  // batch dim as it comes (OpNode with a batched derivative) overrides it with one call.
  virtual std::vector<Tensor> apply_batched(std::vector<Tensor>&& grads, int64_t batch);
  std::vector<std::shared_ptr<Node>> next_functions() const override;

  uint64_t sequence_nr() const { return sequence_nr_; }
  std::vector<Edge> next_edges;
  std::vector<SlotMeta> slots;                              // one per forward output
  std::map<uint32_t, std::vector<std::pair<uint64_t, TensorHook>>> pre_hooks;  // by slot

 private:
  uint64_t sequence_nr_;
};

// How a tracked view was made, which decides whether it may be written in place (Note [View
// tracking]); a view of a view keeps its parent's kind unless its own op says otherwise.
enum class ViewCreation : uint8_t {
  Default,      // an ordinary view: in-place writes rewrite the base's history
  NoGradMode,   // made under no_grad from a base that requires grad: writing it with grad on is refused
  MultiOutput,  // a piece of split / chunk / unbind: writing it with grad on is refused
};

// The autograd state of one tensor.
struct AutogradMeta : AutogradMetaBase {
  Tensor grad;
  std::shared_ptr<GraphNode> grad_fn;       // null for leaves
  uint32_t output_nr = 0;                   // which output of grad_fn this tensor is
  std::weak_ptr<GraphNode> grad_accumulator;
  bool retains_grad = false;
  uint64_t retain_hook_id = 0;              // the retain_grad hook, on grad_fn's slot output_nr
  std::vector<std::pair<uint64_t, TensorHook>> leaf_hooks;  // hooks on a leaf's incoming gradient
  std::vector<std::pair<uint64_t, PostAccumulateHook>> post_accumulate_hooks;
  // Views only (view_base set, Note [View tracking]): how the view was made, and the base's grad_fn
  // its own history was derived from; when the base's grad_fn is another one now (an in-place write
  // to the base or through a sibling view), the view's grad_fn is regenerated from the base's.
  ViewCreation view_creation = ViewCreation::Default;
  std::weak_ptr<GraphNode> view_of_fn;
};

AutogradMeta* meta_of(const Tensor& t);          // null when the tensor has no autograd state
// Gives a tensor a new history (an in-place op, CopySlices, a regenerated view). A retain_grad hook
// moves with it, so that .grad is the gradient of the tensor's current value, as in PyTorch 2.
void set_history(AutogradMeta& m, std::shared_ptr<GraphNode> fn, uint32_t output_nr);
AutogradMeta& ensure_meta(const Tensor& t);
uint64_t next_hook_id();

// The edge through which a gradient for `t` flows: its grad_fn slot, or its leaf accumulator
// (created on demand) when it is a leaf that requires grad; an invalid edge otherwise.
Edge gradient_edge(const Tensor& t);

// Sums `grad` down to `sizes` (undoing broadcasting); raises ShapeError if it cannot.
Tensor sum_to(const Tensor& grad, const Shape& sizes);
// The same for a batched gradient (Note [Batched gradients]): (batch, ...) down to (batch, *sizes),
// dim 0 kept.
Tensor sum_to_batched(const Tensor& grad, const Shape& sizes);
// Per-sample results (samples[b][i]: output i of sample b) stacked into batched ones along a new
// dim 0; an output undefined in every sample stays undefined, one undefined in some is zeros there.
std::vector<Tensor> stack_samples(const std::vector<std::vector<Tensor>>& samples);

}  // namespace tessera::autograd
