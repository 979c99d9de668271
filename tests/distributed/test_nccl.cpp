// The NCCL backend at world size 1 (one process, no launcher, label `gpu`): every collective on every
// dtype it moves, the asynchronous handles and their stream ordering, and DistributedDataParallel and
// ZeRO-1 equal to plain training on the GPU, bit for bit (an average over one rank is the value
// itself). Without a GPU, or in a build without CUDA, every test skips, saying so.
#include <gtest/gtest.h>

#include <vector>

#include "tessera/cuda.h"
#include "tessera/distributed.h"
#include "tessera/distributed/ddp.h"
#include "tessera/distributed/zero.h"
#include "tessera/tessera.h"
#include "common/test_util.h"

namespace ts = tessera;
namespace dist = tessera::distributed;
namespace F = tessera::nn::functional;

namespace {

bool g_ready = false;  // the nccl group is up

#define NEED_NCCL() \
  if (!g_ready) GTEST_SKIP() << "needs a GPU and a build with the nccl backend"

const ts::DType kAll[] = {ts::kBool, ts::kUInt8, ts::kInt8, ts::kInt32, ts::kInt64,
                          ts::kFloat16, ts::kBFloat16, ts::kFloat32, ts::kFloat64};

ts::Tensor values(ts::DType dt, int64_t n) {
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = dt == ts::kBool ? (i % 3 == 0) : static_cast<double>((i * 7) % 11) - 5;
  ts::Tensor t = ts::tensor(v, {n});
  if (dt == ts::kUInt8) t = t.abs();
  return t.to(dt);
}

TEST(Nccl, GroupIsOnTheGpu) {
  NEED_NCCL();
  EXPECT_EQ(dist::default_group().backend(), "nccl");
  EXPECT_EQ(dist::get_world_size(), 1);
  EXPECT_TRUE(dist::default_group().device().is_cuda());
  EXPECT_THROW(dist::all_reduce(ts::ones({3})), ts::DeviceError);  // a CPU tensor
}

TEST(Nccl, EveryCollectiveEveryDtype) {
  NEED_NCCL();
  for (ts::DType dt : kAll) {
    for (int64_t n : {1, 7, 4099}) {
      const ts::Tensor want = values(dt, n);
      for (dist::ReduceOp op : {dist::ReduceOp::Sum, dist::ReduceOp::Max, dist::ReduceOp::Min, dist::ReduceOp::Avg}) {
        if (op == dist::ReduceOp::Avg && !ts::is_floating_point(dt)) continue;
        ts::Tensor t = want.cuda();
        dist::all_reduce(t, op);
        ASSERT_TRUE(ts::equal(t.cpu(), want)) << ts::dtype_name(dt) << " " << n << " " << dist::reduce_op_name(op);
      }
      ts::Tensor b = want.cuda();
      dist::broadcast(b, 0);
      ASSERT_TRUE(ts::equal(b.cpu(), want));
      ts::Tensor out = ts::zeros({n}, ts::TensorOptions(dt, ts::Device::cuda(0)));
      dist::all_gather_into_tensor(out, want.cuda());
      ASSERT_TRUE(ts::equal(out.cpu(), want)) << "all_gather " << ts::dtype_name(dt);
      std::vector<ts::Tensor> outs{ts::zeros({n}, ts::TensorOptions(dt, ts::Device::cuda(0)))};
      dist::all_gather(outs, want.cuda());
      ASSERT_TRUE(ts::equal(outs[0].cpu(), want));
      if (dt != ts::kBool) {
        ts::Tensor rs = ts::zeros({n}, ts::TensorOptions(dt, ts::Device::cuda(0)));
        dist::reduce_scatter_tensor(rs, want.cuda());
        ASSERT_TRUE(ts::equal(rs.cpu(), want)) << "reduce_scatter " << ts::dtype_name(dt);
      }
    }
  }
  dist::barrier();
}

TEST(Nccl, AsyncWorkIsOrderedAfterComputeAndBeforeLaterWork) {
  NEED_NCCL();
  // A long producer on the compute stream, then the collective: it must read the produced values.
  ts::Tensor a = ts::randn({2048, 2048}, ts::TensorOptions(ts::kFloat32, ts::Device::cuda(0)));
  ts::Tensor t = a.matmul(a).sum(1);
  const ts::Tensor want = t.cpu();
  ts::Tensor u = a.matmul(a).sum(1);
  dist::WorkPtr w = dist::all_reduce(u, dist::ReduceOp::Sum, /*async_op=*/true);
  w->wait();  // the current stream waits; reading u after it sees the result
  EXPECT_TRUE(ts::allclose(u.cpu(), want, 1e-5, 1e-3));
  ts::cuda::synchronize();
  EXPECT_TRUE(w->is_completed());
  EXPECT_TRUE(w->is_success());
}

struct Mlp : ts::nn::Module {
  ts::nn::Linear fc1{16, 64}, fc2{64, 8};
  Mlp() { register_modules({{"fc1", fc1}, {"fc2", fc2}}); }
  ts::Tensor forward(ts::Tensor x) override { return fc2(fc1(x).relu()); }
};

TEST(Nccl, DdpEqualsPlainTraining) {
  NEED_NCCL();
  ts::manual_seed(5);
  Mlp net;
  ts::manual_seed(5);
  Mlp ref;
  net.to("cuda");
  ref.to("cuda");
  ts::nn::DistributedDataParallel ddp(net, {.bucket_cap_mb = 1e-3, .first_bucket_cap_mb = 1e-3});
  ts::optim::AdamW opt(ddp.parameters(), {.lr = 1e-2});
  ts::optim::AdamW ref_opt(ref.parameters(), {.lr = 1e-2});
  for (int step = 0; step < 4; ++step) {
    ts::Tensor x = ts::randn({32, 16}, ts::TensorOptions(ts::kFloat32, ts::Device::cuda(0)));
    ts::Tensor y = ts::randn({32, 8}, ts::TensorOptions(ts::kFloat32, ts::Device::cuda(0)));
    opt.zero_grad();
    F::mse_loss(ddp(x), y).backward();
    EXPECT_EQ(ddp.buckets_started_in_backward(), ddp.num_buckets());
    opt.step();
    ref_opt.zero_grad();
    F::mse_loss(ref(x), y).backward();
    ref_opt.step();
  }
  auto a = net.named_parameters(), b = ref.named_parameters();
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(ts::equal(a[i].second.cpu(), b[i].second.cpu())) << a[i].first;
}

TEST(Nccl, ZeroEqualsPlainAdam) {
  NEED_NCCL();
  ts::manual_seed(6);
  Mlp net;
  ts::manual_seed(6);
  Mlp ref;
  net.to("cuda");
  ref.to("cuda");
  ts::optim::ZeroRedundancyOptimizer<ts::optim::Adam> opt(net.parameters(), {.lr = 1e-2});
  ts::optim::Adam ref_opt(ref.parameters(), {.lr = 1e-2});
  for (int step = 0; step < 3; ++step) {
    ts::Tensor x = ts::randn({32, 16}, ts::TensorOptions(ts::kFloat32, ts::Device::cuda(0)));
    ts::Tensor y = ts::randn({32, 8}, ts::TensorOptions(ts::kFloat32, ts::Device::cuda(0)));
    opt.zero_grad();
    F::mse_loss(net(x), y).backward();
    opt.step();
    ref_opt.zero_grad();
    F::mse_loss(ref(x), y).backward();
    ref_opt.step();
  }
  auto a = net.named_parameters(), b = ref.named_parameters();
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(ts::equal(a[i].second.cpu(), b[i].second.cpu())) << a[i].first;
}

// DDP inside a whole training step captured by make_graphed (Note [NCCL under CUDA graph capture]):
// the bucket all-reduces are captured with the step's kernels, and the replays train as the eager
// plain model does, bit for bit (an average over one rank is the value itself).
TEST(Nccl, DdpStepCapturedInACudaGraphEqualsEagerPlainTraining) {
  NEED_NCCL();
  const ts::TensorOptions gpu(ts::kFloat32, ts::Device::cuda(0));
  ts::manual_seed(7);
  Mlp net;
  ts::manual_seed(7);
  Mlp ref;
  net.to("cuda");
  ref.to("cuda");
  ts::nn::DistributedDataParallel ddp(net, {.bucket_cap_mb = 1e-3, .first_bucket_cap_mb = 1e-3});
  ASSERT_GT(ddp.num_buckets(), 1);
  ts::optim::SGD opt(ddp.parameters(), {.lr = 0.05, .momentum = 0.9});
  ts::optim::SGD ref_opt(ref.parameters(), {.lr = 0.05, .momentum = 0.9});
  std::vector<std::vector<ts::Tensor>> batches;
  for (int i = 0; i < 6; ++i) batches.push_back({ts::randn({32, 16}, gpu), ts::randn({32, 8}, gpu)});
  auto plain_step = [&](const std::vector<ts::Tensor>& in) {
    ref_opt.zero_grad();
    ts::Tensor loss = F::mse_loss(ref(in[0]), in[1]);
    loss.backward();
    ref_opt.step();
    return loss;
  };
  const uint64_t seq_before = dist::default_group().sequence_number();
  // make_graphed takes 3 real steps on the sample batch before it captures; the plain model takes them too.
  auto step = ts::cuda::make_graphed(
      [&](const std::vector<ts::Tensor>& in) {
        opt.zero_grad();
        ts::Tensor loss = F::mse_loss(ddp(in[0]), in[1]);
        loss.backward();
        opt.step();
        return std::vector<ts::Tensor>{loss};
      },
      batches[0]);
  for (int i = 0; i < 3; ++i) (void)plain_step(batches[0]);
  // Four iterations (three warm-up steps and the capture), each with every bucket started in backward.
  EXPECT_EQ(dist::default_group().sequence_number() - seq_before, 4u * static_cast<uint64_t>(ddp.num_buckets()));
  EXPECT_EQ(ddp.buckets_started_in_backward(), ddp.num_buckets());
  for (int s = 1; s < 6; ++s) {
    const ts::Tensor want = plain_step(batches[s]);
    const ts::Tensor got = step(batches[s])[0];
    EXPECT_TRUE(ts::equal(got.cpu(), want.cpu())) << "loss of step " << s;
  }
  // Replays issue nothing on the host: the sequence number stays where the capture left it.
  EXPECT_EQ(dist::default_group().sequence_number() - seq_before, 4u * static_cast<uint64_t>(ddp.num_buckets()));
  auto a = net.named_parameters(), b = ref.named_parameters();
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(ts::equal(a[i].second.cpu(), b[i].second.cpu())) << a[i].first;
}

// A collective captured alone: the replay runs it in order between the captured kernels; the captured
// work is not tracked (is_completed raises), and a barrier, which blocks the host, refuses capture.
TEST(Nccl, CollectiveCapturedAloneReplaysInOrderAndBarrierRefusesCapture) {
  NEED_NCCL();
  const ts::TensorOptions gpu(ts::kFloat32, ts::Device::cuda(0));
  ts::Tensor t = ts::arange(0, 1000, 1, gpu);
  ts::cuda::Stream side = ts::cuda::Stream::create(0);
  ts::cuda::Graph g;
  {
    ts::cuda::StreamGuard on_side(side);
    t.mul_(2.0);  // warm-up, eagerly, outside the capture
    dist::all_reduce(t, dist::ReduceOp::Avg);
    t.add_(1.0);
    g.capture_begin();
    t.mul_(2.0);
    dist::WorkPtr w = dist::all_reduce(t, dist::ReduceOp::Avg, /*async_op=*/true);
    const std::string completed = ts::testing::message_of<ts::ValueError>([&] { (void)w->is_completed(); });
    EXPECT_NE(completed.find("captured into a CUDA graph"), std::string::npos) << completed;
    const std::string barrier = ts::testing::message_of<dist::DistributedError>([&] { dist::barrier(); });
    EXPECT_NE(barrier.find("cannot be captured into a CUDA graph"), std::string::npos) << barrier;
    w->wait();
    t.add_(1.0);
    g.capture_end();
    // The wait of a captured work outside its capture is refused too.
    const std::string outside = ts::testing::message_of<ts::ValueError>([&] { w->wait(); });
    EXPECT_NE(outside.find("only inside that capture"), std::string::npos) << outside;
  }
  ts::cuda::synchronize();
  std::vector<double> want(1000);
  for (int i = 0; i < 1000; ++i) want[i] = 2.0 * i + 1.0;  // the eager warm-up; the capture ran nothing
  EXPECT_TRUE(ts::equal(t.cpu(), ts::tensor(want, {1000})));
  g.replay();
  g.replay();
  ts::cuda::synchronize();
  for (double& v : want) v = 2.0 * (2.0 * v + 1.0) + 1.0;
  EXPECT_TRUE(ts::equal(t.cpu(), ts::tensor(want, {1000})));
  dist::barrier();  // the group still works after the capture
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (dist::is_nccl_available() && ts::cuda::is_available()) {
    dist::init_process_group("nccl", {.timeout = std::chrono::seconds(60)});
    g_ready = true;
  }
  const int rc = RUN_ALL_TESTS();
  if (g_ready) dist::destroy_process_group();
  return rc;
}
