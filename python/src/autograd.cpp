// tessera._C.autograd: backward and grad over several tensors, grad mode, anomaly mode, the graph's
// nodes (Tensor.grad_fn) and gradcheck. The context managers (no_grad, enable_grad, set_grad_enabled)
// are Python classes in tessera/autograd/grad_mode.py over these switches.
#include <pybind11/functional.h>

#include "bindings.h"

namespace tessera::python {
namespace {

std::vector<Tensor> tensors_of(py::handle obj, const char* op, const char* what) {
  std::vector<Tensor> out;
  if (obj.is_none()) return out;
  if (is_tensor(obj)) {
    out.push_back(obj.cast<Tensor>());
    return out;
  }
  for (auto item : py::iter(obj)) {
    if (item.is_none()) {
      out.emplace_back();
      continue;
    }
    if (!is_tensor(item))
      throw py::type_error(std::string(op) + "(): " + what + " must be Tensors, got " +
                           std::string(py::str(item.get_type().attr("__name__"))));
    out.push_back(item.cast<Tensor>());
  }
  return out;
}

}  // namespace

void init_autograd(py::module_& m) {
  py::module_ ag = m.def_submodule("_autograd", "autograd switches and functions");
  py::class_<Node, std::shared_ptr<Node>>(ag, "Node")
      .def("name", &Node::name)
      .def_property_readonly("next_functions", [](const Node& n) {
        py::list out;
        for (auto& f : n.next_functions()) out.append(py::make_tuple(f ? py::cast(f) : py::none(), 0));
        return py::tuple(out);
      })
      .def("__repr__", [](const Node& n) { return "<" + n.name() + ">"; });

  ag.def("is_grad_enabled", &is_grad_enabled);
  ag.def("set_grad_enabled", &set_grad_enabled, py::arg("mode"));
  ag.def("is_anomaly_enabled", &autograd::is_anomaly_enabled);
  ag.def("set_detect_anomaly", &autograd::set_detect_anomaly, py::arg("mode"));
  ag.def("backward", [](py::object tensors, py::object grad_tensors, std::optional<bool> retain_graph, bool create_graph) {
    auto ts = tensors_of(tensors, "backward", "tensors");
    auto gs = tensors_of(grad_tensors, "backward", "grad_tensors");
    py::gil_scoped_release release;
    autograd::backward(ts, gs, retain_graph, create_graph);
  }, py::arg("tensors"), py::arg("grad_tensors") = py::none(), py::arg("retain_graph") = py::none(),
     py::arg("create_graph") = false);
  ag.def("grad", [](py::object outputs, py::object inputs, py::object grad_outputs, std::optional<bool> retain_graph,
                    bool create_graph, bool allow_unused) {
    auto outs = tensors_of(outputs, "grad", "outputs");
    auto ins = tensors_of(inputs, "grad", "inputs");
    auto gos = tensors_of(grad_outputs, "grad", "grad_outputs");
    std::vector<Tensor> r;
    {
      py::gil_scoped_release release;
      r = autograd::grad(outs, ins, gos, retain_graph, create_graph, allow_unused);
    }
    py::tuple out(r.size());
    for (size_t i = 0; i < r.size(); ++i) out[i] = r[i].defined() ? py::cast(r[i]) : py::none();
    return out;
  }, py::arg("outputs"), py::arg("inputs"), py::arg("grad_outputs") = py::none(), py::arg("retain_graph") = py::none(),
     py::arg("create_graph") = false, py::arg("allow_unused") = false);
  ag.def("gradcheck", [](py::function fn, py::object inputs, double eps, double atol, double rtol) {
    auto ins = tensors_of(inputs, "gradcheck", "inputs");
    autograd::GradcheckFn f = [fn](const std::vector<Tensor>& xs) {
      py::gil_scoped_acquire acquire;
      py::tuple args(xs.size());
      for (size_t i = 0; i < xs.size(); ++i) args[i] = py::cast(xs[i]);
      py::object r = fn(*args);
      return tensors_of(r, "gradcheck", "outputs");
    };
    autograd::GradcheckOptions o;
    o.eps = eps;
    o.atol = atol;
    o.rtol = rtol;
    py::gil_scoped_release release;
    return autograd::gradcheck(f, ins, o);
  }, py::arg("func"), py::arg("inputs"), py::arg("eps") = 1e-6, py::arg("atol") = 1e-5, py::arg("rtol") = 1e-3);
}

}  // namespace tessera::python
