// Building blocks shared by the CUDA reduction family (reduce_*.cu, arg_reduce.cu, var.cu, scan.cu,
// softmax.cu): coalesced dim groups and their device offset calculators, the 32-bit index check,
// aligned vectors, shuffles of any trivially copyable value, sub-warp and block group reductions, and
// the launch sizing that every reduction uses.
//
// Note [Reduction groups]: a reduction kernel sees `in` as (kept..., reduced...) (Note [Reduction
// layout] in ops/reduce_kernel.h). Each side is coalesced on the host into a DimGroup (size-1 dims
// dropped, neighbours merged where memory allows); the device maps a linear index of the side to an
// element offset with an OffsetCalc. Threads that cooperate on one output form a "group" of G
// threads (a power of two): threadIdx.x within the group, threadIdx.y the output within the block,
// so a block holds blockDim.y outputs. G <= 32 reduces with shuffles inside a warp; G > 32 adds one
// round through shared memory. Every thread of a block must reach a group reduction (it may hold
// __syncthreads), so kernels keep out-of-range threads alive with an identity value.
//
// Note [Deterministic splits]: when there are too few outputs to fill the GPU, the reduced range of
// each output is cut into `splits` chunks (grid.y). Each chunk writes its partial accumulator to a
// workspace laid out [split][output], and a second kernel folds the partials of each output in a
// fixed order. The tree depends only on the shapes and the device's SM count, never on timing, so a
// result is the same from run to run (no atomics).
#pragma once
#include <cstdint>
#include <algorithm>
#include <cstring>
#include <limits>
#include <type_traits>

#include <math_constants.h>

#include "kernels/cuda/cuda_common.cuh"

namespace tessera::cuda::red {

inline constexpr int kMaxGroupDims = 25;  // as many dims as a tensor may have
inline constexpr int kMaxCalcDims = 10;   // dims an OffsetCalc holds; more fall back to a contiguous copy
inline constexpr unsigned kFullMask = 0xffffffffu;

// ---- host: dim groups ----------------------------------------------------------------------------
// Dims (outermost first) with size-1 dims dropped and neighbours merged where memory allows.
struct DimGroup {
  int n = 0;
  int64_t size[kMaxGroupDims] = {};
  int64_t stride[kMaxGroupDims] = {};  // in elements
  int64_t numel = 1;

  int64_t inner_size() const { return n ? size[n - 1] : 1; }
  int64_t inner_stride() const { return n ? stride[n - 1] : 1; }
  // The group without its innermost dim.
  DimGroup outer() const {
    DimGroup g = *this;
    if (g.n) {
      g.numel = numel / size[n - 1];
      --g.n;
    }
    return g;
  }
};

inline DimGroup make_group(const int64_t* sizes, const int64_t* strides, int n) {
  DimGroup g;
  for (int i = 0; i < n; ++i) {
    g.numel *= sizes[i];
    if (sizes[i] == 1) continue;
    if (g.n > 0 && g.stride[g.n - 1] == strides[i] * sizes[i]) {
      g.size[g.n - 1] *= sizes[i];
      g.stride[g.n - 1] = strides[i];
    } else {
      g.size[g.n] = sizes[i];
      g.stride[g.n] = strides[i];
      ++g.n;
    }
  }
  return g;
}

// True when every element offset of `t` and its element count stay below 2^31 - 2^16, so that 32-bit
// index math is exact (DESIGN.md "Conventions": 64-bit indexing only where the tensor does not fit).
// The margin lets loops test `i + 3 * stride < n` with up to 1024-thread strides without overflow.
inline bool index_fits_int32(const Tensor& t) {
  constexpr int64_t kLimit = std::numeric_limits<int32_t>::max() - (int64_t{1} << 16);
  if (t.numel() > kLimit) return false;
  int64_t max_off = 0;
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (t.size(d) == 0) return true;
    const int64_t st = t.stride(d) < 0 ? -t.stride(d) : t.stride(d);
    max_off += (t.size(d) - 1) * st;
    if (max_off > kLimit) return false;
  }
  return true;
}

// ---- device: offsets -----------------------------------------------------------------------------
// Linear index of a DimGroup -> element offset. Dims are stored innermost first; the outermost needs no
// modulo. I is int32_t where the tensor fits (index_fits_int32), int64_t otherwise.
template <class I>
struct OffsetCalc {
  int n = 0;
  I size[kMaxCalcDims] = {};
  I stride[kMaxCalcDims] = {};

  __device__ __forceinline__ I get(I i) const {
    I off = 0;
#pragma unroll
    for (int d = 0; d < kMaxCalcDims; ++d) {
      if (d >= n) break;
      if (d == n - 1) return off + i * stride[d];
      off += (i % size[d]) * stride[d];
      i /= size[d];
    }
    return off;
  }
};

template <class I>
inline OffsetCalc<I> make_calc(const DimGroup& g) {
  OffsetCalc<I> c;
  c.n = g.n;
  for (int d = 0; d < g.n && d < kMaxCalcDims; ++d) {
    c.size[d] = static_cast<I>(g.size[g.n - 1 - d]);
    c.stride[d] = static_cast<I>(g.stride[g.n - 1 - d]);
  }
  return c;
}

// ---- device: element access ---------------------------------------------------------------------
template <class T, int N>
struct alignas(sizeof(T) * N) Vec {
  T v[N];
};

// Widest vector of T that one 16-byte load brings.
template <class T>
inline constexpr int kVec = static_cast<int>(16 / sizeof(T)) > 0 ? static_cast<int>(16 / sizeof(T)) : 1;

template <class T>
inline bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

// An element in its compute type: float for the 16-bit floats, itself otherwise.
template <class T>
__device__ __forceinline__ dacc_t<T> load_acc(T x) {
  if constexpr (std::is_same_v<T, __half>) return __half2float(x);
  else if constexpr (std::is_same_v<T, __nv_bfloat16>) return __bfloat162float(x);
  else return x;
}

template <class V>
__device__ __forceinline__ bool is_nan(V x) {
  if constexpr (std::is_floating_point_v<V>) return isnan(x);
  else return false;
}

__device__ __forceinline__ float dev_exp(float x) { return expf(x); }
__device__ __forceinline__ double dev_exp(double x) { return exp(x); }
__device__ __forceinline__ float dev_log(float x) { return logf(x); }
__device__ __forceinline__ double dev_log(double x) { return log(x); }
__device__ __forceinline__ float dev_abs(float x) { return fabsf(x); }
__device__ __forceinline__ double dev_abs(double x) { return fabs(x); }
__device__ __forceinline__ float dev_pow(float x, float y) { return powf(x, y); }
__device__ __forceinline__ double dev_pow(double x, double y) { return pow(x, y); }
__device__ __forceinline__ float dev_sqrt(float x) { return sqrtf(x); }
__device__ __forceinline__ double dev_sqrt(double x) { return sqrt(x); }

// A double result stored into T as the CPU kernels do (through float for the 16-bit floats).
template <class T>
__device__ __forceinline__ T store_from_double(double v) {
  if constexpr (is_half_v<T>) return convert<T>(static_cast<float>(v));
  else return static_cast<T>(v);
}

// ---- device: shuffles and group reductions ---------------------------------------------------------
// __shfl_xor_sync / __shfl_up_sync of any trivially copyable value, word by word.
template <class A>
__device__ __forceinline__ A shfl_xor(A v, int mask) {
  if constexpr (sizeof(A) < 4) {
    return static_cast<A>(__shfl_xor_sync(kFullMask, static_cast<int>(v), mask));
  } else {
    static_assert(sizeof(A) % 4 == 0, "shuffled values are whole 32-bit words");
    constexpr int kWords = sizeof(A) / 4;
    int w[kWords];
    memcpy(w, &v, sizeof(A));
#pragma unroll
    for (int i = 0; i < kWords; ++i) w[i] = __shfl_xor_sync(kFullMask, w[i], mask);
    A r;
    memcpy(&r, w, sizeof(A));
    return r;
  }
}

template <class A>
__device__ __forceinline__ A shfl_up(A v, int delta) {
  if constexpr (sizeof(A) < 4) {
    return static_cast<A>(__shfl_up_sync(kFullMask, static_cast<int>(v), delta));
  } else {
    static_assert(sizeof(A) % 4 == 0, "shuffled values are whole 32-bit words");
    constexpr int kWords = sizeof(A) / 4;
    int w[kWords];
    memcpy(w, &v, sizeof(A));
#pragma unroll
    for (int i = 0; i < kWords; ++i) w[i] = __shfl_up_sync(kFullMask, w[i], delta);
    A r;
    memcpy(&r, w, sizeof(A));
    return r;
  }
}

// Butterfly over aligned groups of `width` lanes (a power of two <= 32): every lane of a group ends
// with the group's combination. All 32 lanes of the warp must call it.
template <class A, class Combine>
__device__ __forceinline__ A butterfly(A v, int width, Combine combine) {
  for (int o = width / 2; o > 0; o >>= 1) v = combine(v, shfl_xor(v, o));
  return v;
}

// Shared memory for group_reduce: one slot per warp of a block of up to 1024 threads.
template <class A>
struct GroupScratch {
  alignas(16) unsigned char bytes[32 * sizeof(A)];
  __device__ A* slots() { return reinterpret_cast<A*>(bytes); }
};

// Reduces v over each group of G = blockDim.x threads (Note [Reduction groups]); the thread with
// threadIdx.x == 0 gets the group's result (for G <= 32 every thread of the group does). Every thread
// of the block must call it with the same G.
template <class A, class Combine>
__device__ __forceinline__ A group_reduce(A v, Combine combine, GroupScratch<A>& scratch) {
  const int G = blockDim.x;
  if (G <= 32) return butterfly(v, G, combine);
  v = butterfly(v, 32, combine);
  const int tid = threadIdx.y * G + threadIdx.x;
  const int nw = G / 32;  // warps per group, a power of two <= 32
  A* slots = scratch.slots();
  __syncthreads();  // the slots may still be read by a previous call
  if ((tid & 31) == 0) slots[tid >> 5] = v;
  __syncthreads();
  if (threadIdx.x < 32) {
    v = slots[threadIdx.y * nw + (threadIdx.x & (nw - 1))];
    v = butterfly(v, nw, combine);
  }
  return v;
}

// Shared memory for column_allreduce: one slot per thread of a block of up to N threads.
template <class A, int N>
struct ColumnScratch {
  alignas(16) unsigned char bytes[N * sizeof(A)];
  __device__ A* slots() { return reinterpret_cast<A*>(bytes); }
};

// Combines v over threadIdx.y (blockDim.y a power of two) for each threadIdx.x, by a fixed tree in
// shared memory (`slots` holds blockDim.x * blockDim.y values); every thread gets its column's result.
// Every thread of the block must call it.
template <class A, class Combine>
__device__ __forceinline__ A column_allreduce(A v, Combine combine, A* slots) {
  const int BX = blockDim.x, tx = threadIdx.x, ty = threadIdx.y;
  __syncthreads();  // the slots may still be read by a previous call
  slots[ty * BX + tx] = v;
  __syncthreads();
  for (int s = blockDim.y / 2; s > 0; s >>= 1) {
    if (ty < s) slots[ty * BX + tx] = combine(slots[ty * BX + tx], slots[(ty + s) * BX + tx]);
    __syncthreads();
  }
  return slots[tx];
}

// ---- host: launch sizing --------------------------------------------------------------------------
inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

inline int64_t pow2_ceil(int64_t v) {
  int64_t p = 1;
  while (p < v) p *= 2;
  return p;
}

// Block of the kernels that fold split partials (Note [Deterministic splits]): up to 32 neighbouring
// outputs along x (coalesced reads of one split's row of partials), the splits divided over y.
inline dim3 finalize_block(int64_t outputs, int64_t splits) {
  const int bx = static_cast<int>(std::min<int64_t>(32, pow2_ceil(outputs)));
  const int by = static_cast<int>(std::min<int64_t>(256 / bx, pow2_ceil((splits + 3) / 4)));
  return dim3(bx, by);
}

inline int sm_count(int device) {
  int n = 0;
  TS_CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device));
  return n > 0 ? n : 1;
}

// Threads the device keeps resident at once (at most).
inline int64_t resident_threads(int device) { return static_cast<int64_t>(sm_count(device)) * 2048; }

// Grid dimension x for `blocks` blocks, capped (kernels loop over the rest).
inline unsigned grid_x(int64_t blocks) {
  constexpr int64_t kCap = int64_t(1) << 30;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > kCap ? kCap : blocks));
}

// Blocks of `kernel` (launched with `threads` threads) that the whole device keeps resident at once.
template <class Kernel>
int64_t resident_blocks(Kernel* kernel, int threads, int device) {
  int per_sm = 0;
  TS_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, 0));
  return static_cast<int64_t>(per_sm < 1 ? 1 : per_sm) * sm_count(device);
}

// Splits of each output's reduced range (Note [Deterministic splits]).
struct SplitPlan {
  int64_t splits = 1;
  int64_t chunk = 0;  // reduced elements per split (the last may hold fewer)
};

// `blocks` blocks cover the outputs once, each block holding `splits_per_block` splits. When they fill
// less than half of the device (`resident()` blocks at once), the reduced range of R elements is cut
// so that the split grid is one full wave (never a wave and a bit: a partial second wave would idle
// most of the GPU), each split keeping at least `min_chunk` elements; chunks are multiples of `align`.
template <class Resident>
SplitPlan plan_splits(int64_t R, int64_t blocks, int64_t splits_per_block, int64_t min_chunk, int64_t max_splits,
                      int64_t align, Resident&& resident) {
  SplitPlan sp;
  sp.chunk = R;
  min_chunk = std::max<int64_t>(min_chunk, 1);
  if (R < 2 * min_chunk) return sp;
  const int64_t full = resident();
  if (2 * blocks > full) return sp;
  int64_t s = (full / std::max<int64_t>(blocks, 1)) * splits_per_block;
  s = std::min<int64_t>({s, R / min_chunk, max_splits});
  if (s <= 1) return sp;
  const int64_t chunk = ceil_div(ceil_div(R, s), align) * align;
  sp.chunk = chunk;
  sp.splits = ceil_div(R, chunk);
  return sp;
}

}  // namespace tessera::cuda::red
