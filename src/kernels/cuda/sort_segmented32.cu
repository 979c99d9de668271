// segmented_sort_pairs for uint32_t keys (sort_segmented.cuh).
#include "kernels/cuda/sort_segmented.cuh"

namespace tessera::cuda {

void segmented_sort_pairs(const uint32_t* ki, uint32_t* ko, const uint32_t* vi, uint32_t* vo, int64_t rows, int64_t len,
                          int end_bit, cudaStream_t s) {
  segmented::segmented_sort_pairs_impl(ki, ko, vi, vo, rows, len, end_bit, s);
}

}  // namespace tessera::cuda
