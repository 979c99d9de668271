// CUDA unique over the rows of a contiguous (n, m) tensor (ops/shape_ops_kernel.h).
//
//  1. order: the permutation that sorts the rows ascending, stably, by Note [Ordered keys]. One
//     column (a flattened unique, the common case) is a cub radix sort of the keys; wider rows are
//     sorted with cub's merge sort and a lexicographic comparator over a (n, m) matrix of 64-bit keys.
//  2. groups: sorted position j opens a group unless row order[j] equals row order[j-1]; a NaN is never
//     equal to anything, so every row holding one is its own group (PyTorch's CPU kernel). The group
//     of every position is its rank among the openers (Note [Ordered compaction]); the number of
//     groups u comes back to the host (one synchronization: the outputs' sizes depend on it).
//  3. values[g] = the first row of group g in sorted order (the CPU's choice: for equal rows, the one
//     earliest in the input, e.g. -0.0 or 0.0, whichever came first), inverse[order[j]] = group of j,
//     counts[g] = size of group g.
// Rows are counted with uint32_t: 2^32 rows or more raise NotImplementedError.
#include <cub/device/device_merge_sort.cuh>

#include "kernels/cuda/index_common.cuh"
#include "kernels/cuda/sort_common.cuh"
#include "ops/shape_ops_kernel.h"

namespace tessera::cuda {
namespace {

// keys[i] = ordered_key(rows[i]) as K, pos[i] = i (pos may be null).
template <class T, class K>
static __global__ void unique_load_kernel(const T* rows, int64_t n, K* keys, uint32_t* pos) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    keys[i] = static_cast<K>(ordered_key(rows[i]));
    if (pos != nullptr) pos[i] = static_cast<uint32_t>(i);
  }
}

static __global__ void unique_iota_kernel(uint32_t* out, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = static_cast<uint32_t>(i);
}

// Lexicographic order of rows a and b of the (n, m) key matrix.
struct RowLess {
  const uint64_t* keys;
  int64_t m;
  __device__ bool operator()(uint32_t a, uint32_t b) const {
    const uint64_t* ra = keys + a * m;
    const uint64_t* rb = keys + b * m;
    for (int64_t t = 0; t < m; ++t)
      if (ra[t] != rb[t]) return ra[t] < rb[t];
    return false;
  }
};

// Sorted position j (> 0) holds the same value as j - 1: one column, sorted keys.
template <class K>
struct SameScalar {
  const K* sorted;
  K nan;
  bool floating;
  __device__ bool operator()(int64_t j) const {
    return sorted[j] == sorted[j - 1] && !(floating && sorted[j] == nan);
  }
};

// The same for rows of the key matrix.
struct SameRow {
  const uint64_t* keys;
  const uint32_t* order;
  int64_t m;
  uint64_t nan;
  bool floating;
  __device__ bool operator()(int64_t j) const {
    const uint64_t* ra = keys + int64_t(order[j]) * m;
    const uint64_t* rb = keys + int64_t(order[j - 1]) * m;
    for (int64_t t = 0; t < m; ++t)
      if (ra[t] != rb[t] || (floating && ra[t] == nan)) return false;
    return true;
  }
};

// Note [Ordered compaction] op: openers are flagged; emit records group starts and the inverse.
template <class Same>
struct GroupOp {
  Same same;
  const uint32_t* order;
  int64_t* group_start;
  int64_t* inverse;  // may be null
  __device__ bool flag(int64_t j) const { return j == 0 || !same(j); }
  __device__ void emit(int64_t j, int64_t rank, bool opener) const {
    const int64_t g = rank + (opener ? 1 : 0) - 1;
    if (opener) group_start[g] = j;
    if (inverse != nullptr) inverse[order[j]] = g;
  }
};

// values[g, t] = rows[order[group_start[g]], t]; counts[g] = the size of group g (counts may be null).
template <class U>
static __global__ void unique_write_kernel(const U* rows, const uint32_t* order, const int64_t* group_start, int64_t u,
                                           int64_t m, int64_t n, U* values, int64_t* counts) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < u * m; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t g = i / m, t = i % m;
    values[i] = rows[int64_t(order[group_start[g]]) * m + t];
    if (t == 0 && counts != nullptr) counts[g] = (g + 1 < u ? group_start[g + 1] : n) - group_start[g];
  }
}

// Steps 2 and 3 for a GroupOp whose `same` is set.
template <class Same>
void finish_groups(GroupOp<Same> op, const Tensor& rows, int64_t n, int64_t m, bool return_inverse, bool return_counts,
                   Tensor& values, Tensor& inverse, Tensor& counts, cudaStream_t stream) {
  const int64_t chunks = compaction_chunks(n);
  DataPtr starts = compact_starts(op, n, chunks, "unique", stream);
  const int64_t u = read_total(starts, chunks, stream);  // synchronizes: the outputs' sizes
  values = make_empty({u, m}, rows.dtype(), rows.device());
  if (return_inverse) inverse = make_empty({n}, kInt64, rows.device());
  if (return_counts) counts = make_empty({u}, kInt64, rows.device());
  DataPtr group_start = allocate_workspace(u * sizeof(int64_t));
  op.group_start = static_cast<int64_t*>(group_start.get());
  op.inverse = return_inverse ? static_cast<int64_t*>(inverse.data_ptr()) : nullptr;
  compact_emit(op, n, chunks, starts, "unique", stream);
  dispatch_width(rows.dtype(), "unique", [&]<class U>(TypeTag<U>) {
    unique_write_kernel<U><<<blocks_for(u * m), kThreads, 0, stream>>>(
        static_cast<const U*>(rows.data_ptr()), op.order, op.group_start, u, m, n, static_cast<U*>(values.data_ptr()),
        return_counts ? static_cast<int64_t*>(counts.data_ptr()) : nullptr);
    check_launch("unique", "unique_write_kernel");
  });
}

void unique_cuda(const Tensor& rows, bool return_inverse, bool return_counts, Tensor& values, Tensor& inverse,
                 Tensor& counts) {
  const int64_t n = rows.size(0), m = rows.size(1);
  CurrentDevice g(rows.device().index());
  cudaStream_t stream = stream_of(rows);
  if (n == 0) {
    values = make_empty({0, m}, rows.dtype(), rows.device());
    if (return_inverse) inverse = make_empty({0}, kInt64, rows.device());
    if (return_counts) counts = make_empty({0}, kInt64, rows.device());
    return;
  }
  TS_CHECK(n <= int64_t(std::numeric_limits<uint32_t>::max()), NotImplementedError,
           "unique: 2^32 rows or more are not supported on cuda, got ", n);
  DataPtr order = allocate_workspace(n * sizeof(uint32_t));
  uint32_t* ord = static_cast<uint32_t*>(order.get());
  dispatch_device_dtype(rows.dtype(), "unique", [&]<class T>(TypeTag<T>) {
    const T* data = static_cast<const T*>(rows.data_ptr());
    if (m == 1) {
      using K = sort_key_t<T>;
      DataPtr keys_in = allocate_workspace(n * sizeof(K)), keys_out = allocate_workspace(n * sizeof(K));
      DataPtr pos = allocate_workspace(n * sizeof(uint32_t));
      unique_load_kernel<T, K><<<blocks_for(n), kThreads, 0, stream>>>(data, n, static_cast<K*>(keys_in.get()),
                                                                        static_cast<uint32_t*>(pos.get()));
      check_launch("unique", "unique_load_kernel");
      radix_sort_pairs(static_cast<const K*>(keys_in.get()), static_cast<K*>(keys_out.get()),
                       static_cast<const uint32_t*>(pos.get()), ord, n, key_bits_v<T>, stream);
      GroupOp<SameScalar<K>> op{{static_cast<const K*>(keys_out.get()), key_mask<T>(), is_floating_v<T>}, ord, nullptr,
                                nullptr};
      finish_groups(op, rows, n, m, return_inverse, return_counts, values, inverse, counts, stream);
      return;
    }
    DataPtr keys = allocate_workspace(n * m * sizeof(uint64_t));
    const uint64_t* k = static_cast<const uint64_t*>(keys.get());
    unique_load_kernel<T, uint64_t><<<blocks_for(n * m), kThreads, 0, stream>>>(data, n * m, static_cast<uint64_t*>(keys.get()),
                                                                                 nullptr);
    check_launch("unique", "unique_load_kernel");
    unique_iota_kernel<<<blocks_for(n), kThreads, 0, stream>>>(ord, n);
    check_launch("unique", "unique_iota_kernel");
    size_t bytes = 0;
    const RowLess less{k, m};
    TS_CUDA_CHECK(cub::DeviceMergeSort::StableSortKeys(nullptr, bytes, ord, n, less, stream));
    DataPtr tmp = allocate_workspace(bytes);
    TS_CUDA_CHECK(cub::DeviceMergeSort::StableSortKeys(tmp.get(), bytes, ord, n, less, stream));
    GroupOp<SameRow> op{{k, ord, m, static_cast<uint64_t>(key_mask<T>()), is_floating_v<T>}, ord, nullptr, nullptr};
    finish_groups(op, rows, n, m, return_inverse, return_counts, values, inverse, counts, stream);
  });
}

}  // namespace

void register_unique() { unique_kernel.set(DeviceType::CUDA, &unique_cuda); }

}  // namespace tessera::cuda
