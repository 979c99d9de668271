// The loss modules (nn::CrossEntropyLoss, MSELoss, ...): options and reduction checks around the
// loss functions of nn::functional, which are ops of the table (src/ops/loss_functional.cpp).
#include "tessera/nn/functional.h"
#include "tessera/nn/loss.h"

namespace tessera::nn {

// ---- modules ----------------------------------------------------------------------------------------

Loss::Loss(std::string reduction, bool batchmean_ok) : reduction(std::move(reduction)) {
  TS_CHECK(this->reduction == "none" || this->reduction == "mean" || this->reduction == "sum" ||
               (batchmean_ok && this->reduction == "batchmean"),
           ValueError, name(), ": ", this->reduction, " is not a valid value for reduction");
}
std::string Loss::extra_repr() const { return reduction == "mean" ? "" : "reduction=" + reduction; }

namespace {
std::optional<Tensor> opt(const Tensor& t) { return t.defined() ? std::optional<Tensor>(t) : std::nullopt; }
}  // namespace

CrossEntropyLoss::CrossEntropyLoss(CrossEntropyLossOptions opts)
    : Loss(opts.reduction), weight(opts.weight.value_or(Tensor())), ignore_index(opts.ignore_index),
      label_smoothing(opts.label_smoothing) {
  register_buffer("weight", weight);
}
Tensor CrossEntropyLoss::forward(const Tensor& input, const Tensor& target) {
  return functional::cross_entropy(input, target, opt(weight), ignore_index, reduction, label_smoothing);
}

NLLLoss::NLLLoss(NLLLossOptions opts)
    : Loss(opts.reduction), weight(opts.weight.value_or(Tensor())), ignore_index(opts.ignore_index) {
  register_buffer("weight", weight);
}
Tensor NLLLoss::forward(const Tensor& input, const Tensor& target) {
  return functional::nll_loss(input, target, opt(weight), ignore_index, reduction);
}

Tensor MSELoss::forward(const Tensor& input, const Tensor& target) {
  return functional::mse_loss(input, target, reduction);
}
Tensor L1Loss::forward(const Tensor& input, const Tensor& target) { return functional::l1_loss(input, target, reduction); }

SmoothL1Loss::SmoothL1Loss(std::string reduction, double beta) : Loss(std::move(reduction)), beta(beta) {}
Tensor SmoothL1Loss::forward(const Tensor& input, const Tensor& target) {
  return functional::smooth_l1_loss(input, target, reduction, beta);
}

HuberLoss::HuberLoss(std::string reduction, double delta) : Loss(std::move(reduction)), delta(delta) {}
Tensor HuberLoss::forward(const Tensor& input, const Tensor& target) {
  return functional::huber_loss(input, target, reduction, delta);
}

BCELoss::BCELoss(BCELossOptions opts) : Loss(opts.reduction), weight(opts.weight.value_or(Tensor())) {
  register_buffer("weight", weight);
}
Tensor BCELoss::forward(const Tensor& input, const Tensor& target) {
  return functional::binary_cross_entropy(input, target, opt(weight), reduction);
}

BCEWithLogitsLoss::BCEWithLogitsLoss(BCEWithLogitsLossOptions opts)
    : Loss(opts.reduction), weight(opts.weight.value_or(Tensor())), pos_weight(opts.pos_weight.value_or(Tensor())) {
  register_buffer("weight", weight);
  register_buffer("pos_weight", pos_weight);
}
Tensor BCEWithLogitsLoss::forward(const Tensor& input, const Tensor& target) {
  return functional::binary_cross_entropy_with_logits(input, target, opt(weight), reduction, opt(pos_weight));
}

KLDivLoss::KLDivLoss(std::string reduction, bool log_target)
    : Loss(std::move(reduction), /*batchmean_ok=*/true), log_target(log_target) {}
Tensor KLDivLoss::forward(const Tensor& input, const Tensor& target) {
  return functional::kl_div(input, target, reduction, log_target);
}

}  // namespace tessera::nn
