// CPU inclusive scans (cumsum, cumprod) along one dim of a contiguous tensor, viewed as
// (outer, L, inner). With inner == 1 each row is a serial running total; otherwise a tile of inner
// positions advances together along L, so the loop over the tile vectorizes. Accumulators are wider
// than the data (float64 for float32/float64, float32 for 16-bit floats, int64 for integers, as
// PyTorch's CPU scans), and each step's running value is converted to the output dtype.
#include <vector>

#include "kernels/cpu/convert.h"
#include "kernels/cpu/reduce_common.h"
#include "kernels/cpu/reduce_cpu.h"
#include "ops/reduce_kernel.h"

namespace tessera::cpu::inline TS_CPU_ISA {  // Note [ISA namespaces]
namespace {

template <class T>
using scan_acc_t = std::conditional_t<is_16bit_float_v<T>, float,
                                      std::conditional_t<std::is_floating_point_v<T>, double, int64_t>>;

template <bool IsProd, class A>
inline A scan_combine(A a, A b) {
  if constexpr (std::is_integral_v<A>) {  // wrap around on overflow, as int64 arithmetic in PyTorch
    const uint64_t ua = static_cast<uint64_t>(a), ub = static_cast<uint64_t>(b);
    return static_cast<A>(IsProd ? ua * ub : ua + ub);
  } else {
    return IsProd ? a * b : a + b;
  }
}

template <class T, bool IsProd>
void scan_typed(const Tensor& out, const Tensor& in, int64_t dim) {
  using A = scan_acc_t<T>;
  const int64_t numel = in.numel();
  if (numel == 0) return;
  const T* src = static_cast<const T*>(in.data_ptr());
  T* dst = static_cast<T*>(out.data_ptr());
  int64_t outer = 1, L = 1, inner = 1;
  for (int64_t d = 0; d < in.dim(); ++d) {
    if (d < dim) outer *= in.size(d);
    else if (d == dim) L = in.size(d);
    else inner *= in.size(d);
  }
  const A identity = IsProd ? A(1) : A(0);
  const bool par = max_threads() > 1 && numel >= 32768;
  if (inner == 1) {
    // A running total is one long dependency chain; four rows side by side overlap four chains.
    constexpr int64_t kRows = 4;
    const int64_t groups = ceil_div(outer, kRows);
#pragma omp parallel for schedule(static) if (par && groups > 1)
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t o0 = g * kRows, nr = std::min(kRows, outer - o0);
      const T* s = src + o0 * L;
      T* d = dst + o0 * L;
      if (nr == kRows) {
        A acc[kRows] = {identity, identity, identity, identity};
        for (int64_t l = 0; l < L; ++l)
          for (int64_t k = 0; k < kRows; ++k) {
            acc[k] = scan_combine<IsProd>(acc[k], static_cast<A>(static_cast<load_t<T>>(s[k * L + l])));
            d[k * L + l] = convert<T>(acc[k]);
          }
        continue;
      }
      for (int64_t k = 0; k < nr; ++k) {
        A acc = identity;
        for (int64_t l = 0; l < L; ++l) {
          acc = scan_combine<IsProd>(acc, static_cast<A>(static_cast<load_t<T>>(s[k * L + l])));
          d[k * L + l] = convert<T>(acc);
        }
      }
    }
    return;
  }
  constexpr int64_t kTile = 256;
  const int64_t tiles = ceil_div(inner, kTile);
#pragma omp parallel for schedule(static) if (par && outer * tiles > 1)
  for (int64_t g = 0; g < outer * tiles; ++g) {
    const int64_t o = g / tiles, i0 = (g % tiles) * kTile, w = std::min(kTile, inner - i0);
    A acc[kTile];
    for (int64_t i = 0; i < w; ++i) acc[i] = identity;
    for (int64_t l = 0; l < L; ++l) {
      const T* s = src + (o * L + l) * inner + i0;
      T* d = dst + (o * L + l) * inner + i0;
      for (int64_t i = 0; i < w; ++i) {
        acc[i] = scan_combine<IsProd>(acc[i], static_cast<A>(static_cast<load_t<T>>(s[i])));
        d[i] = convert<T>(acc[i]);
      }
    }
  }
}

void scan_cpu(const Tensor& out, const Tensor& in, int64_t dim, ScanOp op) {
  dispatch_dtype<DTypeSet::AllNoBool>(in.dtype(), op == ScanOp::Sum ? "cumsum" : "cumprod",
                                      [&]<class T>(TypeTag<T>) {
                                        if (op == ScanOp::Prod) scan_typed<T, true>(out, in, dim);
                                        else scan_typed<T, false>(out, in, dim);
                                      });
}

}  // namespace

void register_scan() { scan_kernel.set(DeviceType::CPU, &scan_cpu); }

}  // namespace tessera::cpu::TS_CPU_ISA
