// What the binding files of tessera._C share: the init function of each part of the module, the
// Scalar caster, and the parsing of PyTorch's Python argument conventions (sizes as varargs or one
// sequence, dtype=/device= keywords, dim as an int or a tuple).
//
// Note [Python scalars]: a Python bool, int or float (or anything with __index__ or __float__ that is
// not a Tensor, e.g. numpy's scalars) converts to tessera::Scalar with its category kept (bool, int,
// float), so that type promotion treats it as PyTorch treats a "wrapped number": `int_tensor * 2.5` is
// float32, `float16_tensor + 1` stays float16.
#pragma once
#include <pybind11/eval.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "tessera/tessera.h"

namespace py = pybind11;

namespace pybind11::detail {
template <>
struct type_caster<tessera::Scalar> {
  PYBIND11_TYPE_CASTER(tessera::Scalar, const_name("Number"));
  bool load(handle src, bool convert);
  static handle cast(const tessera::Scalar& s, return_value_policy, handle) {
    if (s.is_bool()) return py::bool_(s.to_bool()).release();
    if (s.is_integral()) return PyLong_FromLongLong(s.to_int());
    return PyFloat_FromDouble(s.to_double());
  }
};
}  // namespace pybind11::detail

namespace tessera::python {

void init_errors(py::module_& m);
void init_dtype_device(py::module_& m);
void init_tensor(py::module_& m);
void init_tensor_index(py::class_<Tensor>& cls);
void init_tensor_data(py::module_& m, py::class_<Tensor>& cls);
void init_factories(py::module_& m);
void init_ops(py::module_& m);
void init_autograd(py::module_& m);
void init_nn(py::module_& m);
void init_nn_extras(py::module_& m);
void init_functional(py::module_& m);
void init_optim(py::module_& m);
void init_dlpack(py::module_& m, py::class_<Tensor>& cls);
void init_cuda(py::module_& m);
void init_cuda_graph(py::module_& m);
void init_amp(py::module_& m);
void init_profiler(py::module_& m);
void init_io(py::module_& m);
void init_memory_tracker(py::module_& m);
void init_compile(py::module_& m);
// Installs the C slots of +, -, * and / on the Tensor class (fast_ops.cpp, Note [Per-op cost from Python]).
void init_fast_ops(py::class_<Tensor>& cls);

// Sets the Python error for a tessera::Error as the module's exception translator does, and rethrows
// any other exception (errors.cpp).
void translate_tessera_error(std::exception_ptr p);
// Sets the Python error for any exception: tessera's by their class (Note [Error mapping]), the
// standard ones as pybind11 maps them; for C slots that bypass pybind11's dispatch.
void set_python_error(std::exception_ptr p);

// ---- argument conventions -----------------------------------------------------------------------
// Sizes given as f(2, 3), f((2, 3)), f([2, 3]) or f(tessera.Size([2, 3])); `op` names the caller in errors.
Shape shape_from_args(const py::args& args, const char* op);
Shape shape_from_object(py::handle obj, const char* op);
// dim=None, dim=1 or dim=(0, 2).
std::optional<Dims> dims_from_object(py::handle obj, const char* op);
// The tessera.dtype singletons: `t.dtype is tessera.float32` holds, as in PyTorch.
py::object dtype_object(DType d);
DType dtype_from_object(py::handle obj, const char* op);
std::optional<DType> optional_dtype(py::handle obj, const char* op);  // None -> nullopt
// device="cuda", device=tessera.device("cuda", 1), device=0 (a CUDA index).
Device device_from_object(py::handle obj, const char* op);
// tessera.Size (a tuple subclass) of sizes.
py::object size_object(const Shape& s);
bool is_tensor(py::handle obj);
// A tensor over memory another library owns (numpy, DLPack): no copy; `release` runs when the last
// tensor viewing it goes away (dlpack.cpp, Note [Foreign memory]).
Tensor wrap_foreign(void* data, const Shape& sizes, const Shape& strides, DType dtype, Device device,
                    std::function<void()> release, const char* op);
// tessera.tensor(data): nested sequences of numbers, numpy arrays, tensors and numbers (tensor_data.cpp).
Tensor tensor_from_data(py::handle data, std::optional<DType> dtype, Device device, const char* op = "tensor");

}  // namespace tessera::python
