// nn::DataParallel on GPUs (tests/nn/test_data_parallel.cpp runs the same logic over CPU entries).
// One GPU: the module is moved there at construction and called itself, inputs come from the CPU,
// the module's device is checked each forward. Two GPUs (skipped with fewer): replicas on cuda:0 and
// cuda:1, each run with its device current; forward, gradients and SGD training equal to the plain
// module on cuda:0 (bitwise in float64 on values whose arithmetic is exact, within float32 tolerance
// on random data, whose sums over the batch run in another order); output_device on cuda:1 and the
// CPU; BatchNorm's buffers take replica 0's update only; autocast in the replicas; an exception from
// replica 1 names cuda:1; ResNet-18 through a replica factory against the plain network run chunk by
// chunk; and the device errors.
#include <mutex>
#include <set>
#include <stdexcept>
#include <vector>

#include "common/test_util.h"
#include "tessera/amp.h"
#include "tessera/models.h"
#include "tessera/nn.h"
#include "tessera/optim.h"

namespace ts = tessera;
namespace nn = tessera::nn;
using ts::Tensor;
using namespace tessera::testing;

namespace {

const ts::Device kGpu0 = ts::Device::cuda(0), kGpu1 = ts::Device::cuda(1);

#define REQUIRE_TWO_GPUS()                                                                      \
  do {                                                                                          \
    TS_REQUIRE_GPU();                                                                           \
    if (ts::cuda::device_count() < 2)                                                           \
      GTEST_SKIP() << "needs two GPUs, found " << ts::cuda::device_count();                    \
  } while (0)

struct Net : nn::Module {
  nn::Linear fc1{16, 32}, fc2{32, 8};
  Net() { register_modules({{"fc1", fc1}, {"fc2", fc2}}); }
  Tensor forward(Tensor x) override { return fc2(fc1(x).relu()); }
};

// Multiples of 1/8 in [-1, 1): sums of products of a few dozen of them are exact in float64.
Tensor eighths(const ts::Shape& sizes, uint64_t seed, ts::Device device = kGpu0) {
  return ts::div(test_data(sizes, ts::kFloat64, seed, -8, 8).round(), 8.0).to(device);
}

void set_exact(nn::Module& m, uint64_t seed) {
  ts::NoGradGuard g;
  for (Tensor& p : m.parameters()) p.copy_(eighths(p.sizes(), seed++, p.device()));
}

std::vector<Tensor> grads(nn::Module& m) {
  std::vector<Tensor> out;
  for (const Tensor& p : m.parameters()) out.push_back(p.grad().defined() ? p.grad().clone() : Tensor());
  return out;
}

::testing::AssertionResult bitwise(const Tensor& a, const Tensor& b) {
  if (a.defined() != b.defined()) return ::testing::AssertionFailure() << "one tensor is undefined";
  if (!a.defined()) return ::testing::AssertionSuccess();
  if (!(a.device() == b.device()))
    return ::testing::AssertionFailure() << a.device().str() << " vs " << b.device().str();
  if (!ts::equal(a.cpu(), b.cpu())) return ::testing::AssertionFailure() << "values differ";
  return ::testing::AssertionSuccess();
}

}  // namespace

// ---- one GPU ---------------------------------------------------------------------------------------------

TEST(DataParallelCuda, OneGpuMovesTheModuleAndCallsIt) {
  TS_REQUIRE_GPU();
  ts::manual_seed(1);
  Net net;  // on the CPU: the constructor moves it, as PyTorch's
  std::vector<const nn::Module*> called;
  net.register_forward_pre_hook([&](nn::Module& m, const Tensor& x) -> std::optional<Tensor> {
    called.push_back(&m);
    EXPECT_TRUE(x.device() == kGpu0);
    return std::nullopt;
  });
  nn::DataParallel dp(net, {kGpu0});
  EXPECT_TRUE(net.fc1.weight.device() == kGpu0);
  const Tensor x = test_data({6, 16}, ts::kFloat32, 2);  // on the CPU: scattered to cuda:0
  Tensor y = dp(x);
  EXPECT_TRUE(y.device() == kGpu0);
  ASSERT_EQ(called.size(), 1u);
  EXPECT_EQ(called[0], &net);
  y.sum().backward();
  EXPECT_TRUE(net.fc1.weight.grad().device() == kGpu0);
  EXPECT_TRUE(bitwise(y.detach(), net.forward(x.to(kGpu0)).detach()));

  // The module's device is checked each forward (PyTorch's wording).
  net.to(ts::kCPU);
  EXPECT_EQ(message_of<ts::DeviceError>([&] { dp(x); }),
            "DataParallel: module must have its parameters and buffers on device cuda:0 (device_ids[0]) but found one "
            "of them on device: cpu (fc1.weight)");
}

TEST(DataParallelCuda, DefaultDeviceIdsAreEveryVisibleGpu) {
  TS_REQUIRE_GPU();
  ts::manual_seed(2);
  Net net;
  net.to(kGpu0);
  nn::DataParallel dp(net);
  ASSERT_EQ(dp.device_ids().size(), static_cast<size_t>(ts::cuda::device_count()));
  for (int i = 0; i < ts::cuda::device_count(); ++i) EXPECT_TRUE(dp.device_ids()[i] == ts::Device::cuda(i));
  EXPECT_TRUE(dp.output_device() == kGpu0);
  const Tensor x = test_data({8, 16}, ts::kFloat32, 3).to(kGpu0);
  EXPECT_TRUE(all_close(dp(x), net.forward(x)));
}

TEST(DataParallelCuda, DeviceErrors) {
  TS_REQUIRE_GPU();
  Net net;
  const int n = ts::cuda::device_count();
  EXPECT_EQ(message_of<ts::ValueError>([&] { nn::DataParallel dp(net, {kGpu0, kGpu0}); }),
            "DataParallel: device_ids lists cuda:0 twice ([cuda:0, cuda:0]); expected distinct devices (only the CPU "
            "may be listed more than once)");
  EXPECT_EQ(message_of<ts::DeviceError>([&] { nn::DataParallel dp(net, {kGpu0, ts::Device::cuda(n)}); }),
            "DataParallel: device_ids[1] is cuda:" + std::to_string(n) + ", but " + std::to_string(n) +
                " CUDA device(s) are visible");
  EXPECT_EQ(message_of<ts::ValueError>([&] { nn::DataParallel dp(net, {kGpu0, ts::kCPU}); }),
            "DataParallel: device_ids mixes cuda:0 and cpu ([cuda:0, cpu]); expected devices of one type: CUDA "
            "devices, or the CPU");
  EXPECT_EQ(message_of<ts::DeviceError>([&] { nn::DataParallel dp(net, {kGpu0}, ts::Device::cuda(n)); }),
            "DataParallel: output_device is cuda:" + std::to_string(n) + ", but " + std::to_string(n) +
                " CUDA device(s) are visible");
}

// ---- two GPUs --------------------------------------------------------------------------------------------

TEST(DataParallelCuda, TwoGpusForwardAndGradientsEqualThePlainModule) {
  REQUIRE_TWO_GPUS();
  // float64, exact values: bitwise.
  Net net;
  net.to(kGpu0, ts::kFloat64);
  set_exact(net, 1);
  std::mutex mu;
  std::set<std::pair<int, int>> seen;  // (current device, input's device) in each replica
  net.register_forward_pre_hook([&](nn::Module&, const Tensor& x) -> std::optional<Tensor> {
    std::lock_guard<std::mutex> g(mu);
    seen.emplace(ts::cuda::current_device(), x.device().index());
    return std::nullopt;
  });
  const Tensor x = eighths({10, 16}, 11), c = eighths({10, 8}, 12);
  nn::DataParallel dp(net, {kGpu0, kGpu1});
  Tensor y = dp(x);
  EXPECT_EQ(seen, (std::set<std::pair<int, int>>{{0, 0}, {1, 1}}));
  EXPECT_TRUE(y.device() == kGpu0);
  (y * c).sum().backward();
  const std::vector<Tensor> dp_grads = grads(net);
  net.zero_grad();
  Tensor plain = net.forward(x);
  (plain * c).sum().backward();
  EXPECT_TRUE(bitwise(y.detach(), plain.detach()));
  const std::vector<Tensor> plain_grads = grads(net);
  for (size_t i = 0; i < plain_grads.size(); ++i) {
    EXPECT_TRUE(dp_grads[i].device() == kGpu0);
    EXPECT_TRUE(bitwise(dp_grads[i], plain_grads[i])) << i;
  }

  // float32, random values: within tolerance of the whole batch's sums.
  ts::manual_seed(5);
  Net f;
  f.to(kGpu0);
  const Tensor xf = test_data({9, 16}, ts::kFloat32, 13).to(kGpu0), tf = test_data({9, 8}, ts::kFloat32, 14).to(kGpu0);
  nn::DataParallel df(f, {kGpu0, kGpu1});
  Tensor yf = df(xf);
  nn::functional::mse_loss(yf, tf).backward();
  const std::vector<Tensor> df_grads = grads(f);
  f.zero_grad();
  Tensor pf = f.forward(xf);
  nn::functional::mse_loss(pf, tf).backward();
  EXPECT_TRUE(all_close(yf, pf, {1.3e-6, 1e-5}));
  const std::vector<Tensor> pf_grads = grads(f);
  for (size_t i = 0; i < pf_grads.size(); ++i) EXPECT_TRUE(all_close(df_grads[i], pf_grads[i], {1e-5, 1e-6})) << i;
}

TEST(DataParallelCuda, TwoGpusOutputDeviceAndInputsOnAnyDevice) {
  REQUIRE_TWO_GPUS();
  Net net;
  net.to(kGpu0, ts::kFloat64);
  set_exact(net, 2);
  const Tensor x = eighths({5, 16}, 21, ts::kCPU);
  const Tensor want = net.forward(x.to(kGpu0)).detach();
  nn::DataParallel to1(net, {kGpu0, kGpu1}, kGpu1);
  nn::DataParallel to_cpu(net, {kGpu0, kGpu1}, ts::kCPU);
  for (ts::Device from : {ts::kCPU, kGpu0, kGpu1}) {
    Tensor y1 = to1(x.to(from));
    EXPECT_TRUE(y1.device() == kGpu1);
    EXPECT_TRUE(bitwise(y1.detach().to(kGpu0), want));
    Tensor yc = to_cpu(x.to(from));
    EXPECT_TRUE(yc.device() == ts::kCPU);
    EXPECT_TRUE(bitwise(yc.detach().to(kGpu0), want));
  }
  // Backward through a gather onto cuda:1 still sums onto cuda:0's parameters.
  net.zero_grad();
  to1(x).sum().backward();
  EXPECT_TRUE(net.fc2.bias.grad().device() == kGpu0);
  EXPECT_EQ(net.fc2.bias.grad().cpu().select(0, 0).item<double>(), 5.0);  // d(sum)/d(bias) = batch size
}

TEST(DataParallelCuda, TwoGpusSgdTrainingEqualsPlainTraining) {
  REQUIRE_TWO_GPUS();
  Net a, b;
  a.to(kGpu0, ts::kFloat64);
  b.to(kGpu0, ts::kFloat64);
  set_exact(a, 3);
  set_exact(b, 3);
  nn::DataParallel dp(a, {kGpu0, kGpu1});
  ts::optim::SGD opt_a(dp.parameters(), {.lr = 0.0625}), opt_b(b.parameters(), {.lr = 0.0625});
  for (int step = 0; step < 4; ++step) {
    const Tensor x = eighths({6, 16}, 100 + step), c = eighths({6, 8}, 200 + step);
    opt_a.zero_grad();
    (dp(x) * c).sum().backward();
    opt_a.step();
    opt_b.zero_grad();
    (b.forward(x) * c).sum().backward();
    opt_b.step();
  }
  const auto pa = a.parameters(), pb = b.parameters();
  for (size_t i = 0; i < pa.size(); ++i) EXPECT_TRUE(bitwise(pa[i], pb[i])) << i;
}

TEST(DataParallelCuda, TwoGpusBatchNormBuffersKeepOnlyReplicaZerosUpdate) {
  REQUIRE_TWO_GPUS();
  struct Normed : nn::Module {
    nn::Linear fc{4, 4};
    nn::BatchNorm1d bn{4};
    Normed() { register_modules({{"fc", fc}, {"bn", bn}}); }
    Tensor forward(Tensor x) override { return bn(fc(x)); }
  };
  ts::manual_seed(6);
  Normed m, ref;
  m.to(kGpu0, ts::kFloat64);
  ref.to(kGpu0, ts::kFloat64);
  ref.load_state_dict(m.state_dict());
  const Tensor x = test_data({8, 4}, ts::kFloat64, 31).to(kGpu0);
  nn::DataParallel dp(m, {kGpu0, kGpu1});
  dp(x);
  ts::NoGradGuard g;
  ref(x.chunk(2)[0]);
  EXPECT_TRUE(all_close(m.bn.running_mean, ref.bn.running_mean, {1e-12, 1e-12}));
  EXPECT_TRUE(all_close(m.bn.running_var, ref.bn.running_var, {1e-12, 1e-12}));
  EXPECT_EQ(m.bn.num_batches_tracked.item<int64_t>(), 1);
}

TEST(DataParallelCuda, TwoGpusAutocastAndReplicaErrors) {
  REQUIRE_TWO_GPUS();
  struct Picky : nn::Module {
    nn::Linear fc{4, 4};
    Picky() { register_modules({{"fc", fc}}); }
    Tensor forward(Tensor x) override {
      if (x.device().index() == 1 && x.cpu().select(0, 0).select(0, 0).item<double>() < 0)
        TS_THROW(ValueError, "Picky: negative input on cuda:1");
      return fc(x);
    }
  } m;
  m.to(kGpu0);
  nn::DataParallel dp(m, {kGpu0, kGpu1});
  Tensor x = ts::ones({4, 4}, ts::TensorOptions(ts::kFloat32, kGpu0));
  {
    ts::amp::autocast ac(kGpu0, ts::kBFloat16);
    EXPECT_EQ(dp(x).dtype(), ts::kBFloat16);
  }
  EXPECT_EQ(dp(x).dtype(), ts::kFloat32);
  x = x.cpu();
  x.select(0, 2).fill_(-1.0);
  EXPECT_EQ(message_of<ts::ValueError>([&] { dp(x.to(kGpu0)); }),
            "DataParallel: Caught ValueError in replica 1 on device cuda:1.\nOriginal error: Picky: negative input on "
            "cuda:1");
  // A module on another device than device_ids[0].
  m.to(kGpu1);
  EXPECT_EQ(message_of<ts::DeviceError>([&] { dp(x); }),
            "DataParallel: module must have its parameters and buffers on device cuda:0 (device_ids[0]) but found one "
            "of them on device: cuda:1 (fc.weight)");
}

// A network whose children are owned by Sequentials, through a replica factory, against the plain
// network run on the same chunks one after the other (BatchNorm in training normalizes each chunk
// with its own statistics, under DataParallel as in the reference).
TEST(DataParallelCuda, TwoGpusResNetThroughAReplicaFactory) {
  REQUIRE_TWO_GPUS();
  ts::manual_seed(7);
  ts::models::ResNet net = ts::models::resnet18(10, 3, /*small_input=*/true);
  net.to(kGpu0);
  nn::DataParallel dp(net, [] { return ts::models::resnet18(10, 3, true); }, {kGpu0, kGpu1});
  const Tensor x = test_data({6, 3, 16, 16}, ts::kFloat32, 41).to(kGpu0);
  const Tensor target = ts::randint(0, 10, {6}, ts::TensorOptions(ts::kInt64, kGpu0));
  Tensor y = dp(x);
  nn::functional::cross_entropy(y, target, std::nullopt, -100, "sum").backward();
  const std::vector<Tensor> dp_grads = grads(net);
  net.zero_grad();
  const std::vector<Tensor> xs = x.chunk(2), ts_ = target.chunk(2);
  std::vector<Tensor> outs;
  for (size_t r = 0; r < 2; ++r) {
    outs.push_back(net(xs[r]));
    nn::functional::cross_entropy(outs.back(), ts_[r], std::nullopt, -100, "sum").backward();
  }
  EXPECT_TRUE(all_close(y, ts::cat(outs, 0), {1e-4, 1e-4}));
  const std::vector<Tensor> ref = grads(net);
  for (size_t i = 0; i < ref.size(); ++i) EXPECT_TRUE(all_close(dp_grads[i], ref[i], {1e-3, 1e-4})) << i;
}
