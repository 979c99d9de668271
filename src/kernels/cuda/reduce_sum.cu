// sum and mean on the CUDA reduction engine (reduce_engine.cuh). Floating dtypes accumulate in their
// compute type (float for the 16-bit floats); integer and bool inputs whose output is int64 (no dtype
// given) accumulate in int64 without a cast of the input; integers wrap around as on the CPU. Mean
// shares sum's instantiation (a runtime flag divides in finish).
#include "kernels/cuda/reduce_engine.cuh"
#include "kernels/cuda/reduce_ops.cuh"

namespace tessera::cuda::red {

void reduce_sum_cuda(const Tensor& out, const Tensor& in, int64_t nreduce, bool mean) {
  const char* name = mean ? "mean" : "sum";
  if (mean) {
    dispatch_device_dtype<DTypeSet::Floating>(in.dtype(), name, [&]<class T>(TypeTag<T>) {
      using A = dacc_t<T>;
      run_reduce<T, T>(out, in, nreduce, SumOp<A, A>{true}, name);
    });
    return;
  }
  if (out.dtype() != in.dtype()) {  // integers and bool accumulate straight into int64
    dispatch_device_dtype<DTypeSet::IntegralAndBool>(in.dtype(), name, [&]<class T>(TypeTag<T>) {
      run_reduce<T, int64_t>(out, in, nreduce, SumOp<T, int64_t>{false}, name);
    });
    return;
  }
  dispatch_device_dtype<DTypeSet::AllNoBool>(in.dtype(), name, [&]<class T>(TypeTag<T>) {
    using A = dacc_t<T>;
    run_reduce<T, T>(out, in, nreduce, SumOp<A, A>{false}, name);
  });
}

}  // namespace tessera::cuda::red
