// CUDA batched GEMM behind ops/gemm_kernel.h: C[i] = alpha * A[i] @ B[i] + beta * C[i].
//   float16 / bfloat16 / float32 / float64: cuBLASLt (matmul_lt.cpp; TF32 per cuda::allow_tf32()).
//   uint8 / int8 / int32 / int64: a shared-memory tiled kernel of our own, accumulating in 64 bits
//     with wrap-around and narrowing to the dtype, as the CPU kernel and PyTorch do (correctness, not
//     speed: no library multiplies these types with PyTorch's semantics).
//   k == 0: C = beta * C (zeros when beta == 0, without reading C), any dtype.
// Operands may have any strides (ops/gemm_kernel.h); the integer and scale kernels read and write
// through the strides directly, with 64-bit offsets (these two paths are rare and bandwidth-bound).
#include <algorithm>
#include <climits>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/matmul_lt.h"
#include "ops/gemm_kernel.h"

namespace tessera::cuda {
namespace {

// ---- integer GEMM ---------------------------------------------------------------------------------
// One 16 x 16 tile of C per block and step: A's (16 x 16) and B's (16 x 16) slices go through shared
// memory as uint64 (sign-extended), each thread accumulates its C element over k. Tiles and batch
// entries beyond the grid are covered by block-uniform loops, so __syncthreads() is reached by every
// thread of a block alike.
constexpr int kTile = 16;

template <class T>
struct IntGemmParams {
  const T* a;
  const T* b;
  T* c;
  int64_t batch, m, n, k;
  int64_t as0, as1, as2, bs0, bs1, bs2, cs0, cs1, cs2;
  uint64_t alpha, beta;
};

template <class T>
__device__ __forceinline__ uint64_t widen_u64(T v) {
  return static_cast<uint64_t>(static_cast<int64_t>(v));
}

template <class T>
static __global__ void __launch_bounds__(kTile * kTile) int_gemm_kernel(IntGemmParams<T> p) {
  __shared__ uint64_t sa[kTile][kTile + 1];
  __shared__ uint64_t sb[kTile][kTile + 1];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t tiles_m = (p.m + kTile - 1) / kTile, tiles_n = (p.n + kTile - 1) / kTile;
  for (int64_t bi = blockIdx.z; bi < p.batch; bi += gridDim.z) {
    const T* a = p.a + bi * p.as0;
    const T* b = p.b + bi * p.bs0;
    T* c = p.c + bi * p.cs0;
    for (int64_t tm = blockIdx.y; tm < tiles_m; tm += gridDim.y) {
      for (int64_t tn = blockIdx.x; tn < tiles_n; tn += gridDim.x) {
        const int64_t row = tm * kTile + ty, col = tn * kTile + tx;
        uint64_t acc = 0;
        for (int64_t k0 = 0; k0 < p.k; k0 += kTile) {
          const int64_t ak = k0 + tx, bk = k0 + ty;
          sa[ty][tx] = row < p.m && ak < p.k ? widen_u64(a[row * p.as1 + ak * p.as2]) : 0;
          sb[ty][tx] = bk < p.k && col < p.n ? widen_u64(b[bk * p.bs1 + col * p.bs2]) : 0;
          __syncthreads();
#pragma unroll
          for (int kk = 0; kk < kTile; ++kk) acc += sa[ty][kk] * sb[kk][tx];
          __syncthreads();
        }
        if (row < p.m && col < p.n) {
          T* cp = c + row * p.cs1 + col * p.cs2;
          uint64_t v = p.alpha * acc;
          if (p.beta != 0) v += p.beta * widen_u64(*cp);
          *cp = static_cast<T>(v);
        }
      }
    }
  }
}

template <class T>
void launch_int_gemm(const IntGemmParams<T>& p, cudaStream_t stream) {
  const int64_t tiles_m = (p.m + kTile - 1) / kTile, tiles_n = (p.n + kTile - 1) / kTile;
  const dim3 block(kTile, kTile);
  const dim3 grid(static_cast<unsigned>(std::min<int64_t>(tiles_n, INT32_MAX)),
                  static_cast<unsigned>(std::min<int64_t>(tiles_m, 65535)),
                  static_cast<unsigned>(std::min<int64_t>(p.batch, 65535)));
  int_gemm_kernel<T><<<grid, block, 0, stream>>>(p);
  check_launch("matmul", "int_gemm_kernel");
}

template <class T>
void gemm_integer(const GemmParams& g) {
  const bool one = g.batch() <= 1;
  IntGemmParams<T> p{};
  p.a = static_cast<const T*>(g.a.data_ptr());
  p.b = static_cast<const T*>(g.b.data_ptr());
  p.c = static_cast<T*>(g.c.data_ptr());
  p.batch = g.batch();
  p.m = g.m();
  p.n = g.n();
  p.k = g.k();
  p.as0 = one ? 0 : g.a.stride(0);
  p.as1 = g.a.stride(1);
  p.as2 = g.a.stride(2);
  p.bs0 = one ? 0 : g.b.stride(0);
  p.bs1 = g.b.stride(1);
  p.bs2 = g.b.stride(2);
  p.cs0 = one ? 0 : g.c.stride(0);
  p.cs1 = g.c.stride(1);
  p.cs2 = g.c.stride(2);
  p.alpha = static_cast<uint64_t>(g.alpha.to_int());
  p.beta = static_cast<uint64_t>(g.beta.to_int());
  launch_int_gemm<T>(p, stream_of(g.c));
}

// ---- C = beta * C (the k == 0 product) ------------------------------------------------------------
template <class T>
struct ScaleParams {
  T* c;
  int64_t batch, m, n, s0, s1, s2;
  double beta_f;   // floating dtypes
  uint64_t beta_i;  // integer dtypes (wrapping)
  bool zero;       // beta == 0: write zeros without reading C
};

template <class T>
static __global__ void scale_kernel(ScaleParams<T> p) {
  const int64_t total = p.batch * p.m * p.n;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t j = i % p.n, r = (i / p.n) % p.m, b = i / (p.n * p.m);
    T* cp = p.c + b * p.s0 + r * p.s1 + j * p.s2;
    if constexpr (is_floating_v<T>) {
      using A = dacc_t<T>;
      *cp = p.zero ? convert<T>(A(0)) : convert<T>(static_cast<A>(p.beta_f) * convert<A>(*cp));
    } else {
      *cp = p.zero ? T(0) : static_cast<T>(p.beta_i * static_cast<uint64_t>(static_cast<int64_t>(*cp)));
    }
  }
}

void scale_output(const Tensor& c, const Scalar& beta) {
  dispatch_device_dtype<DTypeSet::AllNoBool>(c.dtype(), "matmul", [&]<class T>(TypeTag<T>) {
    ScaleParams<T> p{};
    p.c = static_cast<T*>(c.data_ptr());
    p.batch = c.size(0);
    p.m = c.size(1);
    p.n = c.size(2);
    p.s0 = c.stride(0);
    p.s1 = c.stride(1);
    p.s2 = c.stride(2);
    p.zero = beta.to_double() == 0.0;
    p.beta_f = beta.to_double();
    p.beta_i = is_floating_point(c.dtype()) ? 0 : static_cast<uint64_t>(beta.to_int());
    constexpr int kThreads = 256;
    scale_kernel<T><<<grid_for(c.numel(), kThreads), kThreads, 0, stream_of(c)>>>(p);
    check_launch("matmul", "scale_kernel");
  });
}

// ---- the slot ------------------------------------------------------------------------------------
void gemm_cuda(const GemmParams& p) {
  TS_CHECK(p.a.is_cuda() && p.b.device() == p.a.device() && p.c.device() == p.a.device(), DeviceError,
           "matmul: the CUDA kernel got tensors on ", p.a.device().str(), ", ", p.b.device().str(), " and ",
           p.c.device().str());
  if (p.c.numel() == 0) return;
  CurrentDevice guard(p.c.device().index());
  const DType dt = p.c.dtype();
  // A bias with nothing to fuse it into (an empty sum, integers): written into C first.
  if (p.bias.defined() && (p.k() == 0 || !is_floating_point(dt))) return gemm_cuda(bias_as_input(p));
  if (p.k() == 0) {  // an empty sum: only the beta term remains
    scale_output(p.c, p.beta);
    return;
  }
  switch (dt) {
    case DType::Float16:
    case DType::BFloat16:
    case DType::Float32:
    case DType::Float64: return gemm_lt(p);
    case DType::UInt8: return gemm_integer<uint8_t>(p);
    case DType::Int8: return gemm_integer<int8_t>(p);
    case DType::Int32: return gemm_integer<int32_t>(p);
    case DType::Int64: return gemm_integer<int64_t>(p);
    case DType::Bool: break;
  }
  throw_unsupported_dtype("matmul", dt);
}

}  // namespace

void register_linalg() { gemm_kernel.set(DeviceType::CUDA, &gemm_cuda); }

}  // namespace tessera::cuda
