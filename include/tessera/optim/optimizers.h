// The optimizers: SGD, Adam, AdamW, RMSprop, Adagrad, with PyTorch's update rules, defaults and
// checks. Options are designated-initializer structs:
//   ts::optim::AdamW opt(net.parameters(), {.lr = 1e-3, .weight_decay = 0.01});
//   ts::optim::SGD sgd({{backbone, {.lr = 1e-3}}, {head, {.lr = 1e-2, .momentum = 0.9}}});
// SGD, Adam and AdamW run one fused kernel per parameter (one pass over its memory) where the device
// has one and the parameter is float32 or float64 and contiguous; otherwise, and with .fused = false,
// they run PyTorch's single-tensor algorithm as a composition of tessera ops. RMSprop and Adagrad are
// compositions of tessera ops.
#pragma once
#include <array>
#include <vector>

#include "tessera/optim/optimizer.h"

namespace tessera::optim {

struct SGDOptions {
  double lr = 1e-3;
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;
  bool nesterov = false;
  bool maximize = false;
  bool fused = true;
  std::vector<OptionRef> refs();
  void validate(const char* optimizer) const;
};

class SGD : public OptimizerOf<SGDOptions> {
 public:
  explicit SGD(std::vector<Tensor> params, SGDOptions options = {});
  explicit SGD(std::vector<ParamGroup> groups, SGDOptions defaults = {});

 protected:
  void step_group(size_t group) override;
};

// Adam (Kingma & Ba) with PyTorch's bias correction and eps outside the square root; weight_decay is
// L2 added to the gradient. AdamW's options are the same with decoupled decay (default 1e-2).
struct AdamOptions {
  double lr = 1e-3;
  std::array<double, 2> betas = {0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 0;
  bool amsgrad = false;
  bool maximize = false;
  bool fused = true;
  std::vector<OptionRef> refs();
  void validate(const char* optimizer) const;
};
struct AdamWOptions {
  double lr = 1e-3;
  std::array<double, 2> betas = {0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 1e-2;
  bool amsgrad = false;
  bool maximize = false;
  bool fused = true;
  std::vector<OptionRef> refs();
  void validate(const char* optimizer) const;
};

class Adam : public OptimizerOf<AdamOptions> {
 public:
  explicit Adam(std::vector<Tensor> params, AdamOptions options = {});
  explicit Adam(std::vector<ParamGroup> groups, AdamOptions defaults = {});

 protected:
  void step_group(size_t group) override;
  void after_load(size_t group) override;
};

class AdamW : public OptimizerOf<AdamWOptions> {
 public:
  explicit AdamW(std::vector<Tensor> params, AdamWOptions options = {});
  explicit AdamW(std::vector<ParamGroup> groups, AdamWOptions defaults = {});

 protected:
  void step_group(size_t group) override;
  void after_load(size_t group) override;
};

struct RMSpropOptions {
  double lr = 1e-2;
  double alpha = 0.99;
  double eps = 1e-8;
  double weight_decay = 0;
  double momentum = 0;
  bool centered = false;
  bool maximize = false;
  std::vector<OptionRef> refs();
  void validate(const char* optimizer) const;
};

class RMSprop : public OptimizerOf<RMSpropOptions> {
 public:
  explicit RMSprop(std::vector<Tensor> params, RMSpropOptions options = {});
  explicit RMSprop(std::vector<ParamGroup> groups, RMSpropOptions defaults = {});

 protected:
  void step_group(size_t group) override;
};

struct AdagradOptions {
  double lr = 1e-2;
  double lr_decay = 0;
  double weight_decay = 0;
  double initial_accumulator_value = 0;
  double eps = 1e-10;
  bool maximize = false;
  std::vector<OptionRef> refs();
  void validate(const char* optimizer) const;
};

// As PyTorch's, Adagrad creates its state ("sum" filled with initial_accumulator_value, step 0) when a
// group is added, so state_dict() holds it before the first step.
class Adagrad : public OptimizerOf<AdagradOptions> {
 public:
  explicit Adagrad(std::vector<Tensor> params, AdagradOptions options = {});
  explicit Adagrad(std::vector<ParamGroup> groups, AdagradOptions defaults = {});

 protected:
  void step_group(size_t group) override;
  void on_add_group(size_t group) override;
  void after_load(size_t group) override { on_add_group(group); }
};

}  // namespace tessera::optim
