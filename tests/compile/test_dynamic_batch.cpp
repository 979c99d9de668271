// ts::compile's `dynamic = true` (Note [Symbolic batch] in src/compile/symbolic_batch.h): after two
// captures at two batch sizes, every other batch size runs the unified graph without a capture, and
// bitwise equal to eager (the same kernels in the same order), forward, gradients and batch norm's
// running statistics; sizes 0 and 1 are specialized; programs that depend on the batch size other
// than by whole-number lines stay one variant per size, with a warning naming the difference; other
// dimensions still recompile; the lines themselves.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "compile/bitwise.h"
#include "compile/compile_warnings.h"
#include "compile/codegen_testing.h"
#include "compile/model_testing.h"
#include "compile/symbolic_batch.h"
#include "tessera/compile.h"
#include "tessera/models.h"
#include "tessera/nn.h"

namespace ts = tessera;
using ts::testing::bitwise;

namespace {

using Warnings = tessera::testing::CompileWarnings;

ts::CompileOptions dynamic_options(const char* backend = "eager") {
  ts::CompileOptions o;
  o.dynamic = true;
  o.backend = backend;
  return o;
}

// A compiled copy of a module against an eager one over `batches`: outputs, the gradients of the sum
// of squares and the buffers bitwise equal at every call.
template <class M, class Make, class Input>
ts::CompileStats expect_equal_over_batches(const char* name, Make make, Input input, const std::vector<int64_t>& batches,
                                           bool training, const ts::CompileOptions& options) {
  ts::manual_seed(7);
  M a = make();
  ts::manual_seed(7);
  M b = make();
  a.train(training);
  b.train(training);
  auto f = ts::compile(a, options);
  for (int64_t batch : batches) {
    const std::string where = std::string(name) + " batch " + std::to_string(batch);
    ts::Tensor x = input(batch);
    ts::manual_seed(batch);  // dropout draws the same masks on both sides
    ts::Tensor ya = f(x);
    ts::manual_seed(batch);
    ts::Tensor yb = b.forward(x);
    EXPECT_TRUE(bitwise(ya, yb)) << where;
    ya.to(ts::kFloat32).pow(2).sum().backward();
    yb.to(ts::kFloat32).pow(2).sum().backward();
    ts::testing::expect_gradients_bitwise(a, b, where);
    a.zero_grad();
    b.zero_grad();
    auto ba = a.named_buffers(), bb = b.named_buffers();
    for (size_t i = 0; i < ba.size(); ++i) EXPECT_TRUE(bitwise(ba[i].second, bb[i].second)) << where << " " << ba[i].first;
  }
  return f.stats();
}

TEST(DynamicBatch, AnMlpAnswersEveryBatchSizeAfterTwoCaptures) {
  Warnings w;
  ts::CompileOptions o = dynamic_options();
  o.recompile_limit = 2;  // instances are not variants: the limit is never reached
  const ts::CompileStats s = expect_equal_over_batches<ts::models::MLP>(
      "mlp", [] { return ts::models::MLP(20, {32, 16}, 5); }, [](int64_t b) { return ts::randn({b, 20}); },
      {8, 12, 5, 17, 8, 5, 32, 12}, /*training=*/true, o);
  EXPECT_EQ(s.captures, 2);
  EXPECT_EQ(s.variants, 2);
  EXPECT_EQ(s.symbolic_variants, 1);
  EXPECT_EQ(s.batch_instances, 3);  // 5, 17 and 32
  EXPECT_EQ(s.graph_calls, 6);
  EXPECT_EQ(s.eager_calls, 0);
  EXPECT_EQ(s.joint_variants, 2);
  EXPECT_TRUE(w.seen.empty()) << w.seen[0];
}

TEST(DynamicBatch, ACnnWithBatchNormUpdatesItsRunningStatisticsAtEveryBatchSize) {
  const ts::CompileStats s = expect_equal_over_batches<ts::models::ResNet>(
      "resnet18", [] { return ts::models::resnet18(10, 3, true); }, [](int64_t b) { return ts::randn({b, 3, 16, 16}); },
      {2, 3, 5, 4}, /*training=*/true, dynamic_options());
  EXPECT_EQ(s.captures, 2);
  EXPECT_EQ(s.symbolic_variants, 1);
  EXPECT_EQ(s.batch_instances, 2);
}

TEST(DynamicBatch, Gpt2LossAndGradientsOverBatchSizes) {
  const ts::models::GPT2Config cfg = ts::testing::small_gpt();
  ts::manual_seed(9);
  ts::models::GPT2 a(cfg);
  ts::manual_seed(9);
  ts::models::GPT2 b(cfg);
  auto loss = ts::compile([&](const ts::Tensor& idx, const ts::Tensor& tgt) { return a.loss(idx, tgt); }, dynamic_options());
  for (int64_t batch : {3, 5, 2, 7, 4}) {
    ts::Tensor idx = ts::randint(0, cfg.vocab_size, {batch, 8}, ts::kInt64);
    ts::Tensor tgt = ts::randint(0, cfg.vocab_size, {batch, 8}, ts::kInt64);
    ts::manual_seed(batch);
    ts::Tensor la = loss(idx, tgt);
    ts::manual_seed(batch);
    ts::Tensor lb = b.loss(idx, tgt);
    EXPECT_TRUE(bitwise(la, lb)) << "batch " << batch;
    la.backward();
    lb.backward();
    ts::testing::expect_gradients_bitwise(a, b, "batch " + std::to_string(batch));
    a.zero_grad();
    b.zero_grad();
  }
  const ts::CompileStats s = loss.stats();
  EXPECT_EQ(s.captures, 2);
  EXPECT_EQ(s.symbolic_variants, 1);
  EXPECT_EQ(s.batch_instances, 3);
  EXPECT_EQ(s.joint_variants, 2);
}

// The reshape of (B, T, C) to (B * T, C) and back: its sizes are lines of slope T in B.
TEST(DynamicBatch, ReshapesWhoseSizesScaleWithTheBatchAreLines) {
  auto fn = [](const ts::Tensor& x) { return x.reshape({-1, 4}).softmax(1).reshape({x.size(0), 3, 4}).sum({1}); };
  auto f = ts::compile(fn, dynamic_options());
  for (int64_t b : {2, 6, 9, 4}) {
    ts::Tensor x = ts::randn({b, 3, 4});
    EXPECT_TRUE(bitwise(f(x), fn(x))) << b;
  }
  EXPECT_EQ(f.stats().captures, 2);
  EXPECT_EQ(f.stats().batch_instances, 2);
  const std::string e = ts::compile_explain(f, ts::randn({5, 3, 4}));
  EXPECT_NE(e.find("symbolic variant 0"), std::string::npos) << e;
  EXPECT_NE(e.find("sizes[0] = 3*B"), std::string::npos) << e;  // the (B * 3, 4) view
  EXPECT_NE(e.find("[B,3,4] for any batch size"), std::string::npos) << e;
}

TEST(DynamicBatch, SizesZeroAndOneAreSpecializedAndCaptured) {
  auto fn = [](const ts::Tensor& x, const ts::Tensor& y) { return (x * y).sum({0}); };  // y broadcasts at size 1
  auto f = ts::compile(fn, dynamic_options());
  ts::Tensor y = ts::randn({1, 4});
  for (int64_t b : {3, 5, 1, 7, 1}) {
    ts::Tensor x = ts::randn({b, 4});
    EXPECT_TRUE(bitwise(f(x, y), fn(x, y))) << b;
  }
  const ts::CompileStats s = f.stats();
  EXPECT_EQ(s.captures, 3);  // 3, 5 and 1
  EXPECT_EQ(s.batch_instances, 1);  // 7
}

TEST(DynamicBatch, AHostComputedReciprocalOfTheBatchStaysOneVariantPerSizeAndSaysWhy) {
  Warnings w;
  auto fn = [](const ts::Tensor& x) { return x.sum({0}) * (1.0 / static_cast<double>(x.size(0))); };
  auto f = ts::compile(fn, dynamic_options());
  for (int64_t b : {4, 8, 6}) {
    ts::Tensor x = ts::randn({b, 3});
    EXPECT_TRUE(bitwise(f(x), fn(x))) << b;
  }
  EXPECT_EQ(f.stats().captures, 3);
  EXPECT_EQ(f.stats().symbolic_variants, 0);
  ASSERT_EQ(w.seen.size(), 1u);  // once, not at every capture
  EXPECT_NE(w.seen[0].find("differ in more than the batch size"), std::string::npos) << w.seen[0];
  EXPECT_NE(w.seen[0].find("0.25"), std::string::npos) << w.seen[0];  // the scalar of batch 4
}

TEST(DynamicBatch, ASizeThatIsNotAWholeNumberLineStaysOneVariantPerSize) {
  Warnings w;
  auto fn = [](const ts::Tensor& x) { return x.narrow(0, 0, x.size(0) / 2) * 2; };
  auto f = ts::compile(fn, dynamic_options());
  for (int64_t b : {4, 6, 10}) {
    ts::Tensor x = ts::randn({b, 3});
    EXPECT_TRUE(bitwise(f(x), fn(x))) << b;
  }
  EXPECT_EQ(f.stats().captures, 3);
  EXPECT_TRUE(w.any_contains("not a whole-number line in the batch size")) << (w.seen.empty() ? "" : w.seen[0]);
}

TEST(DynamicBatch, OtherDimensionsDtypesAndGradModeStillRecompile) {
  auto fn = [](const ts::Tensor& x) { return (x * 3).relu().sum({1}); };
  auto f = ts::compile(fn, dynamic_options());
  f(ts::randn({4, 8}));
  f(ts::randn({6, 8}));
  f(ts::randn({9, 8}));
  EXPECT_EQ(f.stats().captures, 2);
  ts::Tensor x = ts::randn({5, 9});
  EXPECT_TRUE(bitwise(f(x), fn(x)));
  ts::Tensor d = ts::randn({5, 8}, ts::kFloat64);
  EXPECT_TRUE(bitwise(f(d), fn(d)));
  EXPECT_EQ(f.stats().captures, 4);
  const std::vector<std::string>& why = f.stats().recompile_reasons;
  ASSERT_EQ(why.size(), 3u);
  EXPECT_NE(why[1].find("sizes [5, 9]"), std::string::npos) << why[1];
}

// An instantiation the verifier refuses is captured instead (here the capture raises as eager does).
TEST(DynamicBatch, ABatchSizeWhereTheLinesGiveAnInvalidGraphIsCaptured) {
  Warnings w;
  auto fn = [](const ts::Tensor& x) { return x.narrow(0, 0, x.size(0) - 3).exp(); };
  auto f = ts::compile(fn, dynamic_options());
  f(ts::randn({5, 2}));
  f(ts::randn({6, 2}));
  ts::Tensor ok = ts::randn({8, 2});
  EXPECT_TRUE(bitwise(f(ok), fn(ok)));
  EXPECT_EQ(f.stats().batch_instances, 1);
  EXPECT_THROW(fn(ts::randn({2, 2})), ts::Error);
  EXPECT_THROW(f(ts::randn({2, 2})), ts::Error);
  EXPECT_TRUE(w.any_contains("does not hold at batch size 2")) << (w.seen.empty() ? "" : w.seen[0]);
}

TEST(DynamicBatch, WithoutDynamicEveryBatchSizeIsCaptured) {
  auto fn = [](const ts::Tensor& x) { return x.exp().sum({1}); };
  auto f = ts::compile(fn);
  for (int64_t b : {4, 6, 8, 10}) f(ts::randn({b, 3}));
  EXPECT_EQ(f.stats().captures, 4);
  EXPECT_EQ(f.stats().symbolic_variants, 0);
}

// Backend codegen: an instance's generated kernels are those of a static compile at its size.
TEST(DynamicBatch, CodegenInstancesEqualAStaticCompileAtTheirSize) {
  auto fn = [](const ts::Tensor& x, const ts::Tensor& y) { return ts::testing::pointwise_chain(x, y).softmax(1); };
  auto f = ts::compile(fn, dynamic_options("codegen"));
  ts::Tensor y = ts::randn({7});
  f(ts::randn({4, 7}), y);
  f(ts::randn({6, 7}), y);
  ts::Tensor x = ts::randn({11, 7});
  auto g = ts::compile(fn, ts::testing::codegen_options());
  g(x, y);  // captures (and runs the program eagerly)
  ts::Tensor a = f(x, y), b = g(x, y);
  EXPECT_TRUE(bitwise(a, b));
  EXPECT_TRUE(ts::testing::close(a, fn(x, y)));
  EXPECT_EQ(f.stats().captures, 2);
  EXPECT_EQ(f.stats().batch_instances, 1);
  EXPECT_GE(f.stats().kernels, 3);  // the two captures' and the instance's
}

TEST(SymbolicBatch, LinesHaveWholeCoefficients) {
  using tessera::compiler::AffineInt;
  using tessera::compiler::fit_affine;
  EXPECT_EQ(fit_affine(4, 12, 8, 24), (AffineInt{3, 0}));
  EXPECT_EQ(fit_affine(4, 1, 6, 3), (AffineInt{1, -3}));
  EXPECT_EQ(fit_affine(4, 7, 9, 7), (AffineInt{0, 7}));
  EXPECT_FALSE(fit_affine(4, 2, 8, 4).has_value());  // B / 2
  EXPECT_FALSE(fit_affine(4, 2, 4, 3).has_value());  // one batch size, two values
}

}  // namespace
