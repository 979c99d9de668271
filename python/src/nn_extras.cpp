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
  init.def("uniform_", [](py::object self, double a, double b, Generator* g) { return fill_in_place(self, [&](Tensor& t) { I::uniform_(t, a, b, g); }); },
           py::arg("tensor"), py::arg("a") = 0.0, py::arg("b") = 1.0, py::arg("generator") = nullptr);
  init.def("normal_", [](py::object self, double mean, double std, Generator* g) { return fill_in_place(self, [&](Tensor& t) { I::normal_(t, mean, std, g); }); },
           py::arg("tensor"), py::arg("mean") = 0.0, py::arg("std") = 1.0, py::arg("generator") = nullptr);
  init.def("trunc_normal_", [](py::object self, double mean, double std, double a, double b, Generator* g) { return fill_in_place(self, [&](Tensor& t) {
             I::trunc_normal_(t, mean, std, a, b, g);
           }); }, py::arg("tensor"), py::arg("mean") = 0.0, py::arg("std") = 1.0, py::arg("a") = -2.0, py::arg("b") = 2.0,
           py::arg("generator") = nullptr);
  init.def("constant_", [](py::object self, double v) { return fill_in_place(self, [&](Tensor& t) { I::constant_(t, v); }); }, py::arg("tensor"), py::arg("val"));
  init.def("ones_", [](py::object self) { return fill_in_place(self, [&](Tensor& t) { I::ones_(t); }); }, py::arg("tensor"));
  init.def("zeros_", [](py::object self) { return fill_in_place(self, [&](Tensor& t) { I::zeros_(t); }); }, py::arg("tensor"));
  init.def("xavier_uniform_", [](py::object self, double gain, Generator* g) { return fill_in_place(self, [&](Tensor& t) { I::xavier_uniform_(t, gain, g); }); },
           py::arg("tensor"), py::arg("gain") = 1.0, py::arg("generator") = nullptr);
  init.def("xavier_normal_", [](py::object self, double gain, Generator* g) { return fill_in_place(self, [&](Tensor& t) { I::xavier_normal_(t, gain, g); }); },
           py::arg("tensor"), py::arg("gain") = 1.0, py::arg("generator") = nullptr);
  init.def("kaiming_uniform_", [](py::object self, double a, const std::string& mode, const std::string& nl, Generator* g) { return fill_in_place(self, [&](Tensor& t) {
             I::kaiming_uniform_(t, a, mode, nl, g);
           }); }, py::arg("tensor"), py::arg("a") = 0.0, py::arg("mode") = "fan_in", py::arg("nonlinearity") = "leaky_relu",
           py::arg("generator") = nullptr);
  init.def("kaiming_normal_", [](py::object self, double a, const std::string& mode, const std::string& nl, Generator* g) { return fill_in_place(self, [&](Tensor& t) {
             I::kaiming_normal_(t, a, mode, nl, g);
           }); }, py::arg("tensor"), py::arg("a") = 0.0, py::arg("mode") = "fan_in", py::arg("nonlinearity") = "leaky_relu",
           py::arg("generator") = nullptr);

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
