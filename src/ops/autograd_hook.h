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
};

void set_autograd_stage(AutogradStage* stage);
AutogradStage* autograd_stage();

inline bool requires_grad(const Tensor& t) {
  return t.defined() && t.impl()->autograd_meta && t.impl()->autograd_meta->requires_grad;
}

inline bool should_record(std::initializer_list<const Tensor*> inputs) {
  if (!is_grad_enabled() || autograd_stage() == nullptr) return false;
  for (const Tensor* t : inputs)
    if (t && requires_grad(*t)) return true;
  return false;
}
inline bool should_record(const std::vector<Tensor>& inputs) {
  if (!is_grad_enabled() || autograd_stage() == nullptr) return false;
  for (const Tensor& t : inputs)
    if (requires_grad(t)) return true;
  return false;
}

// Before an in-place op writes `self`: refuses leaves that require grad, and views of tensors that
// require grad (their base's history would have to change too, which is not supported).
void check_inplace(const char* op, const Tensor& self);
// After an in-place op wrote `self` from `inputs`: records it so that self's history continues from
// the op ("rebase"). Does nothing unless self or an input takes part in autograd.
void record_inplace(OpId op, const Tensor& self, const std::vector<Tensor>& inputs, OpAttrs attrs = {});

inline void record_op(OpId op, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
                      OpAttrs attrs = {}) {
  autograd_stage()->record(op, inputs, outputs, std::move(attrs));
}

}  // namespace tessera
