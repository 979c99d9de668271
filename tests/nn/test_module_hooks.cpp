// Module hooks (forward pre-hooks, forward hooks, full backward (pre-)hooks, removable handles) and
// the tensor's post-accumulate-grad hook. Expected values come from PyTorch (Debian's python3-torch
// 1.13, CPU), run on the same module as the first test:
//   lin = torch.nn.Linear(3, 2).double(); lin.weight = arange(6.) / 10 as (2, 3); lin.bias = [0.1, -0.2]
//   x = [[1, 2, 3], [-1, 0.5, 2]] (float64, requires grad)
//   pre-hook: (inp[0] * 2,); forward hook: out + 1; loss (out ** 2).sum()
#include "common/test_util.h"
#include "tessera/nn.h"

namespace ts = tessera;
namespace nn = tessera::nn;

namespace {
using V = std::vector<ts::Tensor>;

void set_linear(nn::Linear& lin) {
  ts::NoGradGuard g;
  lin.to(ts::kFloat64);
  lin.weight.copy_(ts::arange(6, ts::kFloat64).reshape({2, 3}) / 10);
  lin.bias.copy_(ts::tensor({0.1, -0.2}, ts::kFloat64));
}

ts::Tensor input() {
  return ts::tensor({1, 2, 3, -1, 0.5, 2}, ts::kFloat64).reshape({2, 3}).clone().requires_grad_();
}

void expect_near(const ts::Tensor& t, const std::vector<double>& want) {
  std::vector<double> got = t.contiguous().tolist<double>();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-12) << "element " << i;
}
}  // namespace

TEST(ModuleHooks, ForwardAndFullBackwardHooksAgainstPyTorch) {
  nn::Linear lin(3, 2);
  set_linear(lin);
  std::vector<std::string> log;
  V grad_input, grad_output;
  lin.register_forward_pre_hook([&](nn::Module&, const ts::Tensor& in) -> std::optional<ts::Tensor> {
    log.push_back("pre");
    return in * 2;
  });
  lin.register_forward_hook([&](nn::Module& m, const ts::Tensor&, const ts::Tensor& out) -> std::optional<ts::Tensor> {
    EXPECT_EQ(&m, &lin);
    log.push_back("fwd");
    return out + 1;
  });
  lin.register_full_backward_hook([&](nn::Module&, const V& gi, const V& go) -> std::optional<V> {
    log.push_back("bw");
    grad_input = gi;
    grad_output = go;
    return std::nullopt;
  });
  ts::Tensor x = input();
  ts::Tensor out = lin(x);
  expect_near(out, {2.7, 6.0, 2.0, 2.6});
  (out * out).sum().backward();
  EXPECT_EQ(log, (std::vector<std::string>{"pre", "fwd", "bw"}));
  ASSERT_EQ(grad_input.size(), 1u);
  ASSERT_EQ(grad_output.size(), 1u);
  expect_near(grad_output[0], {5.4, 12.0, 4.0, 5.2});
  expect_near(grad_input[0], {3.6, 5.34, 7.08, 1.56, 2.48, 3.4});
  expect_near(x.grad(), {7.2, 10.68, 14.16, 3.12, 4.96, 6.8});
  expect_near(lin.weight.grad(), {2.8, 25.6, 48.4, 13.6, 53.2, 92.8});
}

TEST(ModuleHooks, HandlesRemoveAndPrependOrders) {
  nn::Linear lin(3, 2);
  set_linear(lin);
  std::vector<int> order;
  nn::RemovableHandle a = lin.register_forward_pre_hook([&](nn::Module&, const ts::Tensor&) {
    order.push_back(1);
    return std::optional<ts::Tensor>();
  });
  nn::RemovableHandle b = lin.register_forward_pre_hook(
      [&](nn::Module&, const ts::Tensor&) {
        order.push_back(0);
        return std::optional<ts::Tensor>();
      },
      /*prepend=*/true);
  lin(input());
  EXPECT_EQ(order, (std::vector<int>{0, 1}));
  a.remove();
  a.remove();  // twice is a no-op
  order.clear();
  lin(input());
  EXPECT_EQ(order, (std::vector<int>{0}));
  b.remove();
  order.clear();
  lin(input());
  EXPECT_TRUE(order.empty());
  nn::RemovableHandle outlived;
  {
    nn::Linear gone(2, 2);
    outlived = gone.register_forward_hook([](nn::Module&, const ts::Tensor&, const ts::Tensor&) {
      return std::optional<ts::Tensor>();
    });
  }
  EXPECT_NO_THROW(outlived.remove());  // the module is gone: nothing to do
}

TEST(ModuleHooks, BackwardHookReplacesGradInputAndPreHookGradOutput) {
  nn::Linear lin(3, 2);
  set_linear(lin);
  ts::Tensor x = input();
  nn::RemovableHandle h = lin.register_full_backward_hook([](nn::Module&, const V& gi, const V&) -> std::optional<V> {
    return V{gi[0] * 0};
  });
  lin(x).sum().backward();
  expect_near(x.grad(), std::vector<double>(6, 0.0));
  ASSERT_TRUE(lin.weight.grad().defined());
  const std::vector<double> w1 = lin.weight.grad().tolist<double>();
  h.remove();

  lin.zero_grad();
  lin.register_full_backward_pre_hook([](nn::Module&, const V& go) -> std::optional<V> { return V{go[0] * 2}; });
  lin(input()).sum().backward();
  std::vector<double> w2 = lin.weight.grad().tolist<double>();
  for (size_t i = 0; i < w1.size(); ++i) EXPECT_DOUBLE_EQ(w2[i], 2 * w1[i]);

  nn::Linear bad(3, 2);
  bad.to(ts::kFloat64);
  bad.register_full_backward_hook([](nn::Module&, const V& gi, const V&) -> std::optional<V> { return V{gi[0], gi[0]}; });
  EXPECT_NE(ts::testing::message_of<ts::ValueError>([&] { bad(input()).sum().backward(); })
                .find("backward hook returned an invalid number of grad_input, got 2, but expected 1"),
            std::string::npos);
}

// PyTorch: with an input that takes no gradient, the hook runs once with grad_input == (None,).
TEST(ModuleHooks, BackwardHookWithAnInputThatTakesNoGradient) {
  nn::Linear lin(3, 2);
  set_linear(lin);
  int calls = 0;
  lin.register_full_backward_hook([&](nn::Module&, const V& gi, const V& go) -> std::optional<V> {
    ++calls;
    EXPECT_EQ(gi.size(), 1u);
    EXPECT_FALSE(gi[0].defined());
    expect_near(go[0], {1.0, 1.0});
    return std::nullopt;
  });
  lin(ts::ones({1, 3}, ts::kFloat64)).sum().backward();
  EXPECT_EQ(calls, 1);
  {
    ts::NoGradGuard g;
    lin(ts::ones({1, 3}, ts::kFloat64));  // nothing recorded, nothing called
  }
  EXPECT_EQ(calls, 1);
}

TEST(ModuleHooks, SequentialRunsItsChildrensHooks) {
  nn::Sequential seq;
  seq.push_back(nn::Linear(3, 3));
  seq.push_back(nn::ReLU());
  std::vector<std::string> names;
  for (nn::Module* m : seq.children())
    m->register_forward_hook([&names](nn::Module& mod, const ts::Tensor&, const ts::Tensor&) {
      names.push_back(mod.name());
      return std::optional<ts::Tensor>();
    });
  seq(ts::ones({2, 3}));
  EXPECT_EQ(names, (std::vector<std::string>{"Linear", "ReLU"}));
}

TEST(TensorHooks, PostAccumulateGradHookSeesTheAccumulatedGradient) {
  ts::Tensor w = ts::ones({3}, ts::kFloat64).requires_grad_();
  std::vector<double> seen;
  uint64_t h = w.register_post_accumulate_grad_hook([&](const ts::Tensor& t) {
    seen = t.grad().tolist<double>();
    ts::NoGradGuard g;
    t.grad().mul_(0.5);  // an optimizer-in-backward step may act on it here
  });
  (w * ts::tensor({1, 2, 3}, ts::kFloat64)).sum().backward();
  EXPECT_EQ(seen, (std::vector<double>{1, 2, 3}));
  EXPECT_EQ(w.grad().tolist<double>(), (std::vector<double>{0.5, 1, 1.5}));
  (w * 2).sum().backward();  // accumulates, then the hook sees the sum
  EXPECT_EQ(seen, (std::vector<double>{2.5, 3, 3.5}));
  w.remove_hook(h);
  seen.clear();
  (w * 2).sum().backward();
  EXPECT_TRUE(seen.empty());
  ts::Tensor nonleaf = w * 1;
  EXPECT_THROW(nonleaf.register_post_accumulate_grad_hook([](const ts::Tensor&) {}), ts::ValueError);
}
