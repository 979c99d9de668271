// DistributedDataParallel on 2 ranks (mpirun, the MPI backend, CPU): training equals single-process
// training on the combined batch, which every rank also runs locally as the reference. The same tests
// run on GPUs with TESSERA_TEST_BACKEND=nccl (one GPU per rank, under mpirun or torchrun: the GPU
// suite's multi-GPU step), every tensor then on the rank's GPU.
//
// Bitwise in float64: the model is linear in its parameters, weights are multiples of 1/4, inputs and
// targets small integers, the batch sizes and the learning rate powers of two, so every value of the
// few steps is exactly representable and no order of summation (BLAS's within a batch, the
// all-reduce's across ranks) can change a bit: any difference is DDP's. In float32 (an MLP with
// random weights, Adam) the sums round differently and the check has a tolerance.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "tessera/autograd/callbacks.h"
#include "tessera/distributed.h"
#include "tessera/distributed/ddp.h"
#include "tessera/tessera.h"

namespace ts = tessera;
namespace dist = tessera::distributed;
namespace F = tessera::nn::functional;

namespace {

constexpr int64_t kPerRank = 4;
ts::Device g_dev = ts::Device::cpu();  // the rank's device: the CPU for mpi, its GPU for nccl

// y = (fc1(x) + fc2(x)) * scale: linear in every parameter; `scale` is a buffer.
struct LinearNet : ts::nn::Module {
  ts::nn::Linear fc1{6, 4}, fc2{6, 4};
  ts::Tensor scale = ts::ones({4}, ts::kFloat64);  // moved with the module
  LinearNet() {
    register_modules({{"fc1", fc1}, {"fc2", fc2}});
    register_buffer("scale", scale);
  }
  ts::Tensor forward(ts::Tensor x) override { return (fc1(x) + fc2(x)) * scale; }
};

// The same starting point on every rank: weights multiples of 1/4 drawn from a fixed seed.
void dyadic_init(ts::nn::Module& m, uint64_t seed) {
  ts::Generator gen(seed);
  ts::NoGradGuard no_grad;
  for (auto& p : m.parameters()) p.copy_(((ts::randn(p.sizes(), ts::kFloat64, &gen) * 4).round() / 4).to(p.device()));
}

LinearNet make_linear(uint64_t seed = 1) {
  LinearNet net;
  net.to(ts::kFloat64);
  net.to(g_dev);
  dyadic_init(net, seed);
  return net;
}

struct Batch {
  ts::Tensor x, y;  // the combined batch: kPerRank rows per rank, rank r's rows first r*kPerRank
  ts::Tensor part(const ts::Tensor& t, int rank) const { return t.narrow(0, rank * kPerRank, kPerRank); }
};

Batch integer_batch(int step, int world) {
  ts::Generator gen(100 + step);
  Batch b;
  b.x = ts::randint(-2, 3, {kPerRank * world, 6}, ts::kFloat64, &gen);
  b.y = ts::randint(-3, 4, {kPerRank * world, 4}, ts::kFloat64, &gen);
  b.x = b.x.to(g_dev);
  b.y = b.y.to(g_dev);
  return b;
}

void expect_params_equal(ts::nn::Module& got, ts::nn::Module& want, bool bitwise, double tol = 0) {
  auto g = got.named_parameters();
  auto w = want.named_parameters();
  ASSERT_EQ(g.size(), w.size());
  for (size_t i = 0; i < g.size(); ++i) {
    if (bitwise) {
      EXPECT_TRUE(ts::equal(g[i].second, w[i].second)) << g[i].first << " differs on rank " << dist::get_rank()
                                                       << ": max |diff| "
                                                       << ts::max((g[i].second - w[i].second).abs()).item<double>();
    } else {
      const double diff = ts::max((g[i].second - w[i].second).abs()).item<double>();
      EXPECT_LE(diff, tol) << g[i].first << " on rank " << dist::get_rank();
    }
  }
}

TEST(DDP, EqualsSingleProcessBitwiseFloat64WithSGDMomentum) {
  const int world = dist::get_world_size(), rank = dist::get_rank();
  LinearNet net = make_linear(), ref = make_linear();
  ts::nn::DistributedDataParallel ddp(net, {.bucket_cap_mb = 1e-5, .first_bucket_cap_mb = 1e-5});
  ASSERT_EQ(ddp.num_buckets(), 4u);  // a tiny cap: one parameter per bucket
  ts::optim::SGD opt(ddp.parameters(), {.lr = 1.0 / 16, .momentum = 0.5});
  ts::optim::SGD ref_opt(ref.parameters(), {.lr = 1.0 / 16, .momentum = 0.5});
  for (int step = 0; step < 4; ++step) {
    Batch b = integer_batch(step, world);
    opt.zero_grad();
    F::mse_loss(ddp(b.part(b.x, rank)), b.part(b.y, rank)).backward();
    EXPECT_EQ(ddp.buckets_started_in_backward(), 4u) << "every bucket starts from a gradient hook";
    opt.step();
    ref_opt.zero_grad();
    F::mse_loss(ref(b.x), b.y).backward();
    ref_opt.step();
    expect_params_equal(net, ref, /*bitwise=*/true);
  }
}

TEST(DDP, GradientsAreViewsOfTheBucket) {
  const int world = dist::get_world_size(), rank = dist::get_rank();
  LinearNet net = make_linear(), ref = make_linear();
  ts::nn::DistributedDataParallel ddp(net);  // defaults: every parameter in the first (1 MiB) bucket
  ASSERT_EQ(ddp.num_buckets(), 1u);
  EXPECT_EQ(ddp.bucket_parameter_names(0),
            (std::vector<std::string>{"fc2.bias", "fc2.weight", "fc1.bias", "fc1.weight"}));
  Batch b = integer_batch(0, world);
  for (bool set_to_none : {true, false}) {  // a fresh .grad is adopted; a zeroed one is replaced, adopted again
    ddp.zero_grad(set_to_none);
    ref.zero_grad(set_to_none);
    F::mse_loss(ddp(b.part(b.x, rank)), b.part(b.y, rank)).backward();
    F::mse_loss(ref(b.x), b.y).backward();
    auto p = net.parameters();
    for (size_t i = 1; i < p.size(); ++i) EXPECT_TRUE(p[i].grad().is_alias_of(p[0].grad())) << i;
    for (size_t i = 0; i < p.size(); ++i) EXPECT_TRUE(ts::equal(p[i].grad(), ref.parameters()[i].grad())) << i;
  }
  // Zeroed in place, .grad stays the bucket: the next backward accumulates into it directly.
  auto p = net.parameters(), q = ref.parameters();
  const void* bucket = p[0].grad().data_ptr();
  for (size_t i = 0; i < p.size(); ++i) {
    p[i].grad().zero_();
    q[i].grad().zero_();
  }
  F::mse_loss(ddp(b.part(b.x, rank)), b.part(b.y, rank)).backward();
  F::mse_loss(ref(b.x), b.y).backward();
  EXPECT_EQ(p[0].grad().data_ptr(), bucket);
  for (size_t i = 0; i < p.size(); ++i) EXPECT_TRUE(ts::equal(p[i].grad(), q[i].grad())) << i;
}

TEST(DDP, WithoutBucketViewGradientsAreCopiedBack) {
  const int world = dist::get_world_size(), rank = dist::get_rank();
  LinearNet net = make_linear(), ref = make_linear();
  ts::nn::DistributedDataParallel ddp(net, {.gradient_as_bucket_view = false});
  Batch b = integer_batch(1, world);
  F::mse_loss(ddp(b.part(b.x, rank)), b.part(b.y, rank)).backward();
  F::mse_loss(ref(b.x), b.y).backward();
  auto p = net.parameters();
  EXPECT_FALSE(p[1].grad().is_alias_of(p[0].grad()));
  for (size_t i = 0; i < p.size(); ++i) EXPECT_TRUE(ts::equal(p[i].grad(), ref.parameters()[i].grad())) << i;
}

TEST(DDP, NoSyncAccumulationBitwiseFloat64) {
  const int world = dist::get_world_size(), rank = dist::get_rank();
  LinearNet net = make_linear(), ref = make_linear();
  ts::nn::DistributedDataParallel ddp(net, {.bucket_cap_mb = 1e-4, .first_bucket_cap_mb = 1e-4});
  ts::optim::SGD opt(ddp.parameters(), {.lr = 1.0 / 16, .momentum = 0.5});
  ts::optim::SGD ref_opt(ref.parameters(), {.lr = 1.0 / 16, .momentum = 0.5});
  for (int step = 0; step < 3; ++step) {
    Batch b1 = integer_batch(10 + 2 * step, world), b2 = integer_batch(11 + 2 * step, world);
    opt.zero_grad();
    {
      auto guard = ddp.no_sync();
      F::mse_loss(ddp(b1.part(b1.x, rank)), b1.part(b1.y, rank)).backward();
    }
    if (world > 1 && step == 0) {
      // Not reduced yet: the local gradient differs from the other rank's.
      ts::Tensor g = net.fc1.weight.grad().clone();
      ts::Tensor other = g.clone();
      dist::broadcast(other, 0);
      if (rank == 1) {
        EXPECT_FALSE(ts::equal(g, other));
      }
    }
    F::mse_loss(ddp(b2.part(b2.x, rank)), b2.part(b2.y, rank)).backward();
    opt.step();
    ref_opt.zero_grad();
    F::mse_loss(ref(b1.x), b1.y).backward();
    F::mse_loss(ref(b2.x), b2.y).backward();
    ref_opt.step();
    expect_params_equal(net, ref, /*bitwise=*/true);
  }
}

struct Mlp : ts::nn::Module {
  ts::nn::Linear fc1{8, 32}, fc2{32, 4};
  Mlp() { register_modules({{"fc1", fc1}, {"fc2", fc2}}); }
  ts::Tensor forward(ts::Tensor x) override { return fc2(fc1(x).relu()); }
};

TEST(DDP, EqualsSingleProcessFloat32WithAdamWithinTolerance) {
  const int world = dist::get_world_size(), rank = dist::get_rank();
  ts::manual_seed(7);
  Mlp net;
  ts::manual_seed(7);
  Mlp ref;
  net.to(g_dev);
  ref.to(g_dev);
  ts::nn::DistributedDataParallel ddp(net, {.bucket_cap_mb = 1e-4, .first_bucket_cap_mb = 1e-4});
  EXPECT_EQ(ddp.num_buckets(), 3u);
  ts::optim::Adam opt(ddp.parameters(), {.lr = 1e-2});
  ts::optim::Adam ref_opt(ref.parameters(), {.lr = 1e-2});
  for (int step = 0; step < 5; ++step) {
    ts::Generator gen(200 + step);
    ts::Tensor x = ts::randn({kPerRank * world, 8}, {}, &gen).to(g_dev);
    ts::Tensor y = ts::randn({kPerRank * world, 4}, {}, &gen).to(g_dev);
    opt.zero_grad();
    F::mse_loss(ddp(x.narrow(0, rank * kPerRank, kPerRank)), y.narrow(0, rank * kPerRank, kPerRank)).backward();
    opt.step();
    ref_opt.zero_grad();
    F::mse_loss(ref(x), y).backward();
    ref_opt.step();
  }
  expect_params_equal(net, ref, /*bitwise=*/false, /*tol=*/1e-5);
}

struct WithUnused : ts::nn::Module {
  ts::nn::Linear fc1{6, 4}, fc_unused{6, 4}, fc2{6, 4};
  WithUnused() { register_modules({{"fc1", fc1}, {"fc_unused", fc_unused}, {"fc2", fc2}}); }
  ts::Tensor forward(ts::Tensor x) override { return fc1(x) + fc2(x); }
};

TEST(DDP, UnusedParametersRaiseNamingThem) {
  const int world = dist::get_world_size(), rank = dist::get_rank();
  WithUnused net;
  net.to(ts::kFloat64);
  net.to(g_dev);
  ts::nn::DistributedDataParallel ddp(net);
  Batch b = integer_batch(0, world);
  try {
    F::mse_loss(ddp(b.part(b.x, rank)), b.part(b.y, rank)).backward();
    FAIL() << "expected DistributedError";
  } catch (const dist::DistributedError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("Expected to have finished reduction in the prior iteration"), std::string::npos) << msg;
    EXPECT_NE(msg.find("find_unused_parameters"), std::string::npos) << msg;
    EXPECT_NE(msg.find("fc_unused.bias, fc_unused.weight"), std::string::npos) << msg;
    EXPECT_EQ(msg.find("fc1.weight"), std::string::npos) << msg;
  }
  // The ranks are still in step: the next iteration's collectives match.
  ts::Tensor t = ts::ones({3}).to(g_dev);
  dist::all_reduce(t);
  EXPECT_TRUE(ts::equal(t.cpu(), ts::full({3}, static_cast<double>(world))));
}

TEST(DDP, FindUnusedParametersTrainsAndLeavesTheirGradUndefined) {
  const int world = dist::get_world_size(), rank = dist::get_rank();
  WithUnused net, ref;
  net.to(ts::kFloat64);
  ref.to(ts::kFloat64);
  net.to(g_dev);
  ref.to(g_dev);
  dyadic_init(net, 3);
  dyadic_init(ref, 3);
  ts::nn::DistributedDataParallel ddp(net, {.find_unused_parameters = true});
  ts::optim::SGD opt(ddp.parameters(), {.lr = 1.0 / 16});
  ts::optim::SGD ref_opt(ref.parameters(), {.lr = 1.0 / 16});
  for (int step = 0; step < 3; ++step) {
    Batch b = integer_batch(20 + step, world);
    opt.zero_grad();
    F::mse_loss(ddp(b.part(b.x, rank)), b.part(b.y, rank)).backward();
    EXPECT_FALSE(net.fc_unused.weight.grad().defined());
    EXPECT_FALSE(net.fc_unused.bias.grad().defined());
    opt.step();
    ref_opt.zero_grad();
    F::mse_loss(ref(b.x), b.y).backward();
    ref_opt.step();
    expect_params_equal(net, ref, /*bitwise=*/true);
  }
}

// Rank 1 uses fc_unused, rank 0 does not: rank 0 gets the average (half of rank 1's gradient).
struct UsedOnRankOne : WithUnused {
  ts::Tensor forward(ts::Tensor x) override {
    ts::Tensor y = fc1(x) + fc2(x);
    return dist::get_rank() == 1 ? y + fc_unused(x) : y;
  }
};

TEST(DDP, FindUnusedParametersAveragesAParameterUsedOnAnotherRank) {
  const int world = dist::get_world_size(), rank = dist::get_rank();
  if (world != 2) GTEST_SKIP() << "written for 2 ranks";
  UsedOnRankOne net;
  net.to(ts::kFloat64);
  net.to(g_dev);
  dyadic_init(net, 4);
  ts::nn::DistributedDataParallel ddp(net, {.find_unused_parameters = true});
  Batch b = integer_batch(30, world);
  F::mse_loss(ddp(b.part(b.x, rank)), b.part(b.y, rank)).backward();
  ASSERT_TRUE(net.fc_unused.weight.grad().defined()) << "rank " << rank;
  ts::Tensor g = net.fc_unused.weight.grad().clone(), g1 = g.clone();
  dist::broadcast(g1, 1);
  EXPECT_TRUE(ts::equal(g, g1));  // the same average on both ranks
}

TEST(DDP, BroadcastsParametersAndBuffersFromRankZero) {
  const int rank = dist::get_rank();
  LinearNet net = make_linear(/*seed=*/50 + rank);  // different on every rank
  LinearNet rank0 = make_linear(/*seed=*/50);
  {
    ts::NoGradGuard g;
    net.scale.fill_(rank == 0 ? 2.0 : 3.0);
  }
  ts::nn::DistributedDataParallel ddp(net);
  expect_params_equal(net, rank0, /*bitwise=*/true);
  EXPECT_TRUE(ts::equal(net.scale.cpu(), ts::full({4}, 2.0, ts::kFloat64)));
  // Each forward broadcasts the buffers again.
  {
    ts::NoGradGuard g;
    if (rank == 1) net.scale.fill_(5.0);
  }
  ddp(ts::zeros({2, 6}, ts::kFloat64).to(g_dev));
  EXPECT_TRUE(ts::equal(net.scale.cpu(), ts::full({4}, 2.0, ts::kFloat64)));
  // The state_dict names are PyTorch's.
  EXPECT_TRUE(ddp.state_dict().count("module.fc1.weight"));
  EXPECT_TRUE(ddp.state_dict().count("module.scale"));
}

TEST(DDP, BroadcastBuffersOffLeavesThemPerRank) {
  const int rank = dist::get_rank();
  LinearNet net = make_linear();
  ts::nn::DistributedDataParallel ddp(net, {.broadcast_buffers = false});
  {
    ts::NoGradGuard g;
    net.scale.fill_(1.0 + rank);
  }
  ddp(ts::zeros({2, 6}, ts::kFloat64).to(g_dev));
  EXPECT_TRUE(ts::equal(net.scale.cpu(), ts::full({4}, 1.0 + rank, ts::kFloat64)));
}

struct TwoBig : ts::nn::Module {
  ts::nn::Linear fc1{512, 512}, fc2{512, 512};  // each weight exactly 1 MiB in float32
  TwoBig() { register_modules({{"fc1", fc1}, {"fc2", fc2}}); }
  ts::Tensor forward(ts::Tensor x) override { return fc2(fc1(x)); }
};

TEST(DDP, BucketsFollowTheCapsInReverseOrder) {
  TwoBig net;
  net.to(g_dev);
  ts::nn::DistributedDataParallel ddp(net);
  // The first bucket closes at 1 MiB (fc2.bias then fc2.weight reach it), the second holds the rest.
  ASSERT_EQ(ddp.num_buckets(), 2u);
  EXPECT_EQ(ddp.bucket_parameter_names(0), (std::vector<std::string>{"fc2.bias", "fc2.weight"}));
  EXPECT_EQ(ddp.bucket_parameter_names(1), (std::vector<std::string>{"fc1.bias", "fc1.weight"}));
  EXPECT_EQ(ddp.bucket_bytes(0), (512u + 512u * 512u) * 4u);
  // A 1 KiB cap for the later buckets: each of fc1's parameters fills one.
  ts::nn::DistributedDataParallel many(net, {.bucket_cap_mb = 1.0 / 1024});
  ASSERT_EQ(many.num_buckets(), 3u);
  EXPECT_EQ(many.bucket_parameter_names(0), (std::vector<std::string>{"fc2.bias", "fc2.weight"}));
  EXPECT_EQ(many.bucket_parameter_names(1), (std::vector<std::string>{"fc1.bias"}));
  EXPECT_EQ(many.bucket_parameter_names(2), (std::vector<std::string>{"fc1.weight"}));
  EXPECT_THROW(ts::nn::DistributedDataParallel(net, {.bucket_cap_mb = 0}), ts::ValueError);
}

// With a GradScaler the inf check agrees across ranks: the averaged gradients are the same everywhere,
// so an overflow on one rank skips the step (and backs the scale off) on all of them.
TEST(DDP, GradScalerSkipsTheStepOnEveryRankWhenOneRankOverflows) {
  const int world = dist::get_world_size(), rank = dist::get_rank();
  LinearNet net = make_linear();
  ts::nn::DistributedDataParallel ddp(net);
  ts::optim::SGD opt(ddp.parameters(), {.lr = 1.0 / 16});
  ts::amp::GradScaler scaler({.init_scale = 1024.0});
  const ts::Tensor before = net.fc1.weight.clone();
  for (int step = 0; step < 2; ++step) {
    Batch b = integer_batch(40 + step, world);
    ts::Tensor x = b.part(b.x, rank).clone();
    if (step == 0 && rank == world - 1) x.fill_(std::numeric_limits<double>::infinity());  // one rank overflows
    opt.zero_grad();
    scaler.scale(F::mse_loss(ddp(x), b.part(b.y, rank))).backward();
    const bool stepped = scaler.step(opt);
    scaler.update();
    EXPECT_EQ(stepped, step == 1) << "rank " << rank << " step " << step;
    if (step == 0) {
      EXPECT_TRUE(ts::equal(net.fc1.weight, before));
      EXPECT_EQ(scaler.get_scale(), 512.0);
    }
  }
  ts::Tensor w = net.fc1.weight.clone(), w0 = w.clone();
  dist::broadcast(w0, 0);
  EXPECT_TRUE(ts::equal(w, w0)) << "the replicas drifted apart on rank " << rank;
}

TEST(DDP, ConvertingTheModuleAfterWrappingRaises) {
  const int world = dist::get_world_size(), rank = dist::get_rank();
  LinearNet net = make_linear();
  ts::nn::DistributedDataParallel ddp(net);
  net.to(ts::kFloat32);
  Batch b = integer_batch(0, world);  // float64 inputs into a float32 module
  EXPECT_THROW(F::mse_loss(ddp(b.part(b.x, rank).to(ts::kFloat32)), b.part(b.y, rank).to(ts::kFloat32)).backward(),
               dist::DistributedError);
}

TEST(DDP, QueueCallbackOutsideBackwardRaises) {
  EXPECT_THROW(ts::autograd::queue_callback([] {}), ts::ValueError);
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const char* b = std::getenv("TESSERA_TEST_BACKEND");
  const std::string backend = b && *b ? b : "mpi";
  dist::init_process_group(backend, {.timeout = std::chrono::seconds(60)});
  g_dev = dist::default_group().device();
  std::printf("backend %s, rank %d of %d, device %s\n", backend.c_str(), dist::get_rank(), dist::get_world_size(),
              g_dev.str().c_str());
  const int rc = RUN_ALL_TESTS();
  dist::destroy_process_group();
  return rc;
}
