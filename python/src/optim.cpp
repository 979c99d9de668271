// tessera._C._optim: the C++ optimizers (SGD, Adam, AdamW, RMSprop, Adagrad) and LR schedulers.
// tessera/optim (Python) gives them PyTorch's constructor signatures and param_groups, whose options
// read and write the C++ optimizer's (get_option / set_option), so a scheduler written in Python and
// one of these see the same learning rate.
#include "bindings.h"

namespace tessera::python {
namespace {

using Release = py::call_guard<py::gil_scoped_release>;

std::pair<double, double> betas_of(py::handle b) {
  auto t = b.cast<std::pair<double, double>>();
  return t;
}

}  // namespace

void init_optim(py::module_& m) {
  py::module_ o = m.def_submodule("_optim", "the C++ optimizers and LR schedulers");
  py::class_<optim::Optimizer>(o, "Optimizer")
      .def("step", [](optim::Optimizer& opt) { opt.step(); }, Release())
      .def("zero_grad", &optim::Optimizer::zero_grad, py::arg("set_to_none") = true)
      .def("num_param_groups", &optim::Optimizer::num_param_groups)
      .def("params", &optim::Optimizer::params)
      .def("has_option", py::overload_cast<size_t, const std::string&>(&optim::Optimizer::has_option, py::const_))
      .def("get_option", &optim::Optimizer::get_option, py::arg("group"), py::arg("name"), py::arg("index") = 0)
      .def("set_option", &optim::Optimizer::set_option, py::arg("group"), py::arg("name"), py::arg("value"), py::arg("index") = 0)
      .def("state_of", [](const optim::Optimizer& opt, const Tensor& p) -> py::object {
        const optim::ParamState* s = opt.state(p);
        if (!s || !s->initialized) return py::dict();
        py::dict d;
        d["step"] = s->step;
        for (auto& [k, v] : s->buffers) d[py::str(k)] = v;
        return d;
      })
      .def_property_readonly("name", &optim::Optimizer::name);

  py::class_<optim::SGD, optim::Optimizer>(o, "SGD")
      .def(py::init([](std::vector<Tensor> params, double lr, double momentum, double dampening, double wd, bool nesterov, bool maximize) {
             optim::SGDOptions opts;
             opts.lr = lr; opts.momentum = momentum; opts.dampening = dampening; opts.weight_decay = wd;
             opts.nesterov = nesterov; opts.maximize = maximize;
             return new optim::SGD(std::move(params), opts);
           }), py::arg("params"), py::arg("lr"), py::arg("momentum"), py::arg("dampening"), py::arg("weight_decay"),
           py::arg("nesterov"), py::arg("maximize"));
  py::class_<optim::Adam, optim::Optimizer>(o, "Adam")
      .def(py::init([](std::vector<Tensor> params, double lr, py::object betas, double eps, double wd, bool amsgrad, bool maximize) {
             optim::AdamOptions opts;
             auto [b1, b2] = betas_of(betas);
             opts.lr = lr; opts.betas = {b1, b2}; opts.eps = eps; opts.weight_decay = wd; opts.amsgrad = amsgrad; opts.maximize = maximize;
             return new optim::Adam(std::move(params), opts);
           }), py::arg("params"), py::arg("lr"), py::arg("betas"), py::arg("eps"), py::arg("weight_decay"), py::arg("amsgrad"),
           py::arg("maximize"));
  py::class_<optim::AdamW, optim::Optimizer>(o, "AdamW")
      .def(py::init([](std::vector<Tensor> params, double lr, py::object betas, double eps, double wd, bool amsgrad, bool maximize) {
             optim::AdamWOptions opts;
             auto [b1, b2] = betas_of(betas);
             opts.lr = lr; opts.betas = {b1, b2}; opts.eps = eps; opts.weight_decay = wd; opts.amsgrad = amsgrad; opts.maximize = maximize;
             return new optim::AdamW(std::move(params), opts);
           }), py::arg("params"), py::arg("lr"), py::arg("betas"), py::arg("eps"), py::arg("weight_decay"), py::arg("amsgrad"),
           py::arg("maximize"));
  py::class_<optim::RMSprop, optim::Optimizer>(o, "RMSprop")
      .def(py::init([](std::vector<Tensor> params, double lr, double alpha, double eps, double wd, double momentum, bool centered) {
             optim::RMSpropOptions opts;
             opts.lr = lr; opts.alpha = alpha; opts.eps = eps; opts.weight_decay = wd; opts.momentum = momentum; opts.centered = centered;
             return new optim::RMSprop(std::move(params), opts);
           }), py::arg("params"), py::arg("lr"), py::arg("alpha"), py::arg("eps"), py::arg("weight_decay"), py::arg("momentum"),
           py::arg("centered"));

  py::class_<optim::LRScheduler>(o, "LRScheduler")
      .def("step", [](optim::LRScheduler& s) { s.step(); })
      .def("get_last_lr", &optim::LRScheduler::get_last_lr)
      .def_property_readonly("last_epoch", &optim::LRScheduler::last_epoch);
  py::class_<optim::StepLR, optim::LRScheduler>(o, "StepLR")
      .def(py::init<optim::Optimizer&, int64_t, double>(), py::arg("optimizer"), py::arg("step_size"), py::arg("gamma") = 0.1,
           py::keep_alive<1, 2>());
  py::class_<optim::MultiStepLR, optim::LRScheduler>(o, "MultiStepLR")
      .def(py::init<optim::Optimizer&, std::vector<int64_t>, double>(), py::arg("optimizer"), py::arg("milestones"),
           py::arg("gamma") = 0.1, py::keep_alive<1, 2>());
  py::class_<optim::ExponentialLR, optim::LRScheduler>(o, "ExponentialLR")
      .def(py::init<optim::Optimizer&, double>(), py::arg("optimizer"), py::arg("gamma"), py::keep_alive<1, 2>());
  py::class_<optim::CosineAnnealingLR, optim::LRScheduler>(o, "CosineAnnealingLR")
      .def(py::init<optim::Optimizer&, int64_t, double>(), py::arg("optimizer"), py::arg("T_max"), py::arg("eta_min") = 0.0,
           py::keep_alive<1, 2>());
  py::class_<optim::LinearLR, optim::LRScheduler>(o, "LinearLR")
      .def(py::init<optim::Optimizer&, double, double, int64_t>(), py::arg("optimizer"), py::arg("start_factor") = 1.0 / 3,
           py::arg("end_factor") = 1.0, py::arg("total_iters") = 5, py::keep_alive<1, 2>());
}

}  // namespace tessera::python
