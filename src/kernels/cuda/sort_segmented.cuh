// The segmented stable sort of (key, value) pairs declared in sort_common.cuh: `rows` equal segments of
// `len` pairs. Many segments go to cub's segmented sort (which picks per-segment strategies by size);
// one segment, or a few long ones, to the device-wide radix sort one after the other, which is faster
// for long segments than one thread block per segment. Instantiated once per key type, in
// sort_segmented32.cu and sort_segmented64.cu (one cub instantiation set per file, for nvcc's time).
#pragma once
#include <cub/device/device_segmented_sort.cuh>

#include "kernels/cuda/index_common.cuh"
#include "kernels/cuda/sort_common.cuh"

namespace tessera::cuda::segmented {

static __global__ void segment_offsets_kernel(int64_t* off, int64_t rows, int64_t len) {
  for (int64_t r = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; r <= rows; r += int64_t(gridDim.x) * blockDim.x)
    off[r] = r * len;
}

template <class K>
void segmented_sort_pairs_impl(const K* kin, K* kout, const uint32_t* vin, uint32_t* vout, int64_t rows, int64_t len,
                               int end_bit, cudaStream_t stream) {
  if (rows == 0 || len == 0) return;
  // A few long rows: one device-wide radix sort each is faster than one block per segment.
  if (rows == 1 || (len >= (int64_t(1) << 17) && rows <= 64)) {
    for (int64_t r = 0; r < rows; ++r)
      radix_sort_pairs(kin + r * len, kout + r * len, vin + r * len, vout + r * len, len, end_bit, stream);
    return;
  }
  DataPtr off = allocate_workspace(static_cast<size_t>(rows + 1) * sizeof(int64_t));
  int64_t* o = static_cast<int64_t*>(off.get());
  segment_offsets_kernel<<<blocks_for(rows + 1), kThreads, 0, stream>>>(o, rows, len);
  check_launch("sort", "segment_offsets_kernel");
  const int64_t n = rows * len;
  size_t bytes = 0;
  TS_CUDA_CHECK(cub::DeviceSegmentedSort::StableSortPairs(nullptr, bytes, kin, kout, vin, vout, n, rows, o, o + 1, stream));
  DataPtr tmp = allocate_workspace(bytes);
  TS_CUDA_CHECK(cub::DeviceSegmentedSort::StableSortPairs(tmp.get(), bytes, kin, kout, vin, vout, n, rows, o, o + 1, stream));
}

}  // namespace tessera::cuda::segmented
