// cross_entropy with class-index targets runs fused (ops/loss_ops.h): against the composite formula
// it replaced (nll_loss of log_softmax, written out below with tessera ops) in float64, for every
// reduction, class weights, ignore_index (outside and inside [0, C)), label smoothing, K-dim and
// unbatched inputs; 16-bit and float32 logits against the float64 composite; gradients by gradcheck
// and gradgradcheck (the create_graph path) and against the composite's autograd; the backward op
// directly; independence of the thread count; bad targets and shapes.
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "nn/nn_test_util.h"
#include "ops/loss_ops.h"

namespace ts = tessera;
namespace F = tessera::nn::functional;
using ts::testing::all_close;
using ts::testing::test_data;
using ts::testing::Tolerance;

namespace {

const std::vector<std::string> kReductions = {"none", "mean", "sum"};

// The composite formula: per-element (1 - ls) * w[t] * -logp[t] + (ls / C) * sum_c w[c] * -logp[c],
// 0 where ignored; 'mean' divides by the sum of w[t] over the non-ignored elements.
ts::Tensor composite(const ts::Tensor& x, const ts::Tensor& target, const std::optional<ts::Tensor>& weight,
                     int64_t ignore_index, const std::string& reduction, double ls) {
  const int64_t cdim = x.dim() == 1 ? 0 : 1;
  const int64_t c = x.size(cdim);
  ts::Shape view(static_cast<size_t>(x.dim()), 1);
  view[static_cast<size_t>(cdim)] = c;
  ts::Tensor logp = ts::log_softmax(x, cdim);
  ts::Tensor valid = target != ignore_index;
  ts::Tensor safe = ts::where(valid, target.to(ts::kInt64), ts::Scalar(int64_t(0)));
  ts::Tensor validf = valid.to(x.dtype());
  ts::Tensor picked = ts::gather(logp, cdim, safe.unsqueeze(cdim)).squeeze(cdim);
  ts::Tensor wt = weight ? weight->to(x.dtype()).index_select(0, safe.flatten()).reshape(safe.sizes()) * validf
                         : validf;
  ts::Tensor rows = -picked * wt * (1.0 - ls);
  if (ls > 0) {
    ts::Tensor wl = weight ? logp * weight->to(x.dtype()).reshape(view) : logp;
    rows = rows + (-wl.sum(cdim)) * validf * (ls / static_cast<double>(c));
  }
  if (reduction == "none") return rows;
  if (reduction == "sum") return rows.sum();
  return rows.sum() / wt.sum();
}

ts::Tensor int_target(const ts::Shape& s, int64_t c, uint64_t seed) {
  return test_data(s, ts::kInt64, seed, 0, double(c)).reshape(s);
}

// Targets with a few entries set to `ignore` (every third).
ts::Tensor with_ignored(const ts::Tensor& t, int64_t ignore) {
  ts::Tensor flat = t.flatten().clone();
  for (int64_t i = 0; i < flat.numel(); i += 3) flat[i].fill_(ignore);
  return flat.reshape(t.sizes());
}

struct Case {
  std::string name;
  ts::Shape x_shape, t_shape;
  int64_t c;
};

std::vector<Case> cases() {
  return {{"2d", {6, 5}, {6}, 5},
          {"3d", {4, 7, 3}, {4, 3}, 7},
          {"4d", {2, 3, 2, 4}, {2, 2, 4}, 3},
          {"unbatched", {9}, {}, 9},
          {"one class", {5, 1}, {5}, 1},
          {"empty batch", {0, 4}, {0}, 4}};
}

ts::Tensor leaf(const ts::Shape& s, uint64_t seed) { return test_data(s, ts::kFloat64, seed).detach().requires_grad_(); }

::testing::AssertionResult grad_ok(const std::function<ts::Tensor(const std::vector<ts::Tensor>&)>& fn,
                                   const std::vector<ts::Tensor>& inputs) {
  auto wrapped = [&](const std::vector<ts::Tensor>& in) { return std::vector<ts::Tensor>{fn(in)}; };
  std::string report;
  if (!ts::autograd::gradcheck(wrapped, inputs, {}, &report)) return ::testing::AssertionFailure() << "gradcheck: " << report;
  if (!ts::autograd::gradgradcheck(wrapped, inputs, {}, &report))
    return ::testing::AssertionFailure() << "gradgradcheck: " << report;
  return ::testing::AssertionSuccess();
}

}  // namespace

TEST(CrossEntropyFused, ForwardMatchesCompositeFloat64) {
  for (const Case& k : cases()) {
    ts::Tensor x = test_data(k.x_shape, ts::kFloat64, 1) * 3;
    ts::Tensor w = test_data({k.c}, ts::kFloat64, 2).abs() + 0.5;
    ts::Tensor t = int_target(k.t_shape, k.c, 3);
    for (int64_t ignore : {int64_t(-100), int64_t(0)}) {
      ts::Tensor ti = ignore < 0 ? with_ignored(t, ignore) : t;
      for (const std::string& r : kReductions)
        for (double ls : {0.0, 0.1, 1.0})
          for (bool weighted : {false, true}) {
            SCOPED_TRACE(k.name + " " + r + " ignore " + std::to_string(ignore) + " ls " + std::to_string(ls) +
                         (weighted ? " weighted" : ""));
            std::optional<ts::Tensor> wo = weighted ? std::optional<ts::Tensor>(w) : std::nullopt;
            ts::Tensor got = F::cross_entropy(x, ti, wo, ignore, r, ls);
            ts::Tensor want = composite(x, ti, wo, ignore, r, ls);
            EXPECT_EQ(got.dtype(), ts::kFloat64);
            EXPECT_TRUE(all_close(got, want, Tolerance{1e-12, 1e-12}));
          }
    }
  }
}

TEST(CrossEntropyFused, TargetsOfOtherIntegerDtypes) {
  ts::Tensor x = test_data({5, 4}, ts::kFloat64, 4);
  ts::Tensor t = int_target({5}, 4, 5);
  for (ts::DType dt : {ts::kInt32, ts::kUInt8, ts::kInt8})
    EXPECT_TRUE(all_close(F::cross_entropy(x, t.to(dt)), composite(x, t, std::nullopt, -100, "mean", 0.0),
                          Tolerance{1e-12, 1e-12}));
}

TEST(CrossEntropyFused, GradientMatchesComposite) {
  for (const Case& k : cases()) {
    ts::Tensor w = test_data({k.c}, ts::kFloat64, 6).abs() + 0.5;
    ts::Tensor t = int_target(k.t_shape, k.c, 7);
    if (t.numel() > 1) t = with_ignored(t, -100);  // not all: the composite's mean of nothing has NaN gradients
    for (double ls : {0.0, 0.25})
      for (bool weighted : {false, true}) {
        SCOPED_TRACE(k.name + " ls " + std::to_string(ls) + (weighted ? " weighted" : ""));
        std::optional<ts::Tensor> wo = weighted ? std::optional<ts::Tensor>(w) : std::nullopt;
        ts::Tensor g = test_data(k.t_shape, ts::kFloat64, 8).reshape(k.t_shape);
        ts::Tensor x1 = leaf(k.x_shape, 9), x2 = leaf(k.x_shape, 9);
        (F::cross_entropy(x1, t, wo, -100, "none", ls) * g).sum().backward();
        (composite(x2, t, wo, -100, "none", ls) * g).sum().backward();
        EXPECT_TRUE(all_close(x1.grad(), x2.grad(), Tolerance{1e-12, 1e-12}));
        ts::Tensor x3 = leaf(k.x_shape, 9), x4 = leaf(k.x_shape, 9);
        F::cross_entropy(x3, t, wo, -100, "mean", ls).backward();
        composite(x4, t, wo, -100, "mean", ls).backward();
        EXPECT_TRUE(all_close(x3.grad(), x4.grad(), Tolerance{1e-12, 1e-12}));
      }
  }
}

TEST(CrossEntropyFused, GradcheckAndGradgradcheck) {
  ts::Tensor w = test_data({4}, ts::kFloat64, 10).abs() + 0.5;
  ts::Tensor t = ts::tensor(std::vector<int64_t>{0, 3, -100, 1, 2});
  ts::Tensor t3 = ts::tensor(std::vector<int64_t>{0, 3, 1, -100, 2, 2}).reshape({2, 3});
  for (double ls : {0.0, 0.3})
    for (const std::string& r : kReductions) {
      SCOPED_TRACE(r + " ls " + std::to_string(ls));
      EXPECT_TRUE(grad_ok([&](const auto& in) { return F::cross_entropy(in[0], t, w, -100, r, ls); }, {leaf({5, 4}, 11)}));
      EXPECT_TRUE(grad_ok([&](const auto& in) { return F::cross_entropy(in[0], t, std::nullopt, -100, r, ls); },
                          {leaf({5, 4}, 12)}));
      EXPECT_TRUE(grad_ok([&](const auto& in) { return F::cross_entropy(in[0], t3, w, -100, r, ls); },
                          {leaf({2, 4, 3}, 13)}));
      EXPECT_TRUE(grad_ok([&](const auto& in) { return F::cross_entropy(in[0], t[1], w, -100, r, ls); }, {leaf({4}, 14)}));
    }
  // A transposed (non-contiguous) input.
  EXPECT_TRUE(grad_ok([&](const auto& in) { return F::cross_entropy(in[0].t(), t, w, -100, "mean", 0.1); },
                      {leaf({4, 5}, 15)}));
}

TEST(CrossEntropyFused, WeightThatRequiresGradTakesTheComposite) {
  ts::Tensor t = ts::tensor(std::vector<int64_t>{0, 3, 1, 2});
  ts::Tensor x = leaf({4, 4}, 16), w = (test_data({4}, ts::kFloat64, 17).abs() + 0.5).detach().requires_grad_();
  ts::Tensor loss = F::cross_entropy(x, t, w, -100, "mean", 0.2);
  EXPECT_TRUE(all_close(loss, composite(x, t, w, -100, "mean", 0.2), Tolerance{1e-12, 1e-12}));
  loss.backward();
  EXPECT_TRUE(w.grad().defined());
}

TEST(CrossEntropyFused, LowPrecisionLogits) {
  ts::Tensor x64 = test_data({7, 50}, ts::kFloat64, 18) * 4;
  ts::Tensor t = with_ignored(int_target({7}, 50, 19), -100);
  ts::Tensor w = test_data({50}, ts::kFloat64, 20).abs() + 0.5;
  ts::Tensor g = test_data({7}, ts::kFloat64, 21);
  for (ts::DType dt : {ts::kFloat16, ts::kBFloat16, ts::kFloat32}) {
    ts::Tensor x = x64.to(dt);
    ts::Tensor xr = x.to(ts::kFloat64);  // the same values, in float64
    // float32 accumulation of 50 exponentials; the 16-bit results round once at the end.
    const Tolerance tol = dt == ts::kFloat32 ? Tolerance{1e-5, 1e-5} : ts::testing::tolerance_for(dt);
    for (const std::string& r : kReductions)
      for (double ls : {0.0, 0.1}) {
        SCOPED_TRACE(std::string(ts::dtype_name(dt)) + " " + r + " ls " + std::to_string(ls));
        ts::Tensor got = F::cross_entropy(x, t, w.to(dt), -100, r, ls);
        EXPECT_EQ(got.dtype(), dt);
        EXPECT_TRUE(all_close(got, composite(xr, t, w.to(dt).to(ts::kFloat64), -100, r, ls), tol));
      }
    // The gradient, in x's dtype.
    ts::Tensor xl = x.detach().requires_grad_(), xrl = xr.detach().requires_grad_();
    (F::cross_entropy(xl, t, std::nullopt, -100, "none", 0.1).to(ts::kFloat64) * g).sum().backward();
    (composite(xrl, t, std::nullopt, -100, "none", 0.1) * g).sum().backward();
    ASSERT_TRUE(xl.grad().defined());
    EXPECT_EQ(xl.grad().dtype(), dt);
    const Tolerance gtol = dt == ts::kFloat32 ? Tolerance{1e-5, 1e-6} : Tolerance{ts::testing::tolerance_for(dt).rtol, 1e-3};
    EXPECT_TRUE(all_close(xl.grad(), xrl.grad().to(dt), gtol));
  }
}

TEST(CrossEntropyFused, LongRowsAndThreadCountIndependence) {
  ts::Tensor x = test_data({5, 50257}, ts::kFloat32, 22) * 3;
  ts::Tensor t = ts::tensor(std::vector<int64_t>{0, 50256, 17, -100, 25000});
  ts::Tensor w = test_data({50257}, ts::kFloat32, 23).abs() + 0.5;
  EXPECT_TRUE(all_close(F::cross_entropy(x, t, w, -100, "none", 0.1),
                        composite(x.to(ts::kFloat64), t, w.to(ts::kFloat64), -100, "none", 0.1).to(ts::kFloat32),
                        Tolerance{1e-5, 1e-5}));
  // Many rows (parallel): one thread and all threads give the same bits.
  ts::Tensor xb = test_data({256, 1000}, ts::kBFloat16, 24) * 3;
  ts::Tensor tb = int_target({256}, 1000, 25);
  const int threads = ts::get_num_threads();
  auto run = [&] {
    ts::Tensor xl = xb.detach().requires_grad_();
    ts::Tensor loss = F::cross_entropy(xl, tb, std::nullopt, -100, "none", 0.1);
    loss.sum().backward();
    return std::make_pair(loss, xl.grad());
  };
  ts::set_num_threads(1);
  auto one = run();
  ts::set_num_threads(std::max(threads, 2));
  auto many = run();
  ts::set_num_threads(threads);
  EXPECT_TRUE(ts::equal(one.first, many.first));
  EXPECT_TRUE(ts::equal(one.second, many.second));
}

TEST(CrossEntropyFused, ExtremeLogits) {
  const double inf = std::numeric_limits<double>::infinity();
  // Large logits stay finite; a -inf logit on another class is fine; a -inf target logit gives inf.
  ts::Tensor x = ts::tensor(std::vector<double>{1e4, 1e4 + 1, -1e4, 0, -inf, 3}).reshape({2, 3});
  ts::Tensor t = ts::tensor(std::vector<int64_t>{1, 2});
  EXPECT_TRUE(all_close(F::cross_entropy(x, t, std::nullopt, -100, "none"),
                        composite(x, t, std::nullopt, -100, "none", 0.0), Tolerance{1e-12, 1e-12}));
  ts::Tensor y = F::cross_entropy(x, ts::tensor(std::vector<int64_t>{1, 1}), std::nullopt, -100, "none");
  EXPECT_TRUE(std::isinf(y[1].item<double>()));
  // A NaN logit makes its row NaN and nothing else.
  ts::Tensor xn = ts::tensor(std::vector<double>{1, std::nan(""), 2, 1, 2, 3}).reshape({2, 3});
  ts::Tensor yn = F::cross_entropy(xn, ts::tensor(std::vector<int64_t>{0, 0}), std::nullopt, -100, "none");
  EXPECT_TRUE(std::isnan(yn[0].item<double>()));
  EXPECT_FALSE(std::isnan(yn[1].item<double>()));
}

TEST(CrossEntropyFused, Errors) {
  ts::Tensor x = test_data({6, 4}, ts::kFloat64, 26);
  try {
    F::cross_entropy(x, ts::tensor(std::vector<int64_t>{0, 1, 7, 1, -2, 1}));
    ADD_FAILURE() << "no IndexError";
  } catch (const ts::IndexError& e) {
    EXPECT_NE(std::string(e.what()).find("cross_entropy: Target 7 is out of bounds."), std::string::npos) << e.what();
  }
  EXPECT_THROW(F::cross_entropy(x, ts::tensor(std::vector<int64_t>{0, 1, -1, 1, 1, 1})), ts::IndexError);
  // ignore_index inside [0, C) or negative: those entries are not out of bounds.
  EXPECT_NO_THROW(F::cross_entropy(x, ts::tensor(std::vector<int64_t>{0, 1, -1, 1, 1, 1}), std::nullopt, -1));
  EXPECT_THROW(F::cross_entropy(x, ts::tensor(std::vector<int64_t>{0, 1, 2, 3, 4, 0}), std::nullopt, 0),
               ts::IndexError);
  // Shapes.
  EXPECT_THROW(F::cross_entropy(x, ts::zeros({6, 1}, ts::kInt64)), ts::ShapeError);
  EXPECT_THROW(F::cross_entropy(x, ts::zeros({5}, ts::kInt64)), ts::ValueError);
  EXPECT_THROW(F::cross_entropy(x.reshape({6, 2, 2}), ts::zeros({6, 3}, ts::kInt64)), ts::ShapeError);
  EXPECT_THROW(F::cross_entropy(x, ts::zeros({6}, ts::kInt64), ts::ones({5}, ts::kFloat64)), ts::ShapeError);
  EXPECT_THROW(F::cross_entropy(x, ts::zeros({6}, ts::kBool)), ts::DTypeError);
  EXPECT_THROW(F::cross_entropy(ts::zeros({6}, ts::kInt64), ts::zeros({}, ts::kInt64)), ts::DTypeError);
  // The ops directly.
  EXPECT_THROW(ts::cross_entropy_loss_rows(x, ts::zeros({4}, ts::kInt64), ts::Tensor(), -100, 0.0), ts::ShapeError);
  EXPECT_THROW(ts::cross_entropy_loss_rows(x, ts::zeros({6}, ts::kInt64), ts::Tensor(), -100, 1.5), ts::ValueError);
  EXPECT_THROW(ts::cross_entropy_loss_rows(x, ts::zeros({6}, ts::kFloat64), ts::Tensor(), -100, 0.0), ts::DTypeError);
  auto [loss, lse] = ts::cross_entropy_loss_rows(x, ts::zeros({6}, ts::kInt64), ts::Tensor(), -100, 0.0);
  EXPECT_THROW(ts::cross_entropy_loss_rows_backward(ts::ones({5}, ts::kFloat64), x, ts::zeros({6}, ts::kInt64),
                                                    ts::Tensor(), lse, -100, 0.0),
               ts::ShapeError);
  // A class count below the row length (rows padded past their classes): targets among the pad
  // columns are out of bounds; the count may not exceed the row.
  const ts::Tensor t3 = ts::tensor(std::vector<int64_t>{0, 1, 2, 3, 2, 1});
  EXPECT_NO_THROW(ts::cross_entropy_loss_rows(x, t3, ts::Tensor(), -100, 0.0));
  try {
    ts::cross_entropy_loss_rows(x, t3, ts::Tensor(), -100, 0.0, 3);
    ADD_FAILURE() << "no IndexError";
  } catch (const ts::IndexError& e) {
    EXPECT_NE(std::string(e.what()).find("cross_entropy: Target 3 is out of bounds."), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(ts::cross_entropy_loss_rows(x, t3, ts::Tensor(), 3, 0.0, 3));  // ignored
  EXPECT_THROW(ts::cross_entropy_loss_rows(x, t3, ts::Tensor(), -100, 0.0, 5), ts::ValueError);
  // The backward skips such rows (as every out-of-range target).
  auto [l3, lse3] = ts::cross_entropy_loss_rows(x, t3, ts::Tensor(), 3, 0.0, 3);
  const ts::Tensor d3 = ts::cross_entropy_loss_rows_backward(ts::ones({6}, ts::kFloat64), x, t3, ts::Tensor(), lse3,
                                                             -100, 0.0, 3);
  EXPECT_TRUE(all_close(d3.select(0, 3), ts::zeros({4}, ts::kFloat64)));
  EXPECT_FALSE(all_close(d3.select(0, 2), ts::zeros({4}, ts::kFloat64)));
}

TEST(CrossEntropyFused, OpsReturnLossAndLogsumexp) {
  ts::Tensor x = test_data({3, 5, 2}, ts::kBFloat16, 27);
  ts::Tensor t = int_target({3, 2}, 5, 28);
  auto [loss, lse] = ts::cross_entropy_loss_rows(x, t, ts::Tensor(), -100, 0.0);
  EXPECT_EQ(loss.dtype(), ts::kFloat32);
  EXPECT_EQ(lse.sizes(), ts::Shape({3, 2}));
  EXPECT_TRUE(all_close(lse, ts::logsumexp(x.to(ts::kFloat32), 1), Tolerance{1e-6, 1e-6}));
  // The backward op: (N, C, d) logits back in place, x's dtype.
  ts::Tensor dx = ts::cross_entropy_loss_rows_backward(ts::ones({3, 2}), x, t, ts::Tensor(), lse, -100, 0.0);
  EXPECT_EQ(dx.sizes(), x.sizes());
  EXPECT_EQ(dx.dtype(), ts::kBFloat16);
  ts::Tensor want = ts::softmax(x.to(ts::kFloat32), 1) - ts::one_hot(t, 5).movedim(-1, 1).to(ts::kFloat32);
  EXPECT_TRUE(all_close(dx, want.to(ts::kBFloat16), ts::testing::tolerance_for(ts::kBFloat16)));
}
