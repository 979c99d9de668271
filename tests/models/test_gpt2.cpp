// models::GPT2: the 124M parameter count, Hugging Face's state_dict names, loading a checkpoint in
// Hugging Face's layout (Conv1D transposed, mask buffers, optional prefix and head), the forward
// against a float64 reference written here with plain tensor ops, the KV cache against full
// recomputation, sampling, errors; and logits against transformers' GPT2LMHeadModel where it is
// importable (tests/models/hf_gpt2_reference.py).
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>

#include "common/test_util.h"

namespace ts = tessera;
namespace fs = std::filesystem;
using ts::models::GPT2;
using ts::models::GPT2Config;

namespace {

GPT2Config tiny(int64_t n_layer = 2) {
  GPT2Config c;
  c.n_layer = n_layer;
  c.n_head = 4;
  c.n_embd = 32;
  c.n_positions = 24;
  c.vocab_size = 53;
  c.attn_pdrop = c.resid_pdrop = c.embd_pdrop = 0.0;
  return c;
}

// Every parameter drawn anew (biases and LayerNorm affine included, which the default init leaves at
// 0 and 1), so that each term of the forward shows up in the logits.
void randomize(GPT2& m, uint64_t seed) {
  ts::Generator g(seed);
  ts::NoGradGuard ng;
  for (auto& [name, p] : m.named_parameters()) {
    ts::Tensor t = p;
    if (name.find("ln_") != std::string::npos && name.ends_with(".weight")) t.copy_(1 + 0.1 * ts::randn(p.sizes(), p.dtype(), &g));
    else t.copy_(0.1 * ts::randn(p.sizes(), p.dtype(), &g));
  }
}

ts::Tensor tokens(int64_t b, int64_t t, int64_t vocab, uint64_t seed) {
  ts::Generator g(seed);
  return ts::randint(0, vocab, {b, t}, ts::kInt64, &g);
}

fs::path scratch(const std::string& name) {
  fs::path p = fs::temp_directory_path() / ("tessera_gpt2_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

// Hugging Face's GPT2LMHeadModel parameter names, in its order, for n_layer layers.
std::vector<std::string> hf_parameter_names(int64_t n_layer) {
  std::vector<std::string> n = {"transformer.wte.weight", "transformer.wpe.weight"};
  for (int64_t i = 0; i < n_layer; ++i) {
    std::string p = "transformer.h." + std::to_string(i) + ".";
    for (const char* s : {"ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight",
                          "attn.c_proj.bias", "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight", "mlp.c_fc.bias",
                          "mlp.c_proj.weight", "mlp.c_proj.bias"})
      n.push_back(p + s);
  }
  n.push_back("transformer.ln_f.weight");
  n.push_back("transformer.ln_f.bias");
  return n;
}

// ---- the float64 reference: the GPT-2 forward spelled out with elementary ops -----------------------

ts::Tensor ref_layer_norm(const ts::Tensor& x, const ts::Tensor& w, const ts::Tensor& b, double eps) {
  ts::Tensor mu = x.mean({-1}, true);
  ts::Tensor var = ((x - mu) * (x - mu)).mean({-1}, true);
  return (x - mu) / (var + eps).sqrt() * w + b;
}
ts::Tensor ref_linear(const ts::Tensor& x, const ts::Tensor& w_in_out, const ts::Tensor& b) {
  return x.matmul(w_in_out) + b;  // Conv1D: weight (in, out)
}
ts::Tensor ref_gelu_tanh(const ts::Tensor& x) {
  const double c = std::sqrt(2.0 / M_PI);
  return 0.5 * x * (1 + (c * (x + 0.044715 * x * x * x)).tanh());
}

// sd: Hugging Face names and layout (Conv1D (in, out)).
ts::Tensor reference_logits(const ts::nn::StateDict& sd, const GPT2Config& c, const ts::Tensor& idx) {
  const int64_t b = idx.size(0), t = idx.size(1), h = c.n_head, d = c.n_embd / c.n_head;
  auto w = [&](const std::string& n) { return sd.at(n); };
  ts::Tensor x = w("transformer.wte.weight").index_select(0, idx.reshape({-1})).reshape({b, t, c.n_embd}) +
                 w("transformer.wpe.weight").narrow(0, 0, t);
  ts::Tensor blocked = ts::ones({t, t}, ts::kBool).triu(1);  // key after query
  for (int64_t i = 0; i < c.n_layer; ++i) {
    std::string p = "transformer.h." + std::to_string(i) + ".";
    ts::Tensor a = ref_layer_norm(x, w(p + "ln_1.weight"), w(p + "ln_1.bias"), c.layer_norm_epsilon);
    ts::Tensor qkv = ref_linear(a, w(p + "attn.c_attn.weight"), w(p + "attn.c_attn.bias"));
    auto head = [&](int64_t k) {
      return qkv.narrow(2, k * c.n_embd, c.n_embd).reshape({b, t, h, d}).permute({0, 2, 1, 3});  // (B, H, T, D)
    };
    ts::Tensor q = head(0), k = head(1), v = head(2);
    ts::Tensor s = q.matmul(k.transpose(-2, -1)) / std::sqrt(static_cast<double>(d));
    s = s.masked_fill(blocked, -INFINITY);
    ts::Tensor e = (s - s.amax({-1}, true)).exp();
    ts::Tensor y = (e / e.sum({-1}, true)).matmul(v).permute({0, 2, 1, 3}).reshape({b, t, c.n_embd});
    x = x + ref_linear(y, w(p + "attn.c_proj.weight"), w(p + "attn.c_proj.bias"));
    ts::Tensor m = ref_layer_norm(x, w(p + "ln_2.weight"), w(p + "ln_2.bias"), c.layer_norm_epsilon);
    m = ref_gelu_tanh(ref_linear(m, w(p + "mlp.c_fc.weight"), w(p + "mlp.c_fc.bias")));
    x = x + ref_linear(m, w(p + "mlp.c_proj.weight"), w(p + "mlp.c_proj.bias"));
  }
  x = ref_layer_norm(x, w("transformer.ln_f.weight"), w("transformer.ln_f.bias"), c.layer_norm_epsilon);
  return x.matmul(w("transformer.wte.weight").t());
}

bool is_conv1d(const std::string& n) {
  for (const char* s : {"attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight"})
    if (n.ends_with(s)) return true;
  return false;
}

// The model's tensors as Hugging Face stores them: Conv1D weights (in, out), the causal mask buffers
// of older transformers versions, no lm_head (tied), optionally without the "transformer." prefix.
ts::nn::StateDict to_hf_layout(GPT2& m, bool with_prefix, bool with_mask_buffers = true) {
  ts::nn::StateDict hf;
  for (auto& [name, t] : m.state_dict()) {
    if (name == "lm_head.weight") continue;
    std::string key = with_prefix ? name : name.substr(std::string("transformer.").size());
    hf[key] = is_conv1d(name) ? t.t().contiguous().clone() : t.clone();
  }
  if (with_mask_buffers) {
    const int64_t n = m.config.n_positions;
    for (int64_t i = 0; i < m.config.n_layer; ++i) {
      std::string p = std::string(with_prefix ? "transformer." : "") + "h." + std::to_string(i) + ".attn.";
      hf[p + "bias"] = ts::ones({n, n}, ts::kBool).tril().view({1, 1, n, n});
      hf[p + "masked_bias"] = ts::scalar_tensor(-1e4, ts::kFloat32);
    }
  }
  return hf;
}

::testing::AssertionResult throws_naming(const std::function<void()>& f, const std::string& what) {
  try {
    f();
  } catch (const ts::Error& e) {
    if (std::string(e.what()).find(what) != std::string::npos) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "the error does not name '" << what << "': " << e.what();
  }
  return ::testing::AssertionFailure() << "no error raised";
}

}  // namespace

// ---- structure ---------------------------------------------------------------------------------------

TEST(GPT2, ParameterCountOf124MConfig) {
  EXPECT_EQ(GPT2Config{}.num_parameters(), 124'439'808);
  // The formula agrees with the built model, tied head counted once, with and without biases.
  for (bool bias : {true, false}) {
    GPT2Config c = tiny(3);
    c.bias = bias;
    GPT2 m(c);
    int64_t n = 0;
    for (const ts::Tensor& p : m.parameters()) n += p.numel();
    EXPECT_EQ(n, c.num_parameters()) << "bias=" << bias;
  }
}

TEST(GPT2, FullSizeModelHas124MParameters) {
  GPT2 m;  // ~0.5 GB of float32
  int64_t n = 0;
  for (const ts::Tensor& p : m.parameters()) n += p.numel();
  EXPECT_EQ(n, 124'439'808);
  EXPECT_EQ(m.state_dict().at("lm_head.weight").sizes(), ts::Shape({50257, 768}));
}

TEST(GPT2, InnerWidthOfTheMLP) {
  GPT2Config c = tiny();
  c.n_inner = 40;
  GPT2 m(c);
  EXPECT_EQ(m.transformer.h.at<ts::models::GPT2Block>(1).mlp.c_fc.weight.sizes(), ts::Shape({40, 32}));
  int64_t n = 0;
  for (const ts::Tensor& p : m.parameters()) n += p.numel();
  EXPECT_EQ(n, c.num_parameters());
}

TEST(GPT2, ConfigFromHuggingFaceJson) {
  fs::path dir = scratch("config");
  auto write = [&](const std::string& text) {
    std::ofstream((dir / "config.json").string()) << text;
    return (dir / "config.json").string();
  };
  // GPT-2 small's config.json as published, abridged.
  GPT2Config c = GPT2Config::from_hf_json(write(R"({"activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"],
    "attn_pdrop": 0.1, "bos_token_id": 50256, "embd_pdrop": 0.1, "eos_token_id": 50256, "initializer_range": 0.02,
    "layer_norm_epsilon": 1e-05, "model_type": "gpt2", "n_ctx": 1024, "n_embd": 768, "n_head": 12, "n_layer": 12,
    "n_positions": 1024, "n_inner": null, "resid_pdrop": 0.1, "vocab_size": 50257})"));
  EXPECT_EQ(c.num_parameters(), 124'439'808);
  EXPECT_EQ(c.n_layer, 12);
  EXPECT_EQ(c.inner(), 3072);
  EXPECT_EQ(c.layer_norm_epsilon, 1e-5);
  c = GPT2Config::from_hf_json(write(R"({"n_embd": 64, "n_head": 4, "n_layer": 3, "n_positions": 32, "vocab_size": 97,
    "attn_pdrop": 0.0, "n_inner": 100})"));
  EXPECT_EQ(c.n_embd, 64);
  EXPECT_EQ(c.n_inner, 100);
  EXPECT_EQ(c.attn_pdrop, 0.0);
  EXPECT_EQ(c.resid_pdrop, 0.1);  // the default where the file says nothing
  EXPECT_TRUE(throws_naming([&] { GPT2Config::from_hf_json(write(R"({"activation_function": "relu"})")); }, "relu"));
  EXPECT_TRUE(throws_naming([&] { GPT2Config::from_hf_json(write(R"({"scale_attn_by_inverse_layer_idx": true})")); },
                            "scale_attn_by_inverse_layer_idx"));
  EXPECT_THROW(GPT2Config::from_hf_json(write(R"({"model_type": "llama"})")), ts::ValueError);
  EXPECT_THROW(GPT2Config::from_hf_json(write(R"({"n_embd": "wide"})")), ts::ValueError);
  EXPECT_THROW(GPT2Config::from_hf_json(write("{not json")), ts::IOError);
  EXPECT_THROW(GPT2Config::from_hf_json((dir / "absent.json").string()), ts::IOError);

  // from_pretrained: config.json + model.safetensors in Hugging Face's layout.
  GPT2 src(tiny());
  randomize(src, 4);
  write(R"({"model_type": "gpt2", "n_layer": 2, "n_head": 4, "n_embd": 32, "n_positions": 24, "vocab_size": 53,
    "attn_pdrop": 0.0, "resid_pdrop": 0.0, "embd_pdrop": 0.0})");
  ts::save_safetensors(to_hf_layout(src, true), (dir / "model.safetensors").string());
  GPT2 loaded = GPT2::from_pretrained(dir.string());
  EXPECT_TRUE(loaded.lm_head.weight.is_same(loaded.transformer.wte.weight));
  src.eval();
  loaded.eval();
  ts::Tensor idx = tokens(1, 6, 53, 3);
  EXPECT_TRUE(ts::equal(loaded(idx), src(idx)));
  fs::remove_all(dir);
}

TEST(GPT2, StateDictNamesAreHuggingFaces) {
  GPT2Config c = tiny(3);
  GPT2 m(c);
  std::vector<std::string> names;
  for (auto& [n, p] : m.named_parameters()) names.push_back(n);
  EXPECT_EQ(names, hf_parameter_names(3));  // same order as GPT2LMHeadModel.named_parameters()

  std::set<std::string> keys;
  for (auto& [n, t] : m.state_dict()) keys.insert(n);
  std::vector<std::string> expected = hf_parameter_names(3);
  expected.push_back("lm_head.weight");
  EXPECT_EQ(keys, std::set<std::string>(expected.begin(), expected.end()));

  ts::nn::StateDict sd = m.state_dict();
  EXPECT_EQ(sd.at("transformer.wte.weight").sizes(), ts::Shape({53, 32}));
  EXPECT_EQ(sd.at("transformer.wpe.weight").sizes(), ts::Shape({24, 32}));
  EXPECT_EQ(sd.at("transformer.h.1.attn.c_attn.weight").sizes(), ts::Shape({96, 32}));  // Linear: (out, in)
  EXPECT_EQ(sd.at("transformer.h.1.attn.c_attn.bias").sizes(), ts::Shape({96}));
  EXPECT_EQ(sd.at("transformer.h.2.mlp.c_fc.weight").sizes(), ts::Shape({128, 32}));
  EXPECT_EQ(sd.at("transformer.h.2.mlp.c_proj.weight").sizes(), ts::Shape({32, 128}));
}

TEST(GPT2, LmHeadIsTiedToTheTokenEmbedding) {
  GPT2 m(tiny());
  EXPECT_TRUE(m.lm_head.weight.is_same(m.transformer.wte.weight));
  {
    ts::NoGradGuard ng;
    m.transformer.wte.weight.fill_(0.5);
  }
  EXPECT_EQ(m.lm_head.weight.max().item<double>(), 0.5);
  m.to(ts::kFloat64);
  EXPECT_TRUE(m.lm_head.weight.is_same(m.transformer.wte.weight));
  EXPECT_EQ(m.lm_head.weight.dtype(), ts::kFloat64);
}

TEST(GPT2, InitializationFollowsHuggingFace) {
  GPT2Config c = tiny(8);
  c.n_embd = 256;
  c.n_head = 8;
  GPT2 m(c);
  auto& blk = m.transformer.h.at<ts::models::GPT2Block>(3);
  auto std_of = [](const ts::Tensor& t) { return t.to(ts::kFloat64).std().item<double>(); };
  EXPECT_NEAR(std_of(blk.attn.c_attn.weight), 0.02, 0.02 * 0.03);
  EXPECT_NEAR(std_of(blk.mlp.c_fc.weight), 0.02, 0.02 * 0.03);
  const double proj = 0.02 / std::sqrt(2.0 * 8);
  EXPECT_NEAR(std_of(blk.attn.c_proj.weight), proj, proj * 0.03);
  EXPECT_NEAR(std_of(blk.mlp.c_proj.weight), proj, proj * 0.03);
  EXPECT_NEAR(std_of(m.transformer.wte.weight), 0.02, 0.02 * 0.05);
  EXPECT_EQ(blk.attn.c_attn.bias.abs().max().item<double>(), 0.0);
  EXPECT_EQ(blk.ln_1.weight.min().item<double>(), 1.0);
  EXPECT_EQ(blk.ln_2.bias.abs().max().item<double>(), 0.0);
}

TEST(GPT2, BadConfigurationsRaise) {
  GPT2Config c = tiny();
  c.n_head = 5;
  EXPECT_TRUE(throws_naming([&] { GPT2 m(c); }, "divisible"));
  c = tiny();
  c.attn_pdrop = 1.5;
  EXPECT_THROW(GPT2 m(c), ts::ValueError);
}

// ---- forward -------------------------------------------------------------------------------------------

TEST(GPT2, ForwardEqualsFloat64Reference) {
  GPT2Config c = tiny();
  GPT2 m(c);
  m.to(ts::kFloat64);
  randomize(m, 11);
  m.eval();
  ts::Tensor idx = tokens(3, 17, c.vocab_size, 5);
  ts::Tensor logits = m(idx);
  ASSERT_EQ(logits.sizes(), ts::Shape({3, 17, c.vocab_size}));
  ts::Tensor expected = reference_logits(to_hf_layout(m, true), c, idx);
  EXPECT_TRUE(ts::testing::all_close(logits, expected, {1e-10, 1e-10}));
  // Dropout probabilities of 0: training mode computes the same.
  m.train();
  EXPECT_TRUE(ts::testing::all_close(m(idx), expected, {1e-10, 1e-10}));
}

TEST(GPT2, LossPathIsCrossEntropyOfTheLogits) {
  GPT2Config c = tiny();
  GPT2 m(c);
  m.to(ts::kFloat64);
  randomize(m, 3);
  ts::Tensor idx = tokens(2, 9, c.vocab_size, 1), targets = tokens(2, 9, c.vocab_size, 2);
  auto [logits, loss] = m.forward(idx, targets);
  ts::Tensor lp = logits.log_softmax(-1).reshape({-1, c.vocab_size});
  double expected = -lp.gather(1, targets.reshape({-1, 1})).mean().item<double>();
  EXPECT_NEAR(loss.item<double>(), expected, 1e-12);
  loss.backward();
  ASSERT_TRUE(m.transformer.wte.weight.grad().defined());
  EXPECT_GT(m.transformer.h.at<ts::models::GPT2Block>(0).attn.c_attn.weight.grad().abs().sum().item<double>(), 0);
  EXPECT_THROW(m.forward(idx, targets.narrow(1, 0, 4)), ts::ShapeError);
}

TEST(GPT2, InputErrors) {
  GPT2Config c = tiny();
  GPT2 m(c);
  EXPECT_THROW(m(ts::zeros({4}, ts::kInt64)), ts::ShapeError);
  EXPECT_THROW(m(ts::zeros({1, 4})), ts::DTypeError);
  EXPECT_TRUE(throws_naming([&] { m(ts::zeros({1, 25}, ts::kInt64)); }, "n_positions"));
  EXPECT_THROW(m(ts::full({1, 3}, 53, ts::kInt64)), ts::IndexError);  // id past the vocabulary
}

// ---- the KV cache and generation --------------------------------------------------------------------

TEST(GPT2, KVCacheGivesTheLogitsOfFullRecomputation) {
  GPT2Config c = tiny(3);
  GPT2 m(c);
  m.to(ts::kFloat64);
  randomize(m, 7);
  m.eval();
  ts::NoGradGuard ng;
  ts::Tensor seq = tokens(2, 20, c.vocab_size, 9);
  ts::models::GPT2KVCache cache;
  // A prompt of 5, then one token at a time, then a chunk of 4 with a past (the bottom-right mask),
  // then single tokens again.
  std::vector<int64_t> chunks = {5, 1, 1, 1, 4, 1, 1, 3, 1, 2};
  int64_t pos = 0;
  for (int64_t n : chunks) {
    ts::Tensor got = m.forward(seq.narrow(1, pos, n), &cache);  // (B, n, V)
    EXPECT_EQ(cache.length(), pos + n);
    ts::Tensor full = m(seq.narrow(1, 0, pos + n)).narrow(1, pos, n);
    EXPECT_TRUE(ts::testing::all_close(got, full, {1e-10, 1e-10})) << "chunk at " << pos << " of " << n;
    pos += n;
  }
  EXPECT_TRUE(throws_naming([&] { m.forward(seq.narrow(1, 0, 5), &cache); }, "n_positions"));  // 20 + 5 > 24
}

TEST(GPT2, GreedyGenerationIsDeterministicAndMatchesArgmaxOfFullRecomputation) {
  GPT2Config c = tiny();
  GPT2 m(c);
  randomize(m, 21);
  ts::Tensor prompt = tokens(2, 4, c.vocab_size, 4);
  ts::models::GenerateOptions greedy{.temperature = 0};
  ts::Tensor a = m.generate(prompt, 12, greedy);
  ts::Tensor b = m.generate(prompt, 12, greedy);
  ASSERT_EQ(a.sizes(), ts::Shape({2, 16}));
  EXPECT_TRUE(ts::equal(a, b));
  EXPECT_TRUE(ts::equal(a.narrow(1, 0, 4), prompt));
  greedy.use_cache = false;
  EXPECT_TRUE(ts::equal(m.generate(prompt, 12, greedy), a));
  // By hand: argmax of the last position of the full forward, token by token.
  ts::Tensor seq = prompt;
  m.eval();
  for (int i = 0; i < 12; ++i) {
    ts::NoGradGuard ng;
    ts::Tensor l = m(seq).select(1, seq.size(1) - 1);
    seq = ts::cat({seq, l.argmax(-1, true)}, 1);
  }
  EXPECT_TRUE(ts::equal(seq, a));
}

TEST(GPT2, GenerationPastTheContextCropsIt) {
  GPT2Config c = tiny();
  GPT2 m(c);
  randomize(m, 5);
  ts::Tensor prompt = tokens(1, 20, c.vocab_size, 8);
  ts::models::GenerateOptions greedy{.temperature = 0};
  ts::Tensor a = m.generate(prompt, 10, greedy);  // 30 > 24 positions
  EXPECT_EQ(a.size(1), 30);
  greedy.use_cache = false;
  EXPECT_TRUE(ts::equal(m.generate(prompt, 10, greedy), a));
}

TEST(GPT2, SeededSamplingIsReproducibleAndRestoresTheMode) {
  GPT2Config c = tiny();
  GPT2 m(c);
  randomize(m, 6);
  m.train();
  ts::Tensor prompt = tokens(3, 2, c.vocab_size, 3);
  ts::models::GenerateOptions o{.temperature = 0.8, .top_k = 10, .top_p = 0.9, .seed = 42};
  ts::Tensor a = m.generate(prompt, 8, o);
  EXPECT_TRUE(ts::equal(m.generate(prompt, 8, o), a));
  EXPECT_TRUE(m.is_training());
  o.seed = 43;
  EXPECT_FALSE(ts::equal(m.generate(prompt, 8, o), a));  // 24 draws: a collision is beyond chance
  // top_k = 1 is greedy.
  EXPECT_TRUE(ts::equal(m.generate(prompt, 8, {.top_k = 1, .seed = 1}), m.generate(prompt, 8, {.temperature = 0})));
}

TEST(GPT2, TopKAndTopPRestrictTheSupport) {
  // Row 0 probabilities 0.05, 0.5, 0.1, 0.2, 0.15 (most likely: 1, 3, 4, 2, 0).
  ts::Tensor p = ts::tensor({0.05, 0.5, 0.1, 0.2, 0.15}, ts::kFloat32).view({1, 5});
  ts::Tensor logits = ts::cat({p.log(), p.flip({1}).log()}, 0);  // row 1 reversed
  auto support = [](const ts::Tensor& l) {
    std::vector<std::vector<int64_t>> rows;
    for (int64_t r = 0; r < l.size(0); ++r) {
      std::vector<int64_t> s;
      std::vector<double> v = l.select(0, r).tolist<double>();
      for (size_t i = 0; i < v.size(); ++i)
        if (std::isfinite(v[i])) s.push_back(static_cast<int64_t>(i));
      rows.push_back(s);
    }
    return rows;
  };
  using Rows = std::vector<std::vector<int64_t>>;
  EXPECT_EQ(support(ts::models::filter_logits(logits, {.top_k = 2})), (Rows{{1, 3}, {1, 3}}));
  EXPECT_EQ(support(ts::models::filter_logits(logits, {.top_k = 3})), (Rows{{1, 3, 4}, {0, 1, 3}}));
  EXPECT_EQ(support(ts::models::filter_logits(logits, {.top_p = 0.45})), (Rows{{1}, {3}}));
  EXPECT_EQ(support(ts::models::filter_logits(logits, {.top_p = 0.65})), (Rows{{1, 3}, {1, 3}}));
  EXPECT_EQ(support(ts::models::filter_logits(logits, {.top_p = 0.8})), (Rows{{1, 3, 4}, {0, 1, 3}}));
  EXPECT_EQ(support(ts::models::filter_logits(logits, {.top_k = 2, .top_p = 0.99})), (Rows{{1, 3}, {1, 3}}));
  EXPECT_EQ(support(ts::models::filter_logits(logits, {.top_p = 1.0})), (Rows{{0, 1, 2, 3, 4}, {0, 1, 2, 3, 4}}));
  // Temperature scales the kept logits.
  EXPECT_TRUE(ts::testing::all_close(ts::models::filter_logits(logits, {.temperature = 0.5}), logits * 2));

  // Draws stay in the support, and both allowed tokens turn up.
  ts::Generator g(3);
  std::set<int64_t> seen0, seen1;
  for (int i = 0; i < 200; ++i) {
    ts::Tensor s = ts::models::sample_next_token(logits, {.top_k = 2}, &g);
    seen0.insert(s[0][0].item<int64_t>());
    seen1.insert(s[1][0].item<int64_t>());
  }
  EXPECT_EQ(seen0, (std::set<int64_t>{1, 3}));
  EXPECT_EQ(seen1, (std::set<int64_t>{1, 3}));
  std::set<int64_t> nucleus;
  for (int i = 0; i < 200; ++i) nucleus.insert(ts::models::sample_next_token(logits, {.top_p = 0.8}, &g)[0][0].item<int64_t>());
  EXPECT_EQ(nucleus, (std::set<int64_t>{1, 3, 4}));
}

TEST(GPT2, GenerateOptionErrors) {
  GPT2 m(tiny());
  ts::Tensor prompt = tokens(1, 3, 53, 1);
  EXPECT_THROW(m.generate(prompt, 2, {.temperature = -1}), ts::ValueError);
  EXPECT_THROW(m.generate(prompt, 2, {.top_k = 0}), ts::ValueError);
  EXPECT_THROW(m.generate(prompt, 2, {.top_p = 0.0}), ts::ValueError);
  EXPECT_THROW(m.generate(prompt, 2, {.top_p = 1.5}), ts::ValueError);
  EXPECT_THROW(m.generate(prompt, -1), ts::ValueError);
  EXPECT_THROW(m.generate(ts::zeros({1, 0}, ts::kInt64), 2), ts::ShapeError);
}

// ---- Hugging Face checkpoints ----------------------------------------------------------------------

TEST(GPT2, LoadsHuggingFaceLayoutWithAndWithoutPrefix) {
  GPT2Config c = tiny();
  GPT2 src(c);
  randomize(src, 99);
  src.eval();
  ts::Tensor idx = tokens(2, 11, c.vocab_size, 2);
  ts::Tensor expected = src(idx);
  fs::path dir = scratch("layout");
  for (bool prefix : {true, false}) {
    fs::path file = dir / (prefix ? "with_prefix.safetensors" : "without_prefix.safetensors");
    ts::save_safetensors(to_hf_layout(src, prefix), file.string());
    GPT2 dst(c);
    dst.eval();
    dst.load_hf_state_dict(file.string());
    for (auto& [name, t] : src.state_dict()) EXPECT_TRUE(ts::equal(dst.state_dict().at(name), t)) << name;
    EXPECT_TRUE(dst.lm_head.weight.is_same(dst.transformer.wte.weight));  // still tied
    EXPECT_TRUE(ts::equal(dst(idx), expected)) << "prefix=" << prefix;
  }
  // An explicit lm_head.weight equal to wte loads; a different one is refused.
  ts::nn::StateDict hf = to_hf_layout(src, true, false);
  hf["lm_head.weight"] = hf.at("transformer.wte.weight").clone();
  GPT2 dst(c);
  dst.load_hf_state_dict(hf);
  EXPECT_TRUE(ts::equal(dst(idx), expected));
  hf["lm_head.weight"] = hf["lm_head.weight"] + 1;
  EXPECT_TRUE(throws_naming([&] { dst.load_hf_state_dict(hf); }, "lm_head.weight"));
  // Float16 checkpoints convert to the model's dtype.
  ts::nn::StateDict half;
  for (auto& [k, t] : to_hf_layout(src, false, false)) half[k] = t.to(ts::kFloat16);
  dst.load_hf_state_dict(half);
  EXPECT_EQ(dst.transformer.wte.weight.dtype(), ts::kFloat32);
  EXPECT_TRUE(ts::testing::all_close(dst.transformer.wte.weight, src.transformer.wte.weight, {1e-3, 1e-4}));
  fs::remove_all(dir);
}

TEST(GPT2, BadCheckpointsRaiseNamingTheTensor) {
  GPT2Config c = tiny();
  GPT2 src(c), dst(c);
  ts::nn::StateDict good = to_hf_layout(src, true);

  ts::nn::StateDict missing = good;
  missing.erase("transformer.h.1.mlp.c_fc.bias");
  EXPECT_TRUE(throws_naming([&] { dst.load_hf_state_dict(missing); }, "transformer.h.1.mlp.c_fc.bias"));
  EXPECT_THROW(dst.load_hf_state_dict(missing), ts::ValueError);

  ts::nn::StateDict unexpected = good;
  unexpected["transformer.h.7.ln_1.weight"] = ts::ones({32});
  EXPECT_TRUE(throws_naming([&] { dst.load_hf_state_dict(unexpected); }, "transformer.h.7.ln_1.weight"));

  // A Conv1D weight left in Linear's (out, in) layout.
  ts::nn::StateDict untransposed = good;
  untransposed["transformer.h.0.attn.c_attn.weight"] = untransposed["transformer.h.0.attn.c_attn.weight"].t().contiguous();
  EXPECT_TRUE(throws_naming([&] { dst.load_hf_state_dict(untransposed); }, "transformer.h.0.attn.c_attn.weight"));
  EXPECT_THROW(dst.load_hf_state_dict(untransposed), ts::ShapeError);

  ts::nn::StateDict wrong_vocab = good;
  wrong_vocab["transformer.wte.weight"] = ts::zeros({54, 32});
  EXPECT_TRUE(throws_naming([&] { dst.load_hf_state_dict(wrong_vocab); }, "transformer.wte.weight"));

  ts::nn::StateDict duplicated = good;
  duplicated["ln_f.bias"] = good.at("transformer.ln_f.bias");
  EXPECT_TRUE(throws_naming([&] { dst.load_hf_state_dict(duplicated); }, "ln_f.bias"));

  EXPECT_THROW(dst.load_hf_state_dict("/nonexistent/model.safetensors"), ts::IOError);
  // A failed load leaves a strict, complete load possible afterwards.
  dst.load_hf_state_dict(good);
}

// ---- against transformers' GPT2LMHeadModel ------------------------------------------------------------

namespace {

std::string python() {
  const char* p = std::getenv("TESSERA_PYTHON");
  return p && *p ? p : "python3";
}

// Runs tests/models/hf_gpt2_reference.py (random GPT2LMHeadModel of `config`, its safetensors and its
// float32 logits for fixed tokens), loads the checkpoint and compares the logits on `device`.
void compare_with_transformers(const std::string& config, ts::Device device) {
  const std::string script = ts::testing::source_path("tests/models/hf_gpt2_reference.py");
  fs::path dir = scratch("hf_" + config);
  std::string cmd = python() + " " + script + " " + dir.string() + " --config " + config;
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  ts::SafetensorsFile ref((dir / "reference.safetensors").string());
  auto meta = [&](const char* k) { return std::stoll(ref.metadata().at(k)); };
  // save_pretrained's folder: config.json and model.safetensors.
  GPT2 m = GPT2::from_pretrained(dir.string());
  EXPECT_EQ(m.config.n_layer, meta("n_layer"));
  EXPECT_EQ(m.config.n_head, meta("n_head"));
  EXPECT_EQ(m.config.n_embd, meta("n_embd"));
  EXPECT_EQ(m.config.n_positions, meta("n_positions"));
  EXPECT_EQ(m.config.vocab_size, meta("vocab_size"));
  EXPECT_EQ(m.config.layer_norm_epsilon, std::stod(ref.metadata().at("layer_norm_epsilon")));
  m.eval();
  m.to(device);
  ts::Tensor expected = ref.get("logits");  // (B, T, V) float32
  ts::Tensor got;
  {
    ts::NoGradGuard ng;
    got = m(ref.get("tokens").to(device)).cpu();
  }
  ASSERT_EQ(got.sizes(), expected.sizes());
  const double scale = expected.abs().max().item<double>();
  const double err = (got - expected).abs().max().item<double>();
  EXPECT_LE(err, 1e-4 * scale) << "max |tessera - transformers| = " << err << ", max |logit| = " << scale;
  EXPECT_TRUE(ts::testing::all_close(got, expected, {1e-4, 1e-4 * scale}));
  // transformers' greedy continuation is greedy here too: each token it chose is an argmax of these
  // logits, up to the tolerance (exact equality of sequences would hinge on near-ties).
  if (ref.contains("greedy")) {
    ts::Tensor seq = ref.get("greedy");  // (1, 4 + new)
    ts::Tensor l;
    {
      ts::NoGradGuard ng;
      l = m(seq.to(device)).cpu().select(0, 0);  // (L, V)
    }
    for (int64_t t = 3; t + 1 < seq.size(1); ++t) {
      const double best = l[t].max().item<double>();
      const double chosen = l[t][seq[0][t + 1].item<int64_t>()].item<double>();
      EXPECT_LE(best - chosen, 1e-4 * scale) << "position " << t;
    }
  }
  fs::remove_all(dir);
}

bool have_transformers() {
  return std::system((python() + " -c 'import transformers, safetensors, torch' > /dev/null 2>&1").c_str()) == 0;
}

}  // namespace

TEST(GPT2, LogitsMatchTransformersSmallConfig) {
  if (!have_transformers()) GTEST_SKIP() << "transformers (with torch and safetensors) is not importable by " << python();
  compare_with_transformers("small", ts::kCPU);
}

TEST(GPT2, LogitsMatchTransformersSmallConfigOnGpu) {
  TS_REQUIRE_GPU();
  if (!have_transformers()) GTEST_SKIP() << "transformers (with torch and safetensors) is not importable by " << python();
  const bool tf32 = ts::cuda::allow_tf32();
  ts::cuda::set_allow_tf32(false);
  compare_with_transformers("small", ts::Device::cuda(0));
  ts::cuda::set_allow_tf32(tf32);
}

// GPT-2 small's configuration (random weights, nothing downloaded); ~1 GB of files. Asked for with
// TESSERA_TEST_GPT2_124M=1.
TEST(GPT2, LogitsMatchTransformers124MConfig) {
  if (!std::getenv("TESSERA_TEST_GPT2_124M")) GTEST_SKIP() << "set TESSERA_TEST_GPT2_124M=1 to run the 124M comparison";
  if (!have_transformers()) GTEST_SKIP() << "transformers (with torch and safetensors) is not importable by " << python();
  compare_with_transformers("124m", ts::cuda::is_available() ? ts::Device::cuda(0) : ts::kCPU);
}

TEST(GPT2, CudaForwardAndCachedGenerationMatchCpu) {
  TS_REQUIRE_GPU();
  GPT2Config c = tiny();
  GPT2 m(c);
  randomize(m, 12);
  m.eval();
  ts::Tensor idx = tokens(2, 15, c.vocab_size, 3);
  ts::Tensor cpu_logits = m(idx);
  ts::Tensor cpu_gen = m.generate(idx.narrow(1, 0, 3), 10, {.temperature = 0});
  const bool tf32 = ts::cuda::allow_tf32();
  ts::cuda::set_allow_tf32(false);
  m.to("cuda");
  EXPECT_TRUE(ts::testing::all_close(m(idx.cuda()).cpu(), cpu_logits, {1e-4, 1e-5}));
  EXPECT_TRUE(ts::equal(m.generate(idx.narrow(1, 0, 3).cuda(), 10, {.temperature = 0}).cpu(), cpu_gen));
  ts::Tensor sampled = m.generate(idx.cuda(), 4, {.top_k = 5, .top_p = 0.9, .seed = 1});
  EXPECT_TRUE(sampled.is_cuda());
  ts::cuda::set_allow_tf32(tf32);
}
