// The scheduler base and the single-formula schedulers (StepLR, MultiStepLR, ExponentialLR,
// CosineAnnealingLR, LinearLR), as torch.optim.lr_scheduler.
//
// Note [Scheduler arithmetic]: every formula is PyTorch's Python expression in the same order of
// float64 operations, and this file is compiled without floating-point contraction (an a * b + c
// fused into one rounding would differ from Python's two), so the learning rates are PyTorch's bit
// for bit given the same libm.
#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <numbers>

#include "tessera/optim/lr_scheduler.h"

#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

namespace tessera::optim {

using Json = nlohmann::ordered_json;
constexpr double kPi = std::numbers::pi;

// ---- base ---------------------------------------------------------------------------------------

LRScheduler::LRScheduler(Optimizer& optimizer, const char* name) : optimizer_(&optimizer), name_(name) {
  for (size_t g = 0; g < optimizer.num_param_groups(); ++g) {
    if (!optimizer.has_option(g, "initial_lr")) optimizer.set_option(g, "initial_lr", optimizer.lr(g));
    base_lrs_.push_back(optimizer.get_option(g, "initial_lr"));
  }
}

LRScheduler::LRScheduler(Optimizer& optimizer, const char* name, bool /*no_base*/)
    : optimizer_(&optimizer), name_(name) {}

void LRScheduler::initial_step() {
  step_count_ = 0;
  step();
}

void LRScheduler::step() {
  step_count_ += 1;
  last_epoch_ += 1;
  apply(get_lr());
}

void LRScheduler::step_to(int64_t epoch) {
  step_count_ += 1;
  last_epoch_ = epoch;
  apply(has_closed_form() ? closed_form_lr() : get_lr());
}

std::vector<double> LRScheduler::group_lrs() const {
  std::vector<double> lrs;
  for (size_t g = 0; g < optimizer_->num_param_groups(); ++g) lrs.push_back(optimizer_->lr(g));
  return lrs;
}

void LRScheduler::apply(const std::vector<double>& lrs) {
  // As PyTorch's zip over groups and values: a group added after the scheduler keeps its lr.
  for (size_t g = 0; g < std::min(lrs.size(), optimizer_->num_param_groups()); ++g) optimizer_->set_lr(g, lrs[g]);
  last_lr_ = group_lrs();
}

std::string LRScheduler::state_dict() const {
  Json j = Json::object();
  j["last_epoch"] = last_epoch_;
  j["_step_count"] = step_count_;
  j["base_lrs"] = base_lrs_;
  j["_last_lr"] = last_lr_;
  return j.dump();
}

void LRScheduler::load_state_dict(const std::string& state_dict) {
  Json j;
  try {
    j = Json::parse(state_dict);
  } catch (const nlohmann::json::exception& e) {
    TS_THROW(ValueError, name_, ": load_state_dict: not valid JSON (", e.what(), ")");
  }
  TS_CHECK(j.is_object(), ValueError, name_, ": load_state_dict: expected a JSON object, got ", j.dump());
  try {
    int64_t last_epoch = j.value("last_epoch", last_epoch_);
    int64_t step_count = j.value("_step_count", step_count_);
    std::vector<double> base_lrs = j.value("base_lrs", base_lrs_);
    std::vector<double> last_lr = j.value("_last_lr", last_lr_);
    last_epoch_ = last_epoch;
    step_count_ = step_count;
    base_lrs_ = std::move(base_lrs);
    last_lr_ = std::move(last_lr);
  } catch (const nlohmann::json::exception& e) {
    TS_THROW(ValueError, name_, ": load_state_dict: a field has the wrong type (", e.what(), ")");
  }
}

// ---- StepLR ---------------------------------------------------------------------------------------

StepLR::StepLR(Optimizer& optimizer, int64_t step_size, double gamma)
    : LRScheduler(optimizer, "StepLR"), step_size_(step_size), gamma_(gamma) {
  TS_CHECK(step_size > 0, ValueError, "StepLR: step_size must be positive, got ", step_size);
  initial_step();
}

std::vector<double> StepLR::get_lr() {
  std::vector<double> lrs = group_lrs();
  if (last_epoch_ == 0 || last_epoch_ % step_size_ != 0) return lrs;
  for (double& lr : lrs) lr = lr * gamma_;
  return lrs;
}

std::vector<double> StepLR::closed_form_lr() const {
  std::vector<double> lrs;
  // Python's // floors; last_epoch is >= 0 here.
  for (double b : base_lrs_) lrs.push_back(b * std::pow(gamma_, static_cast<double>(last_epoch_ / step_size_)));
  return lrs;
}

// ---- MultiStepLR ----------------------------------------------------------------------------------

MultiStepLR::MultiStepLR(Optimizer& optimizer, std::vector<int64_t> milestones, double gamma)
    : LRScheduler(optimizer, "MultiStepLR"), milestones_(std::move(milestones)), gamma_(gamma) {
  std::sort(milestones_.begin(), milestones_.end());
  initial_step();
}

std::vector<double> MultiStepLR::get_lr() {
  std::vector<double> lrs = group_lrs();
  const auto count = std::count(milestones_.begin(), milestones_.end(), last_epoch_);
  if (count == 0) return lrs;
  for (double& lr : lrs) lr = lr * std::pow(gamma_, static_cast<double>(count));
  return lrs;
}

std::vector<double> MultiStepLR::closed_form_lr() const {
  const auto passed = std::upper_bound(milestones_.begin(), milestones_.end(), last_epoch_) - milestones_.begin();
  std::vector<double> lrs;
  for (double b : base_lrs_) lrs.push_back(b * std::pow(gamma_, static_cast<double>(passed)));
  return lrs;
}

// ---- ExponentialLR --------------------------------------------------------------------------------

ExponentialLR::ExponentialLR(Optimizer& optimizer, double gamma) : LRScheduler(optimizer, "ExponentialLR"), gamma_(gamma) {
  initial_step();
}

std::vector<double> ExponentialLR::get_lr() {
  std::vector<double> lrs = group_lrs();
  if (last_epoch_ == 0) return lrs;
  for (double& lr : lrs) lr = lr * gamma_;
  return lrs;
}

std::vector<double> ExponentialLR::closed_form_lr() const {
  std::vector<double> lrs;
  for (double b : base_lrs_) lrs.push_back(b * std::pow(gamma_, static_cast<double>(last_epoch_)));
  return lrs;
}

// ---- CosineAnnealingLR ----------------------------------------------------------------------------

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min)
    : LRScheduler(optimizer, "CosineAnnealingLR"), T_max_(T_max), eta_min_(eta_min) {
  TS_CHECK(T_max > 0, ValueError, "CosineAnnealingLR: T_max must be positive, got ", T_max);
  initial_step();
}

std::vector<double> CosineAnnealingLR::get_lr() {
  std::vector<double> lrs = group_lrs();
  const double e = static_cast<double>(last_epoch_), T = static_cast<double>(T_max_);
  if (last_epoch_ == 0) return lrs;
  if (step_count_ == 1 && last_epoch_ > 0) return closed_form_lr();
  if ((last_epoch_ - 1 - T_max_) % (2 * T_max_) == 0) {
    // Python's % has the sign of the divisor; C++'s of the dividend. Both are 0 together.
    for (size_t g = 0; g < lrs.size() && g < base_lrs_.size(); ++g)
      lrs[g] = lrs[g] + (base_lrs_[g] - eta_min_) * (1 - std::cos(kPi / T)) / 2;
    return lrs;
  }
  for (double& lr : lrs)
    lr = (1 + std::cos(kPi * e / T)) / (1 + std::cos(kPi * (e - 1) / T)) * (lr - eta_min_) + eta_min_;
  return lrs;
}

std::vector<double> CosineAnnealingLR::closed_form_lr() const {
  const double e = static_cast<double>(last_epoch_), T = static_cast<double>(T_max_);
  std::vector<double> lrs;
  for (double b : base_lrs_) lrs.push_back(eta_min_ + (b - eta_min_) * (1 + std::cos(kPi * e / T)) / 2);
  return lrs;
}

// ---- LinearLR -------------------------------------------------------------------------------------

LinearLR::LinearLR(Optimizer& optimizer, double start_factor, double end_factor, int64_t total_iters)
    : LRScheduler(optimizer, "LinearLR"), start_factor_(start_factor), end_factor_(end_factor), total_iters_(total_iters) {
  TS_CHECK(start_factor > 0 && start_factor <= 1, ValueError,
           "LinearLR: starting multiplicative factor expected to be greater than 0 and less or equal to 1, got ",
           start_factor);
  TS_CHECK(end_factor >= 0 && end_factor <= 1, ValueError,
           "LinearLR: ending multiplicative factor expected to be between 0 and 1, got ", end_factor);
  TS_CHECK(total_iters > 0, ValueError, "LinearLR: total_iters must be positive, got ", total_iters);
  initial_step();
}

std::vector<double> LinearLR::get_lr() {
  std::vector<double> lrs = group_lrs();
  if (last_epoch_ == 0) {
    for (double& lr : lrs) lr = lr * start_factor_;
    return lrs;
  }
  if (last_epoch_ > total_iters_) return lrs;
  const double d = end_factor_ - start_factor_;
  for (double& lr : lrs)
    lr = lr * (1. + d / (static_cast<double>(total_iters_) * start_factor_ + static_cast<double>(last_epoch_ - 1) * d));
  return lrs;
}

std::vector<double> LinearLR::closed_form_lr() const {
  const double t = static_cast<double>(std::min(total_iters_, last_epoch_));
  std::vector<double> lrs;
  for (double b : base_lrs_)
    lrs.push_back(b * (start_factor_ + (end_factor_ - start_factor_) * t / static_cast<double>(total_iters_)));
  return lrs;
}

}  // namespace tessera::optim
