// tessera._C.nn: the C++ built-in modules (Linear, Conv2d, BatchNorm2d, ...) for the Python classes
// of tessera/nn/modules.py to wrap. The C++ module keeps its parameters, its initialization and its
// forward; the Python wrapper registers the same tensors (same TensorImpl) as its parameters, so an
// optimizer built from the Python module updates what the C++ forward reads (Note [Wrapped modules]
// in tessera/nn/modules.py).
//
// A tensor member that the module lacks (bias=False) reads as None; assigning None or a tensor to it
// from Python sets the C++ member, which the C++ forward reads from then on.
#include "bindings.h"

namespace tessera::python {
namespace {

using Release = py::call_guard<py::gil_scoped_release>;

IntPair int_pair(py::handle o, const char* op, const char* what) {
  Shape s = shape_from_object(o, op);
  TS_CHECK(s.size() == 1 || s.size() == 2, ValueError, op, ": ", what, " must be an int or a pair of ints, got ", s);
  return s.size() == 1 ? IntPair(s[0]) : IntPair(s[0], s[1]);
}
py::tuple pair_tuple(const IntPair& p) { return py::make_tuple(p.h, p.w); }

template <class M, class Cls>
void tensor_member(Cls& cls, const char* name, Tensor M::*member) {
  cls.def_property(name, [member](const M& m) -> py::object {
        const Tensor& t = m.*member;
        return t.defined() ? py::cast(t) : py::none();
      }, [member](M& m, py::object v) { m.*member = v.is_none() ? Tensor() : v.cast<Tensor>(); });
}

template <class M>
using Class = py::class_<M, nn::Module, std::shared_ptr<M>>;

std::vector<std::pair<std::string, Tensor>> defined_only(std::vector<std::pair<std::string, Tensor>> v) {
  std::vector<std::pair<std::string, Tensor>> out;
  for (auto& [k, t] : v)
    if (t.defined()) out.emplace_back(k, t);
  return out;
}

}  // namespace

void init_nn(py::module_& m) {
  py::module_ nn = m.def_submodule("_nn", "the C++ built-in modules");
  py::class_<nn::Module, std::shared_ptr<nn::Module>>(nn, "CxxModule")
      .def("forward", [](nn::Module& mod, const Tensor& x) { return mod(x); }, Release())
      .def("train", [](nn::Module& mod, bool mode) { mod.train(mode); }, py::arg("mode") = true)
      .def_property_readonly("training", &nn::Module::is_training)
      .def("named_parameters", [](const nn::Module& mod) { return defined_only(mod.named_parameters("", false)); })
      .def("named_buffers", [](const nn::Module& mod) { return defined_only(mod.named_buffers("", false)); })
      .def("extra_repr", &nn::Module::extra_repr)
      .def("name", &nn::Module::name);

  auto linear = Class<nn::Linear>(nn, "Linear")
      .def(py::init<int64_t, int64_t, bool>(), py::arg("in_features"), py::arg("out_features"), py::arg("bias") = true)
      .def_readonly("in_features", &nn::Linear::in_features)
      .def_readonly("out_features", &nn::Linear::out_features);
  tensor_member(linear, "weight", &nn::Linear::weight);
  tensor_member(linear, "bias", &nn::Linear::bias);

  auto embedding = Class<nn::Embedding>(nn, "Embedding")
      .def(py::init<int64_t, int64_t, std::optional<int64_t>>(), py::arg("num_embeddings"), py::arg("embedding_dim"),
           py::arg("padding_idx") = py::none())
      .def_readonly("num_embeddings", &nn::Embedding::num_embeddings)
      .def_readonly("embedding_dim", &nn::Embedding::embedding_dim)
      .def_readonly("padding_idx", &nn::Embedding::padding_idx);
  tensor_member(embedding, "weight", &nn::Embedding::weight);

  auto conv1d = Class<nn::Conv1d>(nn, "Conv1d")
      .def(py::init<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, bool>(), py::arg("in_channels"),
           py::arg("out_channels"), py::arg("kernel_size"), py::arg("stride") = 1, py::arg("padding") = 0,
           py::arg("dilation") = 1, py::arg("groups") = 1, py::arg("bias") = true)
      .def_readonly("in_channels", &nn::Conv1d::in_channels)
      .def_readonly("out_channels", &nn::Conv1d::out_channels);
  tensor_member(conv1d, "weight", &nn::Conv1d::weight);
  tensor_member(conv1d, "bias", &nn::Conv1d::bias);

  auto conv2d = Class<nn::Conv2d>(nn, "Conv2d")
      .def(py::init([](int64_t in, int64_t out, py::object k, py::object s, py::object p, py::object d, int64_t g, bool bias) {
             return std::make_shared<nn::Conv2d>(in, out, int_pair(k, "Conv2d", "kernel_size"), int_pair(s, "Conv2d", "stride"),
                                                 int_pair(p, "Conv2d", "padding"), int_pair(d, "Conv2d", "dilation"), g, bias);
           }), py::arg("in_channels"), py::arg("out_channels"), py::arg("kernel_size"), py::arg("stride") = 1,
           py::arg("padding") = 0, py::arg("dilation") = 1, py::arg("groups") = 1, py::arg("bias") = true)
      .def_readonly("in_channels", &nn::Conv2d::in_channels)
      .def_readonly("out_channels", &nn::Conv2d::out_channels)
      .def_property_readonly("kernel_size", [](const nn::Conv2d& c) { return pair_tuple(c.kernel_size); })
      .def_property_readonly("stride", [](const nn::Conv2d& c) { return pair_tuple(c.stride); })
      .def_property_readonly("padding", [](const nn::Conv2d& c) { return pair_tuple(c.padding); })
      .def_readonly("groups", &nn::Conv2d::groups);
  tensor_member(conv2d, "weight", &nn::Conv2d::weight);
  tensor_member(conv2d, "bias", &nn::Conv2d::bias);

  auto convt = Class<nn::ConvTranspose2d>(nn, "ConvTranspose2d")
      .def(py::init([](int64_t in, int64_t out, py::object k, py::object s, py::object p, py::object op, int64_t g, bool bias, py::object d) {
             return std::make_shared<nn::ConvTranspose2d>(in, out, int_pair(k, "ConvTranspose2d", "kernel_size"),
                                                          int_pair(s, "ConvTranspose2d", "stride"), int_pair(p, "ConvTranspose2d", "padding"),
                                                          int_pair(op, "ConvTranspose2d", "output_padding"), g, bias,
                                                          int_pair(d, "ConvTranspose2d", "dilation"));
           }), py::arg("in_channels"), py::arg("out_channels"), py::arg("kernel_size"), py::arg("stride") = 1,
           py::arg("padding") = 0, py::arg("output_padding") = 0, py::arg("groups") = 1, py::arg("bias") = true,
           py::arg("dilation") = 1);
  tensor_member(convt, "weight", &nn::ConvTranspose2d::weight);
  tensor_member(convt, "bias", &nn::ConvTranspose2d::bias);

  Class<nn::MaxPool2d>(nn, "MaxPool2d")
      .def(py::init([](py::object k, py::object s, py::object p, py::object d, bool ceil) {
             std::optional<IntPair> stride;
             if (!s.is_none()) stride = int_pair(s, "MaxPool2d", "stride");
             return std::make_shared<nn::MaxPool2d>(int_pair(k, "MaxPool2d", "kernel_size"), stride,
                                                    int_pair(p, "MaxPool2d", "padding"), int_pair(d, "MaxPool2d", "dilation"), ceil);
           }), py::arg("kernel_size"), py::arg("stride") = py::none(), py::arg("padding") = 0, py::arg("dilation") = 1,
           py::arg("ceil_mode") = false);
  Class<nn::AvgPool2d>(nn, "AvgPool2d")
      .def(py::init([](py::object k, py::object s, py::object p, bool ceil, bool count_include_pad) {
             std::optional<IntPair> stride;
             if (!s.is_none()) stride = int_pair(s, "AvgPool2d", "stride");
             return std::make_shared<nn::AvgPool2d>(int_pair(k, "AvgPool2d", "kernel_size"), stride,
                                                    int_pair(p, "AvgPool2d", "padding"), ceil, count_include_pad);
           }), py::arg("kernel_size"), py::arg("stride") = py::none(), py::arg("padding") = 0, py::arg("ceil_mode") = false,
           py::arg("count_include_pad") = true);
  Class<nn::AdaptiveAvgPool2d>(nn, "AdaptiveAvgPool2d")
      .def(py::init([](py::object size) {
        return std::make_shared<nn::AdaptiveAvgPool2d>(int_pair(size, "AdaptiveAvgPool2d", "output_size"));
      }), py::arg("output_size"));

  auto ln = Class<nn::LayerNorm>(nn, "LayerNorm")
      .def(py::init([](py::object shape, double eps, bool affine, bool bias) {
             return std::make_shared<nn::LayerNorm>(shape_from_object(shape, "LayerNorm"), eps, affine, bias);
           }), py::arg("normalized_shape"), py::arg("eps") = 1e-5, py::arg("elementwise_affine") = true, py::arg("bias") = true)
      .def_property_readonly("normalized_shape", [](const nn::LayerNorm& l) { return py::tuple(py::cast(l.normalized_shape)); })
      .def_readonly("eps", &nn::LayerNorm::eps);
  tensor_member(ln, "weight", &nn::LayerNorm::weight);
  tensor_member(ln, "bias", &nn::LayerNorm::bias);
  auto gn = Class<nn::GroupNorm>(nn, "GroupNorm")
      .def(py::init<int64_t, int64_t, double, bool>(), py::arg("num_groups"), py::arg("num_channels"), py::arg("eps") = 1e-5,
           py::arg("affine") = true);
  tensor_member(gn, "weight", &nn::GroupNorm::weight);
  tensor_member(gn, "bias", &nn::GroupNorm::bias);
  auto rms = Class<nn::RMSNorm>(nn, "RMSNorm")
      .def(py::init([](py::object shape, std::optional<double> eps, bool affine) {
             return std::make_shared<nn::RMSNorm>(shape_from_object(shape, "RMSNorm"), eps, affine);
           }), py::arg("normalized_shape"), py::arg("eps") = py::none(), py::arg("elementwise_affine") = true);
  tensor_member(rms, "weight", &nn::RMSNorm::weight);

  py::class_<nn::BatchNormBase, nn::Module, std::shared_ptr<nn::BatchNormBase>> bn(nn, "BatchNormBase");
  bn.def_readonly("num_features", &nn::BatchNormBase::num_features)
      .def_readonly("eps", &nn::BatchNormBase::eps)
      .def_readwrite("momentum", &nn::BatchNormBase::momentum)
      .def("reset_running_stats", &nn::BatchNormBase::reset_running_stats);
  tensor_member(bn, "weight", &nn::BatchNormBase::weight);
  tensor_member(bn, "bias", &nn::BatchNormBase::bias);
  tensor_member(bn, "running_mean", &nn::BatchNormBase::running_mean);
  tensor_member(bn, "running_var", &nn::BatchNormBase::running_var);
  tensor_member(bn, "num_batches_tracked", &nn::BatchNormBase::num_batches_tracked);
  py::class_<nn::BatchNorm1d, nn::BatchNormBase, std::shared_ptr<nn::BatchNorm1d>>(nn, "BatchNorm1d")
      .def(py::init<int64_t, double, std::optional<double>, bool, bool>(), py::arg("num_features"), py::arg("eps") = 1e-5,
           py::arg("momentum") = 0.1, py::arg("affine") = true, py::arg("track_running_stats") = true);
  py::class_<nn::BatchNorm2d, nn::BatchNormBase, std::shared_ptr<nn::BatchNorm2d>>(nn, "BatchNorm2d")
      .def(py::init<int64_t, double, std::optional<double>, bool, bool>(), py::arg("num_features"), py::arg("eps") = 1e-5,
           py::arg("momentum") = 0.1, py::arg("affine") = true, py::arg("track_running_stats") = true);

  Class<nn::Dropout>(nn, "Dropout")
      .def(py::init([](double p) { return std::make_shared<nn::Dropout>(p); }), py::arg("p") = 0.5)
      .def_readonly("p", &nn::Dropout::p);
  Class<nn::ReLU>(nn, "ReLU").def(py::init<>());
  Class<nn::GELU>(nn, "GELU").def(py::init<std::string>(), py::arg("approximate") = "none");
  Class<nn::SiLU>(nn, "SiLU").def(py::init<>());
  Class<nn::Tanh>(nn, "Tanh").def(py::init<>());
  Class<nn::Sigmoid>(nn, "Sigmoid").def(py::init<>());
  Class<nn::Softmax>(nn, "Softmax").def(py::init<int64_t>(), py::arg("dim"));
  Class<nn::LogSoftmax>(nn, "LogSoftmax").def(py::init<int64_t>(), py::arg("dim"));
  Class<nn::Flatten>(nn, "Flatten").def(py::init<int64_t, int64_t>(), py::arg("start_dim") = 1, py::arg("end_dim") = -1);
  Class<nn::Identity>(nn, "Identity").def(py::init<>());

  // In-place conversion of tensors a Python module holds (Note [Module.to] of nn/module.h): the
  // TensorImpls get the converted storage, so every handle (an optimizer's too) sees it.
  nn.def("convert_in_place", [](const std::vector<Tensor>& params, const std::vector<Tensor>& buffers,
                                py::object device, py::object dtype) {
    nn::Module holder;
    for (size_t i = 0; i < params.size(); ++i)
      if (params[i].defined()) holder.register_parameter("p" + std::to_string(i), Tensor(params[i]), params[i].requires_grad());
    for (size_t i = 0; i < buffers.size(); ++i)
      if (buffers[i].defined()) holder.register_buffer("b" + std::to_string(i), Tensor(buffers[i]));
    auto dt = optional_dtype(dtype, "to");
    std::optional<Device> dev;
    if (!device.is_none()) dev = device_from_object(device, "to");
    py::gil_scoped_release r;
    if (dev && dt) holder.to(*dev, *dt);
    else if (dev) holder.to(*dev);
    else if (dt) holder.to(*dt);
  });
}

}  // namespace tessera::python
