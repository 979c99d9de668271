// Non-reentrant activation checkpointing (utils::checkpoint with use_reentrant = false, Note
// [Non-reentrant checkpoint]): no activation kept by the forward, the same gradients as without it
// through backward() and autograd::grad, with inputs that need no grad, nested, at second order, and
// PyTorch's checks of the recomputation. The literals were produced with Debian's python3-torch 1.13
// (CPU) by torch.utils.checkpoint.checkpoint(..., use_reentrant=False) on the same block:
//   fc1 = Linear(4, 6), fc2 = Linear(6, 4) (float64); fc1.weight = arange(24).reshape(6, 4) / 20 - 0.5,
//   fc1.bias = arange(6) / 10 - 0.2, fc2.weight = arange(24).reshape(4, 6) / 30 - 0.3,
//   fc2.bias = [0.1, -0.1, 0.2, 0]; block(x) = fc2(fc1(x).tanh()) + x; x = arange(12).reshape(3, 4) / 6 - 1
#include <unordered_map>

#include "common/test_util.h"
#include "runtime/memory_reporter.h"
#include "tensor/tensor_impl.h"
#include "tessera/amp.h"
#include "tessera/nn.h"
#include "tessera/utils/checkpoint.h"

namespace ts = tessera;
namespace nn = tessera::nn;
using namespace tessera::testing;
using ts::utils::CheckpointOptions;

namespace {
using V = std::vector<ts::Tensor>;

const CheckpointOptions kNonReentrant{.use_reentrant = false};

struct Block {
  nn::Linear fc1{4, 6}, fc2{6, 4};
  int calls = 0;
  Block() {
    ts::NoGradGuard g;
    fc1.to(ts::kFloat64);
    fc2.to(ts::kFloat64);
    fc1.weight.copy_(ts::arange(24, ts::kFloat64).reshape({6, 4}) / 20 - 0.5);
    fc1.bias.copy_(ts::arange(6, ts::kFloat64) / 10 - 0.2);
    fc2.weight.copy_(ts::arange(24, ts::kFloat64).reshape({4, 6}) / 30 - 0.3);
    fc2.bias.copy_(ts::tensor({0.1, -0.1, 0.2, 0.0}, ts::kFloat64));
  }
  ts::Tensor operator()(const ts::Tensor& x) {
    ++calls;
    return fc2(fc1(x).tanh()) + x;
  }
  V params() { return {fc1.weight, fc1.bias, fc2.weight, fc2.bias}; }
};

ts::Tensor x0() { return ts::arange(12, ts::kFloat64).reshape({3, 4}) / 6 - 1; }

void expect_near(const ts::Tensor& t, const std::vector<double>& want, double tol = 1e-12) {
  std::vector<double> got = t.contiguous().tolist<double>();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "element " << i;
}

void expect_same(const V& a, const V& b, double tol = 1e-12) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_TRUE(a[i].defined() && b[i].defined()) << "gradient " << i;
    EXPECT_TRUE(ts::allclose(a[i], b[i], tol, tol)) << "gradient " << i << "\n" << a[i] << "\n" << b[i];
  }
}
}  // namespace

// PyTorch: y = checkpoint(block, x, use_reentrant=False) with x needing no grad;
// grad((y * y).sum(), [fc1.weight, fc2.bias]) works (the reentrant form refuses autograd.grad and,
// with no input requiring grad, gives the parameters no gradient); block ran twice.
TEST(CheckpointNonReentrant, AutogradGradWithAnInputThatNeedsNoGrad) {
  Block block;
  auto fn = [&](const ts::Tensor& in) { return block(in); };
  ts::Tensor y = ts::utils::checkpoint(fn, x0(), kNonReentrant);
  EXPECT_EQ(block.calls, 1);
  ASSERT_NE(y.grad_fn(), nullptr);
  EXPECT_EQ(y.grad_fn()->name(), "AddBackward0");  // the graph of the block itself, not one node for it
  V g = ts::autograd::grad({(y * y).sum()}, {block.fc1.weight, block.fc2.bias});
  EXPECT_EQ(block.calls, 2);  // recomputed once for the whole pass
  expect_near(g[0], {-0.13730023985283296, -0.009227060882746371, 0.11884611808734018, 0.2469192970574267,
                     0.13915686968116997, 0.3214239650732563, 0.5036910604653426, 0.6859581558574288,
                     0.5891840270773385, 0.8089679671209, 1.0287519071644615, 1.2485358472080228,
                     0.7272670914037244, 0.8999179188747048, 1.0725687463456854, 1.2452195738166656,
                     0.46318708663833097, 0.5724174098481893, 0.6816477330580477, 0.7908780562679059,
                     0.16520296717491298, 0.24906736188109985, 0.3329317565872867, 0.4167961512934735});
  expect_near(g[1], {-1.6866400849191179, -1.5687158126884932, 1.5492084595421318, 1.6671327317727564});
}

TEST(CheckpointNonReentrant, SameGradientsAsWithoutAndNoActivationKept) {
  Block block;
  ts::Tensor x = (x0() * 1.5).requires_grad_();
  (block(x) * block(x)).sum().backward();
  V plain = {x.grad()};
  for (const ts::Tensor& p : block.params()) plain.push_back(p.grad());
  x.zero_grad();
  for (ts::Tensor& p : block.params()) p.zero_grad();

  // Without checkpointing, tanh's output (an activation) is kept by the graph for the backward.
  std::weak_ptr<ts::Storage> activation;
  auto fn = [&](const ts::Tensor& in) {
    ts::Tensor h = block.fc1(in).tanh();
    activation = h.impl_ptr()->storage();
    return block.fc2(h) + in;
  };
  {
    ts::Tensor kept = fn(x);
    EXPECT_FALSE(activation.expired());
  }
  ts::Tensor y = ts::utils::checkpoint(fn, x, kNonReentrant);
  EXPECT_TRUE(activation.expired()) << "the checkpointed forward kept an activation";
  (y * y).sum().backward();
  V got = {x.grad()};
  for (const ts::Tensor& p : block.params()) got.push_back(p.grad());
  expect_same(got, plain);
}

// PyTorch: outer(x) = block(checkpoint(block, x, use_reentrant=False)).sin(),
// y = checkpoint(outer, x, use_reentrant=False); (y * y).sum().backward().
TEST(CheckpointNonReentrant, NestedCheckpointsAgainstPyTorch) {
  Block block;
  ts::Tensor x = x0().requires_grad_();
  auto inner = [&](const ts::Tensor& in) { return block(in); };
  auto outer = [&](const ts::Tensor& in) { return block(ts::utils::checkpoint(inner, in, kNonReentrant)).sin(); };
  ts::Tensor y = ts::utils::checkpoint(outer, x, kNonReentrant);
  EXPECT_EQ(block.calls, 2);
  (y * y).sum().backward();
  // The outer recomputation runs both blocks; the inner checkpoint of the forward recomputes its own.
  EXPECT_EQ(block.calls, 5);
  expect_near(x.grad(), {-1.0539854057598073, -0.4014727393523768, -1.1934630912069777, -0.644163792382955,
                         -0.2676487154068172, 0.1837780387605985, 2.2098139088329285, 2.684054889276644,
                         1.272432722974867, 1.1442482901245055, -0.6201356568521901, -1.0071439041532184});
  expect_near(block.fc2.weight.grad(),
              {-3.2351323009776505, -2.3025655997821124, -0.2933920491338404, 1.8466116229455496, 2.9667993060041464,
               3.355187864504468, -2.112183114866908, -1.5105324261477486, -0.13097273251243546, 1.29474468525986,
               1.9618617648619154, 2.155111897440557, -0.8698965677041934, -0.5212439994183693, -0.08701867694554147,
               0.45953342320436663, 0.9708433017193134, 1.304478436738625, 0.5269127727529184, 0.4609179932723137,
               0.06048035721951161, -0.30356724595774376, -0.3156281533061408, -0.19102945666654692});
}

// PyTorch: y = checkpoint(block, x, use_reentrant=False); g = grad((y ** 3).sum(), x, create_graph=True);
// grad(g.sum(), x) (the reentrant form is differentiable once only).
TEST(CheckpointNonReentrant, SecondOrderAgainstPyTorch) {
  Block block;
  ts::Tensor x = x0().requires_grad_();
  ts::Tensor y = ts::utils::checkpoint([&](const ts::Tensor& in) { return block(in); }, x, kNonReentrant);
  V g = ts::autograd::grad({(y * y * y).sum()}, {x}, {}, std::nullopt, /*create_graph=*/true);
  V gg = ts::autograd::grad({g[0].sum()}, {x});
  expect_near(gg[0], {-6.057543608126594, -7.910555850446375, -6.115800067563694, -7.982239075122105,
                      -1.708705394236721, -1.143801565760272, 4.94525355251794, 6.9283831437993335,
                      2.252652346463834, 3.428151224749395, 8.053800597838567, 9.26891046423821}, 1e-11);
  // gradcheck and gradgradcheck through the checkpointed function.
  std::string report;
  ts::autograd::GradcheckFn f = [&](const V& in) {
    return ts::utils::checkpoint([&](const V& v) { return V{(block(v[0]) * v[1]).tanh()}; }, in, kNonReentrant);
  };
  const V in = {test_data({2, 4}, ts::kFloat64, 3).requires_grad_(), test_data({4}, ts::kFloat64, 4).requires_grad_()};
  EXPECT_TRUE(ts::autograd::gradcheck(f, in, {}, &report)) << report;
  EXPECT_TRUE(ts::autograd::gradgradcheck(f, in, {}, &report)) << report;
}

TEST(CheckpointNonReentrant, EachPassRecomputesAndRetainGraphWorks) {
  Block block;
  ts::Tensor x = x0().requires_grad_();
  ts::Tensor y = ts::utils::checkpoint([&](const ts::Tensor& in) { return block(in); }, x, kNonReentrant);
  ts::Tensor loss = (y * y).sum();
  ts::autograd::backward({loss}, {}, /*retain_graph=*/true);
  const ts::Tensor once = x.grad().clone();
  loss.backward();  // a second pass: recomputed again
  EXPECT_EQ(block.calls, 3);
  EXPECT_TRUE(ts::allclose(x.grad(), once * 2, 1e-13, 1e-13));
  EXPECT_NE(message_of<ts::ValueError>([&] { loss.backward(); }).find("Trying to backward through the graph a second time"),
            std::string::npos);
}

TEST(CheckpointNonReentrant, RandomOpsReplayAndAutocastIsReentered) {
  auto fn = [](const ts::Tensor& in) { return nn::functional::dropout(in.sin(), 0.5, true) * in; };
  ts::Tensor x = test_data({64}, ts::kFloat64, 2).requires_grad_();
  ts::manual_seed(7);
  fn(x).sum().backward();
  const ts::Tensor g_plain = x.grad().clone();
  x.zero_grad();
  ts::manual_seed(7);
  ts::Tensor y = ts::utils::checkpoint(fn, x, kNonReentrant);
  const uint64_t offset = ts::default_generator(ts::kCPU).offset();
  y.sum().backward();
  EXPECT_TRUE(ts::equal(x.grad(), g_plain));
  EXPECT_EQ(ts::default_generator(ts::kCPU).offset(), offset);

  nn::Linear lin(8, 8);
  ts::Tensor xa = test_data({4, 8}, ts::kFloat32, 3, -1, 1).requires_grad_();
  auto fa = [&](const ts::Tensor& in) { return lin(in).to(ts::kFloat32).relu(); };
  ts::Tensor y_plain;
  {
    ts::amp::autocast guard(ts::kCPU, ts::kBFloat16);
    y_plain = fa(xa);
  }
  y_plain.sum().backward();
  const ts::Tensor gw = lin.weight.grad().clone();
  lin.zero_grad();
  ts::Tensor ya;
  {
    ts::amp::autocast guard(ts::kCPU, ts::kBFloat16);
    ya = ts::utils::checkpoint(fa, xa, kNonReentrant);
  }
  ya.sum().backward();  // outside autocast: the recomputation re-enters it (else its metadata check fails)
  EXPECT_TRUE(ts::equal(lin.weight.grad(), gw));
}

TEST(CheckpointNonReentrant, SequentialSegments) {
  auto make = [] {
    ts::manual_seed(11);
    nn::Sequential s(nn::Linear(4, 5), nn::Tanh(), nn::Linear(5, 5), nn::Tanh(), nn::Linear(5, 3));
    s.to(ts::kFloat64);
    return s;
  };
  nn::Sequential a = make(), b = make();
  ts::Tensor x = test_data({2, 4}, ts::kFloat64, 4);
  (a(x) * a(x)).sum().backward();
  ts::Tensor yb = ts::utils::checkpoint_sequential(b, 2, x, kNonReentrant);
  (yb * yb).sum().backward();
  V ga, gb;
  for (const ts::Tensor& p : a.parameters()) ga.push_back(p.grad());
  for (const ts::Tensor& p : b.parameters()) gb.push_back(p.grad());
  expect_same(gb, ga);
}

// PyTorch 2's checks of the recomputation (torch.utils.checkpoint's CheckpointError messages).
TEST(CheckpointNonReentrant, RecomputationChecksAsPyTorch) {
  ts::Tensor x = test_data({3, 4}, ts::kFloat64, 5).requires_grad_();
  int calls = 0;
  // The recomputation saves a tensor of another shape.
  ts::Tensor y = ts::utils::checkpoint(
      [&](const ts::Tensor& in) { return in.narrow(0, 0, calls++ == 0 ? 3 : 1).sin().sum(); }, x, kNonReentrant);
  std::string msg = message_of<ts::ValueError>([&] { y.backward(); });
  EXPECT_NE(msg.find("checkpoint: Recomputed values for the following tensors have different metadata than during the "
                     "forward pass.\ntensor at position 0:\nsaved metadata: {'shape': [3, 4], 'dtype': float64, "
                     "'device': cpu}\nrecomputed metadata: {'shape': [1, 4], 'dtype': float64, 'device': cpu}"),
            std::string::npos) << msg;
  // determinism_check "none" lets it through (the (1, 4) input broadcasts in sin's derivative).
  calls = 0;
  ts::Tensor y_none = ts::utils::checkpoint(
      [&](const ts::Tensor& in) { return in.narrow(0, 0, calls++ == 0 ? 3 : 1).sin().sum(); }, x,
      CheckpointOptions{.use_reentrant = false, .determinism_check = "none"});
  EXPECT_NO_THROW(y_none.backward());
  // More, and fewer, saved tensors.
  calls = 0;
  ts::Tensor more = ts::utils::checkpoint(
      [&](const ts::Tensor& in) { return calls++ == 0 ? in.sin().sum() : in.sin().sin().sum(); }, x, kNonReentrant);
  EXPECT_NE(message_of<ts::ValueError>([&] { more.backward(); })
                .find("checkpoint: trying to save more tensors during recomputation than during the original forward "
                      "pass."),
            std::string::npos);
  calls = 0;
  ts::Tensor fewer = ts::utils::checkpoint(
      [&](const ts::Tensor& in) { return calls++ == 0 ? in.sin().sin().sum() : in.sin().sum(); }, x, kNonReentrant);
  EXPECT_NE(message_of<ts::ValueError>([&] { fewer.backward(); })
                .find("checkpoint: A different number of tensors was saved during the original forward and "
                      "recomputation.\nNumber of tensors saved during forward: 2\nNumber of tensors saved during "
                      "recomputation: 1"),
            std::string::npos);
  // An input written in place before the backward would be recomputed from the wrong value.
  ts::Tensor h = x * 1;
  ts::Tensor z = ts::utils::checkpoint([](const ts::Tensor& in) { return in.exp().sum(); }, h, kNonReentrant);
  h.mul_(2);
  EXPECT_NE(message_of<ts::ValueError>([&] { z.backward(); })
                .find("checkpoint: input 0 of the checkpointed function ([float64 [3, 4]]) has been modified by an "
                      "inplace operation since the forward"),
            std::string::npos);
  EXPECT_NE(message_of<ts::ValueError>([&] {
              ts::utils::checkpoint([](const V& v) { return v; }, {x},
                                    CheckpointOptions{.use_reentrant = false, .determinism_check = "all"});
            }).find("checkpoint: determinism_check should be one of \"default\", \"none\", but got all"),
            std::string::npos);
  // A custom function reading ctx.saved_tensors() twice in one backward unpacks a recomputed tensor twice.
  struct TwiceSaved : ts::autograd::Function<TwiceSaved> {
    static ts::Tensor forward(ts::autograd::FunctionContext& ctx, const ts::Tensor& t) {
      ctx.save_for_backward({t});
      return t * 2;
    }
    static V backward(ts::autograd::FunctionContext& ctx, const V& g) {
      ts::Tensor first = ctx.saved_tensors()[0];
      ts::Tensor second = ctx.saved_tensors()[0];
      return {g[0] * 2 + (first - second)};
    }
  };
  ts::Tensor t2 = ts::utils::checkpoint([](const ts::Tensor& in) { return TwiceSaved::apply(in * 1).sum(); }, x, kNonReentrant);
  EXPECT_NE(message_of<ts::ValueError>([&] { t2.backward(); })
                .find("checkpoint: Unpack is being triggered for a tensor that was already unpacked once."),
            std::string::npos);
}

// The reentrant form is still the default (PyTorch's default when use_reentrant is not passed).
TEST(CheckpointNonReentrant, ReentrantIsTheDefault) {
  Block block;
  ts::Tensor y = ts::utils::checkpoint([&](const ts::Tensor& in) { return block(in); }, x0().requires_grad_());
  EXPECT_EQ(y.grad_fn()->name(), "CheckpointFunctionBackward");
  ts::Tensor y2 = ts::utils::checkpoint([&](const ts::Tensor& in) { return block(in); }, x0().requires_grad_(),
                                        CheckpointOptions{.use_reentrant = true});
  EXPECT_EQ(y2.grad_fn()->name(), "CheckpointFunctionBackward");
  EXPECT_THROW(ts::utils::checkpoint([&](const V& v) { return v; }, {x0()},
                                     CheckpointOptions{.use_reentrant = true, .determinism_check = "none"}),
               ts::ValueError);
}

namespace {
// The CPU bytes tensors hold, from the allocator's reports (a free is reported without its size).
struct MemoryWatch {
  static inline std::unordered_map<const void*, int64_t> sizes;
  static inline int64_t live = 0, peak = 0;
  static void report(const ts::MemoryReport& r) {
    if (!r.device.is_cpu()) return;
    if (r.bytes > 0) {
      sizes[r.ptr] = r.bytes;
      live += r.bytes;
      peak = std::max(peak, live);
    } else if (auto it = sizes.find(r.ptr); it != sizes.end()) {
      live -= it->second;
      sizes.erase(it);
    }
  }
  MemoryWatch() {
    sizes.clear();
    live = peak = 0;
    ts::set_memory_reporter(&report);
  }
  ~MemoryWatch() { ts::set_memory_reporter(nullptr); }
};

struct Usage {
  int64_t after_forward = 0, peak = 0;
};

// Eight blocks of three linear layers (512 rows of 128 features: 256 KiB an activation), each block
// checkpointed or not; the bytes held once the forward is done and the peak through the backward.
Usage usage(int mode) {  // 0: plain, 1: reentrant, 2: non-reentrant
  ts::manual_seed(5);
  std::vector<std::array<nn::Linear, 3>> blocks;
  for (int b = 0; b < 8; ++b) blocks.push_back({nn::Linear(128, 128), nn::Linear(128, 128), nn::Linear(128, 128)});
  const ts::Tensor x = ts::testing::test_data({512, 128}, ts::kFloat32, 9, -1, 1);
  Usage u;
  MemoryWatch watch;
  ts::Tensor h = x;
  for (auto& blk : blocks) {
    auto fn = [&blk](const ts::Tensor& in) { return blk[2](blk[1](blk[0](in).tanh()).sin()) + in; };
    h = mode == 0 ? fn(h) : ts::utils::checkpoint(fn, h, CheckpointOptions{.use_reentrant = mode == 1});
  }
  ts::Tensor loss = h.sum();
  u.after_forward = MemoryWatch::live;
  loss.backward();
  u.peak = MemoryWatch::peak;
  return u;
}
}  // namespace

// The memory the checkpoints trade: after the forward, a plain graph holds four activations a block,
// both checkpoints only the blocks' inputs; through the backward the peak stays lower too.
TEST(CheckpointNonReentrant, HoldsOnlyTheBlocksInputsLikeTheReentrantForm) {
  const Usage plain = usage(0), reentrant = usage(1), non_reentrant = usage(2);
  std::cout << "after forward (bytes): plain " << plain.after_forward << ", reentrant " << reentrant.after_forward
            << ", non-reentrant " << non_reentrant.after_forward << "; peak: plain " << plain.peak << ", reentrant "
            << reentrant.peak << ", non-reentrant " << non_reentrant.peak << "\n";
  const int64_t activation = 512 * 128 * 4;
  EXPECT_GT(plain.after_forward, 8 * 3 * activation);
  EXPECT_LT(non_reentrant.after_forward, 8 * activation + activation);
  EXPECT_LT(reentrant.after_forward, 8 * activation + activation);
  EXPECT_LT(non_reentrant.peak, plain.peak - 8 * activation);
  EXPECT_LT(non_reentrant.peak, reentrant.peak + 2 * activation);
}
