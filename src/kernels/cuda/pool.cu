// CUDA pooling kernels behind ops/conv_kernel.h: max pooling with indices, average pooling
// (count_include_pad, ceil_mode through the geometry) and adaptive average pooling, forward and
// backward, on (N, C, H, W) tensors in any memory order.
//
// Layout. Every kernel addresses its tensors through their four strides, so NCHW, channels-last and
// strided views are read in place, without copies. One thread computes one element of the tensor it
// writes, visiting elements in that tensor's memory order (NCHW, or channels-last with C innermost,
// whichever the result is), so that writes coalesce and, for inputs in the same order, reads too.
// Channels-last max pooling with whole 16-byte vectors of channels takes V channels per thread (Note
// [Channels-last max pooling]).
//
// Semantics are the CPU kernels' (kernels/cpu/pool.cpp), element for element:
//  - max: taps in (kh, kw) order, `v > max || v is NaN` takes the tap (NaN wins; the last NaN's index),
//    ties keep the first; before any tap the max is -inf at the window's first in-bounds position.
//    Indices are flat h * W + w within the plane.
//  - average windows and divisors as PyTorch's (the window clipped to the padded input gives the
//    count_include_pad divisor, then clipped to the input gives the summed range).
//  - float16 / bfloat16 accumulate in float and round once.
// Backward:
//  - avg_pool2d and adaptive_avg_pool2d gather: each input element sums, in (oh, ow) order, the
//    gradients of the windows that cover it, so the result is deterministic and rounds once, in the
//    same order as the CPU's scatter.
//  - max_pool2d_backward receives only the indices (its geometry carries no window), so it scatters
//    with atomic adds in the accumulation type: float32 / float64 straight into the zeroed result,
//    float16 / bfloat16 into a float32 scratch that is rounded once into the result. Overlapping
//    windows make the float sums order-dependent in their last bits; with the determinism switch on,
//    a gather (each input position sums, in (oh, ow) order, the windows that chose it) runs instead.
//    An index outside its plane
//    (possible only from a caller's own indices tensor) is skipped: a kernel cannot raise without
//    synchronizing, where the CPU kernel raises IndexError.
//
// Indexing: 32-bit offsets when every tensor's extent and the window arithmetic fit, 64-bit
// otherwise (the kernels are templated on the index type).
#include <climits>
#include <cmath>
#include <initializer_list>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/pool.h"
#include "ops/conv_kernel.h"
#include "runtime/determinism.h"
#include "tensor/tensor_impl.h"

namespace tessera::cuda {
namespace {

constexpr int kThreads = 256;

// x-side: the (N, C, H, W) tensor (the input, or the input gradient); y-side: the (N, C, OH, OW)
// tensor (the pooled output, or its gradient); idx: max pooling's indices (y-side shape).
template <class I>
struct PoolParams {
  I N, C, H, W, OH, OW;
  I kh, kw, sh, sw, ph, pw, dh, dw;
  bool count_include_pad;
  bool cl;  // the written tensor is channels-last: visit positions with C innermost
  I xs[4], ys[4], is[4];
};

template <class I>
struct Pos {
  I n, c, h, w;
};

// Position `i` of an (N, C, Hs, Ws) space in NCHW or channels-last (NHWC) visiting order.
template <class I>
__device__ __forceinline__ Pos<I> decode(I i, I C, I Hs, I Ws, bool cl) {
  Pos<I> p;
  if (cl) {
    p.c = i % C;
    i /= C;
    p.w = i % Ws;
    i /= Ws;
    p.h = i % Hs;
    p.n = i / Hs;
  } else {
    p.w = i % Ws;
    i /= Ws;
    p.h = i % Hs;
    i /= Hs;
    p.c = i % C;
    p.n = i / C;
  }
  return p;
}

template <class I>
__device__ __forceinline__ I offset(const I* s, I n, I c, I h, I w) {
  return n * s[0] + c * s[1] + h * s[2] + w * s[3];
}

// The first tap start + j * step (j >= 0) that is >= 0.
template <class I>
__device__ __forceinline__ I first_nonnegative(I start, I step) {
  return start >= 0 ? start : start + ((-start + step - 1) / step) * step;
}

#define TS_GRID_STRIDE_LOOP(li, total) \
  for (int64_t li = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; li < (total); li += int64_t(gridDim.x) * blockDim.x)

// ---- max pooling ------------------------------------------------------------------------------------
template <class T, class I>
static __global__ void max_pool_kernel(const T* __restrict__ x, T* __restrict__ out, int64_t* __restrict__ idx,
                                       PoolParams<I> p, int64_t total) {
  using A = dacc_t<T>;
  TS_GRID_STRIDE_LOOP(li, total) {
    const Pos<I> q = decode<I>(static_cast<I>(li), p.C, p.OH, p.OW, p.cl);
    const I h_start = q.h * p.sh - p.ph, w_start = q.w * p.sw - p.pw;
    A m = -static_cast<A>(INFINITY);
    int64_t best = int64_t(first_nonnegative(h_start, p.dh)) * p.W + first_nonnegative(w_start, p.dw);
    const T* xp = x + q.n * p.xs[0] + q.c * p.xs[1];
    for (I kh = 0; kh < p.kh; ++kh) {
      const I ih = h_start + kh * p.dh;
      if (ih < 0 || ih >= p.H) continue;
      for (I kw = 0; kw < p.kw; ++kw) {
        const I iw = w_start + kw * p.dw;
        if (iw < 0 || iw >= p.W) continue;
        const A v = convert<A>(xp[ih * p.xs[2] + iw * p.xs[3]]);
        if (v > m || v != v) {
          m = v;
          best = int64_t(ih) * p.W + iw;
        }
      }
    }
    out[offset(p.ys, q.n, q.c, q.h, q.w)] = convert<T>(m);
    idx[offset(p.is, q.n, q.c, q.h, q.w)] = best;
  }
}

// Note [Channels-last max pooling]: where the input, the output and the indices are channels-last with
// unit channel strides, C and every other stride a multiple of V = 16 bytes / sizeof(T), and the base
// pointers aligned to a vector, a thread takes V neighbouring channels of one output position: each
// tap is one 16-byte load, the V outputs one store and the V indices four. The taps, the NaN rule and
// the indices are max_pool_kernel's, per channel. ResNet-50's stem pool at batch 256 in bfloat16: the
// per-element kernel took 1.14 ms on an H200 (PyTorch's 0.83 ms).
template <class T, int V>
struct alignas(sizeof(T) * V) PoolVec {
  T v[V];
};

template <class T, class I, int V>
static __global__ void max_pool_cl_vec_kernel(const T* __restrict__ x, T* __restrict__ out, int64_t* __restrict__ idx,
                                              PoolParams<I> p, int64_t vectors) {
  using A = dacc_t<T>;
  const I cv = p.C / V;
  TS_GRID_STRIDE_LOOP(li, vectors) {
    I i = static_cast<I>(li);
    const I c0 = (i % cv) * V;
    i /= cv;
    const I ow = i % p.OW;
    i /= p.OW;
    const I oh = i % p.OH, n = i / p.OH;
    const I h_start = oh * p.sh - p.ph, w_start = ow * p.sw - p.pw;
    A m[V];
    int64_t best[V];
    const int64_t first = int64_t(first_nonnegative(h_start, p.dh)) * p.W + first_nonnegative(w_start, p.dw);
#pragma unroll
    for (int j = 0; j < V; ++j) {
      m[j] = -static_cast<A>(INFINITY);
      best[j] = first;
    }
    const T* xp = x + n * p.xs[0] + c0;
    for (I kh = 0; kh < p.kh; ++kh) {
      const I ih = h_start + kh * p.dh;
      if (ih < 0 || ih >= p.H) continue;
      for (I kw = 0; kw < p.kw; ++kw) {
        const I iw = w_start + kw * p.dw;
        if (iw < 0 || iw >= p.W) continue;
        const PoolVec<T, V> t = *reinterpret_cast<const PoolVec<T, V>*>(xp + ih * p.xs[2] + iw * p.xs[3]);
        const int64_t pos = int64_t(ih) * p.W + iw;
#pragma unroll
        for (int j = 0; j < V; ++j) {
          const A v = convert<A>(t.v[j]);
          if (v > m[j] || v != v) {
            m[j] = v;
            best[j] = pos;
          }
        }
      }
    }
    PoolVec<T, V> o;
#pragma unroll
    for (int j = 0; j < V; ++j) o.v[j] = convert<T>(m[j]);
    *reinterpret_cast<PoolVec<T, V>*>(out + n * p.ys[0] + oh * p.ys[2] + ow * p.ys[3] + c0) = o;
    int64_t* ip = idx + n * p.is[0] + oh * p.is[2] + ow * p.is[3] + c0;
#pragma unroll
    for (int j = 0; j < V; j += 2) *reinterpret_cast<longlong2*>(ip + j) = make_longlong2(best[j], best[j + 1]);
  }
}

// Whether max pooling takes max_pool_cl_vec_kernel with V channels per thread.
bool max_pool_vectorizes(const Tensor& out, const Tensor& indices, const Tensor& x, int64_t V) {
  const int64_t C = x.size(1);
  if (C % V != 0 || x.stride(1) != 1 || out.stride(1) != 1 || indices.stride(1) != 1) return false;
  for (const Tensor* t : {&out, &indices, &x})
    for (int d : {0, 2, 3})
      if (t->size(d) > 1 && t->stride(d) % V != 0) return false;
  auto aligned = [](const Tensor& t, int64_t bytes) {
    return reinterpret_cast<uintptr_t>(t.data_ptr()) % static_cast<uintptr_t>(bytes) == 0;
  };
  return aligned(x, V * x.element_size()) && aligned(out, V * out.element_size()) && aligned(indices, 16);
}

// Scatters grad into acc (x-side strides) at the indices; Acc is the accumulation type.
template <class T, class Acc, class I>
static __global__ void max_pool_backward_kernel(const T* __restrict__ grad, const int64_t* __restrict__ idx,
                                                Acc* __restrict__ acc, PoolParams<I> p, int64_t total) {
  const int64_t plane = int64_t(p.H) * p.W;
  TS_GRID_STRIDE_LOOP(li, total) {
    const Pos<I> q = decode<I>(static_cast<I>(li), p.C, p.OH, p.OW, p.cl);
    const int64_t k = idx[offset(p.is, q.n, q.c, q.h, q.w)];
    if (k < 0 || k >= plane) continue;  // out of the plane: skipped (see the file comment)
    const I ih = static_cast<I>(k / p.W), iw = static_cast<I>(k % p.W);
    const T g = grad[offset(p.ys, q.n, q.c, q.h, q.w)];
    atomicAdd(acc + offset(p.xs, q.n, q.c, ih, iw), static_cast<Acc>(convert<dacc_t<T>>(g)));
  }
}

// The deterministic variant (tessera/determinism.h): dx at each input position is the sum, in (oh, ow)
// order, of the gradients of the windows whose recorded index is this position, rounded once; the
// CPU kernel adds them in the same order. Windows that start at oh * sh - ph and span (kh - 1) * dh + 1
// rows can cover ih only for oh in [oh0, oh1) below; the index check picks the ones that chose it.
template <class T, class I>
static __global__ void max_pool_backward_gather_kernel(const T* __restrict__ grad, const int64_t* __restrict__ idx,
                                                       T* __restrict__ dx, PoolParams<I> p, int64_t total) {
  using A = dacc_t<T>;
  TS_GRID_STRIDE_LOOP(li, total) {
    const Pos<I> q = decode<I>(static_cast<I>(li), p.C, p.H, p.W, p.cl);
    const int64_t span_h = int64_t(p.kh - 1) * p.dh, span_w = int64_t(p.kw - 1) * p.dw;
    const int64_t top = int64_t(q.h) + p.ph - span_h, left = int64_t(q.w) + p.pw - span_w;
    const int64_t oh0 = top <= 0 ? 0 : (top + p.sh - 1) / p.sh;
    const int64_t ow0 = left <= 0 ? 0 : (left + p.sw - 1) / p.sw;
    const int64_t oh1 = min((int64_t(q.h) + p.ph) / p.sh + 1, int64_t(p.OH));
    const int64_t ow1 = min((int64_t(q.w) + p.pw) / p.sw + 1, int64_t(p.OW));
    const int64_t me = int64_t(q.h) * p.W + q.w;
    A s = 0;
    for (int64_t oh = oh0; oh < oh1; ++oh)
      for (int64_t ow = ow0; ow < ow1; ++ow) {
        const I oi = static_cast<I>(oh), oj = static_cast<I>(ow);
        if (idx[offset(p.is, q.n, q.c, oi, oj)] == me) s += convert<A>(grad[offset(p.ys, q.n, q.c, oi, oj)]);
      }
    dx[offset(p.xs, q.n, q.c, q.h, q.w)] = convert<T>(s);
  }
}

// out[i] = round(acc[i]) over a dense result and its identically laid-out scratch.
template <class T>
static __global__ void round_kernel(const float* __restrict__ acc, T* __restrict__ out, int64_t n) {
  TS_GRID_STRIDE_LOOP(i, n) out[i] = convert<T>(acc[i]);
}

// ---- average pooling ----------------------------------------------------------------------------------
template <class I>
struct AvgWindow {
  I h0, h1, w0, w1, divisor;
};

template <class I>
__device__ __forceinline__ AvgWindow<I> avg_window(const PoolParams<I>& p, I oh, I ow) {
  I h0 = oh * p.sh - p.ph, w0 = ow * p.sw - p.pw;
  I h1 = min(h0 + p.kh, p.H + p.ph), w1 = min(w0 + p.kw, p.W + p.pw);
  const I pool_size = (h1 - h0) * (w1 - w0);
  h0 = max(h0, I(0));
  w0 = max(w0, I(0));
  h1 = min(h1, p.H);
  w1 = min(w1, p.W);
  return {h0, h1, w0, w1, p.count_include_pad ? pool_size : (h1 - h0) * (w1 - w0)};
}

template <class T, class I>
static __global__ void avg_pool_kernel(const T* __restrict__ x, T* __restrict__ out, PoolParams<I> p, int64_t total) {
  using A = dacc_t<T>;
  TS_GRID_STRIDE_LOOP(li, total) {
    const Pos<I> q = decode<I>(static_cast<I>(li), p.C, p.OH, p.OW, p.cl);
    const AvgWindow<I> win = avg_window(p, q.h, q.w);
    T* o = out + offset(p.ys, q.n, q.c, q.h, q.w);
    if (win.h0 >= win.h1 || win.w0 >= win.w1) {
      *o = convert<T>(A(0));
      continue;
    }
    const T* xp = x + q.n * p.xs[0] + q.c * p.xs[1];
    A s = 0;
    for (I ih = win.h0; ih < win.h1; ++ih)
      for (I iw = win.w0; iw < win.w1; ++iw) s += convert<A>(xp[ih * p.xs[2] + iw * p.xs[3]]);
    *o = convert<T>(s / static_cast<A>(win.divisor));
  }
}

// dx (x-side) at each input position: the sum over the windows (oh, ow) covering it of
// grad / divisor, in (oh, ow) order.
template <class T, class I>
static __global__ void avg_pool_backward_kernel(const T* __restrict__ grad, T* __restrict__ dx, PoolParams<I> p,
                                                int64_t total) {
  using A = dacc_t<T>;
  TS_GRID_STRIDE_LOOP(li, total) {
    const Pos<I> q = decode<I>(static_cast<I>(li), p.C, p.H, p.W, p.cl);
    // Windows starting at oh * sh - ph cover ih when ih - kh < oh * sh - ph <= ih.
    const I oh0 = q.h + p.ph < p.kh ? I(0) : (q.h + p.ph - p.kh) / p.sh + 1;
    const I oh1 = min((q.h + p.ph) / p.sh + 1, p.OH);
    const I ow0 = q.w + p.pw < p.kw ? I(0) : (q.w + p.pw - p.kw) / p.sw + 1;
    const I ow1 = min((q.w + p.pw) / p.sw + 1, p.OW);
    const T* gp = grad + q.n * p.ys[0] + q.c * p.ys[1];
    A s = 0;
    for (I oh = oh0; oh < oh1; ++oh)
      for (I ow = ow0; ow < ow1; ++ow) {
        const AvgWindow<I> win = avg_window(p, oh, ow);
        s += convert<A>(gp[oh * p.ys[2] + ow * p.ys[3]]) / static_cast<A>(win.divisor);
      }
    dx[offset(p.xs, q.n, q.c, q.h, q.w)] = convert<T>(s);
  }
}

// ---- adaptive average pooling -------------------------------------------------------------------------
// Window o of O over I spans [floor(o * I / O), ceil((o + 1) * I / O)); 64-bit products (o * I may
// pass 2^31 even where the tensors do not).
__device__ __forceinline__ int64_t adaptive_start(int64_t o, int64_t O, int64_t I) { return (o * I) / O; }
__device__ __forceinline__ int64_t adaptive_end(int64_t o, int64_t O, int64_t I) { return ((o + 1) * I + O - 1) / O; }

template <class T, class I>
static __global__ void adaptive_avg_pool_kernel(const T* __restrict__ x, T* __restrict__ out, PoolParams<I> p,
                                                int64_t total) {
  using A = dacc_t<T>;
  TS_GRID_STRIDE_LOOP(li, total) {
    const Pos<I> q = decode<I>(static_cast<I>(li), p.C, p.OH, p.OW, p.cl);
    const I h0 = static_cast<I>(adaptive_start(q.h, p.OH, p.H)), h1 = static_cast<I>(adaptive_end(q.h, p.OH, p.H));
    const I w0 = static_cast<I>(adaptive_start(q.w, p.OW, p.W)), w1 = static_cast<I>(adaptive_end(q.w, p.OW, p.W));
    const T* xp = x + q.n * p.xs[0] + q.c * p.xs[1];
    A s = 0;
    for (I ih = h0; ih < h1; ++ih)
      for (I iw = w0; iw < w1; ++iw) s += convert<A>(xp[ih * p.xs[2] + iw * p.xs[3]]);
    out[offset(p.ys, q.n, q.c, q.h, q.w)] = convert<T>(s / static_cast<A>((h1 - h0) * (w1 - w0)));
  }
}

// The outputs whose window covers input position i lie in [floor(i * O / I), ceil((i + 1) * O / I));
// each is checked against its own window, so the range only has to contain them.
template <class T, class I>
static __global__ void adaptive_avg_pool_backward_kernel(const T* __restrict__ grad, T* __restrict__ dx,
                                                         PoolParams<I> p, int64_t total) {
  using A = dacc_t<T>;
  TS_GRID_STRIDE_LOOP(li, total) {
    const Pos<I> q = decode<I>(static_cast<I>(li), p.C, p.H, p.W, p.cl);
    const int64_t oh0 = (int64_t(q.h) * p.OH) / p.H;
    const int64_t oh1 = min(((int64_t(q.h) + 1) * p.OH + p.H - 1) / p.H, int64_t(p.OH));
    const int64_t ow0 = (int64_t(q.w) * p.OW) / p.W;
    const int64_t ow1 = min(((int64_t(q.w) + 1) * p.OW + p.W - 1) / p.W, int64_t(p.OW));
    const T* gp = grad + q.n * p.ys[0] + q.c * p.ys[1];
    A s = 0;
    for (int64_t oh = oh0; oh < oh1; ++oh) {
      const int64_t h0 = adaptive_start(oh, p.OH, p.H), h1 = adaptive_end(oh, p.OH, p.H);
      if (q.h < h0 || q.h >= h1) continue;
      for (int64_t ow = ow0; ow < ow1; ++ow) {
        const int64_t w0 = adaptive_start(ow, p.OW, p.W), w1 = adaptive_end(ow, p.OW, p.W);
        if (q.w < w0 || q.w >= w1) continue;
        s += convert<A>(gp[static_cast<I>(oh) * p.ys[2] + static_cast<I>(ow) * p.ys[3]]) /
             static_cast<A>((h1 - h0) * (w1 - w0));
      }
    }
    dx[offset(p.xs, q.n, q.c, q.h, q.w)] = convert<T>(s);
  }
}

#undef TS_GRID_STRIDE_LOOP

// ---- host side ------------------------------------------------------------------------------------------
bool channels_last_order(const Tensor& t) {
  return !t.is_contiguous() && t.is_contiguous(MemoryFormat::ChannelsLast);
}

// A dense tensor (contiguous or channels-last) covers exactly [data, data + numel).
bool is_dense(const Tensor& t) { return t.is_contiguous() || t.is_contiguous(MemoryFormat::ChannelsLast); }

// 32-bit indexing holds when each tensor's reach and the window arithmetic stay below 2^31.
bool fits_int32(std::initializer_list<const Tensor*> ts, const PoolGeometry& g) {
  constexpr int64_t kLimit = int64_t(1) << 30;  // headroom for sums of in-range terms
  for (const Tensor* t : ts) {
    if (t->numel() >= kLimit || storage_extent(t->sizes(), t->strides()) >= kLimit) return false;
  }
  const int64_t span_h = (g.out_h + 1) * g.stride_h + g.pad_h + g.kernel_h * g.dil_h + g.in_h;
  const int64_t span_w = (g.out_w + 1) * g.stride_w + g.pad_w + g.kernel_w * g.dil_w + g.in_w;
  return span_h < kLimit && span_w < kLimit;
}

template <class I>
PoolParams<I> make_params(const Tensor& xside, const Tensor& yside, const Tensor* idx, const PoolGeometry& g,
                          bool cl) {
  PoolParams<I> p{};
  p.N = static_cast<I>(xside.size(0));
  p.C = static_cast<I>(xside.size(1));
  p.H = static_cast<I>(g.in_h);
  p.W = static_cast<I>(g.in_w);
  p.OH = static_cast<I>(g.out_h);
  p.OW = static_cast<I>(g.out_w);
  p.kh = static_cast<I>(g.kernel_h);
  p.kw = static_cast<I>(g.kernel_w);
  p.sh = static_cast<I>(g.stride_h);
  p.sw = static_cast<I>(g.stride_w);
  p.ph = static_cast<I>(g.pad_h);
  p.pw = static_cast<I>(g.pad_w);
  p.dh = static_cast<I>(g.dil_h);
  p.dw = static_cast<I>(g.dil_w);
  p.count_include_pad = g.count_include_pad;
  p.cl = cl;
  for (int d = 0; d < 4; ++d) {
    p.xs[d] = static_cast<I>(xside.stride(d));
    p.ys[d] = static_cast<I>(yside.stride(d));
    p.is[d] = idx ? static_cast<I>(idx->stride(d)) : I(0);
  }
  return p;
}

// Calls f(TypeTag<I>) with the index type the tensors and geometry allow.
template <class F>
void with_index_type(bool fits32, F&& f) {
  if (fits32) f(TypeTag<int32_t>{});
  else f(TypeTag<int64_t>{});
}

void check_cuda(const char* op, std::initializer_list<const Tensor*> ts) {
  for (const Tensor* t : ts)
    TS_CHECK(t->is_cuda() && t->device() == (*ts.begin())->device(), DeviceError, op,
             ": the CUDA kernel got a tensor on ", t->device().str());
}

void max_pool2d_cuda(const Tensor& out, const Tensor& indices, const Tensor& x, const PoolGeometry& g) {
  check_cuda("max_pool2d", {&out, &indices, &x});
  if (out.numel() == 0) return;
  CurrentDevice guard(out.device().index());
  const int64_t total = out.numel();
  const bool cl = channels_last_order(out);
  dispatch_device_dtype<DTypeSet::Floating>(x.dtype(), "max_pool2d", [&]<class T>(TypeTag<T>) {
    with_index_type(fits_int32({&out, &indices, &x}, g), [&]<class I>(TypeTag<I>) {
      const PoolParams<I> p = make_params<I>(x, out, &indices, g, cl);
      constexpr int V = 16 / sizeof(T) < 2 ? 2 : static_cast<int>(16 / sizeof(T));
      if (cl && max_pool_vectorizes(out, indices, x, V)) {
        const int64_t vectors = total / V;
        max_pool_cl_vec_kernel<T, I, V><<<grid_for(vectors, kThreads), kThreads, 0, stream_of(out)>>>(
            static_cast<const T*>(x.data_ptr()), static_cast<T*>(out.data_ptr()), indices.data_ptr<int64_t>(), p,
            vectors);
        check_launch("max_pool2d", "max_pool_cl_vec_kernel");
        return;
      }
      max_pool_kernel<T, I><<<grid_for(total, kThreads), kThreads, 0, stream_of(out)>>>(
          static_cast<const T*>(x.data_ptr()), static_cast<T*>(out.data_ptr()), indices.data_ptr<int64_t>(), p, total);
      check_launch("max_pool2d", "max_pool_kernel");
    });
  });
}

// Scatters into `dx`, which must be dense (zeroed here first).
void max_pool2d_backward_dense(const Tensor& dx, const Tensor& grad, const Tensor& indices, const PoolGeometry& g) {
  const int64_t total = grad.numel();
  const bool cl = channels_last_order(dx);
  cudaStream_t stream = stream_of(dx);
  dispatch_device_dtype<DTypeSet::Floating>(dx.dtype(), "max_pool2d_backward", [&]<class T>(TypeTag<T>) {
    using Acc = dacc_t<T>;
    DataPtr scratch;
    Acc* acc = nullptr;
    if constexpr (std::is_same_v<T, Acc>) {
      acc = static_cast<Acc*>(dx.data_ptr());
    } else {
      scratch = allocate_workspace(static_cast<size_t>(dx.numel()) * sizeof(Acc));
      acc = static_cast<Acc*>(scratch.get());
    }
    TS_CUDA_CHECK(cudaMemsetAsync(acc, 0, static_cast<size_t>(dx.numel()) * sizeof(Acc), stream));
    if (total > 0) {
      with_index_type(fits_int32({&dx, &grad, &indices}, g), [&]<class I>(TypeTag<I>) {
        const PoolParams<I> p = make_params<I>(dx, grad, &indices, g, cl);
        max_pool_backward_kernel<T, Acc, I><<<grid_for(total, kThreads), kThreads, 0, stream>>>(
            static_cast<const T*>(grad.data_ptr()), indices.data_ptr<int64_t>(), acc, p, total);
        check_launch("max_pool2d_backward", "max_pool_backward_kernel");
      });
    }
    if constexpr (!std::is_same_v<T, Acc>) {
      // The scratch has dx's strides over [0, numel), so the two line up element for element.
      round_kernel<T><<<grid_for(dx.numel(), kThreads), kThreads, 0, stream>>>(acc, static_cast<T*>(dx.data_ptr()),
                                                                               dx.numel());
      check_launch("max_pool2d_backward", "round_kernel");
    }
  });
}

// Gathers into `dx` (any strides): every element is written, in a fixed order.
void max_pool2d_backward_gather(const Tensor& dx, const Tensor& grad, const Tensor& indices, const PoolGeometry& g) {
  const int64_t total = dx.numel();
  const bool cl = channels_last_order(dx);
  dispatch_device_dtype<DTypeSet::Floating>(dx.dtype(), "max_pool2d_backward", [&]<class T>(TypeTag<T>) {
    with_index_type(fits_int32({&dx, &grad, &indices}, g), [&]<class I>(TypeTag<I>) {
      const PoolParams<I> p = make_params<I>(dx, grad, &indices, g, cl);
      max_pool_backward_gather_kernel<T, I><<<grid_for(total, kThreads), kThreads, 0, stream_of(dx)>>>(
          static_cast<const T*>(grad.data_ptr()), indices.data_ptr<int64_t>(), static_cast<T*>(dx.data_ptr()), p,
          total);
      check_launch("max_pool2d_backward", "max_pool_backward_gather_kernel");
    });
  });
}

void max_pool2d_backward_cuda(const Tensor& out, const Tensor& grad, const Tensor& indices, const PoolGeometry& g) {
  check_cuda("max_pool2d_backward", {&out, &grad, &indices});
  if (out.numel() == 0) return;
  CurrentDevice guard(out.device().index());
  if (is_deterministic()) return max_pool2d_backward_gather(out, grad, indices, g);
  if (is_dense(out)) return max_pool2d_backward_dense(out, grad, indices, g);
  Tensor tmp = make_empty(out.sizes(), out.dtype(), out.device());
  max_pool2d_backward_dense(tmp, grad, indices, g);
  Tensor(out).copy_(tmp);
}

void avg_pool2d_cuda(const Tensor& out, const Tensor& x, const PoolGeometry& g) {
  check_cuda("avg_pool2d", {&out, &x});
  if (out.numel() == 0) return;
  CurrentDevice guard(out.device().index());
  const int64_t total = out.numel();
  const bool cl = channels_last_order(out);
  dispatch_device_dtype<DTypeSet::Floating>(x.dtype(), "avg_pool2d", [&]<class T>(TypeTag<T>) {
    with_index_type(fits_int32({&out, &x}, g), [&]<class I>(TypeTag<I>) {
      const PoolParams<I> p = make_params<I>(x, out, nullptr, g, cl);
      avg_pool_kernel<T, I><<<grid_for(total, kThreads), kThreads, 0, stream_of(out)>>>(
          static_cast<const T*>(x.data_ptr()), static_cast<T*>(out.data_ptr()), p, total);
      check_launch("avg_pool2d", "avg_pool_kernel");
    });
  });
}

void avg_pool2d_backward_cuda(const Tensor& out, const Tensor& grad, const PoolGeometry& g) {
  check_cuda("avg_pool2d_backward", {&out, &grad});
  if (out.numel() == 0) return;
  CurrentDevice guard(out.device().index());
  const int64_t total = out.numel();
  const bool cl = channels_last_order(out);
  dispatch_device_dtype<DTypeSet::Floating>(out.dtype(), "avg_pool2d_backward", [&]<class T>(TypeTag<T>) {
    with_index_type(fits_int32({&out, &grad}, g), [&]<class I>(TypeTag<I>) {
      const PoolParams<I> p = make_params<I>(out, grad, nullptr, g, cl);
      avg_pool_backward_kernel<T, I><<<grid_for(total, kThreads), kThreads, 0, stream_of(out)>>>(
          static_cast<const T*>(grad.data_ptr()), static_cast<T*>(out.data_ptr()), p, total);
      check_launch("avg_pool2d_backward", "avg_pool_backward_kernel");
    });
  });
}

void adaptive_avg_pool2d_cuda(const Tensor& out, const Tensor& x, const PoolGeometry& g) {
  check_cuda("adaptive_avg_pool2d", {&out, &x});
  if (out.numel() == 0) return;
  CurrentDevice guard(out.device().index());
  const int64_t total = out.numel();
  const bool cl = channels_last_order(out);
  dispatch_device_dtype<DTypeSet::Floating>(x.dtype(), "adaptive_avg_pool2d", [&]<class T>(TypeTag<T>) {
    with_index_type(fits_int32({&out, &x}, g), [&]<class I>(TypeTag<I>) {
      const PoolParams<I> p = make_params<I>(x, out, nullptr, g, cl);
      adaptive_avg_pool_kernel<T, I><<<grid_for(total, kThreads), kThreads, 0, stream_of(out)>>>(
          static_cast<const T*>(x.data_ptr()), static_cast<T*>(out.data_ptr()), p, total);
      check_launch("adaptive_avg_pool2d", "adaptive_avg_pool_kernel");
    });
  });
}

void adaptive_avg_pool2d_backward_cuda(const Tensor& out, const Tensor& grad, const PoolGeometry& g) {
  check_cuda("adaptive_avg_pool2d_backward", {&out, &grad});
  if (out.numel() == 0) return;
  CurrentDevice guard(out.device().index());
  const int64_t total = out.numel();
  const bool cl = channels_last_order(out);
  dispatch_device_dtype<DTypeSet::Floating>(out.dtype(), "adaptive_avg_pool2d_backward", [&]<class T>(TypeTag<T>) {
    with_index_type(fits_int32({&out, &grad}, g), [&]<class I>(TypeTag<I>) {
      const PoolParams<I> p = make_params<I>(out, grad, nullptr, g, cl);
      adaptive_avg_pool_backward_kernel<T, I><<<grid_for(total, kThreads), kThreads, 0, stream_of(out)>>>(
          static_cast<const T*>(grad.data_ptr()), static_cast<T*>(out.data_ptr()), p, total);
      check_launch("adaptive_avg_pool2d_backward", "adaptive_avg_pool_backward_kernel");
    });
  });
}

}  // namespace

void register_pool() {
  max_pool2d_kernel.set(DeviceType::CUDA, max_pool2d_cuda);
  max_pool2d_backward_kernel.set(DeviceType::CUDA, max_pool2d_backward_cuda);
  avg_pool2d_kernel.set(DeviceType::CUDA, avg_pool2d_cuda);
  avg_pool2d_backward_kernel.set(DeviceType::CUDA, avg_pool2d_backward_cuda);
  adaptive_avg_pool2d_kernel.set(DeviceType::CUDA, adaptive_avg_pool2d_cuda);
  adaptive_avg_pool2d_backward_kernel.set(DeviceType::CUDA, adaptive_avg_pool2d_backward_cuda);
}

}  // namespace tessera::cuda
