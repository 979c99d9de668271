// Helpers shared by the optimizers: collecting the parameters that have gradients, deciding whether
// a parameter can take a fused kernel, batching fused calls per device, and option references.
#pragma once
#include <string>
#include <vector>

#include "ops/kernel_slot.h"
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

// A fused kernel applies: the slot has a kernel for the parameter's device, and the parameter is a
// contiguous float32 or float64 tensor.
template <class Fn>
bool can_fuse(const KernelSlot<Fn>& slot, const Tensor& p) {
  return slot.has(p.device().type()) && p.is_contiguous() &&
         (p.dtype() == DType::Float32 || p.dtype() == DType::Float64);
}

// The state buffer `name`, made contiguous in place (a buffer made by the composite path from a
// strided gradient may not be), for a fused kernel.
Tensor& contiguous_buffer(ParamState& state, const std::string& name);

// Marks tensors a fused kernel writes as modified in place (their version counter), as PyTorch's
// in-place ops do: a graph that saved a parameter then refuses to run backward with the new values.
void bump_versions(const TensorList& tensors);

// Indices of `devices` grouped by device, in first-seen order: one fused call per device.
std::vector<std::vector<size_t>> by_device(const std::vector<Device>& devices);

}  // namespace tessera::optim::detail
