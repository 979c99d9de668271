// argmax/argmin and max/min over a dim on the GPU (arg_reduce_kernel), on the row skeleton of
// reduce_rows.cuh. `in` = (kept..., R) with R > 0; writes the index (int64) and, when `values` is
// defined, the value of the winner of each row.
//
// The winner is PyTorch's (and the CPU kernel's): the largest (smallest) value, the first of equal
// ones, and a NaN beats every number, the first NaN winning among NaNs. `combine` decides by value
// and then by index, so it is associative and commutative and any reduction tree finds that element.
#include "kernels/cuda/reduce_rows.cuh"

namespace tessera::cuda::red {
namespace {

template <class T>
struct ArgOp {
  using elem_t = T;
  using V = dacc_t<T>;
  struct state_t {
    V v;
    int64_t i;  // -1: no element yet
  };
  struct ctx_t {};
  bool is_max = true;
  int64_t* idx_out = nullptr;
  T* val_out = nullptr;

  __device__ __forceinline__ ctx_t context(const T*, int64_t) const { return {}; }
  __device__ __forceinline__ state_t init() const { return {V(0), -1}; }
  __device__ __forceinline__ state_t combine(const state_t& a, const state_t& b) const {
    if (a.i < 0) return b;
    if (b.i < 0) return a;
    const bool an = is_nan(a.v), bn = is_nan(b.v);
    if (an || bn) {
      if (an && bn) return a.i < b.i ? a : b;
      return an ? a : b;
    }
    if (a.v == b.v) return a.i < b.i ? a : b;
    const bool a_wins = is_max ? a.v > b.v : a.v < b.v;
    return a_wins ? a : b;
  }
  __device__ __forceinline__ void accumulate(state_t& s, V x, int64_t r, const ctx_t&) const {
    s = combine(s, state_t{x, r});
  }
  __device__ __forceinline__ void finish(int64_t o, const state_t& s, const ctx_t&, int64_t) const {
    idx_out[o] = s.i;
    if (val_out) val_out[o] = convert<T>(s.v);
  }
};

}  // namespace

void arg_reduce_cuda(const Tensor& values, const Tensor& indices, const Tensor& in, bool is_max) {
  const char* name = is_max ? "argmax" : "argmin";
  CurrentDevice guard(in.device().index());
  dispatch_device_dtype(in.dtype(), name, [&]<class T>(TypeTag<T>) {
    ArgOp<T> op;
    op.is_max = is_max;
    op.idx_out = static_cast<int64_t*>(indices.data_ptr());
    op.val_out = values.defined() ? static_cast<T*>(values.data_ptr()) : nullptr;
    run_rows(in, op, name);
  });
}

}  // namespace tessera::cuda::red
