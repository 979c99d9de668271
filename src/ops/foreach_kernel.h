// Kernel slots of the foreach family: multi-tensor reductions and updates over a list of tensors
// (PyTorch's torch._foreach_norm and torch._foreach_mul_ with a tensor scalar), the two halves of
// gradient clipping.
//
// Contracts (the ops in ops/foreach_ops.cpp validate and prepare; kernels hold no checks of their own):
// - norm: every tensors[i] is contiguous, floating (float16, bfloat16, float32 or float64; the list may
//   mix them) and on one device with out, a contiguous floating tensor of shape (n), n = tensors.size().
//   ord is 1, 2 or +inf. out[i] = the vector norm of all elements of tensors[i]: sum |x| (ord 1),
//   sqrt(sum x^2) (ord 2), max |x| (ord inf), accumulated in at least float (double for float64
//   tensors) and rounded once to out's dtype. The CUDA kernels accumulate float32 and 16-bit tensors
//   in float, the CPU kernels in double: a float32 sum of squares past FLT_MAX gives inf on the GPU (as
//   PyTorch's CUDA kernel does) and the finite norm, rounded to float, on the CPU. An empty tensor's norm is 0. A NaN element makes the norm NaN, an
//   inf one (and no NaN) makes it inf. Deterministic: the same inputs give the same bits on every run,
//   whatever the scheduling. No host synchronization.
// - mul: every tensors[i] is contiguous, floating and on one device with scalar, a float32 or float64
//   one-element tensor. tensors[i] = tensors[i] * scalar for every element, computed in float (double
//   for float64 tensors; the scalar converted to that type first) and rounded once. A backend may skip
//   a tensor when the converted scalar is exactly 1 (the product would round to the same value). The
//   scalar is read on the device: no host synchronization. It shares no element with the tensors,
//   and no two tensors share an element.
// A backend may run the whole list in a few launches (multi-tensor apply).
#pragma once

#include "ops/kernel_slot.h"
#include "tessera/tensor.h"

namespace tessera {

using ForeachNormKernelFn = void(const TensorList& tensors, const Tensor& out, double ord);
inline KernelSlot<ForeachNormKernelFn> foreach_norm_kernel("_foreach_norm");

using ForeachMulKernelFn = void(const TensorList& tensors, const Tensor& scalar);
inline KernelSlot<ForeachMulKernelFn> foreach_mul_kernel("_foreach_mul_");

}  // namespace tessera
