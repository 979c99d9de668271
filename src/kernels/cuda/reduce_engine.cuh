// The CUDA reduction engine behind reduce_kernel: sum, mean, prod, max, min, any, all and the vector
// norms over the trailing `nreduce` dims of a strided (kept..., reduced...) input into a contiguous
// output (Note [Reduction layout] in ops/reduce_kernel.h). The ops (reduce_ops.cuh) are those of the
// CPU engine (kernels/cpu/reduce.cpp), with the same accumulator types and NaN rules.
//
// Two traversals, picked from the strides as on the CPU:
//  * rows (reduce_rows_kernel): G threads per output walk its reduced elements (Note [Reduction
//    groups]); a unit-stride reduced dim is read with 16-byte vector loads, four in flight per thread;
//    otherwise a single strided dim, or any number of dims through an OffsetCalc.
//  * columns (reduce_cols_kernel): the innermost kept dim is unit-stride and the reduced one is not
//    (e.g. a row-major matrix summed over dim 0): each thread owns kVec<T> neighbouring outputs and
//    walks the reduced rows, so a warp reads 512 contiguous bytes per row (one vector each when
//    alignment allows).
// Either traversal splits the reduced range over grid.y when there are too few outputs to fill the
// GPU, and reduce_finalize_kernel folds the partials (Note [Deterministic splits]).
//
// Index math is 32-bit where the input fits (index_fits_int32) and 64-bit otherwise: the kernels are
// templated on the index type I.
#pragma once
#include <algorithm>

#include "kernels/cuda/reduce_common.cuh"

namespace tessera::cuda::red {

inline constexpr int kRowsBlock = 256;      // threads per block of the rows traversal (G <= 256)
inline constexpr int kMaxGroup = 512;       // the largest G (a block of its own)
inline constexpr int kColsBlock = 256;      // threads per block of the columns traversal
inline constexpr int kItemsPerThread = 8;   // loads (vectors or elements) a thread aims for per output
inline constexpr int64_t kMaxSplits = 65535;  // grid.y limit (rows); the columns traversal divides it by BY
inline constexpr int64_t kColsMinRows = 32;  // reduced rows per split of the columns traversal, at least

enum class RowMode : int { Contiguous, Strided, General };

template <class I>
struct RowsParams {
  const void* in = nullptr;
  void* out = nullptr;      // OutT[O] when splits == 1
  void* partial = nullptr;  // A[splits][O] otherwise
  OffsetCalc<I> kept;       // output index -> offset of its first reduced element
  OffsetCalc<I> red;        // reduced index -> offset (RowMode::General)
  I red_stride = 1;         // RowMode::Strided
  RowMode mode = RowMode::Contiguous;
  int64_t O = 0, R = 0, chunk = 0;
  int64_t splits = 1;
};

template <class I>
struct ColsParams {
  const void* in = nullptr;
  void* out = nullptr;
  void* partial = nullptr;
  OffsetCalc<I> kq;    // index of the kept dims but the innermost -> offset
  OffsetCalc<I> red;   // reduced index -> offset (when red_general)
  I red_stride = 0;    // offset between reduced rows (when !red_general)
  bool red_general = false;
  bool vec = false;    // whole aligned vectors of kVec<T> columns
  int64_t Q = 0, W = 0, Wv = 0, O = 0, R = 0, chunk = 0;
  int64_t splits = 1;
};

// ---- device: contiguous run of one output --------------------------------------------------------
// acc over p[0, n) by threads tid, tid + nt, ... of a group: an unaligned head element by element,
// then 16-byte vectors four at a time, then the tail. kVec<T> independent accumulators combine in a
// fixed tree at the end.
template <class Op, class T, class I>
__device__ __forceinline__ typename Op::acc_t reduce_contiguous(const T* __restrict__ p, I n, int tid, int nt,
                                                                 const Op& op) {
  using A = typename Op::acc_t;
  constexpr int V = kVec<T>;
  using VecT = Vec<T, V>;
  A acc[V];
#pragma unroll
  for (int j = 0; j < V; ++j) acc[j] = op.init();
  const int mis = static_cast<int>((reinterpret_cast<uintptr_t>(p) / sizeof(T)) % V);
  const I head = mis == 0 ? I(0) : (n < I(V - mis) ? n : I(V - mis));
  // head < V may exceed the group size nt (e.g. one thread per short row): stride over it.
  for (I t = tid; t < head; t += nt) acc[0] = op.combine(acc[0], op.map(load_acc(p[t])));
  p += head;
  n -= head;
  const I nv = n / V;
  const VecT* pv = reinterpret_cast<const VecT*>(p);
  I i = tid;
  for (; i + 3 * nt < nv; i += 4 * nt) {
    const VecT v0 = pv[i], v1 = pv[i + nt], v2 = pv[i + 2 * nt], v3 = pv[i + 3 * nt];
#pragma unroll
    for (int j = 0; j < V; ++j) {
      acc[j] = op.combine(acc[j], op.map(load_acc(v0.v[j])));
      acc[j] = op.combine(acc[j], op.map(load_acc(v1.v[j])));
      acc[j] = op.combine(acc[j], op.map(load_acc(v2.v[j])));
      acc[j] = op.combine(acc[j], op.map(load_acc(v3.v[j])));
    }
  }
  for (; i < nv; i += nt) {
    const VecT v0 = pv[i];
#pragma unroll
    for (int j = 0; j < V; ++j) acc[j] = op.combine(acc[j], op.map(load_acc(v0.v[j])));
  }
  for (I t = nv * V + tid; t < n; t += nt) acc[1 % V] = op.combine(acc[1 % V], op.map(load_acc(p[t])));
#pragma unroll
  for (int w = V / 2; w > 0; w /= 2)
#pragma unroll
    for (int j = 0; j < w; ++j) acc[j] = op.combine(acc[j], acc[j + w]);
  return acc[0];
}

// ---- kernels --------------------------------------------------------------------------------------
// Block (G, Y): G threads per output, Y outputs per block; grid (outputs / Y, splits).
template <class Op, class T, class OutT, class I>
static __global__ __launch_bounds__(kMaxGroup) void reduce_rows_kernel(RowsParams<I> p, Op op) {
  using A = typename Op::acc_t;
  __shared__ GroupScratch<A> scratch;
  const T* __restrict__ in = static_cast<const T*>(p.in);
  const int tx = threadIdx.x, G = blockDim.x;
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * p.chunk;
  const int64_t r1 = std::min<int64_t>(p.R, r0 + p.chunk);
  const I n = static_cast<I>(r1 > r0 ? r1 - r0 : 0);
  const int64_t rows_per_grid = static_cast<int64_t>(gridDim.x) * blockDim.y;
  // o0 is the same for the whole block, so every thread reaches group_reduce the same number of times.
  for (int64_t o0 = static_cast<int64_t>(blockIdx.x) * blockDim.y; o0 < p.O; o0 += rows_per_grid) {
    const int64_t o = o0 + threadIdx.y;
    A acc = op.init();
    if (o < p.O) {
      const T* row = in + p.kept.get(static_cast<I>(o));
      if (p.mode == RowMode::Contiguous) {
        acc = reduce_contiguous(row + static_cast<I>(r0), n, tx, G, op);
      } else if (p.mode == RowMode::Strided) {
        const I st = p.red_stride;
        row += static_cast<I>(r0) * st;
        I r = tx;
        for (; r + 3 * G < n; r += 4 * G) {
          const T x0 = row[r * st], x1 = row[(r + G) * st], x2 = row[(r + 2 * G) * st], x3 = row[(r + 3 * G) * st];
          acc = op.combine(acc, op.map(load_acc(x0)));
          acc = op.combine(acc, op.map(load_acc(x1)));
          acc = op.combine(acc, op.map(load_acc(x2)));
          acc = op.combine(acc, op.map(load_acc(x3)));
        }
        for (; r < n; r += G) acc = op.combine(acc, op.map(load_acc(row[r * st])));
      } else {
        for (I r = static_cast<I>(r0) + tx; r < static_cast<I>(r1); r += G)
          acc = op.combine(acc, op.map(load_acc(row[p.red.get(r)])));
      }
    }
    acc = group_reduce(acc, [&](A a, A b) { return op.combine(a, b); }, scratch);
    if (tx == 0 && o < p.O) {
      if (p.splits == 1) static_cast<OutT*>(p.out)[o] = convert<OutT>(op.finish(acc, p.R));
      else static_cast<A*>(p.partial)[static_cast<int64_t>(blockIdx.y) * p.O + o] = acc;
    }
  }
}

// Block (BX, BY): thread x owns kVec<T> neighbouring outputs, thread y (with grid.y) a split.
template <class Op, class T, class OutT, class I>
static __global__ __launch_bounds__(kColsBlock) void reduce_cols_kernel(ColsParams<I> p, Op op) {
  using A = typename Op::acc_t;
  constexpr int V = kVec<T>;
  using VecT = Vec<T, V>;
  const T* __restrict__ in = static_cast<const T*>(p.in);
  const int64_t s = static_cast<int64_t>(blockIdx.y) * blockDim.y + threadIdx.y;
  if (s >= p.splits) return;  // no block-wide synchronization below
  const int64_t r0 = s * p.chunk, r1 = std::min<int64_t>(p.R, r0 + p.chunk);
  const int64_t ncols = p.Q * p.Wv;
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < ncols;
       c += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t q = c / p.Wv, w0 = (c - q * p.Wv) * V;
    const int nvalid = static_cast<int>(std::min<int64_t>(V, p.W - w0));
    const T* base = in + p.kq.get(static_cast<I>(q)) + static_cast<I>(w0);
    A acc[V];
#pragma unroll
    for (int j = 0; j < V; ++j) acc[j] = op.init();
    if (p.vec && !p.red_general) {
      const I st = p.red_stride;
      I r = static_cast<I>(r0);
      const I re = static_cast<I>(r1);
      for (; r + 3 < re; r += 4) {
        const VecT v0 = *reinterpret_cast<const VecT*>(base + r * st);
        const VecT v1 = *reinterpret_cast<const VecT*>(base + (r + 1) * st);
        const VecT v2 = *reinterpret_cast<const VecT*>(base + (r + 2) * st);
        const VecT v3 = *reinterpret_cast<const VecT*>(base + (r + 3) * st);
#pragma unroll
        for (int j = 0; j < V; ++j) {
          acc[j] = op.combine(acc[j], op.map(load_acc(v0.v[j])));
          acc[j] = op.combine(acc[j], op.map(load_acc(v1.v[j])));
          acc[j] = op.combine(acc[j], op.map(load_acc(v2.v[j])));
          acc[j] = op.combine(acc[j], op.map(load_acc(v3.v[j])));
        }
      }
      for (; r < re; ++r) {
        const VecT v0 = *reinterpret_cast<const VecT*>(base + r * st);
#pragma unroll
        for (int j = 0; j < V; ++j) acc[j] = op.combine(acc[j], op.map(load_acc(v0.v[j])));
      }
    } else if (p.vec) {
      for (I r = static_cast<I>(r0); r < static_cast<I>(r1); ++r) {
        const VecT v0 = *reinterpret_cast<const VecT*>(base + p.red.get(r));
#pragma unroll
        for (int j = 0; j < V; ++j) acc[j] = op.combine(acc[j], op.map(load_acc(v0.v[j])));
      }
    } else {
      for (I r = static_cast<I>(r0); r < static_cast<I>(r1); ++r) {
        const T* rp = base + (p.red_general ? p.red.get(r) : r * p.red_stride);
#pragma unroll
        for (int j = 0; j < V; ++j)
          if (j < nvalid) acc[j] = op.combine(acc[j], op.map(load_acc(rp[j])));
      }
    }
    const int64_t o = q * p.W + w0;
#pragma unroll
    for (int j = 0; j < V; ++j) {
      if (j >= nvalid) break;
      if (p.splits == 1) static_cast<OutT*>(p.out)[o + j] = convert<OutT>(op.finish(acc[j], p.R));
      else static_cast<A*>(p.partial)[s * p.O + o + j] = acc[j];
    }
  }
}

// Folds partial[s][o] over s and finishes each output (Note [Deterministic splits]); with splits == 0
// it writes the value of an empty reduction. Block (BX, BY) = finalize_block(): thread x takes output
// o, threads y share its splits, and a fixed tree over y combines them.
template <class Op, class OutT>
static __global__ __launch_bounds__(256) void reduce_finalize_kernel(const typename Op::acc_t* __restrict__ partial,
                                                                     OutT* __restrict__ out, int64_t O, int64_t splits,
                                                                     int64_t R, Op op) {
  using A = typename Op::acc_t;
  __shared__ ColumnScratch<A, 256> scratch;
  for (int64_t o0 = static_cast<int64_t>(blockIdx.x) * blockDim.x; o0 < O;
       o0 += static_cast<int64_t>(gridDim.x) * blockDim.x) {  // uniform over the block
    const int64_t o = o0 + threadIdx.x;
    A acc = op.init();
    if (o < O)
      for (int64_t s = threadIdx.y; s < splits; s += blockDim.y) acc = op.combine(acc, partial[s * O + o]);
    acc = column_allreduce(acc, [&](A a, A b) { return op.combine(a, b); }, scratch.slots());
    if (threadIdx.y == 0 && o < O) out[o] = convert<OutT>(op.finish(acc, R));
  }
}

// ---- host -----------------------------------------------------------------------------------------
template <class Op, class OutT>
void launch_finalize(const typename Op::acc_t* partial, OutT* out, int64_t O, int64_t splits, int64_t R,
                     const Op& op, cudaStream_t stream, const char* name) {
  const dim3 block = finalize_block(O, splits);
  reduce_finalize_kernel<Op, OutT><<<grid_x(ceil_div(O, block.x)), block, 0, stream>>>(partial, out, O, splits, R, op);
  check_launch(name, "reduce_finalize_kernel");
}

template <class Op, class T, class OutT, class I>
void launch_rows(const T* in, OutT* out, const DimGroup& kept, const DimGroup& red, const Op& op, int device,
                 cudaStream_t stream, const char* name) {
  using A = typename Op::acc_t;
  RowsParams<I> p;
  p.in = in;
  p.out = out;
  p.kept = make_calc<I>(kept);
  p.O = kept.numel;
  p.R = red.numel;
  int64_t items = p.R;
  int64_t align = 1;
  if (red.n == 0 || (red.n == 1 && red.stride[0] == 1)) {
    p.mode = RowMode::Contiguous;
    items = ceil_div(p.R, kVec<T>);
    align = kVec<T>;
  } else if (red.n == 1) {
    p.mode = RowMode::Strided;
    p.red_stride = static_cast<I>(red.stride[0]);
  } else {
    p.mode = RowMode::General;
    p.red = make_calc<I>(red);
  }
  const int G = static_cast<int>(std::min<int64_t>(kMaxGroup, pow2_ceil(ceil_div(items, kItemsPerThread))));
  const int B = std::max(G, kRowsBlock);
  const dim3 block(G, B / G);
  const int64_t blocks_x = ceil_div(p.O, block.y);
  const SplitPlan sp = plan_splits(p.R, blocks_x, 1, static_cast<int64_t>(G) * kItemsPerThread * align, kMaxSplits, align,
                                   [&] { return resident_blocks(reduce_rows_kernel<Op, T, OutT, I>, B, device); });
  p.splits = sp.splits;
  p.chunk = sp.chunk;
  DataPtr ws;
  if (p.splits > 1) {
    ws = allocate_workspace(static_cast<size_t>(p.splits * p.O) * sizeof(A));
    p.partial = ws.get();
  }
  const dim3 grid(grid_x(blocks_x), static_cast<unsigned>(p.splits));
  reduce_rows_kernel<Op, T, OutT, I><<<grid, block, 0, stream>>>(p, op);
  check_launch(name, "reduce_rows_kernel");
  if (p.splits > 1) launch_finalize(static_cast<const A*>(p.partial), out, p.O, p.splits, p.R, op, stream, name);
}

template <class Op, class T, class OutT, class I>
void launch_cols(const T* in, OutT* out, const DimGroup& kept, const DimGroup& red, const Op& op, int device,
                 cudaStream_t stream, const char* name) {
  using A = typename Op::acc_t;
  constexpr int V = kVec<T>;
  ColsParams<I> p;
  p.in = in;
  p.out = out;
  const DimGroup kq = kept.outer();
  p.kq = make_calc<I>(kq);
  p.Q = kq.numel;
  p.W = kept.inner_size();
  p.Wv = ceil_div(p.W, V);
  p.O = kept.numel;
  p.R = red.numel;
  p.red_general = red.n > 1;
  if (p.red_general) p.red = make_calc<I>(red);
  else p.red_stride = static_cast<I>(red.n == 1 ? red.stride[0] : 0);
  bool vec = aligned16<T>(in) && p.W % V == 0;
  for (int d = 0; d < kq.n; ++d) vec = vec && kq.stride[d] % V == 0;
  for (int d = 0; d < red.n; ++d) vec = vec && red.stride[d] % V == 0;
  p.vec = vec;
  const int64_t ncols = p.Q * p.Wv;
  // kColsBlock threads: x along the columns, y (when the columns are few) over the splits.
  const int BX = static_cast<int>(std::min<int64_t>(kColsBlock, pow2_ceil(ncols)));
  const int BY = kColsBlock / BX;
  const dim3 block(BX, BY);
  const int64_t blocks_x = ceil_div(ncols, BX);
  const SplitPlan sp = plan_splits(p.R, blocks_x, BY, kColsMinRows, kMaxSplits, 1,
                                   [&] { return resident_blocks(reduce_cols_kernel<Op, T, OutT, I>, kColsBlock, device); });
  p.splits = sp.splits;
  p.chunk = sp.chunk;
  DataPtr ws;
  if (p.splits > 1) {
    ws = allocate_workspace(static_cast<size_t>(p.splits * p.O) * sizeof(A));
    p.partial = ws.get();
  }
  const dim3 grid(grid_x(blocks_x), static_cast<unsigned>(ceil_div(p.splits, BY)));
  reduce_cols_kernel<Op, T, OutT, I><<<grid, block, 0, stream>>>(p, op);
  check_launch(name, "reduce_cols_kernel");
  if (p.splits > 1) launch_finalize(static_cast<const A*>(p.partial), out, p.O, p.splits, p.R, op, stream, name);
}

// The tensor-level engine: groups the dims, picks the traversal and the index type, launches.
template <class T, class OutT, class Op>
void run_reduce(const Tensor& out, const Tensor& in_arg, int64_t nreduce, const Op& op, const char* name) {
  using A = typename Op::acc_t;
  const int device = in_arg.device().index();
  CurrentDevice guard(device);
  const cudaStream_t stream = stream_of(in_arg);
  OutT* dst = static_cast<OutT*>(out.data_ptr());
  auto groups = [&](const Tensor& t, DimGroup& kept, DimGroup& red) {
    const int nk = static_cast<int>(t.dim() - nreduce);
    kept = make_group(t.sizes().data(), t.strides().data(), nk);
    red = make_group(t.sizes().data() + nk, t.strides().data() + nk, static_cast<int>(nreduce));
  };
  Tensor in = in_arg;
  DimGroup kept, red;
  groups(in, kept, red);
  const int64_t O = kept.numel, R = red.numel;
  if (O == 0) return;
  if (R == 0) {  // the value of an empty reduction (only empty-safe ops get here)
    launch_finalize<Op, OutT>(static_cast<const A*>(nullptr), dst, O, 0, 0, op, stream, name);
    return;
  }
  if (kept.n > kMaxCalcDims || red.n > kMaxCalcDims) {  // too many dims to merge: read a dense copy
    in = in.contiguous();
    groups(in, kept, red);
  }
  const T* src = static_cast<const T*>(in.data_ptr());
  const bool columns = kept.n > 0 && kept.inner_stride() == 1 && kept.inner_size() > 1 &&
                       (red.n == 0 || red.inner_stride() != 1);
  const bool small = index_fits_int32(in);
  if (columns) {
    if (small) launch_cols<Op, T, OutT, int32_t>(src, dst, kept, red, op, device, stream, name);
    else launch_cols<Op, T, OutT, int64_t>(src, dst, kept, red, op, device, stream, name);
  } else {
    if (small) launch_rows<Op, T, OutT, int32_t>(src, dst, kept, red, op, device, stream, name);
    else launch_rows<Op, T, OutT, int64_t>(src, dst, kept, red, op, device, stream, name);
  }
}

}  // namespace tessera::cuda::red
