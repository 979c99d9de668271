#include "bindings.h"
namespace tessera::python {
void init_compile(py::module_& m) { (void)m; }
}
