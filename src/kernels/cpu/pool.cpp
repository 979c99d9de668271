// CPU pooling kernels behind ops/conv_kernel.h: max, average and adaptive average pooling over the
// (H, W) planes of NCHW tensors, forward and backward. Inputs are made contiguous at the entry, so a
// plane is a dense H x W block; planes are independent and run in parallel over OpenMP, handed out dynamically (backward
// scatters stay within their plane, so no two threads write one element). A channels-last result is
// computed contiguous and copied.
//
// Window bounds and divisors follow PyTorch's CPU kernels exactly (MaxPoolKernel.cpp,
// AvgPoolKernel.cpp, AdaptiveAvgPoolKernel.cpp): a max window's index starts at its first in-bounds tap
// (so an all -inf window reports that tap), NaN wins over any number, and an average window clipped by
// the padding divides by the clipped-to-padding size (count_include_pad) or the in-bounds size.
// float16 / bfloat16 accumulate in float32 (acc_t). Max pooling whose windows all lie inside the plane
// (no padding or dilation, no ceil-mode overhang) skips the per-row window bookkeeping and reads its
// taps directly, in the same order with the same rule; 2x2 with stride 2 has a vectorized row.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include "kernels/cpu/convert.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/onednn/onednn.h"
#include "ops/conv_kernel.h"
#include "tensor/dispatch_dtype.h"
#include "tensor/tensor_impl.h"

namespace tessera::cpu::inline TS_CPU_ISA {  // Note [ISA namespaces]
namespace {

// Parallel over planes only when there is enough work to pay for waking the team.
constexpr int64_t kParallelWork = 16384;

// Planes are handed out dynamically in blocks (about 8 per thread), so that a thread the OS preempts
// does not hold the others at the barrier.
int64_t plane_block(int64_t planes) {
  return std::max<int64_t>(1, planes / (8 * std::max(1, omp_get_max_threads())));
}

template <class F>
void for_planes(int64_t planes, int64_t work_per_plane, F&& body) {
  const bool par = planes > 1 && planes * work_per_plane >= kParallelWork;
  const int64_t block = plane_block(planes);
#pragma omp parallel for schedule(dynamic, block) if (par)
  for (int64_t p = 0; p < planes; ++p) body(p);
}

// Output columns ow whose tap ow * stride + off lies in [0, W) (as im2col's).
struct ColRange {
  int64_t lo, hi;
};
ColRange valid_cols(int64_t off, int64_t W, int64_t stride, int64_t OW) {
  auto ceil_div = [](int64_t a, int64_t b) { return (a + b - 1) / b; };
  int64_t lo = off >= 0 ? 0 : ceil_div(-off, stride);
  int64_t hi = W - off <= 0 ? 0 : ceil_div(W - off, stride);
  hi = std::min(hi, OW);
  return {std::min(lo, hi), hi};
}

// One tap (kh, kw) of a row of windows: each output column keeps its running max and argmax. The
// columns are independent, so the loop has no carried dependency and compiles to selects (a branch
// per tap would mispredict on every other element of random data). Stride is a template argument
// where it is 1 or 2 so that the loads are contiguous or a fixed shuffle.
template <int64_t kStride, class T, class A>
void max_tap(const T* src, int64_t stride, int64_t lo, int64_t hi, int64_t base, A* m, int64_t* best) {
  const int64_t s = kStride > 0 ? kStride : stride;
  for (int64_t ow = lo; ow < hi; ++ow) {
    const A v = static_cast<A>(src[ow * s]);
    const bool take = (v > m[ow]) | (v != v);
    m[ow] = take ? v : m[ow];
    best[ow] = take ? base + ow * s : best[ow];
  }
}

// Windows that lie wholly inside the plane (no padding, no dilation, no ceil-mode overhang): each
// output reads its taps directly, in the general path's order (kh, then kw) and with its take rule,
// so values and indices are the same. The per-row bookkeeping of the general path costs more than
// the taps for the usual small planes; 2x2 with stride 2 has its own vectorized row.
bool windows_inside(const PoolGeometry& g) {
  return g.pad_h == 0 && g.pad_w == 0 && g.dil_h == 1 && g.dil_w == 1 &&
         (g.out_h - 1) * g.stride_h + g.kernel_h <= g.in_h && (g.out_w - 1) * g.stride_w + g.kernel_w <= g.in_w;
}

template <class T>
void max_pool_plane_inside(const T* xp, T* op, int64_t* ip, const PoolGeometry& g) {
  using A = acc_t<T>;
  const int64_t KH = g.kernel_h, KW = g.kernel_w, sh = g.stride_h, sw = g.stride_w;
  const int64_t W = g.in_w, OH = g.out_h, OW = g.out_w;
  for (int64_t oh = 0; oh < OH; ++oh) {
    const int64_t row = oh * sh * W;
    for (int64_t ow = 0; ow < OW; ++ow) {
      const int64_t first = row + ow * sw;
      A m = -std::numeric_limits<A>::infinity();
      int64_t best = first;
      for (int64_t kh = 0; kh < KH; ++kh)
        for (int64_t kw = 0; kw < KW; ++kw) {
          const int64_t i = first + kh * W + kw;
          const A v = static_cast<A>(xp[i]);
          const bool take = (v > m) | (v != v);
          m = take ? v : m;
          best = take ? i : best;
        }
      op[oh * OW + ow] = convert<T>(m);
      ip[oh * OW + ow] = best;
    }
  }
}

// 2x2 windows with stride 2, one output row from input rows r0 and r1 (r1 = r0 + W, first tap of
// the row at plane index base). The first tap needs no test: taking it against the initial -inf
// leaves the same maximum and index. The loop vectorizes (stride-2 loads, selects).
template <class T>
void max_pool_row_2x2(const T* __restrict r0, const T* __restrict r1, T* __restrict op, int64_t* __restrict ip,
                      int64_t base, int64_t W, int64_t OW) {
  using A = acc_t<T>;
  for (int64_t ow = 0; ow < OW; ++ow) {
    const A a = static_cast<A>(r0[2 * ow]), b = static_cast<A>(r0[2 * ow + 1]);
    const A c = static_cast<A>(r1[2 * ow]), d = static_cast<A>(r1[2 * ow + 1]);
    const int64_t i = base + 2 * ow;
    A m = a;
    int64_t best = i;
    bool take = (b > m) | (b != b);
    m = take ? b : m;
    best = take ? i + 1 : best;
    take = (c > m) | (c != c);
    m = take ? c : m;
    best = take ? i + W : best;
    take = (d > m) | (d != d);
    m = take ? d : m;
    best = take ? i + W + 1 : best;
    op[ow] = convert<T>(m);
    ip[ow] = best;
  }
}

template <class T>
void max_pool_inside(T* out, int64_t* idx, const T* x, const PoolGeometry& g) {
  const int64_t HW = g.in_h * g.in_w, L = g.out_h * g.out_w;
  const bool k2s2 = g.kernel_h == 2 && g.kernel_w == 2 && g.stride_h == 2 && g.stride_w == 2;
  for_planes(g.planes, L * g.kernel_h * g.kernel_w, [&](int64_t p) {
    const T* xp = x + p * HW;
    if (k2s2) {
      for (int64_t oh = 0; oh < g.out_h; ++oh) {
        const int64_t base = 2 * oh * g.in_w;
        max_pool_row_2x2(xp + base, xp + base + g.in_w, out + p * L + oh * g.out_w, idx + p * L + oh * g.out_w,
                         base, g.in_w, g.out_w);
      }
    } else {
      max_pool_plane_inside(xp, out + p * L, idx + p * L, g);
    }
  });
}

template <class T>
void max_pool(T* out, int64_t* idx, const T* x, const PoolGeometry& g) {
  using A = acc_t<T>;
  const int64_t H = g.in_h, W = g.in_w, OH = g.out_h, OW = g.out_w;
  const int64_t dh = g.dil_h, dw = g.dil_w, sw = g.stride_w;
  if (windows_inside(g)) {
    max_pool_inside(out, idx, x, g);
    return;
  }
  const bool par = g.planes > 1 && g.planes * OH * OW * g.kernel_h * g.kernel_w >= kParallelWork;
  const int64_t block = plane_block(g.planes);
#pragma omp parallel if (par)
  {
    std::vector<A> m(OW);
    std::vector<int64_t> best(OW);
#pragma omp for schedule(dynamic, block)
    for (int64_t p = 0; p < g.planes; ++p) {
      const T* xp = x + p * H * W;
      for (int64_t oh = 0; oh < OH; ++oh) {
        const int64_t h_start = oh * g.stride_h - g.pad_h;
        int64_t h_first = h_start;
        while (h_first < 0) h_first += dh;
        // Before any tap: -inf at the window's first in-bounds position, as PyTorch's kernel.
        for (int64_t ow = 0; ow < OW; ++ow) {
          int64_t w_first = ow * sw - g.pad_w;
          while (w_first < 0) w_first += dw;
          m[ow] = -std::numeric_limits<A>::infinity();
          best[ow] = h_first * W + w_first;
        }
        for (int64_t kh = 0; kh < g.kernel_h; ++kh) {
          const int64_t ih = h_start + kh * dh;
          if (ih < 0 || ih >= H) continue;
          for (int64_t kw = 0; kw < g.kernel_w; ++kw) {
            const int64_t off = kw * dw - g.pad_w;
            const ColRange r = valid_cols(off, W, sw, OW);
            const T* src = xp + ih * W + off;
            const int64_t base = ih * W + off;
            if (sw == 1) {
              max_tap<1>(src, sw, r.lo, r.hi, base, m.data(), best.data());
            } else if (sw == 2) {
              max_tap<2>(src, sw, r.lo, r.hi, base, m.data(), best.data());
            } else {
              max_tap<0>(src, sw, r.lo, r.hi, base, m.data(), best.data());
            }
          }
        }
        T* op = out + (p * OH + oh) * OW;
        int64_t* ip = idx + (p * OH + oh) * OW;
        for (int64_t ow = 0; ow < OW; ++ow) {
          op[ow] = convert<T>(m[ow]);
          ip[ow] = best[ow];
        }
      }
    }
  }
}

// Returns an out-of-plane index met, if any; that plane is left unwritten and the caller raises.
// Indices outside the plane can only come from a caller's own index tensor.
template <class T>
std::optional<int64_t> max_pool_backward(T* dx, const T* grad, const int64_t* idx, const PoolGeometry& g) {
  using A = acc_t<T>;
  const int64_t HW = g.in_h * g.in_w, L = g.out_h * g.out_w;
  std::optional<int64_t> bad;
  for_planes(g.planes, HW + L, [&](int64_t p) {
    T* d = dx + p * HW;
    const T* gp = grad + p * L;
    const int64_t* ip = idx + p * L;
    bool ok = true;
    for (int64_t i = 0; i < L; ++i) ok &= static_cast<uint64_t>(ip[i]) < static_cast<uint64_t>(HW);
    if (!ok) {
      for (int64_t i = 0; i < L; ++i)
        if (static_cast<uint64_t>(ip[i]) >= static_cast<uint64_t>(HW)) {
#pragma omp critical(max_pool_backward_bad_index)
          bad = ip[i];
          break;
        }
      return;
    }
    if constexpr (std::is_same_v<T, A>) {
      std::fill(d, d + HW, T(0));
      for (int64_t i = 0; i < L; ++i) d[ip[i]] += gp[i];
    } else {
      // Sums of several window gradients meeting at one input round once, as PyTorch's float accumulation.
      std::vector<A> acc(HW, A(0));
      for (int64_t i = 0; i < L; ++i) acc[ip[i]] += static_cast<A>(gp[i]);
      for (int64_t i = 0; i < HW; ++i) d[i] = convert<T>(acc[i]);
    }
  });
  return bad;
}

// One average window: its clipped bounds and divisor (PyTorch's AvgPoolKernel).
struct AvgWindow {
  int64_t h0, h1, w0, w1, divisor;
  bool empty() const { return h0 >= h1 || w0 >= w1; }
};
AvgWindow avg_window(const PoolGeometry& g, int64_t oh, int64_t ow) {
  int64_t h0 = oh * g.stride_h - g.pad_h, w0 = ow * g.stride_w - g.pad_w;
  int64_t h1 = std::min(h0 + g.kernel_h, g.in_h + g.pad_h), w1 = std::min(w0 + g.kernel_w, g.in_w + g.pad_w);
  const int64_t pool_size = (h1 - h0) * (w1 - w0);
  h0 = std::max<int64_t>(h0, 0);
  w0 = std::max<int64_t>(w0, 0);
  h1 = std::min(h1, g.in_h);
  w1 = std::min(w1, g.in_w);
  return {h0, h1, w0, w1, g.count_include_pad ? pool_size : (h1 - h0) * (w1 - w0)};
}

template <class T>
void avg_pool(T* out, const T* x, const PoolGeometry& g) {
  using A = acc_t<T>;
  const int64_t H = g.in_h, W = g.in_w, OH = g.out_h, OW = g.out_w;
  for_planes(g.planes, OH * OW * g.kernel_h * g.kernel_w, [&](int64_t p) {
    const T* xp = x + p * H * W;
    T* op = out + p * OH * OW;
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        const AvgWindow win = avg_window(g, oh, ow);
        if (win.empty()) {
          op[oh * OW + ow] = T(A(0));
          continue;
        }
        A s = 0;
        for (int64_t ih = win.h0; ih < win.h1; ++ih)
          for (int64_t iw = win.w0; iw < win.w1; ++iw) s += static_cast<A>(xp[ih * W + iw]);
        op[oh * OW + ow] = convert<T>(s / static_cast<A>(win.divisor));
      }
  });
}

template <class T>
void avg_pool_backward(T* dx, const T* grad, const PoolGeometry& g) {
  using A = acc_t<T>;
  const int64_t H = g.in_h, W = g.in_w, OH = g.out_h, OW = g.out_w;
  for_planes(g.planes, OH * OW * g.kernel_h * g.kernel_w, [&](int64_t p) {
    std::vector<A> acc(H * W, A(0));
    const T* gp = grad + p * OH * OW;
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        const AvgWindow win = avg_window(g, oh, ow);
        if (win.empty()) continue;
        const A v = static_cast<A>(gp[oh * OW + ow]) / static_cast<A>(win.divisor);
        for (int64_t ih = win.h0; ih < win.h1; ++ih)
          for (int64_t iw = win.w0; iw < win.w1; ++iw) acc[ih * W + iw] += v;
      }
    T* d = dx + p * H * W;
    for (int64_t i = 0; i < H * W; ++i) d[i] = convert<T>(acc[i]);
  });
}

// Adaptive window [start, end) of output o out of O over an input of I.
int64_t adaptive_start(int64_t o, int64_t O, int64_t I) { return (o * I) / O; }
int64_t adaptive_end(int64_t o, int64_t O, int64_t I) { return ((o + 1) * I + O - 1) / O; }

template <class T>
void adaptive_avg_pool(T* out, const T* x, const PoolGeometry& g) {
  using A = acc_t<T>;
  const int64_t H = g.in_h, W = g.in_w, OH = g.out_h, OW = g.out_w;
  for_planes(g.planes, H * W + OH * OW, [&](int64_t p) {
    const T* xp = x + p * H * W;
    T* op = out + p * OH * OW;
    for (int64_t oh = 0; oh < OH; ++oh) {
      const int64_t h0 = adaptive_start(oh, OH, H), h1 = adaptive_end(oh, OH, H);
      for (int64_t ow = 0; ow < OW; ++ow) {
        const int64_t w0 = adaptive_start(ow, OW, W), w1 = adaptive_end(ow, OW, W);
        A s = 0;
        for (int64_t ih = h0; ih < h1; ++ih)
          for (int64_t iw = w0; iw < w1; ++iw) s += static_cast<A>(xp[ih * W + iw]);
        op[oh * OW + ow] = convert<T>(s / static_cast<A>((h1 - h0) * (w1 - w0)));
      }
    }
  });
}

template <class T>
void adaptive_avg_pool_backward(T* dx, const T* grad, const PoolGeometry& g) {
  using A = acc_t<T>;
  const int64_t H = g.in_h, W = g.in_w, OH = g.out_h, OW = g.out_w;
  for_planes(g.planes, H * W + OH * OW, [&](int64_t p) {
    std::vector<A> acc(H * W, A(0));
    const T* gp = grad + p * OH * OW;
    for (int64_t oh = 0; oh < OH; ++oh) {
      const int64_t h0 = adaptive_start(oh, OH, H), h1 = adaptive_end(oh, OH, H);
      for (int64_t ow = 0; ow < OW; ++ow) {
        const int64_t w0 = adaptive_start(ow, OW, W), w1 = adaptive_end(ow, OW, W);
        const A v = static_cast<A>(gp[oh * OW + ow]) / static_cast<A>((h1 - h0) * (w1 - w0));
        for (int64_t ih = h0; ih < h1; ++ih)
          for (int64_t iw = w0; iw < w1; ++iw) acc[ih * W + iw] += v;
      }
    }
    T* d = dx + p * H * W;
    for (int64_t i = 0; i < H * W; ++i) d[i] = convert<T>(acc[i]);
  });
}

// ---- tensor-level entries: contiguous operands, one dtype dispatch per call ----------------------
// Each first offers the call to oneDNN (Note [oneDNN where it wins] in kernels/cpu/onednn/onednn.h),
// which runs it and returns true for the classes where it measured faster.

// The tensor a kernel writes: `out` itself when contiguous, else a contiguous temporary that
// finish() copies into `out` (a channels-last result).
class ContiguousResult {
 public:
  explicit ContiguousResult(const Tensor& out)
      : out_(out), tmp_(out.is_contiguous() ? out : make_empty(out.sizes(), out.dtype(), out.device())) {}
  const Tensor& get() const { return tmp_; }
  void finish() {
    if (!tmp_.is_same(out_)) Tensor(out_).copy_(tmp_);
  }

 private:
  Tensor out_, tmp_;
};

void max_pool2d_cpu(const Tensor& out, const Tensor& indices, const Tensor& x, const PoolGeometry& g) {
  if (out.numel() == 0) return;
  if (onednn::max_pool2d_forward(out, indices, x, g)) return;
  Tensor xc = x.contiguous();
  ContiguousResult o(out), i(indices);
  dispatch_floating(x.dtype(), "max_pool2d", [&]<class T>(TypeTag<T>) {
    max_pool<T>(o.get().data_ptr<T>(), i.get().data_ptr<int64_t>(), xc.data_ptr<T>(), g);
  });
  o.finish();
  i.finish();
}

void max_pool2d_backward_cpu(const Tensor& out, const Tensor& grad, const Tensor& indices, const PoolGeometry& g) {
  if (out.numel() == 0) return;
  if (onednn::max_pool2d_backward(out, grad, indices, g)) return;
  Tensor gc = grad.contiguous(), ic = indices.contiguous();
  ContiguousResult o(out);
  const std::optional<int64_t> bad = dispatch_floating(out.dtype(), "max_pool2d_backward", [&]<class T>(TypeTag<T>) {
    return max_pool_backward<T>(o.get().data_ptr<T>(), gc.data_ptr<T>(), ic.data_ptr<int64_t>(), g);
  });
  if (!bad) o.finish();
  TS_CHECK(!bad, IndexError, "max_pool2d_backward: index ", bad.value_or(0), " is out of bounds for a plane of ",
           g.in_h * g.in_w, " elements");
}

void avg_pool2d_cpu(const Tensor& out, const Tensor& x, const PoolGeometry& g) {
  if (out.numel() == 0) return;
  if (onednn::avg_pool2d_forward(out, x, g)) return;
  Tensor xc = x.contiguous();
  ContiguousResult o(out);
  dispatch_floating(x.dtype(), "avg_pool2d", [&]<class T>(TypeTag<T>) {
    avg_pool<T>(o.get().data_ptr<T>(), xc.data_ptr<T>(), g);
  });
  o.finish();
}

void avg_pool2d_backward_cpu(const Tensor& out, const Tensor& grad, const PoolGeometry& g) {
  if (out.numel() == 0) return;
  if (onednn::avg_pool2d_backward(out, grad, g)) return;
  Tensor gc = grad.contiguous();
  ContiguousResult o(out);
  dispatch_floating(out.dtype(), "avg_pool2d_backward", [&]<class T>(TypeTag<T>) {
    avg_pool_backward<T>(o.get().data_ptr<T>(), gc.data_ptr<T>(), g);
  });
  o.finish();
}

void adaptive_avg_pool2d_cpu(const Tensor& out, const Tensor& x, const PoolGeometry& g) {
  if (out.numel() == 0) return;
  if (onednn::adaptive_avg_pool2d_forward(out, x, g)) return;
  Tensor xc = x.contiguous();
  ContiguousResult o(out);
  dispatch_floating(x.dtype(), "adaptive_avg_pool2d", [&]<class T>(TypeTag<T>) {
    adaptive_avg_pool<T>(o.get().data_ptr<T>(), xc.data_ptr<T>(), g);
  });
  o.finish();
}

void adaptive_avg_pool2d_backward_cpu(const Tensor& out, const Tensor& grad, const PoolGeometry& g) {
  if (out.numel() == 0) return;
  if (onednn::adaptive_avg_pool2d_backward(out, grad, g)) return;
  Tensor gc = grad.contiguous();
  ContiguousResult o(out);
  dispatch_floating(out.dtype(), "adaptive_avg_pool2d_backward", [&]<class T>(TypeTag<T>) {
    adaptive_avg_pool_backward<T>(o.get().data_ptr<T>(), gc.data_ptr<T>(), g);
  });
  o.finish();
}

}  // namespace

void register_pool() {
  max_pool2d_kernel.set(DeviceType::CPU, max_pool2d_cpu);
  max_pool2d_backward_kernel.set(DeviceType::CPU, max_pool2d_backward_cpu);
  avg_pool2d_kernel.set(DeviceType::CPU, avg_pool2d_cpu);
  avg_pool2d_backward_kernel.set(DeviceType::CPU, avg_pool2d_backward_cpu);
  adaptive_avg_pool2d_kernel.set(DeviceType::CPU, adaptive_avg_pool2d_cpu);
  adaptive_avg_pool2d_backward_kernel.set(DeviceType::CPU, adaptive_avg_pool2d_backward_cpu);
}

}  // namespace tessera::cpu::TS_CPU_ISA
