// Reductions in generated kernels (Note [Reduction groups], Note [Reduction kernels],
// Note [Decompositions]): the groups the fusion pass forms for softmax, layer norm, RMS norm and the
// GPT-2 MLP, block and a ResNet bottleneck (golden), the rules that keep a reduction apart, and the
// kernels against eager for every float dtype, odd layouts, reduced dims that are not the last,
// nan, and gradients; the CUDA twin of each kernel compiled by NVRTC for sm_90.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "compile/codegen/cuda_library.h"
#include "compile/codegen/kernel_source.h"
#include "compile/codegen_testing.h"
#include "compile/decompose.h"
#include "compile/fusion.h"
#include "compile/graph.h"
#include "compile/passes.h"
#include "compile/verify.h"
#include "tessera/models.h"

namespace ts = tessera;
namespace tc = tessera::compiler;
using ts::testing::close;

namespace {

// The graph of a program after the codegen passes, and its fusion groups as fusion_text prints them.
struct Planned {
  tc::Graph graph;
  std::string groups;
};
template <class F, class... T>
Planned plan_of(F body, const T&... args) {
  auto f = ts::compile(body);
  f(args...);
  Planned p{tc::parse_graph(f.last_graph()), ""};
  tc::run_codegen_passes(p.graph);  // the codegen backend's pipeline (passes.h)
  p.groups = tc::fusion_text(p.graph, tc::plan_fusion(p.graph));
  return p;
}

// The ops of a group line, without value numbers: "amax, sub, exp, sum, div".
std::vector<std::string> group_lines(const std::string& text) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at < text.size()) {
    const size_t end = text.find('\n', at);
    out.push_back(text.substr(at, end - at));
    at = end == std::string::npos ? text.size() : end + 1;
  }
  return out;
}

TEST(ReductionFusion, SoftmaxAfterAScaleIsOneGroupOfThreePasses) {
  const Planned p = plan_of([](const ts::Tensor& x) { return ts::softmax(x * 2.0, -1); }, ts::randn({4, 8}));
  EXPECT_EQ(p.groups,
            "group 0 [4,8] reducing 1 cpu: mul %2, amax %3, sub %4, exp %5, sum %6, div %7 <- %0 %1=2 -> %7 "
            "(saves 1088 B)\n");
}

TEST(ReductionFusion, LayerNormAfterAResidualAddIsOneGroup) {
  auto body = [](const ts::Tensor& x, const ts::Tensor& r, const ts::Tensor& w, const ts::Tensor& b) {
    return ts::nn::functional::layer_norm(x + r, {8}, w, b, 1e-5);
  };
  const Planned p = plan_of(body, ts::randn({4, 8}), ts::randn({4, 8}), ts::randn({8}), ts::randn({8}));
  EXPECT_EQ(p.groups,
            "group 0 [4,8] reducing 1 cpu: add %4, mean %5, sub %6, mul %7, mean %8, add %10, rsqrt %11, mul %12, "
            "mul %13, add %14 <- %0 %1 %2 %3 %9=1e-05 -> %14 (saves 1792 B)\n");
}

TEST(ReductionFusion, LogSoftmaxAndRmsNormComeOutOfTheSameRules) {
  auto body = [](const ts::Tensor& x, const ts::Tensor& w) {
    return std::vector<ts::Tensor>{ts::log_softmax(x, 1), ts::nn::functional::rms_norm(x, {8}, w, 1e-6)};
  };
  const Planned p = plan_of(body, ts::randn({4, 8}), ts::randn({8}));
  EXPECT_EQ(p.groups,
            "group 0 [4,8] reducing 1 cpu: amax %2, sub %3, exp %4, sum %5, log %6, sub %7, mul %8, mean %9, add %11, "
            "rsqrt %12, mul %13, mul %14 <- %0 %1 %10=1e-06 -> %7 %14 (saves 1856 B)\n");
}

TEST(ReductionFusion, LayerNormsBackwardIsTwoGroupsOneOverTheRowsOneOverTheBatch) {
  // dx reduces each row (the means of g w and of g w xhat); dweight and dbias reduce the batch dims
  // and fuse horizontally (both read g). With the min-cut partition (Note [Min-cut partition]) the
  // backward first makes the mean and rstd again from x, which the caller holds: one more row group.
  auto body = [](const ts::Tensor& x, const ts::Tensor& w, const ts::Tensor& b) {
    return ts::nn::functional::layer_norm(x, {8}, w, b, 1e-5);
  };
  for (bool partition : {false, true}) {
    ts::Tensor x = ts::randn({4, 8}).requires_grad_(), w = ts::randn({8}).requires_grad_(), b = ts::randn({8}).requires_grad_();
    ts::CompileOptions o;
    o.min_cut_partition = partition;
    auto f = ts::compile(body, o);
    f(x, w, b).sum().backward();
    tc::Graph g = tc::parse_graph(f.last_backward_graph());
    tc::run_codegen_passes(g);
    EXPECT_EQ(g.to_text().find("native_layer_norm_backward"), std::string::npos) << g.to_text();
    std::vector<std::string> lines = group_lines(tc::fusion_text(g, tc::plan_fusion(g)));
    ASSERT_EQ(lines.size(), partition ? 3u : 2u) << g.to_text() << tc::fusion_text(g, tc::plan_fusion(g));
    if (partition) {
      EXPECT_NE(lines[0].find("[4,8] reducing 1 cpu: mean"), std::string::npos) << lines[0];
      EXPECT_NE(lines[0].find("rsqrt"), std::string::npos) << "the statistics, recomputed: " << lines[0];
      lines.erase(lines.begin());
    }
    EXPECT_NE(lines[0].find("[4,8] reducing 1 cpu:"), std::string::npos) << lines[0];
    EXPECT_NE(lines[0].find("mean"), std::string::npos) << lines[0];
    EXPECT_NE(lines[1].find("[4,8] reducing 0 cpu:"), std::string::npos) << lines[1];
    EXPECT_NE(lines[1].find("sum"), lines[1].rfind("sum")) << "dweight and dbias in one kernel: " << lines[1];
  }
}

TEST(ReductionFusion, ReductionsOfOtherDimsOrFewLongRowsStayApart) {
  // x.sum(0) and x.sum(1) reduce different dims: two kernels. The whole-tensor sum of 512 x 512
  // elements is one row of 262144: the eager kernel, which splits it over the threads, keeps it; its
  // pointwise prologue joins the first group as a sibling reading x (a full node of its space).
  auto body = [](const ts::Tensor& x) {
    return std::vector<ts::Tensor>{(x * x).sum({0}), (x * 3.0).sum({1}), (x.exp() * 2.0).sum()};
  };
  const Planned p = plan_of(body, ts::randn({512, 512}));
  EXPECT_EQ(p.groups,
            "group 0 [512,512] reducing 0 cpu: mul %1, sum %2, exp %6, mul %8 <- %0 %7=2 -> %2 %8 (saves 6291456 B)\n"
            "group 1 [512,512] reducing 1 cpu: mul %4, sum %5 <- %0 %3=3 -> %5 (saves 2097152 B)\n");
}

TEST(ReductionFusion, AFullNodeNeverReadsARowWithoutItsReducedDims) {
  // x / x.sum(1) on a square x: the [8] sum broadcasts along the last dim, not along the rows, so
  // the division cannot read it as the row's value; it stays apart, and the result is still eager's.
  auto body = [](const ts::Tensor& x) { return (x * 2.0) / (x * 2.0).sum({1}); };
  ts::Tensor x = ts::randn({8, 8});
  const Planned p = plan_of(body, x);
  // x * 2 is computed once (common subexpressions); the division reads it and the sum and stays an
  // eager op of its own.
  EXPECT_EQ(p.groups, "group 0 [8,8] reducing 1 cpu: mul %2, sum %3 <- %0 %1=2 -> %2 %3 (saves 256 B)\n");
  auto f = ts::compile(body, ts::testing::codegen_options());
  f(x);
  EXPECT_TRUE(close(f(x), body(x)));
}

TEST(ReductionFusion, TheGpt2MlpAndBlock) {
  ts::models::GPT2Config c;
  c.n_layer = 1, c.n_head = 2, c.n_embd = 16, c.n_positions = 8, c.vocab_size = 32, c.fused = false;
  ts::models::GPT2MLP mlp(c);
  mlp.eval();
  ts::Tensor x = ts::randn({2, 8, 16});
  // The MLP: c_fc, the tanh GELU, c_proj. The GELU stands between two library calls: alone, it stays
  // the eager kernel.
  const Planned m = plan_of([&](const ts::Tensor& t) { return mlp.forward(t); }, x);
  EXPECT_EQ(m.groups, "") << m.graph.to_text();
  // The block: ln_1, attention, the residual add, ln_2, the MLP, the residual add. ln_1 is a group of
  // its own, so is the attention's softmax (the composite attention of fused = false), and the
  // residual add after the attention fuses with ln_2; the last residual add is alone and stays eager.
  ts::models::GPT2Block block(c);
  block.eval();
  const Planned b = plan_of([&](const ts::Tensor& t) { return block.forward(t); }, x);
  const std::vector<std::string> lines = group_lines(b.groups);
  ASSERT_EQ(lines.size(), 3u) << b.groups << b.graph.to_text();
  EXPECT_NE(lines[0].find("[2,8,16] reducing 2 cpu: mean"), std::string::npos) << b.groups;
  EXPECT_NE(lines[1].find("[2,2,8,8] reducing 3 cpu: amax"), std::string::npos) << b.groups;
  EXPECT_NE(lines[1].find("div"), std::string::npos) << b.groups;
  EXPECT_NE(lines[2].find("[2,8,16] reducing 2 cpu: add"), std::string::npos) << b.groups;
  EXPECT_NE(lines[2].find("rsqrt"), std::string::npos) << b.groups;
}

TEST(ReductionFusion, AResnetBottleneckInEvalMode) {
  // Inference. The ReLUs and the residual add write their inputs in place (Note [In-place
  // activations] in resnet.cpp); those inputs are private to the graph, so the writes become
  // functional ops (Note [Private writes]). Batch norm in eval mode is a per-channel affine map
  // (decompose.h): each fuses with the ReLU after it, and the last two (bn3 and the downsample's) with
  // the residual add and the final ReLU: three kernels beside the four convolutions, where eager runs
  // four batch norms, three ReLUs and an add.
  ts::models::ResNet net = ts::models::resnet50(10);
  net.eval();
  ts::NoGradGuard no_grad;
  ts::Tensor x = ts::randn({1, 64, 8, 8});
  auto& first = net.layer1[0];
  const Planned p = plan_of([&](const ts::Tensor& t) { return first.forward(t); }, x);
  const std::string text = p.graph.to_text();
  EXPECT_EQ(text.find("native_batch_norm"), std::string::npos) << text;
  EXPECT_EQ(text.find("relu_"), std::string::npos) << text;
  const std::vector<std::string> lines = group_lines(p.groups);
  ASSERT_EQ(lines.size(), 3u) << p.groups;
  EXPECT_NE(lines[0].find("[1,64,8,8] cpu: add %25, rsqrt %26, sub %29, mul %30, mul %33, add %36, relu %37"), std::string::npos)
      << lines[0];
  EXPECT_NE(lines[1].find("[1,64,8,8] cpu:"), std::string::npos) << lines[1];
  EXPECT_NE(lines[2].find("[1,256,8,8] cpu:"), std::string::npos) << lines[2];
  EXPECT_EQ(std::count(lines[2].begin(), lines[2].end(), 'q'), 2) << "two batch norms (rsqrt) in the last kernel: " << lines[2];
  EXPECT_NE(lines[2].find("relu"), std::string::npos) << lines[2];
  auto f = ts::compile([&](const ts::Tensor& t) { return first.forward(t); }, ts::testing::codegen_options());
  f(x);
  EXPECT_TRUE(close(f(x), first.forward(x)));
  EXPECT_EQ(f.stats().kernels, 3);
  EXPECT_EQ(f.stats().launches, 7);
  EXPECT_EQ(f.stats().eager_launches, 12);
}

TEST(ReductionFusion, ABatchNormThatNoFusibleOpReadsFoldsIntoItsConvolution) {
  // conv -> batch norm -> conv: nothing would fuse with the batch norm, so it folds into the first
  // convolution's weight and bias (Note [Conv and batch norm folding]).
  ts::nn::Conv2d c1(8, 16, 3, 1, 1, 1, 1, false), c2(16, 4, 1);
  ts::nn::BatchNorm2d bn(16);
  ts::manual_seed(3);
  bn.running_mean.copy_(ts::randn({16}) * 0.1);
  bn.running_var.copy_(ts::rand({16}) + 0.5);
  c1.eval(), bn.eval(), c2.eval();
  ts::NoGradGuard no_grad;
  auto body = [&](const ts::Tensor& t) { return c2.forward(bn.forward(c1.forward(t))); };
  ts::Tensor x = ts::randn({2, 8, 12, 12});
  const Planned p = plan_of(body, x);
  const std::string text = p.graph.to_text();
  EXPECT_EQ(text.find("native_batch_norm"), std::string::npos) << text;
  EXPECT_NE(text.find("rsqrt"), std::string::npos) << text;
  auto f = ts::compile(body, ts::testing::codegen_options());
  f(x);
  EXPECT_TRUE(close(f(x), body(x)));
}

TEST(ReductionKernels, NormalizationsEqualEagerForEveryDtype) {
  for (ts::DType dt : {ts::kFloat32, ts::kFloat64, ts::kBFloat16, ts::kFloat16}) {
    ts::manual_seed(7);
    ts::Tensor x = ts::randn({37, 53}).to(dt), r = ts::randn({37, 53}).to(dt), w = ts::randn({53}).to(dt);
    auto f = ts::compile(ts::testing::normalizations, ts::testing::codegen_options());
    f(x, r, w);
    std::vector<ts::Tensor> got = f(x, r, w), want = ts::testing::normalizations(x, r, w);
    EXPECT_GT(f.stats().kernels, 0) << ts::dtype_name(dt);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(close(got[i], want[i])) << ts::dtype_name(dt) << " output " << i;
  }
}

TEST(ReductionKernels, OddLayoutsAndReducedDimsThatAreNotTheLast) {
  auto body = [](const ts::Tensor& x) {
    return std::vector<ts::Tensor>{ts::softmax(x * 1.5, 0), (x - x.mean({0, 2}, true)).exp().sum({0, 2}, true),
                                   ts::log_softmax(x, 1), (x * x).amax({1})};
  };
  ts::manual_seed(8);
  ts::Tensor base = ts::randn({13, 7, 11});
  const std::vector<std::pair<const char*, ts::Tensor>> cases = {
      {"contiguous", base},
      {"transposed", ts::randn({11, 7, 13}).transpose(0, 2)},
      {"sliced", ts::randn({13, 7, 23}).slice(2, 0, 22, 2)},
      {"size-1 dim", ts::randn({13, 1, 11})},
      {"channels-last", ts::randn({13, 7, 11, 1}).contiguous(ts::MemoryFormat::ChannelsLast).squeeze(3)},
  };
  for (const auto& [what, x] : cases) {
    auto f = ts::compile(body, ts::testing::codegen_options());
    f(x);
    std::vector<ts::Tensor> got = f(x), want = body(x);
    EXPECT_GT(f.stats().kernels, 0) << what;
    for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(close(got[i], want[i])) << what << " output " << i;
  }
}

TEST(ReductionKernels, ManyRowsRunOnEveryThreadAndLongRowsToo) {
  ts::manual_seed(9);
  for (const ts::Shape& s : {ts::Shape{4096, 67}, ts::Shape{64, 50257}}) {
    ts::Tensor x = ts::randn(s), r = ts::randn(s), w = ts::randn({s[1]});
    auto f = ts::compile(ts::testing::normalizations, ts::testing::codegen_options());
    f(x, r, w);
    std::vector<ts::Tensor> got = f(x, r, w), want = ts::testing::normalizations(x, r, w);
    for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(close(got[i], want[i])) << s[1] << " output " << i;
  }
}

TEST(ReductionKernels, NanPropagatesThroughAmaxAndSoftmax) {
  auto body = [](const ts::Tensor& x) { return std::vector<ts::Tensor>{(x * 2.0).amax({1}), ts::softmax(x + 1.0, 1)}; };
  ts::Tensor x = ts::randn({40, 9});
  x.select(0, 3).select(0, 4).fill_(NAN);
  auto f = ts::compile(body, ts::testing::codegen_options());
  f(x);
  std::vector<ts::Tensor> got = f(x), want = body(x);
  EXPECT_TRUE(std::isnan(got[0][3].item<float>()));
  EXPECT_TRUE(close(got[0], want[0]));
  EXPECT_TRUE(close(got[1], want[1]));
}

TEST(ReductionKernels, GradientsThroughFusedNormalizationsEqualEager) {
  ts::manual_seed(10);
  ts::Tensor x = ts::randn({24, 40}).requires_grad_(), r = ts::randn({24, 40}).requires_grad_(), w = ts::randn({40}).requires_grad_();
  ts::Tensor xe = x.detach().requires_grad_(), re = r.detach().requires_grad_(), we = w.detach().requires_grad_();
  auto loss = [](const std::vector<ts::Tensor>& out) {
    ts::Tensor l;
    for (const ts::Tensor& o : out) l = l.defined() ? l + (o * o).sum() : (o * o).sum();
    return l;
  };
  auto f = ts::compile(ts::testing::normalizations, ts::testing::codegen_options());
  for (int call = 0; call < 2; ++call) {
    for (ts::Tensor* t : {&x, &r, &w, &xe, &re, &we}) t->zero_grad();
    std::vector<ts::Tensor> got = f(x, r, w), want = ts::testing::normalizations(xe, re, we);
    for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(close(got[i], want[i])) << "output " << i;
    loss(got).backward();
    loss(want).backward();
    EXPECT_TRUE(close(x.grad(), xe.grad())) << "call " << call;
    EXPECT_TRUE(close(r.grad(), re.grad())) << "call " << call;
    EXPECT_TRUE(close(w.grad(), we.grad())) << "call " << call;
  }
  EXPECT_EQ(f.stats().joint_variants, 1);
  EXPECT_GE(f.stats().kernels, 2);
}

TEST(ReductionKernels, ACpuRowKeepsWhatALaterPassReadsAgain) {
  // Note [Row cache]: softmax's exp is computed once, in the sum's pass, and read back in the
  // division's; a row longer than the cache recomputes it.
  auto body = [](const ts::Tensor& x) { return ts::softmax(x * 0.5, -1); };
  for (int64_t n : {1000, 5000}) {
    const Planned p = plan_of(body, ts::randn({8, n}));
    const tc::FusionPlan plan = tc::plan_fusion(p.graph);
    ASSERT_EQ(plan.groups.size(), 1u);
    const std::string src = tc::make_kernel_spec(p.graph, plan.groups[0], tc::KernelTarget::Cpu, 0).function;
    const size_t pass2 = src.find("// pass 2");
    ASSERT_NE(pass2, std::string::npos) << src;
    const bool kept = n <= 4096;
    EXPECT_EQ(src.find("Note [Row cache]") != std::string::npos, kept) << src;
    EXPECT_EQ(src.find("ts_exp", pass2) == std::string::npos, kept) << src;
    ts::Tensor x = ts::randn({8, n});
    auto f = ts::compile(body, ts::testing::codegen_options());
    f(x);
    EXPECT_TRUE(close(f(x), body(x))) << n;
  }
}

TEST(ReductionKernels, EveryReductionKernelsCudaTwinCompilesWithNvrtcForSm90) {
  if (!tc::cuda_codegen_available()) GTEST_SKIP() << "this build has no CUDA (NVRTC)";
  int compiled = 0, warp = 0, block = 0;
  for (const ts::Shape& s : {ts::Shape{37, 53}, ts::Shape{8, 5000}, ts::Shape{4, 40000}}) {
    for (ts::DType dt : {ts::kFloat32, ts::kFloat64, ts::kBFloat16, ts::kFloat16}) {
      ts::Tensor x = ts::randn(s).to(dt), w = ts::randn({s[1]}).to(dt);
      const Planned p = plan_of(ts::testing::normalizations, x, x, w);
      const tc::FusionPlan plan = tc::plan_fusion(p.graph);
      for (size_t k = 0; k < plan.groups.size(); ++k) {
        if (!plan.groups[k].reduction()) continue;
        const tc::KernelSpec spec = tc::make_kernel_spec(p.graph, plan.groups[k], tc::KernelTarget::Cuda, static_cast<int>(k));
        EXPECT_GT(tc::nvrtc_compile(tc::translation_unit(tc::KernelTarget::Cuda, {&spec}), spec.name + ".cu", 90).size(), 0u);
        ++compiled;
        (spec.row_threads == 32 ? warp : block)++;
      }
    }
  }
  EXPECT_GE(compiled, 12);
  EXPECT_GT(warp, 0);
  EXPECT_GT(block, 0);
}

// Note [Persistent rows]: a CUDA row that splits into whole chunks of V elements per thread is read
// from global memory once; every other shape or layout keeps the strided loop only.
TEST(ReductionKernels, CudaRowsThatSplitIntoChunksAreReadOnce) {
  struct Case { const char* what; ts::Tensor x; int threads, vector, chunks; };
  const std::vector<Case> cases = {
      {"1024 floats, a warp", ts::randn({16, 1024}), 32, 4, 8},
      {"768 bfloat16, a warp", ts::randn({8, 768}).to(ts::kBFloat16), 32, 8, 3},
      {"768 floats, a warp", ts::randn({8, 768}), 32, 4, 6},
      {"4096 floats, a block", ts::randn({4, 4096}), 256, 4, 4},
      {"32 doubles, one per lane", ts::randn({6, 32}).to(ts::kFloat64), 32, 1, 1},
      {"1000 floats: no whole chunks", ts::randn({8, 1000}), 32, 0, 0},
      {"40960 floats, a block of 1024", ts::randn({32, 40960}), 1024, 4, 10},
      {"81920 floats: too many registers", ts::randn({32, 81920}), 1024, 0, 0},
  };
  auto body = [](const ts::Tensor& x) { return ts::softmax(x * 0.5, -1); };
  for (const Case& c : cases) {
    const Planned p = plan_of(body, c.x);
    const tc::FusionPlan plan = tc::plan_fusion(p.graph);
    ASSERT_EQ(plan.groups.size(), 1u) << c.what;
    const tc::KernelSpec spec = tc::make_kernel_spec(p.graph, plan.groups[0], tc::KernelTarget::Cuda, 0);
    EXPECT_EQ(spec.row_threads, c.threads) << c.what;
    EXPECT_EQ(spec.persistent_vector, c.vector) << c.what << "\n" << spec.function;
    EXPECT_EQ(spec.persistent_chunks, c.chunks) << c.what;
    EXPECT_EQ(spec.function.find("Note [Persistent rows]") != std::string::npos, c.chunks > 0) << c.what;
    // softmax's input is read by all three passes: kept in registers, loaded once.
    if (c.chunks > 0) {
      EXPECT_NE(spec.function.find("kept for 3 passes"), std::string::npos) << spec.function;
    }
    EXPECT_EQ(tc::make_kernel_spec(p.graph, plan.groups[0], tc::KernelTarget::Cpu, 0).persistent_chunks, 0);
    if (tc::cuda_codegen_available()) {
      EXPECT_GT(tc::nvrtc_compile(tc::translation_unit(tc::KernelTarget::Cuda, {&spec}), "persistent.cu", 90).size(), 0u)
          << c.what;
    }
  }
  // A residual add + layer norm: x and r read by three passes stay in registers, the weight read by
  // the last one is loaded there.
  ts::Tensor x = ts::randn({8, 768}), w = ts::randn({768});
  const Planned ln = plan_of(ts::testing::normalizations, x, x, w);
  const tc::FusionPlan plan = tc::plan_fusion(ln.graph);
  int persistent = 0;
  for (size_t k = 0; k < plan.groups.size(); ++k) {
    if (!plan.groups[k].reduction()) continue;
    const tc::KernelSpec spec = tc::make_kernel_spec(ln.graph, plan.groups[k], tc::KernelTarget::Cuda, static_cast<int>(k));
    persistent += spec.persistent_chunks > 0;
    if (tc::cuda_codegen_available()) {
      EXPECT_GT(tc::nvrtc_compile(tc::translation_unit(tc::KernelTarget::Cuda, {&spec}), spec.name + ".cu", 90).size(), 0u)
          << spec.function;
    }
  }
  EXPECT_GE(persistent, 2) << "the normalizations of 768 columns";
}

}  // namespace
