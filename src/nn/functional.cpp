// nn::functional: activations, linear and embedding over tessera's functions, and forwarders to the
// ops of the table behind the losses, norms, attention, bilinear and dropout (ops/nn_functional_ops.h).
#include "tessera/nn/functional.h"

#include "ops/nn_functional_ops.h"
#include "tessera/autograd.h"

namespace tessera::nn::functional {

Tensor relu(const Tensor& x) { return tessera::relu(x); }
Tensor gelu(const Tensor& x, const std::string& approximate) { return tessera::gelu(x, approximate); }
Tensor silu(const Tensor& x) { return tessera::silu(x); }
Tensor tanh(const Tensor& x) { return tessera::tanh(x); }
Tensor sigmoid(const Tensor& x) { return tessera::sigmoid(x); }
Tensor softmax(const Tensor& x, int64_t dim, std::optional<DType> dtype) { return tessera::softmax(x, dim, dtype); }
Tensor log_softmax(const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  return tessera::log_softmax(x, dim, dtype);
}

// The ops of the table behind these functions (ops/nn_functional_ops.h).
Tensor dropout(const Tensor& x, double p, bool training, Generator* gen) { return op::dropout(x, p, training, gen); }
Tensor bilinear(const Tensor& x1, const Tensor& x2, const Tensor& weight, const std::optional<Tensor>& bias) {
  return op::bilinear(x1, x2, weight, bias);
}
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const std::optional<Tensor>& weight,
                  const std::optional<Tensor>& bias, double eps) {
  return op::layer_norm(x, normalized_shape, weight, bias, eps);
}
std::tuple<Tensor, Tensor> add_layer_norm(const Tensor& x, const Tensor& residual, const Shape& normalized_shape,
                                          const std::optional<Tensor>& weight, const std::optional<Tensor>& bias,
                                          double eps) {
  return op::add_layer_norm(x, residual, normalized_shape, weight, bias, eps);
}
Tensor group_norm(const Tensor& x, int64_t num_groups, const std::optional<Tensor>& weight,
                  const std::optional<Tensor>& bias, double eps) {
  return op::group_norm(x, num_groups, weight, bias, eps);
}
Tensor rms_norm(const Tensor& x, const Shape& normalized_shape, const std::optional<Tensor>& weight,
                std::optional<double> eps) {
  return op::rms_norm(x, normalized_shape, weight, eps);
}
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const std::optional<Tensor>& weight, const std::optional<Tensor>& bias, bool training,
                  double momentum, double eps) {
  return op::batch_norm(x, running_mean, running_var, weight, bias, training, momentum, eps);
}
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const std::optional<Tensor>& attn_mask, double dropout_p, bool is_causal,
                                    std::optional<double> scale, Generator* gen) {
  return op::scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal, scale, gen);
}
Tensor cross_entropy(const Tensor& input, const Tensor& target, const std::optional<Tensor>& weight,
                     int64_t ignore_index, const std::string& reduction, double label_smoothing) {
  return op::cross_entropy(input, target, weight, ignore_index, reduction, label_smoothing);
}
Tensor nll_loss(const Tensor& input, const Tensor& target, const std::optional<Tensor>& weight, int64_t ignore_index,
                const std::string& reduction) {
  return op::nll_loss(input, target, weight, ignore_index, reduction);
}
Tensor mse_loss(const Tensor& input, const Tensor& target, const std::string& reduction) {
  return op::mse_loss(input, target, reduction);
}
Tensor l1_loss(const Tensor& input, const Tensor& target, const std::string& reduction) {
  return op::l1_loss(input, target, reduction);
}
Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, const std::string& reduction, double beta) {
  return op::smooth_l1_loss(input, target, reduction, beta);
}
Tensor huber_loss(const Tensor& input, const Tensor& target, const std::string& reduction, double delta) {
  return op::huber_loss(input, target, reduction, delta);
}
Tensor binary_cross_entropy(const Tensor& input, const Tensor& target, const std::optional<Tensor>& weight,
                            const std::string& reduction) {
  return op::binary_cross_entropy(input, target, weight, reduction);
}
Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target, const std::optional<Tensor>& weight,
                                        const std::string& reduction, const std::optional<Tensor>& pos_weight) {
  return op::binary_cross_entropy_with_logits(input, target, weight, reduction, pos_weight);
}
Tensor kl_div(const Tensor& input, const Tensor& target, const std::string& reduction, bool log_target) {
  return op::kl_div(input, target, reduction, log_target);
}

Tensor linear(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias) {
  return tessera::linear(x, weight, bias);
}

Tensor embedding(const Tensor& indices, const Tensor& weight, std::optional<int64_t> padding_idx) {
  return tessera::embedding(weight, indices, padding_idx);
}

}  // namespace tessera::nn::functional
