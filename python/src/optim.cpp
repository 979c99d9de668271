// tessera._C._optim: the C++ optimizers (SGD, Adam, AdamW, RMSprop, Adagrad) and LR schedulers.
// tessera/optim (Python) gives them PyTorch's constructor signatures and param_groups (several, each
// with its own options: Note [Param groups from Python]), whose options
// read and write the C++ optimizer's (get_option / set_option), so a scheduler written in Python and
// one of these see the same learning rate.
#include <map>

#include "bindings.h"

namespace tessera::python {
namespace {

using Release = py::call_guard<py::gil_scoped_release>;

// Note [Param groups from Python]: each group is (params, options dict). A group's options are the
// optimizer's defaults (the constructor's keywords, a dict of every option) with the group's own keys
// over them, set through the options struct's refs() (the names PyTorch's group dicts use), so one
// binding serves every optimizer. A key that is no option of the optimizer raises ValueError here;
// PyTorch keeps such keys in the group, and tessera/optim keeps them on the Python side.
template <class Options>
Options with_options(Options o, const py::dict& d, const std::string& opt) {
  for (auto item : d) {
    const py::handle value = item.second;
    const std::string k = py::str(item.first);
    if (k == "params") continue;
    bool found = false;
    for (const optim::OptionRef& r : o.refs()) {
      if (k != r.name) continue;
      found = true;
      if (r.flag) {
        *r.flag = value.cast<bool>();
      } else if (r.count == 1) {
        r.values[0] = value.cast<double>();
      } else {
        auto v = value.cast<std::vector<double>>();
        TS_CHECK(static_cast<int>(v.size()) == r.count, ValueError, opt, ": '", k, "' takes ", r.count, " numbers, got ",
                 v.size());
        for (int i = 0; i < r.count; ++i) r.values[i] = v[i];
      }
    }
    TS_CHECK(found, ValueError, opt, ": unknown option '", k, "'");
  }
  return o;
}

template <class Opt>
Opt* make_optimizer(const std::vector<std::pair<std::vector<Tensor>, py::dict>>& groups, const py::dict& defaults,
                    const std::string& name) {
  using Options = std::remove_cvref_t<decltype(std::declval<Opt&>().defaults())>;
  const Options base = with_options(Options{}, defaults, name);
  std::vector<typename Opt::ParamGroup> gs;
  for (const auto& [params, opts] : groups) gs.push_back({params, with_options(base, opts, name)});
  return new Opt(std::move(gs), base);
}

template <class Opt>
void optimizer_class(py::module_& o, const char* name) {
  py::class_<Opt, optim::Optimizer>(o, name)
      .def(py::init([name](const std::vector<std::pair<std::vector<Tensor>, py::dict>>& groups, const py::dict& defaults) {
             return make_optimizer<Opt>(groups, defaults, name);
           }), py::arg("groups"), py::arg("defaults"))
      .def("add_param_group", [name](Opt& opt, const std::vector<Tensor>& params, const py::dict& options) {
        opt.add_param_group({params, with_options(opt.defaults(), options, name)});
      }, py::arg("params"), py::arg("options"));
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
      .def_property_readonly("name", &optim::Optimizer::name)
      // PyTorch's state_dict as the C++ keeps it: ({"state.<index>.<name>": tensor}, param_groups JSON);
      // tessera/optim reshapes it into PyTorch's nested dicts.
      .def("state_dict", [](const optim::Optimizer& opt) {
        optim::OptimizerStateDict sd = opt.state_dict();
        return py::make_tuple(sd.state, sd.param_groups);
      })
      .def("load_state_dict", [](optim::Optimizer& opt, std::map<std::string, Tensor> state, std::string groups) {
        opt.load_state_dict({std::move(state), std::move(groups)});
      }, py::arg("state"), py::arg("param_groups"), py::call_guard<py::gil_scoped_release>());

  optimizer_class<optim::SGD>(o, "SGD");
  optimizer_class<optim::Adam>(o, "Adam");
  optimizer_class<optim::AdamW>(o, "AdamW");
  optimizer_class<optim::RMSprop>(o, "RMSprop");
  optimizer_class<optim::Adagrad>(o, "Adagrad");

  py::class_<optim::LRScheduler>(o, "LRScheduler")
      .def("step", [](optim::LRScheduler& s) { s.step(); })
      .def("get_last_lr", &optim::LRScheduler::get_last_lr)
      .def_property_readonly("last_epoch", &optim::LRScheduler::last_epoch)
      .def("state_dict", &optim::LRScheduler::state_dict)  // JSON text of the mutable state
      .def("load_state_dict", &optim::LRScheduler::load_state_dict, py::arg("state_dict"));
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
  py::class_<optim::OneCycleLR, optim::LRScheduler>(o, "OneCycleLR")
      .def(py::init([](optim::Optimizer& opt, std::vector<double> max_lr, int64_t total_steps, double pct_start,
                       std::string anneal_strategy, bool cycle_momentum, double base_momentum, double max_momentum,
                       double div_factor, double final_div_factor, bool three_phase) {
             optim::OneCycleLROptions x;
             x.max_lr = std::move(max_lr); x.total_steps = total_steps; x.pct_start = pct_start;
             x.anneal_strategy = std::move(anneal_strategy); x.cycle_momentum = cycle_momentum;
             x.base_momentum = base_momentum; x.max_momentum = max_momentum; x.div_factor = div_factor;
             x.final_div_factor = final_div_factor; x.three_phase = three_phase;
             return new optim::OneCycleLR(opt, std::move(x));
           }), py::arg("optimizer"), py::arg("max_lr"), py::arg("total_steps"), py::arg("pct_start"),
           py::arg("anneal_strategy"), py::arg("cycle_momentum"), py::arg("base_momentum"), py::arg("max_momentum"),
           py::arg("div_factor"), py::arg("final_div_factor"), py::arg("three_phase"), py::keep_alive<1, 2>());
  // The composites hold pointers to their schedulers: the Python wrappers (tessera/optim/lr_scheduler.py)
  // keep those alive as long as the composite.
  py::class_<optim::SequentialLR, optim::LRScheduler>(o, "SequentialLR")
      .def(py::init<optim::Optimizer&, std::vector<optim::LRScheduler*>, std::vector<int64_t>>(), py::arg("optimizer"),
           py::arg("schedulers"), py::arg("milestones"), py::keep_alive<1, 2>());
  py::class_<optim::ChainedScheduler, optim::LRScheduler>(o, "ChainedScheduler")
      .def(py::init<std::vector<optim::LRScheduler*>>(), py::arg("schedulers"), py::keep_alive<1, 2>());
}

}  // namespace tessera::python
