// The passes before fusion (passes.h, Note [Passes before fusion]): what common-subexpression
// elimination merges and what it must keep apart (random draws, buffers written afterwards, the
// program's distinct outputs), scalar constant folding, and the codegen pipeline's result running as
// eager does. Goldens are graphs in the IR's text form.
#include <gtest/gtest.h>

#include <string>

#include "compile/codegen_testing.h"
#include "compile/decompose.h"
#include "compile/graph.h"
#include "compile/passes.h"
#include "compile/verify.h"
#include "tessera/compile.h"
#include "tessera/nn/functional.h"

namespace ts = tessera;
namespace tc = tessera::compiler;

namespace {

std::string after_cse(const std::string& text) {
  tc::Graph g = tc::parse_graph(text);
  tc::eliminate_common_subexpressions(g);
  tc::verify_graph(g);
  return g.to_text();
}

TEST(Passes, CommonSubexpressionsAreMergedAndTheirUsersFollow) {
  const std::string in =
      "graph\n"
      "  input %0 : float32[4]{1}+0@cpu arg 0\n"
      "  input %1 : float32[4]{1}+0@cpu arg 1\n"
      "  %2 = mul(%0, %1) {} : float32[4]{1}+0@cpu\n"
      "  %3 = mul(%0, %1) {} : float32[4]{1}+0@cpu\n"
      "  %4 = exp(%2) {} : float32[4]{1}+0@cpu\n"
      "  %5 = exp(%3) {} : float32[4]{1}+0@cpu\n"
      "  %6 = add(%4, %5) {scalars=i1} : float32[4]{1}+0@cpu\n"
      "  %7 = sub(%4, %5) {scalars=i2} : float32[4]{1}+0@cpu\n"
      "  %8 = sub(%4, %5) {scalars=i1} : float32[4]{1}+0@cpu\n"
      "  output %6, %7, %8\n";
  // The second mul, then the second exp (whose input is now the first mul) go; the two subs differ
  // in alpha and stay.
  EXPECT_EQ(after_cse(in),
            "graph\n"
            "  input %0 : float32[4]{1}+0@cpu arg 0\n"
            "  input %1 : float32[4]{1}+0@cpu arg 1\n"
            "  %2 = mul(%0, %1) {} : float32[4]{1}+0@cpu\n"
            "  %3 = exp(%2) {} : float32[4]{1}+0@cpu\n"
            "  %4 = add(%3, %3) {scalars=i1} : float32[4]{1}+0@cpu\n"
            "  %5 = sub(%3, %3) {scalars=i2} : float32[4]{1}+0@cpu\n"
            "  %6 = sub(%3, %3) {scalars=i1} : float32[4]{1}+0@cpu\n"
            "  output %4, %5, %6\n");
}

TEST(Passes, RandomDrawsWrittenBuffersAndDistinctOutputsStayApart) {
  const std::string in =
      "graph\n"
      "  input %0 : float32[4]{1}+0@cpu arg 0\n"
      "  %1 = fill_(_) {scalars=f0} : float32[4]{1}+0@cpu\n"
      "  %2 = fill_(_) {scalars=f0} : float32[4]{1}+0@cpu\n"
      "  %3 = add_(%1, %1, %0) {scalars=i1} : float32[4]{1}+0@cpu\n"
      "  %4 = exp(%0) {} : float32[4]{1}+0@cpu\n"
      "  %5 = exp(%0) {} : float32[4]{1}+0@cpu\n"
      "  %6 = add(%1, %2) {scalars=i1} : float32[4]{1}+0@cpu\n"
      "  output %6, %4, %5\n";
  // %1 is written in place afterwards: %2 is another buffer. %4 and %5 are both returned.
  EXPECT_EQ(after_cse(in), tc::parse_graph(in).to_text());
  // Two draws of the same shape are two draws.
  auto f = ts::compile([](const ts::Tensor& x) { return ts::rand_like(x) + ts::rand_like(x); });
  f(ts::zeros({8}));
  tc::Graph g = tc::parse_graph(f.last_graph());
  const size_t nodes = g.nodes.size();
  EXPECT_EQ(tc::eliminate_common_subexpressions(g), 0);
  EXPECT_EQ(g.nodes.size(), nodes);
}

TEST(Passes, ScalarConstantsAreFoldedByTheirOwnKernels) {
  tc::Graph g = tc::parse_graph(
      "graph\n"
      "  input %0 : float32[4]{1}+0@cpu arg 0\n"
      "  %1 = fill_(_) {scalars=f2} : float32[]{}+0@cpu\n"
      "  %2 = fill_(_) {scalars=f3} : float32[]{}+0@cpu\n"
      "  %3 = mul(%1, %2) {} : float32[]{}+0@cpu\n"
      "  %4 = sqrt(%3) {} : float32[]{}+0@cpu\n"
      "  %5 = mul(%0, %4) {} : float32[4]{1}+0@cpu\n"
      "  output %5\n");
  EXPECT_EQ(tc::fold_scalar_constants(g), 2);
  tc::verify_graph(g);
  // sqrt(6) as float32 computes it: 0x1.3988e2p+1.
  EXPECT_EQ(g.to_text(),
            "graph\n"
            "  input %0 : float32[4]{1}+0@cpu arg 0\n"
            "  %1 = fill_(_) {scalars=f2.4494898319244385} : float32[]{}+0@cpu\n"
            "  %2 = mul(%0, %1) {} : float32[4]{1}+0@cpu\n"
            "  output %2\n");
}

TEST(Passes, TheJointGraphsRecomputationIsMergedAndTheResultIsEagers) {
  // The derivative of (x * y).exp() reads exp(x * y) again: the backward recomputes x * y.
  auto body = [](const ts::Tensor& x, const ts::Tensor& y) { return ((x * y).exp() * (x * y)).sum({1}); };
  for (bool partition : {false, true}) {
    ts::Tensor x = ts::randn({16, 24}).requires_grad_(), y = ts::randn({16, 24}).requires_grad_();
    ts::Tensor xe = x.detach().requires_grad_(), ye = y.detach().requires_grad_();
    ts::CompileOptions o = ts::testing::codegen_options();
    o.min_cut_partition = partition;
    auto f = ts::compile(body, o);
    for (int call = 0; call < 2; ++call) {
      for (ts::Tensor* t : {&x, &y, &xe, &ye}) t->zero_grad();
      ts::Tensor got = f(x, y), want = body(xe, ye);
      EXPECT_TRUE(ts::testing::close(got, want));
      got.sum().backward();
      want.sum().backward();
      EXPECT_TRUE(ts::testing::close(x.grad(), xe.grad()));
      EXPECT_TRUE(ts::testing::close(y.grad(), ye.grad()));
    }
    tc::Graph g = tc::parse_graph(f.last_graph());
    if (!partition) {
      // As captured, the forward returns the sum, then the values its backward reads: both products
      // are saved.
      EXPECT_EQ(tc::eliminate_common_subexpressions(g), 0) << "saved values returned as distinct outputs";
      EXPECT_EQ(tc::eliminate_common_subexpressions(g, 1), 1) << "x * y, computed twice in the forward";
      continue;
    }
    // Note [Min-cut partition]: the forward saves x and y alone (no product), and the backward makes
    // the exp again from them; the forward's two products merge.
    EXPECT_EQ(f.stats().saved_bytes, 0);
    EXPECT_GT(f.stats().recomputed_nodes, 0);
    EXPECT_EQ(tc::eliminate_common_subexpressions(g), 1) << "x * y, computed twice in the forward";
    EXPECT_NE(f.last_backward_graph().find(" = exp("), std::string::npos) << f.last_backward_graph();
  }
}

// Note [Padded classifier products]: a returned 16-bit product with a ragged column count multiplies
// by a weight padded with zero rows and returns the first columns of the padded result; on the CPU,
// where nothing is staged, and where another node reads the product, the graph stays as it is.
TEST(Passes, AReturnedRaggedClassifierProductIsComputedPaddedOnCuda) {
  auto graph = [](const char* device, bool read_after) {
    std::string d = device;
    std::string t = "graph\n  input %0 : bfloat16[4,768]{768,1}+0@" + d + " arg 0\n  input %1 : bfloat16[1001,768]{768,1}+0@" +
                    d + " arg 1\n  %2 = linear(%0, %1, _) {} : bfloat16[4,1001]{1001,1}+0@" + d + "\n";
    if (read_after) t += "  %3 = relu(%2) {} : bfloat16[4,1001]{1001,1}+0@" + d + "\n  output %3\n";
    else t += "  output %2\n";
    return tc::parse_graph(t);
  };
  tc::Graph g = graph("cuda:0", false);
  EXPECT_EQ(tc::decompose_for_fusion(g), 1);
  tc::verify_graph(g);
  const std::string text = g.to_text();
  EXPECT_NE(text.find("= cat(%1, "), std::string::npos) << text;
  EXPECT_NE(text.find(": bfloat16[4,1008]{1008,1}+0@cuda:0"), std::string::npos) << "the padded product\n" << text;
  const tc::TensorMeta& out = g.values[g.outputs[0]].meta;
  EXPECT_EQ(out.sizes, (std::vector<int64_t>{4, 1001}));
  EXPECT_EQ(out.strides, (std::vector<int64_t>{1008, 1})) << "the first 1001 columns of the padded result";
  for (auto [device, read_after] : {std::pair{"cpu", false}, std::pair{"cuda:0", true}}) {
    tc::Graph h = graph(device, read_after);
    const std::string before = h.to_text();
    tc::decompose_for_fusion(h);
    EXPECT_EQ(h.to_text(), before) << device << (read_after ? ", read after" : "");
  }
}


// Note [Unread saved outputs]: GPT-2's fused MLP in an inference graph runs without its saved outputs;
// in a training graph the backward reads mlp_gelu's (w1 requires grad) and they stay, while
// linear_gelu's, whose inputs need no gradient, go. Both equal eager.
TEST(Passes, AnInferenceGraphsFusedMlpDropsTheOutputsOnlyItsBackwardWouldRead) {
  auto mlp = [](const ts::Tensor& x, const ts::Tensor& w1, const ts::Tensor& b1, const ts::Tensor& w2) {
    return ts::nn::functional::mlp_gelu(x, w1, b1, w2, std::nullopt) + ts::nn::functional::linear_gelu(x, w2.t(), std::nullopt).sum();
  };
  for (bool train : {false, true}) {
    ts::manual_seed(3);
    ts::Tensor x = ts::randn({6, 8}), w1 = ts::randn({16, 8}), b1 = ts::randn({16}), w2 = ts::randn({8, 16});
    if (train) w1.requires_grad_();
    auto f = ts::compile(mlp, ts::testing::codegen_options());
    f(x, w1, b1, w2);
    EXPECT_TRUE(ts::testing::close(f(x, w1, b1, w2), mlp(x, w1, b1, w2))) << "train " << train;
    tc::Graph g = tc::parse_graph(f.last_graph());
    const std::string before = g.to_text();
    EXPECT_EQ(tc::drop_unread_saved_outputs(g), train ? 1 : 2) << before;
    tc::verify_graph(g);
    for (const tc::Node& n : g.nodes)
      if (n.op == ts::OpId::mlp_gelu || n.op == ts::OpId::linear_gelu)
        EXPECT_EQ(n.outputs.size(), train && n.op == ts::OpId::mlp_gelu ? 3u : 1u) << g.to_text();
  }
}

}  // namespace
