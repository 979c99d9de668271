// Layer norm and RMS norm on the GPU, forward: norm_forward_kernel and add_norm_forward_kernel
// (ops/norm_kernel.h). The family's layout, math and kernel shapes: norm_common.cuh.
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

#include "kernels/cuda/norm_common.cuh"

namespace tessera::cuda {
namespace {

using namespace norm;

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

// ---- launching -------------------------------------------------------------------------------------

// 16-byte slots per thread at most: 32 values in registers, half of that for double.
template <class T>
constexpr int fwd_max_slots() {
  return std::is_same_v<T, double> ? 8 : 32 / kVec<T>;
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

}  // namespace

void register_norm_forward() {
  norm_forward_kernel.set(DeviceType::CUDA, &norm_forward_cuda);
  add_norm_forward_kernel.set(DeviceType::CUDA, &add_norm_forward_cuda);
}

}  // namespace tessera::cuda
