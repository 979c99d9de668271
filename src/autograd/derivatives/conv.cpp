// Derivatives of the convolution and pooling ops. Every formula is written with the family's own ops
// (conv2d, conv_transpose2d, conv2d_backward_weight, the pooling backward ops of ops/conv_ops.h) plus
// views, so that each derivative is recorded again and gradgradcheck holds:
//   conv2d(x, w, b):            dx = conv_transpose2d(g, w)   dw = conv2d_backward_weight(g, x)   db = sum(g)
//   conv_transpose2d(x, w, b):  dx = conv2d(g, w)             dw = conv2d_backward_weight(x, g)   db = sum(g)
//   conv2d_backward_weight(g, x) -> dW, bilinear:  dg = conv2d(x, ggW)   dx = conv_transpose2d(g, ggW)
// conv_transpose2d is the adjoint of conv2d, and an output size that the stride leaves ambiguous is
// pinned by the image size (output_padding for conv_transpose2d, a narrowed result for conv2d).
// Pooling ops are linear in their input once the max indices are fixed; each backward op's derivative
// is its forward op (gather at the indices for max pooling).
// Attributes (Note [Typed attributes]): the convolutions record ConvAttrs, the pooling ops PoolAttrs
// (max pooling's indices in attrs.tensors). All recorded tensors are 4-D.
#include "autograd/derivatives/derivatives.h"
#include "ops/conv_ops.h"

namespace tessera::autograd {
namespace {

using V = std::vector<Tensor>;

IntPair pair(HW v) { return {v.h, v.w}; }

// A call's ConvAttrs as the public API's arguments.
struct ConvParams {
  IntPair stride{1}, padding{0}, dilation{1};
  int64_t groups = 1;
};

ConvParams conv_params(const OpAttrs& attrs) {
  const ConvAttrs& a = attrs.as<ConvAttrs>();
  return {pair(a.stride), pair(a.padding), pair(a.dilation), a.groups};
}

// conv2d's input gradient for an image of (h, w): conv_transpose2d with the output_padding that
// reaches that size. When the needed output_padding is not allowed (it must stay below the stride or
// the dilation), the trailing rows / columns no output reads get zero gradient explicitly.
Tensor conv2d_input_grad(const Tensor& grad, const Tensor& weight, int64_t h, int64_t w, const ConvParams& p) {
  const int64_t kh = weight.size(2), kw = weight.size(3);
  const int64_t base_h = (grad.size(2) - 1) * p.stride.h - 2 * p.padding.h + p.dilation.h * (kh - 1) + 1;
  const int64_t base_w = (grad.size(3) - 1) * p.stride.w - 2 * p.padding.w + p.dilation.w * (kw - 1) + 1;
  const int64_t oph = h - base_h, opw = w - base_w;
  const bool ok_h = oph < p.stride.h || oph < p.dilation.h, ok_w = opw < p.stride.w || opw < p.dilation.w;
  if (ok_h && ok_w)
    return conv_transpose2d(grad, weight, std::nullopt, p.stride, p.padding, {oph, opw}, p.groups, p.dilation);
  Tensor core = conv_transpose2d(grad, weight, std::nullopt, p.stride, p.padding, {ok_h ? oph : 0, ok_w ? opw : 0},
                                 p.groups, p.dilation);
  Tensor full = zeros({core.size(0), core.size(1), h, w}, TensorOptions(core.dtype(), core.device()));
  return as_strided_scatter(full, core, core.sizes(), full.strides(), 0);
}

// conv2d cut to the leading (h, w) of its output (the part a smaller gradient covers).
Tensor conv2d_cut(const Tensor& x, const Tensor& weight, int64_t h, int64_t w, const ConvParams& p) {
  Tensor y = conv2d(x, weight, std::nullopt, p.stride, p.padding, p.dilation, p.groups);
  if (y.size(2) != h) y = y.narrow(2, 0, h);
  if (y.size(3) != w) y = y.narrow(3, 0, w);
  return y;
}

Tensor bias_grad(const Tensor& grad) { return sum(grad, {0, 2, 3}); }

V conv2d_back(const BackwardContext& c, const V& g) {
  const ConvParams p = conv_params(c.attrs);
  const Tensor& x = c.inputs[0];
  const Tensor& w = c.inputs[1];
  V out(3);
  if (needs(c, 0)) out[0] = conv2d_input_grad(g[0], w, x.size(2), x.size(3), p);
  if (needs(c, 1))
    out[1] = conv2d_backward_weight(g[0], x, {w.size(2), w.size(3)}, p.stride, p.padding, p.dilation, p.groups);
  if (needs(c, 2)) out[2] = bias_grad(g[0]);
  return out;
}

V conv_transpose2d_back(const BackwardContext& c, const V& g) {
  const ConvParams p = conv_params(c.attrs);
  const Tensor& x = c.inputs[0];
  const Tensor& w = c.inputs[1];
  V out(3);
  if (needs(c, 0)) out[0] = conv2d_cut(g[0], w, x.size(2), x.size(3), p);
  if (needs(c, 1))
    out[1] = conv2d_backward_weight(x, g[0], {w.size(2), w.size(3)}, p.stride, p.padding, p.dilation, p.groups);
  if (needs(c, 2)) out[2] = bias_grad(g[0]);
  return out;
}

// inputs: grad_output (N, C_out, OH, OW), x (N, C_in, H, W); output: the weight gradient.
V conv2d_backward_weight_back(const BackwardContext& c, const V& g) {
  const ConvParams p = conv_params(c.attrs);
  const Tensor& go = c.inputs[0];
  const Tensor& x = c.inputs[1];
  V out(2);
  if (needs(c, 0)) out[0] = conv2d_cut(x, g[0], go.size(2), go.size(3), p);
  if (needs(c, 1)) out[1] = conv2d_input_grad(go, g[0], x.size(2), x.size(3), p);
  return out;
}

V max_pool2d_back(const BackwardContext& c, const V& g) {
  const PoolAttrs& a = c.attrs.as<PoolAttrs>();
  return {max_pool2d_backward(g[0], c.attrs.tensors.at(0), c.input_meta[0].sizes, pair(a.kernel), pair(a.stride),
                              pair(a.padding), pair(a.dilation), a.ceil_mode)};
}

// The gradient of max_pool2d_backward picks the incoming gradient at the argmax positions.
V max_pool2d_backward_back(const BackwardContext& c, const V& g) {
  const Tensor& idx = c.attrs.tensors.at(0);
  const Shape& gs = c.input_meta[0].sizes;  // (N, C, OH, OW)
  Tensor planes = g[0].reshape({g[0].size(0), g[0].size(1), -1});
  return {gather(planes, 2, idx.reshape({gs[0], gs[1], -1})).reshape(gs)};
}

V avg_pool2d_back(const BackwardContext& c, const V& g) {
  const PoolAttrs& a = c.attrs.as<PoolAttrs>();
  return {avg_pool2d_backward(g[0], c.input_meta[0].sizes, pair(a.kernel), pair(a.stride), pair(a.padding),
                              a.ceil_mode, a.count_include_pad)};
}

V avg_pool2d_backward_back(const BackwardContext& c, const V& g) {
  const PoolAttrs& a = c.attrs.as<PoolAttrs>();
  return {avg_pool2d(g[0], pair(a.kernel), pair(a.stride), pair(a.padding), a.ceil_mode, a.count_include_pad)};
}

V adaptive_avg_pool2d_back(const BackwardContext& c, const V& g) {
  return {adaptive_avg_pool2d_backward(g[0], c.input_meta[0].sizes)};
}

V adaptive_avg_pool2d_backward_back(const BackwardContext& c, const V& g) {
  const Shape& gs = c.input_meta[0].sizes;
  return {adaptive_avg_pool2d(g[0], {gs[2], gs[3]})};
}

}  // namespace

void register_conv_derivatives() {
  register_derivative(OpId::conv2d, {conv2d_back, true});
  register_derivative(OpId::conv_transpose2d, {conv_transpose2d_back, true});
  register_derivative(OpId::conv2d_backward_weight, {conv2d_backward_weight_back, true});
  register_derivative(OpId::max_pool2d_with_indices, {max_pool2d_back});
  register_derivative(OpId::max_pool2d_backward, {max_pool2d_backward_back});
  register_derivative(OpId::avg_pool2d, {avg_pool2d_back});
  register_derivative(OpId::avg_pool2d_backward, {avg_pool2d_backward_back});
  register_derivative(OpId::adaptive_avg_pool2d, {adaptive_avg_pool2d_back});
  register_derivative(OpId::adaptive_avg_pool2d_backward, {adaptive_avg_pool2d_backward_back});
}

}  // namespace tessera::autograd
