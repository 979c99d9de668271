// Inclusive scans (cumsum, cumprod) on the GPU: scan_kernel. `in` and `out` are contiguous with the
// same sizes and dtype (not bool), viewed as (outer, L, inner) around `dim`. Accumulators as on the
// CPU (kernels/cpu/scan.cpp): float64 for float32/float64, float32 for the 16-bit floats, int64 for
// integers (wrapping around as int64 arithmetic does); each running value is converted to the dtype.
//
// inner == 1 (rows):
//  * L <= kSmallRow: one thread per row, serially.
//  * otherwise a block per row walks it in tiles of kScanTile elements (Note [Block scan tile]),
//    carrying the running value from tile to tile.
//  * few long rows: each row is cut into chunks; a first kernel reduces every chunk to its total, a
//    second scans the totals of each row, a third scans each chunk starting from the total of the
//    chunks before it. All three are deterministic (fixed trees, no atomics).
// inner > 1 (columns): one thread per (outer, inner) column walks L serially, neighbouring threads on
// neighbouring columns (coalesced); few long columns are chunked the same three-step way.
// Offsets are int64 throughout: in/out are contiguous, so an element's offset is a multiply-add, and
// the divisions happen once per block or thread.
#include "kernels/cuda/reduce_rows.cuh"

namespace tessera::cuda::red {
namespace {

constexpr int kScanThreads = 256;
constexpr int kScanItems = 8;
constexpr int kScanTile = kScanThreads * kScanItems;  // 2048
constexpr int kScanTilePadded = kScanTile + kScanTile / 32;
constexpr int kSmallRow = 16;

template <class T>
using scan_acc_t = std::conditional_t<is_half_v<T>, float, std::conditional_t<std::is_floating_point_v<T>, double, int64_t>>;

template <class A, bool IsProd>
__device__ __forceinline__ A scan_combine(A a, A b) {
  if constexpr (std::is_integral_v<A>) {
    const uint64_t ua = static_cast<uint64_t>(a), ub = static_cast<uint64_t>(b);
    return static_cast<A>(IsProd ? ua * ub : ua + ub);
  } else {
    return IsProd ? a * b : a + b;
  }
}

template <class A, bool IsProd>
__device__ __forceinline__ A scan_ident() {
  return IsProd ? A(1) : A(0);
}

template <class A, class T>
__device__ __forceinline__ A scan_load(T x) {
  return static_cast<A>(load_acc(x));
}

// One slot per 32 elements of padding, so that thread t reading its kScanItems consecutive elements
// and the warp reading 32 consecutive ones both avoid shared-memory bank conflicts.
__device__ __forceinline__ int padded(int i) { return i + (i >> 5); }

// Note [Block scan tile]: the block loads n <= kScanTile elements coalesced into shared memory, each
// thread scans its kScanItems consecutive elements, a warp scan (shuffles) and a scan over the warp
// totals give every thread the combination of all elements before its own, and the results go back
// coalesced. Returns the carry for the next tile (identical in every thread). Every thread of the block
// must call it; it synchronizes before returning so that the shared arrays may be reused.
template <class A, bool IsProd, class Load, class Store>
__device__ __forceinline__ A scan_tile(A* tile, A* warp_tot, int n, A carry, Load load, Store store) {
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  constexpr int kWarps = kScanThreads / 32;
  const A ident = scan_ident<A, IsProd>();
#pragma unroll
  for (int k = 0; k < kScanItems; ++k) {
    const int idx = k * kScanThreads + tid;
    tile[padded(idx)] = idx < n ? load(idx) : ident;
  }
  __syncthreads();
  A v[kScanItems];
#pragma unroll
  for (int i = 0; i < kScanItems; ++i) v[i] = tile[padded(tid * kScanItems + i)];
#pragma unroll
  for (int i = 1; i < kScanItems; ++i) v[i] = scan_combine<A, IsProd>(v[i - 1], v[i]);
  A t = v[kScanItems - 1];
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const A y = shfl_up(t, o);
    if (lane >= o) t = scan_combine<A, IsProd>(y, t);
  }
  if (lane == 31) warp_tot[warp] = t;
  A excl = shfl_up(t, 1);
  if (lane == 0) excl = ident;
  __syncthreads();
  A before = carry;  // carry, then the warps before this one
  A total = carry;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) {
    if (w < warp) before = scan_combine<A, IsProd>(before, warp_tot[w]);
    total = scan_combine<A, IsProd>(total, warp_tot[w]);
  }
  before = scan_combine<A, IsProd>(before, excl);
#pragma unroll
  for (int i = 0; i < kScanItems; ++i) tile[padded(tid * kScanItems + i)] = scan_combine<A, IsProd>(before, v[i]);
  __syncthreads();
#pragma unroll
  for (int k = 0; k < kScanItems; ++k) {
    const int idx = k * kScanThreads + tid;
    if (idx < n) store(idx, tile[padded(idx)]);
  }
  __syncthreads();
  return total;
}

struct ScanParams {
  const void* in = nullptr;
  void* out = nullptr;
  void* carries = nullptr;  // A[outer][nchunks][inner]: chunk totals, scanned in place by step 2
  int64_t outer = 0, L = 0, inner = 1;
  int64_t chunk = 0, nchunks = 1;
};

// ---- rows (inner == 1) ------------------------------------------------------------------------------
template <class T, class A, bool IsProd>
static __global__ void scan_small_rows_kernel(ScanParams p) {
  const T* __restrict__ in = static_cast<const T*>(p.in);
  T* __restrict__ out = static_cast<T*>(p.out);
  for (int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; row < p.outer;
       row += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    A acc = scan_ident<A, IsProd>();
    for (int64_t l = 0; l < p.L; ++l) {
      acc = scan_combine<A, IsProd>(acc, scan_load<A>(in[row * p.L + l]));
      out[row * p.L + l] = convert<T>(acc);
    }
  }
}

// Block per (row, chunk); with carries, chunk c starts from the inclusive total of chunks < c.
template <class T, class A, bool IsProd>
static __global__ __launch_bounds__(kScanThreads) void scan_rows_kernel(ScanParams p) {
  __shared__ A tile[kScanTilePadded];
  __shared__ A warp_tot[kScanThreads / 32];
  const T* __restrict__ in = static_cast<const T*>(p.in);
  T* __restrict__ out = static_cast<T*>(p.out);
  const A* carries = static_cast<const A*>(p.carries);
  const int64_t nblocks = p.outer * p.nchunks;
  for (int64_t b = blockIdx.x; b < nblocks; b += gridDim.x) {  // uniform over the block
    const int64_t row = b / p.nchunks, c = b - row * p.nchunks;
    A carry = (carries != nullptr && c > 0) ? carries[row * p.nchunks + c - 1] : scan_ident<A, IsProd>();
    const int64_t start = c * p.chunk, end = std::min(p.L, start + p.chunk);
    for (int64_t t0 = start; t0 < end; t0 += kScanTile) {
      const T* src = in + row * p.L + t0;
      T* dst = out + row * p.L + t0;
      const int n = static_cast<int>(std::min<int64_t>(kScanTile, end - t0));
      carry = scan_tile<A, IsProd>(
          tile, warp_tot, n, carry, [&](int i) { return scan_load<A>(src[i]); },
          [&](int i, A v) { dst[i] = convert<T>(v); });
    }
  }
}

// Step 1 of chunked rows: the total of each (row, chunk).
template <class T, class A, bool IsProd>
static __global__ __launch_bounds__(kScanThreads) void scan_row_totals_kernel(ScanParams p) {
  __shared__ GroupScratch<A> scratch;
  const T* __restrict__ in = static_cast<const T*>(p.in);
  A* carries = static_cast<A*>(p.carries);
  const int64_t nblocks = p.outer * p.nchunks;
  for (int64_t b = blockIdx.x; b < nblocks; b += gridDim.x) {
    const int64_t row = b / p.nchunks, c = b - row * p.nchunks;
    const int64_t start = c * p.chunk, end = std::min(p.L, start + p.chunk);
    A acc = scan_ident<A, IsProd>();
    for (int64_t i = start + threadIdx.x; i < end; i += blockDim.x)
      acc = scan_combine<A, IsProd>(acc, scan_load<A>(in[row * p.L + i]));
    acc = group_reduce(acc, [](A a, A b2) { return scan_combine<A, IsProd>(a, b2); }, scratch);
    if (threadIdx.x == 0) carries[b] = acc;
  }
}

// Step 2 of chunked rows: inclusive scan of each row's chunk totals, in place.
template <class A, bool IsProd>
static __global__ __launch_bounds__(kScanThreads) void scan_row_carries_kernel(ScanParams p) {
  __shared__ A tile[kScanTilePadded];
  __shared__ A warp_tot[kScanThreads / 32];
  A* carries = static_cast<A*>(p.carries);
  for (int64_t row = blockIdx.x; row < p.outer; row += gridDim.x) {
    A carry = scan_ident<A, IsProd>();
    A* c = carries + row * p.nchunks;
    for (int64_t t0 = 0; t0 < p.nchunks; t0 += kScanTile) {
      const int n = static_cast<int>(std::min<int64_t>(kScanTile, p.nchunks - t0));
      carry = scan_tile<A, IsProd>(
          tile, warp_tot, n, carry, [&](int i) { return c[t0 + i]; }, [&](int i, A v) { c[t0 + i] = v; });
    }
  }
}

// ---- columns (inner > 1) ----------------------------------------------------------------------------
// One thread per (outer, chunk, inner) in that order, inner fastest. With carries == nullptr (one chunk)
// or after step 2, scans its chunk of the column starting from the chunks before it.
template <class T, class A, bool IsProd>
static __global__ void scan_cols_kernel(ScanParams p) {
  const T* __restrict__ in = static_cast<const T*>(p.in);
  T* __restrict__ out = static_cast<T*>(p.out);
  const A* carries = static_cast<const A*>(p.carries);
  const int64_t n = p.outer * p.nchunks * p.inner;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < n;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = t % p.inner, oc = t / p.inner, c = oc % p.nchunks, o = oc / p.nchunks;
    A acc = (carries != nullptr && c > 0) ? carries[t - p.inner] : scan_ident<A, IsProd>();
    const int64_t start = c * p.chunk, end = std::min(p.L, start + p.chunk);
    for (int64_t l = start; l < end; ++l) {
      const int64_t off = (o * p.L + l) * p.inner + i;
      acc = scan_combine<A, IsProd>(acc, scan_load<A>(in[off]));
      out[off] = convert<T>(acc);
    }
  }
}

// Step 1 of chunked columns: carries[(o, c, i)] = total of chunk c of column (o, i).
template <class T, class A, bool IsProd>
static __global__ void scan_col_totals_kernel(ScanParams p) {
  const T* __restrict__ in = static_cast<const T*>(p.in);
  A* carries = static_cast<A*>(p.carries);
  const int64_t n = p.outer * p.nchunks * p.inner;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < n;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = t % p.inner, oc = t / p.inner, c = oc % p.nchunks, o = oc / p.nchunks;
    A acc = scan_ident<A, IsProd>();
    const int64_t start = c * p.chunk, end = std::min(p.L, start + p.chunk);
    for (int64_t l = start; l < end; ++l) acc = scan_combine<A, IsProd>(acc, scan_load<A>(in[(o * p.L + l) * p.inner + i]));
    carries[t] = acc;
  }
}

// Step 2 of chunked columns: inclusive scan over the chunks of each column, in place.
template <class A, bool IsProd>
static __global__ void scan_col_carries_kernel(ScanParams p) {
  A* carries = static_cast<A*>(p.carries);
  const int64_t n = p.outer * p.inner;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < n;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = t % p.inner, o = t / p.inner;
    A* c = carries + o * p.nchunks * p.inner + i;
    A acc = scan_ident<A, IsProd>();
    for (int64_t k = 0; k < p.nchunks; ++k) {
      acc = scan_combine<A, IsProd>(acc, c[k * p.inner]);
      c[k * p.inner] = acc;
    }
  }
}

// ---- host -------------------------------------------------------------------------------------------
template <class T, bool IsProd>
void scan_typed(const Tensor& out, const Tensor& in, int64_t dim, const char* name) {
  using A = scan_acc_t<T>;
  const int device = in.device().index();
  const cudaStream_t stream = stream_of(in);
  ScanParams p;
  p.in = in.data_ptr();
  p.out = out.data_ptr();
  p.outer = 1;
  p.L = 1;
  p.inner = 1;
  for (int64_t d = 0; d < in.dim(); ++d) {
    if (d < dim) p.outer *= in.size(d);
    else if (d == dim) p.L = in.size(d);
    else p.inner *= in.size(d);
  }
  const int64_t sms = sm_count(device);
  DataPtr ws;
  if (p.inner == 1) {
    if (p.L <= kSmallRow) {
      scan_small_rows_kernel<T, A, IsProd><<<grid_x(ceil_div(p.outer, 256)), 256, 0, stream>>>(p);
      check_launch(name, "scan_small_rows_kernel");
      return;
    }
    const int64_t target_blocks = sms * 8;
    p.chunk = p.L;
    if (p.outer < target_blocks && p.L > 4 * kScanTile) {
      const int64_t want = std::min(ceil_div(target_blocks, p.outer), ceil_div(p.L, 2 * kScanTile));
      p.chunk = ceil_div(ceil_div(p.L, want), kScanTile) * kScanTile;
      p.nchunks = ceil_div(p.L, p.chunk);
    }
    if (p.nchunks > 1) {
      ws = allocate_workspace(static_cast<size_t>(p.outer * p.nchunks) * sizeof(A));
      p.carries = ws.get();
      scan_row_totals_kernel<T, A, IsProd><<<grid_x(p.outer * p.nchunks), kScanThreads, 0, stream>>>(p);
      check_launch(name, "scan_row_totals_kernel");
      scan_row_carries_kernel<A, IsProd><<<grid_x(p.outer), kScanThreads, 0, stream>>>(p);
      check_launch(name, "scan_row_carries_kernel");
    }
    scan_rows_kernel<T, A, IsProd><<<grid_x(p.outer * p.nchunks), kScanThreads, 0, stream>>>(p);
    check_launch(name, "scan_rows_kernel");
    return;
  }
  const int64_t cols = p.outer * p.inner, target_threads = resident_threads(device);
  p.chunk = p.L;
  if (cols < target_threads / 2 && p.L > 64) {
    const int64_t want = std::min(ceil_div(target_threads, cols), ceil_div(p.L, 32));
    p.chunk = ceil_div(p.L, want);
    p.nchunks = ceil_div(p.L, p.chunk);
  }
  const int64_t threads = cols * p.nchunks;
  if (p.nchunks > 1) {
    ws = allocate_workspace(static_cast<size_t>(threads) * sizeof(A));
    p.carries = ws.get();
    scan_col_totals_kernel<T, A, IsProd><<<grid_x(ceil_div(threads, 256)), 256, 0, stream>>>(p);
    check_launch(name, "scan_col_totals_kernel");
    scan_col_carries_kernel<A, IsProd><<<grid_x(ceil_div(cols, 256)), 256, 0, stream>>>(p);
    check_launch(name, "scan_col_carries_kernel");
  }
  scan_cols_kernel<T, A, IsProd><<<grid_x(ceil_div(threads, 256)), 256, 0, stream>>>(p);
  check_launch(name, "scan_cols_kernel");
}

}  // namespace

void scan_cuda(const Tensor& out, const Tensor& in, int64_t dim, ScanOp op) {
  if (in.numel() == 0) return;
  CurrentDevice guard(in.device().index());
  const bool prod = op == ScanOp::Prod;
  const char* name = prod ? "cumprod" : "cumsum";
  dispatch_device_dtype<DTypeSet::AllNoBool>(in.dtype(), name, [&]<class T>(TypeTag<T>) {
    if (prod) scan_typed<T, true>(out, in, dim, name);
    else scan_typed<T, false>(out, in, dim, name);
  });
}

}  // namespace tessera::cuda::red
