#include "autograd/derivatives/derivatives.h"

namespace tessera::autograd {

void register_derivatives() {
  register_view_derivatives();

  // family elementwise

  // family reduce

  // family linalg

  // family index

  // family shape_ops

  // family conv
  register_conv_derivatives();

}

}  // namespace tessera::autograd
