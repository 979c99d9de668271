// Kernel slots for copies and fills, the kernels every other op leans on.
#pragma once
#include "ops/kernel_slot.h"
#include "tessera/scalar.h"
#include "tessera/tensor.h"

namespace tessera {

// dst[i] = convert(src[i]) for every element; src broadcasts to dst's shape; dtypes may differ;
// both on dst's device.
using CopyKernelFn = void(const Tensor& dst, const Tensor& src);
extern KernelSlot<CopyKernelFn> copy_kernel;

// dst[i] = value converted to dst's dtype.
using FillKernelFn = void(const Tensor& dst, const Scalar& value);
extern KernelSlot<FillKernelFn> fill_kernel;

}  // namespace tessera
