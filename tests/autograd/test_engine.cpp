// The autograd engine on the ops whose derivatives live with the engine (views, copies, fills):
// gradients, accumulation, hooks, grad(), version checks, in-place rules.
#include "common/test_util.h"

namespace ts = tessera;
using namespace tessera::testing;

namespace {
ts::Tensor leaf(const ts::Shape& s, uint64_t seed = 1) { return test_data(s, ts::kFloat64, seed).requires_grad_(); }
}  // namespace

TEST(Autograd, RequiresGradAndLeaves) {
  ts::Tensor x = leaf({2, 3});
  EXPECT_TRUE(x.requires_grad());
  EXPECT_TRUE(x.is_leaf());
  ts::Tensor y = x.t();
  EXPECT_TRUE(y.requires_grad());
  EXPECT_FALSE(y.is_leaf());
  ASSERT_NE(y.grad_fn(), nullptr);
  EXPECT_EQ(y.grad_fn()->name(), "TransposeBackward0");
  EXPECT_THROW(ts::arange(3).requires_grad_(), ts::DTypeError);
  EXPECT_FALSE(x.detach().requires_grad());
}

TEST(Autograd, ViewGradientsScatterBack) {
  ts::Tensor x = leaf({3, 4});
  ts::Tensor y = x.t().select(0, 1).slice(0, 0, 3, 2);  // x[0, 1] and x[2, 1]
  y.backward(ts::tensor(std::vector<double>{5.0, 7.0}, {2}, ts::kFloat64));
  std::vector<double> g = x.grad().tolist<double>();
  std::vector<double> want(12, 0.0);
  want[0 * 4 + 1] = 5;
  want[2 * 4 + 1] = 7;
  EXPECT_EQ(g, want);
}

TEST(Autograd, GradientsAccumulateAcrossBackwardCalls) {
  ts::Tensor x = leaf({4});
  ts::Tensor y = x.view({2, 2}).select(1, 0);
  y.backward(ts::ones({2}, ts::kFloat64), true);
  y.backward(ts::ones({2}, ts::kFloat64));
  EXPECT_EQ(x.grad().tolist<double>(), (std::vector<double>{2, 0, 2, 0}));
  x.zero_grad();
  EXPECT_FALSE(x.grad().defined());
}

TEST(Autograd, ExpandSumsBroadcastGradient) {
  ts::Tensor x = leaf({3, 1});
  ts::Tensor y = x.expand({2, 3, 4});
  y.backward(ts::ones({2, 3, 4}, ts::kFloat64));
  EXPECT_EQ(x.grad().tolist<double>(), (std::vector<double>{8, 8, 8}));
}

TEST(Autograd, ScalarRootNeedsNoGradient) {
  ts::Tensor x = leaf({3});
  ts::Tensor y = x.select(0, 2);
  y.backward();
  EXPECT_EQ(x.grad().tolist<double>(), (std::vector<double>{0, 0, 1}));
  ts::Tensor z = leaf({3}).view({3});
  EXPECT_THROW(z.backward(), ts::ValueError);  // not a scalar: gradient required
}

TEST(Autograd, BackwardTwiceWithoutRetainGraphFails) {
  ts::Tensor x = leaf({3});
  ts::Tensor y = ts::as_strided_scatter(ts::zeros({5}, ts::kFloat64), x, {3}, {1}, 1).select(0, 2);
  y.backward(ts::Tensor(), true);
  y.backward();
  ts::Tensor y2 = ts::as_strided_scatter(ts::zeros({5}, ts::kFloat64), x, {3}, {1}, 1).select(0, 2);
  y2.backward();
  EXPECT_EQ(x.grad().tolist<double>(), (std::vector<double>{0, 3, 0}));
}

TEST(Autograd, AutogradGradDoesNotTouchDotGrad) {
  ts::Tensor x = leaf({2, 2});
  ts::Tensor y = x.select(0, 1).select(0, 0);
  auto g = ts::autograd::grad({y}, {x});
  EXPECT_EQ(g[0].tolist<double>(), (std::vector<double>{0, 0, 1, 0}));
  EXPECT_FALSE(x.grad().defined());
  ts::Tensor unused = leaf({2});
  EXPECT_THROW(ts::autograd::grad({x.select(0, 0).select(0, 0)}, {unused}), ts::ValueError);
  auto g2 = ts::autograd::grad({x.select(0, 0).select(0, 0)}, {unused}, {}, std::nullopt, false, true);
  EXPECT_FALSE(g2[0].defined());
}

TEST(Autograd, HooksSeeAndReplaceGradients) {
  ts::Tensor x = leaf({3});
  ts::Tensor v = x.view({3});
  std::vector<double> seen;
  v.register_hook([&](const ts::Tensor& g) {
    seen = g.tolist<double>();
    return g.mul(2.0);
  });
  int post = 0;
  x.register_post_accumulate_grad_hook([&](const ts::Tensor& t) { post += static_cast<int>(t.grad().numel()); });
  v.select(0, 1).backward();
  EXPECT_EQ(seen, (std::vector<double>{0, 1, 0}));
  EXPECT_EQ(x.grad().tolist<double>(), (std::vector<double>{0, 2, 0}));
  EXPECT_EQ(post, 3);
}

TEST(Autograd, RetainGradOnNonLeaf) {
  ts::Tensor x = leaf({2, 2});
  ts::Tensor v = x.t();
  v.retain_grad();
  v.select(0, 0).select(0, 1).backward();
  ASSERT_TRUE(v.grad().defined());
  EXPECT_EQ(v.grad().tolist<double>(), (std::vector<double>{0, 1, 0, 0}));
}

TEST(Autograd, InPlaceOnLeafIsRefused) {
  ts::Tensor x = leaf({3});
  EXPECT_THROW(x.fill_(1), ts::ValueError);
  EXPECT_THROW(x.copy_(ts::zeros({3}, ts::kFloat64)), ts::ValueError);
  {
    ts::NoGradGuard g;
    EXPECT_NO_THROW(x.fill_(1));  // allowed under no_grad, as in PyTorch (optimizer steps)
  }
}

TEST(Autograd, InPlaceOnNonLeafRebasesAndThroughViewsRewritesTheBase) {
  ts::Tensor x = leaf({4});
  ts::Tensor w = x.view({2, 2}).clone();  // a non-leaf that owns its memory
  w.fill_(3);                             // in place: its history restarts from the fill
  EXPECT_FALSE(w.is_leaf());
  ts::Tensor v = x.view({2, 2}).clone();
  // In place through a view of a graph tensor rewrites the base's history (tests/autograd/test_inplace_views.cpp).
  v.select(0, 0).fill_(3);
  EXPECT_EQ(v.grad_fn()->name(), "CopySlices");
  // A view of a leaf that requires grad is refused, as in PyTorch.
  EXPECT_THROW(x.view({4}).copy_(ts::zeros({4}, ts::kFloat64)), ts::ValueError);
  {
    ts::NoGradGuard g;
    EXPECT_NO_THROW(v.select(0, 0).fill_(3));  // outside autograd it is an ordinary write
  }
  v.sum().backward();
  EXPECT_EQ(x.grad().tolist<double>(), (std::vector<double>{0, 0, 1, 1}));
}

TEST(Autograd, NoGradGuardStopsRecording) {
  ts::Tensor x = ts::ones({3}, ts::kFloat64).requires_grad_();  // not itself a view
  ts::Tensor y;
  {
    ts::NoGradGuard g;
    y = x.view({3});
  }
  EXPECT_TRUE(y.requires_grad());  // a view requires grad when its base does, as in PyTorch
  EXPECT_EQ(y.grad_fn(), nullptr);
  EXPECT_FALSE((x * 1).detach().requires_grad());
  {
    ts::NoGradGuard g;
    ts::EnableGradGuard e;
    EXPECT_TRUE(x.view({3}).requires_grad());
  }
}

TEST(Autograd, GradcheckOnViews) {
  ts::Tensor x = leaf({3, 4});
  std::string report;
  EXPECT_TRUE(ts::autograd::gradcheck(
      [](const std::vector<ts::Tensor>& in) {
        return std::vector<ts::Tensor>{in[0].t().slice(0, 1, 4, 2).diagonal().unsqueeze(0).expand({2, 2})};
      },
      {x}, {}, &report))
      << report;
  EXPECT_TRUE(ts::autograd::gradgradcheck(
      [](const std::vector<ts::Tensor>& in) { return std::vector<ts::Tensor>{in[0].permute({1, 0}).select(1, 2)}; },
      {x}, {}, &report))
      << report;
}
