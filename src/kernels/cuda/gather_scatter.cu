// CUDA gather, scatter and scatter_add along one dim (ops/index_kernel.h: ScatterGatherDim).
//
// gather: a thread per element of index (= of out): out[p] = self_r[p + index[p] * self_stride].
// scatter: the op hands over views with index's sizes and size 1 along dim (self_r, index_r, src_r):
// every position p of those views is a "line" of J = index_size index values along dim. Two ways:
//  - serial (the CPU's): a thread per line walks its J values in order. Lines never share an element
//    of self, so there are no races and the result is the CPU's exactly (last write wins, sums in
//    index order). Used when there are enough lines to fill the GPU, or J is tiny.
//  - parallel: a thread per (line, j), for few long lines (a 1-D scatter_add, which a 1-D gather's
//    backward is, has one line). scatter_add adds atomically (floats: order not fixed, equal to the
//    CPU up to rounding; with the determinism switch on it takes a sorted, reproducible path instead,
//    see index.cu). scatter with a tensor src must let the last j win on repeated targets: the targets
//    (line * self_size + value) are sorted stably and only the last of each run writes. A scattered
//    scalar writes the same value everywhere, so it needs no order.
// Index values are never wrapped (PyTorch); a bad one is skipped and reported (Note [Bad index flag]),
// and the entry raises IndexError after one synchronization at its end.
#include "kernels/cuda/index_common.cuh"
#include "kernels/cuda/sort_common.cuh"
#include "ops/index_kernel.h"

namespace tessera::cuda {
namespace {

[[noreturn]] void raise_bad(const char* op, int64_t value, const ScatterGatherDim& d) {
  TS_THROW(IndexError, op, ": index ", value, " is out of bounds for dimension ", d.dim, " with size ", d.self_size);
}

// ---- gather -----------------------------------------------------------------------------------------

template <class U, class I>
struct GatherParams {
  Strided<3, I> it;  // index's sizes: [0] out, [1] self_r, [2] index
  I n;
  int64_t self_stride, self_size;
  U* out;
  const U* self;
  const int64_t* index;
  unsigned long long* status;
};

template <class U, class I>
static __global__ void gather_kernel_impl(GatherParams<U, I> p) {
  for (I i = blockIdx.x * I(blockDim.x) + threadIdx.x; i < p.n; i += I(gridDim.x) * blockDim.x) {
    I o[3];
    p.it.offsets(i, o);
    const int64_t v = p.index[o[2]];
    if (v < 0 || v >= p.self_size) {
      report_bad(p.status, static_cast<uint64_t>(i));
      continue;
    }
    p.out[o[0]] = p.self[static_cast<int64_t>(o[1]) + v * p.self_stride];
  }
}

void gather_cuda(const Tensor& out, const Tensor& self_r, const Tensor& index, const ScatterGatherDim& sd) {
  const int64_t n = out.numel();
  if (n == 0) return;
  CurrentDevice g(out.device().index());
  cudaStream_t stream = stream_of(out);
  DeviceStatus status(stream);
  const bool small = fits32({n, span_of(self_r), span_of(index)});
  dispatch_width(out.dtype(), "gather", [&]<class U>(TypeTag<U>) {
    dispatch_index(small, [&]<class I>(TypeTag<I>) {
      GatherParams<U, I> p;
      p.it = make_strided<3, I>(index.sizes(), {&out.strides(), &self_r.strides(), &index.strides()}, "gather");
      p.n = static_cast<I>(n);
      p.self_stride = sd.self_stride;
      p.self_size = sd.self_size;
      p.out = static_cast<U*>(out.data_ptr());
      p.self = static_cast<const U*>(self_r.data_ptr());
      p.index = static_cast<const int64_t*>(index.data_ptr());
      p.status = status.dev();
      gather_kernel_impl<U, I><<<blocks_for(n), kThreads, 0, stream>>>(p);
      check_launch("gather", "gather_kernel");
    });
  });
  // Checked later, without waiting here (Note [Bad index flag]).
  status.defer([index, sd, stream](uint64_t bad, uint64_t) {
    if (bad == 0) return;
    const int64_t pos = static_cast<int64_t>(~bad);
    const int64_t off = host_offset(pos, index.sizes(), index.strides());
    raise_bad("gather", read_index_value(static_cast<const int64_t*>(index.data_ptr()) + off, kInt64, stream), sd);
  });
}

// ---- scatter ----------------------------------------------------------------------------------------

template <class T, class I>
struct ScatterParams {
  Strided<3, I> lines;  // the lines' sizes: [0] self_r, [1] index_r, [2] src_r
  I nlines, J;          // J: index values per line
  int64_t self_size;
  I self_stride, index_stride, src_stride;
  T* self;
  const int64_t* index;
  const T* src;
  unsigned long long* status;
};

// Reads index value j of the line at offsets o; false (reported) when out of range.
template <class T, class I>
__device__ __forceinline__ bool scatter_target(const ScatterParams<T, I>& p, const I (&o)[3], I line, I j, int64_t& v) {
  v = p.index[o[1] + j * p.index_stride];
  if (v < 0 || v >= p.self_size) {
    report_bad(p.status, static_cast<uint64_t>(line) * p.J + j);
    return false;
  }
  return true;
}

// A thread per line, its J values in order (kAdd: T is the device dtype, else the element width).
template <class T, class I, bool kAdd>
static __global__ void scatter_serial_kernel(ScatterParams<T, I> p) {
  for (I line = blockIdx.x * I(blockDim.x) + threadIdx.x; line < p.nlines; line += I(gridDim.x) * blockDim.x) {
    I o[3];
    p.lines.offsets(line, o);
    for (I j = 0; j < p.J; ++j) {
      int64_t v;
      if (!scatter_target(p, o, line, j, v)) continue;
      T* d = p.self + (static_cast<int64_t>(o[0]) + v * p.self_stride);
      const T x = p.src[o[2] + j * p.src_stride];
      if constexpr (kAdd) *d = axpy_value(*d, dacc_t<T>(1), x);
      else *d = x;
    }
  }
}

// A thread per (line, j). kAdd: atomic add; else a plain write, of only the kept (last) j when `keep`.
template <class T, class I, bool kAdd>
static __global__ void scatter_parallel_kernel(ScatterParams<T, I> p, const uint8_t* keep) {
  const I total = p.nlines * p.J;
  for (I i = blockIdx.x * I(blockDim.x) + threadIdx.x; i < total; i += I(gridDim.x) * blockDim.x) {
    const I line = i / p.J, j = i % p.J;
    I o[3];
    p.lines.offsets(line, o);
    int64_t v;
    if (!scatter_target(p, o, line, j, v)) continue;
    T* d = p.self + (static_cast<int64_t>(o[0]) + v * p.self_stride);
    const T x = p.src[o[2] + j * p.src_stride];
    if constexpr (kAdd) {
      atomic_axpy(d, dacc_t<T>(1), x, /*alpha_one=*/true);
    } else {
      if (keep == nullptr || keep[i]) *d = x;
    }
  }
}

// keys[i] = line * self_size + value (a bad value: reported, key nlines * self_size, past every good
// key), order[i] = i.
template <class T, class I>
static __global__ void scatter_keys_kernel(ScatterParams<T, I> p, uint64_t* keys, uint32_t* order) {
  const I total = p.nlines * p.J;
  for (I i = blockIdx.x * I(blockDim.x) + threadIdx.x; i < total; i += I(gridDim.x) * blockDim.x) {
    const I line = i / p.J, j = i % p.J;
    I o[3];
    p.lines.offsets(line, o);
    int64_t v;
    const bool ok = scatter_target(p, o, line, j, v);
    keys[i] = ok ? static_cast<uint64_t>(line) * p.self_size + v : static_cast<uint64_t>(p.nlines) * p.self_size;
    order[i] = static_cast<uint32_t>(i);
  }
}

static __global__ void scatter_keep_last_kernel(const uint64_t* sorted, const uint32_t* order, int64_t n, uint64_t bad_key,
                                                uint8_t* keep) {
  for (int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; j < n; j += int64_t(gridDim.x) * blockDim.x)
    keep[order[j]] = (sorted[j] != bad_key && (j + 1 == n || sorted[j + 1] != sorted[j])) ? 1 : 0;
}

// Deterministic scatter_add: the first sorted position of each run of equal targets adds the run's
// values in (line, j) order.
template <class T, class I>
static __global__ void scatter_add_sorted_kernel(ScatterParams<T, I> p, const uint64_t* sorted, const uint32_t* order,
                                                 uint64_t bad_key) {
  const I total = p.nlines * p.J;
  for (I j = blockIdx.x * I(blockDim.x) + threadIdx.x; j < total; j += I(gridDim.x) * blockDim.x) {
    const uint64_t key = sorted[j];
    if (key == bad_key || (j > 0 && sorted[j - 1] == key)) continue;
    const I line = static_cast<I>(key / p.self_size);
    const int64_t v = static_cast<int64_t>(key % p.self_size);
    I o[3];
    p.lines.offsets(line, o);
    T* d = p.self + (static_cast<int64_t>(o[0]) + v * p.self_stride);
    T acc = *d;
    for (I t = j; t < total && sorted[t] == key; ++t)
      acc = axpy_value(acc, dacc_t<T>(1), p.src[o[2] + (order[t] % p.J) * p.src_stride]);
    *d = acc;
  }
}

template <class T, class I>
ScatterParams<T, I> scatter_params(const Tensor& self_r, const Tensor& index_r, const Tensor& src_r,
                                   const ScatterGatherDim& sd, const char* op, unsigned long long* status) {
  ScatterParams<T, I> p;
  p.lines = make_strided<3, I>(self_r.sizes(), {&self_r.strides(), &index_r.strides(), &src_r.strides()}, op);
  p.nlines = static_cast<I>(self_r.numel());
  p.J = static_cast<I>(sd.index_size);
  p.self_size = sd.self_size;
  p.self_stride = static_cast<I>(sd.self_stride);
  p.index_stride = static_cast<I>(sd.index_stride);
  p.src_stride = static_cast<I>(sd.src_stride);
  p.self = static_cast<T*>(self_r.data_ptr());
  p.index = static_cast<const int64_t*>(index_r.data_ptr());
  p.src = static_cast<const T*>(src_r.data_ptr());
  p.status = status;
  return p;
}

struct Sorted {
  DataPtr keys, order;
  uint64_t bad_key = 0;
};

template <class T, class I>
Sorted sort_targets(const ScatterParams<T, I>& p, int64_t total, const char* op, cudaStream_t stream) {
  Sorted s;
  s.bad_key = static_cast<uint64_t>(p.nlines) * static_cast<uint64_t>(p.self_size);
  DataPtr keys_in = allocate_workspace(total * sizeof(uint64_t)), order_in = allocate_workspace(total * sizeof(uint32_t));
  scatter_keys_kernel<T, I><<<blocks_for(total), kThreads, 0, stream>>>(p, static_cast<uint64_t*>(keys_in.get()),
                                                                         static_cast<uint32_t*>(order_in.get()));
  check_launch(op, "scatter_keys_kernel");
  s.keys = allocate_workspace(total * sizeof(uint64_t));
  s.order = allocate_workspace(total * sizeof(uint32_t));
  radix_sort_pairs(static_cast<const uint64_t*>(keys_in.get()), static_cast<uint64_t*>(s.keys.get()),
                   static_cast<const uint32_t*>(order_in.get()), static_cast<uint32_t*>(s.order.get()), total,
                   bit_width(s.bad_key), stream);
  return s;
}

void scatter_cuda(const Tensor& self_r, const Tensor& index_r, const Tensor& src_r, const ScatterGatherDim& sd,
                  ScatterReduce reduce) {
  const int64_t P = self_r.numel(), J = sd.index_size;
  if (P == 0 || J == 0) return;
  const bool add = reduce == ScatterReduce::Add;
  const char* op = add ? "scatter_add" : "scatter";
  CurrentDevice g(self_r.device().index());
  cudaStream_t stream = stream_of(self_r);
  DeviceStatus status(stream);
  const int64_t total = P * J;
  const bool small = fits32({total, span_of(self_r) + (sd.self_size - 1) * sd.self_stride,
                             span_of(index_r) + (J - 1) * sd.index_stride, span_of(src_r) + (J - 1) * sd.src_stride});
  const bool serial = J <= 4 || P >= 16384 || total > int64_t(std::numeric_limits<uint32_t>::max());
  bool scalar_src = sd.src_stride == 0;
  for (int64_t s : src_r.strides()) scalar_src = scalar_src && s == 0;
  const unsigned blocks = blocks_for(serial ? P : total);

  if (!add) {
    dispatch_width(self_r.dtype(), op, [&]<class U>(TypeTag<U>) {
      dispatch_index(small, [&]<class I>(TypeTag<I>) {
        const ScatterParams<U, I> p = scatter_params<U, I>(self_r, index_r, src_r, sd, op, status.dev());
        if (serial) {
          scatter_serial_kernel<U, I, false><<<blocks, kThreads, 0, stream>>>(p);
          check_launch(op, "scatter_serial_kernel");
          return;
        }
        Sorted s;
        DataPtr keep;
        if (!scalar_src) {
          s = sort_targets(p, total, op, stream);
          keep = allocate_workspace(static_cast<size_t>(total));
          scatter_keep_last_kernel<<<blocks_for(total), kThreads, 0, stream>>>(
              static_cast<const uint64_t*>(s.keys.get()), static_cast<const uint32_t*>(s.order.get()), total, s.bad_key,
              static_cast<uint8_t*>(keep.get()));
          check_launch(op, "scatter_keep_last_kernel");
        }
        scatter_parallel_kernel<U, I, false><<<blocks, kThreads, 0, stream>>>(p, static_cast<const uint8_t*>(keep.get()));
        check_launch(op, "scatter_parallel_kernel");
      });
    });
  } else {
    dispatch_device_dtype(self_r.dtype(), op, [&]<class T>(TypeTag<T>) {
      dispatch_index(small, [&]<class I>(TypeTag<I>) {
        const ScatterParams<T, I> p = scatter_params<T, I>(self_r, index_r, src_r, sd, op, status.dev());
        if (serial) {
          scatter_serial_kernel<T, I, true><<<blocks, kThreads, 0, stream>>>(p);
          check_launch(op, "scatter_serial_kernel");
        } else if (is_floating_v<T> && deterministic_accumulate()) {
          Sorted s = sort_targets(p, total, op, stream);
          scatter_add_sorted_kernel<T, I><<<blocks, kThreads, 0, stream>>>(
              p, static_cast<const uint64_t*>(s.keys.get()), static_cast<const uint32_t*>(s.order.get()), s.bad_key);
          check_launch(op, "scatter_add_sorted_kernel");
        } else {
          scatter_parallel_kernel<T, I, true><<<blocks, kThreads, 0, stream>>>(p, nullptr);
          check_launch(op, "scatter_parallel_kernel");
        }
      });
    });
  }
  // Checked later, without waiting here (Note [Bad index flag]).
  status.defer([index_r, sd, J, op, stream](uint64_t bad, uint64_t) {
    if (bad == 0) return;
    const int64_t key = static_cast<int64_t>(~bad);
    const int64_t line = key / J, j = key % J;
    const int64_t off = host_offset(line, index_r.sizes(), index_r.strides()) + j * sd.index_stride;
    raise_bad(op, read_index_value(static_cast<const int64_t*>(index_r.data_ptr()) + off, kInt64, stream), sd);
  });
}

}  // namespace

void register_gather_scatter() {
  gather_kernel.set(DeviceType::CUDA, &gather_cuda);
  scatter_kernel.set(DeviceType::CUDA, &scatter_cuda);
}

}  // namespace tessera::cuda
