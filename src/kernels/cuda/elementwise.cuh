// The GPU side of elementwise iteration: out[i] = f(in_0[i], ..., in_{N-1}[i]) over the merged
// iteration space of an ElementwiseIter (Note [Elementwise iteration]), for N = 0 (fill) to 3 inputs.
// unary.cu, binary.cu, ternary.cu and copy.cu launch their functors through launch_elementwise.
//
// Note [GPU elementwise paths]: launch_elementwise picks one of three kernels on the host.
// - Contiguous (the merged space is 1-D and every input advances by its element size or is a
//   broadcast scalar with stride 0): each thread moves U vectors of V elements per operand, with
//   V = 16 bytes / the widest operand's element size, so the widest operand moves in 16-byte loads
//   and stores (the others in V * sizeof(T) bytes). A thread issues all its loads before it computes
//   and stores, so U 16-byte loads per input are in flight per thread, U capped so that a thread holds
//   at most 16 elements (each unpacked element is a register: 4 vectors of float32, 2 of bfloat16, 1
//   of uint8); a block of 128 threads covers one tile of 128 * U * V elements and the grid one tile
//   per block (the loop over tiles only runs when the grid is capped). A broadcast operand is read
//   once per thread and never stops the others' vector path (a row broadcast such as a bias over a
//   matrix leaves two merged dims and takes the strided path). Vector accesses need every
//   non-broadcast pointer aligned to V * sizeof(T); when one is not (a slice starting at element 1,
//   say), the same kernel runs with V = 1: coalesced scalar accesses, no peeling. The last, partial tile goes element by element with bounds checks.
//   Tile indices and the element index are int64: the contiguous path needs no 32/64-bit split.
// - Strided, 32-bit: every operand's byte offsets and the element count fit in int32
//   (EwGeometry::fits_in_int32). Offsets come from the linear index by divmod with precomputed magic
//   numbers (IntDivider32: a multiply-high and a shift instead of a division), innermost dim first.
// - Strided, 64-bit: the same with int64 offsets and plain 64-bit division, for iteration spaces
//   past 2^31 elements or byte offsets past 2^31 (DESIGN.md "Conventions").
// Operand 0 is the output; it may be an input itself (in-place ops): every thread reads its own
// elements before it writes them, and no two threads touch one element, so exact aliasing is safe.
//
// Note [CPU scalars] (ops/binary_ops.cpp): an input may be a 0-dim CPU tensor (a number of the op,
// or a CPU scalar tensor beside GPU tensors, as PyTorch allows). Its caller passes the value in
// HostScalars; the kernels then read it from their arguments (ScalarArgs) and never dereference the
// host pointer, so no fill kernel or host-to-device copy precedes the op.
//
// Functors are plain structs with `__device__ Out operator()(In...) const`; grid-invariant values
// (alpha, an op enum, a flag pointer) are their members and travel as kernel arguments. The hot
// ops (add, mul, gelu, copy) get a functor each, with no switch in the loop; rarer ops share one
// functor per dtype that switches on a uniform op value (unary.cu, binary.cu say which).
#pragma once
#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <utility>

#include "kernels/cuda/cuda_common.cuh"
#include "tensor/elementwise_iter.h"

namespace tessera::cuda {

inline constexpr int kEwThreads = 128;  // threads per block of every elementwise kernel
inline constexpr int kEwMaxDims = ElementwiseIter::kMaxDims;
inline constexpr int kEwHotUnroll = 4;  // vectors per thread and operand for the hot ops (add, mul, gelu, copy)

// Element conversion exactly as the CPU's (kernels/cpu/convert.h): through float for the 16-bit types
// (double -> bfloat16 too, rounding twice as the CPU does, where cuda_common's convert rounds once),
// `!= 0` to bool, and floating -> 8-bit integers through int32, so that out-of-range values wrap as
// the CPU's conversion does instead of saturating as the GPU's 8-bit conversion instruction does.
template <class To, class From>
__device__ __forceinline__ To ew_cast(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (std::is_same_v<To, __nv_bfloat16> && std::is_same_v<From, double>) {
    return __float2bfloat16_rn(static_cast<float>(v));
  } else if constexpr ((std::is_same_v<To, int8_t> || std::is_same_v<To, uint8_t>) && is_floating_v<From>) {
    return static_cast<To>(convert<int32_t>(v));
  } else {
    return convert<To>(v);
  }
}

// ---- index math ---------------------------------------------------------------------------------
// Division by a fixed divisor in [1, INT32_MAX] for dividends in [0, 2^31): q = (umulhi(n, m1) + n)
// >> shift with m1 = floor(2^32 (2^shift - d) / d) + 1, shift = ceil(log2 d) (Granlund & Montgomery;
// the form PyTorch's OffsetCalculator uses). t + n cannot overflow 32 bits because n < 2^31.
struct IntDivider32 {
  uint32_t divisor = 1, m1 = 1, shift = 0;
  IntDivider32() = default;
  explicit IntDivider32(uint32_t d) : divisor(d) {
    shift = 0;
    while (shift < 32 && (uint64_t(1) << shift) < d) ++shift;
    const uint64_t magic = ((uint64_t(1) << 32) * ((uint64_t(1) << shift) - d)) / d + 1;
    m1 = static_cast<uint32_t>(magic);  // < 2^32 because 2^(shift-1) < d
  }
  __host__ __device__ __forceinline__ uint32_t div(uint32_t n) const {
#if defined(__CUDA_ARCH__)
    return (__umulhi(n, m1) + n) >> shift;
#else
    return static_cast<uint32_t>(((static_cast<uint64_t>(n) * m1 >> 32) + n) >> shift);
#endif
  }
};

// Linear index -> byte offset of each of NT operands, innermost dim first. Loops run to the fixed
// bound with a break so that the arrays stay in the kernel-parameter bank (static indices).
template <int NT>
struct OffsetCalc32 {
  using index_t = uint32_t;
  using offset_t = int32_t;
  int ndim = 0;
  IntDivider32 sizes[kEwMaxDims];
  int32_t strides[kEwMaxDims][NT];
  __device__ __forceinline__ void get(uint32_t linear, int32_t (&off)[NT]) const {
#pragma unroll
    for (int t = 0; t < NT; ++t) off[t] = 0;
#pragma unroll
    for (int d = 0; d < kEwMaxDims; ++d) {
      if (d == ndim) break;
      const uint32_t q = sizes[d].div(linear);
      const int32_t r = static_cast<int32_t>(linear - q * sizes[d].divisor);
      linear = q;
#pragma unroll
      for (int t = 0; t < NT; ++t) off[t] += r * strides[d][t];
    }
  }
};

template <int NT>
struct OffsetCalc64 {
  using index_t = uint64_t;
  using offset_t = int64_t;
  int ndim = 0;
  int64_t sizes[kEwMaxDims];
  int64_t strides[kEwMaxDims][NT];
  __device__ __forceinline__ void get(uint64_t linear, int64_t (&off)[NT]) const {
#pragma unroll
    for (int t = 0; t < NT; ++t) off[t] = 0;
#pragma unroll
    for (int d = 0; d < kEwMaxDims; ++d) {
      if (d == ndim) break;
      const uint64_t s = static_cast<uint64_t>(sizes[d]);
      const uint64_t q = linear / s;
      const int64_t r = static_cast<int64_t>(linear - q * s);
      linear = q;
#pragma unroll
      for (int t = 0; t < NT; ++t) off[t] += r * strides[d][t];
    }
  }
};

// ---- kernel arguments ---------------------------------------------------------------------------
// Values of the operands that live on the host (Note [CPU scalars]), as raw bits of their dtype.
struct HostScalars {
  static constexpr int kMax = 4;
  bool on[kMax] = {};
  uint64_t bits[kMax] = {};
  // Operand t (1-based: 0 is the output) is the one element of the CPU tensor x.
  void set(int t, const Tensor& x) {
    on[t] = true;
    std::memcpy(&bits[t], x.data_ptr(), static_cast<size_t>(x.element_size()));
  }
};

template <int NT>
struct ScalarArgs {
  uint64_t bits[NT];
  bool on[NT];
  template <class T>
  __device__ __forceinline__ T value(int t) const {
    T v;
    memcpy(&v, &bits[t], sizeof(T));
    return v;
  }
};

template <int NT>
struct ContigArgs {
  char* data[NT];
  bool bcast[NT];  // input with stride 0: one value for every element
  int64_t n;
  ScalarArgs<NT> host;
};

template <int NT, class Calc>
struct StridedArgs {
  char* data[NT];
  int64_t n;
  Calc calc;
  ScalarArgs<NT> host;
};

namespace ew_detail {

template <class T, int V>
struct alignas(sizeof(T) * V) VecOf {
  T v[V];
};

template <int I, class... Ts>
struct TypeAt;  // (no type for an empty list: a kernel with no inputs never asks)
template <int I, class T, class... R>
struct TypeAt<I, T, R...> {
  using type = typename TypeAt<I - 1, R...>::type;
};
template <class T, class... R>
struct TypeAt<0, T, R...> {
  using type = T;
};

// K register values of each input type.
template <int K, class... Ts>
struct Regs {};
template <int K, class T, class... Rest>
struct Regs<K, T, Rest...> {
  T v[K];
  Regs<K, Rest...> rest;
};

template <int I, int K, class T, class... Rest>
__device__ __forceinline__ auto& reg_at(Regs<K, T, Rest...>& r) {
  if constexpr (I == 0) return r.v;
  else return reg_at<I - 1>(r.rest);
}

template <class F, size_t... I>
__device__ __forceinline__ void static_for_impl(F&& f, std::index_sequence<I...>) {
  (f(std::integral_constant<int, static_cast<int>(I)>{}), ...);
}
// f(integral_constant<int, 0>), ..., f(integral_constant<int, N - 1>).
template <int N, class F>
__device__ __forceinline__ void static_for(F&& f) {
  static_for_impl(f, std::make_index_sequence<N>{});
}

template <class Out, class F, int K, class... In, size_t... I>
__device__ __forceinline__ Out apply_at(const F& f, Regs<K, In...>& r, int e, std::index_sequence<I...>) {
  return f(reg_at<static_cast<int>(I)>(r)[e]...);
}

}  // namespace ew_detail

// ---- kernels --------------------------------------------------------------------------------------
// Resident blocks per SM a functor asks the contiguous kernel for (__launch_bounds__'s second
// argument, through `static constexpr int kMinBlocksPerSm`): a compute-heavy 16-bit op whose loads
// must stay in flight trades registers for occupancy (gelu bfloat16: 52 registers and 48% achieved
// occupancy without it). 1 (no constraint) for the others.
template <class F, class = void>
struct EwMinBlocks {
  static constexpr int value = 1;
};
template <class F>
struct EwMinBlocks<F, std::void_t<decltype(F::kMinBlocksPerSm)>> {
  static constexpr int value = F::kMinBlocksPerSm;
};

// Contiguous path (Note [GPU elementwise paths]): tiles of kEwThreads * U * V elements.
template <int V, int U, class F, class Out, class... In>
__global__ void __launch_bounds__(kEwThreads, EwMinBlocks<F>::value)
    elementwise_contig_kernel(ContigArgs<1 + sizeof...(In)> a, F f) {
  using namespace ew_detail;
  constexpr int N = sizeof...(In);
  constexpr int K = U * V;
  constexpr int64_t kTile = int64_t(kEwThreads) * K;
  using Seq = std::make_index_sequence<N>;

  Regs<1, In...> bc;  // broadcast inputs, read once per thread
  static_for<N>([&](auto ic) {
    constexpr int I = decltype(ic)::value;
    using T = typename TypeAt<I, In...>::type;
    reg_at<I>(bc)[0] = !a.bcast[I + 1]   ? T()
                       : a.host.on[I + 1] ? a.host.template value<T>(I + 1)
                                          : *reinterpret_cast<const T*>(a.data[I + 1]);
  });

  for (int64_t base = int64_t(blockIdx.x) * kTile; base < a.n; base += int64_t(gridDim.x) * kTile) {
    const int64_t rem = a.n - base;
    Out* out = reinterpret_cast<Out*>(a.data[0]) + base;
    Regs<K, In...> r;
    if (rem >= kTile) {
      // Whole tile: all vector loads first, then compute and vector stores.
      static_for<N>([&](auto ic) {
        constexpr int I = decltype(ic)::value;
        using T = typename TypeAt<I, In...>::type;
        auto& dst = reg_at<I>(r);
        if (a.bcast[I + 1]) {
#pragma unroll
          for (int k = 0; k < K; ++k) dst[k] = reg_at<I>(bc)[0];
        } else {
          const T* p = reinterpret_cast<const T*>(a.data[I + 1]) + base;
#pragma unroll
          for (int u = 0; u < U; ++u) {
            const VecOf<T, V> v = *reinterpret_cast<const VecOf<T, V>*>(p + (u * kEwThreads + threadIdx.x) * V);
#pragma unroll
            for (int j = 0; j < V; ++j) dst[u * V + j] = v.v[j];
          }
        }
      });
#pragma unroll
      for (int u = 0; u < U; ++u) {
        VecOf<Out, V> v;
#pragma unroll
        for (int j = 0; j < V; ++j) v.v[j] = apply_at<Out>(f, r, u * V + j, Seq{});
        *reinterpret_cast<VecOf<Out, V>*>(out + (u * kEwThreads + threadIdx.x) * V) = v;
      }
    } else {
      // Last, partial tile: the same element-to-thread map, each element bounds-checked.
      static_for<N>([&](auto ic) {
        constexpr int I = decltype(ic)::value;
        using T = typename TypeAt<I, In...>::type;
        auto& dst = reg_at<I>(r);
        const T* p = reinterpret_cast<const T*>(a.data[I + 1]);
        const bool b = a.bcast[I + 1];
#pragma unroll
        for (int u = 0; u < U; ++u)
#pragma unroll
          for (int j = 0; j < V; ++j) {
            const int64_t i = int64_t(u * kEwThreads + threadIdx.x) * V + j;
            if (i < rem) dst[u * V + j] = b ? reg_at<I>(bc)[0] : p[base + i];
          }
      });
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int j = 0; j < V; ++j) {
          const int64_t i = int64_t(u * kEwThreads + threadIdx.x) * V + j;
          if (i < rem) out[i] = apply_at<Out>(f, r, u * V + j, Seq{});
        }
    }
  }
}

// Strided path: U elements per thread (consecutive linear indices kEwThreads apart), offsets from
// the linear index by Calc (OffsetCalc32 or OffsetCalc64).
template <class Calc, int U, class F, class Out, class... In>
__global__ void __launch_bounds__(kEwThreads) elementwise_strided_kernel(StridedArgs<1 + sizeof...(In), Calc> a, F f) {
  using namespace ew_detail;
  constexpr int N = sizeof...(In);
  constexpr int NT = N + 1;
  constexpr int64_t kTile = int64_t(kEwThreads) * U;
  using Seq = std::make_index_sequence<N>;
  using Off = typename Calc::offset_t;
  using Index = typename Calc::index_t;

  for (int64_t base = int64_t(blockIdx.x) * kTile; base < a.n; base += int64_t(gridDim.x) * kTile) {
    Off off[U][NT];
    Regs<U, In...> r;
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t i = base + u * kEwThreads + threadIdx.x;
      if (i < a.n) a.calc.get(static_cast<Index>(i), off[u]);
    }
    static_for<N>([&](auto ic) {
      constexpr int I = decltype(ic)::value;
      using T = typename TypeAt<I, In...>::type;
      if (a.host.on[I + 1]) {
        const T v = a.host.template value<T>(I + 1);
#pragma unroll
        for (int u = 0; u < U; ++u) reg_at<I>(r)[u] = v;
        return;
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int64_t i = base + u * kEwThreads + threadIdx.x;
        if (i < a.n) reg_at<I>(r)[u] = *reinterpret_cast<const T*>(a.data[I + 1] + off[u][I + 1]);
      }
    });
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t i = base + u * kEwThreads + threadIdx.x;
      if (i < a.n) *reinterpret_cast<Out*>(a.data[0] + off[u][0]) = apply_at<Out>(f, r, u, Seq{});
    }
  }
}

// ---- the strided launch over an explicit geometry ----------------------------------------------------
// An iteration space as the strided kernels walk it: ndim dims, innermost first, with each operand's
// byte strides and base address. launch_elementwise takes it from an ElementwiseIter; a caller may
// reshape it first (Note [Wide strided copies] in copy.cu reads 16-byte units instead of elements).
template <int NT>
struct EwGeometry {
  int ndim = 0;
  int64_t n = 0;
  int64_t shape[kEwMaxDims] = {};
  int64_t strides[kEwMaxDims][NT] = {};
  char* data[NT] = {};
  EwGeometry() = default;
  explicit EwGeometry(const ElementwiseIter& it) : ndim(it.ndim()), n(it.numel()) {
    for (int t = 0; t < NT; ++t) data[t] = it.data(t);
    for (int d = 0; d < ndim; ++d) {
      shape[d] = it.shape(d);
      for (int t = 0; t < NT; ++t) strides[d][t] = it.byte_stride(t, d);
    }
  }
  // Every element offset and index fits int32 (elem_sizes[t]: operand t's element size in bytes).
  bool fits_in_int32(const int64_t* elem_sizes) const {
    if (n > INT32_MAX) return false;
    for (int t = 0; t < NT; ++t) {
      int64_t reach = elem_sizes[t];
      for (int d = 0; d < ndim; ++d) reach += (shape[d] - 1) * std::llabs(strides[d][t]);
      if (reach > INT32_MAX) return false;
    }
    return true;
  }
};

// The strided kernels' arguments over geometry g, with Calc = OffsetCalc32<NT> (where
// g.fits_in_int32) or OffsetCalc64<NT>.
template <class Calc, int NT>
StridedArgs<NT, Calc> strided_args(const EwGeometry<NT>& g, const ScalarArgs<NT>& sc = {}) {
  StridedArgs<NT, Calc> s{};
  s.n = g.n;
  s.host = sc;
  s.calc.ndim = g.ndim;
  for (int t = 0; t < NT; ++t) s.data[t] = g.data[t];
  for (int d = 0; d < g.ndim; ++d) {
    if constexpr (std::is_same_v<Calc, OffsetCalc32<NT>>) s.calc.sizes[d] = IntDivider32(static_cast<uint32_t>(g.shape[d]));
    else s.calc.sizes[d] = g.shape[d];
    for (int t = 0; t < NT; ++t) s.calc.strides[d][t] = static_cast<typename Calc::offset_t>(g.strides[d][t]);
  }
  return s;
}

inline unsigned ew_grid(int64_t n, int64_t tile);

// out = f(in...) over geometry g through the strided kernels (32-bit offsets where they fit).
template <int U, class Out, class... In, class F>
void launch_strided(const EwGeometry<1 + sizeof...(In)>& g, const F& f, cudaStream_t stream, const char* op,
                    const ScalarArgs<1 + sizeof...(In)>& sc = {}) {
  constexpr int NT = 1 + sizeof...(In);
  constexpr int64_t esize[NT] = {static_cast<int64_t>(sizeof(Out)), static_cast<int64_t>(sizeof(In))...};
  if (g.n == 0) return;
  const unsigned grid = ew_grid(g.n, int64_t(kEwThreads) * U);
  if (g.fits_in_int32(esize)) {
    elementwise_strided_kernel<OffsetCalc32<NT>, U, F, Out, In...>
        <<<grid, kEwThreads, 0, stream>>>(strided_args<OffsetCalc32<NT>>(g, sc), f);
    check_launch(op, "elementwise_strided_kernel<int32>");
  } else {
    elementwise_strided_kernel<OffsetCalc64<NT>, U, F, Out, In...>
        <<<grid, kEwThreads, 0, stream>>>(strided_args<OffsetCalc64<NT>>(g, sc), f);
    check_launch(op, "elementwise_strided_kernel<int64>");
  }
}

// ---- the launcher ---------------------------------------------------------------------------------
// Blocks for `tiles` tiles: one each, capped at the grid's x limit (the kernels loop past the cap).
inline unsigned ew_grid(int64_t n, int64_t tile) {
  const int64_t tiles = (n + tile - 1) / tile;
  return static_cast<unsigned>(std::clamp<int64_t>(tiles, 1, INT32_MAX));
}

// Runs out = f(in...) over `it` (operand 0 the output of type Out, operands 1.. the inputs of types
// In...) on `stream`, through the path of Note [GPU elementwise paths]. U is the number of vectors
// (or strided elements) per thread and operand: kEwHotUnroll for the hot ops, 1 or 2 for ops whose
// functor switches on an op (fewer inlined copies of the switch). `op` names the op in errors.
// `host` holds the inputs that are CPU scalars (Note [CPU scalars]).
template <int U, class Out, class... In, class F>
void launch_elementwise(const ElementwiseIter& it, const F& f, cudaStream_t stream, const char* op,
                        const HostScalars& host = {}) {
  constexpr int NT = 1 + sizeof...(In);
  constexpr int64_t esize[NT] = {static_cast<int64_t>(sizeof(Out)), static_cast<int64_t>(sizeof(In))...};
  constexpr int64_t kWidest = std::max({static_cast<int64_t>(sizeof(Out)), static_cast<int64_t>(sizeof(In))...});
  constexpr int V = static_cast<int>(16 / kWidest);
  static_assert(V >= 1 && 16 % kWidest == 0, "element sizes must divide 16 bytes");
  static_assert(NT <= HostScalars::kMax, "at most three inputs");
  ScalarArgs<NT> sc{};
  for (int t = 0; t < NT; ++t) {
    sc.on[t] = t > 0 && host.on[t];
    sc.bits[t] = host.bits[t];
  }
  // At most 16 elements per thread on the vector path: each unpacked element takes a register, and
  // 1- and 2-byte types at U full vectors would cost occupancy (Note [GPU elementwise paths]).
  constexpr int UV = std::min(U, std::max(1, 16 / V));
  TS_CHECK(it.ntensors() == NT, ValueError, op, ": elementwise launch over ", it.ntensors(), " operands, expected ", NT);
  const int64_t n = it.numel();
  if (n == 0) return;

  // Contiguous: one merged dim (or a single element) where each input is dense or a broadcast scalar.
  bool contig = it.ndim() <= 1;
  ContigArgs<NT> c{};
  c.n = n;
  c.host = sc;
  for (int t = 0; t < NT; ++t) {
    c.data[t] = it.data(t);
    c.bcast[t] = sc.on[t];  // a host scalar is read from the arguments, whatever the iteration space
    if (contig && it.ndim() == 1 && !sc.on[t]) {
      const int64_t s = it.byte_stride(t, 0);
      if (s == 0 && t > 0) c.bcast[t] = true;
      else if (s != esize[t]) contig = false;
    }
  }
  if (contig) {
    bool aligned = true;
    for (int t = 0; t < NT; ++t)
      if (!c.bcast[t] && reinterpret_cast<uintptr_t>(c.data[t]) % static_cast<uintptr_t>(V * esize[t]) != 0)
        aligned = false;
    if (aligned) {
      elementwise_contig_kernel<V, UV, F, Out, In...><<<ew_grid(n, int64_t(kEwThreads) * UV * V), kEwThreads, 0, stream>>>(c, f);
    } else {
      elementwise_contig_kernel<1, U, F, Out, In...><<<ew_grid(n, int64_t(kEwThreads) * U), kEwThreads, 0, stream>>>(c, f);
    }
    check_launch(op, "elementwise_contig_kernel");
    return;
  }

  launch_strided<U, Out, In...>(EwGeometry<NT>(it), f, stream, op, sc);
}

// ---- integer division by zero ------------------------------------------------------------------------
// Note [GPU division by zero]: the CPU raises ValueError("ZeroDivisionError") after its loop when an
// integer division, floor division, fmod or remainder divides by zero. On the GPU the functor sets a
// flag in device memory (any thread that meets a zero divisor stores 1); check() reads it back with
// one cudaMemcpyAsync and a synchronization of the current stream. Only those integer ops pay that
// synchronization (so they cannot be captured in a CUDA graph); floating ops never do.
class ZeroDivisionFlag {
 public:
  explicit ZeroDivisionFlag(cudaStream_t stream) : stream_(stream), mem_(allocate_workspace(sizeof(int))) {
    TS_CUDA_CHECK(cudaMemsetAsync(mem_.get(), 0, sizeof(int), stream_));
  }
  int* device_ptr() const { return static_cast<int*>(mem_.get()); }
  // Raises ValueError if a kernel queued since construction divided an integer by zero.
  void check() const {
    int host = 0;
    TS_CUDA_CHECK(cudaMemcpyAsync(&host, mem_.get(), sizeof(int), cudaMemcpyDeviceToHost, stream_));
    TS_CUDA_CHECK(cudaStreamSynchronize(stream_));
    TS_CHECK(host == 0, ValueError, "ZeroDivisionError");
  }

 private:
  cudaStream_t stream_;
  DataPtr mem_;
};

// Registration of the elementwise family's files; register_elementwise() (elementwise.cu) calls them.
void register_unary_cuda();    // unary.cu
void register_binary_cuda();   // binary.cu
void register_ternary_cuda();  // ternary.cu (and allclose)

}  // namespace tessera::cuda
