// Kernel slot of the range factories: arange fills its output on the tensor's device (so a cuda
// arange of billions of elements is neither built on the host nor copied over).
#pragma once
#include "ops/kernel_slot.h"
#include "tessera/scalar.h"
#include "tessera/tensor.h"

namespace tessera {

// out (contiguous 1-D, any dtype but bool) = start + i * step for i < out.numel(), as PyTorch computes
// it: with `integral` (start and step are integers) in int64, start.to_int() + i * step.to_int(), cast
// through the dtype's accumulate type; otherwise in double, start.to_double() + i * step.to_double(),
// rounded to float first for the 32- and 16-bit float dtypes (through the accumulate type, as the
// CPU's acc_t), then to the dtype.
using ArangeKernelFn = void(const Tensor& out, const Scalar& start, const Scalar& step, bool integral);
extern KernelSlot<ArangeKernelFn> arange_kernel;

}  // namespace tessera
