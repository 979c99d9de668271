// ts::compile's API on the CPU: compiled equals eager (bitwise: the graph runs the same kernels in the
// same order), later calls run the graph on their own data, guards and recompiles, the recompile
// limit's warning, graph breaks and fullgraph, explain, in-place writes, constants, random draws and
// gradients through a compiled forward.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/test_util.h"
#include "compile/bitwise.h"
#include "compile/compile_warnings.h"
#include "ops/attention_ops.h"
#include "tessera/compile.h"
#include "tessera/nn.h"

namespace ts = tessera;

namespace {

using Warnings = tessera::testing::CompileWarnings;

using tessera::testing::bitwise;

ts::Tensor program(const ts::Tensor& x, const ts::Tensor& w) {
  ts::Tensor h = ts::matmul(x, w.t()).relu();
  ts::Tensor m = h.mean({1}, /*keepdim=*/true);
  ts::Tensor y = (h - m).exp().sum({1}) + x.slice(1, 0, 2).sum({1}) * 0.5;
  return ts::where(y > 1.0, y, -y).softmax(0);
}

TEST(Compile, LaterCallsRunTheGraphOnTheirOwnData) {
  auto f = ts::compile(program);
  for (int call = 0; call < 3; ++call) {
    ts::Tensor x = ts::randn({4, 6}), w = ts::randn({5, 6});
    EXPECT_TRUE(bitwise(f(x, w), program(x, w))) << "call " << call;
  }
  const ts::CompileStats s = f.stats();
  EXPECT_EQ(s.captures, 1);
  EXPECT_EQ(s.graph_calls, 2);
  EXPECT_EQ(s.eager_calls, 0);
  const std::string g = f.last_graph();
  for (const char* op : {"mm(", "relu(", "mean(", "exp(", "slice(", "gt(", "where(", "softmax("})
    EXPECT_NE(g.find(op), std::string::npos) << op << " missing from\n" << g;
}

TEST(Compile, ShapeDtypeAndStrideChangesRecompileAndSayWhy) {
  auto f = ts::compile([](const ts::Tensor& x) { return (x * 2).sum({0}); });
  ts::Tensor a = ts::randn({3, 4});
  EXPECT_TRUE(bitwise(f(a), (a * 2).sum({0})));
  ts::Tensor b = ts::randn({5, 4});
  EXPECT_TRUE(bitwise(f(b), (b * 2).sum({0})));
  ts::Tensor c = ts::randn({3, 4}).to(ts::kFloat64);
  EXPECT_TRUE(bitwise(f(c), (c * 2).sum({0})));
  ts::Tensor d = ts::randn({4, 3}).t();  // same sizes as a, other strides
  EXPECT_TRUE(bitwise(f(d), (d * 2).sum({0})));
  EXPECT_TRUE(bitwise(f(a), (a * 2).sum({0})));  // the first variant again: a cache hit
  const ts::CompileStats s = f.stats();
  EXPECT_EQ(s.captures, 4);
  EXPECT_EQ(s.graph_calls, 1);
  ASSERT_EQ(s.recompile_reasons.size(), 3u);
  EXPECT_NE(s.recompile_reasons[0].find("sizes [5, 4]"), std::string::npos) << s.recompile_reasons[0];
  EXPECT_NE(s.recompile_reasons[1].find("dtype float64"), std::string::npos) << s.recompile_reasons[1];
  EXPECT_NE(s.recompile_reasons[2].find("strides"), std::string::npos) << s.recompile_reasons[2];
}

TEST(Compile, GradModeRequiresGradAndNumbersAreGuarded) {
  auto f = ts::compile([](const ts::Tensor& x, double s) { return x * s; });
  ts::Tensor x = ts::randn({3});
  EXPECT_TRUE(bitwise(f(x, 2.0), x * 2.0));
  EXPECT_TRUE(bitwise(f(x, 3.0), x * 3.0));  // a new number: recompiles, never replays 2.0
  ts::Tensor xg = x.clone().requires_grad_(true);
  EXPECT_TRUE(bitwise(f(xg, 3.0), x * 3.0));
  {
    ts::NoGradGuard ng;
    EXPECT_TRUE(bitwise(f(xg, 3.0), x * 3.0));
  }
  const ts::CompileStats s = f.stats();
  EXPECT_EQ(s.captures, 4);
  ASSERT_EQ(s.recompile_reasons.size(), 3u);
  EXPECT_NE(s.recompile_reasons[0].find("non-tensor argument 0 is 3"), std::string::npos) << s.recompile_reasons[0];
  EXPECT_NE(s.recompile_reasons[1].find("requires_grad true"), std::string::npos) << s.recompile_reasons[1];
  EXPECT_NE(s.recompile_reasons[2].find("grad mode is off"), std::string::npos) << s.recompile_reasons[2];
}

TEST(Compile, PastTheRecompileLimitRunsEagerlyAndWarnsOnceNamingTheGuard) {
  Warnings w;
  ts::CompileOptions o;
  o.recompile_limit = 2;
  auto f = ts::compile([](const ts::Tensor& x) { return x + 1; }, o);
  for (int64_t n = 1; n <= 5; ++n) {
    ts::Tensor x = ts::randn({n});
    EXPECT_TRUE(bitwise(f(x), x + 1)) << "n = " << n;
  }
  const ts::CompileStats s = f.stats();
  EXPECT_EQ(s.captures, 2);
  EXPECT_EQ(s.eager_calls, 3);
  ASSERT_EQ(w.seen.size(), 1u);
  EXPECT_NE(w.seen[0].find("recompile limit (2"), std::string::npos) << w.seen[0];
  EXPECT_NE(w.seen[0].find("sizes [3]"), std::string::npos) << w.seen[0];
}

ts::Tensor with_host_read(const ts::Tensor& x) {
  ts::Tensor y = x * 2;
  const double m = y.max().item<double>();  // a host read: a graph break
  return y / m;
}

TEST(Compile, AHostReadBreaksTheGraphWarnsAndRunsEagerly) {
  Warnings w;
  auto f = ts::compile(with_host_read);
  for (int call = 0; call < 2; ++call) {
    ts::Tensor x = ts::rand({6}) + 0.5;
    EXPECT_TRUE(bitwise(f(x), with_host_read(x)));
  }
  EXPECT_EQ(f.stats().eager_calls, 1);
  EXPECT_EQ(f.stats().graph_calls, 0);
  ASSERT_EQ(w.seen.size(), 1u);
  EXPECT_NE(w.seen[0].find("graph break"), std::string::npos) << w.seen[0];
  EXPECT_NE(w.seen[0].find("item"), std::string::npos) << w.seen[0];
}

TEST(Compile, FullgraphRaisesAtABreakNamingIt) {
  ts::CompileOptions o;
  o.fullgraph = true;
  auto f = ts::compile(with_host_read, o);
  try {
    f(ts::rand({4}));
    FAIL() << "no error";
  } catch (const ts::NotImplementedError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("fullgraph=true"), std::string::npos) << m;
    EXPECT_NE(m.find("item"), std::string::npos) << m;
  }
}

TEST(Compile, AnOpWithoutAReplayRunsEagerlyAndSaysWhich) {
  Warnings w;
  auto body = [](const ts::Tensor& x) { return std::get<0>(ts::sort(x, 0)) * 2; };
  auto f = ts::compile(body);
  ts::Tensor x = ts::randn({7});
  EXPECT_TRUE(bitwise(f(x), body(x)));
  EXPECT_TRUE(bitwise(f(x), body(x)));
  ASSERT_EQ(w.seen.size(), 1u);
  EXPECT_NE(w.seen[0].find("sort"), std::string::npos) << w.seen[0];
  ts::CompileOptions o;
  o.fullgraph = true;
  auto g = ts::compile(body, o);
  EXPECT_THROW(g(x), ts::NotImplementedError);
}

TEST(Compile, ABackwardPassInsideBreaksTheGraph) {
  // Gradients reach .grad by assignment, which the capture cannot replay: the variant runs eagerly
  // (and stays right) rather than replaying a step that would leave the gradients stale.
  Warnings w;
  ts::Tensor p = ts::randn({4}).requires_grad_(true);
  auto step = ts::compile([&](const ts::Tensor& x) {
    ts::Tensor loss = (p * x).sum();
    loss.backward();
    return loss.detach();
  });
  for (int call = 0; call < 2; ++call) {
    p.zero_grad();
    ts::Tensor x = ts::randn({4});
    step(x);
    EXPECT_TRUE(bitwise(p.grad(), x)) << "call " << call;
  }
  ASSERT_EQ(w.seen.size(), 1u);
  EXPECT_NE(w.seen[0].find("backward()"), std::string::npos) << w.seen[0];
}

TEST(Compile, ExplainShowsGraphsGuardsAndBreaks) {
  auto f = ts::compile([](const ts::Tensor& x) { return x.exp() + 1; });
  const std::string e = ts::compile_explain(f, ts::randn({2, 3}));
  EXPECT_NE(e.find("1 variant(s)"), std::string::npos) << e;
  EXPECT_NE(e.find("argument 0: float32[2,3]{3,1}+0@cpu"), std::string::npos) << e;
  EXPECT_NE(e.find("exp("), std::string::npos) << e;
  EXPECT_NE(e.find("grad mode on"), std::string::npos) << e;
  Warnings w;
  auto g = ts::compile(with_host_read);
  const std::string eb = ts::compile_explain(g, ts::rand({3}) + 1);
  EXPECT_NE(eb.find("runs eagerly: graph break"), std::string::npos) << eb;
}

TEST(Compile, InPlaceWritesToArgumentsHappenAtEveryCall) {
  auto body = [](ts::Tensor x, const ts::Tensor& y) {
    x.add_(y);
    x.mul_(2);
    return x.relu();
  };
  auto f = ts::compile(body);
  for (int call = 0; call < 3; ++call) {
    ts::Tensor y = ts::randn({5});
    ts::Tensor x1 = ts::randn({5}), x2 = x1.clone();
    ts::Tensor r1 = f(x1, y), r2 = body(x2, y);
    EXPECT_TRUE(bitwise(r1, r2)) << "call " << call;
    EXPECT_TRUE(bitwise(x1, x2)) << "call " << call << ": the argument's write";
  }
  EXPECT_EQ(f.stats().graph_calls, 2);
}

TEST(Compile, OutputsAreFreshTensorsEveryCall) {
  auto f = ts::compile([](const ts::Tensor& x) { return ts::zeros_like(x) + x; });
  ts::Tensor x = ts::randn({4});
  ts::Tensor a = f(x), b = f(x * 3);
  EXPECT_FALSE(a.is_alias_of(b));
  EXPECT_TRUE(bitwise(a, x));
  EXPECT_TRUE(bitwise(b, x * 3));
  EXPECT_EQ(f.stats().graph_calls, 1);
}

TEST(Compile, ViewsOfArgumentsStayViews) {
  auto f = ts::compile([](const ts::Tensor& x) { return x.transpose(0, 1).slice(0, 1, 3); });
  ts::Tensor x = ts::randn({4, 5});
  f(x);
  ts::Tensor y = ts::randn({4, 5});
  ts::Tensor v = f(y);
  EXPECT_TRUE(v.is_alias_of(y));
  EXPECT_TRUE(bitwise(v, y.transpose(0, 1).slice(0, 1, 3)));
  EXPECT_EQ(f.stats().graph_calls, 1);
}

TEST(Compile, ClosedOverTensorsAreReadAsTheyAreAtEachCall) {
  ts::Tensor scale = ts::full({3}, 2.0);
  auto f = ts::compile([&](const ts::Tensor& x) { return x * scale; });
  ts::Tensor x = ts::randn({3});
  EXPECT_TRUE(bitwise(f(x), x * 2.0));
  scale.fill_(5.0);  // an in-place change of the constant is seen
  EXPECT_TRUE(bitwise(f(x), x * 5.0));
}

TEST(Compile, RandomDrawsFollowTheGenerator) {
  auto body = [](const ts::Tensor& x) { return ts::nn::functional::dropout(x, 0.5, true) + ts::rand({8}); };
  auto f = ts::compile(body);
  ts::Tensor x = ts::randn({8});
  for (int call = 0; call < 3; ++call) {
    ts::manual_seed(100 + call);
    ts::Tensor a = f(x);
    ts::manual_seed(100 + call);
    ts::Tensor b = body(x);
    EXPECT_TRUE(bitwise(a, b)) << "call " << call;
  }
  EXPECT_EQ(f.stats().graph_calls, 2);
}

TEST(Compile, GradientsThroughACompiledForwardEqualEager) {
  ts::Tensor w0 = ts::randn({5, 6});
  auto loss_of = [](const ts::Tensor& x, const ts::Tensor& w) { return program(x, w).pow(2).sum(); };
  auto f = ts::compile(loss_of);
  for (int call = 0; call < 3; ++call) {
    ts::Tensor x = ts::randn({4, 6});
    ts::Tensor w1 = w0.clone().requires_grad_(true), w2 = w0.clone().requires_grad_(true);
    ts::Tensor l1 = f(x, w1), l2 = loss_of(x, w2);
    EXPECT_TRUE(bitwise(l1, l2));
    l1.backward();
    l2.backward();
    EXPECT_TRUE(bitwise(w1.grad(), w2.grad())) << "call " << call;
  }
  EXPECT_EQ(f.stats().graph_calls, 2);
}

TEST(Compile, TheBackwardIsACapturedGraphRunByOneNode) {
  auto loss_of = [](const ts::Tensor& x, const ts::Tensor& w) { return program(x, w).pow(2).sum(); };
  auto f = ts::compile(loss_of);
  ts::Tensor x = ts::randn({4, 6}), w = ts::randn({5, 6}).requires_grad_(true);
  f(x, w);
  ts::Tensor l = f(x, w);  // the graph's call: one autograd node for the whole function
  EXPECT_EQ(f.stats().joint_variants, 1);
  ASSERT_NE(l.grad_fn(), nullptr);
  EXPECT_EQ(l.grad_fn()->name(), "CompiledFunctionBackward");
  const std::string bwd = f.last_backward_graph();
  EXPECT_NE(bwd.find("input %0 : float32[]{}+0@cpu arg 0"), std::string::npos) << bwd;  // the loss's gradient
  EXPECT_NE(bwd.find("saved"), std::string::npos) << bwd;
  EXPECT_NE(bwd.find("mm("), std::string::npos) << bwd;
  // A graph of the backward is refused rather than silently first-order.
  EXPECT_THROW(ts::autograd::grad({l}, {w}, {}, true, /*create_graph=*/true), ts::NotImplementedError);
  l.backward();
  EXPECT_THROW(l.backward(), ts::ValueError);  // the saved values are gone, as in eager
}

// GPT-2's attention: q, k, v cut from one (B, T, 3C) projection and seen as (B, H, T, D) views. The
// flash attention op lays its output and gradients out by its inputs' layouts on every device (Note
// [Flash attention layout]), so the verifier's meta functions re-infer the captured layouts: the
// forward and the joint backward run as graphs, equal to eager bitwise.
TEST(Compile, GptAttentionLayoutsReinferAndRunAsGraphs) {
  const int64_t b = 2, t = 5, h = 2, d = 4, c = h * d;
  auto attn = [&](const ts::Tensor& x) {
    std::vector<ts::Tensor> qkv = x.split(c, 2);
    auto heads = [&](const ts::Tensor& y) { return y.view({b, t, h, d}).transpose(1, 2); };
    ts::Tensor y = std::get<0>(ts::flash_attention_forward(heads(qkv[0]), heads(qkv[1]), heads(qkv[2]), true, 0.5));
    return y.transpose(1, 2).reshape({b, t, c}).pow(2).sum();
  };
  auto f = ts::compile(attn, {.fullgraph = true});
  for (int call = 0; call < 3; ++call) {
    const ts::Tensor x0 = ts::randn({b, t, 3 * c}, ts::kFloat64);
    ts::Tensor x1 = x0.clone().requires_grad_(true), x2 = x0.clone().requires_grad_(true);
    ts::Tensor l1 = f(x1), l2 = attn(x2);
    EXPECT_TRUE(bitwise(l1, l2)) << "call " << call;
    l1.backward();
    l2.backward();
    EXPECT_TRUE(bitwise(x1.grad(), x2.grad())) << "call " << call;
  }
  const ts::CompileStats s = f.stats();
  EXPECT_EQ(s.eager_calls, 0);
  EXPECT_EQ(s.graph_calls, 2);
  EXPECT_EQ(s.joint_variants, 1) << (s.no_backward_reasons.empty() ? "" : s.no_backward_reasons[0]);
}

// ReduceOverhead replays CUDA graphs (tests/cuda/test_compile_reduce_overhead.cpp); CPU work runs as
// the Default mode runs it, and the compiler says why once.
TEST(Compile, ReduceOverheadOnTheCpuRunsAsDefaultAndSaysWhy) {
  Warnings w;
  ts::CompileOptions o;
  o.mode = ts::CompileMode::ReduceOverhead;
  auto f = ts::compile(program, o);
  for (int call = 0; call < 4; ++call) {
    ts::Tensor x = ts::randn({4, 6}), w2 = ts::randn({5, 6});
    EXPECT_TRUE(bitwise(f(x, w2), program(x, w2))) << "call " << call;
  }
  const ts::CompileStats s = f.stats();
  EXPECT_EQ(s.cuda_graphs, 0);
  EXPECT_EQ(s.cuda_graph_replays, 0);
  EXPECT_EQ(s.graph_calls, 3);
  EXPECT_EQ(w.seen.size(), 1u);
  EXPECT_TRUE(w.any_contains("runs without a CUDA graph: argument 0 is on cpu")) << (w.seen.empty() ? "" : w.seen[0]);
}

TEST(Compile, OutputsSharingStorageAreViewsToAutograd) {
  // Two outputs of one buffer: each is a slot of the compiled node, and an in-place write to either
  // is refused as for any view that requires grad (it would change the other behind autograd's back).
  auto f = ts::compile([](const ts::Tensor& x) {
    ts::Tensor y = x * 2;
    return std::make_tuple(y, y.view({-1}));
  });
  ts::Tensor x = ts::randn({2, 3}).requires_grad_(true);
  f(x);
  auto [a, b] = f(x);
  EXPECT_EQ(f.stats().joint_variants, 1);
  EXPECT_THROW(a.mul_(2), ts::NotImplementedError);
  (a.sum() + (b * 2).sum()).backward();
  EXPECT_TRUE(bitwise(x.grad(), ts::full({2, 3}, 6.0)));
}

TEST(Compile, BadOptionsAreRefused) {
  ts::CompileOptions o;
  o.backend = "inductor";
  EXPECT_THROW(ts::compile([](const ts::Tensor& x) { return x; }, o), ts::ValueError);
  o.backend = "eager";
  o.recompile_limit = 0;
  EXPECT_THROW(ts::compile([](const ts::Tensor& x) { return x; }, o), ts::ValueError);
}

}  // namespace

namespace {
// A weight used through a derived tensor: what autocast's casts are to an inference graph.
struct Scaled : ts::nn::Module {
  ts::Tensor weight = ts::randn({6, 4});
  Scaled() { register_parameter("weight", weight); }
  ts::Tensor forward(ts::Tensor x) override { return ts::nn::functional::linear(x, (weight * 0.5).exp().t().contiguous().t()); }
};
}  // namespace

// Note [Parameter-derived steps]: in inference the steps that read only parameters run once and are
// reused while the parameters are unchanged; an in-place update, a load_state_dict, a closed-over
// tensor written, or a call that records gradients computes them again; the results are eager's.
TEST(Compile, StepsReadingOnlyParametersRunOnceWhileTheParametersAreUnchanged) {
  for (const char* backend : {"eager", "codegen"}) {
    ts::manual_seed(4);
    Scaled m;
    ts::CompileOptions o;
    o.backend = backend;
    auto f = ts::compile(m, o);
    ts::Tensor x = ts::randn({3, 4});
    ts::NoGradGuard no_grad;
    EXPECT_TRUE(ts::allclose(f(x), m.forward(x))) << backend;  // captures
    EXPECT_TRUE(ts::allclose(f(x), m.forward(x))) << backend;  // runs, keeps the derived weight
    EXPECT_TRUE(ts::allclose(f(x), m.forward(x))) << backend;  // reuses it
    EXPECT_EQ(f.stats().parameter_cache_hits, 1) << backend;
    EXPECT_GE(f.stats().parameter_steps, 1) << backend;
    m.weight.mul_(2.0);  // in place: the version changes
    EXPECT_TRUE(ts::allclose(f(x), m.forward(x))) << backend << ": after an in-place update";
    EXPECT_EQ(f.stats().parameter_cache_hits, 1) << backend;
    EXPECT_TRUE(ts::allclose(f(x), m.forward(x))) << backend;
    EXPECT_EQ(f.stats().parameter_cache_hits, 2) << backend;
    ts::nn::StateDict sd = m.state_dict();
    sd["weight"] = ts::randn({6, 4});
    m.load_state_dict(sd);
    EXPECT_TRUE(ts::allclose(f(x), m.forward(x))) << backend << ": after load_state_dict";
    EXPECT_EQ(f.stats().parameter_cache_hits, 2) << backend;
  }
  // A tensor the program closes over is data, as an argument is: never cached (a program of such
  // tensors alone would otherwise run once for good).
  ts::Tensor w = ts::randn({4, 4}), x = ts::randn({2, 4});
  auto g = ts::compile([&] { return x.matmul((w * 3.0).tanh()); });
  ts::NoGradGuard no_grad;
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(ts::allclose(g(), x.matmul((w * 3.0).tanh())));
  EXPECT_EQ(g.stats().parameter_cache_hits, 0);
  w.fill_(0.25);
  EXPECT_TRUE(ts::allclose(g(), x.matmul((w * 3.0).tanh()))) << "after writing the closed-over tensor";
}

TEST(Compile, TrainingCallsNeverReuseParameterDerivedSteps) {
  ts::manual_seed(5);
  Scaled m;
  auto f = ts::compile(m);
  ts::Tensor x = ts::randn({3, 4});
  for (int i = 0; i < 3; ++i) {
    m.zero_grad();
    f(x).sum().backward();
    ts::Tensor got = m.weight.grad().clone();
    m.zero_grad();
    m.forward(x).sum().backward();
    EXPECT_TRUE(ts::allclose(got, m.weight.grad())) << "call " << i;
  }
  EXPECT_EQ(f.stats().parameter_cache_hits, 0);
}
