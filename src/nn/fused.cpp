// nn::functional's fused ops of a transformer (include/tessera/nn/functional.h): thin entries over the
// ops of ops/fused_ops.h, which hold the checks, the kernels and the autograd records.
#include "ops/fused_ops.h"
#include "tessera/nn/functional.h"

namespace tessera::nn::functional {

Tensor linear_gelu(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias) {
  return tessera::linear_gelu(x, weight, bias);
}

Tensor mlp_gelu(const Tensor& x, const Tensor& w1, const std::optional<Tensor>& b1, const Tensor& w2,
                const std::optional<Tensor>& b2) {
  return tessera::mlp_gelu(x, w1, b1, w2, b2);
}

Tensor linear_cross_entropy(const Tensor& x, const Tensor& weight, const Tensor& target, int64_t ignore_index,
                            const std::string& reduction, int64_t chunk_rows) {
  return tessera::linear_cross_entropy(x, weight, target, ignore_index, reduction, chunk_rows);
}

}  // namespace tessera::nn::functional
