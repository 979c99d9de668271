// OneCycleLR and the schedulers of schedulers (SequentialLR, ChainedScheduler), as
// torch.optim.lr_scheduler. Arithmetic as Note [Scheduler arithmetic] (lr_scheduler.cpp).
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

// ---- OneCycleLR -----------------------------------------------------------------------------------

OneCycleLR::OneCycleLR(Optimizer& optimizer, OneCycleLROptions options)
    : LRScheduler(optimizer, "OneCycleLR"), options_(std::move(options)) {
  const OneCycleLROptions& o = options_;
  const size_t groups = optimizer.num_param_groups();
  TS_CHECK(o.total_steps > 0, ValueError, "OneCycleLR: expected a positive integer total_steps, but got ", o.total_steps);
  TS_CHECK(o.pct_start >= 0 && o.pct_start <= 1, ValueError, "OneCycleLR: expected a float between 0 and 1 pct_start, but got ",
           o.pct_start);
  TS_CHECK(o.anneal_strategy == "cos" || o.anneal_strategy == "linear", ValueError,
           "OneCycleLR: anneal_strategy must be one of 'cos' or 'linear', instead got '", o.anneal_strategy, "'");
  TS_CHECK(o.max_lr.size() == 1 || o.max_lr.size() == groups, ValueError, "OneCycleLR: expected 1 or ", groups,
           " values for max_lr, got ", o.max_lr.size());
  const double total = static_cast<double>(o.total_steps);
  if (o.three_phase) {
    phases_ = {{o.pct_start * total - 1, "initial_lr", "max_lr", "max_momentum", "base_momentum"},
               {2 * o.pct_start * total - 2, "max_lr", "initial_lr", "base_momentum", "max_momentum"},
               {total - 1, "initial_lr", "min_lr", "max_momentum", "max_momentum"}};
  } else {
    phases_ = {{o.pct_start * total - 1, "initial_lr", "max_lr", "max_momentum", "base_momentum"},
               {total - 1, "max_lr", "min_lr", "base_momentum", "max_momentum"}};
  }
  if (o.cycle_momentum) {
    TS_CHECK(optimizer.has_option("momentum") || optimizer.has_option("betas"), ValueError, "OneCycleLR: optimizer ",
             optimizer.name(), " must support momentum (an option 'momentum' or 'betas') with cycle_momentum enabled");
    use_beta1_ = optimizer.has_option("betas");
  }
  base_lrs_.clear();
  for (size_t g = 0; g < groups; ++g) {
    const double max_lr = o.max_lr.size() == 1 ? o.max_lr[0] : o.max_lr[g];
    const double initial_lr = max_lr / o.div_factor;
    optimizer.set_option(g, "initial_lr", initial_lr);
    optimizer.set_option(g, "max_lr", max_lr);
    optimizer.set_option(g, "min_lr", initial_lr / o.final_div_factor);
    if (o.cycle_momentum) {
      if (use_beta1_) optimizer.set_option(g, "betas", o.max_momentum, 0);
      else optimizer.set_option(g, "momentum", o.max_momentum);
      optimizer.set_option(g, "max_momentum", o.max_momentum);
      optimizer.set_option(g, "base_momentum", o.base_momentum);
    }
    base_lrs_.push_back(initial_lr);
  }
  initial_step();
}

double OneCycleLR::anneal(double start, double end, double pct) const {
  if (options_.anneal_strategy == "cos") {
    const double cos_out = std::cos(std::numbers::pi * pct) + 1;
    return end + (start - end) / 2.0 * cos_out;
  }
  return (end - start) * pct + start;
}

std::vector<double> OneCycleLR::get_lr() {
  const int64_t step_num = last_epoch_;
  TS_CHECK(step_num <= options_.total_steps, ValueError, "OneCycleLR: tried to step ", step_num + 1,
           " times. The specified number of total steps is ", options_.total_steps);
  Optimizer& opt = *optimizer_;
  std::vector<double> lrs;
  for (size_t g = 0; g < opt.num_param_groups(); ++g) {
    double start_step = 0, lr = 0, momentum = 0;
    for (size_t i = 0; i < phases_.size(); ++i) {
      const Phase& ph = phases_[i];
      if (static_cast<double>(step_num) <= ph.end_step || i + 1 == phases_.size()) {
        const double pct = (static_cast<double>(step_num) - start_step) / (ph.end_step - start_step);
        lr = anneal(opt.get_option(g, ph.start_lr), opt.get_option(g, ph.end_lr), pct);
        if (options_.cycle_momentum)
          momentum = anneal(opt.get_option(g, ph.start_momentum), opt.get_option(g, ph.end_momentum), pct);
        break;
      }
      start_step = ph.end_step;
    }
    lrs.push_back(lr);
    if (options_.cycle_momentum) {
      if (use_beta1_) opt.set_option(g, "betas", momentum, 0);
      else opt.set_option(g, "momentum", momentum);
    }
  }
  return lrs;
}

// ---- SequentialLR ---------------------------------------------------------------------------------

namespace {

void check_schedulers(const char* who, const Optimizer* optimizer, const std::vector<LRScheduler*>& schedulers) {
  TS_CHECK(!schedulers.empty(), ValueError, who, ": expected at least one scheduler");
  for (size_t i = 0; i < schedulers.size(); ++i) {
    TS_CHECK(schedulers[i] != nullptr, ValueError, who, ": scheduler ", i, " is null");
    TS_CHECK(&schedulers[i]->optimizer() == optimizer, ValueError, who,
             " expects all schedulers to belong to the same optimizer, but got the scheduler at index ", i,
             " to be different than the optimizer passed in");
  }
}

Json parse_object(const char* who, const std::string& text) {
  Json j;
  try {
    j = Json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    TS_THROW(ValueError, who, ": load_state_dict: not valid JSON (", e.what(), ")");
  }
  TS_CHECK(j.is_object(), ValueError, who, ": load_state_dict: expected a JSON object, got ", j.dump());
  return j;
}

// The nested schedulers' states under "_schedulers", as PyTorch's state dicts of these two.
std::string nested_state(const std::vector<LRScheduler*>& schedulers, Json j) {
  Json nested = Json::array();
  for (const LRScheduler* s : schedulers) nested.push_back(Json::parse(s->state_dict()));
  j["_schedulers"] = nested;
  return j.dump();
}

void load_nested(const char* who, const std::vector<LRScheduler*>& schedulers, const Json& j) {
  TS_CHECK(j.contains("_schedulers") && j["_schedulers"].is_array() && j["_schedulers"].size() == schedulers.size(),
           ValueError, who, ": load_state_dict: expected '_schedulers' with the states of ", schedulers.size(),
           " schedulers");
  for (size_t i = 0; i < schedulers.size(); ++i) schedulers[i]->load_state_dict(j["_schedulers"][i].dump());
}

}  // namespace

SequentialLR::SequentialLR(Optimizer& optimizer, std::vector<LRScheduler*> schedulers, std::vector<int64_t> milestones)
    : LRScheduler(optimizer, "SequentialLR", /*no_base=*/true), schedulers_(std::move(schedulers)),
      milestones_(std::move(milestones)) {
  check_schedulers("SequentialLR", &optimizer, schedulers_);
  TS_CHECK(milestones_.size() + 1 == schedulers_.size(), ValueError,
           "SequentialLR expects number of schedulers provided to be one more than the number of milestone points, "
           "but got number of schedulers ", schedulers_.size(), " and the number of milestones to be equal to ",
           milestones_.size());
  TS_CHECK(std::is_sorted(milestones_.begin(), milestones_.end()), ValueError,
           "SequentialLR: milestones must be in increasing order, got ", milestones_);
  last_epoch_ = 0;
  // Undo what the schedulers' constructors did, then start the first one again.
  for (size_t g = 0; g < optimizer.num_param_groups(); ++g) optimizer.set_lr(g, optimizer.get_option(g, "initial_lr"));
  for (LRScheduler* s : schedulers_) s->last_epoch_ -= 1;
  schedulers_[0]->initial_step();
  last_lr_ = schedulers_[0]->get_last_lr();
}

void SequentialLR::step() {
  last_epoch_ += 1;
  const size_t idx = std::upper_bound(milestones_.begin(), milestones_.end(), last_epoch_) - milestones_.begin();
  LRScheduler* s = schedulers_[idx];
  if (idx > 0 && milestones_[idx - 1] == last_epoch_) s->step_to(0);
  else s->step();
  last_lr_ = s->get_last_lr();
}

std::string SequentialLR::state_dict() const {
  Json j = Json::object();
  j["last_epoch"] = last_epoch_;
  j["_milestones"] = milestones_;
  j["_last_lr"] = last_lr_;
  return nested_state(schedulers_, std::move(j));
}

void SequentialLR::load_state_dict(const std::string& state_dict) {
  Json j = parse_object("SequentialLR", state_dict);
  load_nested("SequentialLR", schedulers_, j);
  try {
    last_epoch_ = j.value("last_epoch", last_epoch_);
    last_lr_ = j.value("_last_lr", last_lr_);
  } catch (const nlohmann::json::exception& e) {
    TS_THROW(ValueError, "SequentialLR: load_state_dict: a field has the wrong type (", e.what(), ")");
  }
}

// ---- ChainedScheduler -----------------------------------------------------------------------------

namespace {
Optimizer& first_optimizer(const std::vector<LRScheduler*>& schedulers) {
  TS_CHECK(!schedulers.empty() && schedulers[0] != nullptr, ValueError,
           "ChainedScheduler: expected at least one scheduler");
  return schedulers[0]->optimizer();
}
}  // namespace

ChainedScheduler::ChainedScheduler(std::vector<LRScheduler*> schedulers)
    : LRScheduler(first_optimizer(schedulers), "ChainedScheduler", /*no_base=*/true), schedulers_(std::move(schedulers)) {
  check_schedulers("ChainedScheduler", optimizer_, schedulers_);
  last_lr_ = group_lrs();
}

void ChainedScheduler::step() {
  for (LRScheduler* s : schedulers_) s->step();
  last_lr_ = group_lrs();
}

std::string ChainedScheduler::state_dict() const {
  Json j = Json::object();
  j["_last_lr"] = last_lr_;
  return nested_state(schedulers_, std::move(j));
}

void ChainedScheduler::load_state_dict(const std::string& state_dict) {
  Json j = parse_object("ChainedScheduler", state_dict);
  load_nested("ChainedScheduler", schedulers_, j);
  try {
    last_lr_ = j.value("_last_lr", last_lr_);
  } catch (const nlohmann::json::exception& e) {
    TS_THROW(ValueError, "ChainedScheduler: load_state_dict: a field has the wrong type (", e.what(), ")");
  }
}

}  // namespace tessera::optim
