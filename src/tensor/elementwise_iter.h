// ElementwiseIter: walks an output and up to three inputs of the output's shape (inputs broadcast to
// it), the way every elementwise kernel does. It works in bytes, so it knows nothing of dtypes.
//
// Note [Elementwise iteration]: dims are ordered innermost first by the output's strides and adjacent
// dims are merged wherever every operand allows, so a contiguous (or uniformly broadcast) problem
// becomes one long 1-D loop. The kernel's loop body receives (data pointers, inner byte strides, n)
// and checks `is_contiguous_inner` to take its vectorized fast path. The range [0, numel) is split
// into contiguous chunks per thread, so results never depend on the thread count.
#pragma once
#include <array>
#include <cstdint>
#include <initializer_list>

#include "tensor/tensor_impl.h"

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace tessera {

class ElementwiseIter {
 public:
  static constexpr int kMaxOperands = 4;
  static constexpr int kMaxDims = 25;

  // operands[0] is the output (its shape is the iteration shape); the others broadcast to it.
  ElementwiseIter(const Tensor& out, std::initializer_list<const Tensor*> inputs);

  int ntensors() const { return ntensors_; }
  int ndim() const { return ndim_; }
  int64_t numel() const { return numel_; }
  // Byte stride of operand `t` along the innermost iteration dim.
  int64_t inner_stride(int t) const { return ndim_ ? strides_[t][0] : 0; }
  // True if all operands advance by their element size along the inner dim (or are broadcast with 0).
  bool is_contiguous_inner(const int64_t* elem_sizes) const;
  bool is_1d() const { return ndim_ <= 1; }
  // The merged iteration space, innermost dim first (the CUDA iterator copies it into its Params).
  int64_t shape(int d) const { return shape_[d]; }
  int64_t byte_stride(int t, int d) const { return strides_[t][d]; }
  char* data(int t) const { return data_[t]; }

  // Calls loop(char* const* ptrs, const int64_t* inner_strides, int64_t n) over the whole range, in
  // parallel chunks of at least `grain` elements when OpenMP is on (kernel files build with it).
  template <class Loop>
  void for_each(Loop&& loop, int64_t grain = 32768) const {
    if (numel_ == 0) return;
    int64_t chunks = numel_ / grain;
#if defined(_OPENMP)
    if (chunks > 1) {
#pragma omp parallel
      {
        int nt = omp_get_num_threads(), tid = omp_get_thread_num();
        int64_t per = (numel_ + nt - 1) / nt;
        int64_t begin = tid * per, end = begin + per < numel_ ? begin + per : numel_;
        if (begin < end) run_range(begin, end, loop);
      }
      return;
    }
#endif
    (void)chunks;
    run_range(0, numel_, loop);
  }

  // Serial walk of elements [begin, end).
  template <class Loop>
  void run_range(int64_t begin, int64_t end, Loop& loop) const {
    std::array<char*, kMaxOperands> ptrs;
    std::array<int64_t, kMaxDims> idx;  // [0, ndim_) set below; idx[0] read even when ndim_ is 0
    idx[0] = 0;
    std::array<int64_t, kMaxOperands> inner{};
    int64_t rest = begin;
    for (int t = 0; t < ntensors_; ++t) {
      ptrs[t] = data_[t];
      inner[t] = ndim_ ? strides_[t][0] : 0;
    }
    for (int d = 0; d < ndim_; ++d) {
      idx[d] = rest % shape_[d];
      rest /= shape_[d];
      for (int t = 0; t < ntensors_; ++t) ptrs[t] += idx[d] * strides_[t][d];
    }
    const int64_t inner_size = ndim_ ? shape_[0] : 1;
    int64_t pos = begin;
    while (true) {
      int64_t n = inner_size - idx[0];
      if (n > end - pos) n = end - pos;
      loop(ptrs.data(), inner.data(), n);
      pos += n;
      if (pos >= end) break;
      for (int t = 0; t < ntensors_; ++t) ptrs[t] -= idx[0] * inner[t];  // back to the row's start
      idx[0] = 0;
      for (int d = 1; d < ndim_; ++d) {  // next row: increment the outer index with carry
        for (int t = 0; t < ntensors_; ++t) ptrs[t] += strides_[t][d];
        if (++idx[d] < shape_[d]) break;
        for (int t = 0; t < ntensors_; ++t) ptrs[t] -= shape_[d] * strides_[t][d];
        idx[d] = 0;
      }
    }
  }

 private:
  int ntensors_ = 0;
  int ndim_ = 0;
  int64_t numel_ = 0;
  std::array<char*, kMaxOperands> data_{};
  // Only dims [0, ndim_) are written and read (no zeroing: the construction of a small op's iterator
  // is on the per-op path: bench/NOTES.md, "The per-op path from Python").
  std::array<int64_t, kMaxDims> shape_;
  std::array<std::array<int64_t, kMaxDims>, kMaxOperands> strides_;
};

}  // namespace tessera

