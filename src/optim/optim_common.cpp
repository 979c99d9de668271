// Helpers shared by the optimizers (optim_common.h).
#include "optim/optim_common.h"

#include "tensor/tensor_impl.h"

namespace tessera::optim::detail {

std::vector<GradParam> params_with_grad(const std::string& optimizer, const std::vector<Tensor>& params) {
  std::vector<GradParam> out;
  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor& p = params[i];
    Tensor g = p.grad();
    if (!g.defined()) continue;
    TS_CHECK(g.sizes() == p.sizes(), ShapeError, optimizer, ": the gradient of parameter ", i, " has sizes ", g.sizes(),
             " but the parameter has sizes ", p.sizes());
    TS_CHECK(g.dtype() == p.dtype(), DTypeError, optimizer, ": the gradient of parameter ", i, " has dtype ",
             dtype_name(g.dtype()), " but the parameter has dtype ", dtype_name(p.dtype()));
    TS_CHECK(g.device() == p.device(), DeviceError, optimizer, ": the gradient of parameter ", i, " is on ",
             g.device().str(), " but the parameter is on ", p.device().str());
    // A gradient that is itself part of a graph (create_graph=True) is used as a value.
    out.push_back(GradParam{i, p, g.requires_grad() ? g.detach() : g});
  }
  return out;
}

Tensor& contiguous_buffer(ParamState& state, const std::string& name) {
  Tensor& t = state.buffers.at(name);
  if (!t.is_contiguous()) t = t.contiguous();
  return t;
}

std::vector<std::vector<size_t>> by_device(const std::vector<Device>& devices) {
  std::vector<std::vector<size_t>> out;
  std::vector<Device> keys;
  for (size_t i = 0; i < devices.size(); ++i) {
    size_t k = 0;
    while (k < keys.size() && !(keys[k] == devices[i])) ++k;
    if (k == keys.size()) {
      keys.push_back(devices[i]);
      out.emplace_back();
    }
    out[k].push_back(i);
  }
  return out;
}

}  // namespace tessera::optim::detail
