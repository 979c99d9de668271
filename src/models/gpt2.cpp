// GPT-2 built from nn, laid out as Hugging Face's GPT2LMHeadModel (include/tessera/models/gpt2.h).
// Shapes: B batch, T new tokens, S = cached + new tokens, C = n_embd, H = n_head, D = C / H, V vocab.
// Every step is a tessera op, so the model runs on any device and autograd differentiates it.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>
#include <tuple>

#include <nlohmann/json.hpp>

#include "tessera/autograd.h"
#include "tessera/functions.h"
#include "tessera/models.h"
#include "tessera/safetensors.h"
#include "tessera/utils/checkpoint.h"

namespace tessera::models {

// ---- configuration ---------------------------------------------------------------------------------

void GPT2Config::validate() const {
  const char* op = "GPT2Config";
  TS_CHECK(n_layer >= 0, ValueError, op, ": n_layer must be >= 0, got ", n_layer);
  TS_CHECK(n_head > 0 && n_embd > 0, ValueError, op, ": n_head and n_embd must be positive, got ", n_head, " and ",
           n_embd);
  TS_CHECK(n_embd % n_head == 0, ValueError, op, ": n_embd (", n_embd, ") must be divisible by n_head (", n_head, ")");
  TS_CHECK(n_positions > 0 && vocab_size > 0, ValueError, op, ": n_positions and vocab_size must be positive, got ",
           n_positions, " and ", vocab_size);
  TS_CHECK(n_inner >= 0, ValueError, op, ": n_inner must be >= 0 (0: 4 * n_embd), got ", n_inner);
  for (double p : {attn_pdrop, resid_pdrop, embd_pdrop})
    TS_CHECK(p >= 0 && p <= 1, ValueError, op, ": dropout probabilities must be in [0, 1], got ", p);
}

int64_t GPT2Config::num_parameters() const {
  const int64_t c = n_embd, b = bias ? 1 : 0;
  const int64_t ln = c + b * c;
  const int64_t f = inner();
  const int64_t block = ln + (c * 3 * c + b * 3 * c) + (c * c + b * c)  // ln_1, c_attn, attn.c_proj
                        + ln + (c * f + b * f) + (f * c + b * c);       // ln_2, c_fc, mlp.c_proj
  return vocab_size * c + n_positions * c + n_layer * block + ln;  // lm_head is wte
}

GPT2Config GPT2Config::from_hf_json(const std::string& path) {
  const char* op = "GPT2Config.from_hf_json";
  std::ifstream in(path);
  TS_CHECK(in.good(), IOError, op, ": cannot open '", path, "'");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    TS_THROW(IOError, op, ": '", path, "' is not valid JSON: ", e.what());
  }
  TS_CHECK(j.is_object(), IOError, op, ": '", path, "' does not hold a JSON object");
  GPT2Config c;
  try {
    if (j.contains("model_type"))
      TS_CHECK(j["model_type"] == "gpt2", ValueError, op, ": model_type is ", j["model_type"].dump(), ", expected \"gpt2\"");
    auto get_int = [&](const char* k, int64_t& v) {
      if (j.contains(k) && !j[k].is_null()) v = j[k].get<int64_t>();
    };
    auto get_double = [&](const char* k, double& v) {
      if (j.contains(k) && !j[k].is_null()) v = j[k].get<double>();
    };
    get_int("n_layer", c.n_layer);
    get_int("n_head", c.n_head);
    get_int("n_embd", c.n_embd);
    get_int("n_positions", c.n_positions);
    get_int("vocab_size", c.vocab_size);
    get_int("n_inner", c.n_inner);
    get_double("layer_norm_epsilon", c.layer_norm_epsilon);
    get_double("attn_pdrop", c.attn_pdrop);
    get_double("resid_pdrop", c.resid_pdrop);
    get_double("embd_pdrop", c.embd_pdrop);
    get_double("initializer_range", c.initializer_range);
    if (j.contains("activation_function")) {
      const std::string act = j["activation_function"].get<std::string>();
      TS_CHECK(act == "gelu_new" || act == "gelu_pytorch_tanh", ValueError, op, ": activation_function \"", act,
               "\" is not implemented (GELU with the tanh approximation: gelu_new, gelu_pytorch_tanh)");
    }
    TS_CHECK(!j.contains("scale_attn_weights") || j["scale_attn_weights"].get<bool>(), ValueError, op,
             ": scale_attn_weights = false is not implemented");
    TS_CHECK(!j.contains("scale_attn_by_inverse_layer_idx") || !j["scale_attn_by_inverse_layer_idx"].get<bool>(),
             ValueError, op, ": scale_attn_by_inverse_layer_idx = true is not implemented");
  } catch (const nlohmann::json::exception& e) {
    TS_THROW(ValueError, op, ": '", path, "': a field has the wrong type: ", e.what());
  }
  c.validate();
  return c;
}

namespace {

// Hugging Face's _init_weights: N(0, 0.02) for Linear and Embedding weights, zero biases, LayerNorm
// (1, 0); GPT-2's residual projections scaled by 1 / sqrt(2 n_layer) (one per sublayer).
void init_linear(nn::Linear& l, double std) {
  nn::init::normal_(l.weight, 0.0, std);
  if (l.bias.defined()) nn::init::zeros_(l.bias);
}

}  // namespace

// ---- attention, MLP, block ------------------------------------------------------------------------

GPT2Attention::GPT2Attention(const GPT2Config& cfg)
    : n_head(cfg.n_head), n_embd(cfg.n_embd), attn_pdrop(cfg.attn_pdrop), c_attn(cfg.n_embd, 3 * cfg.n_embd, cfg.bias),
      c_proj(cfg.n_embd, cfg.n_embd, cfg.bias), resid_dropout(cfg.resid_pdrop) {
  register_modules({{"c_attn", c_attn}, {"c_proj", c_proj}, {"resid_dropout", resid_dropout}});
  init_linear(c_attn, cfg.initializer_range);
  init_linear(c_proj, cfg.initializer_range / std::sqrt(2.0 * static_cast<double>(std::max<int64_t>(cfg.n_layer, 1))));
}

Tensor GPT2Attention::forward(const Tensor& x, GPT2LayerCache* cache) {
  TS_CHECK(x.dim() == 3 && x.size(2) == n_embd, ShapeError, "GPT2Attention: expected input (B, T, ", n_embd, "), got ",
           x.sizes());
  const int64_t b = x.size(0), t = x.size(1), d = n_embd / n_head;
  std::vector<Tensor> qkv = c_attn(x).split(n_embd, 2);  // 3 x (B, T, C)
  auto heads = [&](const Tensor& y) { return y.view({b, t, n_head, d}).transpose(1, 2); };  // (B, H, T, D)
  Tensor q = heads(qkv[0]), k = heads(qkv[1]), v = heads(qkv[2]);
  int64_t past = 0;
  if (cache) {
    if (cache->k.defined()) {
      past = cache->k.size(2);
      k = cat({cache->k, k}, 2);  // (B, H, S, D)
      v = cat({cache->v, v}, 2);
    }
    cache->k = k;
    cache->v = v;
  }
  const double p = is_training() ? attn_pdrop : 0.0;
  Tensor y;
  if (past == 0) {
    y = nn::functional::scaled_dot_product_attention(q, k, v, std::nullopt, p, /*is_causal=*/true);
  } else if (t == 1) {
    y = nn::functional::scaled_dot_product_attention(q, k, v, std::nullopt, p);  // the new token sees all
  } else {
    // Query i is at position past + i: it may attend to keys j <= past + i (bottom-right aligned,
    // which is_causal, aligned top-left as PyTorch's, does not give when S > T).
    const int64_t s = k.size(2);
    Tensor allowed = arange(s, TensorOptions(kInt64, x.device())).unsqueeze(0) <=
                     arange(past, past + t, 1, TensorOptions(kInt64, x.device())).unsqueeze(1);  // (T, S)
    y = nn::functional::scaled_dot_product_attention(q, k, v, allowed, p);
  }
  y = y.transpose(1, 2).reshape({b, t, n_embd});  // (B, T, C)
  return resid_dropout(c_proj(y));
}

GPT2MLP::GPT2MLP(const GPT2Config& cfg)
    : c_fc(cfg.n_embd, cfg.inner(), cfg.bias), c_proj(cfg.inner(), cfg.n_embd, cfg.bias), dropout(cfg.resid_pdrop),
      fused(cfg.fused) {
  register_modules({{"c_fc", c_fc}, {"c_proj", c_proj}, {"dropout", dropout}});
  init_linear(c_fc, cfg.initializer_range);
  init_linear(c_proj, cfg.initializer_range / std::sqrt(2.0 * static_cast<double>(std::max<int64_t>(cfg.n_layer, 1))));
}

namespace {
std::optional<Tensor> opt(const Tensor& t) { return t.defined() ? std::optional<Tensor>(t) : std::nullopt; }

// (a + residual, ln(a + residual)) in one fused op.
std::tuple<Tensor, Tensor> add_ln(const Tensor& a, const Tensor& residual, nn::LayerNorm& ln) {
  return nn::functional::add_layer_norm(a, residual, ln.normalized_shape, opt(ln.weight), opt(ln.bias), ln.eps);
}
}  // namespace

// c_fc, GELU and c_proj in one op: on CUDA the GELU runs in c_fc's GEMM epilogue (linear_gelu) and its
// derivative in the epilogue of c_proj's input-gradient GEMM.
Tensor GPT2MLP::forward(Tensor x) {
  if (!fused) return dropout(c_proj(nn::functional::gelu(c_fc(x), "tanh")));
  return dropout(nn::functional::mlp_gelu(x, c_fc.weight, opt(c_fc.bias), c_proj.weight, opt(c_proj.bias)));
}

GPT2Block::GPT2Block(const GPT2Config& cfg)
    : ln_1(Shape{cfg.n_embd}, cfg.layer_norm_epsilon, true, cfg.bias), attn(cfg),
      ln_2(Shape{cfg.n_embd}, cfg.layer_norm_epsilon, true, cfg.bias), mlp(cfg) {
  register_modules({{"ln_1", ln_1}, {"attn", attn}, {"ln_2", ln_2}, {"mlp", mlp}});
}

Tensor GPT2Block::forward(const Tensor& x, GPT2LayerCache* cache) {
  if (!mlp.fused) {
    Tensor y = x + attn.forward(ln_1(x), cache);
    return y + mlp(ln_2(y));
  }
  auto [y, y_ln] = add_ln(x, attn.forward(ln_1(x), cache), ln_2);  // y = x + attn(ln_1(x)), ln_2(y)
  return y + mlp(y_ln);
}

std::pair<Tensor, Tensor> GPT2Block::forward_fused(const Tensor& x, const Tensor& x_ln, nn::LayerNorm& next,
                                                   GPT2LayerCache* cache) {
  auto [y, y_ln] = add_ln(x, attn.forward(x_ln, cache), ln_2);
  auto [out, out_ln] = add_ln(y, mlp(y_ln), next);
  return {out, out_ln};
}

// ---- the trunk and the LM head ---------------------------------------------------------------------

GPT2Model::GPT2Model(const GPT2Config& cfg)
    : config((cfg.validate(), cfg)), wte(cfg.vocab_size, cfg.n_embd), wpe(cfg.n_positions, cfg.n_embd),
      drop(cfg.embd_pdrop), ln_f(Shape{cfg.n_embd}, cfg.layer_norm_epsilon, true, cfg.bias) {
  for (int64_t i = 0; i < cfg.n_layer; ++i) h.append(GPT2Block(cfg));
  register_modules({{"wte", wte}, {"wpe", wpe}, {"drop", drop}, {"h", h}, {"ln_f", ln_f}});
  nn::init::normal_(wte.weight, 0.0, cfg.initializer_range);
  nn::init::normal_(wpe.weight, 0.0, cfg.initializer_range);
}

Tensor GPT2Model::forward(const Tensor& idx, GPT2KVCache* cache) {
  const char* op = "GPT2";
  TS_CHECK(idx.defined() && idx.dim() == 2, ShapeError, op, ": expected token ids (B, T), got ",
           idx.defined() ? idx.sizes() : Shape{});
  TS_CHECK(idx.dtype() == kInt64 || idx.dtype() == kInt32, DTypeError, op, ": token ids must be int64 or int32, got ",
           dtype_name(idx.dtype()));
  const int64_t t = idx.size(1);
  const int64_t past = cache ? cache->length() : 0;
  TS_CHECK(past + t <= config.n_positions, ValueError, op, ": cannot forward a sequence of length ", past + t,
           (past ? " (cached " + std::to_string(past) + " + new " + std::to_string(t) + ")" : std::string()),
           ", the context is only ", config.n_positions, " (n_positions)");
  if (cache && cache->layers.size() != h.size()) {
    TS_CHECK(past == 0, ValueError, op, ": the cache holds ", cache->layers.size(), " layers, the model ", h.size());
    cache->layers.assign(h.size(), GPT2LayerCache{});
  }
  Tensor pos = arange(past, past + t, 1, TensorOptions(kInt64, idx.device()));  // (T)
  Tensor x = drop(wte(idx) + wpe(pos));                                         // (B, T, C)
  if (h.size() == 0) return ln_f(x);
  const bool ckpt = config.gradient_checkpointing && is_training() && is_grad_enabled() && !cache;
  const utils::CheckpointOptions ckpt_options{.use_reentrant = config.gradient_checkpointing_use_reentrant};
  if (!h.at<GPT2Block>(0).mlp.fused) {  // the blocks' flag (GPT2Config::fused when they were built)
    for (size_t i = 0; i < h.size(); ++i) {
      GPT2Block& block = h.at<GPT2Block>(static_cast<int64_t>(i));
      if (ckpt) x = utils::checkpoint([&block](const Tensor& in) { return block.forward(in, nullptr); }, x, ckpt_options);
      else x = block.forward(x, cache ? &cache->layers[i] : nullptr);
    }
    return ln_f(x);
  }
  // Each residual add runs fused with the layer norm after it: ln_2 inside a block, then the next
  // block's ln_1 (ln_f after the last block). The sums are HF's: x + attn, then + mlp.
  Tensor x_ln = h.at<GPT2Block>(0).ln_1(x);
  for (size_t i = 0; i < h.size(); ++i) {
    nn::LayerNorm& next = i + 1 < h.size() ? h.at<GPT2Block>(static_cast<int64_t>(i + 1)).ln_1 : ln_f;
    GPT2Block& block = h.at<GPT2Block>(static_cast<int64_t>(i));
    if (ckpt) {
      std::vector<Tensor> out = utils::checkpoint(
          [&block, &next](const std::vector<Tensor>& in) {
            auto [y, y_ln] = block.forward_fused(in[0], in[1], next, nullptr);
            return std::vector<Tensor>{y, y_ln};
          },
          {x, x_ln}, ckpt_options);
      x = out[0];
      x_ln = out[1];
    } else {
      std::tie(x, x_ln) = block.forward_fused(x, x_ln, next, cache ? &cache->layers[i] : nullptr);
    }
  }
  return x_ln;
}

GPT2::GPT2(const GPT2Config& cfg)
    : config((cfg.validate(), cfg)), transformer(cfg), lm_head(cfg.n_embd, cfg.vocab_size, /*bias=*/false) {
  register_modules({{"transformer", transformer}, {"lm_head", lm_head}});
  lm_head.weight = transformer.wte.weight;  // tied: one Parameter (Note [Module registration])
}

Tensor GPT2::forward(const Tensor& idx, GPT2KVCache* cache) { return lm_head(transformer.forward(idx, cache)); }

std::pair<Tensor, Tensor> GPT2::forward(const Tensor& idx, const Tensor& targets) {
  Tensor logits = forward(idx, nullptr);  // (B, T, V)
  TS_CHECK(targets.defined() && targets.sizes() == idx.sizes(), ShapeError, "GPT2: targets must be shaped as the ids ",
           idx.sizes(), ", got ", targets.defined() ? targets.sizes() : Shape{});
  Tensor loss = nn::functional::cross_entropy(logits.reshape({-1, config.vocab_size}), targets.reshape({-1}));
  return {logits, loss};
}

Tensor GPT2::loss(const Tensor& idx, const Tensor& targets, int64_t chunk_rows) {
  TS_CHECK(targets.defined() && idx.defined() && targets.sizes() == idx.sizes(), ShapeError,
           "GPT2: targets must be shaped as the ids ", idx.defined() ? idx.sizes() : Shape{}, ", got ",
           targets.defined() ? targets.sizes() : Shape{});
  Tensor hidden = transformer.forward(idx, nullptr);  // (B, T, C)
  return nn::functional::linear_cross_entropy(hidden.reshape({-1, config.n_embd}), lm_head.weight,
                                              targets.reshape({-1}), -100, "mean", chunk_rows);
}

// ---- sampling ---------------------------------------------------------------------------------------

namespace {
void check_generate_options(const GenerateOptions& o) {
  const char* op = "GPT2.generate";
  TS_CHECK(o.temperature >= 0 && std::isfinite(o.temperature), ValueError, op,
           ": temperature must be a finite number >= 0, got ", o.temperature);
  TS_CHECK(!o.top_k || *o.top_k > 0, ValueError, op, ": top_k must be positive, got ", o.top_k.value_or(0));
  TS_CHECK(!o.top_p || (*o.top_p > 0 && *o.top_p <= 1), ValueError, op, ": top_p must be in (0, 1], got ",
           o.top_p.value_or(0));
}
}  // namespace

Tensor filter_logits(const Tensor& logits, const GenerateOptions& o) {
  check_generate_options(o);
  TS_CHECK(logits.dim() == 2, ShapeError, "filter_logits: expected logits (B, V), got ", logits.sizes());
  Tensor l = o.temperature > 0 ? logits / o.temperature : logits;
  const int64_t v = l.size(1);
  if (o.top_k && *o.top_k < v) {
    auto [vals, idx] = l.topk(*o.top_k, -1);                            // (B, k), descending
    Tensor kth = vals.narrow(1, *o.top_k - 1, 1);                       // (B, 1)
    l = l.masked_fill(l < kth, -INFINITY);                              // ties with the k-th stay
  }
  if (o.top_p && *o.top_p < 1) {
    auto [sorted, order] = l.sort(-1, /*descending=*/true);             // (B, V)
    Tensor probs = sorted.softmax(-1, sorted.dtype() == kFloat64 ? kFloat64 : kFloat32);
    Tensor before = probs.cumsum(-1) - probs;                           // mass of the more likely tokens
    Tensor drop_sorted = before >= *o.top_p;                            // the first token never drops
    Tensor drop = zeros_like(drop_sorted).scatter(-1, order, drop_sorted);
    l = l.masked_fill(drop, -INFINITY);
  }
  return l;
}

Tensor sample_next_token(const Tensor& logits, const GenerateOptions& o, Generator* gen) {
  check_generate_options(o);
  TS_CHECK(logits.dim() == 2, ShapeError, "sample_next_token: expected logits (B, V), got ", logits.sizes());
  if (o.temperature == 0) return logits.argmax(-1, /*keepdim=*/true);  // (B, 1)
  Tensor l = filter_logits(logits, o);
  Tensor probs = l.softmax(-1, l.dtype() == kFloat64 ? kFloat64 : kFloat32);
  return multinomial(probs, 1, false, gen);  // (B, 1)
}

Tensor GPT2::generate(const Tensor& idx, int64_t max_new_tokens, const GenerateOptions& opts) {
  check_generate_options(opts);
  TS_CHECK(max_new_tokens >= 0, ValueError, "GPT2.generate: max_new_tokens must be >= 0, got ", max_new_tokens);
  TS_CHECK(idx.defined() && idx.dim() == 2 && idx.size(1) > 0, ShapeError,
           "GPT2.generate: expected a non-empty prompt (B, T), got ", idx.defined() ? idx.sizes() : Shape{});
  NoGradGuard no_grad;
  struct ModeRestore {
    nn::Module& m;
    bool was;
    ~ModeRestore() { m.train(was); }
  } restore{*this, is_training()};
  eval();
  Generator local(opts.seed.value_or(0));
  Generator* gen = opts.seed ? &local : nullptr;

  const int64_t ctx = config.n_positions;
  Tensor out = idx.to(kInt64);  // (B, T + generated)
  GPT2KVCache cache;
  Tensor feed = out;  // what the cache has not seen yet
  for (int64_t step = 0; step < max_new_tokens; ++step) {
    Tensor logits;
    if (!opts.use_cache || cache.length() + feed.size(1) > ctx) {
      // Recompute from the last n_positions tokens; the cache restarts from them.
      cache.clear();
      Tensor window = out.size(1) > ctx ? out.narrow(1, out.size(1) - ctx, ctx) : out;
      logits = forward(window, opts.use_cache ? &cache : nullptr);
    } else {
      logits = forward(feed, &cache);
    }
    Tensor last = logits.select(1, logits.size(1) - 1);  // (B, V)
    if (last.dtype() == kFloat16 || last.dtype() == kBFloat16) last = last.to(kFloat32);
    Tensor next = sample_next_token(last, opts, gen);  // (B, 1)
    out = cat({out, next}, 1);
    feed = next;
  }
  return out;
}

// ---- Hugging Face checkpoints -----------------------------------------------------------------------

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Note [GPT-2 Conv1D layout].
bool is_conv1d_weight(const std::string& name) {
  return ends_with(name, ".attn.c_attn.weight") || ends_with(name, ".attn.c_proj.weight") ||
         ends_with(name, ".mlp.c_fc.weight") || ends_with(name, ".mlp.c_proj.weight");
}

// The causal-mask buffers older transformers versions save with the weights.
bool is_mask_buffer(const std::string& name) { return ends_with(name, ".attn.bias") || ends_with(name, ".attn.masked_bias"); }

std::string join(const std::vector<std::string>& names) {
  std::string s;
  for (size_t i = 0; i < names.size() && i < 20; ++i) s += (i ? ", '" : "'") + names[i] + "'";
  if (names.size() > 20) s += ", ... (" + std::to_string(names.size()) + " in all)";
  return s;
}

}  // namespace

void GPT2::load_hf_state_dict(const std::string& path) { load_hf_state_dict(load_safetensors(path)); }

GPT2 GPT2::from_pretrained(const std::string& dir) {
  const std::filesystem::path d(dir);
  GPT2 m(GPT2Config::from_hf_json((d / "config.json").string()));
  m.load_hf_state_dict((d / "model.safetensors").string());
  return m;
}

void GPT2::load_hf_state_dict(const nn::StateDict& hf) {
  const char* op = "GPT2.load_hf_state_dict";
  nn::StateDict own = state_dict();
  nn::StateDict mapped;
  std::map<std::string, std::string> source;  // tessera name -> the file's name
  std::vector<std::string> unexpected;
  for (const auto& [key, value] : hf) {
    if (is_mask_buffer(key)) continue;
    std::string name = key.rfind("transformer.", 0) == 0 || key == "lm_head.weight" ? key : "transformer." + key;
    auto it = own.find(name);
    if (it == own.end()) {
      unexpected.push_back(key);
      continue;
    }
    TS_CHECK(!source.count(name), ValueError, op, ": '", key, "' and '", source[name],
             "' name the same tensor (with and without the 'transformer.' prefix)");
    source[name] = key;
    TS_CHECK(value.defined(), ValueError, op, ": '", key, "' is an undefined tensor");
    const bool conv1d = is_conv1d_weight(name);
    const Shape& want = it->second.sizes();
    const Shape expected_in_file = conv1d ? Shape{want[1], want[0]} : want;
    TS_CHECK(value.sizes() == expected_in_file, ShapeError, op, ": size mismatch for '", key, "': the checkpoint has ",
             value.sizes(), ", the model expects ", expected_in_file,
             conv1d ? " (Hugging Face's Conv1D layout, (in, out))" : "");
    mapped[name] = conv1d ? value.t().contiguous() : value;
  }
  TS_CHECK(unexpected.empty(), ValueError, op, ": unexpected tensor(s) in the checkpoint: ", join(unexpected));
  std::vector<std::string> missing;
  for (const auto& [name, t] : own)
    if (!mapped.count(name) && name != "lm_head.weight") missing.push_back(name);
  TS_CHECK(missing.empty(), ValueError, op, ": missing tensor(s) in the checkpoint: ", join(missing),
           " (names as in Hugging Face's GPT2LMHeadModel, the 'transformer.' prefix optional)");
  if (auto it = mapped.find("lm_head.weight"); it != mapped.end()) {
    // The model ties lm_head to wte: a checkpoint whose head differs cannot be represented.
    const Tensor& wte = mapped.at("transformer.wte.weight");
    TS_CHECK(equal(it->second.to(wte.device(), wte.dtype()), wte), ValueError, op,
             ": 'lm_head.weight' differs from the token embedding '", source["transformer.wte.weight"],
             "'; this model ties them");
  } else {
    mapped["lm_head.weight"] = mapped.at("transformer.wte.weight");
  }
  load_state_dict(mapped, /*strict=*/true);
}

}  // namespace tessera::models
