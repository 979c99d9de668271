// Building blocks shared by the CPU reduction and scan kernels: coalesced groups of dims with their
// element offsets, the walk over runs along a group's innermost dim, 16-bit float widening, and the
// fixed summation tree.
//
// Note [Reduction tree]: a range of n reduced elements is split at the largest leaf * 2^k below n
// until a leaf is left, and leaves accumulate in a fixed set of lanes. Pairwise combination keeps
// float32 sums of many millions of elements within a few ulps. Because each split point is a
// power-of-two multiple of the leaf, cutting the range into chunks of leaf * 2^c and folding the
// chunk results with the same rule gives the very same tree: results are identical whether a
// reduction runs serially or over chunks in parallel, with any number of threads.
#pragma once
#include "kernels/cpu/isa_namespace.h"
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "tensor/dispatch_dtype.h"
#include "tessera/tensor.h"

#if defined(__F16C__)
#include <immintrin.h>
#endif
#if defined(_OPENMP)
#include <omp.h>
#endif

namespace tessera::cpu {
TS_CPU_ISA_BEGIN  // Note [ISA namespaces] in kernels/cpu/isa_namespace.h

inline constexpr int kMaxGroupDims = 25;

inline int max_threads() {
#if defined(_OPENMP)
  return omp_get_max_threads();
#else
  return 1;
#endif
}

// Dims (outermost first) with size-1 dims dropped and neighbours merged where memory allows.
struct DimGroup {
  int n = 0;
  int64_t size[kMaxGroupDims];
  int64_t stride[kMaxGroupDims];  // in elements
  int64_t numel = 1;

  int64_t inner_size() const { return n ? size[n - 1] : 1; }
  int64_t inner_stride() const { return n ? stride[n - 1] : 1; }
  // Element offset of the row-major linear index i.
  int64_t offset(int64_t i) const {
    if (n == 1) return i * stride[0];
    int64_t off = 0;
    for (int d = n - 1; d >= 0; --d) {
      off += (i % size[d]) * stride[d];
      i /= size[d];
    }
    return off;
  }
  // The group without its innermost dim.
  DimGroup outer() const {
    DimGroup g = *this;
    if (g.n) {
      g.numel = numel / size[n - 1];
      --g.n;
    }
    return g;
  }
};

inline DimGroup make_group(const int64_t* sizes, const int64_t* strides, int n) {
  DimGroup g;
  for (int i = 0; i < n; ++i) {
    g.numel *= sizes[i];
    if (sizes[i] == 1) continue;
    if (g.n > 0 && g.stride[g.n - 1] == strides[i] * sizes[i]) {
      g.size[g.n - 1] *= sizes[i];
      g.stride[g.n - 1] = strides[i];
    } else {
      g.size[g.n] = sizes[i];
      g.stride[g.n] = strides[i];
      ++g.n;
    }
  }
  return g;
}

// Calls f(offset, len, stride) for the runs along g's innermost dim that cover the linear indices
// [begin, end), in order.
template <class F>
inline void for_each_run(const DimGroup& g, int64_t begin, int64_t end, F&& f) {
  if (begin >= end) return;
  if (g.n <= 1) {
    const int64_t st = g.n ? g.stride[0] : 1;
    f(begin * st, end - begin, st);
    return;
  }
  const int64_t in_size = g.size[g.n - 1], in_stride = g.stride[g.n - 1];
  int64_t idx[kMaxGroupDims];
  int64_t q = begin / in_size, i0 = begin % in_size, off = 0;
  for (int d = g.n - 2; d >= 0; --d) {
    idx[d] = q % g.size[d];
    q /= g.size[d];
    off += idx[d] * g.stride[d];
  }
  int64_t pos = begin;
  while (true) {
    const int64_t len = std::min(in_size - i0, end - pos);
    f(off + i0 * in_stride, len, in_stride);
    pos += len;
    if (pos >= end) break;
    i0 = 0;
    for (int d = g.n - 2; d >= 0; --d) {
      off += g.stride[d];
      if (++idx[d] < g.size[d]) break;
      off -= g.size[d] * g.stride[d];
      idx[d] = 0;
    }
  }
}

template <class T>
inline constexpr bool is_16bit_float_v = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;
// The type a kernel computes an element of T in: float for the 16-bit floats, T otherwise.
template <class T> using load_t = std::conditional_t<is_16bit_float_v<T>, float, T>;

// Widens n contiguous 16-bit floats to float (F16C for Half where the target has it).
template <class T>
inline void widen(const T* p, int64_t n, float* out) {
  int64_t i = 0;
  if constexpr (std::is_same_v<T, Half>) {
#if defined(__F16C__)
    for (; i + 8 <= n; i += 8)
      _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i))));
#endif
    for (; i < n; ++i) out[i] = Half::to_float(p[i].x);
  } else {
    for (; i < n; ++i) out[i] = std::bit_cast<float>(static_cast<uint32_t>(p[i].x) << 16);
  }
}

// Calls f(const load_t<T>* block, m) over n elements of p (stride st) in order: directly for
// contiguous full-width types, through a small widened (16-bit floats) or gathered (strided) buffer
// otherwise, so the loops in f always see unit-stride values of the compute type.
template <class T, class F>
inline void for_blocks(const T* p, int64_t n, int64_t st, F&& f) {
  using V = load_t<T>;
  if (st == 1 && !is_16bit_float_v<T>) {
    f(reinterpret_cast<const V*>(p), n);
    return;
  }
  constexpr int64_t kBlock = 256;
  V buf[kBlock];
  for (int64_t i = 0; i < n; i += kBlock) {
    const int64_t m = std::min(kBlock, n - i);
    if constexpr (is_16bit_float_v<T>) {
      if (st == 1) {
        widen(p + i, m, buf);
        f(static_cast<const V*>(buf), m);
        continue;
      }
    }
    for (int64_t k = 0; k < m; ++k) buf[k] = static_cast<V>(p[(i + k) * st]);
    f(static_cast<const V*>(buf), m);
  }
}

template <class T>
inline bool is_nan(T v) {
  if constexpr (std::is_floating_point_v<T>) return std::isnan(v);
  else return false;
}

// Note [Reduction tree]: the split point of a range of n > leaf elements.
inline int64_t tree_split(int64_t n, int64_t leaf) {
  int64_t m = leaf;
  while (m * 2 < n) m *= 2;
  return m;
}

// Folds n partial results (one per chunk) with the tree of Note [Reduction tree].
template <class A, class Combine>
inline A fold_partials(const A* p, int64_t n, Combine&& combine) {
  if (n == 1) return p[0];
  const int64_t m = tree_split(n, 1);
  const A left = fold_partials(p, m, combine);
  const A right = fold_partials(p + m, n - m, combine);
  return combine(left, right);
}

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

TS_CPU_ISA_END
}  // namespace tessera::cpu
