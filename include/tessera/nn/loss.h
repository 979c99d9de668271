// Loss modules over nn::functional's losses. Options are aggregates, so that PyTorch's keyword
// arguments read the same: `nn::CrossEntropyLoss loss({.ignore_index = 0, .label_smoothing = 0.1});`.
// Class weights (and pos_weight) are registered as buffers named as PyTorch's, so they move with
// to() and appear in state_dict.
#pragma once
#include <optional>
#include <string>

#include "tessera/nn/module.h"

namespace tessera::nn {

// A loss: forward(input, target).
class Loss : public Module {
 public:
  virtual Tensor forward(const Tensor& input, const Tensor& target) = 0;
  // forward with the module's hooks (args: input, target).
  Tensor operator()(const Tensor& input, const Tensor& target) {
    return call_with_hooks({input, target},
                           [this](const std::vector<Tensor>& a) { return std::vector<Tensor>{forward(a[0], a[1])}; })[0];
  }
  std::string extra_repr() const override;
  std::string reduction;  // "none", "mean", "sum" ("batchmean" for KLDivLoss)

 protected:
  explicit Loss(std::string reduction, bool batchmean_ok = false);

 private:
  using Module::forward;  // forward(input) raises: a loss takes input and target (private)
};

struct CrossEntropyLossOptions {
  std::optional<Tensor> weight;
  int64_t ignore_index = -100;
  std::string reduction = "mean";
  double label_smoothing = 0.0;
};
class CrossEntropyLoss : public Loss {
 public:
  explicit CrossEntropyLoss(CrossEntropyLossOptions opts = {});
  Tensor forward(const Tensor& input, const Tensor& target) override;
  Tensor weight;
  int64_t ignore_index;
  double label_smoothing;
};

struct NLLLossOptions {
  std::optional<Tensor> weight;
  int64_t ignore_index = -100;
  std::string reduction = "mean";
};
class NLLLoss : public Loss {
 public:
  explicit NLLLoss(NLLLossOptions opts = {});
  Tensor forward(const Tensor& input, const Tensor& target) override;
  Tensor weight;
  int64_t ignore_index;
};

class MSELoss : public Loss {
 public:
  explicit MSELoss(std::string reduction = "mean") : Loss(std::move(reduction)) {}
  Tensor forward(const Tensor& input, const Tensor& target) override;
};

class L1Loss : public Loss {
 public:
  explicit L1Loss(std::string reduction = "mean") : Loss(std::move(reduction)) {}
  Tensor forward(const Tensor& input, const Tensor& target) override;
};

class SmoothL1Loss : public Loss {
 public:
  explicit SmoothL1Loss(std::string reduction = "mean", double beta = 1.0);
  Tensor forward(const Tensor& input, const Tensor& target) override;
  double beta;
};

class HuberLoss : public Loss {
 public:
  explicit HuberLoss(std::string reduction = "mean", double delta = 1.0);
  Tensor forward(const Tensor& input, const Tensor& target) override;
  double delta;
};

struct BCELossOptions {
  std::optional<Tensor> weight;
  std::string reduction = "mean";
};
class BCELoss : public Loss {
 public:
  explicit BCELoss(BCELossOptions opts = {});
  Tensor forward(const Tensor& input, const Tensor& target) override;
  Tensor weight;
};

struct BCEWithLogitsLossOptions {
  std::optional<Tensor> weight;
  std::string reduction = "mean";
  std::optional<Tensor> pos_weight;
};
class BCEWithLogitsLoss : public Loss {
 public:
  explicit BCEWithLogitsLoss(BCEWithLogitsLossOptions opts = {});
  Tensor forward(const Tensor& input, const Tensor& target) override;
  Tensor weight, pos_weight;
};

class KLDivLoss : public Loss {
 public:
  explicit KLDivLoss(std::string reduction = "mean", bool log_target = false);
  Tensor forward(const Tensor& input, const Tensor& target) override;
  bool log_target;
};

}  // namespace tessera::nn
