// Helpers shared by the CPU indexing kernels (index.cpp, advanced_index.cpp): row-major strided walks,
// deterministic per-thread chunking, and the record of an out-of-range index found inside a parallel
// region (exceptions must not leave an OpenMP region, so kernels record and raise afterwards).
#pragma once
#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <limits>
#include <mutex>
#include <vector>

#include "tessera/error.h"
#include "tessera/shape.h"

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace tessera::cpu {

void register_advanced_index();  // advanced_index.cpp; called by register_index()

// Calls f(pos, off, idx) for the row-major positions pos in [begin, end) of `sizes`: off[t] is the
// element offset of that position under strides[t], idx its coordinates. A 0-dim `sizes` has one
// position (pos 0).
template <size_t N, class F>
void strided_walk(const Shape& sizes, const std::array<const Shape*, N>& strides, int64_t begin, int64_t end, F&& f) {
  if (begin >= end) return;
  const int nd = static_cast<int>(sizes.size());
  std::array<int64_t, N> off{};
  if (nd == 0) {
    f(begin, off.data(), static_cast<const int64_t*>(nullptr));
    return;
  }
  std::vector<int64_t> idx(nd);
  int64_t rest = begin;
  for (int d = nd - 1; d >= 0; --d) {
    idx[d] = rest % sizes[d];
    rest /= sizes[d];
    for (size_t t = 0; t < N; ++t) off[t] += idx[d] * (*strides[t])[d];
  }
  std::array<int64_t, N> inner;
  for (size_t t = 0; t < N; ++t) inner[t] = (*strides[t])[nd - 1];
  const int64_t inner_size = sizes[nd - 1];
  int64_t pos = begin;
  while (true) {
    int64_t& i = idx[nd - 1];
    for (; i < inner_size && pos < end; ++i, ++pos) {
      f(pos, off.data(), idx.data());
      for (size_t t = 0; t < N; ++t) off[t] += inner[t];
    }
    if (pos >= end) break;
    for (size_t t = 0; t < N; ++t) off[t] -= inner_size * inner[t];
    i = 0;
    for (int d = nd - 2; d >= 0; --d) {  // carry into the outer dims
      for (size_t t = 0; t < N; ++t) off[t] += (*strides[t])[d];
      if (++idx[d] < sizes[d]) break;
      for (size_t t = 0; t < N; ++t) off[t] -= sizes[d] * (*strides[t])[d];
      idx[d] = 0;
    }
  }
}

// Element offsets of every row-major position of (sizes, strides).
inline std::vector<int64_t> layout_offsets(const Shape& sizes, const Shape& strides) {
  std::vector<int64_t> out(static_cast<size_t>(numel_of(sizes)));
  strided_walk<1>(sizes, {&strides}, 0, static_cast<int64_t>(out.size()),
                  [&](int64_t pos, const int64_t* off, const int64_t*) { out[pos] = off[0]; });
  return out;
}

// How many chunks `n` positions split into: one per thread when there is enough work, else one.
// The same n and grain give the same chunks in every pass of a multi-pass kernel.
inline int num_chunks(int64_t n, int64_t grain) {
#if defined(_OPENMP)
  if (n >= 2 * grain) return static_cast<int>(std::min<int64_t>(omp_get_max_threads(), n / grain));
#endif
  (void)n;
  (void)grain;
  return 1;
}
inline int64_t chunk_begin(int64_t n, int chunks, int c) { return n * c / chunks; }

// Runs f(begin, end, chunk) for each chunk of [0, n), in parallel.
template <class F>
void parallel_chunks(int64_t n, int chunks, F&& f) {
  if (chunks <= 1) {
    if (n > 0) f(int64_t{0}, n, 0);
    return;
  }
#pragma omp parallel for schedule(static, 1)
  for (int c = 0; c < chunks; ++c) f(chunk_begin(n, chunks, c), chunk_begin(n, chunks, c + 1), c);
}

// The out-of-range index with the smallest position found by any thread.
class BadIndex {
 public:
  void record(int64_t pos, int64_t value, int64_t dim, int64_t size) {
    std::lock_guard<std::mutex> lock(mu_);
    if (pos < pos_) {
      pos_ = pos;
      value_ = value;
      dim_ = dim;
      size_ = size;
    }
    found_.store(true, std::memory_order_relaxed);
  }
  // Cheap check for loops that need only one bad index (read outside the lock).
  bool found() const { return found_.load(std::memory_order_relaxed); }
  int64_t value() const { return value_; }
  // Raises IndexError naming the op, the bad value and the dim's size, PyTorch's wording.
  void raise_if_found(const char* op) const {
    if (found())
      TS_THROW(IndexError, op, ": index ", value_, " is out of bounds for dimension ", dim_, " with size ", size_);
  }

 private:
  std::mutex mu_;
  std::atomic<bool> found_{false};
  int64_t pos_ = std::numeric_limits<int64_t>::max();
  int64_t value_ = 0, dim_ = 0, size_ = 0;
};

}  // namespace tessera::cpu
