// tessera._C._profiler: tessera::profiler (the recorder of ops, user ranges, CUPTI kernels and
// memory events) for tessera/profiler.py, which gives it torch.profiler's spelling: `with profile(...)
// as prof:`, prof.key_averages().table(sort_by=..., row_limit=...), export_chrome_trace, and
// record_function as a context manager.
//
// Times cross into Python in microseconds, as torch.profiler's FunctionEventAvg reports them
// (cpu_time_total, self_cpu_time_total, cuda_time_total, ...); the C++ keeps nanoseconds.
#include <memory>

#include "bindings.h"

namespace tessera::python {
namespace {

namespace P = profiler;

double us(int64_t ns) { return static_cast<double>(ns) / 1000.0; }

// A record_function range opened by __enter__ and closed by __exit__ (the C++ one is a scope guard).
struct PyRecordFunction {
  std::string name;
  std::unique_ptr<P::record_function> range;
};

py::dict event_dict(const P::Event& e) {
  py::dict d;
  d["id"] = e.id;
  d["kind"] = P::event_kind_name(e.kind);
  d["name"] = e.name;
  d["start_us"] = us(e.start_ns);
  d["end_us"] = us(e.end_ns);
  d["thread"] = e.thread;
  d["parent"] = e.parent;
  d["depth"] = e.depth;
  d["input_shapes"] = e.input_shapes;
  d["input_dtypes"] = e.input_dtypes;
  d["self_cpu_time_total"] = us(e.self_cpu_ns);
  d["self_cuda_time_total"] = us(e.self_cuda_ns);
  d["cuda_time_total"] = us(e.cuda_total_ns);
  d["device"] = e.device;
  d["stream"] = e.stream;
  d["op"] = e.op;
  return d;
}

}  // namespace

void init_profiler(py::module_& m) {
  py::module_ p = m.def_submodule("_profiler", "the profiler (torch.profiler)");
  py::enum_<P::ProfilerActivity>(p, "ProfilerActivity")
      .value("CPU", P::ProfilerActivity::CPU)
      .value("CUDA", P::ProfilerActivity::CUDA);

  py::class_<P::KeyAverage>(p, "FunctionEventAvg")
      .def_readonly("key", &P::KeyAverage::key)
      .def_readonly("input_shapes", &P::KeyAverage::input_shapes)
      .def_readonly("is_gpu", &P::KeyAverage::is_gpu)
      .def_readonly("count", &P::KeyAverage::count)
      .def_property_readonly("cpu_time_total", [](const P::KeyAverage& k) { return us(k.cpu_time_total_ns); })
      .def_property_readonly("self_cpu_time_total", [](const P::KeyAverage& k) { return us(k.self_cpu_time_total_ns); })
      .def_property_readonly("cuda_time_total", [](const P::KeyAverage& k) { return us(k.cuda_time_total_ns); })
      .def_property_readonly("self_cuda_time_total", [](const P::KeyAverage& k) { return us(k.self_cuda_time_total_ns); })
      .def_property_readonly("cpu_time", [](const P::KeyAverage& k) { return k.cpu_time_avg_ns() / 1000.0; })
      .def_property_readonly("cuda_time", [](const P::KeyAverage& k) { return k.cuda_time_avg_ns() / 1000.0; })
      .def("__repr__", [](const P::KeyAverage& k) {
        return "<FunctionEventAvg key=" + k.key + " count=" + std::to_string(k.count) +
               " cpu_time_total=" + std::to_string(us(k.cpu_time_total_ns)) + "us>";
      });

  py::class_<P::KeyAverages>(p, "EventList")
      .def("table", &P::KeyAverages::table, py::arg("sort_by") = "", py::arg("row_limit") = 100)
      .def("__len__", &P::KeyAverages::size)
      .def("__getitem__", [](const P::KeyAverages& k, int64_t i) {
        const int64_t n = static_cast<int64_t>(k.size());
        if (i < 0) i += n;
        if (i < 0 || i >= n) throw py::index_error("EventList index out of range");
        return k[static_cast<size_t>(i)];
      })
      .def("find", [](const P::KeyAverages& k, const std::string& key) -> py::object {
        const P::KeyAverage* r = k.find(key);
        return r ? py::cast(*r) : py::none();
      }, py::arg("key"))
      .def("__str__", [](const P::KeyAverages& k) { return k.table(); });

  py::class_<P::profile>(p, "Profile")
      .def(py::init([](const std::vector<P::ProfilerActivity>& activities, bool record_shapes, bool profile_memory) {
             P::ProfileOptions o;
             o.activities = activities;
             o.record_shapes = record_shapes;
             o.profile_memory = profile_memory;
             o.start = false;
             return std::make_unique<P::profile>(o);
           }), py::arg("activities"), py::arg("record_shapes") = false, py::arg("profile_memory") = false)
      .def("start", &P::profile::start)
      .def("stop", &P::profile::stop, py::call_guard<py::gil_scoped_release>())
      .def("running", &P::profile::running)
      .def("key_averages", &P::profile::key_averages, py::arg("group_by_input_shape") = false)
      .def("events", [](const P::profile& prof) {
        py::list out;
        for (const P::Event& e : prof.events()) out.append(event_dict(e));
        return out;
      })
      .def("memory_events", [](const P::profile& prof) {
        py::list out;
        for (const P::MemoryEvent& e : prof.memory_events()) {
          py::dict d;
          d["time_us"] = us(e.time_ns);
          d["device"] = e.device.str();
          d["address"] = e.address;
          d["bytes"] = e.bytes;
          d["total_allocated"] = e.total_allocated;
          d["total_reserved"] = e.total_reserved;
          d["thread"] = e.thread;
          d["op_stack"] = e.op_stack;
          out.append(d);
        }
        return out;
      })
      .def("export_chrome_trace", &P::profile::export_chrome_trace, py::arg("path"))
      .def("export_memory_timeline", &P::profile::export_memory_timeline, py::arg("path"));

  py::class_<PyRecordFunction>(p, "RecordFunction")
      .def(py::init([](std::string name) { return new PyRecordFunction{std::move(name), nullptr}; }), py::arg("name"))
      .def("enter", [](PyRecordFunction& r) {
        if (r.range) throw py::value_error("record_function('" + r.name + "') is already open");
        r.range = std::make_unique<P::record_function>(r.name);
      })
      .def("exit", [](PyRecordFunction& r) { r.range.reset(); });

  py::class_<P::emit_nvtx>(p, "EmitNvtx").def(py::init<bool>(), py::arg("enabled") = true);
}

}  // namespace tessera::python
