// The CUDA side of the reduction family: reduce_kernel's entry, which routes each ReduceOp to the
// translation unit that instantiates it (reduce_sum.cu, reduce_prod.cu, reduce_minmax.cu,
// reduce_norm.cu, all on the engine of reduce_engine.cuh), and register_reduce(), which fills every
// slot of ops/reduce_kernel.h (reduce, arg_reduce, var, logsumexp, scan: arg_reduce.cu, var.cu,
// reduce_logsumexp.cu, scan.cu) and softmax_kernel of ops/elementwise_kernel.h (softmax.cu).
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/reduce_ops.cuh"
#include "kernels/cuda/reduce_rows.cuh"
#include "ops/elementwise_kernel.h"
#include "ops/reduce_kernel.h"

namespace tessera::cuda {
namespace {

// in = (kept..., reduced...) with nreduce reduced dims (any strides); out contiguous (kept numel).
void reduce_cuda(const Tensor& out, const Tensor& in, int64_t nreduce, const ReduceParams& params) {
  switch (params.op) {
    case ReduceOp::Sum: red::reduce_sum_cuda(out, in, nreduce, false); return;
    case ReduceOp::Mean: red::reduce_sum_cuda(out, in, nreduce, true); return;
    case ReduceOp::Prod: red::reduce_prod_cuda(out, in, nreduce); return;
    case ReduceOp::Max:
    case ReduceOp::Min:
    case ReduceOp::Any:
    case ReduceOp::All: red::reduce_extremum_cuda(out, in, nreduce, params.op); return;
    case ReduceOp::NormL0:
    case ReduceOp::NormL1:
    case ReduceOp::NormL2:
    case ReduceOp::NormInf:
    case ReduceOp::NormNegInf:
    case ReduceOp::NormP: red::reduce_norm_cuda(out, in, nreduce, params); return;
  }
}

}  // namespace

void register_reduce() {
  reduce_kernel.set(DeviceType::CUDA, &reduce_cuda);
  arg_reduce_kernel.set(DeviceType::CUDA, &red::arg_reduce_cuda);
  var_kernel.set(DeviceType::CUDA, &red::var_cuda);
  logsumexp_kernel.set(DeviceType::CUDA, &red::logsumexp_cuda);
  scan_kernel.set(DeviceType::CUDA, &red::scan_cuda);
  softmax_kernel.set(DeviceType::CUDA, &red::softmax_cuda);
}

}  // namespace tessera::cuda
