// Learning-rate schedulers with PyTorch's semantics and values: each computes the same float64 learning
// rates as torch.optim.lr_scheduler (the chainable form on step(), the closed form where SequentialLR
// restarts a scheduler at a milestone), in the same order of operations.
//
// Use: construct after the optimizer (the constructor performs PyTorch's initial step, which sets each
// group's "initial_lr" and the epoch-0 learning rate); call step() after each optimizer.step(). A
// scheduler holds a reference to its optimizer, which must outlive it; SequentialLR and
// ChainedScheduler hold pointers to their schedulers, which must outlive them too.
// state_dict() is a JSON text of the scheduler's mutable state (last_epoch, _step_count, base_lrs,
// _last_lr, and the nested schedulers' states); hyperparameters come from the constructor.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/optim/optimizer.h"

namespace tessera::optim {

class LRScheduler {
 public:
  virtual ~LRScheduler() = default;
  LRScheduler(const LRScheduler&) = delete;
  LRScheduler& operator=(const LRScheduler&) = delete;

  virtual void step();
  const std::vector<double>& get_last_lr() const { return last_lr_; }
  int64_t last_epoch() const { return last_epoch_; }
  Optimizer& optimizer() const { return *optimizer_; }

  virtual std::string state_dict() const;
  virtual void load_state_dict(const std::string& state_dict);

 protected:
  // Sets each group's "initial_lr" (unless present) and base_lrs; the derived constructor then calls
  // initial_step().
  explicit LRScheduler(Optimizer& optimizer, const char* name);
  LRScheduler(Optimizer& optimizer, const char* name, bool no_base);  // SequentialLR, ChainedScheduler
  void initial_step();
  // PyTorch's step(epoch): sets last_epoch and uses the closed form where there is one.
  void step_to(int64_t epoch);
  void apply(const std::vector<double>& lrs);
  std::vector<double> group_lrs() const;

  virtual std::vector<double> get_lr() = 0;  // the chainable form, at last_epoch_
  virtual bool has_closed_form() const { return false; }
  virtual std::vector<double> closed_form_lr() const { return {}; }

  Optimizer* optimizer_;
  std::string name_;
  std::vector<double> base_lrs_;
  std::vector<double> last_lr_;
  int64_t last_epoch_ = -1;
  int64_t step_count_ = 0;

  friend class SequentialLR;
};

// lr *= gamma every step_size epochs.
class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1);

 protected:
  std::vector<double> get_lr() override;
  bool has_closed_form() const override { return true; }
  std::vector<double> closed_form_lr() const override;

 private:
  int64_t step_size_;
  double gamma_;
};

// lr *= gamma at each milestone (a milestone given twice multiplies by gamma^2).
class MultiStepLR : public LRScheduler {
 public:
  MultiStepLR(Optimizer& optimizer, std::vector<int64_t> milestones, double gamma = 0.1);

 protected:
  std::vector<double> get_lr() override;
  bool has_closed_form() const override { return true; }
  std::vector<double> closed_form_lr() const override;

 private:
  std::vector<int64_t> milestones_;  // sorted, with repeats
  double gamma_;
};

// lr *= gamma every epoch.
class ExponentialLR : public LRScheduler {
 public:
  ExponentialLR(Optimizer& optimizer, double gamma);

 protected:
  std::vector<double> get_lr() override;
  bool has_closed_form() const override { return true; }
  std::vector<double> closed_form_lr() const override;

 private:
  double gamma_;
};

// Cosine annealing from the base lr to eta_min over T_max epochs (then back up, as PyTorch's
// recursive form does past T_max).
class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min = 0);

 protected:
  std::vector<double> get_lr() override;
  bool has_closed_form() const override { return true; }
  std::vector<double> closed_form_lr() const override;

 private:
  int64_t T_max_;
  double eta_min_;
};

// Linear warm-up (or decay) of the multiplicative factor from start_factor to end_factor over
// total_iters epochs.
class LinearLR : public LRScheduler {
 public:
  LinearLR(Optimizer& optimizer, double start_factor = 1.0 / 3, double end_factor = 1.0, int64_t total_iters = 5);

 protected:
  std::vector<double> get_lr() override;
  bool has_closed_form() const override { return true; }
  std::vector<double> closed_form_lr() const override;

 private:
  double start_factor_, end_factor_;
  int64_t total_iters_;
};

// The 1cycle policy (Smith & Topin). max_lr has one value, or one per group. With cycle_momentum the
// optimizer's "momentum" (SGD, RMSprop) or beta1 (Adam, AdamW) cycles between max_momentum and
// base_momentum inversely to the lr.
struct OneCycleLROptions {
  std::vector<double> max_lr;           // required: one value, or one per group
  int64_t total_steps = 0;              // required (> 0)
  double pct_start = 0.3;
  std::string anneal_strategy = "cos";  // "cos" or "linear"
  bool cycle_momentum = true;
  double base_momentum = 0.85;
  double max_momentum = 0.95;
  double div_factor = 25.0;
  double final_div_factor = 1e4;
  bool three_phase = false;
};

class OneCycleLR : public LRScheduler {
 public:
  OneCycleLR(Optimizer& optimizer, OneCycleLROptions options);

 protected:
  std::vector<double> get_lr() override;

 private:
  struct Phase {
    double end_step;
    const char *start_lr, *end_lr, *start_momentum, *end_momentum;
  };
  double anneal(double start, double end, double pct) const;
  OneCycleLROptions options_;
  std::vector<Phase> phases_;
  bool use_beta1_ = false;
};

// Runs schedulers[0] until milestones[0], then schedulers[1] (restarted at epoch 0), and so on.
class SequentialLR : public LRScheduler {
 public:
  SequentialLR(Optimizer& optimizer, std::vector<LRScheduler*> schedulers, std::vector<int64_t> milestones);
  void step() override;
  std::string state_dict() const override;
  void load_state_dict(const std::string& state_dict) override;

 protected:
  std::vector<double> get_lr() override { return last_lr_; }

 private:
  std::vector<LRScheduler*> schedulers_;
  std::vector<int64_t> milestones_;
};

// Steps every scheduler each step (their factors multiply, as PyTorch's chainable forms do).
class ChainedScheduler : public LRScheduler {
 public:
  explicit ChainedScheduler(std::vector<LRScheduler*> schedulers);
  void step() override;
  std::string state_dict() const override;
  void load_state_dict(const std::string& state_dict) override;

 protected:
  std::vector<double> get_lr() override { return last_lr_; }

 private:
  std::vector<LRScheduler*> schedulers_;
};

}  // namespace tessera::optim
