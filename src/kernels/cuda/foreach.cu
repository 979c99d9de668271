// CUDA kernels of the foreach family (ops/foreach_kernel.h): the per-tensor norms of a whole list and
// the in-place multiply of a whole list by a device scalar, each a few multi-tensor launches
// (multi_tensor_apply.cuh) instead of one launch per tensor: gradient clipping's two passes.
//
// Dtypes: the tensor's dtype rides in the per-tensor flag, so one launch series covers a list that
// mixes float32, float64, float16 and bfloat16 (a block works on one chunk of one tensor: the dtype
// branch is uniform per block). Arithmetic in float (double for float64 tensors).
//
// Norm, deterministic (Note [Foreach norm order]): a block reduces its chunk (each thread kMtaIlp
// interleaved accumulators over its strided elements, combined in a fixed order, then the block's
// shuffle reduction) to one partial: sum |x| (ord 1), sum x^2 (ord 2) or max |x| (ord inf, NaN-
// propagating). A one-chunk tensor writes its norm at once. Otherwise the block stores its partial in
// its tensor's slot range of a workspace, fences, and counts itself on the tensor's counter (atomicAdd;
// the counters are zeroed by one memset before the first launch); the block that sees count ==
// nchunks - 1 is the tensor's last, and it reduces the tensor's partials in index order with the same
// fixed-shape block reduction, takes the square root for ord 2 and writes out[i]. Which block comes
// last changes nothing but who does the arithmetic: the bits are the same on every run. A tensor split
// over two launches works the same way (its chunks keep their indices; the counter spans launches).
// The workspace is stream-ordered scratch from the caching allocator: freed after the launches are
// queued, it is reused only by work queued later on the same stream.
//
// Mul: each thread loads kMtaIlp elements (coalesced: base + k * blockDim.x + tid), multiplies in the
// compute type by the scalar (read from device memory: the host never waits), rounds once on store.
// A scalar equal to 1 after conversion leaves the chunk untouched (the product would round to it).
#include <cstdint>
#include <vector>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/multi_tensor_apply.cuh"
#include "ops/foreach_kernel.h"
#include "tessera/error.h"

namespace tessera::cuda {
namespace {


enum class NormKind { L1, L2, Inf };

// ---- norm ------------------------------------------------------------------------------------------
// ptrs: 0 the tensor; scalars (exact integers in doubles): 0 its first partial slot, 1 its chunk count,
// 2 its index in the list (out's element and counter).
using NormArgs = MtaArgs<1, 3>;
enum { kFirstPartial = 0, kChunks = 1, kIndex = 2 };

struct NormParams {
  double* partials;    // (total chunks) one per chunk of every multi-chunk tensor, in list order
  unsigned* counters;  // (n) finished chunks per tensor, zero before the first launch
  void* out;           // (n) of out_flag's type
  uint8_t out_flag;
};

// The element map and the combine of each kind; every mapped value is >= 0 or NaN, so 0 is the identity.
template <NormKind K>
struct NormOp {
  template <class C>
  __device__ __forceinline__ C map(C v) const {
    if constexpr (K == NormKind::L2) return v * v;
    else return fabs(v);
  }
  template <class C>
  __device__ __forceinline__ C operator()(C a, C b) const {
    if constexpr (K == NormKind::Inf) return (a > b || isnan(a)) ? a : b;  // NaN wins
    else return a + b;
  }
};

template <class C>
__device__ __forceinline__ void store_out(const NormParams& p, int64_t i, C v) {
  switch (p.out_flag) {
    case kMtaF32: static_cast<float*>(p.out)[i] = convert<float>(v); break;
    case kMtaF64: static_cast<double*>(p.out)[i] = convert<double>(v); break;
    case kMtaF16: static_cast<__half*>(p.out)[i] = convert<__half>(v); break;
    default: static_cast<__nv_bfloat16*>(p.out)[i] = convert<__nv_bfloat16>(v); break;
  }
}

template <NormKind K, class C>
__device__ __forceinline__ void finish_norm(const NormParams& p, int64_t i, C v) {
  if constexpr (K == NormKind::L2) v = sqrt(v);
  store_out(p, i, v);
}

// Note [Foreach norm order]: the partial of a chunk, and the final reduction of a tensor's partials,
// depend only on the data and the (fixed) block shape, never on scheduling.
// smem_raw: kWarp doubles of block-reduction scratch; is_last: one flag shared by the block.
template <NormKind K, class T>
__device__ __forceinline__ void norm_chunk(const NormArgs& args, const MtaChunk& ch, const NormParams& p,
                                           double* smem_raw, bool& is_last) {
  using C = dacc_t<T>;
  const NormOp<K> op;
  C* smem = reinterpret_cast<C*>(smem_raw);

  const T* x = static_cast<const T*>(args.ptrs[0][ch.slot]) + ch.start;  // (len)
  C acc[kMtaIlp];
#pragma unroll
  for (int k = 0; k < kMtaIlp; ++k) acc[k] = C(0);
  for (int base = 0; base < ch.len; base += kMtaIlp * blockDim.x) {
    C v[kMtaIlp];
    mta_load_ilp(x, base, ch.len, v);
#pragma unroll
    for (int k = 0; k < kMtaIlp; ++k) acc[k] = op(acc[k], op.map(v[k]));
  }
  C t = acc[0];
#pragma unroll
  for (int k = 1; k < kMtaIlp; ++k) t = op(t, acc[k]);
  const C block = block_reduce(t, op, C(0), smem);

  const int64_t index = static_cast<int64_t>(args.scalars[kIndex][ch.slot]);
  const int64_t nchunks = static_cast<int64_t>(args.scalars[kChunks][ch.slot]);
  if (nchunks == 1) {
    if (threadIdx.x == 0) finish_norm<K>(p, index, block);
    return;
  }
  const int64_t first = static_cast<int64_t>(args.scalars[kFirstPartial][ch.slot]);
  const int64_t chunk = ch.start / kMtaChunk;
  if (threadIdx.x == 0) {
    p.partials[first + chunk] = static_cast<double>(block);  // exact for a float C
    __threadfence();  // the partial is visible device-wide before the count says so
    const unsigned done = atomicAdd(&p.counters[index], 1u);
    is_last = done == static_cast<unsigned>(nchunks - 1);
  }
  __syncthreads();
  if (!is_last) return;  // uniform over the block
  __threadfence();       // the other blocks' partials, counted before ours, are visible now
  C v = C(0);
  for (int64_t j = threadIdx.x; j < nchunks; j += blockDim.x)
    v = op(v, static_cast<C>(__ldcg(p.partials + first + j)));  // L2, not a stale L1 line
  v = block_reduce(v, op, C(0), smem);
  if (threadIdx.x == 0) finish_norm<K>(p, index, v);
}

template <NormKind K>
static __global__ void __launch_bounds__(kMtaThreads)
    norm_mta_kernel(const __grid_constant__ NormArgs args, const NormParams p) {
  __shared__ double smem[kWarp];
  __shared__ bool is_last;
  const MtaChunk ch = mta_chunk(args);
  switch (args.flag[ch.slot]) {
    case kMtaF32: norm_chunk<K, float>(args, ch, p, smem, is_last); break;
    case kMtaF64: norm_chunk<K, double>(args, ch, p, smem, is_last); break;
    case kMtaF16: norm_chunk<K, __half>(args, ch, p, smem, is_last); break;
    default: norm_chunk<K, __nv_bfloat16>(args, ch, p, smem, is_last); break;
  }
}

// ---- mul -------------------------------------------------------------------------------------------
using MulArgs = MtaArgs<1, 1>;  // ptrs: 0 the tensor; the one scalar slot is unused

template <class T>
__device__ __forceinline__ void mul_chunk(T* g, int len, double scalar) {
  using C = dacc_t<T>;
  const C s = static_cast<C>(scalar);
  if (s == C(1)) return;
  for (int base = 0; base < len; base += kMtaIlp * blockDim.x) {
    C v[kMtaIlp];
    mta_load_ilp(g, base, len, v);
#pragma unroll
    for (int k = 0; k < kMtaIlp; ++k) {
      const int i = base + k * blockDim.x + threadIdx.x;
      if (i < len) mta_store(g, i, v[k] * s);
    }
  }
}

static __global__ void __launch_bounds__(kMtaThreads)
    mul_mta_kernel(const __grid_constant__ MulArgs args, const void* scalar, bool scalar_f64) {
  const MtaChunk ch = mta_chunk(args);
  // A float32 scalar converts to double exactly; mul_chunk rounds it to float for non-float64 tensors.
  const double s = scalar_f64 ? *static_cast<const double*>(scalar) : *static_cast<const float*>(scalar);
  void* base = args.ptrs[0][ch.slot];
  switch (args.flag[ch.slot]) {
    case kMtaF32: mul_chunk(static_cast<float*>(base) + ch.start, ch.len, s); break;
    case kMtaF64: mul_chunk(static_cast<double*>(base) + ch.start, ch.len, s); break;
    case kMtaF16: mul_chunk(static_cast<__half*>(base) + ch.start, ch.len, s); break;
    default: mul_chunk(static_cast<__nv_bfloat16*>(base) + ch.start, ch.len, s); break;
  }
}

// ---- launchers ----------------------------------------------------------------------------------------
void launch_norm(const std::vector<MtaTensor<1, 3>>& tensors, NormKind kind, const NormParams& p,
                 cudaStream_t stream) {
  multi_tensor_apply(tensors, [&](const NormArgs& args, int blocks) {
    switch (kind) {
      case NormKind::L1: norm_mta_kernel<NormKind::L1><<<blocks, kMtaThreads, 0, stream>>>(args, p); break;
      case NormKind::L2: norm_mta_kernel<NormKind::L2><<<blocks, kMtaThreads, 0, stream>>>(args, p); break;
      case NormKind::Inf: norm_mta_kernel<NormKind::Inf><<<blocks, kMtaThreads, 0, stream>>>(args, p); break;
    }
    check_launch("_foreach_norm", "norm_mta_kernel");
  });
}

void launch_mul(const std::vector<MtaTensor<1, 1>>& tensors, const void* scalar, bool scalar_f64,
                cudaStream_t stream) {
  multi_tensor_apply(tensors, [&](const MulArgs& args, int blocks) {
    mul_mta_kernel<<<blocks, kMtaThreads, 0, stream>>>(args, scalar, scalar_f64);
    check_launch("_foreach_mul_", "mul_mta_kernel");
  });
}

// ---- tensor-level entries -----------------------------------------------------------------------------
void norm_cuda(const TensorList& tensors, const Tensor& out, double ord) {
  const char* op = "_foreach_norm";
  TS_CHECK(out.is_contiguous() && out.numel() == static_cast<int64_t>(tensors.size()), ValueError, op,
           " kernel: expected a contiguous output of ", tensors.size(), " elements");
  const NormKind kind = ord == 1 ? NormKind::L1 : ord == 2 ? NormKind::L2 : NormKind::Inf;
  std::vector<MtaTensor<1, 3>> list;
  list.reserve(tensors.size());
  int64_t partials = 0;  // workspace slots: the chunks of the multi-chunk tensors
  bool any_empty = false;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    TS_CHECK(t.is_contiguous(), ValueError, op, " kernel: expected contiguous tensors");
    const uint8_t flag = mta_float_flag(t.dtype(), op);
    if (t.numel() == 0) {
      any_empty = true;
      continue;
    }
    const int64_t nchunks = (t.numel() + kMtaChunk - 1) / kMtaChunk;
    list.push_back({{t.data_ptr()},
                    t.numel(),
                    {static_cast<double>(partials), static_cast<double>(nchunks), static_cast<double>(i)},
                    flag});
    if (nchunks > 1) partials += nchunks;
  }
  CurrentDevice guard(out.device().index());
  const cudaStream_t stream = stream_of(out);
  // Empty tensors take no block: their norm, 0, is all-zero bits in every float type.
  if (any_empty)
    TS_CUDA_CHECK(cudaMemsetAsync(out.data_ptr(), 0, tensors.size() * element_size(out.dtype()), stream));
  if (list.empty()) return;
  NormParams p{nullptr, nullptr, out.data_ptr(), mta_float_flag(out.dtype(), op)};
  DataPtr ws;
  if (partials > 0) {
    const size_t partial_bytes = static_cast<size_t>(partials) * sizeof(double);
    const size_t counter_bytes = tensors.size() * sizeof(unsigned);
    ws = allocate_workspace(partial_bytes + counter_bytes);
    p.partials = static_cast<double*>(ws.get());
    p.counters = reinterpret_cast<unsigned*>(static_cast<char*>(ws.get()) + partial_bytes);
    TS_CUDA_CHECK(cudaMemsetAsync(p.counters, 0, counter_bytes, stream));
  }
  launch_norm(list, kind, p, stream);
}

void mul_cuda(const TensorList& tensors, const Tensor& scalar) {
  const char* op = "_foreach_mul_";
  std::vector<MtaTensor<1, 1>> list;
  list.reserve(tensors.size());
  for (const Tensor& t : tensors) {
    TS_CHECK(t.is_contiguous(), ValueError, op, " kernel: expected contiguous tensors");
    const uint8_t flag = mta_float_flag(t.dtype(), op);
    if (t.numel() == 0) continue;
    list.push_back({{t.data_ptr()}, t.numel(), {0.0}, flag});
  }
  if (list.empty()) return;
  TS_CHECK(scalar.dtype() == kFloat32 || scalar.dtype() == kFloat64, DTypeError, op,
           " kernel: expected a float32 or float64 scalar, got ", dtype_name(scalar.dtype()));
  CurrentDevice guard(scalar.device().index());
  launch_mul(list, scalar.data_ptr(), scalar.dtype() == kFloat64, stream_of(scalar));
}

}  // namespace

void register_foreach() {
  foreach_norm_kernel.set(DeviceType::CUDA, &norm_cuda);
  foreach_mul_kernel.set(DeviceType::CUDA, &mul_cuda);
}

}  // namespace tessera::cuda
