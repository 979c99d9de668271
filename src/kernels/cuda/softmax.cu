// softmax and log_softmax on the GPU: softmax_kernel (ops/elementwise_kernel.h). x and out are
// contiguous, of one floating dtype, viewed as (outer, dim, inner); the softmax runs over `dim`.
//
// Math as the CPU kernel (kernels/cpu/softmax.cpp): in float (double for float64), the row maximum
// subtracted first, softmax = exp(x - max) * (1 / sum), log_softmax = (x - max) - log(sum), with the
// precise expf/logf. A NaN in a row makes the whole row NaN; a row of -inf gives NaN; as PyTorch.
//
// inner == 1 (rows, contiguous):
//  * dim <= 1024: one warp per row (softmax_warp_kernel), the row in registers: lane l holds the
//    16-byte slots l, l + 32, ... (kSlots of them); one read and one write of each element.
//  * dim <= 1024 * kVec * kMaxSlotsBlock: one block per row (softmax_block_kernel), the row in
//    registers the same way with the block's threads; two block reductions (max, sum).
//  * longer rows: the column kernel below with one column per block (three passes over the row).
// inner > 1 (softmax_cols_kernel): a block takes up to 32 neighbouring columns (x) and splits dim over
// its threads (y); max and sum combine over y in shared memory; three passes over global memory.
// Rows whose size is not a multiple of the vector width, or unaligned pointers, load element by
// element with the same slot layout.
#include "kernels/cuda/reduce_rows.cuh"

namespace tessera::cuda::red {
namespace {

struct SoftmaxParams {
  const void* in = nullptr;
  void* out = nullptr;
  int64_t outer = 0, dim = 0, inner = 1;
  bool vec = false;  // dim % kVec == 0 and both pointers 16-byte aligned
  bool log = false;
};

template <class A>
__device__ __forceinline__ A dev_max(A a, A b) {
  return fmax(a, b);
}
__device__ __forceinline__ float dev_max(float a, float b) { return fmaxf(a, b); }

// Loads the slots of one row that this thread owns: slot s = first + k * step covers the elements
// [s * V, s * V + V); elements past the row read as -inf (and are never stored).
template <class T, int K>
__device__ __forceinline__ void load_slots(const T* __restrict__ row, int64_t dim, int first, int step, bool vec,
                                           dacc_t<T> (&v)[K][kVec<T>]) {
  using A = dacc_t<T>;
  constexpr int V = kVec<T>;
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int64_t e0 = static_cast<int64_t>(first + k * step) * V;
    if (vec) {
      if (e0 < dim) {
        const Vec<T, V> x = *reinterpret_cast<const Vec<T, V>*>(row + e0);
#pragma unroll
        for (int j = 0; j < V; ++j) v[k][j] = load_acc(x.v[j]);
      } else {
#pragma unroll
        for (int j = 0; j < V; ++j) v[k][j] = -CUDART_INF_F;
      }
    } else {
#pragma unroll
      for (int j = 0; j < V; ++j) v[k][j] = e0 + j < dim ? static_cast<A>(load_acc(row[e0 + j])) : A(-CUDART_INF_F);
    }
  }
}

template <class T, int K>
__device__ __forceinline__ void store_slots(T* __restrict__ row, int64_t dim, int first, int step, bool vec,
                                            const dacc_t<T> (&v)[K][kVec<T>]) {
  constexpr int V = kVec<T>;
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int64_t e0 = static_cast<int64_t>(first + k * step) * V;
    if (vec) {
      if (e0 < dim) {
        Vec<T, V> y;
#pragma unroll
        for (int j = 0; j < V; ++j) y.v[j] = convert<T>(v[k][j]);
        *reinterpret_cast<Vec<T, V>*>(row + e0) = y;
      }
    } else {
#pragma unroll
      for (int j = 0; j < V; ++j)
        if (e0 + j < dim) row[e0 + j] = convert<T>(v[k][j]);
    }
  }
}

// The thread's share of the row: its maximum.
template <class A, int K, int V>
__device__ __forceinline__ A local_max(const A (&v)[K][V]) {
  A m = -CUDART_INF_F;
#pragma unroll
  for (int k = 0; k < K; ++k)
#pragma unroll
    for (int j = 0; j < V; ++j) m = dev_max(m, v[k][j]);
  return m;
}

// sum of exp(v - m) over the valid elements; for softmax (not log) v becomes exp(v - m).
template <class A, int K, int V>
__device__ __forceinline__ A local_exp_sum(A (&v)[K][V], A m, int64_t dim, int first, int step, bool log) {
  A s = 0;
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int64_t e0 = static_cast<int64_t>(first + k * step) * V;
#pragma unroll
    for (int j = 0; j < V; ++j) {
      if (e0 + j < dim) {
        const A e = dev_exp(v[k][j] - m);
        s += e;
        if (!log) v[k][j] = e;
      }
    }
  }
  return s;
}

template <class A, int K, int V>
__device__ __forceinline__ void normalize(A (&v)[K][V], A m, A s, bool log) {
  if (log) {
    const A ls = dev_log(s);
#pragma unroll
    for (int k = 0; k < K; ++k)
#pragma unroll
      for (int j = 0; j < V; ++j) v[k][j] = (v[k][j] - m) - ls;
  } else {
    const A inv = A(1) / s;
#pragma unroll
    for (int k = 0; k < K; ++k)
#pragma unroll
      for (int j = 0; j < V; ++j) v[k][j] = v[k][j] * inv;
  }
}

constexpr int kWarpRowsPerBlock = 4;

// One warp per row, dim <= 32 * K * kVec<T>.
template <class T, int K>
static __global__ __launch_bounds__(32 * kWarpRowsPerBlock) void softmax_warp_kernel(SoftmaxParams p) {
  using A = dacc_t<T>;
  constexpr int V = kVec<T>;
  const int lane = threadIdx.x & 31;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * kWarpRowsPerBlock;
  for (int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpRowsPerBlock + (threadIdx.x >> 5); row < p.outer;
       row += warps) {  // uniform over the warp
    A v[K][V];
    load_slots<T, K>(static_cast<const T*>(p.in) + row * p.dim, p.dim, lane, 32, p.vec, v);
    const A m = butterfly(local_max(v), 32, [](A a, A b) { return dev_max(a, b); });
    const A s = butterfly(local_exp_sum(v, m, p.dim, lane, 32, p.log), 32, [](A a, A b) { return a + b; });
    normalize(v, m, s, p.log);
    store_slots<T, K>(static_cast<T*>(p.out) + row * p.dim, p.dim, lane, 32, p.vec, v);
  }
}

// v over the block (blockDim.x a multiple of 32); every thread gets the same result.
template <class A, class F>
__device__ __forceinline__ A block_allreduce(A v, F f, A* smem) {
  v = butterfly(v, 32, f);
  const int nw = blockDim.x >> 5;
  __syncthreads();  // smem may still be read by a previous call
  if ((threadIdx.x & 31) == 0) smem[threadIdx.x >> 5] = v;
  __syncthreads();
  A r = smem[0];
  for (int w = 1; w < nw; ++w) r = f(r, smem[w]);
  return r;
}

// One block per row, dim <= blockDim.x * K * kVec<T>. 1024 threads at most: 64 registers each.
template <class T, int K>
static __global__ __launch_bounds__(1024) void softmax_block_kernel(SoftmaxParams p) {
  using A = dacc_t<T>;
  constexpr int V = kVec<T>;
  __shared__ A smem[32];
  for (int64_t row = blockIdx.x; row < p.outer; row += gridDim.x) {  // uniform over the block
    A v[K][V];
    load_slots<T, K>(static_cast<const T*>(p.in) + row * p.dim, p.dim, threadIdx.x, blockDim.x, p.vec, v);
    const A m = block_allreduce(local_max(v), [](A a, A b) { return dev_max(a, b); }, smem);
    const A s = block_allreduce(local_exp_sum(v, m, p.dim, threadIdx.x, blockDim.x, p.log),
                                [](A a, A b) { return a + b; }, smem);
    normalize(v, m, s, p.log);
    store_slots<T, K>(static_cast<T*>(p.out) + row * p.dim, p.dim, threadIdx.x, blockDim.x, p.vec, v);
  }
}

// Block (BX, BY) with BX * BY <= 1024: BX neighbouring columns of one `outer` slice, dim split over y.
template <class T>
static __global__ __launch_bounds__(1024) void softmax_cols_kernel(SoftmaxParams p) {
  using A = dacc_t<T>;
  __shared__ ColumnScratch<A, 1024> scratch;
  A* smem = scratch.slots();
  const T* __restrict__ in = static_cast<const T*>(p.in);
  T* __restrict__ out = static_cast<T*>(p.out);
  const int BX = blockDim.x, BY = blockDim.y;
  const int64_t tiles = (p.inner + BX - 1) / BX, ntiles = p.outer * tiles;
  for (int64_t t = blockIdx.x; t < ntiles; t += gridDim.x) {  // uniform over the block
    const int64_t o = t / tiles, i = (t - o * tiles) * BX + threadIdx.x;
    const bool valid = i < p.inner;
    const int64_t base = o * p.dim * p.inner + i;
    A m = -CUDART_INF_F;
    if (valid)
      for (int64_t k = threadIdx.y; k < p.dim; k += BY) m = dev_max(m, static_cast<A>(load_acc(in[base + k * p.inner])));
    m = column_allreduce(m, [](A a, A b) { return dev_max(a, b); }, smem);
    A s = 0;
    if (valid)
      for (int64_t k = threadIdx.y; k < p.dim; k += BY) s += dev_exp(static_cast<A>(load_acc(in[base + k * p.inner])) - m);
    s = column_allreduce(s, [](A a, A b) { return a + b; }, smem);
    if (valid) {
      const A ls = dev_log(s), inv = A(1) / s;
      for (int64_t k = threadIdx.y; k < p.dim; k += BY) {
        const A x = static_cast<A>(load_acc(in[base + k * p.inner])) - m;
        out[base + k * p.inner] = convert<T>(p.log ? x - ls : dev_exp(x) * inv);
      }
    }
  }
}

// Slots per lane of the warp kernel, and per thread of the block kernel, that keep the row at 32
// values (16 for double) per thread: 64 registers at most with 1024 threads.
template <class T>
constexpr int max_slots() {
  return std::is_same_v<T, double> ? 8 : 32 / kVec<T>;
}

template <class T, int K>
void launch_warp(const SoftmaxParams& p, cudaStream_t stream) {
  if constexpr (K * 32 * kVec<T> < 1024 && K < 16) {
    if (static_cast<int64_t>(K) * 32 * kVec<T> < p.dim) return launch_warp<T, K * 2>(p, stream);
  }
  const int64_t blocks = ceil_div(p.outer, kWarpRowsPerBlock);
  softmax_warp_kernel<T, K><<<grid_x(blocks), 32 * kWarpRowsPerBlock, 0, stream>>>(p);
  check_launch(p.log ? "log_softmax" : "softmax", "softmax_warp_kernel");
}

template <class T, int K>
void launch_block(const SoftmaxParams& p, int threads, cudaStream_t stream) {
  if constexpr (K < max_slots<T>()) {
    if (static_cast<int64_t>(K) * threads * kVec<T> < p.dim) return launch_block<T, K * 2>(p, threads, stream);
  }
  softmax_block_kernel<T, K><<<grid_x(p.outer), threads, 0, stream>>>(p);
  check_launch(p.log ? "log_softmax" : "softmax", "softmax_block_kernel");
}

template <class T>
void softmax_typed(const Tensor& out, const Tensor& x, int64_t outer, int64_t dim, int64_t inner, bool log) {
  constexpr int V = kVec<T>;
  const cudaStream_t stream = stream_of(x);
  SoftmaxParams p;
  p.in = x.data_ptr();
  p.out = out.data_ptr();
  p.outer = outer;
  p.dim = dim;
  p.inner = inner;
  p.log = log;
  p.vec = dim % V == 0 && aligned16<T>(p.in) && aligned16<T>(p.out);
  if (inner == 1 && dim <= 1024) {
    launch_warp<T, 1>(p, stream);
    return;
  }
  if (inner == 1 && dim <= int64_t{1024} * V * max_slots<T>()) {
    // About 16 values per thread, 128..1024 threads; then the fewest slots that hold the row.
    int threads = static_cast<int>(std::min<int64_t>(1024, std::max<int64_t>(128, pow2_ceil(ceil_div(dim, 16)))));
    while (static_cast<int64_t>(threads) * V * max_slots<T>() < dim) threads *= 2;
    launch_block<T, 1>(p, threads, stream);
    return;
  }
  // Columns, or rows too long for registers (a block per row, three passes).
  const int BX = static_cast<int>(std::min<int64_t>(32, pow2_ceil(inner)));
  const int BY = static_cast<int>(std::min<int64_t>((inner == 1 ? 1024 : 256) / BX, pow2_ceil(dim)));
  softmax_cols_kernel<T><<<grid_x(outer * ceil_div(inner, BX)), dim3(BX, BY), 0, stream>>>(p);
  check_launch(log ? "log_softmax" : "softmax", "softmax_cols_kernel");
}

}  // namespace

void softmax_cuda(const Tensor& out, const Tensor& x, int64_t outer, int64_t dim, int64_t inner, bool log) {
  if (out.numel() == 0) return;
  CurrentDevice guard(x.device().index());
  dispatch_device_dtype<DTypeSet::Floating>(x.dtype(), log ? "log_softmax" : "softmax", [&]<class T>(TypeTag<T>) {
    softmax_typed<T>(out, x, outer, dim, inner, log);
  });
}

}  // namespace tessera::cuda::red
