// The torch.* functions: tessera.add(a, b), tessera.cat([...]), tessera.where(c, a, b), ... with
// PyTorch's argument names. Methods of the same name (tensor.cpp) behave the same; both call one op.
#include "bindings.h"

namespace tessera::python {
namespace {

using Release = py::call_guard<py::gil_scoped_release>;

std::vector<Tensor> tensor_list(py::handle seq, const char* op) {
  if (is_tensor(seq)) throw py::type_error(std::string(op) + "(): argument 'tensors' must be a tuple or list of Tensors, not Tensor");
  std::vector<Tensor> out;
  for (auto item : py::iter(seq)) {
    if (!is_tensor(item))
      throw py::type_error(std::string(op) + "(): expected Tensor as element " + std::to_string(out.size()) +
                           " in argument 0, but got " + std::string(py::str(item.get_type().attr("__name__"))));
    out.push_back(item.cast<Tensor>());
  }
  return out;
}

}  // namespace

void init_ops(py::module_& m) {
#define TS_PY_UNARY_FN(name) m.def(#name, [](const Tensor& x) { return name(x); }, py::arg("input"), Release());
  TS_PY_UNARY_FN(neg) TS_PY_UNARY_FN(abs) TS_PY_UNARY_FN(exp) TS_PY_UNARY_FN(exp2) TS_PY_UNARY_FN(log)
  TS_PY_UNARY_FN(log2) TS_PY_UNARY_FN(log1p) TS_PY_UNARY_FN(expm1) TS_PY_UNARY_FN(sqrt) TS_PY_UNARY_FN(rsqrt)
  TS_PY_UNARY_FN(sin) TS_PY_UNARY_FN(cos) TS_PY_UNARY_FN(tan) TS_PY_UNARY_FN(tanh) TS_PY_UNARY_FN(sigmoid)
  TS_PY_UNARY_FN(relu) TS_PY_UNARY_FN(erf) TS_PY_UNARY_FN(floor) TS_PY_UNARY_FN(ceil) TS_PY_UNARY_FN(round)
  TS_PY_UNARY_FN(trunc) TS_PY_UNARY_FN(sign) TS_PY_UNARY_FN(reciprocal) TS_PY_UNARY_FN(logical_not)
  TS_PY_UNARY_FN(bitwise_not) TS_PY_UNARY_FN(isnan) TS_PY_UNARY_FN(isinf) TS_PY_UNARY_FN(isfinite)
#undef TS_PY_UNARY_FN
  m.def("negative", [](const Tensor& x) { return neg(x); }, Release());
#define TS_PY_BINARY_FN(name)                                                                                   \
  m.def(#name, [](const Tensor& a, const Tensor& b) { return name(a, b); }, py::arg("input"), py::arg("other"), Release()) \
      .def(#name, [](const Tensor& a, const Scalar& b) { return name(a, b); }, py::arg("input"), py::arg("other"), Release());
  TS_PY_BINARY_FN(mul) TS_PY_BINARY_FN(maximum) TS_PY_BINARY_FN(minimum) TS_PY_BINARY_FN(fmod)
  TS_PY_BINARY_FN(remainder) TS_PY_BINARY_FN(atan2) TS_PY_BINARY_FN(eq) TS_PY_BINARY_FN(ne) TS_PY_BINARY_FN(lt)
  TS_PY_BINARY_FN(le) TS_PY_BINARY_FN(gt) TS_PY_BINARY_FN(ge) TS_PY_BINARY_FN(logical_and) TS_PY_BINARY_FN(logical_or)
  TS_PY_BINARY_FN(logical_xor) TS_PY_BINARY_FN(bitwise_and) TS_PY_BINARY_FN(bitwise_or) TS_PY_BINARY_FN(bitwise_xor)
#undef TS_PY_BINARY_FN
  m.attr("multiply") = m.attr("mul");
  m.attr("greater") = m.attr("gt");
  m.attr("less") = m.attr("lt");
  m.def("pow", [](const Tensor& a, const Tensor& b) { return pow(a, b); }, py::arg("input"), py::arg("exponent"), Release())
      .def("pow", [](const Tensor& a, const Scalar& b) { return pow(a, b); }, py::arg("input"), py::arg("exponent"), Release())
      .def("pow", [](const Scalar& a, const Tensor& b) { return pow(a, b); }, py::arg("self"), py::arg("exponent"), Release());
  m.def("add", [](const Tensor& a, const Tensor& b, const Scalar& alpha) { return add(a, b, alpha); },
        py::arg("input"), py::arg("other"), py::kw_only(), py::arg("alpha") = 1, Release())
      .def("add", [](const Tensor& a, const Scalar& b, const Scalar& alpha) { return add(a, b, alpha); },
           py::arg("input"), py::arg("other"), py::kw_only(), py::arg("alpha") = 1, Release());
  m.def("sub", [](const Tensor& a, const Tensor& b, const Scalar& alpha) { return sub(a, b, alpha); },
        py::arg("input"), py::arg("other"), py::kw_only(), py::arg("alpha") = 1, Release())
      .def("sub", [](const Tensor& a, const Scalar& b, const Scalar& alpha) { return sub(a, b, alpha); },
           py::arg("input"), py::arg("other"), py::kw_only(), py::arg("alpha") = 1, Release());
  m.def("div", [](const Tensor& a, const Tensor& b, std::optional<std::string> mode) { return div(a, b, mode.value_or("")); },
        py::arg("input"), py::arg("other"), py::kw_only(), py::arg("rounding_mode") = py::none(), Release())
      .def("div", [](const Tensor& a, const Scalar& b, std::optional<std::string> mode) { return div(a, b, mode.value_or("")); },
           py::arg("input"), py::arg("other"), py::kw_only(), py::arg("rounding_mode") = py::none(), Release());
  m.attr("subtract") = m.attr("sub");
  m.attr("divide") = m.attr("div");
  m.attr("true_divide") = m.attr("div");
  m.def("logaddexp", &logaddexp, Release());
  m.def("gelu", [](const Tensor& x, const std::string& a) { return gelu(x, a); }, py::arg("input"), py::arg("approximate") = "none", Release());
  m.def("where", [](const Tensor& c, const Tensor& a, const Tensor& b) { return where(c, a, b); }, py::arg("condition"), py::arg("input"), py::arg("other"), Release())
      .def("where", [](const Tensor& c, const Tensor& a, const Scalar& b) { return where(c, a, b); }, py::arg("condition"), py::arg("input"), py::arg("other"), Release())
      .def("where", [](const Tensor& c, const Scalar& a, const Tensor& b) { return where(c, a, b); }, py::arg("condition"), py::arg("input"), py::arg("other"), Release())
      .def("where", [](const Tensor& c) { return py::tuple(py::cast(nonzero(c).unbind(1))); }, py::arg("condition"));
  m.def("clamp", [](const Tensor& x, std::optional<Scalar> lo, std::optional<Scalar> hi) {
    TS_CHECK(lo || hi, ValueError, "clamp(): at least one of 'min' or 'max' must not be None");
    return clamp(x, lo, hi);
  }, py::arg("input"), py::arg("min") = py::none(), py::arg("max") = py::none(), Release());
  m.attr("clip") = m.attr("clamp");
  m.def("lerp", [](const Tensor& a, const Tensor& b, const Scalar& w) { return lerp(a, b, w); }, Release())
      .def("lerp", [](const Tensor& a, const Tensor& b, const Tensor& w) { return lerp(a, b, w); }, Release());
  m.def("addcmul", &addcmul, py::arg("input"), py::arg("tensor1"), py::arg("tensor2"), py::kw_only(), py::arg("value") = 1, Release());
  m.def("addcdiv", &addcdiv, py::arg("input"), py::arg("tensor1"), py::arg("tensor2"), py::kw_only(), py::arg("value") = 1, Release());
  m.def("allclose", &allclose, py::arg("input"), py::arg("other"), py::arg("rtol") = 1e-5, py::arg("atol") = 1e-8,
        py::arg("equal_nan") = false, Release());
  m.def("equal", &equal, Release());

  // ---- reductions (the Tensor methods take the same arguments) ----
  py::object T = m.attr("Tensor");
  for (const char* name : {"sum", "mean", "prod", "amax", "amin", "argmax", "argmin", "var", "std", "norm", "logsumexp",
                           "any", "all", "cumsum", "cumprod", "softmax", "log_softmax", "max", "min", "topk", "sort",
                           "argsort", "nonzero", "flatten", "unflatten", "squeeze", "unsqueeze", "transpose", "permute",
                           "reshape", "narrow", "select", "diagonal", "movedim", "unbind", "split", "chunk", "flip",
                           "roll", "tril", "triu", "gather", "index_select", "scatter", "scatter_add", "index_add",
                           "masked_select", "masked_fill", "repeat_interleave", "t", "clone", "detach", "matmul", "mm",
                           "bmm", "dot", "outer", "nan_to_num", "softplus", "silu", "as_strided", "swapaxes"}) {
    // tessera.sum(x, ...) is Tensor.sum(x, ...): one binding, one set of argument rules.
    m.attr(name) = T.attr(name);
  }
  m.def("var_mean", [](const Tensor& x, py::object dim, py::object unbiased, py::object correction, bool keepdim) {
    double c = correction.is_none() ? (unbiased.is_none() || unbiased.cast<bool>() ? 1.0 : 0.0) : correction.cast<double>();
    auto r = var_mean(x, dims_from_object(dim, "var_mean"), c, keepdim);
    return py::make_tuple(std::get<0>(r), std::get<1>(r));
  }, py::arg("input"), py::arg("dim") = py::none(), py::arg("unbiased") = py::none(), py::kw_only(),
     py::arg("correction") = py::none(), py::arg("keepdim") = false);
  m.def("addmm", &addmm, py::arg("input"), py::arg("mat1"), py::arg("mat2"), py::kw_only(), py::arg("beta") = 1, py::arg("alpha") = 1, Release());
  m.def("baddbmm", &baddbmm, py::arg("input"), py::arg("batch1"), py::arg("batch2"), py::kw_only(), py::arg("beta") = 1, py::arg("alpha") = 1, Release());
  m.def("einsum", [](const std::string& eq, py::args operands) {
    std::vector<Tensor> ops = operands.size() == 1 && !is_tensor(operands[0]) ? tensor_list(operands[0], "einsum")
                                                                               : tensor_list(operands, "einsum");
    py::gil_scoped_release r;
    return einsum(eq, ops);
  });
  m.def("cat", [](py::handle tensors, int64_t dim) {
    auto ts = tensor_list(tensors, "cat");
    py::gil_scoped_release r;
    return cat(ts, dim);
  }, py::arg("tensors"), py::arg("dim") = 0);
  m.attr("concat") = m.attr("cat");
  m.attr("concatenate") = m.attr("cat");
  m.def("stack", [](py::handle tensors, int64_t dim) {
    auto ts = tensor_list(tensors, "stack");
    py::gil_scoped_release r;
    return stack(ts, dim);
  }, py::arg("tensors"), py::arg("dim") = 0);
  m.def("broadcast_tensors", [](py::args tensors) { return py::tuple(py::cast(broadcast_tensors(tensor_list(tensors, "broadcast_tensors")))); });
  m.def("broadcast_shapes", [](py::args shapes) {
    Shape r;
    for (auto s : shapes) r = broadcast_shapes(r, shape_from_object(s, "broadcast_shapes"));
    return size_object(r);
  });
  m.def("unique", [](const Tensor& x, bool sorted, bool return_inverse, bool return_counts, std::optional<int64_t> dim) -> py::object {
    auto [u, inv, counts] = unique(x, sorted, return_inverse, return_counts, dim);
    if (!return_inverse && !return_counts) return py::cast(u);
    py::list out;
    out.append(u);
    if (return_inverse) out.append(inv);
    if (return_counts) out.append(counts);
    return py::tuple(out);
  }, py::arg("input"), py::arg("sorted") = true, py::arg("return_inverse") = false, py::arg("return_counts") = false,
     py::arg("dim") = py::none());
  m.def("multinomial", [](const Tensor& p, int64_t n, bool replacement, Generator* g) { return multinomial(p, n, replacement, g); },
        py::arg("input"), py::arg("num_samples"), py::arg("replacement") = false, py::kw_only(), py::arg("generator") = nullptr, Release());
  m.def("bernoulli", [](const Tensor& p, Generator* g) { return bernoulli(p, g); }, py::arg("input"), py::kw_only(),
        py::arg("generator") = nullptr, Release());
  m.def("is_tensor", [](py::handle h) { return is_tensor(h); });
  m.def("is_floating_point", [](const Tensor& t) { return t.is_floating_point(); });
  m.def("numel", [](const Tensor& t) { return t.numel(); });
  m.def("conv2d", [](const Tensor& x, const Tensor& w, std::optional<Tensor> b, py::object stride, py::object padding,
                     py::object dilation, int64_t groups) {
    auto pair = [](py::object o, const char* what) {
      Shape s = shape_from_object(o, "conv2d");
      TS_CHECK(s.size() == 1 || s.size() == 2, ValueError, "conv2d(): ", what, " must be an int or a pair, got ", s);
      return s.size() == 1 ? IntPair(s[0]) : IntPair(s[0], s[1]);
    };
    IntPair st = pair(stride, "stride"), pd = pair(padding, "padding"), dl = pair(dilation, "dilation");
    py::gil_scoped_release r;
    return conv2d(x, w, b, st, pd, dl, groups);
  }, py::arg("input"), py::arg("weight"), py::arg("bias") = py::none(), py::arg("stride") = 1, py::arg("padding") = 0,
     py::arg("dilation") = 1, py::arg("groups") = 1);
}

}  // namespace tessera::python
