// CPU convolution kernels behind ops/conv_kernel.h: im2col + OpenBLAS GEMMs over blocks of samples,
// col2im for the input gradient (conv_transpose2d), and GEMMs against the patches for the weight
// gradient. float32 / float64 run natively (sgemm / dgemm); float16 / bfloat16 are widened to float32
// once at the entry, computed in float32 and rounded once. Operands are made contiguous at the entry;
// a channels-last result is computed contiguous and copied.
//
// Shapes per block of B samples n0 .. n0 + B and group g (Cg = C_in / G, Cog = C_out / G,
// K = Cg * KH * KW, L = OH * OW, N = B * L). The block's patches sit side by side, sample b at
// column b * L, so that one GEMM covers the block (a GEMM per sample, 64x121x288 for the Fashion-MNIST
// CNN's second conv, runs far below BLAS peak; one over 4 samples, 64x484x288, runs near it):
//   col (K, N)    = im2col(x[n0 + b, g]) for each b           patches; row (c, kh, kw), column (b, oh, ow)
//   grad_g (Cog, N) = grad[n0 + b, g] side by side             (packed, for the backward GEMMs)
//   forward     : res (Cog, N) = W[g] (Cog, K) @ col;  out[n0 + b, g] = res[:, b] + bias
//   input grad  : col = W[g]^T (K, Cog) @ grad_g;  dx[n0 + b, g] = col2im(col[:, b])
//   weight grad : dW[g] (Cog, K) += grad_g (Cog, N) @ col^T
// A block of one sample (large images) works in place: the GEMM writes out[n, g] (bias preloaded,
// beta = 1) and reads grad[n, g] directly; if the kernel is 1x1 with stride 1 and no padding, x (or
// dx) itself serves as col.
//
// Threads and determinism: Note [Conv blocks] below. Blocks depend only on the geometry, OpenMP
// threads take them dynamically, each GEMM on one thread; the weight gradient sums per-run partials in
// a fixed order. Results are the same for any thread count. With one block the GEMMs themselves are
// spread over the threads (gemm_threaded, Note [One thread pool] in kernels/cpu/blas.h).
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cpu/blas.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/onednn/onednn.h"
#include "ops/conv_kernel.h"
#include "tensor/dispatch_dtype.h"
#include "tensor/tensor_impl.h"

namespace tessera::cpu::inline TS_CPU_ISA {  // Note [ISA namespaces]
namespace {

// Inside a parallel region (blocks spread over threads) a plain one-thread GEMM; otherwise (one block,
// or one thread) cut over the threads by gemm_threaded. Note [One thread pool] in kernels/cpu/blas.h.
template <class T>
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda, const T* b, int64_t ldb,
          T beta, T* c, int64_t ldc) {
  gemm_threaded(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

// Per-thread scratch that survives across calls (the OpenMP pool's threads persist), so that a
// training loop does not fault in fresh pages for its patches every step. Requests above kKeepBytes
// are served by a buffer freed after the call.
constexpr size_t kKeepBytes = size_t(64) << 20;

template <class T>
class Scratch {
 public:
  explicit Scratch(size_t n) {
    const size_t bytes = std::max<size_t>(n, 1) * sizeof(T);
    thread_local std::vector<unsigned char> kept;
    std::vector<unsigned char>& buf = bytes <= kKeepBytes ? kept : local_;
    if (buf.size() < bytes) buf.resize(bytes);
    ptr_ = reinterpret_cast<T*>(buf.data());
  }
  T* get() const { return ptr_; }

 private:
  std::vector<unsigned char> local_;
  T* ptr_ = nullptr;
};

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The output columns ow whose input column ow * stride + off lies in [0, W).
struct ColRange {
  int64_t lo, hi;
};
ColRange valid_cols(int64_t off, int64_t W, int64_t stride, int64_t OW) {
  int64_t lo = off >= 0 ? 0 : ceil_div(-off, stride);
  int64_t hi = W - off <= 0 ? 0 : ceil_div(W - off, stride);
  hi = std::min(hi, OW);
  lo = std::min(lo, hi);
  return {lo, hi};
}

// x itself is the patch matrix only when every output position reads its own input pixel: a 1x1 kernel
// with stride 1, no padding, and an output as large as the image (a gradient of a conv_transpose2d with
// output_padding, or one narrowed by the caller, is smaller).
bool is_direct(const ConvGeometry& g) {
  return g.kernel_h == 1 && g.kernel_w == 1 && g.stride_h == 1 && g.stride_w == 1 && g.pad_h == 0 && g.pad_w == 0 &&
         g.out_h == g.in_h && g.out_w == g.in_w;
}

// Rows of patches are short (a row of the output: 11 floats for the Fashion-MNIST CNN's second conv),
// too short for a call to memcpy or a vector loop with a scalar remainder to pay. Rows of at least one
// 32-byte vector are moved in whole vectors, the last one overlapping its predecessor; add_row loads
// the last vector before storing any, so the overlap adds nothing twice. d and s never overlap.
template <class T>
void copy_row(T* __restrict d, const T* __restrict s, int64_t n) {
  constexpr int64_t V = 32 / sizeof(T);
  if (n >= V) {
    for (int64_t i = 0; i + V < n; i += V) std::memcpy(d + i, s + i, 32);
    std::memcpy(d + n - V, s + n - V, 32);
  } else {
    for (int64_t i = 0; i < n; ++i) d[i] = s[i];
  }
}

template <class T>
void add_row(T* __restrict d, const T* __restrict s, int64_t n) {
  constexpr int64_t V = 32 / sizeof(T);
  if (n >= V) {
    T tail[V];
    for (int64_t j = 0; j < V; ++j) tail[j] = d[n - V + j] + s[n - V + j];
    for (int64_t i = 0; i + V < n; i += V) {
      T h[V];
      for (int64_t j = 0; j < V; ++j) h[j] = d[i + j] + s[i + j];
      for (int64_t j = 0; j < V; ++j) d[i + j] = h[j];
    }
    for (int64_t j = 0; j < V; ++j) d[n - V + j] = tail[j];
  } else {
    for (int64_t i = 0; i < n; ++i) d[i] += s[i];
  }
}

// col (channels * KH * KW, OH * OW), rows ld apart, from x (channels, H, W); zeros where a tap falls
// in the padding. With ld = B * L, B samples' patches sit side by side: sample b at column b * L.
template <class T>
void im2col(const T* x, int64_t channels, const ConvGeometry& g, T* col, int64_t ld) {
  const int64_t H = g.in_h, W = g.in_w, OH = g.out_h, OW = g.out_w;
  const int64_t sh = g.stride_h, sw = g.stride_w;
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t kh = 0; kh < g.kernel_h; ++kh)
      for (int64_t kw = 0; kw < g.kernel_w; ++kw) {
        T* dst = col + ((c * g.kernel_h + kh) * g.kernel_w + kw) * ld;
        const T* plane = x + c * H * W;
        const int64_t off = kw * g.dil_w - g.pad_w;
        const ColRange r = valid_cols(off, W, sw, OW);
        for (int64_t oh = 0; oh < OH; ++oh) {
          T* d = dst + oh * OW;
          const int64_t ih = oh * sh - g.pad_h + kh * g.dil_h;
          if (ih < 0 || ih >= H) {
            std::fill(d, d + OW, T(0));
            continue;
          }
          const T* s = plane + ih * W + off;
          std::fill(d, d + r.lo, T(0));
          if (sw == 1) {
            copy_row(d + r.lo, s + r.lo, r.hi - r.lo);
          } else {
            for (int64_t ow = r.lo; ow < r.hi; ++ow) d[ow] = s[ow * sw];
          }
          std::fill(d + r.hi, d + OW, T(0));
        }
      }
}

// dx (channels, H, W) = the adjoint of im2col applied to col (rows ld apart); dx is overwritten.
template <class T>
void col2im(const T* col, int64_t ld, int64_t channels, const ConvGeometry& g, T* dx) {
  const int64_t H = g.in_h, W = g.in_w, OH = g.out_h, OW = g.out_w;
  const int64_t sh = g.stride_h, sw = g.stride_w;
  std::fill(dx, dx + channels * H * W, T(0));
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t kh = 0; kh < g.kernel_h; ++kh)
      for (int64_t kw = 0; kw < g.kernel_w; ++kw) {
        const T* src = col + ((c * g.kernel_h + kh) * g.kernel_w + kw) * ld;
        T* plane = dx + c * H * W;
        const int64_t off = kw * g.dil_w - g.pad_w;
        const ColRange r = valid_cols(off, W, sw, OW);
        for (int64_t oh = 0; oh < OH; ++oh) {
          const int64_t ih = oh * sh - g.pad_h + kh * g.dil_h;
          if (ih < 0 || ih >= H) continue;
          const T* s = src + oh * OW;
          T* d = plane + ih * W + off;
          if (sw == 1) {
            add_row(d + r.lo, s + r.lo, r.hi - r.lo);
          } else {
            for (int64_t ow = r.lo; ow < r.hi; ++ow) d[ow * sw] += s[ow];
          }
        }
      }
}

// Note [Conv blocks]: how the batch is cut. A block is the samples one GEMM covers; its size depends
// only on the geometry and the dtype (about kBlockColumns columns of patches, the patches at most
// kBlockBytes), never on the thread count, so the same GEMMs run whatever the threads and the results
// do not change with them. Blocks are what OpenMP threads take dynamically, so a thread the OS
// preempts does not leave the others waiting with half the batch.
// The weight gradient sums over the batch: blocks are grouped into at most kMaxPartials contiguous
// runs (fewer when the weight is large), each run accumulates its blocks in order into its own
// partial, and the partials are added in run order afterwards.
constexpr int64_t kBlockColumns = 512;
constexpr int64_t kBlockBytes = int64_t(2) << 20;
constexpr int64_t kMaxPartials = 16;
constexpr int64_t kPartialBytes = int64_t(32) << 20;

struct Blocks {
  int64_t per;    // samples per block
  int64_t count;  // number of blocks
  int64_t lo(int64_t b) const { return b * per; }
};

template <class T>
Blocks conv_blocks(const ConvGeometry& g) {
  const int64_t L = std::max<int64_t>(g.out_h * g.out_w, 1);
  const int64_t K = std::max<int64_t>(g.in_channels / g.groups * g.kernel_h * g.kernel_w, 1);
  int64_t per = std::max<int64_t>(1, kBlockColumns / L);
  per = std::min(per, std::max<int64_t>(1, kBlockBytes / (K * L * int64_t(sizeof(T)))));
  per = std::min(per, std::max<int64_t>(g.batch, 1));
  return {per, ceil_div(g.batch, per)};
}

// Runs body(i) for i in [0, n): over OpenMP threads, dynamically; serially when there is one item or
// one thread (a single item's GEMMs then spread over the threads themselves).
template <class F>
void parallel_items(int64_t n, F&& body) {
  const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  if (threads <= 1 || n <= 1) {
    for (int64_t i = 0; i < n; ++i) body(i);
    return;
  }
#pragma omp parallel for schedule(dynamic, 1) num_threads(int(std::min<int64_t>(threads, n)))
  for (int64_t i = 0; i < n; ++i) body(i);
}

// gp (Cog, bs * L) = grad[n0 .. n0 + bs, group grp] side by side, the layout of a block's patches.
template <class T>
void pack_grad(const T* grad, const ConvGeometry& g, int64_t n0, int64_t bs, int64_t grp, T* gp) {
  const int64_t Cog = g.out_channels / g.groups, L = g.out_h * g.out_w, N = bs * L;
  for (int64_t b = 0; b < bs; ++b)
    for (int64_t co = 0; co < Cog; ++co) {
      const T* src = grad + ((n0 + b) * g.out_channels + grp * Cog + co) * L;
      copy_row(gp + co * N + b * L, src, L);
    }
}

template <class T>
void forward(T* out, const T* x, const T* w, const T* bias, const ConvGeometry& g) {
  const int64_t G = g.groups, Cg = g.in_channels / G, Cog = g.out_channels / G;
  const int64_t HW = g.in_h * g.in_w, L = g.out_h * g.out_w, K = Cg * g.kernel_h * g.kernel_w;
  const bool direct = is_direct(g);
  const Blocks blk = conv_blocks<T>(g);
  parallel_items(blk.count, [&](int64_t bi) {
    const int64_t n0 = blk.lo(bi), bs = std::min(blk.per, g.batch - n0), N = bs * L;
    // A block of one sample writes its output in place; a larger one into res (Cog, N), then copied
    // out sample by sample with the bias added.
    const bool single = bs == 1;
    const bool need_col = !(direct && single) && K > 0;
    Scratch<T> scratch(size_t((need_col ? K * N : 0) + (single ? 0 : Cog * N)));
    T* col = scratch.get();
    T* res = col + (need_col ? K * N : 0);
    for (int64_t grp = 0; grp < G; ++grp) {
      const T* xg = x + (n0 * g.in_channels + grp * Cg) * HW;
      T* og = out + (n0 * g.out_channels + grp * Cog) * L;
      const T* bg = bias ? bias + grp * Cog : nullptr;
      if (K == 0) {
        for (int64_t b = 0; b < bs; ++b)
          for (int64_t co = 0; co < Cog; ++co) {
            T* d = og + (b * g.out_channels + co) * L;
            std::fill(d, d + L, bg ? bg[co] : T(0));
          }
        continue;
      }
      const T* patches = xg;
      if (need_col) {
        for (int64_t b = 0; b < bs; ++b) im2col(xg + b * g.in_channels * HW, Cg, g, col + b * L, N);
        patches = col;
      }
      if (single) {
        T beta = 0;
        if (bg) {
          for (int64_t co = 0; co < Cog; ++co) std::fill(og + co * L, og + (co + 1) * L, bg[co]);
          beta = 1;
        }
        gemm(false, false, Cog, L, K, T(1), w + grp * Cog * K, K, patches, L, beta, og, L);
        continue;
      }
      gemm(false, false, Cog, N, K, T(1), w + grp * Cog * K, K, patches, N, T(0), res, N);
      for (int64_t b = 0; b < bs; ++b)
        for (int64_t co = 0; co < Cog; ++co) {
          const T* s = res + co * N + b * L;
          T* d = og + (b * g.out_channels + co) * L;
          if (bg) {
            const T bv = bg[co];
            for (int64_t l = 0; l < L; ++l) d[l] = s[l] + bv;
          } else {
            copy_row(d, s, L);
          }
        }
    }
  });
}

template <class T>
void input_backward(T* dx, const T* grad, const T* w, const T* bias, const ConvGeometry& g) {
  const int64_t G = g.groups, Cg = g.in_channels / G, Cog = g.out_channels / G;
  const int64_t HW = g.in_h * g.in_w, L = g.out_h * g.out_w, K = Cg * g.kernel_h * g.kernel_w;
  const bool direct = is_direct(g);
  const Blocks blk = conv_blocks<T>(g);
  parallel_items(blk.count, [&](int64_t bi) {
    const int64_t n0 = blk.lo(bi), bs = std::min(blk.per, g.batch - n0), N = bs * L;
    // A block of one sample reads its gradient in place (and, for a direct conv, writes dx by the
    // GEMM); a larger one packs the gradient (Cog, N) and scatters the patches' gradient per sample.
    const bool single = bs == 1;
    const bool need_col = !(direct && single);
    Scratch<T> scratch(size_t((need_col ? K * N : 0) + (single ? 0 : Cog * N)));
    T* col = scratch.get();
    T* gp = col + (need_col ? K * N : 0);
    for (int64_t grp = 0; grp < G; ++grp) {
      T* dg = dx + (n0 * g.in_channels + grp * Cg) * HW;
      if (Cog == 0) {
        for (int64_t b = 0; b < bs; ++b) {
          T* d = dg + b * g.in_channels * HW;
          std::fill(d, d + Cg * HW, T(0));
        }
        continue;
      }
      const T* gg = grad + (n0 * g.out_channels + grp * Cog) * L;
      if (!single) {
        pack_grad(grad, g, n0, bs, grp, gp);
        gg = gp;
      }
      if (!need_col) {
        gemm(true, false, K, L, Cog, T(1), w + grp * Cog * K, K, gg, L, T(0), dg, L);
        continue;
      }
      gemm(true, false, K, N, Cog, T(1), w + grp * Cog * K, K, gg, N, T(0), col, N);
      for (int64_t b = 0; b < bs; ++b) col2im(col + b * L, N, Cg, g, dg + b * g.in_channels * HW);
    }
    if (bias)
      for (int64_t n = n0; n < n0 + bs; ++n)
        for (int64_t c = 0; c < g.in_channels; ++c) {
          T* p = dx + (n * g.in_channels + c) * HW;
          const T b = bias[c];
          for (int64_t i = 0; i < HW; ++i) p[i] += b;
        }
  });
}

template <class T>
void weight_backward(T* dw, const T* grad, const T* x, const ConvGeometry& g) {
  const int64_t G = g.groups, Cg = g.in_channels / G, Cog = g.out_channels / G;
  const int64_t HW = g.in_h * g.in_w, L = g.out_h * g.out_w, K = Cg * g.kernel_h * g.kernel_w;
  const int64_t wsize = g.out_channels * K;
  const bool direct = is_direct(g);
  const Blocks blk = conv_blocks<T>(g);
  // Runs of blocks, one partial each (run 0 accumulates in dw), added in run order (Note [Conv blocks]).
  const int64_t runs = std::max<int64_t>(
      1, std::min({blk.count, kMaxPartials, kPartialBytes / std::max<int64_t>(wsize * int64_t(sizeof(T)), 1)}));
  std::vector<T> partials(size_t((runs - 1) * wsize));
  parallel_items(runs, [&](int64_t r) {
    T* acc = r == 0 ? dw : partials.data() + (r - 1) * wsize;
    std::fill(acc, acc + wsize, T(0));
    if (K == 0 || L == 0) return;
    const int64_t first = blk.count * r / runs, last = blk.count * (r + 1) / runs;
    for (int64_t bi = first; bi < last; ++bi) {
      const int64_t n0 = blk.lo(bi), bs = std::min(blk.per, g.batch - n0), N = bs * L;
      const bool single = bs == 1;
      const bool need_col = !(direct && single);
      Scratch<T> scratch(size_t((need_col ? K * N : 0) + (single ? 0 : Cog * N)));
      T* col = scratch.get();
      T* gp = col + (need_col ? K * N : 0);
      for (int64_t grp = 0; grp < G; ++grp) {
        const T* xg = x + (n0 * g.in_channels + grp * Cg) * HW;
        const T* gg = grad + (n0 * g.out_channels + grp * Cog) * L;
        if (!single) {
          pack_grad(grad, g, n0, bs, grp, gp);
          gg = gp;
        }
        const T* patches = xg;
        if (need_col) {
          for (int64_t b = 0; b < bs; ++b) im2col(xg + b * g.in_channels * HW, Cg, g, col + b * L, N);
          patches = col;
        }
        gemm(false, true, Cog, K, N, T(1), gg, N, patches, N, T(1), acc + grp * Cog * K, K);
      }
    }
  });
  for (int64_t r = 1; r < runs; ++r) {
    const T* p = partials.data() + (r - 1) * wsize;
    for (int64_t i = 0; i < wsize; ++i) dw[i] += p[i];
  }
}

// Contiguous float32 / float64 operands for the templates; 16-bit floats widened to float32.
Tensor compute_operand(const Tensor& t) {
  if (!t.defined()) return t;
  Tensor c = t.dtype() == kFloat16 || t.dtype() == kBFloat16 ? t.to(kFloat32) : t;
  return c.contiguous();
}

// Calls fn<T>(result_ptr, operands...) on compute operands and writes `out` from the contiguous
// result (rounding when widened; a channels-last `out` is written through that copy as well).
template <class Fn>
void run_widened(const Tensor& out, std::initializer_list<const Tensor*> inputs, const char* op, Fn&& fn) {
  std::vector<Tensor> ops;
  for (const Tensor* t : inputs) ops.push_back(compute_operand(*t));
  const bool widened = out.dtype() == kFloat16 || out.dtype() == kBFloat16;
  const bool direct = !widened && out.is_contiguous();
  Tensor result = direct ? out : make_empty(out.sizes(), widened ? kFloat32 : out.dtype(), out.device());
  dispatch_dtype<DTypeSet::Floating>(result.dtype(), op, [&]<class T>(TypeTag<T>) {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      std::vector<const T*> ptrs;
      for (const Tensor& t : ops) ptrs.push_back(t.defined() ? t.data_ptr<T>() : nullptr);
      fn(result.data_ptr<T>(), ptrs);
    }
  });
  if (!direct) Tensor(out).copy_(result);
}

// Each entry first offers the call to oneDNN (Note [oneDNN where it wins] in kernels/cpu/onednn/onednn.h),
// which takes the shapes where it measured faster; the rest run here.
void conv2d_forward_cpu(const Tensor& out, const Tensor& x, const Tensor& w, const Tensor& bias, const ConvGeometry& g) {
  if (out.numel() == 0) return;
  if (onednn::conv2d_forward(out, x, w, bias, g)) return;
  run_widened(out, {&x, &w, &bias}, "conv2d", [&]<class T>(T* o, const std::vector<const T*>& p) {
    forward<T>(o, p[0], p[1], p[2], g);
  });
}

void conv2d_input_backward_cpu(const Tensor& out, const Tensor& grad, const Tensor& w, const Tensor& bias,
                               const ConvGeometry& g) {
  if (out.numel() == 0) return;
  if (onednn::conv2d_input_backward(out, grad, w, bias, g)) return;
  run_widened(out, {&grad, &w, &bias}, "conv_transpose2d", [&]<class T>(T* o, const std::vector<const T*>& p) {
    input_backward<T>(o, p[0], p[1], p[2], g);
  });
}

void conv2d_weight_backward_cpu(const Tensor& out, const Tensor& grad, const Tensor& x, const ConvGeometry& g) {
  if (out.numel() == 0) return;
  if (onednn::conv2d_weight_backward(out, grad, x, g)) return;
  run_widened(out, {&grad, &x}, "conv2d_backward_weight", [&]<class T>(T* o, const std::vector<const T*>& p) {
    weight_backward<T>(o, p[0], p[1], g);
  });
}

}  // namespace

void register_conv() {
  conv2d_forward_kernel.set(DeviceType::CPU, conv2d_forward_cpu);
  conv2d_input_backward_kernel.set(DeviceType::CPU, conv2d_input_backward_cpu);
  conv2d_weight_backward_kernel.set(DeviceType::CPU, conv2d_weight_backward_cpu);
}

}  // namespace tessera::cpu::TS_CPU_ISA
