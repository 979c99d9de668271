// The arithmetic operators of tessera.Tensor (+, -, *, /) as CPython number slots, ahead of
// pybind11's dispatch.
//
// Note [Per-op cost from Python]: `a + b` on two small tensors costs about a microsecond from Python,
// and most of it is not the op. Through pybind11, Python's nb_add slot of the class is the generic
// slot_nb_add: it looks __add__ up in the type, binds it, calls pybind11's dispatcher, which tries the
// overloads in turn, converting each argument through a caster that finds Tensor's type record by
// hashing its type name, and converts the result the same way. Measured with perf on the Xeon of
// bench/NOTES.md ("The per-op path from Python"), that machinery was about a quarter of the samples of
// a 1024-element add. PyTorch's tensor operators are C slots over the C API. These are too: the slot
// checks its operands' types directly (a Tensor, or an exact Python int or float), reads the C++
// Tensor out of pybind11's instance with the type record looked up once, and calls the same C++
// operator the bindings call (so results, promotion, autograd and errors are those of the bound
// __add__). Anything else (a bool, a numpy scalar, a list, another class's __radd__) goes to the bound
// methods, as CPython's generic slot would send it (fallback() below). Errors are raised as the module's exception translator raises them
// (errors.cpp, set_python_error).
//
// The GIL (Note [GIL release] in tensor.cpp): an op whose operands are CPU tensors of at most
// kKeepGilElements elements keeps it. It runs on this thread for well under a microsecond (below the
// CPU kernels' parallel grain) and calls back into nothing, so another Python thread gains nothing
// from the release, while releasing and taking the GIL back costs about a tenth of the op. Every other
// op releases it while it runs, as PyTorch does.
#include "bindings.h"

namespace tessera::python {
namespace {

constexpr int64_t kKeepGilElements = 32768;

PyTypeObject* g_tensor_type = nullptr;
const py::detail::type_info* g_tensor_info = nullptr;

enum Op { kAdd, kSub, kMul, kDiv, kNumOps };
const char* const kNames[kNumOps][2] = {
    {"__add__", "__radd__"}, {"__sub__", "__rsub__"}, {"__mul__", "__rmul__"}, {"__truediv__", "__rtruediv__"}};
PyObject* g_names[kNumOps][2] = {};  // interned

// The C++ tensor of a tessera.Tensor (or of an instance of a subclass), else nullptr.
const Tensor* as_tensor(PyObject* o) {
  if (!PyObject_TypeCheck(o, g_tensor_type)) return nullptr;
  auto* inst = reinterpret_cast<py::detail::instance*>(o);
  py::detail::value_and_holder vh = inst->get_value_and_holder(g_tensor_info, /*throw_if_missing=*/false);
  if (!vh || !vh.holder_constructed()) return nullptr;  // not initialized: pybind11's path says so
  return static_cast<const Tensor*>(vh.value_ptr());
}

// An exact Python int (that fits int64) or float, as a Scalar of its category (Note [Python scalars]).
bool as_scalar(PyObject* o, Scalar& out) {
  if (PyFloat_CheckExact(o)) {
    out = Scalar(PyFloat_AS_DOUBLE(o));
    return true;
  }
  if (PyLong_CheckExact(o)) {
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow != 0 || (v == -1 && PyErr_Occurred())) {
      PyErr_Clear();
      return false;  // pybind11's caster raises its own error for it
    }
    out = Scalar(static_cast<int64_t>(v));
    return true;
  }
  return false;
}

// What CPython's generic slot (slot_nb_add and friends) does for a class whose operators are Python
// methods: the left operand's __add__ if it is a Tensor, then, when that gives NotImplemented, the
// right one's __radd__ if it is a Tensor of another class. The methods are looked up on the type, as
// the slot does (an instance's __dict__ does not shadow them). The generic slot itself cannot be
// called once the class's slot is this one: it calls __add__ only for classes whose slot it is.
PyObject* call_on_type(PyObject* self, PyObject* name, PyObject* arg) {
  PyObject* fn = PyObject_GetAttr(reinterpret_cast<PyObject*>(Py_TYPE(self)), name);
  if (!fn) return nullptr;
  PyObject* r = PyObject_CallFunctionObjArgs(fn, self, arg, nullptr);
  Py_DECREF(fn);
  return r;
}

PyObject* fallback(int k, PyObject* v, PyObject* w) {
  if (PyObject_TypeCheck(v, g_tensor_type)) {
    PyObject* r = call_on_type(v, g_names[k][0], w);
    if (r != Py_NotImplemented) return r;
    Py_DECREF(r);
  }
  if (Py_TYPE(w) != Py_TYPE(v) && PyObject_TypeCheck(w, g_tensor_type)) return call_on_type(w, g_names[k][1], v);
  Py_RETURN_NOTIMPLEMENTED;
}

template <int K, class A, class B>
Tensor apply(const A& a, const B& b) {
  if constexpr (K == kAdd) return a + b;
  else if constexpr (K == kSub) return a - b;
  else if constexpr (K == kMul) return a * b;
  else return a / b;
}

bool keeps_gil(const Tensor* a, const Tensor* b) {
  for (const Tensor* t : {a, b})
    if (t && (!t->device().is_cpu() || t->numel() > kKeepGilElements)) return false;
  return true;
}

template <int K, class A, class B>
Tensor run(const A& a, const B& b, bool keep_gil) {
  if (keep_gil) return apply<K>(a, b);
  py::gil_scoped_release release;
  return apply<K>(a, b);
}

template <int K>
PyObject* binary_slot(PyObject* v, PyObject* w) {
  const Tensor* a = as_tensor(v);
  const Tensor* b = as_tensor(w);
  Scalar s;
  try {
    Tensor r;
    if (a && b) r = run<K>(*a, *b, keeps_gil(a, b));
    else if (a && as_scalar(w, s)) r = run<K>(*a, s, keeps_gil(a, nullptr));
    else if (b && as_scalar(v, s)) r = run<K>(s, *b, keeps_gil(nullptr, b));
    else return fallback(K, v, w);
    return py::cast(std::move(r)).release().ptr();
  } catch (...) {
    set_python_error(std::current_exception());
    return nullptr;
  }
}

}  // namespace

void init_fast_ops(py::class_<Tensor>& cls) {
  auto* type = reinterpret_cast<PyTypeObject*>(cls.ptr());
  g_tensor_type = type;
  g_tensor_info = py::detail::get_type_info(typeid(Tensor));
  if (!g_tensor_info) throw std::runtime_error("tessera._C: the Tensor class is not registered");
  PyNumberMethods* num = type->tp_as_number;
  if (!num || !num->nb_add || !num->nb_subtract || !num->nb_multiply || !num->nb_true_divide)
    throw std::runtime_error("tessera._C: the Tensor class has no arithmetic slots to speed up");
  for (int k = 0; k < kNumOps; ++k)
    for (int r = 0; r < 2; ++r) {
      g_names[k][r] = PyUnicode_InternFromString(kNames[k][r]);
      if (!g_names[k][r]) throw py::error_already_set();
    }
  num->nb_add = &binary_slot<kAdd>;
  num->nb_subtract = &binary_slot<kSub>;
  num->nb_multiply = &binary_slot<kMul>;
  num->nb_true_divide = &binary_slot<kDiv>;
  PyType_Modified(type);
}

}  // namespace tessera::python
