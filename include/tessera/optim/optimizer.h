// The optimizer base: parameter groups (each with its own options struct), step(), zero_grad(), and
// state_dict() / load_state_dict() in PyTorch's structure.
//
// Invariants: a parameter belongs to at most one group (ValueError otherwise); updates run under
// NoGradGuard and write into the parameters' storage, so Tensor handles held elsewhere (a module's
// members) see the new values; a parameter whose grad() is undefined is skipped, as in PyTorch.
// Per-parameter state (momentum_buffer, exp_avg, ...) is created on the first step that updates the
// parameter.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "tessera/tensor.h"

namespace tessera::optim {

// A hyperparameter of a parameter group seen by name, as PyTorch's group["lr"]: what the LR schedulers,
// state_dict() and load_state_dict() read and write. Points into the group's options struct.
struct OptionRef {
  const char* name = "";
  double* values = nullptr;  // `count` numbers (betas has two), or
  int count = 0;
  bool* flag = nullptr;      // a flag
};

// The per-parameter state of an optimizer.
struct ParamState {
  bool initialized = false;                // set by the first step that updates the parameter
  int64_t step = 0;                        // state "step" of the optimizers that count steps
  std::map<std::string, Tensor> buffers;   // "momentum_buffer", "exp_avg", "exp_avg_sq", ...
};

// PyTorch's optimizer state_dict {"state": ..., "param_groups": ...} in a form that goes into a
// safetensors file unchanged:
//   save_safetensors(sd.state, path, {{"param_groups", sd.param_groups}});
// `state` holds "state.<param index>.<name>" (indices count the parameters of all groups in order;
// "step" is a 0-dim float64 tensor). `param_groups` is the JSON text of PyTorch's list of group dicts:
// every option (betas as a list), scheduler values such as "initial_lr", and "params" with the indices.
// The tensors are the optimizer's own, not copies, as in PyTorch: save them before the next step.
struct OptimizerStateDict {
  std::map<std::string, Tensor> state;
  std::string param_groups;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  const std::string& name() const { return name_; }  // "SGD", "AdamW", ...

  // One update of every parameter that has a gradient, under NoGradGuard.
  void step();
  // Evaluates `closure` (with grad mode on: it recomputes the loss and calls backward), then steps.
  // Returns the closure's loss.
  Tensor step(const std::function<Tensor()>& closure);
  // Clears the gradients: undefined (set_to_none) or zero-filled.
  void zero_grad(bool set_to_none = true);

  size_t num_param_groups() const { return params_.size(); }
  const std::vector<Tensor>& params(size_t group) const;
  std::vector<Tensor> parameters() const;  // of all groups, in order

  // Options by name, as PyTorch's param_groups[g][name]: "lr", "momentum", "betas" (index 0 or 1), ...
  // Names a scheduler adds to a group ("initial_lr", "max_lr", ...) are kept with the group as well:
  // set_option creates them, and they are saved in state_dict(). get_option raises ValueError for a
  // name the group does not have.
  bool has_option(const std::string& name) const;  // an option of this optimizer's options struct
  bool has_option(size_t group, const std::string& name) const;
  double get_option(size_t group, const std::string& name, int index = 0) const;
  void set_option(size_t group, const std::string& name, double value, int index = 0);
  double lr(size_t group = 0) const { return get_option(group, "lr"); }
  void set_lr(size_t group, double lr) { set_option(group, "lr", lr); }

  // The state of a parameter of this optimizer (null when it is not one of its parameters).
  const ParamState* state(const Tensor& param) const;

  OptimizerStateDict state_dict() const;
  // Restores options and state saved by state_dict() of an optimizer with the same groups (same
  // number of groups and of parameters per group, ValueError otherwise). State tensors are copied and
  // cast to their parameter's dtype and device (except "step"); a tensor whose shape differs from its
  // parameter's raises ShapeError.
  void load_state_dict(const OptimizerStateDict& state_dict);

 protected:
  Optimizer(std::string name, bool counts_steps) : name_(std::move(name)), counts_steps_(counts_steps) {}
  // Validates a new group's parameters (leaves, floating point, not in another group) and appends them.
  void add_group_params(std::vector<Tensor> params);
  // Raises ValueError when no group has a parameter (PyTorch's "empty parameter list").
  void check_not_empty() const;
  size_t num_params() const;

  virtual std::vector<OptionRef> option_refs(size_t group) = 0;
  std::vector<OptionRef> option_refs(size_t group) const { return const_cast<Optimizer*>(this)->option_refs(group); }
  virtual void validate_group(size_t group) const = 0;  // the options' hyperparameter checks
  virtual void step_group(size_t group) = 0;           // runs under NoGradGuard
  // Called after load_state_dict() has set a parameter's state, to complete buffers it lacks.
  virtual void after_load(size_t /*group*/) {}

  std::vector<std::vector<Tensor>> params_;
  std::vector<std::vector<ParamState>> state_;
  std::vector<std::map<std::string, double>> extras_;  // scheduler values of each group

 private:
  std::string name_;
  bool counts_steps_;
};

// The typed middle: a group is (params, Options), Options a designated-initializer struct with
// `refs()` (its fields by name) and `validate(optimizer name)`.
template <class Options>
class OptimizerOf : public Optimizer {
 public:
  struct ParamGroup {
    std::vector<Tensor> params;
    Options options;
  };

  const Options& defaults() const { return defaults_; }
  Options& options(size_t group = 0) { return options_.at(group); }
  const Options& options(size_t group = 0) const { return options_.at(group); }

  // A new group with its own options (or the defaults). Raises ValueError for invalid options or a
  // parameter already in a group.
  void add_param_group(std::vector<Tensor> params) { add_param_group(ParamGroup{std::move(params), defaults_}); }
  void add_param_group(ParamGroup group) {
    group.options.validate(name().c_str());
    add_group_params(std::move(group.params));
    options_.push_back(group.options);
    on_add_group(params_.size() - 1);
  }

 protected:
  OptimizerOf(std::string name, bool counts_steps, std::vector<ParamGroup> groups, Options defaults)
      : Optimizer(std::move(name), counts_steps), defaults_(defaults) {
    defaults_.validate(this->name().c_str());
    for (auto& g : groups) add_param_group(std::move(g));
    check_not_empty();
  }
  static std::vector<ParamGroup> one_group(std::vector<Tensor> params, const Options& options) {
    std::vector<ParamGroup> groups;
    groups.push_back(ParamGroup{std::move(params), options});
    return groups;
  }
  std::vector<OptionRef> option_refs(size_t group) override { return options_.at(group).refs(); }
  void validate_group(size_t group) const override { options_.at(group).validate(name().c_str()); }
  virtual void on_add_group(size_t /*group*/) {}

  Options defaults_;
  std::vector<Options> options_;
};

}  // namespace tessera::optim
