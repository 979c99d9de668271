// CPU kernels of the random family. Each thread computes its elements straight from their Philox
// counters (Note [Philox stream]), so the output depends on (seed, offset) only: never on the thread
// count or on how the range is split. Element i is the i-th element in row-major order of the
// output's logical shape; non-contiguous outputs are walked with a strided cursor in that order.
// Data-dependent argument checks (bernoulli's p, multinomial's rows) run before any parallel region.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <utility>
#include <vector>

#include "kernels/cpu/convert.h"
#include "kernels/cpu/cpu_kernels.h"
#include "ops/random_kernel.h"
#include "runtime/philox.h"
#include "tensor/dispatch_dtype.h"

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace tessera::cpu::inline TS_CPU_ISA {  // Note [ISA namespaces]
namespace {

constexpr double kTwoPi = 6.283185307179586476925286766559;
constexpr int64_t kSerialBlocks = 4096;  // below this many Philox blocks a single thread is faster

// Walks a tensor's elements in logical row-major order, from any starting index, keeping the
// element offset (in elements) of the current one.
class StridedCursor {
 public:
  StridedCursor(const Tensor& t, int64_t start) : sizes_(t.sizes()), strides_(t.strides()), idx_(sizes_.size(), 0) {
    for (size_t d = sizes_.size(); d-- > 0;) {
      idx_[d] = start % sizes_[d];
      start /= sizes_[d];
      off_ += idx_[d] * strides_[d];
    }
  }
  int64_t offset() const { return off_; }
  void next() {
    for (size_t d = sizes_.size(); d-- > 0;) {
      off_ += strides_[d];
      if (++idx_[d] < sizes_[d]) return;
      off_ -= sizes_[d] * strides_[d];
      idx_[d] = 0;
    }
  }

 private:
  const Shape& sizes_;
  const Shape& strides_;
  std::vector<int64_t> idx_;
  int64_t off_ = 0;
};

// Runs body(b0, b1) over [0, nblocks) split into one contiguous range per thread.
template <class Body>
void parallel_blocks(int64_t nblocks, Body&& body) {
#if defined(_OPENMP)
  if (nblocks >= kSerialBlocks && omp_get_max_threads() > 1) {
#pragma omp parallel
    {
      const int64_t nt = omp_get_num_threads(), tid = omp_get_thread_num();
      const int64_t per = (nblocks + nt - 1) / nt;
      const int64_t b0 = tid * per, b1 = std::min(nblocks, b0 + per);
      if (b0 < b1) body(b0, b1);
    }
    return;
  }
#endif
  body(int64_t{0}, nblocks);
}

// out[i] = f(i, words of element i) for every element, W words per element (Note [Philox stream]).
template <class T, int W, class F>
void generate(const Tensor& out, PhiloxParams p, F f) {
  static_assert(W == 1 || W == 2 || W == 4);
  constexpr int64_t E = 4 / W;
  const int64_t n = out.numel();
  if (n == 0) return;
  const int64_t nblocks = (n + E - 1) / E;
  T* base = static_cast<T*>(out.data_ptr());
  if (out.is_contiguous()) {
    parallel_blocks(nblocks, [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) {
        const PhiloxBlock blk = philox4x32_10(p.seed, p.offset + static_cast<uint64_t>(b));
        const int64_t i0 = b * E;
        if (i0 + E <= n) {
          for (int e = 0; e < E; ++e) base[i0 + e] = f(i0 + e, &blk.x[e * W]);
        } else {
          for (int e = 0; i0 + e < n; ++e) base[i0 + e] = f(i0 + e, &blk.x[e * W]);
        }
      }
    });
  } else {
    parallel_blocks(nblocks, [&](int64_t b0, int64_t b1) {
      const int64_t end = std::min(n, b1 * E);
      StridedCursor cur(out, b0 * E);
      for (int64_t b = b0; b < b1; ++b) {
        const PhiloxBlock blk = philox4x32_10(p.seed, p.offset + static_cast<uint64_t>(b));
        for (int e = 0; e < E && b * E + e < end; ++e) {
          base[cur.offset()] = f(b * E + e, &blk.x[e * W]);
          cur.next();
        }
      }
    });
  }
}

// The next value of T toward -inf (T floating).
template <class T>
T next_down(T v) {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    return std::nextafter(v, -std::numeric_limits<T>::infinity());
  } else {
    uint16_t b = v.x;
    if ((b & 0x7fffu) == 0) return T(static_cast<uint16_t>(0x8001u), FromBits{});  // +-0 -> -min subnormal
    b = (b & 0x8000u) ? static_cast<uint16_t>(b + 1) : static_cast<uint16_t>(b - 1);
    return T(b, FromBits{});
  }
}

// The largest value of T strictly below `to`, but not below `from` rounded to T.
template <class T>
T largest_below(double from, double to) {
  T hi = static_cast<T>(static_cast<acc_t<T>>(to));
  while (static_cast<double>(static_cast<acc_t<T>>(hi)) >= to) hi = next_down(hi);
  T lo = static_cast<T>(static_cast<acc_t<T>>(from));
  return static_cast<double>(static_cast<acc_t<T>>(hi)) < static_cast<double>(static_cast<acc_t<T>>(lo)) ? lo : hi;
}

void uniform_cpu(const Tensor& out, double from, double to, PhiloxParams p) {
  dispatch_floating(out.dtype(), "uniform_", [&]<class T>(TypeTag<T>) {
    const double range = to - from;
    const T hi = from < to ? largest_below<T>(from, to) : static_cast<T>(static_cast<acc_t<T>>(from));
    // One rounding from float64: the bits do not depend on fused multiply-adds in float32. The fmas are
    // explicit (Note [Random rounding] in kernels/cuda/random_transforms.cuh): every build type, and
    // the CUDA kernels, round `from + range * u` once.
    auto finish = [=](double v) -> T {
      T r = static_cast<T>(static_cast<acc_t<T>>(v));
      return static_cast<double>(static_cast<acc_t<T>>(r)) >= to ? hi : r;
    };
    if constexpr (std::is_same_v<T, double>) {
      generate<T, 2>(out, p, [=](int64_t, const uint32_t* w) { return finish(std::fma(range, uint2_to_unit_double(w[0], w[1]), from)); });
    } else {
      generate<T, 1>(out, p, [=](int64_t, const uint32_t* w) {
        return finish(std::fma(range, static_cast<double>(uint_to_unit_float(w[0])), from));
      });
    }
  });
}

void normal_cpu(const Tensor& out, double mean, double std, PhiloxParams p) {
  dispatch_floating(out.dtype(), "normal_", [&]<class T>(TypeTag<T>) {
    if constexpr (std::is_same_v<T, double>) {
      generate<T, 4>(out, p, [=](int64_t, const uint32_t* w) {
        const double u1 = uint2_to_unit_double(w[0], w[1]), u2 = uint2_to_unit_double(w[2], w[3]);
        return std::fma(std, std::sqrt(-2.0 * std::log1p(-u1)) * std::cos(kTwoPi * u2), mean);
      });
    } else {
      const float m = static_cast<float>(mean), s = static_cast<float>(std);
      generate<T, 2>(out, p, [=](int64_t, const uint32_t* w) {
        const float u1 = uint_to_unit_float(w[0]), u2 = uint_to_unit_float(w[1]);
        const float z = std::sqrt(-2.0f * std::log1p(-u1)) * std::cos(static_cast<float>(kTwoPi) * u2);
        return static_cast<T>(std::fmaf(s, z, m));
      });
    }
  });
}

void bernoulli_scalar_cpu(const Tensor& out, double prob, PhiloxParams p) {
  dispatch_dtype(out.dtype(), "bernoulli_", [&]<class T>(TypeTag<T>) {
    const T one = convert<T>(1), zero = convert<T>(0);
    generate<T, kBernoulliWords>(out, p, [=](int64_t, const uint32_t* w) {
      return static_cast<double>(w[0]) * 0x1p-32 < prob ? one : zero;
    });
  });
}

void bernoulli_tensor_cpu(const Tensor& out, const Tensor& probs, PhiloxParams p) {
  dispatch_floating(probs.dtype(), "bernoulli", [&]<class P>(TypeTag<P>) {
    const P* pp = static_cast<const P*>(probs.data_ptr());
    const int64_t n = probs.numel();
    for (int64_t i = 0; i < n; ++i) {
      const double v = static_cast<double>(static_cast<acc_t<P>>(pp[i]));
      TS_CHECK(v >= 0.0 && v <= 1.0, ValueError, "bernoulli: expected all probabilities p to be in [0, 1], but p[",
               i, "] = ", v);
    }
    dispatch_dtype(out.dtype(), "bernoulli", [&]<class T>(TypeTag<T>) {
      const T one = convert<T>(1), zero = convert<T>(0);
      generate<T, kBernoulliWords>(out, p, [=](int64_t i, const uint32_t* w) {
        return static_cast<double>(w[0]) * 0x1p-32 < static_cast<double>(static_cast<acc_t<P>>(pp[i])) ? one : zero;
      });
    });
  });
}

void random_int_cpu(const Tensor& out, int64_t from, uint64_t range, PhiloxParams p) {
  dispatch_dtype(out.dtype(), "random_", [&]<class T>(TypeTag<T>) {
    // Two's-complement wrap-around: from + offset lands in [from, to) for every int64 range.
    auto value = [=](uint64_t off) {
      return convert<T>(static_cast<int64_t>(static_cast<uint64_t>(from) + off));
    };
    if (random_int_words(range) == 1) {
      generate<T, 1>(out, p, [=](int64_t, const uint32_t* w) { return value(w[0] % range); });
    } else {
      generate<T, 2>(out, p, [=](int64_t, const uint32_t* w) {
        const uint64_t bits = uint2_to_u64(w[0], w[1]);
        return value(range == 0 ? bits : bits % range);
      });
    }
  });
}

void randperm_cpu(const Tensor& out, PhiloxParams p) {
  const int64_t n = out.numel();
  if (n == 0) return;
  std::vector<std::pair<uint64_t, int64_t>> keys(static_cast<size_t>(n));
  const int64_t nblocks = (n + 1) / 2;
  parallel_blocks(nblocks, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const PhiloxBlock blk = philox4x32_10(p.seed, p.offset + static_cast<uint64_t>(b));
      for (int e = 0; e < 2 && 2 * b + e < n; ++e) keys[2 * b + e] = {uint2_to_u64(blk.x[2 * e], blk.x[2 * e + 1]), 2 * b + e};
    }
  });
  std::sort(keys.begin(), keys.end());
  dispatch_dtype<DTypeSet::AllNoBool>(out.dtype(), "randperm", [&]<class T>(TypeTag<T>) {
    T* o = static_cast<T*>(out.data_ptr());
    const int64_t s = out.dim() ? out.stride(0) : 1;
    for (int64_t j = 0; j < n; ++j) o[j * s] = convert<T>(keys[j].second);
  });
}

// Data-dependent checks of one row of multinomial's probabilities; returns the row's sum.
double check_multinomial_row(const double* row, int64_t k, int64_t r, int64_t num_samples, bool replacement) {
  double sum = 0;
  int64_t nonzero = 0;
  for (int64_t c = 0; c < k; ++c) {
    TS_CHECK(std::isfinite(row[c]) && row[c] >= 0, ValueError,
             "multinomial: probability tensor contains either inf, nan or element < 0 (row ", r, ", category ", c,
             " is ", row[c], ")");
    sum += row[c];
    nonzero += row[c] > 0;
  }
  TS_CHECK(sum > 0, ValueError, "multinomial: invalid multinomial distribution (sum of probabilities <= 0) in row ", r);
  TS_CHECK(replacement || nonzero >= num_samples, ValueError,
           "multinomial: invalid multinomial distribution (with replacement=False, not enough non-negative "
           "category to sample): row ", r, " has ", nonzero, " nonzero categories but ", num_samples,
           " samples were requested");
  return sum;
}

void multinomial_cpu(const Tensor& out, const Tensor& probs, bool replacement, PhiloxParams p) {
  const int64_t rows = probs.size(0), k = probs.size(1), s = out.size(1);
  const double* pr = probs.data_ptr<double>();
  int64_t* o = out.data_ptr<int64_t>();
  std::vector<double> sums(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) sums[r] = check_multinomial_row(pr + r * k, k, r, s, replacement);
  auto uniform_at = [&](int64_t i) {  // element i's 53-bit uniform (two words)
    const PhiloxBlock blk = philox4x32_10(p.seed, p.offset + static_cast<uint64_t>(i / 2));
    const int e = static_cast<int>(i % 2);
    return uint2_to_unit_double(blk.x[2 * e], blk.x[2 * e + 1]);
  };
#pragma omp parallel for schedule(static) if (rows * std::max(k, s) > 16384)
  for (int64_t r = 0; r < rows; ++r) {
    const double* row = pr + r * k;
    if (replacement) {
      std::vector<double> cdf(static_cast<size_t>(k));
      std::partial_sum(row, row + k, cdf.begin());
      for (int64_t j = 0; j < s; ++j) {
        const double x = uniform_at(r * s + j) * sums[r];
        int64_t c = std::upper_bound(cdf.begin(), cdf.end(), x) - cdf.begin();
        // Rounding in the cumulative sum can leave x >= cdf.back(): take the last nonzero category.
        if (c >= k) {
          c = k - 1;
          while (c > 0 && row[c] == 0) --c;
        }
        o[r * s + j] = c;
      }
    } else {
      std::vector<std::pair<double, int64_t>> keys(static_cast<size_t>(k));
      for (int64_t c = 0; c < k; ++c) {
        const double e = -std::log1p(-uniform_at(r * k + c));  // exponential(1); 0 gives key inf
        keys[c] = {row[c] > 0 ? row[c] / e : -1.0, c};
      }
      auto by_key = [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); };
      std::partial_sort(keys.begin(), keys.begin() + s, keys.end(), by_key);
      for (int64_t j = 0; j < s; ++j) o[r * s + j] = keys[j].second;
    }
  }
}

}  // namespace

void register_random() {
  uniform_kernel.set(DeviceType::CPU, &uniform_cpu);
  normal_kernel.set(DeviceType::CPU, &normal_cpu);
  bernoulli_scalar_kernel.set(DeviceType::CPU, &bernoulli_scalar_cpu);
  bernoulli_tensor_kernel.set(DeviceType::CPU, &bernoulli_tensor_cpu);
  random_int_kernel.set(DeviceType::CPU, &random_int_cpu);
  randperm_kernel.set(DeviceType::CPU, &randperm_cpu);
  multinomial_kernel.set(DeviceType::CPU, &multinomial_cpu);
}

}  // namespace tessera::cpu::TS_CPU_ISA
