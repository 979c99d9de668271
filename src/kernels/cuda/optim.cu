// SKELETON: the optim family's CUDA kernels are being written; nothing is registered yet, so its ops
// raise NotImplementedError on cuda tensors.
#include "kernels/cuda/cuda_kernels.h"

namespace tessera::cuda {
void register_optim() {}
}  // namespace tessera::cuda
