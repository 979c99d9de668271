// The optimizer base: groups, option access by name, zero_grad, step, and state_dict /
// load_state_dict in PyTorch's structure (include/tessera/optim/optimizer.h).
//
// load_state_dict is all-or-nothing: the options and state are parsed and checked into temporaries
// first, so a malformed state dict leaves the optimizer as it was.
#include <charconv>
#include <cmath>
#include <nlohmann/json.hpp>
#include <unordered_set>

#include "tessera/autograd.h"
#include "tessera/functions.h"
#include "tessera/optim/optimizer.h"

namespace tessera::optim {

using Json = nlohmann::ordered_json;

const std::vector<Tensor>& Optimizer::params(size_t group) const {
  TS_CHECK(group < params_.size(), IndexError, name_, ": parameter group ", group, " is out of range (the optimizer has ",
           params_.size(), " groups)");
  return params_[group];
}

std::vector<Tensor> Optimizer::parameters() const {
  std::vector<Tensor> all;
  for (const auto& g : params_) all.insert(all.end(), g.begin(), g.end());
  return all;
}

size_t Optimizer::num_params() const {
  size_t n = 0;
  for (const auto& g : params_) n += g.size();
  return n;
}

void Optimizer::add_group_params(std::vector<Tensor> params) {
  std::unordered_set<const TensorImpl*> seen;
  for (const auto& g : params_)
    for (const auto& p : g) seen.insert(p.impl());
  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor& p = params[i];
    TS_CHECK(p.defined(), ValueError, name_, ": parameter ", i, " of the new parameter group is an undefined tensor");
    TS_CHECK(p.is_floating_point(), ValueError, name_, ": can only optimize floating-point tensors, but parameter ", i,
             " of the new parameter group has dtype ", dtype_name(p.dtype()));
    TS_CHECK(p.is_leaf(), ValueError, name_, ": can't optimize a non-leaf Tensor (parameter ", i,
             " of the new parameter group has a grad_fn); optimize the leaf it was computed from, or detach it");
    TS_CHECK(seen.insert(p.impl()).second, ValueError, name_,
             ": some parameters appear in more than one parameter group (parameter ", i,
             " of the new group is already optimized)");
  }
  state_.emplace_back(params.size());
  extras_.emplace_back();
  params_.push_back(std::move(params));
}

void Optimizer::check_not_empty() const {
  TS_CHECK(num_params() > 0, ValueError, name_, ": optimizer got an empty parameter list");
}

void Optimizer::step() {
  NoGradGuard no_grad;
  for (size_t g = 0; g < params_.size(); ++g) step_group(g);
}

Tensor Optimizer::step(const std::function<Tensor()>& closure) {
  Tensor loss;
  {
    EnableGradGuard grad_mode;
    loss = closure();
  }
  step();
  return loss;
}

void Optimizer::zero_grad(bool set_to_none) {
  for (const auto& g : params_)
    for (const auto& p : g) p.zero_grad(set_to_none);
}

// ---- options by name ----------------------------------------------------------------------------

namespace {
const OptionRef* find_ref(const std::vector<OptionRef>& refs, const std::string& name) {
  for (const auto& r : refs)
    if (name == r.name) return &r;
  return nullptr;
}
}  // namespace

bool Optimizer::has_option(const std::string& name) const {
  return !params_.empty() && find_ref(option_refs(0), name) != nullptr;
}

bool Optimizer::has_option(size_t group, const std::string& name) const {
  params(group);
  return find_ref(option_refs(group), name) != nullptr || extras_[group].count(name) != 0;
}

double Optimizer::get_option(size_t group, const std::string& name, int index) const {
  params(group);
  std::vector<OptionRef> refs = option_refs(group);
  if (const OptionRef* r = find_ref(refs, name)) {
    if (r->flag) return *r->flag ? 1.0 : 0.0;
    TS_CHECK(index >= 0 && index < r->count, IndexError, name_, ": option '", name, "' has ", r->count,
             " values, index ", index, " is out of range");
    return r->values[index];
  }
  auto it = extras_[group].find(name);
  TS_CHECK(it != extras_[group].end() && index == 0, ValueError, name_, ": parameter group ", group,
           " has no option '", name, "'", index ? " with an index" : "");
  return it->second;
}

void Optimizer::set_option(size_t group, const std::string& name, double value, int index) {
  params(group);
  std::vector<OptionRef> refs = option_refs(group);
  if (const OptionRef* r = find_ref(refs, name)) {
    if (r->flag) {
      *r->flag = value != 0;
      return;
    }
    TS_CHECK(index >= 0 && index < r->count, IndexError, name_, ": option '", name, "' has ", r->count,
             " values, index ", index, " is out of range");
    r->values[index] = value;
    return;
  }
  TS_CHECK(index == 0, ValueError, name_, ": '", name, "' is not an option with several values");
  extras_[group][name] = value;
}

const ParamState* Optimizer::state(const Tensor& param) const {
  for (size_t g = 0; g < params_.size(); ++g)
    for (size_t i = 0; i < params_[g].size(); ++i)
      if (params_[g][i].is_same(param)) return &state_[g][i];
  return nullptr;
}

// ---- state_dict -----------------------------------------------------------------------------------

OptimizerStateDict Optimizer::state_dict() const {
  OptimizerStateDict sd;
  Json groups = Json::array();
  int64_t index = 0;
  for (size_t g = 0; g < params_.size(); ++g) {
    Json j = Json::object();
    for (const OptionRef& r : option_refs(g)) {
      if (r.flag) {
        j[r.name] = *r.flag;
      } else if (r.count == 1) {
        j[r.name] = r.values[0];
      } else {
        Json list = Json::array();
        for (int k = 0; k < r.count; ++k) list.push_back(r.values[k]);
        j[r.name] = list;
      }
    }
    for (const auto& [k, v] : extras_[g]) j[k] = v;
    Json indices = Json::array();
    for (size_t i = 0; i < params_[g].size(); ++i, ++index) {
      indices.push_back(index);
      const ParamState& st = state_[g][i];
      if (!st.initialized) continue;
      const std::string prefix = "state." + std::to_string(index) + ".";
      if (counts_steps_) sd.state[prefix + "step"] = scalar_tensor(static_cast<double>(st.step), kFloat64);
      for (const auto& [k, t] : st.buffers) sd.state[prefix + k] = t;
    }
    j["params"] = indices;
    groups.push_back(std::move(j));
  }
  sd.param_groups = groups.dump();
  return sd;
}

namespace {

// "state.<index>.<name>" -> (index, name); ValueError otherwise.
std::pair<size_t, std::string> parse_state_key(const std::string& opt, const std::string& key) {
  const std::string prefix = "state.";
  size_t dot = key.find('.', prefix.size());
  size_t index = 0;
  bool ok = key.compare(0, prefix.size(), prefix) == 0 && dot != std::string::npos && dot > prefix.size() &&
            dot + 1 < key.size();
  if (ok) {
    auto [ptr, ec] = std::from_chars(key.data() + prefix.size(), key.data() + dot, index);
    ok = ec == std::errc() && ptr == key.data() + dot;
  }
  TS_CHECK(ok, ValueError, opt, ": load_state_dict: expected state keys of the form 'state.<param index>.<name>', got '",
           key, "'");
  return {index, key.substr(dot + 1)};
}

}  // namespace

void Optimizer::load_state_dict(const OptimizerStateDict& sd) {
  const std::string where = name_ + ": load_state_dict";
  Json groups;
  try {
    groups = Json::parse(sd.param_groups);
  } catch (const nlohmann::json::exception& e) {
    TS_THROW(ValueError, where, ": param_groups is not valid JSON (", e.what(), ")");
  }
  TS_CHECK(groups.is_array() && groups.size() == params_.size(), ValueError, where,
           ": loaded state dict has a different number of parameter groups (",
           groups.is_array() ? std::to_string(groups.size()) : std::string("not a list"), " vs ", params_.size(), ")");
  for (size_t g = 0; g < params_.size(); ++g) {
    const Json& j = groups[g];
    TS_CHECK(j.is_object() && j.contains("params") && j["params"].is_array(), ValueError, where, ": parameter group ", g,
             " must be an object with a 'params' list");
    TS_CHECK(j["params"].size() == params_[g].size(), ValueError, where, ": loaded state dict contains a parameter group (",
             g, ") that doesn't match the size of optimizer's group (", j["params"].size(), " vs ", params_[g].size(),
             " parameters)");
  }

  // Options: remember the current values, apply, validate; restore on any error.
  struct Saved {
    std::vector<std::vector<double>> values;
    std::vector<bool> flags;
  };
  std::vector<Saved> saved(params_.size());
  auto saved_extras = extras_;
  for (size_t g = 0; g < params_.size(); ++g)
    for (const OptionRef& r : option_refs(g)) {
      saved[g].flags.push_back(r.flag ? *r.flag : false);
      saved[g].values.emplace_back(r.values, r.values + (r.flag ? 0 : r.count));
    }
  auto restore = [&] {
    extras_ = saved_extras;
    for (size_t g = 0; g < params_.size(); ++g) {
      std::vector<OptionRef> refs = option_refs(g);
      for (size_t k = 0; k < refs.size(); ++k) {
        if (refs[k].flag) *refs[k].flag = saved[g].flags[k];
        else std::copy(saved[g].values[k].begin(), saved[g].values[k].end(), refs[k].values);
      }
    }
  };
  try {
    for (size_t g = 0; g < params_.size(); ++g) {
      std::vector<OptionRef> refs = option_refs(g);
      for (const auto& [key, v] : groups[g].items()) {
        if (key == "params" || v.is_null()) continue;
        if (const OptionRef* r = find_ref(refs, key)) {
          if (r->flag) {
            TS_CHECK(v.is_boolean(), ValueError, where, ": option '", key, "' of group ", g, " must be a bool, got ", v.dump());
            *r->flag = v.get<bool>();
          } else if (r->count == 1 && v.is_number()) {
            r->values[0] = v.get<double>();
          } else {
            TS_CHECK(v.is_array() && v.size() == static_cast<size_t>(r->count), ValueError, where, ": option '", key,
                     "' of group ", g, " must be ", r->count == 1 ? "a number" : "a list of numbers", ", got ", v.dump());
            for (int k = 0; k < r->count; ++k) {
              TS_CHECK(v[k].is_number(), ValueError, where, ": option '", key, "' of group ", g,
                       " must hold numbers, got ", v.dump());
              r->values[k] = v[k].get<double>();
            }
          }
        } else if (v.is_number()) {
          extras_[g][key] = v.get<double>();  // scheduler values (initial_lr, ...); other keys are PyTorch's
        }
      }
      validate_group(g);
    }
  } catch (...) {
    restore();
    throw;
  }

  // State, into temporaries first.
  std::vector<std::pair<size_t, size_t>> where_of;  // flat index -> (group, position)
  for (size_t g = 0; g < params_.size(); ++g)
    for (size_t i = 0; i < params_[g].size(); ++i) where_of.emplace_back(g, i);
  std::vector<std::vector<ParamState>> state(params_.size());
  for (size_t g = 0; g < params_.size(); ++g) state[g].resize(params_[g].size());
  std::unordered_set<size_t> with_step;
  try {
    for (const auto& [key, t] : sd.state) {
      auto [index, name] = parse_state_key(name_, key);
      TS_CHECK(index < where_of.size(), ValueError, where, ": state for parameter index ", index,
               " but the optimizer has ", where_of.size(), " parameters");
      auto [g, i] = where_of[index];
      const Tensor& p = params_[g][i];
      ParamState& st = state[g][i];
      st.initialized = true;
      TS_CHECK(t.defined(), ValueError, where, ": state '", key, "' is an undefined tensor");
      if (name == "step") {
        TS_CHECK(t.numel() == 1, ValueError, where, ": state '", key, "' must hold one number, got sizes ", t.sizes());
        const double s = t.item<double>();
        TS_CHECK(s >= 0 && s == std::floor(s) && s < 9.2e18, ValueError, where, ": state '", key,
                 "' must be a non-negative integer, got ", s);
        st.step = static_cast<int64_t>(s);
        with_step.insert(index);
        continue;
      }
      TS_CHECK(t.sizes() == p.sizes(), ShapeError, where, ": state '", key, "' has sizes ", t.sizes(),
               " but its parameter has sizes ", p.sizes());
      // A copy: the source may be a read-only file mapping, or tensors the caller keeps using.
      st.buffers[name] = t.to(p.device(), p.dtype(), false, /*copy=*/true).contiguous();
    }
    for (size_t index = 0; index < where_of.size(); ++index) {
      auto [g, i] = where_of[index];
      TS_CHECK(!counts_steps_ || !state[g][i].initialized || with_step.count(index), ValueError, where,
               ": the state of parameter ", index, " has no 'step'");
    }
  } catch (...) {
    restore();
    throw;
  }
  std::swap(state_, state);
  try {
    for (size_t g = 0; g < params_.size(); ++g) after_load(g);
  } catch (...) {
    restore();
    std::swap(state_, state);
    throw;
  }
}

}  // namespace tessera::optim
