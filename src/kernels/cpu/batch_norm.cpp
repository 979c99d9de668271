// CPU batch normalization kernels behind ops/batch_norm_kernel.h, the reference semantics for the
// other backends. x is seen as (N, C, L) in either layout (BatchNormShape); element (n, c, l) sits at
// n * sn + c * sc + l * sl.
//
// Work is split into blocks of channels (one channel for the contiguous layout, where a channel's L
// values are adjacent; kChannelBlock channels for channels-last, where a row of C values is adjacent,
// so that each cache line read serves the whole block). OpenMP threads take the blocks; every channel
// is reduced by one thread in one fixed order (n, then l), so results do not depend on the thread
// count, nor on the layout.
// Statistics are accumulated in float64 (two passes: mean, then the sum of squared deviations), for
// every dtype; elementwise math runs in acc_t (float for 16-bit inputs, rounded once on store).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/onednn/onednn.h"
#include "ops/batch_norm_kernel.h"
#include "tensor/dispatch_dtype.h"
#include "tensor/tensor_impl.h"

namespace tessera::cpu::inline TS_CPU_ISA {  // Note [ISA namespaces]
namespace {

constexpr int64_t kChannelBlock = 16;

struct Layout {
  int64_t sn, sc, sl;  // element strides of (n, c, l)
  int64_t block;       // channels per task
};

Layout layout_of(const BatchNormShape& s) {
  if (s.channels_last) return {s.l * s.c, 1, s.c, kChannelBlock};
  return {s.c * s.l, s.l, 1, 1};
}

// Calls body(c0, cb) for every block of channels, in parallel when the work is worth it.
template <class F>
void for_channel_blocks(const BatchNormShape& s, const Layout& lay, F&& body) {
  const int64_t blocks = (s.c + lay.block - 1) / lay.block;
  const bool par = blocks > 1 && s.n * s.c * s.l >= 32768;
#pragma omp parallel for schedule(dynamic, 1) if (par)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t c0 = b * lay.block;
    body(c0, std::min(lay.block, s.c - c0));
  }
}

// acc[j] += f(value at (n, c0 + j, l)) over all n, l, for j < cb, in the order n, l.
template <class T, class F>
void accumulate(const T* base, const BatchNormShape& s, const Layout& lay, int64_t c0, int64_t cb, double* acc,
                F&& f) {
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t l = 0; l < s.l; ++l) {
      const T* p = base + n * lay.sn + l * lay.sl + c0 * lay.sc;
      for (int64_t j = 0; j < cb; ++j) acc[j] += f(j, static_cast<double>(static_cast<acc_t<T>>(p[j * lay.sc])));
    }
}

// y = (x - mean) * scale + shift over the channels [c0, c0 + cb).
template <class T, class A>
void normalize_block(T* y, const T* x, const BatchNormShape& s, const Layout& lay, int64_t c0, int64_t cb,
                     const A* mean, const A* scale, const A* shift) {
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t l = 0; l < s.l; ++l) {
      const int64_t off = n * lay.sn + l * lay.sl + c0 * lay.sc;
      for (int64_t j = 0; j < cb; ++j) {
        const A v = static_cast<A>(x[off + j * lay.sc]);
        y[off + j * lay.sc] = static_cast<T>((v - mean[j]) * scale[j] + shift[j]);
      }
    }
}

template <class T, class P>
void forward_training(T* y, P* save_mean, P* save_invstd, const T* x, const P* w, const P* b, P* rm, P* rv,
                      const BatchNormShape& s, double momentum, double eps) {
  using A = acc_t<T>;
  const Layout lay = layout_of(s);
  const double m = static_cast<double>(s.n * s.l);
  for_channel_blocks(s, lay, [&](int64_t c0, int64_t cb) {
    double sum[kChannelBlock] = {}, sq[kChannelBlock] = {}, mean[kChannelBlock];
    accumulate(x, s, lay, c0, cb, sum, [](int64_t, double v) { return v; });
    for (int64_t j = 0; j < cb; ++j) mean[j] = sum[j] / m;
    accumulate(x, s, lay, c0, cb, sq, [&](int64_t j, double v) { return (v - mean[j]) * (v - mean[j]); });
    A mean_a[kChannelBlock], scale[kChannelBlock], shift[kChannelBlock];
    for (int64_t j = 0; j < cb; ++j) {
      const int64_t c = c0 + j;
      const double var = sq[j] / m;
      const double invstd = 1.0 / std::sqrt(var + eps);
      save_mean[c] = static_cast<P>(mean[j]);
      save_invstd[c] = static_cast<P>(invstd);
      if (rm) {
        const double unbiased = m > 1 ? sq[j] / (m - 1) : std::numeric_limits<double>::quiet_NaN();
        rm[c] = static_cast<P>((1.0 - momentum) * static_cast<double>(rm[c]) + momentum * mean[j]);
        rv[c] = static_cast<P>((1.0 - momentum) * static_cast<double>(rv[c]) + momentum * unbiased);
      }
      mean_a[j] = static_cast<A>(mean[j]);
      scale[j] = static_cast<A>(invstd * (w ? static_cast<double>(w[c]) : 1.0));
      shift[j] = b ? static_cast<A>(b[c]) : A(0);
    }
    normalize_block(y, x, s, lay, c0, cb, mean_a, scale, shift);
  });
}

template <class T, class P>
void forward_inference(T* y, const T* x, const P* w, const P* b, const P* rm, const P* rv, const BatchNormShape& s,
                       double eps) {
  using A = acc_t<T>;
  const Layout lay = layout_of(s);
  for_channel_blocks(s, lay, [&](int64_t c0, int64_t cb) {
    A mean_a[kChannelBlock], scale[kChannelBlock], shift[kChannelBlock];
    for (int64_t j = 0; j < cb; ++j) {
      const int64_t c = c0 + j;
      const double invstd = 1.0 / std::sqrt(static_cast<double>(rv[c]) + eps);
      mean_a[j] = static_cast<A>(rm[c]);
      scale[j] = static_cast<A>(invstd * (w ? static_cast<double>(w[c]) : 1.0));
      shift[j] = b ? static_cast<A>(b[c]) : A(0);
    }
    normalize_block(y, x, s, lay, c0, cb, mean_a, scale, shift);
  });
}

template <class T, class P>
void backward(T* dx, P* dw, P* db, const T* dy, const T* x, const P* w, const P* mean, const P* invstd,
              const BatchNormShape& s, bool training) {
  using A = acc_t<T>;
  const Layout lay = layout_of(s);
  const double m = static_cast<double>(s.n * s.l);
  for_channel_blocks(s, lay, [&](int64_t c0, int64_t cb) {
    double sum_dy[kChannelBlock] = {}, sum_dy_xmu[kChannelBlock] = {}, mu[kChannelBlock];
    for (int64_t j = 0; j < cb; ++j) mu[j] = static_cast<double>(mean[c0 + j]);
    for (int64_t n = 0; n < s.n; ++n)
      for (int64_t l = 0; l < s.l; ++l) {
        const int64_t off = n * lay.sn + l * lay.sl + c0 * lay.sc;
        for (int64_t j = 0; j < cb; ++j) {
          const double g = static_cast<double>(static_cast<A>(dy[off + j * lay.sc]));
          const double v = static_cast<double>(static_cast<A>(x[off + j * lay.sc]));
          sum_dy[j] += g;
          sum_dy_xmu[j] += g * (v - mu[j]);
        }
      }
    // dx = k * (g - a - (x - mean) * b): a = sum(g) / M, b = invstd^2 * sum(g (x - mean)) / M when
    // training (0 and 0 in eval), k = w * invstd.
    A mean_a[kChannelBlock], ka[kChannelBlock], aa[kChannelBlock], ba[kChannelBlock];
    for (int64_t j = 0; j < cb; ++j) {
      const int64_t c = c0 + j;
      const double is = static_cast<double>(invstd[c]);
      if (db) db[c] = static_cast<P>(sum_dy[j]);
      if (dw) dw[c] = static_cast<P>(sum_dy_xmu[j] * is);
      mean_a[j] = static_cast<A>(mu[j]);
      ka[j] = static_cast<A>(is * (w ? static_cast<double>(w[c]) : 1.0));
      aa[j] = training ? static_cast<A>(sum_dy[j] / m) : A(0);
      ba[j] = training ? static_cast<A>(is * is * sum_dy_xmu[j] / m) : A(0);
    }
    if (!dx) return;
    for (int64_t n = 0; n < s.n; ++n)
      for (int64_t l = 0; l < s.l; ++l) {
        const int64_t off = n * lay.sn + l * lay.sl + c0 * lay.sc;
        for (int64_t j = 0; j < cb; ++j) {
          const A g = static_cast<A>(dy[off + j * lay.sc]);
          const A v = static_cast<A>(x[off + j * lay.sc]);
          dx[off + j * lay.sc] = static_cast<T>(ka[j] * (g - aa[j] - (v - mean_a[j]) * ba[j]));
        }
      }
  });
}

template <class P>
P* ptr(const Tensor& t) {
  return t.defined() ? t.data_ptr<P>() : nullptr;
}

// Calls f(TypeTag<T>, TypeTag<P>) for x's dtype T and its parameter dtype P.
template <class F>
void dispatch(DType dt, const char* op, F&& f) {
  dispatch_dtype<DTypeSet::Floating>(dt, op, [&]<class T>(TypeTag<T>) {
    using P = std::conditional_t<std::is_same_v<T, double>, double, float>;
    f(TypeTag<T>{}, TypeTag<P>{});
  });
}

void forward_training_cpu(const Tensor& y, const Tensor& save_mean, const Tensor& save_invstd, Tensor& /*reserve*/,
                          const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                          const Tensor& running_var, const BatchNormShape& s, double momentum, double eps) {
  if (onednn::batch_norm_forward_training(y, save_mean, save_invstd, x, weight, bias, running_mean, running_var, s,
                                          momentum, eps))
    return;
  dispatch(x.dtype(), "native_batch_norm", [&]<class T, class P>(TypeTag<T>, TypeTag<P>) {
    forward_training<T, P>(y.data_ptr<T>(), save_mean.data_ptr<P>(), save_invstd.data_ptr<P>(), x.data_ptr<T>(),
                           ptr<P>(weight), ptr<P>(bias), ptr<P>(running_mean), ptr<P>(running_var), s, momentum, eps);
  });
}

void forward_inference_cpu(const Tensor& y, const Tensor& x, const Tensor& weight, const Tensor& bias,
                           const Tensor& running_mean, const Tensor& running_var, const BatchNormShape& s, double eps) {
  if (onednn::batch_norm_forward_inference(y, x, weight, bias, running_mean, running_var, s, eps)) return;
  dispatch(x.dtype(), "native_batch_norm", [&]<class T, class P>(TypeTag<T>, TypeTag<P>) {
    forward_inference<T, P>(y.data_ptr<T>(), x.data_ptr<T>(), ptr<P>(weight), ptr<P>(bias),
                            running_mean.data_ptr<P>(), running_var.data_ptr<P>(), s, eps);
  });
}

void backward_cpu(const Tensor& dx, const Tensor& dweight, const Tensor& dbias, const Tensor& dy, const Tensor& x,
                  const Tensor& weight, const Tensor& mean, const Tensor& invstd, const Tensor& /*reserve*/,
                  const BatchNormShape& s, bool training, double eps) {
  if (onednn::batch_norm_backward(dx, dweight, dbias, dy, x, weight, mean, invstd, s, training, eps)) return;
  dispatch(x.dtype(), "native_batch_norm_backward", [&]<class T, class P>(TypeTag<T>, TypeTag<P>) {
    backward<T, P>(dx.defined() ? dx.data_ptr<T>() : nullptr, ptr<P>(dweight), ptr<P>(dbias), dy.data_ptr<T>(),
                   x.data_ptr<T>(), ptr<P>(weight), mean.data_ptr<P>(), invstd.data_ptr<P>(), s, training);
  });
}

}  // namespace

void register_batch_norm() {
  batch_norm_forward_training_kernel.set(DeviceType::CPU, forward_training_cpu);
  batch_norm_forward_inference_kernel.set(DeviceType::CPU, forward_inference_cpu);
  batch_norm_backward_kernel.set(DeviceType::CPU, backward_cpu);
}

}  // namespace tessera::cpu::TS_CPU_ISA
