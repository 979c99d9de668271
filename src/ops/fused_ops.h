// Fused ops of a transformer's training step (the slots in ops/fused_kernel.h; the residual add with
// layer norm is in ops/norm_ops.h). nn::functional::linear_gelu and linear_cross_entropy call them;
// autograd/derivatives/fused.cpp differentiates them. Not part of the public API.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <tuple>

#include "tessera/tensor.h"

namespace tessera {

// gelu(linear(x, weight, bias), approximate = "tanh"): x (..., K), weight (N, K), bias (N) or absent
// -> (..., N). On CUDA one cuBLASLt GEMM with the GELU_AUX(_BIAS) epilogue, which also writes the
// pre-activation that the backward reads; elsewhere (and where the epilogue does not apply) linear,
// then gelu. Records "linear_gelu" with inputs {x, weight, bias} (bias undefined when absent), output
// {y}, attrs.tensors = {pre-activation (M, N)}. Lower precision under autocast, as linear.
Tensor linear_gelu(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias = std::nullopt);

// A transformer MLP without dropout: linear(linear_gelu(x, w1, b1), w2, b2); x (..., K), w1 (N1, K),
// b1 (N1) or absent, w2 (N2, N1), b2 (N2) or absent -> (..., N2). The forward is linear_gelu's GEMM
// (GELU_AUX_BIAS on CUDA) and a GEMM with the bias; the backward takes the gradient of the GELU's
// input from a GEMM and gelu_tanh_backward, and each layer's weight and bias gradients from one BGRADB
// GEMM (linear_weight_bias_grad). Keeps the pre-activation and the GELU output (as the unfused
// layers would). Records "mlp_gelu" with inputs {x, w1, b1, w2, b2} (absent biases undefined), output
// {y}, attrs.tensors = {pre (M, N1), h (M, N1)}. Lower precision under autocast, as linear.
Tensor mlp_gelu(const Tensor& x, const Tensor& w1, const std::optional<Tensor>& b1, const Tensor& w2,
                const std::optional<Tensor>& b2);

// The same calls, also returning the tensors their derivatives save whatever grad mode says:
// (y, pre) and (y, pre, h). The compiler's replay uses them, so that a joint graph's forward, which
// runs without autograd, still gives the backward graph its saved values (Note [Joint graph]).
std::tuple<Tensor, Tensor> linear_gelu_saving(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias);
std::tuple<Tensor, Tensor, Tensor> mlp_gelu_saving(const Tensor& x, const Tensor& w1, const std::optional<Tensor>& b1,
                                                   const Tensor& w2, const std::optional<Tensor>& b2);

// (dpre, dbias): dpre = (g @ w2) * gelu_tanh'(pre) (M, N1) and, when want_bias, dbias = the sum of
// dpre's rows (N1); g (M, N2), w2 (N2, N1), pre (M, N1), one floating dtype. Records nothing. On CUDA
// one GEMM with cuBLASLt's DGELU_BGRAD epilogue (which runs the epilogue as a kernel of its own on an
// H200: mlp_gelu's backward does not use it).
std::tuple<Tensor, Tensor> linear_dgelu_bgrad(const Tensor& g, const Tensor& w2, const Tensor& pre, bool want_bias);

// grad * gelu_tanh'(pre), elementwise, of pre's sizes and dtype (grad: same sizes and dtype). Records
// nothing: derivatives call it with grad mode off.
Tensor gelu_tanh_backward(const Tensor& grad, const Tensor& pre);

// The weight and bias gradients of a linear layer from the gradient g (M, N) of its output and its
// input x (M, K): dW = g^T @ x (N, K), db = the sum of g's rows (N); each computed where wanted
// (undefined otherwise). On CUDA, both from one GEMM with cuBLASLt's BGRADB epilogue where it has an
// algorithm. Records nothing.
std::tuple<Tensor, Tensor> linear_weight_bias_grad(const Tensor& g, const Tensor& x, std::array<bool, 2> output_mask);

// cross_entropy(x @ weight^T, target, ignore_index, reduction) without materializing the (N, V)
// logits: x (N, C), weight (V, C), target (N) class indices; reduction "mean" (over the targets that
// are not ignore_index) or "sum". Rows are processed in chunks of chunk_rows: the chunk's logits (in
// x's dtype: bfloat16 under bfloat16 autocast), the fused cross-entropy of the chunk, and, when x or
// weight takes part in autograd, the chunk's dlogits and their products dx (rows of the chunk) and
// dW (accumulated; in float32 for 16-bit inputs) right away, kept for the backward, which scales
// them by the incoming gradient. So at most two (chunk_rows, V) buffers live at a time. The loss is a
// 0-dim tensor in float32 (float64 for float64 inputs). Records "linear_cross_entropy" with inputs
// {x, weight}, output {loss}, attrs.tensors = {dx, dW, target (int64)}, attrs.ints = {ignore_index},
// attrs.str = reduction.
Tensor linear_cross_entropy(const Tensor& x, const Tensor& weight, const Tensor& target, int64_t ignore_index = -100,
                            const std::string& reduction = "mean", int64_t chunk_rows = 4096);
// The same call -> (loss, dx, dW), computing dx and dW where asked even when nothing records (the
// compiler's replay; Note [Joint graph]).
std::tuple<Tensor, Tensor, Tensor> linear_cross_entropy_saving(const Tensor& x, const Tensor& weight,
                                                               const Tensor& target, int64_t ignore_index,
                                                               const std::string& reduction, int64_t chunk_rows,
                                                               bool want_dx, bool want_dw);

}  // namespace tessera
