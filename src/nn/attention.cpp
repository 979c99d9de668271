// Attention: functional scaled_dot_product_attention and MultiheadAttention, both the math of
// PyTorch's reference path (scores = q k^T * scale + mask, softmax over keys, dropout, times v),
// composed of matmul / softmax / masked_fill so that autograd flows through them.
//
// Note [Mask polarity]: PyTorch's two APIs disagree and tessera keeps both as they are: in
// scaled_dot_product_attention a bool mask is true where attention is ALLOWED; in
// MultiheadAttention (attn_mask and key_padding_mask) a bool mask is true where it is NOT allowed.
// Float masks are added to the scores in both.
//
// scaled_dot_product_attention takes the fused flash attention op (ops/attention_ops.h: no (L, S)
// matrix in memory) on the GPU when it applies: float16 / bfloat16 query, key and value of one
// shape family (3-D or 4-D, no broadcasting), head dim 64 or 128, last dim contiguous, no mask, no
// dropout, compute capability 8.0+, and cuda::flash_sdp_enabled(). Everything else runs the
// composite below (on the CPU too: the CPU flash kernel is the reference of the GPU kernels, not a
// fast path).
#include <cmath>

#include "ops/attention_ops.h"
#include "ops/autocast_hook.h"
#include "tessera/cuda.h"
#include "tessera/functions.h"
#include "tessera/nn/attention.h"
#include "tessera/nn/functional.h"
#include "tessera/nn/init.h"

namespace tessera::nn {
namespace functional {
namespace {
// (L, S) bool, true where key j comes after query i.
Tensor causal_blocked(int64_t l, int64_t s, Device device) {
  return arange(s, TensorOptions(kInt64, device)).unsqueeze(0) > arange(l, TensorOptions(kInt64, device)).unsqueeze(1);
}
}  // namespace

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const std::optional<Tensor>& attn_mask, double dropout_p, bool is_causal,
                                    std::optional<double> scale, Generator* gen) {
  if (autocast_pending()) [[unlikely]]
    if (AutocastArgs c(OpId::scaled_dot_product_attention, {&q, &k, &v, attn_mask ? &*attn_mask : nullptr}); c) return scaled_dot_product_attention(c[0], c[1], c[2], c.opt(3), dropout_p, is_causal, scale, gen);
  const char* op = "scaled_dot_product_attention";
  TS_CHECK(q.defined() && k.defined() && v.defined(), ValueError, op, ": got an undefined query, key or value");
  TS_CHECK(q.dim() >= 2 && k.dim() >= 2 && v.dim() >= 2, ShapeError, op,
           ": query, key and value must have at least 2 dims, got ", q.sizes(), ", ", k.sizes(), ", ", v.sizes());
  TS_CHECK(q.size(-1) == k.size(-1), ShapeError, op, ": query's last dim (", q.size(-1),
           ") must match key's last dim (", k.size(-1), ")");
  TS_CHECK(k.size(-2) == v.size(-2), ShapeError, op, ": key and value must have the same sequence length, got ",
           k.size(-2), " and ", v.size(-2));
  TS_CHECK(dropout_p >= 0 && dropout_p <= 1, ValueError, op, ": dropout_p must be in [0, 1], got ", dropout_p);
  const bool has_mask = attn_mask && attn_mask->defined();
  TS_CHECK(!(is_causal && has_mask), ValueError, op, ": _scaled_dot_product_attention: Explicit attn_mask should not "
           "be set when is_causal=True");
  const int64_t l = q.size(-2), s = k.size(-2);
  const double sc = scale.value_or(1.0 / std::sqrt(static_cast<double>(q.size(-1))));
  if (q.is_cuda() && cuda::flash_sdp_enabled() && !has_mask && dropout_p == 0 && (q.dim() == 3 || q.dim() == 4) &&
      k.dim() == q.dim() && v.dim() == q.dim() && q.stride(-1) == 1 && k.stride(-1) == 1 && v.stride(-1) == 1) {
    const bool lift = q.dim() == 3;  // (H, L, D) -> (1, H, L, D)
    const Tensor q4 = lift ? q.unsqueeze(0) : q, k4 = lift ? k.unsqueeze(0) : k, v4 = lift ? v.unsqueeze(0) : v;
    if (flash_attention_supported(q4, k4, v4)) {
      Tensor out = std::get<0>(flash_attention_forward(q4, k4, v4, is_causal, sc));
      return lift ? out.squeeze(0) : out;
    }
  }
  Tensor scores = matmul(q, k.transpose(-2, -1)) * sc;  // (..., L, S)
  if (is_causal) scores = scores.masked_fill(causal_blocked(l, s, q.device()), -INFINITY);
  if (has_mask) {
    // Note [Mask polarity]: true = may attend here.
    if (attn_mask->dtype() == kBool) scores = scores.masked_fill(attn_mask->logical_not(), -INFINITY);
    else scores = scores + *attn_mask;
  }
  Tensor attn = tessera::softmax(scores, -1);
  if (dropout_p > 0) attn = dropout(attn, dropout_p, true, gen);
  return matmul(attn, v);
}

}  // namespace functional

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
    mask = additive(functional::causal_blocked(l, s, q.device()), dt).unsqueeze(0);
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
