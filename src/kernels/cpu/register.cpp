// Fills the op table's CPU slots, once, at library start-up (tessera_init.cpp).
#include "kernels/cpu/cpu_kernels.h"

namespace tessera::cpu {

void register_cpu_kernels() {
  register_copy();
  register_threads();

  // family elementwise: call register_elementwise() on the next line
  register_elementwise();
  // family reduce: call register_reduce() on the next line
  register_reduce();
  // family linalg: call register_linalg() on the next line
  register_linalg();
  // family index: call register_index() on the next line
  register_index();
  // family shape_ops: call register_shape_ops() on the next line
  register_shape_ops();
  register_range();
  // family random: call register_random() on the next line
  register_random();
  // family optim: call register_optim() on the next line
  register_optim();

  // family conv: call register_conv() (and register_pool()) on the next line
  register_conv();
  register_pool();
  register_norm();  // family norm
  register_batch_norm();
  register_loss();
  register_attention();
  register_amp();
  register_foreach();
}

}  // namespace tessera::cpu
