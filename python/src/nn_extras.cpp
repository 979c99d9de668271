// tessera._C._nn_init and _nn_utils: torch.nn.init (fills in place under no_grad, returning the tensor
// given) and torch.nn.utils' gradient clipping, over tessera::nn::init and tessera::nn::utils
// (re-exported by tessera/nn/init.py and tessera/nn/utils.py).
#include "bindings.h"

namespace tessera::python {
namespace {

using Release = py::call_guard<py::gil_scoped_release>;

// A parameter list as torch.nn.utils takes it: one tensor or an iterable of them.
std::vector<Tensor> tensors_of(py::handle params) {
  if (is_tensor(params)) return {params.cast<Tensor>()};
  std::vector<Tensor> out;
  for (auto p : py::iter(params)) out.push_back(p.cast<Tensor>());
  return out;
}

// Runs `fill` on the tensor of `self` with the GIL released and returns `self`, the same Python object,
// as torch.nn.init's functions do.
template <class Fill>
py::object fill_in_place(py::object self, Fill fill) {
  Tensor t = self.cast<Tensor>();
  {
    py::gil_scoped_release r;
    fill(t);
  }
  return self;
}

}  // namespace

void init_nn_extras(py::module_& m) {
  namespace I = nn::init;
  py::module_ init = m.def_submodule("_nn_init", "torch.nn.init");
  init.def("calculate_gain", &I::calculate_gain, py::arg("nonlinearity"), py::arg("param") = py::none());
  init.def("_calculate_fan_in_and_fan_out", &I::calculate_fan_in_and_fan_out, py::arg("tensor"));
  // Each fill: (tensor, its arguments) -> the same tensor, filled in place.
#define TS_PY_FILL(name, params, call, ...)                                                       \
  init.def(#name, [] params { return fill_in_place(self, [&](Tensor& t) { call; }); }, py::arg("tensor"), \
           ##__VA_ARGS__)
  TS_PY_FILL(uniform_, (py::object self, double a, double b, Generator* g), I::uniform_(t, a, b, g),
             py::arg("a") = 0.0, py::arg("b") = 1.0, py::arg("generator") = nullptr);
  TS_PY_FILL(normal_, (py::object self, double mean, double std, Generator* g), I::normal_(t, mean, std, g),
             py::arg("mean") = 0.0, py::arg("std") = 1.0, py::arg("generator") = nullptr);
  TS_PY_FILL(trunc_normal_, (py::object self, double mean, double std, double a, double b, Generator* g),
             I::trunc_normal_(t, mean, std, a, b, g), py::arg("mean") = 0.0, py::arg("std") = 1.0, py::arg("a") = -2.0,
             py::arg("b") = 2.0, py::arg("generator") = nullptr);
  TS_PY_FILL(constant_, (py::object self, double v), I::constant_(t, v), py::arg("val"));
  TS_PY_FILL(ones_, (py::object self), I::ones_(t));
  TS_PY_FILL(zeros_, (py::object self), I::zeros_(t));
  TS_PY_FILL(xavier_uniform_, (py::object self, double gain, Generator* g), I::xavier_uniform_(t, gain, g),
             py::arg("gain") = 1.0, py::arg("generator") = nullptr);
  TS_PY_FILL(xavier_normal_, (py::object self, double gain, Generator* g), I::xavier_normal_(t, gain, g),
             py::arg("gain") = 1.0, py::arg("generator") = nullptr);
  TS_PY_FILL(kaiming_uniform_, (py::object self, double a, const std::string& mode, const std::string& nl, Generator* g),
             I::kaiming_uniform_(t, a, mode, nl, g), py::arg("a") = 0.0, py::arg("mode") = "fan_in",
             py::arg("nonlinearity") = "leaky_relu", py::arg("generator") = nullptr);
  TS_PY_FILL(kaiming_normal_, (py::object self, double a, const std::string& mode, const std::string& nl, Generator* g),
             I::kaiming_normal_(t, a, mode, nl, g), py::arg("a") = 0.0, py::arg("mode") = "fan_in",
             py::arg("nonlinearity") = "leaky_relu", py::arg("generator") = nullptr);
#undef TS_PY_FILL

  py::module_ utils = m.def_submodule("_nn_utils", "torch.nn.utils");
  utils.def("clip_grad_norm_", [](py::object params, double max_norm, double norm_type, bool error_if_nonfinite) {
    std::vector<Tensor> ps = tensors_of(params);
    py::gil_scoped_release r;
    return nn::utils::clip_grad_norm_(ps, max_norm, norm_type, error_if_nonfinite);
  }, py::arg("parameters"), py::arg("max_norm"), py::arg("norm_type") = 2.0, py::arg("error_if_nonfinite") = false);
  utils.def("clip_grad_value_", [](py::object params, double clip_value) {
    std::vector<Tensor> ps = tensors_of(params);
    py::gil_scoped_release r;
    nn::utils::clip_grad_value_(ps, clip_value);
  }, py::arg("parameters"), py::arg("clip_value"));
}

}  // namespace tessera::python
