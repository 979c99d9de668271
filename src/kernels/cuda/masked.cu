// CUDA kernels of the mask and count family (ops/index_kernel.h): masked_fill, count_nonzero,
// nonzero, masked_select, index_min_max, one_hot.
//
// count_nonzero and index_min_max return a value to the host: they reduce on the device into a
// small workspace, then copy it back with cudaMemcpyAsync and synchronize the current stream (the
// slots' contract). nonzero and masked_select are called after count_nonzero has sized their output;
// they write in row-major order through Note [Ordered compaction]. one_hot checks its class values on
// the device (Note [Bad index flag]) and synchronizes once at its end to raise IndexError.
#include "kernels/cuda/index_common.cuh"
#include "ops/index_kernel.h"

namespace tessera::cuda {
namespace {

template <class T>
__device__ __forceinline__ bool is_nonzero(T v) {
  if constexpr (is_half_v<T>) return convert<float>(v) != 0.0f;  // NaN is nonzero, -0.0 is zero
  else return v != T(0);
}

// ---- masked_fill ------------------------------------------------------------------------------------

// The fill value in dtype `t` as the CPU kernel converts it (16-bit floats through float), as bits.
uint64_t fill_bits(const Scalar& value, DType t) {
  uint64_t bits = 0;
  dispatch_dtype(t, "masked_fill", [&]<class H>(TypeTag<H>) {
    H v;
    if constexpr (std::is_same_v<H, bool>) {
      v = value.to_bool();
    } else if constexpr (std::is_same_v<H, Half> || std::is_same_v<H, BFloat16>) {
      v = H(value.is_floating_point() ? static_cast<float>(value.to_double())
            : value.is_bool()         ? static_cast<float>(value.to_bool())
                                      : static_cast<float>(value.to_int()));
    } else {
      v = value.is_floating_point() ? static_cast<H>(value.to_double())
          : value.is_bool()         ? static_cast<H>(value.to_bool())
                                    : static_cast<H>(value.to_int());
    }
    std::memcpy(&bits, &v, sizeof(H));
  });
  return bits;
}

template <class U, class I>
struct MaskedFillParams {
  Strided<3, I> it;  // out's sizes: [0] out, [1] self, [2] mask
  I n;
  U value;
  U* out;
  const U* self;
  const bool* mask;
};

template <class U, class I>
static __global__ void masked_fill_kernel_impl(MaskedFillParams<U, I> p) {
  for (I i = blockIdx.x * I(blockDim.x) + threadIdx.x; i < p.n; i += I(gridDim.x) * blockDim.x) {
    I o[3];
    p.it.offsets(i, o);
    p.out[o[0]] = p.mask[o[2]] ? p.value : p.self[o[1]];
  }
}

void masked_fill_cuda(const Tensor& out, const Tensor& self, const Tensor& mask, const Scalar& value) {
  const int64_t n = out.numel();
  if (n == 0) return;
  CurrentDevice g(out.device().index());
  cudaStream_t stream = stream_of(out);
  const Shape ss = broadcast_strides(self, out.sizes()), ms = broadcast_strides(mask, out.sizes());
  const bool small = fits32({n, span_of(out), span_of(out.sizes(), ss), span_of(out.sizes(), ms)});
  const uint64_t bits = fill_bits(value, out.dtype());
  dispatch_width(out.dtype(), "masked_fill", [&]<class U>(TypeTag<U>) {
    dispatch_index(small, [&]<class I>(TypeTag<I>) {
      MaskedFillParams<U, I> p;
      p.it = make_strided<3, I>(out.sizes(), {&out.strides(), &ss, &ms}, "masked_fill");
      p.n = static_cast<I>(n);
      std::memcpy(&p.value, &bits, sizeof(U));
      p.out = static_cast<U*>(out.data_ptr());
      p.self = static_cast<const U*>(self.data_ptr());
      p.mask = static_cast<const bool*>(mask.data_ptr());
      masked_fill_kernel_impl<U, I><<<blocks_for(n), kThreads, 0, stream>>>(p);
      check_launch("masked_fill", "masked_fill_kernel");
    });
  });
}

// ---- count_nonzero, nonzero, masked_select ------------------------------------------------------------

// Flags x's nonzero elements; emits their coordinates into out (count, nd) when out is set (then
// `x` keeps every dim: the coordinates are read from the unmerged sizes, innermost first).
template <class T, class I>
struct NonzeroOp {
  Strided<1, I> x;
  const T* data;
  int64_t* out;
  int nd;
  __device__ bool flag(int64_t pos) const { return is_nonzero(data[x.offset(static_cast<I>(pos))]); }
  __device__ void emit(int64_t pos, int64_t rank, bool flagged) const {
    if (!flagged) return;
    int64_t* row = out + rank * nd;
    for (int d = 0; d < x.ndim; ++d) {  // x.ndim == nd (unmerged)
      row[nd - 1 - d] = static_cast<int64_t>(static_cast<I>(pos) % x.sizes[d]);
      pos = static_cast<int64_t>(static_cast<I>(pos) / x.sizes[d]);
    }
  }
};

template <class F>
void dispatch_nonzero(const Tensor& x, bool merge, int64_t* out, F&& f) {
  const bool small = fits32({x.numel(), span_of(x)});
  dispatch_device_dtype(x.dtype(), "nonzero", [&]<class T>(TypeTag<T>) {
    dispatch_index(small, [&]<class I>(TypeTag<I>) {
      NonzeroOp<T, I> op;
      op.x = make_strided<1, I>(x.sizes(), {&x.strides()}, "nonzero", merge);
      op.data = static_cast<const T*>(x.data_ptr());
      op.out = out;
      op.nd = static_cast<int>(x.dim());
      f(op);
    });
  });
}

void count_nonzero_cuda(const Tensor& x, int64_t* count) {
  *count = 0;
  const int64_t n = x.numel();
  if (n == 0) return;
  CurrentDevice g(x.device().index());
  cudaStream_t stream = stream_of(x);
  const int64_t chunks = compaction_chunks(n);
  dispatch_nonzero(x, /*merge=*/true, nullptr, [&](const auto& op) {
    DataPtr starts = compact_starts(op, n, chunks, "count_nonzero", stream);
    *count = read_total(starts, chunks, stream);  // synchronizes: the count goes back to the host
  });
}

void nonzero_cuda(const Tensor& out, const Tensor& x) {
  const int64_t n = x.numel();
  if (out.size(0) == 0 || x.dim() == 0) return;  // (count, 0) holds no values
  CurrentDevice g(x.device().index());
  cudaStream_t stream = stream_of(x);
  const int64_t chunks = compaction_chunks(n);
  dispatch_nonzero(x, /*merge=*/false, static_cast<int64_t*>(out.data_ptr()), [&](const auto& op) {
    DataPtr starts = compact_starts(op, n, chunks, "nonzero", stream);
    compact_emit(op, n, chunks, starts, "nonzero", stream);
  });
}

template <class U, class I>
struct MaskedSelectOp {
  Strided<2, I> it;  // [0] self, [1] mask
  const U* self;
  const bool* mask;
  U* out;
  __device__ bool flag(int64_t pos) const {
    I o[2];
    it.offsets(static_cast<I>(pos), o);
    return mask[o[1]];
  }
  __device__ void emit(int64_t pos, int64_t rank, bool flagged) const {
    if (!flagged) return;
    I o[2];
    it.offsets(static_cast<I>(pos), o);
    out[rank] = self[o[0]];
  }
};

void masked_select_cuda(const Tensor& out, const Tensor& self, const Tensor& mask) {
  const int64_t n = self.numel();
  if (out.numel() == 0) return;
  CurrentDevice g(self.device().index());
  cudaStream_t stream = stream_of(self);
  const int64_t chunks = compaction_chunks(n);
  const bool small = fits32({n, span_of(self), span_of(mask)});
  dispatch_width(self.dtype(), "masked_select", [&]<class U>(TypeTag<U>) {
    dispatch_index(small, [&]<class I>(TypeTag<I>) {
      MaskedSelectOp<U, I> op;
      op.it = make_strided<2, I>(self.sizes(), {&self.strides(), &mask.strides()}, "masked_select");
      op.self = static_cast<const U*>(self.data_ptr());
      op.mask = static_cast<const bool*>(mask.data_ptr());
      op.out = static_cast<U*>(out.data_ptr());
      DataPtr starts = compact_starts(op, n, chunks, "masked_select", stream);
      compact_emit(op, n, chunks, starts, "masked_select", stream);
    });
  });
}

// ---- index_min_max -------------------------------------------------------------------------------------

// Values as unsigned with the sign bit flipped, so unsigned min/max order them; out[0] = min (starts
// all ones), out[1] = max (starts 0).
template <class I>
static __global__ void index_min_max_kernel_impl(const int64_t* x, Strided<1, I> it, I n, unsigned long long* out) {
  __shared__ unsigned long long shared[32];
  unsigned long long lo = ~0ull, hi = 0;
  for (I i = blockIdx.x * I(blockDim.x) + threadIdx.x; i < n; i += I(gridDim.x) * blockDim.x) {
    const unsigned long long u = static_cast<unsigned long long>(x[it.offset(i)]) ^ 0x8000000000000000ull;
    lo = u < lo ? u : lo;
    hi = u > hi ? u : hi;
  }
  lo = block_reduce(lo, [](unsigned long long a, unsigned long long b) { return a < b ? a : b; }, ~0ull, shared);
  hi = block_reduce(hi, [](unsigned long long a, unsigned long long b) { return a > b ? a : b; }, 0ull, shared);
  if (threadIdx.x == 0) {
    atomicMin(out, lo);
    atomicMax(out + 1, hi);
  }
}

void index_min_max_cuda(const Tensor& x, int64_t* lo, int64_t* hi) {
  const int64_t n = x.numel();
  TS_CHECK(n > 0, ValueError, "index_min_max: expected a non-empty tensor");
  CurrentDevice g(x.device().index());
  cudaStream_t stream = stream_of(x);
  DataPtr buf = allocate_workspace(2 * sizeof(unsigned long long));
  unsigned long long* d = static_cast<unsigned long long*>(buf.get());
  TS_CUDA_CHECK(cudaMemsetAsync(d, 0xff, sizeof(unsigned long long), stream));
  TS_CUDA_CHECK(cudaMemsetAsync(d + 1, 0, sizeof(unsigned long long), stream));
  const bool small = fits32({n, span_of(x)});
  dispatch_index(small, [&]<class I>(TypeTag<I>) {
    const Strided<1, I> it = make_strided<1, I>(x.sizes(), {&x.strides()}, "one_hot");
    index_min_max_kernel_impl<I><<<grid_for(n, kThreads, 1024), kThreads, 0, stream>>>(
        static_cast<const int64_t*>(x.data_ptr()), it, static_cast<I>(n), d);
    check_launch("one_hot", "index_min_max_kernel");
  });
  unsigned long long h[2];
  TS_CUDA_CHECK(cudaMemcpyAsync(h, d, sizeof(h), cudaMemcpyDeviceToHost, stream));
  TS_CUDA_CHECK(cudaStreamSynchronize(stream));  // the slot returns the values to the host
  *lo = static_cast<int64_t>(h[0] ^ 0x8000000000000000ull);
  *hi = static_cast<int64_t>(h[1] ^ 0x8000000000000000ull);
}

// ---- one_hot ---------------------------------------------------------------------------------------------

template <class I>
struct OneHotParams {
  Strided<1, I> ix;  // indices' sizes and strides
  I n, classes;      // out is (n, classes)
  const int64_t* indices;
  int64_t* out;
  unsigned long long* status;
};

template <class I>
static __global__ void one_hot_kernel_impl(OneHotParams<I> p) {
  const I total = p.n * p.classes;
  for (I i = blockIdx.x * I(blockDim.x) + threadIdx.x; i < total; i += I(gridDim.x) * blockDim.x) {
    const I row = i / p.classes, c = i % p.classes;
    const int64_t v = p.indices[p.ix.offset(row)];
    if (c == 0 && (v < 0 || v >= static_cast<int64_t>(p.classes))) report_bad(p.status, static_cast<uint64_t>(row));
    p.out[i] = v == static_cast<int64_t>(c) ? 1 : 0;
  }
}

void one_hot_cuda(const Tensor& out, const Tensor& indices, int64_t num_classes) {
  const int64_t n = indices.numel();
  if (n == 0) return;
  CurrentDevice g(indices.device().index());
  cudaStream_t stream = stream_of(indices);
  auto raise = [&](int64_t row) {
    const int64_t off = host_offset(row, indices.sizes(), indices.strides());
    const int64_t v = read_index_value(static_cast<const int64_t*>(indices.data_ptr()) + off, kInt64, stream);
    TS_THROW(IndexError, "one_hot: class values must be non-negative and smaller than num_classes (", num_classes,
             "), got ", v);
  };
  if (num_classes == 0) raise(0);  // every value is out of range; the CPU reports the first
  DeviceStatus status(stream);
  const bool small = fits32({n * num_classes, span_of(indices)});
  dispatch_index(small, [&]<class I>(TypeTag<I>) {
    OneHotParams<I> p;
    p.ix = make_strided<1, I>(indices.sizes(), {&indices.strides()}, "one_hot");
    p.n = static_cast<I>(n);
    p.classes = static_cast<I>(num_classes);
    p.indices = static_cast<const int64_t*>(indices.data_ptr());
    p.out = static_cast<int64_t*>(out.data_ptr());
    p.status = status.dev();
    one_hot_kernel_impl<I><<<blocks_for(n * num_classes), kThreads, 0, stream>>>(p);
    check_launch("one_hot", "one_hot_kernel");
  });
  // The one synchronization (Note [Bad index flag]).
  const unsigned long long bad = status.read()[0];
  if (bad != 0) raise(static_cast<int64_t>(~bad));
}

}  // namespace

void register_masked() {
  masked_fill_kernel.set(DeviceType::CUDA, &masked_fill_cuda);
  count_nonzero_kernel.set(DeviceType::CUDA, &count_nonzero_cuda);
  nonzero_kernel.set(DeviceType::CUDA, &nonzero_cuda);
  masked_select_kernel.set(DeviceType::CUDA, &masked_select_cuda);
  index_min_max_kernel.set(DeviceType::CUDA, &index_min_max_cuda);
  one_hot_kernel.set(DeviceType::CUDA, &one_hot_cuda);
}

}  // namespace tessera::cuda
