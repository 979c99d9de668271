// nn::DataParallel on the CPU: the CPU may be listed several times in device_ids, each entry a replica
// with its own copied tensors and its own thread, so scatter, replicate, parallel_apply and gather run
// here as they do over GPUs (tests/cuda/test_data_parallel.cpp runs them on GPUs).
//
// Equality with the plain module, two ways:
//  - bitwise where the arithmetic is exact: float64 weights and inputs that are small multiples of
//    1/8, so that every product and sum is exact whatever the order (forward, gradients, SGD steps);
//  - bitwise where the sums are in the same order: random float64 and float32 data against the plain
//    module run on the same chunks one after the other, its gradients accumulated chunk by chunk
//    (DataParallel's Broadcast adds the replicas' gradients in replica order, as .grad accumulates);
//  - within float32 tolerance against the plain module on the whole batch (its sums over the batch
//    run in another order).
// Then batches that are not divisible by, or smaller than, the device count; several inputs and tuple
// and vector outputs; BatchNorm's buffers (only replica 0's updates reach the module); training, grad
// and autocast modes in the replicas' threads; exceptions from a replica; hooks; tied weights; the
// replica factory; and every error.
#include <algorithm>
#include <atomic>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <tuple>
#include <vector>

#include "common/test_util.h"
#include "tessera/amp.h"
#include "tessera/autograd.h"
#include "tessera/nn.h"
#include "tessera/optim.h"

namespace ts = tessera;
namespace nn = tessera::nn;
using ts::Tensor;
using namespace tessera::testing;

namespace {

const std::vector<ts::Device> kTwoCpus = {ts::kCPU, ts::kCPU};

struct Net : nn::Module {
  nn::Linear fc1{4, 8}, fc2{8, 3};
  Net() { register_modules({{"fc1", fc1}, {"fc2", fc2}}); }
  Tensor forward(Tensor x) override { return fc2(fc1(x).relu()); }
};

// Multiples of 1/8 in [-1, 1): products and sums of a few of them are exact in float64.
Tensor eighths(const ts::Shape& sizes, uint64_t seed) {
  return ts::div(test_data(sizes, ts::kFloat64, seed, -8, 8).round(), 8.0);
}

void set_exact(nn::Module& m, uint64_t seed) {
  ts::NoGradGuard g;
  for (Tensor& p : m.parameters()) p.copy_(eighths(p.sizes(), seed++));
}

std::vector<Tensor> grads(nn::Module& m) {
  std::vector<Tensor> out;
  for (const Tensor& p : m.parameters()) out.push_back(p.grad().defined() ? p.grad().clone() : Tensor());
  return out;
}

::testing::AssertionResult bitwise(const Tensor& a, const Tensor& b) {
  if (a.defined() != b.defined()) return ::testing::AssertionFailure() << "one tensor is undefined";
  if (!a.defined()) return ::testing::AssertionSuccess();
  if (a.dtype() != b.dtype()) return ::testing::AssertionFailure() << "dtypes differ";
  if (!ts::equal(a, b)) return ::testing::AssertionFailure() << "values differ: " << a << " vs " << b;
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult all_bitwise(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  if (a.size() != b.size()) return ::testing::AssertionFailure() << a.size() << " vs " << b.size() << " tensors";
  for (size_t i = 0; i < a.size(); ++i)
    if (auto r = bitwise(a[i], b[i]); !r) return r << " (tensor " << i << ")";
  return ::testing::AssertionSuccess();
}

// The input sizes each replica's forward saw, and on which threads (forward hooks run on replicas:
// copies share the module's hooks, as PyTorch's replicas do).
struct CallLog {
  std::mutex mu;
  std::vector<int64_t> batch;
  std::vector<std::thread::id> threads;
  std::vector<const nn::Module*> modules;
  void attach(nn::Module& m) {
    m.register_forward_pre_hook([this](nn::Module& self, const Tensor& x) -> std::optional<Tensor> {
      std::lock_guard<std::mutex> g(mu);
      batch.push_back(x.size(0));
      threads.push_back(std::this_thread::get_id());
      modules.push_back(&self);
      return std::nullopt;
    });
  }
  std::vector<int64_t> sorted_batch() {
    std::vector<int64_t> b = batch;
    std::sort(b.begin(), b.end(), std::greater<>());
    return b;
  }
};

}  // namespace

// ---- equality with the plain module ------------------------------------------------------------------

TEST(DataParallel, ForwardAndGradientsEqualThePlainModuleBitwiseOnExactValues) {
  Net net;
  net.to(ts::kFloat64);
  set_exact(net, 1);
  const Tensor x = eighths({6, 4}, 11), c = eighths({6, 3}, 12);
  nn::DataParallel dp(net, kTwoCpus);
  Tensor y = dp(x);
  (y * c).sum().backward();
  const std::vector<Tensor> dp_grads = grads(net);
  net.zero_grad();
  Tensor plain = net(x);
  (plain * c).sum().backward();
  EXPECT_TRUE(bitwise(y, plain));
  EXPECT_TRUE(all_bitwise(dp_grads, grads(net)));
  EXPECT_FALSE(dp_grads[0].abs().sum().item<double>() == 0.0);  // the comparison compares something
}

// Gradients are the replicas' sums added in replica order: the plain module on the same chunks, one
// backward per chunk accumulating into .grad, gives the same bits (random data, float64 and float32).
TEST(DataParallel, GradientsAreTheReplicasSumsInReplicaOrder) {
  for (ts::DType dtype : {ts::kFloat64, ts::kFloat32}) {
    SCOPED_TRACE(ts::dtype_name(dtype));
    ts::manual_seed(3);
    Net net;
    net.to(dtype);
    const Tensor x = test_data({7, 4}, dtype, 21), c = test_data({7, 3}, dtype, 22);
    nn::DataParallel dp(net, {ts::kCPU, ts::kCPU, ts::kCPU});
    Tensor y = dp(x);
    (y * c).sum().backward();
    const std::vector<Tensor> dp_grads = grads(net);
    net.zero_grad();
    std::vector<Tensor> outs;
    const std::vector<Tensor> xs = x.chunk(3), cs = c.chunk(3);
    ASSERT_EQ(xs.size(), 3u);
    for (size_t r = 0; r < xs.size(); ++r) {
      outs.push_back(net(xs[r]));
      (outs.back() * cs[r]).sum().backward();
    }
    EXPECT_TRUE(bitwise(y, ts::cat(outs, 0)));
    EXPECT_TRUE(all_bitwise(dp_grads, grads(net)));
  }
}

// Against the plain module on the whole batch, whose sums over the batch run in another order: float32
// within tolerance.
TEST(DataParallel, Float32AgreesWithThePlainModuleOnTheWholeBatch) {
  ts::manual_seed(4);
  Net net;
  const Tensor x = test_data({10, 4}, ts::kFloat32, 31), target = test_data({10, 3}, ts::kFloat32, 32);
  nn::DataParallel dp(net, {ts::kCPU, ts::kCPU, ts::kCPU, ts::kCPU});
  Tensor y = dp(x);
  nn::functional::mse_loss(y, target).backward();
  const std::vector<Tensor> dp_grads = grads(net);
  net.zero_grad();
  Tensor plain = net(x);
  nn::functional::mse_loss(plain, target).backward();
  const std::vector<Tensor> plain_grads = grads(net);
  EXPECT_TRUE(all_close(y, plain, {1.3e-6, 1e-5}));
  for (size_t i = 0; i < plain_grads.size(); ++i) EXPECT_TRUE(all_close(dp_grads[i], plain_grads[i], {1e-5, 1e-6}));
}

TEST(DataParallel, SgdTrainingEqualsPlainTraining) {
  // Exact values: bitwise, step after step.
  Net a, b;
  a.to(ts::kFloat64);
  b.to(ts::kFloat64);
  set_exact(a, 5);
  set_exact(b, 5);
  nn::DataParallel dp(a, kTwoCpus);
  ts::optim::SGD opt_a(dp.parameters(), {.lr = 0.0625}), opt_b(b.parameters(), {.lr = 0.0625});
  for (int step = 0; step < 4; ++step) {
    const Tensor x = eighths({6, 4}, 100 + step), c = eighths({6, 3}, 200 + step);
    opt_a.zero_grad();
    (dp(x) * c).sum().backward();
    opt_a.step();
    opt_b.zero_grad();
    (b(x) * c).sum().backward();
    opt_b.step();
  }
  EXPECT_TRUE(all_bitwise(a.parameters(), b.parameters()));
  EXPECT_FALSE(ts::equal(a.fc1.weight, eighths(a.fc1.weight.sizes(), 5)));  // training moved the weights

  // Random float32 with a loss that averages: within tolerance after the same steps.
  ts::manual_seed(6);
  Net p;
  Net q;
  q.load_state_dict(p.state_dict());
  nn::DataParallel dq(q, {ts::kCPU, ts::kCPU, ts::kCPU});
  const ts::optim::SGDOptions sgd{.lr = 0.1, .momentum = 0.9};
  ts::optim::SGD opt_p(p.parameters(), sgd), opt_q(dq.parameters(), sgd);
  for (int step = 0; step < 5; ++step) {
    const Tensor x = test_data({9, 4}, ts::kFloat32, 300 + step), t = test_data({9, 3}, ts::kFloat32, 400 + step);
    opt_p.zero_grad();
    nn::functional::mse_loss(p(x), t).backward();
    opt_p.step();
    opt_q.zero_grad();
    nn::functional::mse_loss(dq(x), t).backward();
    opt_q.step();
  }
  const auto pp = p.parameters(), qq = q.parameters();
  for (size_t i = 0; i < pp.size(); ++i) EXPECT_TRUE(all_close(qq[i], pp[i], {1e-5, 1e-5}));
}

// ---- scatter: fewer replicas for small or uneven batches -----------------------------------------------

TEST(DataParallel, BatchesNotDivisibleOrSmallerThanTheDeviceCountRunFewerReplicas) {
  struct Case {
    size_t devices;
    int64_t batch;
    std::vector<int64_t> chunks;  // as torch.chunk
  };
  for (const Case& k : {Case{2, 5, {3, 2}}, Case{4, 5, {2, 2, 1}}, Case{2, 1, {1}}, Case{4, 3, {1, 1, 1}},
                        Case{3, 9, {3, 3, 3}}}) {
    SCOPED_TRACE(testing::PrintToString(k.devices) + " devices, batch " + testing::PrintToString(k.batch));
    Net net;
    net.to(ts::kFloat64);
    set_exact(net, 7);
    CallLog log;
    log.attach(net);
    nn::DataParallel dp(net, std::vector<ts::Device>(k.devices, ts::kCPU));
    const Tensor x = eighths({k.batch, 4}, 8);
    Tensor y = dp(x);
    EXPECT_EQ(log.sorted_batch(), k.chunks);
    for (const nn::Module* m : log.modules) EXPECT_NE(m, &net);  // replicas, not the module
    EXPECT_EQ(y.sizes(), (ts::Shape{k.batch, 3}));
    EXPECT_TRUE(bitwise(y, net.forward(x)));
  }
}

TEST(DataParallel, ReplicasRunOnThreadsOfTheirOwn) {
  Net net;
  CallLog log;
  log.attach(net);
  nn::DataParallel dp(net, kTwoCpus);
  dp(ts::randn({4, 4}));
  ASSERT_EQ(log.threads.size(), 2u);
  EXPECT_NE(log.threads[0], log.threads[1]);
  for (auto id : log.threads) EXPECT_NE(id, std::this_thread::get_id());
  // One replica (a batch of one) runs on the caller's thread, as PyTorch's parallel_apply.
  log.threads.clear();
  dp(ts::randn({1, 4}));
  ASSERT_EQ(log.threads.size(), 1u);
  EXPECT_EQ(log.threads[0], std::this_thread::get_id());
}

TEST(DataParallel, OneDeviceCallsTheModuleItself) {
  Net net;
  CallLog log;
  log.attach(net);
  nn::DataParallel dp(net, {ts::kCPU});
  const Tensor x = ts::randn({4, 4});
  EXPECT_TRUE(bitwise(dp(x), net.forward(x)));
  ASSERT_EQ(log.modules.size(), 1u);
  EXPECT_EQ(log.modules[0], &net);
  EXPECT_EQ(log.batch[0], 4);
}

TEST(DataParallel, WithoutDeviceIdsUsesEveryGpuOrCallsTheModule) {
  Net net;
  if (ts::cuda::is_available()) net.to(ts::Device::cuda());
  nn::DataParallel dp(net);
  EXPECT_EQ(dp.device_ids().size(), static_cast<size_t>(ts::cuda::device_count()));
  if (ts::cuda::is_available()) return;  // tests/cuda/test_data_parallel.cpp
  CallLog log;
  log.attach(net);
  const Tensor x = ts::randn({4, 4});
  EXPECT_TRUE(bitwise(dp(x), net.forward(x)));
  ASSERT_EQ(log.modules.size(), 1u);
  EXPECT_EQ(log.modules[0], &net);
}

// ---- several inputs, tuple and vector outputs, other dims ---------------------------------------------

namespace {
struct TwoInputs : nn::Module {
  nn::Linear fa{3, 2}, fb{5, 2};
  TwoInputs() { register_modules({{"fa", fa}, {"fb", fb}}); }
  std::tuple<Tensor, Tensor> forward(Tensor a, Tensor b) { return {fa(a) + fb(b), fb(b)}; }
};
struct VectorOutput : nn::Module {
  nn::Linear fc{3, 2};
  VectorOutput() { register_modules({{"fc", fc}}); }
  std::vector<Tensor> forward(Tensor a, Tensor b) { return {fc(a), b * 2, fc(a).sum(1, true)}; }
};
}  // namespace

TEST(DataParallel, SeveralInputsAndTupleOutputs) {
  TwoInputs m;
  m.to(ts::kFloat64);
  set_exact(m, 9);
  const Tensor a = eighths({5, 3}, 1), b = eighths({5, 5}, 2);
  nn::DataParallel dp(m, kTwoCpus);
  auto [s, t] = dp(a, b);
  (s.sum() + (t * t).sum()).backward();
  const std::vector<Tensor> dp_grads = grads(m);
  m.zero_grad();
  auto [s0, t0] = m.forward(a, b);
  (s0.sum() + (t0 * t0).sum()).backward();
  EXPECT_TRUE(bitwise(s, s0));
  EXPECT_TRUE(bitwise(t, t0));
  EXPECT_TRUE(all_bitwise(dp_grads, grads(m)));

  VectorOutput v;
  nn::DataParallel dv(v, {ts::kCPU, ts::kCPU, ts::kCPU});
  const Tensor va = ts::randn({4, 3}), vb = ts::randn({4, 7});
  std::vector<Tensor> got = dv(va, vb), want = v.forward(va, vb);
  ASSERT_EQ(got.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_TRUE(all_close(got[i], want[i]));
}

TEST(DataParallel, InputsMustAgreeInTheScatteredDim) {
  TwoInputs m;
  nn::DataParallel dp(m, kTwoCpus);
  const std::string msg = message_of<ts::ShapeError>([&] { dp(ts::randn({4, 3}), ts::randn({2, 5})); });
  EXPECT_NE(msg.find("DataParallel: input 1 has size 2 along dim 0 but input 0 has size 4"), std::string::npos) << msg;
}

TEST(DataParallel, ScattersAndGathersAlongAnotherDim) {
  struct Scale : nn::Module {
    Tensor w = ts::full({3, 1}, 0.5);
    Scale() { register_parameter("w", w); }
    Tensor forward(Tensor x) override { return x * w; }  // x (3, N)
  } m;
  CallLog log;
  m.register_forward_pre_hook([&](nn::Module&, const Tensor& x) -> std::optional<Tensor> {
    std::lock_guard<std::mutex> g(log.mu);
    log.batch.push_back(x.size(1));
    return std::nullopt;
  });
  nn::DataParallel dp(m, kTwoCpus, std::nullopt, /*dim=*/1);
  const Tensor x = ts::randn({3, 5});
  Tensor y = dp(x);
  EXPECT_EQ(log.sorted_batch(), (std::vector<int64_t>{3, 2}));
  EXPECT_TRUE(bitwise(y, x * 0.5));
  y.sum().backward();
  EXPECT_TRUE(all_close(m.w.grad(), x.sum(1, true)));
  nn::DataParallel neg(m, kTwoCpus, std::nullopt, /*dim=*/-1);
  EXPECT_TRUE(bitwise(neg(x), x * 0.5));
}

TEST(DataParallel, ZeroDimOutputsGatherIntoAVector) {
  struct Loss : nn::Module {
    Tensor forward(Tensor x) override { return x.sum(); }
  } m;
  nn::DataParallel dp(m, {ts::kCPU, ts::kCPU, ts::kCPU});
  const Tensor x = ts::arange(5.0).reshape({5, 1});  // chunks {0, 1}, {2, 3}, {4}
  EXPECT_TRUE(bitwise(dp(x), ts::tensor({1.0, 5.0, 4.0})));
}

// ---- buffers, modes -------------------------------------------------------------------------------------

namespace {
struct Normed : nn::Module {
  nn::Linear fc{3, 3};
  nn::BatchNorm1d bn{3};
  Normed() { register_modules({{"fc", fc}, {"bn", bn}}); }
  Tensor forward(Tensor x) override { return bn(fc(x)); }
};
}  // namespace

// PyTorch's documented behaviour: replica 0 shares the module's buffers, so the running statistics
// after a forward are those of device_ids[0]'s chunk alone, and the other replicas' updates are lost.
TEST(DataParallel, BatchNormBuffersKeepOnlyReplicaZerosUpdate) {
  ts::manual_seed(8);
  Normed m, ref, scratch, whole;
  for (Normed* n : {&m, &ref, &scratch, &whole}) n->to(ts::kFloat64);
  ref.load_state_dict(m.state_dict());
  const Tensor x = test_data({6, 3}, ts::kFloat64, 41);
  nn::DataParallel dp(m, {ts::kCPU, ts::kCPU, ts::kCPU});
  Tensor y = dp(x);

  // Outputs: each chunk normalized with its own statistics (PyTorch's DataParallel is not SyncBatchNorm).
  const std::vector<Tensor> xs = x.chunk(3);
  ts::NoGradGuard g;
  std::vector<Tensor> outs;
  for (const Tensor& xc : xs) {
    scratch.load_state_dict(ref.state_dict());
    outs.push_back(scratch(xc));
  }
  EXPECT_TRUE(bitwise(y.detach(), ts::cat(outs, 0)));
  // Buffers: replica 0's update only.
  ref(xs[0]);
  EXPECT_TRUE(bitwise(m.bn.running_mean, ref.bn.running_mean));
  EXPECT_TRUE(bitwise(m.bn.running_var, ref.bn.running_var));
  EXPECT_EQ(m.bn.num_batches_tracked.item<int64_t>(), 1);
  whole.load_state_dict(scratch.state_dict());
  whole.bn.reset_running_stats();
  whole(x);
  EXPECT_FALSE(ts::equal(m.bn.running_mean, whole.bn.running_mean));  // not the whole batch's

  // Evaluation: the running statistics are used and left as they are, as the plain module's.
  dp.eval();
  const Tensor before = m.bn.running_mean.clone();
  EXPECT_TRUE(bitwise(dp(x), m(x)));
  EXPECT_TRUE(bitwise(m.bn.running_mean, before));
}

TEST(DataParallel, TrainingGradAndAutocastModesReachTheReplicas) {
  struct Probe : nn::Module {
    nn::Linear fc{4, 2};
    std::mutex* mu = nullptr;
    std::vector<std::tuple<bool, bool, bool>>* seen = nullptr;
    Probe() { register_modules({{"fc", fc}}); }
    Tensor forward(Tensor x) override {
      {
        std::lock_guard<std::mutex> g(*mu);
        seen->emplace_back(is_training(), ts::is_grad_enabled(), ts::amp::is_autocast_enabled(ts::DeviceType::CPU));
      }
      return fc(x);
    }
  } m;
  std::mutex mu;
  std::vector<std::tuple<bool, bool, bool>> seen;
  m.mu = &mu;
  m.seen = &seen;
  nn::DataParallel dp(m, kTwoCpus);
  const Tensor x = ts::randn({4, 4});
  auto expect_all = [&](bool training, bool grad, bool autocast) {
    ASSERT_EQ(seen.size(), 2u);
    for (auto& s : seen) EXPECT_EQ(s, std::make_tuple(training, grad, autocast));
    seen.clear();
  };
  EXPECT_TRUE(dp(x).requires_grad());
  expect_all(true, true, false);
  dp.eval();
  {
    ts::NoGradGuard g;
    Tensor y = dp(x);
    EXPECT_FALSE(y.requires_grad());
  }
  expect_all(false, false, false);
  EXPECT_FALSE(m.fc.weight.grad().defined());
  dp.train();
  {
    ts::amp::autocast ac(ts::kCPU, ts::kBFloat16);
    Tensor y = dp(x);
    EXPECT_EQ(y.dtype(), ts::kBFloat16);
  }
  expect_all(true, true, true);
}

// ---- exceptions, hooks, ties, names ----------------------------------------------------------------------

namespace {
struct Picky : nn::Module {
  nn::Linear fc{2, 2};
  Picky() { register_modules({{"fc", fc}}); }
  Tensor forward(Tensor x) override {
    const double first = x.select(0, 0).select(0, 0).item<double>();
    if (first < 0) TS_THROW(ValueError, "Picky: negative input ", first);
    if (first > 100) throw std::runtime_error("too large");
    return fc(x);
  }
};
}  // namespace

TEST(DataParallel, ReplicaExceptionsAreRaisedInTheCallerNamingTheReplica) {
  Picky m;
  nn::DataParallel dp(m, kTwoCpus);
  const Tensor x = ts::tensor({1.0, 1.0, 2.0, 2.0, -3.0, 1.0, 4.0, 4.0}).reshape({4, 2}).to(ts::kFloat32);
  EXPECT_EQ(message_of<ts::ValueError>([&] { dp(x); }),
            "DataParallel: Caught ValueError in replica 1 on device cpu.\nOriginal error: Picky: negative input -3");
  const Tensor big = ts::tensor({500.0, 1.0, 2.0, 2.0, -3.0, 1.0, 4.0, 4.0}).reshape({4, 2}).to(ts::kFloat32);
  // Both fail: replica 0's error is raised; a std::exception becomes a tessera::Error naming its class.
  EXPECT_EQ(message_of<ts::Error>([&] { dp(big); }),
            "DataParallel: Caught std::runtime_error in replica 0 on device cpu.\nOriginal error: too large");
  // The failed forwards left the module as it was.
  EXPECT_TRUE(bitwise(dp(x.abs()), m.forward(x.abs())));
}

TEST(DataParallel, HooksRunOnEveryReplicaAndBackwardHooksFindTheirReplica) {
  Net net;
  std::atomic<int> forward_calls{0}, backward_calls{0};
  std::mutex mu;
  std::vector<std::string> names;
  net.register_forward_hook([&](nn::Module&, const Tensor&, const Tensor&) -> std::optional<Tensor> {
    ++forward_calls;
    return std::nullopt;
  });
  net.register_full_backward_hook([&](nn::Module& self, const std::vector<Tensor>&,
                                      const std::vector<Tensor>& grad_output) -> std::optional<std::vector<Tensor>> {
    ++backward_calls;
    std::lock_guard<std::mutex> g(mu);
    names.push_back(self.name() + " " + std::to_string(grad_output[0].size(0)));
    return std::nullopt;
  });
  nn::DataParallel dp(net, kTwoCpus);
  Tensor y = dp(ts::randn({5, 4}).requires_grad_());
  // The replicas of that forward are gone from the wrapper's view; the graph keeps them for the hook.
  dp(ts::randn({2, 4}));
  y.sum().backward();
  EXPECT_EQ(forward_calls.load(), 4);
  EXPECT_EQ(backward_calls.load(), 2);
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"Net 2", "Net 3"}));
}

TEST(DataParallel, TiedWeightsStayTiedInReplicas) {
  struct Tied : nn::Module {
    nn::Linear a{4, 4, false}, b{4, 4, false};
    Tied() {
      b.weight = a.weight;
      register_modules({{"a", a}, {"b", b}});
    }
    Tensor forward(Tensor x) override { return b(a(x).relu()); }
  } m;
  m.to(ts::kFloat64);
  set_exact(m, 13);
  ASSERT_EQ(m.parameters().size(), 1u);
  const Tensor x = eighths({6, 4}, 14);
  nn::DataParallel dp(m, kTwoCpus);
  dp(x).sum().backward();
  const Tensor g = m.a.weight.grad().clone();
  m.zero_grad();
  m(x).sum().backward();
  EXPECT_TRUE(bitwise(g, m.a.weight.grad()));
}

TEST(DataParallel, IsAModuleWrappingTheModuleAsPyTorchNamesIt) {
  Net net;
  nn::DataParallel dp(net, kTwoCpus);
  EXPECT_EQ(dp.name(), "DataParallel");
  EXPECT_EQ(dp.parameters().size(), 4u);
  EXPECT_TRUE(dp.state_dict().count("module.fc1.weight"));
  EXPECT_EQ(&dp.module(), &net);
  EXPECT_EQ(dp.output_device(), ts::kCPU);
  dp.eval();
  EXPECT_FALSE(net.fc1.is_training());
  EXPECT_NE(dp.repr().find("(module): Net("), std::string::npos) << dp.repr();
}

// ---- replica factories ---------------------------------------------------------------------------------

namespace {
nn::Sequential make_mlp() { return nn::Sequential(nn::Linear(4, 8), nn::ReLU(), nn::Linear(8, 3)); }
struct WithSequential : nn::Module {
  nn::Sequential body = make_mlp();
  WithSequential() { register_modules({{"body", body}}); }
  Tensor forward(Tensor x) override { return body(x); }
};
}  // namespace

TEST(DataParallel, CopiesThatShareOwnedChildrenAreRefused) {
  WithSequential m;
  const std::string msg = message_of<ts::ValueError>([&] { nn::DataParallel dp(m, kTwoCpus); });
  EXPECT_NE(msg.find("DataParallel: a copy of WithSequential shares its submodule 'body.0' (Linear) with the module"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("pass a replica factory"), std::string::npos) << msg;
  nn::Sequential seq = make_mlp();
  EXPECT_THROW({ nn::DataParallel dp(seq, kTwoCpus); }, ts::ValueError);
  // With one device there are no replicas: no copy is needed.
  nn::DataParallel one(seq, {ts::kCPU});
  const Tensor x = ts::randn({2, 4});
  EXPECT_TRUE(bitwise(one(x), seq(x)));
}

TEST(DataParallel, ReplicaFactoryBuildsReplicasOfOwnedChildren) {
  ts::manual_seed(10);
  nn::Sequential seq = make_mlp();
  seq.to(ts::kFloat64);
  set_exact(seq, 15);
  CallLog log;
  log.attach(seq);  // the factory's replicas do not share the module's hooks
  const uint64_t offset = ts::default_generator().offset();
  nn::DataParallel dp(seq, [] { return make_mlp(); }, {ts::kCPU, ts::kCPU, ts::kCPU});
  EXPECT_EQ(ts::default_generator().offset(), offset);  // building the replicas drew no numbers
  const Tensor x = eighths({7, 4}, 16), c = eighths({7, 3}, 17);
  Tensor y = dp(x);
  EXPECT_TRUE(log.batch.empty());
  (y * c).sum().backward();
  const std::vector<Tensor> dp_grads = grads(seq);
  seq.zero_grad();
  (seq(x) * c).sum().backward();
  EXPECT_TRUE(all_bitwise(dp_grads, grads(seq)));
  // The factory's replicas are float32 and hold no tensors of their own: they compute with the module's.
  EXPECT_EQ(y.dtype(), ts::kFloat64);
  for (const Tensor& p : dp.parameters()) EXPECT_EQ(p.dtype(), ts::kFloat64);
  // Training flags follow the module each forward.
  struct Drop : nn::Module {
    nn::Dropout drop{0.5};
    Drop() { register_modules({{"drop", drop}}); }
    Tensor forward(Tensor x) override { return drop(x); }
  } d;
  nn::DataParallel dd(d, [] { return Drop(); }, kTwoCpus);
  dd.eval();
  const Tensor ones = ts::ones({6, 5});
  EXPECT_TRUE(bitwise(dd(ones), ones));
  dd.train();
  EXPECT_FALSE(ts::equal(dd(ones), ones));
}

TEST(DataParallel, ReplicaFactoryMustBuildTheModulesStructure) {
  nn::Sequential seq = make_mlp();
  auto wider = [] { return nn::Sequential(nn::Linear(4, 9), nn::ReLU(), nn::Linear(9, 3)); };
  std::string msg = message_of<ts::ShapeError>([&] { nn::DataParallel dp(seq, wider, kTwoCpus); });
  EXPECT_NE(msg.find("DataParallel: the replica factory's module for device_ids[0] (cpu): '0.weight' has size [9, 4] "
                     "but the module's has size [8, 4]"),
            std::string::npos)
      << msg;
  auto shorter = [] { return nn::Sequential(nn::Linear(4, 3)); };
  msg = message_of<ts::ValueError>([&] { nn::DataParallel dp(seq, shorter, kTwoCpus); });
  EXPECT_NE(msg.find("has 2 parameter and buffer slots, but the module (Sequential) has 4"), std::string::npos) << msg;
}

// ---- errors ---------------------------------------------------------------------------------------------

TEST(DataParallel, BadDeviceIdsAreRefused) {
  Net net;
  std::string msg = message_of<ts::ValueError>([&] { nn::DataParallel dp(net, std::vector<ts::Device>{}); });
  EXPECT_EQ(msg, "DataParallel: device_ids is empty; expected at least one device (leave device_ids out to use every "
                 "visible GPU)");
  msg = message_of<ts::ValueError>([&] { nn::DataParallel dp(net, {ts::kCPU, ts::kMeta}); });
  EXPECT_EQ(msg, "DataParallel: device_ids[1] is meta, which holds no data (device_ids [cpu, meta]); expected CUDA "
                 "devices or the CPU");
  msg = message_of<ts::ValueError>([&] { nn::DataParallel dp(net, {"cuda:0", "cpu"}); });
  EXPECT_EQ(msg, "DataParallel: device_ids mixes cuda:0 and cpu ([cuda:0, cpu]); expected devices of one type: CUDA "
                 "devices, or the CPU");
  msg = message_of<ts::ValueError>([&] { nn::DataParallel dp(net, {"cuda:0", "cuda:1", "cuda:0"}); });
  EXPECT_EQ(msg, "DataParallel: device_ids lists cuda:0 twice ([cuda:0, cuda:1, cuda:0]); expected distinct devices "
                 "(only the CPU may be listed more than once)");
  const int n = ts::cuda::device_count();  // one past the last visible GPU
  msg = message_of<ts::DeviceError>([&] { nn::DataParallel dp(net, {ts::Device::cuda(n)}); });
  const std::string bad = "DataParallel: device_ids[0] is cuda:" + std::to_string(n);
  EXPECT_EQ(msg, ts::cuda::is_built() ? bad + ", but " + std::to_string(n) + " CUDA device(s) are visible"
                                      : bad + ", but tessera was built without CUDA");
  msg = message_of<ts::ValueError>([&] { nn::DataParallel dp(net, kTwoCpus, ts::kMeta); });
  EXPECT_EQ(msg, "DataParallel: output_device is meta, which holds no data; expected a CUDA device or the CPU");
}

TEST(DataParallel, AModuleNotOnDeviceIds0IsRefusedAtForward) {
  Net net;
  net.to(ts::kMeta);
  nn::DataParallel dp(net, kTwoCpus);
  EXPECT_EQ(message_of<ts::DeviceError>([&] { dp(ts::randn({4, 4})); }),
            "DataParallel: module must have its parameters and buffers on device cpu (device_ids[0]) but found one of "
            "them on device: meta (fc1.weight)");
}

TEST(DataParallel, BadInputsAreRefused) {
  Net net;
  nn::DataParallel dp(net, kTwoCpus);
  EXPECT_EQ(message_of<ts::ValueError>([&] { dp(ts::randn({0, 4})); }),
            "DataParallel: input 0 of size [0, 4] has size 0 along dim 0; expected at least one sample to scatter over "
            "device_ids");
  EXPECT_EQ(message_of<ts::ShapeError>([&] { dp(ts::scalar_tensor(1.0)); }),
            "DataParallel: input 0 is a 0-dim tensor; expected a tensor with a dim 0 to scatter along");
  EXPECT_EQ(message_of<ts::ValueError>([&] { dp(Tensor()); }),
            "DataParallel: input 0 is an undefined tensor; expected a tensor to scatter along dim 0");
  EXPECT_EQ(message_of<ts::DeviceError>([&] { dp(ts::empty({4, 4}, ts::TensorOptions(ts::kFloat32, ts::kMeta))); }),
            "DataParallel: input 0 is on the meta device, which holds no data; expected a tensor on the CPU or a CUDA "
            "device to scatter over device_ids [cpu, cpu]");
  nn::DataParallel dim2(net, kTwoCpus, std::nullopt, 2);
  EXPECT_EQ(message_of<ts::IndexError>([&] { dim2(ts::randn({4, 4})); }),
            "DataParallel: Dimension out of range (expected to be in range of [-2, 1], but got 2) for input 0 of size "
            "[4, 4]");
}
