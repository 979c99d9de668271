// Derivatives of the joining, rearranging and ordering ops: gradcheck and gradgradcheck in float64 on
// contiguous, transposed and step-sliced inputs; cat across dtypes; every pad mode with positive,
// zero and negative amounts; sort/topk on distinct values; the ops with integer results record nothing.
#include "common/test_util.h"

namespace ts = tessera;
using namespace tessera::testing;

namespace {

using ts::Tensor;
using V = std::vector<Tensor>;
using Fn = std::function<V(const V&)>;

Tensor f64(std::vector<double> v, ts::Shape s = {}) {
  if (s.empty()) s = {static_cast<int64_t>(v.size())};
  return ts::tensor(v, s, ts::kFloat64);
}
Tensor data(const ts::Shape& s, uint64_t seed = 1) { return test_data(s, ts::kFloat64, seed); }

// repeat's and repeat_interleave's derivatives sum over the copies; sum gets its own derivative in the
// reduce family, so their second-order check needs it recorded.
bool reductions_differentiable() {
  Tensor x = ts::zeros({2}, ts::kFloat64).requires_grad_();
  return ts::sum(x).requires_grad();
}

// gradcheck (and gradgradcheck unless `second` is false) of `fn` with every float input given in each
// layout of layouts().
void check_grads(const Fn& fn, const V& inputs, bool second = true) {
  for (const Layout& layout : layouts()) {
    SCOPED_TRACE("layout " + layout.name);
    V in;
    for (const Tensor& t : inputs) in.push_back(t.is_floating_point() ? layout.apply(t).requires_grad_() : t);
    std::string report;
    EXPECT_TRUE(ts::autograd::gradcheck(fn, in, {}, &report)) << report;
    if (second) {
      EXPECT_TRUE(ts::autograd::gradgradcheck(fn, in, {}, &report)) << report;
    }
  }
}

std::string str(const std::vector<int64_t>& v) {
  std::string s;
  for (int64_t x : v) s += std::to_string(x) + " ";
  return s;
}

}  // namespace

// ---- split / chunk / unbind (Note [Split into pieces]) ------------------------------------------

TEST(GradShapeOps, SplitChunkUnbindGradcheck) {
  for (int64_t dim : {0, 1, -1}) {
    SCOPED_TRACE("dim " + std::to_string(dim));
    // Every piece used, each with its own weight so that a piece landing in the wrong place shows.
    auto weighted = [](const V& pieces) {
      Tensor s = ts::zeros({}, ts::kFloat64);
      for (size_t i = 0; i < pieces.size(); ++i) s = s + ts::sum(pieces[i] * static_cast<double>(i + 1));
      return s;
    };
    check_grads([&](const V& in) { return V{weighted(in[0].split(2, dim))}; }, {data({5, 5})});
    check_grads([&](const V& in) { return V{weighted(in[0].split({1, 0, 4}, dim))}; }, {data({5, 5})});
    check_grads([&](const V& in) { return V{weighted(in[0].chunk(3, dim))}; }, {data({4, 5})});
    check_grads([&](const V& in) { return V{weighted(in[0].unbind(dim))}; }, {data({3, 4})});
    // Pieces returned as outputs (the gradient of each comes in separately).
    check_grads([dim](const V& in) { return in[0].split(3, dim); }, {data({5, 6})});
  }
}

TEST(GradShapeOps, SplitRecordsOneNodeAndUnusedPiecesGetZeros) {
  Tensor x = data({6, 4}).requires_grad_();
  V qkv = x.split(2, 0);
  ASSERT_EQ(qkv.size(), 3u);
  for (const Tensor& p : qkv) {
    ASSERT_TRUE(p.grad_fn());
    EXPECT_EQ(p.grad_fn()->name(), "SplitBackward0");
    EXPECT_EQ(p.grad_fn(), qkv[0].grad_fn());  // one node for the three pieces
  }
  EXPECT_EQ(x.unbind(1)[2].grad_fn()->name(), "UnbindBackward0");
  ts::sum(qkv[1] * 3.0).backward();  // only the middle piece takes part
  Tensor expected = ts::zeros({6, 4}, ts::kFloat64);
  expected.narrow(0, 2, 2).fill_(3.0);
  EXPECT_TRUE(ts::equal(x.grad(), expected)) << x.grad();
}

// Pieces' gradients that already lie side by side in one buffer (here cat's backward hands out views of
// its gradient) are joined as a view, without a cat (Note [Packed attention gradients]); a .grad taken
// from such a view does not alias a gradient someone else still holds.
int64_t cats_in_backward(const Tensor& loss) {
  ts::profiler::profile p;
  loss.backward();
  p.stop();
  const ts::profiler::KeyAverages averages = p.key_averages();  // find() points into it: keep it alive
  const ts::profiler::KeyAverage* cat = averages.find("cat");
  return cat ? cat->count : 0;
}

TEST(GradShapeOps, SplitOfAdjacentGradientsIsAView) {
  for (int64_t dim : {0, 1}) {
    SCOPED_TRACE(dim);
    const Tensor w = data({6, 6}, 7);
    Tensor x = data({6, 6}).requires_grad_();
    EXPECT_EQ(cats_in_backward(ts::sum(ts::cat(x.split(2, dim), dim) * w)), 0);
    EXPECT_TRUE(ts::equal(x.grad(), w));
    // Separately computed gradients are concatenated.
    Tensor x2 = data({6, 6}).requires_grad_();
    V pieces = x2.split(2, dim);
    Tensor loss = ts::sum(pieces[0] * 2.0) + ts::sum(pieces[1] * 3.0) + ts::sum(pieces[2] * 4.0);
    EXPECT_EQ(cats_in_backward(loss), 1);
    // A retained piece gradient keeps its own values when .grad is changed in place.
    Tensor x3 = data({6, 6}).requires_grad_();
    V kept = x3.split(2, dim);
    for (Tensor& k : kept) k.retain_grad();
    ts::sum(ts::cat(kept, dim) * w).backward();
    EXPECT_TRUE(ts::equal(x3.grad(), w));
    x3.grad().zero_();
    EXPECT_TRUE(ts::equal(kept[1].grad(), w.narrow(dim, 2, 2))) << kept[1].grad();
    // The joined view lies over the caller's gradient: .grad is a copy of it, not an alias.
    Tensor x4 = data({6, 6}).requires_grad_();
    const Tensor g = data({6, 6}, 8), g_before = g.clone();
    ts::cat(x4.split(2, dim), dim).backward(g);
    EXPECT_TRUE(ts::equal(x4.grad(), g_before));
    EXPECT_NE(x4.grad().data_ptr(), g.data_ptr());
    x4.grad().zero_();
    EXPECT_TRUE(ts::equal(g, g_before));
  }
}

// A leaf's .grad does not keep a larger buffer alive: a gradient that is a view into one (cat's
// backward hands each input a slice of its gradient) is copied.
TEST(GradShapeOps, LeafGradientIsNotAViewIntoALargerBuffer) {
  Tensor a = data({2, 3}).requires_grad_(), b = data({4, 3}, 2).requires_grad_();
  ts::sum(ts::cat({a, b}, 0) * data({6, 3}, 3)).backward();
  EXPECT_FALSE(a.grad().is_alias_of(b.grad()));
  // Each .grad's storage holds just its elements: a view of all 18 elements of cat's gradient is out
  // of bounds.
  for (const Tensor* t : {&a, &b}) EXPECT_ANY_THROW(t->grad().as_strided({18}, {1}, 0));
}

TEST(GradShapeOps, InPlaceOnASplitPieceIsRefused) {
  Tensor x = data({4, 3}).requires_grad_();
  Tensor y = x * 2.0;
  V pieces = y.split(2, 0);
  // PyTorch's rule and message (Note [View tracking]).
  EXPECT_NE(ts::testing::message_of<ts::ValueError>([&] { pieces[0].mul_(2.0); })
                .find("Output 0 of SplitBackward0 is a view and is being modified inplace."),
            std::string::npos);
  EXPECT_NE(ts::testing::message_of<ts::ValueError>([&] { y.unbind(0)[1].add_(1.0); })
                .find("Output 1 of UnbindBackward0 is a view and is being modified inplace."),
            std::string::npos);
}

// ---- cat / stack --------------------------------------------------------------------------------

TEST(GradShapeOps, CatGradcheck) {
  for (int64_t dim : {0, 1, -1}) {
    SCOPED_TRACE("dim " + std::to_string(dim));
    ts::Shape b = dim == 0 ? ts::Shape{1, 3} : ts::Shape{2, 4};
    check_grads([dim](const V& in) { return V{ts::cat(in, dim)}; }, {data({2, 3}), data(b, 2), data({2, 3}, 3)});
  }
}

TEST(GradShapeOps, CatAcrossDtypesGivesEachInputItsDtype) {
  Tensor a = test_data({2, 2}, ts::kFloat32).requires_grad_();
  Tensor b = data({2, 3}).requires_grad_();
  Tensor c = ts::tensor(std::vector<int64_t>{1, 2}, {2, 1}, ts::kInt64);
  Tensor empty = ts::empty({0}, ts::kFloat64).requires_grad_();  // legacy empty: skipped, no gradient
  Tensor y = ts::cat({a, empty, c, b}, 1);
  ASSERT_EQ(y.dtype(), ts::kFloat64);
  EXPECT_EQ(y.grad_fn()->name(), "CatBackward0");
  y.backward(ts::arange(12, ts::kFloat64).reshape({2, 6}));
  EXPECT_EQ(a.grad().dtype(), ts::kFloat32);
  EXPECT_EQ(a.grad().tolist<double>(), (std::vector<double>{0, 1, 6, 7}));
  EXPECT_EQ(b.grad().dtype(), ts::kFloat64);
  EXPECT_EQ(b.grad().tolist<double>(), (std::vector<double>{3, 4, 5, 9, 10, 11}));
  // float64 cat with a float32 input that takes no gradient
  Tensor f = test_data({2, 1}, ts::kFloat32);
  check_grads([&](const V& in) { return V{ts::cat({f, in[0]}, 1)}; }, {data({2, 3})});
}

TEST(GradShapeOps, StackGradcheck) {
  for (int64_t dim : {0, 1, 2, -1}) {
    SCOPED_TRACE("dim " + std::to_string(dim));
    check_grads([dim](const V& in) { return V{ts::stack(in, dim)}; }, {data({2, 3}), data({2, 3}, 2)});
  }
  Tensor x = data({2}).requires_grad_();
  Tensor y = ts::stack({x, x.flip({0})}, 1);
  EXPECT_EQ(y.grad_fn()->name(), "StackBackward0");
}

// ---- pad ------------------------------------------------------------------------------------------

TEST(GradShapeOps, ConstantPadAllAmounts) {
  // Positive, zero, negative (cropping) and mixed pads, over one, two and three dims, including a
  // pad that crops a dim away entirely.
  const std::vector<std::vector<int64_t>> pads = {
      {1, 2}, {0, 0}, {-1, 2}, {2, -3}, {-1, -1}, {0, 0, 2, 1}, {-2, 1, 1, -1}, {1, 1, -1, 0, 1, 0}, {-4, 1}};
  for (const auto& p : pads) {
    SCOPED_TRACE("pad " + str(p));
    check_grads([&](const V& in) { return V{ts::pad(in[0], p, "constant", 2.5)}; }, {data({2, 3, 4})});
  }
  Tensor x = f64({1, 2, 3}).requires_grad_();
  Tensor y = ts::pad(x, {-1, 2});
  EXPECT_EQ(y.tolist<double>(), (std::vector<double>{2, 3, 0, 0}));
  y.backward(f64({1, 2, 3, 4}));
  EXPECT_EQ(x.grad().tolist<double>(), (std::vector<double>{0, 1, 2}));
}

TEST(GradShapeOps, ReflectReplicateCircularPad) {
  struct Case {
    std::string mode;
    ts::Shape shape;
    std::vector<int64_t> pad;
  };
  const std::vector<Case> cases = {
      {"reflect", {2, 5}, {2, 3}},          {"reflect", {2, 3, 5}, {4, 0}},
      {"reflect", {1, 3, 4}, {1, 2, 2, 1}}, {"reflect", {1, 2, 3, 4, 3}, {2, 1, 0, 3, 1, 2}},
      {"reflect", {2, 5}, {-1, 2}},         {"replicate", {2, 3}, {3, 4}},
      {"replicate", {2, 3}, {-1, 2}},       {"replicate", {1, 2, 3, 2}, {2, 0, 1, 5}},
      {"replicate", {1, 2, 2, 3, 2}, {1, 1, 2, 0, 0, 3}},
      {"circular", {2, 4}, {1, 3}},         {"circular", {1, 3, 4}, {2, -1, 1, 2}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.mode + " pad " + str(c.pad));
    check_grads([&](const V& in) { return V{ts::pad(in[0], c.pad, c.mode)}; }, {data(c.shape)});
  }
  // Edge elements read by several output positions accumulate: replicate (0, 3) on [a, b] reads b 4 times.
  Tensor x = f64({1, 2}, {1, 2}).requires_grad_();
  Tensor y = ts::pad(x, {0, 3}, "replicate");
  EXPECT_EQ(y.grad_fn()->name(), "PadMapBackward0");
  y.backward(ts::ones({1, 5}, ts::kFloat64));
  EXPECT_EQ(x.grad().tolist<double>(), (std::vector<double>{1, 4}));
  // reflect (2, 2) on [a, b, c] = [c, b, a, b, c, b, a]
  Tensor z = f64({1, 2, 3}, {1, 3}).requires_grad_();
  ts::pad(z, {2, 2}, "reflect").backward(f64({1, 2, 4, 8, 16, 32, 64}, {1, 7}));
  EXPECT_EQ(z.grad().tolist<double>(), (std::vector<double>{4 + 64, 2 + 8 + 32, 1 + 16}));
}

TEST(GradShapeOps, PadOnMetaRecordsShapes) {
  Tensor x = ts::empty({2, 3, 4}, {ts::kFloat32, ts::Device::meta()}).requires_grad_();
  for (const std::string mode : {"constant", "reflect", "replicate", "circular"}) {
    SCOPED_TRACE(mode);
    Tensor y = ts::pad(x, {1, 2, -1, 1}, mode);
    ASSERT_TRUE(y.requires_grad());
    auto g = ts::autograd::grad({y}, {x}, {ts::empty(y.sizes(), {ts::kFloat32, ts::Device::meta()})});
    EXPECT_TRUE(g[0].is_meta());
    EXPECT_EQ(g[0].sizes(), x.sizes());
  }
}

// ---- flip / roll / tril / triu --------------------------------------------------------------------

TEST(GradShapeOps, FlipGradcheck) {
  for (const ts::Shape& dims : {ts::Shape{0}, ts::Shape{-1}, ts::Shape{0, 2}, ts::Shape{}}) {
    SCOPED_TRACE("dims " + str(dims));
    check_grads([&](const V& in) { return V{ts::flip(in[0], dims)}; }, {data({2, 3, 2})});
  }
}

TEST(GradShapeOps, RollGradcheck) {
  struct Case {
    ts::Shape shifts, dims;
  };
  const std::vector<Case> cases = {{{1}, {0}}, {{-2, 5}, {0, 1}}, {{3}, {}}, {{1, 1}, {1, 1}}, {{4}, {-1}}, {{3}, {0}}};
  for (const Case& c : cases) {
    SCOPED_TRACE("shifts " + str(c.shifts) + "dims " + str(c.dims));
    check_grads([&](const V& in) { return V{ts::roll(in[0], c.shifts, c.dims)}; }, {data({3, 4})});
  }
}

TEST(GradShapeOps, TrilTriuGradcheck) {
  for (int64_t diag : {-1, 0, 2}) {
    SCOPED_TRACE("diagonal " + std::to_string(diag));
    check_grads([diag](const V& in) { return V{ts::tril(in[0], diag)}; }, {data({2, 3, 4})});
    check_grads([diag](const V& in) { return V{ts::triu(in[0], diag)}; }, {data({3, 3})});
  }
}

// ---- repeat / repeat_interleave ---------------------------------------------------------------------

TEST(GradShapeOps, RepeatGradcheck) {
  if (!reductions_differentiable())
    GTEST_SKIP() << "repeat's derivative sums over the copies; sum is not differentiable in this build";
  check_grads([](const V& in) { return V{in[0].repeat({2, 1, 3})}; }, {data({2, 3})});
  check_grads([](const V& in) { return V{in[0].repeat({1, 2})}; }, {data({3, 1})});
}

TEST(GradShapeOps, RepeatFirstOrder) {
  for (const ts::Shape& reps : {ts::Shape{2, 1, 3}, ts::Shape{3, 2}, ts::Shape{1, 0}}) {
    SCOPED_TRACE("repeats " + str(reps));
    check_grads([&](const V& in) { return V{in[0].repeat(reps)}; }, {data({2, 3})}, /*second=*/false);
  }
  Tensor x = f64({1, 2}).requires_grad_();
  Tensor y = x.repeat({2, 2});  // (2, 4)
  EXPECT_EQ(y.grad_fn()->name(), "RepeatBackward0");
  y.backward(ts::arange(8, ts::kFloat64).reshape({2, 4}));
  EXPECT_EQ(x.grad().tolist<double>(), (std::vector<double>{0 + 2 + 4 + 6, 1 + 3 + 5 + 7}));
}

TEST(GradShapeOps, RepeatInterleaveGradcheck) {
  // One count: reshape + sum (second order in RepeatInterleaveOneCountGradgradcheck).
  check_grads([](const V& in) { return V{ts::repeat_interleave(in[0], 2, 0)}; }, {data({2, 3})}, false);
  check_grads([](const V& in) { return V{ts::repeat_interleave(in[0], 3, -1)}; }, {data({2, 3})}, false);
  check_grads([](const V& in) { return V{ts::repeat_interleave(in[0], 2)}; }, {data({2, 3})}, false);
  check_grads([](const V& in) { return V{ts::repeat_interleave(in[0], 0, 1)}; }, {data({2, 3})}, false);
  // Per-element counts go through index_add, differentiable on its own.
  Tensor counts = ts::tensor(std::vector<int64_t>{1, 0, 3}, {3}, ts::kInt64);
  check_grads([&](const V& in) { return V{ts::repeat_interleave(in[0], counts, 1)}; }, {data({2, 3})});
  Tensor flat_counts = ts::tensor(std::vector<int64_t>{2, 1, 0, 1, 3, 1}, {6}, ts::kInt64);
  check_grads([&](const V& in) { return V{ts::repeat_interleave(in[0], flat_counts)}; }, {data({2, 3})});

  Tensor x = f64({1, 2, 3}).requires_grad_();
  ts::repeat_interleave(x, counts).backward(f64({1, 2, 4, 8}));
  EXPECT_EQ(x.grad().tolist<double>(), (std::vector<double>{1, 0, 14}));
  Tensor z = f64({1, 2}).requires_grad_();
  ts::repeat_interleave(z, 2).backward(f64({1, 2, 4, 8}));
  EXPECT_EQ(z.grad().tolist<double>(), (std::vector<double>{3, 12}));
}

TEST(GradShapeOps, RepeatInterleaveOneCountGradgradcheck) {
  if (!reductions_differentiable())
    GTEST_SKIP() << "repeat_interleave's derivative sums over the copies; sum is not differentiable in this build";
  check_grads([](const V& in) { return V{ts::repeat_interleave(in[0], 2, 0)}; }, {data({2, 3})});
  check_grads([](const V& in) { return V{ts::repeat_interleave(in[0], 3)}; }, {data({2, 3})});
}

// ---- sort / topk and the ops without a derivative ------------------------------------------------

TEST(GradShapeOps, SortGradcheck) {
  for (bool descending : {false, true})
    for (int64_t dim : {0, -1}) {
      SCOPED_TRACE("dim " + std::to_string(dim) + (descending ? " descending" : ""));
      check_grads([=](const V& in) { return V{std::get<0>(ts::sort(in[0], dim, descending))}; }, {data({3, 4})});
    }
  Tensor x = f64({3, 1, 2}).requires_grad_();
  auto [v, i] = ts::sort(x);
  EXPECT_FALSE(i.requires_grad());
  EXPECT_EQ(v.grad_fn()->name(), "SortBackward0");
  v.backward(f64({1, 10, 100}));
  EXPECT_EQ(x.grad().tolist<double>(), (std::vector<double>{100, 1, 10}));
}

TEST(GradShapeOps, TopkGradcheck) {
  for (bool largest : {true, false})
    for (int64_t k : {1, 3}) {
      SCOPED_TRACE("k " + std::to_string(k) + (largest ? " largest" : " smallest"));
      check_grads([=](const V& in) { return V{std::get<0>(ts::topk(in[0], k, -1, largest))}; }, {data({3, 4})});
      check_grads([=](const V& in) { return V{std::get<0>(ts::topk(in[0], k, 0, largest))}; }, {data({3, 4}, 2)});
    }
  Tensor x = f64({3, 1, 2, 5}).requires_grad_();
  auto [v, i] = ts::topk(x, 2);
  EXPECT_FALSE(i.requires_grad());
  v.backward(f64({1, 10}));
  EXPECT_EQ(x.grad().tolist<double>(), (std::vector<double>{10, 0, 0, 1}));
  // A 0-dim input and k = 0.
  check_grads([](const V& in) { return V{std::get<0>(ts::topk(in[0], 1))}; }, {f64({1.5}).reshape({})});
  check_grads([](const V& in) { return V{std::get<0>(ts::sort(in[0], 0))}; }, {f64({1.5}).reshape({})});
  Tensor w = data({2, 3}).requires_grad_();
  std::get<0>(ts::topk(w, 0)).backward(ts::zeros({2, 0}, ts::kFloat64));
  EXPECT_EQ(w.grad().tolist<double>(), std::vector<double>(6, 0.0));
}

TEST(GradShapeOps, NonDifferentiableOpsRecordNothing) {
  Tensor x = data({2, 3}).requires_grad_();
  EXPECT_FALSE(ts::argsort(x, 1).requires_grad());
  auto [u, inv, cnt] = ts::unique(x, true, true, true);
  EXPECT_FALSE(u.requires_grad());
  EXPECT_FALSE(inv.requires_grad());
  EXPECT_FALSE(ts::one_hot(ts::tensor(std::vector<int64_t>{0, 2}, {2}, ts::kInt64)).requires_grad());
  ts::NoGradGuard g;
  EXPECT_FALSE(ts::cat({x, x}).requires_grad());
  EXPECT_FALSE(ts::pad(x, {1, 1}).requires_grad());
  EXPECT_FALSE(std::get<0>(ts::sort(x)).requires_grad());
}

TEST(GradShapeOps, RollBackwardErrorsKeepTheirClass) {
  Tensor x = data({3}).requires_grad_();
  EXPECT_THROW(ts::roll(x, {1, 2}, {0}), ts::ShapeError);
  EXPECT_THROW(ts::pad(x.reshape({1, 3}), {3, 0}, "reflect"), ts::ValueError);
  EXPECT_THROW(ts::cat({x, x.reshape({1, 3})}), ts::ShapeError);
}
