// Saved-tensor hooks (autograd::graph::saved_tensors_hooks, save_on_cpu, disable_saved_tensors_hooks;
// Note [Saved tensor hooks]) against PyTorch's behaviour. The literals were produced with Debian's
// python3-torch 1.13 (CPU) from the lines quoted beside them, with
//   a = [0.5, -1.0, 2.0], b = [1.5, 0.25, -0.5] (float64, requires_grad)
#include <any>
#include <cmath>

#include "common/test_util.h"
#include "tessera/autograd/graph.h"

namespace ts = tessera;
namespace graph = tessera::autograd::graph;
using namespace tessera::testing;

namespace {
using V = std::vector<ts::Tensor>;

ts::Tensor a0() { return ts::tensor({0.5, -1.0, 2.0}, ts::kFloat64).requires_grad_(); }
ts::Tensor b0() { return ts::tensor({1.5, 0.25, -0.5}, ts::kFloat64).requires_grad_(); }

void expect_near(const ts::Tensor& t, const std::vector<double>& want, double tol = 1e-12) {
  std::vector<double> got = t.contiguous().tolist<double>();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "element " << i;
}

graph::PackHook identity_pack() {
  return [](const ts::Tensor& t) -> std::any { return t; };
}
graph::UnpackHook identity_unpack() {
  return [](const std::any& p) { return std::any_cast<ts::Tensor>(p); };
}
}  // namespace

// with saved_tensors_hooks(pack, unpack): y = (a * b).sin()  -> packs a (leaf), b (leaf), a * b
// (MulBackward0); y.sum().backward() unpacks three; a.grad, b.grad as below.
TEST(SavedTensorHooks, PackAndUnpackEverySavedTensorAsPyTorch) {
  ts::Tensor a = a0(), b = b0();
  std::vector<std::string> log;
  ts::Tensor y;
  {
    graph::saved_tensors_hooks hooks(
        [&](const ts::Tensor& t) -> std::any {
          EXPECT_FALSE(ts::is_grad_enabled());  // pack runs under no_grad
          log.push_back(std::string("pack ") + (t.grad_fn() ? t.grad_fn()->name() : t.requires_grad() ? "leaf" : "none"));
          return t.detach().clone();  // a copy: the graph holds only what the hook returns
        },
        [&](const std::any& p) {
          log.push_back("unpack");
          return std::any_cast<ts::Tensor>(p);
        });
    y = (a * b).sin();
  }
  EXPECT_EQ(log, (std::vector<std::string>{"pack leaf", "pack leaf", "pack MulBackward0"}));
  log.clear();
  y.sum().backward();
  EXPECT_EQ(log, (std::vector<std::string>{"unpack", "unpack", "unpack"}));
  expect_near(a.grad(), {1.0975333033107313, 0.24222810542766118, -0.2701511529340699});
  expect_near(b.grad(), {0.36584443443691045, -0.9689124217106447, 1.0806046117362795});
  // Outside the scope nothing is packed.
  log.clear();
  (a * b).sum().backward();
  EXPECT_TRUE(log.empty());
}

// PyTorch does not version-check a hooked saved tensor: with identity hooks, h = a * 1; z = h.sin();
// h.mul_(2); z.sum().backward() -> a.grad = cos(2 a) (the unpacked h is the modified one).
TEST(SavedTensorHooks, NoVersionCheckThroughHooks) {
  ts::Tensor a = a0();
  ts::Tensor h, z;
  {
    graph::saved_tensors_hooks hooks(identity_pack(), identity_unpack());
    h = a * 1;
    z = h.sin();
  }
  h.mul_(2);
  z.sum().backward();
  expect_near(a.grad(), {0.5403023058681398, -0.4161468365471424, -0.6536436208636119});
  // Without hooks the same program raises the saved-tensor error.
  ts::Tensor a2 = a0();
  ts::Tensor h2 = a2 * 1, z2 = h2.sin();
  h2.mul_(2);
  EXPECT_NE(message_of<ts::ValueError>([&] { z2.sum().backward(); }).find("modified by an inplace operation"),
            std::string::npos);
}

// The unpacked tensor takes the saved one's place in the graph: a double backward works.
// with saved_tensors_hooks(lambda t: t * 1, lambda t: t): z = (a * a * a).sum();
// g = grad(z, a, create_graph=True); grad(g.sum(), a) -> [3, -6, 12]
TEST(SavedTensorHooks, DoubleBackwardThroughUnpackedTensors) {
  ts::Tensor a = a0();
  ts::Tensor z;
  int packs = 0;
  {
    graph::saved_tensors_hooks hooks(
        [&](const ts::Tensor& t) -> std::any {
          ++packs;
          return t * 1;
        },
        identity_unpack());
    z = (a * a * a).sum();
  }
  EXPECT_EQ(packs, 4);  // both multiplications save both inputs
  V g = ts::autograd::grad({z}, {a}, {}, std::nullopt, /*create_graph=*/true);
  ASSERT_TRUE(g[0].requires_grad());
  expect_near(g[0], {0.75, 3.0, 12.0});  // 3 a^2
  V gg = ts::autograd::grad({g[0].sum()}, {a});
  expect_near(gg[0], {3.0, -6.0, 12.0});
  // Tensors saved by the first backward's own formulas (create_graph) are not packed: the scope is closed.
  EXPECT_EQ(packs, 4);
  // And gradgradcheck agrees through hooks that keep CPU copies.
  std::string report;
  EXPECT_TRUE(ts::autograd::gradgradcheck(
      [](const V& in) {
        graph::save_on_cpu on_cpu;
        return V{(in[0] * in[0]).exp() * in[1]};
      },
      {a0(), b0()}, {}, &report))
      << report;
}

TEST(SavedTensorHooks, CustomFunctionsSaveThroughTheHooks) {
  struct Cube : ts::autograd::Function<Cube> {
    static ts::Tensor forward(ts::autograd::FunctionContext& ctx, const ts::Tensor& x) {
      ctx.save_for_backward({x});
      return x * x * x;
    }
    static V backward(ts::autograd::FunctionContext& ctx, const V& g) {
      const ts::Tensor& x = ctx.saved_tensors()[0];
      return {g[0] * x * x * 3};
    }
  };
  ts::Tensor a = a0();
  int packs = 0, unpacks = 0;
  ts::Tensor y;
  {
    graph::saved_tensors_hooks hooks(
        [&](const ts::Tensor& t) -> std::any {
          ++packs;
          return t;
        },
        [&](const std::any& p) {
          ++unpacks;
          return std::any_cast<ts::Tensor>(p);
        });
    y = Cube::apply(a);
  }
  EXPECT_EQ(packs, 1);
  y.sum().backward();
  EXPECT_EQ(unpacks, 1);
  expect_near(a.grad(), {0.75, 3.0, 12.0});
}

TEST(SavedTensorHooks, OnlyTheInnermostPairApplies) {
  ts::Tensor a = a0();
  int outer = 0, inner = 0;
  ts::Tensor y;
  {
    graph::saved_tensors_hooks o([&](const ts::Tensor& t) -> std::any { ++outer; return t; }, identity_unpack());
    y = a.exp();  // saves its output: outer
    {
      graph::saved_tensors_hooks i([&](const ts::Tensor& t) -> std::any { ++inner; return t; }, identity_unpack());
      y = y.sin();  // saves its input: inner only
    }
    y = y * a;  // outer again (two inputs)
  }
  EXPECT_EQ(outer, 3);
  EXPECT_EQ(inner, 1);
  y.sum().backward();
  ts::Tensor a2 = a0();
  (a2.exp().sin() * a2).sum().backward();
  EXPECT_TRUE(ts::allclose(a.grad(), a2.grad(), 1e-14, 0));
}

TEST(SavedTensorHooks, SaveOnCpuGivesTheSameGradients) {
  ts::Tensor a = a0(), b = b0();
  ts::Tensor y;
  {
    graph::save_on_cpu hooks;
    y = (a * b).tanh() * a.exp();
  }
  y.sum().backward();
  ts::Tensor a2 = a0(), b2 = b0();
  ((a2 * b2).tanh() * a2.exp()).sum().backward();
  EXPECT_TRUE(ts::equal(a.grad(), a2.grad()));
  EXPECT_TRUE(ts::equal(b.grad(), b2.grad()));
}

TEST(SavedTensorHooks, ErrorsAsPyTorch) {
  // PyTorch: RuntimeError A saved tensor pack hook is modifying its input in place. ...
  EXPECT_NE(message_of<ts::ValueError>([&] {
              graph::saved_tensors_hooks hooks(
                  [](const ts::Tensor& t) -> std::any {
                    const_cast<ts::Tensor&>(t).mul_(2);
                    return t;
                  },
                  identity_unpack());
              ts::Tensor h = a0() * 1;
              h.exp();
            }).find("A saved tensor pack hook is modifying its input in place. Tensors provided as input to pack hook "
                    "can not be modified by in-place operations"),
            std::string::npos);
  // PyTorch: with disable_saved_tensors_hooks("no hooks here"): with save_on_cpu(): -> RuntimeError no hooks here
  {
    graph::disable_saved_tensors_hooks off("no hooks here");
    EXPECT_EQ(message_of<ts::ValueError>([] { graph::save_on_cpu hooks; }), "no hooks here");
  }
  EXPECT_NO_THROW({ graph::save_on_cpu hooks; });  // enabled again after the scope
  // An unpack hook must give a tensor.
  ts::Tensor z;
  {
    graph::saved_tensors_hooks hooks(identity_pack(), [](const std::any&) { return ts::Tensor(); });
    z = a0().exp().sum();
  }
  EXPECT_NE(message_of<ts::ValueError>([&] { z.backward(); })
                .find("Output of saved tensor unpack_hook expected to be a Tensor but got an undefined tensor "
                      "(unpacking a tensor saved by ExpBackward0)"),
            std::string::npos);
  // PyTorch: a second backward through hooked saved tensors without retain_graph raises its usual error.
  ts::Tensor w;
  {
    graph::saved_tensors_hooks hooks(identity_pack(), identity_unpack());
    w = a0().exp().sum();
  }
  w.backward();
  EXPECT_NE(message_of<ts::ValueError>([&] { w.backward(); })
                .find("Trying to backward through the graph a second time"),
            std::string::npos);
  EXPECT_THROW(graph::saved_tensors_hooks(nullptr, identity_unpack()), ts::ValueError);
}

// What the graph keeps is only what pack returned: a saved activation's memory goes when the forward
// no longer holds it.
TEST(SavedTensorHooks, TheGraphKeepsOnlyThePackedValue) {
  ts::Tensor a = a0();
  std::weak_ptr<ts::TensorImpl> activation;
  ts::Tensor y;
  {
    graph::saved_tensors_hooks hooks([](const ts::Tensor& t) -> std::any { return t.sizes(); },
                                     [](const std::any& p) { return ts::ones(std::any_cast<ts::Shape>(p), ts::kFloat64); });
    ts::Tensor h = a.exp();
    activation = h.impl_ptr();
    y = h.sin();
  }
  EXPECT_TRUE(activation.expired());
  y.sum().backward();  // exp's output and sin's input unpack as ones: d/da = cos(1) * 1
  expect_near(a.grad(), std::vector<double>(3, std::cos(1.0)));
}

// The tensors an op keeps for its derivative besides its inputs and outputs (a condition, a layer
// norm's statistics) go through the hooks too. PyTorch: with hooks, torch.where(c, a, b) packs c (bool,
// (3,)); layer_norm(a.view(1, 3), (3,)) packs the input (1, 3), mean and rstd.
TEST(SavedTensorHooks, AttributeTensorsArePackedToo) {
  ts::Tensor a = a0(), b = b0();
  const ts::Tensor c = ts::tensor({1.0, 0.0, 1.0}, ts::kFloat64).to(ts::kBool);
  std::vector<std::pair<ts::DType, int64_t>> packed;
  ts::Tensor y, z;
  {
    graph::saved_tensors_hooks hooks(
        [&](const ts::Tensor& t) -> std::any {
          packed.emplace_back(t.dtype(), t.numel());
          return t.detach().clone();
        },
        identity_unpack());
    y = ts::where(c, a, b);
    z = ts::nn::functional::layer_norm(a.view({1, 3}), {3});
  }
  ASSERT_EQ(packed.size(), 4u);
  EXPECT_EQ(packed[0], std::make_pair(ts::kBool, int64_t{3}));
  EXPECT_EQ(packed[1], std::make_pair(ts::kFloat64, int64_t{3}));
  EXPECT_EQ(packed[2].second, 1);  // mean and rstd of the one row
  EXPECT_EQ(packed[3].second, 1);
  (y.sum() + (z * z.detach().exp()).sum()).backward();
  ts::Tensor a2 = a0(), b2 = b0();
  ts::Tensor z2 = ts::nn::functional::layer_norm(a2.view({1, 3}), {3});
  (ts::where(c, a2, b2).sum() + (z2 * z2.detach().exp()).sum()).backward();
  EXPECT_TRUE(ts::allclose(a.grad(), a2.grad(), 1e-14, 1e-14));
  EXPECT_TRUE(ts::equal(b.grad(), b2.grad()));
}

namespace {
// An output packed as itself (exp saves its result) must not keep its own graph alive: dropped without
// a backward, or after a backward that stopped at an error, the output and its node are freed
// (Note [Saved tensor hooks] in src/autograd/saved_tensor.cpp; C++ has no collector for a cycle).
TEST(SavedTensorHooks, AnOutputPackedAsItselfDoesNotKeepItsGraphAlive) {
  std::weak_ptr<ts::TensorImpl> out;
  {
    graph::saved_tensors_hooks hooks(identity_pack(), identity_unpack());
    ts::Tensor y = a0().exp();
    out = y.impl_ptr();
  }
  EXPECT_TRUE(out.expired()) << "the graph was dropped without a backward";
  {
    ts::Tensor y, z;
    {
      graph::saved_tensors_hooks hooks(identity_pack(), [](const std::any&) { return ts::Tensor(); });
      y = a0().exp();
      z = y.sum();
    }
    out = y.impl_ptr();
    EXPECT_THROW(z.backward(), ts::ValueError);
  }
  EXPECT_TRUE(out.expired()) << "the backward stopped at the unpack hook's error";
  // And the graph still differentiates through the packed output, as before.
  ts::Tensor a = a0();
  ts::Tensor w;
  {
    graph::saved_tensors_hooks hooks(identity_pack(), identity_unpack());
    w = a.exp().sum();
  }
  w.backward();
  EXPECT_TRUE(ts::allclose(a.grad(), a.detach().exp()));
}
}  // namespace
