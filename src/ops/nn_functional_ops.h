// The ops of the table behind nn::functional's compositions: losses (loss_functional.cpp), the
// functional norms (norm_functional.cpp), scaled_dot_product_attention (attention_functional.cpp),
// bilinear (bilinear.cpp) and dropout (dropout.cpp). Each opens its OpScope, so that the profiler and
// the tracer see it as one op with its parts inside. The public spellings, with their defaults and
// documentation, are in include/tessera/nn/functional.h; src/nn/functional.cpp forwards to these, so
// that the op layer does not depend on nn.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <tuple>

#include "tessera/generator.h"
#include "tessera/tensor.h"

namespace tessera::op {

Tensor dropout(const Tensor& x, double p, bool training, Generator* gen);
Tensor bilinear(const Tensor& x1, const Tensor& x2, const Tensor& weight, const std::optional<Tensor>& bias);

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const std::optional<Tensor>& weight,
                  const std::optional<Tensor>& bias, double eps);
std::tuple<Tensor, Tensor> add_layer_norm(const Tensor& x, const Tensor& residual, const Shape& normalized_shape,
                                          const std::optional<Tensor>& weight, const std::optional<Tensor>& bias,
                                          double eps);
Tensor group_norm(const Tensor& x, int64_t num_groups, const std::optional<Tensor>& weight,
                  const std::optional<Tensor>& bias, double eps);
Tensor rms_norm(const Tensor& x, const Shape& normalized_shape, const std::optional<Tensor>& weight,
                std::optional<double> eps);
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const std::optional<Tensor>& weight, const std::optional<Tensor>& bias, bool training,
                  double momentum, double eps);

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const std::optional<Tensor>& attn_mask, double dropout_p, bool is_causal,
                                    std::optional<double> scale, Generator* gen);

Tensor cross_entropy(const Tensor& input, const Tensor& target, const std::optional<Tensor>& weight,
                     int64_t ignore_index, const std::string& reduction, double label_smoothing);
Tensor nll_loss(const Tensor& input, const Tensor& target, const std::optional<Tensor>& weight, int64_t ignore_index,
                const std::string& reduction);
Tensor mse_loss(const Tensor& input, const Tensor& target, const std::string& reduction);
Tensor l1_loss(const Tensor& input, const Tensor& target, const std::string& reduction);
Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, const std::string& reduction, double beta);
Tensor huber_loss(const Tensor& input, const Tensor& target, const std::string& reduction, double delta);
Tensor binary_cross_entropy(const Tensor& input, const Tensor& target, const std::optional<Tensor>& weight,
                            const std::string& reduction);
Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target, const std::optional<Tensor>& weight,
                                        const std::string& reduction, const std::optional<Tensor>& pos_weight);
Tensor kl_div(const Tensor& input, const Tensor& target, const std::string& reduction, bool log_target);

}  // namespace tessera::op
