// Attention: functional scaled_dot_product_attention, an op of the table (it opens its OpScope;
// MultiheadAttention, in src/nn/attention.cpp, calls it). Both follow the math of
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
#include "ops/nn_functional_ops.h"
#include "ops/op_scope.h"
#include "tessera/cuda.h"
#include "tessera/functions.h"

namespace tessera::op {
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
  OpScope scope(OpId::scaled_dot_product_attention, {&q, &k, &v, attn_mask ? &*attn_mask : nullptr});
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

}  // namespace tessera::op
