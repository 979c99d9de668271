// Optimizers and LR schedulers against PyTorch (torch_optim_reference.py, run by /usr/bin/python3).
//
// Optimizers: every configuration starts from the same parameters (float32, or float64 where named)
// and takes 100 steps with the same gradients, passed to PyTorch in a safetensors file; the final
// parameters and the optimizer state (state_dict() keys, PyTorch's names) must agree to float32
// rounding (rtol 1e-5, atol 1e-6; float64 1e-12). SGD, Adam and AdamW run twice, fused and composite.
// Schedulers: each learning-rate sequence (and momentum / beta1 where OneCycleLR cycles it) over 100
// steps must agree to 1e-12 relative. Without PyTorch the tests skip, saying so; under CI=true they fail.
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <unistd.h>

#include "common/test_util.h"

namespace ts = tessera;
namespace opt = tessera::optim;
using namespace tessera::testing;

namespace {

constexpr int kSteps = 100;
// Sizes of the parameters: a matrix, a vector past the kernels' threading grain, a 0-dim scalar.
const std::vector<ts::Shape> kShapes = {{7, 5}, {33000}, {}};

struct Reference {
  bool available = false;
  std::string why;
  std::map<std::string, ts::Tensor> outputs;
};

bool on_ci() { return std::getenv("CI") && std::string(std::getenv("CI")) == "true"; }

// Writes `inputs` with `metadata`, runs the PyTorch script over them, and reads its outputs.
Reference run_reference(const std::map<std::string, ts::Tensor>& inputs, const std::map<std::string, std::string>& meta) {
  Reference r;
  std::string script;
  try {
    script = ts::testing::source_path("tests/optim/torch_optim_reference.py");
  } catch (const std::runtime_error& e) {
    r.why = e.what();
    return r;
  }
  if (std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") != 0) {
    r.why = "PyTorch is missing (/usr/bin/python3 cannot import torch; Debian package python3-torch)";
    return r;
  }
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("tessera_optim_ref_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path in = dir / "inputs.safetensors", out = dir / "outputs.safetensors";
  ts::save_safetensors(inputs, in.string(), meta);
  const std::string cmd = "/usr/bin/python3 " + script +
                          " " + in.string() + " " + out.string();
  const int rc = std::system(cmd.c_str());
  if (rc != 0) {
    r.why = "the PyTorch reference script failed (" + std::to_string(rc) + "): " + cmd;
    r.available = true;  // a failing script is an error, not a skip
    fs::remove_all(dir);
    return r;
  }
  for (auto& [k, t] : ts::load_safetensors(out.string())) r.outputs[k] = t.clone();
  fs::remove_all(dir);
  r.available = true;
  return r;
}

#define REQUIRE_REFERENCE(ref)                         \
  do {                                                 \
    if (!(ref).available) {                            \
      if (on_ci()) FAIL() << (ref).why;                \
      GTEST_SKIP() << (ref).why;                       \
    }                                                  \
    ASSERT_TRUE((ref).why.empty()) << (ref).why;       \
  } while (0)

struct MaxDiff {
  double abs = 0, rel = 0;
  void add(const ts::Tensor& a, const ts::Tensor& e) {
    std::vector<double> x = a.tolist<double>(), y = e.tolist<double>();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      const double d = std::abs(x[i] - y[i]);
      abs = std::max(abs, d);
      if (y[i] != 0) rel = std::max(rel, d / std::abs(y[i]));
    }
  }
};

// ---- optimizers -------------------------------------------------------------------------------------

using Factory = std::function<std::unique_ptr<opt::Optimizer>(std::vector<ts::Tensor>, bool fused)>;
struct OptimCase {
  std::string name, cls, kwargs;  // torch.optim.<cls>(**kwargs)
  ts::DType dtype;
  bool has_fused;                 // SGD, Adam, AdamW: run the composite path too
  Factory make;
};

template <class O, class Options>
std::unique_ptr<opt::Optimizer> make(std::vector<ts::Tensor> p, Options o) {
  return std::make_unique<O>(std::move(p), o);
}

std::vector<OptimCase> optim_cases() {
  using ts::kFloat32, ts::kFloat64;
  using P = std::vector<ts::Tensor>;
  return {
      {"sgd", "SGD", R"({"lr": 0.05})", kFloat32, true,
       [](P p, bool f) { return make<opt::SGD>(p, opt::SGDOptions{.lr = 0.05, .fused = f}); }},
      {"sgd_momentum", "SGD", R"({"lr": 0.01, "momentum": 0.9})", kFloat32, true,
       [](P p, bool f) { return make<opt::SGD>(p, opt::SGDOptions{.lr = 0.01, .momentum = 0.9, .fused = f}); }},
      {"sgd_dampening_wd", "SGD", R"({"lr": 0.02, "momentum": 0.8, "dampening": 0.3, "weight_decay": 0.05})", kFloat32,
       true,
       [](P p, bool f) {
         return make<opt::SGD>(p, opt::SGDOptions{.lr = 0.02, .momentum = 0.8, .dampening = 0.3, .weight_decay = 0.05,
                                                  .fused = f});
       }},
      {"sgd_nesterov_wd", "SGD", R"({"lr": 0.01, "momentum": 0.9, "nesterov": true, "weight_decay": 0.01})", kFloat32,
       true,
       [](P p, bool f) {
         return make<opt::SGD>(p, opt::SGDOptions{.lr = 0.01, .momentum = 0.9, .weight_decay = 0.01, .nesterov = true,
                                                  .fused = f});
       }},
      {"sgd_maximize", "SGD", R"({"lr": 0.01, "momentum": 0.5, "maximize": true, "weight_decay": 0.1})", kFloat32, true,
       [](P p, bool f) {
         return make<opt::SGD>(p, opt::SGDOptions{.lr = 0.01, .momentum = 0.5, .weight_decay = 0.1, .maximize = true,
                                                  .fused = f});
       }},
      {"sgd_nesterov_f64", "SGD", R"({"lr": 0.01, "momentum": 0.9, "nesterov": true, "weight_decay": 0.01})", kFloat64,
       true,
       [](P p, bool f) {
         return make<opt::SGD>(p, opt::SGDOptions{.lr = 0.01, .momentum = 0.9, .weight_decay = 0.01, .nesterov = true,
                                                  .fused = f});
       }},
      {"adam", "Adam", R"({"lr": 0.01})", kFloat32, true,
       [](P p, bool f) { return make<opt::Adam>(p, opt::AdamOptions{.lr = 0.01, .fused = f}); }},
      {"adam_wd_eps", "Adam", R"({"lr": 0.005, "weight_decay": 0.1, "eps": 0.001})", kFloat32, true,
       [](P p, bool f) {
         return make<opt::Adam>(p, opt::AdamOptions{.lr = 0.005, .eps = 1e-3, .weight_decay = 0.1, .fused = f});
       }},
      {"adam_amsgrad", "Adam", R"({"lr": 0.01, "amsgrad": true})", kFloat32, true,
       [](P p, bool f) { return make<opt::Adam>(p, opt::AdamOptions{.lr = 0.01, .amsgrad = true, .fused = f}); }},
      {"adam_all", "Adam",
       R"({"lr": 0.002, "betas": [0.8, 0.95], "weight_decay": 0.05, "amsgrad": true, "maximize": true})", kFloat32, true,
       [](P p, bool f) {
         return make<opt::Adam>(p, opt::AdamOptions{.lr = 0.002, .betas = {0.8, 0.95}, .weight_decay = 0.05,
                                                    .amsgrad = true, .maximize = true, .fused = f});
       }},
      {"adam_amsgrad_f64", "Adam", R"({"lr": 0.01, "amsgrad": true, "weight_decay": 0.01})", kFloat64, true,
       [](P p, bool f) {
         return make<opt::Adam>(p, opt::AdamOptions{.lr = 0.01, .weight_decay = 0.01, .amsgrad = true, .fused = f});
       }},
      {"adamw", "AdamW", R"({"lr": 0.01, "weight_decay": 0.1})", kFloat32, true,
       [](P p, bool f) { return make<opt::AdamW>(p, opt::AdamWOptions{.lr = 0.01, .weight_decay = 0.1, .fused = f}); }},
      {"adamw_default", "AdamW", R"({})", kFloat32, true,
       [](P p, bool f) { return make<opt::AdamW>(p, opt::AdamWOptions{.fused = f}); }},
      {"adamw_amsgrad_maximize", "AdamW",
       R"({"lr": 0.003, "betas": [0.85, 0.99], "weight_decay": 0.02, "amsgrad": true, "maximize": true})", kFloat32,
       true,
       [](P p, bool f) {
         return make<opt::AdamW>(p, opt::AdamWOptions{.lr = 0.003, .betas = {0.85, 0.99}, .weight_decay = 0.02,
                                                      .amsgrad = true, .maximize = true, .fused = f});
       }},
      {"rmsprop", "RMSprop", R"({"lr": 0.01})", kFloat32, false,
       [](P p, bool) { return make<opt::RMSprop>(p, opt::RMSpropOptions{.lr = 0.01}); }},
      {"rmsprop_centered", "RMSprop", R"({"lr": 0.01, "centered": true})", kFloat32, false,
       [](P p, bool) { return make<opt::RMSprop>(p, opt::RMSpropOptions{.lr = 0.01, .centered = true}); }},
      {"rmsprop_momentum", "RMSprop", R"({"lr": 0.005, "momentum": 0.9, "weight_decay": 0.05})", kFloat32, false,
       [](P p, bool) {
         return make<opt::RMSprop>(p, opt::RMSpropOptions{.lr = 0.005, .weight_decay = 0.05, .momentum = 0.9});
       }},
      {"rmsprop_all", "RMSprop",
       R"({"lr": 0.003, "alpha": 0.9, "eps": 1e-6, "momentum": 0.5, "centered": true, "maximize": true})", kFloat32,
       false,
       [](P p, bool) {
         return make<opt::RMSprop>(p, opt::RMSpropOptions{.lr = 0.003, .alpha = 0.9, .eps = 1e-6, .momentum = 0.5,
                                                          .centered = true, .maximize = true});
       }},
      {"adagrad", "Adagrad", R"({"lr": 0.1})", kFloat32, false,
       [](P p, bool) { return make<opt::Adagrad>(p, opt::AdagradOptions{.lr = 0.1}); }},
      {"adagrad_decay_wd", "Adagrad", R"({"lr": 0.1, "lr_decay": 0.01, "weight_decay": 0.1})", kFloat32, false,
       [](P p, bool) { return make<opt::Adagrad>(p, opt::AdagradOptions{.lr = 0.1, .lr_decay = 0.01, .weight_decay = 0.1}); }},
      {"adagrad_init_maximize", "Adagrad",
       R"({"lr": 0.05, "initial_accumulator_value": 0.5, "eps": 1e-6, "maximize": true})", kFloat32, false,
       [](P p, bool) {
         return make<opt::Adagrad>(
             p, opt::AdagradOptions{.lr = 0.05, .initial_accumulator_value = 0.5, .eps = 1e-6, .maximize = true});
       }},
  };
}

// Gradients that vary in sign and in magnitude (so amsgrad's maximum and the moments matter).
ts::Tensor gradient(int step, size_t j, const ts::Shape& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  std::vector<float> g(n);
  for (int64_t i = 0; i < n; ++i)
    g[i] = static_cast<float>(std::sin(step * 0.37 + i * 0.11 + j) * (1.0 + 0.8 * std::cos(step * 0.05 * (j + 1) + i * 0.3)));
  return ts::tensor(g, shape).reshape(shape);  // tensor() reads empty sizes as one dim
}

TEST(OptimTorchReference, OptimizersMatchPyTorchOver100Steps) {
  std::vector<OptimCase> cases = optim_cases();
  std::map<std::string, ts::Tensor> inputs;
  std::vector<ts::Tensor> init, grads_flat;
  for (size_t j = 0; j < kShapes.size(); ++j) {
    init.push_back(test_data(kShapes[j], ts::kFloat32, 10 + j));
    inputs["param." + std::to_string(j)] = init.back();
  }
  std::vector<std::vector<ts::Tensor>> grads(kSteps);
  for (int s = 0; s < kSteps; ++s)
    for (size_t j = 0; j < kShapes.size(); ++j) {
      grads[s].push_back(gradient(s, j, kShapes[j]));
      inputs["grad." + std::to_string(s) + "." + std::to_string(j)] = grads[s].back();
    }
  std::string list = "[";
  for (size_t c = 0; c < cases.size(); ++c)
    list += std::string(c ? "," : "") + R"({"name": ")" + cases[c].name + R"(", "class": ")" + cases[c].cls +
            R"(", "kwargs": )" + cases[c].kwargs + R"(, "dtype": ")" +
            ts::dtype_name(cases[c].dtype) + R"(", "steps": )" + std::to_string(kSteps) + "}";
  list += "]";
  Reference ref = run_reference(inputs, {{"optim_cases", list}});
  REQUIRE_REFERENCE(ref);

  for (const OptimCase& c : cases) {
    for (bool fused : {true, false}) {
      if (!fused && !c.has_fused) continue;
      SCOPED_TRACE(c.name + (fused ? " (fused)" : " (composite)"));
      std::vector<ts::Tensor> params;
      for (const auto& t : init) params.push_back(t.to(c.dtype, /*copy=*/true).requires_grad_());
      std::unique_ptr<opt::Optimizer> o = c.make(params, fused);
      for (int s = 0; s < kSteps; ++s) {
        for (size_t j = 0; j < params.size(); ++j) params[j].set_grad(grads[s][j].to(c.dtype, true));
        o->step();
      }
      const Tolerance tol = c.dtype == ts::kFloat64 ? Tolerance{1e-12, 1e-12} : Tolerance{1e-5, 1e-6};
      MaxDiff diff;
      for (size_t j = 0; j < params.size(); ++j) {
        auto it = ref.outputs.find(c.name + "/param." + std::to_string(j));
        ASSERT_NE(it, ref.outputs.end()) << "PyTorch wrote no parameter " << j;
        EXPECT_TRUE(all_close(params[j].detach(), it->second, tol)) << "parameter " << j;
        diff.add(params[j].detach(), it->second);
      }
      // The state, under PyTorch's names.
      opt::OptimizerStateDict sd = o->state_dict();
      size_t compared = 0;
      for (const auto& [key, want] : ref.outputs) {
        const std::string prefix = c.name + "/";
        if (key.rfind(prefix + "state.", 0) != 0) continue;
        const std::string name = key.substr(prefix.size());
        auto it = sd.state.find(name);
        ASSERT_NE(it, sd.state.end()) << "tessera's state_dict lacks " << name;
        EXPECT_TRUE(all_close(it->second.to(want.dtype()), want, tol)) << name;
        if (name.find(".step") == std::string::npos) diff.add(it->second, want);
        ++compared;
      }
      EXPECT_EQ(compared, sd.state.size()) << "tessera's state_dict has entries PyTorch's lacks";
      std::cout << "[ optim    ] " << c.name << (fused && c.has_fused ? " fused" : " composite") << " (" << ts::dtype_name(c.dtype)
                << "): max |diff| " << diff.abs << ", max rel diff " << diff.rel << " over parameters and "
                << compared << " state tensors\n";
    }
  }
}

// ---- schedulers -------------------------------------------------------------------------------------

struct Schedulers {
  std::vector<std::unique_ptr<opt::LRScheduler>> all;  // the last one is stepped
  template <class S, class... A>
  opt::LRScheduler* add(A&&... a) {
    all.push_back(std::make_unique<S>(std::forward<A>(a)...));
    return all.back().get();
  }
};

struct SchedCase {
  std::string name, spec, optimizer;  // optimizer: {"class": ..., "kwargs": ...}
  std::vector<double> lrs;
  std::function<void(opt::Optimizer&, Schedulers&)> make;
};

std::vector<SchedCase> sched_cases() {
  const std::string sgd = R"({"class": "SGD", "kwargs": {"lr": 0.1, "momentum": 0.9}})";
  const std::string adam = R"({"class": "Adam", "kwargs": {"lr": 0.1}})";
  using O = opt::Optimizer;
  using Sc = Schedulers;
  return {
      {"step", R"({"type": "StepLR", "args": {"step_size": 7, "gamma": 0.5}})", sgd, {0.1, 0.02},
       [](O& o, Sc& s) { s.add<opt::StepLR>(o, 7, 0.5); }},
      {"multistep", R"({"type": "MultiStepLR", "args": {"milestones": [30, 10, 30, 75], "gamma": 0.3}})", sgd, {0.1},
       [](O& o, Sc& s) { s.add<opt::MultiStepLR>(o, std::vector<int64_t>{30, 10, 30, 75}, 0.3); }},
      {"exponential", R"({"type": "ExponentialLR", "args": {"gamma": 0.97}})", adam, {0.1, 0.3},
       [](O& o, Sc& s) { s.add<opt::ExponentialLR>(o, 0.97); }},
      {"cosine_wraps", R"({"type": "CosineAnnealingLR", "args": {"T_max": 30, "eta_min": 0.001}})", sgd, {0.1, 0.05},
       [](O& o, Sc& s) { s.add<opt::CosineAnnealingLR>(o, 30, 0.001); }},
      {"cosine", R"({"type": "CosineAnnealingLR", "args": {"T_max": 100}})", adam, {0.01},
       [](O& o, Sc& s) { s.add<opt::CosineAnnealingLR>(o, 100); }},
      {"linear_warmup", R"({"type": "LinearLR", "args": {"start_factor": 0.1, "end_factor": 1.0, "total_iters": 20}})",
       sgd, {0.1, 0.01}, [](O& o, Sc& s) { s.add<opt::LinearLR>(o, 0.1, 1.0, 20); }},
      {"linear_decay", R"({"type": "LinearLR", "args": {"start_factor": 1.0, "end_factor": 0.05, "total_iters": 60}})",
       adam, {0.1}, [](O& o, Sc& s) { s.add<opt::LinearLR>(o, 1.0, 0.05, 60); }},
      {"onecycle_cos_sgd", R"({"type": "OneCycleLR", "args": {"max_lr": [0.5, 0.05], "total_steps": 100}})", sgd,
       {0.1, 0.1},
       [](O& o, Sc& s) { s.add<opt::OneCycleLR>(o, opt::OneCycleLROptions{.max_lr = {0.5, 0.05}, .total_steps = 100}); }},
      {"onecycle_linear_adam",
       R"({"type": "OneCycleLR", "args": {"max_lr": 0.3, "total_steps": 100, "pct_start": 0.25,
           "anneal_strategy": "linear", "div_factor": 10.0, "final_div_factor": 100.0, "base_momentum": 0.8,
           "max_momentum": 0.9}})",
       adam, {0.1},
       [](O& o, Sc& s) {
         s.add<opt::OneCycleLR>(o, opt::OneCycleLROptions{.max_lr = {0.3}, .total_steps = 100, .pct_start = 0.25,
                                                          .anneal_strategy = "linear", .base_momentum = 0.8,
                                                          .max_momentum = 0.9, .div_factor = 10, .final_div_factor = 100});
       }},
      {"onecycle_three_phase",
       R"({"type": "OneCycleLR", "args": {"max_lr": 0.2, "total_steps": 100, "three_phase": true, "pct_start": 0.35}})",
       sgd, {0.1},
       [](O& o, Sc& s) {
         s.add<opt::OneCycleLR>(o, opt::OneCycleLROptions{.max_lr = {0.2}, .total_steps = 100, .pct_start = 0.35,
                                                          .three_phase = true});
       }},
      {"onecycle_no_momentum",
       R"({"type": "OneCycleLR", "args": {"max_lr": 0.2, "total_steps": 100, "cycle_momentum": false}})", sgd, {0.1},
       [](O& o, Sc& s) {
         s.add<opt::OneCycleLR>(o, opt::OneCycleLROptions{.max_lr = {0.2}, .total_steps = 100, .cycle_momentum = false});
       }},
      {"sequential_warmup_cosine",
       R"({"type": "SequentialLR", "milestones": [10], "schedulers": [
           {"type": "LinearLR", "args": {"start_factor": 0.1, "end_factor": 1.0, "total_iters": 10}},
           {"type": "CosineAnnealingLR", "args": {"T_max": 90, "eta_min": 0.0001}}]})",
       adam, {0.1, 0.01},
       [](O& o, Sc& s) {
         auto* a = s.add<opt::LinearLR>(o, 0.1, 1.0, 10);
         auto* b = s.add<opt::CosineAnnealingLR>(o, 90, 1e-4);
         s.add<opt::SequentialLR>(o, std::vector<opt::LRScheduler*>{a, b}, std::vector<int64_t>{10});
       }},
      {"sequential_three",
       R"({"type": "SequentialLR", "milestones": [20, 50], "schedulers": [
           {"type": "ExponentialLR", "args": {"gamma": 0.9}},
           {"type": "StepLR", "args": {"step_size": 10, "gamma": 0.5}},
           {"type": "MultiStepLR", "args": {"milestones": [5, 12], "gamma": 0.1}}]})",
       sgd, {0.1},
       [](O& o, Sc& s) {
         auto* a = s.add<opt::ExponentialLR>(o, 0.9);
         auto* b = s.add<opt::StepLR>(o, 10, 0.5);
         auto* c = s.add<opt::MultiStepLR>(o, std::vector<int64_t>{5, 12}, 0.1);
         s.add<opt::SequentialLR>(o, std::vector<opt::LRScheduler*>{a, b, c}, std::vector<int64_t>{20, 50});
       }},
      {"chained_linear_exponential",
       R"({"type": "ChainedScheduler", "schedulers": [
           {"type": "LinearLR", "args": {"start_factor": 0.2, "end_factor": 1.0, "total_iters": 8}},
           {"type": "ExponentialLR", "args": {"gamma": 0.98}}]})",
       sgd, {0.1, 0.02},
       [](O& o, Sc& s) {
         auto* a = s.add<opt::LinearLR>(o, 0.2, 1.0, 8);
         auto* b = s.add<opt::ExponentialLR>(o, 0.98);
         s.add<opt::ChainedScheduler>(std::vector<opt::LRScheduler*>{a, b});
       }},
      {"chained_step_cosine",
       R"({"type": "ChainedScheduler", "schedulers": [
           {"type": "StepLR", "args": {"step_size": 5, "gamma": 0.9}},
           {"type": "CosineAnnealingLR", "args": {"T_max": 25}}]})",
       adam, {0.1},
       [](O& o, Sc& s) {
         auto* a = s.add<opt::StepLR>(o, 5, 0.9);
         auto* b = s.add<opt::CosineAnnealingLR>(o, 25);
         s.add<opt::ChainedScheduler>(std::vector<opt::LRScheduler*>{a, b});
       }},
  };
}

std::unique_ptr<opt::Optimizer> sched_optimizer(const std::string& spec, const std::vector<double>& lrs) {
  const bool sgd = spec.find("\"SGD\"") != std::string::npos;
  std::unique_ptr<opt::Optimizer> o;
  if (sgd) {
    std::vector<opt::SGD::ParamGroup> groups;
    for (double lr : lrs) groups.push_back({{ts::zeros({1}).requires_grad_()}, {.lr = lr, .momentum = 0.9}});
    o = std::make_unique<opt::SGD>(std::move(groups));
  } else {
    std::vector<opt::Adam::ParamGroup> groups;
    for (double lr : lrs) groups.push_back({{ts::zeros({1}).requires_grad_()}, {.lr = lr}});
    o = std::make_unique<opt::Adam>(std::move(groups));
  }
  return o;
}

double momentum_of(const opt::Optimizer& o, size_t g) {
  if (o.has_option(g, "momentum")) return o.get_option(g, "momentum");
  if (o.has_option(g, "betas")) return o.get_option(g, "betas", 0);
  return 0;
}

TEST(OptimTorchReference, SchedulersMatchPyTorchOver100Steps) {
  std::vector<SchedCase> cases = sched_cases();
  std::string list = "[";
  for (size_t c = 0; c < cases.size(); ++c) {
    std::string lrs = "[";
    for (size_t g = 0; g < cases[c].lrs.size(); ++g) lrs += (g ? ", " : "") + std::to_string(cases[c].lrs[g]);
    lrs += "]";
    list += std::string(c ? "," : "") + R"({"name": ")" + cases[c].name + R"(", "spec": )" + cases[c].spec +
            R"(, "optimizer": )" + cases[c].optimizer + R"(, "lrs": )" + lrs + R"(, "steps": )" +
            std::to_string(kSteps) + "}";
  }
  list += "]";
  Reference ref = run_reference({{"unused", ts::zeros({1})}}, {{"sched_cases", list}});
  REQUIRE_REFERENCE(ref);

  for (const SchedCase& c : cases) {
    SCOPED_TRACE(c.name);
    // The lrs went through std::to_string (6 decimals): use the same values here.
    std::vector<double> lrs;
    for (double lr : c.lrs) lrs.push_back(std::stod(std::to_string(lr)));
    std::unique_ptr<opt::Optimizer> o = sched_optimizer(c.optimizer, lrs);
    Schedulers s;
    c.make(*o, s);
    opt::LRScheduler& top = *s.all.back();
    std::vector<double> got_lr, got_mom;
    auto record = [&] {
      for (size_t g = 0; g < o->num_param_groups(); ++g) {
        got_lr.push_back(top.get_last_lr().at(g));
        got_mom.push_back(momentum_of(*o, g));
      }
    };
    record();
    for (int i = 0; i < kSteps; ++i) {
      o->step();
      top.step();
      record();
    }
    const std::vector<double> want_lr = ref.outputs.at(c.name + "/lr").tolist<double>();
    const std::vector<double> want_mom = ref.outputs.at(c.name + "/momentum").tolist<double>();
    ASSERT_EQ(got_lr.size(), want_lr.size());
    ASSERT_EQ(got_mom.size(), want_mom.size());
    double worst = 0;
    size_t exact = 0;
    for (size_t i = 0; i < want_lr.size(); ++i) {
      const double rel = std::abs(got_lr[i] - want_lr[i]) / std::max(std::abs(want_lr[i]), 1e-300);
      worst = std::max(worst, rel);
      exact += got_lr[i] == want_lr[i];
      EXPECT_LE(rel, 1e-12) << "lr at row " << i / lrs.size() << ", group " << i % lrs.size() << ": " << got_lr[i]
                            << " vs PyTorch's " << want_lr[i];
      EXPECT_LE(std::abs(got_mom[i] - want_mom[i]), 1e-12 * std::abs(want_mom[i]))
          << "momentum at row " << i / lrs.size() << ": " << got_mom[i] << " vs PyTorch's " << want_mom[i];
    }
    std::cout << "[ schedule ] " << c.name << ": max rel diff " << worst << ", " << exact << "/" << want_lr.size()
              << " learning rates bitwise equal\n";
  }
}

}  // namespace
