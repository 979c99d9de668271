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
// Not provided: PyTorch's vectorize=True (vmap over the seeds) and strategy="forward-mode".
#pragma once
#include <functional>
#include <utility>
#include <vector>

#include "tessera/tensor.h"

namespace tessera::autograd::functional {

using Fn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;
using ScalarFn = std::function<Tensor(const std::vector<Tensor>&)>;

// J[i][j] = d outputs[i] / d inputs[j], of shape outputs[i].sizes() + inputs[j].sizes().
std::vector<std::vector<Tensor>> jacobian(const Fn& fn, const std::vector<Tensor>& inputs, bool create_graph = false,
                                          bool strict = false);
// One input, one output: shape output.sizes() + input.sizes().
Tensor jacobian(const std::function<Tensor(const Tensor&)>& fn, const Tensor& input, bool create_graph = false,
                bool strict = false);

// H[i][j] = d^2 fn / d inputs[i] d inputs[j] of a function returning one element, shape
// inputs[i].sizes() + inputs[j].sizes().
std::vector<std::vector<Tensor>> hessian(const ScalarFn& fn, const std::vector<Tensor>& inputs, bool create_graph = false,
                                         bool strict = false);
Tensor hessian(const std::function<Tensor(const Tensor&)>& fn, const Tensor& input, bool create_graph = false,
               bool strict = false);

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
