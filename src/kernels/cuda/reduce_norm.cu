// The vector norms on the CUDA reduction engine (reduce_engine.cuh), floating dtypes only: L0 (count of
// non-zeros), L1, L2 and general p sum in the compute type; +inf and -inf take max |x| and min |x|,
// both 0 for an empty reduction (torch.norm).
#include "kernels/cuda/reduce_engine.cuh"
#include "kernels/cuda/reduce_ops.cuh"

namespace tessera::cuda::red {

void reduce_norm_cuda(const Tensor& out, const Tensor& in, int64_t nreduce, const ReduceParams& prm) {
  dispatch_device_dtype<DTypeSet::Floating>(in.dtype(), "norm", [&]<class T>(TypeTag<T>) {
    using A = dacc_t<T>;
    switch (prm.op) {
      case ReduceOp::NormInf:
      case ReduceOp::NormNegInf:
        run_reduce<T, T>(out, in, nreduce, NormMaxOp<A, A>{prm.op == ReduceOp::NormNegInf}, "norm");
        return;
      default: {
        NormSumOp<A, A> op;
        op.kind = prm.op == ReduceOp::NormL0 ? NormKind::L0
                  : prm.op == ReduceOp::NormL1 ? NormKind::L1
                  : prm.op == ReduceOp::NormL2 ? NormKind::L2
                                               : NormKind::P;
        op.p = static_cast<A>(prm.p);
        run_reduce<T, T>(out, in, nreduce, op, "norm");
        return;
      }
    }
  });
}

}  // namespace tessera::cuda::red
