// Basic layers: Linear, Bilinear, Embedding, Identity, Flatten, the activations and Dropout.
// Parameters are public members named as PyTorch's attributes (weight, bias) and initialized as
// PyTorch's reset_parameters() does; constructor arguments follow PyTorch's positional order.
#pragma once
#include <optional>
#include <string>

#include "tessera/generator.h"
#include "tessera/nn/module.h"

namespace tessera::nn {

// y = x W^T + b. weight (out_features, in_features) ~ U(-1/sqrt(in), 1/sqrt(in)) (kaiming_uniform
// with a = sqrt(5)); bias the same bound.
class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true);
  Tensor forward(Tensor x) override;
  void reset_parameters();
  std::string extra_repr() const override;

  int64_t in_features, out_features;
  Tensor weight, bias;
};

// y_o = x1^T W_o x2 + b_o. weight (out, in1, in2), bias (out), both U(-1/sqrt(in1), 1/sqrt(in1)).
class Bilinear : public Module {
 public:
  Bilinear(int64_t in1_features, int64_t in2_features, int64_t out_features, bool bias = true);
  Tensor forward(const Tensor& x1, const Tensor& x2);
  // forward with the module's hooks (args: x1, x2).
  Tensor operator()(const Tensor& x1, const Tensor& x2) {
    return call_with_hooks({x1, x2}, [this](const std::vector<Tensor>& a) { return std::vector<Tensor>{forward(a[0], a[1])}; })[0];
  }
  void reset_parameters();
  std::string extra_repr() const override;

  int64_t in1_features, in2_features, out_features;
  Tensor weight, bias;

 private:
  using Module::forward;  // forward(input) raises: Bilinear takes two inputs (private: not callable)
};

// A lookup table: weight (num_embeddings, embedding_dim) ~ N(0, 1), the padding_idx row zero (and
// it takes no gradient). A negative padding_idx counts from the end.
class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim, std::optional<int64_t> padding_idx = std::nullopt);
  // Wraps `embeddings` (copied); freeze: it does not require grad.
  static Embedding from_pretrained(const Tensor& embeddings, bool freeze = true,
                                   std::optional<int64_t> padding_idx = std::nullopt);
  Tensor forward(Tensor indices) override;
  void reset_parameters();
  std::string extra_repr() const override;

  int64_t num_embeddings, embedding_dim;
  std::optional<int64_t> padding_idx;
  Tensor weight;
};

class Identity : public Module {
 public:
  Tensor forward(Tensor x) override { return x; }
};

class Flatten : public Module {
 public:
  explicit Flatten(int64_t start_dim = 1, int64_t end_dim = -1) : start_dim(start_dim), end_dim(end_dim) {}
  Tensor forward(Tensor x) override { return x.flatten(start_dim, end_dim); }
  std::string extra_repr() const override;
  int64_t start_dim, end_dim;
};

class ReLU : public Module {
 public:
  Tensor forward(Tensor x) override;
};

class GELU : public Module {
 public:
  explicit GELU(std::string approximate = "none");  // "none" (erf) or "tanh"
  Tensor forward(Tensor x) override;
  std::string extra_repr() const override;
  std::string approximate;
};

class SiLU : public Module {
 public:
  Tensor forward(Tensor x) override;
};

class Tanh : public Module {
 public:
  Tensor forward(Tensor x) override;
};

class Sigmoid : public Module {
 public:
  Tensor forward(Tensor x) override;
};

class Softmax : public Module {
 public:
  explicit Softmax(int64_t dim) : dim(dim) {}
  Tensor forward(Tensor x) override;
  std::string extra_repr() const override;
  int64_t dim;
};

class LogSoftmax : public Module {
 public:
  explicit LogSoftmax(int64_t dim) : dim(dim) {}
  Tensor forward(Tensor x) override;
  std::string extra_repr() const override;
  int64_t dim;
};

// Inverted dropout, active in training mode only. gen: the Philox generator to draw from (the
// device's default when null); it must outlive the module.
class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5, Generator* gen = nullptr);
  Tensor forward(Tensor x) override;
  std::string extra_repr() const override;
  double p;
  Generator* generator;
};

}  // namespace tessera::nn
