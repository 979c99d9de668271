// MultiheadAttention, as torch.nn.MultiheadAttention (embed_dim for queries, keys and values; no
// add_bias_kv / add_zero_attn). Parameters carry PyTorch's names: in_proj_weight (3E, E),
// in_proj_bias (3E), out_proj.weight (E, E), out_proj.bias (E), so state dicts load across.
#pragma once
#include <optional>
#include <string>
#include <tuple>

#include "tessera/generator.h"
#include "tessera/nn/layers.h"
#include "tessera/nn/module.h"

namespace tessera::nn {

class MultiheadAttention : public Module {
 public:
  MultiheadAttention(int64_t embed_dim, int64_t num_heads, double dropout = 0.0, bool bias = true,
                     bool batch_first = false);

  // query (L, N, E), key and value (S, N, E) ((N, L, E) and (N, S, E) with batch_first; (L, E) and
  // (S, E) unbatched). key_padding_mask (N, S): bool, true = ignore that key; or float, added.
  // attn_mask (L, S) or (N * num_heads, L, S): bool, true = may NOT attend; or float, added.
  // is_causal without attn_mask masks keys after the query's position.
  // Returns (output shaped as query, weights (N, L, S) averaged over heads or (N, num_heads, L, S);
  // undefined unless need_weights). Attention dropout applies in training mode only.
  std::tuple<Tensor, Tensor> forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                     const std::optional<Tensor>& key_padding_mask = std::nullopt,
                                     bool need_weights = true, const std::optional<Tensor>& attn_mask = std::nullopt,
                                     bool average_attn_weights = true, bool is_causal = false);
  std::tuple<Tensor, Tensor> operator()(const Tensor& query, const Tensor& key, const Tensor& value,
                                        const std::optional<Tensor>& key_padding_mask = std::nullopt,
                                        bool need_weights = true,
                                        const std::optional<Tensor>& attn_mask = std::nullopt,
                                        bool average_attn_weights = true, bool is_causal = false) {
    // With the module's hooks: args (query, key, value), output (attn_output, attn_weights).
    std::vector<Tensor> out = call_with_hooks({query, key, value}, [&](const std::vector<Tensor>& a) {
      auto [o, w] = forward(a[0], a[1], a[2], key_padding_mask, need_weights, attn_mask, average_attn_weights, is_causal);
      return std::vector<Tensor>{o, w};
    });
    return {out[0], out[1]};
  }
  void reset_parameters();
  std::string extra_repr() const override;

  int64_t embed_dim, num_heads, head_dim;
  double dropout;
  bool batch_first;
  Generator* generator = nullptr;  // for attention dropout; the device default when null
  Tensor in_proj_weight, in_proj_bias;
  Linear out_proj;

 private:
  using Module::forward;  // forward(input) raises: attention takes query, key, value (private)
};

}  // namespace tessera::nn
