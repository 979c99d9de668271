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

// The GELU_AUX(_BIAS) epilogue: pre = a @ b + bias (bias undefined: none) and out = gelu_tanh(pre), in
// one cuBLASLt call that keeps the pre-activation as its auxiliary output. a (m, k), b (k, n) any
// strides; out and pre (m, n) contiguous; one floating dtype. Returns false, having run nothing, where
// the epilogue does not apply (n not a multiple of 8, misaligned buffers, k == 0, empty) or cuBLASLt has
// no algorithm: the caller then computes the composite. Raises for inconsistent arguments.
bool gemm_gelu_aux(const Tensor& out, const Tensor& pre, const Tensor& a, const Tensor& b, const Tensor& bias);

// The DGELU(_BGRAD) epilogue: dpre = (a @ b) * gelu_tanh'(pre) and, when dbias is defined, dbias[j] =
// sum_i dpre[i, j], in one cuBLASLt call reading the pre-activation (gemm_gelu_aux's aux output) as its
// auxiliary input: the backward of a GELU in front of a linear layer, with a = that layer's output
// gradient and b its weight. a (m, k), b (k, n) any strides; dpre and pre (m, n) contiguous; dbias (n).
// Returns false, having run nothing, where the epilogue does not apply (as gemm_gelu_aux).
bool gemm_dgelu_bgrad(const Tensor& dpre, const Tensor& dbias, const Tensor& a, const Tensor& b, const Tensor& pre);

// The BGRADB epilogue: c = a @ b together with bgrad[i] = sum_j a[i, j] (the sums of a over the
// reduction dim), as the weight gradient of a linear layer, dW = g^T @ x, gives the bias gradient
// db = sum over rows of g: gemm_bgradb(dW, db, g.t(), x). c (m, n) contiguous; bgrad (m) contiguous.
// Returns false, having run nothing, where cuBLASLt has no algorithm (the caller computes c and bgrad
// separately).
bool gemm_bgradb(const Tensor& c, const Tensor& bgrad, const Tensor& a, const Tensor& b);

// C = alpha A B + beta C for float16, bfloat16, float32 (TF32 when cuda::allow_tf32()) and float64
// under the invariants of ops/gemm_kernel.h, with k > 0 and a non-empty C. The caller has made the
// tensors' device current.
void gemm_lt(const GemmParams& p);

}  // namespace tessera::cuda
