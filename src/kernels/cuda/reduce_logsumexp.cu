// logsumexp on the GPU (logsumexp_kernel), on the row skeleton of reduce_rows.cuh. `in` = (kept..., R),
// floating; out contiguous, in's dtype.
//
// One pass, online: each thread keeps (m, s) with m its running maximum and s = sum(exp(x - m)) in
// float64 (exp in the compute type: expf for float and the 16-bit floats, exp for double), rescaling s
// when m grows; states merge by rescaling to the larger maximum. The result is m + log(s) for a finite
// m; a NaN anywhere gives NaN, any +inf gives +inf, all -inf (or R == 0) gives -inf: the CPU kernel's
// rules, where the shift is the maximum, replaced by 0 when infinite.
#include <cmath>

#include "kernels/cuda/reduce_rows.cuh"

namespace tessera::cuda::red {
namespace {

template <class T>
struct LseOp {
  using elem_t = T;
  using V = dacc_t<T>;
  struct state_t {
    V m;       // running maximum (NaN once a NaN is seen)
    double s;  // sum of exp(x - m) over the elements seen; meaningful only while m is finite
  };
  struct ctx_t {};
  T* out = nullptr;

  __device__ __forceinline__ ctx_t context(const T*, int64_t) const { return {}; }
  __device__ __forceinline__ state_t init() const { return {-CUDART_INF_F, 0.0}; }
  __device__ __forceinline__ void accumulate(state_t& st, V x, int64_t, const ctx_t&) const {
    if (isnan(st.m)) return;
    if (isnan(x)) {
      st.m = x;
    } else if (x > st.m) {
      st.s = isinf(st.m) ? 1.0 : st.s * static_cast<double>(dev_exp(st.m - x)) + 1.0;
      st.m = x;
    } else if (!isinf(x)) {  // x <= m here, so an infinite x is -inf and adds nothing
      st.s += static_cast<double>(dev_exp(x - st.m));
    }
  }
  __device__ __forceinline__ state_t combine(const state_t& a, const state_t& b) const {
    if (isnan(a.m)) return a;
    if (isnan(b.m)) return b;
    if (isinf(a.m) && a.m < 0) return b;
    if (isinf(b.m) && b.m < 0) return a;
    const V m = a.m > b.m ? a.m : b.m;
    if (isinf(m)) return {m, 1.0};
    return {m, a.s * static_cast<double>(dev_exp(a.m - m)) + b.s * static_cast<double>(dev_exp(b.m - m))};
  }
  __device__ __forceinline__ void finish(int64_t o, const state_t& st, const ctx_t&, int64_t) const {
    double r;
    if (isnan(st.m) || isinf(st.m)) r = static_cast<double>(st.m);
    else r = static_cast<double>(st.m) + log(st.s);
    out[o] = store_from_double<T>(r);
  }
};

}  // namespace

void logsumexp_cuda(const Tensor& out, const Tensor& in) {
  CurrentDevice guard(in.device().index());
  dispatch_device_dtype<DTypeSet::Floating>(in.dtype(), "logsumexp", [&]<class T>(TypeTag<T>) {
    LseOp<T> op;
    op.out = static_cast<T*>(out.data_ptr());
    run_rows(in, op, "logsumexp");
  });
}

}  // namespace tessera::cuda::red
