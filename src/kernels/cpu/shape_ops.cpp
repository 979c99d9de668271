// CPU kernels of the shape-and-order family that only move elements: the per-dim index map (flip,
// roll, reflect/replicate/circular pad, repeat_interleave with counts) and tril/triu. Neither looks
// at values, so both dispatch on the element size alone (an unsigned integer of that width), and
// tril/triu zero with memset: zero is all-zero bits in every dtype tessera has.
//
// Invariants (from ops/shape_ops_kernel.h): `out` is freshly allocated and contiguous; `x` may have
// any strides; maps are in range. Rows of the output (all dims but the last) split into one
// contiguous range per OpenMP thread, so results never depend on the thread count.
#include <omp.h>

#include <algorithm>
#include <cstring>

#include "kernels/cpu/cpu_kernels.h"
#include "ops/shape_ops_kernel.h"
#include "tensor/dispatch_dtype.h"
#include "tensor/tensor_impl.h"

namespace tessera::cpu {

void register_sort();  // kernels/cpu/sort.cpp

namespace {

constexpr int64_t kGrain = 32768;  // elements below which a kernel runs on one thread

// Calls f(TypeTag<U>) with U an unsigned integer as wide as one element of `t`.
template <class F>
void dispatch_width(const Tensor& t, F&& f) {
  switch (t.element_size()) {
    case 1: f(TypeTag<uint8_t>{}); return;
    case 2: f(TypeTag<uint16_t>{}); return;
    case 4: f(TypeTag<uint32_t>{}); return;
    case 8: f(TypeTag<uint64_t>{}); return;
  }
  TS_THROW(DTypeError, "index_map: unsupported element size ", t.element_size());
}

// Splits [0, n) into one contiguous chunk per thread and calls body(begin, end) for each.
template <class Body>
void parallel_ranges(int64_t n, int64_t work, Body&& body) {
  if (n <= 0) return;
#pragma omp parallel if (work > kGrain && n > 1)
  {
    const int64_t nt = omp_get_num_threads(), tid = omp_get_thread_num();
    const int64_t per = (n + nt - 1) / nt;
    const int64_t begin = tid * per, end = std::min(n, begin + per);
    if (begin < end) body(begin, end);
  }
}

void index_map_cpu(const Tensor& out, const Tensor& x, const std::vector<std::vector<int64_t>>& maps) {
  const int64_t nd = out.dim();
  dispatch_width(out, [&]<class U>(TypeTag<U>) {
    U* dst = static_cast<U*>(out.data_ptr());
    const U* src = static_cast<const U*>(x.data_ptr());
    if (nd == 0) {
      *dst = *src;
      return;
    }
    const Shape& os = out.sizes();
    const Shape& xs = x.strides();
    // off[d][o]: element offset in x of output index o along d.
    std::vector<std::vector<int64_t>> off(nd);
    for (int64_t d = 0; d < nd; ++d) {
      off[d].resize(os[d]);
      for (int64_t o = 0; o < os[d]; ++o) off[d][o] = (maps[d].empty() ? o : maps[d][o]) * xs[d];
    }
    const int64_t inner = os[nd - 1];
    const int64_t rows = out.numel() / inner;
    const bool inner_plain = maps[nd - 1].empty() && xs[nd - 1] == 1;
    const int64_t* inner_off = off[nd - 1].data();
    parallel_ranges(rows, out.numel(), [&](int64_t begin, int64_t end) {
      // Row index -> multi-index over dims [0, nd-1), then walked with carry.
      std::vector<int64_t> idx(nd, 0);
      int64_t base = 0;
      for (int64_t d = nd - 2, r = begin; d >= 0; --d) {
        idx[d] = r % os[d];
        r /= os[d];
        base += off[d][idx[d]];
      }
      for (int64_t r = begin; r < end; ++r) {
        U* o = dst + r * inner;
        const U* s = src + base;
        if (inner_plain) {
          std::memcpy(o, s, inner * sizeof(U));
        } else {
          for (int64_t j = 0; j < inner; ++j) o[j] = s[inner_off[j]];
        }
        for (int64_t d = nd - 2; d >= 0; --d) {
          base -= off[d][idx[d]];
          if (++idx[d] < os[d]) {
            base += off[d][idx[d]];
            break;
          }
          idx[d] = 0;
          base += off[d][0];
        }
      }
    });
  });
}

void tril_triu_cpu(const Tensor& out, const Tensor& x, int64_t diagonal, bool upper) {
  const int64_t nd = x.dim();
  const int64_t R = x.sizes()[nd - 2], C = x.sizes()[nd - 1];
  const int64_t xr = x.strides()[nd - 2], xc = x.strides()[nd - 1];
  const int64_t batches = out.numel() / (R * C);
  // Element offset in x of each batch (the leading dims), walked once in row-major order.
  std::vector<int64_t> batch_off(batches, 0);
  {
    std::vector<int64_t> idx(nd - 2, 0);
    int64_t base = 0;
    for (int64_t b = 0; b < batches; ++b) {
      batch_off[b] = base;
      for (int64_t d = nd - 3; d >= 0; --d) {
        base += x.strides()[d];
        if (++idx[d] < x.sizes()[d]) break;
        base -= idx[d] * x.strides()[d];
        idx[d] = 0;
      }
    }
  }
  // Clamped so that i + diagonal cannot overflow; beyond +-(R + C) every row is all kept or all zeroed.
  const int64_t diag = std::clamp<int64_t>(diagonal, -(R + C), R + C);
  dispatch_width(out, [&]<class U>(TypeTag<U>) {
    U* dst = static_cast<U*>(out.data_ptr());
    const U* src = static_cast<const U*>(x.data_ptr());
    parallel_ranges(batches * R, out.numel(), [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const int64_t b = r / R, i = r % R;
        U* o = dst + r * C;
        const U* s = src + batch_off[b] + i * xr;
        // Kept columns: tril j <= i + diag, triu j >= i + diag.
        const int64_t lo = upper ? std::clamp<int64_t>(i + diag, 0, C) : 0;
        const int64_t hi = upper ? C : std::clamp<int64_t>(i + diag + 1, 0, C);
        if (lo > 0) std::memset(o, 0, lo * sizeof(U));
        if (hi < C) std::memset(o + std::max(hi, lo), 0, (C - std::max(hi, lo)) * sizeof(U));
        if (xc == 1) {
          if (hi > lo) std::memcpy(o + lo, s + lo, (hi - lo) * sizeof(U));
        } else {
          for (int64_t j = lo; j < hi; ++j) o[j] = s[j * xc];
        }
      }
    });
  });
}

}  // namespace

void register_shape_ops() {
  index_map_kernel.set(DeviceType::CPU, &index_map_cpu);
  tril_triu_kernel.set(DeviceType::CPU, &tril_triu_cpu);
  register_sort();
}

}  // namespace tessera::cpu
