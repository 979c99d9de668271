// tessera._C._cuda: CUDA graphs (torch.cuda.CUDAGraph, graph_pool_handle,
// is_current_stream_capturing) over tessera::cuda::Graph, and make_graphed (a whole step, forward,
// backward and optimizer, as one graph: cuda::make_graphed; its function is called back with the GIL
// held, during the warm-up and the capture only); tessera/cuda.py adds the `graph` context manager. In a build without CUDA, or without a GPU, the calls raise DeviceError as the C++ ones do.
// capture_end and replay release the GIL: instantiating a graph and queueing it are host work that
// another Python thread need not wait for.
#include "bindings.h"
#include "tessera/cuda_graph.h"

namespace tessera::python {
namespace {

cuda::CaptureMode capture_mode(const std::string& m) {
  if (m == "global") return cuda::CaptureMode::Global;
  if (m == "thread_local") return cuda::CaptureMode::ThreadLocal;
  if (m == "relaxed") return cuda::CaptureMode::Relaxed;
  TS_THROW(ValueError, "CUDAGraph.capture_begin: unknown capture_error_mode '", m,
           "' (expected 'global', 'thread_local' or 'relaxed')");
}

cuda::MempoolId pool_of(py::handle pool) {
  if (pool.is_none()) return {0, 0};
  return pool.cast<std::pair<uint64_t, uint64_t>>();
}

}  // namespace

void init_cuda_graph(py::module_& m) {
  py::module_ c = m.attr("_cuda").cast<py::module_>();
  using Release = py::call_guard<py::gil_scoped_release>;
  py::class_<cuda::Graph>(c, "CUDAGraph")
      .def(py::init<>())
      .def("capture_begin", [](cuda::Graph& g, py::object pool, const std::string& mode) {
        g.capture_begin(pool_of(pool), capture_mode(mode));
      }, py::arg("pool") = py::none(), py::arg("capture_error_mode") = "global")
      .def("capture_end", &cuda::Graph::capture_end, Release())
      .def("replay", &cuda::Graph::replay, Release())
      .def("reset", &cuda::Graph::reset, Release())
      .def("pool", &cuda::Graph::pool)
      .def("captured", &cuda::Graph::captured)
      .def("capturing", &cuda::Graph::capturing);
  py::class_<cuda::GraphedCallable>(c, "GraphedCallable")
      .def("__call__", [](const cuda::GraphedCallable& g, py::args args) {
        std::vector<Tensor> in;
        for (auto a : args) in.push_back(a.cast<Tensor>());
        py::gil_scoped_release r;
        return g(in);
      })
      .def_property_readonly("static_inputs", &cuda::GraphedCallable::static_inputs)
      .def_property_readonly("static_outputs", &cuda::GraphedCallable::static_outputs);
  c.def("make_graphed", [](py::function fn, const std::vector<Tensor>& sample_inputs, int warmup_iters, py::object pool,
                           const std::string& mode) {
    cuda::MakeGraphedOptions o;
    o.warmup_iters = warmup_iters;
    o.pool = pool_of(pool);
    o.mode = capture_mode(mode);
    cuda::TensorsFn call = [fn](const std::vector<Tensor>& in) {
      py::gil_scoped_acquire g;
      py::tuple args(in.size());
      for (size_t i = 0; i < in.size(); ++i) args[i] = py::cast(in[i]);
      py::object out = fn(*args);
      if (is_tensor(out)) return std::vector<Tensor>{out.cast<Tensor>()};
      return out.cast<std::vector<Tensor>>();
    };
    return cuda::make_graphed(std::move(call), sample_inputs, o);
  }, py::arg("fn"), py::arg("sample_inputs"), py::arg("warmup_iters") = 3, py::arg("pool") = py::none(),
     py::arg("capture_error_mode") = "global");
  c.def("graph_pool_handle", &cuda::graph_pool_handle);
  c.def("is_current_stream_capturing", &cuda::is_current_stream_capturing);
}

}  // namespace tessera::python
