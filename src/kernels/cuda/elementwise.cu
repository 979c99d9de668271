// The elementwise family's registration and the one non-template piece of its iterator
// (elementwise.cuh): fits_in_int32, declared in cuda_common.cuh for every kernel family.
// softmax is not registered here: the reduce family owns it (register_reduce()).
#include <climits>
#include <cstdlib>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/elementwise.cuh"

namespace tessera::cuda {

bool fits_in_int32(const Tensor& t) {
  if (t.numel() > INT32_MAX) return false;
  if (t.numel() == 0) return true;
  const int64_t es = static_cast<int64_t>(t.element_size());
  int64_t reach = 1;  // elements from the first one to one past the farthest one reached
  for (int64_t d = 0; d < t.dim(); ++d) reach += (t.sizes()[d] - 1) * std::llabs(t.strides()[d]);
  return reach <= INT32_MAX / es;
}

void register_elementwise() {
  register_unary_cuda();
  register_binary_cuda();
  register_ternary_cuda();
}

}  // namespace tessera::cuda
