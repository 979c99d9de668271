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

// ---- modules called with several tensors ---------------------------------------------------------
// PyTorch (1.13), on a Bilinear(3, 2, 2) (float64) with weight = arange(12).reshape(2, 3, 2) / 10 - 0.5,
// bias = [0.1, -0.2]; x1 = [[1, 2, 3], [-1, 0.5, 2]] (requires grad), x2 = [[0.5, -1], [2, 1]] (does not):
//   pre-hook: (args[0] * 2, args[1]); forward hook: out + 1 (it sees the replaced args); loss (out ** 2).sum()
//   -> out, the full backward hook's grad_input (x2's as zeros) and grad_output, and the gradients below.
namespace {
void set_bilinear(nn::Bilinear& bl) {
  ts::NoGradGuard g;
  bl.to(ts::kFloat64);
  bl.weight.copy_(ts::arange(12, ts::kFloat64).reshape({2, 3, 2}) / 10 - 0.5);
  bl.bias.copy_(ts::tensor({0.1, -0.2}, ts::kFloat64));
}
}  // namespace

TEST(ModuleHooks, SeveralArgumentsAgainstPyTorch) {
  nn::Bilinear bl(3, 2, 2);
  set_bilinear(bl);
  ts::Tensor x1 = input();
  ts::Tensor x2 = ts::tensor({0.5, -1, 2, 1}, ts::kFloat64).reshape({2, 2});
  std::vector<std::string> log;
  V grad_input, grad_output;
  bl.register_forward_pre_hook([&](nn::Module& m, const V& args) -> std::optional<V> {
    EXPECT_EQ(&m, &bl);
    log.push_back("pre " + std::to_string(args.size()));
    return V{args[0] * 2, args[1]};
  });
  bl.register_forward_hook([&](nn::Module&, const V& args, const V& out) -> std::optional<V> {
    log.push_back("fwd " + std::to_string(args.size()));
    expect_near(args[0], {2, 4, 6, -2, 1, 4});
    return V{out[0] + 1};
  });
  bl.register_full_backward_hook([&](nn::Module&, const V& gi, const V& go) -> std::optional<V> {
    log.push_back("bw");
    grad_input = gi;
    grad_output = go;
    return std::nullopt;
  });
  ts::Tensor out = bl(x1, x2);
  expect_near(out, {1.3000000000000003, -2.6000000000000005, 2.3000000000000003, 7.4});
  (out * out).sum().backward();
  EXPECT_EQ(log, (std::vector<std::string>{"pre 2", "fwd 2", "bw"}));
  ASSERT_EQ(grad_input.size(), 2u);
  ASSERT_EQ(grad_output.size(), 1u);
  expect_near(grad_input[0], {1.1700000000000002, 1.4300000000000004, 1.6900000000000008, -0.5200000000000022,
                              11.120000000000005, 22.760000000000005});
  expect_near(grad_input[1], {0, 0, 0, 0});
  expect_near(grad_output[0], {2.6000000000000005, -5.200000000000001, 4.6000000000000005, 14.8});
  expect_near(x1.grad(), {2.3400000000000003, 2.8600000000000008, 3.3800000000000017, -1.0400000000000045,
                          22.24000000000001, 45.52000000000001});
  expect_near(bl.weight.grad(), {-15.8, -14.400000000000002, 14.400000000000002, -5.800000000000002, 44.60000000000001,
                                 2.799999999999999, -64.4, -19.2, 19.2, 35.60000000000001, 102.8, 90.4});
}

// A hook may replace one argument's gradient; a wrong count raises.
TEST(ModuleHooks, SeveralArgumentsReplacingGradInput) {
  nn::Bilinear bl(3, 2, 2);
  set_bilinear(bl);
  ts::Tensor x1 = input();
  ts::Tensor x2 = ts::tensor({0.5, -1, 2, 1}, ts::kFloat64).reshape({2, 2}).requires_grad_();
  bl.register_full_backward_hook([](nn::Module&, const V& gi, const V&) -> std::optional<V> {
    return V{gi[0], gi[1] * 0 + 1};
  });
  bl(x1, x2).sum().backward();
  expect_near(x2.grad(), {1, 1, 1, 1});
  ts::Tensor plain1 = input();
  nn::Bilinear ref(3, 2, 2);
  set_bilinear(ref);
  ref.forward(plain1, x2.detach()).sum().backward();
  EXPECT_TRUE(ts::equal(x1.grad(), plain1.grad()));

  nn::Bilinear bad(3, 2, 2);
  set_bilinear(bad);
  bad.register_full_backward_hook([](nn::Module&, const V& gi, const V&) -> std::optional<V> { return V{gi[0]}; });
  EXPECT_NE(ts::testing::message_of<ts::ValueError>([&] { bad(input(), x2).sum().backward(); })
                .find("backward hook returned an invalid number of grad_input, got 1, but expected 2"),
            std::string::npos);
  nn::Bilinear bad_pre(3, 2, 2);
  bad_pre.register_forward_pre_hook([](nn::Module&, const V& args) -> std::optional<V> { return V{args[0]}; });
  EXPECT_NE(ts::testing::message_of<ts::ValueError>([&] { bad_pre(ts::ones({1, 3}), ts::ones({1, 2})); })
                .find("a forward pre-hook of Bilinear returned 1 arguments, but Bilinear was called with 2"),
            std::string::npos);
  // A hook written for one tensor says so on a module called with two.
  nn::Bilinear single(3, 2, 2);
  single.register_forward_pre_hook([](nn::Module&, const ts::Tensor&) { return std::optional<ts::Tensor>(); });
  EXPECT_NE(ts::testing::message_of<ts::ValueError>([&] { single(ts::ones({1, 3}), ts::ones({1, 2})); })
                .find("the hook registered on Bilinear takes one input tensor, but Bilinear was called with 2 input "
                      "tensors"),
            std::string::npos);
}

// PyTorch: a module forward(a, b, c) -> (a * 2, (a * b).sum()) with a full backward hook; only the
// second output is differentiated: grad_output = (None, 1.), grad_input has three tensors (c unused:
// zeros), c.grad = zeros. And a loss's integer target gets zeros (CrossEntropyLoss: gi = (g, [0, 0])).
TEST(ModuleHooks, CallWithHooksUnusedArgumentsAndOutputsWithoutGradient) {
  struct Three : nn::Module {
    V operator()(const ts::Tensor& a, const ts::Tensor& b, const ts::Tensor& c) {
      return call_with_hooks({a, b, c}, [](const V& x) { return V{x[0] * 2, (x[0] * x[1]).sum()}; });
    }
  } m;
  V gi, go;
  m.register_full_backward_hook([&](nn::Module&, const V& i, const V& o) -> std::optional<V> {
    gi = i;
    go = o;
    return std::nullopt;
  });
  ts::Tensor a = ts::ones({3}, ts::kFloat64).requires_grad_(), b = ts::ones({3}, ts::kFloat64).requires_grad_(),
             c = ts::ones({3}, ts::kFloat64).requires_grad_();
  V out = m(a, b, c);
  out[1].backward();
  ASSERT_EQ(go.size(), 2u);
  EXPECT_FALSE(go[0].defined());
  expect_near(go[1], {1.0});
  ASSERT_EQ(gi.size(), 3u);
  expect_near(gi[0], {1, 1, 1});
  expect_near(gi[2], {0, 0, 0});
  expect_near(a.grad(), {1, 1, 1});
  expect_near(c.grad(), {0, 0, 0});

  nn::CrossEntropyLoss ce;
  V ce_gi;
  ce.register_full_backward_hook([&](nn::Module&, const V& i, const V&) -> std::optional<V> {
    ce_gi = i;
    return std::nullopt;
  });
  ts::Tensor logits = ts::tensor({1., 2., 0.5, 0.1, -1., 2.}, ts::kFloat64).reshape({2, 3}).requires_grad_();
  ce(logits, ts::tensor(std::vector<int64_t>{1, 2}, {2})).backward();
  ASSERT_EQ(ce_gi.size(), 2u);
  expect_near(ce_gi[0], {0.11561194881107452, -0.18573414039411879, 0.07012219158304424, 0.06235373741509404,
                         0.020755756145987844, -0.08310949356108183});
  ASSERT_TRUE(ce_gi[1].defined());
  EXPECT_EQ(ce_gi[1].dtype(), ts::kInt64);
  EXPECT_EQ(ce_gi[1].tolist<int64_t>(), (std::vector<int64_t>{0, 0}));
}

// PyTorch: MultiheadAttention's hooks see (query, key, value) and (attn_output, None) without
// need_weights; its full backward hook gets three grad_input and grad_output (g, None).
TEST(ModuleHooks, MultiheadAttentionHooksSeeItsThreeArguments) {
  nn::MultiheadAttention mha(4, 2);
  mha.to(ts::kFloat64);
  size_t fwd_args = 0;
  V fwd_out, gi, go;
  mha.register_forward_hook([&](nn::Module&, const V& args, const V& out) -> std::optional<V> {
    fwd_args = args.size();
    fwd_out = out;
    return std::nullopt;
  });
  mha.register_full_backward_hook([&](nn::Module&, const V& i, const V& o) -> std::optional<V> {
    gi = i;
    go = o;
    return std::nullopt;
  });
  ts::Tensor q = ts::testing::test_data({3, 1, 4}, ts::kFloat64, 1).requires_grad_();
  auto [o, w] = mha(q, q, q, std::nullopt, /*need_weights=*/false);
  EXPECT_FALSE(w.defined());
  EXPECT_EQ(fwd_args, 3u);
  ASSERT_EQ(fwd_out.size(), 2u);
  EXPECT_FALSE(fwd_out[1].defined());
  o.sum().backward();
  ASSERT_EQ(gi.size(), 3u);
  for (const ts::Tensor& g : gi) EXPECT_EQ(g.sizes(), (ts::Shape{3, 1, 4}));
  ASSERT_EQ(go.size(), 2u);
  EXPECT_EQ(go[0].sizes(), (ts::Shape{3, 1, 4}));
  EXPECT_FALSE(go[1].defined());
  // The gradient of q sums the three arguments', as without hooks.
  ts::Tensor q2 = q.detach().clone().requires_grad_();
  auto [o2, w2] = mha.forward(q2, q2, q2, std::nullopt, false);
  o2.sum().backward();
  EXPECT_TRUE(ts::allclose(q.grad(), q2.grad(), 1e-12, 1e-12));
  EXPECT_TRUE(ts::allclose(q.grad(), gi[0] + gi[1] + gi[2], 1e-12, 1e-12));
}
