// The IR (src/compile/graph.h): what the capture records, the text form's round trip, the verifier
// catching corrupted graphs, dead-code elimination and the memory plan.
#include <gtest/gtest.h>

#include <string>

#include "common/test_util.h"
#include "compile/capture.h"
#include "compile/executor.h"
#include "compile/verify.h"
#include "tessera/models.h"

namespace ts = tessera;
namespace tc = tessera::compiler;

namespace {

tc::CaptureResult capture(const std::vector<ts::Tensor>& args, const std::function<std::vector<ts::Tensor>()>& fn,
                          const tc::NamedTensors& params = {}) {
  return tc::capture_program(args, params, fn);
}

TEST(GraphIR, ACapturedChainPrintsOneLinePerNode) {
  ts::Tensor x = ts::randn({2, 3});
  tc::CaptureResult r = capture({x}, [&] { return std::vector<ts::Tensor>{(x.exp() + 1).sum({1})}; });
  ASSERT_TRUE(r.complete) << r.stop_reason;
  const std::string text = r.graph.to_text();
  // The scalar 1 is a fresh 0-dim CPU buffer filled by fill_: the add reads it like any operand.
  EXPECT_NE(text.find("input %0 : float32[2,3]{3,1}+0@cpu arg 0"), std::string::npos) << text;
  EXPECT_NE(text.find("= exp(%0) {} : float32[2,3]{3,1}+0@cpu"), std::string::npos) << text;
  EXPECT_NE(text.find("= fill_(_) {scalars=i1} : float32[]{}+0@cpu"), std::string::npos) << text;
  EXPECT_NE(text.find("= sum(%"), std::string::npos) << text;
  EXPECT_NE(text.find("{attrs=Reduce dims=1 keepdim=0"), std::string::npos) << text;
  EXPECT_EQ(tc::verify_graph(r.graph).reinferred, static_cast<int>(r.graph.nodes.size()));
}

TEST(GraphIR, TextRoundTripsForTheModels) {
  ts::manual_seed(1);
  ts::models::CNN cnn(1, 10, 28);
  ts::models::ResNet resnet = ts::models::resnet18(10, 3, true);
  ts::models::GPT2Config cfg;
  cfg.n_layer = 2, cfg.n_head = 2, cfg.n_embd = 32, cfg.n_positions = 16, cfg.vocab_size = 64;
  ts::models::GPT2 gpt(cfg);
  struct Case {
    const char* name;
    ts::nn::Module* m;
    ts::Tensor x;
  } cases[] = {{"cnn", &cnn, ts::randn({2, 1, 28, 28})},
               {"resnet18", &resnet, ts::randn({2, 3, 16, 16})},
               {"gpt2", &gpt, ts::randint(0, 64, {2, 8}, ts::kInt64)}};
  for (const Case& c : cases) {
    tc::NamedTensors params = c.m->named_parameters();
    tc::CaptureResult r = capture({c.x}, [&] { return std::vector<ts::Tensor>{c.m->forward(c.x)}; }, params);
    ASSERT_TRUE(r.complete) << c.name << ": " << r.stop_reason;
    const std::string text = r.graph.to_text();
    const tc::Graph parsed = tc::parse_graph(text);
    EXPECT_EQ(parsed.to_text(), text) << c.name;
    tc::VerifyReport v = tc::verify_graph(parsed);
    EXPECT_EQ(v.nodes, static_cast<int>(r.graph.nodes.size())) << c.name;
    EXPECT_GT(v.reinferred, v.nodes * 9 / 10) << c.name << ": skipped " << v.skipped;
  }
}

TEST(GraphIR, TheVerifierCatchesCorruptedGraphs) {
  ts::Tensor x = ts::randn({4, 5}), w = ts::randn({3, 5});
  tc::CaptureResult r = capture({x, w}, [&] { return std::vector<ts::Tensor>{ts::linear(x, w).relu().sum({0})}; });
  ASSERT_TRUE(r.complete) << r.stop_reason;
  tc::verify_graph(r.graph);
  {  // an output's shape that the meta function does not give
    tc::Graph g = r.graph;
    g.values[g.nodes[0].outputs[0]].meta.sizes = {4, 4};
    try {
      tc::verify_graph(g);
      FAIL() << "not caught";
    } catch (const ts::ValueError& e) {
      EXPECT_NE(std::string(e.what()).find("node 0 (linear)"), std::string::npos) << e.what();
    }
  }
  {  // a dtype
    tc::Graph g = r.graph;
    g.values[g.nodes[0].outputs[0]].meta.dtype = ts::kFloat64;
    EXPECT_THROW(tc::verify_graph(g), ts::ValueError);
  }
  {  // a use before its definition
    tc::Graph g = r.graph;
    std::swap(g.nodes[0], g.nodes[1]);
    EXPECT_THROW(tc::verify_graph(g, /*reinfer=*/false), ts::ValueError);
  }
  {  // an output that no node defines
    tc::Graph g = r.graph;
    g.outputs = {static_cast<int>(g.values.size()) + 3};
    EXPECT_THROW(tc::verify_graph(g, false), ts::ValueError);
  }
  // The parser refuses malformed text, naming the line.
  EXPECT_THROW(tc::parse_graph("graph\n  %1 = exp(%0) {} : float32[2]{1}+0@cpu\n  output %1\n"), ts::ValueError);
  EXPECT_THROW(tc::parse_graph("graph\n  input %0 : float32[2]{1}+0@cpu arg 0\n  %1 = frobnicate(%0) {} : "
                               "float32[2]{1}+0@cpu\n  output %1\n"),
               ts::ValueError);
  EXPECT_THROW(tc::parse_graph("graph\n  input %0 : float77[2]{1}+0@cpu arg 0\n  output %0\n"), ts::ValueError);
}

TEST(GraphIR, DeadCodeGoesSideEffectsStay) {
  ts::Tensor x = ts::randn({6}), acc = ts::zeros({6});
  tc::CaptureResult r = capture({x, acc}, [&] {
    ts::Tensor unused = x.sin() * 3;  // dead
    acc.add_(x);                      // a write to an argument: kept
    (void)ts::rand({2});              // a draw advances the generator: kept
    return std::vector<ts::Tensor>{x.cos()};
  });
  ASSERT_TRUE(r.complete) << r.stop_reason;
  const std::string text = r.graph.to_text();
  EXPECT_EQ(text.find("sin("), std::string::npos) << text;
  EXPECT_NE(text.find("add_("), std::string::npos) << text;
  EXPECT_NE(text.find("uniform_("), std::string::npos) << text;
  EXPECT_NE(text.find("cos("), std::string::npos) << text;
}

TEST(GraphIR, TheMemoryPlanReusesBuffersOfAChain) {
  ts::Tensor x = ts::randn({1000});
  tc::CaptureResult r = capture({x}, [&] {
    ts::Tensor y = x;
    for (int i = 0; i < 10; ++i) y = y.exp().neg();
    return std::vector<ts::Tensor>{y};
  });
  ASSERT_TRUE(r.complete);
  tc::ExecutionPlan p = tc::plan_execution(r.graph);
  EXPECT_EQ(p.memory.buffers, 20);
  EXPECT_EQ(p.memory.total_bytes, 20 * 4000);
  EXPECT_EQ(p.memory.peak_bytes, 2 * 4000);  // an op's input and its output
  const std::vector<ts::Tensor> out = tc::execute(r.graph, p, {x}, {});
  ts::Tensor want = x;
  for (int i = 0; i < 10; ++i) want = want.exp().neg();
  EXPECT_TRUE(ts::equal(out[0], want));
}

TEST(GraphIR, WhatTheCaptureCannotSeeStopsIt) {
  ts::Tensor x = ts::randn({5});
  {  // a tensor made from host data inside the program: the host writes its data (a break)
    tc::CaptureResult r = capture({x}, [&] { return std::vector<ts::Tensor>{x + ts::tensor({1, 2, 3, 4, 5})}; });
    EXPECT_FALSE(r.complete);
    EXPECT_NE(r.stop_reason.find("data_ptr"), std::string::npos) << r.stop_reason;
  }
  {  // a host read
    tc::CaptureResult r = capture({x}, [&] {
      (void)x.sum().item<double>();
      return std::vector<ts::Tensor>{x};
    });
    EXPECT_FALSE(r.complete);
    EXPECT_TRUE(r.graph_break);
    EXPECT_NE(r.stop_reason.find("item"), std::string::npos) << r.stop_reason;
  }
  {  // data-dependent output shapes
    tc::CaptureResult r = capture({x}, [&] { return std::vector<ts::Tensor>{ts::nonzero(x > 0)}; });
    EXPECT_FALSE(r.complete);
    EXPECT_NE(r.stop_reason.find("nonzero"), std::string::npos) << r.stop_reason;
  }
}

}  // namespace
