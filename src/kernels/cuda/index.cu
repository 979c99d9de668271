// CUDA kernels of advanced indexing (Note [Advanced index plan] in ops/index_kernel.h): index (read)
// and index_put (write or accumulate), which also serve index_select, index_add and embedding (forward
// = index, backward = index_add). register_index() also registers the rest of the family.
//
// Both entries first turn the K index tensors into one element offset per position b of index_shape,
// mid[b] (a workspace of int64, one pass per index tensor), validating every value (wrapping negatives
// when the plan says so); an out-of-range value leaves mid[b] = kBadMid and is reported through
// Note [Bad index flag] with key b * K + k, so the smallest key is the CPU's report: the first bad
// position, then the first index tensor. The copy kernels then walk the output / values as
// (pre, b, post), a thread per element:
//     out[p, b, q] = self[pre(p) + mid[b] + post(q)]                          index
//     self[pre(p) + mid[b] + post(q)] (=, +=) alpha * values[p, b, q]          index_put
// index defers its IndexError (Note [Deferred device checks]), as does index_put with accumulate
// (index_add, the embedding backward), which treats every target as possibly repeated. index_put
// without accumulate synchronizes once before it writes: the same status read also says whether mid is
// strictly increasing (then no two b share a target and every write is plain and deterministic).
// Otherwise:
//  - write: the last b in index order wins, as on the CPU: mid is sorted stably (radix sort, b as
//    the value) and only the last b of each run of equal offsets writes;
//  - accumulate: atomics (integers and bool exact; float32 and float64 summed in an unfixed order, so
//    they match the CPU's serial sum only up to rounding), or, when deterministic_accumulate() and
//    always for the 16-bit floats, the same sort and one thread per (run, p, q) adding the run's
//    values in index order in the accumulate type, rounded once (Note [Index accumulate] in
//    kernels/cpu/advanced_index.cpp): bitwise reproducible, and equal to the CPU's result up to
//    contraction of a * v + d into an FMA.

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/index_common.cuh"
#include "kernels/cuda/sort_common.cuh"
#include "ops/index_kernel.h"
#include "runtime/determinism.h"

namespace tessera::cuda {

bool deterministic_accumulate() { return is_deterministic(); }

namespace {

constexpr int64_t kBadMid = std::numeric_limits<int64_t>::min();

// ---- mid[b] ----------------------------------------------------------------------------------------

struct MidParams {
  Strided<1, int64_t> ix;  // index_shape, the index tensor's strides
  const void* data;
  bool is32, wrap, first;
  int64_t size, stride, k, K, nb;
  int64_t* mid;
  unsigned long long* status;
};

static __global__ void index_mid_kernel(MidParams p) {
  for (int64_t b = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; b < p.nb; b += int64_t(gridDim.x) * blockDim.x) {
    const int64_t cur = p.first ? 0 : p.mid[b];
    if (cur == kBadMid) continue;
    const int64_t off = p.ix.offset(b);
    const int64_t v = p.is32 ? static_cast<const int32_t*>(p.data)[off] : static_cast<const int64_t*>(p.data)[off];
    const int64_t w = (p.wrap && v < 0) ? v + p.size : v;
    if (w < 0 || w >= p.size) {
      p.mid[b] = kBadMid;
      report_bad(p.status, static_cast<uint64_t>(b) * p.K + p.k);
      continue;
    }
    p.mid[b] = cur + w * p.stride;
  }
}

// Sets status[1] when mid is not strictly increasing (some target may be written twice).
static __global__ void index_mid_increasing_kernel(const int64_t* mid, int64_t nb, unsigned long long* status) {
  for (int64_t b = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; b + 1 < nb; b += int64_t(gridDim.x) * blockDim.x)
    if (mid[b] >= mid[b + 1]) status[1] = 1;
}

// Fills mid (nb int64) for the plan, every value checked (Note [Bad index flag]).
DataPtr compute_mid(const IndexPlan& plan, int64_t nb, unsigned long long* status, cudaStream_t stream) {
  DataPtr mid = allocate_workspace(static_cast<size_t>(nb) * sizeof(int64_t));
  const int64_t K = static_cast<int64_t>(plan.indices.size());
  for (int64_t k = 0; k < K; ++k) {
    const Tensor& ix = plan.indices[k];
    MidParams p;
    p.ix = make_strided<1, int64_t>(plan.index_shape, {&ix.strides()}, plan.op);
    p.data = ix.data_ptr();
    p.is32 = ix.dtype() == kInt32;
    p.wrap = plan.wrap_negative;
    p.first = k == 0;
    p.size = plan.indexed_sizes[k];
    p.stride = plan.indexed_strides[k];
    p.k = k;
    p.K = K;
    p.nb = nb;
    p.mid = static_cast<int64_t*>(mid.get());
    p.status = status;
    index_mid_kernel<<<blocks_for(nb), kThreads, 0, stream>>>(p);
    check_launch(plan.op, "index_mid_kernel");
  }
  if (K == 0) TS_CUDA_CHECK(cudaMemsetAsync(mid.get(), 0, static_cast<size_t>(nb) * sizeof(int64_t), stream));
  return mid;
}

// Raises the CPU kernel's IndexError for the bad key of Note [Bad index flag], if any.
void raise_if_bad(const IndexPlan& plan, unsigned long long word, cudaStream_t stream) {
  if (word == 0) return;
  const uint64_t key = ~word;
  const int64_t K = static_cast<int64_t>(plan.indices.size());
  const int64_t b = static_cast<int64_t>(key / K), k = static_cast<int64_t>(key % K);
  const Tensor& ix = plan.indices[k];
  const int64_t off = host_offset(b, plan.index_shape, ix.strides());
  const char* base = static_cast<const char*>(ix.data_ptr()) + off * static_cast<int64_t>(ix.element_size());
  const int64_t v = read_index_value(base, ix.dtype(), stream);
  TS_THROW(IndexError, plan.op, ": index ", v, " is out of bounds for dimension ", plan.indexed_dims[k], " with size ",
           plan.indexed_sizes[k]);
}

// ---- index (read) ----------------------------------------------------------------------------------

template <class T, class I>
struct IndexParams {
  Strided<1, I> pre, post;  // self's strides
  I nb, nq, n;              // out is (np, nb, nq) row-major, n elements
  const T* self;
  T* out;
  const int64_t* mid;
};

template <class T, class I>
static __global__ void index_kernel_impl(IndexParams<T, I> p) {
  for (I i = blockIdx.x * I(blockDim.x) + threadIdx.x; i < p.n; i += I(gridDim.x) * blockDim.x) {
    const I q = i % p.nq, r = i / p.nq;
    const I b = r % p.nb, pp = r / p.nb;
    const int64_t m = p.mid[b];
    if (m == kBadMid) continue;  // reported by the mid pass; the output is dropped with the error
    p.out[i] = p.self[static_cast<int64_t>(p.pre.offset(pp)) + m + static_cast<int64_t>(p.post.offset(q))];
  }
}

template <class T, class I>
void launch_index(const IndexParams<T, I>& p, cudaStream_t stream, const char* op) {
  index_kernel_impl<T, I><<<blocks_for(static_cast<int64_t>(p.n)), kThreads, 0, stream>>>(p);
  check_launch(op, "index_kernel");
}

void index_cuda(const Tensor& out, const Tensor& self, const IndexPlan& plan) {
  const int64_t nb = numel_of(plan.index_shape);
  if (nb == 0) return;  // then out is empty too
  CurrentDevice g(self.device().index());
  cudaStream_t stream = stream_of(self);
  DeviceStatus status(stream);
  DataPtr mid = compute_mid(plan, nb, status.dev(), stream);
  const int64_t n = out.numel();
  if (n > 0) {
    const int64_t nq = numel_of(plan.post_sizes);
    const bool small = fits32({n, span_of(plan.pre_sizes, plan.pre_strides), span_of(plan.post_sizes, plan.post_strides)});
    dispatch_width(self.dtype(), plan.op, [&]<class T>(TypeTag<T>) {
      dispatch_index(small, [&]<class I>(TypeTag<I>) {
        IndexParams<T, I> p;
        p.pre = make_strided<1, I>(plan.pre_sizes, {&plan.pre_strides}, plan.op);
        p.post = make_strided<1, I>(plan.post_sizes, {&plan.post_strides}, plan.op);
        p.nb = static_cast<I>(nb);
        p.nq = static_cast<I>(nq);
        p.n = static_cast<I>(n);
        p.self = static_cast<const T*>(self.data_ptr());
        p.out = static_cast<T*>(out.data_ptr());
        p.mid = static_cast<const int64_t*>(mid.get());
        launch_index(p, stream, plan.op);
      });
    });
  }
  status.defer([plan, stream](uint64_t word, uint64_t) { raise_if_bad(plan, word, stream); });
}

// ---- index_put --------------------------------------------------------------------------------------

template <class T, class I>
struct PutParams {
  Strided<2, I> pre;   // [0] self's strides, [1] values' strides
  Strided<1, I> vmid;  // values' strides over index_shape
  Strided<2, I> post;  // [0] self's strides, [1] values' strides
  I nb, nq, n;         // values is (np, nb, nq), n elements
  T* self;
  const T* values;
  const int64_t* mid;
  const uint8_t* keep;  // write: nullptr, or 1 for the b that writes (the last of equal offsets)
  dacc_t<T> alpha;
  bool atomic, alpha_one;
};

// Offsets in self and values of element i of values.
template <class T, class I>
__device__ __forceinline__ bool put_offsets(const PutParams<T, I>& p, I i, I& b, int64_t& dst, int64_t& src) {
  const I q = i % p.nq, r = i / p.nq;
  b = r % p.nb;
  const I pp = r / p.nb;
  const int64_t m = p.mid[b];
  if (m == kBadMid) return false;
  I po[2], qo[2];
  p.pre.offsets(pp, po);
  p.post.offsets(q, qo);
  dst = static_cast<int64_t>(po[0]) + m + static_cast<int64_t>(qo[0]);
  src = static_cast<int64_t>(po[1]) + static_cast<int64_t>(p.vmid.offset(b)) + static_cast<int64_t>(qo[1]);
  return true;
}

// Plain writes (T: an unsigned integer of the element's width).
template <class T, class I>
static __global__ void index_put_write_kernel(PutParams<T, I> p) {
  for (I i = blockIdx.x * I(blockDim.x) + threadIdx.x; i < p.n; i += I(gridDim.x) * blockDim.x) {
    I b;
    int64_t dst, src;
    if (!put_offsets(p, i, b, dst, src)) continue;
    if (p.keep != nullptr && !p.keep[b]) continue;
    p.self[dst] = p.values[src];
  }
}

// self += alpha * values: plain when no two b share a target, else atomic.
template <class T, class I>
static __global__ void index_put_add_kernel(PutParams<T, I> p) {
  for (I i = blockIdx.x * I(blockDim.x) + threadIdx.x; i < p.n; i += I(gridDim.x) * blockDim.x) {
    I b;
    int64_t dst, src;
    if (!put_offsets(p, i, b, dst, src)) continue;
    if (p.atomic) atomic_axpy(p.self + dst, p.alpha, p.values[src], p.alpha_one);
    else p.self[dst] = axpy_value(p.self[dst], p.alpha, p.values[src]);
  }
}

// Deterministic accumulation over the runs of the sorted offsets: thread (p, j, q) with j the first
// sorted position of a run adds the run's values in index order (the sort is stable), then stores.
template <class T, class I>
static __global__ void index_put_add_sorted_kernel(PutParams<T, I> p, const uint64_t* sorted_mid, const uint32_t* order) {
  for (I i = blockIdx.x * I(blockDim.x) + threadIdx.x; i < p.n; i += I(gridDim.x) * blockDim.x) {
    const I q = i % p.nq, r = i / p.nq;
    const I j = r % p.nb, pp = r / p.nb;
    const uint64_t key = sorted_mid[j];
    if (j > 0 && sorted_mid[j - 1] == key) continue;  // not the first of its run
    const int64_t m = p.mid[order[j]];
    if (m == kBadMid) continue;
    I po[2], qo[2];
    p.pre.offsets(pp, po);
    p.post.offsets(q, qo);
    T* d = p.self + static_cast<int64_t>(po[0]) + m + static_cast<int64_t>(qo[0]);
    // Summed in the accumulate type and rounded once (Note [Index accumulate] in
    // kernels/cpu/advanced_index.cpp); bool and integers as axpy_value adds them.
    if constexpr (std::is_floating_point_v<dacc_t<T>> && !std::is_same_v<T, bool>) {
      using A = dacc_t<T>;
      A acc = convert<A>(*d);
      for (I t = j; t < p.nb && sorted_mid[t] == key; ++t) {
        const int64_t src = static_cast<int64_t>(po[1]) + static_cast<int64_t>(p.vmid.offset(order[t])) + static_cast<int64_t>(qo[1]);
        acc = acc + p.alpha * convert<A>(p.values[src]);
      }
      *d = convert<T>(acc);
    } else {
      T acc = *d;
      for (I t = j; t < p.nb && sorted_mid[t] == key; ++t) {
        const int64_t src = static_cast<int64_t>(po[1]) + static_cast<int64_t>(p.vmid.offset(order[t])) + static_cast<int64_t>(qo[1]);
        acc = axpy_value(acc, p.alpha, p.values[src]);
      }
      *d = acc;
    }
  }
}

// keep[order[j]] = 1 for the last sorted position j of each run of equal keys.
static __global__ void index_keep_last_kernel(const uint64_t* sorted, const uint32_t* order, int64_t n, uint8_t* keep) {
  for (int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; j < n; j += int64_t(gridDim.x) * blockDim.x)
    keep[order[j]] = (j + 1 == n || sorted[j + 1] != sorted[j]) ? 1 : 0;
}

// Stable sort of the nb offsets (bad ones mapped past every good one) with b as the value.
struct SortedMid {
  DataPtr keys, order;
};
static __global__ void index_mid_keys_kernel(const int64_t* mid, int64_t nb, uint64_t bad_key, uint64_t* keys,
                                             uint32_t* order) {
  for (int64_t b = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; b < nb; b += int64_t(gridDim.x) * blockDim.x) {
    keys[b] = mid[b] == kBadMid ? bad_key : static_cast<uint64_t>(mid[b]);
    order[b] = static_cast<uint32_t>(b);
  }
}

SortedMid sort_mid(const IndexPlan& plan, const int64_t* mid, int64_t nb, cudaStream_t stream) {
  TS_CHECK(nb <= int64_t(std::numeric_limits<uint32_t>::max()), NotImplementedError, plan.op,
           ": more than 2^32 - 1 index positions with repeated targets are not supported on cuda");
  uint64_t max_mid = 0;  // the largest offset a valid index can give
  for (size_t k = 0; k < plan.indices.size(); ++k)
    max_mid += static_cast<uint64_t>(std::max<int64_t>(plan.indexed_sizes[k] - 1, 0)) *
               static_cast<uint64_t>(plan.indexed_strides[k]);
  const uint64_t bad_key = max_mid + 1;
  DataPtr keys_in = allocate_workspace(nb * sizeof(uint64_t)), order_in = allocate_workspace(nb * sizeof(uint32_t));
  index_mid_keys_kernel<<<blocks_for(nb), kThreads, 0, stream>>>(mid, nb, bad_key, static_cast<uint64_t*>(keys_in.get()),
                                                                  static_cast<uint32_t*>(order_in.get()));
  check_launch(plan.op, "index_mid_keys_kernel");
  SortedMid s{allocate_workspace(nb * sizeof(uint64_t)), allocate_workspace(nb * sizeof(uint32_t))};
  radix_sort_pairs(static_cast<const uint64_t*>(keys_in.get()), static_cast<uint64_t*>(s.keys.get()),
                   static_cast<const uint32_t*>(order_in.get()), static_cast<uint32_t*>(s.order.get()), nb,
                   bit_width(bad_key), stream);
  return s;
}

void index_put_cuda(const Tensor& self, const Tensor& values, const IndexPlan& plan, bool accumulate,
                    const Scalar& alpha) {
  const int64_t nb = numel_of(plan.index_shape);
  if (nb == 0) return;
  CurrentDevice g(self.device().index());
  cudaStream_t stream = stream_of(self);
  DeviceStatus status(stream);
  DataPtr mid_buf = compute_mid(plan, nb, status.dev(), stream);
  const int64_t* mid = static_cast<const int64_t*>(mid_buf.get());
  if (nb > 1 && status.checking() && !accumulate) {
    index_mid_increasing_kernel<<<blocks_for(nb), kThreads, 0, stream>>>(mid, nb, status.dev());
    check_launch(plan.op, "index_mid_increasing_kernel");
  }
  // Writes read the status words (the one synchronization, Note [Bad index flag]): a bad index raises
  // before anything is written, and unique targets take the plain write. Accumulation is correct
  // either way, so it assumes repeated targets (atomics, or the sorted sum when deterministic) and
  // defers the bad-index check (Note [Deferred device checks]): the embedding backward's index_add
  // does not stop the host. While capturing, repeated targets are assumed too.
  bool repeats = nb > 1;
  if (!accumulate) {
    const auto words = status.read();
    raise_if_bad(plan, words[0], stream);
    repeats = nb > 1 && (!status.checking() || words[1] != 0);
  } else {
    status.defer([plan, stream](uint64_t word, uint64_t) { raise_if_bad(plan, word, stream); });
  }
  const int64_t n = values.numel();
  if (n == 0) return;

  // values has sizes pre + index_shape + post: split its strides the same way.
  const Shape& vs = values.strides();
  const auto npre = static_cast<ptrdiff_t>(plan.pre_sizes.size());
  const auto nidx = static_cast<ptrdiff_t>(plan.index_shape.size());
  const Shape v_pre(vs.begin(), vs.begin() + npre), v_mid(vs.begin() + npre, vs.begin() + npre + nidx),
      v_post(vs.begin() + npre + nidx, vs.end());
  const int64_t nq = numel_of(plan.post_sizes);
  const bool small = fits32({n, span_of(values), span_of(plan.pre_sizes, plan.pre_strides),
                             span_of(plan.post_sizes, plan.post_strides)});
  // 16-bit floats always take the sorted sum: an atomic add rounds after every term.
  const bool low_precision = self.dtype() == kFloat16 || self.dtype() == kBFloat16;
  const bool sorted_add = accumulate && repeats && is_floating_point(self.dtype()) &&
                          (deterministic_accumulate() || low_precision);
  SortedMid sorted;
  DataPtr keep;
  if (repeats && (!accumulate || sorted_add)) {
    sorted = sort_mid(plan, mid, nb, stream);
    if (!accumulate) {
      keep = allocate_workspace(static_cast<size_t>(nb));
      index_keep_last_kernel<<<blocks_for(nb), kThreads, 0, stream>>>(static_cast<const uint64_t*>(sorted.keys.get()),
                                                                      static_cast<const uint32_t*>(sorted.order.get()), nb,
                                                                      static_cast<uint8_t*>(keep.get()));
      check_launch(plan.op, "index_keep_last_kernel");
    }
  }
  auto fill = [&]<class T, class I>(PutParams<T, I>& p) {
    p.pre = make_strided<2, I>(plan.pre_sizes, {&plan.pre_strides, &v_pre}, plan.op);
    p.vmid = make_strided<1, I>(plan.index_shape, {&v_mid}, plan.op);
    p.post = make_strided<2, I>(plan.post_sizes, {&plan.post_strides, &v_post}, plan.op);
    p.nb = static_cast<I>(nb);
    p.nq = static_cast<I>(nq);
    p.n = static_cast<I>(n);
    p.self = static_cast<T*>(self.data_ptr());
    p.values = static_cast<const T*>(values.data_ptr());
    p.mid = mid;
    p.keep = static_cast<const uint8_t*>(keep.get());
  };
  if (!accumulate) {
    dispatch_width(self.dtype(), plan.op, [&]<class T>(TypeTag<T>) {
      dispatch_index(small, [&]<class I>(TypeTag<I>) {
        PutParams<T, I> p;
        fill(p);
        index_put_write_kernel<T, I><<<blocks_for(n), kThreads, 0, stream>>>(p);
        check_launch(plan.op, "index_put_write_kernel");
      });
    });
    return;
  }
  dispatch_device_dtype(self.dtype(), plan.op, [&]<class T>(TypeTag<T>) {
    dispatch_index(small, [&]<class I>(TypeTag<I>) {
      PutParams<T, I> p;
      fill(p);
      p.alpha = scalar_to_acc<T>(alpha);
      p.alpha_one = alpha.to_double() == 1.0;
      p.atomic = repeats;
      if (sorted_add) {
        index_put_add_sorted_kernel<T, I><<<blocks_for(n), kThreads, 0, stream>>>(
            p, static_cast<const uint64_t*>(sorted.keys.get()), static_cast<const uint32_t*>(sorted.order.get()));
        check_launch(plan.op, "index_put_add_sorted_kernel");
      } else {
        index_put_add_kernel<T, I><<<blocks_for(n), kThreads, 0, stream>>>(p);
        check_launch(plan.op, "index_put_add_kernel");
      }
    });
  });
}

}  // namespace

void register_index() {
  index_kernel.set(DeviceType::CUDA, &index_cuda);
  index_put_kernel.set(DeviceType::CUDA, &index_put_cuda);
  register_gather_scatter();
  register_masked();
  register_sort();
  register_unique();
  register_range();
}

}  // namespace tessera::cuda
