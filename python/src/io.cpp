#include "bindings.h"
namespace tessera::python {
void init_io(py::module_& m) { (void)m; }
}
