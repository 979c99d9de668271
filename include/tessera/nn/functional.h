// nn::functional: PyTorch's torch.nn.functional. Each function is a composition of tessera ops, so
// autograd differentiates it through those ops' derivatives. Numerics follow PyTorch: cross entropy
// through log_softmax, binary_cross_entropy_with_logits in its overflow-free form, norms with the
// biased variance and eps inside the square root, 16-bit inputs normalized in float32.
#pragma once
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "tessera/functions.h"
#include "tessera/tensor.h"

namespace tessera::nn::functional {

// ---- activations and dropout ------------------------------------------------------------------
Tensor relu(const Tensor& x);
Tensor gelu(const Tensor& x, const std::string& approximate = "none");  // "none" or "tanh"
Tensor silu(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor softmax(const Tensor& x, int64_t dim, std::optional<DType> dtype = std::nullopt);
Tensor log_softmax(const Tensor& x, int64_t dim, std::optional<DType> dtype = std::nullopt);
// Zeroes each element with probability p and scales the rest by 1 / (1 - p) when training; the
// identity otherwise. The mask comes from the Philox generator (gen, or the device's default).
Tensor dropout(const Tensor& x, double p = 0.5, bool training = true, Generator* gen = nullptr);

// ---- linear layers and embeddings ---------------------------------------------------------------
Tensor linear(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias = std::nullopt);
// x1 (..., in1), x2 (..., in2), weight (out, in1, in2), bias (out) -> (..., out): x1^T W_o x2 + b_o.
Tensor bilinear(const Tensor& x1, const Tensor& x2, const Tensor& weight,
                const std::optional<Tensor>& bias = std::nullopt);
Tensor embedding(const Tensor& indices, const Tensor& weight, std::optional<int64_t> padding_idx = std::nullopt);
// gelu(linear(x, weight, bias), approximate = "tanh") as one op: on CUDA the GELU runs in the GEMM's
// epilogue (cuBLASLt), which also keeps the pre-activation for the backward.
Tensor linear_gelu(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias = std::nullopt);
// linear(linear_gelu(x, w1, b1), w2, b2): a transformer MLP (no dropout) as one op; on CUDA the GELU's
// derivative and b1's gradient come out of the epilogue of the GEMM that takes the gradient through w2.
Tensor mlp_gelu(const Tensor& x, const Tensor& w1, const std::optional<Tensor>& b1, const Tensor& w2,
                const std::optional<Tensor>& b2);

// ---- normalization ----------------------------------------------------------------------------
// Normalizes over the trailing dims `normalized_shape`.
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const std::optional<Tensor>& weight = std::nullopt,
                  const std::optional<Tensor>& bias = std::nullopt, double eps = 1e-5);
// The residual add fused with layer norm: -> (sum, layer_norm(sum)) with sum = x + residual (same
// sizes; the promoted dtype), in one pass over x and residual. Under autocast (a transformer block's
// x + branch, then the next matmul): residual, weight and bias in float32, x read in its own dtype
// (the autocast dtype, or float32), sum and the statistics in float32, and layer_norm(sum) returned
// in the autocast dtype, rounded once: the value the next matmul would cast it to.
std::tuple<Tensor, Tensor> add_layer_norm(const Tensor& x, const Tensor& residual, const Shape& normalized_shape,
                                          const std::optional<Tensor>& weight = std::nullopt,
                                          const std::optional<Tensor>& bias = std::nullopt, double eps = 1e-5);
// x (N, C, *): normalizes each of num_groups groups of C / num_groups channels; weight, bias (C).
Tensor group_norm(const Tensor& x, int64_t num_groups, const std::optional<Tensor>& weight = std::nullopt,
                  const std::optional<Tensor>& bias = std::nullopt, double eps = 1e-5);
// x / sqrt(mean(x^2) + eps) * weight over the trailing dims; eps defaults to the dtype's epsilon.
Tensor rms_norm(const Tensor& x, const Shape& normalized_shape, const std::optional<Tensor>& weight = std::nullopt,
                std::optional<double> eps = std::nullopt);
// x (N, C, *). training (or no running stats): batch statistics, and the running stats (when given)
// are updated under no_grad: running = (1 - momentum) * running + momentum * batch, with the
// unbiased batch variance. Otherwise the running stats normalize.
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const std::optional<Tensor>& weight = std::nullopt, const std::optional<Tensor>& bias = std::nullopt,
                  bool training = false, double momentum = 0.1, double eps = 1e-5);

// ---- attention ----------------------------------------------------------------------------------
// q (..., L, E), k (..., S, E), v (..., S, Ev) -> (..., L, Ev): softmax(q k^T * scale + mask) v.
// attn_mask: bool (true = may attend) or float (added), broadcastable to (..., L, S). is_causal masks
// j > i (and excludes attn_mask). scale defaults to 1 / sqrt(E). Dropout applies when dropout_p > 0.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const std::optional<Tensor>& attn_mask = std::nullopt, double dropout_p = 0.0,
                                    bool is_causal = false, std::optional<double> scale = std::nullopt,
                                    Generator* gen = nullptr);

// ---- losses ---------------------------------------------------------------------------------------
// reduction: "none", "mean" or "sum" (kl_div also "batchmean").
// input (N, C) / (N, C, d1, ...) / (C); target: class indices (N) / (N, d1, ...) / () of an integer
// dtype, or class probabilities of input's shape. weight (C) rescales each class.
Tensor cross_entropy(const Tensor& input, const Tensor& target, const std::optional<Tensor>& weight = std::nullopt,
                     int64_t ignore_index = -100, const std::string& reduction = "mean", double label_smoothing = 0.0);
// cross_entropy(linear(x, weight), target) for x (N, C), weight (V, C), target (N) without holding the
// (N, V) logits: rows go through in chunks of chunk_rows, and the gradients of x and weight are
// computed in the forward (when they require grad). reduction "mean" or "sum"; no class weights or
// label smoothing.
Tensor linear_cross_entropy(const Tensor& x, const Tensor& weight, const Tensor& target, int64_t ignore_index = -100,
                            const std::string& reduction = "mean", int64_t chunk_rows = 4096);
// input: log-probabilities, shaped as cross_entropy's; target: class indices.
Tensor nll_loss(const Tensor& input, const Tensor& target, const std::optional<Tensor>& weight = std::nullopt,
                int64_t ignore_index = -100, const std::string& reduction = "mean");
Tensor mse_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean");
Tensor l1_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean");
Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean",
                      double beta = 1.0);
Tensor huber_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean", double delta = 1.0);
// input: probabilities in [0, 1]; log terms are clamped to >= -100 as in PyTorch.
Tensor binary_cross_entropy(const Tensor& input, const Tensor& target, const std::optional<Tensor>& weight = std::nullopt,
                            const std::string& reduction = "mean");
Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                        const std::optional<Tensor>& weight = std::nullopt,
                                        const std::string& reduction = "mean",
                                        const std::optional<Tensor>& pos_weight = std::nullopt);
// input: log-probabilities; target: probabilities (or log-probabilities with log_target).
Tensor kl_div(const Tensor& input, const Tensor& target, const std::string& reduction = "mean", bool log_target = false);

}  // namespace tessera::nn::functional

namespace tessera::nn {
namespace F = functional;
}
