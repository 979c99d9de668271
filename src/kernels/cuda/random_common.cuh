// What the random family's CUDA files share: the output addressing (contiguous, or any strides walked
// in logical row-major order), the generic Philox fill kernel and its launcher, and the entries that
// random.cu registers from the other random*.cu files.
//
// Invariants (Note [Philox stream], runtime/philox.h): one thread per Philox block b; it computes
// block (offset + b) once and writes elements b*E .. b*E+E-1 of the output's LOGICAL row-major order,
// E = 4 / W for W words per element. Which thread runs which block never changes a value, so the
// numbers are the CPU kernels' for the same PhiloxParams. A strided output is addressed by dividing
// the logical index by its (collapsed) sizes; that index math is 32-bit when every element index and
// offset fits, 64-bit otherwise. Contiguous outputs store a block's E elements with one vector store
// when the data pointer is aligned for it.
#pragma once
#include <cstdint>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/random_transforms.cuh"
#include "ops/random_kernel.h"
#include "runtime/philox.h"

namespace tessera::cuda {

inline constexpr int kRandomThreads = 256;
inline constexpr int kRandomMaxDims = 25;

// ---- output addressing ---------------------------------------------------------------------------
// An output's shape as the kernels see it: size-1 dims dropped and adjacent dims merged where
// row-major order allows (stride[d] == stride[d+1] * size[d+1]), outermost first. `contiguous` when
// it is one dim of stride 1 (or a single element).
struct RandomLayout {
  void* data = nullptr;
  int64_t numel = 0;
  bool contiguous = true;
  bool index32 = true;  // every logical index and element offset fits in int32
  int ndim = 0;
  int64_t sizes[kRandomMaxDims] = {};
  int64_t strides[kRandomMaxDims] = {};
};
RandomLayout random_layout(const Tensor& out, const char* op);

template <class T>
struct ContiguousOut {
  static constexpr bool kContiguous = true;
  T* data;
};

template <class T, class Index>
struct StridedOut {
  static constexpr bool kContiguous = false;
  T* data;
  int ndim;  // >= 1
  Index sizes[kRandomMaxDims];
  Index strides[kRandomMaxDims];
  // The element of logical row-major index i.
  __host__ __device__ __forceinline__ T* at(int64_t i) const {
    Index rest = static_cast<Index>(i), off = 0;
    for (int d = ndim - 1; d > 0; --d) {
      const Index q = rest / sizes[d];
      off += (rest - q * sizes[d]) * strides[d];
      rest = q;
    }
    return data + (off + rest * strides[0]);
  }
};

// A block's E elements as one aligned store (sizeof(T) * E is 1 to 32 bytes; 32 is two vector stores).
template <class T, int E>
struct alignas(sizeof(T) * E) RandomVec {
  T v[E];
};

// ---- the key and first counter of a launch -------------------------------------------------------
// From the params; under CUDA graph capture from the device words each replay writes (Note [Philox
// under graph capture], runtime/philox_capture.h). Read once per thread, before its loop.
struct PhiloxBase {
  uint64_t seed, offset;
};
__device__ __forceinline__ PhiloxBase philox_base(const PhiloxParams& p) {
  if (p.seed_ptr == nullptr) return {p.seed, p.offset};
  return {*p.seed_ptr, *p.offset_ptr + p.offset};
}

// ---- the kernel ----------------------------------------------------------------------------------
// out[i] = op(i, words of element i) for i in [0, n): W words per element (1, 2 or 4).
// Grid-stride over Philox blocks; n > 0.
template <class T, int W, class Out, class Op>
static __global__ void __launch_bounds__(kRandomThreads)
    philox_fill_kernel(const __grid_constant__ Out out, int64_t n, PhiloxParams p, const Op op) {
  static_assert(W == 1 || W == 2 || W == 4);
  constexpr int E = 4 / W;
  const int64_t nblocks = (n + E - 1) / E;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  bool vec_ok = false;
  if constexpr (Out::kContiguous) vec_ok = reinterpret_cast<uintptr_t>(out.data) % sizeof(RandomVec<T, E>) == 0;
  const PhiloxBase base = philox_base(p);
  for (int64_t b = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; b < nblocks; b += step) {
    const PhiloxBlock blk = philox4x32_10(base.seed, base.offset + static_cast<uint64_t>(b));
    const int64_t i0 = b * E;
    if constexpr (Out::kContiguous) {
      if (vec_ok && i0 + E <= n) {
        RandomVec<T, E> v;
#pragma unroll
        for (int e = 0; e < E; ++e) v.v[e] = op(i0 + e, &blk.x[e * W]);
        *reinterpret_cast<RandomVec<T, E>*>(out.data + i0) = v;
      } else {
#pragma unroll
        for (int e = 0; e < E; ++e)
          if (i0 + e < n) out.data[i0 + e] = op(i0 + e, &blk.x[e * W]);
      }
    } else {
#pragma unroll
      for (int e = 0; e < E; ++e)
        if (i0 + e < n) *out.at(i0 + e) = op(i0 + e, &blk.x[e * W]);
    }
  }
}

// ---- the launcher --------------------------------------------------------------------------------
template <class T, int W, class Out, class Op>
static void launch_philox_fill_as(const Out& out, int64_t n, PhiloxParams p, const Op& op, cudaStream_t stream,
                           const char* op_name) {
  constexpr int E = 4 / W;
  const int64_t nblocks = (n + E - 1) / E;
  const unsigned grid = grid_for(nblocks, kRandomThreads, int64_t{1} << 16);
  philox_fill_kernel<T, W, Out, Op><<<grid, kRandomThreads, 0, stream>>>(out, n, p, op);
  check_launch(op_name, "philox_fill_kernel");
}

// Fills the output described by L (element type T, non-empty) on `stream`.
template <class T, int W, class Op>
static void launch_philox_fill(const RandomLayout& L, PhiloxParams p, const Op& op, cudaStream_t stream,
                        const char* op_name) {
  T* data = static_cast<T*>(L.data);
  if (L.contiguous) {
    launch_philox_fill_as<T, W>(ContiguousOut<T>{data}, L.numel, p, op, stream, op_name);
  } else if (L.index32) {
    StridedOut<T, int32_t> out{data, L.ndim, {}, {}};
    for (int d = 0; d < L.ndim; ++d) {
      out.sizes[d] = static_cast<int32_t>(L.sizes[d]);
      out.strides[d] = static_cast<int32_t>(L.strides[d]);
    }
    launch_philox_fill_as<T, W>(out, L.numel, p, op, stream, op_name);
  } else {
    StridedOut<T, int64_t> out{data, L.ndim, {}, {}};
    for (int d = 0; d < L.ndim; ++d) {
      out.sizes[d] = L.sizes[d];
      out.strides[d] = L.strides[d];
    }
    launch_philox_fill_as<T, W>(out, L.numel, p, op, stream, op_name);
  }
}

// ---- rounding a float64 or float result to an element type, as the CPU rounds it -------------------
// Through float for the 16-bit types (the CPU casts float64 -> float -> 16-bit: two roundings).
template <class T>
__device__ __forceinline__ T round_from_double(double v) {
  if constexpr (std::is_same_v<T, double>) return v;
  else if constexpr (std::is_same_v<T, float>) return __double2float_rn(v);
  else if constexpr (std::is_same_v<T, __half>) return __float2half_rn(__double2float_rn(v));
  else return __float2bfloat16_rn(__double2float_rn(v));
}
template <class T>
__device__ __forceinline__ T round_from_float(float v) {
  if constexpr (std::is_same_v<T, float>) return v;
  else if constexpr (std::is_same_v<T, __half>) return __float2half_rn(v);
  else return __float2bfloat16_rn(v);
}
template <class T>
__device__ __forceinline__ double widen(T v) {
  if constexpr (std::is_same_v<T, double>) return v;
  else if constexpr (std::is_same_v<T, float>) return static_cast<double>(v);
  else return static_cast<double>(static_cast<float>(v));
}

// True while `stream` is being captured into a CUDA graph: a data check that must bring a result back
// to the host cannot run then (a synchronization would end the capture), so it is skipped.
inline bool stream_is_capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  TS_CUDA_CHECK(cudaStreamIsCapturing(stream, &status));
  return status != cudaStreamCaptureStatusNone;
}

// ---- entries defined in the other random files, registered by random.cu ---------------------------
void random_int_cuda(const Tensor& out, int64_t from, uint64_t range, PhiloxParams params);
void randperm_cuda(const Tensor& out, PhiloxParams params);
void multinomial_cuda(const Tensor& out, const Tensor& probs, bool replacement, PhiloxParams params);

}  // namespace tessera::cuda
