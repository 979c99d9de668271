// Layer norm and RMS norm on the GPU, forward (norm_fwd.cu) and backward (norm_bwd.cu): norm_forward_kernel /
// norm_backward_kernel and the add + layer norm slots
// (ops/norm_kernel.h, Note [Norm rows]). x, dy, y, dx are contiguous (M, N) of one floating dtype T;
// weight / bias (N) of T or absent; mean / rstd (M) in A = float (double for float64).
//
// Math as the CPU kernel (kernels/cpu/norm.cpp): mean = x0 + sum(x - x0) / N (summed around the row's
// first element), var = sum((x - mean)^2) / N (second pass, from registers), rstd = 1 / sqrt(var +
// eps); RMS norm: mean = 0. Precise sqrtf / division (no fast math). Sums combine in a fixed order
// (warp butterfly, then the warps of a row in index order), so a run is reproducible.
//
// Rows map to a block (TX, TY): TX threads (a multiple of 32, at most 512) per row, TY rows per block
// (TY > 1 only for short rows: TX = 32 is one warp per row). Row offsets are int64 (M * N may pass
// 2^31); columns within a row are int32 in the register kernels (N <= 16384) and int64 in the looped
// ones.
//  * register kernels (N up to 512 * K * kVec<T>, K the template count of 16-byte slots per thread):
//    thread x of a row owns slots x, x + TX, ...; slot s is the elements [s * V, s * V + V), loaded
//    with one 16-byte load when N % V == 0 and every pointer is 16-byte aligned (`vec`), element by
//    element otherwise (odd N, misaligned views). Forward: x read once, y written once. Backward: dy
//    and x read once, dx written once; each thread also sums dy * xhat and dy for its own columns over
//    the rows its block visits (a grid of at most the resident blocks loops over the rows), and
//    writes them as one row of float partials (P = grid * TY rows) to workspace memory.
//  * looped kernels (longer rows): the same row mapping with a column loop, three passes over the
//    row (sum, centred squares, output) through L2; the backward's dweight / dbias then come from a
//    column kernel over fixed chunks of rows (block 32 columns x 8 row lanes), again as partial rows.
//  * norm_finalize_kernel folds the P partial rows of each column in a fixed tree (block 32 x 32) and
//    rounds once to T: deterministic, no atomics.
// The residual add fused with layer norm (Note [Add + layer norm]) runs the same kernels: with a
// residual the forward rounds x + residual to T as it loads (the register kernel writes the sum from
// registers; the looped one in a first pass over the row, each thread reading back only the columns
// it wrote), and every statistic, including the summing shift, comes from the rounded sum; the
// backward adds dsum to dx before its rounding. Its mixed form (Note [Mixed add + layer norm]) runs the
// same kernels with a second element type TL for x and y (forward) and dy and dx_low (backward), and T
// = float for the rest: x and dy widen as they load, y and dx_low round as they store.
//
// This header holds what both halves share: the kernels' Params, the row reduction, the slot loads
// and stores (converted and raw) and the launch shapes. Included from norm_fwd.cu and norm_bwd.cu only.
#pragma once

#include <algorithm>
#include <type_traits>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/reduce_common.cuh"
#include "ops/norm_kernel.h"

namespace tessera::cuda::norm {

using red::aligned16;
using red::butterfly;
using red::ceil_div;
using red::ColumnScratch;
using red::column_allreduce;
using red::dev_sqrt;
using red::grid_x;
using red::kVec;
using red::load_acc;
using red::resident_blocks;
using red::sm_count;
using red::Vec;

struct FwdParams {
  const void* x = nullptr;
  const void* r = nullptr;  // (M, N) residual, or null (plain norm)
  void* s = nullptr;        // (M, N) sum = x + r, written when r is set
  const void* w = nullptr;  // (N) or null
  const void* b = nullptr;  // (N) or null
  void* y = nullptr;
  void* mean = nullptr;  // (M) or null (RMS norm)
  void* rstd = nullptr;  // (M)
  int64_t rows = 0, cols = 0;
  double eps = 0;
  bool rms = false;
  bool vec = false;  // 16-byte loads: cols % kVec<T> == 0 and every pointer 16-byte aligned
};

struct BwdParams {
  const void* dy = nullptr;
  const void* x = nullptr;
  const void* mean = nullptr;  // (M) or null (RMS norm)
  const void* rstd = nullptr;
  const void* w = nullptr;  // (N) or null
  void* dx = nullptr;       // (M, N) or null (not wanted)
  void* dxl = nullptr;      // (M, N) of TL: dx rounded to TL, or null (not wanted)
  const void* dadd = nullptr;  // (M, N) added to dx, or null
  void* pw = nullptr;       // A partials (P, N) of dweight, or null
  void* pb = nullptr;       // A partials (P, N) of dbias, or null
  int64_t rows = 0, cols = 0;
  int64_t chunk = 0;  // rows per chunk of the column kernel
  bool vec = false;
};

constexpr int kMaxRowThreads = 512;
// Values of row_allreduce's scratch: 32 warps (a block of at most 1024 threads) x 2 sums.
constexpr int kRowScratch = 64;

__device__ __forceinline__ int64_t ceil_div_dev(int64_t a, int64_t b) { return (a + b - 1) / b; }

struct Plus {
  template <class A>
  __device__ __forceinline__ A operator()(A a, A b) const {
    return a + b;
  }
};

// Sums each of v[0..K) over the TX = blockDim.x threads of this thread's row; every thread of the row
// gets the sums. blockDim.x is a multiple of 32, so a warp never spans two rows. Every thread of the
// block must call it. smem holds 32 * K values.
template <class A, int K>
__device__ __forceinline__ void row_allreduce(A (&v)[K], A* smem) {
#pragma unroll
  for (int k = 0; k < K; ++k) v[k] = butterfly(v[k], 32, Plus{});
  const int nw = blockDim.x >> 5;  // warps per row
  if (nw == 1) return;             // uniform over the block
  const int warp = (threadIdx.y * blockDim.x + threadIdx.x) >> 5;
  __syncthreads();  // smem may still be read by a previous call
  if ((threadIdx.x & 31) == 0) {
#pragma unroll
    for (int k = 0; k < K; ++k) smem[k * 32 + warp] = v[k];
  }
  __syncthreads();
  const int first = threadIdx.y * nw;
#pragma unroll
  for (int k = 0; k < K; ++k) {
    A r = smem[k * 32 + first];
    for (int w = 1; w < nw; ++w) r += smem[k * 32 + first + w];
    v[k] = r;
  }
}

// Loads slot `s` (elements [s * V, s * V + V) of the row) in compute precision; elements past the row
// (or of an invalid row) read as 0.
template <class T, int V>
__device__ __forceinline__ void load_slot(const T* __restrict__ row, int s, int n, bool vec, bool active,
                                          dacc_t<T> (&v)[V]) {
  const int e0 = s * V;
  if (active && vec && e0 < n) {
    const Vec<T, V> raw = *reinterpret_cast<const Vec<T, V>*>(row + e0);
#pragma unroll
    for (int j = 0; j < V; ++j) v[j] = load_acc(raw.v[j]);
  } else {
#pragma unroll
    for (int j = 0; j < V; ++j) v[j] = active && e0 + j < n ? load_acc(row[e0 + j]) : dacc_t<T>(0);
  }
}

template <class T, int V>
__device__ __forceinline__ void store_slot(T* __restrict__ row, int s, int n, bool vec, const dacc_t<T> (&v)[V]) {
  const int e0 = s * V;
  if (vec) {
    if (e0 < n) {
      Vec<T, V> raw;
#pragma unroll
      for (int j = 0; j < V; ++j) raw.v[j] = convert<T>(v[j]);
      *reinterpret_cast<Vec<T, V>*>(row + e0) = raw;
    }
  } else {
#pragma unroll
    for (int j = 0; j < V; ++j)
      if (e0 + j < n) row[e0 + j] = convert<T>(v[j]);
  }
}

// A slot's V elements of T as loaded, in the 32-bit registers that one vector load fills (16 bytes for
// a full slot of T; 8 for a slot of a 16-bit TL beside float's 4-element slots). A Vec of a 16-bit T,
// merged from load_raw's two paths, would take a register per element.
template <class T, int V>
struct RawOf {
  static_assert(sizeof(T) * V % 4 == 0, "a slot is whole 32-bit words");
  uint32_t w[sizeof(T) * V / 4];
};

// Slot `s` of the row, raw (load_slot without the conversion): elements past the row (or of an invalid
// row) are 0.
template <class T, int V>
__device__ __forceinline__ RawOf<T, V> load_raw(const T* __restrict__ row, int s, int n, bool vec, bool active) {
  static_assert(sizeof(Vec<T, V>) == sizeof(RawOf<T, V>), "a slot is its raw words");
  const int e0 = s * V;
  RawOf<T, V> r;
  if (active && vec && e0 < n) {
    if constexpr (sizeof(r) == 16) {
      const uint4 u = *reinterpret_cast<const uint4*>(row + e0);
      r.w[0] = u.x, r.w[1] = u.y, r.w[2] = u.z, r.w[3] = u.w;
    } else if constexpr (sizeof(r) == 8) {
      const uint2 u = *reinterpret_cast<const uint2*>(row + e0);
      r.w[0] = u.x, r.w[1] = u.y;
    } else {
      const Vec<T, V> raw = *reinterpret_cast<const Vec<T, V>*>(row + e0);
      memcpy(&r, &raw, sizeof(r));
    }
  } else {
    const T zero = convert<T>(dacc_t<T>(0));
    Vec<T, V> raw;
#pragma unroll
    for (int j = 0; j < V; ++j) raw.v[j] = active && e0 + j < n ? row[e0 + j] : zero;
    memcpy(&r, &raw, sizeof(r));
  }
  return r;
}

// Element j of a raw slot in compute precision.
template <class T, int V>
__device__ __forceinline__ dacc_t<T> raw_acc(const RawOf<T, V>& r, int j) {
  Vec<T, V> raw;
  memcpy(&raw, &r, sizeof(r));
  return load_acc(raw.v[j]);
}

// ---- launching ---------------------------------------------------------------------------------------

struct RowLaunch {
  dim3 block;
  int64_t blocks = 0;  // row groups: ceil(M / TY)
};

// Threads per row for `slots` 16-byte slots at K per thread: a multiple of 32, at most 512; rows per
// block up to 256 threads.
inline RowLaunch row_launch(int64_t rows, int64_t per_row_threads) {
  const int tx = static_cast<int>(std::min<int64_t>(kMaxRowThreads, std::max<int64_t>(32, ceil_div(per_row_threads, 32) * 32)));
  const int ty = std::max(1, 256 / tx);
  return {dim3(tx, ty), ceil_div(rows, ty)};
}

// The smallest K (doubling up to KMax) that keeps a row within `row_threads` threads, or within 512 at
// KMax. Both passes ask for 256: on (16384, 4096) bfloat16 the forward took 0.130 ms at 256 threads
// per row (K = 2), 0.168 ms at 128 (K = 4) and 0.165 ms at 64 (K = 8) on an H200.
template <int K, int KMax, class F>
void with_slots(int64_t slots, int64_t row_threads, F&& f) {
  if constexpr (K < KMax) {
    if (slots > row_threads * K) return with_slots<K * 2, KMax>(slots, row_threads, std::forward<F>(f));
  }
  f(std::integral_constant<int, K>{});
}

template <class T>
bool all_aligned(std::initializer_list<const void*> ptrs) {
  for (const void* q : ptrs)
    if (q && !aligned16<T>(q)) return false;
  return true;
}

inline const void* ptr_or_null(const Tensor& t) { return t.defined() ? t.data_ptr() : nullptr; }
inline void* mut_or_null(const Tensor& t) { return t.defined() ? t.data_ptr() : nullptr; }

// The 16-bit type of a mixed add + layer norm call (Note [Mixed add + layer norm]): f(TypeTag<TL>).
template <class F>
void dispatch_low(DType d, const char* op, F&& f) {
  if (d == kBFloat16) f(TypeTag<__nv_bfloat16>{});
  else if (d == kFloat16) f(TypeTag<__half>{});
  else TS_THROW(DTypeError, op, ": a float32 sum takes a bfloat16 or float16 branch, got ", dtype_name(d));
}

}  // namespace tessera::cuda::norm
