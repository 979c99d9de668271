// Note [Direct kernel calls] (src/compile/direct_call.h): which nodes the executor runs by their
// kernel slot, that those give the op's bits, and that they step aside where autograd must record or
// a stage (the profiler) watches the ops.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <vector>

#include "compile/bitwise.h"
#include "compile/capture.h"
#include "compile/executor.h"
#include "ops/op_scope.h"
#include "tessera/autograd.h"
#include "tessera/functions.h"

namespace ts = tessera;
namespace tc = tessera::compiler;
using ts::testing::bitwise;

namespace {

using Kind = tc::DirectCall::Kind;

std::vector<ts::Tensor> pointwise(const ts::Tensor& x, const ts::Tensor& y) {
  ts::Tensor a = (x * 2.0 + y).relu();              // fill_, mul, add, relu
  ts::Tensor b = ts::where(a > 0.5, a, y.sigmoid()).clamp(0.1, 0.9);  // gt, sigmoid, where, clamp
  ts::Tensor c = ts::gelu(b, "tanh") - x.exp() / 3.0;  // gelu, exp, div, sub
  ts::Tensor d = ts::maximum(c, y).tanh();            // broadcasting maximum, tanh
  return {d, x.to(ts::kFloat64) + 1.0};               // a cast and a float64 add
}

int count(const tc::ExecutionPlan& p, Kind k) {
  int n = 0;
  for (const tc::DirectCall& d : p.direct) n += d.kind == k;
  return n;
}

TEST(DirectCalls, PlainElementwiseNodesRunByTheirSlotAndGiveTheOpsBits) {
  ts::Tensor x = ts::randn({5, 7}), y = ts::randn({7});
  tc::CaptureResult r = tc::capture_program({x, y}, {}, [&] { return pointwise(x, y); });
  ASSERT_TRUE(r.complete) << r.stop_reason;
  const tc::ExecutionPlan p = tc::plan_execution(r.graph);
  EXPECT_GE(count(p, Kind::Unary), 5);   // relu, sigmoid, gelu, exp, tanh
  EXPECT_GE(count(p, Kind::Binary), 6);  // mul, add, gt, div, sub, maximum, add (float64)
  EXPECT_GE(count(p, Kind::Fill), 6);    // the numbers' 0-dim buffers
  EXPECT_EQ(count(p, Kind::Ternary), 2);  // where, clamp
  for (size_t i = 0; i < r.graph.nodes.size(); ++i) {
    const ts::OpId op = r.graph.nodes[i].op;
    if (op == ts::OpId::copy_) EXPECT_EQ(p.direct[i].kind, Kind::None) << "the float64 cast runs through copy_";
  }
  for (int call = 0; call < 3; ++call) {
    ts::Tensor a = ts::randn({5, 7}), b = ts::randn({7});
    const std::vector<ts::Tensor> got = tc::execute(r.graph, p, {a, b}, {});
    const std::vector<ts::Tensor> want = pointwise(a, b);
    ASSERT_EQ(got.size(), want.size());
    for (size_t k = 0; k < got.size(); ++k) EXPECT_TRUE(bitwise(got[k], want[k])) << "call " << call << " output " << k;
  }
}

TEST(DirectCalls, OtherDtypesRunThroughTheirOp) {
  ts::Tensor x = ts::randint(0, 9, {4}, ts::kInt64);
  tc::CaptureResult r = tc::capture_program({x}, {}, [&] { return std::vector<ts::Tensor>{(x + x) * x, x.exp()}; });
  ASSERT_TRUE(r.complete) << r.stop_reason;
  const tc::ExecutionPlan p = tc::plan_execution(r.graph);
  const std::vector<ts::Tensor> got = tc::execute(r.graph, p, {x}, {});
  EXPECT_TRUE(bitwise(got[0], (x + x) * x));
  EXPECT_TRUE(bitwise(got[1], x.exp()));  // int64 in, float32 out: the op's cast
  EXPECT_EQ(count(p, Kind::Unary), 0);
}

// relu's backward (threshold_backward) in a captured backward graph, run directly.
TEST(DirectCalls, ReluBackwardRunsDirectlyAndGivesTheOpsBits) {
  ts::Tensor x = ts::randn({4, 9}), g = ts::randn({4, 9});
  tc::CaptureResult r = tc::capture_program({g, x}, {}, [&] {
    return std::vector<ts::Tensor>{ts::threshold_backward(g, x.relu(), 0.0)};
  });
  ASSERT_TRUE(r.complete) << r.stop_reason;
  const tc::ExecutionPlan p = tc::plan_execution(r.graph);
  EXPECT_EQ(count(p, Kind::Binary), 1);
  ts::Tensor a = ts::randn({4, 9}), b = ts::randn({4, 9});
  EXPECT_TRUE(bitwise(tc::execute(r.graph, p, {a, b}, {})[0], ts::threshold_backward(a, b.relu(), 0.0)));
}

// With grad mode on and an input that requires grad, the node runs through its op, which records.
TEST(DirectCalls, StepAsideWhereAutogradRecords) {
  ts::Tensor x = ts::randn({3, 4}).requires_grad_();
  tc::CaptureResult r = tc::capture_program({x}, {}, [&] { return std::vector<ts::Tensor>{(x.exp() * x).sum()}; });
  ASSERT_TRUE(r.complete) << r.stop_reason;
  const tc::ExecutionPlan p = tc::plan_execution(r.graph);
  EXPECT_GE(count(p, Kind::Unary) + count(p, Kind::Binary), 2);
  ts::Tensor a = ts::randn({3, 4}).requires_grad_();
  ts::Tensor out = tc::execute(r.graph, p, {a}, {})[0];
  ASSERT_TRUE(out.requires_grad());
  out.backward();
  ts::Tensor b = a.detach().requires_grad_();
  (b.exp() * b).sum().backward();
  EXPECT_TRUE(bitwise(a.grad(), b.grad()));
  {
    ts::NoGradGuard no_grad;  // nothing records: the same graph runs directly
    EXPECT_FALSE(tc::execute(r.graph, p, {a}, {})[0].requires_grad());
  }
}

// An observer (the profiler's kind of stage) sees every node's op: no direct calls while one watches.
struct Counter final : ts::OpObserver {
  std::vector<std::string> ops;
  void on_enter(const ts::OpEvent& e) override { ops.push_back(e.name()); }
  void on_exit(const ts::OpEvent&) override {}
};

TEST(DirectCalls, StepAsideWhileAStageWatchesTheOps) {
  ts::Tensor x = ts::randn({6});
  tc::CaptureResult r = tc::capture_program({x}, {}, [&] { return std::vector<ts::Tensor>{(x.exp() + x).tanh()}; });
  ASSERT_TRUE(r.complete) << r.stop_reason;
  const tc::ExecutionPlan p = tc::plan_execution(r.graph);
  Counter c;
  ts::add_op_observer(&c);
  ts::Tensor out = tc::execute(r.graph, p, {x}, {})[0];
  ts::remove_op_observer(&c);
  EXPECT_TRUE(bitwise(out, (x.exp() + x).tanh()));
  for (const char* op : {"exp", "add", "tanh"})
    EXPECT_NE(std::find(c.ops.begin(), c.ops.end(), op), c.ops.end()) << op << " not seen";
}

}  // namespace
