// GPT-2 (Radford et al. 2019) as Hugging Face's GPT2LMHeadModel lays it out, so that its state_dict
// names read the same ("transformer.h.0.attn.c_attn.weight", "lm_head.weight", ...) and a Hugging
// Face safetensors checkpoint loads through load_hf_state_dict(). Pre-norm blocks, GELU (tanh),
// causal self-attention through nn::functional::scaled_dot_product_attention, the LM head tied to the
// token embedding (one Parameter under two names). Device-agnostic: every step is a tessera op.
//
// Note [GPT-2 Conv1D layout]: Hugging Face's GPT-2 uses Conv1D, a linear layer whose weight is stored
// (in, out); tessera uses nn::Linear, (out, in). The four projections (attn.c_attn, attn.c_proj,
// mlp.c_fc, mlp.c_proj) are transposed on loading; everything else loads as is.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tessera/generator.h"
#include "tessera/nn.h"

namespace tessera::models {

struct GPT2Config {
  int64_t n_layer = 12;
  int64_t n_head = 12;
  int64_t n_embd = 768;
  int64_t n_positions = 1024;  // the longest context
  int64_t vocab_size = 50257;
  double layer_norm_epsilon = 1e-5;
  double attn_pdrop = 0.1;   // dropout of the attention probabilities (Hugging Face's default)
  double resid_pdrop = 0.1;  // after each block's output projection
  double embd_pdrop = 0.1;   // after the token + position embedding
  bool bias = true;          // biases of the Linear layers and LayerNorms
  int64_t n_inner = 0;       // the MLP's hidden width; 0: 4 * n_embd
  double initializer_range = 0.02;
  // The fused kernels: each residual add with the layer norm after it (add_layer_norm) and the MLP as
  // mlp_gelu (GELU in the GEMM epilogues on CUDA). false: the composite ops as Hugging Face writes them
  // (x + attn, ln_2, c_fc, gelu, c_proj), for comparing the two paths. Not part of a checkpoint; read
  // when the model is built (each GPT2MLP keeps it, and the trunk follows its blocks).
  bool fused = true;
  // Activation checkpointing of every block (Hugging Face's gradient_checkpointing): in training mode
  // with grad on, each block runs under utils::checkpoint, saving only its inputs, and backward runs it
  // again (Note [Checkpoint replay]: dropout draws the same numbers). Memory for compute: the figures
  // are in bench/NOTES.md. Not part of a checkpoint; read at each forward of the trunk.
  bool gradient_checkpointing = false;
  // Which form of utils::checkpoint the blocks use (Hugging Face's gradient_checkpointing_kwargs
  // {"use_reentrant": ...}); false: the non-reentrant form, which also works with autograd::grad.
  bool gradient_checkpointing_use_reentrant = true;

  // Reads a Hugging Face config.json of model_type "gpt2" (GPT2Config's field names). ValueError for
  // a setting this model does not implement (another activation, scale_attn_by_inverse_layer_idx).
  static GPT2Config from_hf_json(const std::string& path);
  int64_t inner() const { return n_inner > 0 ? n_inner : 4 * n_embd; }

  // The parameters of a model of this configuration, the tied LM head counted once; computed without
  // building the model (124,439,808 for the defaults, GPT-2 small).
  int64_t num_parameters() const;
  // ValueError naming the field for a configuration that cannot be built.
  void validate() const;
};

// The cached keys and values of one layer, (B, H, S, head_dim) each, S the tokens seen so far.
struct GPT2LayerCache {
  Tensor k, v;
};

// Per-layer keys and values of the tokens processed so far; the next forward(idx, &cache) places its
// tokens at positions length() .. length() + T - 1 and attends to the cached ones as well. Appending
// concatenates (the cache grows by a copy per step), which keeps it correct under autograd too.
struct GPT2KVCache {
  std::vector<GPT2LayerCache> layers;
  int64_t length() const { return layers.empty() || !layers[0].k.defined() ? 0 : layers[0].k.size(2); }
  void clear() { layers.clear(); }
};

// Causal self-attention: c_attn projects to q, k, v (n_embd each), heads of n_embd / n_head.
class GPT2Attention : public nn::Module {
 public:
  explicit GPT2Attention(const GPT2Config& cfg);
  Tensor forward(Tensor x) override { return forward(x, nullptr); }
  // x (B, T, C) -> (B, T, C). With a cache: appends this call's keys and values to it first.
  Tensor forward(const Tensor& x, GPT2LayerCache* cache);
  std::string name() const override { return "GPT2Attention"; }

  int64_t n_head, n_embd;
  double attn_pdrop;
  nn::Linear c_attn, c_proj;
  nn::Dropout resid_dropout;
};

class GPT2MLP : public nn::Module {
 public:
  explicit GPT2MLP(const GPT2Config& cfg);
  Tensor forward(Tensor x) override;  // c_fc (4 C) -> GELU tanh -> c_proj (C) -> dropout
  std::string name() const override { return "GPT2MLP"; }

  nn::Linear c_fc, c_proj;
  nn::Dropout dropout;
  bool fused = true;  // GPT2Config::fused
};

// x + attn(ln_1(x)), then x + mlp(ln_2(x)).
class GPT2Block : public nn::Module {
 public:
  explicit GPT2Block(const GPT2Config& cfg);
  Tensor forward(Tensor x) override { return forward(x, nullptr); }
  Tensor forward(const Tensor& x, GPT2LayerCache* cache);
  // The block inside the trunk's fused loop: x_ln = ln_1(x) computed by the previous residual add;
  // -> (out, next(out)) with out the block's output and `next` the norm that follows it (the next
  // block's ln_1, or ln_f), each residual add fused with the norm after it (add_layer_norm).
  std::pair<Tensor, Tensor> forward_fused(const Tensor& x, const Tensor& x_ln, nn::LayerNorm& next,
                                          GPT2LayerCache* cache);
  std::string name() const override { return "GPT2Block"; }

  nn::LayerNorm ln_1;
  GPT2Attention attn;
  nn::LayerNorm ln_2;
  GPT2MLP mlp;
};

// The trunk (Hugging Face's GPT2Model): embeddings, blocks, final LayerNorm.
class GPT2Model : public nn::Module {
 public:
  explicit GPT2Model(const GPT2Config& cfg);
  // idx (B, T) integer token ids -> hidden states (B, T, C).
  Tensor forward(Tensor idx) override { return forward(idx, nullptr); }
  Tensor forward(const Tensor& idx, GPT2KVCache* cache);
  std::string name() const override { return "GPT2Model"; }

  GPT2Config config;
  nn::Embedding wte, wpe;
  nn::Dropout drop;
  nn::ModuleList h;  // of GPT2Block
  nn::LayerNorm ln_f;
};

// Sampling settings of GPT2::generate. temperature 0 is greedy (argmax; top_k and top_p ignored).
// top_k keeps the k most likely tokens; top_p keeps the smallest set of most likely tokens whose
// probability reaches p (nucleus sampling; the most likely token always stays). Both may be combined
// (top-k first). seed: draws from a generator of that seed, else from the device's default generator.
struct GenerateOptions {
  double temperature = 1.0;
  std::optional<int64_t> top_k;
  std::optional<double> top_p;
  std::optional<uint64_t> seed;
  bool use_cache = true;  // false: recompute the whole context at every step
};

// logits (B, V) with the tokens outside the top-k / top-p support set to -inf (after dividing by
// temperature > 0). The filtering step of generate(), exposed for tests and custom samplers.
Tensor filter_logits(const Tensor& logits, const GenerateOptions& opts);
// One token per row of logits (B, V): (B, 1) int64.
Tensor sample_next_token(const Tensor& logits, const GenerateOptions& opts, Generator* gen = nullptr);

// Hugging Face's GPT2LMHeadModel: transformer + lm_head (tied to transformer.wte.weight).
class GPT2 : public nn::Module {
 public:
  explicit GPT2(const GPT2Config& cfg = {});
  // idx (B, T) integer token ids, T <= n_positions -> logits (B, T, vocab_size).
  Tensor forward(Tensor idx) override { return forward(idx, nullptr); }
  // With a cache: the tokens continue the cached sequence (positions offset by cache->length()).
  Tensor forward(const Tensor& idx, GPT2KVCache* cache);
  // (logits, mean cross-entropy of logits[b, t] against targets[b, t]); targets (B, T) int64, -100
  // ignored, as Hugging Face's loss after its shift (here the caller passes already shifted targets).
  std::pair<Tensor, Tensor> forward(const Tensor& idx, const Tensor& targets);
  // The same mean cross-entropy alone, through linear_cross_entropy: the logits are held chunk_rows
  // rows at a time, and the gradients of the hidden states and of the (tied) head weight are computed
  // in the forward when they require grad. The default holds a 16 x 1024 batch's (16384, 50257)
  // logits in one chunk (1.6 GB in bfloat16; on an H200, 2% faster than 4096-row chunks, peak memory
  // 10.0 against 7.8 GiB); smaller chunks trade speed for memory.
  Tensor loss(const Tensor& idx, const Tensor& targets, int64_t chunk_rows = 16384);
  std::string name() const override { return "GPT2"; }

  // Continues each row of idx (B, T) by max_new_tokens sampled tokens -> (B, T + max_new_tokens)
  // int64. Runs in eval mode under no_grad (the module's mode is restored). With use_cache, each
  // step feeds only the new token; a context longer than n_positions is cropped to its last
  // n_positions tokens (and the cache rebuilt), as nanoGPT does.
  Tensor generate(const Tensor& idx, int64_t max_new_tokens, const GenerateOptions& opts = {});

  // Loads a Hugging Face GPT2LMHeadModel (or GPT2Model) checkpoint in safetensors format: names with
  // or without the "transformer." prefix, Conv1D weights transposed (Note [GPT-2 Conv1D layout]),
  // the attn.bias / attn.masked_bias mask buffers skipped, lm_head.weight optional (tied). Any
  // missing, unexpected, duplicated or mis-shaped tensor raises (ValueError / ShapeError) naming it.
  void load_hf_state_dict(const std::string& path);
  // The same from tensors already in memory, keyed by their Hugging Face names.
  void load_hf_state_dict(const nn::StateDict& hf);
  // A Hugging Face model folder (save_pretrained's): config.json and model.safetensors.
  static GPT2 from_pretrained(const std::string& dir);

  GPT2Config config;
  GPT2Model transformer;
  nn::Linear lm_head;
};

}  // namespace tessera::models
