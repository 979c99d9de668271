// In-place writes through views (Note [View tracking]): the base's history is rewritten (CopySlices),
// views of a changed base get a fresh history, and PyTorch's refusals. Gradients are checked with
// gradcheck / gradgradcheck in float64, and a few against values PyTorch computes (literals below,
// produced with Debian's python3-torch 1.13 on the CPU from the lines quoted beside them).
#include "common/test_util.h"
#include "ops/amp_ops.h"
#include "ops/optim_ops.h"

namespace ts = tessera;
using namespace tessera::testing;

namespace {
using V = std::vector<ts::Tensor>;
using Fn = ts::autograd::GradcheckFn;

ts::Tensor leaf(const ts::Shape& s, uint64_t seed = 1) { return test_data(s, ts::kFloat64, seed).requires_grad_(); }

void check_grads(const Fn& fn, const V& inputs, bool second = true) {
  std::string report;
  EXPECT_TRUE(ts::autograd::gradcheck(fn, inputs, {}, &report)) << report;
  if (second) EXPECT_TRUE(ts::autograd::gradgradcheck(fn, inputs, {}, &report)) << report;
}

std::vector<double> values(const ts::Tensor& t) { return t.contiguous().tolist<double>(); }

void expect_near(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-12) << "element " << i;
}
}  // namespace

// The example: y = w * 2; y[:, 0:1] *= 3.
TEST(AutogradInplaceView, SliceMulRewritesTheBaseHistory) {
  ts::Tensor w = ts::ones({2, 3}, ts::kFloat64).requires_grad_();
  ts::Tensor y = w * 2;
  ts::Tensor v = y.slice(1, 0, 1);
  v.mul_(3);
  ASSERT_NE(y.grad_fn(), nullptr);
  EXPECT_EQ(y.grad_fn()->name(), "CopySlices");
  EXPECT_EQ(v.grad_fn()->name(), "AsStridedBackward0");
  EXPECT_EQ(values(y), (std::vector<double>{6, 2, 2, 6, 2, 2}));
  y.sum().backward();
  // PyTorch: w.grad == [[6, 2, 2], [6, 2, 2]]
  EXPECT_EQ(values(w.grad()), (std::vector<double>{6, 2, 2, 6, 2, 2}));
}

// A slice of a transpose of a reshape, against PyTorch:
//   x = (arange(24.)/10).requires_grad_(); s = (arange(8.)/4 + 0.5).reshape(2, 4).requires_grad_()
//   y = x * 1; y.reshape(4, 6).t()[1:5:2].mul_(s); (y * y).sum().backward()
TEST(AutogradInplaceView, ChainOfViewsAgainstPyTorch) {
  ts::Tensor x = (ts::arange(24, ts::kFloat64) / 10).requires_grad_();
  ts::Tensor s = (ts::arange(8, ts::kFloat64) / 4 + 0.5).reshape({2, 4}).requires_grad_();
  ts::Tensor y = x * 1;
  y.reshape({4, 6}).t().slice(0, 1, 5, 2).mul_(s);
  (y * y).sum().backward();
  expect_near(values(x.grad()), {0.0, 0.05, 0.4, 1.35, 0.8, 1.0, 1.2, 0.7875, 1.6, 5.5125, 2.0, 2.2,
                                 2.4, 2.6, 2.8, 12.0, 3.2, 3.4, 3.6, 5.9375, 4.0, 21.2625, 4.4, 4.6});
  expect_near(values(s.grad()), {0.01, 0.735, 3.38, 9.025, 0.27, 2.835, 9.0, 19.845});
}

TEST(AutogradInplaceView, ChainOfViewsGradcheck) {
  check_grads([](const V& in) {
    ts::Tensor y = in[0] * 1;
    y.reshape({4, 6}).t().slice(0, 1, 5, 2).mul_(in[1]);
    return V{y.exp()};
  }, {leaf({24}, 1), leaf({2, 4}, 2)});
}

TEST(AutogradInplaceView, SelectNarrowDiagonalAsStridedGradcheck) {
  const V in = {leaf({4, 5}, 3), leaf({5}, 4)};
  check_grads([](const V& in) {
    ts::Tensor y = in[0] * 1;
    y.select(0, 2).mul_(in[1]);
    return V{y};
  }, in);
  check_grads([](const V& in) {
    ts::Tensor y = in[0].sin();
    y.narrow(1, 1, 3).narrow(0, 1, 2).add_(in[1].narrow(0, 0, 3));  // the add_ kernel writes the view
    return V{y * y};
  }, in);
  check_grads([](const V& in) {
    ts::Tensor y = in[0] * 1;
    y.diagonal(1).copy_(in[1].slice(0, 0, 4).exp());
    return V{y};
  }, in);
  check_grads([](const V& in) {
    ts::Tensor y = in[0] * 1;  // contiguous (4, 5): as_strided picks rows 1 and 3, columns 0, 2, 4
    y.as_strided({2, 3}, {10, 2}, 5).div_(in[1].slice(0, 0, 3) + 10);
    return V{y};
  }, in);
}

TEST(AutogradInplaceView, AdvancedIndexWritesGradcheck) {
  ts::Tensor idx = ts::tensor(std::vector<int64_t>{2, 0}, {2}, ts::kInt64);
  check_grads([idx](const V& in) {
    ts::Tensor y = in[0] * 1;
    y.slice(1, 1, 4).index_put_({idx}, in[1]);  // y[:, 1:4][[2, 0]] = v
    return V{y * in[0]};
  }, {leaf({3, 5}, 5), leaf({2, 3}, 6)});
  check_grads([idx](const V& in) {
    ts::Tensor y = in[0] * 1;
    y.t().index_put_({idx}, in[1], /*accumulate=*/true);  // y.t()[[2, 0]] += v
    return V{y};
  }, {leaf({3, 5}, 7), leaf({2, 3}, 8)});
  check_grads([](const V& in) {
    ts::Tensor y = in[0] * 1;
    ts::Tensor mask = ts::gt(in[0].detach().slice(0, 0, 2), 0);
    y.slice(0, 0, 2).masked_fill_(mask, 0.5);
    return V{y * y};
  }, {leaf({3, 4}, 9)});
}

TEST(AutogradInplaceView, InPlaceUnaryOpsAndAliasedOperands) {
  check_grads([](const V& in) {
    ts::Tensor y = in[0] * 1;
    y.slice(0, 1, 3).relu_();
    y.slice(1, 0, 2).exp_();
    ts::Tensor v = y.select(0, 0);
    v.add_(v);  // self and other are the same view
    return V{y};
  }, {leaf({3, 4}, 10)});
}

TEST(AutogradInplaceView, NonContiguousBase) {
  // y's memory is transposed (the product keeps its input's layout), so the base is not row-major.
  check_grads([](const V& in) {
    ts::Tensor y = in[0].t() * 2;
    y.select(1, 1).mul_(in[1]);
    return V{y};
  }, {leaf({3, 4}, 11), leaf({4}, 12)});
}

// PyTorch: buf = zeros(3); buf[0:2].copy_(k * 3); (buf * arange(3.)).sum().backward() -> k.grad = [0, 3]
TEST(AutogradInplaceView, WriteIntoABufferThatNeedsNoGrad) {
  ts::Tensor buf = ts::zeros({3}, ts::kFloat64);
  ts::Tensor k = ts::ones({2}, ts::kFloat64).requires_grad_();
  ts::Tensor bv = buf.slice(0, 0, 2);
  EXPECT_FALSE(bv.requires_grad());
  bv.copy_(k * 3);
  EXPECT_TRUE(buf.requires_grad());
  EXPECT_FALSE(buf.is_leaf());
  EXPECT_EQ(buf.grad_fn()->name(), "CopySlices");
  (buf * ts::arange(3, ts::kFloat64)).sum().backward();
  EXPECT_EQ(values(k.grad()), (std::vector<double>{0, 3}));

  // A cache written step by step, as a KV cache: every step's write reaches its own input.
  check_grads([](const V& in) {
    ts::Tensor cache = ts::zeros({4, 3}, ts::kFloat64);
    for (int64_t t = 0; t < 3; ++t) cache.select(0, t).copy_(in[0].select(0, t) * (t + 1));
    return V{(cache * cache).sum(std::vector<int64_t>{1})};
  }, {leaf({3, 3}, 13)});
}

// A base with gaps (a detached strided slice) and a view of it.
TEST(AutogradInplaceView, BaseWithGaps) {
  check_grads([](const V& in) {
    ts::Tensor buf = ts::zeros({4, 6}, ts::kFloat64).slice(1, 0, 6, 2).detach();  // strides (6, 2)
    buf.select(1, 1).copy_(in[0]);
    return V{buf.exp()};
  }, {leaf({4}, 14)});
}

// PyTorch: w = ones(3, requires_grad); y = w * 2; v = y[0:2]; y.mul_(3); v.sum().backward() -> [6, 6, 0]
TEST(AutogradInplaceView, ViewOfAChangedBaseGetsTheNewHistory) {
  ts::Tensor w = ts::ones({3}, ts::kFloat64).requires_grad_();
  ts::Tensor y = w * 2;
  ts::Tensor v = y.slice(0, 0, 2);
  EXPECT_EQ(v.grad_fn()->name(), "SliceBackward0");
  y.mul_(3);
  EXPECT_EQ(v.grad_fn()->name(), "AsStridedBackward0");
  v.sum().backward();
  EXPECT_EQ(values(w.grad()), (std::vector<double>{6, 6, 0}));

  // Sibling views: a write through one is seen through the other.
  check_grads([](const V& in) {
    ts::Tensor y = in[0] * 1;
    ts::Tensor a = y.slice(0, 0, 2), b = y.slice(0, 1, 3);
    a.mul_(in[1]);
    return V{b.exp(), y};
  }, {leaf({3, 2}, 15), leaf({2, 2}, 16)});
}

TEST(AutogradInplaceView, RefusedAsPyTorchRefuses) {
  ts::Tensor x = leaf({3, 4});
  const std::string leaf_msg = message_of<ts::ValueError>([&] { x.slice(0, 0, 1).mul_(2); });
  EXPECT_NE(leaf_msg.find("mul_: a view of a leaf Variable that requires grad is being used in an in-place operation."),
            std::string::npos) << leaf_msg;
  ts::Tensor y = x * 1;
  ts::Tensor nv;
  {
    ts::NoGradGuard g;
    nv = y.slice(0, 0, 2);
  }
  EXPECT_TRUE(nv.requires_grad());  // as in PyTorch: its base does
  EXPECT_NE(message_of<ts::ValueError>([&] { nv.mul_(2); })
                .find("A view was created in no_grad mode and is being modified inplace with grad mode enabled"),
            std::string::npos);
  {
    ts::NoGradGuard g;
    EXPECT_NO_THROW(nv.mul_(2));  // both in no_grad: an ordinary write
  }
  V pieces = y.split(2, 1);
  EXPECT_NE(message_of<ts::ValueError>([&] { pieces[1].add_(1); })
                .find("Output 1 of SplitBackward0 is a view and is being modified inplace. This view is the output "
                      "of a function that returns multiple views."),
            std::string::npos);
  ts::Tensor windows = (ts::arange(6, ts::kFloat64).requires_grad_() * 1).as_strided({2, 3}, {1, 1}, 0);
  EXPECT_NE(message_of<ts::ValueError>([&] { windows.mul_(2); })
                .find("more than one element of the written-to tensor refers to a single memory location"),
            std::string::npos);
  // A view reaching outside its base cannot be tracked: refused rather than given a wrong gradient.
  ts::Tensor part = ts::zeros({6}, ts::kFloat64).slice(0, 2, 6).detach();
  ts::Tensor k = leaf({2});
  EXPECT_THROW(part.as_strided({2}, {1}, 0).copy_(k), ts::NotImplementedError);
  EXPECT_THROW(y.slice(0, 0, 1).detach_(), ts::ValueError);
}

TEST(AutogradInplaceView, VersionCounterCatchesASavedTensorWrittenThroughAView) {
  ts::Tensor x = leaf({4});
  ts::Tensor e = (x * 1).exp();  // exp saves its output
  e.slice(0, 1, 3).mul_(2);
  const std::string msg = message_of<ts::ValueError>([&] { e.sum().backward(); });
  EXPECT_NE(msg.find("one of the variables needed for gradient computation has been modified by an inplace "
                     "operation: [float64 [4]], which is output of ExpBackward0"), std::string::npos) << msg;
}

// .grad of a tensor that retains grad is the gradient of its value after an in-place op (the retain
// hook moves to the new history), as PyTorch 2 documents. python3-torch 1.13 agrees for a write to
// the tensor itself (y.grad = [20, 20, 20] below); 1.13 still left the hook behind for a write
// through a view.
TEST(AutogradInplaceView, RetainGradFollowsTheCurrentValue) {
  ts::Tensor w = ts::ones({3}, ts::kFloat64).requires_grad_();
  ts::Tensor y = w * 2;
  y.retain_grad();
  y.mul_(5);
  (y * y).sum().backward();
  EXPECT_EQ(values(y.grad()), (std::vector<double>{20, 20, 20}));
  ts::Tensor y2 = w * 2;
  y2.retain_grad();
  y2.slice(0, 0, 1).mul_(5);
  (y2 * y2).sum().backward();
  EXPECT_EQ(values(y2.grad()), (std::vector<double>{20, 4, 4}));
}

// The random fills are in-place ops like the others: writing a tensor of the graph (or a view of one)
// cuts the overwritten elements' gradient, and a leaf that requires grad is refused. PyTorch:
//   x = arange(12.).reshape(3, 4) (requires grad); y = x * 1; y[:, 1:3].uniform_(0.5, 0.5)
//   (y * y).sum().backward() -> x.grad = [0, 0, 0, 6, 8, 0, 0, 14, 16, 0, 0, 22]; y.grad_fn CopySlices
TEST(AutogradInplaceView, RandomFillsThroughViewsAgainstPyTorch) {
  const std::vector<double> want = {0, 0, 0, 6, 8, 0, 0, 14, 16, 0, 0, 22};
  using Fill = std::function<void(ts::Tensor)>;
  const std::vector<std::pair<std::string, Fill>> fills = {
      {"uniform_", [](ts::Tensor v) { v.uniform_(0.5, 0.5); }},
      {"normal_", [](ts::Tensor v) { v.normal_(0.5, 0.0); }},
      {"bernoulli_", [](ts::Tensor v) { v.bernoulli_(1.0); }},
      {"random_", [](ts::Tensor v) { v.random_(3, 4); }},
  };
  for (const auto& [name, fill] : fills) {
    SCOPED_TRACE(name);
    ts::Tensor x = ts::arange(12, ts::kFloat64).reshape({3, 4}).requires_grad_();
    ts::Tensor y = x * 1;
    fill(y.slice(1, 1, 3));
    EXPECT_EQ(y.grad_fn()->name(), "CopySlices");
    (y * y).sum().backward();
    expect_near(values(x.grad()), want);
    // The whole tensor: its history restarts at the fill, nothing reaches x.
    ts::Tensor x2 = ts::arange(4, ts::kFloat64).requires_grad_();
    ts::Tensor z = x2 * 1;
    fill(z);
    ASSERT_TRUE(z.requires_grad());
    (z * x2).sum().backward();
    expect_near(values(x2.grad()), values(z.detach()));
    // PyTorch: a leaf Variable that requires grad is being used in an in-place operation.
    ts::Tensor leaf_t = ts::arange(4, ts::kFloat64).requires_grad_();
    EXPECT_NE(message_of<ts::ValueError>([&] { fill(leaf_t); })
                  .find(name + ": a leaf Variable that requires grad is being used in an in-place operation."),
              std::string::npos);
    EXPECT_NE(message_of<ts::ValueError>([&] { fill(leaf_t.slice(0, 0, 2)); })
                  .find(name + ": a view of a leaf Variable that requires grad is being used in an in-place operation."),
              std::string::npos);
    {
      ts::NoGradGuard g;
      EXPECT_NO_THROW(fill(leaf_t));  // initialization under no_grad, as nn::init does
    }
  }
}

// _foreach_mul_ writes through views as mul_ does (it calls mul_ where autograd records).
TEST(AutogradInplaceView, ForeachMulThroughViewsGradcheck) {
  check_grads([](const V& in) {
    ts::Tensor y = in[0] * 1;
    ts::Tensor z = in[1].sin();  // sin saves its input, not z
    ts::_foreach_mul_({y.t().slice(0, 1, 3), z.select(0, 1)}, in[2].sum());
    return V{y, z};
  }, {leaf({3, 4}, 17), leaf({2, 3}, 18), leaf({2}, 19)});
}

// The in-place ops without a derivative (the fused optimizer steps and the gradient scaler's ops) refuse
// to write a tensor that autograd would have to track, a view of it, or a leaf; under no_grad they run.
TEST(AutogradInplaceView, InPlaceOpsWithoutADerivativeRefuseGraphTensors) {
  ts::Tensor w = ts::ones({2, 3}).requires_grad_();
  ts::Tensor y = w * 2;
  const ts::Tensor g = ts::ones({3});
  const ts::SGDKernelParams sgd{.lr = 0.1};
  EXPECT_NE(message_of<ts::NotImplementedError>([&] { ts::fused_sgd_({y.select(0, 0)}, {g}, {}, {}, sgd); })
                .find("_fused_sgd_: the derivative of this op is not implemented"),
            std::string::npos);
  EXPECT_NE(message_of<ts::ValueError>([&] { ts::fused_sgd_({w.select(0, 0)}, {g}, {}, {}, sgd); })
                .find("_fused_sgd_: a view of a leaf Variable that requires grad is being used in an in-place "
                      "operation."),
            std::string::npos);
  ts::Tensor m = ts::zeros({3}), v = ts::zeros({3});
  EXPECT_THROW(ts::fused_adam_({y.select(0, 1)}, {g}, {m}, {v}, {}, {1}, ts::AdamKernelParams{.lr = 0.1}),
               ts::NotImplementedError);
  ts::Tensor found = ts::zeros({}), inv = ts::ones({});
  EXPECT_THROW(ts::_amp_foreach_non_finite_check_and_unscale_({y}, found, inv), ts::NotImplementedError);
  ts::Tensor scale = ts::ones({}).requires_grad_(), tracker = ts::zeros({}, ts::kInt32);
  EXPECT_NE(message_of<ts::ValueError>([&] { ts::_amp_update_scale_(scale, tracker, found, 2.0, 0.5, 10); })
                .find("_amp_update_scale_: a leaf Variable that requires grad is being used in an in-place operation."),
            std::string::npos);
  {
    ts::NoGradGuard no_grad;
    ts::Tensor p = w.detach().clone();
    EXPECT_NO_THROW(ts::fused_sgd_({p.select(0, 0)}, {g}, {}, {}, sgd));
    EXPECT_NO_THROW(ts::fused_sgd_({w.select(0, 0)}, {g}, {}, {}, sgd));  // what an optimizer's step does
    EXPECT_NO_THROW(ts::_amp_update_scale_(scale, tracker, found, 2.0, 0.5, 10));
  }
}
