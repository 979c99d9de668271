// Factories with PyTorch's Python signatures: zeros(2, 3, dtype=..., device=..., requires_grad=...),
// zeros((2, 3)), the *_like forms, arange / linspace / eye, the random factories and manual_seed.
#include "bindings.h"

namespace tessera::python {
namespace {

struct FactoryArgs {
  std::optional<DType> dtype;
  Device device = kCPU;
  bool requires_grad = false;
  bool pin_memory = false;
  Generator* generator = nullptr;
  bool device_given = false;
};

FactoryArgs parse_kwargs(const py::kwargs& kwargs, const char* op) {
  FactoryArgs a;
  for (auto [k, v] : kwargs) {
    std::string key = k.cast<std::string>();
    if (key == "dtype") a.dtype = optional_dtype(v, op);
    else if (key == "device") { if (!v.is_none()) { a.device = device_from_object(v, op); a.device_given = true; } }
    else if (key == "requires_grad") a.requires_grad = v.cast<bool>();
    else if (key == "pin_memory") a.pin_memory = v.cast<bool>();
    else if (key == "generator") a.generator = v.is_none() ? nullptr : v.cast<Generator*>();
    else if (key == "layout" || key == "memory_format") {}
    else throw py::type_error(std::string(op) + "() got an unexpected keyword argument '" + key + "'");
  }
  return a;
}

Tensor finish(Tensor t, const FactoryArgs& a) {
  if (a.pin_memory) t = t.pin_memory();
  if (a.requires_grad) t.requires_grad_(true);
  return t;
}

TensorOptions options(const FactoryArgs& a) {
  TensorOptions o(a.device);
  o.dtype = a.dtype;
  return o;
}

TensorOptions like_options(const Tensor& t, const FactoryArgs& a) {
  TensorOptions o(a.device_given ? a.device : t.device());
  o.dtype = a.dtype.value_or(t.dtype());
  return o;
}

template <class F>
void def_sized(py::module_& m, const char* name, F make) {
  m.def(name, [name, make](py::args args, py::kwargs kwargs) {
    Shape sizes = shape_from_args(args, name);
    FactoryArgs a = parse_kwargs(kwargs, name);
    Tensor t;
    {
      py::gil_scoped_release r;
      t = make(sizes, a);
    }
    return finish(t, a);
  });
}

template <class F>
void def_like(py::module_& m, const char* name, F make) {
  m.def(name, [name, make](const Tensor& like, py::kwargs kwargs) {
    FactoryArgs a = parse_kwargs(kwargs, name);
    Tensor t;
    {
      py::gil_scoped_release r;
      t = make(like, a);
    }
    return finish(t, a);
  }, py::arg("input"));
}

}  // namespace

void init_factories(py::module_& m) {
  def_sized(m, "zeros", [](const Shape& s, const FactoryArgs& a) { return zeros(s, options(a)); });
  def_sized(m, "ones", [](const Shape& s, const FactoryArgs& a) { return ones(s, options(a)); });
  def_sized(m, "empty", [](const Shape& s, const FactoryArgs& a) { return empty(s, options(a)); });
  def_sized(m, "randn", [](const Shape& s, const FactoryArgs& a) { return randn(s, options(a), a.generator); });
  def_sized(m, "rand", [](const Shape& s, const FactoryArgs& a) { return rand(s, options(a), a.generator); });
  def_like(m, "zeros_like", [](const Tensor& t, const FactoryArgs& a) { return zeros_like(t, like_options(t, a)); });
  def_like(m, "ones_like", [](const Tensor& t, const FactoryArgs& a) { return ones_like(t, like_options(t, a)); });
  def_like(m, "empty_like", [](const Tensor& t, const FactoryArgs& a) { return empty_like(t, like_options(t, a)); });
  def_like(m, "randn_like", [](const Tensor& t, const FactoryArgs& a) { return randn_like(t, like_options(t, a), a.generator); });
  def_like(m, "rand_like", [](const Tensor& t, const FactoryArgs& a) { return rand_like(t, like_options(t, a), a.generator); });

  m.def("full", [](py::object size, const Scalar& value, py::kwargs kwargs) {
    FactoryArgs a = parse_kwargs(kwargs, "full");
    Shape s = shape_from_object(size, "full");
    return finish(full(s, value, options(a)), a);
  }, py::arg("size"), py::arg("fill_value"));
  m.def("full_like", [](const Tensor& t, const Scalar& value, py::kwargs kwargs) {
    FactoryArgs a = parse_kwargs(kwargs, "full_like");
    return finish(full_like(t, value, like_options(t, a)), a);
  }, py::arg("input"), py::arg("fill_value"));
  m.def("arange", [](const Scalar& first, std::optional<Scalar> end, const Scalar& step, py::kwargs kwargs) {
    FactoryArgs a = parse_kwargs(kwargs, "arange");
    Tensor t = end ? arange(first, *end, step, options(a)) : arange(first, options(a));
    return finish(t, a);
  }, py::arg("start"), py::arg("end") = py::none(), py::arg("step") = 1);
  m.def("linspace", [](double start, double end, int64_t steps, py::kwargs kwargs) {
    FactoryArgs a = parse_kwargs(kwargs, "linspace");
    return finish(linspace(start, end, steps, options(a)), a);
  }, py::arg("start"), py::arg("end"), py::arg("steps"));
  m.def("eye", [](int64_t n, std::optional<int64_t> mcols, py::kwargs kwargs) {
    FactoryArgs a = parse_kwargs(kwargs, "eye");
    return finish(eye(n, mcols, options(a)), a);
  }, py::arg("n"), py::arg("m") = py::none());
  m.def("randint", [](py::args args, py::kwargs kwargs) {
    // randint(high, size) or randint(low, high, size)
    TS_CHECK(args.size() == 2 || args.size() == 3, ValueError, "randint(): expected (high, size) or (low, high, size), got ",
             args.size(), " positional arguments");
    FactoryArgs a = parse_kwargs(kwargs, "randint");
    int64_t low = args.size() == 3 ? args[0].cast<int64_t>() : 0;
    int64_t high = args[args.size() - 2].cast<int64_t>();
    Shape s = shape_from_object(args[args.size() - 1], "randint");
    TensorOptions o = options(a);
    if (!o.dtype) o.dtype = kInt64;
    return finish(randint(low, high, s, o, a.generator), a);
  });
  m.def("randperm", [](int64_t n, py::kwargs kwargs) {
    FactoryArgs a = parse_kwargs(kwargs, "randperm");
    TensorOptions o = options(a);
    if (!o.dtype) o.dtype = kInt64;
    return finish(randperm(n, o, a.generator), a);
  }, py::arg("n"));
  m.def("scalar_tensor", [](const Scalar& v, py::kwargs kwargs) {
    FactoryArgs a = parse_kwargs(kwargs, "scalar_tensor");
    TensorOptions o = options(a);
    if (!o.dtype) o.dtype = kFloat32;
    return finish(scalar_tensor(v, o), a);
  }, py::arg("s"));

  py::class_<Generator>(m, "Generator")
      .def(py::init([](py::object device) {
        (void)device;
        return new Generator();
      }), py::arg("device") = "cpu")
      .def("manual_seed", [](py::object self, uint64_t seed) { self.cast<Generator&>().manual_seed(seed); return self; })
      .def("initial_seed", &Generator::seed);
  m.def("manual_seed", [](uint64_t seed) { manual_seed(seed); }, py::arg("seed"));
  m.def("set_num_threads", &set_num_threads);
  m.def("get_num_threads", &get_num_threads);
}

}  // namespace tessera::python
