// CUDA sort and topk (ops/shape_ops_kernel.h).
//
// A row is every index of the dims other than `dim` (row-major); a row holds n elements. Both ops
//  1. load each row's keys (Note [Ordered keys]; XOR the width mask for descending) into a contiguous
//     (rows, n) workspace with the position j in the row as the value;
//  2. sort every row stably: one cub radix sort for a single row (or a few long ones, one after the
//     other), cub's segmented sort for many rows;
//  3. write values[r, j] = x[r, pos] and indices[r, j] = pos for the first n (sort) or k (topk) sorted
//     positions, reading the input's own element (so -0.0 keeps its sign and NaN its payload).
// Note [Sort order] then holds by construction: NaN's key is the largest, so NaNs come last
// ascending and first descending (the XOR reverses the order but a stable sort keeps equal keys in
// input order in both directions), and topk's ties go to the lower index. topk sorts the whole row
// (O(n) radix passes per row) and keeps k; a selection would do less work for small k.
// Positions are uint32_t: a row of 2^32 elements or more raises NotImplementedError. The cub sorts are
// instantiated in sort_radix.cu and sort_segmented.cu (one file each keeps nvcc's time per file down).
#include "kernels/cuda/index_common.cuh"
#include "kernels/cuda/sort_common.cuh"
#include "ops/shape_ops_kernel.h"

namespace tessera::cuda {

// ---- sort / topk -------------------------------------------------------------------------------------

namespace {

// The dims other than `dim`, with x's strides ([0]) and the output's ([1]).
struct RowLayout {
  Strided<2, int64_t> rows;
  int64_t n = 0, nrows = 0, x_stride = 0, out_stride = 0;
};

RowLayout row_layout(const Tensor& x, const Tensor& out, int64_t dim, const char* op) {
  RowLayout l;
  Shape sizes, xs, os;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (d == dim) continue;
    sizes.push_back(x.size(d));
    xs.push_back(x.stride(d));
    os.push_back(out.stride(d));
  }
  l.rows = make_strided<2, int64_t>(sizes, {&xs, &os}, op);
  l.n = x.size(dim);
  l.nrows = numel_of(sizes);
  l.x_stride = x.stride(dim);
  l.out_stride = out.stride(dim);
  TS_CHECK(l.n <= int64_t(std::numeric_limits<uint32_t>::max()), NotImplementedError, op,
           ": rows of 2^32 elements or more are not supported on cuda, got ", l.n);
  return l;
}

template <class T>
static __global__ void sort_load_kernel(const T* x, RowLayout l, sort_key_t<T> flip, sort_key_t<T>* keys, uint32_t* pos) {
  const int64_t total = l.nrows * l.n;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t j = i % l.n, r = i / l.n;
    int64_t off[2];
    l.rows.offsets(r, off);
    keys[i] = ordered_key(x[off[0] + j * l.x_stride]) ^ flip;
    pos[i] = static_cast<uint32_t>(j);
  }
}

// values[r, j] = x[r, pos[r, j]], indices[r, j] = pos[r, j] for j < k (U: the element's width).
template <class U>
static __global__ void sort_write_kernel(const U* x, RowLayout l, const uint32_t* pos, int64_t k, U* values,
                                         int64_t* indices) {
  const int64_t total = l.nrows * k;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t j = i % k, r = i / k;
    int64_t off[2];
    l.rows.offsets(r, off);
    const int64_t p = pos[r * l.n + j];
    const int64_t o = off[1] + j * l.out_stride;
    values[o] = x[off[0] + p * l.x_stride];
    indices[o] = p;
  }
}

// Sorts every row of x along dim and writes the first k sorted positions of each.
void sort_and_write(const char* op, const Tensor& values, const Tensor& indices, const Tensor& x, int64_t dim,
                    bool descending, int64_t k) {
  CurrentDevice g(x.device().index());
  cudaStream_t stream = stream_of(x);
  TS_CHECK(values.strides() == indices.strides(), ValueError, op, ": values and indices must share strides");
  const RowLayout l = row_layout(x, values, dim, op);
  const int64_t total = l.nrows * l.n;
  DataPtr pos_in = allocate_workspace(total * sizeof(uint32_t)), pos_out;
  dispatch_device_dtype(x.dtype(), op, [&]<class T>(TypeTag<T>) {
    using K = sort_key_t<T>;
    DataPtr keys_in = allocate_workspace(total * sizeof(K));
    sort_load_kernel<T><<<blocks_for(total), kThreads, 0, stream>>>(
        static_cast<const T*>(x.data_ptr()), l, descending ? key_mask<T>() : K(0), static_cast<K*>(keys_in.get()),
        static_cast<uint32_t*>(pos_in.get()));
    check_launch(op, "sort_load_kernel");
    if (l.n == 1) return;  // nothing to sort: the positions are all 0
    DataPtr keys_out = allocate_workspace(total * sizeof(K));
    pos_out = allocate_workspace(total * sizeof(uint32_t));
    segmented_sort_pairs(static_cast<const K*>(keys_in.get()), static_cast<K*>(keys_out.get()),
                         static_cast<const uint32_t*>(pos_in.get()), static_cast<uint32_t*>(pos_out.get()), l.nrows, l.n,
                         key_bits_v<T>, stream);
  });
  const uint32_t* pos = static_cast<const uint32_t*>(pos_out.get() ? pos_out.get() : pos_in.get());
  const int64_t out_total = l.nrows * k;
  if (out_total == 0) return;
  dispatch_width(x.dtype(), op, [&]<class U>(TypeTag<U>) {
    sort_write_kernel<U><<<blocks_for(out_total), kThreads, 0, stream>>>(
        static_cast<const U*>(x.data_ptr()), l, pos, k, static_cast<U*>(values.data_ptr()),
        static_cast<int64_t*>(indices.data_ptr()));
    check_launch(op, "sort_write_kernel");
  });
}

void sort_cuda(const Tensor& values, const Tensor& indices, const Tensor& x, int64_t dim, bool descending) {
  if (x.numel() == 0) return;
  sort_and_write("sort", values, indices, x, dim, descending, x.size(dim));
}

void topk_cuda(const Tensor& values, const Tensor& indices, const Tensor& x, int64_t k, int64_t dim, bool largest) {
  if (x.numel() == 0 || k == 0) return;
  sort_and_write("topk", values, indices, x, dim, /*descending=*/largest, k);
}

}  // namespace

void register_sort() {
  sort_kernel.set(DeviceType::CUDA, &sort_cuda);
  topk_kernel.set(DeviceType::CUDA, &topk_cuda);
}

}  // namespace tessera::cuda
