// Optimizer state_dict / load_state_dict (structure, round trip through a safetensors file with training
// continuing bitwise the same, all-or-nothing failure) and the errors of every optimizer.
#include <cmath>
#include <filesystem>
#include <functional>
#include <memory>
#include <unistd.h>

#include "common/test_util.h"

namespace ts = tessera;
namespace opt = tessera::optim;
using namespace tessera::testing;

namespace {

void set_grad(const ts::Tensor& p, int k) {
  std::vector<double> g(p.numel());
  for (size_t i = 0; i < g.size(); ++i) g[i] = std::cos(0.9 * k + 0.4 * i) * (1 + 0.3 * std::sin(0.1 * k * i));
  p.set_grad(ts::tensor(g, p.sizes(), ts::kFloat64).to(p.dtype()));
}

std::vector<ts::Tensor> make_params() {
  return {test_data({4, 3}, ts::kFloat32, 1).requires_grad_(), test_data({5}, ts::kFloat32, 2).requires_grad_(),
          test_data({2, 2}, ts::kFloat32, 3).requires_grad_()};
}

using Make = std::function<std::unique_ptr<opt::Optimizer>(std::vector<ts::Tensor>)>;

std::vector<std::pair<std::string, Make>> optimizers() {
  using P = std::vector<ts::Tensor>;
  return {
      {"SGD", [](P p) { return std::make_unique<opt::SGD>(p, opt::SGDOptions{.lr = 0.1, .momentum = 0.9, .nesterov = true}); }},
      {"Adam", [](P p) { return std::make_unique<opt::Adam>(p, opt::AdamOptions{.lr = 0.01, .amsgrad = true}); }},
      {"AdamW", [](P p) { return std::make_unique<opt::AdamW>(p, opt::AdamWOptions{.lr = 0.01, .weight_decay = 0.1}); }},
      {"RMSprop", [](P p) {
         return std::make_unique<opt::RMSprop>(p, opt::RMSpropOptions{.lr = 0.01, .momentum = 0.5, .centered = true});
       }},
      {"Adagrad", [](P p) { return std::make_unique<opt::Adagrad>(p, opt::AdagradOptions{.lr = 0.1, .lr_decay = 0.01}); }},
  };
}

std::string temp_file(const std::string& stem) {
  return (std::filesystem::temp_directory_path() / (stem + "_" + std::to_string(::getpid()) + ".safetensors")).string();
}

}  // namespace

TEST(OptimizerState, StateDictHasPyTorchStructure) {
  std::vector<ts::Tensor> p = make_params();
  opt::Adam o({{{p[0], p[1]}, {.lr = 0.01, .amsgrad = true}}, {{p[2]}, {.lr = 0.02, .betas = {0.8, 0.9}}}});
  for (int k = 0; k < 3; ++k) {
    set_grad(p[0], k);
    if (k < 2) set_grad(p[2], k);
    o.step();
    o.zero_grad();
  }
  opt::OptimizerStateDict sd = o.state_dict();
  std::vector<std::string> keys;
  for (const auto& [k, t] : sd.state) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"state.0.exp_avg", "state.0.exp_avg_sq", "state.0.max_exp_avg_sq",
                                            "state.0.step", "state.2.exp_avg", "state.2.exp_avg_sq", "state.2.step"}));
  EXPECT_EQ(sd.state.at("state.0.step").item<double>(), 3.0);
  EXPECT_EQ(sd.state.at("state.2.step").item<double>(), 2.0);
  EXPECT_EQ(sd.state.at("state.0.step").dim(), 0);
  EXPECT_EQ(sd.state.at("state.0.exp_avg").sizes(), p[0].sizes());
  EXPECT_NE(sd.param_groups.find(R"("betas":[0.8,0.9])"), std::string::npos) << sd.param_groups;
  EXPECT_NE(sd.param_groups.find(R"("params":[0,1])"), std::string::npos) << sd.param_groups;
  EXPECT_NE(sd.param_groups.find(R"("params":[2])"), std::string::npos) << sd.param_groups;
  EXPECT_NE(sd.param_groups.find(R"("amsgrad":true)"), std::string::npos) << sd.param_groups;
  EXPECT_NE(sd.param_groups.find(R"("lr":0.02)"), std::string::npos) << sd.param_groups;
}

// Train 6 steps; save the optimizer state and parameters to a safetensors file after 3; a fresh
// optimizer (with other options) that loads them and trains the last 3 steps ends bitwise where the
// uninterrupted run does.
TEST(OptimizerState, RoundTripThroughSafetensorsContinuesBitwise) {
  for (const auto& [name, make] : optimizers()) {
    SCOPED_TRACE(name);
    const std::string path = temp_file("tessera_optim_state_" + name);
    std::vector<ts::Tensor> a = make_params();
    auto oa = make(a);
    std::map<std::string, ts::Tensor> saved_params;
    for (int k = 0; k < 6; ++k) {
      if (k == 3) {
        opt::OptimizerStateDict sd = oa->state_dict();
        std::map<std::string, ts::Tensor> tensors = sd.state;
        for (size_t j = 0; j < a.size(); ++j) tensors["param." + std::to_string(j)] = a[j].detach();
        ts::save_safetensors(tensors, path, {{"param_groups", sd.param_groups}});
      }
      for (size_t j = 0; j < a.size(); ++j)
        if (j != 1 || k % 2 == 0) set_grad(a[j], k);  // parameter 1 skips some steps: its step count differs
      oa->step();
      oa->zero_grad();
    }

    ts::SafetensorsFile file(path);
    std::vector<ts::Tensor> b;
    for (size_t j = 0; j < a.size(); ++j) b.push_back(file.get("param." + std::to_string(j)).clone().requires_grad_());
    auto ob = make(b);
    ob->set_lr(0, 12345.0);  // overwritten by the load
    opt::OptimizerStateDict sd;
    for (const auto& k : file.keys())
      if (k.rfind("state.", 0) == 0) sd.state[k] = file.get(k);
    sd.param_groups = file.metadata().at("param_groups");
    ob->load_state_dict(sd);
    EXPECT_EQ(ob->lr(0), oa->lr(0));
    for (int k = 3; k < 6; ++k) {
      for (size_t j = 0; j < b.size(); ++j)
        if (j != 1 || k % 2 == 0) set_grad(b[j], k);
      ob->step();
      ob->zero_grad();
    }
    for (size_t j = 0; j < a.size(); ++j)
      EXPECT_EQ(a[j].detach().tolist<float>(), b[j].detach().tolist<float>()) << "parameter " << j;
    std::filesystem::remove(path);
  }
}

TEST(OptimizerState, LoadedStateIsACopyCastToTheParameters) {
  ts::Tensor p = test_data({3}, ts::kFloat64, 4).requires_grad_();
  opt::SGD o({p}, {.lr = 0.1, .momentum = 0.9});
  opt::OptimizerStateDict sd;
  ts::Tensor buf = ts::ones({3}, ts::kFloat32);
  sd.state["state.0.momentum_buffer"] = buf;
  sd.param_groups = R"([{"lr": 0.2, "momentum": 0.5, "initial_lr": 0.3, "foreach": null, "differentiable": false,
                         "params": [0]}])";
  o.load_state_dict(sd);
  EXPECT_EQ(o.lr(), 0.2);
  EXPECT_EQ(o.options().momentum, 0.5);
  EXPECT_EQ(o.get_option(0, "initial_lr"), 0.3);  // a scheduler's value, kept with the group
  const ts::Tensor& loaded = o.state(p)->buffers.at("momentum_buffer");
  EXPECT_EQ(loaded.dtype(), ts::kFloat64);
  EXPECT_FALSE(loaded.is_alias_of(buf));
  const ts::Tensor p0 = p.detach().clone();
  p.set_grad(ts::zeros({3}, ts::kFloat64));
  o.step();  // buf = 0.5 * 1 + 0; p -= 0.2 * 0.5
  EXPECT_TRUE(all_close(p.detach(), p0 - 0.1));
  EXPECT_TRUE(ts::equal(buf, ts::ones({3})));
}

TEST(OptimizerState, LoadErrorsLeaveTheOptimizerUnchanged) {
  std::vector<ts::Tensor> p = make_params();
  opt::Adam o({p[0], p[1]}, {.lr = 0.01});
  set_grad(p[0], 0);
  o.step();
  opt::OptimizerStateDict good = o.state_dict();

  auto expect_rejected = [&](opt::OptimizerStateDict sd, auto error_tag) {
    using E = decltype(error_tag);
    EXPECT_THROW(o.load_state_dict(sd), E);
    EXPECT_EQ(o.lr(), 0.01);
    EXPECT_EQ(o.state(p[0])->step, 1);
  };
  opt::OptimizerStateDict sd = good;
  sd.param_groups = "[]";
  expect_rejected(sd, ts::ValueError(""));  // a different number of groups
  sd.param_groups = R"([{"lr": 0.5, "params": [0]}])";
  expect_rejected(sd, ts::ValueError(""));  // a group of another size
  sd.param_groups = "not json";
  expect_rejected(sd, ts::ValueError(""));
  sd.param_groups = R"([{"lr": -0.5, "params": [0, 1]}])";
  expect_rejected(sd, ts::ValueError(""));  // an invalid option
  sd.param_groups = R"([{"lr": 0.5, "betas": [0.9], "params": [0, 1]}])";
  expect_rejected(sd, ts::ValueError(""));
  sd = good;
  sd.state["state.0.exp_avg"] = ts::zeros({2});
  sd.param_groups = R"([{"lr": 0.5, "params": [0, 1]}])";
  expect_rejected(sd, ts::ShapeError(""));
  sd = good;
  sd.state["state.7.exp_avg"] = ts::zeros({1});
  expect_rejected(sd, ts::ValueError(""));
  sd = good;
  sd.state["bogus"] = ts::zeros({1});
  expect_rejected(sd, ts::ValueError(""));
  sd = good;
  sd.state.erase("state.0.step");
  expect_rejected(sd, ts::ValueError(""));
  sd = good;
  sd.state.erase("state.0.exp_avg");
  expect_rejected(sd, ts::ValueError(""));
}

// ---- errors -------------------------------------------------------------------------------------------

namespace {
// Runs `f`, expecting ValueError whose message holds every one of `parts`.
void expect_value_error(const std::function<void()>& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "no ValueError; expected a message with '" << parts[0] << "'";
  } catch (const ts::ValueError& e) {
    for (const auto& s : parts) EXPECT_NE(std::string(e.what()).find(s), std::string::npos) << e.what();
  }
}
}  // namespace

TEST(OptimizerErrors, InvalidHyperparameters) {
  std::vector<ts::Tensor> p = {ts::zeros({2}).requires_grad_()};
  expect_value_error([&] { opt::SGD o(p, {.lr = -0.1}); }, {"SGD", "learning rate", "-0.1"});
  expect_value_error([&] { opt::SGD o(p, {.momentum = -0.5}); }, {"SGD", "momentum", "-0.5"});
  expect_value_error([&] { opt::SGD o(p, {.weight_decay = -1}); }, {"SGD", "weight_decay", "-1"});
  expect_value_error([&] { opt::SGD o(p, {.momentum = 0.9, .dampening = 0.1, .nesterov = true}); },
                     {"SGD", "Nesterov", "0.1"});
  expect_value_error([&] { opt::SGD o(p, {.nesterov = true}); }, {"SGD", "Nesterov"});
  expect_value_error([&] { opt::Adam o(p, {.lr = -1e-3}); }, {"Adam", "learning rate", "-0.001"});
  expect_value_error([&] { opt::Adam o(p, {.betas = {1.0, 0.999}}); }, {"Adam", "index 0", "1"});
  expect_value_error([&] { opt::AdamW o(p, {.betas = {0.9, -0.1}}); }, {"AdamW", "index 1", "-0.1"});
  expect_value_error([&] { opt::AdamW o(p, {.eps = -1e-8}); }, {"AdamW", "epsilon", "-1e-08"});
  expect_value_error([&] { opt::Adam o(p, {.weight_decay = std::nan("")}); }, {"Adam", "weight_decay", "nan"});
  expect_value_error([&] { opt::RMSprop o(p, {.alpha = -0.9}); }, {"RMSprop", "alpha", "-0.9"});
  expect_value_error([&] { opt::RMSprop o(p, {.momentum = -1}); }, {"RMSprop", "momentum"});
  expect_value_error([&] { opt::Adagrad o(p, {.lr_decay = -0.1}); }, {"Adagrad", "lr_decay", "-0.1"});
  expect_value_error([&] { opt::Adagrad o(p, {.initial_accumulator_value = -2}); },
                     {"Adagrad", "initial_accumulator_value", "-2"});
  // A group's own options are checked as well.
  expect_value_error([&] { opt::SGD o({{p, {.lr = -2}}}, {.lr = 0.1}); }, {"SGD", "-2"});
}

TEST(OptimizerErrors, InvalidParameters) {
  ts::Tensor a = ts::zeros({2}).requires_grad_(), b = ts::zeros({3}).requires_grad_();
  expect_value_error([&] { opt::SGD o({{{a}, {}}, {{b, a}, {}}}); }, {"SGD", "more than one parameter group"});
  expect_value_error([&] { opt::Adam o({a, a}); }, {"Adam", "more than one parameter group"});
  expect_value_error([&] { opt::Adam o(std::vector<ts::Tensor>{}); }, {"Adam", "empty parameter list"});
  expect_value_error([&] { opt::SGD o({a.t()}); }, {"SGD", "non-leaf"});
  expect_value_error([&] { opt::SGD o({ts::arange(3)}); }, {"SGD", "floating-point", "int64"});
  expect_value_error([&] { opt::SGD o({ts::Tensor()}); }, {"SGD", "undefined"});
  opt::SGD o({a});
  EXPECT_THROW(o.set_option(0, "lr", 1.0, 1), ts::IndexError);
  EXPECT_THROW(o.get_option(0, "no_such_option"), ts::ValueError);
}
