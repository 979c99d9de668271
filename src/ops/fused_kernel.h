// Kernel slots of the fused linear-layer ops (ops/fused_ops.h): a linear layer with GELU (tanh) in
// the GEMM's epilogue, the GELU (tanh) derivative (alone, or in the epilogue of the following linear
// layer's input-gradient GEMM, with the bias gradient), and the weight gradient of a linear layer
// together with its bias gradient. Only the CUDA backend fills them (cuBLASLt epilogues); on a device without a
// kernel the ops compute the same values as compositions of tessera ops (the reference semantics).
//
// Invariants the ops guarantee before calling a slot: one floating dtype T throughout; 2-D operands;
// the outputs freshly allocated and contiguous; M, N, K > 0.
#pragma once
#include "ops/kernel_slot.h"
#include "tessera/tensor.h"

namespace tessera {

// pre (M, N) = x @ w^T + b, out (M, N) = gelu_tanh(pre): x (M, K) contiguous, w (N, K) contiguous,
// b (N) contiguous or undefined. gelu_tanh(v) = 0.5 v (1 + tanh(sqrt(2 / pi) (v + 0.044715 v^3))).
// pre may be undefined (no backward will read it): then only out is written.
using LinearGeluFn = void(const Tensor& out, const Tensor& pre, const Tensor& x, const Tensor& w, const Tensor& b);

// dpre (M, N) = grad * gelu_tanh'(pre); grad and pre (M, N) contiguous. Any M * N (past 2^31 too).
using GeluTanhBackwardFn = void(const Tensor& dpre, const Tensor& grad, const Tensor& pre);

// dw (N, K) = g^T @ x and db (N) = the sum of g's rows: g (M, N), x (M, K) contiguous.
using LinearWeightBiasGradFn = void(const Tensor& dw, const Tensor& db, const Tensor& g, const Tensor& x);

// dpre (M, N1) = (g @ w2) * gelu_tanh'(pre) and dbias (N1) = the sum of dpre's rows (undefined: not
// wanted): g (M, N2), w2 (N2, N1), pre (M, N1) contiguous. The backward of the GELU in front of a linear
// layer, from that layer's gradient.
using LinearDgeluBgradFn = void(const Tensor& dpre, const Tensor& dbias, const Tensor& g, const Tensor& w2,
                                const Tensor& pre);

extern KernelSlot<LinearGeluFn> linear_gelu_kernel;
extern KernelSlot<LinearDgeluBgradFn> linear_dgelu_bgrad_kernel;
extern KernelSlot<GeluTanhBackwardFn> gelu_tanh_backward_kernel;
extern KernelSlot<LinearWeightBiasGradFn> linear_weight_bias_grad_kernel;

}  // namespace tessera
