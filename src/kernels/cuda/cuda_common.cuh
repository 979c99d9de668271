// What every CUDA kernel file shares: the device element type of each DType, dtype dispatch to those
// types, launch helpers (grid size, the current stream, the launch check) and the stream-ordered
// scratch allocation. Included from .cu files only (DESIGN.md "Conventions").
//
// Element types on the device: tessera's host Half / BFloat16 are bit-compatible with __half /
// __nv_bfloat16, so a tensor's data pointer is reinterpreted; arithmetic on 16-bit floats happens in
// float (acc_t), rounding once on store, as on the CPU.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "runtime/cuda/cuda_allocator.h"
#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/cuda_stream.h"
#include "tensor/dispatch_dtype.h"
#include "tessera/tensor.h"

namespace tessera::cuda {

// ---- element types ----------------------------------------------------------------------------
template <class T> struct DeviceTypeOf { using type = T; };
template <> struct DeviceTypeOf<Half> { using type = __half; };
template <> struct DeviceTypeOf<BFloat16> { using type = __nv_bfloat16; };
template <class T> using device_t = typename DeviceTypeOf<T>::type;

// Accumulation type on the device: float for the 16-bit floats.
template <class T> struct DeviceAcc { using type = T; };
template <> struct DeviceAcc<__half> { using type = float; };
template <> struct DeviceAcc<__nv_bfloat16> { using type = float; };
template <class T> using dacc_t = typename DeviceAcc<T>::type;

template <class T> inline constexpr bool is_half_v = std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>;
template <class T> inline constexpr bool is_floating_v = std::is_floating_point_v<T> || is_half_v<T>;

// Conversions that go through float for the 16-bit types (and plain casts otherwise).
template <class To, class From>
__host__ __device__ __forceinline__ To convert(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (std::is_same_v<From, __half> || std::is_same_v<From, __nv_bfloat16>) {
    if constexpr (std::is_same_v<To, __half>) return __float2half_rn(static_cast<float>(v));
    else if constexpr (std::is_same_v<To, __nv_bfloat16>) return __float2bfloat16_rn(static_cast<float>(v));
    else if constexpr (std::is_same_v<To, bool>) return static_cast<float>(v) != 0.0f;
    else return static_cast<To>(static_cast<float>(v));
  } else if constexpr (std::is_same_v<To, __half>) {
    return __float2half_rn(static_cast<float>(v));
  } else if constexpr (std::is_same_v<To, __nv_bfloat16>) {
    if constexpr (std::is_same_v<From, double>) return __double2bfloat16(v);
    else return __float2bfloat16_rn(static_cast<float>(v));
  } else if constexpr (std::is_same_v<To, bool>) {
    return v != From(0);
  } else {
    return static_cast<To>(v);
  }
}

// dispatch_device_dtype(t, "op", [&]<class T>(TypeTag<T>) { ... }) with T the device element type.
template <DTypeSet S = DTypeSet::All, class F>
decltype(auto) dispatch_device_dtype(DType t, const char* op, F&& f) {
  return dispatch_dtype<S>(t, op, [&]<class H>(TypeTag<H>) -> decltype(auto) { return f(TypeTag<device_t<H>>{}); });
}

// ---- launching ---------------------------------------------------------------------------------
inline constexpr int kWarp = 32;

// Blocks for n items at `per_block` items per block, capped so that grid-stride loops cover the rest.
inline unsigned grid_for(int64_t n, int64_t per_block, int64_t cap = int64_t(1) << 20) {
  int64_t g = (n + per_block - 1) / per_block;
  if (g < 1) g = 1;
  if (g > cap) g = cap;
  return static_cast<unsigned>(g);
}

// The stream of the tensor's device (the current stream; Note [Current stream]).
inline cudaStream_t stream_of(const Tensor& t) { return current_raw_stream(t.device().index()); }

// 32-bit indexing fits when every byte offset reached stays below 2^31 (DESIGN.md "Conventions").
bool fits_in_int32(const Tensor& t);

// ---- warp and block reductions ------------------------------------------------------------------
template <class T, class Op>
__device__ __forceinline__ T warp_reduce(T v, Op op) {
#pragma unroll
  for (int o = kWarp / 2; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Reduces v over the block (blockDim.x a multiple of 32, at most 1024); every thread gets the result.
// `shared` holds at least 32 T.
template <class T, class Op>
__device__ __forceinline__ T block_reduce(T v, Op op, T identity, T* shared) {
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  v = warp_reduce(v, op);
  __syncthreads();  // shared may still be read by a previous call
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  const int nwarps = (blockDim.x + kWarp - 1) / kWarp;
  v = lane < nwarps ? shared[lane] : identity;
  return warp_reduce(v, op);
}

}  // namespace tessera::cuda
