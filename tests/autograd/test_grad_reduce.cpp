// Derivatives of the reductions and scans: gradcheck and gradgradcheck in float64 on contiguous,
// transposed and step-sliced inputs, over several dim lists (negative ones included), keepdim on and
// off, and 0-dim inputs; PyTorch's subgradients at ties (amax splits evenly, max over a dim sends the
// gradient to the returned index), zeros in prod and cumprod, and zero norms and constant slices.
// Expected values at ties and zeros were computed with PyTorch 1.13.
#include <cmath>
#include <limits>

#include "autograd/reduce_linalg_util.h"

namespace ts = tessera;
using namespace tessera::testing;
using V = std::vector<ts::Tensor>;
using DimList = std::vector<int64_t>;

namespace {

// A reduction under test: the op at (dims, keepdim) and the ops its derivative is written with.
struct ReduceCase {
  std::string name;
  std::function<ts::Tensor(const ts::Tensor&, const DimList&, bool)> op;
  std::vector<std::string> backward_ops;
};

std::string dims_str(const DimList& d) {
  std::string s = "{";
  for (size_t i = 0; i < d.size(); ++i) {
    if (i) s += ",";
    s += std::to_string(d[i]);
  }
  return s + "}";
}

// Every case over dim lists x keepdim x layouts on a (2, 3, 4) input, and on a 0-dim input.
void check_reduction(const ReduceCase& rc, const std::vector<DimList>& dim_lists, uint64_t seed) {
  ts::Tensor value = test_data({2, 3, 4}, ts::kFloat64, seed);
  for (const Layout& l : layouts())
    for (const DimList& dims : dim_lists)
      for (bool keepdim : {false, true}) {
        ts::Tensor x = leaf_in(l, value);
        check_grads(rc.name + " dims " + dims_str(dims) + (keepdim ? " keepdim " : " ") + l.name,
                    [&](const V& in) { return V{rc.op(in[0], dims, keepdim)}; }, {x}, rc.backward_ops);
      }
  for (const DimList& dims : {DimList{}, DimList{0}, DimList{-1}})
    for (bool keepdim : {false, true}) {
      ts::Tensor x = ts::scalar_tensor(0.7, ts::kFloat64).requires_grad_();
      check_grads(rc.name + " 0-dim dims " + dims_str(dims), [&](const V& in) { return V{rc.op(in[0], dims, keepdim)}; },
                  {x}, rc.backward_ops);
    }
}

const std::vector<DimList> kDimLists = {{}, {0}, {-1}, {1}, {0, 2}, {-1, 0}, {0, 1, 2}};

}  // namespace

TEST(GradReduce, SumMeanProd) {
  check_reduction({"sum", [](const ts::Tensor& x, const DimList& d, bool k) { return ts::sum(x, d, k); }, {}}, kDimLists, 1);
  check_reduction({"mean", [](const ts::Tensor& x, const DimList& d, bool k) { return ts::mean(x, d, k); }, {"div"}},
                  kDimLists, 2);
  check_reduction({"prod", [](const ts::Tensor& x, const DimList& d, bool k) { return ts::prod(x, d, k); }, {"mul", "div"}},
                  kDimLists, 3);
}

TEST(GradReduce, SumAndMeanWithDtypeCastTheGradientBack) {
  ts::Tensor x = test_data({3, 4}, ts::kFloat32, 4).requires_grad_();
  ts::sum(x, {1}, false, ts::kFloat64).sum().backward();
  EXPECT_EQ(x.grad().dtype(), ts::kFloat32);
  EXPECT_TRUE(grad_is(x.grad(), std::vector<double>(12, 1.0)));
  x.zero_grad();
  ts::mean(x, {0}, true, ts::kFloat64).sum().backward();
  EXPECT_EQ(x.grad().dtype(), ts::kFloat32);
  EXPECT_TRUE(grad_is(x.grad(), std::vector<double>(12, 1.0 / 3), 1e-7));
  ts::Tensor y = leaf({2, 3}, 5);
  check_grads("prod dtype", [](const V& in) { return V{ts::prod(in[0], {1}, false, ts::kFloat64)}; }, {y}, {"mul", "div"});
  check_grads("cumsum dtype", [](const V& in) { return V{ts::cumsum(in[0], 1, ts::kFloat64)}; }, {y}, {"flip"});
}

TEST(GradReduce, BackwardTwiceAccumulates) {
  ts::Tensor x = leaf({2, 3}, 6);
  x.sum().backward();
  x.sum().backward();
  EXPECT_TRUE(grad_is(x.grad(), std::vector<double>(6, 2.0)));
  ts::Tensor m = leaf({4}, 7);
  ts::mean(m).backward();
  ts::mean(m).backward();
  EXPECT_TRUE(grad_is(m.grad(), std::vector<double>(4, 0.5)));
}

TEST(GradReduce, ProdWithZeros) {
  // One zero in a row, two zeros in a row, and full products with one and with two zeros.
  ts::Tensor one = ts::tensor({2.0, 0.0, 3.0, 1.0, 4.0, 5.0}, ts::kFloat64).view({2, 3}).requires_grad_();
  ts::prod(one, {1}).backward(ts::tensor({1.0, 2.0}, ts::kFloat64));
  EXPECT_TRUE(grad_is(one.grad(), {0, 6, 0, 40, 10, 8}));
  one.zero_grad();
  ts::prod(one).backward();
  EXPECT_TRUE(grad_is(one.grad(), {0, 120, 0, 0, 0, 0}));
  ts::Tensor two = ts::tensor({0.0, 0.0, 3.0, 1.0, 4.0, 5.0}, ts::kFloat64).view({2, 3}).requires_grad_();
  ts::prod(two, {1}).backward(ts::tensor({1.0, 2.0}, ts::kFloat64));
  EXPECT_TRUE(grad_is(two.grad(), {0, 0, 0, 40, 10, 8}));
  two.zero_grad();
  ts::prod(two).backward();
  EXPECT_TRUE(grad_is(two.grad(), {0, 0, 0, 0, 0, 0}));
  // prod is a polynomial, so finite differences hold at zeros too; so do second derivatives, which
  // are not zero with two zeros in a slice.
  const std::vector<std::string> ops = {"mul", "div", "cat", "flip"};
  for (const ts::Tensor& base : {one, two}) {
    for (const Layout& l : layouts()) {
      ts::Tensor x = leaf_in(l, base);
      check_grads("prod dim 1 zeros " + l.name, [](const V& in) { return V{ts::prod(in[0], {1})}; }, {x}, ops);
      check_grads("prod dim -2 keepdim zeros " + l.name, [](const V& in) { return V{ts::prod(in[0], {-2}, true)}; },
                  {x}, ops);
      check_grads("prod all zeros " + l.name, [](const V& in) { return V{ts::prod(in[0])}; }, {x}, ops);
    }
  }
  ts::Tensor z3 = ts::tensor({1.5, 0.0, 2.0, -1.0, 0.0, 0.5, 3.0, 0.0, 1.0, 2.0, -2.0, 0.0}, ts::kFloat64)
                      .view({2, 3, 2})
                      .requires_grad_();
  check_grads("prod dims {0,2} zeros", [](const V& in) { return V{ts::prod(in[0], {0, 2})}; }, {z3}, ops);
}

TEST(GradReduce, AmaxAminSplitTiesEvenly) {
  check_reduction({"amax", [](const ts::Tensor& x, const DimList& d, bool k) { return ts::amax(x, d, k); }, {"mul", "div"}},
                  kDimLists, 8);
  check_reduction({"amin", [](const ts::Tensor& x, const DimList& d, bool k) { return ts::amin(x, d, k); }, {"mul", "div"}},
                  kDimLists, 9);
  const std::vector<double> ties = {1, 3, 3, 2, 2, 0};
  ts::Tensor x = ts::tensor(ties, {2, 3}, ts::kFloat64).requires_grad_();
  ts::amax(x, {1}).backward(ts::tensor({1.0, 2.0}, ts::kFloat64));
  EXPECT_TRUE(grad_is(x.grad(), {0, 0.5, 0.5, 1, 1, 0}));
  x.zero_grad();
  ts::amin(x, {1}).backward(ts::tensor({1.0, 2.0}, ts::kFloat64));
  EXPECT_TRUE(grad_is(x.grad(), {1, 0, 0, 0, 0, 2}));
  x.zero_grad();
  ts::amax(x).backward();
  EXPECT_TRUE(grad_is(x.grad(), {0, 0.5, 0.5, 0, 0, 0}));
  // At a tie the central difference is the even split too, so gradcheck holds there (not
  // gradgradcheck: the first derivative jumps at a tie).
  ts::Tensor t = ts::tensor(ties, {2, 3}, ts::kFloat64).requires_grad_();
  check_grads("amax ties", [](const V& in) { return V{ts::amax(in[0], {1}, true)}; }, {t}, {}, false);
}

TEST(GradReduce, MaxMinOverAllDims) {
  for (const Layout& l : layouts()) {
    ts::Tensor x = leaf_in(l, test_data({3, 4}, ts::kFloat64, 10));
    check_grads("max() " + l.name, [](const V& in) { return V{ts::max(in[0])}; }, {x}, {"mul", "div"});
    check_grads("min() " + l.name, [](const V& in) { return V{ts::min(in[0])}; }, {x}, {"mul", "div"});
  }
  ts::Tensor s = ts::scalar_tensor(-1.25, ts::kFloat64).requires_grad_();
  check_grads("max() 0-dim", [](const V& in) { return V{ts::max(in[0])}; }, {s}, {"mul", "div"});
  ts::Tensor x = ts::tensor({1.0, 3.0, 3.0, 2.0}, ts::kFloat64).view({2, 2}).requires_grad_();
  ts::max(x).backward();
  EXPECT_TRUE(grad_is(x.grad(), {0, 0.5, 0.5, 0}));
  x.zero_grad();
  ts::min(x).backward();
  EXPECT_TRUE(grad_is(x.grad(), {1, 0, 0, 0}));
  // A NaN is the maximum: the gradient goes to it.
  ts::Tensor n = ts::tensor({1.0, std::nan(""), 3.0, 2.0}, ts::kFloat64).requires_grad_();
  ts::max(n).backward();
  EXPECT_TRUE(grad_is(n.grad(), {0, 1, 0, 0}));
}

TEST(GradReduce, MaxMinOverADimSendTheGradientToTheIndex) {
  // The backward scatters into zeros; its own derivative is scatter's.
  for (const Layout& l : layouts())
    for (int64_t dim : {0, 1, -1, 2})
      for (bool keepdim : {false, true}) {
        ts::Tensor x = leaf_in(l, test_data({2, 3, 4}, ts::kFloat64, 11));
        const std::string what = " dim " + std::to_string(dim) + (keepdim ? " keepdim " : " ") + l.name;
        check_grads("max" + what, [&](const V& in) { return V{std::get<0>(ts::max(in[0], dim, keepdim))}; }, {x},
                    {"scatter"});
        check_grads("min" + what, [&](const V& in) { return V{std::get<0>(ts::min(in[0], dim, keepdim))}; }, {x},
                    {"scatter"});
      }
  ts::Tensor s = ts::scalar_tensor(2.0, ts::kFloat64).requires_grad_();
  check_grads("max(0) 0-dim", [](const V& in) { return V{std::get<0>(ts::max(in[0], 0))}; }, {s}, {"scatter"});
  // Ties: all of the gradient to the returned index (the first maximum, as PyTorch's CPU kernel).
  ts::Tensor x = ts::tensor({1.0, 3.0, 3.0, 2.0, 2.0, 0.0}, ts::kFloat64).view({2, 3}).requires_grad_();
  auto [values, indices] = ts::max(x, 1);
  EXPECT_EQ(indices.tolist<int64_t>(), (std::vector<int64_t>{1, 0}));
  values.backward(ts::tensor({1.0, 2.0}, ts::kFloat64));
  EXPECT_TRUE(grad_is(x.grad(), {0, 1, 0, 2, 0, 0}));
  // Writing into the returned indices afterwards does not move the gradient.
  x.zero_grad();
  auto [v2, i2] = ts::min(x, 1, true);
  EXPECT_EQ(i2.tolist<int64_t>(), (std::vector<int64_t>{0, 2}));
  i2.fill_(1);
  v2.sum().backward();
  EXPECT_TRUE(grad_is(x.grad(), {1, 0, 0, 0, 0, 1}));
  // argmax/argmin/any/all carry no gradient.
  ts::Tensor y = leaf({3}, 12);
  EXPECT_FALSE(ts::argmax(y).requires_grad());
  EXPECT_FALSE(ts::argmin(y, 0).requires_grad());
  EXPECT_FALSE(std::get<1>(ts::max(y, 0)).requires_grad());
  EXPECT_FALSE(ts::any(y).requires_grad());
  EXPECT_FALSE(ts::all(y).requires_grad());
}

TEST(GradReduce, VarStdVarMean) {
  for (double correction : {0.0, 1.0}) {
    const std::string c = " correction " + std::to_string(static_cast<int>(correction));
    check_reduction({"var" + c,
                     [correction](const ts::Tensor& x, const DimList& d, bool k) { return ts::var(x, d, correction, k); },
                     {"mul", "sub", "div"}},
                    {{}, {0}, {-1}, {0, 2}, {-1, -2}}, 13);
    check_reduction({"std" + c,
                     [correction](const ts::Tensor& x, const DimList& d, bool k) { return ts::std(x, d, correction, k); },
                     {"mul", "sub", "div", "where"}},
                    {{}, {1}, {-1}, {2, 0}}, 14);
  }
  // var_mean: both outputs at once (gradcheck seeds each).
  for (const Layout& l : layouts())
    for (bool keepdim : {false, true}) {
      ts::Tensor x = leaf_in(l, test_data({2, 3, 4}, ts::kFloat64, 15));
      check_grads("var_mean " + l.name,
                  [keepdim](const V& in) {
                    auto [v, m] = ts::var_mean(in[0], DimList{-1, 0}, 1, keepdim);
                    return V{v, m};
                  },
                  {x}, {"mul", "sub", "div", "add"});
    }
  // Values: var with correction 0 and 1, and a constant slice under std (gradient 0 there).
  ts::Tensor x = ts::tensor({1.0, 2.0, 4.0}, ts::kFloat64).view({1, 3}).requires_grad_();
  ts::var(x, DimList{1}, 0).sum().backward();
  EXPECT_TRUE(grad_is(x.grad(), {-8.0 / 9, -2.0 / 9, 10.0 / 9}));
  x.zero_grad();
  ts::var(x, DimList{1}, 1).sum().backward();
  EXPECT_TRUE(grad_is(x.grad(), {-4.0 / 3, -1.0 / 3, 5.0 / 3}));
  ts::Tensor s = ts::tensor({1.0, 1.0, 1.0, 1.0, 2.0, 4.0}, ts::kFloat64).view({2, 3}).requires_grad_();
  ts::std(s, DimList{1}).sum().backward();
  EXPECT_TRUE(grad_is(s.grad(), {0, 0, 0, -0.43643578047198484, -0.10910894511799625, 0.5455447255899809}, 1e-10));
}

TEST(GradReduce, Norms) {
  const double inf = std::numeric_limits<double>::infinity();
  struct P {
    double p;
    std::vector<std::string> ops;
  };
  for (const P& p : std::vector<P>{{1, {"mul", "sign"}},
                                   {2, {"mul", "div", "where"}},
                                   {3, {"mul", "div", "where", "pow", "abs"}},
                                   {1.5, {"mul", "div", "where", "pow", "abs", "sign"}},
                                   {0.5, {"mul", "div", "where", "pow", "abs", "sign"}},
                                   {inf, {"mul", "div", "abs", "sign"}},
                                   {-inf, {"mul", "div", "abs", "sign"}}}) {
    check_reduction({"norm p " + std::to_string(p.p),
                     [&p](const ts::Tensor& x, const DimList& d, bool k) { return ts::norm(x, p.p, d, k); }, p.ops},
                    {{}, {0}, {-1}, {0, 2}}, 16);
  }
  check_reduction({"norm fro", [](const ts::Tensor& x, const DimList& d, bool k) { return ts::norm(x, "fro", d, k); },
                   {"mul", "div", "where"}},
                  {{}, {-1, -2}}, 17);
  // The 2-norm of zeros: subgradient 0, as PyTorch; the 0-"norm" counts and has gradient 0.
  ts::Tensor z = ts::zeros({3}, ts::kFloat64).requires_grad_();
  ts::norm(z).backward();
  EXPECT_TRUE(grad_is(z.grad(), {0, 0, 0}));
  ts::Tensor x = leaf({4}, 18);
  ts::norm(x, 0.0).backward();
  EXPECT_TRUE(grad_is(x.grad(), {0, 0, 0, 0}));
  ts::Tensor r = ts::tensor({3.0, -4.0}, ts::kFloat64).requires_grad_();
  ts::norm(r).backward();
  EXPECT_TRUE(grad_is(r.grad(), {0.6, -0.8}));
}

TEST(GradReduce, Logsumexp) {
  check_reduction({"logsumexp", [](const ts::Tensor& x, const DimList& d, bool k) { return ts::logsumexp(x, d, k); },
                   {"mul", "exp", "sub"}},
                  kDimLists, 19);
  // Large inputs: the gradient is the softmax, computed from the saved result without overflow.
  ts::Tensor x = ts::tensor({1000.0, 1000.0}, ts::kFloat64).requires_grad_();
  ts::logsumexp(x, {0}).backward();
  EXPECT_TRUE(grad_is(x.grad(), {0.5, 0.5}));
}

TEST(GradReduce, Cumsum) {
  for (const Layout& l : layouts())
    for (int64_t dim : {0, 1, -1}) {
      ts::Tensor x = leaf_in(l, test_data({3, 4}, ts::kFloat64, 20));
      check_grads("cumsum dim " + std::to_string(dim) + " " + l.name,
                  [dim](const V& in) { return V{ts::cumsum(in[0], dim)}; }, {x}, {"flip"});
    }
  ts::Tensor s = ts::scalar_tensor(1.5, ts::kFloat64).requires_grad_();
  check_grads("cumsum 0-dim", [](const V& in) { return V{ts::cumsum(in[0], 0)}; }, {s}, {"flip"});
  ts::Tensor v = leaf({4}, 21);
  ts::cumsum(v, 0).backward(ts::tensor({1.0, 2.0, 3.0, 4.0}, ts::kFloat64));
  EXPECT_TRUE(grad_is(v.grad(), {10, 9, 7, 4}));
}

TEST(GradReduce, Cumprod) {
  const std::vector<std::string> ops = {"mul", "div", "flip"};
  for (const Layout& l : layouts())
    for (int64_t dim : {0, 1, -1}) {
      ts::Tensor x = leaf_in(l, test_data({3, 4}, ts::kFloat64, 22));
      check_grads("cumprod dim " + std::to_string(dim) + " " + l.name,
                  [dim](const V& in) { return V{ts::cumprod(in[0], dim)}; }, {x}, ops);
    }
  ts::Tensor s = ts::scalar_tensor(1.5, ts::kFloat64).requires_grad_();
  check_grads("cumprod 0-dim", [](const V& in) { return V{ts::cumprod(in[0], 0)}; }, {s}, ops);
  // Zeros: values against PyTorch, then finite differences (cumprod is a polynomial) at first and
  // second order, the second through the exact formula a differentiable backward uses.
  ts::Tensor z = ts::tensor({2.0, 0.0, 3.0, 0.0, 5.0}, ts::kFloat64).requires_grad_();
  ts::cumprod(z, 0).backward(ts::tensor({1.0, 2.0, 3.0, 4.0, 5.0}, ts::kFloat64));
  EXPECT_TRUE(grad_is(z.grad(), {1, 22, 0, 0, 0}));
  ts::Tensor z1 = ts::tensor({2.0, -1.0, 0.0, 3.0, 5.0}, ts::kFloat64).requires_grad_();
  ts::cumprod(z1, 0).backward(ts::tensor({1.0, 2.0, 3.0, 4.0, 5.0}, ts::kFloat64));
  EXPECT_TRUE(grad_is(z1.grad(), {-1, 4, -180, 0, 0}));
  const std::vector<std::string> zero_ops = {"mul", "div", "flip", "cat", "where", "add"};
  ts::Tensor zz = ts::tensor({2.0, 0.0, 3.0, 0.0, 5.0, 0.0, 1.5, -2.0, 0.5, 0.0, 0.0, 1.0, 4.0, 1.0, 1.0}, ts::kFloat64)
                      .view({3, 5});
  for (const Layout& l : layouts())
    for (int64_t dim : {1, 0}) {
      ts::Tensor x = leaf_in(l, zz);
      check_grads("cumprod zeros dim " + std::to_string(dim) + " " + l.name,
                  [dim](const V& in) { return V{ts::cumprod(in[0], dim)}; }, {x}, zero_ops);
    }
}
