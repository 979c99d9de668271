// Derivative of the flash attention op (ops/attention_ops.h). Recorded inputs {q, k, v}, output
// {out}; attrs.tensors = {lse}, attrs.ints = {is_causal}, attrs.scalars = {scale}.
//
// A plain backward calls the fused backward op (P recomputed from lse; deterministic under the
// determinism switch). When the backward must itself be differentiable (grad mode on during
// backward: create_graph), the gradient is written with tessera ops instead (it materializes the
// (L, S) probabilities):
//   P = softmax(scale q k^T, masked),  dV = P^T dO,  dP = dO V^T,  dS = P (dP - rowsum(P dP)),
//   dQ = scale dS K,  dK = scale dS^T Q
// (rowsum(P dP) = rowsum(dO O), written in P so that its dependence on q, k, v is in the new graph).
// 16-bit inputs are differentiated in float32 there; the engine casts each gradient to its input's dtype.
#include <cmath>

#include "autograd/derivatives/derivatives.h"
#include "ops/attention_ops.h"
#include "runtime/grad_mode.h"

namespace tessera::autograd {
namespace {

using V = std::vector<Tensor>;

DType compute_dtype(DType t) { return t == kFloat16 || t == kBFloat16 ? kFloat32 : t; }

V composite_back(const BackwardContext& c, const V& g, bool causal, double scale) {
  const DType cd = compute_dtype(c.inputs[0].dtype());
  const Tensor q = c.inputs[0].to(cd), k = c.inputs[1].to(cd), v = c.inputs[2].to(cd), dout = g[0].to(cd);
  Tensor scores = matmul(q, k.transpose(-2, -1)) * scale;  // (B, H, L, S)
  if (causal) {
    const int64_t l = q.size(-2), s = k.size(-2);
    const TensorOptions o(kInt64, q.device());
    scores = scores.masked_fill(arange(s, o).unsqueeze(0) > arange(l, o).unsqueeze(1), -INFINITY);
  }
  const Tensor p = softmax(scores, -1);
  const Tensor dp = matmul(dout, v.transpose(-2, -1));
  const Tensor ds = p * (dp - sum(p * dp, std::vector<int64_t>{-1}, /*keepdim=*/true));
  V out(3);
  if (needs(c, 0)) out[0] = matmul(ds, k) * scale;
  if (needs(c, 1)) out[1] = matmul(ds.transpose(-2, -1), q) * scale;
  if (needs(c, 2)) out[2] = matmul(p.transpose(-2, -1), dout);
  return out;
}

V flash_attention_back(const BackwardContext& c, const V& g) {
  const bool causal = c.attrs.ints.at(0) != 0;
  const double scale = c.attrs.scalars.at(0).to_double();
  if (is_grad_enabled()) return composite_back(c, g, causal, scale);
  auto [dq, dk, dv] = flash_attention_backward(g[0], c.inputs[0], c.inputs[1], c.inputs[2], c.outputs.at(0),
                                               c.attrs.tensors.at(0), causal, scale);
  V out(3);
  if (needs(c, 0)) out[0] = dq;
  if (needs(c, 1)) out[1] = dk;
  if (needs(c, 2)) out[2] = dv;
  return out;
}

}  // namespace

void register_attention_derivatives() {
  register_derivative(OpId::flash_attention_forward, {flash_attention_back, /*save_inputs=*/true, /*save_outputs=*/true});
}

}  // namespace tessera::autograd
