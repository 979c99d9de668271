// tessera._C._cuda: CUDA graphs (torch.cuda.CUDAGraph, graph_pool_handle,
// is_current_stream_capturing) over tessera::cuda::Graph; tessera/cuda.py adds the `graph` context
// manager. In a build without CUDA, or without a GPU, the calls raise DeviceError as the C++ ones do.
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
  c.def("graph_pool_handle", &cuda::graph_pool_handle);
  c.def("is_current_stream_capturing", &cuda::is_current_stream_capturing);
}

}  // namespace tessera::python
