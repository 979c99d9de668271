// CPU kernels over rows: the input is (kept..., R) with one reduced dim R last (any strides; the op
// layer copies only when neither R nor the innermost kept dim is unit-stride). argmax/argmin and max/min with indices, var/std/mean
// (two-pass moments per chunk in float64, chunks merged with Chan's formula), logsumexp (max, then a
// float64 sum of shifted exponentials).
//
// Each row is cut into chunks of a fixed length, and chunk results are merged left to right. Many
// outputs run in parallel one row per iteration; few long rows run their chunks in parallel and merge
// afterwards in the same order, so results do not depend on the thread count.
#include <bit>
#include <limits>
#include <vector>

#include "kernels/cpu/convert.h"
#include "kernels/cpu/reduce_common.h"
#include "kernels/cpu/reduce_cpu.h"
#include "ops/reduce_kernel.h"

namespace tessera::cpu::inline TS_CPU_ISA {  // Note [ISA namespaces]
namespace {

constexpr int64_t kRowChunk = 65536;

struct Rows {
  DimGroup kept;
  int64_t R = 0, st = 1;
  explicit Rows(const Tensor& in) {
    const int nk = static_cast<int>(in.dim()) - 1;
    kept = make_group(in.sizes().data(), in.strides().data(), nk);
    R = in.size(-1);
    st = in.stride(-1);
    columns = R > 1 && st != 1 && kept.n > 0 && kept.inner_stride() == 1 && kept.inner_size() > 1;
  }
  bool columns = false;  // R is strided and the innermost kept dim unit-stride: walk tiles of columns
  int64_t chunks() const { return R == 0 ? 0 : ceil_div(R, kRowChunk); }
};

// Runs per-chunk work for every output. `Acc` is the chunk result, `chunk(o, r0, r1)` computes one,
// `merge(a, b)` folds the next chunk into the running result and `write(o, acc)` stores an output.
// The merge order is left to right in both modes.
template <class Acc, class Chunk, class Merge, class Write>
void run_rows(const Rows& rows, Acc empty, Chunk&& chunk, Merge&& merge, Write&& write) {
  const int64_t O = rows.kept.numel, R = rows.R, nc = rows.chunks();
  if (O == 0) return;
  const int nt = max_threads();
  auto row = [&](int64_t o) {
    Acc acc = empty;
    for (int64_t c = 0; c < nc; ++c) {
      Acc part = chunk(o, c * kRowChunk, std::min(R, (c + 1) * kRowChunk));
      acc = c == 0 ? part : merge(acc, part);
    }
    write(o, acc);
  };
  if (nt == 1 || O >= 2 * nt || nc < 2) {
    const bool par = nt > 1 && O > 1 && O * R >= 16384;
#pragma omp parallel for schedule(static) if (par)
    for (int64_t o = 0; o < O; ++o) row(o);
    return;
  }
  std::vector<Acc> part(static_cast<size_t>(O * nc), empty);
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < O * nc; ++t) {
    const int64_t o = t / nc, c = t % nc;
    part[t] = chunk(o, c * kRowChunk, std::min(R, (c + 1) * kRowChunk));
  }
  for (int64_t o = 0; o < O; ++o) {
    Acc acc = part[o * nc];
    for (int64_t c = 1; c < nc; ++c) acc = merge(acc, part[o * nc + c]);
    write(o, acc);
  }
}

// Column traversal (Note [Reduction layout] with the reduced dim outer, e.g. a row-major matrix
// reduced over dim 0): tiles of up to kColTile neighbouring outputs advance one reduced row at a
// time, reading each row segment in order. Calls f(tile start, first output, width) per tile.
constexpr int64_t kColTile = 512;

template <class T, class F>
void for_each_column_tile(const Rows& rows, const T* base, F&& f) {
  const int64_t W = rows.kept.inner_size(), tiles = ceil_div(W, kColTile);
  const DimGroup kq = rows.kept.outer();
  const int64_t G = kq.numel * tiles;
  const bool par = max_threads() > 1 && G > 1 && rows.kept.numel * rows.R >= 16384;
#pragma omp parallel for schedule(static) if (par)
  for (int64_t g = 0; g < G; ++g) {
    const int64_t q = g / tiles, t = g % tiles;
    f(base + kq.offset(q) + t * kColTile, q * W + t * kColTile, std::min(kColTile, W - t * kColTile));
  }
}

// dst[0, w) = p[0, w) in the compute type.
template <class T>
inline void load_row(const T* p, int64_t w, load_t<T>* dst) {
  if constexpr (is_16bit_float_v<T>) widen(p, w, dst);
  else for (int64_t i = 0; i < w; ++i) dst[i] = static_cast<load_t<T>>(p[i]);
}

// ---- argmax / argmin -------------------------------------------------------------------------------
template <class V>
struct Best {
  V val;
  int64_t idx;
};

// b replaces a when it is strictly better or a NaN (a NaN already held is never replaced, so the first
// NaN and the first of equal values win).
template <bool IsMax, class V>
inline bool better(V b, V a) {
  if (is_nan(a)) return false;
  return (IsMax ? b > a : b < a) || is_nan(b);
}

template <class T, bool IsMax>
void arg_reduce_typed(const Tensor& values, const Tensor& indices, const Tensor& in) {
  using V = load_t<T>;
  const Rows rows(in);
  const T* base = static_cast<const T*>(in.data_ptr());
  int64_t* idx_out = static_cast<int64_t*>(indices.data_ptr());
  T* val_out = values.defined() ? static_cast<T*>(values.data_ptr()) : nullptr;
  if (rows.columns) {
    for_each_column_tile(rows, base, [&](const T* p, int64_t o0, int64_t w) {
      V best[kColTile], x[kColTile];
      int64_t bi[kColTile];
      load_row(p, w, best);
      for (int64_t i = 0; i < w; ++i) bi[i] = 0;
      for (int64_t r = 1; r < rows.R; ++r) {
        load_row(p + r * rows.st, w, x);
        for (int64_t i = 0; i < w; ++i) {
          const bool take = better<IsMax>(x[i], best[i]);
          best[i] = take ? x[i] : best[i];
          bi[i] = take ? r : bi[i];
        }
      }
      for (int64_t i = 0; i < w; ++i) {
        idx_out[o0 + i] = bi[i];
        if (val_out) val_out[o0 + i] = convert<T>(best[i]);
      }
    });
    return;
  }
  auto chunk = [&](int64_t o, int64_t r0, int64_t r1) {
    const T* p = base + rows.kept.offset(o);
    Best<V> b{static_cast<V>(p[r0 * rows.st]), r0};
    if (is_nan(b.val)) return b;
    int64_t r = r0;
    for_blocks(p + r0 * rows.st, r1 - r0, rows.st, [&](const V* q, int64_t m) {
      if (is_nan(b.val)) return;
      for (int64_t k = 0; k < m; ++k) {
        if (better<IsMax>(q[k], b.val)) {
          b = {q[k], r + k};
          if (is_nan(q[k])) break;
        }
      }
      r += m;
    });
    return b;
  };
  auto merge = [](Best<V> a, Best<V> b) { return better<IsMax>(b.val, a.val) ? b : a; };
  auto write = [&](int64_t o, Best<V> b) {
    idx_out[o] = b.idx;
    if (val_out) val_out[o] = convert<T>(b.val);
  };
  run_rows(rows, Best<V>{V(0), 0}, chunk, merge, write);
}

void arg_reduce_cpu(const Tensor& values, const Tensor& indices, const Tensor& in, bool is_max) {
  dispatch_dtype(in.dtype(), is_max ? "argmax" : "argmin", [&]<class T>(TypeTag<T>) {
    if (is_max) arg_reduce_typed<T, true>(values, indices, in);
    else arg_reduce_typed<T, false>(values, indices, in);
  });
}

// ---- var / std -------------------------------------------------------------------------------------
struct Moments {
  double n = 0, mean = 0, m2 = 0;
};

template <class V>
inline double sum_f64(const V* q, int64_t m) {
  double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= m; i += 8)
    for (int j = 0; j < 8; ++j) acc[j] += static_cast<double>(q[i + j]);
  for (int j = 0; i < m; ++i, ++j) acc[j] += static_cast<double>(q[i]);
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

template <class V>
inline double sqdev_f64(const V* q, int64_t m, double mean) {
  double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= m; i += 8)
    for (int j = 0; j < 8; ++j) {
      const double d = static_cast<double>(q[i + j]) - mean;
      acc[j] += d * d;
    }
  for (int j = 0; i < m; ++i, ++j) {
    const double d = static_cast<double>(q[i]) - mean;
    acc[j] += d * d;
  }
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

template <class T>
void var_typed(const Tensor& var, const Tensor& mean, const Tensor& in, double correction, bool take_sqrt) {
  using V = load_t<T>;
  const Rows rows(in);
  const T* base = static_cast<const T*>(in.data_ptr());
  T* var_out = static_cast<T*>(var.data_ptr());
  T* mean_out = mean.defined() ? static_cast<T*>(mean.data_ptr()) : nullptr;
  if (rows.columns) {  // two passes down each tile of columns, float64 accumulators
    const double n = static_cast<double>(rows.R);
    for_each_column_tile(rows, base, [&](const T* p, int64_t o0, int64_t w) {
      double sum[kColTile], m2[kColTile];
      V x[kColTile];
      for (int64_t i = 0; i < w; ++i) sum[i] = m2[i] = 0;
      for (int64_t r = 0; r < rows.R; ++r) {
        load_row(p + r * rows.st, w, x);
        for (int64_t i = 0; i < w; ++i) sum[i] += static_cast<double>(x[i]);
      }
      for (int64_t i = 0; i < w; ++i) sum[i] /= n;  // now the mean
      for (int64_t r = 0; r < rows.R; ++r) {
        load_row(p + r * rows.st, w, x);
        for (int64_t i = 0; i < w; ++i) {
          const double d = static_cast<double>(x[i]) - sum[i];
          m2[i] += d * d;
        }
      }
      for (int64_t i = 0; i < w; ++i) {
        const double v = m2[i] / std::max(0.0, n - correction);
        var_out[o0 + i] = convert<T>(take_sqrt ? std::sqrt(v) : v);
        if (mean_out) mean_out[o0 + i] = convert<T>(sum[i]);
      }
    });
    return;
  }
  auto chunk = [&](int64_t o, int64_t r0, int64_t r1) {
    const T* p = base + rows.kept.offset(o) + r0 * rows.st;
    const int64_t n = r1 - r0;
    double s = 0, m2 = 0;
    for_blocks(p, n, rows.st, [&](const V* q, int64_t m) { s += sum_f64(q, m); });
    const double mu = s / static_cast<double>(n);
    for_blocks(p, n, rows.st, [&](const V* q, int64_t m) { m2 += sqdev_f64(q, m, mu); });
    return Moments{static_cast<double>(n), mu, m2};
  };
  auto merge = [](Moments a, Moments b) {
    const double n = a.n + b.n, d = b.mean - a.mean;
    return Moments{n, a.mean + d * (b.n / n), a.m2 + b.m2 + d * d * (a.n * b.n / n)};
  };
  auto write = [&](int64_t o, Moments mo) {
    const double mu = mo.n == 0 ? std::numeric_limits<double>::quiet_NaN() : mo.mean;
    double v = mo.m2 / std::max(0.0, mo.n - correction);
    if (mo.n == 0) v = std::numeric_limits<double>::quiet_NaN();
    var_out[o] = convert<T>(take_sqrt ? std::sqrt(v) : v);
    if (mean_out) mean_out[o] = convert<T>(mu);
  };
  run_rows(rows, Moments{}, chunk, merge, write);
}

void var_cpu(const Tensor& var, const Tensor& mean, const Tensor& in, double correction, bool take_sqrt) {
  dispatch_floating(in.dtype(), "var", [&]<class T>(TypeTag<T>) { var_typed<T>(var, mean, in, correction, take_sqrt); });
}

// exp in float64 that the compiler can vectorize (std::exp is a library call per element):
// x = k ln2 + r with |r| <= ln2/2, exp(r) by its Taylor series to degree 13 (relative error below
// 1e-15), times 2^k built in the exponent bits. Underflow gives 0, overflow inf, NaN stays NaN.
inline double exp_f64(double x) {
  constexpr double kLog2e = 1.4426950408889634, kLn2Hi = 0.6931471803691238, kLn2Lo = 1.9082149292705877e-10;
  constexpr double kShift = 6755399441055744.0;  // 1.5 * 2^52: adding it rounds to an integer in the low bits
  const double xc = std::min(std::max(x, -746.0), 710.0);
  const double kd = xc * kLog2e + kShift;
  const double k = kd - kShift;
  const double r = (xc - k * kLn2Hi) - k * kLn2Lo;
  double p = 1.0 / 6227020800.0;  // 1/13!
  p = p * r + 1.0 / 479001600.0;
  p = p * r + 1.0 / 39916800.0;
  p = p * r + 1.0 / 3628800.0;
  p = p * r + 1.0 / 362880.0;
  p = p * r + 1.0 / 40320.0;
  p = p * r + 1.0 / 5040.0;
  p = p * r + 1.0 / 720.0;
  p = p * r + 1.0 / 120.0;
  p = p * r + 1.0 / 24.0;
  p = p * r + 1.0 / 6.0;
  p = p * r + 0.5;
  p = p * r + 1.0;
  p = p * r + 1.0;
  // 2^k in two halves so that k down to -1075 stays representable (subnormal results).
  const int64_t ki = std::bit_cast<int64_t>(kd) - std::bit_cast<int64_t>(kShift);
  const int64_t k1 = ki / 2, k2 = ki - k1;
  const double s1 = std::bit_cast<double>((k1 + 1023) << 52), s2 = std::bit_cast<double>((k2 + 1023) << 52);
  double res = p * s1 * s2;
  res = x > 709.78 ? std::numeric_limits<double>::infinity() : res;
  res = x < -745.2 ? 0.0 : res;
  return x != x ? x : res;
}

// ---- logsumexp ---------------------------------------------------------------------------------------
template <class T>
void logsumexp_typed(const Tensor& out, const Tensor& in) {
  using V = load_t<T>;
  const Rows rows(in);
  const T* base = static_cast<const T*>(in.data_ptr());
  T* dst = static_cast<T*>(out.data_ptr());
  const int64_t O = rows.kept.numel;
  if (O == 0) return;
  if (rows.R == 0) {
    for (int64_t o = 0; o < O; ++o) dst[o] = convert<T>(-std::numeric_limits<double>::infinity());
    return;
  }
  if (rows.columns) {
    for_each_column_tile(rows, base, [&](const T* p, int64_t o0, int64_t w) {
      double sh[kColTile], sum[kColTile];
      V x[kColTile], mx[kColTile];
      for (int64_t i = 0; i < w; ++i) mx[i] = -std::numeric_limits<V>::infinity();
      for (int64_t r = 0; r < rows.R; ++r) {
        load_row(p + r * rows.st, w, x);
        for (int64_t i = 0; i < w; ++i) mx[i] = (x[i] > mx[i] || is_nan(x[i])) && !is_nan(mx[i]) ? x[i] : mx[i];
      }
      for (int64_t i = 0; i < w; ++i) {
        sh[i] = std::isinf(mx[i]) ? 0.0 : static_cast<double>(mx[i]);
        sum[i] = 0;
      }
      for (int64_t r = 0; r < rows.R; ++r) {
        load_row(p + r * rows.st, w, x);
        for (int64_t i = 0; i < w; ++i) sum[i] += exp_f64(static_cast<double>(x[i]) - sh[i]);
      }
      for (int64_t i = 0; i < w; ++i) dst[o0 + i] = convert<T>(std::log(sum[i]) + sh[i]);
    });
    return;
  }
  // Pass 1: the max of each row (NaN propagates).
  std::vector<double> shift(static_cast<size_t>(O));
  auto max_chunk = [&](int64_t o, int64_t r0, int64_t r1) {
    V m = -std::numeric_limits<V>::infinity();
    for_blocks(base + rows.kept.offset(o) + r0 * rows.st, r1 - r0, rows.st, [&](const V* q, int64_t n) {
      for (int64_t k = 0; k < n; ++k) m = (q[k] > m || is_nan(q[k])) ? q[k] : m;
    });
    return static_cast<double>(m);
  };
  auto max_merge = [](double a, double b) { return (b > a || std::isnan(b)) ? b : a; };
  run_rows(rows, 0.0, max_chunk, max_merge, [&](int64_t o, double m) { shift[o] = std::isinf(m) ? 0.0 : m; });
  // Pass 2: sum of exp(x - shift) in float64.
  auto sum_chunk = [&](int64_t o, int64_t r0, int64_t r1) {
    const double sh = shift[o];
    double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};  // lanes, so that the loop vectorizes
    for_blocks(base + rows.kept.offset(o) + r0 * rows.st, r1 - r0, rows.st, [&](const V* q, int64_t n) {
      int64_t k = 0;
      for (; k + 8 <= n; k += 8)
        for (int j = 0; j < 8; ++j) acc[j] += exp_f64(static_cast<double>(q[k + j]) - sh);
      for (int j = 0; k < n; ++k, ++j) acc[j] += exp_f64(static_cast<double>(q[k]) - sh);
    });
    return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
  };
  run_rows(rows, 0.0, sum_chunk, [](double a, double b) { return a + b; },
           [&](int64_t o, double s) { dst[o] = convert<T>(std::log(s) + shift[o]); });
}

void logsumexp_cpu(const Tensor& out, const Tensor& in) {
  dispatch_floating(in.dtype(), "logsumexp", [&]<class T>(TypeTag<T>) { logsumexp_typed<T>(out, in); });
}

}  // namespace

void register_reduce_rows() {
  arg_reduce_kernel.set(DeviceType::CPU, &arg_reduce_cpu);
  var_kernel.set(DeviceType::CPU, &var_cpu);
  logsumexp_kernel.set(DeviceType::CPU, &logsumexp_cpu);
}

}  // namespace tessera::cpu::TS_CPU_ISA
