// ts::compile's ReduceOverhead mode on the GPU (Note [ReduceOverhead], src/compile/graphed_steps.h):
// a whole training step (forward, backward, SGD with momentum) compiled once and replayed as one CUDA
// graph equals the eager steps bitwise (a replay runs the captured kernels on the same addresses, with
// the determinism switch on); a change of shape captures a second graph; a forward under no_grad with
// generated kernels replays within the codegen tolerance; steps a graph cannot hold (Adam's host step
// count, a host read) run without one, say why, and still equal eager.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/test_util.h"
#include "compile/bitwise.h"
#include "compile/codegen_testing.h"
#include "tessera/compile.h"
#include "tessera/determinism.h"
#include "tessera/models.h"

namespace ts = tessera;
namespace F = tessera::nn::functional;

namespace {

using tessera::testing::bitwise;

struct Deterministic {
  bool was = ts::is_deterministic();
  Deterministic() { ts::set_deterministic(true); }
  ~Deterministic() { ts::set_deterministic(was); }
};

struct Warnings {
  std::vector<std::string> seen;
  Warnings() {
    ts::set_compile_warning_handler([this](const std::string& m) { seen.push_back(m); });
  }
  ~Warnings() { ts::set_compile_warning_handler(nullptr); }
  std::string all() const {
    std::string s;
    for (const std::string& w : seen) s += w + "\n";
    return s;
  }
};

ts::CompileOptions reduce_overhead(const std::string& backend = "eager") {
  ts::CompileOptions o;
  o.mode = ts::CompileMode::ReduceOverhead;
  o.backend = backend;
  return o;
}

// One model and its optimizer; step() is one training step on (x, y), returning the detached loss.
template <class Opt>
struct Trainer {
  ts::models::MLP model;
  Opt opt;
  Trainer(ts::optim::SGDOptions o) : model(make()), opt(model.parameters(), o) {}
  Trainer(ts::optim::AdamOptions o) : model(make()), opt(model.parameters(), o) {}
  static ts::models::MLP make() {
    ts::manual_seed(5);
    ts::models::MLP m(32, {64, 64}, 10);
    m.to(ts::Device::cuda());
    return m;
  }
  ts::Tensor step(const ts::Tensor& x, const ts::Tensor& y) {
    opt.zero_grad();
    ts::Tensor loss = F::cross_entropy(model.forward(x), y);
    loss.backward();
    opt.step();
    return loss.detach();
  }
};

std::vector<std::pair<ts::Tensor, ts::Tensor>> batches(int n, int64_t b) {
  std::vector<std::pair<ts::Tensor, ts::Tensor>> out;
  ts::manual_seed(9);
  for (int i = 0; i < n; ++i)
    out.emplace_back(ts::randn({b, 32}).to("cuda"), ts::randint(0, 10, {b}, ts::TensorOptions(ts::kInt64)).to("cuda"));
  return out;
}

}  // namespace

TEST(CudaReduceOverhead, AWholeSgdStepReplaysAsOneGraphEqualToEager) {
  TS_REQUIRE_GPU();
  Deterministic det;
  const ts::optim::SGDOptions o{.lr = 0.05, .momentum = 0.9};
  Trainer<ts::optim::SGD> graphed(o), eager(o);
  auto step = ts::compile([&](const ts::Tensor& x, const ts::Tensor& y) { return graphed.step(x, y); },
                          reduce_overhead());
  const auto data = batches(7, 16);
  ts::Tensor first_replay;
  for (size_t i = 0; i < data.size(); ++i) {
    ts::Tensor la = step(data[i].first, data[i].second);
    ts::Tensor lb = eager.step(data[i].first, data[i].second);
    ASSERT_TRUE(bitwise(la, lb)) << "step " << i;
    if (i == 2) first_replay = la;
    if (i > 2) {
      EXPECT_TRUE(la.is_same(first_replay)) << "a replay returns the graph's static outputs";
    }
  }
  auto pa = graphed.model.parameters(), pb = eager.model.parameters();
  for (size_t i = 0; i < pa.size(); ++i) EXPECT_TRUE(bitwise(pa[i], pb[i])) << "parameter " << i;
  const ts::CompileStats s = step.stats();
  EXPECT_EQ(s.cuda_graphs, 1);
  EXPECT_EQ(s.cuda_graph_replays, 5);  // calls 3 to 7
}

TEST(CudaReduceOverhead, AShapeChangeCapturesAnotherGraph) {
  TS_REQUIRE_GPU();
  Deterministic det;
  const ts::optim::SGDOptions o{.lr = 0.05, .momentum = 0.9};
  Trainer<ts::optim::SGD> graphed(o), eager(o);
  auto step = ts::compile([&](const ts::Tensor& x, const ts::Tensor& y) { return graphed.step(x, y); },
                          reduce_overhead());
  const auto small = batches(3, 8), large = batches(3, 24);
  for (int i = 0; i < 3; ++i) {
    for (const auto& d : {small[i], large[i]}) {
      ts::Tensor la = step(d.first, d.second);
      ts::Tensor lb = eager.step(d.first, d.second);
      ASSERT_TRUE(bitwise(la, lb)) << "round " << i << " batch " << d.first.size(0);
    }
  }
  EXPECT_EQ(step.stats().cuda_graphs, 2);
  EXPECT_EQ(step.stats().cuda_graph_replays, 2);  // the third call of each shape
}

// Against the same compiled function in the Default mode: the replay runs its kernels (generated ones
// and library calls) on the same values, so the outputs agree bitwise.
TEST(CudaReduceOverhead, InferenceWithGeneratedKernelsReplays) {
  TS_REQUIRE_GPU();
  Deterministic det;
  ts::manual_seed(3);
  ts::models::ResNet model = ts::models::resnet18(10, 3, true);
  model.to(ts::Device::cuda());
  model.eval();
  ts::NoGradGuard no_grad;
  auto graphed = ts::compile(model, reduce_overhead("codegen"));
  auto plain = ts::compile(model, ts::testing::codegen_options());
  for (int i = 0; i < 4; ++i) {
    ts::Tensor x = ts::randn({2, 3, 32, 32}).to("cuda");
    ts::Tensor got = graphed(x).clone();
    EXPECT_TRUE(bitwise(got, plain(x))) << "call " << i;
  }
  EXPECT_EQ(graphed.stats().cuda_graphs, 1);
  EXPECT_EQ(graphed.stats().cuda_graph_replays, 2);
  EXPECT_GT(graphed.stats().kernels, 0);
}

TEST(CudaReduceOverhead, AdamsHostStepCountKeepsTheStepOutOfAGraph) {
  TS_REQUIRE_GPU();
  Deterministic det;
  Warnings w;
  const ts::optim::AdamOptions o{.lr = 1e-3};
  Trainer<ts::optim::Adam> graphed(o), eager(o);
  auto step = ts::compile([&](const ts::Tensor& x, const ts::Tensor& y) { return graphed.step(x, y); },
                          reduce_overhead());
  const auto data = batches(5, 16);
  for (size_t i = 0; i < data.size(); ++i)
    ASSERT_TRUE(bitwise(step(data[i].first, data[i].second), eager.step(data[i].first, data[i].second))) << i;
  auto pa = graphed.model.parameters(), pb = eager.model.parameters();
  for (size_t i = 0; i < pa.size(); ++i) EXPECT_TRUE(bitwise(pa[i], pb[i])) << "parameter " << i;
  EXPECT_EQ(step.stats().cuda_graphs, 0);
  EXPECT_NE(w.all().find("Adam.step: its step count"), std::string::npos) << w.all();
}

TEST(CudaReduceOverhead, AHostReadKeepsTheStepOutOfAGraph) {
  TS_REQUIRE_GPU();
  Warnings w;
  auto f = ts::compile(
      [](const ts::Tensor& x) {
        const double m = x.max().item<double>();
        return x * 2.0 + m;
      },
      reduce_overhead());
  for (int i = 0; i < 4; ++i) {
    ts::Tensor x = ts::randn({64}).to("cuda");
    EXPECT_TRUE(bitwise(f(x), x * 2.0 + x.max().item<double>()));
  }
  EXPECT_EQ(f.stats().cuda_graphs, 0);
  EXPECT_NE(w.all().find("item synchronizes the device with the host"), std::string::npos) << w.all();
}

TEST(CudaReduceOverhead, OutputsThatTakeAGradientAreNotGraphed) {
  TS_REQUIRE_GPU();
  Warnings w;
  ts::Tensor wt = ts::randn({8, 8}).to("cuda").requires_grad_(true);
  auto f = ts::compile([&](const ts::Tensor& x) { return ts::matmul(x, wt).relu(); }, reduce_overhead());
  for (int i = 0; i < 3; ++i) {
    ts::Tensor x = ts::randn({4, 8}).to("cuda");
    ts::Tensor y = f(x);
    EXPECT_TRUE(y.requires_grad());
    y.sum().backward();
  }
  EXPECT_EQ(f.stats().cuda_graphs, 0);
  EXPECT_NE(w.all().find("output 0 takes a gradient"), std::string::npos) << w.all();
}
