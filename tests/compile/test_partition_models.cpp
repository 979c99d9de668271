// The min-cut partition (Note [Min-cut partition] in src/compile/partition.h) on the models of the
// tree, on the CPU: training steps compiled with the partition follow eager bitwise (losses, every
// gradient, the weights after the last step: a recomputed node runs the same kernel on the same
// inputs, so the backward reads the bits eager saved), and the bytes GPT-2's compiled forward keeps
// for its backward with the partition and without it.
#include <gtest/gtest.h>

#include <iostream>
#include <utility>

#include "compile/bitwise.h"
#include "compile/model_testing.h"
#include "tessera/compile.h"
#include "tessera/models.h"
#include "tessera/nn/functional.h"

namespace ts = tessera;
namespace F = tessera::nn::functional;
using ts::testing::bitwise;
using ts::testing::expect_training_steps_equal;

namespace {

ts::CompileOptions partition(bool on) {
  ts::CompileOptions o;
  o.min_cut_partition = on;
  return o;
}

void print(const char* name, const ts::CompileStats& s) {
  std::cout << name << ": saved " << s.saved_values << " values, " << s.saved_bytes
            << " bytes beyond the inputs (eager autograd: " << s.eager_saved_bytes << "), " << s.recomputed_nodes
            << " forward nodes recomputed" << (s.partition_declined.empty() ? "" : "; declined: ")
            << s.partition_declined << std::endl;
}

TEST(PartitionModels, MLPTrainingStepsFollowEagerBitwise) {
  const ts::CompileStats s = expect_training_steps_equal<ts::models::MLP>(
      "mlp", [] { return ts::models::MLP(20, {32, 16}, 5); },
      [](ts::models::MLP& m, const ts::Tensor& x, const ts::Tensor& y) { return F::cross_entropy(m.forward(x), y); },
      [] { return std::pair{ts::randn({16, 20}), ts::randint(0, 5, {16}, ts::kInt64)}; }, 5, partition(true));
  print("mlp", s);
  EXPECT_LE(s.saved_bytes, s.eager_saved_bytes);
  EXPECT_EQ(s.partition_declined, "");
}

TEST(PartitionModels, CNNTrainingStepsFollowEagerBitwise) {
  const ts::CompileStats s = expect_training_steps_equal<ts::models::CNN>(
      "cnn", [] { return ts::models::CNN(1, 10, 28); },
      [](ts::models::CNN& m, const ts::Tensor& x, const ts::Tensor& y) { return F::cross_entropy(m.forward(x), y); },
      [] { return std::pair{ts::randn({4, 1, 28, 28}), ts::randint(0, 10, {4}, ts::kInt64)}; }, 4, partition(true));
  print("cnn", s);
  EXPECT_LE(s.saved_bytes, s.eager_saved_bytes);
  EXPECT_EQ(s.partition_declined, "");
}

TEST(PartitionModels, GPT2SmallConfigTrainingStepsFollowEagerBitwise) {
  // Dropout 0.1 (saved masks, never drawn again), layer norms and GELUs recomputed.
  const ts::models::GPT2Config cfg = ts::testing::small_gpt();
  const ts::CompileStats s = expect_training_steps_equal<ts::models::GPT2>(
      "gpt2", [&] { return ts::models::GPT2(cfg); },
      [](ts::models::GPT2& m, const ts::Tensor& idx, const ts::Tensor& tgt) { return m.loss(idx, tgt, 8); },
      [&] {
        return std::pair{ts::randint(0, cfg.vocab_size, {2, 12}, ts::kInt64),
                         ts::randint(0, cfg.vocab_size, {2, 12}, ts::kInt64)};
      },
      4, partition(true));
  print("gpt2 (2 layers, 32 wide)", s);
  EXPECT_GT(s.recomputed_nodes, 0);
  EXPECT_LT(s.saved_bytes, s.eager_saved_bytes);
}

// GPT-2 small (124M parameters, dropout 0.1) on (1, 8) tokens: one loss compiled with the partition
// and one without, on the same model; the same loss and gradients bitwise, and the bytes each forward
// keeps for its backward.
TEST(PartitionModels, GPT2_124MSavedBytesWithAndWithoutThePartition) {
  ts::manual_seed(9);
  ts::models::GPT2 model{ts::models::GPT2Config{}};
  auto loss_with = ts::compile([&](const ts::Tensor& i, const ts::Tensor& t) { return model.loss(i, t, 16384); },
                               partition(true));
  auto loss_without = ts::compile([&](const ts::Tensor& i, const ts::Tensor& t) { return model.loss(i, t, 16384); },
                                  partition(false));
  const ts::Tensor idx = ts::randint(0, 50257, {1, 8}, ts::kInt64), tgt = ts::randint(0, 50257, {1, 8}, ts::kInt64);
  std::vector<ts::Tensor> grads;
  ts::Tensor first_loss;
  for (int side = 0; side < 2; ++side) {
    ts::manual_seed(41);  // the same dropout masks
    ts::Tensor l = side == 0 ? loss_without(idx, tgt) : loss_with(idx, tgt);
    if (side == 0) {
      first_loss = l.detach();
    } else {
      EXPECT_TRUE(bitwise(l, first_loss));
    }
    l.backward();
    auto params = model.parameters();
    for (size_t i = 0; i < params.size(); ++i) {
      if (side == 0) {
        grads.push_back(params[i].grad().clone());
      } else {
        EXPECT_TRUE(bitwise(params[i].grad(), grads[i])) << "parameter " << i;
      }
    }
    model.zero_grad();
  }
  const ts::CompileStats with = loss_with.stats(), without = loss_without.stats();
  print("gpt2 124M with the partition", with);
  print("gpt2 124M without", without);
  ASSERT_EQ(with.joint_variants, 1);
  ASSERT_EQ(without.joint_variants, 1);
  EXPECT_EQ(without.saved_bytes, without.eager_saved_bytes);
  EXPECT_EQ(with.eager_saved_bytes, without.eager_saved_bytes);
  EXPECT_LE(with.saved_bytes, without.saved_bytes);
  EXPECT_GT(with.recomputed_nodes, 0);
}

}  // namespace
