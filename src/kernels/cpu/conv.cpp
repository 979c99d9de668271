// CPU convolution kernels behind ops/conv_kernel.h: im2col + one OpenBLAS GEMM per (sample, group),
// col2im for the input gradient (conv_transpose2d), and GEMMs against the patches for the weight
// gradient. float32 / float64 run natively (sgemm / dgemm); float16 / bfloat16 are widened to float32
// once at the entry, computed in float32 and rounded once. Operands are made contiguous at the entry;
// a channels-last result is computed contiguous and copied.
//
// Shapes per sample n and group g (Cg = C_in / G, Cog = C_out / G, K = Cg * KH * KW, L = OH * OW):
//   col (K, L)  = im2col(x[n, g])                     patches; row (c, kh, kw), column (oh, ow)
//   forward     : out[n, g] (Cog, L) = W[g] (Cog, K) @ col            (+ bias, preloaded, beta = 1)
//   input grad  : col = W[g]^T (K, Cog) @ grad[n, g] (Cog, L);  dx[n, g] = col2im(col)
//   weight grad : dW[g] (Cog, K) += grad[n, g] (Cog, L) @ col^T
// A 1x1 kernel with stride 1 and no padding uses x (or dx) itself as col.
//
// Threads: the batch is split into contiguous chunks of samples that OpenMP threads take dynamically,
// each thread with its own col buffer (thread-local, reused across calls) and OpenBLAS held to one
// thread meanwhile (otherwise every thread would start a threaded GEMM on the same cores). The weight
// gradient accumulates one partial per chunk and sums them in chunk order, so results do not depend
// on scheduling. A batch of one runs with OpenBLAS's own threads instead.
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "ops/conv_kernel.h"
#include "tensor/dispatch_dtype.h"
#include "tensor/tensor_impl.h"

namespace tessera::cpu {
namespace {

void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda, const float* b,
          int64_t ldb, float beta, float* c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, int(m), int(n), int(k),
              alpha, a, int(std::max<int64_t>(lda, 1)), b, int(std::max<int64_t>(ldb, 1)), beta, c,
              int(std::max<int64_t>(ldc, 1)));
}
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t lda,
          const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, int(m), int(n), int(k),
              alpha, a, int(std::max<int64_t>(lda, 1)), b, int(std::max<int64_t>(ldb, 1)), beta, c,
              int(std::max<int64_t>(ldc, 1)));
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

// Holds OpenBLAS to one thread while OpenMP threads call it concurrently.
class BlasSingleThread {
 public:
  BlasSingleThread() : prev_(openblas_get_num_threads()) {
    if (prev_ != 1) openblas_set_num_threads(1);
  }
  ~BlasSingleThread() {
    if (prev_ != 1) openblas_set_num_threads(prev_);
  }
  BlasSingleThread(const BlasSingleThread&) = delete;
  BlasSingleThread& operator=(const BlasSingleThread&) = delete;

 private:
  int prev_;
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

// col (channels * KH * KW, OH * OW) from x (channels, H, W); zeros where a tap falls in the padding.
template <class T>
void im2col(const T* x, int64_t channels, const ConvGeometry& g, T* col) {
  const int64_t H = g.in_h, W = g.in_w, OH = g.out_h, OW = g.out_w, L = OH * OW;
  const int64_t sh = g.stride_h, sw = g.stride_w;
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t kh = 0; kh < g.kernel_h; ++kh)
      for (int64_t kw = 0; kw < g.kernel_w; ++kw) {
        T* dst = col + ((c * g.kernel_h + kh) * g.kernel_w + kw) * L;
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
            std::memcpy(d + r.lo, s + r.lo, sizeof(T) * (r.hi - r.lo));
          } else {
            for (int64_t ow = r.lo; ow < r.hi; ++ow) d[ow] = s[ow * sw];
          }
          std::fill(d + r.hi, d + OW, T(0));
        }
      }
}

// dx (channels, H, W) = the adjoint of im2col applied to col; dx is overwritten.
template <class T>
void col2im(const T* col, int64_t channels, const ConvGeometry& g, T* dx) {
  const int64_t H = g.in_h, W = g.in_w, OH = g.out_h, OW = g.out_w, L = OH * OW;
  const int64_t sh = g.stride_h, sw = g.stride_w;
  std::fill(dx, dx + channels * H * W, T(0));
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t kh = 0; kh < g.kernel_h; ++kh)
      for (int64_t kw = 0; kw < g.kernel_w; ++kw) {
        const T* src = col + ((c * g.kernel_h + kh) * g.kernel_w + kw) * L;
        T* plane = dx + c * H * W;
        const int64_t off = kw * g.dil_w - g.pad_w;
        const ColRange r = valid_cols(off, W, sw, OW);
        for (int64_t oh = 0; oh < OH; ++oh) {
          const int64_t ih = oh * sh - g.pad_h + kh * g.dil_h;
          if (ih < 0 || ih >= H) continue;
          const T* s = src + oh * OW;
          T* d = plane + ih * W + off;
          if (sw == 1) {
            for (int64_t ow = r.lo; ow < r.hi; ++ow) d[ow] += s[ow];
          } else {
            for (int64_t ow = r.lo; ow < r.hi; ++ow) d[ow * sw] += s[ow];
          }
        }
      }
}

// How [0, n) is cut into contiguous chunks of samples: one chunk when only one thread runs (OpenBLAS
// then keeps its own threads), else up to kChunksPerThread per thread, handed out dynamically so that
// a thread the OS preempts (a busy machine) does not leave the others waiting at the barrier with
// half the batch. The cut depends only on n and the thread count, never on the scheduling.
constexpr int64_t kChunksPerThread = 4;

int64_t batch_chunks(int64_t n) {
  const int64_t threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  if (threads <= 1 || n <= 1) return 1;
  return std::min(n, threads * kChunksPerThread);
}

// Runs body(chunk, lo, hi) over the chunks of batch_chunks(n), OpenBLAS on one thread meanwhile.
template <class F>
void for_batch_chunks(int64_t n, F&& body) {
  const int64_t chunks = batch_chunks(n);
  if (chunks == 1) {
    body(int64_t(0), int64_t(0), n);
    return;
  }
  BlasSingleThread single;
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t c = 0; c < chunks; ++c) body(c, n * c / chunks, n * (c + 1) / chunks);
}

template <class T>
void forward(T* out, const T* x, const T* w, const T* bias, const ConvGeometry& g) {
  const int64_t G = g.groups, Cg = g.in_channels / G, Cog = g.out_channels / G;
  const int64_t HW = g.in_h * g.in_w, L = g.out_h * g.out_w, K = Cg * g.kernel_h * g.kernel_w;
  const bool direct = is_direct(g);
  for_batch_chunks(g.batch, [&](int64_t, int64_t lo, int64_t hi) {
    Scratch<T> col(direct ? 0 : size_t(K * L));
    for (int64_t n = lo; n < hi; ++n)
      for (int64_t grp = 0; grp < G; ++grp) {
        const T* xg = x + (n * g.in_channels + grp * Cg) * HW;
        T* og = out + (n * g.out_channels + grp * Cog) * L;
        T beta = 0;
        if (bias) {
          for (int64_t co = 0; co < Cog; ++co) std::fill(og + co * L, og + (co + 1) * L, bias[grp * Cog + co]);
          beta = 1;
        }
        if (K == 0) {
          if (!bias) std::fill(og, og + Cog * L, T(0));
          continue;
        }
        const T* b = xg;
        if (!direct) {
          im2col(xg, Cg, g, col.get());
          b = col.get();
        }
        gemm(false, false, Cog, L, K, T(1), w + grp * Cog * K, K, b, L, beta, og, L);
      }
  });
}

template <class T>
void input_backward(T* dx, const T* grad, const T* w, const T* bias, const ConvGeometry& g) {
  const int64_t G = g.groups, Cg = g.in_channels / G, Cog = g.out_channels / G;
  const int64_t HW = g.in_h * g.in_w, L = g.out_h * g.out_w, K = Cg * g.kernel_h * g.kernel_w;
  const bool direct = is_direct(g);
  for_batch_chunks(g.batch, [&](int64_t, int64_t lo, int64_t hi) {
    Scratch<T> col(direct ? 0 : size_t(K * L));
    for (int64_t n = lo; n < hi; ++n) {
      for (int64_t grp = 0; grp < G; ++grp) {
        T* dg = dx + (n * g.in_channels + grp * Cg) * HW;
        const T* gg = grad + (n * g.out_channels + grp * Cog) * L;
        if (Cog == 0) {
          std::fill(dg, dg + Cg * HW, T(0));
        } else if (direct) {
          gemm(true, false, K, L, Cog, T(1), w + grp * Cog * K, K, gg, L, T(0), dg, L);
        } else {
          gemm(true, false, K, L, Cog, T(1), w + grp * Cog * K, K, gg, L, T(0), col.get(), L);
          col2im(col.get(), Cg, g, dg);
        }
      }
      if (bias)
        for (int64_t c = 0; c < g.in_channels; ++c) {
          T* p = dx + (n * g.in_channels + c) * HW;
          const T b = bias[c];
          for (int64_t i = 0; i < HW; ++i) p[i] += b;
        }
    }
  });
}

template <class T>
void weight_backward(T* dw, const T* grad, const T* x, const ConvGeometry& g) {
  const int64_t G = g.groups, Cg = g.in_channels / G, Cog = g.out_channels / G;
  const int64_t HW = g.in_h * g.in_w, L = g.out_h * g.out_w, K = Cg * g.kernel_h * g.kernel_w;
  const int64_t wsize = g.out_channels * K;
  const bool direct = is_direct(g);
  // One partial sum per chunk (chunk 0 accumulates in place), added in chunk order afterwards.
  const int64_t chunks = batch_chunks(g.batch);
  std::vector<T> partials(size_t((chunks - 1) * wsize));
  for_batch_chunks(g.batch, [&](int64_t t, int64_t lo, int64_t hi) {
    T* acc = t == 0 ? dw : partials.data() + (t - 1) * wsize;
    std::fill(acc, acc + wsize, T(0));
    if (K == 0) return;
    Scratch<T> col(direct ? 0 : size_t(K * L));
    for (int64_t n = lo; n < hi; ++n)
      for (int64_t grp = 0; grp < G; ++grp) {
        const T* xg = x + (n * g.in_channels + grp * Cg) * HW;
        const T* gg = grad + (n * g.out_channels + grp * Cog) * L;
        const T* b = xg;
        if (!direct) {
          im2col(xg, Cg, g, col.get());
          b = col.get();
        }
        gemm(false, true, Cog, K, L, T(1), gg, L, b, L, T(1), acc + grp * Cog * K, K);
      }
  });
  for (int64_t t = 1; t < chunks; ++t) {
    const T* p = partials.data() + (t - 1) * wsize;
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

void conv2d_forward_cpu(const Tensor& out, const Tensor& x, const Tensor& w, const Tensor& bias, const ConvGeometry& g) {
  if (out.numel() == 0) return;
  run_widened(out, {&x, &w, &bias}, "conv2d", [&]<class T>(T* o, const std::vector<const T*>& p) {
    forward<T>(o, p[0], p[1], p[2], g);
  });
}

void conv2d_input_backward_cpu(const Tensor& out, const Tensor& grad, const Tensor& w, const Tensor& bias,
                               const ConvGeometry& g) {
  if (out.numel() == 0) return;
  run_widened(out, {&grad, &w, &bias}, "conv_transpose2d", [&]<class T>(T* o, const std::vector<const T*>& p) {
    input_backward<T>(o, p[0], p[1], p[2], g);
  });
}

void conv2d_weight_backward_cpu(const Tensor& out, const Tensor& grad, const Tensor& x, const ConvGeometry& g) {
  if (out.numel() == 0) return;
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

}  // namespace tessera::cpu
