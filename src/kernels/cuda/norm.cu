// Layer norm and RMS norm on the GPU, forward and backward: norm_forward_kernel / norm_backward_kernel
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
// Note [Norm forward rows]: the register forward runs persistent (norm_fwd_pf_kernel): a grid of the
// resident blocks walks the rows, each block loading its next row while the current one reduces and
// stores, with weight and bias staged once per block in shared memory (where 2 * N * sizeof(T) <= 32
// KiB). Its arithmetic and summation order are the one-row kernel's (norm_fwd_reg_kernel, which still
// runs where the persistent kernel would spill: float with a residual and double at the largest K).
// On an H200, (16384, 4096) bfloat16 (PyTorch 0.116-0.122 ms for layer norm, 0.090 ms for RMS norm):
//   one-row kernel, 256 threads per row           layer norm 0.134 ms, RMS norm 0.117 ms
//   the same at 512 threads per row               0.169, 0.127
//   persistent, next row in flight                0.114, 0.087
//   + weight and bias in shared memory (chosen)   0.111, 0.086
//   + one merged reduction (sum d, sum d^2)       0.108 (layer norm only); not taken: the one-pass
//     variance loses digits when a row's first element (the shift) lies far from its mean.

#include <cstdlib>
#include <string_view>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/reduce_common.cuh"
#include "ops/norm_kernel.h"

namespace tessera::cuda {
namespace {

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

// ---- forward ---------------------------------------------------------------------------------------

// x + r rounded to T, in compute precision: the value the unfused add would store.
template <class T>
__device__ __forceinline__ dacc_t<T> rounded_sum(dacc_t<T> a, dacc_t<T> b) {
  return load_acc(convert<T>(a + b));
}

// The row's summing shift: its first element (of the rounded sum with a residual). Every thread of the
// row reads it from global memory, so no thread depends on another's store.
template <class T, class TL>
__device__ __forceinline__ dacc_t<T> row_shift(const TL* xr, const T* rr, bool active, int64_t n) {
  if (!active || n <= 0) return dacc_t<T>(0);
  return rr ? rounded_sum<T>(load_acc(xr[0]), load_acc(rr[0])) : dacc_t<T>(load_acc(xr[0]));
}

// The row's mean (0 for RMS norm) and 1 / sqrt(var + eps) from its values in registers, in two
// reductions over the row's threads: the sum around `shift`, then the centred squares. Every thread of
// the block must call it (it synchronizes); every thread of the row gets the statistics.
template <class T, int K, int V>
__device__ __forceinline__ void row_stats(const dacc_t<T> (&v)[K][V], dacc_t<T> shift, const FwdParams& p, int n,
                                          dacc_t<T>* smem, dacc_t<T>& mu, dacc_t<T>& rs) {
  using A = dacc_t<T>;
  const A nn = static_cast<A>(n);  // n == 0 gives 0 / 0: NaN statistics, as on the CPU
  const int tx = threadIdx.x, TX = blockDim.x;
  mu = 0;
  if (!p.rms) {
    A s[1] = {0};
#pragma unroll
    for (int k = 0; k < K; ++k)
#pragma unroll
      for (int j = 0; j < V; ++j)
        if ((tx + k * TX) * V + j < n) s[0] += v[k][j] - shift;
    row_allreduce(s, smem);
    mu = shift + s[0] / nn;
  }
  A q[1] = {0};
#pragma unroll
  for (int k = 0; k < K; ++k)
#pragma unroll
    for (int j = 0; j < V; ++j) {
      if ((tx + k * TX) * V + j < n) {
        const A d = v[k][j] - mu;
        q[0] += d * d;
      }
    }
  row_allreduce(q, smem);
  rs = A(1) / dev_sqrt(q[0] / nn + static_cast<A>(p.eps));
}

// Writes an active row's statistics and y = (v - mu) rs (* w) (+ b) in TL, w and b read from `ws` /
// `bs` (global or shared memory) where p.w / p.b are set. Overwrites v.
template <class T, class TL, int K, int V>
__device__ __forceinline__ void write_row(dacc_t<T> (&v)[K][V], int64_t row, dacc_t<T> mu, dacc_t<T> rs,
                                          const T* ws, const T* bs, const FwdParams& p, int n) {
  using A = dacc_t<T>;
  const int tx = threadIdx.x, TX = blockDim.x;
  const bool has_w = p.w != nullptr, has_b = p.b != nullptr;
  if (tx == 0) {
    if (p.mean) static_cast<A*>(p.mean)[row] = mu;
    static_cast<A*>(p.rstd)[row] = rs;
  }
  TL* yr = static_cast<TL*>(p.y) + row * p.cols;
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int s = tx + k * TX;
    if (s * V >= n) continue;
    A wv[V], bv[V];
    load_slot<T, V>(ws, s, n, p.vec, has_w, wv);
    load_slot<T, V>(bs, s, n, p.vec, has_b, bv);
#pragma unroll
    for (int j = 0; j < V; ++j) {
      A o = (v[k][j] - mu) * rs;
      if (has_w) o *= wv[j];
      if (has_b) o += bv[j];
      v[k][j] = o;
    }
    store_slot<TL, V>(yr, s, n, p.vec, v[k]);
  }
}

// Register kernel: up to K slots of the row per thread, N <= blockDim.x * K * V. With a residual
// (kResidual, its own instantiation so that the plain norm keeps its registers) the row is x + r
// rounded to T, written to the sum output as well. Tried and measured slower on the H200 (16384 x 4096
// bf16): loading weight and bias before the reductions (97 registers, half the resident blocks: layer
// norm 0.257 ms, RMS norm 0.190 ms) and the row kept raw in T with one merge of per-thread moments
// instead of two reductions (0.164 / 0.125 ms), against 0.133 / 0.116 ms for this kernel.
template <class T, class TL, int K, bool kResidual>
static __global__ __launch_bounds__(kMaxRowThreads) void norm_fwd_reg_kernel(FwdParams p) {
  using A = dacc_t<T>;
  constexpr int V = kVec<T>;
  __shared__ A smem[kRowScratch];
  const TL* __restrict__ x = static_cast<const TL*>(p.x);
  const T* __restrict__ w = static_cast<const T*>(p.w);
  const T* __restrict__ b = static_cast<const T*>(p.b);
  const int n = static_cast<int>(p.cols);
  const int tx = threadIdx.x, TX = blockDim.x;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.y;
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * blockDim.y; base < p.rows; base += step) {  // uniform
    const int64_t row = base + threadIdx.y;
    const bool active = row < p.rows;
    const TL* xr = x + (active ? row : 0) * p.cols;
    const T* rr = kResidual ? static_cast<const T*>(p.r) + (active ? row : 0) * p.cols : nullptr;
    A v[K][V];
#pragma unroll
    for (int k = 0; k < K; ++k) load_slot<TL, V>(xr, tx + k * TX, n, p.vec, active, v[k]);
    if constexpr (kResidual) {
      T* sr = static_cast<T*>(p.s) + (active ? row : 0) * p.cols;
#pragma unroll
      for (int k = 0; k < K; ++k) {
        A rv[V];
        load_slot<T, V>(rr, tx + k * TX, n, p.vec, active, rv);
#pragma unroll
        for (int j = 0; j < V; ++j) v[k][j] = rounded_sum<T>(v[k][j], rv[j]);
        if (active) store_slot<T, V>(sr, tx + k * TX, n, p.vec, v[k]);
      }
    }
    const A shift = p.rms ? A(0) : row_shift<T, TL>(xr, rr, active, n);
    A mu, rs;
    row_stats<T, K, V>(v, shift, p, n, smem, mu, rs);
    if (!active) continue;  // no barrier below
    write_row<T, TL, K, V>(v, row, mu, rs, w, b, p, n);
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

// Persistent register kernel (Note [Norm forward rows]): the grid is at most the resident blocks, and
// each block walks its rows with a grid stride. Right after converting the current row (and storing
// its sum, with a residual) it loads the next row's slots raw (K RawOf slots, of x and of r with a
// residual), so that those loads are in flight through the current row's reductions and stores,
// where the one-row kernel leaves memory idle.
// The row, slot and column mapping, the arithmetic and the summation order are norm_fwd_reg_kernel's,
// and so are the results, provided the compiler contracts the same multiply-adds into fmas: the PTX
// (nvcc 13.0, sm_90) has the same float operations in the same order for every T, K and kResidual,
// the output's bias-without-weight case included (which contracted differently while the sum's store
// came after the next row's loads).
// kSmemWB: weight and bias are staged in dynamic shared memory once per block (w if any, then b if
// any, N each, after the reductions' scratch) and the output stage reads them there.
// Note [Norm shared window]: with kSmemWB the dynamic window holds the reductions' scratch
// (kRowScratch values of A), then w and b, and 16 bytes of tail. The tail is needed: where the
// window's w starts 16-byte aligned, the compiled output stage reads w's slots with 16-byte shared
// loads even for rows whose length is not a multiple of V (no vector path), so the last slot of w can
// read up to 16 bytes past it: past the window when there is no b (found by compute-sanitizer
// memcheck: 1-column float rows, 4 bytes of w staged, 16 read). The lanes past the row are never
// stored, so what they read does not matter, only that it lies inside the block's allocation.
// The bound for K <= 2 keeps 64 registers (4 blocks of 256 threads per SM, as the one-row kernel has);
// without it ptxas takes 75 to 96 for the 16-bit residual instantiations, which with it spill 4 to 16
// bytes.
template <class T, class TL, int K, bool kResidual, bool kSmemWB>
static __global__ __launch_bounds__(kMaxRowThreads, K <= 2 ? 2 : 1) void norm_fwd_pf_kernel(FwdParams p) {
  using A = dacc_t<T>;
  constexpr int V = kVec<T>;
  // One shared window (Note [Norm shared window]): the reductions' scratch, then (kSmemWB) w and b.
  extern __shared__ __align__(16) unsigned char norm_wb_smem[];
  __shared__ A static_scratch[kSmemWB ? 1 : kRowScratch];
  A* const smem = kSmemWB ? reinterpret_cast<A*>(norm_wb_smem) : static_scratch;
  const TL* __restrict__ x = static_cast<const TL*>(p.x);
  const T* __restrict__ r = static_cast<const T*>(p.r);
  const T* __restrict__ w = static_cast<const T*>(p.w);
  const T* __restrict__ b = static_cast<const T*>(p.b);
  const int n = static_cast<int>(p.cols);
  const int tx = threadIdx.x, TX = blockDim.x;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.y;
  int64_t base = static_cast<int64_t>(blockIdx.x) * blockDim.y;
  RawOf<TL, V> nx[K];  // the next row, raw
  RawOf<T, V> nr[kResidual ? K : 1];
  {
    const int64_t row = base + threadIdx.y;
    const bool active = row < p.rows;
    const int64_t off = (active ? row : 0) * p.cols;
#pragma unroll
    for (int k = 0; k < K; ++k) {
      nx[k] = load_raw<TL, V>(x + off, tx + k * TX, n, p.vec, active);
      if constexpr (kResidual) nr[k] = load_raw<T, V>(r + off, tx + k * TX, n, p.vec, active);
    }
  }
  T* const sw = reinterpret_cast<T*>(norm_wb_smem + kRowScratch * sizeof(A));  // kSmemWB: w (if any), then b
  T* const sb = sw + (w ? n : 0);
  if constexpr (kSmemWB) {  // behind the first row's loads; the loop's first reduction waits for it
    const int tid = threadIdx.y * TX + tx, threads = blockDim.y * TX;
    if (p.vec) {
      for (int s = tid; s * V < n; s += threads) {
        if (w) *reinterpret_cast<Vec<T, V>*>(sw + s * V) = *reinterpret_cast<const Vec<T, V>*>(w + s * V);
        if (b) *reinterpret_cast<Vec<T, V>*>(sb + s * V) = *reinterpret_cast<const Vec<T, V>*>(b + s * V);
      }
    } else {
      for (int e = tid; e < n; e += threads) {
        if (w) sw[e] = w[e];
        if (b) sb[e] = b[e];
      }
    }
    __syncthreads();
  }
  for (; base < p.rows; base += step) {  // uniform
    const int64_t row = base + threadIdx.y;
    const bool active = row < p.rows;
    const TL* xr = x + (active ? row : 0) * p.cols;
    const T* rr = kResidual ? r + (active ? row : 0) * p.cols : nullptr;
    A v[K][V];
#pragma unroll
    for (int k = 0; k < K; ++k) {
#pragma unroll
      for (int j = 0; j < V; ++j)
        v[k][j] = kResidual ? rounded_sum<T>(raw_acc<TL, V>(nx[k], j), raw_acc<T, V>(nr[k], j))
                            : A(raw_acc<TL, V>(nx[k], j));
      if (kResidual && active)
        store_slot<T, V>(static_cast<T*>(p.s) + row * p.cols, tx + k * TX, n, p.vec, v[k]);
    }
    const A shift = p.rms ? A(0) : row_shift<T, TL>(xr, rr, active, n);
    {  // the next row's loads, in flight until the next iteration
      const int64_t next = row + step;
      const bool nactive = next < p.rows;
      const int64_t off = (nactive ? next : 0) * p.cols;
#pragma unroll
      for (int k = 0; k < K; ++k) {
        nx[k] = load_raw<TL, V>(x + off, tx + k * TX, n, p.vec, nactive);
        if constexpr (kResidual) nr[k] = load_raw<T, V>(r + off, tx + k * TX, n, p.vec, nactive);
      }
    }
    A mu, rs;
    row_stats<T, K, V>(v, shift, p, n, smem, mu, rs);
    if (!active) continue;  // no barrier below
    write_row<T, TL, K, V>(v, row, mu, rs, kSmemWB ? sw : w, kSmemWB ? sb : b, p, n);
  }
}

// Looped kernel: any N, three passes over the row (the later ones mostly from L2).
template <class T, class TL>
static __global__ __launch_bounds__(kMaxRowThreads) void norm_fwd_loop_kernel(FwdParams p) {
  using A = dacc_t<T>;
  __shared__ A smem[kRowScratch];
  const TL* __restrict__ x = static_cast<const TL*>(p.x);
  const T* __restrict__ w = static_cast<const T*>(p.w);
  const T* __restrict__ b = static_cast<const T*>(p.b);
  const int64_t n = p.cols;
  const int64_t tx = threadIdx.x, TX = blockDim.x;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.y;
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * blockDim.y; base < p.rows; base += step) {  // uniform
    const int64_t row = base + threadIdx.y;
    const bool active = row < p.rows;
    const TL* xr = x + (active ? row : 0) * n;
    const T* rr = p.r ? static_cast<const T*>(p.r) + (active ? row : 0) * n : nullptr;
    const A shift = row_shift<T, TL>(xr, rr, active, n);
    const T* sr = nullptr;  // with a residual, the passes below read the sum back
    if (rr) {  // uniform: the sum first (each thread reads back only its own columns)
      T* sw = static_cast<T*>(p.s) + (active ? row : 0) * n;
      if (active)
        for (int64_t c = tx; c < n; c += TX) sw[c] = convert<T>(A(load_acc(xr[c])) + load_acc(rr[c]));
      sr = sw;
    }
    auto at = [&](int64_t c) -> A { return sr ? A(load_acc(sr[c])) : A(load_acc(xr[c])); };
    A mu = 0;
    if (!p.rms) {
      A s[1] = {0};
      if (active)
        for (int64_t c = tx; c < n; c += TX) s[0] += at(c) - shift;
      row_allreduce(s, smem);
      mu = shift + s[0] / static_cast<A>(n);
    }
    A q[1] = {0};
    if (active)
      for (int64_t c = tx; c < n; c += TX) {
        const A d = at(c) - mu;
        q[0] += d * d;
      }
    row_allreduce(q, smem);
    const A rs = A(1) / dev_sqrt(q[0] / static_cast<A>(n) + static_cast<A>(p.eps));
    if (!active) continue;
    if (tx == 0) {
      if (p.mean) static_cast<A*>(p.mean)[row] = mu;
      static_cast<A*>(p.rstd)[row] = rs;
    }
    TL* yr = static_cast<TL*>(p.y) + row * n;
    for (int64_t c = tx; c < n; c += TX) {
      A o = (at(c) - mu) * rs;
      if (w) o *= load_acc(w[c]);
      if (b) o += load_acc(b[c]);
      yr[c] = convert<TL>(o);
    }
  }
}

// ---- backward --------------------------------------------------------------------------------------

// Register kernel: dx of the rows it visits, and one partial row of dweight / dbias per (block, y).
// kPrefetch (Note [Norm backward prefetch]): each thread loads its next row's x and dy slots raw right
// after converting the current row's, so that they are in flight through the current row's
// reductions and stores; the arithmetic and its order are unchanged.
template <class T, class TL, int K, bool kPrefetch>
static __global__ __launch_bounds__(kMaxRowThreads) void norm_bwd_reg_kernel(BwdParams p) {
  using A = dacc_t<T>;
  constexpr int V = kVec<T>;
  __shared__ A smem[kRowScratch];
  const TL* __restrict__ dy = static_cast<const TL*>(p.dy);
  const T* __restrict__ x = static_cast<const T*>(p.x);
  const T* __restrict__ w = static_cast<const T*>(p.w);
  const A* __restrict__ mean = static_cast<const A*>(p.mean);
  const A* __restrict__ rstd = static_cast<const A*>(p.rstd);
  const int n = static_cast<int>(p.cols);
  const A nn = static_cast<A>(n);
  const int tx = threadIdx.x, TX = blockDim.x;
  const bool partials = p.pw != nullptr || p.pb != nullptr;
  A aw[K][V], ab[K][V];
#pragma unroll
  for (int k = 0; k < K; ++k)
#pragma unroll
    for (int j = 0; j < V; ++j) aw[k][j] = ab[k][j] = A(0);
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.y;
  RawOf<T, V> nx[kPrefetch ? K : 1];  // the next row, raw
  RawOf<TL, V> ndy[kPrefetch ? K : 1];
  auto load_next = [&](int64_t next) {
    const bool nactive = next < p.rows;
    const int64_t noff = (nactive ? next : 0) * p.cols;
#pragma unroll
    for (int k = 0; k < K; ++k) {
      nx[k] = load_raw<T, V>(x + noff, tx + k * TX, n, p.vec, nactive);
      ndy[k] = load_raw<TL, V>(dy + noff, tx + k * TX, n, p.vec, nactive);
    }
  };
  if constexpr (kPrefetch) load_next(static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y);
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * blockDim.y; base < p.rows; base += step) {  // uniform
    const int64_t row = base + threadIdx.y;
    const bool active = row < p.rows;
    const int64_t off = (active ? row : 0) * p.cols;
    A xh[K][V], g[K][V];
    if constexpr (kPrefetch) {
#pragma unroll
      for (int k = 0; k < K; ++k)
#pragma unroll
        for (int j = 0; j < V; ++j) {
          xh[k][j] = raw_acc<T, V>(nx[k], j);
          g[k][j] = raw_acc<TL, V>(ndy[k], j);
        }
      load_next(row + step);  // in flight until the next iteration
    } else {
#pragma unroll
      for (int k = 0; k < K; ++k) {
        load_slot<T, V>(x + off, tx + k * TX, n, p.vec, active, xh[k]);
        load_slot<TL, V>(dy + off, tx + k * TX, n, p.vec, active, g[k]);
      }
    }
    const A mu = active && mean ? mean[row] : A(0);
    const A rs = active ? rstd[row] : A(0);
    A sums[2] = {0, 0};  // sum(g * w), sum(g * w * xhat)
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const int s = tx + k * TX;
      A wv[V];
      load_slot<T, V>(w, s, n, p.vec, w != nullptr, wv);
#pragma unroll
      for (int j = 0; j < V; ++j) {
        xh[k][j] = (xh[k][j] - mu) * rs;  // 0 for elements past the row: g is 0 there
        aw[k][j] += g[k][j] * xh[k][j];
        ab[k][j] += g[k][j];
        if (w) g[k][j] *= wv[j];
        sums[0] += g[k][j];
        sums[1] += g[k][j] * xh[k][j];
      }
    }
    if (p.dx == nullptr && p.dxl == nullptr) continue;  // uniform
    row_allreduce(sums, smem);
    if (!active) continue;
    const A mg = p.mean ? sums[0] / nn : A(0), mgx = sums[1] / nn;
    T* dxr = p.dx ? static_cast<T*>(p.dx) + row * p.cols : nullptr;
    TL* dlr = p.dxl ? static_cast<TL*>(p.dxl) + row * p.cols : nullptr;
    const T* ar = p.dadd ? static_cast<const T*>(p.dadd) + row * p.cols : nullptr;
#pragma unroll
    for (int k = 0; k < K; ++k) {
      A av[V];
      load_slot<T, V>(ar, tx + k * TX, n, p.vec, ar != nullptr, av);
#pragma unroll
      for (int j = 0; j < V; ++j) g[k][j] = rs * (g[k][j] - mg - xh[k][j] * mgx) + av[j];
      if (dxr) store_slot<T, V>(dxr, tx + k * TX, n, p.vec, g[k]);
      if (dlr) store_slot<TL, V>(dlr, tx + k * TX, n, p.vec, g[k]);  // T = A = float: dx's value, rounded to TL
    }
  }
  if (!partials) return;
  const int64_t prow = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int e0 = (tx + k * TX) * V;
#pragma unroll
    for (int j = 0; j < V; ++j) {
      if (e0 + j >= n) continue;
      if (p.pw) static_cast<A*>(p.pw)[prow * p.cols + e0 + j] = aw[k][j];
      if (p.pb) static_cast<A*>(p.pb)[prow * p.cols + e0 + j] = ab[k][j];
    }
  }
}

// Looped kernel: dx only (two passes over the row).
template <class T, class TL>
static __global__ __launch_bounds__(kMaxRowThreads) void norm_bwd_loop_kernel(BwdParams p) {
  using A = dacc_t<T>;
  __shared__ A smem[kRowScratch];
  const TL* __restrict__ dy = static_cast<const TL*>(p.dy);
  const T* __restrict__ x = static_cast<const T*>(p.x);
  const T* __restrict__ w = static_cast<const T*>(p.w);
  const A* __restrict__ mean = static_cast<const A*>(p.mean);
  const A* __restrict__ rstd = static_cast<const A*>(p.rstd);
  const int64_t n = p.cols;
  const int64_t tx = threadIdx.x, TX = blockDim.x;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.y;
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * blockDim.y; base < p.rows; base += step) {  // uniform
    const int64_t row = base + threadIdx.y;
    const bool active = row < p.rows;
    const int64_t off = (active ? row : 0) * n;
    const A mu = active && mean ? mean[row] : A(0);
    const A rs = active ? rstd[row] : A(0);
    A sums[2] = {0, 0};
    if (active)
      for (int64_t c = tx; c < n; c += TX) {
        const A g = w ? load_acc(dy[off + c]) * load_acc(w[c]) : load_acc(dy[off + c]);
        sums[0] += g;
        sums[1] += g * ((load_acc(x[off + c]) - mu) * rs);
      }
    row_allreduce(sums, smem);
    if (!active) continue;
    const A mg = mean ? sums[0] / static_cast<A>(n) : A(0), mgx = sums[1] / static_cast<A>(n);
    T* dxr = p.dx ? static_cast<T*>(p.dx) + off : nullptr;
    TL* dlr = p.dxl ? static_cast<TL*>(p.dxl) + off : nullptr;
    const T* ar = static_cast<const T*>(p.dadd);
    for (int64_t c = tx; c < n; c += TX) {
      const A g = w ? load_acc(dy[off + c]) * load_acc(w[c]) : load_acc(dy[off + c]);
      const A xhat = (load_acc(x[off + c]) - mu) * rs;
      const A a = ar ? load_acc(ar[off + c]) : A(0);
      const T v = convert<T>(rs * (g - mg - xhat * mgx) + a);
      if (dxr) dxr[c] = v;
      if (dlr) dlr[c] = convert<TL>(load_acc(v));
    }
  }
}

constexpr int kColsX = 32, kColsY = 8;

// dweight / dbias partials of the looped path: block (32, 8) = 32 neighbouring columns, 8 row lanes;
// grid.y = the chunks of p.chunk rows; writes partial row blockIdx.y.
template <class T, class TL>
static __global__ __launch_bounds__(kColsX* kColsY) void norm_bwd_cols_kernel(BwdParams p) {
  using A = dacc_t<T>;
  __shared__ ColumnScratch<A, kColsX * kColsY> scratch;
  const TL* __restrict__ dy = static_cast<const TL*>(p.dy);
  const T* __restrict__ x = static_cast<const T*>(p.x);
  const A* __restrict__ mean = static_cast<const A*>(p.mean);
  const A* __restrict__ rstd = static_cast<const A*>(p.rstd);
  const int64_t n = p.cols, tiles = ceil_div_dev(n, kColsX);
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * p.chunk;
  const int64_t r1 = r0 + p.chunk < p.rows ? r0 + p.chunk : p.rows;
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {  // uniform
    const int64_t c = t * kColsX + threadIdx.x;
    const bool valid = c < n;
    A sw = 0, sb = 0;
    if (valid)
      for (int64_t r = r0 + threadIdx.y; r < r1; r += kColsY) {
        const A g = load_acc(dy[r * n + c]);
        sw += g * ((load_acc(x[r * n + c]) - (mean ? mean[r] : A(0))) * rstd[r]);
        sb += g;
      }
    sw = column_allreduce(sw, Plus{}, scratch.slots());
    sb = column_allreduce(sb, Plus{}, scratch.slots());
    if (threadIdx.y == 0 && valid) {
      if (p.pw) static_cast<A*>(p.pw)[static_cast<int64_t>(blockIdx.y) * n + c] = sw;
      if (p.pb) static_cast<A*>(p.pb)[static_cast<int64_t>(blockIdx.y) * n + c] = sb;
    }
  }
}

constexpr int kFinX = 32, kFinY = 32;

// dweight[c] / dbias[c] = the sum of the P partial rows' column c, in a fixed tree; P == 0 gives 0.
template <class T>
static __global__ __launch_bounds__(kFinX* kFinY) void norm_finalize_kernel(const dacc_t<T>* pw, const dacc_t<T>* pb,
                                                                             T* dw, T* db, int64_t parts, int64_t n) {
  using A = dacc_t<T>;
  __shared__ ColumnScratch<A, kFinX * kFinY> scratch;
  const int64_t tiles = ceil_div_dev(n, kFinX);
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {  // uniform
    const int64_t c = t * kFinX + threadIdx.x;
    const bool valid = c < n;
    A sw = 0, sb = 0;
    if (valid)
      for (int64_t s = threadIdx.y; s < parts; s += kFinY) {
        if (pw) sw += pw[s * n + c];
        if (pb) sb += pb[s * n + c];
      }
    sw = column_allreduce(sw, Plus{}, scratch.slots());
    sb = column_allreduce(sb, Plus{}, scratch.slots());
    if (threadIdx.y == 0 && valid) {
      if (dw) dw[c] = convert<T>(sw);
      if (db) db[c] = convert<T>(sb);
    }
  }
}

// ---- launching -------------------------------------------------------------------------------------

// 16-byte slots per thread at most: 32 values in registers for the forward, 16 for the backward
// (which also holds dy and the two partial sums), half of that for double.
template <class T>
constexpr int fwd_max_slots() {
  return std::is_same_v<T, double> ? 8 : 32 / kVec<T>;
}
template <class T>
constexpr int bwd_max_slots() {
  return std::is_same_v<T, double> ? 4 : 16 / kVec<T>;
}

struct RowLaunch {
  dim3 block;
  int64_t blocks = 0;  // row groups: ceil(M / TY)
};

// Threads per row for `slots` 16-byte slots at K per thread: a multiple of 32, at most 512; rows per
// block up to 256 threads.
RowLaunch row_launch(int64_t rows, int64_t per_row_threads) {
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

// Whether norm_fwd_pf_kernel holds the next row beside the current one without spilling (ptxas, sm_90):
// not for float at K = 8 with a residual, nor for double at K = 8, which run the one-row kernel.
template <class T, int K, bool kResidual>
constexpr bool pf_fits() {
  return sizeof(T) <= 2 || K < fwd_max_slots<T>() || (sizeof(T) == 4 && !kResidual);
}

// Weight and bias in shared memory where both fit in this many bytes.
constexpr size_t kMaxWbSmem = 32 * 1024;

// norm_fwd_pf_kernel on grid = the resident blocks, at most the row groups.
template <class T, class TL, int K, bool kResidual>
void launch_forward_pf(const FwdParams& p, const RowLaunch& l, int device, cudaStream_t stream, const char* op) {
  const size_t wb = (p.w ? 1 : 0) + (p.b ? 1 : 0);
  const bool smem_wb = wb > 0 && 2 * static_cast<size_t>(p.cols) * sizeof(T) <= kMaxWbSmem;
  auto go = [&](auto* kernel, size_t smem) {
    int per_sm = 0;
    const int threads = static_cast<int>(l.block.x * l.block.y);
    TS_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, smem));
    const int64_t resident = static_cast<int64_t>(std::max(per_sm, 1)) * sm_count(device);
    const int64_t blocks = std::min<int64_t>(l.blocks, resident);
    kernel<<<grid_x(blocks), l.block, smem, stream>>>(p);
    check_launch(op, "norm_fwd_pf_kernel");
  };
  if (smem_wb)
    return go(norm_fwd_pf_kernel<T, TL, K, kResidual, true>,
              kRowScratch * sizeof(dacc_t<T>) + wb * static_cast<size_t>(p.cols) * sizeof(T) + 16);
  go(norm_fwd_pf_kernel<T, TL, K, kResidual, false>, 0);
}

// TL: x's and y's element type (T, or a 16-bit type beside T = float: Note [Mixed add + layer norm]).
template <class T, class TL = T>
void launch_forward(const FwdParams& p0, int device, cudaStream_t stream) {
  constexpr int V = kVec<T>;
  constexpr int KMax = fwd_max_slots<T>();
  FwdParams p = p0;
  p.vec = p.cols % V == 0 && all_aligned<T>({p.x, p.r, p.s, p.w, p.b, p.y});
  const int64_t slots = ceil_div(p.cols, V);
  const char* op = p.r ? "add_layer_norm" : p.rms ? "native_rms_norm" : "native_layer_norm";
  if (slots <= static_cast<int64_t>(kMaxRowThreads) * KMax) {
    with_slots<1, KMax>(slots, 256, [&](auto kc) {
      constexpr int K = decltype(kc)::value;
      const RowLaunch l = row_launch(p.rows, ceil_div(slots, K));
      if constexpr (pf_fits<T, K, true>()) {
        if (p.r) return launch_forward_pf<T, TL, K, true>(p, l, device, stream, op);
      }
      if constexpr (pf_fits<T, K, false>()) {
        if (!p.r) return launch_forward_pf<T, TL, K, false>(p, l, device, stream, op);
      }
      if (p.r) norm_fwd_reg_kernel<T, TL, K, true><<<grid_x(l.blocks), l.block, 0, stream>>>(p);
      else norm_fwd_reg_kernel<T, TL, K, false><<<grid_x(l.blocks), l.block, 0, stream>>>(p);
      check_launch(op, "norm_fwd_reg_kernel");
    });
    return;
  }
  const RowLaunch l = row_launch(p.rows, ceil_div(p.cols, 8));
  norm_fwd_loop_kernel<T, TL><<<grid_x(l.blocks), l.block, 0, stream>>>(p);
  check_launch(op, "norm_fwd_loop_kernel");
}

// Note [Norm backward prefetch]: the register backward holds the next row's raw x and dy slots (4
// registers per slot and tensor) where that does not spill (ptxas, sm_90, nvcc 13): float at K <= 2
// (62 and 83 registers), the 16-bit types at K = 1 (85; at K = 2 they would spill 100 bytes). So
// 16-bit rows take up to 512 threads at K = 1 where they took 256 at K = 2: the occupancy of the
// one-row kernel at K = 2 (111 registers, 2 blocks of 256 threads per SM), with the next row's loads
// in flight. Each kernel's arithmetic and summation order are those of the one-row kernel at the same
// launch shape, but 16-bit rows of 257-512 slots now launch 512 threads at K = 1 where they launched
// 256 at K = 2: the row reductions combine in another order and there are other partial rows for
// dweight / dbias, so results differ from before in the last bits (deterministic still).
// TESSERA_NORM_BWD_PREFETCH=0 turns it off (to measure both in one build).
bool bwd_prefetch_enabled() {
  static const bool enabled = [] {
    const char* e = std::getenv("TESSERA_NORM_BWD_PREFETCH");
    return !(e && std::string_view(e) == "0");
  }();
  return enabled;
}
template <class T, int K>
constexpr bool bwd_prefetch_fits() {
  return sizeof(T) == 4 ? K <= 2 : (sizeof(T) == 2 && K == 1);
}

// TL: dy's and dx_low's element type (as launch_forward's).
template <class T, class TL = T>
void launch_backward(const BwdParams& p0, T* dw, T* db, int device, cudaStream_t stream) {
  using A = dacc_t<T>;
  constexpr int V = kVec<T>;
  constexpr int KMax = bwd_max_slots<T>();
  BwdParams p = p0;
  const char* op = p.dadd   ? "add_layer_norm_backward"
                   : p.mean ? "native_layer_norm_backward"
                            : "native_rms_norm_backward";
  const bool want_partials = dw != nullptr || db != nullptr;
  p.vec = p.cols % V == 0 && all_aligned<T>({p.x, p.dy, p.w, p.dx, p.dxl, p.dadd});
  const int64_t slots = ceil_div(p.cols, V);
  const size_t col_bytes = static_cast<size_t>(p.cols) * sizeof(A);
  int64_t parts = 0;
  DataPtr ws;  // the partial rows: stream-ordered, released after the launches below are queued
  auto alloc_partials = [&](int64_t rows_of_partials) {
    parts = rows_of_partials;
    if (!want_partials || parts == 0 || p.cols == 0) return;
    const size_t one = static_cast<size_t>(parts) * col_bytes;
    ws = allocate_workspace(one * ((dw ? 1 : 0) + (db ? 1 : 0)));
    char* base = static_cast<char*>(ws.get());
    p.pw = dw ? base : nullptr;
    p.pb = db ? base + (dw ? one : 0) : nullptr;
  };
  if (p.rows > 0 && slots <= static_cast<int64_t>(kMaxRowThreads) * KMax) {
    // 16-bit rows of up to 512 slots at K = 1 with the prefetch; longer ones as before (256 threads).
    const int64_t row_threads = sizeof(T) == 2 && bwd_prefetch_enabled() && slots <= kMaxRowThreads ? kMaxRowThreads : 256;
    with_slots<1, KMax>(slots, row_threads, [&](auto kc) {
      constexpr int K = decltype(kc)::value;
      const RowLaunch l = row_launch(p.rows, ceil_div(slots, K));
      int64_t blocks = l.blocks;
      // With partials, at most the resident blocks: each adds one partial row per y.
      auto run = [&](auto kernel) {
        if (want_partials)
          blocks = std::min(blocks, resident_blocks(kernel, static_cast<int>(l.block.x * l.block.y), device));
        alloc_partials(blocks * l.block.y);
        kernel<<<grid_x(blocks), l.block, 0, stream>>>(p);
        check_launch(op, "norm_bwd_reg_kernel");
      };
      if constexpr (bwd_prefetch_fits<T, K>()) {
        if (bwd_prefetch_enabled()) return run(norm_bwd_reg_kernel<T, TL, K, true>);
      }
      run(norm_bwd_reg_kernel<T, TL, K, false>);
    });
  } else if (p.rows > 0) {
    if (p.dx || p.dxl) {
      const RowLaunch l = row_launch(p.rows, ceil_div(p.cols, 8));
      norm_bwd_loop_kernel<T, TL><<<grid_x(l.blocks), l.block, 0, stream>>>(p);
      check_launch(op, "norm_bwd_loop_kernel");
    }
    if (want_partials) {
      p.chunk = std::max<int64_t>(64, ceil_div(p.rows, 256));
      const int64_t chunks = ceil_div(p.rows, p.chunk);  // <= 256
      alloc_partials(chunks);
      if (p.cols > 0) {
        const dim3 grid(grid_x(ceil_div(p.cols, kColsX)), static_cast<unsigned>(chunks));
        norm_bwd_cols_kernel<T, TL><<<grid, dim3(kColsX, kColsY), 0, stream>>>(p);
        check_launch(op, "norm_bwd_cols_kernel");
      }
    }
  }
  if (!want_partials || p.cols == 0) return;
  norm_finalize_kernel<T><<<grid_x(ceil_div(p.cols, kFinX)), dim3(kFinX, kFinY), 0, stream>>>(
      static_cast<const A*>(p.pw), static_cast<const A*>(p.pb), dw, db, parts, p.cols);
  check_launch(op, "norm_finalize_kernel");
}

const void* ptr_or_null(const Tensor& t) { return t.defined() ? t.data_ptr() : nullptr; }
void* mut_or_null(const Tensor& t) { return t.defined() ? t.data_ptr() : nullptr; }

void norm_forward_cuda(const Tensor& y, const Tensor& mean, const Tensor& rstd, const Tensor& x, const Tensor& weight,
                       const Tensor& bias, const NormParams& np) {
  if (np.rows == 0) return;
  CurrentDevice guard(x.device().index());
  FwdParams p;
  p.x = x.data_ptr();
  p.w = ptr_or_null(weight);
  p.b = ptr_or_null(bias);
  p.y = y.data_ptr();
  p.mean = mut_or_null(mean);
  p.rstd = rstd.data_ptr();
  p.rows = np.rows;
  p.cols = np.cols;
  p.eps = np.eps;
  p.rms = np.rms;
  const cudaStream_t stream = stream_of(x);
  const int device = x.device().index();
  dispatch_device_dtype<DTypeSet::Floating>(x.dtype(), np.rms ? "native_rms_norm" : "native_layer_norm",
                                            [&]<class T>(TypeTag<T>) { launch_forward<T>(p, device, stream); });
}

void norm_backward_cuda(const Tensor& dx, const Tensor& dweight, const Tensor& dbias, const Tensor& dy,
                        const Tensor& x, const Tensor& mean, const Tensor& rstd, const Tensor& weight,
                        const NormParams& np) {
  CurrentDevice guard(x.device().index());
  BwdParams p;
  p.dy = dy.data_ptr();
  p.x = x.data_ptr();
  p.mean = np.rms ? nullptr : ptr_or_null(mean);
  p.rstd = rstd.data_ptr();
  p.w = ptr_or_null(weight);
  p.dx = mut_or_null(dx);
  p.rows = np.rows;
  p.cols = np.cols;
  const cudaStream_t stream = stream_of(x);
  dispatch_device_dtype<DTypeSet::Floating>(
      x.dtype(), np.rms ? "native_rms_norm_backward" : "native_layer_norm_backward", [&]<class T>(TypeTag<T>) {
        launch_backward<T>(p, static_cast<T*>(mut_or_null(dweight)), static_cast<T*>(mut_or_null(dbias)),
                           x.device().index(), stream);
      });
}

// The 16-bit type of a mixed add + layer norm call (Note [Mixed add + layer norm]): f(TypeTag<TL>).
template <class F>
void dispatch_low(DType d, const char* op, F&& f) {
  if (d == kBFloat16) f(TypeTag<__nv_bfloat16>{});
  else if (d == kFloat16) f(TypeTag<__half>{});
  else TS_THROW(DTypeError, op, ": a float32 sum takes a bfloat16 or float16 branch, got ", dtype_name(d));
}

void add_norm_forward_cuda(const Tensor& sum, const Tensor& y, const Tensor& mean, const Tensor& rstd,
                           const Tensor& x, const Tensor& residual, const Tensor& weight, const Tensor& bias,
                           const NormParams& np) {
  if (np.rows == 0) return;
  CurrentDevice guard(x.device().index());
  FwdParams p;
  p.x = x.data_ptr();
  p.r = residual.data_ptr();
  p.s = sum.data_ptr();
  p.w = ptr_or_null(weight);
  p.b = ptr_or_null(bias);
  p.y = y.data_ptr();
  p.mean = mean.data_ptr();
  p.rstd = rstd.data_ptr();
  p.rows = np.rows;
  p.cols = np.cols;
  p.eps = np.eps;
  const cudaStream_t stream = stream_of(x);
  const int device = x.device().index();
  if (x.dtype() != sum.dtype()) {
    TS_CHECK(sum.dtype() == kFloat32 && y.dtype() == x.dtype(), DTypeError,
             "add_layer_norm: a mixed call needs a float32 sum and x, y of one 16-bit dtype, got sum ",
             dtype_name(sum.dtype()), ", x ", dtype_name(x.dtype()), ", y ", dtype_name(y.dtype()));
    dispatch_low(x.dtype(), "add_layer_norm",
                 [&]<class TL>(TypeTag<TL>) { launch_forward<float, TL>(p, device, stream); });
    return;
  }
  dispatch_device_dtype<DTypeSet::Floating>(x.dtype(), "add_layer_norm",
                                            [&]<class T>(TypeTag<T>) { launch_forward<T>(p, device, stream); });
}

void add_norm_backward_cuda(const Tensor& dx, const Tensor& dx_low, const Tensor& dweight, const Tensor& dbias,
                            const Tensor& dy, const Tensor& dsum, const Tensor& x, const Tensor& mean,
                            const Tensor& rstd, const Tensor& weight, const NormParams& np) {
  CurrentDevice guard(x.device().index());
  BwdParams p;
  p.dy = dy.data_ptr();
  p.x = x.data_ptr();
  p.mean = mean.data_ptr();
  p.rstd = rstd.data_ptr();
  p.w = ptr_or_null(weight);
  p.dx = mut_or_null(dx);
  p.dxl = mut_or_null(dx_low);
  p.dadd = dx.defined() || dx_low.defined() ? ptr_or_null(dsum) : nullptr;
  p.rows = np.rows;
  p.cols = np.cols;
  const cudaStream_t stream = stream_of(x);
  const int device = x.device().index();
  if (dx_low.defined() || dy.dtype() != x.dtype()) {
    TS_CHECK(x.dtype() == kFloat32 && (!dx_low.defined() || dx_low.dtype() == dy.dtype()), DTypeError,
             "add_layer_norm_backward: a mixed call needs a float32 sum and dy, dx_low of one 16-bit dtype, got sum ",
             dtype_name(x.dtype()), ", dy ", dtype_name(dy.dtype()));
    dispatch_low(dy.dtype(), "add_layer_norm_backward", [&]<class TL>(TypeTag<TL>) {
      launch_backward<float, TL>(p, static_cast<float*>(mut_or_null(dweight)), static_cast<float*>(mut_or_null(dbias)),
                                 device, stream);
    });
    return;
  }
  dispatch_device_dtype<DTypeSet::Floating>(x.dtype(), "add_layer_norm_backward", [&]<class T>(TypeTag<T>) {
    launch_backward<T>(p, static_cast<T*>(mut_or_null(dweight)), static_cast<T*>(mut_or_null(dbias)), device, stream);
  });
}

}  // namespace

void register_norm() {
  norm_forward_kernel.set(DeviceType::CUDA, &norm_forward_cuda);
  norm_backward_kernel.set(DeviceType::CUDA, &norm_backward_cuda);
  add_norm_forward_kernel.set(DeviceType::CUDA, &add_norm_forward_cuda);
  add_norm_backward_kernel.set(DeviceType::CUDA, &add_norm_backward_cuda);
}

}  // namespace tessera::cuda
