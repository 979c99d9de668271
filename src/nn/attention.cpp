// MultiheadAttention: PyTorch's module, its projections and masks around
// nn::functional::scaled_dot_product_attention (an op of the table, src/ops/attention_functional.cpp).
// Note [Mask polarity] (in that file): here a bool attn_mask or key_padding_mask is true where
// attention is NOT allowed, as in PyTorch's MultiheadAttention.
#include <cmath>

#include "tessera/functions.h"
#include "tessera/nn/attention.h"
#include "tessera/nn/functional.h"
#include "tessera/nn/init.h"

namespace tessera::nn {

// ---- MultiheadAttention -------------------------------------------------------------------------------

MultiheadAttention::MultiheadAttention(int64_t embed_dim, int64_t num_heads, double dropout, bool bias, bool batch_first)
    : embed_dim(embed_dim), num_heads(num_heads), head_dim(num_heads > 0 ? embed_dim / num_heads : 0),
      dropout(dropout), batch_first(batch_first), out_proj(embed_dim, embed_dim, bias) {
  TS_CHECK(embed_dim > 0 && num_heads > 0, ValueError, "MultiheadAttention: embed_dim and num_heads must be positive, got ",
           embed_dim, " and ", num_heads);
  TS_CHECK(head_dim * num_heads == embed_dim, ValueError, "MultiheadAttention: embed_dim must be divisible by num_heads (",
           embed_dim, " and ", num_heads, ")");
  TS_CHECK(dropout >= 0 && dropout <= 1, ValueError, "MultiheadAttention: dropout must be in [0, 1], got ", dropout);
  in_proj_weight = empty({3 * embed_dim, embed_dim});
  if (bias) in_proj_bias = empty({3 * embed_dim});
  register_parameter("in_proj_weight", in_proj_weight);
  register_parameter("in_proj_bias", in_proj_bias);
  register_module("out_proj", out_proj);
  reset_parameters();
}

void MultiheadAttention::reset_parameters() {
  init::xavier_uniform_(in_proj_weight);
  if (in_proj_bias.defined()) init::zeros_(in_proj_bias);
  if (out_proj.bias.defined()) init::zeros_(out_proj.bias);
}

namespace {
// A bool mask (true = blocked) as an additive float mask; a float mask as is.
Tensor additive(const Tensor& mask, DType dtype) {
  if (mask.dtype() != kBool) return mask.to(dtype);
  return zeros(mask.sizes(), TensorOptions(dtype, mask.device())).masked_fill(mask, -INFINITY);
}
}  // namespace

std::tuple<Tensor, Tensor> MultiheadAttention::forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                                       const std::optional<Tensor>& key_padding_mask, bool need_weights,
                                                       const std::optional<Tensor>& attn_mask,
                                                       bool average_attn_weights, bool is_causal) {
  const char* op = "MultiheadAttention";
  TS_CHECK(query.defined() && key.defined() && value.defined(), ValueError, op, ": got an undefined query, key or value");
  const bool batched = query.dim() == 3;
  TS_CHECK((query.dim() == 3 || query.dim() == 2) && key.dim() == query.dim() && value.dim() == query.dim(), ShapeError,
           op, ": query, key and value must all be 3-D (batched) or 2-D (unbatched), got ", query.sizes(), ", ",
           key.sizes(), ", ", value.sizes());
  // To (L, N, E).
  auto to_lne = [&](const Tensor& t) { return !batched ? t.unsqueeze(1) : (batch_first ? t.transpose(0, 1) : t); };
  Tensor q = to_lne(query), k = to_lne(key), v = to_lne(value);
  const int64_t l = q.size(0), n = q.size(1), s = k.size(0), h = num_heads, hd = head_dim;
  TS_CHECK(q.size(2) == embed_dim, ShapeError, op, ": was expecting embedding dimension of ", embed_dim, ", but got ",
           q.size(2));
  TS_CHECK(k.sizes() == Shape({s, n, embed_dim}) && v.sizes() == k.sizes(), ShapeError, op,
           ": key and value must both be (S, N, E) = (", s, ", ", n, ", ", embed_dim, ") in (seq, batch, embed) order, got ",
           k.sizes(), " and ", v.sizes());

  const DType dt = q.dtype();
  std::vector<Tensor> w = in_proj_weight.chunk(3, 0);
  std::vector<Tensor> b;
  if (in_proj_bias.defined()) b = in_proj_bias.chunk(3, 0);
  auto bias_at = [&](size_t i) { return b.empty() ? std::optional<Tensor>() : std::optional<Tensor>(b[i]); };
  q = functional::linear(q, w[0], bias_at(0));
  k = functional::linear(k, w[1], bias_at(1));
  v = functional::linear(v, w[2], bias_at(2));

  // One additive (N * H, L or 1, S) mask from attn_mask, key_padding_mask and is_causal.
  Tensor mask;
  if (attn_mask && attn_mask->defined()) {
    mask = additive(*attn_mask, dt);
    if (mask.dim() == 2) {
      TS_CHECK(mask.sizes() == Shape({l, s}), ShapeError, op, ": The shape of the 2D attn_mask is ", mask.sizes(),
               ", but should be ", Shape({l, s}), ".");
      mask = mask.unsqueeze(0);
    } else {
      TS_CHECK(mask.dim() == 3 && mask.sizes() == Shape({n * h, l, s}), ShapeError, op, ": The shape of the 3D attn_mask is ",
               mask.sizes(), ", but should be ", Shape({n * h, l, s}), ".");
    }
  } else if (is_causal) {
    const TensorOptions pos(kInt64, q.device());
    const Tensor blocked = arange(s, pos).unsqueeze(0) > arange(l, pos).unsqueeze(1);  // key j after query i
    mask = additive(blocked, dt).unsqueeze(0);
  }
  if (key_padding_mask && key_padding_mask->defined()) {
    Tensor kpm = batched ? *key_padding_mask : key_padding_mask->unsqueeze(0);
    TS_CHECK(kpm.sizes() == Shape({n, s}), ShapeError, op, ": expected key_padding_mask of shape ", Shape({n, s}),
             ", but got ", kpm.sizes());
    kpm = additive(kpm, dt).view({n, 1, 1, s}).expand({n, h, 1, s}).reshape({n * h, 1, s});
    mask = mask.defined() ? mask + kpm : kpm;
  }

  q = q.reshape({l, n * h, hd}).transpose(0, 1);  // (N * H, L, hd)
  k = k.reshape({s, n * h, hd}).transpose(0, 1);  // (N * H, S, hd)
  v = v.reshape({s, n * h, hd}).transpose(0, 1);
  Tensor scores = bmm(q * (1.0 / std::sqrt(static_cast<double>(hd))), k.transpose(1, 2));  // (N * H, L, S)
  if (mask.defined()) scores = scores + mask;
  Tensor weights = softmax(scores, -1);
  if (is_training() && dropout > 0) weights = functional::dropout(weights, dropout, true, generator);
  Tensor out = bmm(weights, v).transpose(0, 1).reshape({l * n, embed_dim});  // (L * N, E)
  out = out_proj(out).view({l, n, embed_dim});

  Tensor avg;
  if (need_weights) {
    avg = weights.view({n, h, l, s});
    if (average_attn_weights) avg = avg.mean(1);
    if (!batched) avg = avg.squeeze(0);
  }
  if (!batched) out = out.squeeze(1);
  else if (batch_first) out = out.transpose(0, 1);
  return {out, avg};
}

std::string MultiheadAttention::extra_repr() const {
  return detail::str_cat("embed_dim=", embed_dim, ", num_heads=", num_heads, ", dropout=", dropout,
                         ", batch_first=", batch_first ? "True" : "False");
}

}  // namespace tessera::nn
