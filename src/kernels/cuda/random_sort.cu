// CUDA kernels of randperm and multinomial (ops/random_kernel.h): the CPU kernels' results for the
// same PhiloxParams, by the same algorithms made parallel where that changes no value.
//
//   randperm(n): key i = the 64 bits of element i (two words, Note [Philox stream]); the permutation
//     is the indices sorted by key, ties by index. CUB's radix sort is stable, so sorting (key, i)
//     pairs gives exactly the CPU's std::sort of (key, index) pairs.
//   multinomial, with replacement: sample (r, j) is element r * s + j; x = u * sum(row) picks the first
//     category whose cumulative sum exceeds x (std::upper_bound). The cumulative sums must be the CPU's
//     bit for bit, so each row is summed left to right by one thread (a tree scan would round
//     differently): one block per row loads tiles into shared memory, thread 0 scans them in order.
//     That is O(k) latency per row; rows run in parallel.
//   multinomial, without replacement: key (r, c) = p / -log1p(-u) (exponential race); the samples are
//     the s largest keys of the row, ties by index. Two stable radix sorts of (key, flat index): by
//     key descending, then by row, which leaves each row's categories in descending key order.
//     Same samples as the CPU unless two keys of a row are within an ulp (Note [Random rounding]).
//
// Data checks run first (one kernel, then a stream synchronization): the slot raises ValueError with
// the CPU's message, for the first failing row in the CPU's order of checks, before anything is drawn.
// Under CUDA graph capture the kernel still runs (it also builds the cumulative sums) but its verdict
// is not read back: invalid rows then give unspecified samples instead of an error.
// Sorting uses one CUB instantiation (uint64 keys, int64 values, 64-bit item counts) for everything.
#include <cub/device/device_radix_sort.cuh>

#include "kernels/cuda/random_common.cuh"
#include "tessera/error.h"

namespace tessera::cuda {
namespace {

// Sorts (key, value) pairs by key bits [0, end_bit), stably, on `stream`.
void sort_pairs(const uint64_t* keys_in, uint64_t* keys_out, const int64_t* vals_in, int64_t* vals_out, int64_t n,
                int end_bit, cudaStream_t stream) {
  size_t temp_bytes = 0;
  TS_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, keys_in, keys_out, vals_in, vals_out, n, 0,
                                                end_bit, stream));
  DataPtr temp = allocate_workspace(temp_bytes > 0 ? temp_bytes : 1);  // a null pointer would mean "size query"
  TS_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp.get(), temp_bytes, keys_in, keys_out, vals_in, vals_out, n, 0,
                                                end_bit, stream));
}

// Scratch for n (key, value) pairs, twice (CUB's input and output).
struct PairBuffers {
  DataPtr mem;
  uint64_t* keys[2];
  int64_t* vals[2];
  explicit PairBuffers(int64_t n) : mem(allocate_workspace(static_cast<size_t>(n) * 32)) {
    char* base = static_cast<char*>(mem.get());
    const size_t b = static_cast<size_t>(n) * 8;
    keys[0] = reinterpret_cast<uint64_t*>(base);
    keys[1] = reinterpret_cast<uint64_t*>(base + b);
    vals[0] = reinterpret_cast<int64_t*>(base + 2 * b);
    vals[1] = reinterpret_cast<int64_t*>(base + 3 * b);
  }
};

// ---- randperm ------------------------------------------------------------------------------------------
// keys[i] = element i's 64 random bits, vals[i] = i. One thread per Philox block (two elements).
static __global__ void __launch_bounds__(kRandomThreads)
    randperm_keys_kernel(uint64_t* keys, int64_t* vals, int64_t n, PhiloxParams p) {
  const int64_t nblocks = (n + 1) / 2, step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const PhiloxBase base = philox_base(p);
  for (int64_t b = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; b < nblocks; b += step) {
    const PhiloxBlock blk = philox4x32_10(base.seed, base.offset + static_cast<uint64_t>(b));
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int64_t i = 2 * b + e;
      if (i < n) {
        keys[i] = uint2_to_u64(blk.x[2 * e], blk.x[2 * e + 1]);
        vals[i] = i;
      }
    }
  }
}

// out[j * stride] = perm[j] in out's dtype.
template <class T>
static __global__ void __launch_bounds__(kRandomThreads)
    randperm_write_kernel(T* out, int64_t stride, const int64_t* perm, int64_t n) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < n; j += step)
    out[j * stride] = convert<T>(perm[j]);
}

void launch_randperm(void* out, DType dtype, int64_t stride, int64_t n, PhiloxParams p, cudaStream_t stream) {
  PairBuffers buf(n);
  randperm_keys_kernel<<<grid_for((n + 1) / 2, kRandomThreads, int64_t{1} << 16), kRandomThreads, 0, stream>>>(
      buf.keys[0], buf.vals[0], n, p);
  check_launch("randperm", "randperm_keys_kernel");
  sort_pairs(buf.keys[0], buf.keys[1], buf.vals[0], buf.vals[1], n, 64, stream);
  dispatch_device_dtype<DTypeSet::AllNoBool>(dtype, "randperm", [&]<class T>(TypeTag<T>) {
    randperm_write_kernel<T><<<grid_for(n, kRandomThreads, int64_t{1} << 16), kRandomThreads, 0, stream>>>(
        static_cast<T*>(out), stride, buf.vals[1], n);
    check_launch("randperm", "randperm_write_kernel");
  });
}

// ---- multinomial: the checks of each row, and its cumulative sums -----------------------------------
inline constexpr int kScanTile = 1024;  // doubles per shared-memory tile of the sequential scan

// One block per row (grid-stride over rows). bad_cat[r] = the first category that is negative, inf
// or nan (k if none); nonzero[r] = its count of p > 0; *first_bad_row = min over the rows that fail a
// check (need_nonzero is 1 with replacement, num_samples without). With cdf non-null, also
// cdf[r, c] = p[r, 0] + ... + p[r, c] summed left to right in float64, as std::partial_sum.
static __global__ void __launch_bounds__(kRandomThreads)
    multinomial_rows_kernel(const double* probs, int64_t rows, int64_t k, int64_t need_nonzero, double* cdf,
                            int64_t* bad_cat, int64_t* nonzero, unsigned long long* first_bad_row) {
  __shared__ double tile[kScanTile];
  __shared__ int64_t red[kWarp];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const double* row = probs + r * k;
    int64_t bad = k, nz = 0;
    for (int64_t c = threadIdx.x; c < k; c += blockDim.x) {
      const double v = row[c];
      if (!(::isfinite(v) && v >= 0.0) && c < bad) bad = c;
      nz += v > 0.0;
    }
    bad = block_reduce(bad, [](int64_t a, int64_t b) { return a < b ? a : b; }, k, red);
    nz = block_reduce(nz, [](int64_t a, int64_t b) { return a + b; }, int64_t{0}, red);
    if (cdf != nullptr) {
      double* out = cdf + r * k;
      double run = 0.0;  // thread 0's running sum
      for (int64_t base = 0; base < k; base += kScanTile) {
        const int len = static_cast<int>(k - base < kScanTile ? k - base : kScanTile);
        for (int t = threadIdx.x; t < len; t += blockDim.x) tile[t] = row[base + t];
        __syncthreads();
        if (threadIdx.x == 0) {
          for (int t = 0; t < len; ++t) {
            run = (base == 0 && t == 0) ? tile[0] : __dadd_rn(run, tile[t]);
            tile[t] = run;
          }
        }
        __syncthreads();
        for (int t = threadIdx.x; t < len; t += blockDim.x) out[base + t] = tile[t];
        __syncthreads();  // the next tile overwrites `tile`
      }
    }
    if (threadIdx.x == 0) {
      bad_cat[r] = bad;
      nonzero[r] = nz;
      if (bad < k || nz < need_nonzero) atomicMin(first_bad_row, static_cast<unsigned long long>(r));
    }
  }
}

// Raises the CPU kernel's ValueError for the first failing row, if any. Synchronizes the stream.
void check_multinomial_rows(const double* probs, int64_t rows, int64_t k, int64_t num_samples, bool replacement,
                            double* cdf, cudaStream_t stream) {
  DataPtr ws = allocate_workspace(static_cast<size_t>(rows) * 16 + 8);
  auto* bad_cat = static_cast<int64_t*>(ws.get());
  int64_t* nonzero = bad_cat + rows;
  auto* first_bad = reinterpret_cast<unsigned long long*>(nonzero + rows);
  TS_CUDA_CHECK(cudaMemsetAsync(first_bad, 0xff, sizeof(unsigned long long), stream));
  multinomial_rows_kernel<<<grid_for(rows, 1, int64_t{1} << 16), kRandomThreads, 0, stream>>>(
      probs, rows, k, replacement ? 1 : num_samples, cdf, bad_cat, nonzero, first_bad);
  check_launch("multinomial", "multinomial_rows_kernel");
  if (stream_is_capturing(stream)) return;  // no result can come back during graph capture
  unsigned long long bad_row = 0;
  TS_CUDA_CHECK(cudaMemcpyAsync(&bad_row, first_bad, sizeof bad_row, cudaMemcpyDeviceToHost, stream));
  TS_CUDA_CHECK(cudaStreamSynchronize(stream));
  if (bad_row == ~0ull) return;
  const int64_t r = static_cast<int64_t>(bad_row);
  int64_t info[2] = {0, 0};  // bad_cat[r], nonzero[r]
  TS_CUDA_CHECK(cudaMemcpyAsync(&info[0], bad_cat + r, 8, cudaMemcpyDeviceToHost, stream));
  TS_CUDA_CHECK(cudaMemcpyAsync(&info[1], nonzero + r, 8, cudaMemcpyDeviceToHost, stream));
  double v = 0;
  if (info[0] < k) TS_CUDA_CHECK(cudaMemcpyAsync(&v, probs + r * k + info[0], 8, cudaMemcpyDeviceToHost, stream));
  TS_CUDA_CHECK(cudaStreamSynchronize(stream));
  // The CPU's order of checks within a row: values, then the sum (> 0 iff some p > 0), then the count.
  TS_CHECK(info[0] >= k, ValueError,
           "multinomial: probability tensor contains either inf, nan or element < 0 (row ", r, ", category ", info[0],
           " is ", v, ")");
  TS_CHECK(info[1] > 0, ValueError, "multinomial: invalid multinomial distribution (sum of probabilities <= 0) in row ",
           r);
  TS_THROW(ValueError,
           "multinomial: invalid multinomial distribution (with replacement=False, not enough non-negative "
           "category to sample): row ", r, " has ", info[1], " nonzero categories but ", num_samples,
           " samples were requested");
}

// ---- multinomial with replacement ---------------------------------------------------------------------
struct MultinomialOut {
  int64_t* data;
  int64_t stride0, stride1;
};

// The first c in [0, k) with x < cdf[c], else k: std::upper_bound's loop, so ties and a nan x behave
// as on the CPU.
__device__ __forceinline__ int64_t upper_bound(const double* cdf, int64_t k, double x) {
  int64_t first = 0, len = k;
  while (len > 0) {
    const int64_t half = len >> 1, mid = first + half;
    if (x < cdf[mid]) {
      len = half;
    } else {
      first = mid + 1;
      len = len - half - 1;
    }
  }
  return first;
}

// Sample i = r * s + j takes element i's 53-bit uniform. One thread per Philox block (two samples).
static __global__ void __launch_bounds__(kRandomThreads)
    multinomial_sample_kernel(const double* probs, const double* cdf, int64_t rows, int64_t k, int64_t s,
                              PhiloxParams p, MultinomialOut out) {
  const int64_t n = rows * s, nblocks = (n + 1) / 2, step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const PhiloxBase base = philox_base(p);
  for (int64_t b = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; b < nblocks; b += step) {
    const PhiloxBlock blk = philox4x32_10(base.seed, base.offset + static_cast<uint64_t>(b));
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int64_t i = 2 * b + e;
      if (i >= n) break;
      const int64_t r = i / s, j = i - r * s;
      const double* crow = cdf + r * k;
      const double x = rnd::mul_rn(uint2_to_unit_double(blk.x[2 * e], blk.x[2 * e + 1]), crow[k - 1]);
      int64_t c = upper_bound(crow, k, x);
      if (c >= k) {  // rounding left x >= the total: the last nonzero category
        c = k - 1;
        while (c > 0 && probs[r * k + c] == 0.0) --c;
      }
      out.data[r * out.stride0 + j * out.stride1] = c;
    }
  }
}

// ---- multinomial without replacement -------------------------------------------------------------------
// keys[i] = the descending-order key of p[i] / -log1p(-u_i), vals[i] = i, over i in [0, rows * k).
static __global__ void __launch_bounds__(kRandomThreads)
    multinomial_keys_kernel(const double* probs, int64_t n, PhiloxParams p, uint64_t* keys, int64_t* vals) {
  const int64_t nblocks = (n + 1) / 2, step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const PhiloxBase base = philox_base(p);
  for (int64_t b = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; b < nblocks; b += step) {
    const PhiloxBlock blk = philox4x32_10(base.seed, base.offset + static_cast<uint64_t>(b));
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int64_t i = 2 * b + e;
      if (i < n) {
        const double u = uint2_to_unit_double(blk.x[2 * e], blk.x[2 * e + 1]);
        keys[i] = rnd::descending_key(rnd::exponential_key(probs[i], u));
        vals[i] = i;
      }
    }
  }
}

// keys[j] = the row of flat index vals[j].
static __global__ void __launch_bounds__(kRandomThreads)
    multinomial_row_keys_kernel(const int64_t* vals, int64_t n, int64_t k, uint64_t* keys) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < n; j += step)
    keys[j] = static_cast<uint64_t>(vals[j] / k);
}

// out[r, j] = the category of sorted[r * k + j], for j < s.
static __global__ void __launch_bounds__(kRandomThreads)
    multinomial_take_kernel(const int64_t* sorted, int64_t rows, int64_t k, int64_t s, MultinomialOut out) {
  const int64_t n = rows * s, step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    const int64_t r = i / s, j = i - r * s;
    out.data[r * out.stride0 + j * out.stride1] = sorted[r * k + j] - r * k;
  }
}

void launch_multinomial(const double* probs, int64_t rows, int64_t k, int64_t s, bool replacement, PhiloxParams p,
                        MultinomialOut out, cudaStream_t stream) {
  const unsigned cap = 1u << 16;
  if (replacement) {
    DataPtr cdf = allocate_workspace(static_cast<size_t>(rows * k) * sizeof(double));
    auto* c = static_cast<double*>(cdf.get());
    check_multinomial_rows(probs, rows, k, s, true, c, stream);
    multinomial_sample_kernel<<<grid_for((rows * s + 1) / 2, kRandomThreads, cap), kRandomThreads, 0, stream>>>(
        probs, c, rows, k, s, p, out);
    check_launch("multinomial", "multinomial_sample_kernel");
    return;
  }
  check_multinomial_rows(probs, rows, k, s, false, nullptr, stream);
  const int64_t n = rows * k;
  PairBuffers buf(n);
  multinomial_keys_kernel<<<grid_for((n + 1) / 2, kRandomThreads, cap), kRandomThreads, 0, stream>>>(
      probs, n, p, buf.keys[0], buf.vals[0]);
  check_launch("multinomial", "multinomial_keys_kernel");
  sort_pairs(buf.keys[0], buf.keys[1], buf.vals[0], buf.vals[1], n, 64, stream);  // by key, descending
  const int64_t* sorted = buf.vals[1];
  if (rows > 1) {  // then by row: stable, so each row keeps its descending key order
    multinomial_row_keys_kernel<<<grid_for(n, kRandomThreads, cap), kRandomThreads, 0, stream>>>(buf.vals[1], n, k,
                                                                                                 buf.keys[0]);
    check_launch("multinomial", "multinomial_row_keys_kernel");
    const int end_bit = 64 - __builtin_clzll(static_cast<unsigned long long>(rows - 1));
    sort_pairs(buf.keys[0], buf.keys[1], buf.vals[1], buf.vals[0], n, end_bit, stream);
    sorted = buf.vals[0];
  }
  multinomial_take_kernel<<<grid_for(rows * s, kRandomThreads, cap), kRandomThreads, 0, stream>>>(sorted, rows, k, s,
                                                                                                  out);
  check_launch("multinomial", "multinomial_take_kernel");
}

}  // namespace

// ---- tensor-level entries (registered by random.cu) -------------------------------------------------------
void randperm_cuda(const Tensor& out, PhiloxParams p) {
  const int64_t n = out.numel();
  if (n == 0) return;
  CurrentDevice guard(out.device().index());
  launch_randperm(out.data_ptr(), out.dtype(), out.dim() ? out.stride(0) : 1, n, p, stream_of(out));
}

void multinomial_cuda(const Tensor& out, const Tensor& probs, bool replacement, PhiloxParams p) {
  TS_CHECK(probs.dim() == 2 && probs.dtype() == DType::Float64 && probs.is_contiguous() && out.dim() == 2 &&
               out.dtype() == DType::Int64 && out.size(0) == probs.size(0),
           ValueError, "multinomial kernel: expected contiguous float64 probabilities (rows, k) and an int64 output "
           "(rows, num_samples), got ", dtype_name(probs.dtype()), " ", probs.sizes(), " and ", dtype_name(out.dtype()),
           " ", out.sizes());
  const int64_t rows = probs.size(0), k = probs.size(1), s = out.size(1);
  if (rows == 0 || s == 0) return;
  CurrentDevice guard(out.device().index());
  const MultinomialOut o{out.data_ptr<int64_t>(), out.stride(0), out.stride(1)};
  launch_multinomial(probs.data_ptr<double>(), rows, k, s, replacement, p, o, stream_of(out));
}

}  // namespace tessera::cuda
