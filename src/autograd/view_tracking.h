// Views in the graph: which tensor a view shows, in-place writes through a view (PyTorch's
// CopySlices), and the regeneration of a view's history after its base changed.
//
// Note [View tracking]: every view op (ops/views.cpp) tells autograd which tensor its output shows
// (track_views in ops/autograd_hook.h). The view keeps its *root* base (AutogradMetaBase::view_base:
// the tensor that is not itself a view; a view of a view shares its parent's), how it was made
// (ViewCreation) and the base's grad_fn from which its own history was derived. Then:
//  - A view requires grad when its base does (requires_grad() in ops/autograd_hook.h), as in PyTorch.
//  - An in-place op on a view rewrites the base's history. The op's node `fn` is made as if the view
//    were a tensor of its own and wrapped in a CopySlices node, which becomes the base's grad_fn.
//    CopySlices takes the base's gradient, hands fn the part the view covers, puts fn's gradient for
//    the view's old value back into that part (zeros where the op overwrote it: copy_, fill_), and
//    passes the whole to the base's previous history; fn's other inputs get fn's gradients. The view's
//    grad_fn becomes a view of the base's new history (AsStridedBackward0).
//  - A view whose base's grad_fn is no longer the one its history came from (an in-place op on the
//    base, or on a sibling view) has its grad_fn regenerated the same way before it is next used
//    (gradient_edge, Tensor::grad_fn). So a view never carries a stale history.
// Geometry works on the base's storage: a gradient of the base is laid out as a flat tensor over the
// storage span the base reaches (the element at storage offset base_offset + p is flat[p]), and a
// view is an as_strided window of it. That holds for any base layout (channels-last, a detached slice
// with gaps) and is written with tessera ops, so it runs on any device and differentiates again
// (create_graph). A view reaching outside its base (as_strided with an explicit offset), a view of an
// untracked view, and compiled outputs that alias one another (compile/compiled_backward.cpp) stay
// untracked (is_view without view_base): writing one with grad involved raises NotImplementedError.
// As PyTorch, writing with grad involved is refused for views made under no_grad from a base that
// requires grad, for pieces of split / chunk / unbind, for views of leaves that require grad, and for
// views whose elements overlap (the write's gradient would be ambiguous); with PyTorch's messages.
#pragma once
#include <memory>
#include <vector>

#include "autograd/graph.h"

namespace tessera::autograd {

// The stage's halves (op_node.cpp forwards to them).
void track_views(const Tensor& self, const std::vector<Tensor>& views, bool multi_output);
void check_inplace_view(const char* op, const Tensor& self);

// Whether `t` is a tracked view (it has a root base).
inline bool is_tracked_view(const Tensor& t) {
  const AutogradMeta* m = meta_of(t);
  return m && m->view_base != nullptr;
}

// Regenerates the grad_fn of a tracked view whose base's history changed (no-op otherwise).
void refresh_view(const Tensor& t, AutogradMeta& m);

// After in-place node `fn` (one output: the view's new value) was made for a write to tracked view
// `self`: installs CopySlices as the base's grad_fn and gives the view its new history.
// `self_inputs`: the positions among fn's inputs (its edges) that are the view itself.
void rebase_view(const Tensor& self, std::shared_ptr<GraphNode> fn, const std::vector<size_t>& self_inputs);

}  // namespace tessera::autograd
