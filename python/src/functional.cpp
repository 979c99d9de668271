// tessera._C._functional: torch.nn.functional's functions with PyTorch's argument names, over
// tessera::nn::functional (re-exported by tessera/nn/functional.py).
#include "bindings.h"

namespace tessera::python {
namespace {

using Release = py::call_guard<py::gil_scoped_release>;
namespace F = nn::functional;

IntPair pair_of(py::handle o, const char* op, const char* what) {
  Shape s = shape_from_object(o, op);
  TS_CHECK(s.size() == 1 || s.size() == 2, ValueError, op, "(): ", what, " must be an int or a pair of ints, got ", s);
  return s.size() == 1 ? IntPair(s[0]) : IntPair(s[0], s[1]);
}
std::optional<IntPair> optional_pair(py::handle o, const char* op, const char* what) {
  if (o.is_none()) return std::nullopt;
  return pair_of(o, op, what);
}

}  // namespace

void init_functional(py::module_& m) {
  py::module_ f = m.def_submodule("_functional", "torch.nn.functional");
  f.def("relu", [](const Tensor& x, bool inplace) { return inplace ? Tensor(x).relu_() : F::relu(x); }, py::arg("input"),
        py::arg("inplace") = false, Release());
  f.def("gelu", &F::gelu, py::arg("input"), py::arg("approximate") = "none", Release());
  f.def("silu", [](const Tensor& x, bool) { return F::silu(x); }, py::arg("input"), py::arg("inplace") = false, Release());
  f.def("tanh", &F::tanh, Release());
  f.def("sigmoid", &F::sigmoid, Release());
  f.def("softmax", [](const Tensor& x, int64_t dim, py::object dtype) { return F::softmax(x, dim, optional_dtype(dtype, "softmax")); },
        py::arg("input"), py::arg("dim"), py::kw_only(), py::arg("dtype") = py::none());
  f.def("log_softmax", [](const Tensor& x, int64_t dim, py::object dtype) { return F::log_softmax(x, dim, optional_dtype(dtype, "log_softmax")); },
        py::arg("input"), py::arg("dim"), py::kw_only(), py::arg("dtype") = py::none());
  f.def("dropout", [](const Tensor& x, double p, bool training) { return F::dropout(x, p, training); }, py::arg("input"),
        py::arg("p") = 0.5, py::arg("training") = true, Release());
  f.def("linear", &F::linear, py::arg("input"), py::arg("weight"), py::arg("bias") = py::none(), Release());
  f.def("embedding", [](const Tensor& idx, const Tensor& w, std::optional<int64_t> pad) { return F::embedding(idx, w, pad); },
        py::arg("input"), py::arg("weight"), py::arg("padding_idx") = py::none(), Release());
  f.def("layer_norm", [](const Tensor& x, py::object shape, std::optional<Tensor> w, std::optional<Tensor> b, double eps) {
    Shape s = shape_from_object(shape, "layer_norm");
    py::gil_scoped_release r;
    return F::layer_norm(x, s, w, b, eps);
  }, py::arg("input"), py::arg("normalized_shape"), py::arg("weight") = py::none(), py::arg("bias") = py::none(), py::arg("eps") = 1e-5);
  f.def("group_norm", &F::group_norm, py::arg("input"), py::arg("num_groups"), py::arg("weight") = py::none(),
        py::arg("bias") = py::none(), py::arg("eps") = 1e-5, Release());
  f.def("rms_norm", [](const Tensor& x, py::object shape, std::optional<Tensor> w, std::optional<double> eps) {
    return F::rms_norm(x, shape_from_object(shape, "rms_norm"), w, eps);
  }, py::arg("input"), py::arg("normalized_shape"), py::arg("weight") = py::none(), py::arg("eps") = py::none());
  f.def("batch_norm", [](const Tensor& x, std::optional<Tensor> rm, std::optional<Tensor> rv, std::optional<Tensor> w,
                         std::optional<Tensor> b, bool training, double momentum, double eps) {
    return F::batch_norm(x, rm.value_or(Tensor()), rv.value_or(Tensor()), w, b, training, momentum, eps);
  }, py::arg("input"), py::arg("running_mean"), py::arg("running_var"), py::arg("weight") = py::none(),
     py::arg("bias") = py::none(), py::arg("training") = false, py::arg("momentum") = 0.1, py::arg("eps") = 1e-5, Release());
  f.def("scaled_dot_product_attention", [](const Tensor& q, const Tensor& k, const Tensor& v, std::optional<Tensor> mask,
                                           double p, bool causal, std::optional<double> scale) {
    return F::scaled_dot_product_attention(q, k, v, mask, p, causal, scale);
  }, py::arg("query"), py::arg("key"), py::arg("value"), py::arg("attn_mask") = py::none(), py::arg("dropout_p") = 0.0,
     py::arg("is_causal") = false, py::kw_only(), py::arg("scale") = py::none(), Release());
  f.def("cross_entropy", [](const Tensor& x, const Tensor& t, std::optional<Tensor> w, int64_t ignore, const std::string& red,
                            double smoothing) { return F::cross_entropy(x, t, w, ignore, red, smoothing); },
        py::arg("input"), py::arg("target"), py::arg("weight") = py::none(), py::arg("ignore_index") = -100,
        py::arg("reduction") = "mean", py::arg("label_smoothing") = 0.0, Release());
  f.def("nll_loss", &F::nll_loss, py::arg("input"), py::arg("target"), py::arg("weight") = py::none(),
        py::arg("ignore_index") = -100, py::arg("reduction") = "mean", Release());
  f.def("mse_loss", &F::mse_loss, py::arg("input"), py::arg("target"), py::arg("reduction") = "mean", Release());
  f.def("l1_loss", &F::l1_loss, py::arg("input"), py::arg("target"), py::arg("reduction") = "mean", Release());
  f.def("smooth_l1_loss", &F::smooth_l1_loss, py::arg("input"), py::arg("target"), py::arg("reduction") = "mean",
        py::arg("beta") = 1.0, Release());
  f.def("huber_loss", &F::huber_loss, py::arg("input"), py::arg("target"), py::arg("reduction") = "mean",
        py::arg("delta") = 1.0, Release());
  f.def("binary_cross_entropy", &F::binary_cross_entropy, py::arg("input"), py::arg("target"), py::arg("weight") = py::none(),
        py::arg("reduction") = "mean", Release());
  f.def("binary_cross_entropy_with_logits", &F::binary_cross_entropy_with_logits, py::arg("input"), py::arg("target"),
        py::arg("weight") = py::none(), py::arg("reduction") = "mean", py::arg("pos_weight") = py::none(), Release());
  f.def("kl_div", [](const Tensor& x, const Tensor& t, const std::string& red, bool log_target) { return F::kl_div(x, t, red, log_target); },
        py::arg("input"), py::arg("target"), py::arg("reduction") = "mean", py::arg("log_target") = false, Release());
  f.def("max_pool2d", [](const Tensor& x, py::object k, py::object s, py::object p, py::object d, bool ceil, bool ret) -> py::object {
    IntPair kk = pair_of(k, "max_pool2d", "kernel_size"), pp = pair_of(p, "max_pool2d", "padding"), dd = pair_of(d, "max_pool2d", "dilation");
    auto ss = optional_pair(s, "max_pool2d", "stride");
    if (ret) {
      auto r = max_pool2d_with_indices(x, kk, ss, pp, dd, ceil);
      return py::make_tuple(std::get<0>(r), std::get<1>(r));
    }
    py::gil_scoped_release rel;
    Tensor out = max_pool2d(x, kk, ss, pp, dd, ceil);
    py::gil_scoped_acquire acq;
    return py::cast(out);
  }, py::arg("input"), py::arg("kernel_size"), py::arg("stride") = py::none(), py::arg("padding") = 0,
     py::arg("dilation") = 1, py::arg("ceil_mode") = false, py::arg("return_indices") = false);
  f.def("avg_pool2d", [](const Tensor& x, py::object k, py::object s, py::object p, bool ceil, bool cip) {
    return avg_pool2d(x, pair_of(k, "avg_pool2d", "kernel_size"), optional_pair(s, "avg_pool2d", "stride"),
                      pair_of(p, "avg_pool2d", "padding"), ceil, cip);
  }, py::arg("input"), py::arg("kernel_size"), py::arg("stride") = py::none(), py::arg("padding") = 0,
     py::arg("ceil_mode") = false, py::arg("count_include_pad") = true);
  f.def("adaptive_avg_pool2d", [](const Tensor& x, py::object size) {
    return adaptive_avg_pool2d(x, pair_of(size, "adaptive_avg_pool2d", "output_size"));
  }, py::arg("input"), py::arg("output_size"));
  f.def("pad", [](const Tensor& x, py::object padding, const std::string& mode, std::optional<double> value) {
    return pad(x, shape_from_object(padding, "pad"), mode, value.value_or(0.0));
  }, py::arg("input"), py::arg("pad"), py::arg("mode") = "constant", py::arg("value") = py::none());
  f.def("one_hot", &one_hot, py::arg("tensor"), py::arg("num_classes") = -1, Release());
  f.attr("conv2d") = m.attr("conv2d");
  f.def("softplus", [](const Tensor& x, double beta, double threshold) { return softplus(x, beta, threshold); },
        py::arg("input"), py::arg("beta") = 1.0, py::arg("threshold") = 20.0, Release());
  f.def("hardswish", [](const Tensor& x, bool) { return hardswish(x); }, py::arg("input"), py::arg("inplace") = false, Release());
}

}  // namespace tessera::python
