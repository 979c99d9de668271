// The device-wide stable radix sort of (key, value) pairs declared in sort_common.cuh, instantiated for
// uint32_t and uint64_t keys with uint32_t values: one cub instantiation set per file, for nvcc's time.
#include <cub/device/device_radix_sort.cuh>

#include "kernels/cuda/index_common.cuh"
#include "kernels/cuda/sort_common.cuh"

namespace tessera::cuda {
namespace {

template <class K>
void radix_sort_pairs_impl(const K* kin, K* kout, const uint32_t* vin, uint32_t* vout, int64_t n, int end_bit,
                           cudaStream_t stream) {
  if (n == 0) return;
  size_t bytes = 0;
  TS_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, bytes, kin, kout, vin, vout, n, 0, end_bit, stream));
  DataPtr tmp = allocate_workspace(bytes);
  TS_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(tmp.get(), bytes, kin, kout, vin, vout, n, 0, end_bit, stream));
}

}  // namespace

void radix_sort_pairs(const uint32_t* ki, uint32_t* ko, const uint32_t* vi, uint32_t* vo, int64_t n, int end_bit,
                      cudaStream_t s) {
  radix_sort_pairs_impl(ki, ko, vi, vo, n, end_bit, s);
}
void radix_sort_pairs(const uint64_t* ki, uint64_t* ko, const uint32_t* vi, uint32_t* vo, int64_t n, int end_bit,
                      cudaStream_t s) {
  radix_sort_pairs_impl(ki, ko, vi, vo, n, end_bit, s);
}

}  // namespace tessera::cuda
