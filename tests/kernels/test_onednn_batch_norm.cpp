// oneDNN's batch normalization against the native CPU kernels and the float64 reference
// (kernels/cpu/onednn/batch_norm.cpp; tests/nn/batch_norm_ref.h): the training forward (y, the saved
// mean and invstd, PyTorch's running-stat update with the unbiased variance and the momentum), the
// inference forward, and the backward in training and eval, float32 and bfloat16, on 2-D to 5-D
// inputs, row-major and channels-last, odd channel counts, with and without weight, bias and running
// statistics, and with results not wanted. Each comparison checks how many calls oneDNN took, so that
// the agreement cannot come from the native kernel twice, and that the calls it does not take (a batch
// of one value per channel) went native. In a build without oneDNN the
// tests skip.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "common/test_util.h"
#include "kernels/onednn_compare.h"
#include "nn/batch_norm_ref.h"
#include "ops/batch_norm_ops.h"
#include "tessera/tessera.h"

namespace ts = tessera;
using namespace onednn_compare;
using batch_norm_ref::f64;
using ts::Tensor;

namespace {

struct Case {
  ts::Shape sizes;
  bool channels_last;
};
std::vector<Case> cases() {
  return {{{6, 5}, false},          {{4, 3, 5}, false},      {{2, 3, 4, 5}, false},  {{2, 3, 4, 5}, true},
          {{3, 20, 2, 3}, true},    {{2, 32, 3, 4}, false},  {{2, 32, 3, 4}, true},  {{2, 3, 2, 3, 2}, false},
          {{3, 7, 9, 11}, true},    {{5, 16, 1, 1}, true}};
}

std::string name(const Case& k, ts::DType dt) {
  return std::string(ts::dtype_name(dt)) + " " + ::testing::PrintToString(k.sizes) +
         (k.channels_last ? " channels-last" : "");
}

Tensor make_x(const Case& k, ts::DType dt, uint64_t seed, double offset = 0) {
  Tensor x = (ts::testing::test_data(k.sizes, ts::kFloat64, seed) * 2.0 + offset).to(dt);
  return k.channels_last ? x.contiguous(ts::MemoryFormat::ChannelsLast) : x;
}

bool is_cl(const Tensor& t) { return t.is_contiguous(ts::MemoryFormat::ChannelsLast) && !t.is_contiguous(); }

// Against float64: y in the input's dtype, the statistics in float32 (accumulated in float32 by
// oneDNN, in float64 natively).
ts::testing::Tolerance value_tol(ts::DType dt) {
  return dt == ts::kBFloat16 ? ts::testing::Tolerance{1.6e-2, 1e-2} : ts::testing::Tolerance{1e-5, 2e-5};
}
const ts::testing::Tolerance kStatTol{1e-5, 1e-5};

TEST(OnednnBatchNorm, TrainingForwardAndRunningStatsAgree) {
  if (!ts::cpu::onednn_built()) GTEST_SKIP() << "built without oneDNN";
  ScopedEverywhere all(true);
  for (ts::DType dt : {ts::kFloat32, ts::kBFloat16})
    for (const Case& k : cases())
      for (bool affine : {true, false})
        for (bool stats : {true, false}) {
          const double momentum = affine ? 0.1 : 0.3, eps = stats ? 1e-5 : 1e-3;
          SCOPED_TRACE(name(k, dt) + (affine ? " affine" : "") + (stats ? " running" : ""));
          const int64_t c = k.sizes[1];
          // An offset mean where float32 allows it: the two-pass variance is what keeps it exact.
          const Tensor x = make_x(k, dt, 3, dt == ts::kFloat32 ? 20.0 : 0.0);
          const Tensor w = affine ? ts::testing::test_data({c}, ts::kFloat32, 5) : Tensor();
          const Tensor b = affine ? ts::testing::test_data({c}, ts::kFloat32, 6) : Tensor();
          const Tensor rm0 = ts::testing::test_data({c}, ts::kFloat32, 7);
          const Tensor rv0 = ts::testing::test_data({c}, ts::kFloat32, 8).abs() + 0.5;
          Both both = run_both([&] {
            Tensor rm = stats ? rm0.clone() : Tensor(), rv = stats ? rv0.clone() : Tensor();
            auto [y, sm, si] = ts::native_batch_norm(x, w, b, rm, rv, true, momentum, eps);
            std::vector<Tensor> r{y, sm, si};
            if (stats) r.insert(r.end(), {rm, rv});
            return r;
          });
          EXPECT_EQ(both.taken, 1);
          EXPECT_EQ(is_cl(both.on[0]), is_cl(both.off[0]));
          EXPECT_TRUE(agree(both.on[0], both.off[0], tol_for(dt))) << "y";
          const char* what[] = {"y", "save_mean", "save_invstd", "running_mean", "running_var"};
          for (size_t i = 1; i < both.on.size(); ++i) EXPECT_TRUE(agree(both.on[i], both.off[i], 2e-6)) << what[i];
          const batch_norm_ref::Ref r =
              batch_norm_ref::reference(x, w, b, stats ? rm0 : Tensor(), stats ? rv0 : Tensor(), true, momentum, eps);
          EXPECT_TRUE(ts::testing::all_close(both.on[0], f64(r.y, x.sizes()), value_tol(dt))) << "y against float64";
          EXPECT_TRUE(ts::testing::all_close(both.on[1], f64(r.mean, {c}), kStatTol));
          EXPECT_TRUE(ts::testing::all_close(both.on[2], f64(r.invstd, {c}), kStatTol));
          if (stats) {
            EXPECT_TRUE(ts::testing::all_close(both.on[3], f64(r.rm, {c}), kStatTol)) << "running_mean";
            EXPECT_TRUE(ts::testing::all_close(both.on[4], f64(r.rv, {c}), kStatTol)) << "running_var (unbiased)";
          }
        }
}

TEST(OnednnBatchNorm, InferenceForwardAgrees) {
  if (!ts::cpu::onednn_built()) GTEST_SKIP() << "built without oneDNN";
  ScopedEverywhere all(true);
  for (ts::DType dt : {ts::kFloat32, ts::kBFloat16})
    for (const Case& k : cases())
      for (bool affine : {true, false}) {
        SCOPED_TRACE(name(k, dt) + (affine ? " affine" : ""));
        const int64_t c = k.sizes[1];
        const Tensor x = make_x(k, dt, 4);
        const Tensor w = affine ? ts::testing::test_data({c}, ts::kFloat32, 5) : Tensor();
        const Tensor b = affine ? ts::testing::test_data({c}, ts::kFloat32, 6) : Tensor();
        const Tensor rm = ts::testing::test_data({c}, ts::kFloat32, 7);
        const Tensor rv = ts::testing::test_data({c}, ts::kFloat32, 8).abs() + 0.5;
        const Tensor rm0 = rm.clone(), rv0 = rv.clone();
        Both both = run_both([&] { return std::vector<Tensor>{std::get<0>(ts::native_batch_norm(x, w, b, rm, rv, false, 0.1, 1e-3))}; });
        EXPECT_EQ(both.taken, 1);
        EXPECT_EQ(is_cl(both.on[0]), is_cl(both.off[0]));
        EXPECT_TRUE(agree(both.on[0], both.off[0], tol_for(dt)));
        const batch_norm_ref::Ref r = batch_norm_ref::reference(x, w, b, rm, rv, false, 0.1, 1e-3);
        EXPECT_TRUE(ts::testing::all_close(both.on[0], f64(r.y, x.sizes()), value_tol(dt)));
        EXPECT_TRUE(ts::equal(rm, rm0));  // evaluation leaves the statistics alone
        EXPECT_TRUE(ts::equal(rv, rv0));
      }
}

TEST(OnednnBatchNorm, BackwardAgreesInTrainingAndEval) {
  if (!ts::cpu::onednn_built()) GTEST_SKIP() << "built without oneDNN";
  ScopedEverywhere all(true);
  for (ts::DType dt : {ts::kFloat32, ts::kBFloat16})
    for (const Case& k : cases())
      for (bool training : {true, false})
        for (bool affine : {true, false}) {
          SCOPED_TRACE(name(k, dt) + (training ? " training" : " eval") + (affine ? " affine" : ""));
          const int64_t c = k.sizes[1];
          const double eps = 1e-5;
          const Tensor x = make_x(k, dt, 9);
          const Tensor g = ts::testing::test_data(k.sizes, dt, 10);  // row-major while x may be channels-last
          const Tensor w = affine ? ts::testing::test_data({c}, ts::kFloat32, 5) : Tensor();
          const Tensor rm = ts::testing::test_data({c}, ts::kFloat32, 7);
          const Tensor rv = ts::testing::test_data({c}, ts::kFloat32, 8).abs() + 0.5;
          // The saved statistics of a training forward (native: the same inputs on both sides).
          Tensor sm, si;
          {
            ScopedOnednn off(false);
            auto fw = ts::native_batch_norm(x, w, Tensor(), rm.clone(), rv.clone(), true, 0.1, eps);
            sm = std::get<1>(fw);
            si = std::get<2>(fw);
          }
          Both both = run_both([&] {
            auto [dx, dw, db] =
                ts::native_batch_norm_backward(g, x, w, rm, rv, sm, si, training, eps, {true, true, true}, Tensor());
            return std::vector<Tensor>{dx, dw, db};
          });
          EXPECT_EQ(both.taken, 1);
          EXPECT_EQ(is_cl(both.on[0]), is_cl(both.off[0]));
          const char* what[] = {"dx", "dweight", "dbias"};
          for (int i = 0; i < 3; ++i) EXPECT_TRUE(agree(both.on[i], both.off[i], tol_for(dt))) << what[i];
          const batch_norm_ref::Ref r = batch_norm_ref::reference(x, w, Tensor(), rm, rv, training, 0.1, eps, g);
          EXPECT_TRUE(ts::testing::all_close(both.on[0], f64(r.dx, x.sizes()), value_tol(dt))) << "dx against float64";
          const ts::testing::Tolerance sum_tol =
              dt == ts::kBFloat16 ? ts::testing::Tolerance{1e-2, 1e-2} : ts::testing::Tolerance{1e-5, 1e-4};
          EXPECT_TRUE(ts::testing::all_close(both.on[1], f64(r.dw, {c}), sum_tol)) << "dweight against float64";
          EXPECT_TRUE(ts::testing::all_close(both.on[2], f64(r.db, {c}), sum_tol)) << "dbias against float64";
        }
}

// Results not wanted are computed aside: oneDNN runs whatever the mask, and a wanted result is the
// same bits as with every result wanted.
TEST(OnednnBatchNorm, BackwardWithResultsNotWanted) {
  if (!ts::cpu::onednn_built()) GTEST_SKIP() << "built without oneDNN";
  ScopedEverywhere all(true);
  const Case k{{4, 16, 5, 3}, true};
  const Tensor x = make_x(k, ts::kFloat32, 11), g = make_x(k, ts::kFloat32, 12);
  const Tensor w = ts::testing::test_data({16}, ts::kFloat32, 13);
  auto [y, sm, si] = ts::native_batch_norm(x, w, Tensor(), Tensor(), Tensor(), true, 0.1, 1e-5);
  for (std::array<bool, 3> mask : {std::array<bool, 3>{false, true, true}, std::array<bool, 3>{true, false, false},
                                   std::array<bool, 3>{true, true, false}, std::array<bool, 3>{true, false, true}}) {
    SCOPED_TRACE(::testing::PrintToString(mask));
    Both both = run_both([&] {
      auto [dx, dw, db] = ts::native_batch_norm_backward(g, x, w, Tensor(), Tensor(), sm, si, true, 1e-5, mask, Tensor());
      return std::vector<Tensor>{dx, dw, db};
    });
    EXPECT_EQ(both.taken, 1);
    ScopedOnednn on(true);
    auto [dx, dw, db] = ts::native_batch_norm_backward(g, x, w, Tensor(), Tensor(), sm, si, true, 1e-5,
                                                       {true, true, true}, Tensor());
    const std::vector<Tensor> all_wanted{dx, dw, db};
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(both.on[i].defined(), mask[i]);
      if (mask[i]) {
        EXPECT_TRUE(agree(both.on[i], both.off[i], 2e-5)) << "result " << i;
        EXPECT_TRUE(ts::equal(both.on[i], all_wanted[i])) << "result " << i;
      }
    }
  }
}

// One value per channel: the batch variance is 0 and the unbiased one 0 / 0, NaN by PyTorch's rule,
// which the native kernel computes; oneDNN declines.
TEST(OnednnBatchNorm, OneValuePerChannelStaysNative) {
  if (!ts::cpu::onednn_built()) GTEST_SKIP() << "built without oneDNN";
  ScopedEverywhere all(true);
  const Tensor x = ts::testing::test_data({1, 4}, ts::kFloat32, 14);
  Both both = run_both([&] {
    Tensor rm = ts::zeros({4}), rv = ts::ones({4});
    auto [y, sm, si] = ts::native_batch_norm(x, Tensor(), Tensor(), rm, rv, true, 0.1, 1e-5);
    return std::vector<Tensor>{y, sm, si, rm, rv};
  });
  EXPECT_EQ(both.taken, 0);
  for (size_t i = 0; i < both.on.size(); ++i) EXPECT_TRUE(ts::testing::all_close(both.on[i], both.off[i], {0, 0}));
  EXPECT_TRUE(std::isnan(both.on[4].select(0, 0).item<double>()));
}

// Through the module in training and eval, as a model uses it: the same outputs, gradients and running
// statistics with oneDNN on and off.
TEST(OnednnBatchNorm, ModuleStepsAgree) {
  if (!ts::cpu::onednn_built()) GTEST_SKIP() << "built without oneDNN";
  ScopedEverywhere all(true);
  const Tensor x0 = make_x({{4, 16, 6, 6}, true}, ts::kFloat32, 15), probe = make_x({{4, 16, 6, 6}, true}, ts::kFloat32, 16);
  Both both = run_both([&] {
    ts::nn::BatchNorm2d bn(16);
    std::vector<Tensor> r;
    for (int step = 0; step < 3; ++step) {
      Tensor x = x0.detach().requires_grad_();
      Tensor y = bn.forward(x * double(step + 1));
      std::vector<Tensor> g = ts::autograd::grad({ts::mul(y, probe).sum()}, {x});
      r.insert(r.end(), {y.detach(), g[0]});
    }
    bn.eval();
    r.push_back(bn.forward(x0));
    for (const auto& [n, b] : bn.named_buffers()) r.push_back(b.clone());
    return r;
  });
  EXPECT_EQ(both.taken, 3 * 2 + 1);
  for (size_t i = 0; i < both.on.size(); ++i) EXPECT_TRUE(agree(both.on[i], both.off[i], 1e-4)) << "result " << i;
}

// The shipped rule (Note [oneDNN where it wins]): every training forward; the inference and the
// training backward except float32 channels-last below 2^22 elements; never the eval backward.
TEST(OnednnBatchNorm, TheRuleTakesTheClassesWhereOnednnMeasuredFaster) {
  if (!ts::cpu::onednn_built()) GTEST_SKIP() << "built without oneDNN";
  ScopedEverywhere rule(false);
  ScopedOnednn on(true);
  const auto& taken = calls_taken_by;
  const std::vector<Case> shapes = {{{4, 16, 6, 6}, false}, {{4, 16, 6, 6}, true}, {{16, 64, 64, 64}, true},
                                    {{32, 24}, false}};
  for (ts::DType dt : {ts::kFloat32, ts::kBFloat16})
    for (const Case& k : shapes) {
      SCOPED_TRACE(name(k, dt));
      const int64_t c = k.sizes[1];
      const Tensor x = make_x(k, dt, 16), g = make_x(k, dt, 17);
      const Tensor w = ts::testing::test_data({c}, ts::kFloat32, 18), rm = ts::zeros({c}), rv = ts::ones({c});
      const bool small_f32_cl = dt == ts::kFloat32 && k.channels_last && x.numel() < (int64_t(1) << 22);
      Tensor sm, si;
      EXPECT_EQ(taken([&] { std::tie(std::ignore, sm, si) = ts::native_batch_norm(x, w, Tensor(), rm, rv, true, 0.1, 1e-5); }), 1);
      EXPECT_EQ(taken([&] { ts::native_batch_norm(x, w, Tensor(), rm, rv, false, 0.1, 1e-5); }), small_f32_cl ? 0 : 1);
      EXPECT_EQ(taken([&] {
                  ts::native_batch_norm_backward(g, x, w, rm, rv, sm, si, true, 1e-5, {true, true, true}, Tensor());
                }),
                small_f32_cl ? 0 : 1);
      EXPECT_EQ(taken([&] {
                  ts::native_batch_norm_backward(g, x, w, rm, rv, sm, si, false, 1e-5, {true, true, true}, Tensor());
                }),
                0);
    }
}

// The op's errors are raised before any kernel runs: the same with oneDNN on.
TEST(OnednnBatchNorm, ErrorsAreUnchanged) {
  if (!ts::cpu::onednn_built()) GTEST_SKIP() << "built without oneDNN";
  ScopedEverywhere all(true);
  const Tensor x = ts::ones({2, 3, 4, 4});
  auto messages = [&] {
    return std::vector<std::string>{
        ts::testing::message_of<ts::ShapeError>(
            [&] { ts::native_batch_norm(x, ts::ones({4}), Tensor(), Tensor(), Tensor(), true, 0.1, 1e-5); }),
        ts::testing::message_of<ts::DTypeError>(
            [&] { ts::native_batch_norm(x.to(ts::kBFloat16), ts::ones({3}, ts::kBFloat16), Tensor(), Tensor(), Tensor(), true, 0.1, 1e-5); }),
        ts::testing::message_of<ts::ValueError>(
            [&] { ts::native_batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), false, 0.1, 1e-5); }),
        ts::testing::message_of<ts::ValueError>(
            [&] { ts::native_batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), true, 0.1, -1.0); }),
    };
  };
  expect_same_errors_either_way(messages);
}

}  // namespace
