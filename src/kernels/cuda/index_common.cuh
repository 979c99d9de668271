// What the CUDA kernels of the indexing, ordering and shape families share (index.cu,
// gather_scatter.cu, masked.cu, sort.cu, unique.cu, shape_ops.cu, range.cu):
//  - Strided<N, I>: the element offsets of N operands at a row-major linear position, with dims
//    merged where every operand's strides chain, in 32-bit (I = uint32_t) or 64-bit (int64_t) math;
//  - Note [Bad index flag]: how kernels report an out-of-range index value to the host;
//  - atomic and plain accumulation with the CPU kernels' arithmetic (index_put, index_add, scatter_add);
//  - small host <-> device transfers (kernel tables, one element read back for an error message).
// Tensors never have negative strides (as_strided and empty_strided refuse them), so every offset
// here is non-negative and the largest one is sum((size - 1) * stride).
#pragma once
#include "runtime/cuda/deferred_check.h"
#include <array>
#include <cstdint>
#include <cstring>
#include <cub/block/block_scan.cuh>
#include <limits>

#include "kernels/cuda/cuda_common.cuh"
#include "tensor/tensor_impl.h"

namespace tessera::cuda {

// The family files register through register_index() (index.cu).
void register_gather_scatter();  // gather_scatter.cu
void register_masked();          // masked.cu: masked_fill, count_nonzero, nonzero, masked_select, min/max, one_hot
void register_sort();            // sort.cu: sort, topk
void register_unique();          // unique.cu
void register_range();           // range.cu: arange

// Whether accumulating writes with repeated targets (index_put / index_add, scatter_add) take their
// sorted, bitwise reproducible path instead of atomics: when the determinism switch is on
// (tessera/determinism.h).
bool deterministic_accumulate();

inline constexpr int kMaxDims = 25;  // as ElementwiseIter; more (non-mergeable) dims raise NotImplementedError
inline constexpr int kThreads = 256;

// ---- strided offsets -----------------------------------------------------------------------------

// The element offsets of N operands that share one iteration shape. Dims are stored innermost first.
template <int N, class I>
struct Strided {
  int ndim = 0;
  I sizes[kMaxDims];
  I strides[N][kMaxDims];

  __device__ __forceinline__ void offsets(I linear, I (&off)[N]) const {
#pragma unroll
    for (int t = 0; t < N; ++t) off[t] = 0;
    for (int d = 0; d < ndim; ++d) {
      const I c = linear % sizes[d];
      linear /= sizes[d];
#pragma unroll
      for (int t = 0; t < N; ++t) off[t] += c * strides[t][d];
    }
  }
  __device__ __forceinline__ I offset(I linear) const {  // N == 1
    I off[N];
    offsets(linear, off);
    return off[0];
  }
};

// Builds a Strided over row-major `sizes` with one stride vector per operand. With `merge`, size-1
// dims are dropped and neighbours whose strides chain in every operand become one dim (the row-major
// linear order is unchanged); without it every dim is kept (kernels that need coordinates).
template <int N, class I>
Strided<N, I> make_strided(const Shape& sizes, const std::array<const Shape*, N>& strides, const char* op,
                           bool merge = true) {
  Strided<N, I> s;
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    if (merge && sizes[d] == 1) continue;
    if (merge && s.ndim > 0) {
      bool chain = true;
      for (int t = 0; t < N; ++t)
        chain = chain && (*strides[t])[d] == static_cast<int64_t>(s.strides[t][s.ndim - 1]) *
                                                 static_cast<int64_t>(s.sizes[s.ndim - 1]);
      if (chain) {
        s.sizes[s.ndim - 1] = static_cast<I>(static_cast<int64_t>(s.sizes[s.ndim - 1]) * sizes[d]);
        continue;
      }
    }
    TS_CHECK(s.ndim < kMaxDims, NotImplementedError, op, ": tensors with more than ", kMaxDims,
             " dims that cannot be merged are not supported on cuda");
    s.sizes[s.ndim] = static_cast<I>(sizes[d]);
    for (int t = 0; t < N; ++t) s.strides[t][s.ndim] = static_cast<I>((*strides[t])[d]);
    ++s.ndim;
  }
  return s;
}

// The largest element offset reached by (sizes, strides), plus one (0 for an empty layout).
inline int64_t span_of(const Shape& sizes, const Shape& strides) {
  int64_t span = 1;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 0) return 0;
    span += (sizes[d] - 1) * strides[d];
  }
  return span;
}
inline int64_t span_of(const Tensor& t) { return span_of(t.sizes(), t.strides()); }

// Strides of `t` broadcast to `sizes` (trailing dims aligned; missing and size-1 dims get stride 0).
inline Shape broadcast_strides(const Tensor& t, const Shape& sizes) {
  Shape st(sizes.size(), 0);
  const int64_t off = static_cast<int64_t>(sizes.size()) - t.dim();
  for (int64_t d = 0; d < t.dim(); ++d)
    if (t.size(d) != 1) st[off + d] = t.stride(d);
  return st;
}

// 32-bit math is used when every count and element offset given stays below 2^31.
inline bool fits32(std::initializer_list<int64_t> values) {
  for (int64_t v : values)
    if (v > std::numeric_limits<int32_t>::max()) return false;
  return true;
}

// Calls f(TypeTag<I>{}) with I = uint32_t when `small`, else int64_t.
template <class F>
decltype(auto) dispatch_index(bool small, F&& f) {
  if (small) return f(TypeTag<uint32_t>{});
  return f(TypeTag<int64_t>{});
}

// Calls f(TypeTag<U>{}) with U an unsigned integer as wide as one element of dtype `t`: for kernels
// that only move elements.
template <class F>
void dispatch_width(DType t, const char* op, F&& f) {
  switch (element_size(t)) {
    case 1: f(TypeTag<uint8_t>{}); return;
    case 2: f(TypeTag<uint16_t>{}); return;
    case 4: f(TypeTag<uint32_t>{}); return;
    case 8: f(TypeTag<uint64_t>{}); return;
  }
  TS_THROW(DTypeError, op, ": unsupported element size ", element_size(t));
}

// Grid-stride loop bounds for n items.
inline unsigned blocks_for(int64_t n) { return grid_for(n, kThreads); }

// ---- Note [Bad index flag] ------------------------------------------------------------------------
// A kernel that reads index values cannot raise: it skips an out-of-range value (never reading or
// writing through it) and records it in a device word as ~key with atomicMax, so the word keeps the
// smallest key (the first bad position in the kernel's order) and 0 means "none". A second word is
// free for the entry's own use (index_put records there that its offsets are not strictly increasing).
// At the end of the entry the words go to defer(): Note [Deferred device checks]
// (runtime/cuda/deferred_check.h) queues their copy to the host and raises the op's IndexError, as the
// CPU kernel words it, at the next synchronization or checked op; nothing waits for the device here.
// The closure reads the bad value itself (one small copy, on the error path only). index_put alone
// still reads its words at once (read(): one synchronization), because its second word chooses how
// the writes run.
// While the stream is capturing a CUDA graph nothing may synchronize: the words are not allocated,
// kernels get a null pointer, bad values are still skipped but not reported.
class DeviceStatus {
 public:
  explicit DeviceStatus(cudaStream_t stream) : stream_(stream) {
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    TS_CUDA_CHECK(cudaStreamIsCapturing(stream, &capture));
    if (capture != cudaStreamCaptureStatusNone) return;
    buf_ = allocate_workspace(2 * sizeof(unsigned long long));
    TS_CUDA_CHECK(cudaMemsetAsync(buf_.get(), 0, 2 * sizeof(unsigned long long), stream));
  }
  bool checking() const { return buf_.get() != nullptr; }
  // Queues the check of the words; `raise` runs with them once they reach the host and throws on a
  // bad index (Note [Deferred device checks]). The closure must own what it reads (tensors by value).
  void defer(DeferredRaise raise) const {
    if (checking()) defer_status_check(stream_, buf_.get(), std::move(raise));
  }
  unsigned long long* dev() const { return static_cast<unsigned long long*>(buf_.get()); }
  // Waits for the stream and returns {bad word, second word}; the bad key is ~word when word != 0.
  std::array<unsigned long long, 2> read() const {
    std::array<unsigned long long, 2> h{0, 0};
    if (!checking()) return h;
    TS_CUDA_CHECK(cudaMemcpyAsync(h.data(), buf_.get(), sizeof(h), cudaMemcpyDeviceToHost, stream_));
    TS_CUDA_CHECK(cudaStreamSynchronize(stream_));
    return h;
  }

 private:
  cudaStream_t stream_;
  DataPtr buf_;
};

__device__ __forceinline__ void report_bad(unsigned long long* status, uint64_t key) {
  if (status == nullptr) return;
  const unsigned long long w = ~static_cast<unsigned long long>(key);
  if (w > *reinterpret_cast<volatile unsigned long long*>(status)) atomicMax(status, w);
}

// One int32/int64 element of device memory, as int64 (error messages only; synchronizes).
inline int64_t read_index_value(const void* ptr, DType dtype, cudaStream_t stream) {
  int64_t v64 = 0;
  int32_t v32 = 0;
  const bool is32 = dtype == kInt32;
  TS_CUDA_CHECK(cudaMemcpyAsync(is32 ? static_cast<void*>(&v32) : static_cast<void*>(&v64), ptr,
                                is32 ? sizeof(v32) : sizeof(v64), cudaMemcpyDeviceToHost, stream));
  TS_CUDA_CHECK(cudaStreamSynchronize(stream));
  return is32 ? v32 : v64;
}

// Element offset of the row-major position `pos` of (sizes, strides), on the host.
inline int64_t host_offset(int64_t pos, const Shape& sizes, const Shape& strides) {
  int64_t off = 0;
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    off += (pos % sizes[d]) * strides[d];
    pos /= sizes[d];
  }
  return off;
}

// Copies a host table to a stream-ordered device workspace through pinned memory (so the copy is
// truly asynchronous); the pinned block is handed back once the copy has run (record_host_use).
inline DataPtr upload(const void* host, size_t nbytes, cudaStream_t stream) {
  DataPtr dev = allocate_workspace(nbytes);
  if (nbytes == 0) return dev;
  DataPtr pinned = pinned_host_allocator()->allocate(nbytes, kCPU);
  std::memcpy(pinned.get(), host, nbytes);
  TS_CUDA_CHECK(cudaMemcpyAsync(dev.get(), pinned.get(), nbytes, cudaMemcpyHostToDevice, stream));
  record_host_use(pinned.get(), stream);
  return dev;
}

// ---- accumulation ----------------------------------------------------------------------------------
// The CPU kernels accumulate as d = convert<T>(acc(d) + alpha * acc(v)) with acc float for the 16-bit
// floats and T itself otherwise; integers wrap (done here in unsigned arithmetic, which has no
// overflow), bool is d || (alpha && v).

// alpha as the device accumulation type of T.
template <class T>
dacc_t<T> scalar_to_acc(const Scalar& s) {
  if constexpr (std::is_same_v<T, bool>) return s.to_bool();
  else if constexpr (std::is_integral_v<T>) return s.to<T>();
  else if constexpr (std::is_same_v<T, double>) return s.to_double();
  else return s.to<float>();
}

template <class T>
__device__ __forceinline__ auto unsigned_of(T v) {
  if constexpr (sizeof(T) == 1) return static_cast<uint32_t>(static_cast<uint8_t>(v));
  else if constexpr (sizeof(T) == 4) return static_cast<uint32_t>(v);
  else return static_cast<unsigned long long>(v);
}

// d + alpha * v, rounded once to T, as the CPU kernels compute it.
template <class T>
__device__ __forceinline__ T axpy_value(T d, dacc_t<T> a, T v) {
  if constexpr (std::is_same_v<T, bool>) {
    return d || (a && v);
  } else if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(unsigned_of(d) + unsigned_of(a) * unsigned_of(v));
  } else {
    using A = dacc_t<T>;
    return convert<T>(convert<A>(d) + a * convert<A>(v));
  }
}

// Updates the 16 bits at `p` with f(old bits) -> new bits, atomically.
template <class F>
__device__ __forceinline__ void atomic_update_u16(uint16_t* p, F f) {
  unsigned short* a = reinterpret_cast<unsigned short*>(p);
  unsigned short old = *a, assumed;
  do {
    assumed = old;
    old = atomicCAS(a, assumed, f(assumed));
  } while (assumed != old);
}

// Adds `add` (mod 256) to the byte at `p`, atomically, through a CAS on its aligned 32-bit word (the
// word lies inside the allocation: device allocations are at least 256-byte aligned and sized).
__device__ __forceinline__ void atomic_add_u8(uint8_t* p, uint32_t add) {
  const uintptr_t addr = reinterpret_cast<uintptr_t>(p);
  unsigned int* word = reinterpret_cast<unsigned int*>(addr & ~uintptr_t(3));
  const unsigned shift = static_cast<unsigned>(addr & 3) * 8;
  unsigned int old = *word, assumed;
  do {
    assumed = old;
    const unsigned int byte = ((assumed >> shift) + add) & 0xffu;
    old = atomicCAS(word, assumed, (assumed & ~(0xffu << shift)) | (byte << shift));
  } while (assumed != old);
}

// *d += alpha * v atomically (the order of concurrent additions is not fixed: floats may differ from
// the CPU's serial sum in the last bits; integers and bool are exact). `alpha_one` lets the 16-bit
// floats use the hardware atomic add (exact then: v needs no rounding).
template <class T>
__device__ __forceinline__ void atomic_axpy(T* d, dacc_t<T> a, T v, bool alpha_one) {
  if constexpr (std::is_same_v<T, bool>) {
    if (a && v) *d = true;  // every writer stores the same value: no read-modify-write race
  } else if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    atomicAdd(d, a * v);
  } else if constexpr (std::is_same_v<T, int32_t>) {
    atomicAdd(reinterpret_cast<unsigned int*>(d), unsigned_of(a) * unsigned_of(v));
  } else if constexpr (std::is_same_v<T, int64_t>) {
    atomicAdd(reinterpret_cast<unsigned long long*>(d), unsigned_of(a) * unsigned_of(v));
  } else if constexpr (sizeof(T) == 1) {
    atomic_add_u8(reinterpret_cast<uint8_t*>(d), unsigned_of(a) * unsigned_of(v));
  } else {  // __half, __nv_bfloat16 (atomicAdd on both from sm_70: hardware on sm_90, a CAS loop before)
    if (alpha_one) {
      atomicAdd(d, v);
      return;
    }
    const float fv = a * convert<float>(v);
    atomic_update_u16(reinterpret_cast<uint16_t*>(d), [fv](unsigned short bits) -> unsigned short {
      T old;
      std::memcpy(&old, &bits, 2);
      const T nv = convert<T>(convert<float>(old) + fv);
      unsigned short out;
      std::memcpy(&out, &nv, 2);
      return out;
    });
  }
}

// ---- Note [Ordered compaction] ------------------------------------------------------------------------
// nonzero, masked_select and unique write a value for every flagged position of [0, n) at the rank of
// that position among the flagged ones, so that the output keeps row-major order. Three launches:
// count the flags of each of G chunks (a block per chunk), scan the G counts in one block (G <= 2048;
// starts[G] is the total), then each block walks its chunk again in tiles of kThreads positions,
// ranking inside the tile with a block scan. An Op provides
//     __device__ bool flag(int64_t pos) const;
//     __device__ void emit(int64_t pos, int64_t rank, bool flagged) const;   // called for every pos,
// where rank is the number of flagged positions before pos.
inline constexpr int64_t kMaxChunks = 2048;
inline int64_t compaction_chunks(int64_t n) {
  return std::max<int64_t>(1, std::min<int64_t>(kMaxChunks, (n + kThreads * 16 - 1) / (kThreads * 16)));
}

template <class Op>
static __global__ void compact_count_kernel(Op op, int64_t n, int64_t chunks, int64_t* counts) {
  __shared__ int64_t shared[32];
  const int64_t c = blockIdx.x;
  const int64_t b0 = n / chunks * c + std::min<int64_t>(c, n % chunks);
  const int64_t b1 = b0 + n / chunks + (c < n % chunks ? 1 : 0);
  int64_t k = 0;
  for (int64_t pos = b0 + threadIdx.x; pos < b1; pos += blockDim.x) k += op.flag(pos) ? 1 : 0;
  k = block_reduce(k, [](int64_t a, int64_t b) { return a + b; }, int64_t(0), shared);
  if (threadIdx.x == 0) counts[c] = k;
}

// One block of kScanThreads threads: starts[c] = counts[0] + ... + counts[c-1] for c <= chunks.
// __launch_bounds__ is required: unbounded, the int64 block scan compiles to 80 registers per thread,
// and 1024 x 80 exceeds the 64K registers of an SM, so the launch fails with "too many resources".
inline constexpr int kScanThreads = 1024;
static_assert(2 * kScanThreads >= kMaxChunks, "compact_scan_kernel scans two counts per thread");
static __global__ void __launch_bounds__(kScanThreads)
    compact_scan_kernel(const int64_t* counts, int64_t chunks, int64_t* starts) {
  using Scan = cub::BlockScan<int64_t, kScanThreads>;
  __shared__ typename Scan::TempStorage temp;
  int64_t items[2];
  for (int t = 0; t < 2; ++t) {
    const int64_t c = 2 * int64_t(threadIdx.x) + t;
    items[t] = c < chunks ? counts[c] : 0;
  }
  int64_t total;
  Scan(temp).ExclusiveSum(items, items, total);
  for (int t = 0; t < 2; ++t) {
    const int64_t c = 2 * int64_t(threadIdx.x) + t;
    if (c < chunks) starts[c] = items[t];
  }
  if (threadIdx.x == 0) starts[chunks] = total;
}

template <class Op>
static __global__ void compact_emit_kernel(Op op, int64_t n, int64_t chunks, const int64_t* starts) {
  using Scan = cub::BlockScan<int, kThreads>;
  __shared__ typename Scan::TempStorage temp;
  const int64_t c = blockIdx.x;
  const int64_t b0 = n / chunks * c + std::min<int64_t>(c, n % chunks);
  const int64_t b1 = b0 + n / chunks + (c < n % chunks ? 1 : 0);
  int64_t base = starts[c];
  for (int64_t tile = b0; tile < b1; tile += kThreads) {
    const int64_t pos = tile + threadIdx.x;
    const bool f = pos < b1 && op.flag(pos);
    int local, aggregate;
    Scan(temp).ExclusiveSum(f ? 1 : 0, local, aggregate);
    if (pos < b1) op.emit(pos, base + local, f);
    base += aggregate;
    __syncthreads();  // temp is reused by the next tile's scan
  }
}

// The count and scan launches: returns starts (chunks + 1 int64 on the device; starts[chunks] = total).
template <class Op>
DataPtr compact_starts(const Op& op, int64_t n, int64_t chunks, const char* name, cudaStream_t stream) {
  DataPtr counts = allocate_workspace(chunks * sizeof(int64_t));
  DataPtr starts = allocate_workspace((chunks + 1) * sizeof(int64_t));
  compact_count_kernel<Op><<<static_cast<unsigned>(chunks), kThreads, 0, stream>>>(op, n, chunks,
                                                                                   static_cast<int64_t*>(counts.get()));
  check_launch(name, "compact_count_kernel");
  compact_scan_kernel<<<1, kScanThreads, 0, stream>>>(static_cast<const int64_t*>(counts.get()), chunks,
                                              static_cast<int64_t*>(starts.get()));
  check_launch(name, "compact_scan_kernel");
  return starts;
}

template <class Op>
void compact_emit(const Op& op, int64_t n, int64_t chunks, const DataPtr& starts, const char* name, cudaStream_t stream) {
  compact_emit_kernel<Op><<<static_cast<unsigned>(chunks), kThreads, 0, stream>>>(
      op, n, chunks, static_cast<const int64_t*>(starts.get()));
  check_launch(name, "compact_emit_kernel");
}

// The total of compact_starts on the host (synchronizes: the caller needs the count to allocate).
inline int64_t read_total(const DataPtr& starts, int64_t chunks, cudaStream_t stream) {
  int64_t total = 0;
  TS_CUDA_CHECK(cudaMemcpyAsync(&total, static_cast<const int64_t*>(starts.get()) + chunks, sizeof(total),
                                cudaMemcpyDeviceToHost, stream));
  TS_CUDA_CHECK(cudaStreamSynchronize(stream));
  return total;
}

}  // namespace tessera::cuda
