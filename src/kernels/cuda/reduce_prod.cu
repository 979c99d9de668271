// prod on the CUDA reduction engine (reduce_engine.cuh). Floating dtypes multiply in their compute type
// (float for the 16-bit floats); integer and bool inputs whose output is int64 (no dtype given)
// multiply in int64 without a cast of the input, wrapping around as on the CPU.
#include "kernels/cuda/reduce_engine.cuh"
#include "kernels/cuda/reduce_ops.cuh"

namespace tessera::cuda::red {

void reduce_prod_cuda(const Tensor& out, const Tensor& in, int64_t nreduce) {
  if (out.dtype() != in.dtype()) {  // integers and bool multiply straight into int64
    dispatch_device_dtype<DTypeSet::IntegralAndBool>(in.dtype(), "prod", [&]<class T>(TypeTag<T>) {
      run_reduce<T, int64_t>(out, in, nreduce, ProdOp<T, int64_t>{}, "prod");
    });
    return;
  }
  dispatch_device_dtype<DTypeSet::AllNoBool>(in.dtype(), "prod", [&]<class T>(TypeTag<T>) {
    using A = dacc_t<T>;
    run_reduce<T, T>(out, in, nreduce, ProdOp<A, A>{}, "prod");
  });
}

}  // namespace tessera::cuda::red
