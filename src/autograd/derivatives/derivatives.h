// Derivatives of the ops, one file per op family, each written with tessera ops so that it runs on
// any device and is itself differentiable (Note [Autograd stage]). register_derivatives() fills the
// table at start-up.
#pragma once
#include "autograd/graph.h"
#include "autograd/op_node.h"
#include "tessera/functions.h"

namespace tessera::autograd {

void register_derivatives();

// family registration functions: declare yours after its comment line
void register_view_derivatives();

// family elementwise
void register_elementwise_derivatives();

// family reduce
void register_reduce_derivatives();

// family linalg
void register_linalg_derivatives();

// family index
void register_index_derivatives();

// family shape_ops
void register_shape_ops_derivatives();

// family conv
void register_conv_derivatives();
void register_loss_derivatives();  // loss.cpp: fused cross-entropy

// family norm
void register_norm_derivatives();
// family batch_norm
void register_batch_norm_derivatives();
// family attention
void register_attention_derivatives();
// fused linear-layer ops (fused.cpp): linear_gelu, linear_cross_entropy
void register_fused_derivatives();

// Shorthands for derivative files.
inline bool needs(const BackwardContext& c, size_t i) { return i < c.needs_grad.size() && c.needs_grad[i]; }

// Note [Batched gradients] (graph.h): a derivative registered batched sees gradients with a leading
// dim of c.batch samples when c.batch >= 0. `batched(c, s)` is shape s with that dim in front, and
// `batched_dim(c, d, n)` is dim d of an n-dim operand counted in the batched gradient.
inline Shape batched(const BackwardContext& c, const Shape& s) {
  if (c.batch < 0) return s;
  Shape r = {c.batch};
  r.insert(r.end(), s.begin(), s.end());
  return r;
}
inline int64_t batched_dim(const BackwardContext& c, int64_t d, int64_t n) {
  return wrap_dim(d, n, "backward") + (c.batch >= 0 ? 1 : 0);
}
// Registers a derivative whose formula takes batched gradients (pointwise formulas: the saved
// operands broadcast against the batch dim; others read c.batch).
inline void register_batched_derivative(OpId op, Derivative d) {
  d.batched = true;
  register_derivative(op, d);
}

}  // namespace tessera::autograd
