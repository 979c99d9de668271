// Losses: the ops behind nn::functional's loss functions (ops/nn_functional_ops.h); each opens its
// OpScope, so that the profiler and the tracer see the loss as one op with its parts inside. Written
// as compositions of tessera ops with PyTorch's formulas (aten/src/ATen/native/Loss*.cpp); the loss
// modules are in src/nn/loss.cpp:
// - cross_entropy = nll_loss(log_softmax(input)); label smoothing mixes in the mean of -log p over
//   classes, normalized as nll's mean is (by the weight of the non-ignored targets). With class-index
//   targets it runs fused (ops/loss_ops.h: one kernel per direction, no (N, C) log-probabilities);
//   probability targets, and weights that require grad, take the composite;
// - the weighted mean of nll_loss divides by the sum of the picked targets' weights;
// - binary_cross_entropy_with_logits = (1 - t) x + lw (log1p(exp(-|x|)) + max(-x, 0)), which never
//   overflows; binary_cross_entropy clamps its logs at -100.
#include <algorithm>
#include <cmath>

#include "tessera/functions.h"
#include "ops/autocast_hook.h"
#include "ops/loss_ops.h"
#include "ops/nn_functional_ops.h"
#include "ops/op_scope.h"

namespace tessera::op {
namespace {

void check_reduction(const char* op, const std::string& reduction, bool batchmean_ok = false) {
  TS_CHECK(reduction == "none" || reduction == "mean" || reduction == "sum" || (batchmean_ok && reduction == "batchmean"),
           ValueError, op, ": ", reduction, " is not a valid value for reduction");
}

Tensor reduce(const Tensor& loss, const std::string& reduction) {
  if (reduction == "mean") return loss.mean();
  if (reduction == "sum") return loss.sum();
  return loss;
}

void check_pair(const char* op, const Tensor& input, const Tensor& target) {
  TS_CHECK(input.defined() && target.defined(), ValueError, op, ": got an undefined input or target");
}

void check_same_size(const char* op, const Tensor& input, const Tensor& target) {
  check_pair(op, input, target);
  TS_CHECK(input.sizes() == target.sizes(), ShapeError, op, ": Using a target size (", target.sizes(),
           ") that is different to the input size (", input.sizes(), ") is deprecated. Please ensure they have the same size.");
}

// The class dim's view of a (C) weight: (1, C, 1, ...) for input (N, C, d1, ...), (C) for input (C).
Shape class_view(const Tensor& input, int64_t c) {
  Shape v(static_cast<size_t>(input.dim()), 1);
  v[input.dim() == 1 ? 0 : 1] = c;
  return v;
}

// The parts of nll_loss shared with cross_entropy's label smoothing.
struct PickedTargets {
  Tensor loss;    // -input[target] * weight[target], 0 where ignored; target's shape
  Tensor weight;  // weight[target] (1 without weights), 0 where ignored
  Tensor valid;   // target != ignore_index
  Tensor safe;    // target with ignored entries replaced by 0
};

// The checks of class-index targets shared by nll_loss and cross_entropy; returns C.
int64_t check_class_targets(const char* op, const Tensor& input, const Tensor& target,
                            const std::optional<Tensor>& weight) {
  check_pair(op, input, target);
  TS_CHECK(input.is_floating_point(), DTypeError, op, ": expected a floating-point input, got ", dtype_name(input.dtype()));
  TS_CHECK(is_integral(target.dtype()) && target.dtype() != kBool, DTypeError, op,
           ": expected a target of class indices (an integer dtype), got ", dtype_name(target.dtype()));
  TS_CHECK(input.dim() >= 1, ShapeError, op, ": input must have at least 1 dim (C), got a 0-D tensor");
  const int64_t cdim = input.dim() == 1 ? 0 : 1;
  const int64_t c = input.size(cdim);
  Shape expected = input.sizes();
  expected.erase(expected.begin() + cdim);
  if (input.dim() >= 2 && target.dim() >= 1 && target.size(0) != input.size(0))
    TS_THROW(ValueError, op, ": Expected input batch_size (", input.size(0), ") to match target batch_size (",
             target.size(0), ").");
  TS_CHECK(target.sizes() == expected, ShapeError, op, ": expected target of shape ", expected, " for input of shape ",
           input.sizes(), ", got ", target.sizes());
  if (weight && weight->defined())
    TS_CHECK(weight->sizes() == Shape({c}), ShapeError, op, ": weight tensor should be defined either for all ", c,
             " classes or no classes but got weight tensor of shape: ", weight->sizes());
  return c;
}

PickedTargets pick_targets(const char* op, const Tensor& input, const Tensor& target,
                           const std::optional<Tensor>& weight, int64_t ignore_index) {
  const int64_t c = check_class_targets(op, input, target, weight);
  const int64_t cdim = input.dim() == 1 ? 0 : 1;
  PickedTargets p;
  Tensor tgt = target.to(kInt64);
  p.valid = tgt != ignore_index;
  p.safe = where(p.valid, tgt, Scalar(int64_t(0)));
  if (p.safe.numel() > 0) {
    Tensor bad = p.safe.lt(0).logical_or(p.safe.ge(c));
    if (bad.any().item<bool>()) {
      int64_t first = p.safe.masked_select(bad).flatten()[0].item<int64_t>();
      TS_THROW(IndexError, op, ": Target ", first, " is out of bounds.");
    }
  }
  Tensor picked = gather(input, cdim, p.safe.unsqueeze(cdim)).squeeze(cdim);
  Tensor validf = p.valid.to(input.dtype());
  if (weight && weight->defined())
    p.weight = weight->to(input.dtype()).index_select(0, p.safe.flatten()).reshape(p.safe.sizes()) * validf;
  else
    p.weight = validf;
  p.loss = -picked * p.weight;
  return p;
}

// Class-index targets through the fused op (ops/loss_ops.h): per-element losses in float32 (float64
// for float64 input), reduced there and rounded once to the input's dtype. 'mean' divides by the sum
// of the targets' weights over the non-ignored elements (their count without weights).
Tensor fused_cross_entropy(const Tensor& input, const Tensor& target, const std::optional<Tensor>& weight,
                           int64_t ignore_index, const std::string& reduction, double label_smoothing) {
  const char* op = "cross_entropy";
  check_class_targets(op, input, target, weight);
  const Tensor w = weight && weight->defined() ? *weight : Tensor();
  Tensor rows = cross_entropy_loss_rows(input, target, w, ignore_index, label_smoothing).first;
  if (reduction == "none") return rows.to(input.dtype());
  if (reduction == "sum") return rows.sum().to(input.dtype());
  Tensor valid = target != ignore_index;
  Tensor denom;
  if (w.defined()) {
    Tensor safe = where(valid, target.to(kInt64), Scalar(int64_t(0))).flatten();
    denom = (w.to(input.dtype()).to(rows.dtype()).index_select(0, safe) * valid.flatten().to(rows.dtype())).sum();
  } else {
    denom = valid.sum().to(rows.dtype());
  }
  return (rows.sum() / denom).to(input.dtype());  // NaN when every target is ignored, as PyTorch
}

}  // namespace

Tensor nll_loss(const Tensor& input, const Tensor& target, const std::optional<Tensor>& weight, int64_t ignore_index,
                const std::string& reduction) {
  if (autocast_pending()) [[unlikely]]
    if (AutocastArgs c(OpId::nll_loss, {&input, &target, weight ? &*weight : nullptr}); c) return nll_loss(c[0], c[1], c.opt(2), ignore_index, reduction);
  OpScope scope(OpId::nll_loss, {&input, &target, weight ? &*weight : nullptr});
  check_reduction("nll_loss", reduction);
  PickedTargets p = pick_targets("nll_loss", input, target, weight, ignore_index);
  if (reduction == "none") return p.loss;
  if (reduction == "sum") return p.loss.sum();
  return p.loss.sum() / p.weight.sum();  // NaN when every target is ignored, as PyTorch
}

Tensor cross_entropy(const Tensor& input, const Tensor& target, const std::optional<Tensor>& weight,
                     int64_t ignore_index, const std::string& reduction, double label_smoothing) {
  if (autocast_pending()) [[unlikely]]
    if (AutocastArgs c(OpId::cross_entropy, {&input, &target, weight ? &*weight : nullptr}); c) return cross_entropy(c[0], c[1], c.opt(2), ignore_index, reduction, label_smoothing);
  OpScope scope(OpId::cross_entropy, {&input, &target, weight ? &*weight : nullptr});
  const char* op = "cross_entropy";
  check_reduction(op, reduction);
  check_pair(op, input, target);
  TS_CHECK(label_smoothing >= 0 && label_smoothing <= 1, ValueError, op,
           ": label_smoothing must be between 0.0 and 1.0. Got: ", label_smoothing);
  TS_CHECK(input.is_floating_point(), DTypeError, op, ": expected a floating-point input, got ", dtype_name(input.dtype()));
  TS_CHECK(input.dim() >= 1, ShapeError, op, ": input must have at least 1 dim (C), got a 0-D tensor");
  const int64_t cdim = input.dim() == 1 ? 0 : 1;
  const int64_t c = input.size(cdim);
  const bool has_weight = weight && weight->defined();
  if (has_weight)
    TS_CHECK(weight->sizes() == Shape({c}), ShapeError, op, ": weight tensor should be defined either for all ", c,
             " classes or no classes but got weight tensor of shape: ", weight->sizes());
  if (!target.is_floating_point() && !(has_weight && weight->requires_grad()))
    return fused_cross_entropy(input, target, weight, ignore_index, reduction, label_smoothing);
  Tensor logp = tessera::log_softmax(input, cdim);

  if (target.is_floating_point()) {  // class probabilities
    TS_CHECK(target.sizes() == input.sizes(), ShapeError, op, ": class-probability targets must have the input's shape ",
             input.sizes(), ", got ", target.sizes());
    Tensor t = label_smoothing > 0 ? target * (1.0 - label_smoothing) + label_smoothing / static_cast<double>(c) : target;
    Tensor prod = logp * t;
    if (has_weight) prod = prod * weight->to(input.dtype()).reshape(class_view(input, c));
    Tensor loss = -prod.sum(cdim);
    if (reduction == "none") return loss;
    if (reduction == "sum") return loss.sum();
    return loss.sum() / (static_cast<double>(input.numel()) / static_cast<double>(std::max<int64_t>(c, 1)));
  }

  PickedTargets p = pick_targets(op, logp, target, weight, ignore_index);
  Tensor nll = reduction == "none" ? p.loss : (reduction == "sum" ? p.loss.sum() : p.loss.sum() / p.weight.sum());
  if (label_smoothing <= 0) return nll;
  Tensor smooth = has_weight ? -(logp * weight->to(input.dtype()).reshape(class_view(input, c))).sum(cdim)
                             : -logp.sum(cdim);
  smooth = smooth * p.valid.to(input.dtype());
  Tensor ret;
  if (reduction == "none") ret = smooth;
  else if (reduction == "sum") ret = smooth.sum();
  else if (has_weight) ret = smooth.sum() / p.weight.sum();
  else ret = smooth.sum() / p.valid.sum().to(input.dtype());
  return nll * (1.0 - label_smoothing) + ret * (label_smoothing / static_cast<double>(c));
}

Tensor mse_loss(const Tensor& input, const Tensor& target, const std::string& reduction) {
  if (autocast_pending()) [[unlikely]]
    if (AutocastArgs c(OpId::mse_loss, {&input, &target}); c) return mse_loss(c[0], c[1], reduction);
  OpScope scope(OpId::mse_loss, {&input, &target});
  check_reduction("mse_loss", reduction);
  check_pair("mse_loss", input, target);
  Tensor d = input - target;
  return reduce(d * d, reduction);
}

Tensor l1_loss(const Tensor& input, const Tensor& target, const std::string& reduction) {
  if (autocast_pending()) [[unlikely]]
    if (AutocastArgs c(OpId::l1_loss, {&input, &target}); c) return l1_loss(c[0], c[1], reduction);
  OpScope scope(OpId::l1_loss, {&input, &target});
  check_reduction("l1_loss", reduction);
  check_pair("l1_loss", input, target);
  return reduce(abs(input - target), reduction);
}

Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, const std::string& reduction, double beta) {
  if (autocast_pending()) [[unlikely]]
    if (AutocastArgs c(OpId::smooth_l1_loss, {&input, &target}); c) return smooth_l1_loss(c[0], c[1], reduction, beta);
  OpScope scope(OpId::smooth_l1_loss, {&input, &target});
  check_reduction("smooth_l1_loss", reduction);
  check_pair("smooth_l1_loss", input, target);
  TS_CHECK(beta >= 0, ValueError, "smooth_l1_loss: smooth_l1_loss does not support negative values for beta, got ", beta);
  if (beta == 0) return l1_loss(input, target, reduction);
  Tensor d = input - target;
  Tensor ad = abs(d);
  return reduce(where(ad < beta, d * d * (0.5 / beta), ad - 0.5 * beta), reduction);
}

Tensor huber_loss(const Tensor& input, const Tensor& target, const std::string& reduction, double delta) {
  if (autocast_pending()) [[unlikely]]
    if (AutocastArgs c(OpId::huber_loss, {&input, &target}); c) return huber_loss(c[0], c[1], reduction, delta);
  OpScope scope(OpId::huber_loss, {&input, &target});
  check_reduction("huber_loss", reduction);
  check_pair("huber_loss", input, target);
  TS_CHECK(delta > 0, ValueError, "huber_loss: huber_loss does not support non-positive values for delta, got ", delta);
  Tensor d = input - target;
  Tensor ad = abs(d);
  return reduce(where(ad < delta, d * d * 0.5, (ad - 0.5 * delta) * delta), reduction);
}

Tensor binary_cross_entropy(const Tensor& input, const Tensor& target, const std::optional<Tensor>& weight,
                            const std::string& reduction) {
  if (autocast_pending()) [[unlikely]]
    if (AutocastArgs c(OpId::binary_cross_entropy, {&input, &target, weight ? &*weight : nullptr}); c) return binary_cross_entropy(c[0], c[1], c.opt(2), reduction);
  OpScope scope(OpId::binary_cross_entropy, {&input, &target, weight ? &*weight : nullptr});
  const char* op = "binary_cross_entropy";
  check_reduction(op, reduction);
  check_same_size(op, input, target);
  TS_CHECK(input.is_floating_point(), DTypeError, op, ": expected a floating-point input, got ", dtype_name(input.dtype()));
  if (input.numel() > 0) {
    Tensor out_of_range = input.lt(0).logical_or(input.gt(1)).logical_or(input.isnan());
    TS_CHECK(!out_of_range.any().item<bool>(), ValueError, op, ": all elements of input should be between 0 and 1");
  }
  Tensor log_p = clamp(log(input), -100.0);
  Tensor log_q = clamp(log(1.0 - input), -100.0);
  Tensor loss = -(target * log_p + (1.0 - target) * log_q);
  if (weight && weight->defined()) loss = loss * *weight;
  return reduce(loss, reduction);
}

Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target, const std::optional<Tensor>& weight,
                                        const std::string& reduction, const std::optional<Tensor>& pos_weight) {
  if (autocast_pending()) [[unlikely]]
    if (AutocastArgs c(OpId::binary_cross_entropy_with_logits, {&input, &target, weight ? &*weight : nullptr, pos_weight ? &*pos_weight : nullptr}); c) return binary_cross_entropy_with_logits(c[0], c[1], c.opt(2), reduction, c.opt(3));
  OpScope scope(OpId::binary_cross_entropy_with_logits,
                {&input, &target, weight ? &*weight : nullptr, pos_weight ? &*pos_weight : nullptr});
  const char* op = "binary_cross_entropy_with_logits";
  check_reduction(op, reduction);
  check_same_size(op, input, target);
  TS_CHECK(input.is_floating_point(), DTypeError, op, ": expected a floating-point input, got ", dtype_name(input.dtype()));
  Tensor max_val = tessera::relu(-input);                         // max(-x, 0)
  Tensor softplus_neg = log1p(exp(-abs(input))) + max_val;  // log(1 + exp(-x)), overflow-free
  Tensor loss;
  if (pos_weight && pos_weight->defined()) {
    Tensor log_weight = (*pos_weight - 1.0) * target + 1.0;
    loss = (1.0 - target) * input + log_weight * softplus_neg;
  } else {
    loss = (1.0 - target) * input + softplus_neg;
  }
  if (weight && weight->defined()) loss = loss * *weight;
  return reduce(loss, reduction);
}

Tensor kl_div(const Tensor& input, const Tensor& target, const std::string& reduction, bool log_target) {
  if (autocast_pending()) [[unlikely]]
    if (AutocastArgs c(OpId::kl_div, {&input, &target}); c) return kl_div(c[0], c[1], reduction, log_target);
  OpScope scope(OpId::kl_div, {&input, &target});
  const char* op = "kl_div";
  check_reduction(op, reduction, /*batchmean_ok=*/true);
  check_pair(op, input, target);
  Tensor loss;
  if (log_target) {
    loss = exp(target) * (target - input);
  } else {
    // xlogy(t, t) - t * x, with 0 log 0 = 0.
    Tensor tlogt = where(target == 0, zeros_like(target), target * log(target));
    loss = tlogt - target * input;
  }
  if (reduction == "batchmean") {
    Tensor s = loss.sum();
    return input.dim() == 0 ? s : s / static_cast<double>(input.size(0));
  }
  return reduce(loss, reduction);
}

}  // namespace tessera::op
