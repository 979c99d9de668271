#include "autograd/derivatives/derivatives.h"

namespace tessera::autograd {

void register_derivatives() {
  register_view_derivatives();

  // family elementwise

  // family reduce
  register_reduce_derivatives();

  // family linalg
  register_linalg_derivatives();

  // family index

  // family shape_ops

}

}  // namespace tessera::autograd
