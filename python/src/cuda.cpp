// tessera._C._cuda: torch.cuda's device, stream, event and memory functions over tessera::cuda. In a
// build without CUDA, or on a machine without a GPU, is_available() is False and the rest raises
// DeviceError (a RuntimeError) saying so, as the C++ API does.
#include "bindings.h"

namespace tessera::python {

void init_cuda(py::module_& m) {
  using Release = py::call_guard<py::gil_scoped_release>;
  py::module_ c = m.def_submodule("_cuda", "CUDA devices, streams, events, memory");
  c.def("is_available", &cuda::is_available);
  c.def("is_built", &cuda::is_built);
  c.def("device_count", &cuda::device_count);
  c.def("current_device", &cuda::current_device);
  c.def("set_device", &cuda::set_device);
  c.def("synchronize", &cuda::synchronize, py::arg("device") = -1, Release());
  c.def("get_device_name", [](int d) { return cuda::get_device_properties(d).name; }, py::arg("device") = -1);
  c.def("get_device_capability", [](int d) {
    auto p = cuda::get_device_properties(d);
    return py::make_tuple(p.major, p.minor);
  }, py::arg("device") = -1);
  c.def("memory_stats", &cuda::memory_stats, py::arg("device") = -1);
  c.def("memory_allocated", &cuda::memory_allocated, py::arg("device") = -1);
  c.def("max_memory_allocated", &cuda::max_memory_allocated, py::arg("device") = -1);
  c.def("memory_reserved", &cuda::memory_reserved, py::arg("device") = -1);
  c.def("max_memory_reserved", &cuda::max_memory_reserved, py::arg("device") = -1);
  c.def("reset_peak_memory_stats", &cuda::reset_peak_memory_stats, py::arg("device") = -1);
  c.def("memory_summary", &cuda::memory_summary, py::arg("device") = -1);
  c.def("empty_cache", &cuda::empty_cache, Release());

  py::class_<cuda::Stream>(c, "Stream")
      .def(py::init([](int device, int priority) {
             return cuda::Stream::create(device, priority < 0 ? cuda::Stream::Priority::High : cuda::Stream::Priority::Normal);
           }), py::arg("device") = -1, py::arg("priority") = 0)
      .def_property_readonly("device", &cuda::Stream::device)
      .def_property_readonly("cuda_stream", [](const cuda::Stream& s) { return reinterpret_cast<intptr_t>(s.handle()); })
      .def("query", &cuda::Stream::query)
      .def("synchronize", &cuda::Stream::synchronize, Release())
      .def("wait_stream", [](const cuda::Stream& self, const cuda::Stream& other) {
        cuda::Event e;
        e.record(other);
        e.wait(self);
      })
      .def("__eq__", [](const cuda::Stream& a, const cuda::Stream& b) { return a == b; })
      .def("__hash__", [](const cuda::Stream& s) { return reinterpret_cast<intptr_t>(s.handle()); })
      .def("__repr__", [](const cuda::Stream& s) {
        return "<tessera.cuda.Stream device=" + s.device().str() + " cuda_stream=" +
               std::to_string(reinterpret_cast<intptr_t>(s.handle())) + ">";
      });
  c.def("current_stream", &cuda::current_stream, py::arg("device") = -1);
  c.def("default_stream", &cuda::default_stream, py::arg("device") = -1);
  c.def("set_stream", &cuda::set_current_stream, py::arg("stream"));

  py::class_<cuda::Event>(c, "Event")
      .def(py::init<bool, bool, bool>(), py::arg("enable_timing") = false, py::arg("blocking") = false,
           py::arg("interprocess") = false)
      .def("record", [](cuda::Event& e, std::optional<cuda::Stream> s) {
        if (s) e.record(*s);
        else e.record();
      }, py::arg("stream") = py::none())
      .def("wait", [](const cuda::Event& e, std::optional<cuda::Stream> s) { e.wait(s ? *s : cuda::current_stream()); },
           py::arg("stream") = py::none())
      .def("query", &cuda::Event::query)
      .def("synchronize", &cuda::Event::synchronize, Release())
      .def("elapsed_time", &cuda::Event::elapsed_time, py::arg("end_event"));
}

}  // namespace tessera::python
