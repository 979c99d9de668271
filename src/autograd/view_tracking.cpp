// View tracking, CopySlices and view regeneration (Note [View tracking] in view_tracking.h).
#include "autograd/view_tracking.h"

#include <algorithm>

#include "tensor/tensor_impl.h"
#include "tessera/functions.h"

namespace tessera::autograd {
namespace {

// A layout relative to the root base's storage offset (the base itself: offset 0).
struct Geometry {
  Shape sizes, strides;
  int64_t offset = 0;
};

Geometry geometry_of(const Tensor& t, const Tensor& base) {
  return {t.sizes(), t.strides(), t.storage_offset() - base.storage_offset()};
}

// No two elements share an address (each dim, by increasing stride, steps past what the smaller ones
// span).
bool non_overlapping(const Shape& sizes, const Shape& strides) {
  std::vector<size_t> dims;
  for (size_t d = 0; d < sizes.size(); ++d)
    if (sizes[d] > 1) dims.push_back(d);
  std::sort(dims.begin(), dims.end(), [&](size_t a, size_t b) { return strides[a] < strides[b]; });
  int64_t span = 1;
  for (size_t d : dims) {
    if (strides[d] < span) return false;
    span += strides[d] * (sizes[d] - 1);
  }
  return true;
}

TensorOptions options_of(const Tensor& t) { return TensorOptions(t.dtype(), t.device()); }

// A gradient of the base as the flat tensor over the base's storage span (Note [View tracking]).
Tensor flat_of_base(const Tensor& g, const Geometry& base) {
  const int64_t extent = storage_extent(base.sizes, base.strides);
  // contiguous() first: a gradient may be an expanded scalar (sum's), whose reshape is a view with stride 0.
  if (is_contiguous_layout(base.sizes, base.strides)) return g.contiguous().reshape({extent});
  return as_strided_scatter(zeros({extent}, options_of(g)), g, base.sizes, base.strides, 0);
}

Tensor base_of_flat(const Tensor& flat, const Geometry& base) {
  if (is_contiguous_layout(base.sizes, base.strides)) return flat.view(base.sizes);
  return flat.as_strided(base.sizes, base.strides, flat.storage_offset());
}

// The view's window of a flat gradient.
Tensor window(const Tensor& flat, const Geometry& view) {
  return flat.as_strided(view.sizes, view.strides, flat.storage_offset() + view.offset);
}

// The base's gradient from a gradient of the view alone: zeros elsewhere; where view elements share
// an address (expand, as_strided windows), their gradients add up.
Tensor view_grad_to_base(const Tensor& g, const Geometry& base, const Geometry& view) {
  const int64_t extent = storage_extent(base.sizes, base.strides);
  Tensor flat = zeros({extent}, options_of(g));
  if (non_overlapping(view.sizes, view.strides)) {
    flat = as_strided_scatter(flat, g, view.sizes, view.strides, view.offset);
  } else {
    Tensor positions = arange(extent, TensorOptions(kInt64, g.device())).as_strided(view.sizes, view.strides, view.offset);
    flat = index_put(flat, {positions.reshape({-1})}, g.reshape({-1}), /*accumulate=*/true);
  }
  return base_of_flat(flat, base);
}

SlotMeta slot_of(const Tensor& t) { return {t.sizes(), t.dtype(), t.device()}; }

// The history of a view regenerated from its base's: the base's gradient is the view's, placed.
class ViewOfBaseBackward final : public GraphNode {
 public:
  ViewOfBaseBackward(const Tensor& base, const Tensor& view)
      : base_(geometry_of(base, base)), view_(geometry_of(view, base)) {
    next_edges.push_back(gradient_edge(base));
    slots.push_back(slot_of(view));
  }
  std::string name() const override { return "AsStridedBackward0"; }  // PyTorch's name for it
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    return {view_grad_to_base(grads[0], base_, view_)};
  }

 private:
  Geometry base_, view_;
};

// The base's grad_fn after an in-place op `fn` on one of its views (Note [View tracking]). Edges:
// [the base's previous history] + fn's edges other than the view's own.
class CopySlices final : public GraphNode {
 public:
  CopySlices(const Tensor& base, const Tensor& view, std::shared_ptr<GraphNode> fn, std::vector<size_t> self_inputs)
      : base_(geometry_of(base, base)), view_(geometry_of(view, base)), view_dtype_(view.dtype()),
        fn_(std::move(fn)), self_inputs_(std::move(self_inputs)) {
    next_edges.push_back(gradient_edge(base));
    for (size_t i = 0; i < fn_->next_edges.size(); ++i)
      if (!is_self(i)) next_edges.push_back(fn_->next_edges[i]);
    slots.push_back(slot_of(base));
  }

  std::string name() const override { return "CopySlices"; }

  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    Tensor flat = flat_of_base(grads[0], base_);
    std::vector<Tensor> res = fn_->apply({window(flat, view_)});
    res.resize(fn_->next_edges.size());
    std::vector<Tensor> out;
    out.reserve(next_edges.size());
    if (next_edges[0].valid()) {
      // The view's old value: fn's gradient for it (the engine would reduce and cast it; here it is
      // placed by hand), zeros where the op overwrote it.
      Tensor old;
      for (size_t i : self_inputs_) {
        if (!res[i].defined()) continue;
        Tensor r = sum_to(res[i], view_.sizes);
        if (r.dtype() != view_dtype_) r = r.to(view_dtype_);
        old = old.defined() ? add(old, r) : r;
      }
      if (!old.defined()) old = zeros(view_.sizes, options_of(flat));
      out.push_back(base_of_flat(as_strided_scatter(flat, old, view_.sizes, view_.strides, view_.offset), base_));
    } else {
      out.emplace_back();
    }
    for (size_t i = 0; i < res.size(); ++i)
      if (!is_self(i)) out.push_back(std::move(res[i]));
    return out;
  }

  void release_saved() override { fn_->release_saved(); }

 private:
  bool is_self(size_t i) const { return std::find(self_inputs_.begin(), self_inputs_.end(), i) != self_inputs_.end(); }

  Geometry base_, view_;
  DType view_dtype_;
  std::shared_ptr<GraphNode> fn_;
  std::vector<size_t> self_inputs_;
};

AutogradMeta* base_meta(const AutogradMeta& m) {
  return static_cast<AutogradMeta*>(m.view_base->autograd_meta.get());
}

// Gives view `t` the history "a view of its base's current history".
void install_view_grad_fn(const Tensor& t, AutogradMeta& m) {
  Tensor base(m.view_base);
  set_history(m, std::make_shared<ViewOfBaseBackward>(base, t), 0);
  AutogradMeta* bm = base_meta(m);
  m.view_of_fn = bm ? bm->grad_fn : nullptr;
}

[[noreturn]] void refuse_untracked(const char* op) {
  TS_THROW(NotImplementedError, op, ": in-place modification of this view is not supported while autograd records: "
           "its base cannot be tracked (an as_strided view reaching outside its base, or aliasing outputs of a "
           "compiled function); clone() it first");
}

}  // namespace

void track_views(const Tensor& self, const std::vector<Tensor>& views, bool multi_output) {
  const auto* sm = static_cast<const AutogradMeta*>(self.impl()->autograd_meta.get());
  const bool untracked_parent = sm && sm->is_view && !sm->view_base;
  Tensor root = sm && sm->view_base ? Tensor(sm->view_base) : self;
  const ViewCreation creation = multi_output       ? ViewCreation::MultiOutput
                                : !is_grad_enabled() ? ViewCreation::NoGradMode
                                : sm && sm->view_base ? sm->view_creation
                                                      : ViewCreation::Default;
  const int64_t root_begin = root.storage_offset();
  const int64_t root_end = root_begin + storage_extent(root.sizes(), root.strides());
  const AutogradMeta* rm = meta_of(root);
  for (const Tensor& v : views) {
    if (!v.defined() || v.is_same(root) || !is_floating_point(v.dtype())) continue;
    AutogradMeta& m = ensure_meta(v);
    m.is_view = true;
    const int64_t begin = v.storage_offset(), end = begin + storage_extent(v.sizes(), v.strides());
    if (untracked_parent || (v.numel() > 0 && (begin < root_begin || end > root_end))) {
      m.view_base.reset();  // Note [View tracking]: untracked
      continue;
    }
    m.view_base = root.impl_ptr();
    m.view_creation = creation;
    m.view_of_fn = rm ? rm->grad_fn : nullptr;
  }
}

void check_inplace_view(const char* op, const Tensor& self) {
  AutogradMeta* m = meta_of(self);
  if (!m) return;
  if (m->view_base) {
    if (m->view_creation == ViewCreation::MultiOutput) {
      if (m->grad_fn)
        TS_THROW(ValueError, op, ": Output ", m->output_nr, " of ", m->grad_fn->name(),
                 " is a view and is being modified inplace. This view is the output of a function that returns "
                 "multiple views. Such functions do not allow the output views to be modified inplace. You should "
                 "replace the inplace operation by an out-of-place one.");
      TS_THROW(ValueError, op, ": a view is being modified inplace that is the output of a function that returns "
               "multiple views (split, chunk, unbind). Such functions do not allow the output views to be modified "
               "inplace. You should replace the inplace operation by an out-of-place one.");
    }
    if (m->view_creation == ViewCreation::NoGradMode)
      TS_THROW(ValueError, op, ": A view was created in no_grad mode and is being modified inplace with grad mode "
               "enabled. Given that this use case is ambiguous and error-prone, it is forbidden. You can clarify "
               "your code by moving both the view and the inplace either both inside the no_grad block (if you "
               "don't want the inplace to be tracked) or both outside (if you want the inplace to be tracked).");
    // PyTorch's rule: the view requires grad and its base is a leaf (whether the base itself requires
    // grad or the view was made a leaf by requires_grad_()).
    const AutogradMeta* bm = base_meta(*m);
    TS_CHECK(!(self.requires_grad() && !(bm && bm->grad_fn)), ValueError, op,
             ": a view of a leaf Variable that requires grad is being used in an in-place operation.");
    TS_CHECK(non_overlapping(self.sizes(), self.strides()), ValueError, op,
             ": unsupported operation: more than one element of the written-to tensor refers to a single memory "
             "location. Please clone() the tensor before performing the operation.");
    return;
  }
  if (m->is_view) refuse_untracked(op);
  TS_CHECK(!(m->requires_grad && !m->grad_fn), ValueError, op,
           ": a leaf Variable that requires grad is being used in an in-place operation.");
}

void refresh_view(const Tensor& t, AutogradMeta& m) {
  if (!m.view_base || m.view_creation == ViewCreation::NoGradMode) return;
  AutogradMeta* bm = base_meta(m);
  if (!bm || !bm->requires_grad) return;
  if (m.grad_fn && m.view_of_fn.lock() == bm->grad_fn) return;
  install_view_grad_fn(t, m);
}

void rebase_view(const Tensor& self, std::shared_ptr<GraphNode> fn, const std::vector<size_t>& self_inputs) {
  AutogradMeta& m = *meta_of(self);
  Tensor base(m.view_base);
  auto cs = std::make_shared<CopySlices>(base, self, std::move(fn), self_inputs);
  set_history(ensure_meta(base), cs, 0);
  install_view_grad_fn(self, m);
}

}  // namespace tessera::autograd
