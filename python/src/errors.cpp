// tessera's error classes as Python exceptions of the matching built-in kind, with the same message.
//
// Note [Error mapping]: each tessera::Error subclass becomes a Python class deriving from the built-in
// exception PyTorch raises for that kind of mistake, so `except IndexError` and `except RuntimeError`
// catch what they catch in PyTorch, and `except tessera.ShapeError` catches exactly tessera's class:
//     IndexError          -> tessera.IndexError(IndexError)          an index or dim out of range
//     ValueError          -> tessera.ValueError(ValueError)          a bad argument value
//     DTypeError          -> tessera.DTypeError(TypeError)           an unsupported or mismatched dtype
//     ShapeError          -> tessera.ShapeError(RuntimeError)        sizes that do not match (PyTorch: RuntimeError)
//     DeviceError         -> tessera.DeviceError(RuntimeError)       tensors on different devices, no GPU
//     OutOfMemoryError    -> tessera.OutOfMemoryError(RuntimeError)  as torch.cuda.OutOfMemoryError
//     NotImplementedError -> tessera.NotImplementedError(NotImplementedError)
//     IOError             -> tessera.IOError(OSError)                a file that cannot be read or written
//     Error (any other)   -> RuntimeError
// A C++ exception that is not a tessera::Error keeps pybind11's own mapping (std::bad_alloc ->
// MemoryError, std::out_of_range -> IndexError, anything else -> RuntimeError): never a crash.
//
// Note [Local exception translator]: pybind11 keeps one list of global exception translators per
// internals object, and modules built with a compatible pybind11 share it (here and torch's _C did:
// one `__pybind11_internals_v4_...` key). A global translator of ours would then run on every C++
// exception of torch's bindings, and torch's on ours, before pybind11's defaults. The translator is
// module-local instead: it serves the functions of tessera._C, ahead of any global one, and nothing else.
#include "bindings.h"

namespace tessera::python {
namespace {

PyObject* make_class(py::module_& m, const char* name, PyObject* base) {
  std::string qual = std::string("tessera.") + name;
  PyObject* cls = PyErr_NewException(qual.c_str(), base, nullptr);
  if (!cls) throw py::error_already_set();
  m.add_object(name, py::handle(cls));
  return cls;
}

struct ErrorClasses {
  PyObject *index, *value, *dtype, *shape, *device, *oom, *not_impl, *io;
};
ErrorClasses g_classes{};

}  // namespace

void init_errors(py::module_& m) {
  g_classes = {make_class(m, "IndexError", PyExc_IndexError), make_class(m, "ValueError", PyExc_ValueError),
               make_class(m, "DTypeError", PyExc_TypeError), make_class(m, "ShapeError", PyExc_RuntimeError),
               make_class(m, "DeviceError", PyExc_RuntimeError), make_class(m, "OutOfMemoryError", PyExc_RuntimeError),
               make_class(m, "NotImplementedError", PyExc_NotImplementedError), make_class(m, "IOError", PyExc_OSError)};
  // Module-local (Note [Local exception translator]): tried first for tessera's own functions, and
  // never for another module's, torch's included, with which pybind11 may share its internals.
  py::register_local_exception_translator([](std::exception_ptr p) { translate_tessera_error(p); });
}

void set_python_error(std::exception_ptr p) {
  try {
    translate_tessera_error(p);
  } catch (py::error_already_set& e) {
    e.restore();
  } catch (const std::bad_alloc&) {
    PyErr_NoMemory();
  } catch (const std::out_of_range& e) {  // pybind11's mapping of the standard exceptions
    PyErr_SetString(PyExc_IndexError, e.what());
  } catch (const std::invalid_argument& e) {
    PyErr_SetString(PyExc_ValueError, e.what());
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  } catch (...) {
    PyErr_SetString(PyExc_RuntimeError, "Caught an unknown exception!");
  }
}

void translate_tessera_error(std::exception_ptr p) {
  const ErrorClasses& c = g_classes;
  try {
    if (p) std::rethrow_exception(p);
  } catch (const IndexError& e) {
    PyErr_SetString(c.index, e.what());
  } catch (const ValueError& e) {
    PyErr_SetString(c.value, e.what());
  } catch (const DTypeError& e) {
    PyErr_SetString(c.dtype, e.what());
  } catch (const ShapeError& e) {
    PyErr_SetString(c.shape, e.what());
  } catch (const DeviceError& e) {
    PyErr_SetString(c.device, e.what());
  } catch (const OutOfMemoryError& e) {
    PyErr_SetString(c.oom, e.what());
  } catch (const NotImplementedError& e) {
    PyErr_SetString(c.not_impl, e.what());
  } catch (const IOError& e) {
    PyErr_SetString(c.io, e.what());
  } catch (const Error& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  }
}

}  // namespace tessera::python
