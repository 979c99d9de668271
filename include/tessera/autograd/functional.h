// Functional autograd, as torch.autograd.functional: Jacobians, Hessians and their products with
// vectors, of functions of tensors (src/autograd/functional.cpp).
//
// Shared conventions (PyTorch's):
// - `fn` takes the inputs and returns its outputs; a function of several outputs returns them all
//   (vector-valued functions of any shape).
// - The inputs are detached inside (the results do not reach the caller's graph) unless
//   create_graph is true, in which case results stay differentiable with respect to inputs that
//   require grad (higher derivatives).
// - An output that does not depend on an input contributes zeros; with strict = true it raises
//   ValueError instead, naming the input.
// - jvp and hvp use the double-backward trick (reverse mode twice), as PyTorch does.
// - vectorize = true: the Jacobian's rows (a Hessian's outer Jacobian's) in one backward pass over a
//   batch of grad_outputs (autograd::grad's is_grads_batched, where PyTorch uses vmap); the same
//   values as vectorize = false. Not with strict (PyTorch's refusal).
// - strategy = "forward-mode" (jacobian; outer_jacobian_strategy for hessian) needs vectorize, and
//   refuses create_graph and strict, as PyTorch. tessera has no forward-mode AD: the columns come from
//   the double-backward trick over a batch of directions, so they equal forward mode's, at the cost
//   of two reverse passes instead of one forward pass.
#pragma once
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "tessera/tensor.h"

namespace tessera::autograd::functional {

using Fn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;
using ScalarFn = std::function<Tensor(const std::vector<Tensor>&)>;

// J[i][j] = d outputs[i] / d inputs[j], of shape outputs[i].sizes() + inputs[j].sizes().
std::vector<std::vector<Tensor>> jacobian(const Fn& fn, const std::vector<Tensor>& inputs, bool create_graph = false,
                                          bool strict = false, bool vectorize = false,
                                          const std::string& strategy = "reverse-mode");
// One input, one output: shape output.sizes() + input.sizes().
Tensor jacobian(const std::function<Tensor(const Tensor&)>& fn, const Tensor& input, bool create_graph = false,
                bool strict = false, bool vectorize = false, const std::string& strategy = "reverse-mode");

// H[i][j] = d^2 fn / d inputs[i] d inputs[j] of a function returning one element, shape
// inputs[i].sizes() + inputs[j].sizes().
std::vector<std::vector<Tensor>> hessian(const ScalarFn& fn, const std::vector<Tensor>& inputs, bool create_graph = false,
                                         bool strict = false, bool vectorize = false,
                                         const std::string& outer_jacobian_strategy = "reverse-mode");
Tensor hessian(const std::function<Tensor(const Tensor&)>& fn, const Tensor& input, bool create_graph = false,
               bool strict = false, bool vectorize = false,
               const std::string& outer_jacobian_strategy = "reverse-mode");

// (outputs, v^T J): v has one tensor per output (may be empty when fn returns one single-element
// tensor); the result has one tensor per input.
std::pair<std::vector<Tensor>, std::vector<Tensor>> vjp(const Fn& fn, const std::vector<Tensor>& inputs,
                                                        const std::vector<Tensor>& v = {}, bool create_graph = false,
                                                        bool strict = false);
// (outputs, J v): v has one tensor per input (may be empty when there is one single-element input);
// the result has one tensor per output.
std::pair<std::vector<Tensor>, std::vector<Tensor>> jvp(const Fn& fn, const std::vector<Tensor>& inputs,
                                                        const std::vector<Tensor>& v = {}, bool create_graph = false,
                                                        bool strict = false);
// (output, v^T H) and (output, H v) of a function returning one element; v has one tensor per input.
std::pair<Tensor, std::vector<Tensor>> vhp(const ScalarFn& fn, const std::vector<Tensor>& inputs,
                                           const std::vector<Tensor>& v = {}, bool create_graph = false,
                                           bool strict = false);
std::pair<Tensor, std::vector<Tensor>> hvp(const ScalarFn& fn, const std::vector<Tensor>& inputs,
                                           const std::vector<Tensor>& v = {}, bool create_graph = false,
                                           bool strict = false);

}  // namespace tessera::autograd::functional
