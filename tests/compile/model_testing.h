// Helpers of the compiled-equals-eager model tests (test_compile_models.cpp, and the min-cut
// partition's in test_partition_models.cpp): two copies of a model with the same weights, one
// compiled and one eager, compared bitwise over calls and over training steps.
#pragma once
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "compile/bitwise.h"
#include "tessera/compile.h"
#include "tessera/models.h"
#include "tessera/optim.h"

namespace tessera::testing {

inline models::GPT2Config small_gpt() {
  models::GPT2Config cfg;
  cfg.n_layer = 2, cfg.n_head = 2, cfg.n_embd = 32, cfg.n_positions = 16, cfg.vocab_size = 64;
  return cfg;
}

// Two copies of a model with the same weights: one runs compiled, one eagerly; three calls whose
// outputs, gradients (of the sum of squares) and buffers must be bitwise equal.
// joint: whether the backward must be a captured graph (Note [Joint graph]); otherwise autograd
// differentiates the replayed forward. Returns the compiled function's statistics.
// The gradients of two copies of a module, parameter by parameter, bitwise (where the second has one).
template <class M>
void expect_gradients_bitwise(M& a, M& b, const std::string& where) {
  auto pa = a.named_parameters(), pb = b.named_parameters();
  for (size_t i = 0; i < pa.size(); ++i) {
    if (!pb[i].second.grad().defined()) continue;
    EXPECT_TRUE(bitwise(pa[i].second.grad(), pb[i].second.grad())) << where << " " << pa[i].first;
  }
}

template <class M, class Make>
CompileStats expect_forward_and_gradients_equal(const char* name, Make make, const std::function<Tensor()>& input,
                                                bool training, bool joint = true, const CompileOptions& options = {}) {
  manual_seed(7);
  M a = make();
  manual_seed(7);
  M b = make();
  a.train(training);
  b.train(training);
  auto f = compile(a, options);
  for (int call = 0; call < 3; ++call) {
    Tensor x = input();
    manual_seed(50 + call);  // dropout draws the same masks on both sides
    Tensor ya = f(x);
    manual_seed(50 + call);
    Tensor yb = b.forward(x);
    EXPECT_TRUE(bitwise(ya, yb)) << name << " call " << call;
    ya.to(kFloat32).pow(2).sum().backward();
    yb.to(kFloat32).pow(2).sum().backward();
    expect_gradients_bitwise(a, b, std::string(name) + " call " + std::to_string(call));
    a.zero_grad();
    b.zero_grad();
    auto ba = a.named_buffers(), bb = b.named_buffers();  // batch norm's running statistics
    for (size_t i = 0; i < ba.size(); ++i) EXPECT_TRUE(bitwise(ba[i].second, bb[i].second)) << name << " " << ba[i].first;
  }
  const CompileStats s = f.stats();
  EXPECT_EQ(s.captures, 1) << name;
  EXPECT_EQ(s.graph_calls, 2) << name << ": " << (s.eager_calls ? "ran eagerly" : "");
  EXPECT_EQ(s.joint_variants, joint ? 1 : 0) << name << ": "
                                             << (s.no_backward_reasons.empty() ? "" : s.no_backward_reasons[0]);
  EXPECT_EQ(s.fake_backward_traces, s.joint_variants) << name << ": the backward was traced again for real";
  return s;
}

// GPT2::loss compiled against eager on two copies of one model: `calls` calls of (batch, seq) tokens,
// the loss and every parameter gradient bitwise equal, with a captured backward graph.
inline CompileStats expect_gpt2_loss_equal(const models::GPT2Config& cfg, int64_t batch, int64_t seq,
                                           int64_t chunk_rows, int calls, const CompileOptions& options = {}) {
  manual_seed(9);
  models::GPT2 a(cfg);
  manual_seed(9);
  models::GPT2 b(cfg);
  auto loss = compile([&](const Tensor& idx, const Tensor& tgt) { return a.loss(idx, tgt, chunk_rows); }, options);
  for (int call = 0; call < calls; ++call) {
    Tensor idx = randint(0, cfg.vocab_size, {batch, seq}, kInt64);
    Tensor tgt = randint(0, cfg.vocab_size, {batch, seq}, kInt64);
    manual_seed(40 + call);  // dropout draws the same masks on both sides
    Tensor la = loss(idx, tgt);
    manual_seed(40 + call);
    Tensor lb = b.loss(idx, tgt, chunk_rows);
    EXPECT_TRUE(bitwise(la, lb)) << "call " << call;
    la.backward();
    lb.backward();
    auto pa = a.named_parameters(), pb = b.named_parameters();
    for (size_t i = 0; i < pa.size(); ++i)
      EXPECT_TRUE(bitwise(pa[i].second.grad(), pb[i].second.grad())) << "call " << call << " " << pa[i].first;
    a.zero_grad();
    b.zero_grad();
  }
  const CompileStats s = loss.stats();
  EXPECT_EQ(s.graph_calls, calls - 1);
  EXPECT_EQ(s.joint_variants, 1) << (s.no_backward_reasons.empty() ? "" : s.no_backward_reasons[0]);
  return s;
}

// `steps` training steps (SGD with momentum) of two copies of a model, one with its loss compiled:
// every step's loss and every parameter's gradient bitwise equal, and the weights after the last.
// `loss_of(model, x, y)` is the loss; `batch()` draws a step's (input, target). Returns the compiled
// loss's statistics.
template <class M, class Make, class Loss, class Batch>
CompileStats expect_training_steps_equal(const char* name, Make make, Loss loss_of, Batch batch, int steps,
                                         const CompileOptions& options = {}) {
  manual_seed(3);
  M a = make();
  manual_seed(3);
  M b = make();
  a.train(true);
  b.train(true);
  optim::SGD oa(a.parameters(), optim::SGDOptions{.lr = 0.05, .momentum = 0.9});
  optim::SGD ob(b.parameters(), optim::SGDOptions{.lr = 0.05, .momentum = 0.9});
  auto compiled = compile([&](const Tensor& x, const Tensor& y) { return loss_of(a, x, y); }, options);
  for (int step = 0; step < steps; ++step) {
    auto [x, y] = batch();
    oa.zero_grad();
    ob.zero_grad();
    manual_seed(60 + step);  // dropout draws the same masks on both sides
    Tensor la = compiled(x, y);
    manual_seed(60 + step);
    Tensor lb = loss_of(b, x, y);
    EXPECT_TRUE(bitwise(la, lb)) << name << " step " << step;
    la.backward();
    lb.backward();
    expect_gradients_bitwise(a, b, std::string(name) + " step " + std::to_string(step));
    oa.step();
    ob.step();
  }
  auto pa = a.parameters(), pb = b.parameters();
  for (size_t i = 0; i < pa.size(); ++i) EXPECT_TRUE(bitwise(pa[i], pb[i])) << name << " parameter " << i;
  const CompileStats s = compiled.stats();
  EXPECT_EQ(s.graph_calls, steps - 1) << name;
  EXPECT_EQ(s.joint_variants, 1) << name << ": " << (s.no_backward_reasons.empty() ? "" : s.no_backward_reasons[0]);
  return s;
}

}  // namespace tessera::testing
