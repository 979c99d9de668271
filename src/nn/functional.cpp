// nn::functional: activations, dropout, linear, bilinear and embedding, composed of tessera ops.
#include "tessera/nn/functional.h"

#include "ops/autocast_hook.h"
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

Tensor bilinear(const Tensor& x1, const Tensor& x2, const Tensor& weight, const std::optional<Tensor>& bias) {
  if (autocast_pending()) [[unlikely]]
    if (AutocastArgs c(OpId::bilinear, {&x1, &x2, &weight, bias ? &*bias : nullptr}); c) return bilinear(c[0], c[1], c[2], c.opt(3));
  const char* op = "bilinear";
  TS_CHECK(x1.defined() && x2.defined() && weight.defined(), ValueError, op, ": got an undefined tensor");
  TS_CHECK(weight.dim() == 3, ShapeError, op, ": weight must be 3-D (out, in1, in2), got shape ", weight.sizes());
  TS_CHECK(x1.dim() >= 1 && x2.dim() == x1.dim(), ShapeError, op, ": input1 and input2 must have the same number of "
           "dims (at least 1), got ", x1.sizes(), " and ", x2.sizes());
  TS_CHECK(Shape(x1.sizes().begin(), x1.sizes().end() - 1) == Shape(x2.sizes().begin(), x2.sizes().end() - 1),
           ShapeError, op, ": input1 and input2 must have the same batch dims, got ", x1.sizes(), " and ", x2.sizes());
  const int64_t out = weight.size(0), in1 = weight.size(1), in2 = weight.size(2);
  TS_CHECK(x1.size(-1) == in1, ShapeError, op, ": input1's last dim (", x1.size(-1), ") must match weight.size(1) (",
           in1, ")");
  TS_CHECK(x2.size(-1) == in2, ShapeError, op, ": input2's last dim (", x2.size(-1), ") must match weight.size(2) (",
           in2, ")");
  Shape batch(x1.sizes().begin(), x1.sizes().end() - 1);
  const int64_t rows = numel_of(batch);
  Tensor a = x1.reshape({rows, in1});  // (B, in1)
  Tensor b = x2.reshape({rows, in2});  // (B, in2)
  // (B, in1) @ (in1, out * in2) -> (B, out, in2), then contract in2 with x2.
  Tensor w = weight.permute({1, 0, 2}).reshape({in1, out * in2});
  Tensor t = matmul(a, w).view({rows, out, in2});
  Tensor y = matmul(t, b.unsqueeze(-1)).squeeze(-1);  // (B, out)
  if (bias && bias->defined()) y = y + *bias;
  batch.push_back(out);
  return y.reshape(batch);
}

Tensor embedding(const Tensor& indices, const Tensor& weight, std::optional<int64_t> padding_idx) {
  return tessera::embedding(weight, indices, padding_idx);
}

}  // namespace tessera::nn::functional
