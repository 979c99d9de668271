// Modules' forward values against PyTorch (fixed weights loaded from PyTorch's state dicts), plus
// containers, parameter names and counts, train/eval switching, Dropout and printing.
#include "nn/nn_test_util.h"

namespace ts = tessera;
namespace nn = tessera::nn;
using namespace tessera::nn_testing;

namespace {

// A model of the API sketch's shape: members registered by name.
struct Net : nn::Module {
  nn::Linear fc1{4, 8}, fc2{8, 3};
  nn::Dropout drop{0.5};
  ts::Tensor scale = ts::ones({3});
  Net() {
    register_modules({{"fc1", fc1}, {"drop", drop}, {"fc2", fc2}});
    register_parameter("scale", scale);
  }
  ts::Tensor forward(ts::Tensor x) override { return fc2(drop(fc1(x).relu())) * scale; }
};

struct Outer : nn::Module {
  Net net;
  nn::Sequential head{nn::Linear(3, 2), nn::ReLU(), nn::Linear(2, 1)};
  Outer() { register_modules({{"net", net}, {"head", head}}); }
  ts::Tensor forward(ts::Tensor x) override { return head(net(x)); }
};

std::vector<std::string> names(const std::vector<std::pair<std::string, ts::Tensor>>& v) {
  std::vector<std::string> out;
  for (auto& [n, t] : v) out.push_back(n);
  return out;
}

}  // namespace

// ---- forward values against PyTorch -------------------------------------------------------------------

TEST(NNModules, LinearMatchesTorch) {
  nn::Linear m(5, 3);
  m.to(ts::kFloat64);
  m.load_state_dict(state("linear"));
  EXPECT_TRUE(close64(m(in("linear", "x")), out("linear", "y")));
  EXPECT_TRUE(close64(m(in("linear", "x3")), out("linear", "y3")));
  nn::Linear nb(5, 3, /*bias=*/false);
  nb.to(ts::kFloat64);
  nb.load_state_dict(state("linear_nobias"));
  EXPECT_TRUE(close64(nb(in("linear_nobias", "x")), out("linear_nobias", "y")));
  EXPECT_EQ(nb.parameters().size(), 1u);
  EXPECT_THROW(m(ts::zeros({2, 4}, ts::kFloat64)), ts::ShapeError);
}

TEST(NNModules, BilinearMatchesTorch) {
  nn::Bilinear m(3, 4, 2);
  m.to(ts::kFloat64);
  m.load_state_dict(state("bilinear"));
  EXPECT_TRUE(close64(m(in("bilinear", "x1"), in("bilinear", "x2")), out("bilinear", "y")));
  // Leading batch dims are kept.
  ts::Tensor y = m(in("bilinear", "x1").unsqueeze(0), in("bilinear", "x2").unsqueeze(0));
  EXPECT_EQ(y.sizes(), (ts::Shape{1, 5, 2}));
  EXPECT_THROW(m(in("bilinear", "x2"), in("bilinear", "x2")), ts::ShapeError);
}

TEST(NNModules, EmbeddingMatchesTorchAndZeroesPaddingRow) {
  nn::Embedding fresh(10, 4, /*padding_idx=*/2);
  EXPECT_EQ(fresh.weight.select(0, 2).abs().sum().item<double>(), 0.0);
  EXPECT_GT(fresh.weight.select(0, 3).abs().sum().item<double>(), 0.0);
  nn::Embedding neg(10, 4, -1);
  EXPECT_EQ(*neg.padding_idx, 9);
  EXPECT_THROW(nn::Embedding(10, 4, 10), ts::ValueError);

  nn::Embedding m(10, 4, 2);
  m.to(ts::kFloat64);
  m.load_state_dict(state("embedding"));
  EXPECT_TRUE(close64(m(in("embedding", "idx")), out("embedding", "y")));

  nn::Embedding pre = nn::Embedding::from_pretrained(state("embedding").at("weight"));
  EXPECT_FALSE(pre.weight.requires_grad());
  EXPECT_TRUE(close64(pre(in("embedding", "idx")), out("embedding", "y")));
}

TEST(NNModules, ActivationsMatchTorch) {
  ts::Tensor x = in("act", "x");
  EXPECT_TRUE(close64(nn::ReLU()(x), out("act", "relu")));
  EXPECT_TRUE(close64(nn::GELU()(x), out("act", "gelu")));
  EXPECT_TRUE(close64(nn::GELU("tanh")(x), out("act", "gelu_tanh")));
  EXPECT_TRUE(close64(nn::SiLU()(x), out("act", "silu")));
  EXPECT_TRUE(close64(nn::Tanh()(x), out("act", "tanh")));
  EXPECT_TRUE(close64(nn::Sigmoid()(x), out("act", "sigmoid")));
  EXPECT_TRUE(close64(nn::Softmax(1)(x), out("act", "softmax1")));
  EXPECT_TRUE(close64(nn::Softmax(0)(x), out("act", "softmax0")));
  EXPECT_TRUE(close64(nn::LogSoftmax(1)(x), out("act", "log_softmax1")));
  EXPECT_THROW(nn::GELU("fast"), ts::ValueError);
}

TEST(NNModules, FlattenAndIdentity) {
  ts::Tensor x = ts::randn({2, 3, 4, 5});
  EXPECT_EQ(nn::Flatten()(x).sizes(), (ts::Shape{2, 60}));
  EXPECT_EQ(nn::Flatten(0, 2)(x).sizes(), (ts::Shape{24, 5}));
  EXPECT_TRUE(nn::Identity()(x).is_same(x));
}

// ---- containers, names, counts ------------------------------------------------------------------------

TEST(NNModules, NestedParameterNamesAndCounts) {
  Outer m;
  std::vector<std::string> want = {"net.scale",         "net.fc1.weight",    "net.fc1.bias",
                                   "net.fc2.weight",    "net.fc2.bias",      "head.0.weight",
                                   "head.0.bias",       "head.2.weight",     "head.2.bias"};
  EXPECT_EQ(names(m.named_parameters()), want);
  EXPECT_EQ(m.parameters().size(), 9u);
  int64_t count = 0;
  for (auto& p : m.parameters()) count += p.numel();
  EXPECT_EQ(count, 3 + (4 * 8 + 8) + (8 * 3 + 3) + (3 * 2 + 2) + (2 + 1));
  for (auto& p : m.parameters()) EXPECT_TRUE(p.requires_grad());
  EXPECT_EQ(m.children().size(), 2u);
  // modules(): this, net, fc1, drop, fc2, head, head.0, head.1, head.2.
  auto mods = m.named_modules();
  ASSERT_EQ(mods.size(), 9u);
  EXPECT_EQ(mods[0].first, "");
  EXPECT_EQ(mods[2].first, "net.fc1");
  EXPECT_EQ(mods[7].first, "head.1");
  EXPECT_EQ(mods[7].second->name(), "ReLU");
  EXPECT_EQ(names(m.net.named_parameters("prefix")).front(), "prefix.scale");
  EXPECT_EQ(m.named_parameters("", /*recurse=*/false).size(), 0u);
  // Lookup by dotted name, and the errors.
  EXPECT_TRUE(m.get_parameter("head.2.bias").is_same(m.head.at<nn::Linear>(2).bias));
  EXPECT_EQ(m.get_submodule("net.fc2").as<nn::Linear>().out_features, 3);
  EXPECT_THROW(m.get_parameter("net.fc3.weight"), ts::IndexError);
  EXPECT_THROW(m.get_submodule("net.fc1").as<nn::ReLU>(), ts::ValueError);
}

TEST(NNModules, TiedWeightsAreListedOnceButSavedUnderBothNames) {
  struct Tied : nn::Module {
    nn::Embedding wte{6, 4};
    nn::Linear head{4, 6, false};
    Tied() {
      head.weight = wte.weight;  // the member is the truth (Note [Module registration])
      register_modules({{"wte", wte}, {"head", head}});
    }
  } m;
  EXPECT_EQ(m.parameters().size(), 1u);
  auto sd = m.state_dict();
  EXPECT_EQ(sd.size(), 2u);
  EXPECT_TRUE(sd.at("head.weight").is_alias_of(m.wte.weight));
}

TEST(NNModules, CopiesAndMovesKeepRegistration) {
  Net a;
  Net b = a;  // shallow: shares tensors, own members
  EXPECT_TRUE(b.fc1.weight.is_same(a.fc1.weight));
  EXPECT_TRUE(b.named_parameters()[1].second.is_same(b.fc1.weight));
  b.fc1.weight = ts::zeros({8, 4});  // rebinding b's member leaves a alone, and b sees it
  EXPECT_TRUE(b.get_parameter("fc1.weight").is_same(b.fc1.weight));
  EXPECT_FALSE(a.get_parameter("fc1.weight").is_same(b.fc1.weight));
  Net c = std::move(b);
  EXPECT_TRUE(c.get_parameter("fc1.weight").is_same(c.fc1.weight));
  // Registering a tensor that is not a member is refused; an rvalue is owned.
  struct Bad : nn::Module {
    Bad() {
      auto* heap = new ts::Tensor(ts::zeros({2}));
      std::unique_ptr<ts::Tensor> owner(heap);
      register_parameter("x", *heap);
    }
  };
  EXPECT_THROW(Bad(), ts::ValueError);
  struct Owns : nn::Module {
    Owns() {
      register_parameter("w", ts::ones({2}));
      register_buffer("b", ts::zeros({2}));
      register_module("lin", nn::Linear(2, 2));
    }
  } o;
  EXPECT_EQ(names(o.named_parameters()), (std::vector<std::string>{"w", "lin.weight", "lin.bias"}));
  EXPECT_EQ(o.buffers().size(), 1u);
  EXPECT_THROW(o.register_buffer("w", ts::zeros({1})), ts::ValueError);  // already a parameter
  EXPECT_THROW(o.register_parameter("a.b", ts::zeros({1})), ts::ValueError);
  EXPECT_THROW(o.register_parameter("", ts::zeros({1})), ts::ValueError);
  EXPECT_THROW(o.register_parameter("i", ts::zeros({1}, ts::kInt64)), ts::DTypeError);
  EXPECT_NO_THROW(o.register_parameter("i", ts::zeros({1}, ts::kInt64), /*requires_grad=*/false));
}

// Note [Tensor slots]: every slot by reference, tied ones under each name and None ones too; assigning
// to one rebinds what forward computes with, leaving the registration (and other copies) alone.
TEST(NNModules, NamedTensorSlotsRebindWhatForwardUses) {
  struct Slots : nn::Module {
    nn::Linear a{2, 2}, b{2, 2, false};
    nn::BatchNorm1d bn{2};
    ts::Tensor none;
    Slots() {
      b.weight = a.weight;
      register_modules({{"a", a}, {"b", b}, {"bn", bn}});
      register_buffer("none", none);
    }
    ts::Tensor forward(ts::Tensor x) override { return bn(b(a(x))); }
  } m;
  std::vector<std::string> got;
  for (const auto& s : m.named_tensor_slots("root")) got.push_back(s.name + (s.is_parameter ? " p" : " b"));
  EXPECT_EQ(got, (std::vector<std::string>{"root.none b", "root.a.weight p", "root.a.bias p", "root.b.weight p",
                                           "root.b.bias p", "root.bn.weight p", "root.bn.bias p",
                                           "root.bn.running_mean b", "root.bn.running_var b",
                                           "root.bn.num_batches_tracked b"}));
  Slots copy = m;
  std::vector<nn::Module::NamedTensorSlot> slots = copy.named_tensor_slots();
  EXPECT_FALSE(slots[0].tensor.defined());
  EXPECT_FALSE(slots[4].tensor.defined());  // Linear(bias=false) registers its bias as None
  EXPECT_TRUE(slots[3].tensor.is_same(m.a.weight));  // the tie, under its second name
  slots[1].tensor = ts::zeros({2, 2});                // rebinds copy.a.weight only
  EXPECT_TRUE(copy.a.weight.is_same(slots[1].tensor));
  EXPECT_TRUE(copy.get_parameter("a.weight").is_same(slots[1].tensor));
  EXPECT_FALSE(m.a.weight.is_same(slots[1].tensor));
  copy.eval();
  const ts::Tensor y = copy(ts::ones({3, 2}));  // a's weight is zero now: bn(b(bias))
  m.eval();
  ts::NoGradGuard g;
  const ts::Tensor want = m.bn(m.b(m.a.bias.expand({3, 2})));
  EXPECT_TRUE(ts::allclose(y, want));
}

TEST(NNModules, SequentialModuleListModuleDict) {
  nn::Sequential seq(nn::Linear(5, 3), nn::Tanh(), nn::Linear(3, 2));
  ASSERT_EQ(seq.size(), 3u);
  EXPECT_EQ(names(seq.named_parameters()),
            (std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"}));
  ts::Tensor x = ts::randn({4, 5});
  ts::Tensor manual = seq.at<nn::Linear>(2)(seq[0](x).tanh());
  EXPECT_TRUE(ts::allclose(seq(x), manual));
  EXPECT_EQ(seq[-1].name(), "Linear");
  EXPECT_THROW(seq[3], ts::IndexError);
  nn::Linear shared(2, 2);
  seq.push_back(shared);  // a shallow copy: the same tensors
  EXPECT_TRUE(seq.at<nn::Linear>(3).weight.is_same(shared.weight));

  nn::ModuleList list(nn::Linear(2, 2), nn::LayerNorm(ts::Shape{2}));
  list.append(nn::ReLU());
  EXPECT_EQ(list.size(), 3u);
  EXPECT_EQ(names(list.named_parameters())[2], "1.weight");
  EXPECT_THROW(list(ts::zeros({2})), ts::NotImplementedError);  // a list has no forward
  list.extend(list);
  EXPECT_EQ(list.size(), 6u);
  EXPECT_EQ(list.parameters().size(), 4u);  // shared modules are listed once

  nn::ModuleDict dict;
  dict.insert("cls", nn::Linear(4, 3)).insert("act", nn::GELU());
  EXPECT_EQ(dict.keys(), (std::vector<std::string>{"cls", "act"}));
  EXPECT_TRUE(dict.contains("act"));
  EXPECT_EQ(dict.at<nn::Linear>("cls").in_features, 4);
  EXPECT_THROW(dict["nope"], ts::IndexError);
  EXPECT_EQ(names(dict.named_parameters()), (std::vector<std::string>{"cls.weight", "cls.bias"}));
}

TEST(NNModules, TrainEvalReachesEverySubmodule) {
  Outer m;
  EXPECT_TRUE(m.is_training());
  m.eval();
  for (nn::Module* sub : m.modules()) EXPECT_FALSE(sub->is_training());
  m.net.train();
  EXPECT_TRUE(m.net.drop.is_training());
  EXPECT_FALSE(m.is_training());
  m.train();
  for (nn::Module* sub : m.modules()) EXPECT_TRUE(sub->is_training());
}

TEST(NNModules, DropoutTrainOnlyInvertedScaling) {
  ts::Generator gen(7);
  nn::Dropout d(0.25, &gen);
  ts::Tensor x = ts::ones({200, 100}, ts::kFloat64);
  ts::Tensor y = d(x);
  std::vector<double> v = y.tolist<double>();
  int64_t zeros = 0;
  for (double e : v) {
    if (e == 0) ++zeros;
    else EXPECT_DOUBLE_EQ(e, 1.0 / 0.75);
  }
  const double frac = static_cast<double>(zeros) / static_cast<double>(v.size());
  EXPECT_NEAR(frac, 0.25, 0.015);  // 20000 draws: sd 0.003
  // The same seed gives the same mask; a new draw differs.
  gen.manual_seed(7);
  EXPECT_TRUE(ts::equal(d(x), y));
  EXPECT_FALSE(ts::equal(d(x), y));
  d.eval();
  EXPECT_TRUE(d(x).is_same(x));
  EXPECT_TRUE(ts::equal(nn::F::dropout(x, 1.0), ts::zeros_like(x)));
  EXPECT_THROW(nn::Dropout(1.5), ts::ValueError);
  EXPECT_THROW(nn::F::dropout(x, -0.1), ts::ValueError);
}

TEST(NNModules, ForwardWithoutOverrideRaises) {
  struct NoForward : nn::Module {};
  NoForward m;
  EXPECT_THROW(m(ts::zeros({1})), ts::NotImplementedError);
}

TEST(NNModules, ReprLikePyTorch) {
  nn::Sequential seq(nn::Linear(4, 2), nn::ReLU(), nn::Dropout(0.1));
  EXPECT_EQ(seq.repr(),
            "Sequential(\n"
            "  (0): Linear(in_features=4, out_features=2, bias=True)\n"
            "  (1): ReLU()\n"
            "  (2): Dropout(p=0.1, inplace=False)\n"
            ")");
  EXPECT_EQ(nn::LayerNorm(ts::Shape{8}).repr(), "LayerNorm((8,), eps=1e-05, elementwise_affine=True)");
}
