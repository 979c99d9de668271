// Custom functions beyond one output: several outputs (vector, tuple), mark_non_differentiable,
// set_materialize_grads, mark_dirty (in-place custom functions, on tensors and on views) and
// once_differentiable. The expected behaviour and values are PyTorch's (Debian's python3-torch 1.13,
// CPU), from the same functions written as torch.autograd.Function:
//   SplitMul: forward(x, w) = (x * w, x.exp(), argmax(x)) with argmax non-differentiable;
//     x = [0.5, -1, 2], w = [1.5, 2, -1], loss a.sum() + (b * b).sum()
//     -> x.grad = [6.936563656918091, 2.2706705664732256, 108.19630006628849], w.grad = [0.5, -1, 2]
//   Dbl: mark_dirty(x); x.mul_(2); a0 = [1, 2]; y = a0 * 1; Dbl(y); (y * y).sum() -> a0.grad = [8, 16];
//     through a view (a fresh a0): y = a0 * 1; v = y[0:1]; Dbl(v) -> a0.grad = [8, 4], y.grad_fn is CopySlices
#include "common/test_util.h"

namespace ts = tessera;
using namespace tessera::testing;
using ts::autograd::FunctionContext;

namespace {
using V = std::vector<ts::Tensor>;

struct SplitMul : ts::autograd::Function<SplitMul> {
  static std::tuple<ts::Tensor, ts::Tensor, ts::Tensor> forward(FunctionContext& ctx, const ts::Tensor& x,
                                                              const ts::Tensor& w) {
    ctx.save_for_backward({x, w});
    ts::Tensor idx = ts::argmax(x, 0);
    ctx.mark_non_differentiable({idx});
    return {x * w, x.exp(), idx};
  }
  static V backward(FunctionContext& ctx, const V& g) {
    const V& s = ctx.saved_tensors();
    EXPECT_EQ(g.size(), 3u);
    return {g[0] * s[1] + g[1] * s[0].exp(), g[0] * s[0]};
  }
};

// Two outputs as a vector; backward sees undefined gradients for outputs nobody used.
struct TwoScales : ts::autograd::Function<TwoScales> {
  static V forward(FunctionContext& ctx, const ts::Tensor& x, bool materialize) {
    ctx.set_materialize_grads(materialize);
    ctx.values["materialize"] = materialize;
    return {x * 2, x * 3};
  }
  static V backward(FunctionContext& ctx, const V& g) {
    const bool materialize = std::any_cast<bool>(ctx.values.at("materialize"));
    EXPECT_EQ(g[1].defined(), materialize);
    ts::Tensor r = g[0] * 2;
    if (g[1].defined()) r = r + g[1] * 3;
    return {r};
  }
};

struct Dbl : ts::autograd::Function<Dbl> {
  static ts::Tensor forward(FunctionContext& ctx, ts::Tensor x) {
    ctx.mark_dirty({x});
    x.mul_(2);
    return x;
  }
  static V backward(FunctionContext&, const V& g) { return {g[0] * 2}; }
};

struct NotReturned : ts::autograd::Function<NotReturned> {
  static ts::Tensor forward(FunctionContext& ctx, ts::Tensor x) {
    ctx.mark_dirty({x});
    x.mul_(2);
    return x * 1;
  }
  static V backward(FunctionContext&, const V& g) { return {g[0] * 2}; }
};

struct Square : ts::autograd::Function<Square> {
  static constexpr bool once_differentiable = true;
  static ts::Tensor forward(FunctionContext& ctx, const ts::Tensor& x) {
    ctx.save_for_backward({x});
    return x * x;
  }
  static V backward(FunctionContext& ctx, const V& g) {
    EXPECT_FALSE(ts::is_grad_enabled());  // runs under no_grad
    return {g[0] * ctx.saved_tensors()[0] * 2};
  }
};

void expect_near(const ts::Tensor& t, const std::vector<double>& want) {
  std::vector<double> got = t.contiguous().tolist<double>();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-12) << "element " << i;
}
}  // namespace

TEST(CustomFunctionOutputs, SeveralOutputsAndNonDifferentiableAgainstPyTorch) {
  ts::Tensor x = ts::tensor({0.5, -1.0, 2.0}, ts::kFloat64).requires_grad_();
  ts::Tensor w = ts::tensor({1.5, 2.0, -1.0}, ts::kFloat64).requires_grad_();
  auto [a, b, idx] = SplitMul::apply(x, w);
  ASSERT_NE(a.grad_fn(), nullptr);
  EXPECT_EQ(a.grad_fn(), b.grad_fn());  // one node, two outputs
  EXPECT_EQ(a.grad_fn()->name(), "SplitMulBackward");
  EXPECT_FALSE(idx.requires_grad());
  EXPECT_EQ(idx.item<int64_t>(), 2);
  (a.sum() + (b * b).sum()).backward();
  expect_near(x.grad(), {6.936563656918091, 2.2706705664732256, 108.19630006628849});
  expect_near(w.grad(), {0.5, -1.0, 2.0});

  std::string report;
  EXPECT_TRUE(ts::autograd::gradcheck(
      [](const V& in) {
        auto [p, q, i] = SplitMul::apply(in[0], in[1]);
        return V{p, q};
      },
      {test_data({4}, ts::kFloat64, 1, -1, 1).requires_grad_(), test_data({4}, ts::kFloat64, 2).requires_grad_()}, {},
      &report))
      << report;
}

TEST(CustomFunctionOutputs, MaterializeGrads) {
  for (bool materialize : {true, false}) {
    SCOPED_TRACE(materialize ? "materialized" : "not materialized");
    ts::Tensor x = ts::ones({2}, ts::kFloat64).requires_grad_();
    V pq = TwoScales::apply(x, materialize);
    ASSERT_EQ(pq.size(), 2u);
    pq[0].sum().backward();  // PyTorch: with set_materialize_grads(False), g1 is None
    expect_near(x.grad(), {2, 2});
  }
}

TEST(CustomFunctionOutputs, MarkDirtyAgainstPyTorch) {
  ts::Tensor a0 = ts::tensor({1.0, 2.0}, ts::kFloat64).requires_grad_();
  ts::Tensor y = a0 * 1;
  ts::Tensor z = Dbl::apply(y);
  EXPECT_TRUE(z.is_same(y));  // the input itself, its history continued
  EXPECT_EQ(y.grad_fn()->name(), "DblBackward");
  expect_near(y, {2, 4});
  (y * y).sum().backward();
  expect_near(a0.grad(), {8, 16});

  // Through a view: the base's history is rewritten (Note [View tracking]).
  a0.zero_grad();
  ts::Tensor y2 = a0 * 1;
  ts::Tensor v = y2.slice(0, 0, 1);
  Dbl::apply(v);
  EXPECT_EQ(y2.grad_fn()->name(), "CopySlices");
  EXPECT_EQ(v.grad_fn()->name(), "AsStridedBackward0");
  (y2 * y2).sum().backward();
  expect_near(a0.grad(), {8, 4});

  std::string report;
  EXPECT_TRUE(ts::autograd::gradcheck(
      [](const V& in) {
        ts::Tensor t = in[0].sin();  // sin saves its input, not t
        Dbl::apply(t.select(0, 1));
        return V{t * in[0]};
      },
      {test_data({3, 2}, ts::kFloat64, 3, -1, 1).requires_grad_()}, {}, &report))
      << report;
}

TEST(CustomFunctionOutputs, MarkDirtyRefusals) {
  ts::Tensor leaf = ts::ones({2}, ts::kFloat64).requires_grad_();
  EXPECT_NE(message_of<ts::ValueError>([&] { Dbl::apply(leaf); })
                .find("a leaf Variable that requires grad has been used in an in-place operation."),
            std::string::npos);
  EXPECT_NE(message_of<ts::ValueError>([&] { NotReturned::apply(leaf * 1); })
                .find("Some elements marked as dirty during the forward method were not returned as output."),
            std::string::npos);
  {
    ts::NoGradGuard g;
    ts::Tensor t = ts::ones({2}, ts::kFloat64);
    EXPECT_NO_THROW(Dbl::apply(t));  // nothing recorded: an ordinary in-place call
    expect_near(t, {2, 2});
  }
}

TEST(CustomFunctionOutputs, OnceDifferentiable) {
  ts::Tensor x = ts::tensor({1.5}, ts::kFloat64).requires_grad_();
  // First order works as usual.
  V g = ts::autograd::grad({Square::apply(x).sum()}, {x});
  expect_near(g[0], {3.0});
  // Differentiating the gradient again raises, as PyTorch's @once_differentiable.
  ts::Tensor y = Square::apply(x);
  V gx = ts::autograd::grad({(y * y).sum()}, {x}, {}, std::nullopt, /*create_graph=*/true);
  ASSERT_TRUE(gx[0].requires_grad());
  EXPECT_NE(message_of<ts::ValueError>([&] { gx[0].sum().backward(); })
                .find("trying to differentiate twice a function that was marked with @once_differentiable"),
            std::string::npos);
}
