// state_dict / load_state_dict: PyTorch's key names (compared with the keys PyTorch itself gives
// for the same model), a round trip through safetensors, strict-mode errors, shape errors; and the
// in-place to() that keeps optimizers' tensor handles valid; zero_grad.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "nn/nn_test_util.h"

namespace ts = tessera;
namespace nn = tessera::nn;
using namespace tessera::nn_testing;

namespace {

// The model of torch_reference.py's naming(): the same registration names, the same key order.
struct Net : nn::Module {
  nn::Sequential features{nn::Linear(4, 8), nn::BatchNorm1d(8), nn::ReLU(), nn::Sequential(nn::Linear(8, 8))};
  nn::ModuleList layers{nn::Linear(8, 8), nn::LayerNorm(ts::Shape{8})};
  nn::ModuleDict heads;
  nn::MultiheadAttention attn{8, 2};
  Net() {
    heads.insert("cls", nn::Linear(8, 3)).insert("emb", nn::Embedding(5, 8));
    register_modules({{"features", features}, {"layers", layers}, {"heads", heads}, {"attn", attn}});
  }
  ts::Tensor forward(ts::Tensor x) override {
    x = features(x);
    for (const auto& l : layers) x = (*l)(x);
    return heads["cls"](x);
  }
};

std::vector<std::string> json_list(const std::string& s) { return nlohmann::json::parse(s).get<std::vector<std::string>>(); }

std::vector<std::string> keys(const nn::StateDict& sd) {
  std::vector<std::string> out;
  for (auto& [k, v] : sd) out.push_back(k);
  return out;
}

}  // namespace

TEST(NNStateDict, KeysAreTorchs) {
  Net net;
  std::vector<std::string> torch_keys = json_list(metadata("keys:net"));
  ASSERT_FALSE(torch_keys.empty());
  std::vector<std::string> sorted = torch_keys;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(keys(net.state_dict()), sorted);  // std::map: sorted
  std::vector<std::string> params;
  for (auto& [n, p] : net.named_parameters()) params.push_back(n);
  EXPECT_EQ(params, json_list(metadata("params:net")));  // same order as PyTorch
  auto sd = net.state_dict();
  EXPECT_TRUE(sd.count("features.1.running_mean") && sd.count("features.1.running_var") &&
              sd.count("features.1.num_batches_tracked"));
  EXPECT_TRUE(sd.count("layers.1.bias") && sd.count("features.3.0.weight") && sd.count("heads.emb.weight"));
  EXPECT_TRUE(sd.count("attn.in_proj_weight") && sd.count("attn.out_proj.bias"));
  // Values are detached views of the module's tensors.
  EXPECT_FALSE(sd.at("layers.0.weight").requires_grad());
  EXPECT_TRUE(sd.at("layers.0.weight").is_alias_of(net.layers.at<nn::Linear>(0).weight));
}

TEST(NNStateDict, RoundTripThroughSafetensors) {
  Net a, b;
  a.train();
  a(ts::randn({6, 4}));  // moves BatchNorm's running stats away from their init
  const std::string path = ::testing::TempDir() + "nn_state_dict_roundtrip.safetensors";
  ts::save_safetensors(a.state_dict(), path);
  nn::LoadStateDictResult r = b.load_state_dict(ts::load_safetensors(path));
  std::remove(path.c_str());
  EXPECT_TRUE(r.missing_keys.empty());
  EXPECT_TRUE(r.unexpected_keys.empty());
  auto sa = a.state_dict(), sb = b.state_dict();
  for (auto& [k, v] : sa) EXPECT_TRUE(ts::equal(sb.at(k), v)) << k;
  EXPECT_EQ(b.features.at<nn::BatchNorm1d>(1).num_batches_tracked.item<int64_t>(), 1);
  // Loading copies into the existing tensors: the handles stay the same.
  nn::Linear& head = b.heads.at<nn::Linear>("cls");
  ts::Tensor handle = head.weight;
  b.load_state_dict(sa);
  EXPECT_TRUE(handle.is_same(head.weight));
  EXPECT_TRUE(head.weight.requires_grad());
  // Loading a PyTorch state dict of the same model works too (keys and shapes).
  nn::Linear lin(5, 3);
  lin.load_state_dict(state("linear"));  // float64 values into float32 parameters
  EXPECT_EQ(lin.weight.dtype(), ts::kFloat32);
}

TEST(NNStateDict, StrictLoadListsMissingAndUnexpectedKeys) {
  nn::Sequential m(nn::Linear(2, 3), nn::BatchNorm1d(3));
  nn::StateDict sd = m.state_dict();
  sd.erase("0.bias");
  sd.erase("1.running_var");
  sd["2.weight"] = ts::zeros({1});
  try {
    m.load_state_dict(sd);
    FAIL() << "expected ValueError";
  } catch (const ts::ValueError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("Missing key(s) in state_dict: \"0.bias\", \"1.running_var\"."), std::string::npos) << msg;
    EXPECT_NE(msg.find("Unexpected key(s) in state_dict: \"2.weight\"."), std::string::npos) << msg;
    EXPECT_NE(msg.find("for Sequential"), std::string::npos) << msg;
  }
  // Non-strict: loads what matches and reports the rest.
  ts::Tensor w = ts::full({3, 2}, 0.5);
  sd["0.weight"] = w;
  nn::LoadStateDictResult r = m.load_state_dict(sd, /*strict=*/false);
  EXPECT_EQ(r.missing_keys, (std::vector<std::string>{"0.bias", "1.running_var"}));
  EXPECT_EQ(r.unexpected_keys, (std::vector<std::string>{"2.weight"}));
  EXPECT_TRUE(ts::equal(m.at<nn::Linear>(0).weight, w));
}

TEST(NNStateDict, ShapeMismatchNamesKeyAndShapesAndChangesNothing) {
  nn::Sequential m(nn::Linear(2, 3), nn::Linear(3, 4));
  nn::StateDict sd = m.state_dict();
  ts::Tensor before = m.at<nn::Linear>(0).weight.clone();
  sd["0.weight"] = ts::zeros({3, 2});
  sd["1.weight"] = ts::zeros({4, 4});
  try {
    m.load_state_dict(sd);
    FAIL() << "expected ShapeError";
  } catch (const ts::ShapeError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("size mismatch for 1.weight: copying a param with shape [4, 4] from checkpoint, the shape in "
                       "current model is [4, 3]"),
              std::string::npos)
        << msg;
  }
  EXPECT_TRUE(ts::equal(m.at<nn::Linear>(0).weight, before));  // checked before anything is copied
}

TEST(NNStateDict, NonPersistentBuffersStayOut) {
  struct M : nn::Module {
    ts::Tensor cache = ts::zeros({2}), stat = ts::ones({2});
    M() {
      register_buffer("cache", cache, /*persistent=*/false);
      register_buffer("stat", stat);
    }
  } m;
  EXPECT_EQ(keys(m.state_dict()), (std::vector<std::string>{"stat"}));
  EXPECT_EQ(m.buffers().size(), 2u);
  m.to(ts::kFloat64);
  EXPECT_EQ(m.cache.dtype(), ts::kFloat64);  // still moves with the module
}

TEST(NNStateDict, ToConvertsInPlaceKeepingHandles) {
  Net net;
  std::vector<ts::Tensor> handles = net.parameters();  // what an optimizer holds
  nn::Linear& cls = net.heads.at<nn::Linear>("cls");
  ts::Tensor w_before = cls.weight.clone();
  cls.weight.set_grad(ts::ones_like(cls.weight));
  net.to(ts::kFloat64);
  std::vector<ts::Tensor> after = net.parameters();
  ASSERT_EQ(after.size(), handles.size());
  for (size_t i = 0; i < after.size(); ++i) {
    EXPECT_TRUE(after[i].is_same(handles[i]));
    EXPECT_EQ(handles[i].dtype(), ts::kFloat64);
    EXPECT_TRUE(handles[i].requires_grad());
    EXPECT_TRUE(handles[i].is_leaf());
  }
  EXPECT_TRUE(ts::equal(cls.weight, w_before.to(ts::kFloat64)));
  EXPECT_EQ(cls.weight.grad().dtype(), ts::kFloat64);  // the gradient follows
  auto& bn = net.features.at<nn::BatchNorm1d>(1);
  EXPECT_EQ(bn.running_mean.dtype(), ts::kFloat64);
  EXPECT_EQ(bn.num_batches_tracked.dtype(), ts::kInt64);
  // The module still computes, in float64.
  EXPECT_EQ(net(ts::randn({3, 4}, ts::kFloat64)).dtype(), ts::kFloat64);
  // Device moves: the meta device keeps shapes only.
  net.to(ts::kMeta);
  for (const ts::Tensor& h : handles) EXPECT_TRUE(h.is_meta());
  EXPECT_EQ(cls.weight.sizes(), (ts::Shape{3, 8}));
  EXPECT_THROW(net.to(ts::kInt64), ts::DTypeError);
}

TEST(NNStateDict, ZeroGradAndRequiresGrad) {
  nn::Sequential m(nn::Linear(2, 2), nn::Linear(2, 1));
  for (const ts::Tensor& p : m.parameters()) p.set_grad(ts::ones_like(p));
  m.zero_grad(/*set_to_none=*/false);
  for (const ts::Tensor& p : m.parameters()) EXPECT_EQ(p.grad().abs().sum().item<double>(), 0.0);
  m.zero_grad();
  for (const ts::Tensor& p : m.parameters()) EXPECT_FALSE(p.grad().defined());
  m.requires_grad_(false);
  for (const ts::Tensor& p : m.parameters()) EXPECT_FALSE(p.requires_grad());
}

TEST(NNStateDict, ApplyVisitsChildrenFirst) {
  nn::Sequential m(nn::Linear(2, 2), nn::Sequential(nn::ReLU()));
  std::vector<std::string> order;
  m.apply([&](nn::Module& x) { order.push_back(x.name()); });
  EXPECT_EQ(order, (std::vector<std::string>{"Linear", "ReLU", "Sequential", "Sequential"}));
}
