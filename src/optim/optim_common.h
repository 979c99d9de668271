// Helpers shared by the optimizers: collecting the parameters that have gradients, batching fused
// calls per device, and option references.
#pragma once
#include <string>
#include <vector>

#include "ops/optim_ops.h"
#include "tessera/optim/optimizer.h"
#include "tessera/tensor.h"

namespace tessera::optim::detail {

inline OptionRef number(const char* name, double& v) { return OptionRef{name, &v, 1, nullptr}; }
inline OptionRef numbers(const char* name, double* v, int count) { return OptionRef{name, v, count, nullptr}; }
inline OptionRef flag(const char* name, bool& v) { return OptionRef{name, nullptr, 0, &v}; }

// A parameter of a group that has a gradient (PyTorch skips the others), its position in the group,
// and the gradient, checked to match the parameter's sizes, dtype and device.
struct GradParam {
  size_t index;
  Tensor param;
  Tensor grad;
};
std::vector<GradParam> params_with_grad(const std::string& optimizer, const std::vector<Tensor>& params);

// The state buffer `name`, made contiguous in place (a buffer made by the composite path from a
// strided gradient may not be), for a fused kernel.
Tensor& contiguous_buffer(ParamState& state, const std::string& name);

// Indices of `devices` grouped by device, in first-seen order: one fused call per device.
std::vector<std::vector<size_t>> by_device(const std::vector<Device>& devices);

}  // namespace tessera::optim::detail
