// Derivative of the fused cross-entropy (ops/loss_ops.h): d(loss)/d(logits), formula in
// ops/loss_kernel.h.
//
// Two paths. Without create_graph (grad mode off while the engine runs the derivative) the fused
// backward op computes the gradient in one pass over the logits, from the logsumexp the forward
// saved. With create_graph (grad mode on) the same formula is written with tessera ops on the
// original logits (softmax recomputed), so that the result records itself and is differentiable again
// in the logits and in the incoming gradient (gradgradcheck); the saved lse is not used there.
// Recorded attrs (ops/loss_ops.cpp): tensors {target (int64), weight (loss dtype, or undefined),
// lse}, ints {ignore_index}, scalars {label_smoothing}.
#include "autograd/derivatives/derivatives.h"
#include "ops/loss_ops.h"
#include "runtime/grad_mode.h"

namespace tessera::autograd {
namespace {

using V = std::vector<Tensor>;

// g (target's shape) times the gradient of each loss element in the logits, with tessera ops.
Tensor cross_entropy_grad_composite(const Tensor& g, const Tensor& x, const Tensor& target, const Tensor& weight,
                                    int64_t ignore_index, double ls) {
  const DType dt = x.dtype();
  const int64_t cdim = x.dim() == 1 ? 0 : 1;
  const int64_t c = x.size(cdim);
  Shape class_view(static_cast<size_t>(x.dim()), 1);  // (1, C, 1, ...) or (C)
  class_view[static_cast<size_t>(cdim)] = c;
  const Tensor valid = target != ignore_index;
  const Tensor safe = where(valid, target, Scalar(int64_t(0)));
  const Tensor w = weight.defined() ? weight.to(dt) : Tensor();
  const Tensor wt = w.defined() ? w.index_select(0, safe.flatten()).reshape(safe.sizes()) : ones(safe.sizes(), TensorOptions(dt, x.device()));
  const Tensor gv = g.to(dt) * valid.to(dt);  // 0 on ignored elements
  const double smooth = c > 0 ? ls / static_cast<double>(c) : 0.0;
  // a = g ((1 - ls) w_t + (ls / C) W): the factor of softmax(x).
  Tensor a = wt * (1.0 - ls);
  if (ls > 0) {
    const Tensor wtotal = w.defined() ? w.sum() : scalar_tensor(Scalar(static_cast<double>(c)), TensorOptions(dt, x.device()));
    a = a + wtotal * smooth;
  }
  a = gv * a;
  const Tensor classes = arange(Scalar(c), TensorOptions(kInt64, x.device())).reshape(class_view);
  const Tensor onehot = (safe.unsqueeze(cdim) == classes).to(dt);
  Tensor dx = a.unsqueeze(cdim) * softmax(x, cdim) - (gv * wt * (1.0 - ls)).unsqueeze(cdim) * onehot;
  if (ls > 0) {
    const Tensor b = (gv * smooth).unsqueeze(cdim);
    dx = dx - (w.defined() ? b * w.reshape(class_view) : b);
  }
  return dx;
}

V cross_entropy_loss_rows_back(const BackwardContext& c, const V& g) {
  const Tensor& x = c.inputs[0];
  const Tensor& target = c.attrs.tensors.at(0);
  const Tensor& weight = c.attrs.tensors.at(1);
  const Tensor& lse = c.attrs.tensors.at(2);
  const int64_t ignore_index = c.attrs.ints.at(0);
  const int64_t classes = c.attrs.ints.at(1);
  const double ls = c.attrs.scalars.at(0).to_double();
  if (!is_grad_enabled())
    return {cross_entropy_loss_rows_backward(g[0], x, target, weight, lse, ignore_index, ls, classes)};
  return {cross_entropy_grad_composite(g[0], x, target, weight, ignore_index, ls)};
}

}  // namespace

void register_loss_derivatives() {
  register_derivative(OpId::cross_entropy_loss_rows, {cross_entropy_loss_rows_back, /*save_inputs=*/true});
}

}  // namespace tessera::autograd
