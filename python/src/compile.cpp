// tessera._C._compile: ts::compile's type-erased core (CompiledProgram) for tessera.compile
// (tessera/compile.py), which compiles a Python callable or a tessera.nn.Module.
//
// Note [Compiling Python]: CompiledProgram takes the program as a function that runs the callable on
// the call's own arguments and returns its tensors, flattened. From Python that function calls back
// into the interpreter: run() keeps the GIL (the capture runs the program once, on this thread, so the
// tracer stage of tessera's ops sees every op the Python code calls; the ops themselves release the
// GIL as usual). What C++ programs get, Python ones get too: the guards on the arguments, the captured
// backward, graph breaks at host reads (item(), printing, numpy()), and the same caveat as
// torch.jit.trace: Python control flow on anything but the guarded properties of the arguments is
// baked in at capture. A Python exception inside the program propagates out of the call (the
// capture's stage guard is RAII), and the next call captures again.
#include <cstdio>

#include "bindings.h"
#include "tessera/compile.h"

namespace tessera::python {
namespace {

CompileMode mode_of(const std::string& m) {
  if (m == "default") return CompileMode::Default;
  if (m == "reduce-overhead") return CompileMode::ReduceOverhead;
  if (m == "max-autotune" || m == "max-autotune-no-cudagraphs") return CompileMode::MaxAutotune;
  TS_THROW(ValueError, "compile: unknown mode '", m,
           "' (expected 'default', 'reduce-overhead', 'max-autotune' or 'max-autotune-no-cudagraphs')");
}

// The program of one call: the Python function, run with the GIL held, returning a list of tensors.
CompiledProgram::Program program_of(py::function fn) {
  return [fn = std::move(fn)]() {
    py::gil_scoped_acquire g;
    return fn().cast<std::vector<Tensor>>();
  };
}

py::dict stats_dict(const CompileStats& s) {
  py::dict d;
  d["captures"] = s.captures;
  d["graph_calls"] = s.graph_calls;
  d["eager_calls"] = s.eager_calls;
  d["variants"] = s.variants;
  d["joint_variants"] = s.joint_variants;
  d["fake_backward_traces"] = s.fake_backward_traces;
  d["symbolic_variants"] = s.symbolic_variants;
  d["batch_instances"] = s.batch_instances;
  d["kernels"] = s.kernels;
  d["fused_nodes"] = s.fused_nodes;
  d["launches"] = s.launches;
  d["eager_launches"] = s.eager_launches;
  d["saved_bytes"] = s.saved_bytes;
  d["eager_saved_bytes"] = s.eager_saved_bytes;
  d["recomputed_nodes"] = s.recomputed_nodes;
  d["no_backward_reasons"] = s.no_backward_reasons;
  d["recompile_reasons"] = s.recompile_reasons;
  return d;
}

}  // namespace

void init_compile(py::module_& m) {
  py::module_ c = m.def_submodule("_compile", "ts::compile's core for tessera.compile");
  py::class_<CompiledProgram>(c, "CompiledProgram")
      .def(py::init([](const std::string& mode, bool dynamic, bool fullgraph, const std::string& backend,
                       int recompile_limit, const std::string& name, py::object state) {
             CompileOptions o;
             o.mode = mode_of(mode);
             o.dynamic = dynamic;
             o.fullgraph = fullgraph;
             TS_CHECK(backend == "eager" || backend == "codegen", ValueError, "compile: unknown backend '", backend,
                      "' (expected 'eager' or 'codegen')");
             o.backend = backend;
             o.recompile_limit = recompile_limit;
             CompiledProgram::StateFn fn;
             if (!state.is_none()) {
               // A module's parameters and buffers by name and every submodule's training flag, read
               // from the Python module at each call (state() returns the pair).
               fn = [state](std::vector<std::pair<std::string, Tensor>>& params, std::vector<bool>& training) {
                 py::gil_scoped_acquire g;
                 py::tuple r = state();
                 params = r[0].cast<std::vector<std::pair<std::string, Tensor>>>();
                 training = r[1].cast<std::vector<bool>>();
               };
             }
             return new CompiledProgram(o, name, std::move(fn));
           }), py::arg("mode"), py::arg("dynamic"), py::arg("fullgraph"), py::arg("backend"), py::arg("recompile_limit"),
           py::arg("name"), py::arg("state"))
      .def("run", [](CompiledProgram& p, const std::vector<Tensor>& args, const std::vector<std::string>& scalars,
                     py::function program) { return p.run(args, scalars, program_of(std::move(program))); },
           py::arg("tensors"), py::arg("scalars"), py::arg("program"))
      .def("explain", [](CompiledProgram& p, const std::vector<Tensor>& args, const std::vector<std::string>& scalars,
                         py::function program) { return p.explain(args, scalars, program_of(std::move(program))); },
           py::arg("tensors"), py::arg("scalars"), py::arg("program"))
      .def("stats", [](const CompiledProgram& p) { return stats_dict(p.stats()); })
      .def("last_graph", &CompiledProgram::last_graph)
      .def("last_backward_graph", &CompiledProgram::last_backward_graph)
      .def("reset", &CompiledProgram::reset);

  // The compiler's warnings (a graph break, the recompile limit) as Python warnings, so that
  // warnings.simplefilter and pytest see them.
  set_compile_warning_handler([](const std::string& msg) {
    py::gil_scoped_acquire g;
    if (PyErr_WarnEx(PyExc_RuntimeWarning, msg.c_str(), 1) < 0) {
      // A filter that turns warnings into errors: the exception cannot cross the compiler's frames
      // here, so the message goes to standard error instead, as the C++ default handler prints it.
      PyErr_Clear();
      std::fprintf(stderr, "tessera: warning: %s\n", msg.c_str());
    }
  });
}

}  // namespace tessera::python
