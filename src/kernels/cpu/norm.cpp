// CPU layer norm and RMS norm, forward and backward, over the contiguous (M, N) rows of Note [Norm
// rows] (ops/norm_kernel.h). Statistics and gradients accumulate in acc_t<T> (float for the 16-bit
// floats and float32, double for float64), which is also the statistics dtype. The mean is summed
// around the row's first element (x - x0), so that a large offset common to the row does not round
// the sum; the variance is then a second pass over (x - mean)^2, which also refines the mean.
//
// Note [Refined mean]: summed around x0, the first pass rounds its partial sums at the scale of
// |x - x0|, and when x0 is an outlier of a zero-mean row, every term leans the same way and the sums
// grow with the row: over 208 normal values in float32 the mean came out 30 times further from the
// float64 one than PyTorch's, and sum(layer_norm(x)), which is 0, was 2.4e-5 (PyTorch 1.7e-6; found
// by the random program tester, seed 1014903). The second pass sums c = sum(x - mu) beside the
// squares; mu + c / n is the mean to the accuracy of a sum of small terms, and q - c^2 / n the
// corrected two-pass variance (Bjorck). RMS norm has no mean and skips both.
//
// Rows run in parallel (OpenMP, static schedule); each row is computed by one thread in a fixed
// order, so results do not depend on the thread count. The backward splits the rows into blocks whose
// size depends on M and N only; each block adds its rows' dy * xhat and dy into its own partial row,
// and the partial rows are then summed per column in block order: dweight and dbias are deterministic.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "ops/norm_kernel.h"
#include "tensor/dispatch_dtype.h"

namespace tessera::cpu::inline TS_CPU_ISA {  // Note [ISA namespaces]
namespace {

template <class T> const T* cptr(const Tensor& t) { return t.defined() ? static_cast<const T*>(t.data_ptr()) : nullptr; }
template <class T> T* mptr(const Tensor& t) { return t.defined() ? static_cast<T*>(t.data_ptr()) : nullptr; }

bool run_parallel(int64_t rows, int64_t work) { return rows > 1 && work > 16384; }

// y = (x - mean) * rstd [* w] [+ b] for one row.
template <class T, class A, class TY>
void store_row(TY* y, const T* x, const T* w, const T* b, int64_t n, A mu, A rs) {
  if (w && b) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i)
      y[i] = static_cast<TY>((static_cast<A>(x[i]) - mu) * rs * static_cast<A>(w[i]) + static_cast<A>(b[i]));
  } else if (w) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) y[i] = static_cast<TY>((static_cast<A>(x[i]) - mu) * rs * static_cast<A>(w[i]));
  } else if (b) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) y[i] = static_cast<TY>((static_cast<A>(x[i]) - mu) * rs + static_cast<A>(b[i]));
  } else {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) y[i] = static_cast<TY>((static_cast<A>(x[i]) - mu) * rs);
  }
}

// y of T, or of a 16-bit TY when T is float (Note [Mixed add + layer norm]).
template <class T, class TY = T>
void forward_rows(TY* y, acc_t<T>* mean, acc_t<T>* rstd, const T* x, const T* w, const T* b, const NormParams& p) {
  using A = acc_t<T>;
  const int64_t m = p.rows, n = p.cols;
  const A nn = static_cast<A>(n), eps = static_cast<A>(p.eps);
  const bool rms = p.rms;
#pragma omp parallel for schedule(static) if (run_parallel(m, m * n))
  for (int64_t r = 0; r < m; ++r) {
    const T* xr = x + r * n;
    A mu = 0;
    if (!rms) {
      // Summed around the row's first element: a large common offset costs no digits.
      const A shift = n > 0 ? static_cast<A>(xr[0]) : A(0);
      A s = 0;
#pragma omp simd reduction(+ : s)
      for (int64_t i = 0; i < n; ++i) s += static_cast<A>(xr[i]) - shift;
      mu = shift + s / nn;
    }
    // Second pass: the squares around mu, and their plain sum c, which is what mu's own rounding
    // left over (Note [Refined mean]).
    A q = 0, c = 0;
#pragma omp simd reduction(+ : q, c)
    for (int64_t i = 0; i < n; ++i) {
      const A d = static_cast<A>(xr[i]) - mu;
      q += d * d;
      c += d;
    }
    if (!rms && n > 0) {
      mu += c / nn;
      q = std::max(q - c * c / nn, A(0));
    }
    const A rs = A(1) / std::sqrt(q / nn + eps);
    if (mean) mean[r] = mu;
    rstd[r] = rs;
    store_row(y + r * n, xr, w, b, n, mu, rs);
  }
}

// dadd (M, N) or null: added to dx in A before its rounding (Note [Add + layer norm]). dx_low (TL, or
// null): dx rounded to TL (Note [Mixed add + layer norm]).
template <class T, class TL = T>
void backward_rows(T* dx, T* dw, T* db, const T* dy, const T* x, const acc_t<T>* mean, const acc_t<T>* rstd,
                   const T* w, const NormParams& p, const T* dadd = nullptr, TL* dx_low = nullptr) {
  using A = acc_t<T>;
  const int64_t m = p.rows, n = p.cols;
  const A nn = static_cast<A>(n);
  const bool partials = dw || db;
  // Row blocks: about 64, fewer when the partial rows would pass 2^24 elements. Depends on M, N only.
  int64_t nblocks = std::min<int64_t>(m, 64);
  if (partials && n > 0) nblocks = std::min<int64_t>(nblocks, std::max<int64_t>(1, (int64_t(1) << 24) / n));
  const int64_t per_block = nblocks > 0 ? (m + nblocks - 1) / nblocks : 0;
  if (per_block > 0) nblocks = (m + per_block - 1) / per_block;
  std::vector<A> pw(dw ? static_cast<size_t>(nblocks * n) : 0), pb(db ? static_cast<size_t>(nblocks * n) : 0);

#pragma omp parallel for schedule(static) if (nblocks > 1 && m * n > 16384)
  for (int64_t blk = 0; blk < nblocks; ++blk) {
    A* pwr = dw ? pw.data() + blk * n : nullptr;
    A* pbr = db ? pb.data() + blk * n : nullptr;
    std::vector<T> row_buf(dx_low && !dx ? static_cast<size_t>(n) : 0);  // dx's row when only dx_low is wanted
    const int64_t r1 = std::min(m, (blk + 1) * per_block);
    for (int64_t r = blk * per_block; r < r1; ++r) {
      const T* xr = x + r * n;
      const T* gr = dy + r * n;
      const A mu = mean ? mean[r] : A(0), rs = rstd[r];
      if (dx || dx_low) {
        A sg = 0, sgx = 0;
#pragma omp simd reduction(+ : sg, sgx)
        for (int64_t i = 0; i < n; ++i) {
          const A g = w ? static_cast<A>(gr[i]) * static_cast<A>(w[i]) : static_cast<A>(gr[i]);
          sg += g;
          sgx += g * ((static_cast<A>(xr[i]) - mu) * rs);
        }
        const A mg = mean ? sg / nn : A(0), mgx = sgx / nn;
        T* dxr = dx ? dx + r * n : row_buf.data();
        const T* ar = dadd ? dadd + r * n : nullptr;
#pragma omp simd
        for (int64_t i = 0; i < n; ++i) {
          const A g = w ? static_cast<A>(gr[i]) * static_cast<A>(w[i]) : static_cast<A>(gr[i]);
          const A xh = (static_cast<A>(xr[i]) - mu) * rs;
          const A a = ar ? static_cast<A>(ar[i]) : A(0);
          dxr[i] = static_cast<T>(rs * (g - mg - xh * mgx) + a);
        }
        // A loop of its own, so that the one above compiles as the float32 op's (the same contractions).
        if (dx_low) {
          TL* dlr = dx_low + r * n;
          for (int64_t i = 0; i < n; ++i) dlr[i] = static_cast<TL>(static_cast<A>(dxr[i]));
        }
      }
      if (pwr) {
#pragma omp simd
        for (int64_t i = 0; i < n; ++i) pwr[i] += static_cast<A>(gr[i]) * ((static_cast<A>(xr[i]) - mu) * rs);
      }
      if (pbr) {
#pragma omp simd
        for (int64_t i = 0; i < n; ++i) pbr[i] += static_cast<A>(gr[i]);
      }
    }
  }
  if (!partials) return;
#pragma omp parallel for schedule(static) if (n * nblocks > 16384)
  for (int64_t i = 0; i < n; ++i) {
    A sw = 0, sb = 0;
    for (int64_t blk = 0; blk < nblocks; ++blk) {
      if (dw) sw += pw[blk * n + i];
      if (db) sb += pb[blk * n + i];
    }
    if (dw) dw[i] = static_cast<T>(sw);
    if (db) db[i] = static_cast<T>(sb);
  }
}

void norm_forward_cpu(const Tensor& y, const Tensor& mean, const Tensor& rstd, const Tensor& x, const Tensor& weight,
                      const Tensor& bias, const NormParams& p) {
  dispatch_floating(x.dtype(), p.rms ? "native_rms_norm" : "native_layer_norm", [&]<class T>(TypeTag<T>) {
    using A = acc_t<T>;
    forward_rows<T>(mptr<T>(y), mptr<A>(mean), mptr<A>(rstd), cptr<T>(x), cptr<T>(weight), cptr<T>(bias), p);
  });
}

void norm_backward_cpu(const Tensor& dx, const Tensor& dweight, const Tensor& dbias, const Tensor& dy, const Tensor& x,
                       const Tensor& mean, const Tensor& rstd, const Tensor& weight, const NormParams& p) {
  dispatch_floating(x.dtype(), p.rms ? "native_rms_norm_backward" : "native_layer_norm_backward",
                    [&]<class T>(TypeTag<T>) {
                      using A = acc_t<T>;
                      backward_rows<T>(mptr<T>(dx), mptr<T>(dweight), mptr<T>(dbias), cptr<T>(dy), cptr<T>(x),
                                       cptr<A>(mean), cptr<A>(rstd), cptr<T>(weight), p);
                    });
}

// Note [Add + layer norm]: sum = x + residual rounded to T, then the layer norm of the stored sum.
// Note [Mixed add + layer norm]: with a float32 sum, x and y may be of a 16-bit L.
template <class T, class L>
void add_norm_forward_rows(const Tensor& sum, const Tensor& y, const Tensor& mean, const Tensor& rstd, const Tensor& x,
                           const Tensor& residual, const Tensor& weight, const Tensor& bias, const NormParams& p) {
  using A = acc_t<T>;
  T* s = mptr<T>(sum);
  const L* xa = cptr<L>(x);
  const T* ra = cptr<T>(residual);
  const int64_t total = p.rows * p.cols;
#pragma omp parallel for simd schedule(static) if (total > 65536)
  for (int64_t i = 0; i < total; ++i) s[i] = static_cast<T>(static_cast<A>(xa[i]) + static_cast<A>(ra[i]));
  forward_rows<T, L>(mptr<L>(y), mptr<A>(mean), mptr<A>(rstd), s, cptr<T>(weight), cptr<T>(bias), p);
}

// The 16-bit dtype L of a mixed call (x's and y's, or dy's and dx_low's), as a type tag for f.
template <class F>
void dispatch_low(DType d, const char* op, F&& f) {
  if (d == kBFloat16) f(TypeTag<BFloat16>{});
  else if (d == kFloat16) f(TypeTag<Half>{});
  else TS_THROW(DTypeError, op, ": a float32 sum takes a bfloat16 or float16 branch, got ", dtype_name(d));
}

void add_norm_forward_cpu(const Tensor& sum, const Tensor& y, const Tensor& mean, const Tensor& rstd, const Tensor& x,
                          const Tensor& residual, const Tensor& weight, const Tensor& bias, const NormParams& p) {
  if (x.dtype() != sum.dtype()) {
    TS_CHECK(sum.dtype() == kFloat32 && y.dtype() == x.dtype(), DTypeError,
             "add_layer_norm: a mixed call needs a float32 sum and x, y of one 16-bit dtype, got sum ",
             dtype_name(sum.dtype()), ", x ", dtype_name(x.dtype()), ", y ", dtype_name(y.dtype()));
    dispatch_low(x.dtype(), "add_layer_norm", [&]<class L>(TypeTag<L>) {
      add_norm_forward_rows<float, L>(sum, y, mean, rstd, x, residual, weight, bias, p);
    });
    return;
  }
  dispatch_floating(x.dtype(), "add_layer_norm", [&]<class T>(TypeTag<T>) {
    add_norm_forward_rows<T, T>(sum, y, mean, rstd, x, residual, weight, bias, p);
  });
}

void add_norm_backward_cpu(const Tensor& dx, const Tensor& dx_low, const Tensor& dweight, const Tensor& dbias,
                           const Tensor& dy, const Tensor& dsum, const Tensor& x, const Tensor& mean,
                           const Tensor& rstd, const Tensor& weight, const NormParams& p) {
  if (dx_low.defined() || dy.dtype() != x.dtype()) {
    const DType low = dx_low.defined() ? dx_low.dtype() : dy.dtype();
    TS_CHECK(x.dtype() == kFloat32 && (dy.dtype() == kFloat32 || dy.dtype() == low), DTypeError,
             "add_layer_norm_backward: a mixed call needs a float32 sum and dy of float32 or of dx_low's 16-bit "
             "dtype, got sum ",
             dtype_name(x.dtype()), ", dy ", dtype_name(dy.dtype()), ", dx_low ", dtype_name(low));
    dispatch_low(low, "add_layer_norm_backward", [&]<class L>(TypeTag<L>) {
      // A 16-bit dy is widened first: the row reductions then run (and vectorize) as the float32 op's,
      // so every result is bitwise the float32 op's.
      std::vector<float> wide;
      const float* g = cptr<float>(dy);
      if (dy.dtype() != kFloat32) {
        const int64_t total = p.rows * p.cols;
        wide.resize(static_cast<size_t>(total));
        const L* src = cptr<L>(dy);
#pragma omp parallel for simd schedule(static) if (total > 65536)
        for (int64_t i = 0; i < total; ++i) wide[i] = static_cast<float>(src[i]);
        g = wide.data();
      }
      backward_rows<float, L>(mptr<float>(dx), mptr<float>(dweight), mptr<float>(dbias), g, cptr<float>(x),
                              cptr<float>(mean), cptr<float>(rstd), cptr<float>(weight), p, cptr<float>(dsum),
                              mptr<L>(dx_low));
    });
    return;
  }
  dispatch_floating(x.dtype(), "add_layer_norm_backward", [&]<class T>(TypeTag<T>) {
    using A = acc_t<T>;
    backward_rows<T>(mptr<T>(dx), mptr<T>(dweight), mptr<T>(dbias), cptr<T>(dy), cptr<T>(x), cptr<A>(mean),
                     cptr<A>(rstd), cptr<T>(weight), p, cptr<T>(dsum));
  });
}

}  // namespace

void register_norm() {
  norm_forward_kernel.set(DeviceType::CPU, &norm_forward_cpu);
  norm_backward_kernel.set(DeviceType::CPU, &norm_backward_cpu);
  add_norm_forward_kernel.set(DeviceType::CPU, &add_norm_forward_cpu);
  add_norm_backward_kernel.set(DeviceType::CPU, &add_norm_backward_cpu);
}

}  // namespace tessera::cpu::TS_CPU_ISA
