// tessera.Tensor: the methods, operators and properties of PyTorch's torch.Tensor over tessera::Tensor.
// Indexing is in tensor_index.cpp, conversions to and from Python data (tensor(), item(), tolist(),
// numpy()) in tensor_data.cpp, DLPack in dlpack.cpp.
//
// Note [GIL release]: every binding that runs an op (a kernel, or a copy between devices) releases the
// GIL while it runs (py::call_guard<py::gil_scoped_release>), as PyTorch does, so other Python threads
// (a data loader's, a logger's) run meanwhile; arguments are converted before and the result after,
// with the GIL held. Metadata reads (shape, dtype, ...) keep it: they take nanoseconds. The C slots of
// + - * / (fast_ops.cpp) keep it for CPU ops of at most 32768 elements, which finish on this thread in
// less time than the release and the re-acquisition take.
//
// Note [In-place operators]: `a += b` must leave `a` the same Python object (other names of it, and a
// module's parameter, see the change), so __iadd__ and the other in-place methods return `self`, the
// object they were called on, not a new wrapper of the same tensor.
#include <pybind11/functional.h>

#include <algorithm>

#include "bindings.h"

namespace tessera::python {
namespace {

using Release = py::call_guard<py::gil_scoped_release>;

py::object& return_types() {
  static auto* m = new py::object();
  return *m;
}
py::object values_indices(const char* name, std::tuple<Tensor, Tensor> r) {
  return return_types().attr(name)(std::get<0>(r), std::get<1>(r));
}

// to(dtype), to(device, dtype=None, non_blocking=False, copy=False), to(other), to(dtype=, device=).
Tensor tensor_to(const Tensor& self, const py::args& args, const py::kwargs& kwargs) {
  std::optional<Device> device;
  std::optional<DType> dtype;
  bool non_blocking = false, copy = false;
  size_t pos = 0;
  if (pos < args.size() && is_tensor(args[pos])) {
    const Tensor& other = args[pos].cast<const Tensor&>();
    device = other.device();
    dtype = other.dtype();
    ++pos;
  } else {
    if (pos < args.size() && !py::isinstance<DType>(args[pos]) && !args[pos].is_none()) device = device_from_object(args[pos++], "to");
    else if (pos < args.size() && args[pos].is_none()) ++pos;
    if (pos < args.size() && py::isinstance<DType>(args[pos])) dtype = args[pos++].cast<DType>();
  }
  if (pos < args.size()) non_blocking = args[pos++].cast<bool>();
  if (pos < args.size()) copy = args[pos++].cast<bool>();
  if (pos < args.size()) throw py::type_error("to() received too many positional arguments");
  for (auto [k, v] : kwargs) {
    std::string key = k.cast<std::string>();
    if (key == "device") { if (!v.is_none()) device = device_from_object(v, "to"); }
    else if (key == "dtype") dtype = optional_dtype(v, "to");
    else if (key == "non_blocking") non_blocking = v.cast<bool>();
    else if (key == "copy") copy = v.cast<bool>();
    else if (key == "memory_format") {}
    else throw py::type_error("to() got an unexpected keyword argument '" + key + "'");
  }
  py::gil_scoped_release release;
  if (device && dtype) return self.to(*device, *dtype, non_blocking, copy);
  if (device) return self.to(*device, non_blocking, copy);
  if (dtype) return self.to(*dtype, copy);
  return copy ? self.clone() : self;
}

std::string tensor_repr(const Tensor& t) {
  // The C++ printer writes dtype=float64 (PyTorch's C++ spelling); Python shows the module's name.
  std::string s = t.str();
  for (size_t at = s.find("dtype="); at != std::string::npos; at = s.find("dtype=", at + 14)) s.insert(at + 6, "tessera.");
  std::string extra;
  if (auto fn = t.grad_fn()) extra = "grad_fn=<" + fn->name() + ">";
  else if (t.requires_grad()) extra = "requires_grad=True";
  if (extra.empty()) return s;
  // PyTorch puts it last, on the same line when it fits.
  s.pop_back();
  size_t line_start = s.rfind('\n');
  size_t last_len = s.size() - (line_start == std::string::npos ? 0 : line_start + 1);
  if (last_len + extra.size() + 3 > 80) s += ",\n       " + extra + ")";
  else s += ", " + extra + ")";
  return s;
}

Tensor squeeze_dims(const Tensor& t, py::handle dim) {
  if (dim.is_none()) return t.squeeze();
  if (PyTuple_Check(dim.ptr()) || PyList_Check(dim.ptr())) {
    Shape dims = shape_from_object(dim, "squeeze");
    std::vector<int64_t> wrapped;
    for (int64_t d : dims) wrapped.push_back(wrap_dim(d, t.dim(), "squeeze"));
    std::sort(wrapped.rbegin(), wrapped.rend());
    Tensor r = t;
    for (int64_t d : wrapped) r = r.squeeze(d);
    return r;
  }
  return t.squeeze(dim.cast<int64_t>());
}

std::vector<int64_t> dims_list(const Tensor& self, const std::optional<Dims>& d) {
  return d ? d->dims : std::vector<int64_t>{};
}

}  // namespace

void init_tensor(py::module_& m) {
  {
    py::dict scope;
    py::exec(R"PY(
import collections
class _ReturnTypes:
    pass
rt = _ReturnTypes()
for _n in ("max", "min", "sort", "topk", "kthvalue", "mode", "median", "var_mean"):
    setattr(rt, _n, collections.namedtuple(_n, ["values", "indices"]))
rt.var_mean = collections.namedtuple("var_mean", ["var", "mean"])
)PY", scope);
    return_types() = scope["rt"];
    m.attr("return_types") = return_types();
  }

  py::class_<Tensor> cls(m, "Tensor", py::dynamic_attr());
  cls.def(py::init([](const Tensor& other) { return other; }), py::arg("data"))
      .def("__repr__", &tensor_repr)
      .def("__str__", &tensor_repr)
      // By identity, as torch.Tensor (== is elementwise, so a tensor is never equal to compare as a key).
      .def("__hash__", [](py::handle self) { return reinterpret_cast<intptr_t>(self.ptr()) >> 4; })
      // ---- metadata ----
      .def_property_readonly("shape", [](const Tensor& t) { return size_object(t.sizes()); })
      .def("size", [](const Tensor& t, py::object dim) -> py::object {
        if (dim.is_none()) return size_object(t.sizes());
        return py::int_(t.size(dim.cast<int64_t>()));
      }, py::arg("dim") = py::none())
      .def("stride", [](const Tensor& t, py::object dim) -> py::object {
        if (dim.is_none()) return py::tuple(py::cast(t.strides()));
        return py::int_(t.stride(dim.cast<int64_t>()));
      }, py::arg("dim") = py::none())
      .def_property_readonly("dtype", [](const Tensor& t) { return dtype_object(t.dtype()); })
      .def_property_readonly("device", &Tensor::device)
      .def_property_readonly("ndim", &Tensor::dim)
      .def("dim", &Tensor::dim)
      .def("ndimension", &Tensor::dim)
      .def("numel", &Tensor::numel)
      .def("nelement", &Tensor::numel)
      .def("storage_offset", &Tensor::storage_offset)
      .def("element_size", &Tensor::element_size)
      .def_property_readonly("itemsize", &Tensor::element_size)
      .def_property_readonly("nbytes", &Tensor::nbytes)
      .def("is_contiguous", [](const Tensor& t, py::object fmt) {
        if (!fmt.is_none() && py::str(fmt).cast<std::string>() == "channels_last") return t.is_contiguous(MemoryFormat::ChannelsLast);
        return t.is_contiguous();
      }, py::arg("memory_format") = py::none())
      .def("is_floating_point", &Tensor::is_floating_point)
      .def_property_readonly("is_cuda", &Tensor::is_cuda)
      .def_property_readonly("is_cpu", &Tensor::is_cpu)
      .def_property_readonly("is_meta", &Tensor::is_meta)
      .def("is_pinned", &Tensor::is_pinned)
      .def("data_ptr", [](const Tensor& t) { return reinterpret_cast<uintptr_t>(t.data_ptr()); })
      .def("is_set_to", [](const Tensor& a, const Tensor& b) {
        return a.is_alias_of(b) && a.storage_offset() == b.storage_offset() && a.sizes() == b.sizes() && a.strides() == b.strides();
      })
      .def("_is_alias_of", &Tensor::is_alias_of)
      .def_property_readonly("_version", &Tensor::version)
      .def("__len__", [](const Tensor& t) {
        if (t.dim() == 0) throw py::type_error("len() of a 0-d tensor");
        return t.size(0);
      })
      .def("__bool__", [](const Tensor& t) {
        TS_CHECK(t.numel() == 1, ValueError, "Boolean value of Tensor with more than one value is ambiguous");
        return t.item().to_bool();
      })
      .def("__float__", [](const Tensor& t) {
        TS_CHECK(t.numel() == 1, ValueError, "only one element tensors can be converted to Python scalars");
        return t.item().to_double();
      })
      .def("__int__", [](const Tensor& t) {
        TS_CHECK(t.numel() == 1, ValueError, "only one element tensors can be converted to Python scalars");
        return t.item().to_int();
      })
      .def("__index__", [](const Tensor& t) {
        if (t.numel() != 1 || !is_integral(t.dtype(), true))
          throw py::type_error("only integer tensors of a single element can be converted to an index");
        return t.item().to_int();
      })
      // ---- conversions ----
      .def("to", &tensor_to)
      .def("cpu", &Tensor::cpu, Release())
      .def("cuda", [](const Tensor& t, py::object device, bool non_blocking) {
        int index = 0;
        if (!device.is_none()) {
          Device d = device_from_object(device, "cuda");
          TS_CHECK(d.is_cuda(), ValueError, "cuda(): expected a cuda device, got ", d.str());
          index = d.index();
        } else if (cuda::is_available()) {
          index = cuda::current_device();
        }
        py::gil_scoped_release release;
        return t.cuda(index, non_blocking);
      }, py::arg("device") = py::none(), py::arg("non_blocking") = false)
      .def("type", [](const Tensor& t, py::object dtype) -> py::object {
        if (dtype.is_none()) return py::str(std::string(t.is_cuda() ? "tessera.cuda." : "tessera.") + dtype_name(t.dtype()));
        return py::cast(t.to(dtype_from_object(dtype, "type")));
      }, py::arg("dtype") = py::none())
      .def("float", [](const Tensor& t) { return t.to(kFloat32); }, Release())
      .def("double", [](const Tensor& t) { return t.to(kFloat64); }, Release())
      .def("half", [](const Tensor& t) { return t.to(kFloat16); }, Release())
      .def("bfloat16", [](const Tensor& t) { return t.to(kBFloat16); }, Release())
      .def("long", [](const Tensor& t) { return t.to(kInt64); }, Release())
      .def("int", [](const Tensor& t) { return t.to(kInt32); }, Release())
      .def("short", [](const Tensor&) -> Tensor { TS_THROW(DTypeError, "short(): tessera has no int16 dtype"); })
      .def("char", [](const Tensor& t) { return t.to(kInt8); }, Release())
      .def("byte", [](const Tensor& t) { return t.to(kUInt8); }, Release())
      .def("bool", [](const Tensor& t) { return t.to(kBool); }, Release())
      .def("contiguous", [](const Tensor& t, py::object fmt) {
        bool cl = !fmt.is_none() && py::str(fmt).cast<std::string>() == "channels_last";
        py::gil_scoped_release release;
        return cl ? t.contiguous(MemoryFormat::ChannelsLast) : t.contiguous();
      }, py::arg("memory_format") = py::none())
      .def("clone", [](const Tensor& t, py::object) { return t.clone(); }, py::arg("memory_format") = py::none(), Release())
      .def("pin_memory", &Tensor::pin_memory, Release())
      .def("copy_", [](py::object self, const Tensor& src, bool non_blocking) {
        { py::gil_scoped_release r; self.cast<Tensor&>().copy_(src, non_blocking); }
        return self;
      }, py::arg("src"), py::arg("non_blocking") = false)
      .def("fill_", [](py::object self, const Scalar& v) { { py::gil_scoped_release r; self.cast<Tensor&>().fill_(v); } return self; })
      .def("fill_", [](py::object self, const Tensor& v) {
        TS_CHECK(v.dim() == 0, ValueError, "fill_ only supports 0-dimension value tensor but got tensor with ", v.dim(), " dimensions.");
        Scalar s = v.item();
        { py::gil_scoped_release r; self.cast<Tensor&>().fill_(s); }
        return self;
      })
      .def("zero_", [](py::object self) { { py::gil_scoped_release r; self.cast<Tensor&>().zero_(); } return self; })
      .def("uniform_", [](py::object self, double a, double b) { { py::gil_scoped_release r; self.cast<Tensor&>().uniform_(a, b); } return self; },
           py::arg("from") = 0.0, py::arg("to") = 1.0)
      .def("normal_", [](py::object self, double mean, double std) { { py::gil_scoped_release r; self.cast<Tensor&>().normal_(mean, std); } return self; },
           py::arg("mean") = 0.0, py::arg("std") = 1.0)
      .def("bernoulli_", [](py::object self, double p) { { py::gil_scoped_release r; self.cast<Tensor&>().bernoulli_(p); } return self; },
           py::arg("p") = 0.5)
      .def("random_", [](py::object self, int64_t from, py::object to) {
        Tensor& t = self.cast<Tensor&>();
        int64_t hi = to.is_none() ? from : to.cast<int64_t>();
        int64_t lo = to.is_none() ? 0 : from;
        { py::gil_scoped_release r; t.random_(lo, hi); }
        return self;
      }, py::arg("from"), py::arg("to") = py::none())
      // ---- views ----
      .def("view", [](const Tensor& t, py::args args) {
        if (args.size() == 1 && py::isinstance<DType>(args[0])) return t.view(args[0].cast<DType>());
        return t.view(shape_from_args(args, "view"));
      })
      .def("reshape", [](const Tensor& t, py::args args) { Shape s = shape_from_args(args, "reshape"); py::gil_scoped_release r; return t.reshape(s); })
      .def("view_as", &Tensor::view_as)
      .def("reshape_as", &Tensor::reshape_as, Release())
      .def("permute", [](const Tensor& t, py::args args) { return t.permute(shape_from_args(args, "permute")); })
      .def("transpose", &Tensor::transpose, py::arg("dim0"), py::arg("dim1"))
      .def("swapaxes", &Tensor::transpose, py::arg("axis0"), py::arg("axis1"))
      .def("t", &Tensor::t)
      .def_property_readonly("T", [](const Tensor& t) {
        Shape dims(t.dim());
        for (int64_t i = 0; i < t.dim(); ++i) dims[i] = t.dim() - 1 - i;
        return t.permute(dims);
      })
      .def_property_readonly("mT", &Tensor::mT)
      .def("expand", [](const Tensor& t, py::args args) { return t.expand(shape_from_args(args, "expand")); })
      .def("expand_as", &Tensor::expand_as)
      .def("squeeze", &squeeze_dims, py::arg("dim") = py::none())
      .def("unsqueeze", &Tensor::unsqueeze, py::arg("dim"))
      .def("narrow", &Tensor::narrow, py::arg("dim"), py::arg("start"), py::arg("length"))
      .def("select", &Tensor::select, py::arg("dim"), py::arg("index"))
      .def("flatten", &Tensor::flatten, py::arg("start_dim") = 0, py::arg("end_dim") = -1)
      .def("unflatten", [](const Tensor& t, int64_t dim, py::object sizes) { return t.unflatten(dim, shape_from_object(sizes, "unflatten")); },
           py::arg("dim"), py::arg("sizes"))
      .def("diagonal", &Tensor::diagonal, py::arg("offset") = 0, py::arg("dim1") = 0, py::arg("dim2") = 1)
      .def("movedim", &Tensor::movedim, py::arg("source"), py::arg("destination"))
      .def("as_strided", [](const Tensor& t, py::object size, py::object stride, std::optional<int64_t> off) {
        return t.as_strided(shape_from_object(size, "as_strided"), shape_from_object(stride, "as_strided"), off);
      }, py::arg("size"), py::arg("stride"), py::arg("storage_offset") = py::none())
      .def("unbind", [](const Tensor& t, int64_t dim) { return py::tuple(py::cast(t.unbind(dim))); }, py::arg("dim") = 0)
      .def("split", [](const Tensor& t, py::object size, int64_t dim) {
        if (PyLong_Check(size.ptr())) return py::tuple(py::cast(t.split(size.cast<int64_t>(), dim)));
        return py::tuple(py::cast(t.split(shape_from_object(size, "split"), dim)));
      }, py::arg("split_size"), py::arg("dim") = 0)
      .def("chunk", [](const Tensor& t, int64_t chunks, int64_t dim) { return py::tuple(py::cast(t.chunk(chunks, dim))); },
           py::arg("chunks"), py::arg("dim") = 0)
      .def("__iter__", [](const Tensor& t) {
        if (t.dim() == 0) throw py::type_error("iteration over a 0-d tensor");
        return py::iter(py::cast(t.unbind(0)));
      })
      // ---- autograd ----
      .def_property("requires_grad", &Tensor::requires_grad, [](Tensor& t, bool r) { t.requires_grad_(r); })
      .def("requires_grad_", [](py::object self, bool r) { self.cast<Tensor&>().requires_grad_(r); return self; },
           py::arg("requires_grad") = true)
      .def_property("grad", [](const Tensor& t) -> py::object {
        Tensor g = t.grad();
        return g.defined() ? py::cast(g) : py::none();
      }, [](const Tensor& t, py::object g) { t.set_grad(g.is_none() ? Tensor() : g.cast<Tensor>()); })
      .def_property_readonly("is_leaf", &Tensor::is_leaf)
      .def_property_readonly("grad_fn", [](const Tensor& t) -> py::object {
        auto fn = t.grad_fn();
        return fn ? py::cast(fn) : py::none();
      })
      .def_property("data", &Tensor::detach, [](Tensor& t, const Tensor& v) {
        TS_CHECK(v.sizes() == t.sizes() && v.dtype() == t.dtype() && v.device() == t.device(), ValueError,
                 "data: the new value must have the tensor's sizes, dtype and device (tessera swaps no storage; "
                 "got ", v.sizes(), " ", dtype_name(v.dtype()), " on ", v.device().str(), ", expected ", t.sizes(),
                 " ", dtype_name(t.dtype()), " on ", t.device().str(), ")");
        NoGradGuard g;
        t.detach().copy_(v);
      })
      .def("detach", &Tensor::detach)
      .def("detach_", [](py::object self) { self.cast<Tensor&>().detach_(); return self; })
      .def("retain_grad", &Tensor::retain_grad)
      .def_property_readonly("retains_grad", &Tensor::retains_grad)
      .def("backward", [](const Tensor& t, py::object gradient, std::optional<bool> retain_graph, bool create_graph, py::object inputs) {
        TS_CHECK(inputs.is_none(), NotImplementedError, "backward(): inputs= is not supported; use tessera.autograd.grad");
        Tensor g = gradient.is_none() ? Tensor() : gradient.cast<Tensor>();
        py::gil_scoped_release release;
        t.backward(g, retain_graph, create_graph);
      }, py::arg("gradient") = py::none(), py::arg("retain_graph") = py::none(), py::arg("create_graph") = false,
         py::arg("inputs") = py::none())
      .def("register_hook", [](const Tensor& t, py::function hook) {
        // The hook holds a Python function: it is called with the GIL taken (pybind11's function wrapper).
        std::function<Tensor(const Tensor&)> fn = [hook](const Tensor& g) -> Tensor {
          py::gil_scoped_acquire acquire;
          py::object r = hook(g);
          return r.is_none() ? Tensor() : r.cast<Tensor>();
        };
        uint64_t id = t.register_hook(std::move(fn));
        // PyTorch returns a handle with remove(); tessera.Tensor.register_hook (Python) wraps this.
        return py::cpp_function([t, id]() { t.remove_hook(id); });
      })
      .def("_remove_hook", &Tensor::remove_hook);

  // ---- arithmetic operators (Note [In-place operators]) ----
#define TS_PY_BINOP(pyname, rpyname, expr_tt, expr_ts, expr_st)                                        \
  cls.def(pyname, [](const Tensor& a, const Tensor& b) { return expr_tt; }, py::is_operator(), Release()) \
      .def(pyname, [](const Tensor& a, const Scalar& b) { return expr_ts; }, py::is_operator(), Release()) \
      .def(rpyname, [](const Tensor& b, const Scalar& a) { return expr_st; }, py::is_operator(), Release());
  TS_PY_BINOP("__add__", "__radd__", a + b, a + b, a + b)
  TS_PY_BINOP("__sub__", "__rsub__", a - b, a - b, a - b)
  TS_PY_BINOP("__mul__", "__rmul__", a * b, a * b, a * b)
  TS_PY_BINOP("__truediv__", "__rtruediv__", a / b, a / b, a / b)
  TS_PY_BINOP("__floordiv__", "__rfloordiv__", a.div(b, "floor"), a.div(b, "floor"), full_like(b, a).div(b, "floor"))
  TS_PY_BINOP("__mod__", "__rmod__", a % b, a % b, a % b)
  TS_PY_BINOP("__pow__", "__rpow__", a.pow(b), a.pow(b), pow(a, b))
  TS_PY_BINOP("__and__", "__rand__", a & b, a & b, a & b)
  TS_PY_BINOP("__or__", "__ror__", a | b, a | b, a | b)
  TS_PY_BINOP("__xor__", "__rxor__", a ^ b, a ^ b, a ^ b)
  TS_PY_BINOP("__lshift__", "__rlshift__", a.bitwise_left_shift(b), a.bitwise_left_shift(b), full_like(b, a).bitwise_left_shift(b))
  TS_PY_BINOP("__rshift__", "__rrshift__", a.bitwise_right_shift(b), a.bitwise_right_shift(b), full_like(b, a).bitwise_right_shift(b))
#undef TS_PY_BINOP
  cls.def("__matmul__", [](const Tensor& a, const Tensor& b) { return a.matmul(b); }, py::is_operator(), Release())
      .def("__neg__", [](const Tensor& a) { return -a; }, Release())
      .def("__pos__", [](const Tensor& a) { return a; })
      .def("__abs__", [](const Tensor& a) { return a.abs(); }, Release())
      .def("__invert__", [](const Tensor& a) { return ~a; }, Release());
#define TS_PY_CMP(pyname, op)                                                                              \
  cls.def(pyname, [](const Tensor& a, const Tensor& b) { return a op b; }, py::is_operator(), Release()) \
      .def(pyname, [](const Tensor& a, const Scalar& b) { return a op b; }, py::is_operator(), Release());
  TS_PY_CMP("__eq__", ==) TS_PY_CMP("__ne__", !=) TS_PY_CMP("__lt__", <) TS_PY_CMP("__le__", <=)
  TS_PY_CMP("__gt__", >) TS_PY_CMP("__ge__", >=)
#undef TS_PY_CMP
#define TS_PY_IOP(pyname, call)                                                                                \
  cls.def(pyname, [](py::object self, const Tensor& b) { { py::gil_scoped_release r; self.cast<Tensor&>().call(b); } return self; }, \
          py::is_operator())                                                                                   \
      .def(pyname, [](py::object self, const Scalar& b) { { py::gil_scoped_release r; self.cast<Tensor&>().call(b); } return self; }, \
          py::is_operator());
  TS_PY_IOP("__iadd__", add_) TS_PY_IOP("__isub__", sub_) TS_PY_IOP("__imul__", mul_) TS_PY_IOP("__itruediv__", div_)
  TS_PY_IOP("__imod__", remainder_) TS_PY_IOP("__ipow__", pow_) TS_PY_IOP("__iand__", bitwise_and_)
  TS_PY_IOP("__ior__", bitwise_or_) TS_PY_IOP("__ixor__", bitwise_xor_)
#undef TS_PY_IOP

  // ---- unary math: x.exp() and x.exp_() ----
#define TS_PY_UNARY(name)                                                                           \
  cls.def(#name, [](const Tensor& t) { return t.name(); }, Release())                            \
      .def(#name "_", [](py::object self) { { py::gil_scoped_release r; self.cast<Tensor&>().name##_(); } return self; });
  TS_PY_UNARY(neg) TS_PY_UNARY(abs) TS_PY_UNARY(exp) TS_PY_UNARY(exp2) TS_PY_UNARY(log) TS_PY_UNARY(log2)
  TS_PY_UNARY(log1p) TS_PY_UNARY(expm1) TS_PY_UNARY(sqrt) TS_PY_UNARY(rsqrt) TS_PY_UNARY(sin) TS_PY_UNARY(cos)
  TS_PY_UNARY(tan) TS_PY_UNARY(tanh) TS_PY_UNARY(sigmoid) TS_PY_UNARY(relu) TS_PY_UNARY(silu) TS_PY_UNARY(erf)
  TS_PY_UNARY(floor) TS_PY_UNARY(ceil) TS_PY_UNARY(round) TS_PY_UNARY(trunc) TS_PY_UNARY(sign)
  TS_PY_UNARY(reciprocal) TS_PY_UNARY(logical_not) TS_PY_UNARY(bitwise_not)
#undef TS_PY_UNARY
  cls.def("negative", [](const Tensor& t) { return t.neg(); }, Release())
      .def("gelu", &Tensor::gelu, py::arg("approximate") = "none", Release())
      .def("softplus", &Tensor::softplus, py::arg("beta") = 1.0, py::arg("threshold") = 20.0, Release())
      .def("isnan", &Tensor::isnan, Release())
      .def("isinf", &Tensor::isinf, Release())
      .def("isfinite", &Tensor::isfinite, Release())
      .def("nan_to_num", &Tensor::nan_to_num, py::arg("nan") = py::none(), py::arg("posinf") = py::none(),
           py::arg("neginf") = py::none(), Release());

  // ---- binary methods: x.mul(y), x.mul_(y) with a tensor or a number ----
#define TS_PY_BINARY(name)                                                                                   \
  cls.def(#name, [](const Tensor& a, const Tensor& b) { return a.name(b); }, py::arg("other"), Release())   \
      .def(#name, [](const Tensor& a, const Scalar& b) { return a.name(b); }, py::arg("other"), Release())  \
      .def(#name "_", [](py::object self, const Tensor& b) { { py::gil_scoped_release r; self.cast<Tensor&>().name##_(b); } return self; }, \
           py::arg("other"))                                                                                 \
      .def(#name "_", [](py::object self, const Scalar& b) { { py::gil_scoped_release r; self.cast<Tensor&>().name##_(b); } return self; }, \
           py::arg("other"));
  TS_PY_BINARY(mul) TS_PY_BINARY(pow) TS_PY_BINARY(maximum) TS_PY_BINARY(minimum) TS_PY_BINARY(fmod)
  TS_PY_BINARY(remainder) TS_PY_BINARY(atan2) TS_PY_BINARY(eq) TS_PY_BINARY(ne) TS_PY_BINARY(lt)
  TS_PY_BINARY(le) TS_PY_BINARY(gt) TS_PY_BINARY(ge) TS_PY_BINARY(logical_and) TS_PY_BINARY(logical_or)
  TS_PY_BINARY(logical_xor) TS_PY_BINARY(bitwise_and) TS_PY_BINARY(bitwise_or) TS_PY_BINARY(bitwise_xor)
  TS_PY_BINARY(bitwise_left_shift) TS_PY_BINARY(bitwise_right_shift)
#undef TS_PY_BINARY
#define TS_PY_ALPHA(name)                                                                                           \
  cls.def(#name, [](const Tensor& a, const Tensor& b, const Scalar& alpha) { return a.name(b, alpha); },           \
          py::arg("other"), py::kw_only(), py::arg("alpha") = 1, Release())                                        \
      .def(#name, [](const Tensor& a, const Scalar& b, const Scalar& alpha) { return a.name(b, alpha); },          \
           py::arg("other"), py::kw_only(), py::arg("alpha") = 1, Release())                                       \
      .def(#name "_", [](py::object self, const Tensor& b, const Scalar& alpha) {                                   \
        { py::gil_scoped_release r; self.cast<Tensor&>().name##_(b, alpha); } return self; },                       \
           py::arg("other"), py::kw_only(), py::arg("alpha") = 1)                                                   \
      .def(#name "_", [](py::object self, const Scalar& b, const Scalar& alpha) {                                   \
        { py::gil_scoped_release r; self.cast<Tensor&>().name##_(b, alpha); } return self; },                       \
           py::arg("other"), py::kw_only(), py::arg("alpha") = 1);
  TS_PY_ALPHA(add) TS_PY_ALPHA(sub)
#undef TS_PY_ALPHA
  cls.def("div", [](const Tensor& a, const Tensor& b, std::optional<std::string> mode) { return a.div(b, mode.value_or("")); },
          py::arg("other"), py::kw_only(), py::arg("rounding_mode") = py::none(), Release())
      .def("div", [](const Tensor& a, const Scalar& b, std::optional<std::string> mode) { return a.div(b, mode.value_or("")); },
           py::arg("other"), py::kw_only(), py::arg("rounding_mode") = py::none(), Release())
      .def("div_", [](py::object self, const Tensor& b, std::optional<std::string> mode) {
        { py::gil_scoped_release r; self.cast<Tensor&>().div_(b, mode.value_or("")); } return self;
      }, py::arg("other"), py::kw_only(), py::arg("rounding_mode") = py::none())
      .def("div_", [](py::object self, const Scalar& b, std::optional<std::string> mode) {
        { py::gil_scoped_release r; self.cast<Tensor&>().div_(b, mode.value_or("")); } return self;
      }, py::arg("other"), py::kw_only(), py::arg("rounding_mode") = py::none())
      .def("clamp", [](const Tensor& t, std::optional<Scalar> lo, std::optional<Scalar> hi) {
        TS_CHECK(lo || hi, ValueError, "clamp(): at least one of 'min' or 'max' must not be None");
        return t.clamp(lo, hi);
      }, py::arg("min") = py::none(), py::arg("max") = py::none(), Release())
      .def("clamp", [](const Tensor& t, std::optional<Tensor> lo, std::optional<Tensor> hi) {
        TS_CHECK(lo || hi, ValueError, "clamp(): at least one of 'min' or 'max' must not be None");
        return clamp(t, lo, hi);
      }, py::arg("min") = py::none(), py::arg("max") = py::none(), Release())
      .def("clip", [](const Tensor& t, std::optional<Scalar> lo, std::optional<Scalar> hi) { return t.clamp(lo, hi); },
           py::arg("min") = py::none(), py::arg("max") = py::none(), Release())
      .def("clamp_", [](py::object self, std::optional<Scalar> lo, std::optional<Scalar> hi) {
        TS_CHECK(lo || hi, ValueError, "clamp_(): at least one of 'min' or 'max' must not be None");
        { py::gil_scoped_release r; self.cast<Tensor&>().clamp_(lo, hi); } return self;
      }, py::arg("min") = py::none(), py::arg("max") = py::none())
      .def("lerp", [](const Tensor& a, const Tensor& b, const Scalar& w) { return a.lerp(b, w); }, Release())
      .def("lerp", [](const Tensor& a, const Tensor& b, const Tensor& w) { return a.lerp(b, w); }, Release())
      .def("addcmul", &Tensor::addcmul, py::arg("tensor1"), py::arg("tensor2"), py::kw_only(), py::arg("value") = 1, Release())
      .def("addcdiv", &Tensor::addcdiv, py::arg("tensor1"), py::arg("tensor2"), py::kw_only(), py::arg("value") = 1, Release())
      .def("addcmul_", [](py::object self, const Tensor& a, const Tensor& b, const Scalar& v) {
        { py::gil_scoped_release r; self.cast<Tensor&>().addcmul_(a, b, v); } return self;
      }, py::arg("tensor1"), py::arg("tensor2"), py::kw_only(), py::arg("value") = 1)
      .def("addcdiv_", [](py::object self, const Tensor& a, const Tensor& b, const Scalar& v) {
        { py::gil_scoped_release r; self.cast<Tensor&>().addcdiv_(a, b, v); } return self;
      }, py::arg("tensor1"), py::arg("tensor2"), py::kw_only(), py::arg("value") = 1)
      .def("where", [](const Tensor& t, const Tensor& c, const Tensor& o) { return t.where(c, o); }, py::arg("condition"), py::arg("other"), Release())
      .def("where", [](const Tensor& t, const Tensor& c, const Scalar& o) { return where(c, t, o); }, py::arg("condition"), py::arg("other"), Release())
      .def("masked_fill", [](const Tensor& t, const Tensor& mask, const Scalar& v) { return t.masked_fill(mask, v); }, py::arg("mask"), py::arg("value"), Release())
      .def("masked_fill", [](const Tensor& t, const Tensor& mask, const Tensor& v) {
        TS_CHECK(v.dim() == 0, ValueError, "masked_fill only supports a 0-dimensional value tensor, but got tensor with ", v.dim(), " dimension(s).");
        return t.masked_fill(mask, v.item());
      }, py::arg("mask"), py::arg("value"))
      .def("masked_fill_", [](py::object self, const Tensor& mask, const Scalar& v) {
        { py::gil_scoped_release r; self.cast<Tensor&>().masked_fill_(mask, v); } return self;
      }, py::arg("mask"), py::arg("value"));

  // ---- reductions ----
  cls.def("sum", [](const Tensor& t, py::object dim, bool keepdim, py::object dtype) {
        auto dims = dims_from_object(dim, "sum");
        auto dt = optional_dtype(dtype, "sum");
        py::gil_scoped_release r;
        return sum(t, dims ? *dims : Dims(std::vector<int64_t>{}), keepdim, dt);
      }, py::arg("dim") = py::none(), py::arg("keepdim") = false, py::kw_only(), py::arg("dtype") = py::none())
      .def("mean", [](const Tensor& t, py::object dim, bool keepdim, py::object dtype) {
        auto dims = dims_from_object(dim, "mean");
        auto dt = optional_dtype(dtype, "mean");
        py::gil_scoped_release r;
        return mean(t, dims ? *dims : Dims(std::vector<int64_t>{}), keepdim, dt);
      }, py::arg("dim") = py::none(), py::arg("keepdim") = false, py::kw_only(), py::arg("dtype") = py::none())
      .def("prod", [](const Tensor& t, py::object dim, bool keepdim, py::object dtype) {
        auto dt = optional_dtype(dtype, "prod");
        if (dim.is_none()) return t.prod(dt);
        return t.prod(dim.cast<int64_t>(), keepdim, dt);
      }, py::arg("dim") = py::none(), py::arg("keepdim") = false, py::kw_only(), py::arg("dtype") = py::none())
      .def("max", [](const Tensor& t) { return t.max(); }, Release())
      .def("max", [](const Tensor& t, int64_t dim, bool keepdim) { return values_indices("max", t.max(dim, keepdim)); },
           py::arg("dim"), py::arg("keepdim") = false)
      .def("max", [](const Tensor& a, const Tensor& b) { return a.maximum(b); }, py::arg("other"), Release())
      .def("min", [](const Tensor& t) { return t.min(); }, Release())
      .def("min", [](const Tensor& t, int64_t dim, bool keepdim) { return values_indices("min", t.min(dim, keepdim)); },
           py::arg("dim"), py::arg("keepdim") = false)
      .def("min", [](const Tensor& a, const Tensor& b) { return a.minimum(b); }, py::arg("other"), Release())
      .def("amax", [](const Tensor& t, py::object dim, bool keepdim) {
        auto d = dims_from_object(dim, "amax");
        return t.amax(d ? *d : Dims(std::vector<int64_t>{}), keepdim);
      }, py::arg("dim") = py::tuple(), py::arg("keepdim") = false)
      .def("amin", [](const Tensor& t, py::object dim, bool keepdim) {
        auto d = dims_from_object(dim, "amin");
        return t.amin(d ? *d : Dims(std::vector<int64_t>{}), keepdim);
      }, py::arg("dim") = py::tuple(), py::arg("keepdim") = false)
      .def("argmax", &Tensor::argmax, py::arg("dim") = py::none(), py::arg("keepdim") = false, Release())
      .def("argmin", &Tensor::argmin, py::arg("dim") = py::none(), py::arg("keepdim") = false, Release())
      .def("var", [](const Tensor& t, py::object dim, py::object unbiased, py::object correction, bool keepdim) {
        double c = 1;
        if (!correction.is_none()) c = correction.cast<double>();
        else if (!unbiased.is_none()) c = unbiased.cast<bool>() ? 1 : 0;
        return t.var(dims_from_object(dim, "var"), c, keepdim);
      }, py::arg("dim") = py::none(), py::arg("unbiased") = py::none(), py::kw_only(), py::arg("correction") = py::none(),
         py::arg("keepdim") = false)
      .def("std", [](const Tensor& t, py::object dim, py::object unbiased, py::object correction, bool keepdim) {
        double c = 1;
        if (!correction.is_none()) c = correction.cast<double>();
        else if (!unbiased.is_none()) c = unbiased.cast<bool>() ? 1 : 0;
        return t.std(dims_from_object(dim, "std"), c, keepdim);
      }, py::arg("dim") = py::none(), py::arg("unbiased") = py::none(), py::kw_only(), py::arg("correction") = py::none(),
         py::arg("keepdim") = false)
      .def("norm", [](const Tensor& t, py::object p, py::object dim, bool keepdim) {
        auto dims = dims_from_object(dim, "norm");
        if (py::isinstance<py::str>(p)) return norm(t, p.cast<std::string>(), dims, keepdim);
        return norm(t, p.is_none() ? 2.0 : p.cast<double>(), dims, keepdim);
      }, py::arg("p") = 2.0, py::arg("dim") = py::none(), py::arg("keepdim") = false)
      .def("logsumexp", [](const Tensor& t, py::object dim, bool keepdim) { return t.logsumexp(*dims_from_object(dim, "logsumexp"), keepdim); },
           py::arg("dim"), py::arg("keepdim") = false)
      .def("any", [](const Tensor& t, py::object dim, bool keepdim) {
        if (dim.is_none()) return t.any();
        return t.any(dim.cast<int64_t>(), keepdim);
      }, py::arg("dim") = py::none(), py::arg("keepdim") = false)
      .def("all", [](const Tensor& t, py::object dim, bool keepdim) {
        if (dim.is_none()) return t.all();
        return t.all(dim.cast<int64_t>(), keepdim);
      }, py::arg("dim") = py::none(), py::arg("keepdim") = false)
      .def("cumsum", [](const Tensor& t, int64_t dim, py::object dtype) { return t.cumsum(dim, optional_dtype(dtype, "cumsum")); },
           py::arg("dim"), py::kw_only(), py::arg("dtype") = py::none())
      .def("cumprod", [](const Tensor& t, int64_t dim, py::object dtype) { return t.cumprod(dim, optional_dtype(dtype, "cumprod")); },
           py::arg("dim"), py::kw_only(), py::arg("dtype") = py::none());

  // ---- matrix products, softmax ----
  cls.def("matmul", &Tensor::matmul, Release())
      .def("mm", &Tensor::mm, Release())
      .def("bmm", &Tensor::bmm, Release())
      .def("dot", &Tensor::dot, Release())
      .def("outer", &Tensor::outer, Release())
      .def("softmax", [](const Tensor& t, int64_t dim, py::object dtype) { return t.softmax(dim, optional_dtype(dtype, "softmax")); },
           py::arg("dim"), py::arg("dtype") = py::none())
      .def("log_softmax", [](const Tensor& t, int64_t dim, py::object dtype) { return t.log_softmax(dim, optional_dtype(dtype, "log_softmax")); },
           py::arg("dim"), py::arg("dtype") = py::none());

  // ---- indexing methods ----
  cls.def("index_select", &Tensor::index_select, py::arg("dim"), py::arg("index"), Release())
      .def("gather", &Tensor::gather, py::arg("dim"), py::arg("index"), Release())
      .def("scatter", py::overload_cast<int64_t, const Tensor&, const Tensor&>(&Tensor::scatter, py::const_),
           py::arg("dim"), py::arg("index"), py::arg("src"), Release())
      .def("scatter", py::overload_cast<int64_t, const Tensor&, const Scalar&>(&Tensor::scatter, py::const_),
           py::arg("dim"), py::arg("index"), py::arg("value"), Release())
      .def("scatter_", [](py::object self, int64_t dim, const Tensor& index, const Tensor& src) {
        { py::gil_scoped_release r; self.cast<Tensor&>().scatter_(dim, index, src); } return self;
      }, py::arg("dim"), py::arg("index"), py::arg("src"))
      .def("scatter_add", &Tensor::scatter_add, Release())
      .def("scatter_add_", [](py::object self, int64_t dim, const Tensor& index, const Tensor& src) {
        { py::gil_scoped_release r; self.cast<Tensor&>().scatter_add_(dim, index, src); } return self;
      })
      .def("index_add", &Tensor::index_add, py::arg("dim"), py::arg("index"), py::arg("source"), py::kw_only(), py::arg("alpha") = 1, Release())
      .def("index_add_", [](py::object self, int64_t dim, const Tensor& index, const Tensor& src, const Scalar& alpha) {
        { py::gil_scoped_release r; self.cast<Tensor&>().index_add_(dim, index, src, alpha); } return self;
      }, py::arg("dim"), py::arg("index"), py::arg("source"), py::kw_only(), py::arg("alpha") = 1)
      .def("masked_select", &Tensor::masked_select, Release())
      .def("nonzero", [](const Tensor& t, bool as_tuple) -> py::object {
        Tensor nz = t.nonzero();
        if (!as_tuple) return py::cast(nz);
        py::tuple r(t.dim());
        for (int64_t d = 0; d < t.dim(); ++d) r[d] = py::cast(nz.select(1, d));
        return r;
      }, py::kw_only(), py::arg("as_tuple") = false)
      .def("flip", [](const Tensor& t, py::args dims) { return t.flip(shape_from_args(dims, "flip")); })
      .def("roll", [](const Tensor& t, py::object shifts, py::object dims) {
        return t.roll(shape_from_object(shifts, "roll"), dims.is_none() ? Shape{} : shape_from_object(dims, "roll"));
      }, py::arg("shifts"), py::arg("dims") = py::none())
      .def("repeat", [](const Tensor& t, py::args r) { return t.repeat(shape_from_args(r, "repeat")); })
      .def("repeat_interleave", [](const Tensor& t, int64_t repeats, std::optional<int64_t> dim) { return t.repeat_interleave(repeats, dim); },
           py::arg("repeats"), py::arg("dim") = py::none())
      .def("repeat_interleave", [](const Tensor& t, const Tensor& repeats, std::optional<int64_t> dim) { return t.repeat_interleave(repeats, dim); },
           py::arg("repeats"), py::arg("dim") = py::none())
      .def("tril", &Tensor::tril, py::arg("diagonal") = 0, Release())
      .def("triu", &Tensor::triu, py::arg("diagonal") = 0, Release())
      .def("topk", [](const Tensor& t, int64_t k, int64_t dim, bool largest, bool sorted) {
        return values_indices("topk", t.topk(k, dim, largest, sorted));
      }, py::arg("k"), py::arg("dim") = -1, py::arg("largest") = true, py::arg("sorted") = true)
      .def("sort", [](const Tensor& t, int64_t dim, bool descending, bool stable) {
        return values_indices("sort", t.sort(dim, descending, stable));
      }, py::arg("dim") = -1, py::arg("descending") = false, py::kw_only(), py::arg("stable") = false)
      .def("argsort", &Tensor::argsort, py::arg("dim") = -1, py::arg("descending") = false, py::kw_only(), py::arg("stable") = false, Release());

  // numpy defers to Tensor's reflected operators (np.float64(2) * t is a Tensor), as for torch.Tensor.
  cls.attr("__array_priority__") = 1000;
  init_tensor_index(cls);
  init_tensor_data(m, cls);
  init_dlpack(m, cls);
  init_fast_ops(cls);  // last: it takes over the slots the operator definitions above installed
}

}  // namespace tessera::python
