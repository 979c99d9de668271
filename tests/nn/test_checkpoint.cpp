// Activation checkpointing (ts::utils::checkpoint, checkpoint_sequential): the same gradients as
// without it, no graph kept from the forward, random ops replayed, autocast re-entered, and
// PyTorch's refusals (autograd::grad, second order, an input modified before the backward).
#include "common/test_util.h"
#include "tessera/nn.h"
#include "tessera/amp.h"
#include "tessera/utils/checkpoint.h"

namespace ts = tessera;
namespace nn = tessera::nn;
using namespace tessera::testing;

namespace {
using V = std::vector<ts::Tensor>;

struct Block {
  nn::Linear fc1{4, 6}, fc2{6, 4};
  Block() {
    fc1.to(ts::kFloat64);
    fc2.to(ts::kFloat64);
  }
  ts::Tensor operator()(const ts::Tensor& x) { return fc2(fc1(x).tanh()) + x; }
  V grads() { return {fc1.weight.grad(), fc1.bias.grad(), fc2.weight.grad(), fc2.bias.grad()}; }
  void zero_grad() {
    fc1.zero_grad();
    fc2.zero_grad();
  }
};

void expect_same(const V& a, const V& b, double tol = 1e-12) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_TRUE(a[i].defined() && b[i].defined()) << "gradient " << i;
    EXPECT_TRUE(ts::allclose(a[i], b[i], tol, tol)) << "gradient " << i << "\n" << a[i] << "\n" << b[i];
  }
}
}  // namespace

TEST(Checkpoint, SameGradientsAndNoActivationsKept) {
  Block block;
  ts::Tensor x = test_data({3, 4}, ts::kFloat64, 1, -1, 1).requires_grad_();
  (block(x) * block(x)).sum().backward();
  const V plain = block.grads();
  const ts::Tensor plain_x = x.grad();
  block.zero_grad();
  x.zero_grad();

  int calls = 0;
  auto fn = [&](const ts::Tensor& in) {
    ++calls;
    return block(in);
  };
  ts::Tensor y = ts::utils::checkpoint(fn, x);
  EXPECT_EQ(calls, 1);
  ASSERT_NE(y.grad_fn(), nullptr);
  EXPECT_EQ(y.grad_fn()->name(), "CheckpointFunctionBackward");
  // The node leads straight to x: nothing of the block's forward was recorded.
  ASSERT_EQ(y.grad_fn()->next_functions().size(), 1u);
  EXPECT_EQ(y.grad_fn()->next_functions()[0]->name(), "AccumulateGrad");
  (y * y).sum().backward();
  EXPECT_EQ(calls, 2);  // recomputed once in the backward
  expect_same(block.grads(), plain);
  expect_same({x.grad()}, {plain_x});
}

TEST(Checkpoint, RandomOpsReplayTheSameValues) {
  auto fn = [](const ts::Tensor& in) { return nn::functional::dropout(in.sin(), 0.5, true) * in; };
  ts::Tensor x = test_data({64}, ts::kFloat64, 2).requires_grad_();
  ts::manual_seed(7);
  ts::Tensor y_plain = fn(x);
  y_plain.sum().backward();
  const ts::Tensor g_plain = x.grad();
  x.zero_grad();

  ts::manual_seed(7);
  ts::Tensor y = ts::utils::checkpoint(fn, x);
  EXPECT_TRUE(ts::equal(y, y_plain));
  const uint64_t offset_before = ts::default_generator(ts::kCPU).offset();
  y.sum().backward();
  EXPECT_TRUE(ts::equal(x.grad(), g_plain));  // the recomputation dropped the same elements
  EXPECT_EQ(ts::default_generator(ts::kCPU).offset(), offset_before);  // the caller's stream is left alone
}

TEST(Checkpoint, ComposesWithAutocast) {
  nn::Linear lin(8, 8);
  ts::Tensor x = test_data({4, 8}, ts::kFloat32, 3, -1, 1).requires_grad_();
  std::vector<ts::DType> seen;
  auto fn = [&](const ts::Tensor& in) {
    ts::Tensor h = lin(in);
    seen.push_back(h.dtype());
    return h.to(ts::kFloat32).relu();
  };
  ts::Tensor y_plain;
  {
    ts::amp::autocast guard(ts::kCPU, ts::kBFloat16);
    y_plain = fn(x);
  }
  y_plain.sum().backward();
  const ts::Tensor gw = lin.weight.grad(), gx = x.grad();
  lin.zero_grad();
  x.zero_grad();
  ts::Tensor y;
  {
    ts::amp::autocast guard(ts::kCPU, ts::kBFloat16);
    y = ts::utils::checkpoint(fn, x);
  }
  y.sum().backward();  // outside the autocast scope: the recomputation re-enters it
  EXPECT_EQ(seen, (std::vector<ts::DType>{ts::kBFloat16, ts::kBFloat16, ts::kBFloat16}));
  EXPECT_TRUE(ts::equal(lin.weight.grad(), gw));
  EXPECT_TRUE(ts::equal(x.grad(), gx));
}

TEST(Checkpoint, SequentialSegmentsAndInputsWithoutGrad) {
  auto make = [] {
    ts::manual_seed(11);
    nn::Sequential s(nn::Linear(4, 5), nn::Tanh(), nn::Linear(5, 5), nn::Tanh(), nn::Linear(5, 3));
    s.to(ts::kFloat64);
    return s;
  };
  nn::Sequential a = make(), b = make();
  ts::Tensor x = test_data({2, 4}, ts::kFloat64, 4);  // data: requires no grad
  (a(x) * a(x)).sum().backward();
  ts::Tensor yb = ts::utils::checkpoint_sequential(b, 2, x);
  EXPECT_TRUE(ts::allclose(yb, a(x), 1e-12, 1e-12));
  (yb * yb).sum().backward();
  V ga, gb;
  for (const ts::Tensor& p : a.parameters()) ga.push_back(p.grad());
  for (const ts::Tensor& p : b.parameters()) gb.push_back(p.grad());
  expect_same(gb, ga);  // the first segment's parameters too, though its input needs no grad
}

TEST(Checkpoint, RefusalsAsPyTorch) {
  Block block;
  ts::Tensor x = test_data({3, 4}, ts::kFloat64, 5).requires_grad_();
  auto fn = [&](const ts::Tensor& in) { return block(in); };
  ts::Tensor y = ts::utils::checkpoint(fn, x);
  EXPECT_NE(message_of<ts::ValueError>([&] { ts::autograd::grad({y.sum()}, {x}); })
                .find("Checkpointing is not compatible with .grad()"),
            std::string::npos);

  ts::Tensor y2 = ts::utils::checkpoint(fn, x);
  ts::autograd::backward({(y2 * y2).sum()}, {}, std::nullopt, /*create_graph=*/true);
  ASSERT_TRUE(x.grad().requires_grad());
  EXPECT_NE(message_of<ts::ValueError>([&] { x.grad().sum().backward(); })
                .find("trying to differentiate twice a function that was marked with @once_differentiable"),
            std::string::npos);

  ts::Tensor h = x * 1;
  ts::Tensor y3 = ts::utils::checkpoint(fn, h);
  h.mul_(2);  // the saved input changed: the recomputation would be wrong
  EXPECT_NE(message_of<ts::ValueError>([&] { y3.sum().backward(); })
                .find("modified by an inplace operation"),
            std::string::npos);
  // create_graph made x.grad depend on x: the cycle PyTorch's documentation of backward(create_graph=True)
  // warns of, which its users break by resetting the gradient. So do we (LeakSanitizer checks).
  x.set_grad(ts::Tensor());
}

namespace {
// The checkpointed function is an inline lambda whose captures (a scale held by value, the block by
// reference) live only during this call; backward runs it after it returns.
ts::Tensor checkpointed_in_a_scope(Block& block, const ts::Tensor& x) {
  const double scale = 0.5;
  std::vector<double> pad(64, 3.0);  // more state in the lambda than a pointer
  return ts::utils::checkpoint([&block, scale, pad](const ts::Tensor& in) { return block(in) * (scale + pad[0] - 3.0); }, x);
}
// Writes over the stack that the call above used.
__attribute__((noinline)) double scribble() {
  volatile double junk[512];
  for (int i = 0; i < 512; ++i) junk[i] = -1e300;
  return junk[17];
}
}  // namespace

TEST(Checkpoint, ATemporaryFunctionIsCopiedIntoTheRecomputation) {
  Block block;
  ts::Tensor x = test_data({3, 4}, ts::kFloat64, 41).reshape({3, 4}).requires_grad_();
  ts::Tensor y = checkpointed_in_a_scope(block, x);
  scribble();
  y.sum().backward();
  V got = block.grads();
  ts::Tensor gx = x.grad().clone();
  block.zero_grad();
  x.zero_grad();
  (block(x) * 0.5).sum().backward();
  expect_same(got, block.grads());
  expect_same({gx}, {x.grad()});
}
