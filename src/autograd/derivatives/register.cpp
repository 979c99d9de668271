#include "autograd/derivatives/derivatives.h"

namespace tessera::autograd {

void register_derivatives() {
  register_view_derivatives();

  // family elementwise
  register_elementwise_derivatives();

  // family reduce

  // family linalg

  // family index

  // family shape_ops

}

}  // namespace tessera::autograd
