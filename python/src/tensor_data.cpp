// Tensors to and from Python data: tensor(data) from nested sequences (PyTorch's dtype inference and
// its errors for ragged or non-numeric data), item(), tolist(), numpy() / __array__ (sharing memory
// with the tensor) and from_numpy (sharing memory with the array).
//
// Note [Nested data]: tensor([[1, 2], [3, 4.5]]) walks the data once to find the sizes (the first
// element of each level decides its length; every other sequence must match, else ValueError
// "expected sequence of length 2 at dim 1 (got 3)"), then once to write the values into a buffer of
// the inferred dtype: bool if every leaf is a bool, int64 if every leaf is an int (or bool), else the
// default float dtype (float32). A tensor or a numpy array inside the data is read as its values.
#include <pybind11/numpy.h>

#include <cstring>

#include "bindings.h"

namespace tessera::python {
namespace {

enum class Kind { Bool = 0, Int = 1, Float = 2 };

bool is_sequence(py::handle h) {
  PyObject* o = h.ptr();
  return PyList_Check(o) || PyTuple_Check(o) ||
         (!PyUnicode_Check(o) && !PyBytes_Check(o) && !is_tensor(h) && PySequence_Check(o) &&
          !PyObject_HasAttrString(o, "__array_interface__"));
}

void find_sizes(py::handle data, Shape& sizes) {
  py::object cur = py::reinterpret_borrow<py::object>(data);
  while (is_sequence(cur)) {
    Py_ssize_t n = PySequence_Size(cur.ptr());
    if (n < 0) throw py::error_already_set();
    sizes.push_back(n);
    if (n == 0) return;
    py::object first = py::reinterpret_steal<py::object>(PySequence_GetItem(cur.ptr(), 0));
    if (!first) throw py::error_already_set();
    cur = std::move(first);
  }
}

struct Writer {
  const Shape& sizes;
  const char* op;
  std::vector<double> f;
  std::vector<int64_t> i;
  Kind kind = Kind::Bool;

  Kind leaf_kind(py::handle h) {
    PyObject* o = h.ptr();
    if (PyBool_Check(o)) return Kind::Bool;
    if (PyLong_Check(o)) return Kind::Int;
    if (PyFloat_Check(o)) return Kind::Float;
    if (is_tensor(h)) {
      DType d = h.cast<const Tensor&>().dtype();
      return d == kBool ? Kind::Bool : is_integral(d) ? Kind::Int : Kind::Float;
    }
    if (PyObject_HasAttrString(o, "dtype") && PyObject_HasAttrString(o, "item")) return leaf_kind(py::reinterpret_borrow<py::object>(h).attr("item")());
    if (PyIndex_Check(o)) return Kind::Int;
    if (PyNumber_Check(o)) return Kind::Float;
    throw py::type_error(std::string(op) + "(): new(): invalid data type '" +
                         std::string(py::str(h.get_type().attr("__name__"))) + "'");
  }

  void walk(py::handle data, size_t dim) {
    if (dim == sizes.size()) {
      Kind k = leaf_kind(data);
      if (is_tensor(data)) {
        const Tensor& t = data.cast<const Tensor&>();
        TS_CHECK(t.numel() == 1 && t.dim() == 0, ValueError, op, "(): only one element tensors can be converted to Python scalars");
      }
      kind = std::max(kind, k);
      py::object v = py::reinterpret_borrow<py::object>(data);
      if (is_tensor(data)) v = py::cast(data.cast<const Tensor&>().item());
      if (k == Kind::Float) {
        f.push_back(v.cast<double>());
        i.push_back(0);
      } else {
        int64_t x = PyBool_Check(v.ptr()) ? (v.ptr() == Py_True) : v.cast<int64_t>();
        i.push_back(x);
        f.push_back(static_cast<double>(x));
      }
      return;
    }
    if (!is_sequence(data))
      throw py::value_error(std::string(op) + "(): expected sequence of length " + std::to_string(sizes[dim]) +
                            " at dim " + std::to_string(dim) + " (got " +
                            std::string(py::str(data.get_type().attr("__name__"))) + ")");
    py::sequence seq = py::reinterpret_borrow<py::sequence>(data);
    if (static_cast<int64_t>(seq.size()) != sizes[dim])
      throw py::value_error(std::string(op) + "(): expected sequence of length " + std::to_string(sizes[dim]) +
                            " at dim " + std::to_string(dim) + " (got " + std::to_string(seq.size()) + ")");
    for (size_t k = 0; k < seq.size(); ++k) walk(seq[k], dim + 1);
  }
};

py::dtype numpy_dtype(DType d) {
  switch (d) {
    case kBool: return py::dtype("bool");
    case kUInt8: return py::dtype("uint8");
    case kInt8: return py::dtype("int8");
    case kInt32: return py::dtype("int32");
    case kInt64: return py::dtype("int64");
    case kFloat16: return py::dtype("float16");
    case kFloat32: return py::dtype("float32");
    case kFloat64: return py::dtype("float64");
    default: break;
  }
  throw py::type_error(std::string("Got unsupported ScalarType ") + dtype_name(d));
}

std::optional<DType> dtype_of_numpy(const py::dtype& dt) {
  char k = dt.kind();
  size_t n = dt.itemsize();
  if (k == 'b') return kBool;
  if (k == 'u' && n == 1) return kUInt8;
  if (k == 'i' && n == 1) return kInt8;
  if (k == 'i' && n == 4) return kInt32;
  if (k == 'i' && n == 8) return kInt64;
  if (k == 'f' && n == 2) return kFloat16;
  if (k == 'f' && n == 4) return kFloat32;
  if (k == 'f' && n == 8) return kFloat64;
  return std::nullopt;
}

bool is_numpy_array(py::handle h) {
  static py::object ndarray = py::module_::import("numpy").attr("ndarray");
  return py::isinstance(h, ndarray);
}

Tensor from_numpy(py::array arr, const char* op) {
  auto dt = dtype_of_numpy(arr.dtype());
  if (!dt)
    throw py::type_error(std::string("can't convert np.ndarray of type ") + std::string(py::str(arr.dtype())) +
                         ". The only supported types are: float64, float32, float16, int64, int32, int8, uint8, and bool.");
  Shape sizes(arr.ndim()), strides(arr.ndim());
  const auto item = static_cast<int64_t>(arr.itemsize());
  for (py::ssize_t d = 0; d < arr.ndim(); ++d) {
    sizes[d] = arr.shape(d);
    int64_t sb = arr.strides(d);
    TS_CHECK(sb >= 0, ValueError, op, "(): at least one stride in the given numpy array is negative, and tensors "
             "with negative strides are not currently supported. (You can probably work around this by making "
             "a copy of your array with array.copy().)");
    TS_CHECK(sb % item == 0, ValueError, op, "(): given numpy array strides not a multiple of the element byte size. "
             "Copy the numpy array to reallocate the memory.");
    strides[d] = sb / item;
  }
  py::object keep = arr;
  return wrap_foreign(arr.mutable_data(), sizes, strides, *dt, kCPU, [keep]() mutable {
    py::gil_scoped_acquire acquire;
    keep = py::object();
  }, op);
}

py::object to_list(const Tensor& t) {
  Tensor c = t.detach();
  if (!c.is_cpu()) c = c.cpu();
  Shape sizes = c.sizes();
  const bool is_float = c.is_floating_point();
  const bool is_bool = c.dtype() == kBool;
  std::vector<double> f;
  std::vector<int64_t> i;
  if (is_float) f = c.tolist<double>();
  else i = c.tolist<int64_t>();
  auto leaf = [&](size_t k) -> py::object {
    if (is_float) return py::float_(f[k]);
    if (is_bool) return py::bool_(i[k] != 0);
    return py::int_(i[k]);
  };
  if (sizes.empty()) return leaf(0);
  size_t pos = 0;
  std::function<py::object(size_t)> build = [&](size_t dim) -> py::object {
    py::list l(sizes[dim]);
    for (int64_t k = 0; k < sizes[dim]; ++k) l[k] = dim + 1 == sizes.size() ? leaf(pos++) : build(dim + 1);
    return l;
  };
  return build(0);
}

py::array to_numpy(py::object self_obj, bool force) {
  Tensor t = self_obj.cast<Tensor>();
  if (force) {
    t = t.detach();
    if (!t.is_cpu()) t = t.cpu();
  }
  if (t.is_cuda())
    throw py::type_error("can't convert " + t.device().str() + " device type tensor to numpy. Use Tensor.cpu() to "
                         "copy the tensor to host memory first.");
  TS_CHECK(!t.is_meta(), NotImplementedError, "numpy(): a meta tensor has no data");
  if (t.requires_grad())
    throw py::value_error("Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.");
  py::dtype dt = numpy_dtype(t.dtype());
  std::vector<py::ssize_t> shape(t.sizes().begin(), t.sizes().end());
  std::vector<py::ssize_t> strides;
  for (int64_t s : t.strides()) strides.push_back(s * static_cast<int64_t>(t.element_size()));
  // The array's base holds the tensor's handle: the memory lives as long as either side does.
  auto* keep = new Tensor(t);
  py::capsule base(keep, [](void* p) { delete static_cast<Tensor*>(p); });
  return py::array(dt, shape, strides, t.numel() ? t.data_ptr() : nullptr, base);
}

}  // namespace

Tensor tensor_from_data(py::handle data, std::optional<DType> dtype, Device device, const char* op) {
  if (is_tensor(data)) {
    Tensor t = data.cast<const Tensor&>().detach().clone();
    if (dtype || t.device() != device) t = t.to(device, dtype.value_or(t.dtype()));
    return t;
  }
  if (is_numpy_array(data)) {
    py::array arr = py::reinterpret_borrow<py::array>(data);
    Tensor t = from_numpy(py::array::ensure(arr, py::array::c_style | py::array::forcecast), op).clone();
    return t.to(device, dtype.value_or(t.dtype()));
  }
  Shape sizes;
  find_sizes(data, sizes);
  Writer w{sizes, op};
  if (numel_of(sizes) > 0 || sizes.empty()) w.walk(data, 0);
  if (sizes.size() && numel_of(sizes) == 0) w.kind = Kind::Float;
  DType inferred = w.kind == Kind::Bool ? kBool : w.kind == Kind::Int ? kInt64 : kFloat32;
  DType target = dtype.value_or(inferred);
  Tensor t;
  if (w.kind == Kind::Float || is_floating_point(target)) t = tessera::tensor(w.f, sizes, kFloat64);
  else t = tessera::tensor(w.i, sizes, kInt64);
  if (sizes.empty()) t = t.reshape({});
  return t.to(device, target);
}

void init_tensor_data(py::module_& m, py::class_<Tensor>& cls) {
  cls.def("item", [](const Tensor& t) {
        TS_CHECK(t.numel() == 1, ValueError, "a Tensor with ", t.numel(), " elements cannot be converted to Scalar");
        py::gil_scoped_release r;
        return t.item();
      })
      .def("tolist", &to_list)
      .def("numpy", [](py::object self, bool force) { return to_numpy(self, force); }, py::kw_only(), py::arg("force") = false)
      .def("__array__", [](py::object self, py::object dtype) -> py::object {
        py::array a = to_numpy(self, false);
        if (dtype.is_none()) return a;
        return a.attr("astype")(dtype);
      }, py::arg("dtype") = py::none());

  m.def("tensor", [](py::handle data, py::object dtype, py::object device, bool requires_grad, bool pin_memory) {
    Tensor t = tensor_from_data(data, optional_dtype(dtype, "tensor"),
                                device.is_none() ? kCPU : device_from_object(device, "tensor"));
    if (pin_memory) t = t.pin_memory();
    if (requires_grad) t.requires_grad_(true);
    return t;
  }, py::arg("data"), py::kw_only(), py::arg("dtype") = py::none(), py::arg("device") = py::none(),
     py::arg("requires_grad") = false, py::arg("pin_memory") = false);
  m.def("as_tensor", [](py::handle data, py::object dtype, py::object device) {
    auto dt = optional_dtype(dtype, "as_tensor");
    Device dev = device.is_none() ? kCPU : device_from_object(device, "as_tensor");
    if (is_tensor(data)) {
      Tensor t = data.cast<Tensor>();
      return t.to(device.is_none() ? t.device() : dev, dt.value_or(t.dtype()));
    }
    if (is_numpy_array(data) && dev.is_cpu()) {
      Tensor t = from_numpy(py::reinterpret_borrow<py::array>(data), "as_tensor");
      return dt ? t.to(*dt) : t;
    }
    return tensor_from_data(data, dt, dev, "as_tensor");
  }, py::arg("data"), py::arg("dtype") = py::none(), py::arg("device") = py::none());
  m.def("from_numpy", [](py::handle arr) {
    if (!is_numpy_array(arr))
      throw py::type_error(std::string("expected np.ndarray (got ") + std::string(py::str(arr.get_type().attr("__name__"))) + ")");
    return from_numpy(py::reinterpret_borrow<py::array>(arr), "from_numpy");
  }, py::arg("ndarray"));
}

}  // namespace tessera::python
