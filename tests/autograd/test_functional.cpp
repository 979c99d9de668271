// autograd::functional (jacobian, hessian, vjp, jvp, vhp, hvp; vectorize and strategy; batched
// grad_outputs) against PyTorch and against central finite differences in float64. The PyTorch literals were produced with Debian's python3-torch 1.13
// (CPU) by torch.autograd.functional on the same functions:
//   x = [0.5, -1.0, 2.0]; y = [[1.5, 0.25], [-0.5, 1.0]]   (float64)
//   f(x, y) = ((x[:2].unsqueeze(1) * y).sin(), (x ** 3).sum() * y[0])
//   g(x, y) = x.exp().sum() * (y ** 2).sum() + (x[:2] * y[:, 0]).prod()
//   vx = [1, 2, -1]; vy = [[0.5, -0.5], [1, 2]]; u0 = ones(2, 2); u1 = [2, -1]
#include "common/test_util.h"

namespace ts = tessera;
namespace F = tessera::autograd::functional;
using namespace tessera::testing;

namespace {
using V = std::vector<ts::Tensor>;

ts::Tensor x0() { return ts::tensor({0.5, -1.0, 2.0}, ts::kFloat64); }
ts::Tensor y0() { return ts::tensor({1.5, 0.25, -0.5, 1.0}, ts::kFloat64).reshape({2, 2}); }
ts::Tensor vx() { return ts::tensor({1.0, 2.0, -1.0}, ts::kFloat64); }
ts::Tensor vy() { return ts::tensor({0.5, -0.5, 1.0, 2.0}, ts::kFloat64).reshape({2, 2}); }

V f(const V& in) {
  const ts::Tensor& x = in[0];
  const ts::Tensor& y = in[1];
  return {(x.slice(0, 0, 2).unsqueeze(1) * y).sin(), (x * x * x).sum() * y.select(0, 0)};
}
ts::Tensor g(const V& in) {
  const ts::Tensor& x = in[0];
  const ts::Tensor& y = in[1];
  return x.exp().sum() * (y * y).sum() + ts::prod(x.slice(0, 0, 2) * y.select(1, 0));
}

void expect_near(const ts::Tensor& t, const ts::Shape& shape, const std::vector<double>& want, double tol = 1e-12) {
  EXPECT_EQ(t.sizes(), shape);
  std::vector<double> got = t.contiguous().tolist<double>();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "element " << i;
}

// d outputs[o] / d inputs[i] by central differences, shape outputs[o] + inputs[i].
ts::Tensor numerical_jacobian(const F::Fn& fn, const V& inputs, size_t o, size_t i, double eps = 1e-6) {
  ts::NoGradGuard g;
  std::vector<double> cols;
  const int64_t n = inputs[i].numel();
  std::vector<std::vector<double>> per_col;
  for (int64_t k = 0; k < n; ++k) {
    V plus, minus;
    for (const ts::Tensor& t : inputs) {
      plus.push_back(t.clone());
      minus.push_back(t.clone());
    }
    plus[i].view({-1}).select(0, k).add_(eps);
    minus[i].view({-1}).select(0, k).sub_(eps);
    per_col.push_back(((fn(plus)[o] - fn(minus)[o]) / (2 * eps)).contiguous().tolist<double>());
  }
  const ts::Tensor out = fn(inputs)[o];
  std::vector<double> flat(out.numel() * n);
  for (int64_t r = 0; r < out.numel(); ++r)
    for (int64_t k = 0; k < n; ++k) flat[r * n + k] = per_col[k][r];
  ts::Shape shape = out.sizes();
  shape.insert(shape.end(), inputs[i].sizes().begin(), inputs[i].sizes().end());
  return ts::tensor(flat, shape, ts::kFloat64);
}
}  // namespace

TEST(AutogradFunctional, JacobianAgainstPyTorch) {
  std::vector<V> J = F::jacobian(f, {x0(), y0()});
  ASSERT_EQ(J.size(), 2u);
  expect_near(J[0][0], {2, 2, 3}, {1.0975333033107313, 0, 0, 0.24804941680733225, 0, 0, 0, -0.4387912809451864, 0, 0,
                                   0.5403023058681398, 0});
  expect_near(J[0][1], {2, 2, 2, 2}, {0.36584443443691045, 0, 0, 0, 0, 0.4960988336146645, 0, 0, 0, 0,
                                      -0.8775825618903728, 0, 0, 0, 0, -0.5403023058681398});
  expect_near(J[1][0], {2, 3}, {1.125, 4.5, 18.0, 0.1875, 0.75, 3.0});
  expect_near(J[1][1], {2, 2, 2}, {7.125, 0, 0, 0, 0, 7.125, 0, 0});
  EXPECT_FALSE(J[0][0].requires_grad());
}

TEST(AutogradFunctional, JacobianAgainstFiniteDifferences) {
  const V in = {test_data({3, 2}, ts::kFloat64, 1, -1, 1), test_data({2}, ts::kFloat64, 2, -1, 1)};
  F::Fn fn = [](const V& v) { return V{ts::tanh(ts::matmul(v[0], v[1])), ts::softmax(v[0], 0) * v[1].exp()}; };
  std::vector<V> J = F::jacobian(fn, in);
  for (size_t o = 0; o < 2; ++o)
    for (size_t i = 0; i < 2; ++i) {
      SCOPED_TRACE("output " + std::to_string(o) + ", input " + std::to_string(i));
      EXPECT_TRUE(ts::allclose(J[o][i], numerical_jacobian(fn, in, o, i), 1e-6, 1e-8));
    }
  // One tensor in, one out.
  ts::Tensor j = F::jacobian([](const ts::Tensor& t) { return t.sin() * t; }, in[1]);
  EXPECT_TRUE(ts::allclose(j, numerical_jacobian([](const V& v) { return V{v[0].sin() * v[0]}; }, {in[1]}, 0, 0),
                           1e-6, 1e-8));
}

TEST(AutogradFunctional, HessianAgainstPyTorch) {
  std::vector<V> H = F::hessian(g, {x0(), y0()});
  expect_near(H[0][0], {3, 3}, {5.873569526869207, -0.75, 0, -0.75, 1.3105705091732633, 0, 0, 0, 26.323512352440442});
  expect_near(H[0][1], {3, 2, 2}, {5.446163812100385, 0.8243606353500641, -3.148721270700128, 3.2974425414002564,
                                   0.853638323514327, 0.18393972058572117, 0.38212055882855767, 0.7357588823428847,
                                   22.16716829679195, 3.694528049465325, -7.38905609893065, 14.7781121978613});
  expect_near(H[1][0], {2, 2, 3}, {5.446163812100385, 0.853638323514327, 22.16716829679195, 0.8243606353500641,
                                   0.18393972058572117, 3.694528049465325, -3.148721270700128, 0.38212055882855767,
                                   -7.38905609893065, 3.2974425414002564, 0.7357588823428847, 14.7781121978613});
  expect_near(H[1][1], {2, 2, 2, 2}, {18.81131362160444, 0, -0.5, 0, 0, 18.81131362160444, 0, 0, -0.5, 0,
                                      18.81131362160444, 0, 0, 0, 0, 18.81131362160444});
  // The Hessian is the Jacobian of the gradient (finite differences of autograd's gradient).
  F::Fn grad_fn = [](const V& in) {
    V v = {in[0].detach().requires_grad_(), in[1].detach().requires_grad_()};
    ts::EnableGradGuard on;
    return ts::autograd::grad({g(v)}, v);
  };
  EXPECT_TRUE(ts::allclose(H[0][1], numerical_jacobian(grad_fn, {x0(), y0()}, 0, 1), 1e-6, 1e-7));
}

TEST(AutogradFunctional, ProductsAgainstPyTorch) {
  auto [out, hv] = F::hvp(g, {x0(), y0()}, {vx(), vy()});
  expect_near(hv[0], {3}, {10.130634927344751, 4.059628643325157, 5.0799760680148225}, 1e-11);
  expect_near(hv[1], {2, 2}, {-6.108071026860692, -11.90794478374604, 23.56588956749208, 27.613475351433607}, 1e-11);
  EXPECT_TRUE(ts::allclose(out, g({x0(), y0()})));
  // vhp equals hvp for the symmetric Hessian.
  auto [out2, vh] = F::vhp(g, {x0(), y0()}, {vx(), vy()});
  EXPECT_TRUE(ts::allclose(vh[0], hv[0], 1e-12, 1e-12));
  EXPECT_TRUE(ts::allclose(vh[1], hv[1], 1e-12, 1e-12));

  auto [outs, vj] = F::vjp(f, {x0(), y0()}, {ts::ones({2, 2}, ts::kFloat64), ts::tensor({2.0, -1.0}, ts::kFloat64)});
  expect_near(vj[0], {3}, {3.4080827201180632, 8.351511024922953, 33.0});
  expect_near(vj[1], {2, 2}, {14.61584443443691, -6.628901166385336, -0.8775825618903728, -0.5403023058681398});
  ASSERT_EQ(outs.size(), 2u);

  auto [outs2, jv] = F::jvp(f, {x0(), y0()}, {vx(), vy()});
  expect_near(jv[0], {2, 2}, {1.2804555205291865, 0.0, -1.7551651237807455, 0.0});
  expect_near(jv[1], {2}, {-4.3125, -4.875});
  // J v from the full Jacobian.
  std::vector<V> J = F::jacobian(f, {x0(), y0()});
  ts::Tensor jv1 = ts::matmul(J[1][0], vx()) + (J[1][1] * vy()).sum(std::vector<int64_t>{1, 2});
  EXPECT_TRUE(ts::allclose(jv[1], jv1, 1e-12, 1e-12));
}

TEST(AutogradFunctional, CreateGraphGivesDifferentiableResults) {
  ts::Tensor x = x0().requires_grad_();
  // d/dx sum(J v) for f(x) = x^3 (elementwise): J v = 3 x^2 v, its gradient 6 x v.
  auto [out, jv] = F::jvp([](const V& in) { return V{in[0] * in[0] * in[0]}; }, {x}, {vx()}, /*create_graph=*/true);
  ASSERT_TRUE(jv[0].requires_grad());
  jv[0].sum().backward();
  expect_near(x.grad(), {3}, {6 * 0.5 * 1, 6 * -1.0 * 2, 6 * 2.0 * -1});
  // The Jacobian of a Jacobian (create_graph) is the Hessian.
  ts::Tensor hes = F::jacobian(
      [](const ts::Tensor& t) { return F::jacobian([](const ts::Tensor& u) { return u.exp().sum() * u.sum(); }, t, true); },
      x0());
  ts::Tensor direct = F::hessian([](const ts::Tensor& u) { return u.exp().sum() * u.sum(); }, x0());
  EXPECT_TRUE(ts::allclose(hes, direct, 1e-12, 1e-12));
  // Without create_graph nothing reaches the caller's graph.
  auto [o2, jv2] = F::jvp([](const V& in) { return V{in[0] * 2}; }, {x}, {vx()});
  EXPECT_FALSE(jv2[0].requires_grad());
  EXPECT_FALSE(o2[0].requires_grad());
}

TEST(AutogradFunctional, StrictModeAndErrorsAsPyTorch) {
  F::Fn independent = [](const V& in) { return V{in[0] * 2}; };
  const V two = {x0(), y0()};
  std::vector<V> J = F::jacobian(independent, two);
  EXPECT_TRUE(ts::equal(J[0][1], ts::zeros({3, 2, 2}, ts::kFloat64)));  // zeros when not strict
  EXPECT_NE(message_of<ts::ValueError>([&] { F::jacobian(independent, two, false, /*strict=*/true); })
                .find("is independent of input 1. This is not allowed in strict mode."),
            std::string::npos);
  EXPECT_NE(message_of<ts::ValueError>([&] { F::vjp(f, two); })
                .find("vjp: The vector v can only be None if the user-provided function returns a single Tensor with "
                      "a single element."),
            std::string::npos);
  EXPECT_NE(message_of<ts::ValueError>([&] { F::hessian([](const V& in) { return in[0] * 1; }, two); })
                .find("should contain a single element"),
            std::string::npos);
  EXPECT_THROW(F::jvp(f, two, {vx()}), ts::ValueError);                 // one v per input
  EXPECT_THROW(F::jvp(f, two, {vx(), vx()}), ts::ShapeError);           // of the input's shape
  EXPECT_THROW(F::jacobian(independent, {ts::arange(3)}), ts::DTypeError);
}

// ---- vectorize and strategy -----------------------------------------------------------------------
// vectorize=true gives PyTorch's (and vectorize=false's) values: all rows in one batched backward.
TEST(AutogradFunctional, VectorizedJacobianAndHessianAgainstPyTorch) {
  for (const char* strategy : {"reverse-mode", "forward-mode"}) {
    SCOPED_TRACE(strategy);
    std::vector<V> J = F::jacobian(f, {x0(), y0()}, false, false, /*vectorize=*/true, strategy);
    expect_near(J[0][0], {2, 2, 3}, {1.0975333033107313, 0, 0, 0.24804941680733225, 0, 0, 0, -0.4387912809451864, 0, 0,
                                     0.5403023058681398, 0});
    expect_near(J[0][1], {2, 2, 2, 2}, {0.36584443443691045, 0, 0, 0, 0, 0.4960988336146645, 0, 0, 0, 0,
                                        -0.8775825618903728, 0, 0, 0, 0, -0.5403023058681398});
    expect_near(J[1][0], {2, 3}, {1.125, 4.5, 18.0, 0.1875, 0.75, 3.0});
    expect_near(J[1][1], {2, 2, 2}, {7.125, 0, 0, 0, 0, 7.125, 0, 0});
    std::vector<V> H = F::hessian(g, {x0(), y0()}, false, false, /*vectorize=*/true, strategy);
    expect_near(H[0][0], {3, 3}, {5.873569526869207, -0.75, 0, -0.75, 1.3105705091732633, 0, 0, 0, 26.323512352440442},
                1e-11);
    expect_near(H[0][1], {3, 2, 2}, {5.446163812100385, 0.8243606353500641, -3.148721270700128, 3.2974425414002564,
                                     0.853638323514327, 0.18393972058572117, 0.38212055882855767, 0.7357588823428847,
                                     22.16716829679195, 3.694528049465325, -7.38905609893065, 14.7781121978613}, 1e-11);
    expect_near(H[1][1], {2, 2, 2, 2}, {18.81131362160444, 0, -0.5, 0, 0, 18.81131362160444, 0, 0, -0.5, 0,
                                        18.81131362160444, 0, 0, 0, 0, 18.81131362160444}, 1e-11);
  }
}

// The same values as vectorize=false on functions through matrix products, reductions, views, softmax
// and ops without a batched formula (their derivative runs per vector inside the one pass), with
// create_graph (the results are differentiable again), and with an output that is independent of
// an input.
TEST(AutogradFunctional, VectorizedEqualsLoopedOnManyOps) {
  const V in = {test_data({3, 4}, ts::kFloat64, 11, -1, 1), test_data({4, 2}, ts::kFloat64, 12, -1, 1),
                test_data({2}, ts::kFloat64, 13, 0.5, 1.5)};
  std::vector<F::Fn> fns = {
      [](const V& v) { return V{ts::tanh(ts::matmul(v[0], v[1])) * v[2], ts::softmax(v[0], 1).sum(std::vector<int64_t>{0})}; },
      [](const V& v) { return V{ts::nn::functional::linear(v[0], v[1].t(), v[2]).log_softmax(-1).t().reshape({-1})}; },
      [](const V& v) { return V{ts::cumsum(v[0].exp(), 1).mean(std::vector<int64_t>{0}) * v[1].sum(), v[2] * 3}; },
      [](const V& v) { return V{ts::prod(ts::cat({v[0].slice(1, 1, 3).sin(), v[1]}, 0), std::vector<int64_t>{1})}; },
      [](const V& v) { return V{(v[0].unsqueeze(0) * v[1].t().unsqueeze(1).sum(std::vector<int64_t>{2}, true)).amax(std::vector<int64_t>{0})}; },
  };
  for (size_t k = 0; k < fns.size(); ++k) {
    SCOPED_TRACE("function " + std::to_string(k));
    std::vector<V> loop = F::jacobian(fns[k], in);
    std::vector<V> vec = F::jacobian(fns[k], in, false, false, true);
    std::vector<V> fwd = F::jacobian(fns[k], in, false, false, true, "forward-mode");
    for (size_t o = 0; o < loop.size(); ++o)
      for (size_t i = 0; i < in.size(); ++i) {
        EXPECT_TRUE(ts::allclose(vec[o][i], loop[o][i], 1e-12, 1e-13)) << "output " << o << " input " << i;
        EXPECT_TRUE(ts::allclose(fwd[o][i], loop[o][i], 1e-12, 1e-13)) << "output " << o << " input " << i;
      }
  }
  F::ScalarFn scalar = [](const V& v) { return (ts::tanh(ts::matmul(v[0], v[1])) * v[2]).sum() + v[0].exp().prod(); };
  std::vector<V> h_loop = F::hessian(scalar, in), h_vec = F::hessian(scalar, in, false, false, true),
                 h_fwd = F::hessian(scalar, in, false, false, true, "forward-mode");
  for (size_t i = 0; i < in.size(); ++i)
    for (size_t j = 0; j < in.size(); ++j) {
      EXPECT_TRUE(ts::allclose(h_vec[i][j], h_loop[i][j], 1e-11, 1e-12)) << i << ", " << j;
      EXPECT_TRUE(ts::allclose(h_fwd[i][j], h_loop[i][j], 1e-11, 1e-12)) << i << ", " << j;
    }
  // create_graph: the vectorized Jacobian of a Jacobian is the Hessian.
  ts::Tensor hes = F::jacobian(
      [](const ts::Tensor& t) {
        return F::jacobian([](const ts::Tensor& u) { return u.exp().sum() * u.sum(); }, t, true, false, true);
      },
      x0(), false, false, true);
  EXPECT_TRUE(ts::allclose(hes, F::hessian([](const ts::Tensor& u) { return u.exp().sum() * u.sum(); }, x0()), 1e-12,
                           1e-12));
  // An output independent of an input: zeros, as without vectorize.
  std::vector<V> J = F::jacobian([](const V& v) { return V{v[0] * 2}; }, {x0(), y0()}, false, false, true);
  EXPECT_TRUE(ts::equal(J[0][1], ts::zeros({3, 2, 2}, ts::kFloat64)));
}

// One backward pass computes every row: a checkpointed (non-reentrant) function recomputes once per
// pass, so once for the vectorized Jacobian against once per row without vectorize.
TEST(AutogradFunctional, VectorizedJacobianIsOneBackwardPass) {
  int calls = 0;
  auto fn = [&](const ts::Tensor& x) {
    return ts::utils::checkpoint(
        [&](const ts::Tensor& t) {
          ++calls;
          return (t * t).sin();
        },
        x, ts::utils::CheckpointOptions{.use_reentrant = false});
  };
  ts::Tensor looped = F::jacobian(fn, x0());
  EXPECT_EQ(calls, 1 + 3);
  calls = 0;
  ts::Tensor vectorized = F::jacobian(fn, x0(), false, false, /*vectorize=*/true);
  EXPECT_EQ(calls, 1 + 1);
  EXPECT_TRUE(ts::allclose(vectorized, looped, 1e-14, 0));
}

TEST(AutogradFunctional, BatchedGradOutputs) {
  ts::Tensor x = x0().requires_grad_();
  ts::Tensor y = (x.unsqueeze(1) * y0().select(0, 0)).sin();  // (3, 2)
  ts::Tensor v = test_data({5, 3, 2}, ts::kFloat64, 21);
  V batched = ts::autograd::grad({y}, {x}, {v}, /*retain_graph=*/true, false, false, /*is_grads_batched=*/true);
  ASSERT_EQ(batched[0].sizes(), (ts::Shape{5, 3}));
  for (int64_t b = 0; b < 5; ++b) {
    V one = ts::autograd::grad({y}, {x}, {v.select(0, b)}, /*retain_graph=*/true);
    EXPECT_TRUE(ts::allclose(batched[0].select(0, b), one[0], 1e-14, 0)) << "vector " << b;
  }
  // PyTorch's message for a grad_output of the wrong shape.
  EXPECT_NE(message_of<ts::ShapeError>([&] {
              ts::autograd::grad({y}, {x}, {test_data({5, 2, 3}, ts::kFloat64)}, true, false, false, true);
            }).find("If `is_grads_batched=True`, we interpret the first dimension of each grad_output as the batch "
                    "dimension. The sizes of the remaining dimensions are expected to match the shape of "
                    "corresponding output, but a mismatch was detected: grad_output[0] has a shape of [5, 2, 3] and "
                    "output[0] has a shape of [3, 2]."),
            std::string::npos);
  EXPECT_THROW(ts::autograd::grad({y}, {x}, {}, true, false, false, true), ts::ValueError);
  // A tensor hook sees one vector's gradient at a time, as under PyTorch's vmap.
  ts::Tensor x2 = x0().requires_grad_();
  ts::Tensor h = x2 * 2;
  std::vector<ts::Shape> seen;
  h.register_hook([&](const ts::Tensor& grad) {
    seen.push_back(grad.sizes());
    return grad * 3;
  });
  V hooked = ts::autograd::grad({h.exp()}, {x2}, {test_data({4, 3}, ts::kFloat64, 22)}, true, false, false, true);
  EXPECT_EQ(seen, std::vector<ts::Shape>(4, ts::Shape{3}));
  V plain = ts::autograd::grad({h.exp()}, {x2}, {test_data({4, 3}, ts::kFloat64, 22).select(0, 1)}, true);
  EXPECT_TRUE(ts::allclose(hooked[0].select(0, 1), plain[0], 1e-14, 0));
}

// PyTorch's refusals of vectorize / strategy combinations, in its words.
TEST(AutogradFunctional, VectorizeAndStrategyErrorsAsPyTorch) {
  const V two = {x0(), y0()};
  EXPECT_NE(message_of<ts::ValueError>([&] { F::jacobian(f, two, false, /*strict=*/true, /*vectorize=*/true); })
                .find("jacobian: `strict=True` and `vectorized=True` are not supported together. Please either set "
                      "`strict=False` or `vectorize=False`."),
            std::string::npos);
  EXPECT_NE(message_of<ts::NotImplementedError>([&] { F::jacobian(f, two, false, false, false, "forward-mode"); })
                .find("Computing Jacobian using forward-AD or forward-over-reverse Hessian is only implemented for "
                      "`vectorize=True`."),
            std::string::npos);
  EXPECT_NE(message_of<ts::NotImplementedError>([&] { F::jacobian(f, two, true, false, true, "forward-mode"); })
                .find("`create_graph=True` and `strategy=\"forward-mode\"` are not supported together (yet)."),
            std::string::npos);
  EXPECT_NE(message_of<ts::ValueError>([&] { F::jacobian(f, two, false, false, true, "sideways"); })
                .find("Expected strategy to be either \"forward-mode\" or \"reverse-mode\"."),
            std::string::npos);
  EXPECT_NE(message_of<ts::ValueError>([&] { F::hessian(g, two, false, true, true); })
                .find("hessian: `strict=True` and `vectorized=True` are not supported together."),
            std::string::npos);
}
