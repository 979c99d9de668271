// Autograd beyond the Tensor methods: grad-mode guards, autograd::grad and backward on several
// roots, anomaly mode, custom functions, and gradcheck.
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tessera/tensor.h"

namespace tessera {

bool is_grad_enabled();
void set_grad_enabled(bool enabled);

// Scope guards: `{ ts::NoGradGuard g; ... }` as `with torch.no_grad():`.
class NoGradGuard {
 public:
  NoGradGuard() : prev_(is_grad_enabled()) { set_grad_enabled(false); }
  ~NoGradGuard() { set_grad_enabled(prev_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};
class EnableGradGuard {
 public:
  EnableGradGuard() : prev_(is_grad_enabled()) { set_grad_enabled(true); }
  ~EnableGradGuard() { set_grad_enabled(prev_); }
  EnableGradGuard(const EnableGradGuard&) = delete;
  EnableGradGuard& operator=(const EnableGradGuard&) = delete;

 private:
  bool prev_;
};

// A node of the backward graph: the derivative of one recorded op call.
class Node {
 public:
  virtual ~Node() = default;
  virtual std::string name() const = 0;  // "AddBackward", as PyTorch names them
  // The nodes this one sends gradients to (null where an input needs no gradient).
  virtual std::vector<std::shared_ptr<Node>> next_functions() const = 0;
};

namespace autograd {

// Gradients of `outputs` with respect to `inputs` (returned, not accumulated into .grad()).
// grad_outputs default to ones for scalar outputs. retain_graph defaults to create_graph.
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {}, std::optional<bool> retain_graph = std::nullopt,
                         bool create_graph = false, bool allow_unused = false);
// Accumulates gradients of several roots into the leaves' .grad().
void backward(const std::vector<Tensor>& tensors, const std::vector<Tensor>& grad_tensors = {},
              std::optional<bool> retain_graph = std::nullopt, bool create_graph = false);

// Anomaly mode: after each backward node, check its gradients; the first NaN or Inf raises ValueError
// naming the node (and so the forward op) that produced it.
void set_detect_anomaly(bool enabled);
bool is_anomaly_enabled();
class DetectAnomalyGuard {
 public:
  DetectAnomalyGuard() : prev_(is_anomaly_enabled()) { set_detect_anomaly(true); }
  ~DetectAnomalyGuard() { set_detect_anomaly(prev_); }

 private:
  bool prev_;
};

// Finite-difference checks in float64 (central differences). Inputs that require grad are checked.
struct GradcheckOptions {
  double eps = 1e-6;
  double atol = 1e-5;
  double rtol = 1e-3;
};
using GradcheckFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;
// Returns true when every analytical Jacobian entry matches the numerical one; otherwise false, with
// the first mismatches described in `report` when given.
bool gradcheck(const GradcheckFn& fn, const std::vector<Tensor>& inputs, GradcheckOptions opts = {},
               std::string* report = nullptr);
// The same for the gradient of the gradient (create_graph through the backward formulas).
bool gradgradcheck(const GradcheckFn& fn, const std::vector<Tensor>& inputs, GradcheckOptions opts = {},
                   std::string* report = nullptr);

}  // namespace autograd
}  // namespace tessera
