// CPU kernels of the indexing family other than advanced indexing (advanced_index.cpp): gather,
// scatter / scatter_add, masked_fill, count_nonzero / nonzero / masked_select, one_hot.
//
// Index values are checked here (the meta function cannot see them). Kernels that find a bad value
// inside a parallel region record it and raise IndexError after the region; what they wrote until
// then is in a tensor the op allocated, which is dropped with the exception.
// nonzero and masked_select run in two passes over the same per-thread chunks (count, then write at
// the prefix sum of the counts), so their output is in row-major order whatever the thread count.
#include <algorithm>
#include <numeric>

#include "kernels/cpu/convert.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/index_common.h"
#include "ops/index_kernel.h"
#include "tensor/elementwise_iter.h"

namespace tessera::cpu {
namespace {

constexpr int64_t kGrain = 32768;

template <class T>
inline bool nonzero_value(T v) {
  return convert<bool>(v);
}

void gather_cpu(const Tensor& out, const Tensor& self_r, const Tensor& index, const ScatterGatherDim& sd) {
  if (out.numel() == 0) return;
  ElementwiseIter it(out, {&self_r, &index});
  BadIndex bad;
  dispatch_dtype(out.dtype(), "gather", [&]<class T>(TypeTag<T>) {
    const int64_t stride = sd.self_stride * static_cast<int64_t>(sizeof(T)), size = sd.self_size;
    it.for_each([&](char* const* p, const int64_t* st, int64_t n) {
      for (int64_t i = 0; i < n; ++i) {
        const int64_t v = *reinterpret_cast<const int64_t*>(p[2] + i * st[2]);
        if (v < 0 || v >= size) [[unlikely]] {
          if (!bad.found()) bad.record(0, v, sd.dim, size);
          continue;
        }
        *reinterpret_cast<T*>(p[0] + i * st[0]) = *reinterpret_cast<const T*>(p[1] + i * st[1] + v * stride);
      }
    });
  });
  bad.raise_if_found("gather");
}

void scatter_cpu(const Tensor& self_r, const Tensor& index_r, const Tensor& src_r, const ScatterGatherDim& sd,
                 ScatterReduce reduce) {
  if (self_r.numel() == 0 || sd.index_size == 0) return;
  const char* op = reduce == ScatterReduce::Add ? "scatter_add" : "scatter";
  ElementwiseIter it(self_r, {&index_r, &src_r});
  BadIndex bad;
  const int64_t J = sd.index_size, size = sd.self_size;
  dispatch_dtype(self_r.dtype(), op, [&]<class T>(TypeTag<T>) {
    using A = acc_t<T>;
    const int64_t es = static_cast<int64_t>(sizeof(T));
    const int64_t ss = sd.self_stride * es, is = sd.index_stride * 8, rs = sd.src_stride * es;
    auto run = [&]<bool kAdd>(std::integral_constant<bool, kAdd>) {
      // Each iterated position owns one line of self along dim; the line is walked here, serially.
      it.for_each(
          [&](char* const* p, const int64_t* st, int64_t n) {
            for (int64_t i = 0; i < n; ++i) {
              char* s = p[0] + i * st[0];
              const char* ix = p[1] + i * st[1];
              const char* sr = p[2] + i * st[2];
              for (int64_t j = 0; j < J; ++j) {
                const int64_t v = *reinterpret_cast<const int64_t*>(ix + j * is);
                if (v < 0 || v >= size) [[unlikely]] {
                  if (!bad.found()) bad.record(0, v, sd.dim, size);
                  continue;
                }
                T* d = reinterpret_cast<T*>(s + v * ss);
                const T x = *reinterpret_cast<const T*>(sr + j * rs);
                if constexpr (kAdd) *d = convert<T>(static_cast<A>(*d) + static_cast<A>(x));
                else *d = x;
              }
            }
          },
          std::max<int64_t>(1, kGrain / J));
    };
    if (reduce == ScatterReduce::Add) run(std::true_type{});
    else run(std::false_type{});
  });
  bad.raise_if_found(op);
}

void masked_fill_cpu(const Tensor& out, const Tensor& self, const Tensor& mask, const Scalar& value) {
  if (out.numel() == 0) return;
  ElementwiseIter it(out, {&self, &mask});
  dispatch_dtype(out.dtype(), "masked_fill", [&]<class T>(TypeTag<T>) {
    const T v = value.is_floating_point() ? convert<T>(value.to_double())
                : value.is_bool()         ? convert<T>(value.to_bool())
                                          : convert<T>(value.to_int());
    const int64_t es = static_cast<int64_t>(sizeof(T));
    it.for_each([&](char* const* p, const int64_t* st, int64_t n) {
      if (st[0] == es && st[1] == es && st[2] == 1) {
        T* o = reinterpret_cast<T*>(p[0]);
        const T* s = reinterpret_cast<const T*>(p[1]);
        const bool* m = reinterpret_cast<const bool*>(p[2]);
        for (int64_t i = 0; i < n; ++i) o[i] = m[i] ? v : s[i];
      } else {
        for (int64_t i = 0; i < n; ++i)
          *reinterpret_cast<T*>(p[0] + i * st[0]) =
              *reinterpret_cast<const bool*>(p[2] + i * st[2]) ? v : *reinterpret_cast<const T*>(p[1] + i * st[1]);
      }
    });
  });
}

// Nonzero count of each chunk of x's row-major positions.
std::vector<int64_t> chunk_counts(const Tensor& x, int chunks) {
  const int64_t n = x.numel();
  std::vector<int64_t> counts(static_cast<size_t>(chunks), 0);
  dispatch_dtype(x.dtype(), "nonzero", [&]<class T>(TypeTag<T>) {
    const T* base = static_cast<const T*>(x.data_ptr());
    const bool contig = x.is_contiguous();
    parallel_chunks(n, chunks, [&](int64_t b0, int64_t b1, int c) {
      int64_t k = 0;
      if (contig) {
        for (int64_t i = b0; i < b1; ++i) k += nonzero_value(base[i]);
      } else {
        strided_walk<1>(x.sizes(), {&x.strides()}, b0, b1,
                        [&](int64_t, const int64_t* off, const int64_t*) { k += nonzero_value(base[off[0]]); });
      }
      counts[c] = k;
    });
  });
  return counts;
}

// Exclusive prefix sum: where each chunk starts writing.
std::vector<int64_t> chunk_starts(const std::vector<int64_t>& counts) {
  std::vector<int64_t> starts(counts.size(), 0);
  std::exclusive_scan(counts.begin(), counts.end(), starts.begin(), int64_t{0});
  return starts;
}

void count_nonzero_cpu(const Tensor& x, int64_t* count) {
  *count = 0;
  if (x.numel() == 0) return;
  const std::vector<int64_t> counts = chunk_counts(x, num_chunks(x.numel(), kGrain));
  *count = std::accumulate(counts.begin(), counts.end(), int64_t{0});
}

void nonzero_cpu(const Tensor& out, const Tensor& x) {
  const int64_t n = x.numel(), nd = x.dim();
  if (out.size(0) == 0 || nd == 0) return;  // (count, 0) holds no values
  const int chunks = num_chunks(n, kGrain);
  const std::vector<int64_t> starts = chunk_starts(chunk_counts(x, chunks));
  int64_t* o = out.data_ptr<int64_t>();
  dispatch_dtype(x.dtype(), "nonzero", [&]<class T>(TypeTag<T>) {
    const T* base = static_cast<const T*>(x.data_ptr());
    parallel_chunks(n, chunks, [&](int64_t b0, int64_t b1, int c) {
      int64_t* row = o + starts[c] * nd;
      strided_walk<1>(x.sizes(), {&x.strides()}, b0, b1, [&](int64_t, const int64_t* off, const int64_t* idx) {
        if (!nonzero_value(base[off[0]])) return;
        for (int64_t d = 0; d < nd; ++d) row[d] = idx[d];
        row += nd;
      });
    });
  });
}

void masked_select_cpu(const Tensor& out, const Tensor& self, const Tensor& mask) {
  const int64_t n = self.numel();
  if (out.numel() == 0) return;
  const int chunks = num_chunks(n, kGrain);
  const std::vector<int64_t> starts = chunk_starts(chunk_counts(mask, chunks));
  dispatch_dtype(self.dtype(), "masked_select", [&]<class T>(TypeTag<T>) {
    const T* src = static_cast<const T*>(self.data_ptr());
    const bool* m = static_cast<const bool*>(mask.data_ptr());
    T* o = static_cast<T*>(out.data_ptr());
    parallel_chunks(n, chunks, [&](int64_t b0, int64_t b1, int c) {
      T* w = o + starts[c];
      strided_walk<2>(self.sizes(), {&self.strides(), &mask.strides()}, b0, b1,
                      [&](int64_t, const int64_t* off, const int64_t*) {
                        if (m[off[1]]) *w++ = src[off[0]];
                      });
    });
  });
}

void index_min_max_cpu(const Tensor& x, int64_t* lo, int64_t* hi) {
  const int64_t n = x.numel();
  const int chunks = num_chunks(n, kGrain);
  std::vector<int64_t> mins(chunks, INT64_MAX), maxs(chunks, INT64_MIN);
  const int64_t* base = x.data_ptr<int64_t>();
  parallel_chunks(n, chunks, [&](int64_t b0, int64_t b1, int c) {
    int64_t a = INT64_MAX, b = INT64_MIN;
    strided_walk<1>(x.sizes(), {&x.strides()}, b0, b1, [&](int64_t, const int64_t* off, const int64_t*) {
      a = std::min(a, base[off[0]]);
      b = std::max(b, base[off[0]]);
    });
    mins[c] = a;
    maxs[c] = b;
  });
  *lo = *std::min_element(mins.begin(), mins.end());
  *hi = *std::max_element(maxs.begin(), maxs.end());
}

void one_hot_cpu(const Tensor& out, const Tensor& indices, int64_t num_classes) {
  const int64_t n = indices.numel();
  if (out.numel() == 0 && n == 0) return;
  int64_t* o = out.data_ptr<int64_t>();
  const int64_t* base = indices.data_ptr<int64_t>();
  BadIndex bad;
  parallel_chunks(n, num_chunks(n * std::max<int64_t>(num_classes, 1), kGrain), [&](int64_t b0, int64_t b1, int) {
    strided_walk<1>(indices.sizes(), {&indices.strides()}, b0, b1, [&](int64_t pos, const int64_t* off, const int64_t*) {
      int64_t* row = o + pos * num_classes;
      std::fill(row, row + num_classes, int64_t{0});
      const int64_t v = base[off[0]];
      if (v < 0 || v >= num_classes) [[unlikely]] {
        bad.record(pos, v, 0, num_classes);
        return;
      }
      row[v] = 1;
    });
  });
  TS_CHECK(!bad.found(), IndexError, "one_hot: class values must be non-negative and smaller than num_classes (",
           num_classes, "), got ", bad.value());
}

}  // namespace

void register_index() {
  gather_kernel.set(DeviceType::CPU, &gather_cpu);
  scatter_kernel.set(DeviceType::CPU, &scatter_cpu);
  masked_fill_kernel.set(DeviceType::CPU, &masked_fill_cpu);
  count_nonzero_kernel.set(DeviceType::CPU, &count_nonzero_cpu);
  nonzero_kernel.set(DeviceType::CPU, &nonzero_cpu);
  masked_select_kernel.set(DeviceType::CPU, &masked_select_cpu);
  index_min_max_kernel.set(DeviceType::CPU, &index_min_max_cpu);
  one_hot_kernel.set(DeviceType::CPU, &one_hot_cpu);
  register_advanced_index();
}

}  // namespace tessera::cpu
