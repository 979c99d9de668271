#include "bindings.h"
namespace tessera::python {
void init_functional(py::module_& m) { (void)m; }
}
