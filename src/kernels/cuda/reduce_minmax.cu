// amax/amin (and max/min over every dim), any and all on the CUDA reduction engine
// (reduce_engine.cuh). Max and min propagate NaN and start from -inf/+inf (the lowest/highest value for
// integers; the op layer rejects empty max/min). The max of bools is any, the min is all, as on the CPU.
#include "kernels/cuda/reduce_engine.cuh"
#include "kernels/cuda/reduce_ops.cuh"

namespace tessera::cuda::red {

void reduce_extremum_cuda(const Tensor& out, const Tensor& in, int64_t nreduce, ReduceOp rop) {
  if (rop == ReduceOp::Any || rop == ReduceOp::All || in.dtype() == kBool) {
    const bool all = rop == ReduceOp::All || rop == ReduceOp::Min;
    const char* name = rop == ReduceOp::Any ? "any" : rop == ReduceOp::All ? "all" : rop == ReduceOp::Max ? "amax" : "amin";
    dispatch_device_dtype(in.dtype(), name, [&]<class T>(TypeTag<T>) {
      run_reduce<T, bool>(out, in, nreduce, AnyAllOp<dacc_t<T>>{all}, name);
    });
    return;
  }
  const bool is_max = rop == ReduceOp::Max;
  const char* name = is_max ? "amax" : "amin";
  dispatch_device_dtype<DTypeSet::AllNoBool>(in.dtype(), name, [&]<class T>(TypeTag<T>) {
    using A = dacc_t<T>;
    if (is_max) run_reduce<T, T>(out, in, nreduce, MaxOp<A, A>{lowest_of<A>()}, name);
    else run_reduce<T, T>(out, in, nreduce, MinOp<A, A>{highest_of<A>()}, name);
  });
}

}  // namespace tessera::cuda::red
