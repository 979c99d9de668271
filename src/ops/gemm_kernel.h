// Kernel slot for the matrix-product family: one batched, strided GEMM
//   C[i] = alpha * A[i] @ B[i] + beta * C[i]      for i in [0, batch)
//   C[i] = alpha * A[i] @ B[i] + bias             with a bias vector (n) (beta is then 0)
// Every op of the family (mm, bmm, matmul, addmm, baddbmm, linear, dot, outer, einsum) lowers onto it,
// so a backend provides a single entry: the CPU fills it with OpenBLAS (kernels/cpu/matmul.cpp), the
// CUDA backend can put cuBLASLt behind the same slot.
//
// Invariants the meta functions guarantee before calling the slot:
//  - a, b, c are 3-D views on one device with one dtype (not bool): a (batch, m, k), b (batch, k, n),
//    c (batch, m, n). Their strides are arbitrary (transposed, sliced with a step, or 0 along the batch
//    dim for a broadcast operand); the kernel chooses between a BLAS leading dimension with a transpose
//    flag and a copy.
//  - c does not overlap a or b and has no two elements at one address (it is written).
//  - beta == 0 means c is not read: NaN or garbage in it does not reach the result (as PyTorch).
//  - k == 0 is allowed: the result is beta * c (zeros when beta == 0).
//  - bias, when defined, is a 1-D (n) tensor of c's dtype and device (any stride), added to every row
//    (linear's bias); beta is 0 then. A backend adds it in the GEMM's epilogue where its library has
//    one (cuBLASLt's BIAS: no (m, n) copy of the broadcast bias, no read of C) and otherwise writes
//    the broadcast bias into C and runs with beta = 1 (bias_as_input below), which is what the op
//    layer did before the slot took a bias.
//  - For integer dtypes alpha and beta are integral; the product accumulates in int64 and wraps to
//    the dtype, as PyTorch's CPU integer mm does.
#pragma once
#include "ops/kernel_slot.h"
#include "tessera/scalar.h"
#include "tessera/tensor.h"

namespace tessera {

struct GemmParams {
  Tensor a;  // (batch, m, k)
  Tensor b;  // (batch, k, n)
  Tensor c;  // (batch, m, n), written
  Scalar alpha = 1;
  Scalar beta = 0;
  Tensor bias;  // (n) or undefined

  int64_t batch() const { return c.size(0); }
  int64_t m() const { return c.size(1); }
  int64_t n() const { return c.size(2); }
  int64_t k() const { return a.size(2); }
};

// The bias-free form of p: C filled with the broadcast bias, beta = 1 (for backends without an epilogue).
GemmParams bias_as_input(const GemmParams& p);

using GemmKernelFn = void(const GemmParams& p);
extern KernelSlot<GemmKernelFn> gemm_kernel;

}  // namespace tessera
