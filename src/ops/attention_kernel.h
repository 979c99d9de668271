// Kernel slots of the attention family: fused ("flash") scaled-dot-product attention, forward and
// backward (ops/attention_ops.cpp holds the ops, autograd/derivatives/attention.cpp the derivative).
//
// Note [Flash attention layout]: the op layer hands the kernels
//  - q (B, H, L, D), k (B, H, S, D), v (B, H, S, D), and for the backward out and dout (B, H, L, D),
//    all of one floating dtype T, each with its LAST dim contiguous (stride 1) and the other strides
//    arbitrary (GPT-2's transposed (B, T, H, D) views go in without a copy); the strides are read
//    from the tensors. On the GPU every row start is 16-byte aligned (the op copies otherwise);
//  - lse (B, H, L) contiguous in the statistics dtype S: float32 for float16 / bfloat16 / float32,
//    float64 for float64 (so that a float64 gradcheck keeps its digits);
//  - outputs freshly allocated: lse (B, H, L) of S contiguous; out (B, H, L, D), dq, dk, dv of T with
//    the shapes of q, k, v and their last dim contiguous. On every device (the layout is a function of
//    the inputs' layouts alone, so the meta device gives the same) each is dense in the dim order of
//    its input (out and dq of q, dk of k, dv of v: dims sorted by the input's strides, last dim
//    innermost), as PyTorch's cuDNN attention allocates them: a contiguous q gives a contiguous out
//    and dq (a leaf's gradient is taken as it is, no copy), GPT-2's transposed (B, L, H, D) views give
//    (B, L, H, D) memory, so that y.transpose(1, 2).reshape(B, L, H D) and the gradients of the
//    transposed views are views, not copies. Except on the GPU: q, k, v cut from one projection get
//    dq, dk, dv side by side in one buffer, each with its input's strides (Note [Packed attention
//    gradients], ops/attention_ops.cpp). The kernels write through the strides.
// B, H, L, S, D >= 1 (the op returns early on empty batches). The GPU kernels take T in {float16,
// bfloat16} and D in {64, 128}; the op rejects other cases on the GPU (the functional
// scaled_dot_product_attention then uses its composite path).
//
// Math (scale = p.scale, causal as PyTorch's is_causal: query i sees keys j <= i, top-left aligned
// when L != S, so every query sees at least key 0):
//   s_ij = scale * q_i . k_j  (masked: -inf),  lse_i = log(sum_j exp(s_ij)),  p_ij = exp(s_ij - lse_i)
//   out_i = sum_j p_ij v_j
// Backward (FlashAttention-2, P recomputed from lse): Dl_i = dout_i . out_i,  dp_ij = dout_i . v_j,
//   ds_ij = p_ij (dp_ij - Dl_i),  dq_i = scale sum_j ds_ij k_j,  dk_j = scale sum_i ds_ij q_i,
//   dv_j = sum_i p_ij dout_i.
// Accumulation is float (double for float64); results round once to T. Tessera's own kernels run every
// sum in an order fixed by the shapes alone (no atomics). On the GPU, where cuDNN's fused engines take
// the case (kernels/cuda/attention_cudnn.h), the backward adds dQ with float atomics unless the
// determinism switch is on (then cuDNN's deterministic graph, or tessera's kernels).
#pragma once
#include <cstdint>

#include "ops/kernel_slot.h"
#include "tessera/tensor.h"

namespace tessera {

struct AttentionParams {
  int64_t batch = 0, heads = 0;  // B, H
  int64_t q_len = 0, kv_len = 0;  // L, S
  int64_t head_dim = 0;           // D
  bool causal = false;
  double scale = 1.0;
};

// out (B, H, L, D) T, lse (B, H, L) S <- q, k, v.
using AttentionForwardFn = void(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k,
                                const Tensor& v, const AttentionParams& p);
// dq, dk, dv (shapes of q, k, v) T <- dout, q, k, v, out (T), lse (S).
using AttentionBackwardFn = void(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dout,
                                 const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                                 const Tensor& lse, const AttentionParams& p);

extern KernelSlot<AttentionForwardFn> attention_forward_kernel;
extern KernelSlot<AttentionBackwardFn> attention_backward_kernel;

}  // namespace tessera
