// Layer norm and RMS norm on the GPU, backward: norm_backward_kernel and add_norm_backward_kernel
// (ops/norm_kernel.h). The family's layout, math and kernel shapes: norm_common.cuh. dweight / dbias
// come from partial rows (one per block row, or per chunk of rows in the looped path) folded by
// norm_finalize_kernel in a fixed order: deterministic, no atomics.

#include <cstdlib>
#include <string_view>

#include "kernels/cuda/norm_common.cuh"

namespace tessera::cuda {
namespace {

using namespace norm;

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

// 16-byte slots per thread at most: 16 values in registers (beside dy and the two partial sums), half
// of that for double.
template <class T>
constexpr int bwd_max_slots() {
  return std::is_same_v<T, double> ? 4 : 16 / kVec<T>;
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

void register_norm_backward() {
  norm_backward_kernel.set(DeviceType::CUDA, &norm_backward_cuda);
  add_norm_backward_kernel.set(DeviceType::CUDA, &add_norm_backward_cuda);
}

}  // namespace tessera::cuda
