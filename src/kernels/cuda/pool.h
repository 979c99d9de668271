// The pooling family's CUDA kernels (pool.cu): registered by register_conv() in conv.cu, which owns
// the family's registration entry (kernels/cuda/cuda_kernels.h).
#pragma once

namespace tessera::cuda {

// Fills the max / avg / adaptive-avg pooling slots of ops/conv_kernel.h (forward and backward).
void register_pool();

}  // namespace tessera::cuda
