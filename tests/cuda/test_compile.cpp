// ts::compile on the GPU. Backend eager: the CPU suite's model checks (tests/compile/) run on CUDA.
// The graph replays the same CUDA kernels in the same order as the eager run, so forwards and
// gradients are compared bitwise, with the determinism switch on (the weight gradients of a
// convolution and of an embedding sum with atomics otherwise, and differ from run to run in eager
// too); the joint graph's backward (Note [Joint graph]) too. Backend codegen: generated CUDA kernels
// (NVRTC) against eager within the dtypes' tolerances, forward and gradients, odd layouts included.
#include <gtest/gtest.h>

#include "common/test_util.h"
#include "compile/bitwise.h"
#include "compile/codegen_testing.h"
#include "tessera/compile.h"
#include "tessera/determinism.h"
#include "tessera/models.h"

namespace ts = tessera;

namespace {

using tessera::testing::bitwise;

template <class M, class Make>
void expect_equal_on_cuda(const char* name, Make make, const std::function<ts::Tensor()>& input, bool joint) {
  struct Deterministic {
    bool was = ts::is_deterministic();
    Deterministic() { ts::set_deterministic(true); }
    ~Deterministic() { ts::set_deterministic(was); }
  } deterministic;
  ts::manual_seed(11);
  M a = make();
  ts::manual_seed(11);
  M b = make();
  a.to(ts::Device::cuda());
  b.to(ts::Device::cuda());
  a.train(true);
  b.train(true);
  auto f = ts::compile(a);
  for (int call = 0; call < 3; ++call) {
    ts::Tensor x = input().to(ts::Device::cuda());
    ts::manual_seed(70 + call);
    ts::Tensor ya = f(x);
    ts::manual_seed(70 + call);
    ts::Tensor yb = b.forward(x);
    ASSERT_TRUE(bitwise(ya, yb)) << name << " call " << call;
    ya.to(ts::kFloat32).pow(2).sum().backward();
    yb.to(ts::kFloat32).pow(2).sum().backward();
    auto pa = a.named_parameters(), pb = b.named_parameters();
    for (size_t i = 0; i < pa.size(); ++i)
      if (pb[i].second.grad().defined())
        ASSERT_TRUE(bitwise(pa[i].second.grad(), pb[i].second.grad())) << name << " " << pa[i].first;
    a.zero_grad();
    b.zero_grad();
  }
  EXPECT_EQ(f.stats().graph_calls, 2) << name;
  EXPECT_EQ(f.stats().joint_variants, joint ? 1 : 0) << name;
}

TEST(CudaCompile, MLP) {
  TS_REQUIRE_GPU();
  expect_equal_on_cuda<ts::models::MLP>(
      "mlp", [] { return ts::models::MLP(64, {128, 64}, 10); }, [] { return ts::randn({32, 64}); }, true);
}

TEST(CudaCompile, ResNet18) {
  TS_REQUIRE_GPU();
  expect_equal_on_cuda<ts::models::ResNet>(
      "resnet18", [] { return ts::models::resnet18(10, 3, true); }, [] { return ts::randn({4, 3, 32, 32}); }, true);
}

TEST(CudaCompile, GPT2Unfused) {
  TS_REQUIRE_GPU();
  expect_equal_on_cuda<ts::models::GPT2>(
      "gpt2",
      [] {
        ts::models::GPT2Config c;
        c.n_layer = 2, c.n_head = 4, c.n_embd = 64, c.n_positions = 64, c.vocab_size = 128, c.fused = false;
        return ts::models::GPT2(c);
      },
      [] { return ts::randint(0, 128, {2, 32}, ts::kInt64); }, true);
}

// Note [Symbolic batch] on the GPU: two captures, then every batch size from the unified graph, bitwise
// eager's (forward and gradients), with the executor's direct kernel calls in the joint graph.
TEST(CudaCompile, DynamicBatchAnswersEveryBatchSizeBitwise) {
  TS_REQUIRE_GPU();
  struct Deterministic {
    bool was = ts::is_deterministic();
    Deterministic() { ts::set_deterministic(true); }
    ~Deterministic() { ts::set_deterministic(was); }
  } deterministic;
  ts::models::GPT2Config c;
  c.n_layer = 2, c.n_head = 4, c.n_embd = 64, c.n_positions = 64, c.vocab_size = 128, c.fused = false;
  ts::manual_seed(12);
  ts::models::GPT2 a(c);
  ts::manual_seed(12);
  ts::models::GPT2 b(c);
  a.to(ts::Device::cuda());
  b.to(ts::Device::cuda());
  ts::CompileOptions o;
  o.dynamic = true;
  auto loss = ts::compile([&](const ts::Tensor& idx, const ts::Tensor& tgt) { return a.loss(idx, tgt); }, o);
  for (int64_t batch : {2, 3, 5, 4, 5}) {
    ts::Tensor idx = ts::randint(0, 128, {batch, 32}, ts::kInt64).to(ts::Device::cuda());
    ts::Tensor tgt = ts::randint(0, 128, {batch, 32}, ts::kInt64).to(ts::Device::cuda());
    ts::manual_seed(batch);
    ts::Tensor la = loss(idx, tgt);
    ts::manual_seed(batch);
    ts::Tensor lb = b.loss(idx, tgt);
    ASSERT_TRUE(bitwise(la, lb)) << "batch " << batch;
    la.backward();
    lb.backward();
    auto pa = a.named_parameters(), pb = b.named_parameters();
    for (size_t i = 0; i < pa.size(); ++i)
      ASSERT_TRUE(bitwise(pa[i].second.grad(), pb[i].second.grad())) << "batch " << batch << " " << pa[i].first;
    a.zero_grad();
    b.zero_grad();
  }
  EXPECT_EQ(loss.stats().captures, 2);
  EXPECT_EQ(loss.stats().symbolic_variants, 1);
  EXPECT_EQ(loss.stats().batch_instances, 2);
}

using tessera::testing::close;
ts::Tensor chain(const ts::Tensor& x, const ts::Tensor& y) { return tessera::testing::pointwise_chain(x, y); }

TEST(CudaCodegen, GeneratedKernelsEqualEagerForEveryDtypeAndLayout) {
  TS_REQUIRE_GPU();
  ts::CompileOptions o;
  o.backend = "codegen";
  ts::Tensor base = ts::randn({5, 7, 11}, ts::Device::cuda());
  for (ts::DType dt : {ts::kFloat32, ts::kFloat64, ts::kBFloat16, ts::kFloat16}) {
    struct Case { const char* what; ts::Tensor x, y; };
    std::vector<Case> cases = {{"contiguous", ts::randn({301, 1003}, ts::Device::cuda()), ts::randn({1003}, ts::Device::cuda())},
                               {"transposed", base.transpose(0, 2), ts::randn({7, 5}, ts::Device::cuda())},
                               {"one element", ts::randn({1}, ts::Device::cuda()), ts::randn({}, ts::Device::cuda())}};
    for (const Case& c : cases) {
      ts::Tensor x = c.x.to(dt), y = c.y.to(dt);
      auto f = ts::compile(chain, o);
      f(x, y);
      EXPECT_TRUE(close(f(x, y), chain(x, y))) << ts::dtype_name(dt) << " " << c.what;
      EXPECT_EQ(f.stats().kernels, 1) << ts::dtype_name(dt) << " " << c.what;
    }
  }
}

// Note [Vectorized pointwise kernels]: the vector path where the pointers are aligned, the scalar
// loop of the same kernel where a view starts at an odd element.
TEST(CudaCodegen, VectorizedKernelsEqualEagerAlignedOrNot) {
  TS_REQUIRE_GPU();
  const ts::Device gpu = ts::Device::cuda();
  for (ts::DType dt : {ts::kFloat32, ts::kFloat64, ts::kBFloat16, ts::kFloat16}) {
    ts::Tensor flat = ts::randn({33 * 256 + 1}, gpu).to(dt), row = ts::randn({257}, gpu).to(dt);
    struct Case { const char* what; ts::Tensor x, y; };
    std::vector<Case> cases = {
        {"channels-last, per-channel", ts::randn({4, 64, 7, 7}, gpu).to(dt).contiguous(ts::MemoryFormat::ChannelsLast),
         ts::randn({64, 1, 1}, gpu).to(dt)},
        // Past one grid's threads (the kernel strides; Note [Invariant columns]): 64 channels, and 24,
        // whose rows of 3 vectors of 8 do not divide a block.
        {"channels-last, 64 channels, striding", ts::randn({64, 64, 56, 56}, gpu).to(dt).contiguous(ts::MemoryFormat::ChannelsLast),
         ts::randn({64, 1, 1}, gpu).to(dt)},
        {"channels-last, 24 channels, striding", ts::randn({32, 24, 100, 100}, gpu).to(dt).contiguous(ts::MemoryFormat::ChannelsLast),
         ts::randn({24, 1, 1}, gpu).to(dt)},
        {"aligned rows", flat.slice(0, 0, 33 * 256).view({33, 256}), row.slice(0, 0, 256)},
        {"x at an odd element", flat.slice(0, 1, 33 * 256 + 1).view({33, 256}), row.slice(0, 0, 256)},
        {"y at an odd element", flat.slice(0, 0, 33 * 256).view({33, 256}), row.slice(0, 1, 257)},
    };
    for (const Case& c : cases) {
      auto f = ts::compile(chain, tessera::testing::codegen_options());
      f(c.x, c.y);
      EXPECT_TRUE(close(f(c.x, c.y), chain(c.x, c.y))) << ts::dtype_name(dt) << " " << c.what;
      EXPECT_EQ(f.stats().kernels, 1) << ts::dtype_name(dt) << " " << c.what;
    }
    // One compiled function, called aligned then not (the same shapes and strides).
    auto f = ts::compile(chain, tessera::testing::codegen_options());
    for (int64_t start : {0, 1, 0}) {
      ts::Tensor x = flat.slice(0, start, start + 33 * 256).view({33, 256}), y = row.slice(0, 0, 256);
      EXPECT_TRUE(close(f(x, y), chain(x, y))) << ts::dtype_name(dt) << " from element " << start;
    }
  }
}

// Note [Padded classifier products]: a returned bfloat16 product with 1001 columns is computed against
// a weight padded to 1008 rows; the values are eager's, the row stride the padded width.
TEST(CudaCodegen, ARaggedClassifierProductIsComputedPaddedAndEqualsEager) {
  TS_REQUIRE_GPU();
  const ts::Device gpu = ts::Device::cuda();
  auto classifier = [](const ts::Tensor& x, const ts::Tensor& w) { return ts::nn::functional::linear(x, w); };
  ts::Tensor w = (ts::randn({1001, 768}, gpu) * 0.05).to(ts::kBFloat16);
  for (const ts::Shape& shape : {ts::Shape{64, 768}, ts::Shape{2, 37, 768}}) {
    ts::Tensor x = ts::randn(shape, gpu).to(ts::kBFloat16);
    auto f = ts::compile(classifier, tessera::testing::codegen_options());
    f(x, w);
    ts::Tensor got = f(x, w), want = classifier(x, w);
    EXPECT_TRUE(close(got, want)) << x.dim() << "-D input";
    EXPECT_EQ(got.stride(-2), 1008) << x.dim() << "-D input";
    EXPECT_EQ(got.stride(-1), 1) << x.dim() << "-D input";
  }
}

TEST(CudaCodegen, GradientsOfAJointGraphWithKernelsEqualEager) {
  TS_REQUIRE_GPU();
  ts::CompileOptions o;
  o.backend = "codegen";
  ts::Tensor x = ts::randn({64, 96}, ts::Device::cuda()).requires_grad_(), y = ts::randn({96}, ts::Device::cuda()).requires_grad_();
  ts::Tensor xe = x.detach().requires_grad_(), ye = y.detach().requires_grad_();
  auto f = ts::compile(chain, o);
  for (int call = 0; call < 2; ++call) {
    ts::Tensor got = f(x, y), want = chain(xe, ye);
    EXPECT_TRUE(close(got.detach(), want.detach()));
    got.pow(2).sum().backward();
    want.pow(2).sum().backward();
    EXPECT_TRUE(close(x.grad(), xe.grad())) << "call " << call;
    EXPECT_TRUE(close(y.grad(), ye.grad())) << "call " << call;
  }
  EXPECT_EQ(f.stats().joint_variants, 1);
  EXPECT_GE(f.stats().kernels, 2);
}

TEST(CudaCodegen, ReductionKernelsEqualEagerForEveryDtypeWarpAndBlockRows) {
  TS_REQUIRE_GPU();
  // Rows of 53 (a warp per row), 5000 (a block of 256) and 40000 (a block of 1024), over 37, 64 and 8
  // rows (Note [Reduction kernels]).
  for (const ts::Shape& s : {ts::Shape{37, 53}, ts::Shape{64, 5000}, ts::Shape{40, 40000}}) {
    for (ts::DType dt : {ts::kFloat32, ts::kFloat64, ts::kBFloat16, ts::kFloat16}) {
      ts::manual_seed(12);
      ts::Tensor x = ts::randn(s, ts::Device::cuda()).to(dt), r = ts::randn(s, ts::Device::cuda()).to(dt),
                 w = ts::randn({s[1]}, ts::Device::cuda()).to(dt);
      auto f = ts::compile(tessera::testing::normalizations, tessera::testing::codegen_options());
      f(x, r, w);
      std::vector<ts::Tensor> got = f(x, r, w), want = tessera::testing::normalizations(x, r, w);
      EXPECT_GT(f.stats().kernels, 0);
      for (size_t i = 0; i < got.size(); ++i)
        EXPECT_TRUE(close(got[i], want[i])) << ts::dtype_name(dt) << " " << s[1] << " output " << i;
    }
  }
}

TEST(CudaCodegen, PersistentRowsEqualEagerAlignedOrNot) {
  TS_REQUIRE_GPU();
  // Rows that split into whole chunks per thread (Note [Persistent rows]): a warp's 1024 and 768, a
  // block's 4096, 32 (one element per lane); then the same compiled function on views one element
  // off, whose vectors are unaligned and take the strided loop.
  const ts::Device gpu = ts::Device::cuda();
  for (const ts::Shape& s : {ts::Shape{64, 1024}, ts::Shape{40, 768}, ts::Shape{24, 4096}, ts::Shape{16, 32}}) {
    for (ts::DType dt : {ts::kFloat32, ts::kFloat64, ts::kBFloat16, ts::kFloat16}) {
      ts::manual_seed(14);
      const int64_t n = s[0] * s[1];
      ts::Tensor fx = ts::randn({n + 1}, gpu).to(dt), fr = ts::randn({n + 1}, gpu).to(dt), fw = ts::randn({s[1] + 1}, gpu).to(dt);
      auto f = ts::compile(tessera::testing::normalizations, tessera::testing::codegen_options());
      for (int64_t start : {0, 1, 0}) {
        ts::Tensor x = fx.slice(0, start, start + n).view(s), r = fr.slice(0, start, start + n).view(s);
        ts::Tensor w = fw.slice(0, start, start + s[1]);
        std::vector<ts::Tensor> got = f(x, r, w), want = tessera::testing::normalizations(x, r, w);
        for (size_t i = 0; i < got.size(); ++i)
          EXPECT_TRUE(close(got[i], want[i])) << ts::dtype_name(dt) << " " << s[1] << " from element " << start << " output " << i;
      }
      EXPECT_GT(f.stats().kernels, 0);
    }
  }
}

TEST(CudaCodegen, GradientsThroughFusedNormalizationsEqualEager) {
  TS_REQUIRE_GPU();
  ts::manual_seed(13);
  const ts::Device d = ts::Device::cuda();
  ts::Tensor x = ts::randn({96, 768}, d).requires_grad_(), r = ts::randn({96, 768}, d).requires_grad_(),
             w = ts::randn({768}, d).requires_grad_();
  ts::Tensor xe = x.detach().requires_grad_(), re = r.detach().requires_grad_(), we = w.detach().requires_grad_();
  auto f = ts::compile(tessera::testing::normalizations, tessera::testing::codegen_options());
  for (int call = 0; call < 2; ++call) {
    for (ts::Tensor* t : {&x, &r, &w, &xe, &re, &we}) t->zero_grad();
    std::vector<ts::Tensor> got = f(x, r, w), want = tessera::testing::normalizations(xe, re, we);
    ts::Tensor lg = got[0].sum(), lw = want[0].sum();
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_TRUE(close(got[i], want[i])) << "output " << i;
      lg = lg + (got[i] * got[i]).sum();
      lw = lw + (want[i] * want[i]).sum();
    }
    lg.backward();
    lw.backward();
    EXPECT_TRUE(close(x.grad(), xe.grad())) << "call " << call;
    EXPECT_TRUE(close(w.grad(), we.grad())) << "call " << call;
  }
}

}  // namespace
