// Linear, Bilinear, Embedding, Flatten, the activation modules and Dropout. Initializations are
// PyTorch's reset_parameters().
#include "tessera/nn/layers.h"

#include <cmath>

#include "tessera/autograd.h"
#include "tessera/functions.h"
#include "tessera/nn/functional.h"
#include "tessera/nn/init.h"

namespace tessera::nn {
namespace {
const char* py_bool(bool b) { return b ? "True" : "False"; }

void check_positive(const char* module, const char* what, int64_t v) {
  TS_CHECK(v >= 0, ValueError, module, ": ", what, " must be non-negative, got ", v);
}
}  // namespace

// ---- Linear -----------------------------------------------------------------------------------------

Linear::Linear(int64_t in_features, int64_t out_features, bool bias)
    : in_features(in_features), out_features(out_features) {
  check_positive("Linear", "in_features", in_features);
  check_positive("Linear", "out_features", out_features);
  weight = empty({out_features, in_features});
  if (bias) this->bias = empty({out_features});
  register_parameter("weight", weight);
  register_parameter("bias", this->bias);
  reset_parameters();
}

void Linear::reset_parameters() {
  // kaiming_uniform(a = sqrt(5)) gives the bound 1 / sqrt(fan_in), as the bias.
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (bias.defined()) {
    const double bound = in_features > 0 ? 1.0 / std::sqrt(static_cast<double>(in_features)) : 0.0;
    init::uniform_(bias, -bound, bound);
  }
}

Tensor Linear::forward(Tensor x) {
  return functional::linear(x, weight, bias.defined() ? std::optional<Tensor>(bias) : std::nullopt);
}

std::string Linear::extra_repr() const {
  return detail::str_cat("in_features=", in_features, ", out_features=", out_features, ", bias=",
                         py_bool(bias.defined()));
}

// ---- Bilinear ---------------------------------------------------------------------------------------

Bilinear::Bilinear(int64_t in1_features, int64_t in2_features, int64_t out_features, bool bias)
    : in1_features(in1_features), in2_features(in2_features), out_features(out_features) {
  check_positive("Bilinear", "in1_features", in1_features);
  check_positive("Bilinear", "in2_features", in2_features);
  check_positive("Bilinear", "out_features", out_features);
  weight = empty({out_features, in1_features, in2_features});
  if (bias) this->bias = empty({out_features});
  register_parameter("weight", weight);
  register_parameter("bias", this->bias);
  reset_parameters();
}

void Bilinear::reset_parameters() {
  const double bound = in1_features > 0 ? 1.0 / std::sqrt(static_cast<double>(in1_features)) : 0.0;
  init::uniform_(weight, -bound, bound);
  if (bias.defined()) init::uniform_(bias, -bound, bound);
}

Tensor Bilinear::forward(const Tensor& x1, const Tensor& x2) {
  return functional::bilinear(x1, x2, weight, bias.defined() ? std::optional<Tensor>(bias) : std::nullopt);
}

std::string Bilinear::extra_repr() const {
  return detail::str_cat("in1_features=", in1_features, ", in2_features=", in2_features,
                         ", out_features=", out_features, ", bias=", py_bool(bias.defined()));
}

// ---- Embedding --------------------------------------------------------------------------------------

namespace {
std::optional<int64_t> wrap_padding_idx(std::optional<int64_t> padding_idx, int64_t n) {
  if (!padding_idx) return std::nullopt;
  TS_CHECK(*padding_idx >= -n && *padding_idx < n, ValueError, "Embedding: padding_idx (", *padding_idx,
           ") must be within num_embeddings (", n, ")");
  return *padding_idx < 0 ? *padding_idx + n : *padding_idx;
}
}  // namespace

Embedding::Embedding(int64_t num_embeddings, int64_t embedding_dim, std::optional<int64_t> padding_idx)
    : num_embeddings(num_embeddings), embedding_dim(embedding_dim) {
  check_positive("Embedding", "num_embeddings", num_embeddings);
  check_positive("Embedding", "embedding_dim", embedding_dim);
  this->padding_idx = wrap_padding_idx(padding_idx, num_embeddings);
  weight = empty({num_embeddings, embedding_dim});
  register_parameter("weight", weight);
  reset_parameters();
}

void Embedding::reset_parameters() {
  init::normal_(weight);
  if (padding_idx) {
    NoGradGuard no_grad;
    weight.select(0, *padding_idx).fill_(0);
  }
}

Embedding Embedding::from_pretrained(const Tensor& embeddings, bool freeze, std::optional<int64_t> padding_idx) {
  TS_CHECK(embeddings.defined() && embeddings.dim() == 2, ShapeError,
           "Embedding.from_pretrained: embeddings parameter is expected to be 2-dimensional");
  TS_CHECK(embeddings.is_floating_point(), DTypeError, "Embedding.from_pretrained: expected floating-point embeddings, got ",
           dtype_name(embeddings.dtype()));
  Embedding e(embeddings.size(0), embeddings.size(1), padding_idx);
  e.to(embeddings.device(), embeddings.dtype());  // keeps the given dtype, as PyTorch
  {
    NoGradGuard no_grad;
    e.weight.copy_(embeddings);
  }
  e.weight.requires_grad_(!freeze);
  return e;
}

Tensor Embedding::forward(Tensor indices) { return functional::embedding(indices, weight, padding_idx); }

std::string Embedding::extra_repr() const {
  std::string s = detail::str_cat(num_embeddings, ", ", embedding_dim);
  if (padding_idx) s += detail::str_cat(", padding_idx=", *padding_idx);
  return s;
}

// ---- shape and activation modules -----------------------------------------------------------------

std::string Flatten::extra_repr() const { return detail::str_cat("start_dim=", start_dim, ", end_dim=", end_dim); }

Tensor ReLU::forward(Tensor x) { return functional::relu(x); }

GELU::GELU(std::string approximate) : approximate(std::move(approximate)) {
  TS_CHECK(this->approximate == "none" || this->approximate == "tanh", ValueError,
           "GELU: approximate must be 'none' or 'tanh', got '", this->approximate, "'");
}
Tensor GELU::forward(Tensor x) { return functional::gelu(x, approximate); }
std::string GELU::extra_repr() const { return "approximate='" + approximate + "'"; }

Tensor SiLU::forward(Tensor x) { return functional::silu(x); }
Tensor Tanh::forward(Tensor x) { return functional::tanh(x); }
Tensor Sigmoid::forward(Tensor x) { return functional::sigmoid(x); }

Tensor Softmax::forward(Tensor x) { return functional::softmax(x, dim); }
std::string Softmax::extra_repr() const { return detail::str_cat("dim=", dim); }
Tensor LogSoftmax::forward(Tensor x) { return functional::log_softmax(x, dim); }
std::string LogSoftmax::extra_repr() const { return detail::str_cat("dim=", dim); }

Dropout::Dropout(double p, Generator* gen) : p(p), generator(gen) {
  TS_CHECK(p >= 0 && p <= 1, ValueError, "Dropout: dropout probability has to be between 0 and 1, but got ", p);
}
Tensor Dropout::forward(Tensor x) { return functional::dropout(x, p, is_training(), generator); }
std::string Dropout::extra_repr() const { return detail::str_cat("p=", p, ", inplace=False"); }

}  // namespace tessera::nn
