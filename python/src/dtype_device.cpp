// tessera.dtype (float32, int64, ...: one object per dtype, printed as PyTorch prints torch.float32),
// tessera.device, tessera.Size, the Scalar caster (Note [Python scalars]) and the argument parsers of
// bindings.h.
#include <array>

#include "bindings.h"

namespace tessera::python {
namespace {

std::array<py::object, kNumDTypes>& dtype_objects() {
  static auto* objs = new std::array<py::object, kNumDTypes>();  // never destroyed: outlives the module
  return *objs;
}
py::object& size_class() {
  static auto* cls = new py::object();
  return *cls;
}

// PyTorch's names: torch.float32 is also torch.float, torch.float16 torch.half, ...
struct DTypeName {
  DType d;
  const char* name;
};
constexpr DTypeName kAliases[] = {{kFloat32, "float"}, {kFloat64, "double"}, {kFloat16, "half"},
                                  {kInt64, "long"},    {kInt32, "int"},      {kBool, "bool"},
                                  {kUInt8, "uint8"},   {kInt8, "int8"}};

}  // namespace

py::object dtype_object(DType d) { return dtype_objects()[static_cast<int>(d)]; }

DType dtype_from_object(py::handle obj, const char* op) {
  if (py::isinstance<DType>(obj)) return obj.cast<DType>();
  throw py::type_error(std::string(op) + "(): argument 'dtype' must be tessera.dtype, not " +
                       std::string(py::str(obj.get_type().attr("__name__"))));
}

std::optional<DType> optional_dtype(py::handle obj, const char* op) {
  if (obj.is_none()) return std::nullopt;
  return dtype_from_object(obj, op);
}

Device device_from_object(py::handle obj, const char* op) {
  if (py::isinstance<Device>(obj)) return obj.cast<Device>();
  if (py::isinstance<py::str>(obj)) return Device(obj.cast<std::string>());
  if (PyLong_Check(obj.ptr()) && !PyBool_Check(obj.ptr())) {
    long long idx = obj.cast<long long>();
    if (idx < 0) throw py::value_error(std::string(op) + "(): device index must be non-negative, got " + std::to_string(idx));
    return Device::cuda(static_cast<int>(idx));
  }
  throw py::type_error(std::string(op) + "(): argument 'device' must be tessera.device, str or int, not " +
                       std::string(py::str(obj.get_type().attr("__name__"))));
}

bool is_tensor(py::handle obj) { return py::isinstance<Tensor>(obj); }

static int64_t index_of(py::handle item, const char* op, size_t pos) {
  if (PyLong_Check(item.ptr()) && !PyBool_Check(item.ptr())) return item.cast<int64_t>();
  if (!is_tensor(item) && !PyFloat_Check(item.ptr()) && PyObject_HasAttrString(item.ptr(), "__index__"))
    return py::reinterpret_steal<py::object>(PyNumber_Index(item.ptr())).cast<int64_t>();
  if (is_tensor(item)) {
    const Tensor& t = item.cast<const Tensor&>();
    if (t.numel() == 1 && is_integral(t.dtype())) return t.item().to_int();
  }
  throw py::type_error(std::string(op) + "(): argument 'size' must be a tuple of ints, but found element of type " +
                       std::string(py::str(item.get_type().attr("__name__"))) + " at pos " + std::to_string(pos));
}

Shape shape_from_object(py::handle obj, const char* op) {
  Shape s;
  if (PyTuple_Check(obj.ptr()) || PyList_Check(obj.ptr())) {
    py::sequence seq = py::reinterpret_borrow<py::sequence>(obj);
    s.reserve(seq.size());
    for (size_t i = 0; i < seq.size(); ++i) s.push_back(index_of(seq[i], op, i));
    return s;
  }
  s.push_back(index_of(obj, op, 0));
  return s;
}

Shape shape_from_args(const py::args& args, const char* op) {
  if (args.size() == 1 && (PyTuple_Check(args[0].ptr()) || PyList_Check(args[0].ptr())))
    return shape_from_object(args[0], op);
  Shape s;
  s.reserve(args.size());
  for (size_t i = 0; i < args.size(); ++i) s.push_back(index_of(args[i], op, i));
  return s;
}

std::optional<Dims> dims_from_object(py::handle obj, const char* op) {
  if (obj.is_none()) return std::nullopt;
  if (PyTuple_Check(obj.ptr()) || PyList_Check(obj.ptr())) return Dims(shape_from_object(obj, op));
  return Dims(index_of(obj, op, 0));
}

py::object size_object(const Shape& s) {
  py::tuple t(s.size());
  for (size_t i = 0; i < s.size(); ++i) PyTuple_SET_ITEM(t.ptr(), i, PyLong_FromLongLong(s[i]));
  return size_class()(t);
}

void init_dtype_device(py::module_& m) {
  py::class_<DType> dtype(m, "dtype");
  dtype.def_property_readonly("is_floating_point", [](DType d) { return is_floating_point(d); })
      .def_property_readonly("is_signed", [](DType d) { return is_signed(d); })
      .def_property_readonly("itemsize", [](DType d) { return element_size(d); })
      .def("__repr__", [](DType d) { return std::string("tessera.") + dtype_name(d); })
      .def("__eq__", [](DType a, py::handle b) { return py::isinstance<DType>(b) && b.cast<DType>() == a; })
      .def("__hash__", [](DType d) { return static_cast<int>(d); })
      .def("__reduce__", [](DType d) { return py::make_tuple(py::module_::import("tessera").attr("_dtype_by_name"),
                                                             py::make_tuple(dtype_name(d))); });
  for (int i = 0; i < kNumDTypes; ++i) {
    DType d = static_cast<DType>(i);
    dtype_objects()[i] = py::cast(d);
    m.attr(dtype_name(d)) = dtype_objects()[i];
  }
  for (const auto& a : kAliases) m.attr(a.name) = dtype_objects()[static_cast<int>(a.d)];
  m.def("promote_types", [](DType a, DType b) { return dtype_object(promote_types(a, b)); });
  m.def("can_cast", [](DType from, DType to) { return can_cast(from, to); });

  py::class_<Device>(m, "device")
      .def(py::init([](const std::string& spec) { return Device(spec); }), py::arg("type"))
      .def(py::init([](const std::string& type, int index) {
             TS_CHECK(type == "cuda" || index == 0 || (type == "cpu" && index == 0), ValueError,
                      "device(): only cuda devices take an index other than 0, got '", type, "' with index ", index);
             TS_CHECK(index >= 0, ValueError, "device(): device index must be non-negative, got ", index);
             Device d(type);
             return type == "cuda" ? Device::cuda(index) : d;
           }),
           py::arg("type"), py::arg("index"))
      .def_property_readonly("type", [](const Device& d) { return device_type_name(d.type()); })
      .def_property_readonly("index", [](const Device& d) -> py::object {
        if (d.index() < 0) return py::none();
        return py::int_(d.index());
      })
      .def("__str__", &Device::str)
      .def("__repr__", [](const Device& d) {
        std::string r = std::string("device(type='") + device_type_name(d.type()) + "'";
        if (d.index() >= 0) r += ", index=" + std::to_string(d.index());
        return r + ")";
      })
      .def("__eq__", [](const Device& a, py::handle b) {
        if (py::isinstance<Device>(b)) return a == b.cast<Device>();
        return false;
      })
      .def("__hash__", [](const Device& d) { return static_cast<int>(d.type()) * 1024 + d.index(); });
  py::implicitly_convertible<py::str, Device>();

  // tessera.Size: a tuple of sizes that prints as tessera.Size([2, 3]) (PyTorch's torch.Size).
  py::dict scope;
  py::exec(R"PY(
class Size(tuple):
    """The sizes of a tensor: a tuple of ints (PyTorch's torch.Size)."""
    __slots__ = ()
    def __repr__(self):
        return "tessera.Size([" + ", ".join(str(s) for s in self) + "])"
    __str__ = __repr__
    def numel(self):
        n = 1
        for s in self:
            n *= s
        return n
    def __getitem__(self, key):
        r = tuple.__getitem__(self, key)
        return Size(r) if isinstance(key, slice) else r
)PY", scope);
  size_class() = scope["Size"];
  size_class().attr("__module__") = "tessera";
  m.attr("Size") = size_class();
}

}  // namespace tessera::python

namespace pybind11::detail {

bool type_caster<tessera::Scalar>::load(handle src, bool /*convert*/) {
  PyObject* o = src.ptr();
  if (PyBool_Check(o)) {
    value = tessera::Scalar(o == Py_True);
    return true;
  }
  if (PyLong_Check(o)) {
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow) {
      PyErr_Clear();
      throw py::value_error("value cannot be converted to type int64 without overflow");
    }
    value = tessera::Scalar(static_cast<int64_t>(v));
    return true;
  }
  if (PyFloat_Check(o)) {
    value = tessera::Scalar(PyFloat_AS_DOUBLE(o));
    return true;
  }
  if (tessera::python::is_tensor(src) || PyUnicode_Check(o) || PySequence_Check(o)) return false;
  // numpy scalars and other numbers: integers through __index__, the rest through __float__.
  if (PyObject_HasAttrString(o, "dtype") && PyObject_HasAttrString(o, "item")) {
    py::object item = py::reinterpret_borrow<py::object>(src).attr("item")();
    if (PyBool_Check(item.ptr()) || PyLong_Check(item.ptr()) || PyFloat_Check(item.ptr())) return load(item, true);
    return false;
  }
  if (PyIndex_Check(o)) {
    py::object i = py::reinterpret_steal<py::object>(PyNumber_Index(o));
    if (!i) {
      PyErr_Clear();
      return false;
    }
    return load(i, true);
  }
  if (PyNumber_Check(o) && Py_TYPE(o)->tp_as_number && Py_TYPE(o)->tp_as_number->nb_float) {
    double d = PyFloat_AsDouble(o);
    if (d == -1.0 && PyErr_Occurred()) {
      PyErr_Clear();
      return false;
    }
    value = tessera::Scalar(d);
    return true;
  }
  return false;
}

}  // namespace pybind11::detail
