// Kernel slots of the reduction family: sum/prod/max/min/any/all/norm (one strided reduction engine),
// arg-reductions (argmax/argmin and max/min over a dim), variance, logsumexp and scans.
//
// Note [Reduction layout]: the op layer (ops/reduce.cpp) permutes the input so that the dims it keeps
// come first, in the output's order, and the reduced dims last. Kernels therefore see
// `in` = (kept..., reduced...) with any strides, and write a contiguous `out` whose elements are the
// kept dims in row-major order (keepdim is a view the op layer puts on top). Kernels choose their own
// traversal from the strides (inner contiguous vs. reduced-outer with a contiguous kept dim), so the
// common layouts need no copy. Reductions that are not empty-safe (max, min, ...) are rejected by the
// op layer before any kernel runs.
#pragma once
#include <cstdint>

#include "ops/kernel_slot.h"
#include "tessera/tensor.h"

namespace tessera {

enum class ReduceOp : uint8_t {
  Sum,         // out dtype == in dtype; 16-bit floats accumulate in float32
  Mean,        // Sum divided by the number of reduced elements (floating dtypes only)
  Prod,
  Max,         // NaN propagates
  Min,
  Any,         // out is bool; any input dtype (x != 0, NaN counts as true)
  All,
  NormL0,      // number of non-zero elements (floating dtypes only, as are all norms)
  NormL1,      // sum |x|
  NormL2,      // sqrt(sum x^2)
  NormInf,     // max |x| (0 for an empty reduction, as torch.norm)
  NormNegInf,  // min |x| (0 for an empty reduction)
  NormP,       // (sum |x|^p)^(1/p)
};

struct ReduceParams {
  ReduceOp op = ReduceOp::Sum;
  double p = 2;  // NormP only
};

// Reduces `in` over its last `nreduce` dims (Note [Reduction layout]) into the contiguous `out`,
// whose numel is the product of in's leading dims. out's dtype is in's, bool for Any/All, or int64
// for Sum/Prod of integer and bool inputs (accumulated in int64 without a cast of the input).
using ReduceKernelFn = void(const Tensor& out, const Tensor& in, int64_t nreduce, const ReduceParams& params);
extern KernelSlot<ReduceKernelFn> reduce_kernel;

// `in` = (kept..., R) with R > 0 (any strides). Writes, per kept position, the first index of the
// largest (is_max) or smallest element along R into `indices` (int64, contiguous) and, when defined,
// that element into `values` (in's dtype, contiguous). A NaN wins over every number; the first NaN
// is the one reported.
using ArgReduceKernelFn = void(const Tensor& values, const Tensor& indices, const Tensor& in, bool is_max);
extern KernelSlot<ArgReduceKernelFn> arg_reduce_kernel;

// `in` = (kept..., R), floating. var = sum((x - mean)^2) / max(0, R - correction), in float64
// accumulators; sqrt of it when take_sqrt. `mean` may be undefined. Outputs contiguous, in's dtype.
using VarKernelFn = void(const Tensor& var, const Tensor& mean, const Tensor& in, double correction, bool take_sqrt);
extern KernelSlot<VarKernelFn> var_kernel;

// `in` = (kept..., R), floating: out = m + log(sum(exp(x - m))) with m the max along R (m is replaced
// by 0 when infinite, so all -inf gives -inf and any +inf gives +inf). R == 0 gives -inf.
using LogSumExpKernelFn = void(const Tensor& out, const Tensor& in);
extern KernelSlot<LogSumExpKernelFn> logsumexp_kernel;

enum class ScanOp : uint8_t { Sum, Prod };
// Inclusive scan along `dim` of the contiguous `in` into the contiguous `out` (same sizes, same
// dtype; not bool). Accumulates in float64 for float32/float64, float32 for 16-bit floats, int64 for
// integers (so the result wraps as in PyTorch).
using ScanKernelFn = void(const Tensor& out, const Tensor& in, int64_t dim, ScanOp op);
extern KernelSlot<ScanKernelFn> scan_kernel;

}  // namespace tessera
