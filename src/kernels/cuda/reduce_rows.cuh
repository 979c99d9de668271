// The row skeleton of the CUDA reductions that keep a richer state than one accumulator: argmax/argmin
// (arg_reduce.cu), var/std (var.cu) and logsumexp (reduce_logsumexp.cu). Their input is (kept..., R)
// with a single reduced dim R last, any strides (ops/reduce_meta.h rows_view: R is unit-stride, or the
// innermost kept dim is, or the op layer made it contiguous).
//
// A row op supplies:
//   using elem_t (device element type), state_t (trivially copyable, a multiple of 4 bytes), ctx_t;
//   ctx_t context(const elem_t* row, int64_t R)   per-row data read once (R may be 0: read nothing);
//   state_t init();  void accumulate(state_t&, dacc_t<elem_t> x, int64_t r, const ctx_t&);
//   state_t combine(state_t, state_t)   associative and commutative, so any tree gives one result;
//   void finish(int64_t o, const state_t&, const ctx_t&, int64_t R)   writes output o.
// Traversal: G threads per output along R (Note [Reduction groups]); when R is strided and the
// innermost kept dim is unit-stride, G = 1 and neighbouring threads take neighbouring outputs, so each
// step of R is one coalesced read. Too few outputs split R over grid.y (Note [Deterministic splits]).
// Offsets are int64 here: the per-element index is r * stride with no division, so 64-bit math costs
// little; the kept offsets (divisions) are computed once per output.
#pragma once
#include <algorithm>

#include "kernels/cuda/reduce_common.cuh"
#include "ops/reduce_kernel.h"

namespace tessera::cuda::red {

struct RowsShape {
  const void* in = nullptr;
  void* partial = nullptr;       // state_t[splits][O]
  OffsetCalc<int64_t> kept;      // output index -> offset of its row's first element
  int64_t O = 0, R = 0, st = 1;  // outputs, row length, stride along the row
  int64_t chunk = 0, splits = 1;
};

template <class Op>
static __global__ __launch_bounds__(512) void rows_kernel(RowsShape p, Op op) {
  using S = typename Op::state_t;
  using T = typename Op::elem_t;
  __shared__ GroupScratch<S> scratch;
  const T* __restrict__ in = static_cast<const T*>(p.in);
  const int tx = threadIdx.x, G = blockDim.x;
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * p.chunk;
  const int64_t r1 = std::min<int64_t>(p.R, r0 + p.chunk);
  const int64_t st = p.st;
  // o0 is the same for the whole block, so every thread reaches group_reduce equally often.
  for (int64_t o0 = static_cast<int64_t>(blockIdx.x) * blockDim.y; o0 < p.O;
       o0 += static_cast<int64_t>(gridDim.x) * blockDim.y) {
    const int64_t o = o0 + threadIdx.y;
    S state = op.init();
    const T* row = nullptr;
    if (o < p.O) {
      row = in + p.kept.get(o);
      const auto ctx = op.context(row, p.R);
      int64_t r = r0 + tx;
      for (; r + 3 * G < r1; r += 4 * G) {
        const auto x0 = load_acc(row[r * st]), x1 = load_acc(row[(r + G) * st]);
        const auto x2 = load_acc(row[(r + 2 * G) * st]), x3 = load_acc(row[(r + 3 * G) * st]);
        op.accumulate(state, x0, r, ctx);
        op.accumulate(state, x1, r + G, ctx);
        op.accumulate(state, x2, r + 2 * G, ctx);
        op.accumulate(state, x3, r + 3 * G, ctx);
      }
      for (; r < r1; r += G) op.accumulate(state, load_acc(row[r * st]), r, ctx);
    }
    state = group_reduce(state, [&](const S& a, const S& b) { return op.combine(a, b); }, scratch);
    if (tx == 0 && o < p.O) {
      if (p.splits == 1) op.finish(o, state, op.context(row, p.R), p.R);
      else static_cast<S*>(p.partial)[static_cast<int64_t>(blockIdx.y) * p.O + o] = state;
    }
  }
}

// Folds the partial states of each output and finishes it; with splits == 0 it finishes the empty
// state (R == 0). Block (BX, BY) = finalize_block(): thread x takes output o, threads y its splits.
template <class Op>
static __global__ __launch_bounds__(256) void rows_finalize_kernel(RowsShape p, Op op) {
  using S = typename Op::state_t;
  using T = typename Op::elem_t;
  __shared__ ColumnScratch<S, 256> scratch;
  const S* __restrict__ partial = static_cast<const S*>(p.partial);
  for (int64_t o0 = static_cast<int64_t>(blockIdx.x) * blockDim.x; o0 < p.O;
       o0 += static_cast<int64_t>(gridDim.x) * blockDim.x) {  // uniform over the block
    const int64_t o = o0 + threadIdx.x;
    S state = op.init();
    if (o < p.O)
      for (int64_t s = threadIdx.y; s < p.splits; s += blockDim.y) state = op.combine(state, partial[s * p.O + o]);
    state = column_allreduce(state, [&](const S& a, const S& b) { return op.combine(a, b); }, scratch.slots());
    if (threadIdx.y == 0 && o < p.O) {
      const T* row = static_cast<const T*>(p.in) + p.kept.get(o);
      op.finish(o, state, op.context(row, p.R), p.R);
    }
  }
}

// Runs `op` over the rows of `in` = (kept..., R). The caller has made in's device current.
template <class Op>
void run_rows(const Tensor& in_arg, const Op& op, const char* name) {
  using S = typename Op::state_t;
  const int device = in_arg.device().index();
  const cudaStream_t stream = stream_of(in_arg);
  Tensor in = in_arg;
  auto kept_of = [](const Tensor& t) {
    return make_group(t.sizes().data(), t.strides().data(), static_cast<int>(t.dim() - 1));
  };
  DimGroup kept = kept_of(in);
  if (kept.n > kMaxCalcDims) {
    in = in.contiguous();
    kept = kept_of(in);
  }
  RowsShape p;
  p.in = in.data_ptr();
  p.kept = make_calc<int64_t>(kept);
  p.O = kept.numel;
  p.R = in.size(-1);
  p.st = in.stride(-1);
  if (p.O == 0) return;
  if (p.R == 0) {  // every output is the empty state's
    p.splits = 0;
    const dim3 fblock = finalize_block(p.O, 0);
    rows_finalize_kernel<Op><<<grid_x(ceil_div(p.O, fblock.x)), fblock, 0, stream>>>(p, op);
    check_launch(name, "rows_finalize_kernel");
    return;
  }
  const bool columns = p.R > 1 && p.st != 1 && kept.n > 0 && kept.inner_stride() == 1 && kept.inner_size() > 1;
  const int G = columns ? 1 : static_cast<int>(std::min<int64_t>(512, pow2_ceil(ceil_div(p.R, 8))));
  const int B = std::max(G, 256);
  const dim3 block(G, B / G);
  const int64_t blocks_x = ceil_div(p.O, block.y);
  const SplitPlan sp = plan_splits(p.R, blocks_x, 1, std::max<int64_t>(32, G * 8), 4096, 1,
                                   [&] { return resident_blocks(rows_kernel<Op>, B, device); });
  p.splits = sp.splits;
  p.chunk = sp.chunk;
  DataPtr ws;
  if (p.splits > 1) {
    ws = allocate_workspace(static_cast<size_t>(p.splits * p.O) * sizeof(S));
    p.partial = ws.get();
  }
  rows_kernel<Op><<<dim3(grid_x(blocks_x), static_cast<unsigned>(p.splits)), block, 0, stream>>>(p, op);
  check_launch(name, "rows_kernel");
  if (p.splits > 1) {
    const dim3 fblock = finalize_block(p.O, p.splits);
    rows_finalize_kernel<Op><<<grid_x(ceil_div(p.O, fblock.x)), fblock, 0, stream>>>(p, op);
    check_launch(name, "rows_finalize_kernel");
  }
}

// ---- the entries of the other kernel files, registered by reduce.cu ----------------------------------
void arg_reduce_cuda(const Tensor& values, const Tensor& indices, const Tensor& in, bool is_max);
void var_cuda(const Tensor& var, const Tensor& mean, const Tensor& in, double correction, bool take_sqrt);
void logsumexp_cuda(const Tensor& out, const Tensor& in);
void scan_cuda(const Tensor& out, const Tensor& in, int64_t dim, ScanOp op);
void softmax_cuda(const Tensor& out, const Tensor& x, int64_t outer, int64_t dim_size, int64_t inner, bool log);

}  // namespace tessera::cuda::red
