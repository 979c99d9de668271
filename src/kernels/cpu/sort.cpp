// CPU sort, topk and unique. Each row (every index of the other dims) is sorted on its own; rows run
// in parallel over OpenMP, and a single long row (a 1-D sort, a flattened unique) uses libstdc++'s
// parallel stable sort instead.
//
// Note [Sort order] (ops/sort_ops.cpp) is implemented by loading a row as (key, index) pairs with the
// NaNs moved behind every number in index order: the numbers are then sorted with a plain comparison
// (stable, or index-tie-broken for topk's selection) and the NaNs placed last ascending / first
// descending. Keys of 16-bit floats are float; the values written back are the input's own elements.
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <parallel/algorithm>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "ops/shape_ops_kernel.h"
#include "tensor/dispatch_dtype.h"
#include "tensor/tensor_impl.h"

namespace tessera::cpu {
namespace {

constexpr int64_t kGrain = 32768;        // elements below which a kernel runs on one thread
constexpr int64_t kParallelSort = 1 << 16;  // row length from which one row is sorted by many threads

template <class T> using key_t = acc_t<T>;
template <class K> using Buf = std::vector<std::pair<K, int64_t>>;

template <class K>
inline bool is_nan(K v) {
  if constexpr (std::is_floating_point_v<K>) return v != v;
  else return false;
}

// NaN-largest strict weak order, for comparing rows element by element in unique.
template <class K>
inline bool nan_last_less(K a, K b) {
  if constexpr (std::is_floating_point_v<K>) return a < b || (b != b && a == a);
  else return a < b;
}

// Element offset of row r: r enumerates every index of the dims other than `dim`, row-major.
int64_t row_offset(const Shape& sizes, const Shape& strides, int64_t dim, int64_t r) {
  int64_t off = 0;
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    if (d == dim) continue;
    off += (r % sizes[d]) * strides[d];
    r /= sizes[d];
  }
  return off;
}

// Loads n elements (stride `st`) as (key, index) into buf, numbers first, NaNs after them in index
// order. Returns how many numbers there are.
template <class T>
int64_t load_row(const T* s, int64_t st, int64_t n, Buf<key_t<T>>& buf) {
  using K = key_t<T>;
  buf.resize(n);
  int64_t m = 0;
  for (int64_t i = 0; i < n; ++i) {
    K v = static_cast<K>(s[i * st]);
    if (!is_nan(v)) buf[m++] = {v, i};
  }
  if constexpr (std::is_floating_point_v<K>) {
    if (m == n) return m;
    for (int64_t i = 0, j = m; i < n; ++i) {
      K v = static_cast<K>(s[i * st]);
      if (is_nan(v)) buf[j++] = {v, i};
    }
  }
  return m;
}

template <class It, class Cmp>
void stable_sort_range(It first, It last, Cmp cmp, bool parallel) {
  if (parallel && last - first >= kParallelSort) __gnu_parallel::stable_sort(first, last, cmp);
  else std::stable_sort(first, last, cmp);
}

// Sorts one row in place in buf (numbers stably, NaNs after them) and writes values and indices
// in the requested direction.
template <class T>
void sort_row(const T* s, int64_t xs, T* v, int64_t vs, int64_t* ix, int64_t is, int64_t n, bool descending,
              Buf<key_t<T>>& buf, bool parallel) {
  using P = std::pair<key_t<T>, int64_t>;
  const int64_t m = load_row(s, xs, n, buf);
  if (descending) stable_sort_range(buf.begin(), buf.begin() + m, [](const P& a, const P& b) { return a.first > b.first; }, parallel);
  else stable_sort_range(buf.begin(), buf.begin() + m, [](const P& a, const P& b) { return a.first < b.first; }, parallel);
  auto put = [&](int64_t j, int64_t src) {
    const int64_t i = buf[src].second;
    v[j * vs] = s[i * xs];
    ix[j * is] = i;
  };
  if (descending) {  // NaNs first, then the numbers
    for (int64_t j = 0; j < n - m; ++j) put(j, m + j);
    for (int64_t j = 0; j < m; ++j) put(n - m + j, j);
  } else {
    for (int64_t j = 0; j < n; ++j) put(j, j);
  }
}

// Calls row(r, buf) for every row, rows spread over threads, each thread with its own buffer.
template <class K, class Row>
void for_each_row(int64_t rows, int64_t numel, Row&& row) {
#pragma omp parallel if (numel > kGrain && rows > 1)
  {
    Buf<K> buf;
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) row(r, buf);
  }
}

void sort_cpu(const Tensor& values, const Tensor& indices, const Tensor& x, int64_t dim, bool descending) {
  const int64_t n = x.sizes()[dim];
  const int64_t rows = x.numel() / n;
  dispatch_dtype(x.dtype(), "sort", [&]<class T>(TypeTag<T>) {
    const T* src = static_cast<const T*>(x.data_ptr());
    T* vdst = static_cast<T*>(values.data_ptr());
    int64_t* idst = static_cast<int64_t*>(indices.data_ptr());
    const int64_t xs = x.strides()[dim], vs = values.strides()[dim], is = indices.strides()[dim];
    for_each_row<key_t<T>>(rows, x.numel(), [&](int64_t r, Buf<key_t<T>>& buf) {
      sort_row(src + row_offset(x.sizes(), x.strides(), dim, r), xs,
               vdst + row_offset(values.sizes(), values.strides(), dim, r), vs,
               idst + row_offset(indices.sizes(), indices.strides(), dim, r), is, n, descending, buf, rows == 1);
    });
  });
}

void topk_cpu(const Tensor& values, const Tensor& indices, const Tensor& x, int64_t k, int64_t dim, bool largest) {
  const int64_t n = x.sizes()[dim];
  const int64_t rows = x.numel() / n;
  dispatch_dtype(x.dtype(), "topk", [&]<class T>(TypeTag<T>) {
    using K = key_t<T>;
    using P = std::pair<K, int64_t>;
    const T* src = static_cast<const T*>(x.data_ptr());
    T* vdst = static_cast<T*>(values.data_ptr());
    int64_t* idst = static_cast<int64_t*>(indices.data_ptr());
    const int64_t xs = x.strides()[dim], vs = values.strides()[dim], is = indices.strides()[dim];
    for_each_row<K>(rows, x.numel(), [&](int64_t r, Buf<K>& buf) {
      const T* s = src + row_offset(x.sizes(), x.strides(), dim, r);
      T* v = vdst + row_offset(values.sizes(), values.strides(), dim, r);
      int64_t* ix = idst + row_offset(indices.sizes(), indices.strides(), dim, r);
      const int64_t m = load_row(s, xs, n, buf);
      // Selection is not stable, so equal keys are ordered by index to make the result deterministic.
      // A heap of k wins for small k (most elements lose one comparison against its top);
      // otherwise partition then sort the k. The same cut-over as PyTorch's CPU topk.
      auto pick = [&](auto cmp, int64_t need) {
        auto first = buf.begin(), mid = first + need, last = first + m;
        if (need * 64 <= m) {
          std::partial_sort(first, mid, last, cmp);
        } else {
          if (need < m) std::nth_element(first, mid, last, cmp);
          std::sort(first, mid, cmp);
        }
      };
      auto put = [&](int64_t j, int64_t from) {
        const int64_t i = buf[from].second;
        v[j * vs] = s[i * xs];
        ix[j * is] = i;
      };
      if (largest) {  // NaNs are the largest: they come first
        const int64_t nans = std::min(k, n - m), need = k - nans;
        pick([](const P& a, const P& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); }, need);
        for (int64_t j = 0; j < nans; ++j) put(j, m + j);
        for (int64_t j = 0; j < need; ++j) put(nans + j, j);
      } else {
        const int64_t need = std::min(k, m);
        pick([](const P& a, const P& b) { return a.first < b.first || (a.first == b.first && a.second < b.second); }, need);
        for (int64_t j = 0; j < need; ++j) put(j, j);
        for (int64_t j = need; j < k; ++j) put(j, m + (j - need));
      }
    });
  });
}

void unique_cpu(const Tensor& rows, bool return_inverse, bool return_counts, Tensor& values, Tensor& inverse,
                Tensor& counts) {
  const int64_t n = rows.sizes()[0], m = rows.sizes()[1];
  dispatch_dtype(rows.dtype(), "unique", [&]<class T>(TypeTag<T>) {
    using K = key_t<T>;
    using P = std::pair<K, int64_t>;
    const T* p = static_cast<const T*>(rows.data_ptr());
    // order[j]: input row of the j-th row in sorted order; starts: sorted positions opening a group.
    std::vector<int64_t> order(n), starts;
    if (m == 1) {
      Buf<K> buf;
      const int64_t numbers = load_row(p, 1, n, buf);
      stable_sort_range(buf.begin(), buf.begin() + numbers, [](const P& a, const P& b) { return a.first < b.first; }, true);
      for (int64_t j = 0; j < n; ++j) {
        order[j] = buf[j].second;
        // NaNs never equal anything, so each opens its own group.
        if (j == 0 || j >= numbers || buf[j].first != buf[j - 1].first) starts.push_back(j);
      }
    } else {
      std::iota(order.begin(), order.end(), int64_t{0});
      auto row_less = [&](int64_t a, int64_t b) {
        const T* ra = p + a * m;
        const T* rb = p + b * m;
        for (int64_t t = 0; t < m; ++t) {
          K x = static_cast<K>(ra[t]), y = static_cast<K>(rb[t]);
          if (nan_last_less(x, y)) return true;
          if (nan_last_less(y, x)) return false;
        }
        return false;
      };
      stable_sort_range(order.begin(), order.end(), row_less, true);
      for (int64_t j = 0; j < n; ++j) {
        bool same = j > 0;
        for (int64_t t = 0; same && t < m; ++t)
          same = static_cast<K>(p[order[j] * m + t]) == static_cast<K>(p[order[j - 1] * m + t]);
        if (!same) starts.push_back(j);
      }
    }
    const int64_t u = static_cast<int64_t>(starts.size());
    values = make_empty({u, m}, rows.dtype(), rows.device());
    T* vals = static_cast<T*>(values.data_ptr());
    for (int64_t g = 0; g < u; ++g)
      if (m > 0) std::memcpy(vals + g * m, p + order[starts[g]] * m, m * sizeof(T));
    if (return_inverse) {
      inverse = make_empty({n}, kInt64, rows.device());
      int64_t* inv = static_cast<int64_t*>(inverse.data_ptr());
      for (int64_t g = 0; g < u; ++g) {
        const int64_t end = g + 1 < u ? starts[g + 1] : n;
        for (int64_t j = starts[g]; j < end; ++j) inv[order[j]] = g;
      }
    }
    if (return_counts) {
      counts = make_empty({u}, kInt64, rows.device());
      int64_t* c = static_cast<int64_t*>(counts.data_ptr());
      for (int64_t g = 0; g < u; ++g) c[g] = (g + 1 < u ? starts[g + 1] : n) - starts[g];
    }
  });
}

}  // namespace

void register_sort() {
  sort_kernel.set(DeviceType::CPU, &sort_cpu);
  topk_kernel.set(DeviceType::CPU, &topk_cpu);
  unique_kernel.set(DeviceType::CPU, &unique_cpu);
}

}  // namespace tessera::cpu
