// The fused ("flash") scaled-dot-product attention ops, as PyTorch's _scaled_dot_product_flash_attention
// and its backward. nn::functional::scaled_dot_product_attention calls the forward op on the GPU when
// its fast path applies; autograd/derivatives/attention.cpp calls the backward op. Not part of the
// public API. Math and layouts: Note [Flash attention layout] in ops/attention_kernel.h.
#pragma once
#include <tuple>

#include "tessera/functions.h"

namespace tessera {

// q (B, H, L, D), k and v (B, H, S, D), one floating dtype, one device -> (out (B, H, L, D) in q's
// dtype, lse (B, H, L): float32, float64 for float64 inputs). is_causal: query i sees keys j <= i.
// Recorded by autograd as "flash_attention_forward" ({q, k, v} -> {out}). On the GPU: float16 or
// bfloat16, D 64 or 128, compute capability 8.0 or newer (NotImplementedError otherwise).
std::tuple<Tensor, Tensor> flash_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, bool is_causal,
                                                   double scale);

// -> (dq, dk, dv) in q's dtype, from grad_out (B, H, L, D), the forward's inputs, its out and lse.
// Deterministic (no atomics). Not recorded: the derivative uses a composite formula when the backward
// must be differentiable.
std::tuple<Tensor, Tensor, Tensor> flash_attention_backward(const Tensor& grad_out, const Tensor& q, const Tensor& k,
                                                            const Tensor& v, const Tensor& out, const Tensor& lse,
                                                            bool is_causal, double scale);

// Whether flash_attention_forward takes these inputs on their device (the dispatcher's test; no
// error is raised). On the CPU always true for floating inputs of matching shapes.
bool flash_attention_supported(const Tensor& q, const Tensor& k, const Tensor& v);

}  // namespace tessera
