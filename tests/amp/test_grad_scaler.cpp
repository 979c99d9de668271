// GradScaler on the CPU, after PyTorch's test_cuda.py scaling tests: an inf put into any one gradient
// skips exactly that step and backs the scale off; growth after growth_interval clean steps; a
// scaled autocast run agrees with an unscaled float32 control; a disabled scaler is a no-op;
// unscale_ then gradient clipping; state_dict round trip; errors. Also the two fused ops themselves
// (_amp_foreach_non_finite_check_and_unscale_, _amp_update_scale_).
#include <cmath>
#include <limits>

#include "common/test_util.h"
#include "ops/amp_ops.h"
#include "tessera/amp.h"

namespace ts = tessera;
namespace F = tessera::nn::functional;
using namespace tessera::testing;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// A small MLP as a list of float32 leaves: (8 -> 16 -> 4).
struct Mlp {
  std::vector<ts::Tensor> p;
  explicit Mlp(uint64_t seed = 1) {
    p = {test_data({16, 8}, ts::kFloat32, seed) * 0.3, test_data({16}, ts::kFloat32, seed + 1) * 0.1,
         test_data({4, 16}, ts::kFloat32, seed + 2) * 0.3, test_data({4}, ts::kFloat32, seed + 3) * 0.1};
    for (auto& t : p) t = t.detach().requires_grad_();
  }
  Mlp(const Mlp& o) {
    for (const auto& t : o.p) p.push_back(t.detach().clone().requires_grad_());
  }
  ts::Tensor forward(const ts::Tensor& x) const {
    return ts::linear(ts::relu(ts::linear(x, p[0], p[1])), p[2], p[3]);
  }
};

ts::Tensor batch_x(int i) { return test_data({6, 8}, ts::kFloat32, 100 + i); }
ts::Tensor batch_y(int i) { return test_data({6, 4}, ts::kFloat32, 200 + i); }

// PyTorch's _run_scaling_case: `iters` steps with a scaler; at `skip_iter` an inf goes into
// gradient `bad_param` before step(). The control runs without a scaler and skips that iteration.
void run_skip_case(int bad_param, int skip_iter, bool explicit_unscale) {
  Mlp scaled_model, control(scaled_model);
  ts::optim::SGD opt_s(scaled_model.p, {.lr = 0.05, .momentum = 0.9});
  ts::optim::SGD opt_c(control.p, {.lr = 0.05, .momentum = 0.9});
  ts::amp::GradScaler scaler({.init_scale = 128.0, .growth_factor = 2.0, .backoff_factor = 0.5,
                              .growth_interval = 1000});
  const int iters = 5;
  for (int i = 0; i < iters; ++i) {
    opt_s.zero_grad();
    ts::Tensor loss = F::mse_loss(scaled_model.forward(batch_x(i)), batch_y(i));
    scaler.scale(loss).backward();
    if (i == skip_iter) {
      ts::NoGradGuard ng;
      scaled_model.p[bad_param].grad().narrow(0, 0, 1).fill_(kInf);
    }
    if (explicit_unscale) scaler.unscale_(opt_s);
    const std::vector<ts::Tensor> before = [&] {
      std::vector<ts::Tensor> v;
      for (auto& t : scaled_model.p) v.push_back(t.detach().clone());
      return v;
    }();
    const bool stepped = scaler.step(opt_s);
    EXPECT_EQ(stepped, i != skip_iter) << "iteration " << i;
    if (i == skip_iter) {
      for (size_t j = 0; j < before.size(); ++j) EXPECT_TRUE(ts::equal(before[j], scaled_model.p[j].detach()));
    }
    scaler.update();
    const double expected_scale = i >= skip_iter ? 64.0 : 128.0;
    EXPECT_EQ(scaler.get_scale(), expected_scale) << "iteration " << i;

    if (i != skip_iter) {
      opt_c.zero_grad();
      F::mse_loss(control.forward(batch_x(i)), batch_y(i)).backward();
      opt_c.step();
    }
  }
  for (size_t j = 0; j < control.p.size(); ++j)
    EXPECT_TRUE(all_close(scaled_model.p[j], control.p[j], {1e-5, 1e-6})) << "param " << j;
}

TEST(GradScaler, ScaleMultipliesByScale) {
  ts::amp::GradScaler scaler;
  EXPECT_EQ(scaler.get_scale(), 65536.0);
  ts::Tensor loss = ts::full({}, 0.5, ts::kBFloat16);
  ts::Tensor s = scaler.scale(loss);
  EXPECT_EQ(s.dtype(), ts::kFloat32);  // a 16-bit loss is scaled in float32, as PyTorch
  EXPECT_EQ(s.item<double>(), 32768.0);
  EXPECT_EQ(scaler.scale_tensor().dtype(), ts::kFloat32);
  EXPECT_EQ(scaler.scale_tensor().dim(), 0);
  std::vector<ts::Tensor> two = scaler.scale(std::vector<ts::Tensor>{loss, loss * 2});
  EXPECT_EQ(two[1].item<double>(), 65536.0);
}

TEST(GradScaler, InfInAnyOneGradientSkipsThatStep) {
  for (int bad = 0; bad < 4; ++bad) {
    SCOPED_TRACE(bad);
    run_skip_case(bad, /*skip_iter=*/2, /*explicit_unscale=*/false);
  }
}

TEST(GradScaler, InfSkipWithExplicitUnscale) {
  run_skip_case(1, /*skip_iter=*/0, /*explicit_unscale=*/true);
  run_skip_case(3, /*skip_iter=*/4, /*explicit_unscale=*/true);
}

TEST(GradScaler, NaNSkipsToo) {
  Mlp m;
  ts::optim::SGD opt(m.p, {.lr = 0.1});
  ts::amp::GradScaler scaler({.init_scale = 4.0});
  scaler.scale(F::mse_loss(m.forward(batch_x(0)), batch_y(0))).backward();
  {
    ts::NoGradGuard ng;
    m.p[2].grad().view({-1}).narrow(0, 5, 1).fill_(std::nan(""));
  }
  EXPECT_FALSE(scaler.step(opt));
  scaler.update();
  EXPECT_EQ(scaler.get_scale(), 2.0);
}

TEST(GradScaler, GrowthAfterInterval) {
  Mlp m;
  ts::optim::SGD opt(m.p, {.lr = 0.01});
  ts::amp::GradScaler scaler({.init_scale = 8.0, .growth_factor = 2.0, .backoff_factor = 0.5, .growth_interval = 3});
  const double expected[] = {8, 8, 16, 16, 16, 32, 32};
  for (int i = 0; i < 7; ++i) {
    opt.zero_grad();
    scaler.scale(F::mse_loss(m.forward(batch_x(i)), batch_y(i))).backward();
    EXPECT_TRUE(scaler.step(opt));
    scaler.update();
    EXPECT_EQ(scaler.get_scale(), expected[i]) << "iteration " << i;
    EXPECT_EQ(scaler.state_dict().at("_growth_tracker"), (i + 1) % 3) << "iteration " << i;
  }
}

TEST(GradScaler, GrowthStopsAtFloat32Max) {
  ts::Tensor scale = ts::full({}, 3e38, ts::kFloat32);
  ts::Tensor tracker = ts::zeros({}, ts::kInt32);
  ts::Tensor found = ts::zeros({}, ts::kFloat32);
  ts::_amp_update_scale_(scale, tracker, found, 2.0, 0.5, 1);
  EXPECT_EQ(scale.item<float>(), 3e38f);  // the grown value is not finite: kept
  EXPECT_EQ(tracker.item<int>(), 0);
}

TEST(GradScaler, NewScale) {
  Mlp m;
  ts::optim::SGD opt(m.p, {.lr = 0.01});
  ts::amp::GradScaler scaler;
  scaler.scale(F::mse_loss(m.forward(batch_x(0)), batch_y(0))).backward();
  scaler.step(opt);
  scaler.update(1024.0);
  EXPECT_EQ(scaler.get_scale(), 1024.0);
}

// PyTorch's test_grad_scaling_autocast: autocast + scaler in a low precision and an unscaled float32
// control agree. float16 on the CPU when its matmul runs, bfloat16 as well.
void run_autocast_vs_control(ts::DType low) {
  Mlp m, control(m);
  ts::optim::SGD opt(m.p, {.lr = 0.05});
  ts::optim::SGD opt_c(control.p, {.lr = 0.05});
  ts::amp::GradScaler scaler({.init_scale = 1024.0});
  for (int i = 0; i < 4; ++i) {
    opt.zero_grad();
    ts::Tensor loss;
    {
      ts::amp::autocast guard("cpu", low);
      ts::Tensor out = m.forward(batch_x(i));
      EXPECT_EQ(out.dtype(), low);
      loss = F::mse_loss(out, batch_y(i));
      EXPECT_EQ(loss.dtype(), ts::kFloat32);
    }
    scaler.scale(loss).backward();
    for (auto& p : m.p) EXPECT_EQ(p.grad().dtype(), ts::kFloat32);
    EXPECT_TRUE(scaler.step(opt));
    scaler.update();

    opt_c.zero_grad();
    F::mse_loss(control.forward(batch_x(i)), batch_y(i)).backward();
    opt_c.step();
  }
  const double rtol = low == ts::kFloat16 ? 5e-3 : 3e-2;
  for (size_t j = 0; j < m.p.size(); ++j) EXPECT_TRUE(all_close(m.p[j], control.p[j], {rtol, rtol})) << "param " << j;
}

TEST(GradScaler, AutocastFloat16AgreesWithFloat32Control) { run_autocast_vs_control(ts::kFloat16); }
TEST(GradScaler, AutocastBFloat16AgreesWithFloat32Control) { run_autocast_vs_control(ts::kBFloat16); }

TEST(GradScaler, DisabledIsANoOp) {
  Mlp m, control(m);
  ts::optim::SGD opt(m.p, {.lr = 0.05});
  ts::optim::SGD opt_c(control.p, {.lr = 0.05});
  ts::amp::GradScaler scaler({.enabled = false});
  EXPECT_FALSE(scaler.is_enabled());
  for (int i = 0; i < 3; ++i) {
    opt.zero_grad();
    ts::Tensor loss = F::mse_loss(m.forward(batch_x(i)), batch_y(i));
    ts::Tensor scaled = scaler.scale(loss);
    EXPECT_TRUE(scaled.is_same(loss));
    scaled.backward();
    scaler.unscale_(opt);
    EXPECT_TRUE(scaler.step(opt));
    scaler.update();
    opt_c.zero_grad();
    F::mse_loss(control.forward(batch_x(i)), batch_y(i)).backward();
    opt_c.step();
  }
  EXPECT_EQ(scaler.get_scale(), 1.0);
  EXPECT_TRUE(scaler.state_dict().empty());
  EXPECT_NO_THROW(scaler.load_state_dict({}));
  for (size_t j = 0; j < m.p.size(); ++j) EXPECT_TRUE(ts::equal(m.p[j], control.p[j]));
  // A disabled scaler steps even with an inf gradient: it checks nothing.
  opt.zero_grad();
  scaler.scale(F::mse_loss(m.forward(batch_x(0)), batch_y(0))).backward();
  {
    ts::NoGradGuard ng;
    m.p[0].grad().fill_(kInf);
  }
  EXPECT_TRUE(scaler.step(opt));
}

TEST(GradScaler, UnscaleThenClip) {
  Mlp m, control(m);
  ts::optim::SGD opt(m.p, {.lr = 0.1});
  ts::optim::SGD opt_c(control.p, {.lr = 0.1});
  ts::amp::GradScaler scaler({.init_scale = 512.0});
  for (int i = 0; i < 3; ++i) {
    opt.zero_grad();
    scaler.scale(F::mse_loss(m.forward(batch_x(i)), batch_y(i))).backward();
    scaler.unscale_(opt);
    ts::Tensor norm = ts::nn::utils::clip_grad_norm_(m.p, 0.05);
    EXPECT_TRUE(scaler.step(opt));  // does not unscale a second time
    scaler.update();

    opt_c.zero_grad();
    F::mse_loss(control.forward(batch_x(i)), batch_y(i)).backward();
    ts::Tensor norm_c = ts::nn::utils::clip_grad_norm_(control.p, 0.05);
    EXPECT_TRUE(all_close(norm, norm_c, {1e-5, 1e-6}));
    opt_c.step();
  }
  for (size_t j = 0; j < m.p.size(); ++j) EXPECT_TRUE(all_close(m.p[j], control.p[j], {1e-5, 1e-6})) << j;
}

TEST(GradScaler, UnscaledGradientsEqualUnscaledBackward) {
  Mlp m, control(m);
  ts::optim::SGD opt(m.p, {.lr = 0.1});
  ts::amp::GradScaler scaler({.init_scale = 1 << 20});
  scaler.scale(F::mse_loss(m.forward(batch_x(0)), batch_y(0))).backward();
  scaler.unscale_(opt);
  F::mse_loss(control.forward(batch_x(0)), batch_y(0)).backward();
  for (size_t j = 0; j < m.p.size(); ++j) EXPECT_TRUE(all_close(m.p[j].grad(), control.p[j].grad(), {1e-6, 1e-7}));
}

TEST(GradScaler, TwoOptimizersOneBackoff) {
  Mlp m;
  ts::optim::SGD opt_a({m.p[0], m.p[1]}, {.lr = 0.1});
  ts::optim::SGD opt_b({m.p[2], m.p[3]}, {.lr = 0.1});
  ts::amp::GradScaler scaler({.init_scale = 16.0});
  scaler.scale(F::mse_loss(m.forward(batch_x(0)), batch_y(0))).backward();
  {
    ts::NoGradGuard ng;
    m.p[3].grad().fill_(kInf);
  }
  EXPECT_TRUE(scaler.step(opt_a));
  EXPECT_FALSE(scaler.step(opt_b));
  scaler.update();
  EXPECT_EQ(scaler.get_scale(), 8.0);
}

TEST(GradScaler, StateDictRoundTrip) {
  Mlp m;
  ts::optim::SGD opt(m.p, {.lr = 0.01});
  ts::amp::GradScaler scaler({.init_scale = 32.0, .growth_factor = 4.0, .backoff_factor = 0.25, .growth_interval = 5});
  for (int i = 0; i < 3; ++i) {
    opt.zero_grad();
    scaler.scale(F::mse_loss(m.forward(batch_x(i)), batch_y(i))).backward();
    scaler.step(opt);
    scaler.update();
  }
  auto sd = scaler.state_dict();
  EXPECT_EQ(sd.at("scale"), 32.0);
  EXPECT_EQ(sd.at("growth_factor"), 4.0);
  EXPECT_EQ(sd.at("backoff_factor"), 0.25);
  EXPECT_EQ(sd.at("growth_interval"), 5.0);
  EXPECT_EQ(sd.at("_growth_tracker"), 3.0);

  ts::amp::GradScaler fresh;
  fresh.load_state_dict(sd);
  EXPECT_EQ(fresh.state_dict(), sd);
  // Two more clean steps grow the loaded scaler's scale (tracker 3 + 2 = interval 5).
  for (int i = 0; i < 2; ++i) {
    opt.zero_grad();
    fresh.scale(F::mse_loss(m.forward(batch_x(i)), batch_y(i))).backward();
    fresh.step(opt);
    fresh.update();
  }
  EXPECT_EQ(fresh.get_scale(), 128.0);
  // Loading into a scaler that already has its scale tensor overwrites it.
  fresh.load_state_dict(sd);
  EXPECT_EQ(fresh.get_scale(), 32.0);
}

TEST(GradScaler, Errors) {
  EXPECT_THROW(ts::amp::GradScaler({.growth_factor = 1.0}), ts::ValueError);
  EXPECT_THROW(ts::amp::GradScaler({.backoff_factor = 1.0}), ts::ValueError);
  EXPECT_THROW(ts::amp::GradScaler({.growth_interval = 0}), ts::ValueError);

  Mlp m;
  ts::optim::SGD opt(m.p, {.lr = 0.01});
  ts::amp::GradScaler scaler;
  EXPECT_THROW(scaler.update(), ts::ValueError);     // no scale() yet
  EXPECT_THROW(scaler.unscale_(opt), ts::ValueError);  // no scale() yet
  ts::Tensor loss = F::mse_loss(m.forward(batch_x(0)), batch_y(0));
  ts::Tensor scaled = scaler.scale(loss);
  EXPECT_THROW(scaler.update(), ts::ValueError);  // no inf checks recorded
  EXPECT_THROW(scaler.step(opt), ts::ValueError);  // no gradients: no inf checks
  scaler.update(65536.0);  // an explicit scale needs no checks; resets the iteration
  scaler.scale(F::mse_loss(m.forward(batch_x(0)), batch_y(0))).backward();
  scaler.unscale_(opt);
  try {
    scaler.unscale_(opt);
    ADD_FAILURE() << "unscale_ twice did not raise";
  } catch (const ts::ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("unscale_() has already been called on this optimizer since the last update()"),
              std::string::npos);
  }
  scaler.step(opt);
  EXPECT_THROW(scaler.step(opt), ts::ValueError);
  EXPECT_THROW(scaler.unscale_(opt), ts::ValueError);
  scaler.update();
  EXPECT_THROW(scaler.load_state_dict({}), ts::ValueError);

  // float16 gradients are refused.
  ts::Tensor h = test_data({3}, ts::kFloat16).requires_grad_();
  ts::optim::SGD opt_h({h}, {.lr = 0.1});
  scaler.scale(h.sum()).backward();
  EXPECT_THROW(scaler.unscale_(opt_h), ts::ValueError);
}

// ---- the fused ops ------------------------------------------------------------------------------

TEST(AmpOps, NonFiniteCheckAndUnscaleManyTensors) {
  std::vector<ts::Tensor> grads, expect;
  const std::vector<int64_t> sizes = {0, 1, 7, 1000, 65537, 3, 0, 40000};
  const std::vector<ts::DType> dtypes = {ts::kFloat32, ts::kFloat64, ts::kBFloat16, ts::kFloat16};
  for (size_t i = 0; i < sizes.size(); ++i) {
    const ts::DType d = dtypes[i % dtypes.size()];
    ts::Tensor g = test_data({sizes[i]}, d, 10 + i);
    expect.push_back((g.to(ts::kFloat64) * 0.25).to(d));
    grads.push_back(g);
  }
  ts::Tensor found = ts::zeros({}, ts::kFloat32);
  ts::Tensor inv = ts::full({}, 0.25, ts::kFloat32);
  ts::_amp_foreach_non_finite_check_and_unscale_(grads, found, inv);
  EXPECT_EQ(found.item<float>(), 0.0f);
  for (size_t i = 0; i < grads.size(); ++i) EXPECT_TRUE(all_close(grads[i], expect[i], {0, 0})) << i;

  // An inf (or a NaN) in any one tensor sets found_inf; the others are still unscaled.
  for (size_t bad = 0; bad < sizes.size(); ++bad) {
    if (sizes[bad] == 0) continue;
    for (double v : {kInf, -kInf, std::nan("")}) {
      std::vector<ts::Tensor> gs;
      for (size_t i = 0; i < sizes.size(); ++i) gs.push_back(test_data({sizes[i]}, dtypes[i % 4], 10 + i));
      gs[bad].narrow(0, sizes[bad] - 1, 1).fill_(v);
      ts::Tensor f = ts::zeros({}, ts::kFloat32);
      ts::_amp_foreach_non_finite_check_and_unscale_(gs, f, inv);
      EXPECT_EQ(f.item<float>(), 1.0f) << "tensor " << bad << " value " << v;
    }
  }
}

TEST(AmpOps, UnscaleStridedAndIdentity) {
  ts::Tensor base = test_data({6, 8}, ts::kFloat32, 3);
  ts::Tensor t = base.t();  // non-contiguous
  ts::Tensor expect = base * 2;
  ts::Tensor found = ts::zeros({1}, ts::kFloat32);
  ts::_amp_foreach_non_finite_check_and_unscale_({t}, found, ts::full({1}, 2.0, ts::kFloat32));
  EXPECT_TRUE(all_close(base, expect, {0, 0}));
  // inv_scale 1 leaves the values alone (NaN payloads included) but still checks them.
  ts::Tensor g = test_data({5}, ts::kFloat32, 4);
  ts::Tensor before = g.clone();
  ts::_amp_foreach_non_finite_check_and_unscale_({g}, found, ts::ones({}, ts::kFloat32));
  EXPECT_TRUE(ts::equal(g, before));
  EXPECT_EQ(found.item<float>(), 0.0f);
  // found_inf accumulates: it is never cleared by a clean call.
  found.fill_(1.0);
  ts::_amp_foreach_non_finite_check_and_unscale_({g}, found, ts::ones({}, ts::kFloat32));
  EXPECT_EQ(found.item<float>(), 1.0f);
}

TEST(AmpOps, UpdateScale) {
  ts::Tensor scale = ts::full({}, 8.0, ts::kFloat32), tracker = ts::zeros({}, ts::kInt32);
  ts::Tensor clean = ts::zeros({}, ts::kFloat32), bad = ts::ones({}, ts::kFloat32);
  ts::_amp_update_scale_(scale, tracker, clean, 2.0, 0.5, 2);
  EXPECT_EQ(scale.item<float>(), 8.0f);
  EXPECT_EQ(tracker.item<int>(), 1);
  ts::_amp_update_scale_(scale, tracker, clean, 2.0, 0.5, 2);
  EXPECT_EQ(scale.item<float>(), 16.0f);
  EXPECT_EQ(tracker.item<int>(), 0);
  ts::_amp_update_scale_(scale, tracker, clean, 2.0, 0.5, 2);
  ts::_amp_update_scale_(scale, tracker, bad, 2.0, 0.5, 2);
  EXPECT_EQ(scale.item<float>(), 8.0f);
  EXPECT_EQ(tracker.item<int>(), 0);
}

TEST(AmpOps, Errors) {
  ts::Tensor g = test_data({4}, ts::kFloat32);
  ts::Tensor found = ts::zeros({}, ts::kFloat32), inv = ts::ones({}, ts::kFloat32);
  EXPECT_THROW(ts::_amp_foreach_non_finite_check_and_unscale_({g}, found, ts::ones({2}, ts::kFloat32)), ts::ShapeError);
  EXPECT_THROW(ts::_amp_foreach_non_finite_check_and_unscale_({g}, found, ts::ones({}, ts::kFloat64)), ts::DTypeError);
  ts::Tensor f64 = ts::zeros({}, ts::kFloat64);
  EXPECT_THROW(ts::_amp_foreach_non_finite_check_and_unscale_({g}, f64, inv), ts::DTypeError);
  EXPECT_THROW(ts::_amp_foreach_non_finite_check_and_unscale_({ts::ones({2}, ts::kInt64)}, found, inv), ts::DTypeError);
  ts::Tensor scale = ts::full({}, 8.0, ts::kFloat32), tracker_bad = ts::zeros({}, ts::kInt64);
  EXPECT_THROW(ts::_amp_update_scale_(scale, tracker_bad, found, 2.0, 0.5, 2), ts::DTypeError);
  ts::Tensor tracker = ts::zeros({}, ts::kInt32);
  EXPECT_THROW(ts::_amp_update_scale_(scale, tracker, found, 2.0, 0.5, 0), ts::ValueError);
}

}  // namespace
