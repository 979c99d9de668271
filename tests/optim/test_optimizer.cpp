// Optimizers: updates against float64 reference loops written here, fused kernels against the composite
// path (contiguous, strided, threaded sizes), parameter groups, zero_grad, in-place updates,
// state_dict structure and round trip through safetensors (training continues bitwise the same),
// and the errors.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <unistd.h>

#include "common/test_util.h"

namespace ts = tessera;
namespace opt = tessera::optim;
using namespace tessera::testing;

namespace {

ts::Tensor param(const ts::Shape& s, uint64_t seed, ts::DType dt = ts::kFloat64) {
  return test_data(s, dt, seed).requires_grad_();
}
// The gradient of step k (k = 0, 1, ...) for a parameter of n elements, in float64.
std::vector<double> grad_values(int k, int64_t n) {
  std::vector<double> g(n);
  for (int64_t i = 0; i < n; ++i) g[i] = std::sin(0.7 * k + 0.3 * i) * (1 + 0.5 * std::cos(0.2 * k * (i + 1)));
  return g;
}
void set_grad(const ts::Tensor& p, int k) {
  p.set_grad(ts::tensor(grad_values(k, p.numel()), p.sizes(), ts::kFloat64).to(p.dtype()));
}

using Step = std::function<void(std::vector<double>& p, const std::vector<double>& g, int k)>;

// Runs `o` for `steps` steps on a float64 parameter and the float64 reference `ref` on the same
// values; they must agree to 1e-12.
void expect_matches_reference(opt::Optimizer& o, const ts::Tensor& p, const Step& ref, int steps = 12) {
  std::vector<double> want = p.detach().tolist<double>();
  for (int k = 0; k < steps; ++k) {
    set_grad(p, k);
    o.step();
    ref(want, grad_values(k, p.numel()), k);
  }
  EXPECT_TRUE(all_close(p.detach(), ts::tensor(want, p.sizes(), ts::kFloat64), {1e-12, 1e-12}));
}

}  // namespace

// ---- values against float64 reference loops ---------------------------------------------------------

TEST(Optimizers, SGDMatchesReference) {
  for (bool fused : {true, false})
    for (bool nesterov : {false, true}) {
      SCOPED_TRACE(std::string(fused ? "fused" : "composite") + (nesterov ? " nesterov" : ""));
      ts::Tensor p = param({3, 4}, 1);
      const double lr = 0.1, mom = 0.9, damp = nesterov ? 0 : 0.2, wd = 0.03;
      opt::SGD o({p}, {.lr = lr, .momentum = mom, .dampening = damp, .weight_decay = wd, .nesterov = nesterov,
                       .fused = fused});
      std::vector<double> buf;
      expect_matches_reference(o, p, [&](std::vector<double>& x, const std::vector<double>& g, int k) {
        if (k == 0) buf.assign(x.size(), 0);
        for (size_t i = 0; i < x.size(); ++i) {
          double d = g[i] + wd * x[i];
          buf[i] = k == 0 ? d : mom * buf[i] + (1 - damp) * d;
          x[i] -= lr * (nesterov ? d + mom * buf[i] : buf[i]);
        }
      });
    }
}

TEST(Optimizers, AdamAndAdamWMatchReference) {
  for (bool fused : {true, false})
    for (bool decoupled : {false, true})
      for (bool amsgrad : {false, true}) {
        SCOPED_TRACE(std::string(fused ? "fused" : "composite") + (decoupled ? " AdamW" : " Adam") +
                     (amsgrad ? " amsgrad" : ""));
        ts::Tensor p = param({5, 3}, 2);
        const double lr = 0.01, b1 = 0.8, b2 = 0.95, eps = 1e-6, wd = 0.1;
        std::unique_ptr<opt::Optimizer> o;
        if (decoupled)
          o = std::make_unique<opt::AdamW>(std::vector<ts::Tensor>{p},
                                           opt::AdamWOptions{.lr = lr, .betas = {b1, b2}, .eps = eps, .weight_decay = wd,
                                                             .amsgrad = amsgrad, .maximize = true, .fused = fused});
        else
          o = std::make_unique<opt::Adam>(std::vector<ts::Tensor>{p},
                                          opt::AdamOptions{.lr = lr, .betas = {b1, b2}, .eps = eps, .weight_decay = wd,
                                                           .amsgrad = amsgrad, .maximize = true, .fused = fused});
        std::vector<double> m, v, vmax;
        expect_matches_reference(*o, p, [&](std::vector<double>& x, const std::vector<double>& g, int k) {
          if (k == 0) m.assign(x.size(), 0), v.assign(x.size(), 0), vmax.assign(x.size(), 0);
          const double t = k + 1;
          for (size_t i = 0; i < x.size(); ++i) {
            double gi = -g[i];  // maximize
            if (decoupled) x[i] *= 1 - lr * wd;
            else gi += wd * x[i];
            m[i] = b1 * m[i] + (1 - b1) * gi;
            v[i] = b2 * v[i] + (1 - b2) * gi * gi;
            vmax[i] = std::max(vmax[i], v[i]);
            const double s = amsgrad ? vmax[i] : v[i];
            x[i] -= lr / (1 - std::pow(b1, t)) * m[i] / (std::sqrt(s) / std::sqrt(1 - std::pow(b2, t)) + eps);
          }
        });
      }
}

TEST(Optimizers, RMSpropMatchesReference) {
  for (bool centered : {false, true})
    for (double mom : {0.0, 0.7}) {
      SCOPED_TRACE(std::string(centered ? "centered" : "plain") + " momentum " + std::to_string(mom));
      ts::Tensor p = param({4, 2}, 3);
      const double lr = 0.01, alpha = 0.9, eps = 1e-4, wd = 0.05;
      opt::RMSprop o({p}, {.lr = lr, .alpha = alpha, .eps = eps, .weight_decay = wd, .momentum = mom,
                           .centered = centered});
      std::vector<double> sq, ga, buf;
      expect_matches_reference(o, p, [&](std::vector<double>& x, const std::vector<double>& g, int k) {
        if (k == 0) sq.assign(x.size(), 0), ga.assign(x.size(), 0), buf.assign(x.size(), 0);
        for (size_t i = 0; i < x.size(); ++i) {
          const double gi = g[i] + wd * x[i];
          sq[i] = alpha * sq[i] + (1 - alpha) * gi * gi;
          double avg = sq[i];
          if (centered) {
            ga[i] = alpha * ga[i] + (1 - alpha) * gi;
            avg -= ga[i] * ga[i];
          }
          avg = std::sqrt(avg) + eps;
          if (mom > 0) {
            buf[i] = mom * buf[i] + gi / avg;
            x[i] -= lr * buf[i];
          } else {
            x[i] -= lr * gi / avg;
          }
        }
      });
    }
}

TEST(Optimizers, AdagradMatchesReference) {
  ts::Tensor p = param({6}, 4);
  const double lr = 0.1, lr_decay = 0.05, wd = 0.02, init = 0.3, eps = 1e-8;
  opt::Adagrad o({p}, {.lr = lr, .lr_decay = lr_decay, .weight_decay = wd, .initial_accumulator_value = init, .eps = eps});
  std::vector<double> sum;
  expect_matches_reference(o, p, [&](std::vector<double>& x, const std::vector<double>& g, int k) {
    if (k == 0) sum.assign(x.size(), init);
    const double clr = lr / (1 + k * lr_decay);
    for (size_t i = 0; i < x.size(); ++i) {
      const double gi = g[i] + wd * x[i];
      sum[i] += gi * gi;
      x[i] -= clr * gi / (std::sqrt(sum[i]) + eps);
    }
  });
}

// ---- fused kernels against the composite path ---------------------------------------------------------

namespace {
using MakeFused = std::function<std::unique_ptr<opt::Optimizer>(std::vector<ts::Tensor>, bool)>;

// The same parameters (float32: one large enough to be split over threads, one transposed leaf that
// only the composite path takes) updated with fused on and off.
void expect_fused_matches_composite(const MakeFused& make) {
  auto fresh = [] {
    ts::Tensor big = test_data({70000}, ts::kFloat32, 5).requires_grad_();
    ts::Tensor small = test_data({3, 7}, ts::kFloat32, 6).requires_grad_();
    ts::Tensor strided = test_data({4, 5}, ts::kFloat32, 7).t().requires_grad_();
    return std::vector<ts::Tensor>{big, small, strided};
  };
  std::vector<ts::Tensor> a = fresh(), b = fresh(), a0;
  for (const auto& t : a) a0.push_back(t.detach().clone());
  auto oa = make(a, true), ob = make(b, false);
  for (int k = 0; k < 8; ++k) {
    for (auto* ps : {&a, &b})
      for (auto& p : *ps) set_grad(p, k);
    oa->step();
    ob->step();
  }
  for (size_t j = 0; j < a.size(); ++j) {
    EXPECT_FALSE(ts::equal(a[j].detach(), a0[j])) << "parameter " << j << " did not move";
    EXPECT_TRUE(all_close(a[j].detach(), b[j].detach(), {2e-6, 1e-6})) << "parameter " << j;
  }
}
}  // namespace

TEST(Optimizers, FusedKernelsMatchCompositePath) {
  expect_fused_matches_composite([](std::vector<ts::Tensor> p, bool f) {
    return std::make_unique<opt::SGD>(p, opt::SGDOptions{.lr = 0.05, .momentum = 0.9, .weight_decay = 0.01,
                                                         .nesterov = true, .fused = f});
  });
  expect_fused_matches_composite([](std::vector<ts::Tensor> p, bool f) {
    return std::make_unique<opt::SGD>(p, opt::SGDOptions{.lr = 0.05, .maximize = true, .fused = f});
  });
  expect_fused_matches_composite([](std::vector<ts::Tensor> p, bool f) {
    return std::make_unique<opt::Adam>(p, opt::AdamOptions{.lr = 0.01, .weight_decay = 0.1, .amsgrad = true, .fused = f});
  });
  expect_fused_matches_composite([](std::vector<ts::Tensor> p, bool f) {
    return std::make_unique<opt::AdamW>(p, opt::AdamWOptions{.lr = 0.01, .maximize = true, .fused = f});
  });
}

TEST(Optimizers, UpdatesParametersInPlace) {
  ts::Tensor p = param({2, 3}, 8, ts::kFloat32);
  ts::Tensor alias = p;                 // another handle
  ts::Tensor row = p.detach().select(0, 1);  // a view of the storage
  void* data = p.data_ptr();
  const uint64_t version = p.version();
  opt::Adam o({p}, {.lr = 0.1});
  set_grad(p, 0);
  o.step();
  EXPECT_EQ(p.data_ptr(), data);
  EXPECT_GT(p.version(), version);
  EXPECT_TRUE(alias.is_same(p));
  EXPECT_TRUE(ts::equal(row, p.detach().select(0, 1)));
  EXPECT_TRUE(p.requires_grad());
  EXPECT_TRUE(p.is_leaf());
}

TEST(Optimizers, Float16ParametersTakeTheCompositePath) {
  ts::Tensor h = test_data({9}, ts::kFloat16, 9).requires_grad_();
  ts::Tensor f = h.detach().to(ts::kFloat32, true).requires_grad_();
  opt::SGD oh({h}, {.lr = 0.1, .momentum = 0.9});
  opt::SGD of({f}, {.lr = 0.1, .momentum = 0.9});
  for (int k = 0; k < 3; ++k) {
    set_grad(h, k);
    set_grad(f, k);
    oh.step();
    of.step();
  }
  EXPECT_TRUE(all_close(h.detach(), f.detach(), {1e-2, 1e-2}));
}

// ---- groups, zero_grad, skipping ----------------------------------------------------------------------

TEST(Optimizers, ParamGroupsHaveTheirOwnOptions) {
  ts::Tensor a = ts::zeros({3}).requires_grad_(), b = ts::zeros({2}).requires_grad_();
  opt::SGD o({{{a}, {.lr = 0.1}}, {{b}, {.lr = 0.01, .momentum = 0.5}}});
  ASSERT_EQ(o.num_param_groups(), 2u);
  a.set_grad(ts::ones({3}));
  b.set_grad(ts::ones({2}));
  o.step();
  o.step();
  // a: plain SGD, 2 * 0.1; b: momentum buffer 1 then 1.5, 0.01 * 2.5.
  EXPECT_TRUE(all_close(a.detach(), ts::full({3}, -0.2f)));
  EXPECT_TRUE(all_close(b.detach(), ts::full({2}, -0.025f)));
  EXPECT_EQ(o.options(1).momentum, 0.5);
  EXPECT_EQ(o.lr(0), 0.1);
  o.set_lr(1, 0.5);
  EXPECT_EQ(o.options(1).lr, 0.5);
  EXPECT_EQ(o.get_option(1, "momentum"), 0.5);
  EXPECT_TRUE(o.has_option("nesterov"));
  EXPECT_FALSE(o.has_option("betas"));
  EXPECT_THROW(o.get_option(0, "betas"), ts::ValueError);
  EXPECT_THROW(o.params(2), ts::IndexError);
}

TEST(Optimizers, AddParamGroup) {
  ts::Tensor a = ts::zeros({3}).requires_grad_(), b = ts::zeros({2}).requires_grad_(), c = ts::zeros({1}).requires_grad_();
  opt::Adam o({a}, {.lr = 0.1, .betas = {0.5, 0.9}});
  o.add_param_group({b});                                  // the defaults
  o.add_param_group({{c}, {.lr = 0.2, .amsgrad = true}});  // its own options
  ASSERT_EQ(o.num_param_groups(), 3u);
  EXPECT_EQ(o.options(1).betas[0], 0.5);
  EXPECT_EQ(o.options(2).lr, 0.2);
  EXPECT_EQ(o.get_option(2, "betas", 1), 0.999);
  EXPECT_EQ(o.parameters().size(), 3u);
  EXPECT_THROW(o.add_param_group({a}), ts::ValueError);
  EXPECT_THROW(o.add_param_group({{ts::zeros({1}).requires_grad_()}, {.lr = -1}}), ts::ValueError);
  EXPECT_EQ(o.num_param_groups(), 3u);
}

TEST(Optimizers, ZeroGrad) {
  ts::Tensor a = ts::zeros({3}).requires_grad_(), b = ts::zeros({2}).requires_grad_();
  opt::SGD o({a, b}, {.lr = 0.1});
  a.set_grad(ts::ones({3}));
  b.set_grad(ts::ones({2}));
  o.zero_grad(/*set_to_none=*/false);
  ASSERT_TRUE(a.grad().defined());
  EXPECT_TRUE(ts::equal(a.grad(), ts::zeros({3})));
  o.zero_grad();
  EXPECT_FALSE(a.grad().defined());
  EXPECT_FALSE(b.grad().defined());
  o.step();  // no gradients: nothing moves
  EXPECT_TRUE(ts::equal(a.detach(), ts::zeros({3})));
}

TEST(Optimizers, ParametersWithoutGradientsAreSkipped) {
  ts::Tensor a = param({3}, 10), b = param({3}, 11);
  ts::Tensor frozen = test_data({2}, ts::kFloat64, 12);  // does not require grad
  const ts::Tensor b0 = b.detach().clone(), f0 = frozen.clone();
  opt::Adam o({a, b, frozen}, {.lr = 0.1});
  set_grad(a, 0);
  o.step();
  EXPECT_TRUE(ts::equal(b.detach(), b0));
  EXPECT_TRUE(ts::equal(frozen, f0));
  EXPECT_TRUE(o.state(a)->initialized);
  EXPECT_FALSE(o.state(b)->initialized);
  EXPECT_EQ(o.state(ts::zeros({1})), nullptr);
  opt::OptimizerStateDict sd = o.state_dict();
  EXPECT_EQ(sd.state.count("state.0.exp_avg"), 1u);
  EXPECT_EQ(sd.state.count("state.1.exp_avg"), 0u);
}

TEST(Optimizers, StepWithClosure) {
  ts::Tensor p = ts::ones({2}, ts::kFloat64).requires_grad_();
  opt::SGD o({p}, {.lr = 0.5});
  int calls = 0;
  ts::Tensor loss = o.step([&] {
    ++calls;
    EXPECT_TRUE(ts::is_grad_enabled());
    p.set_grad(ts::full({2}, 2.0, ts::kFloat64));
    return ts::scalar_tensor(7.0, ts::kFloat64);
  });
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(loss.item<double>(), 7.0);
  EXPECT_TRUE(ts::equal(p.detach(), ts::zeros({2}, ts::kFloat64)));
}
