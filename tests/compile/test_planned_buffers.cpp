// Note [Planned buffers] (src/compile/executor.h): which intermediates the executor places in its
// arena, that no two alive at once share a byte, that the arena is smaller than separate buffers,
// and that the results are eager's bits, also where autograd records (no arena then).
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "compile/bitwise.h"
#include "compile/capture.h"
#include "compile/executor.h"
#include "tessera/autograd.h"
#include "tessera/functions.h"

namespace ts = tessera;
namespace tc = tessera::compiler;
using ts::testing::bitwise;

namespace {

// The step that writes each value, from the plan (nodes only: these graphs have no kernels).
std::vector<int> made_by(const tc::Graph& g, const tc::ExecutionPlan& p) {
  std::vector<int> m(g.values.size(), -1);
  for (size_t i = 0; i < p.steps.size(); ++i)
    if (p.steps[i].node >= 0)
      for (int v : g.nodes[p.steps[i].node].outputs) m[v] = static_cast<int>(i);
  return m;
}

// Every pair of planned values alive at one step occupies disjoint bytes of the arena.
void expect_no_overlap(const tc::Graph& g, const tc::ExecutionPlan& p) {
  const std::vector<int> first = made_by(g, p);
  const std::vector<int64_t>& at = p.memory.arena_offset;
  for (size_t a = 0; a < at.size(); ++a) {
    if (at[a] < 0) continue;
    ASSERT_GE(first[a], 0) << "%" << a << " is planned but no step makes it";
    EXPECT_EQ(at[a] % 256, 0) << "%" << a;
    EXPECT_LE(at[a] + g.values[a].meta.span_bytes(), p.memory.arena_bytes) << "%" << a;
    for (size_t b = a + 1; b < at.size(); ++b) {
      if (at[b] < 0) continue;
      const int la = std::max(p.last_use[a], first[a]), lb = std::max(p.last_use[b], first[b]);
      if (first[a] > lb || first[b] > la) continue;  // never alive together
      const int64_t ea = at[a] + g.values[a].meta.span_bytes(), eb = at[b] + g.values[b].meta.span_bytes();
      EXPECT_TRUE(ea <= at[b] || eb <= at[a]) << "%" << a << " [" << at[a] << ", " << ea << ") and %" << b << " ["
                                              << at[b] << ", " << eb << ") are alive together";
    }
  }
}

std::vector<ts::Tensor> dag(const ts::Tensor& x, const ts::Tensor& y) {
  ts::Tensor a = x.exp(), b = (x * y).sin();
  ts::Tensor c = (a * b).tanh() + a;
  ts::Tensor d = ts::where(c > 0.5, c, b).clamp(-0.9, 0.9);
  return {(d - y).sigmoid(), a.sum()};  // a is also read by sum (an op): a stays out of the arena
}

TEST(PlannedBuffers, AChainReusesTwoBuffers) {
  ts::Tensor x = ts::randn({1000});
  auto chain = [](ts::Tensor y) {
    for (int i = 0; i < 10; ++i) y = y.exp().neg();
    return y;
  };
  tc::CaptureResult r = tc::capture_program({x}, {}, [&] { return std::vector<ts::Tensor>{chain(x)}; });
  ASSERT_TRUE(r.complete) << r.stop_reason;
  const tc::ExecutionPlan p = tc::plan_execution(r.graph);
  EXPECT_EQ(p.memory.planned, 19);  // every intermediate but the output
  EXPECT_EQ(p.memory.planned_bytes, 19 * 4096);
  EXPECT_EQ(p.memory.arena_bytes, 2 * 4096);  // an op's input and its output
  expect_no_overlap(r.graph, p);
  ts::NoGradGuard no_grad;
  for (int call = 0; call < 3; ++call) {
    ts::Tensor a = ts::randn({1000});
    EXPECT_TRUE(bitwise(tc::execute(r.graph, p, {a}, {})[0], chain(a))) << "call " << call;
  }
}

TEST(PlannedBuffers, NoTwoLiveValuesShareBytesAndOpsNeverSeeTheArena) {
  ts::Tensor x = ts::randn({37, 53}), y = ts::randn({53});
  tc::CaptureResult r = tc::capture_program({x, y}, {}, [&] { return dag(x, y); });
  ASSERT_TRUE(r.complete) << r.stop_reason;
  const tc::ExecutionPlan p = tc::plan_execution(r.graph);
  EXPECT_GE(p.memory.planned, 5);
  EXPECT_LT(p.memory.arena_bytes, p.memory.planned_bytes);
  expect_no_overlap(r.graph, p);
  for (size_t v = 0; v < r.graph.values.size(); ++v) {
    if (p.memory.arena_offset[v] < 0) continue;
    EXPECT_EQ(std::find(r.graph.outputs.begin(), r.graph.outputs.end(), static_cast<int>(v)), r.graph.outputs.end())
        << "%" << v << " is returned";
    for (const tc::Node& n : r.graph.nodes)
      if (std::find(n.inputs.begin(), n.inputs.end(), static_cast<int>(v)) != n.inputs.end())
        EXPECT_NE(p.direct[&n - r.graph.nodes.data()].kind, tc::DirectCall::Kind::None)
            << "%" << v << " is read by " << ts::op_name(n.op) << ", which runs through its op";
  }
  ts::NoGradGuard no_grad;
  for (int call = 0; call < 3; ++call) {
    ts::Tensor a = ts::randn({37, 53}), b = ts::randn({53});
    const std::vector<ts::Tensor> got = tc::execute(r.graph, p, {a, b}, {}), want = dag(a, b);
    for (size_t k = 0; k < got.size(); ++k) EXPECT_TRUE(bitwise(got[k], want[k])) << "call " << call << " output " << k;
    // The outputs own their memory: a second call does not write into the first call's results.
    const std::vector<ts::Tensor> again = tc::execute(r.graph, p, {b.expand({37, 53}).contiguous(), a[0]}, {});
    for (size_t k = 0; k < got.size(); ++k) EXPECT_TRUE(bitwise(got[k], want[k])) << "call " << call << " output " << k;
    (void)again;
  }
}

// Where autograd records, the arena is not used: every saved tensor stays intact (exp saves its
// output; a reused buffer would corrupt the gradient).
TEST(PlannedBuffers, NoArenaWhereAutogradRecords) {
  ts::Tensor x = ts::randn({64}).requires_grad_();
  auto chain = [](ts::Tensor y) {
    for (int i = 0; i < 4; ++i) y = (y * 0.5).exp();
    return y.sum();
  };
  tc::CaptureResult r = tc::capture_program({x}, {}, [&] { return std::vector<ts::Tensor>{chain(x)}; });
  ASSERT_TRUE(r.complete) << r.stop_reason;
  const tc::ExecutionPlan p = tc::plan_execution(r.graph);
  EXPECT_GT(p.memory.planned, 0);
  ts::Tensor a = ts::randn({64}).requires_grad_();
  ts::Tensor out = tc::execute(r.graph, p, {a}, {})[0];
  out.backward();
  ts::Tensor b = a.detach().requires_grad_();
  chain(b).backward();
  EXPECT_TRUE(bitwise(out, chain(b.detach())));
  EXPECT_TRUE(bitwise(a.grad(), b.grad()));
}

}  // namespace
