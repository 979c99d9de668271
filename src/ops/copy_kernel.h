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

// The same between devices: a GPU and the CPU, or two GPUs. Filled by the GPU backend and called
// with the device that is not the CPU (dst's when both are GPUs). Without non_blocking the copy is
// complete when it returns as far as the host can tell (host memory written, or free to reuse);
// with non_blocking and page-locked host memory it may return earlier, and the caller synchronizes
// the stream before touching that memory.
using CopyBetweenDevicesKernelFn = void(const Tensor& dst, const Tensor& src, bool non_blocking);
extern KernelSlot<CopyBetweenDevicesKernelFn> copy_between_devices_kernel;

// dst[i] = value converted to dst's dtype.
using FillKernelFn = void(const Tensor& dst, const Scalar& value);
extern KernelSlot<FillKernelFn> fill_kernel;

}  // namespace tessera
