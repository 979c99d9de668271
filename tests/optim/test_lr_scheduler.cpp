// LR schedulers: values against their closed forms (float64), OneCycleLR's phases and momentum
// cycling, SequentialLR and ChainedScheduler, state_dict round trips, and the errors.
#include <cmath>
#include <functional>
#include <memory>
#include <numbers>

#include "common/test_util.h"

namespace ts = tessera;
namespace opt = tessera::optim;

namespace {

std::unique_ptr<opt::SGD> sgd(std::vector<double> lrs, double momentum = 0.9) {
  std::vector<opt::SGD::ParamGroup> groups;
  for (double lr : lrs) groups.push_back({{ts::zeros({1}).requires_grad_()}, {.lr = lr, .momentum = momentum}});
  return std::make_unique<opt::SGD>(std::move(groups));
}

// lr of group 0 after construction and after each of `steps` steps.
std::vector<double> run(opt::Optimizer& o, opt::LRScheduler& s, int steps) {
  std::vector<double> lrs = {s.get_last_lr().at(0)};
  for (int i = 0; i < steps; ++i) {
    o.step();
    s.step();
    lrs.push_back(s.get_last_lr().at(0));
    EXPECT_EQ(o.lr(0), lrs.back());
  }
  return lrs;
}

void expect_near_rel(const std::vector<double>& got, const std::function<double(int)>& want, double rel = 1e-12) {
  for (size_t e = 0; e < got.size(); ++e)
    EXPECT_NEAR(got[e], want(static_cast<int>(e)), rel * std::abs(want(static_cast<int>(e)))) << "epoch " << e;
}

constexpr double kPi = std::numbers::pi;

}  // namespace

TEST(LRScheduler, StepMultiStepExponential) {
  {
    auto o = sgd({1.0, 0.5});
    opt::StepLR s(*o, 3, 0.5);
    expect_near_rel(run(*o, s, 10), [](int e) { return std::pow(0.5, e / 3); });
    EXPECT_EQ(s.get_last_lr().at(1), 0.5 * std::pow(0.5, 10 / 3));
    EXPECT_EQ(o->get_option(1, "initial_lr"), 0.5);
  }
  {
    auto o = sgd({1.0});
    opt::MultiStepLR s(*o, {6, 2, 6}, 0.1);  // unsorted, 6 twice
    expect_near_rel(run(*o, s, 8), [](int e) { return e < 2 ? 1.0 : e < 6 ? 0.1 : 1e-3; });
  }
  {
    auto o = sgd({2.0});
    opt::ExponentialLR s(*o, 0.9);
    expect_near_rel(run(*o, s, 20), [](int e) { return 2.0 * std::pow(0.9, e); });
  }
}

TEST(LRScheduler, CosineAnnealingFollowsTheClosedForm) {
  auto o = sgd({0.1});
  const double eta = 0.002;
  opt::CosineAnnealingLR s(*o, 25, eta);
  std::vector<double> lrs = run(*o, s, 25);
  expect_near_rel(lrs, [&](int e) { return eta + (0.1 - eta) * (1 + std::cos(kPi * e / 25)) / 2; });
  EXPECT_NEAR(lrs.back(), eta, 1e-15);
}

TEST(LRScheduler, LinearWarmup) {
  auto o = sgd({0.1});
  opt::LinearLR s(*o, 0.25, 1.0, 6);
  expect_near_rel(run(*o, s, 10), [](int e) { return 0.1 * (0.25 + 0.75 * std::min(e, 6) / 6.0); });
}

TEST(LRScheduler, OneCycleCyclesLrAndMomentum) {
  auto o = sgd({0.1});
  opt::OneCycleLR s(*o, {.max_lr = {1.0}, .total_steps = 20, .pct_start = 0.25});
  // Starts at max_lr / div_factor with max momentum; peaks at step 4 (= 0.25 * 20 - 1) with base
  // momentum; ends at initial_lr / final_div_factor at step 19.
  EXPECT_NEAR(s.get_last_lr()[0], 1.0 / 25, 1e-15);
  EXPECT_DOUBLE_EQ(o->options().momentum, 0.95);
  std::vector<double> lrs = {s.get_last_lr()[0]}, moms = {o->options().momentum};
  for (int i = 0; i < 19; ++i) {
    o->step();
    s.step();
    lrs.push_back(s.get_last_lr()[0]);
    moms.push_back(o->options().momentum);
  }
  EXPECT_DOUBLE_EQ(lrs[4], 1.0);
  EXPECT_DOUBLE_EQ(moms[4], 0.85);
  EXPECT_NEAR(lrs[19], 1.0 / 25 / 1e4, 1e-18);
  EXPECT_DOUBLE_EQ(moms[19], 0.95);
  for (int i = 1; i <= 4; ++i) EXPECT_GT(lrs[i], lrs[i - 1]);
  for (int i = 5; i <= 19; ++i) EXPECT_LT(lrs[i], lrs[i - 1]);
  o->step();
  s.step();  // step 20 = total_steps is still allowed, as in PyTorch
  EXPECT_THROW(s.step(), ts::ValueError);
}

TEST(LRScheduler, OneCycleCyclesBeta1OfAdam) {
  std::vector<ts::Tensor> p = {ts::zeros({1}).requires_grad_()};
  opt::Adam o(p, {.lr = 0.1, .betas = {0.9, 0.99}});
  opt::OneCycleLR s(o, {.max_lr = {0.5}, .total_steps = 10, .anneal_strategy = "linear"});
  EXPECT_EQ(o.options().betas[0], 0.95);
  EXPECT_EQ(o.options().betas[1], 0.99);
  for (int i = 0; i < 2; ++i) s.step();  // peak at 0.3 * 10 - 1 = 2
  EXPECT_DOUBLE_EQ(o.options().betas[0], 0.85);
  EXPECT_DOUBLE_EQ(s.get_last_lr()[0], 0.5);
  EXPECT_EQ(o.options().betas[1], 0.99);
}

TEST(LRScheduler, SequentialWarmupThenCosine) {
  auto o = sgd({0.1});
  opt::LinearLR warm(*o, 0.1, 1.0, 5);
  opt::CosineAnnealingLR cos(*o, 10);
  opt::SequentialLR s(*o, {&warm, &cos}, {5});
  std::vector<double> lrs = run(*o, s, 15);
  expect_near_rel(lrs, [](int e) {
    return e < 5 ? 0.1 * (0.1 + 0.9 * e / 5.0) : 0.1 * (1 + std::cos(kPi * (e - 5) / 10)) / 2;
  });
}

TEST(LRScheduler, ChainedMultipliesFactors) {
  auto o = sgd({1.0});
  opt::StepLR a(*o, 2, 0.5);
  opt::ExponentialLR b(*o, 0.9);
  opt::ChainedScheduler s({&a, &b});
  expect_near_rel(run(*o, s, 9), [](int e) { return std::pow(0.5, e / 2) * std::pow(0.9, e); }, 1e-14);
}

// A scheduler and its optimizer restored from their state dicts continue with the same learning rates.
TEST(LRScheduler, StateDictRoundTrip) {
  using Build = std::function<void(opt::Optimizer&, std::vector<std::unique_ptr<opt::LRScheduler>>&)>;
  std::vector<std::pair<std::string, Build>> builds = {
      {"cosine", [](opt::Optimizer& o, auto& v) { v.push_back(std::make_unique<opt::CosineAnnealingLR>(o, 7, 0.01)); }},
      {"onecycle",
       [](opt::Optimizer& o, auto& v) {
         v.push_back(std::make_unique<opt::OneCycleLR>(o, opt::OneCycleLROptions{.max_lr = {0.4}, .total_steps = 30}));
       }},
      {"sequential",
       [](opt::Optimizer& o, auto& v) {
         v.push_back(std::make_unique<opt::LinearLR>(o, 0.2, 1.0, 4));
         v.push_back(std::make_unique<opt::MultiStepLR>(o, std::vector<int64_t>{3, 6}, 0.5));
         v.push_back(std::make_unique<opt::SequentialLR>(
             o, std::vector<opt::LRScheduler*>{v[0].get(), v[1].get()}, std::vector<int64_t>{4}));
       }},
      {"chained",
       [](opt::Optimizer& o, auto& v) {
         v.push_back(std::make_unique<opt::LinearLR>(o, 0.2, 1.0, 4));
         v.push_back(std::make_unique<opt::CosineAnnealingLR>(o, 9));
         v.push_back(std::make_unique<opt::ChainedScheduler>(std::vector<opt::LRScheduler*>{v[0].get(), v[1].get()}));
       }},
  };
  for (const auto& [name, build] : builds) {
    SCOPED_TRACE(name);
    auto oa = sgd({0.1, 0.03});
    std::vector<std::unique_ptr<opt::LRScheduler>> sa;
    build(*oa, sa);
    for (int i = 0; i < 6; ++i) oa->step(), sa.back()->step();
    const opt::OptimizerStateDict osd = oa->state_dict();
    const std::string ssd = sa.back()->state_dict();

    auto ob = sgd({0.5, 0.5});
    std::vector<std::unique_ptr<opt::LRScheduler>> sb;
    build(*ob, sb);
    ob->load_state_dict(osd);
    sb.back()->load_state_dict(ssd);
    EXPECT_EQ(sb.back()->last_epoch(), sa.back()->last_epoch());
    EXPECT_EQ(sb.back()->get_last_lr(), sa.back()->get_last_lr());
    for (int i = 0; i < 12; ++i) {
      oa->step(), sa.back()->step();
      ob->step(), sb.back()->step();
      EXPECT_EQ(sb.back()->get_last_lr(), sa.back()->get_last_lr()) << "step " << i;
      EXPECT_EQ(ob->options(0).momentum, oa->options(0).momentum);
    }
  }
}

TEST(LRScheduler, Errors) {
  auto o = sgd({0.1});
  EXPECT_THROW(opt::StepLR(*o, 0), ts::ValueError);
  EXPECT_THROW(opt::CosineAnnealingLR(*o, 0), ts::ValueError);
  EXPECT_THROW(opt::LinearLR(*o, 0.0), ts::ValueError);
  EXPECT_THROW(opt::LinearLR(*o, 0.5, 1.5), ts::ValueError);
  EXPECT_THROW(opt::OneCycleLR(*o, {.max_lr = {0.1}, .total_steps = 0}), ts::ValueError);
  EXPECT_THROW(opt::OneCycleLR(*o, {.max_lr = {0.1, 0.2}, .total_steps = 10}), ts::ValueError);
  EXPECT_THROW(opt::OneCycleLR(*o, {.max_lr = {0.1}, .total_steps = 10, .pct_start = 1.5}), ts::ValueError);
  EXPECT_THROW(opt::OneCycleLR(*o, {.max_lr = {0.1}, .total_steps = 10, .anneal_strategy = "step"}), ts::ValueError);
  std::vector<ts::Tensor> p = {ts::zeros({1}).requires_grad_()};
  opt::Adagrad adagrad(p);
  EXPECT_THROW(opt::OneCycleLR(adagrad, {.max_lr = {0.1}, .total_steps = 10}), ts::ValueError);
  EXPECT_NO_THROW(opt::OneCycleLR(adagrad, {.max_lr = {0.1}, .total_steps = 10, .cycle_momentum = false}));

  auto other = sgd({0.1});
  opt::StepLR a(*o, 2), b(*other, 2);
  EXPECT_THROW(opt::SequentialLR(*o, {&a, &b}, {3}), ts::ValueError);
  EXPECT_THROW(opt::SequentialLR(*o, {&a}, {3}), ts::ValueError);
  EXPECT_THROW(opt::SequentialLR(*o, {}, {}), ts::ValueError);
  EXPECT_THROW(opt::ChainedScheduler({&a, &b}), ts::ValueError);
  EXPECT_THROW(a.load_state_dict("{"), ts::ValueError);
  EXPECT_THROW(a.load_state_dict(R"({"last_epoch": "x"})"), ts::ValueError);
}
