// The autograd stage as the op layer sees it.
//
// Note [Autograd stage]: every differentiable op, after its kernel ran, does
//     if (should_record({&a, &b})) record_op(OpId::add, {a, b}, {out}, OpAttrs{.scalars = {alpha}});
// should_record() is true when grad mode is on, the autograd layer has registered its stage, and an
// input requires grad. The autograd layer (src/autograd) registers the stage at start-up; it links
// the outputs to a graph node holding the op's derivative, found by OpId in
// src/autograd/derivatives/. Nothing else of autograd is known below it. Ops written as compositions
// of other ops (mean = sum / n) do not record themselves: their parts do. Outputs that cannot carry a
// gradient (indices, booleans) are not passed as outputs; a derivative that needs them takes them
// from attrs.tensors. In-place ops record OpId::copy_ onto the modified tensor (see tensor_methods.cpp).
#pragma once
#include <initializer_list>
#include <string>
#include <vector>

#include "ops/table/op_table.h"
#include "ops/trace_hook.h"
#include "runtime/grad_mode.h"
#include "tensor/tensor_impl.h"
#include "tessera/scalar.h"

namespace tessera {

// OpAttrs, the attributes a recorded call carries: ops/table/op_attrs.h (Note [Typed attributes]).

class AutogradStage {
 public:
  virtual ~AutogradStage() = default;
  virtual void record(OpId op, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
                      OpAttrs&& attrs) = 0;
  // `views` were made from `self` by a view op (Note [View tracking]); `multi_output` for the pieces
  // of split, chunk and unbind.
  virtual void track_views(const Tensor& self, const std::vector<Tensor>& views, bool multi_output) {}
  // Before an in-place op writes `self` while something involved requires grad: raises for leaves and
  // for views that cannot be written through (PyTorch's errors).
  virtual void check_inplace(const char* op, const Tensor& self) {}
};

void set_autograd_stage(AutogradStage* stage);
AutogradStage* autograd_stage();

// A view requires grad when its base does (Note [View tracking]).
inline bool requires_grad(const Tensor& t) {
  if (!t.defined()) return false;
  const AutogradMetaBase* m = t.impl()->autograd_meta.get();
  if (!m) return false;
  if (m->requires_grad) return true;
  const TensorImpl* base = m->view_base.get();
  return base && base->autograd_meta && base->autograd_meta->requires_grad;
}

// Autograd's own condition: grad mode on, the stage registered, an input requiring grad.
inline bool grad_recording(std::initializer_list<const Tensor*> inputs) {
  if (!is_grad_enabled() || autograd_stage() == nullptr) return false;
  for (const Tensor* t : inputs)
    if (t && requires_grad(*t)) return true;
  return false;
}
inline bool grad_recording(const std::vector<Tensor>& inputs) {
  if (!is_grad_enabled() || autograd_stage() == nullptr) return false;
  for (const Tensor& t : inputs)
    if (requires_grad(t)) return true;
  return false;
}

// Whether the op should call record_op: for autograd, or for the compiler's capture (Note [Trace
// records] in ops/trace_hook.h).
inline bool should_record(std::initializer_list<const Tensor*> inputs) { return capturing() || grad_recording(inputs); }
inline bool should_record(const std::vector<Tensor>& inputs) { return capturing() || grad_recording(inputs); }

// The autograd node only, for an op that gives the capture a record of its own (its call's
// arguments, where the derivative's record holds tensors the capture cannot see: Note [Trace records]).
inline void record_op_untraced(OpId op, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
                               OpAttrs attrs = {}) {
  if (op_info(op).grad == OpGrad::Formula && grad_recording(inputs))
    autograd_stage()->record(op, inputs, outputs, std::move(attrs));
}

// Before an in-place op writes `self` from `others`: refuses leaves that require grad, views of them,
// and the views PyTorch refuses to write through (made in no_grad mode, pieces of split/unbind), when
// self or one of `others` requires grad. A write through any other view rewrites its base's history
// (CopySlices, Note [View tracking]).
void check_inplace(const char* op, const Tensor& self, std::initializer_list<const Tensor*> others = {});
// After a view op made `views` of `self`: lets autograd know their base (Note [View tracking]). Skipped
// inside the body of an op that records itself (its views are implementation), for non-float
// tensors, and under no_grad for a base that does not require grad.
inline void track_views(const Tensor& self, const std::vector<Tensor>& views, bool multi_output = false) {
  AutogradStage* stage = autograd_stage();
  if (stage == nullptr || detail::t_trace_suppress > 0 || !is_floating_point(self.dtype())) return;
  if (!is_grad_enabled() && !requires_grad(self)) return;
  stage->track_views(self, views, multi_output);
}
// After an in-place op wrote `self` from `inputs`: records it so that self's history continues from
// the op ("rebase"). Does nothing unless self or an input takes part in autograd.
void record_inplace(OpId op, const Tensor& self, const std::vector<Tensor>& inputs, OpAttrs attrs = {});
// Before an in-place op that has no derivative (the fused optimizer steps, the gradient scaler's ops)
// writes `written` from `read`: while autograd would have to record the call (grad mode on and one of
// them requiring grad) it raises, as PyTorch's refusals for a leaf or a view of one (check_inplace),
// else NotImplementedError naming the op. Their callers run them under no_grad.
void refuse_untracked_inplace(const char* op, const std::vector<Tensor>& written, const std::vector<Tensor>& read = {});
// The autograd half alone, for an op that gives the capture a record of its own (the random fills).
void record_inplace_untraced(OpId op, const Tensor& self, const std::vector<Tensor>& inputs, OpAttrs attrs = {});

// The trace record goes to the capture when one runs; the autograd node is made for rows with a
// derivative when autograd's own condition holds.
inline void record_op(OpId op, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
                      OpAttrs attrs = {}) {
  if (capturing()) [[unlikely]]
    detail::trace_record(op, inputs, outputs, attrs);
  if (op_info(op).grad == OpGrad::Formula && grad_recording(inputs))
    autograd_stage()->record(op, inputs, outputs, std::move(attrs));
}

}  // namespace tessera
