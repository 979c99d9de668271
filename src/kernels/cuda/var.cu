// var/std/var_mean on the GPU (var_kernel), on the row skeleton of reduce_rows.cuh. `in` = (kept..., R),
// floating; outputs contiguous, in's dtype.
//
// One pass with float64 accumulators over data shifted by the row's first element K:
// s1 = sum(x - K), s2 = sum((x - K)^2), then mean = K + s1 / n and m2 = s2 - s1^2 / n. Shifting by a
// sample of the row keeps the subtraction well conditioned (the shifted mean is of the order of the
// standard deviation), the sums combine by plain addition in any order, and every element costs three
// float64 operations. var = m2 / max(0, n - correction); n == 0 gives NaN (as the CPU kernel); a NaN
// or an infinity anywhere gives NaN (inf - inf), as the CPU's two-pass formula does.
#include <cmath>

#include "kernels/cuda/reduce_rows.cuh"

namespace tessera::cuda::red {
namespace {

template <class T>
struct VarOp {
  using elem_t = T;
  using V = dacc_t<T>;
  struct state_t {
    double s1, s2;
  };
  struct ctx_t {
    double k;
  };
  T* var_out = nullptr;
  T* mean_out = nullptr;
  double correction = 1;
  bool take_sqrt = false;

  __device__ __forceinline__ ctx_t context(const T* row, int64_t R) const {
    return {R > 0 ? static_cast<double>(load_acc(row[0])) : 0.0};
  }
  __device__ __forceinline__ state_t init() const { return {0.0, 0.0}; }
  __device__ __forceinline__ state_t combine(const state_t& a, const state_t& b) const {
    return {a.s1 + b.s1, a.s2 + b.s2};
  }
  __device__ __forceinline__ void accumulate(state_t& s, V x, int64_t, const ctx_t& c) const {
    const double d = static_cast<double>(x) - c.k;
    s.s1 += d;
    s.s2 = fma(d, d, s.s2);
  }
  __device__ __forceinline__ void finish(int64_t o, const state_t& s, const ctx_t& c, int64_t R) const {
    double v, mean;
    if (R == 0) {
      v = mean = CUDART_NAN;
    } else {
      const double n = static_cast<double>(R);
      mean = c.k + s.s1 / n;
      double m2 = s.s2 - s.s1 * (s.s1 / n);
      if (m2 < 0) m2 = 0;  // rounding; NaN stays NaN
      v = m2 / fmax(0.0, n - correction);
    }
    var_out[o] = store_from_double<T>(take_sqrt ? sqrt(v) : v);
    if (mean_out) mean_out[o] = store_from_double<T>(mean);
  }
};

}  // namespace

void var_cuda(const Tensor& var, const Tensor& mean, const Tensor& in, double correction, bool take_sqrt) {
  CurrentDevice guard(in.device().index());
  dispatch_device_dtype<DTypeSet::Floating>(in.dtype(), "var", [&]<class T>(TypeTag<T>) {
    VarOp<T> op;
    op.var_out = static_cast<T*>(var.data_ptr());
    op.mean_out = mean.defined() ? static_cast<T*>(mean.data_ptr()) : nullptr;
    op.correction = correction;
    op.take_sqrt = take_sqrt;
    run_rows(in, op, take_sqrt ? "std" : "var");
  });
}

}  // namespace tessera::cuda::red
