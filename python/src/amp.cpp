// tessera._C._amp: the autocast scope (entered and left by tessera.amp.autocast, a Python context
// manager) and GradScaler over tessera::amp.
#include "bindings.h"

namespace tessera::python {
namespace {

// One open autocast scope; closing it restores the state it found (amp::autocast's destructor).
struct AutocastScope {
  std::unique_ptr<amp::autocast> guard;
};

}  // namespace

void init_amp(py::module_& m) {
  py::module_ a = m.def_submodule("_amp", "autocast and GradScaler");
  py::class_<AutocastScope>(a, "AutocastScope")
      .def(py::init([](py::object device, py::object dtype, bool enabled, bool cache_enabled) {
             auto s = new AutocastScope();
             s->guard = std::make_unique<amp::autocast>(device_from_object(device, "autocast"), optional_dtype(dtype, "autocast"),
                                                        enabled, cache_enabled);
             return s;
           }), py::arg("device_type"), py::arg("dtype") = py::none(), py::arg("enabled") = true, py::arg("cache_enabled") = true)
      .def("close", [](AutocastScope& s) { s.guard.reset(); });
  a.def("is_autocast_enabled", [](py::object device) { return amp::is_autocast_enabled(device_from_object(device, "is_autocast_enabled")); },
        py::arg("device_type") = "cuda");
  a.def("get_autocast_dtype", [](py::object device) { return dtype_object(amp::get_autocast_dtype(device_from_object(device, "get_autocast_dtype"))); },
        py::arg("device_type"));

  py::class_<amp::GradScaler>(a, "GradScaler")
      .def(py::init([](double init_scale, double growth_factor, double backoff_factor, int64_t growth_interval, bool enabled) {
             amp::GradScalerOptions o;
             o.init_scale = init_scale; o.growth_factor = growth_factor; o.backoff_factor = backoff_factor;
             o.growth_interval = growth_interval; o.enabled = enabled;
             return new amp::GradScaler(o);
           }), py::arg("init_scale") = 65536.0, py::arg("growth_factor") = 2.0, py::arg("backoff_factor") = 0.5,
           py::arg("growth_interval") = 2000, py::arg("enabled") = true)
      .def("scale", py::overload_cast<const Tensor&>(&amp::GradScaler::scale), py::arg("outputs"))
      .def("unscale_", &amp::GradScaler::unscale_, py::arg("optimizer"))
      .def("step", &amp::GradScaler::step, py::arg("optimizer"), py::call_guard<py::gil_scoped_release>())
      .def("update", &amp::GradScaler::update, py::arg("new_scale") = py::none())
      .def("get_scale", &amp::GradScaler::get_scale);
}

}  // namespace tessera::python
