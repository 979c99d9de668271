// The min-cut partition (Note [Min-cut partition] in src/compile/partition.h): Dinic's flow and the
// two extreme minimum cuts on small networks; which forward values a captured joint graph saves and
// which nodes its backward recomputes (goldens: the values by their ops and layouts, and their
// bytes); what must never be recomputed (a random draw, a value written in place later, a cast whose
// recomputation would keep more bytes); the rewritten graphs verified and run, equal to eager bitwise.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "compile/bitwise.h"
#include "compile/capture.h"
#include "compile/max_flow.h"
#include "compile/partition.h"
#include "compile/recompute_rules.h"
#include "compile/verify.h"
#include "tessera/compile.h"
#include "tessera/nn/functional.h"

namespace ts = tessera;
namespace tc = tessera::compiler;
using ts::testing::bitwise;

namespace {

TEST(MaxFlow, TheTextbookNetworkAndItsCut) {
  // CLRS's figure 26.1: s=0, v1..v4 = 1..4, t=5; the maximum flow is 23, and the one minimum cut
  // separates {s, v1, v2, v4} from {v3, t} (v1->v3 12, v4->v3 7, v4->t 4).
  tc::FlowNetwork net(6);
  const int edges[][3] = {{0, 1, 16}, {0, 2, 13}, {2, 1, 4}, {1, 3, 12}, {3, 2, 9},
                          {2, 4, 14}, {4, 3, 7},  {3, 5, 20}, {4, 5, 4}};
  for (const auto& e : edges) net.add_edge(e[0], e[1], e[2]);
  EXPECT_EQ(net.max_flow(0, 5), 23);
  EXPECT_EQ(net.reached_from_source(), (std::vector<char>{1, 1, 1, 0, 1, 0}));
  EXPECT_EQ(net.reaching_sink(), (std::vector<char>{0, 0, 0, 1, 0, 1}));
  EXPECT_THROW(net.max_flow(0, 5), ts::ValueError);  // once per network
}

TEST(MaxFlow, TiedCutsAndInfiniteOnes) {
  // s -2-> a -2-> t: both edges are minimum cuts; the source side of one is {s}, the sink side of
  // the other {t}.
  tc::FlowNetwork chain(3);
  chain.add_edge(0, 1, 2);
  chain.add_edge(1, 2, 2);
  EXPECT_EQ(chain.max_flow(0, 2), 2);
  EXPECT_EQ(chain.reached_from_source(), (std::vector<char>{1, 0, 0}));
  EXPECT_EQ(chain.reaching_sink(), (std::vector<char>{0, 0, 1}));
  // Only uncuttable edges: no finite cut.
  tc::FlowNetwork none(3);
  none.add_edge(0, 1, tc::FlowNetwork::kInfinite);
  none.add_edge(1, 2, tc::FlowNetwork::kInfinite);
  none.add_edge(0, 2, 5);
  EXPECT_EQ(none.max_flow(0, 2), tc::FlowNetwork::kInfinite);
  // Zero-capacity edges carry nothing and are cut for free.
  tc::FlowNetwork zero(4);
  zero.add_edge(0, 1, 0);
  zero.add_edge(1, 3, tc::FlowNetwork::kInfinite);
  zero.add_edge(0, 2, 3);
  zero.add_edge(2, 3, 1);
  EXPECT_EQ(zero.max_flow(0, 3), 1);
  EXPECT_EQ(zero.reaching_sink(), (std::vector<char>{0, 1, 0, 1}));
  EXPECT_THROW(zero.add_edge(0, 9, 1), ts::ValueError);
}

// A program of tensor arguments captured with its backward (Note [Joint graph]).
using Body = std::function<std::vector<ts::Tensor>(const std::vector<ts::Tensor>&)>;
tc::CaptureResult capture_joint(const Body& body, const std::vector<ts::Tensor>& args) {
  tc::CaptureResult r = tc::capture_program(args, {}, [&] { return body(args); }, /*derive_backward=*/true);
  EXPECT_TRUE(r.complete) << r.stop_reason;
  EXPECT_TRUE(r.has_backward) << r.backward_stop_reason;
  tc::verify_graph(r.graph);
  tc::verify_graph(r.backward);
  return r;
}

// Values of `g` by what defines them: "arg 0 float32[8,16]", "add float32[8,32]", "max_dim#1 int64[4]".
std::string describe(const tc::Graph& g, const std::vector<int>& values) {
  std::string s;
  for (int v : values) {
    if (!s.empty()) s += ", ";
    const tc::Value& val = g.values[v];
    if (val.node < 0) {
      for (const tc::GraphInput& in : g.inputs)
        if (in.value == v) s += std::string(tc::input_kind_name(in.kind)) + " " + std::to_string(in.index);
    } else {
      s += ts::op_name(g.nodes[val.node].op);
      if (val.output_index > 0) s += "#" + std::to_string(val.output_index);
    }
    std::string sizes;
    for (int64_t d : val.meta.sizes) {
      if (!sizes.empty()) sizes += ",";
      sizes += std::to_string(d);
    }
    s += std::string(" ") + ts::dtype_name(val.meta.dtype) + "[" + sizes + "]";
  }
  return s;
}
std::string describe_nodes(const tc::Graph& g, const std::vector<int>& nodes) {
  std::string s;
  for (int i : nodes) s += (s.empty() ? "" : ", ") + std::string(ts::op_name(g.nodes[i].op));
  return s;
}
// The forward's saved values as captured (after the program's outputs).
std::vector<int> captured_saved(const tc::CaptureResult& r) {
  return std::vector<int>(r.graph.outputs.begin() + r.num_program_outputs, r.graph.outputs.end());
}

// Runs `body` compiled with the partition `on` and eagerly, twice each; outputs and gradients of
// every argument that requires grad bitwise equal. Returns the compiled function's statistics.
ts::CompileStats expect_compiled_equal_eager(const Body& body, const std::vector<ts::Tensor>& args, bool on = true) {
  ts::CompileOptions o;
  o.min_cut_partition = on;
  auto f = ts::compile([&](const std::vector<ts::Tensor>& in) { return body(in); }, o);
  for (int call = 0; call < 2; ++call) {
    std::vector<ts::Tensor> a, b;
    for (const ts::Tensor& t : args) {
      a.push_back(t.detach().clone().requires_grad_(t.requires_grad()));
      b.push_back(t.detach().clone().requires_grad_(t.requires_grad()));
    }
    ts::manual_seed(30 + call);
    std::vector<ts::Tensor> ya = f(a);
    ts::manual_seed(30 + call);
    std::vector<ts::Tensor> yb = body(b);
    EXPECT_EQ(ya.size(), yb.size());
    ts::Tensor la, lb;
    for (size_t j = 0; j < ya.size(); ++j) {
      EXPECT_TRUE(bitwise(ya[j], yb[j])) << "call " << call << " output " << j;
      if (!yb[j].requires_grad()) continue;
      ts::Tensor w = ts::linspace(-1.0, 1.0, yb[j].numel()).reshape(yb[j].sizes()).to(yb[j].dtype());
      la = la.defined() ? la + (ya[j] * w).sum() : (ya[j] * w).sum();
      lb = lb.defined() ? lb + (yb[j] * w).sum() : (yb[j] * w).sum();
    }
    la.backward();
    lb.backward();
    for (size_t i = 0; i < a.size(); ++i)
      if (b[i].requires_grad()) {
        EXPECT_TRUE(bitwise(a[i].grad(), b[i].grad())) << "call " << call << " argument " << i;
      }
  }
  const ts::CompileStats s = f.stats();
  EXPECT_EQ(s.graph_calls, 1);
  EXPECT_EQ(s.joint_variants, 1) << (s.no_backward_reasons.empty() ? "" : s.no_backward_reasons[0]);
  return s;
}

// matmul -> add bias -> gelu -> matmul: eager autograd saves the add's output (gelu's derivative reads
// it) and the gelu's (the second matmul's weight gradient reads it); the cut saves the add's alone and
// the backward recomputes gelu from it.
Body gelu_mlp() {
  return [](const std::vector<ts::Tensor>& in) {
    return std::vector<ts::Tensor>{ts::matmul(ts::gelu(ts::matmul(in[0], in[1]) + in[2]), in[3]).sum()};
  };
}
std::vector<ts::Tensor> gelu_mlp_args() {
  ts::manual_seed(1);
  return {ts::randn({8, 16}), ts::randn({16, 32}).requires_grad_(), ts::randn({32}).requires_grad_(),
          ts::randn({32, 4}).requires_grad_()};
}

TEST(Partition, TheGeluOfAMatmulIsRecomputedFromTheSavedBiasAdd) {
  const std::vector<ts::Tensor> args = gelu_mlp_args();
  tc::CaptureResult r = capture_joint(gelu_mlp(), args);
  EXPECT_EQ(describe(r.graph, captured_saved(r)), "arg 3 float32[32,4], gelu float32[8,32], add float32[8,32], arg 0 float32[8,16]");
  const tc::PartitionDecision d = tc::choose_saved_values(r.graph, r.num_program_outputs, r.backward);
  EXPECT_EQ(d.declined, "");
  EXPECT_EQ(describe(r.graph, d.saved), "arg 0 float32[8,16], arg 3 float32[32,4], add float32[8,32]");
  EXPECT_EQ(describe_nodes(r.graph, d.recomputed), "gelu");
  EXPECT_EQ(d.cut_bytes, 8 * 32 * 4);
  EXPECT_EQ(d.saved_bytes, 8 * 32 * 4);
  EXPECT_EQ(d.eager_saved_bytes, 2 * 8 * 32 * 4);
  EXPECT_TRUE(d.changed);

  tc::apply_partition(r.graph, r.num_program_outputs, r.backward, d);
  tc::verify_graph(r.graph);
  tc::verify_graph(r.backward);
  // The forward returns the loss, then x, the add's output and w2; the backward runs gelu first.
  EXPECT_EQ(describe(r.graph, captured_saved(r)), "arg 0 float32[8,16], arg 3 float32[32,4], add float32[8,32]");
  int gelus = 0;
  for (const tc::Node& n : r.backward.nodes) gelus += n.op == ts::OpId::gelu;
  EXPECT_EQ(gelus, 1) << r.backward.to_text();

  const ts::CompileStats s = expect_compiled_equal_eager(gelu_mlp(), args);
  EXPECT_EQ(s.saved_bytes, 1024);
  EXPECT_EQ(s.eager_saved_bytes, 2048);
  EXPECT_EQ(s.recomputed_nodes, 1);
  EXPECT_EQ(s.partition_declined, "");
  // The partition off: the captured saved values.
  const ts::CompileStats off = expect_compiled_equal_eager(gelu_mlp(), args, /*on=*/false);
  EXPECT_EQ(off.saved_bytes, 2048);
  EXPECT_EQ(off.recomputed_nodes, 0);
}

// A float32 matmul cast to bfloat16 for the next matmul: the cast's 512 bytes are saved, not the
// matmul's 1024 that recomputing the cast would keep.
TEST(Partition, ACastIsNotRecomputedFromTheLargerValueItCasts) {
  auto body = [](const std::vector<ts::Tensor>& in) {
    return std::vector<ts::Tensor>{ts::matmul(ts::matmul(in[0], in[1]).to(ts::kBFloat16), in[2]).to(ts::kFloat32).sum()};
  };
  ts::manual_seed(2);
  const std::vector<ts::Tensor> args = {ts::randn({8, 16}), ts::randn({16, 32}).requires_grad_(),
                                        ts::randn({32, 4}).to(ts::kBFloat16).requires_grad_()};
  tc::CaptureResult r = capture_joint(body, args);
  const tc::PartitionDecision d = tc::choose_saved_values(r.graph, r.num_program_outputs, r.backward);
  EXPECT_EQ(describe(r.graph, d.saved), "arg 0 float32[8,16], arg 2 bfloat16[32,4], copy_ bfloat16[8,32]");
  EXPECT_EQ(d.recomputed, std::vector<int>{});
  EXPECT_EQ(d.saved_bytes, 8 * 32 * 2);
  EXPECT_EQ(d.eager_saved_bytes, 8 * 32 * 2);
  EXPECT_FALSE(d.changed) << "eager's saved values are the cut's";
  const ts::CompileStats s = expect_compiled_equal_eager(body, args);
  EXPECT_EQ(s.recomputed_nodes, 0);
  EXPECT_EQ(s.saved_bytes, 512);
}

// A dropout's mask is a draw of the generator (bernoulli_): saved, never drawn again in the backward,
// although it has no input to keep. The rest (x * w, the mask applied and scaled, tanh) is remade
// from the arguments, which the caller holds.
TEST(Partition, RandomDrawsAreSavedNotDrawnAgain) {
  auto body = [](const std::vector<ts::Tensor>& in) {
    return std::vector<ts::Tensor>{ts::nn::functional::dropout(in[0] * in[1], 0.5, true).tanh()};
  };
  ts::manual_seed(3);
  const std::vector<ts::Tensor> args = {ts::randn({8, 16}), ts::randn({8, 16}).requires_grad_()};
  tc::CaptureResult r = capture_joint(body, args);
  const tc::PartitionDecision d = tc::choose_saved_values(r.graph, r.num_program_outputs, r.backward);
  EXPECT_EQ(describe(r.graph, d.saved), "arg 0 float32[8,16], arg 1 float32[8,16], bernoulli_ float32[8,16]");
  EXPECT_EQ(describe_nodes(r.graph, d.recomputed), "mul, mul, fill_, mul, tanh");
  const std::vector<tc::RecomputeRule> rules = tc::recompute_rules(r.graph, tc::alias_info(r.graph));
  int draws = 0;
  for (size_t i = 0; i < r.graph.nodes.size(); ++i) {
    if (ts::op_info(r.graph.nodes[i].op).family != ts::OpFamily::Random) continue;
    ++draws;
    EXPECT_EQ(rules[i], tc::RecomputeRule::Random) << ts::op_name(r.graph.nodes[i].op);
  }
  EXPECT_EQ(draws, 1);
  // The mask's 512 bytes; eager keeps the tanh's output, the mask and the scale (1028).
  EXPECT_EQ(d.saved_bytes, 512);
  EXPECT_EQ(d.eager_saved_bytes, 1028);
  expect_compiled_equal_eager(body, args);
}

// exp(x * w) is read by exp's derivative; x * w is written in place afterwards (the capture's
// functional mul, then copy_ into y), so the backward cannot recompute exp from it (it would read the
// doubled tensor): exp's output is saved.
TEST(Partition, ANodeReadingATensorWrittenLaterIsNotRecomputed) {
  auto body = [](const std::vector<ts::Tensor>& in) {
    ts::Tensor y = in[0] * in[1];
    ts::Tensor z = y.exp();
    y.mul_(2.0);
    return std::vector<ts::Tensor>{z + y};
  };
  ts::manual_seed(4);
  const std::vector<ts::Tensor> args = {ts::randn({4, 8}), ts::randn({4, 8}).requires_grad_()};
  tc::CaptureResult r = capture_joint(body, args);
  const tc::PartitionDecision d = tc::choose_saved_values(r.graph, r.num_program_outputs, r.backward);
  EXPECT_EQ(describe(r.graph, d.saved), "arg 0 float32[4,8], exp float32[4,8]");
  // Only the scalar 2 of mul_ is made again (a fill of a fresh 0-dim buffer).
  EXPECT_EQ(describe_nodes(r.graph, d.recomputed), "fill_");
  EXPECT_EQ(d.saved_bytes, 4 * 8 * 4);
  EXPECT_EQ(d.eager_saved_bytes, 4 * 8 * 4 + 4);
  const std::vector<tc::RecomputeRule> rules = tc::recompute_rules(r.graph, tc::alias_info(r.graph));
  int exps = 0;
  for (size_t i = 0; i < r.graph.nodes.size(); ++i) {
    if (r.graph.nodes[i].op != ts::OpId::exp) continue;
    ++exps;
    EXPECT_EQ(rules[i], tc::RecomputeRule::Mutated);
  }
  EXPECT_EQ(exps, 1);
  expect_compiled_equal_eager(body, args);
}

// Layer norm of an argument: its derivative reads the input, mean and rstd; all are remade from the
// input, which the caller holds: nothing is kept beyond the inputs.
TEST(Partition, ALayerNormOfAnInputIsRecomputedWhole) {
  auto body = [](const std::vector<ts::Tensor>& in) {
    return std::vector<ts::Tensor>{ts::nn::functional::layer_norm(in[0], {16}, in[1], in[2], 1e-5).relu()};
  };
  ts::manual_seed(5);
  const std::vector<ts::Tensor> args = {ts::randn({6, 16}).requires_grad_(), ts::randn({16}).requires_grad_(),
                                        ts::randn({16}).requires_grad_()};
  tc::CaptureResult r = capture_joint(body, args);
  const tc::PartitionDecision d = tc::choose_saved_values(r.graph, r.num_program_outputs, r.backward);
  EXPECT_EQ(describe(r.graph, d.saved), "arg 0 float32[6,16], arg 1 float32[16], arg 2 float32[16]");
  EXPECT_EQ(describe_nodes(r.graph, d.recomputed), "native_layer_norm, relu");
  EXPECT_EQ(d.saved_bytes, 0);
  const ts::CompileStats s = expect_compiled_equal_eager(body, args);
  EXPECT_EQ(s.saved_bytes, 0);
  EXPECT_GT(s.eager_saved_bytes, 0);
}

// Note [Remade outputs]: the fused MLP holds two matmuls and is saved, but its GELU output h is
// remade in the backward from the saved pre-activation by gelu(pre, "tanh"), the call the CPU op
// makes: the pre-activation's 1024 bytes are kept instead of eager's 2048.
TEST(Partition, AFusedMlpsGeluOutputIsRemadeFromItsPreActivation) {
  auto body = [](const std::vector<ts::Tensor>& in) {
    return std::vector<ts::Tensor>{ts::nn::functional::mlp_gelu(in[0], in[1], in[2], in[3], std::nullopt).sum()};
  };
  ts::manual_seed(6);
  const std::vector<ts::Tensor> args = {ts::randn({8, 16}), ts::randn({32, 16}).requires_grad_(),
                                        ts::randn({32}).requires_grad_(), ts::randn({4, 32}).requires_grad_()};
  tc::CaptureResult r = capture_joint(body, args);
  EXPECT_EQ(describe(r.graph, captured_saved(r)), "arg 0 float32[8,16], mlp_gelu#2 float32[8,32], arg 3 float32[4,32], mlp_gelu#1 float32[8,32]");
  const tc::PartitionDecision d = tc::choose_saved_values(r.graph, r.num_program_outputs, r.backward);
  EXPECT_EQ(describe(r.graph, d.saved), "arg 0 float32[8,16], arg 3 float32[4,32], mlp_gelu#1 float32[8,32]");
  ASSERT_EQ(d.remade.size(), 1u);
  EXPECT_EQ(describe(r.graph, {d.remade[0].value, d.remade[0].from}), "mlp_gelu#2 float32[8,32], mlp_gelu#1 float32[8,32]");
  EXPECT_EQ(d.remade[0].op, ts::OpId::gelu);
  EXPECT_EQ(d.recomputed, std::vector<int>{});
  EXPECT_EQ(d.saved_bytes, 8 * 32 * 4);
  EXPECT_EQ(d.eager_saved_bytes, 2 * 8 * 32 * 4);
  tc::apply_partition(r.graph, r.num_program_outputs, r.backward, d);
  tc::verify_graph(r.graph);
  tc::verify_graph(r.backward);
  EXPECT_NE(r.backward.to_text().find(" = gelu(%"), std::string::npos) << r.backward.to_text();
  const ts::CompileStats s = expect_compiled_equal_eager(body, args);
  EXPECT_EQ(s.saved_bytes, 1024);
  EXPECT_EQ(s.recomputed_nodes, 1);
}

}  // namespace
