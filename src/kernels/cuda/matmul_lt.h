// The cuBLASLt side of the CUDA matrix products (matmul_lt.cpp), in plain C++ types so that any
// layer above the kernels may call it: the floating-point GEMM behind ops/gemm_kernel.h, and the
// fused GEMM + bias + activation epilogue that the fused-op work will use.
#pragma once
#include "ops/gemm_kernel.h"
#include "tessera/tensor.h"

namespace tessera::cuda {

// The activation a fused epilogue applies after the bias. Gelu is cuBLASLt's GELU epilogue, which is
// the tanh approximation: it matches gelu(approximate = "tanh"), not the erf form.
enum class Activation { None, Relu, Gelu };

// out = act(a @ b + bias) on one CUDA device, through one cuBLASLt call with the BIAS / RELU_BIAS /
// GELU_BIAS epilogue (RELU / GELU / DEFAULT without a bias).
//   a (m, k) or (batch, m, k); b (k, n) or (batch, k, n); out (m, n) or (batch, m, n), written;
//   bias (n) or undefined (no bias). One floating dtype throughout; any strides (a batch dim of
//   stride 0 is a broadcast operand); out must not overlap a, b or bias.
// The epilogue rounds once, after the activation. Where cuBLASLt offers no fused algorithm (e.g. some
// float64 cases) or k == 0, the same result is computed unfused (GEMM, then add, then activation).
// Raises ShapeError / DTypeError / DeviceError for inconsistent arguments.
void gemm_bias_act(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& bias, Activation act);

// C = alpha A B + beta C for float16, bfloat16, float32 (TF32 when cuda::allow_tf32()) and float64
// under the invariants of ops/gemm_kernel.h, with k > 0 and a non-empty C. The caller has made the
// tensors' device current.
void gemm_lt(const GemmParams& p);

}  // namespace tessera::cuda
