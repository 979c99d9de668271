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

}  // namespace tessera::autograd
