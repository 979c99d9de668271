// tessera._C: the extension module. Each part registers itself from its own file; the Python package
// (python/tessera) builds PyTorch's namespaces (tessera.nn, tessera.optim, ...) on top of it.
#include "bindings.h"

PYBIND11_MODULE(_C, m) {
  using namespace tessera::python;
  m.doc() = "tessera's C++ core: tensors, ops, autograd, nn, optim, CUDA, DLPack";
  init_errors(m);
  init_dtype_device(m);
  init_tensor(m);
  init_factories(m);
  init_ops(m);
  init_autograd(m);
  init_nn(m);
  init_nn_extras(m);
  init_functional(m);
  init_optim(m);
  init_cuda(m);
  init_cuda_graph(m);
  init_amp(m);
  init_profiler(m);
  init_io(m);
  init_memory_tracker(m);
  init_compile(m);
}
