// A contiguous unary kernel for the 16-bit floats whose per-element math is long (gelu, silu): the
// loads of a thread's next tile are issued before it computes and stores the current one.
//
// Note [Prefetching unary kernels]: the generic contiguous kernel (Note [GPU elementwise paths])
// loads a tile, computes, stores, then loads the next: while a warp computes it has no load in
// flight. For a copy-like op that is fine, but a bfloat16 gelu spends about 17 instructions (two of
// them MUFU) per 2-byte element, and at its 52 registers (9 blocks of 128 threads per SM) the
// memory pipe idles through the compute phases: 0.865 of the copy bandwidth on an H200. Here a grid
// of the resident blocks walks the full tiles with a grid stride, each thread holding two tiles' raw
// 16-byte vectors (the current and the next), so loads stay in flight through the arithmetic, as
// the norm forward does (Note [Norm forward rows]). The arithmetic is the functor's, element by
// element, so results are the generic kernel's bit for bit. The partial last tile goes element by
// element. Exact aliasing (out == x, in-place ops) is safe: a thread prefetches only elements it
// alone will later write.
#pragma once
#include <string_view>

#include "kernels/cuda/elementwise.cuh"

namespace tessera::cuda {

inline constexpr int kPrefetchUnroll = 2;  // 16-byte vectors per thread and tile

template <class T, class F>
__global__ void __launch_bounds__(kEwThreads) unary_prefetch_kernel(const T* x, T* y, int64_t n, F f) {
  constexpr int V = 16 / static_cast<int>(sizeof(T));
  constexpr int U = kPrefetchUnroll;
  constexpr int64_t kTile = int64_t(kEwThreads) * U * V;
  const int64_t full = n / kTile;
  const int64_t stride = gridDim.x;
  int64_t t = blockIdx.x;
  uint4 cur[U], nxt[U];
  auto load = [&](int64_t tile, uint4 (&r)[U]) {
    const uint4* p = reinterpret_cast<const uint4*>(x + tile * kTile);
#pragma unroll
    for (int u = 0; u < U; ++u) r[u] = p[u * kEwThreads + threadIdx.x];
  };
  if (t < full) load(t, cur);
  for (; t < full; t += stride) {  // uniform per block
    if (t + stride < full) load(t + stride, nxt);
    uint4* q = reinterpret_cast<uint4*>(y + t * kTile);
#pragma unroll
    for (int u = 0; u < U; ++u) {
      ew_detail::VecOf<T, V> in, out;
      memcpy(&in, &cur[u], sizeof(in));
#pragma unroll
      for (int j = 0; j < V; ++j) out.v[j] = f(in.v[j]);
      uint4 raw;
      memcpy(&raw, &out, sizeof(raw));
      q[u * kEwThreads + threadIdx.x] = raw;
    }
#pragma unroll
    for (int u = 0; u < U; ++u) cur[u] = nxt[u];
  }
  // The partial last tile, element by element.
  for (int64_t i = full * kTile + int64_t(blockIdx.x) * kEwThreads + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * kEwThreads)
    y[i] = f(x[i]);
}

// out = f(x) for a 16-bit T through unary_prefetch_kernel where out and x are contiguous, of one
// dtype and 16-byte aligned (and TESSERA_EW_PREFETCH is not 0); else through launch_elementwise.
template <class T, class F>
void launch_unary_prefetch(const ElementwiseIter& it, const Tensor& out, const Tensor& x, const F& f,
                           cudaStream_t stream, const char* op) {
  static_assert(sizeof(T) == 2, "for the 16-bit floats");
  static const bool enabled = [] {
    const char* e = std::getenv("TESSERA_EW_PREFETCH");
    return !(e && std::string_view(e) == "0");
  }();
  const int64_t n = out.numel();
  const bool fits = enabled && n > 0 && out.is_contiguous() && x.is_contiguous() && x.sizes() == out.sizes() &&
                    reinterpret_cast<uintptr_t>(out.data_ptr()) % 16 == 0 &&
                    reinterpret_cast<uintptr_t>(x.data_ptr()) % 16 == 0;
  if (!fits) {
    launch_elementwise<kEwHotUnroll, T, T>(it, f, stream, op);
    return;
  }
  static int per_sm = 0;  // one instantiation per (T, F): its own occupancy
  if (per_sm == 0) {
    TS_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, unary_prefetch_kernel<T, F>, kEwThreads, 0));
    if (per_sm < 1) per_sm = 1;
  }
  int sms = 0;
  TS_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, out.device().index()));
  const int64_t tiles = n / (int64_t(kEwThreads) * kPrefetchUnroll * (16 / int64_t(sizeof(T))));
  const int64_t grid = std::clamp<int64_t>(std::min<int64_t>(tiles, int64_t(per_sm) * sms), 1, INT32_MAX);
  unary_prefetch_kernel<T, F><<<static_cast<unsigned>(grid), kEwThreads, 0, stream>>>(
      static_cast<const T*>(x.data_ptr()), static_cast<T*>(out.data_ptr()), n, f);
  check_launch(op, "unary_prefetch_kernel");
}

}  // namespace tessera::cuda
