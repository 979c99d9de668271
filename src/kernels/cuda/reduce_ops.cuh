// The operations of the CUDA reduction engine (reduce_engine.cuh), one struct each, mirroring the CPU
// engine's (kernels/cpu/reduce.cpp): init (identity), map (element in its compute type V ->
// accumulator A), combine (associative), finish (accumulator and the number of reduced elements ->
// result, still in A). Accumulators: float for the 16-bit floats, the dtype itself otherwise, int64
// for integer and bool sums and products into int64. Integers wrap around on overflow (unsigned
// arithmetic, as the CPU). Max and min propagate NaN; so do the infinity norms.
//
// A few runtime flags (mean, all, the norm kind) share one instantiation between ops that differ only
// outside the combine, which keeps the number of kernels, and nvcc's time, in bounds.
#pragma once
#include <cmath>
#include <limits>
#include <type_traits>

#include "kernels/cuda/reduce_common.cuh"
#include "ops/reduce_kernel.h"

namespace tessera::cuda::red {

template <class A>
__device__ __forceinline__ A add_wrap(A a, A b) {
  if constexpr (std::is_integral_v<A> && std::is_signed_v<A>) {
    using U = std::make_unsigned_t<A>;
    return static_cast<A>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  } else {
    return static_cast<A>(a + b);
  }
}

template <class A>
__device__ __forceinline__ A mul_wrap(A a, A b) {
  if constexpr (std::is_integral_v<A> && std::is_signed_v<A>) {
    using U = std::make_unsigned_t<A>;
    return static_cast<A>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
  } else {
    return static_cast<A>(a * b);
  }
}

template <class A>
__device__ __forceinline__ A nan_max(A a, A b) {
  return (a > b || is_nan(a)) ? a : b;
}
template <class A>
__device__ __forceinline__ A nan_min(A a, A b) {
  return (a < b || is_nan(a)) ? a : b;
}

// The lowest and highest values of A (infinities for floating A), for the identities of max and min.
template <class A>
inline A lowest_of() {
  return std::numeric_limits<A>::has_infinity ? -std::numeric_limits<A>::infinity() : std::numeric_limits<A>::lowest();
}
template <class A>
inline A highest_of() {
  return std::numeric_limits<A>::has_infinity ? std::numeric_limits<A>::infinity() : std::numeric_limits<A>::max();
}

// Sum, and mean when `mean` (floating A only).
template <class V, class A>
struct SumOp {
  using acc_t = A;
  bool mean = false;
  __device__ __forceinline__ A init() const { return A(0); }
  __device__ __forceinline__ A map(V x) const { return static_cast<A>(x); }
  __device__ __forceinline__ A combine(A a, A b) const { return add_wrap(a, b); }
  __device__ __forceinline__ A finish(A a, int64_t n) const {
    if constexpr (std::is_floating_point_v<A>) return mean ? a / static_cast<A>(n) : a;
    else return a;
  }
};

template <class V, class A>
struct ProdOp {
  using acc_t = A;
  __device__ __forceinline__ A init() const { return A(1); }
  __device__ __forceinline__ A map(V x) const { return static_cast<A>(x); }
  __device__ __forceinline__ A combine(A a, A b) const { return mul_wrap(a, b); }
  __device__ __forceinline__ A finish(A a, int64_t) const { return a; }
};

// `ident` is lowest_of<A>() (set on the host).
template <class V, class A>
struct MaxOp {
  using acc_t = A;
  A ident;
  __device__ __forceinline__ A init() const { return ident; }
  __device__ __forceinline__ A map(V x) const { return static_cast<A>(x); }
  __device__ __forceinline__ A combine(A a, A b) const { return nan_max(a, b); }
  __device__ __forceinline__ A finish(A a, int64_t) const { return a; }
};

// `ident` is highest_of<A>().
template <class V, class A>
struct MinOp {
  using acc_t = A;
  A ident;
  __device__ __forceinline__ A init() const { return ident; }
  __device__ __forceinline__ A map(V x) const { return static_cast<A>(x); }
  __device__ __forceinline__ A combine(A a, A b) const { return nan_min(a, b); }
  __device__ __forceinline__ A finish(A a, int64_t) const { return a; }
};

// any (all == false) and all: all(x) is "no element is zero", so both OR a flag: x != 0 for any,
// x == 0 for all, and all flips the result. NaN counts as non-zero. Also max/min of bool.
template <class V>
struct AnyAllOp {
  using acc_t = uint8_t;
  bool all = false;
  __device__ __forceinline__ uint8_t init() const { return 0; }
  __device__ __forceinline__ uint8_t map(V x) const { return static_cast<uint8_t>((x != V(0)) != all); }
  __device__ __forceinline__ uint8_t combine(uint8_t a, uint8_t b) const { return a | b; }
  __device__ __forceinline__ uint8_t finish(uint8_t a, int64_t) const { return static_cast<uint8_t>(a ^ (all ? 1 : 0)); }
};

enum class NormKind : uint8_t { L0, L1, L2, P };

// The norms that sum: L0 (count of non-zeros, NaN included), L1, L2 and general p.
template <class V, class A>
struct NormSumOp {
  using acc_t = A;
  NormKind kind = NormKind::L2;
  A p = 2;
  __device__ __forceinline__ A init() const { return A(0); }
  __device__ __forceinline__ A map(V x) const {
    switch (kind) {
      case NormKind::L0: return x != V(0) ? A(1) : A(0);
      case NormKind::L1: return dev_abs(static_cast<A>(x));
      case NormKind::L2: return static_cast<A>(x) * static_cast<A>(x);
      default: return dev_pow(dev_abs(static_cast<A>(x)), p);
    }
  }
  __device__ __forceinline__ A combine(A a, A b) const { return a + b; }
  __device__ __forceinline__ A finish(A a, int64_t) const {
    if (kind == NormKind::L2) return dev_sqrt(a);
    if (kind == NormKind::P) return dev_pow(a, A(1) / p);
    return a;
  }
};

// max |x| (neg == false) and min |x| as -max(-|x|); both give 0 for an empty reduction (torch.norm).
template <class V, class A>
struct NormMaxOp {
  using acc_t = A;
  bool neg = false;
  __device__ __forceinline__ A init() const { return -std::numeric_limits<A>::infinity(); }
  __device__ __forceinline__ A map(V x) const {
    const A m = dev_abs(static_cast<A>(x));
    return neg ? -m : m;
  }
  __device__ __forceinline__ A combine(A a, A b) const { return nan_max(a, b); }
  __device__ __forceinline__ A finish(A a, int64_t n) const { return n == 0 ? A(0) : (neg ? -a : a); }
};

// ---- the families, one translation unit each (reduce_sum.cu, reduce_prod.cu, reduce_minmax.cu, ------
// reduce_norm.cu), so that nvcc compiles them in parallel and each in bounded time
void reduce_sum_cuda(const Tensor& out, const Tensor& in, int64_t nreduce, bool mean);
void reduce_prod_cuda(const Tensor& out, const Tensor& in, int64_t nreduce);
void reduce_extremum_cuda(const Tensor& out, const Tensor& in, int64_t nreduce, ReduceOp op);
void reduce_norm_cuda(const Tensor& out, const Tensor& in, int64_t nreduce, const ReduceParams& params);

}  // namespace tessera::cuda::red
