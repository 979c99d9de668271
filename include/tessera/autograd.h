// Autograd beyond the Tensor methods: grad-mode guards, autograd::grad and backward on several
// roots, anomaly mode, custom functions, and gradcheck.
#pragma once
#include <any>
#include <functional>
#include <map>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>
#include <typeinfo>
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
// is_grads_batched: dim 0 of every grad_output is a batch of vectors (the rest of its shape is the
// output's), and each result has that dim in front: a batch of vector-Jacobian products in one
// backward pass, as PyTorch's. Derivatives whose formulas take the batch as it comes run once
// (pointwise ops, views, reductions to a dim, matrix products); the others run once per vector
// inside the same pass (Note [Batched gradients] in src/autograd/graph.h).
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {}, std::optional<bool> retain_graph = std::nullopt,
                         bool create_graph = false, bool allow_unused = false, bool is_grads_batched = false);
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


// Custom functions, as torch.autograd.Function:
//   struct MyExp : ts::autograd::Function<MyExp> {
//     static Tensor forward(FunctionContext& ctx, const Tensor& x) { Tensor y = x.exp(); ctx.save_for_backward({y}); return y; }
//     static std::vector<Tensor> backward(FunctionContext& ctx, const std::vector<Tensor>& grad_outputs) {
//       return {grad_outputs[0] * ctx.saved_tensors()[0]}; }
//   };
//   Tensor y = MyExp::apply(x);
// apply() forwards all its arguments to forward(); the Tensor arguments are the function's inputs,
// others (scalars, options) are passed through and may be kept in ctx.scalars / ctx.values.
// forward returns a Tensor, a std::vector<Tensor> or a std::tuple of Tensors (several outputs), and
// apply() returns the same; backward receives one gradient per output (grad_outputs[i], zeros where
// none flowed unless set_materialize_grads(false)) and returns one gradient per Tensor argument, in
// order (undefined for an input that takes none). forward runs under no_grad; backward runs with
// grad mode = create_graph, so it is differentiable again when written with tessera ops; a class
// declaring `static constexpr bool once_differentiable = true` has its backward run under no_grad,
// and differentiating its result again raises (PyTorch's @once_differentiable). The node is named
// `Derived::name` when the class declares `static constexpr const char* name`, else
// "<ClassName>Backward".
class FunctionContext {
 public:
  FunctionContext();
  // Tensors backward needs; inputs and outputs may be saved. Unpacking in backward checks that
  // none was modified in place since (ValueError otherwise).
  void save_for_backward(std::vector<Tensor> tensors);
  // The vector is held by the context, so `const Tensor& x = ctx.saved_tensors()[0];` stays valid.
  const std::vector<Tensor>& saved_tensors() const;
  // needs_input_grad()[i]: whether Tensor argument i takes a gradient (valid in forward and backward).
  const std::vector<bool>& needs_input_grad() const;
  // In forward: inputs that forward modified in place (each must be returned as an output); their
  // history continues from this function, as an in-place op's (through the base for a view).
  void mark_dirty(std::vector<Tensor> tensors);
  // In forward: outputs that take no gradient (indices, masks); they do not require grad, and their
  // grad_outputs in backward are zeros (or undefined without materialized gradients).
  void mark_non_differentiable(std::vector<Tensor> tensors);
  // false: grad_outputs of outputs that received no gradient arrive undefined instead of as zeros.
  void set_materialize_grads(bool value);

  std::map<std::string, double> scalars;      // non-tensor arguments forward keeps for backward
  std::map<std::string, std::any> values;

  struct Impl;
  std::shared_ptr<Impl> impl_;  // shared with the graph node
};

namespace detail {
using CustomForward = std::function<std::vector<Tensor>(FunctionContext&)>;
using CustomBackward = std::vector<Tensor> (*)(FunctionContext&, const std::vector<Tensor>&);
std::vector<Tensor> apply_custom_function(std::string node_name, const std::vector<Tensor>& inputs,
                                          const CustomForward& forward, CustomBackward backward,
                                          bool once_differentiable);
// "ns::(anonymous namespace)::MyExp" -> "MyExpBackward"; "CustomFunctionBackward" if unknown.
std::string custom_node_name(const char* mangled);

template <class T>
void collect_tensor(std::vector<Tensor>& out, const T& arg) {
  if constexpr (std::is_same_v<std::decay_t<T>, Tensor>) out.push_back(arg);
}

// forward's outputs as a vector and back, for Tensor, std::vector<Tensor> and std::tuple<Tensor...>.
template <class R> struct Outputs;
template <> struct Outputs<Tensor> {
  static std::vector<Tensor> to(Tensor t) { return {std::move(t)}; }
  static Tensor from(std::vector<Tensor>&& v) { return std::move(v[0]); }
};
template <> struct Outputs<std::vector<Tensor>> {
  static std::vector<Tensor> to(std::vector<Tensor> v) { return v; }
  static std::vector<Tensor> from(std::vector<Tensor>&& v) { return std::move(v); }
};
template <class... T> struct Outputs<std::tuple<T...>> {
  static_assert((std::is_same_v<T, Tensor> && ...), "autograd::Function: forward's tuple must hold Tensors only");
  static std::vector<Tensor> to(std::tuple<T...> t) {
    return std::apply([](auto&&... x) { return std::vector<Tensor>{std::move(x)...}; }, std::move(t));
  }
  static std::tuple<T...> from(std::vector<Tensor>&& v) {
    return [&]<size_t... I>(std::index_sequence<I...>) { return std::tuple<T...>{std::move(v[I])...}; }(
        std::index_sequence_for<T...>{});
  }
};
}  // namespace detail

template <class Derived>
struct Function {
  template <class... Args>
  static auto apply(Args&&... args) {
    using R = std::decay_t<decltype(Derived::forward(std::declval<FunctionContext&>(), args...))>;
    std::vector<Tensor> inputs;
    (detail::collect_tensor(inputs, args), ...);
    std::string node_name;
    if constexpr (requires { Derived::name; }) node_name = Derived::name;
    else node_name = detail::custom_node_name(typeid(Derived).name());
    bool once = false;
    if constexpr (requires { Derived::once_differentiable; }) once = Derived::once_differentiable;
    std::vector<Tensor> outs = detail::apply_custom_function(
        std::move(node_name), inputs,
        [&](FunctionContext& ctx) { return detail::Outputs<R>::to(Derived::forward(ctx, args...)); },
        &Derived::backward, once);
    return detail::Outputs<R>::from(std::move(outs));
  }
};

}  // namespace autograd
}  // namespace tessera

#include "tessera/autograd/functional.h"  // autograd::functional: jacobian, hessian, vjp, jvp, vhp, hvp
#include "tessera/autograd/graph.h"       // autograd::graph: saved_tensors_hooks, save_on_cpu
