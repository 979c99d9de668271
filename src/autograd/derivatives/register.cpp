#include "autograd/derivatives/derivatives.h"

namespace tessera::autograd {

void register_derivatives() {
  register_view_derivatives();

  // family elementwise
  register_elementwise_derivatives();

  // family reduce
  register_reduce_derivatives();

  // family linalg
  register_linalg_derivatives();

  // family index
  register_index_derivatives();

  // family shape_ops
  register_shape_ops_derivatives();

  // family conv
  register_conv_derivatives();
  register_loss_derivatives();

  // family norm
  register_norm_derivatives();
  // family batch_norm
  register_batch_norm_derivatives();
  // family attention
  register_attention_derivatives();
  register_fused_derivatives();

}

}  // namespace tessera::autograd
