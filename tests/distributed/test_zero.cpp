// ZeroRedundancyOptimizer (ZeRO-1) under mpirun: on 2 ranks it equals the plain optimizer stepping
// the all-reduced (averaged) gradients, bit for bit, for Adam, AdamW and SGD with momentum, while each
// rank holds half of the state; with DDP it trains as single-process training on the combined batch.
//
// Checkpoints across world sizes (two ctest entries, tests/distributed/CMakeLists.txt):
// ZeroCheckpoint.SaveOnTwoRanks trains DDP + ZeRO on 2 ranks, saves at step 3, goes on to step 5 and
// writes the final parameters; ZeroCheckpoint.ResumeOnOneRank (mpirun -np 1) loads the step-3
// checkpoint, trains steps 4 and 5 on the combined batch and must reach the same parameters.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "tessera/distributed.h"
#include "tessera/distributed/checkpoint.h"
#include "tessera/distributed/ddp.h"
#include "tessera/distributed/zero.h"
#include "tessera/safetensors.h"
#include "tessera/tessera.h"

namespace ts = tessera;
namespace dist = tessera::distributed;
namespace F = tessera::nn::functional;

namespace {

constexpr int64_t kPerRank = 4;
const char* kCheckpointDir = "zero_checkpoint";  // in the test's working directory (the build tree)

struct Mlp : ts::nn::Module {
  ts::nn::Linear fc1{7, 13}, fc2{13, 3};  // 104 + 42 = 146 elements: an odd split across ranks
  Mlp() { register_modules({{"fc1", fc1}, {"fc2", fc2}}); }
  ts::Tensor forward(ts::Tensor x) override { return fc2(fc1(x).tanh()); }
};

Mlp make_mlp(ts::DType dt = ts::kFloat32) {
  ts::manual_seed(11);
  Mlp m;
  m.to(dt);
  return m;
}

std::pair<ts::Tensor, ts::Tensor> batch(int step, int world, ts::DType dt = ts::kFloat32) {
  ts::Generator gen(300 + step);
  return {ts::randn({kPerRank * world, 7}, dt, &gen), ts::randn({kPerRank * world, 3}, dt, &gen)};
}

template <class Opt, class Options>
void expect_zero_equals_plain(Options options) {
  const int world = dist::get_world_size(), rank = dist::get_rank();
  Mlp a = make_mlp(), b = make_mlp();
  Opt plain(a.parameters(), options);
  ts::optim::ZeroRedundancyOptimizer<Opt> zero(b.parameters(), options);
  EXPECT_EQ(zero.numel(), 146);
  EXPECT_EQ(zero.shard_numel(), (146 + world - 1) / world);
  for (int step = 0; step < 4; ++step) {
    auto [x, y] = batch(step, world);
    x = x.narrow(0, rank * kPerRank, kPerRank);
    y = y.narrow(0, rank * kPerRank, kPerRank);
    plain.zero_grad();
    F::mse_loss(a(x), y).backward();
    for (auto& p : a.parameters()) dist::all_reduce(p.grad(), dist::ReduceOp::Avg);
    plain.step();
    zero.zero_grad();
    F::mse_loss(b(x), y).backward();
    zero.step();
    auto pa = a.named_parameters(), pb = b.named_parameters();
    for (size_t i = 0; i < pa.size(); ++i)
      ASSERT_TRUE(ts::equal(pa[i].second, pb[i].second))
          << plain.name() << " step " << step << ": " << pa[i].first << " differs on rank " << rank;
  }
  // The state of the shard only.
  const ts::optim::ParamState* st = zero.local_optimizer().state(zero.local_optimizer().parameters()[0]);
  ASSERT_NE(st, nullptr);
  for (const auto& [name, t] : st->buffers) EXPECT_EQ(t.numel(), zero.shard_numel()) << name;
}

TEST(Zero, AdamEqualsPlainBitwise) { expect_zero_equals_plain<ts::optim::Adam>(ts::optim::AdamOptions{.lr = 1e-2}); }
TEST(Zero, AdamWEqualsPlainBitwise) {
  expect_zero_equals_plain<ts::optim::AdamW>(ts::optim::AdamWOptions{.lr = 1e-2, .weight_decay = 0.1});
}
TEST(Zero, SGDMomentumEqualsPlainBitwise) {
  expect_zero_equals_plain<ts::optim::SGD>(ts::optim::SGDOptions{.lr = 0.1, .momentum = 0.9, .nesterov = true});
}

TEST(Zero, RejectsMixedDtypes) {
  ts::Tensor a = ts::zeros({3}).requires_grad_(), b = ts::zeros({3}, ts::kFloat64).requires_grad_();
  using Zero = ts::optim::ZeroRedundancyOptimizer<ts::optim::SGD>;
  EXPECT_THROW((Zero(std::vector<ts::Tensor>{a, b})), ts::DTypeError);
  EXPECT_THROW((Zero(std::vector<ts::Tensor>{})), ts::ValueError);
}

// One step of DDP + ZeRO on this rank's part of the combined batch, or (world 1) on all of it.
void train_step(ts::nn::Module& model, ts::optim::ZeroRedundancyOptimizerBase& opt, int step) {
  const int world = dist::get_world_size(), rank = dist::get_rank();
  auto [x, y] = batch(step, 2, ts::kFloat64);  // the batch of a 2-rank run
  const int64_t rows = 2 * kPerRank / world;
  opt.zero_grad();
  F::mse_loss(model(x.narrow(0, rank * rows, rows)), y.narrow(0, rank * rows, rows)).backward();
  opt.step();
}

TEST(ZeroCheckpoint, SaveOnTwoRanks) {
  ASSERT_EQ(dist::get_world_size(), 2);
  Mlp net = make_mlp(ts::kFloat64);
  ts::nn::DistributedDataParallel ddp(net);
  ts::optim::ZeroRedundancyOptimizer<ts::optim::AdamW> opt(ddp.parameters(), {.lr = 1e-2},
                                                          {.reduce_gradients = false});  // DDP averages
  for (int step = 0; step < 3; ++step) train_step(ddp, opt, step);
  if (dist::get_rank() == 0) std::filesystem::remove_all(kCheckpointDir);  // a previous run's
  dist::barrier();
  dist::save_checkpoint(kCheckpointDir, ddp, opt, nullptr, /*step=*/3);
  ASSERT_TRUE(std::filesystem::exists(std::string(kCheckpointDir) + "/zero_optimizer.rank1.safetensors"));
  for (int step = 3; step < 5; ++step) train_step(ddp, opt, step);
  if (dist::get_rank() == 0) {
    ts::save_safetensors(net.state_dict(), std::string(kCheckpointDir) + "/expected_after_step5.safetensors");
    // The model is saved unwrapped: a single process loads it under the plain names.
    auto saved = ts::load_safetensors(std::string(kCheckpointDir) + "/model.safetensors");
    EXPECT_TRUE(saved.count("fc1.weight"));
  }
  dist::barrier();
}

TEST(ZeroCheckpoint, ResumeOnOneRank) {
  ASSERT_EQ(dist::get_world_size(), 1);
  const std::string expected_path = std::string(kCheckpointDir) + "/expected_after_step5.safetensors";
  ASSERT_TRUE(std::filesystem::exists(expected_path)) << "run ZeroCheckpoint.SaveOnTwoRanks on 2 ranks first";
  ts::manual_seed(999);  // a different initialization: everything must come from the checkpoint
  Mlp net;
  net.to(ts::kFloat64);
  ts::optim::ZeroRedundancyOptimizer<ts::optim::AdamW> opt(net.parameters(), {.lr = 1e-2});
  EXPECT_EQ(dist::load_checkpoint(kCheckpointDir, net, opt), 3);
  EXPECT_EQ(opt.shard_numel(), 146);
  for (int step = 3; step < 5; ++step) train_step(net, opt, step);
  auto expected = ts::load_safetensors(expected_path);
  for (const auto& [name, p] : net.named_parameters()) {
    ASSERT_TRUE(expected.count(name)) << name;
    // The 2-rank run averaged two half-batch gradients, this one takes the combined batch's: equal up
    // to float64 rounding. Without the optimizer state (Adam's moments, its step) they would differ
    // by about lr.
    const double diff = ts::max((p - expected[name]).abs()).item<double>();
    EXPECT_LE(diff, 1e-12) << name;
  }
  // A state of other parameters is refused.
  ts::Tensor other = ts::zeros({5}, ts::kFloat64).requires_grad_();
  ts::optim::ZeroRedundancyOptimizer<ts::optim::AdamW> wrong({other});
  EXPECT_THROW(wrong.load_shards(kCheckpointDir), ts::ValueError);
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  dist::init_process_group("mpi", {.timeout = std::chrono::seconds(60)});
  const int rc = RUN_ALL_TESTS();
  dist::destroy_process_group();
  return rc;
}
