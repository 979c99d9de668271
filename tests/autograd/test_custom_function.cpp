// Custom autograd functions (autograd::Function): gradients and second derivatives against finite
// differences, saved-tensor version checks, no_grad, node names and gradient-count errors.
#include "common/test_util.h"

namespace ts = tessera;
using namespace tessera::testing;
using ts::autograd::FunctionContext;

namespace {

ts::Tensor leaf(const ts::Shape& s, uint64_t seed = 1) { return test_data(s, ts::kFloat64, seed, -2, 2).requires_grad_(); }

struct MyExp : ts::autograd::Function<MyExp> {
  static ts::Tensor forward(FunctionContext& ctx, const ts::Tensor& x) {
    ts::Tensor y = x.exp();
    ctx.save_for_backward({y});
    return y;
  }
  static std::vector<ts::Tensor> backward(FunctionContext& ctx, const std::vector<ts::Tensor>& g) {
    return {g[0] * ctx.saved_tensors()[0]};
  }
};

// a * sin(b) * scale, with a non-tensor argument kept in the context.
struct MulSin : ts::autograd::Function<MulSin> {
  static constexpr const char* name = "MulSinBackward";
  static ts::Tensor forward(FunctionContext& ctx, const ts::Tensor& a, const ts::Tensor& b, double scale) {
    ctx.save_for_backward({a, b});
    ctx.scalars["scale"] = scale;
    return a * b.sin() * scale;
  }
  static std::vector<ts::Tensor> backward(FunctionContext& ctx, const std::vector<ts::Tensor>& g) {
    std::vector<ts::Tensor> s = ctx.saved_tensors();
    const double scale = ctx.scalars.at("scale");
    ts::Tensor ga, gb;
    if (ctx.needs_input_grad()[0]) ga = g[0] * s[1].sin() * scale;
    if (ctx.needs_input_grad()[1]) gb = g[0] * s[0] * s[1].cos() * scale;
    return {ga, gb};
  }
};

struct TooManyGrads : ts::autograd::Function<TooManyGrads> {
  static ts::Tensor forward(FunctionContext&, const ts::Tensor& x) { return x * 2.0; }
  static std::vector<ts::Tensor> backward(FunctionContext&, const std::vector<ts::Tensor>& g) { return {g[0], g[0]}; }
};

void check_grads(const ts::autograd::GradcheckFn& fn, const std::vector<ts::Tensor>& inputs) {
  std::string report;
  EXPECT_TRUE(ts::autograd::gradcheck(fn, inputs, {}, &report)) << "gradcheck\n" << report;
  report.clear();
  EXPECT_TRUE(ts::autograd::gradgradcheck(fn, inputs, {}, &report)) << "gradgradcheck\n" << report;
}

}  // namespace

TEST(CustomFunction, ExpGradcheck) {
  ts::autograd::GradcheckFn fn = [](const std::vector<ts::Tensor>& in) { return std::vector<ts::Tensor>{MyExp::apply(in[0])}; };
  check_grads(fn, {leaf({3, 4})});
  check_grads(fn, {leaf({4, 3}).t()});                       // strided
  check_grads(fn, {leaf({4, 6}).slice(1, 0, 6, 2)});         // sliced with step
  ts::Tensor x = leaf({5});
  ts::Tensor y = MyExp::apply(x);
  EXPECT_TRUE(all_close(y, x.detach().exp(), {1e-12, 1e-12}));
  y.sum().backward();
  EXPECT_TRUE(all_close(x.grad(), x.detach().exp(), {1e-12, 1e-12}));
}

TEST(CustomFunction, TwoInputsGradcheck) {
  ts::autograd::GradcheckFn fn = [](const std::vector<ts::Tensor>& in) {
    return std::vector<ts::Tensor>{MulSin::apply(in[0], in[1], 1.5)};
  };
  check_grads(fn, {leaf({3, 4}, 1), leaf({3, 4}, 2)});
  check_grads(fn, {leaf({3, 4}, 3), leaf({4}, 4)});  // broadcast: the engine sums b's gradient down
  // Only one input requiring grad: the other gets none.
  ts::Tensor a = leaf({3}, 5);
  ts::Tensor b = test_data({3}, ts::kFloat64, 6);
  MulSin::apply(a, b, 2.0).sum().backward();
  EXPECT_TRUE(all_close(a.grad(), b.sin() * 2.0, {1e-12, 1e-12}));
  EXPECT_FALSE(b.grad().defined());
}

TEST(CustomFunction, SavedTensorModifiedInPlace) {
  ts::Tensor x = leaf({4});
  ts::Tensor y = MyExp::apply(x);
  y.mul_(2.0);  // y is saved by MyExp
  EXPECT_THROW(y.sum().backward(), ts::ValueError);

  ts::Tensor a = leaf({3}, 1);
  ts::Tensor b = leaf({3}, 2);
  ts::Tensor z = MulSin::apply(a * 1.0, b * 1.0, 1.0);
  ts::Tensor a2 = a * 1.0;
  ts::Tensor c = a2 + 0.0;
  ts::Tensor w = MulSin::apply(c, b, 1.0);
  { ts::NoGradGuard g; c.add_(1.0); }  // c is a saved input
  EXPECT_THROW(w.sum().backward(), ts::ValueError);
  z.sum().backward();  // untouched saved tensors still work
  EXPECT_TRUE(a.grad().defined());
}

TEST(CustomFunction, NoGradAndNames) {
  ts::Tensor x = leaf({3});
  {
    ts::NoGradGuard g;
    ts::Tensor y = MyExp::apply(x);
    EXPECT_FALSE(y.requires_grad());
    EXPECT_EQ(y.grad_fn(), nullptr);
  }
  ts::Tensor plain = test_data({3}, ts::kFloat64, 2);
  EXPECT_EQ(MyExp::apply(plain).grad_fn(), nullptr);

  ts::Tensor y = MyExp::apply(x);
  ASSERT_NE(y.grad_fn(), nullptr);
  EXPECT_EQ(y.grad_fn()->name(), "MyExpBackward");
  EXPECT_FALSE(y.is_leaf());
  ASSERT_EQ(y.grad_fn()->next_functions().size(), 1u);
  EXPECT_NE(y.grad_fn()->next_functions()[0], nullptr);  // x's accumulator
  EXPECT_EQ(MulSin::apply(x, x, 1.0).grad_fn()->name(), "MulSinBackward");

  // A second backward without retain_graph finds the saved tensors freed.
  y.sum().backward();
  EXPECT_THROW(y.sum().backward(), ts::ValueError);
}

TEST(CustomFunction, WrongGradientCount) {
  ts::Tensor x = leaf({3});
  EXPECT_THROW(TooManyGrads::apply(x).sum().backward(), ts::ValueError);
}
