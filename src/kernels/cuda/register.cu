// Fills the op table's CUDA slots, once, at library start-up (tessera_init.cpp). Registration needs no
// GPU: a kernel that runs without one fails in the allocator, naming the missing device.
#include "kernels/cuda/cuda_kernels.h"

namespace tessera::cuda {

void register_cuda_kernels() {
  register_copy();
  register_elementwise();
  register_reduce();
  register_linalg();
  register_index();
  register_shape_ops();
  register_random();
  register_optim();
  register_conv();
  register_norm_forward();
  register_norm_backward();
  register_batch_norm();
  register_loss();
  register_attention();
  register_amp();
  register_fused();
  register_foreach();
}

}  // namespace tessera::cuda
