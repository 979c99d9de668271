// Derivatives of the indexing ops: gradcheck and gradgradcheck in float64 on contiguous, transposed
// and step-sliced inputs; repeated indices accumulate; negative indices where the op wraps them;
// boolean masks; the in-place forms on non-leaf tensors; values of a few gradients by hand.
#include "common/test_util.h"

namespace ts = tessera;
using namespace tessera::testing;

namespace {

using ts::Tensor;
using V = std::vector<Tensor>;
using Fn = std::function<V(const V&)>;

Tensor i64(std::vector<int64_t> v, ts::Shape s = {}) {
  if (s.empty()) s = {static_cast<int64_t>(v.size())};
  return ts::tensor(v, s, ts::kInt64);
}
Tensor f64(std::vector<double> v, ts::Shape s = {}) {
  if (s.empty()) s = {static_cast<int64_t>(v.size())};
  return ts::tensor(v, s, ts::kFloat64);
}

// Reductions and elementwise ops get their derivatives in their own family; where a derivative here
// uses them (a broadcast gradient summed down by the engine, index_add's alpha), the second-order
// check needs them to be recorded.
bool reductions_differentiable() {
  Tensor x = ts::zeros({2}, ts::kFloat64).requires_grad_();
  return ts::sum(x).requires_grad();
}
bool mul_differentiable() {
  Tensor x = ts::zeros({2}, ts::kFloat64).requires_grad_();
  return ts::mul(x, 2.0).requires_grad();
}

// gradcheck (and gradgradcheck unless `second` is false) of `fn` with every float input given in each
// layout of layouts(); inputs of other dtypes are passed unchanged.
void check_grads(const Fn& fn, const V& inputs, bool second = true) {
  for (const Layout& layout : layouts()) {
    SCOPED_TRACE("layout " + layout.name);
    V in;
    for (const Tensor& t : inputs)
      in.push_back(t.is_floating_point() ? layout.apply(t).requires_grad_() : t);
    std::string report;
    EXPECT_TRUE(ts::autograd::gradcheck(fn, in, {}, &report)) << report;
    if (second) {
      EXPECT_TRUE(ts::autograd::gradgradcheck(fn, in, {}, &report)) << report;
    }
  }
}

Tensor data(const ts::Shape& s, uint64_t seed = 1) { return test_data(s, ts::kFloat64, seed); }

}  // namespace

// ---- index_select ------------------------------------------------------------------------------

TEST(GradIndex, IndexSelectRepeatedIndicesAccumulate) {
  Tensor x = data({4, 3}).requires_grad_();
  Tensor y = ts::index_select(x, 0, i64({3, 0, 3, 3}));
  ASSERT_TRUE(y.requires_grad());
  EXPECT_EQ(y.grad_fn()->name(), "IndexSelectBackward0");
  y.backward(ts::ones({4, 3}, ts::kFloat64));
  EXPECT_EQ(x.grad().tolist<double>(), (std::vector<double>{1, 1, 1, 0, 0, 0, 0, 0, 0, 3, 3, 3}));
}

TEST(GradIndex, IndexSelectGradcheck) {
  for (int64_t dim : {0, 1, -1}) {
    SCOPED_TRACE("dim " + std::to_string(dim));
    check_grads([dim](const V& in) { return V{ts::index_select(in[0], dim, i64({2, 0, 2}))}; }, {data({3, 4})});
  }
  // int32 indices and a 0-dim input.
  Tensor idx32 = ts::tensor(std::vector<int32_t>{1, 1, 0}, {3}, ts::kInt32);
  check_grads([&](const V& in) { return V{ts::index_select(in[0], 1, idx32)}; }, {data({2, 3})});
  check_grads([](const V& in) { return V{ts::index_select(in[0], 0, i64({0}))}; }, {f64({1.5}).reshape({})});
}

// ---- gather / scatter / scatter_add -------------------------------------------------------------

TEST(GradIndex, GatherGradcheck) {
  Tensor idx1 = i64({0, 3, 3, 1, 2, 2}, {3, 2});  // repeated along dim 1
  check_grads([&](const V& in) { return V{ts::gather(in[0], 1, idx1)}; }, {data({3, 4})});
  Tensor idx0 = i64({2, 0, 2, 1, 2, 0}, {2, 3});  // index smaller than x in dim 1
  check_grads([&](const V& in) { return V{ts::gather(in[0], -2, idx0)}; }, {data({3, 4})});
}

TEST(GradIndex, GatherRepeatedIndicesAccumulate) {
  Tensor x = f64({1, 2, 3}).requires_grad_();
  ts::gather(x, 0, i64({2, 2, 0, 2})).backward(f64({1, 10, 100, 1000}));
  EXPECT_EQ(x.grad().tolist<double>(), (std::vector<double>{100, 0, 1011}));
}

TEST(GradIndex, ScatterGradcheck) {
  // Distinct positions within each row, so the result does not depend on the write order; src is
  // larger than index, so only its leading block is read.
  Tensor idx = i64({0, 2, 4, 1, 3, 0}, {2, 3});
  check_grads([&](const V& in) { return V{ts::scatter(in[0], 1, idx, in[1])}; }, {data({3, 5}), data({2, 4}, 2)});
  check_grads([&](const V& in) { return V{ts::scatter(in[0], 1, idx, 7.5)}; }, {data({3, 5})});
}

TEST(GradIndex, ScatterGradientValues) {
  Tensor x = f64({1, 2, 3, 4}).requires_grad_();
  Tensor src = f64({5, 6, 7}).requires_grad_();
  ts::scatter(x, 0, i64({3, 0}), src).backward(f64({1, 2, 3, 4}));
  EXPECT_EQ(x.grad().tolist<double>(), (std::vector<double>{0, 2, 3, 0}));
  EXPECT_EQ(src.grad().tolist<double>(), (std::vector<double>{4, 1, 0}));
}

TEST(GradIndex, ScatterAddGradcheck) {
  Tensor idx = i64({0, 0, 2, 1, 1, 1}, {3, 2});  // repeated along dim 0 and within rows
  check_grads([&](const V& in) { return V{ts::scatter_add(in[0], 0, idx, in[1])}; }, {data({3, 3}), data({3, 4}, 2)});
  check_grads([&](const V& in) { return V{ts::scatter_add(in[0], -1, idx, in[1])}; }, {data({3, 3}), data({3, 2}, 3)});
}

// ---- index_add ----------------------------------------------------------------------------------

TEST(GradIndex, IndexAddGradcheck) {
  Tensor idx = i64({1, 3, 1});
  check_grads([&](const V& in) { return V{ts::index_add(in[0], 1, idx, in[1])}; }, {data({2, 4}), data({2, 3}, 2)});
  check_grads([&](const V& in) { return V{ts::index_add(in[0], 0, idx, in[1], 2.5)}; },
              {data({4, 3}), data({3, 3}, 2)}, /*second=*/false);
}

TEST(GradIndex, IndexAddAlphaGradgradcheck) {
  if (!mul_differentiable())
    GTEST_SKIP() << "index_add's source gradient is scaled by mul, not differentiable in this build";
  check_grads([](const V& in) { return V{ts::index_add(in[0], 0, i64({1, 3, 1}), in[1], 2.5)}; },
              {data({4, 3}), data({3, 3}, 2)});
}

TEST(GradIndex, IndexAddAlphaScalesSourceGradient) {
  Tensor x = ts::zeros({3}, ts::kFloat64).requires_grad_();
  Tensor s = ts::zeros({2}, ts::kFloat64).requires_grad_();
  ts::index_add(x, 0, i64({2, 2}), s, -3).backward(f64({1, 2, 4}));
  EXPECT_EQ(x.grad().tolist<double>(), (std::vector<double>{1, 2, 4}));
  EXPECT_EQ(s.grad().tolist<double>(), (std::vector<double>{-12, -12}));
}

// ---- index / index_put --------------------------------------------------------------------------

TEST(GradIndex, IndexRepeatedAndNegativeIndicesAccumulate) {
  Tensor x = f64({1, 2, 3, 4}, {2, 2}).requires_grad_();
  Tensor y = x.index({i64({1, -1, 0}), i64({-2, 0, 1})});  // x[1,0], x[1,0], x[0,1]
  EXPECT_EQ(y.grad_fn()->name(), "IndexBackward0");
  y.backward(f64({1, 10, 100}));
  EXPECT_EQ(x.grad().tolist<double>(), (std::vector<double>{0, 100, 11, 0}));
}

TEST(GradIndex, IndexGradcheck) {
  // Adjacent indexed dims; indexed dims separated by a slice (the index block goes first); a full
  // slice before the index; negative and repeated values; a 2-D index.
  Tensor a = i64({1, -1, 1}), b = i64({0, 2, -3});
  check_grads([&](const V& in) { return V{in[0].index({a, b})}; }, {data({4, 3, 2})});
  check_grads([&](const V& in) { return V{in[0].index({a, std::nullopt, i64({1, 0, 1})})}; }, {data({4, 3, 2})});
  check_grads([&](const V& in) { return V{in[0].index({std::nullopt, i64({0, 2, 2, -1}, {2, 2})})}; },
              {data({2, 3})});
}

TEST(GradIndex, IndexWithBoolMasks) {
  Tensor mask = ts::tensor(std::vector<bool>{true, false, true, true, false, false}, {2, 3}, ts::kBool);
  check_grads([&](const V& in) { return V{in[0].index({mask})}; }, {data({2, 3, 2})});
  Tensor row = ts::tensor(std::vector<bool>{false, true, true}, {3}, ts::kBool);
  check_grads([&](const V& in) { return V{in[0].index({std::nullopt, row})}; }, {data({2, 3})});
  Tensor yes = ts::scalar_tensor(true, ts::kBool);
  check_grads([&](const V& in) { return V{in[0].index({yes})}; }, {data({2, 3})});
}

TEST(GradIndex, IndexPutGradcheck) {
  Tensor rows = i64({2, -1, 0, 2});  // repeated: accumulated
  check_grads([&](const V& in) { return V{ts::index_put(in[0], {rows}, in[1], true)}; },
              {data({4, 3}), data({4, 3}, 2)});
  Tensor distinct = i64({2, -1, 0});  // without accumulation the written positions must be distinct
  check_grads([&](const V& in) { return V{ts::index_put(in[0], {distinct}, in[1], false)}; },
              {data({4, 3}), data({3, 3}, 2)});
  Tensor mask = ts::tensor(std::vector<bool>{true, false, true, false}, {4}, ts::kBool);
  check_grads([&](const V& in) { return V{ts::index_put(in[0], {std::nullopt, i64({1})}, in[1], false)}; },
              {data({4, 3}), data({4, 1}, 2)});
  check_grads([&](const V& in) { return V{ts::index_put(in[0], {mask}, in[1], true)}; },
              {data({4, 3}), data({2, 3}, 2)});
}

TEST(GradIndex, IndexPutBroadcastValues) {
  Tensor rows = i64({0, 2});
  // values (3) and (1, 1, 3) broadcast to the result (2, 3): their gradient is summed back.
  check_grads([&](const V& in) { return V{ts::index_put(in[0], {rows}, in[1], false)}; }, {data({4, 3}), data({3}, 2)},
              /*second=*/false);
  check_grads([&](const V& in) { return V{ts::index_put(in[0], {rows}, in[1], true)}; },
              {data({4, 3}), data({1, 1, 3}, 2)}, /*second=*/false);
  Tensor x = ts::zeros({3, 2}, ts::kFloat64).requires_grad_();
  Tensor v = ts::zeros({1, 2}, ts::kFloat64).requires_grad_();
  ts::index_put(x, {i64({0, 0, 2})}, v, true).backward(f64({1, 2, 3, 4, 5, 6}, {3, 2}));
  EXPECT_EQ(x.grad().tolist<double>(), (std::vector<double>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(v.grad().tolist<double>(), (std::vector<double>{7, 10}));
}

// ---- masks --------------------------------------------------------------------------------------

TEST(GradIndex, MaskedFillGradcheck) {
  Tensor mask = ts::tensor(std::vector<bool>{true, false, false, true, true, false}, {2, 3}, ts::kBool);
  check_grads([&](const V& in) { return V{ts::masked_fill(in[0], mask, -1.0)}; }, {data({2, 3})});
  Tensor row = ts::tensor(std::vector<bool>{false, true, false}, {3}, ts::kBool);  // broadcast mask
  check_grads([&](const V& in) { return V{in[0].masked_fill(row, 3.0)}; }, {data({2, 3})});
  // x broadcast against a larger mask: its gradient is summed down.
  check_grads([&](const V& in) { return V{ts::masked_fill(in[0], mask, 0.0)}; }, {data({1, 3})}, /*second=*/false);
}

TEST(GradIndex, MaskedSelectGradcheck) {
  Tensor mask = ts::tensor(std::vector<bool>{true, false, true, true, true, false}, {2, 3}, ts::kBool);
  check_grads([&](const V& in) { return V{ts::masked_select(in[0], mask)}; }, {data({2, 3})});
  Tensor row = ts::tensor(std::vector<bool>{true, false, true}, {3}, ts::kBool);
  check_grads([&](const V& in) { return V{in[0].masked_select(row)}; }, {data({2, 3})});
  check_grads([&](const V& in) { return V{ts::masked_select(in[0], mask)}; }, {data({3})}, /*second=*/false);
  Tensor x = f64({1, 2, 3, 4, 5, 6}, {2, 3}).requires_grad_();
  ts::masked_select(x, mask).backward(f64({1, 2, 3, 4}));
  EXPECT_EQ(x.grad().tolist<double>(), (std::vector<double>{1, 0, 2, 3, 4, 0}));
}

// The engine sums a broadcast gradient down to the input's shape with sum, so the second-order check of
// the broadcasting cases above needs sum to be differentiable.
TEST(GradIndex, BroadcastGradgradcheck) {
  if (!reductions_differentiable()) GTEST_SKIP() << "sum is not differentiable in this build";
  Tensor rows = i64({0, 2});
  check_grads([&](const V& in) { return V{ts::index_put(in[0], {rows}, in[1], false)}; }, {data({4, 3}), data({3}, 2)});
  check_grads([&](const V& in) { return V{ts::index_put(in[0], {rows}, in[1], true)}; },
              {data({4, 3}), data({1, 1, 3}, 2)});
  Tensor mask = ts::tensor(std::vector<bool>{true, false, false, true, true, false}, {2, 3}, ts::kBool);
  check_grads([&](const V& in) { return V{ts::masked_fill(in[0], mask, 0.0)}; }, {data({1, 3})});
  check_grads([&](const V& in) { return V{ts::masked_select(in[0], mask)}; }, {data({3})});
}

// ---- embedding ----------------------------------------------------------------------------------

TEST(GradIndex, EmbeddingGradcheck) {
  Tensor idx = i64({4, 0, 4, 2, 1, 4}, {2, 3});
  check_grads([&](const V& in) { return V{ts::embedding(in[0], idx)}; }, {data({5, 3})});
  Tensor idx32 = ts::tensor(std::vector<int32_t>{1, 1, 3}, {3}, ts::kInt32);
  check_grads([&](const V& in) { return V{ts::embedding(in[0], idx32)}; }, {data({4, 2})});
}

TEST(GradIndex, EmbeddingPaddingRowGetsNoGradient) {
  Tensor idx = i64({4, 0, 4, 2, 1, 4}, {2, 3});
  for (int64_t pad : {4, -1}) {
    Tensor w = data({5, 2}).requires_grad_();
    Tensor y = ts::embedding(w, idx, pad);
    EXPECT_EQ(y.grad_fn()->name(), "EmbeddingBackward0");
    y.backward(ts::ones({2, 3, 2}, ts::kFloat64));
    EXPECT_EQ(w.grad().tolist<double>(), (std::vector<double>{1, 1, 1, 1, 1, 1, 0, 0, 0, 0}));
  }
  // The padding row is masked in the derivative's derivative too.
  std::string report;
  EXPECT_TRUE(ts::autograd::gradgradcheck([&](const V& in) { return V{ts::embedding(in[0], idx, 4)}; },
                                          {data({5, 2}).requires_grad_()}, {}, &report))
      << report;
}

// ---- in-place forms on non-leaf tensors (recorded as copy_ of the out-of-place result) -------------

TEST(GradIndex, IndexPutInPlaceOnNonLeaf) {
  Tensor x = f64({1, 2, 3, 4, 5, 6}, {3, 2}).requires_grad_();
  Tensor v = f64({7, 8}, {1, 2}).requires_grad_();
  Tensor y = x.flip({0});
  y.index_put_({i64({1})}, v);
  EXPECT_EQ(y.tolist<double>(), (std::vector<double>{5, 6, 7, 8, 1, 2}));
  EXPECT_EQ(y.grad_fn()->name(), "CopyBackward0");
  y.backward(f64({1, 2, 3, 4, 5, 6}, {3, 2}));
  EXPECT_EQ(x.grad().tolist<double>(), (std::vector<double>{5, 6, 0, 0, 1, 2}));
  EXPECT_EQ(v.grad().tolist<double>(), (std::vector<double>{3, 4}));

  std::string report;
  Fn fn = [](const V& in) {
    Tensor t = in[0].clone();
    t.index_put_({i64({0, 0}), i64({1, 1})}, in[1], /*accumulate=*/true);
    return V{t};
  };
  const V in = {data({2, 3}).requires_grad_(), data({2}, 2).requires_grad_()};
  EXPECT_TRUE(ts::autograd::gradcheck(fn, in, {}, &report)) << report;
  EXPECT_TRUE(ts::autograd::gradgradcheck(fn, in, {}, &report)) << report;
}

TEST(GradIndex, MaskedFillInPlaceOnNonLeaf) {
  Tensor x = f64({1, 2, 3, 4}, {2, 2}).requires_grad_();
  Tensor mask = ts::tensor(std::vector<bool>{false, true, true, false}, {2, 2}, ts::kBool);
  Tensor y = x.clone();
  y.masked_fill_(mask, 9.0);
  EXPECT_EQ(y.tolist<double>(), (std::vector<double>{1, 9, 9, 4}));
  y.backward(f64({1, 2, 3, 4}, {2, 2}));
  EXPECT_EQ(x.grad().tolist<double>(), (std::vector<double>{1, 0, 0, 4}));

  std::string report;
  Fn fn = [&](const V& in) {
    Tensor t = in[0].transpose(0, 1).clone();
    t.masked_fill_(mask, 0.5);
    return V{t};
  };
  EXPECT_TRUE(ts::autograd::gradcheck(fn, {data({2, 2}).requires_grad_()}, {}, &report)) << report;
  EXPECT_TRUE(ts::autograd::gradgradcheck(fn, {data({2, 2}).requires_grad_()}, {}, &report)) << report;
}

TEST(GradIndex, InPlaceOnLeafIsRefused) {
  Tensor x = data({3, 2}).requires_grad_();
  EXPECT_THROW(x.index_put_({i64({0})}, ts::zeros({2}, ts::kFloat64)), ts::ValueError);
  EXPECT_THROW(x.masked_fill_(ts::ones({3, 2}, ts::kBool), 0.0), ts::ValueError);
  EXPECT_THROW(x.scatter_(0, i64({0}, {1, 1}), ts::zeros({1, 1}, ts::kFloat64)), ts::ValueError);
}

// ---- non-differentiable results ----------------------------------------------------------------

TEST(GradIndex, IntegerResultsCarryNoGradient) {
  Tensor x = data({2, 3}).requires_grad_();
  EXPECT_FALSE(ts::nonzero(x).requires_grad());
  EXPECT_FALSE(ts::one_hot(i64({0, 2})).requires_grad());
  // Indices and masks never take a gradient: only x receives one.
  Tensor idx = i64({1, 0});
  ts::index_select(x, 1, idx).backward(ts::ones({2, 2}, ts::kFloat64));
  EXPECT_FALSE(idx.requires_grad());
  EXPECT_EQ(x.grad().tolist<double>(), (std::vector<double>{1, 1, 0, 1, 1, 0}));
  // No recording under no_grad.
  ts::NoGradGuard g;
  EXPECT_FALSE(ts::gather(x, 0, i64({0, 1}, {1, 2})).requires_grad());
}
