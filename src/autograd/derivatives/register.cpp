#include "autograd/derivatives/derivatives.h"

namespace tessera::autograd {

void register_derivatives() {
  register_view_derivatives();

  // family elementwise
  register_elementwise_derivatives();

  // family reduce

  // family linalg

  // family index
  register_index_derivatives();

  // family shape_ops
  register_shape_ops_derivatives();

}

}  // namespace tessera::autograd
