// CUDA kernels of the shape family that only move elements (ops/shape_ops_kernel.h): the per-dim index
// map (flip, roll, reflect/replicate/circular pad, repeat_interleave with counts) and tril/triu. Both
// work on element bits (an unsigned integer of the element's width); tril/triu writes zero bits, which
// is zero in every dtype. out is fresh and contiguous, x has any strides, maps are in range (the ops
// guarantee it), so there is nothing to validate here.
//
// index_map: the maps arrive as host vectors. They become one table of x element offsets, dim after
// dim (table[base[d] + o] = maps[d][o] * x.stride(d)), uploaded once per call through pinned memory;
// identity dims take no table entries. A thread per output element sums its dims' offsets.
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/index_common.cuh"
#include "ops/shape_ops_kernel.h"
#include "runtime/cuda/graph_capture.h"

namespace tessera::cuda {
namespace {

// ---- index_map ----------------------------------------------------------------------------------------

template <class U, class I>
struct IndexMapParams {
  int ndim;
  I sizes[kMaxDims];          // out's sizes, innermost first
  int64_t base[kMaxDims];     // the dim's first table entry, or -1 for an identity dim
  int64_t strides[kMaxDims];  // x's stride (identity dims)
  I n;
  const int64_t* table;
  const U* x;
  U* out;
};

template <class U, class I>
static __global__ void index_map_kernel_impl(IndexMapParams<U, I> p) {
  for (I i = blockIdx.x * I(blockDim.x) + threadIdx.x; i < p.n; i += I(gridDim.x) * blockDim.x) {
    I rest = i;
    int64_t off = 0;
    for (int d = 0; d < p.ndim; ++d) {
      const I c = rest % p.sizes[d];
      rest /= p.sizes[d];
      off += p.base[d] >= 0 ? p.table[p.base[d] + c] : static_cast<int64_t>(c) * p.strides[d];
    }
    p.out[i] = p.x[off];
  }
}

// The offset table on the device. Under CUDA graph capture each replay copies it again from the pinned
// block, which the capturing graph keeps (keep_for_graph); otherwise index_common.cuh's upload.
DataPtr upload_table(const std::vector<int64_t>& table, cudaStream_t stream) {
  const size_t nbytes = table.size() * sizeof(int64_t);
  if (nbytes == 0 || !stream_is_captured(stream)) return upload(table.data(), nbytes, stream);
  DataPtr dev = allocate_workspace(nbytes);
  DataPtr pinned = pinned_host_allocator()->allocate(nbytes, kCPU);
  std::memcpy(pinned.get(), table.data(), nbytes);
  TS_CUDA_CHECK(cudaMemcpyAsync(dev.get(), pinned.get(), nbytes, cudaMemcpyHostToDevice, stream));
  keep_for_graph(stream, std::move(pinned));
  return dev;
}

void index_map_cuda(const Tensor& out, const Tensor& x, const std::vector<std::vector<int64_t>>& maps) {
  const int64_t n = out.numel();
  if (n == 0) return;
  const int64_t nd = out.dim();
  TS_CHECK(nd <= kMaxDims, NotImplementedError, "index_map: tensors with more than ", kMaxDims,
           " dims are not supported on cuda");
  CurrentDevice g(out.device().index());
  cudaStream_t stream = stream_of(out);
  std::vector<int64_t> table;
  std::array<int64_t, kMaxDims> base{};
  for (int64_t d = 0; d < nd; ++d) {
    const int64_t k = nd - 1 - d;  // innermost first
    if (maps[d].empty()) {
      base[k] = -1;
      continue;
    }
    base[k] = static_cast<int64_t>(table.size());
    for (int64_t v : maps[d]) table.push_back(v * x.stride(d));
  }
  DataPtr dev_table = upload_table(table, stream);
  dispatch_width(out.dtype(), "index_map", [&]<class U>(TypeTag<U>) {
    dispatch_index(fits32({n}), [&]<class I>(TypeTag<I>) {
      IndexMapParams<U, I> p;
      p.ndim = static_cast<int>(nd);
      for (int64_t d = 0; d < nd; ++d) {
        const int64_t k = nd - 1 - d;
        p.sizes[k] = static_cast<I>(out.size(d));
        p.base[k] = base[k];
        p.strides[k] = x.stride(d);
      }
      p.n = static_cast<I>(n);
      p.table = static_cast<const int64_t*>(dev_table.get());
      p.x = static_cast<const U*>(x.data_ptr());
      p.out = static_cast<U*>(out.data_ptr());
      index_map_kernel_impl<U, I><<<blocks_for(n), kThreads, 0, stream>>>(p);
      check_launch("index_map", "index_map_kernel");
    });
  });
}

// ---- tril / triu ----------------------------------------------------------------------------------------

template <class U, class I>
struct TrilParams {
  Strided<1, I> batch;  // the leading dims, x's strides
  I n, R, C;            // out is (batches, R, C)
  int64_t xr, xc, diag;
  bool upper;
  const U* x;
  U* out;
};

// Kept: tril j - i <= diag, triu j - i >= diag.
template <class U, class I>
static __global__ void tril_triu_kernel_impl(TrilParams<U, I> p) {
  for (I i = blockIdx.x * I(blockDim.x) + threadIdx.x; i < p.n; i += I(gridDim.x) * blockDim.x) {
    const I c = i % p.C, t = i / p.C;
    const I r = t % p.R, b = t / p.R;
    const int64_t delta = static_cast<int64_t>(c) - static_cast<int64_t>(r);
    const bool keep = p.upper ? delta >= p.diag : delta <= p.diag;
    p.out[i] = keep ? p.x[static_cast<int64_t>(p.batch.offset(b)) + r * p.xr + c * p.xc] : U(0);
  }
}

void tril_triu_cuda(const Tensor& out, const Tensor& x, int64_t diagonal, bool upper) {
  const int64_t n = out.numel();
  if (n == 0) return;
  const int64_t nd = x.dim();
  CurrentDevice g(out.device().index());
  cudaStream_t stream = stream_of(out);
  const int64_t R = x.size(nd - 2), C = x.size(nd - 1);
  const Shape bsizes(x.sizes().begin(), x.sizes().end() - 2), bstrides(x.strides().begin(), x.strides().end() - 2);
  dispatch_width(out.dtype(), upper ? "triu" : "tril", [&]<class U>(TypeTag<U>) {
    dispatch_index(fits32({n, span_of(x)}), [&]<class I>(TypeTag<I>) {
      TrilParams<U, I> p;
      p.batch = make_strided<1, I>(bsizes, {&bstrides}, upper ? "triu" : "tril");
      p.n = static_cast<I>(n);
      p.R = static_cast<I>(R);
      p.C = static_cast<I>(C);
      p.xr = x.stride(nd - 2);
      p.xc = x.stride(nd - 1);
      p.diag = std::clamp<int64_t>(diagonal, -(R + C), R + C);  // as the CPU: no overflow below
      p.upper = upper;
      p.x = static_cast<const U*>(x.data_ptr());
      p.out = static_cast<U*>(out.data_ptr());
      tril_triu_kernel_impl<U, I><<<blocks_for(n), kThreads, 0, stream>>>(p);
      check_launch(upper ? "triu" : "tril", "tril_triu_kernel");
    });
  });
}

}  // namespace

void register_shape_ops() {
  index_map_kernel.set(DeviceType::CUDA, &index_map_cuda);
  tril_triu_kernel.set(DeviceType::CUDA, &tril_triu_cuda);
}

}  // namespace tessera::cuda
