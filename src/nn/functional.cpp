// nn::functional: activations, dropout, linear and embedding, composed of tessera ops (bilinear is an op
// of the table: src/ops/bilinear.cpp).
#include "tessera/nn/functional.h"

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

Tensor dropout(const Tensor& x, double p, bool training, Generator* gen) {
  TS_CHECK(p >= 0 && p <= 1, ValueError, "dropout: dropout probability has to be between 0 and 1, but got ", p);
  TS_CHECK(x.defined(), ValueError, "dropout: got an undefined input");
  if (!training || p == 0) return x;
  TS_CHECK(x.is_floating_point(), DTypeError, "dropout: expected a floating-point input, got ", dtype_name(x.dtype()));
  if (p == 1) return x * zeros_like(x);  // keeps the graph (and NaN/Inf propagation) of x * 0
  // Inverted dropout: the kept elements are scaled now, so evaluation needs no rescaling.
  // The keep probability as x's dtype holds it (what bernoulli(full_like(x, 1 - p)) would compare
  // against), drawn with the scalar-p kernel: no probability tensor to validate, so no device sync.
  const double keep_p = full({}, 1.0 - p, TensorOptions(x.dtype())).item<double>();
  Tensor keep = empty_like(x).bernoulli_(keep_p, gen);
  return x * keep * (1.0 / (1.0 - p));
}

Tensor linear(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias) {
  return tessera::linear(x, weight, bias);
}

Tensor embedding(const Tensor& indices, const Tensor& weight, std::optional<int64_t> padding_idx) {
  return tessera::embedding(weight, indices, padding_idx);
}

}  // namespace tessera::nn::functional
