// Python's indexing syntax on tessera.Tensor, with PyTorch's semantics: t[i], t[a:b:s], t[None],
// t[...], t[mask], t[index_tensor], t[[0, 2]], and tuples of these; t[key] = value writes in place.
//
// Note [Index translation]: a key becomes basic indexing first, from left to right over the tensor's
// dims: an int selects (the dim goes away), a slice narrows with a step, None inserts a size-1 dim,
// Ellipsis skips the dims no other item consumes, True adds a size-1 dim. All of these are views of
// the tensor. The tensors, lists and bool masks left over form one advanced index, applied with
// Tensor::index over the view (one optional index per dim); a write through such a key is an
// index_put_ on the view, a write through a basic key is a copy_ (or fill_) into the view, so both
// reach the tensor's memory and its autograd history as PyTorch's do. As in PyTorch, a negative step
// raises ValueError("step must be greater than zero") and an unsupported item raises IndexError.
#include "bindings.h"

namespace tessera::python {
namespace {

struct Indexed {
  Tensor view;                               // after basic indexing
  std::vector<std::optional<Tensor>> index;  // advanced indices per dim of `view` (empty: none)
};

// How many dims of the tensor an item consumes.
int64_t consumed_dims(py::handle item) {
  PyObject* o = item.ptr();
  if (o == Py_None || o == Py_Ellipsis || PyBool_Check(o)) return 0;
  if (is_tensor(item)) {
    const Tensor& t = item.cast<const Tensor&>();
    return (t.dtype() == kBool || t.dtype() == kUInt8) ? std::max<int64_t>(t.dim(), 1) : 1;
  }
  return 1;
}

Tensor index_tensor_of(py::handle item, const Device& device) {
  Tensor t;
  if (is_tensor(item)) {
    t = item.cast<Tensor>();
  } else {
    t = tensor_from_data(item, std::nullopt, kCPU, "index");
  }
  TS_CHECK(t.dtype() == kInt64 || t.dtype() == kInt32 || t.dtype() == kBool || t.dtype() == kUInt8 || t.dtype() == kInt8,
           IndexError, "tensors used as indices must be long, int, byte or bool tensors (got ", dtype_name(t.dtype()), ")");
  if (t.dtype() == kUInt8) t = t.to(kBool);
  if (t.dtype() == kInt32 || t.dtype() == kInt8) t = t.to(kInt64);
  if (t.device() != device) t = t.to(device);
  return t;
}

Indexed apply_key(const Tensor& self, py::handle key) {
  Indexed r{self, {}};
  py::tuple items;
  if (PyTuple_Check(key.ptr())) items = py::reinterpret_borrow<py::tuple>(key);
  else items = py::make_tuple(key);

  int64_t consumed = 0, ellipses = 0;
  for (auto item : items) {
    consumed += consumed_dims(item);
    if (item.ptr() == Py_Ellipsis) ++ellipses;
  }
  TS_CHECK(ellipses <= 1, IndexError, "an index can only have a single ellipsis ('...')");
  TS_CHECK(consumed <= self.dim(), IndexError, "too many indices for tensor of dimension ", self.dim());

  int64_t dim = 0;
  bool advanced = false;
  std::vector<std::optional<Tensor>> index;
  Tensor& v = r.view;
  for (auto item : items) {
    PyObject* o = item.ptr();
    if (PyLong_Check(o) && !PyBool_Check(o)) {
      v = v.select(dim, item.cast<int64_t>());
    } else if (PySlice_Check(o)) {
      Py_ssize_t start, stop, step;
      if (PySlice_Unpack(o, &start, &stop, &step) < 0) throw py::error_already_set();
      if (step <= 0) throw py::value_error("step must be greater than zero");
      const int64_t size = v.size(dim);
      Py_ssize_t len = PySlice_AdjustIndices(size, &start, &stop, step);
      if (!(start == 0 && step == 1 && len == size)) {
        const int64_t end = len > 0 ? start + (len - 1) * step + 1 : start;
        v = v.slice(dim, start, end, step);
      }
      index.emplace_back();
      ++dim;
    } else if (o == Py_None) {
      v = v.unsqueeze(dim);
      index.emplace_back();
      ++dim;
    } else if (o == Py_Ellipsis) {
      for (int64_t i = 0; i < self.dim() - consumed; ++i) index.emplace_back();
      dim += self.dim() - consumed;
    } else if (PyBool_Check(o)) {
      v = v.unsqueeze(dim);
      index.emplace_back(full({1}, Scalar(o == Py_True), TensorOptions(kBool, v.device())));
      advanced = true;
      ++dim;
    } else if (is_tensor(item) || PyList_Check(o) || (PySequence_Check(o) && !PyUnicode_Check(o) && !PyBytes_Check(o))) {
      Tensor t = index_tensor_of(item, v.device());
      index.emplace_back(t);
      advanced = true;
      dim += t.dtype() == kBool ? std::max<int64_t>(t.dim(), 1) : 1;
      // A bool mask over k dims is one entry of the index list covering k dims (PyTorch's expansion to
      // k long tensors happens inside index()); pad nothing here.
    } else if (PyIndex_Check(o) && !PyFloat_Check(o)) {
      py::object i = py::reinterpret_steal<py::object>(PyNumber_Index(o));
      if (!i) throw py::error_already_set();
      v = v.select(dim, i.cast<int64_t>());
    } else {
      throw py::index_error(std::string("only integers, slices (`:`), ellipsis (`...`), None and long or byte "
                                        "Variables are valid indices (got ") +
                            std::string(py::str(item.get_type().attr("__name__"))) + ")");
    }
  }
  if (advanced) {
    while (!index.empty() && !index.back()) index.pop_back();
    r.index = std::move(index);
  }
  return r;
}

Tensor getitem(const Tensor& self, py::handle key) {
  PyObject* o = key.ptr();
  if (PyLong_Check(o) && !PyBool_Check(o)) {
    TS_CHECK(self.dim() > 0, IndexError, "invalid index of a 0-dim tensor. Use `tensor.item()` in Python or "
             "`tensor.item<T>()` in C++ to convert a 0-dim tensor to a number");
    return self.select(0, key.cast<int64_t>());
  }
  Indexed r = apply_key(self, key);
  if (r.index.empty()) return r.view;
  py::gil_scoped_release release;
  return r.view.index(r.index);
}

// PyTorch drops a value's leading size-1 dims beyond the target's rank: x[1, 1:3] = t of (1, 2).
Tensor strip_leading_ones(Tensor v, int64_t target_dim) {
  while (v.dim() > target_dim && v.size(0) == 1) v = v.squeeze(0);
  return v;
}

void setitem(Tensor& self, py::handle key, py::handle value) {
  Indexed r = apply_key(self, key);
  if (is_tensor(value)) {
    Tensor v = value.cast<Tensor>();
    if (r.index.empty()) v = strip_leading_ones(v, r.view.dim());
    py::gil_scoped_release release;
    if (r.index.empty()) {
      r.view.copy_(v);
    } else {
      if (v.dtype() != r.view.dtype()) v = v.to(r.view.dtype());
      if (v.device() != r.view.device()) v = v.to(r.view.device());
      r.view.index_put_(r.index, v);
    }
    return;
  }
  Scalar s;
  try {
    s = py::cast<Scalar>(value);
  } catch (const py::cast_error&) {
    Tensor v = tensor_from_data(value, self.dtype(), self.device(), "__setitem__");
    py::gil_scoped_release release;
    if (r.index.empty()) r.view.copy_(v);
    else r.view.index_put_(r.index, v);
    return;
  }
  py::gil_scoped_release release;
  if (r.index.empty()) r.view.fill_(s);
  else r.view.index_put_(r.index, full({}, s, TensorOptions(r.view.dtype(), r.view.device())));
}

}  // namespace

void init_tensor_index(py::class_<Tensor>& cls) {
  cls.def("__getitem__", [](const Tensor& self, py::handle key) { return getitem(self, key); })
      .def("__setitem__", [](Tensor& self, py::handle key, py::handle value) { setitem(self, key, value); });
}

}  // namespace tessera::python
